import XCTest
import Foundation
import ExperimentlyMock
@testable import ContractHarness

/// Findings of the seventy-ninth outside tester (`/work/attack79/REPORT.md`: bugs of other flag
/// SDKs that passed the whole suite). Twelve became shipped `field-` scenarios (fractional
/// timeouts, a joiner extending a deadline, short `Retry-After` retries, 410, `clearOfflineCache`
/// of one store, configuration keys, unknown answer members, exactly `cache_size` entries, nested
/// nulls and large payloads, a `trackBatch` event with both keys, an empty API key); F1 and F2
/// changed the format and a rule:
///
/// - F1: every client was created before the first step, so an SDK's launch over a store
///   earlier clients wrote (preloading it into the memory cache, wiping it) was never judged: a
///   client may now launch at its first use (`"launch": "at_first_use"`).
/// - F2: a fallback served with `variant_id: null` passed `offline_fallback`, which read a `null`
///   member as the member's absence.
final class SeventyNinthTesterFindingsTests: XCTestCase {
    /// F2 both ways, with named checks only: the Python example passes, its
    /// `persist-drops-variant-id` fails `offline_fallback`.
    func testAFallbackWithAFieldNulledFails() throws {
        let dir = try scratchDirectory("seventy-ninth")
        let file = TesterFixtures.folder("seventy-ninth-tester").appendingPathComponent("f2-fallback-keeps-variant-id-named-checks-only.json").path
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", TesterFixtures.python]] {
            let (status, out) = try HarnessProcess.run(["run", file] + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
        }
        try TesterFixtures.assertFails(file, on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=persist-drops-variant-id \(TesterFixtures.python)"],
                                       saying: ["offline_fallback", "gave variant_id null"], in: dir)
    }

    /// F2 in the rule itself: `null` where the entry holds a value differs; an absent member is
    /// still a field the SDK's value may not have.
    func testANullMemberIsNotTheEntrysValue() {
        func text(_ t: String) -> JSONValue { .string(t) }
        let entry: JSONValue = .object(["experiment_key": text("e"), "user_id": text("u"), "variant_id": text("v1"), "is_control": .bool(true),
                                        "configuration": .object([:])])
        XCTAssertEqual(Checks.otherEntryField(kind: "experiment", entry: entry, served: .object(["variant_id": .null])), "variant_id")
        XCTAssertNil(Checks.otherEntryField(kind: "experiment", entry: entry, served: .object(["variant_name": text("control")])))
        let answer: JSONValue = .object(["experiment_key": text("e"), "user_id": text("u"), "variant_id": text("v1"), "variant_name": text("control")])
        XCTAssertEqual(Checks.answerMismatch(kind: "experiment", answer: answer,
                                             served: .object(["variant_name": text("control"), "variant_id": .null]))?.field, "variant_id")
    }

    /// F1 both ways, with named checks only: a relaunch over a written store passes the correct
    /// SDKs (in and out of process); the Python example's `warm-start` fails `no_stale_write`, its
    /// `init-wipes-store` fails `offline_fallback`.
    func testALaunchAtFirstUseJudgesWhatAnSDKDoesAtItsLaunch() throws {
        let dir = try scratchDirectory("seventy-ninth-launch")
        let file = TesterFixtures.folder("seventy-ninth-tester").appendingPathComponent("f1-relaunch-named-checks-only.json").path
        let driver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", "'\(driver)'"], ["--sdk-command", TesterFixtures.python]] {
            let (status, out) = try HarnessProcess.run(["run", file] + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
        }
        try TesterFixtures.assertFails(file, on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=warm-start \(TesterFixtures.python)"],
                                       saying: ["no_stale_write: client 'launch2' caches assignments"], in: dir)
        try TesterFixtures.assertFails(file, on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=init-wipes-store \(TesterFixtures.python)"],
                                       saying: ["offline_fallback", "a value is persisted for user 'user-1' and flag 'sdk_contract_flag'"], in: dir)
    }

    /// F1: the launch is recorded where it happens, and a wrong `launch` or a lazy app client is
    /// refused at its path.
    func testALaunchIsRecordedAndValidated() async throws {
        let file = TesterFixtures.folder("seventy-ninth-tester").appendingPathComponent("f1-relaunch-named-checks-only.json").path
        let r = await ScenarioRunner(driver: SwiftSDKDriver(), keepsHistory: true).run(try ScenarioParser.load(path: file))
        XCTAssertEqual(r.status, .passed, "\(r.checks.filter { !$0.passed })")
        let lines = r.history.map(\.line)
        let launch = r.history.firstIndex { $0.kind == .marker && $0.name == "launch" && $0.client == "launch2" }
        let close = lines.firstIndex { $0.contains("invoke") && $0.contains("close on launch1") }
        XCTAssertNotNil(launch, "\(lines)")
        XCTAssertEqual(r.history.filter { $0.kind == .marker && $0.name == "launch" }.count, 1, "launched once")
        if let launch, let close { XCTAssertLessThan(close, launch, "\(lines)") }
        let head = #""format": "experimently-scenario/1", "name": "n", "description": "d", "steps": [{"do": "hashUser", "user": "u", "key": "k", "expect": {"value": 0.5}}]"#
        XCTAssertThrowsError(try ScenarioParser.parse(Data("{\(head), \"clients\": {\"a\": {\"launch\": \"later\"}}}".utf8), file: "x.json")) { error in
            XCTAssertEqual((error as? ScenarioError)?.path, "$.clients.a.launch")
        }
        // The app section's client may launch at its first use (an eighty-second outside tester,
        // F8: its app is made with it, at the first app step).
        XCTAssertNoThrow(try ScenarioParser.parse(Data("{\(head), \"clients\": {\"a\": {\"launch\": \"at_first_use\"}}, \"app\": {\"flag\": \"f\", \"experiment\": \"e\"}}".utf8), file: "x.json"))
    }
}
