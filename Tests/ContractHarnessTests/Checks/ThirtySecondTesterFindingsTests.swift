import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// Findings of the thirty-second outside tester (`/work/attack33/FINDINGS.md`): `no_stale_write`
/// compared the cache's end-state listing by keys only, so a stale answer written over the fresh
/// one under the same key passed when no later lookup read it. Each listed assignment's value is
/// now compared with the answers the entry may hold (`CacheModel.Entry.candidates`).
final class ThirtySecondTesterFindingsTests: XCTestCase {
    private static let python = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
    private static let files = ["field-stale-answer-written-over-fresh-entry", "field-late-answer-after-timeout-may-overwrite"]
        .map { Repository.root.appendingPathComponent("scenarios/\($0).json").path }
        + [Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/thirty-second-tester").path]

    /// Correct SDKs pass both shipped files and the fixture; the Python example's
    /// `stale-write-after-clear` fails the stale-write file by its end state (no lookup reads the
    /// entry there) and the fixture, and passes the timeout file, where no clear intervenes.
    func testAStaleValueUnderAFreshKeyIsCaughtInTheEndState() throws {
        let dir = try scratchDirectory("thirty-second")
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", Self.python]] {
            let (status, out) = try HarnessProcess.run(["run"] + Self.files + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            XCTAssertTrue(out.contains("3 passed, 0 failed"), "\(sdk): \(out)")
        }
        let (status, out) = try HarnessProcess.run(["run"] + Self.files + ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=stale-write-after-clear \(Self.python)",
                                                                          "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("1 passed, 2 failed"), out)
        XCTAssertTrue(out.contains("caches assignment 'sdk_contract_ab' for user 'user-1' as"), out)
    }

    /// An answer the SDK may or may not have written (its only caller gave up) leaves the entry
    /// before it a candidate: either value passes, and a value neither answer gave fails.
    func testAnEntryMayShowAnyAnswerThatCanBeLastWritten() async throws {
        let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: Self.files[1])), file: "timeout.json")
        let result = await ScenarioRunner().run(scenario)
        XCTAssertEqual(result.status, .passed, AppStepsTests.failures(result))
        // As if the SDK had not cancelled the hung request: its late answer may then be written.
        let history = result.events.map { e in
            var e = e
            e.request?.cancelled = false
            return e
        }
        let port = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "x", clients: ["main"])
        let context = CheckContext(scenario: scenario, history: history, clients: [:], port: port, driver: SwiftSDKDriver(), app: nil)
        // The second request came after its only caller gave up at the deadline: no second flight,
        // whether or not the SDK's cancellation reached the mock first (it raced: 2 runs in 80).
        XCTAssertEqual(Checks.singleFlight(context).map(\.0), [])
        let model = Checks.replayCaches(context) { _, _ in }["main"] ?? Checks.CacheModel()
        let entries = model.entries(model.assignments, user: "user-1", at: 20)
        XCTAssertEqual(entries.map(\.key), ["sdk_contract_ab"])
        XCTAssertEqual(Set(entries[0].candidates.compactMap { $0.value["variant_name"]?.stringValue }), ["control", "treatment"])
        func listed(_ variant: String, user: String = "user-1") -> JSONValue {
            .object(["experiment_key": .string("sdk_contract_ab"), "user_id": .string(user), "variant_name": .string(variant)])
        }
        XCTAssertTrue(Checks.CacheModel.unexplainedValues([listed("control")], entries).isEmpty)
        XCTAssertTrue(Checks.CacheModel.unexplainedValues([listed("treatment")], entries).isEmpty)
        XCTAssertEqual(Checks.CacheModel.unexplainedValues([listed("blue")], entries).map(\.key), ["sdk_contract_ab"])
        // Another user's entry with the same variant is no explanation (`otherEntryField`).
        XCTAssertEqual(Checks.CacheModel.unexplainedValues([listed("control", user: "user-2")], entries).count, 1)
        // Without the late answer (cancelled, as recorded), only the fresh one may be there.
        let strict = Checks.replayCaches(CheckContext(scenario: scenario, history: result.events, clients: [:], port: port,
                                                      driver: SwiftSDKDriver(), app: nil)) { _, _ in }["main"] ?? Checks.CacheModel()
        let only = strict.entries(strict.assignments, user: "user-1", at: 20)
        XCTAssertEqual(Checks.CacheModel.unexplainedValues([listed("treatment")], only).count, 1)
    }
}
