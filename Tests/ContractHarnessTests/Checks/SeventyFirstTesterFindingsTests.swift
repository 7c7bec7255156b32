import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the seventy-first outside tester (`/work/attack71/REPORT.md`: false failures of
/// the newest rules), fixed and kept as fixtures (`Fixtures/seventy-first-tester`):
///
/// - F1: `single_flight` failed every SDK when a lookup begun before a clear was still pending
///   while the only caller of a flight after the clear was cancelled (or failed) and a later call
///   sent its own request: the pre-clear call counted as a waiter of the later flight.
/// - F2: a mock `delay` ending off the clock's microsecond grid (0.1 s plus 1.2 s) was answered at
///   the next instant, not at 1.3 s: a false failure in process and a flake against a deadline.
final class SeventyFirstTesterFindingsTests: XCTestCase {
    /// The six files pass on the correct SDKs (in process, the faithful variant, the Python
    /// example), three times each: the delay ties with no deadline by chance any more.
    func testTheFilesPassOnTheCorrectSDKs() throws {
        let dir = try scratchDirectory("seventy-first-tester")
        try TesterFixtures.assertCorrectSDKsPass("seventy-first-tester", count: 6, runs: 3, in: dir)
    }

    /// F2 in process, on its own: the delayed answer lands at 1.3 s, within the 2 s TTL, so the
    /// entry has expired by 5.1 s (before, the answer came at 5.1 s, cached until 7.1 s).
    func testADelayEndingOffTheGridIsAnsweredAtItsInstant() async throws {
        let scenario = try ScenarioParser.load(path: TesterFixtures.folder("seventy-first-tester")
            .appendingPathComponent("f2b-delayed-answer-time-off-grid-ttl.json").path)
        let r = await ScenarioRunner(driver: SwiftSDKDriver(), keepsHistory: true).run(scenario)
        XCTAssertEqual(r.status, .passed, "\(r.checks.filter { !$0.passed })")
        XCTAssertTrue(r.history.contains { $0.line.contains("t=1.3 response #") }, "\(r.history.map(\.line))")
    }
}

/// The seventy-fourth outside tester's F1 (`Fixtures/seventy-fourth-tester`): past the cache size,
/// two unkeyed tracking calls of one client at once were each judged by the other's batch
/// (`fan_out`: "a second time", "no live cache entry of its user explains"), on every correct SDK.
final class SeventyFourthTesterFindingsTests: XCTestCase {
    func testConcurrentCallsPastTheCacheSizePassOnTheCorrectSDKs() throws {
        let dir = try scratchDirectory("seventy-fourth-tester")
        try TesterFixtures.assertCorrectSDKsPass("seventy-fourth-tester", count: 7, in: dir)
    }
}

/// The seventy-third outside tester's F2: a `wait_for` of a cancelled request moved before the
/// `cancel` (or the clock move) that causes it is decided at once as an order no SDK can carry
/// out, naming the later step; before, it waited out the step limit and `explore` counted the
/// order as failing on the reference too.
final class SeventyThirdTesterFindingsTests: XCTestCase {
    func testAWaitForACancellationBeforeItsCauseIsInfeasibleAtOnce() async throws {
        let scenario = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "swapped", "description": "d", "checks": ["single_flight"], "steps": [
          {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "h"},
          {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a1", "async": true},
          {"wait_for": {"held": "h"}},
          {"wait_for": {"requests": {"path": "/api/v1/tracking/assign", "cancelled": true}}},
          {"cancel": "a1"}, {"release": "h"}, {"await": "a1", "expect": {"error": "cancelled"}}]}
        """.utf8), file: "swapped.json")
        let r = await ScenarioRunner(driver: SwiftSDKDriver()).run(scenario)
        XCTAssertTrue(r.infeasible, "\(r.checks.filter { !$0.passed })")
        XCTAssertTrue(r.checks.contains { $0.message?.contains("waits for what only a later step provides (step 4 cancel a1)") == true },
                      "\(r.checks.filter { !$0.passed })")
        XCTAssertFalse(r.stepLimitReached, "decided at once, not at the step limit")
    }
}
