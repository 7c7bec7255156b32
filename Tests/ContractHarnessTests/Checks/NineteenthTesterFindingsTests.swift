import XCTest
import Foundation
@testable import ExperimentlyMock
@testable import ContractHarness
import ExperimentlyMutants

/// Findings of the nineteenth outside tester (`/work/attack20/FINDINGS.md`: identities in every
/// field, concurrent tracking, explore's reference), each proven both ways: a broken SDK the
/// judge passed before now fails, and the correct SDKs still pass.
final class NineteenthTesterFindingsTests: XCTestCase {
    /// Explore counts a schedule failed when the SDK fails a check the reference does not: the
    /// reference failing the file's order-dependent `assert` in the same order excused a stale
    /// write (the broken SDK explored with "0 failed", the correct one failed).
    func testAFailureTheReferenceDoesNotShareIsTheSDKs() async throws {
        let path = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/nineteenth-tester/explore-reference-fails-another-check.json").path
        let root = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: path)), file: path)
        let settings = try XCTUnwrap(try Explorer.settings(of: root, file: path))
        let broken = ScenarioRunner(driver: MutantRun.driver(.staleWriteAfterClear), keepsHistory: false)
        let reference = ScenarioRunner(driver: MutantRun.driver(nil), keepsHistory: false)
        let report = await Explorer.explore(root, file: path, settings: settings, seed: 0, runner: broken, reference: reference)
        XCTAssertEqual(report.failed, 1, "the stale write in the clear-before-release order is the SDK's")
        XCTAssertEqual(report.failedOnReference, 1, "the order failing only the file's own assert is excused")
        let failure = try XCTUnwrap(report.firstFailure)
        XCTAssertEqual(failure.check, "no_stale_write")
        // The faithful variant explored against itself fails only where the file's assert does.
        let faithful = await Explorer.explore(root, file: path, settings: settings, seed: 0, runner: reference, reference: reference)
        XCTAssertEqual(faithful.failed, 0)
        XCTAssertEqual(faithful.failedOnReference, 2)
        // Unit: the first failure the reference does not share, by exact name.
        func result(_ failed: [String], _ status: ScenarioResult.Status = .failed) -> ScenarioResult {
            var r = ScenarioResult(name: "x", file: "x", tags: [], source: nil, status: status, durationMilliseconds: 0,
                                   checks: failed.map { CheckResult(name: $0, passed: false) }, reason: nil, smoke: nil, history: [], historyDigest: "")
            r.checks.append(CheckResult(name: "ok", passed: true))
            return r
        }
        XCTAssertEqual(Explorer.ownFailure(result(["step 5 assert", "no_stale_write"]), reference: result(["step 5 assert"]))?.name, "no_stale_write")
        XCTAssertNil(Explorer.ownFailure(result(["step 5 assert"]), reference: result(["step 5 assert"])))
        XCTAssertEqual(Explorer.ownFailure(result(["step 5 assert"]), reference: result([], .passed))?.name, "step 5 assert")
        XCTAssertEqual(Explorer.ownFailure(result(["op-\u{E9}"]), reference: result(["op-e\u{301}"]))?.name, "op-\u{E9}")
    }

    /// Each new shipped scenario fails its defect switch of the Python example and passes the
    /// example as it is.
    func testEachNewScenarioFailsItsPythonDefectAndPassesTheExample() throws {
        let dir = try scratchDirectory("nineteenth-defects")
        let driver = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
        let cases: [(file: String, defect: String, says: String)] = [
            ("field-concurrent-keyed-events-each-send-their-own-fields", "reuses-keyed-event-body", "has no /track request of its own"),
            ("field-concurrent-unkeyed-events-each-fan-out-their-own-fields", "reuses-unkeyed-event-fields", "has no /batch entry of its own"),
            ("field-concurrent-unkeyed-events-own-fields-on-every-key", "reuses-flag-entry-fields", "has no /batch entry of its own for its user's cached flag"),
            ("field-trackbatch-events-each-fan-out-their-own-fields", "reuses-unkeyed-event-fields", "trackBatch 'op3' (unkeyed event 'purchase' of user 'user-1') has no /batch entry of its own"),
            ("field-targeting-context-sent-as-given", "nfd-context", #"expected a value containing {"assigned":true"#),
            ("field-stickiness-variant-names-compared-exactly", "nfc-variant-names", "stickiness: user 'user-2' got variant"),
            ("field-event-properties-never-doubled-by-spelling", "doubled-property-names", "request body: request #"),
            ("field-keyed-event-sent-with-its-own-key", "nfc-event-keys", "has no /track request of its own"),
            ("field-keyed-event-sent-with-its-own-key", "experiment-key-as-flag-key", "has no /track request of its own"),
            ("field-keyed-event-sent-with-its-own-key", "drops-keyed-events", "(none was sent while it ran)"),
            ("field-event-timestamp-to-the-millisecond", "timestamp-a-millisecond-late", #"timestamp "2023-11-14T22:13:20.001Z""#),
        ]
        var files = Set<String>()
        for c in cases {
            let file = Repository.root.appendingPathComponent("scenarios/\(c.file).json").path
            if files.insert(file).inserted {
                let (ok, okOut) = try HarnessProcess.run(["run", file, "--sdk-command", driver, "--verdict", "v.json"], in: dir)
                XCTAssertEqual(ok, 0, "\(c.file) on the example: \(okOut)")
            }
            let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=\(c.defect) " + driver,
                                                        "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, "\(c.file) with \(c.defect): \(out)")
            XCTAssertTrue(out.contains(c.says), "\(c.file) with \(c.defect): \(out)")
        }
    }

    /// The shipping SDK and the faithful variant pass the new files in process.
    func testTheNewScenariosPassInProcess() async throws {
        for name in ["field-concurrent-keyed-events-each-send-their-own-fields", "field-concurrent-unkeyed-events-each-fan-out-their-own-fields",
                     "field-concurrent-unkeyed-events-own-fields-on-every-key", "field-trackbatch-events-each-fan-out-their-own-fields",
                     "field-targeting-attribute-names-compared-exactly",
                     "field-targeting-context-sent-as-given", "field-stickiness-variant-names-compared-exactly",
                     "field-event-properties-never-doubled-by-spelling", "field-keyed-event-sent-with-its-own-key",
                     "field-event-timestamp-to-the-millisecond"] {
            let scenario = try ScenarioParser.load(path: Repository.root.appendingPathComponent("scenarios/\(name).json").path)
            for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
                let r = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(r.status, .passed, "\(name) on \(driver.sdkName): \(r.checks.filter { !$0.passed })")
            }
        }
    }

    /// A scenario whose named checks all found nothing of theirs, with no step expectation, fails
    /// `nothing judged`; the same check beside a call it judges passes.
    func testNamedChecksThatJudgeNothingDoNotPass() async throws {
        func scenario(_ steps: String, _ checks: String) throws -> Scenario {
            try ScenarioParser.parse(Data(#"{"format": "experimently-scenario/1", "name": "n", "description": "d", "steps": [\#(steps)], "checks": [\#(checks)]}"#.utf8), file: "n.json")
        }
        let hash = #"{"do": "hashUser", "user": "user-1", "key": "k"}"#
        let flag = #"{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1"}"#
        let onlyFlag = await ScenarioRunner().run(try scenario(flag, #""stickiness""#))
        XCTAssertTrue(onlyFlag.checks.contains { $0.name == "nothing judged" && !$0.passed }, "stickiness over a flag lookup: \(onlyFlag.checks)")
        for check in ["stickiness", "fan_out", "event_payload", "batch_chunking", "no_stale_write", "offline_fallback", "single_flight", "no_fallback_on_404"] {
            let r = await ScenarioRunner().run(try scenario(hash, "\"\(check)\""))
            XCTAssertEqual(r.status, .failed, check)
            XCTAssertTrue(r.checks.contains { $0.name == "nothing judged" && !$0.passed }, "\(check): \(r.checks)")
        }
        let assign = #"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1"}"#
        let judged = await ScenarioRunner().run(try scenario(assign, #""stickiness""#))
        XCTAssertEqual(judged.status, .passed, "\(judged.checks)")
        let expected = await ScenarioRunner().run(try scenario(hash.dropLast() + #", "expect": {"value": {"bucket": 41}}}"#, #""stickiness""#))
        XCTAssertFalse(expected.checks.contains { $0.name == "nothing judged" }, "a step expectation judges: \(expected.checks)")
    }

    /// The twentieth tester's false failures stay fixed: timestamps given to the microsecond (cut
    /// by every correct SDK) and a scenario proving that lookups send no events (`fan_out` judges
    /// it) pass on the shipping SDK and the faithful variant.
    func testMicrosecondTimestampsAndLookupsWithFanOutPass() async throws {
        for name in ["timestamps-to-the-microsecond", "lookups-send-no-events", "timestamps-before-1985-through-date",
                     "timestamps-before-1985-through-date-unkeyed"] {
            let scenario = try ScenarioParser.load(path: Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/nineteenth-tester/\(name).json").path)
            for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
                let r = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(r.status, .passed, "\(name) on \(driver.sdkName): \(r.checks.filter { !$0.passed })")
            }
        }
    }

    /// `explore --interleave` with a reference (`--mutant`) does not blame the SDK for a check the
    /// reference fails in the file's own order (the file's wrong count): it says so instead, and
    /// the file, which no SDK can pass, is an error, never a pass (a twenty-seventh outside tester).
    func testInterleavingExcusesWhatTheReferenceFailsAsWritten() throws {
        let dir = try scratchDirectory("nineteenth-interleave")
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/nineteenth-tester/interleave-file-assert-fails-on-every-sdk.json").path
        // The faithful variant: `unregister-before-cache-write` is caught by `single_flight` on some
        // interleavings of this file since that check fails a joiner that fetches again.
        let (status, out) = try HarnessProcess.run(["explore", file, "--interleave", "--mutant", "none",
                                                    "--max-schedules", "20", "--out", "i.json", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("the reference fails the file in its own order (step 2 assert): not counted as the SDK's"), out)
        XCTAssertTrue(out.contains(", 0 failed,"), out)
        XCTAssertTrue(out.contains("no SDK can pass the scenario as written"), out)
    }

    /// JSON member look-ups compare names by Unicode scalars: the mock's targeting no longer reads
    /// a context member named NFD é for a rule on NFC é; a timestamp is the instant cut, rounded or
    /// raised to the millisecond, and only itself when it is a whole millisecond.
    func testMemberLookupsAreExactAndTimestampsAreToTheMillisecond() {
        let nfd: JSONValue = .object(["e\u{301}": .string("yes")])
        XCTAssertNil(nfd["\u{E9}"])
        XCTAssertEqual(nfd["e\u{301}"], .string("yes"))
        XCTAssertNil(["e\u{301}": 1].exactly("\u{E9}"))
        XCTAssertEqual(["\u{E9}": 1].exactly("\u{E9}"), 1)
        let rule = Condition(attribute: "\u{E9}", op: .eq, value: .string("yes"))
        XCTAssertFalse(rule.matches(userID: "u", context: ["e\u{301}": .string("yes")]))
        XCTAssertTrue(rule.matches(userID: "u", context: ["\u{E9}": .string("yes")]))
        XCTAssertTrue(Checks.millisecondOf(1_700_000_000, is: 1_700_000_000_000))
        XCTAssertFalse(Checks.millisecondOf(1_700_000_000, is: 1_700_000_000_001))
        XCTAssertFalse(Checks.millisecondOf(1_700_000_000, is: 1_699_999_999_999))
        XCTAssertTrue(Checks.millisecondOf(1_700_000_000.0005, is: 1_700_000_000_000))
        XCTAssertTrue(Checks.millisecondOf(1_700_000_000.0005, is: 1_700_000_000_001))
        XCTAssertFalse(Checks.millisecondOf(1_700_000_000.0005, is: 1_700_000_000_002))
        XCTAssertTrue(Checks.millisecondOf(1_700_000_000.123, is: 1_700_000_000_123))
        XCTAssertTrue(Checks.millisecondOf(20.9996, is: 21_000))
        XCTAssertTrue(Checks.millisecondOf(20.9996, is: 20_999))
        // Given to the microsecond (the twentieth tester): cut and raised are both the instant's.
        XCTAssertTrue(Checks.millisecondOf(1_700_000_000.000999, is: 1_700_000_000_000))
        XCTAssertTrue(Checks.millisecondOf(1_700_000_000.000999, is: 1_700_000_000_001))
        XCTAssertTrue(Checks.millisecondOf(1_700_000_000.000001, is: 1_700_000_000_000))
        XCTAssertTrue(Checks.millisecondOf(1_700_000_000.000001, is: 1_700_000_000_001))
        XCTAssertTrue(Checks.millisecondOf(1_700_000_000.123, is: 1_700_000_000_123))
        XCTAssertTrue(Checks.millisecondOf(-1.5, is: -1_500))
        XCTAssertFalse(Checks.millisecondOf(-1.5, is: -1_501))
        XCTAssertTrue(Checks.millisecondOf(-0.0005, is: -1))
        XCTAssertTrue(Checks.millisecondOf(-0.0005, is: 0))
        // A Date holds seconds since 2001: 86400.88 s comes back just under .880 (the twenty-first tester).
        XCTAssertTrue(Checks.millisecondOf(86_400.88, is: 86_400_880))
        XCTAssertTrue(Checks.millisecondOf(86_400.88, is: 86_400_879))
        XCTAssertFalse(Checks.millisecondOf(86_400.88, is: 86_400_878))
    }
}
