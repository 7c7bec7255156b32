import XCTest
import Foundation
import ExperimentlyMock
import ExperimentlyMutants
@testable import ContractHarness

/// The explorer finds the ordering that breaks an SDK, writes it as a replayable scenario, finds
/// nothing against the real SDK, and draws the same schedules from the same seed.
final class ExplorerTests: XCTestCase {
    static let repository = Repository.root
    static let raceFile = repository.appendingPathComponent("scenarios/race-explore-clear-vs-late-assignment.json").path

    func load(_ path: String) throws -> (JSONValue, Explorer.Settings) {
        let root = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: path)), file: path)
        return (root, try XCTUnwrap(try Explorer.settings(of: root, file: path)))
    }

    func testFindsTheStaleWriteOrderOfABrokenSDKAndItsFileReplaysIt() async throws {
        let (root, settings) = try load(Self.raceFile)
        let broken = ScenarioRunner(driver: MutantRun.driver(.staleWriteAfterClear), keepsHistory: false)
        let report = await Explorer.explore(root, file: Self.raceFile, settings: settings, seed: 1, runner: broken)
        XCTAssertEqual(report.schedules.count, 6, "three movable steps: every order")
        XCTAssertTrue(report.complete)
        let failure = try XCTUnwrap(report.firstFailure, "the clear-before-release order must fail the broken SDK")
        XCTAssertGreaterThan(report.infeasible, 0, "orders releasing before the request is held cannot run")
        // The failing order clears the cache while the request is held, then releases it.
        let clear = 2, release = 3
        XCTAssertLessThan(failure.order.firstIndex(of: clear)!, failure.order.firstIndex(of: release)!)
        XCTAssertLessThanOrEqual(failure.stepsAfter, failure.stepsBefore)

        // The written file is a plain scenario: it replays to the same failure, and passes the real SDK.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("schedule-\(UUID().uuidString).json").path
        try failure.scenarioJSON.serialized().write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let replay = try ScenarioParser.load(path: file)
        XCTAssertNil(replay.explore)
        let again = await ScenarioRunner(driver: MutantRun.driver(.staleWriteAfterClear)).run(replay)
        XCTAssertEqual(again.status, .failed)
        XCTAssertTrue(again.checks.contains { !$0.passed && Explorer.sameCheck($0.name, failure.check) }, "\(again.checks)")
        let real = await ScenarioRunner().run(replay)
        XCTAssertEqual(real.status, .passed, "\(real.checks.filter { !$0.passed })")
    }

    func testFindsNoFailingOrderAgainstTheRealSDK() async throws {
        for name in ["race-explore-clear-vs-late-assignment", "race-explore-three-holds-and-logout"] {
            let path = Self.repository.appendingPathComponent("scenarios/\(name).json").path
            let (root, settings) = try load(path)
            let report = await Explorer.explore(root, file: path, settings: settings, seed: 7, runner: ScenarioRunner(keepsHistory: false))
            XCTAssertEqual(report.failed, 0, "\(name): \(String(describing: report.firstFailure?.result.firstFailure))")
            XCTAssertNil(report.firstFailure)
            XCTAssertGreaterThan(report.schedules.count - report.infeasible, 0)
        }
    }

    func testTheSameSeedGivesTheSameSchedules() async throws {
        let steps = [3, 4, 5, 6, 7, 8, 9]   // 5040 orders: more than the sample, so it is seeded
        let a = Explorer.schedules(of: steps, max: 40, exhaustive: false, seed: 42)
        let b = Explorer.schedules(of: steps, max: 40, exhaustive: false, seed: 42)
        let c = Explorer.schedules(of: steps, max: 40, exhaustive: false, seed: 43)
        XCTAssertEqual(a.orders, b.orders)
        XCTAssertNotEqual(a.orders, c.orders)
        XCTAssertEqual(Set(a.orders).count, 40, "schedules are distinct")
        XCTAssertFalse(a.complete)
        // Few orders: every one, in lexicographic order, whatever the seed.
        let all = Explorer.schedules(of: [1, 2, 3], max: 100, exhaustive: false, seed: 9)
        XCTAssertEqual(all.orders, [[1, 2, 3], [1, 3, 2], [2, 1, 3], [2, 3, 1], [3, 1, 2], [3, 2, 1]])
        XCTAssertTrue(all.complete)

        // End to end: two explorations with one seed list the same schedules.
        let path = Self.repository.appendingPathComponent("scenarios/race-explore-three-holds-and-logout.json").path
        var (root, settings) = try load(path)
        settings = Explorer.Settings(steps: [3, 4, 5, 6, 7, 8, 9], maxSchedules: 12, exhaustive: false)
        if case .object(var o) = root { o["explore"] = nil; root = .object(o) }
        let runner = ScenarioRunner(keepsHistory: false)
        let first = await Explorer.explore(root, file: path, settings: settings, seed: 5, runner: runner)
        let second = await Explorer.explore(root, file: path, settings: settings, seed: 5, runner: runner)
        XCTAssertEqual(first.schedules, second.schedules)
        XCTAssertEqual(first.infeasible, second.infeasible)
        XCTAssertEqual(first.failed, second.failed)
    }

    func testMalformedExploreSectionNamesThePath() throws {
        let text = #"{"format": "experimently-scenario/1", "name": "n", "description": "d", "steps": [{"advance": 1}, {"advance": 2}], "explore": {"steps": [0, 5]}}"#
        let root = try JSONValue.parse(Data(text.utf8), file: "x.json")
        XCTAssertThrowsError(try Explorer.settings(of: root, file: "x.json")) { error in
            XCTAssertEqual((error as? ScenarioError)?.path, "$.explore.steps[1]")
        }
    }
}
