import XCTest
@testable import ContractHarness

/// A failure whose step ran out of real time while the run was not shown stuck names the time
/// limit, not the scenario's contract rule (a forty-third outside tester, F1 and F2: an adapter
/// frozen for 5 s, or a `--step-timeout-ms 20` cap, read as "[broken rule: CONTRACT.md section 4]").
final class StepLimitNamingTests: XCTestCase {
    private func failed(_ message: String) -> ScenarioResult {
        ScenarioResult(name: "s", file: "s.json", tags: [], source: "CONTRACT.md section 4", status: .failed, durationMilliseconds: 1,
                       checks: [CheckResult(name: "step 1", passed: false, message: message), CheckResult(name: "stickiness", passed: true)],
                       reason: message, smoke: nil, history: [], historyDigest: "")
    }

    func testACappedLimitIsNamedInPlaceOfTheRule() {
        var r = failed("step 1 do evaluateFlag: operation 'op1' did not finish within 20 ms; pending: op1 [broken rule: CONTRACT.md section 4 (single flight)]")
        ScenarioRunner.nameTheTimeLimit(&r, limit: 20, fileLimit: 5000)
        let m = r.checks[0].message ?? ""
        XCTAssertFalse(m.contains("broken rule"), m)
        XCTAssertTrue(m.hasPrefix("step 1 do evaluateFlag: operation 'op1' did not finish within 20 ms; pending: op1 [not judged against a contract rule"), m)
        XCTAssertTrue(m.contains("--step-timeout-ms capped the file's 5000 ms"), m)
        XCTAssertEqual(r.reason, m)
        XCTAssertNil(r.checks[1].message, "a passing check is left alone")
    }

    func testTheFilesOwnLimitIsNamedWithoutACap() {
        var r = failed("step 2: not quiescent after 5000 ms [broken rule: CONTRACT.md section 5, defect 3]")
        ScenarioRunner.nameTheTimeLimit(&r, limit: 5000, fileLimit: 5000)
        let m = r.checks[0].message ?? ""
        XCTAssertTrue(m.contains("the step limit of 5000 ms ran out while the run could not be shown stuck"), m)
        XCTAssertFalse(m.contains("capped"), m)
    }

    /// A message without a rule appended (a scenario file with no `source`, a driver failure)
    /// gains the note: before, it read as a proven hang (a forty-sixth outside tester, finding A).
    func testAMessageWithoutARuleGainsTheNote() {
        var r = failed("step 1 wait_for: did not happen within 40 ms")
        r.source = nil
        ScenarioRunner.nameTheTimeLimit(&r, limit: 40, fileLimit: 5000)
        XCTAssertEqual(r.checks[0].message, "step 1 wait_for: did not happen within 40 ms [not judged against a contract rule: the step limit of 40 ms ran out"
                       + " (--step-timeout-ms capped the file's 5000 ms) while the run could not be shown stuck: a hung SDK, or one that got no CPU that long]")
        XCTAssertEqual(r.reason, r.checks[0].message)
        ScenarioRunner.nameTheTimeLimit(&r, limit: 40, fileLimit: 5000)
        XCTAssertEqual(r.reason, r.checks[0].message, "named once")
        XCTAssertEqual(r.checks[0].message?.components(separatedBy: "[not judged").count, 2, "named once")
    }

    /// A message naming a rule in its own text keeps it and says it was judged after the limit.
    func testARuleInTheMessageIsKeptAndQualified() {
        var r = failed("step 2: it waits on request #1, sent before the clear. CONTRACT.md section 5 (defects 1 and 2)")
        ScenarioRunner.nameTheTimeLimit(&r, limit: 5000, fileLimit: 5000)
        let m = r.checks[0].message ?? ""
        XCTAssertTrue(m.hasPrefix("step 2: it waits on request #1, sent before the clear. CONTRACT.md section 5 (defects 1 and 2) [judged after the step limit of 5000 ms ran out"), m)
        XCTAssertTrue(m.hasSuffix("; the rule named may not be broken]"), m)
    }

    /// The mock's shutdown findings after a run cut short at the limit say they may follow from
    /// it (a forty-fifth outside tester, F4); without a time-limit failure they are not touched.
    func testALifecycleFindingAfterTheLimitSaysItMayFollowFromIt() {
        var r = failed("step 1 wait_for: did not happen within 40 ms [broken rule: CONTRACT.md section 5]")
        r.checks.append(CheckResult(name: "lifecycle", passed: false, message: "the mock's strict shutdown found: request #1 still held by fault 'h' (never released)"))
        ScenarioRunner.nameTheTimeLimit(&r, limit: 40, fileLimit: 5000)
        XCTAssertEqual(r.checks[2].message, "the mock's strict shutdown found: request #1 still held by fault 'h' (never released)"
                       + " [may follow from the step limit of 40 ms that ran out: the steps after it never ran]")
    }
}

