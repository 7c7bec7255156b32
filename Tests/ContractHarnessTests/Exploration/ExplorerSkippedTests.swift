import XCTest
import Foundation
import ExperimentlyMock
@testable import ContractHarness

/// A schedule the driver cannot run (it lacks a capability the scenario needs, so the run is
/// `skipped`) is never counted as a pass by the explorer library API, nor by `run --explore`.
final class ExplorerSkippedTests: XCTestCase {
    /// The shipping Swift driver without `getAssignment`: every run of a scenario that uses it is skipped.
    struct WithoutAssignments: SDKDriver {
        let inner = SwiftSDKDriver()
        var sdkName: String { "no-assignments" }
        var sdkVersion: String { inner.sdkVersion }
        var capabilities: Set<String> { inner.capabilities.subtracting(["getAssignment"]) }
        func makeClient(name: String, settings: ClientSettings, store: String?, context: DriverContext) throws -> any DriverClient {
            try inner.makeClient(name: name, settings: settings, store: store, context: context)
        }
    }

    static let file = Repository.root.appendingPathComponent("scenarios/race-explore-clear-vs-late-assignment.json").path

    func testSkippedSchedulesAreNotPasses() async throws {
        let root = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: Self.file)), file: Self.file)
        let settings = try XCTUnwrap(try Explorer.settings(of: root, file: Self.file))
        let runner = ScenarioRunner(driver: WithoutAssignments(), keepsHistory: false)
        let report = await Explorer.explore(root, file: Self.file, settings: settings, seed: 1, runner: runner)
        XCTAssertGreaterThan(report.skipped, 0)
        XCTAssertEqual(report.passed, 0, "skipped schedules counted as passes: \(report.json)")
        XCTAssertEqual(report.skipped + report.infeasible, report.schedules.count)
        XCTAssertNil(report.firstFailure)

        // Against a reference too (the shipping SDK): still skipped, not passed.
        let referenced = await Explorer.explore(root, file: Self.file, settings: settings, seed: 1, runner: runner,
                                                reference: ScenarioRunner(keepsHistory: false))
        XCTAssertEqual(referenced.passed, 0)

        // `run --explore` reports the scenario skipped, not passed.
        let s = try ScenarioParser.load(path: Self.file)
        let result = await HarnessCommand.exploreAsResult(s, root: root, settings: settings, options: try HarnessCommand.parseRun([]),
                                                          runner: runner)
        XCTAssertEqual(result.status, .skipped, "\(result.checks)")

        // The interleaving explorer: the probe is skipped, so nothing is explored and nothing passes.
        let interleaved = await InterleavingExplorer.explore(root, file: Self.file, settings: .of(s), seed: 0, runner: runner)
        XCTAssertNotNil(interleaved.skipped)
        XCTAssertFalse(interleaved.complete, "a skipped probe is not 'every interleaving'")
        XCTAssertNil(interleaved.firstFailure)
    }
}
