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
            XCTAssertGreaterThan(report.passed, 0)
            XCTAssertEqual(report.skipped, 0)
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

    // MARK: No false alarms (issue 11 section 4)

    static let fieldFile = repository.appendingPathComponent("scenarios/race-explore-field-clear-while-assignment-held.json").path

    /// The field race with a step limit far above anything a run needs: an infeasible order
    /// decided by waiting out the limit would take this long per order.
    func fieldRace(stepLimit: Int) throws -> (JSONValue, Explorer.Settings) {
        var (root, settings) = try load(Self.fieldFile)
        if case .object(var o) = root { o["step_timeout_ms"] = .number(Double(stepLimit)); root = .object(o) }
        settings.exhaustive = true
        return (root, settings)
    }

    func testANaturallyWrittenFieldRaceHasNoFailingScheduleOnTheShippingSDK() async throws {
        let limit = 120_000
        let (root, settings) = try fieldRace(stepLimit: limit)
        XCTAssertEqual(settings.steps, [3, 4, 5, 6], "clear, release, await and assert may move")
        let progress = Explorer.Progress()
        let report = await Explorer.explore(root, file: Self.fieldFile, settings: settings, seed: 3, runner: ScenarioRunner(keepsHistory: false),
                                            progress: progress)
        XCTAssertEqual(report.schedules.count, 24)
        // The progress counters (printed once a second by the CLI) end at the report's figures.
        let seen = progress.snapshot
        XCTAssertEqual(seen.total, 24)
        XCTAssertEqual(seen.done, 24)
        XCTAssertEqual(seen.infeasible, report.infeasible)
        XCTAssertEqual(seen.failed, 0)
        XCTAssertEqual(report.failed, 0, "\(String(describing: report.firstFailure?.result.firstFailure))")
        XCTAssertNil(report.firstFailure)
        // Exactly the orders that await the operation before the release it parks on.
        let awaitsFirst = report.schedules.filter { $0.firstIndex(of: 5)! < $0.firstIndex(of: 4)! }.count
        XCTAssertEqual(awaitsFirst, 12)
        XCTAssertEqual(report.infeasible, awaitsFirst)
        XCTAssertEqual(report.failedOnReference, 0)
        // All 12 infeasible orders together take less than one step limit: none waited for it.
        XCTAssertLessThan(report.durationMilliseconds, Double(limit))

        // One such order on its own: infeasible, decided at once, and the message says why.
        let order = Explorer.fixed(root, settings: settings, order: [5, 3, 4, 6], suffix: "", note: "")
        let result = await ScenarioRunner(keepsHistory: false).run(try ScenarioParser.parse(order.serialized(), file: Self.fieldFile))
        XCTAssertTrue(result.infeasible)
        XCTAssertLessThan(result.durationMilliseconds, Double(limit))
        let message = try XCTUnwrap(result.firstFailure?.message)
        XCTAssertTrue(message.contains("waits for what only a later step provides (step 5 release slow-assign)"), message)
    }

    func testABrokenVariantsShrunkReproFailsOnTheVariantAndPassesOnTheShippingSDK() async throws {
        let (root, settings) = try fieldRace(stepLimit: 120_000)
        let broken = ScenarioRunner(driver: MutantRun.driver(.staleWriteAfterClear), keepsHistory: false)
        let faithful = ScenarioRunner(driver: MutantRun.driver(nil), keepsHistory: false)
        let report = await Explorer.explore(root, file: Self.fieldFile, settings: settings, seed: 3, runner: broken, reference: faithful)
        let failure = try XCTUnwrap(report.firstFailure, "clearing while the request is held, then releasing, must fail the variant")
        XCTAssertEqual(report.infeasible, 12, "the await-before-release orders are infeasible on the variant and the reference alike")
        XCTAssertEqual(failure.reference, "ios-mutant-none")
        let steps = try XCTUnwrap(failure.scenarioJSON["steps"]?.arrayValue)
        XCTAssertTrue(steps.contains { $0["do"]?.stringValue == "clearCache" }, "the essential clear survives shrinking: \(steps)")
        let explored = try XCTUnwrap(failure.scenarioJSON["explored"])
        XCTAssertEqual(explored["fails_on"]?.stringValue, "ios-mutant-stale-write-after-clear")
        XCTAssertEqual(explored["passes_on"]?.stringValue, "ios-mutant-none")
        XCTAssertEqual(explored["order"]?.arrayValue?.compactMap(\.numberValue).map { Int($0) }, failure.order)
        XCTAssertEqual(explored["seed"]?.numberValue, 3)

        // The written file parses (the record is part of the format) and shows the defect only.
        let replay = try ScenarioParser.parse(failure.scenarioJSON.serialized(), file: "repro.json")
        let onVariant = await ScenarioRunner(driver: MutantRun.driver(.staleWriteAfterClear)).run(replay)
        XCTAssertEqual(onVariant.status, .failed)
        XCTAssertTrue(onVariant.checks.contains { !$0.passed && Explorer.sameCheck($0.name, failure.check) }, "\(onVariant.checks)")
        // The file names the check as its replay reports it (a step expectation's number moves
        // when shrinking drops steps before it; the explored order's name is kept beside it).
        let named = try XCTUnwrap(explored["check"]?.stringValue)
        XCTAssertEqual(onVariant.firstFailure?.name, named)
        XCTAssertTrue(failure.scenarioJSON["description"]?.stringValue?.contains("fails '\(named)'") == true)
        if named != failure.check {
            XCTAssertEqual(explored["check_in_explored_order"]?.stringValue, failure.check)
        }
        XCTAssertLessThan(failure.stepsAfter, failure.stepsBefore, "shrinking dropped steps")
        let onShipping = await ScenarioRunner().run(replay)
        XCTAssertEqual(onShipping.status, .passed, "\(onShipping.checks.filter { !$0.passed })")
    }

    func testShrinkingWithoutTheReferenceDropsTheEssentialClear() async throws {
        // What differential shrinking prevents: judged on the variant alone, the cache assertion
        // keeps failing without the clear (the entry is then legitimately cached), so the clear goes
        // and the repro fails on every SDK.
        let (root, settings) = try fieldRace(stepLimit: 120_000)
        let fixed = Explorer.fixed(root, settings: settings, order: [3, 4, 5, 6], suffix: "-schedule", note: "")
        let broken = ScenarioRunner(driver: MutantRun.driver(.staleWriteAfterClear), keepsHistory: false)
        let alone = await Explorer.shrink(fixed, file: Self.fieldFile, check: "step 7 assert", runner: broken).json
        XCTAssertFalse(alone["steps"]!.arrayValue!.contains { $0["do"]?.stringValue == "clearCache" })
        let shipping = await ScenarioRunner().run(try ScenarioParser.parse(alone.serialized(), file: "alone.json"))
        XCTAssertEqual(shipping.status, .failed, "the one-sided repro fails the shipping SDK too")
        let (differential, named) = await Explorer.shrink(fixed, file: Self.fieldFile, check: "step 7 assert", runner: broken,
                                                          reference: ScenarioRunner(keepsHistory: false))
        XCTAssertTrue(differential["steps"]!.arrayValue!.contains { $0["do"]?.stringValue == "clearCache" })
        // Named as the shrunk file's replay names it.
        let replayed = await ScenarioRunner(driver: MutantRun.driver(.staleWriteAfterClear)).run(try ScenarioParser.parse(differential.serialized(), file: "d.json"))
        XCTAssertEqual(replayed.firstFailure?.name, named)
    }

    func testAPlainRunDecidesAWaitNothingCanSatisfyWithoutTheStepLimit() async throws {
        func run(_ steps: String) async throws -> ScenarioResult {
            let text = #"{"format": "experimently-scenario/1", "name": "n", "description": "d", "step_timeout_ms": 600000, "checks": ["single_flight"], "steps": ["# + steps + "]}"
            return await ScenarioRunner(keepsHistory: false).run(try ScenarioParser.parse(Data(text.utf8), file: "x.json"))
        }
        let hold = #"{"fault": {"match": {"path": "/api/v1/tracking/assign"}, "action": {"hold": {}}}, "id": "h"}, {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "u", "as": "a", "async": true}"#
        // The await comes before the release it needs: infeasible, named.
        let early = try await run(hold + #", {"await": "a"}, {"release": "h"}"#)
        XCTAssertEqual(early.status, .failed)
        XCTAssertTrue(early.infeasible)
        XCTAssertTrue(early.firstFailure?.message?.contains("only a later step provides (step 3 release h)") == true, "\(early.checks)")
        // Nothing ever releases it: a hang of the scenario, not an order, and said at once.
        let never = try await run(hold + #", {"await": "a"}"#)
        XCTAssertFalse(never.infeasible)
        XCTAssertTrue(never.firstFailure?.message?.contains("can never finish") == true, "\(never.checks)")
        let unreleased = try await run(hold)
        XCTAssertEqual(unreleased.firstFailure?.name, "operations finish")
        XCTAssertTrue(unreleased.firstFailure?.message?.contains("no step is left to release them") == true, "\(unreleased.checks)")
        // A wait_for that only a later step can meet.
        let waits = try await run(#"{"fault": {"match": {"path": "/api/v1/tracking/assign"}, "action": {"hold": {}}}, "id": "h"}, {"wait_for": {"held": "h", "count": 1}}, {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "u", "as": "a", "async": true}, {"release": "h"}, {"await": "a"}"#)
        XCTAssertTrue(waits.infeasible)
        XCTAssertTrue(waits.firstFailure?.message?.contains("only a later step provides (step 2 do getAssignment as a)") == true, "\(waits.checks)")
        // And in the right order the same steps pass.
        let right = try await run(hold + #", {"release": "h"}, {"await": "a"}"#)
        XCTAssertEqual(right.status, .passed, "\(right.checks)")
    }

    func testTheExploredRecordMustBeAnObject() throws {
        let text = #"{"format": "experimently-scenario/1", "name": "n", "description": "d", "steps": [{"advance": 1}], "explored": "yes"}"#
        XCTAssertThrowsError(try ScenarioParser.parse(Data(text.utf8), file: "x.json")) { error in
            XCTAssertEqual((error as? ScenarioError)?.path, "$.explored")
        }
    }
}
