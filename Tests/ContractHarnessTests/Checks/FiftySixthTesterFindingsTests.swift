import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock
import ExperimentlyMutants

/// Findings of the fifty-sixth outside tester (`/work/attack56/REPORT.md`), proven both ways:
///
/// - B: `fan_out` judged a `trackWithStatus` or `trackBatch` that returned `true` only when no
///   other tracking call of its client overlapped it, so `true` after its own `/track` got 500 or
///   a dropped connection passed beside another user's held event. Now a call's own requests are
///   told apart by their events (user and name, exact) where another call may have sent them.
/// - C: no named check held a `/batch` answered 200 with `failure_count` > 0 to defect 5.
/// (A, app lookups that need `settle`, is in `OutOfProcessQuiescenceTests`.)
final class FiftySixthTesterFindingsTests: XCTestCase {
    private static func shipped(_ name: String) throws -> Scenario {
        let file = Repository.root.appendingPathComponent("scenarios/\(name).json").path
        return try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
    }

    private static func failures(_ r: ScenarioResult) -> [String] {
        r.checks.filter { !$0.passed }.map { "\($0.name): \($0.message ?? "")" }
    }

    /// B: each of two overlapping status calls reports its own delivery. The shipping SDK and the
    /// faithful variant pass; the variant that reports `true` once its `/track` was sent fails
    /// `fan_out` for the call whose `/track` got 500 and for the one whose connection dropped.
    func testOverlappingStatusCallsAreEachJudgedByTheirOwnRequest() async throws {
        let scenario = try Self.shipped("field-overlapping-status-calls-each-report-their-own-delivery")
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(Self.failures(r))")
        }
        let broken = await ScenarioRunner(driver: MutantRun.driver(.statusIgnoresTrackAnswer)).run(scenario)
        XCTAssertEqual(broken.status, .failed)
        let fanOut = Self.failures(broken).filter { $0.hasPrefix("fan_out: ") }
        XCTAssertTrue(fanOut.contains { $0.contains("trackWithStatus 'a' returned true, but request #1 it sent was answered 500") }, "\(fanOut)")
        XCTAssertTrue(fanOut.contains { $0.contains("trackWithStatus 'c' returned true") && $0.contains("answered with no status") }, "\(fanOut)")
        XCTAssertFalse(fanOut.contains { $0.contains("'b'") || $0.contains("'d'") }, "\(fanOut)")
    }

    /// C: a batch answered 200 with `failure_count` 1 that reported `true` fails `fan_out`, with
    /// only named checks in the file; the other batch, answered whole, is not blamed.
    func testABatchWithFailuresReportedTrueFailsFanOut() async throws {
        let scenario = try Self.shipped("field-overlapping-batches-failure-count-judged-by-named-checks")
        XCTAssertFalse(scenario.steps.contains { $0.statesExpectation }, "named checks only")
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(Self.failures(r))")
        }
        let broken = await ScenarioRunner(driver: MutantRun.driver(.batchFailuresReportTrue)).run(scenario)
        XCTAssertEqual(Self.failures(broken).filter { $0.hasPrefix("fan_out: ") },
                       ["fan_out: trackBatch 'a' returned true, but request #1 it sent was answered 200 with failure_count 1 when it returned "
                        + "(CONTRACT.md section 3: the result reports delivery; section 5, defect 5: a /batch answered 200 with failure_count > 0 reports false)"])
    }

    /// Where the events cannot tell whose a request is (two overlapping calls of the same user and
    /// event), the failed one is nobody's: a correct SDK, whichever call got the 500, is never
    /// failed for the other's `true`. Run in both orders of release.
    func testRequestsThatTwoCallsMayHaveSentBlameNeither() async throws {
        for first in ["500", "200"] {
            let status = first == "500" ? #"{"status": 500, "json": {"detail": "x"}}"# : #"{"status": 200, "json": {"success": true}}"#
            let other = first == "500" ? #"{"status": 200, "json": {"success": true}}"# : #"{"status": 500, "json": {"detail": "x"}}"#
            let scenario = try ScenarioParser.parse(Data("""
            {"format": "experimently-scenario/1", "name": "twins", "description": "two calls of one event", "checks": ["fan_out"],
             "steps": [{"fault": {"match": {"path": "/api/v1/tracking/track"}, "when": {"first": 2}, "action": {"hold": {}}}, "id": "h"},
                       {"do": "trackWithStatus", "event": {"user": "u", "name": "buy", "experiment": "sdk_contract_ab"}, "as": "a", "async": true},
                       {"do": "trackWithStatus", "event": {"user": "u", "name": "buy", "experiment": "sdk_contract_ab"}, "as": "b", "async": true},
                       {"wait_for": {"held": "h", "count": 2}},
                       {"release": "h", "response": \(status)}, {"release": "h", "response": \(other)},
                       {"await": "a"}, {"await": "b"}]}
            """.utf8), file: "t.json")
            let r = await ScenarioRunner().run(scenario)
            XCTAssertEqual(r.status, .passed, "first \(first): \(Self.failures(r))")
            // Each call of a correct SDK reported its own request: one true, one false.
            let values = r.events.filter { $0.kind == .complete }.compactMap { $0.outcome?["value"] }
            XCTAssertEqual(Set(values.map { $0 == .bool(true) }), [true, false], "\(values)")
        }
    }

    /// The event attribution reads users and names by their scalars: NFC and NFD spellings of one
    /// user are two users, so a request of one is never the other's.
    func testTrackedEventsCompareUsersExactly() {
        let nfc = Checks.TrackedEvent(user: Checks.exact("\u{e9}"), name: Checks.exact("buy"))
        let nfd = Checks.TrackedEvent(user: Checks.exact("e\u{301}"), name: Checks.exact("buy"))
        XCTAssertFalse(nfc.mayBe(nfd))
        XCTAssertTrue(nfc.mayBe(Checks.TrackedEvent(user: Checks.exact("\u{e9}"), name: nil)))
        XCTAssertFalse(Checks.mayHaveSent([nfc], [nfd]))
        XCTAssertTrue(Checks.mayHaveSent(nil, [nfd]))
        XCTAssertTrue(Checks.mayHaveSent([nfc], nil))
    }
}
