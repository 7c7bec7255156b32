import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock
import ExperimentlyMutants

/// Findings of the fifty-seventh outside tester (`/work/attack57/REPORT.md`) against `fan_out`'s
/// delivery rule, proven both ways (the correct SDKs pass, the broken variant fails `fan_out`):
///
/// - A: a call that had finished, its own request seen, before a later call of the same event
///   began made the later call's failed request ambiguous, so `true` after it passed.
/// - B: a reference-app `event` whose SDK call returned `true` after its `/track` got 500 was
///   never judged.
/// - C: a step labelled `op1` after an unlabelled one (automatically `op1`) shared its label.
/// - D: two identical calls at once whose every request failed were never judged.
/// - E: a `failure_count` of 0.5 (never the backend's) failed the shipping SDK.
final class FiftySeventhTesterFindingsTests: XCTestCase {
    private static func scenario(_ steps: String, app: Bool = false) throws -> Scenario {
        try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "t", "description": "d", "checks": ["fan_out"],
         \(app ? #""app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab"},"# : "")
         "steps": [\(steps)]}
        """.utf8), file: "t.json")
    }

    private func assertCaught(_ scenario: Scenario, by defect: Defect, saying text: String, file: StaticString = #filePath, line: UInt = #line) async {
        await NamedCheckCatch.assertCaught(scenario, by: defect, check: "fan_out", saying: text, file: file, line: line)
    }

    private static let fail500 = #"{"fault": {"match": {"path": "/api/v1/tracking/track"}, "action": {"respond": {"status": 500, "json": {"detail": "x"}}}}, "id": "f500"}"#

    /// A: the earlier call of the same event had returned, its own request seen: the later call's
    /// request is its own.
    func testAnEarlierFinishedCallOfTheSameEventExcusesNothing() async throws {
        let event = #"{"user": "u-a", "name": "purchase", "experiment": "sdk_contract_ab"}"#
        await assertCaught(try Self.scenario("""
            {"do": "trackWithStatus", "event": \(event), "as": "first"}, \(Self.fail500),
            {"do": "trackWithStatus", "event": \(event), "as": "second"}
            """), by: .statusIgnoresTrackAnswer, saying: "trackWithStatus 'second' returned true, but request #2 it sent was answered 500")
        let failures = #"{"status": 200, "json": {"success_count": 0, "failure_count": 1, "errors": [{"index": 0, "event_type": "purchase", "user_id": "u-a", "error": "x"}]}}"#
        await assertCaught(try Self.scenario("""
            {"do": "trackBatch", "events": [\(event)], "as": "first"},
            {"fault": {"match": {"path": "/api/v1/tracking/batch"}, "action": {"respond": \(failures)}}, "id": "f"},
            {"do": "trackBatch", "events": [\(event)], "as": "second"}
            """), by: .batchFailuresReportTrue, saying: "trackBatch 'second' returned true, but request #2 it sent was answered 200 with failure_count 1")
    }

    /// B: the app's event call is judged like a `trackWithStatus` (CONTRACT.md section 8), and an
    /// earlier app event excuses no later call.
    func testAppEventsAreJudgedAndExcuseNoLaterCall() async throws {
        await assertCaught(try Self.scenario("""
            {"app": "login", "user": "user-2"}, {"app": "display"}, \(Self.fail500), {"app": "event", "name": "Report Previewed", "as": "ev"}
            """, app: true), by: .statusIgnoresTrackAnswer, saying: "app call 3 (app.event 'Report Previewed' as 'user-2') returned true, but request #3 it sent was answered 500")
        await assertCaught(try Self.scenario("""
            {"app": "login", "user": "user-2"}, {"app": "display"}, {"app": "event", "name": "Report Previewed"}, \(Self.fail500),
            {"do": "trackWithStatus", "event": {"user": "someone-else", "name": "checkout", "experiment": "sdk_contract_ab"}, "as": "bg"}
            """, app: true), by: .statusIgnoresTrackAnswer, saying: "trackWithStatus 'bg' returned true, but request #4 it sent was answered 500")
    }
    /// C: an explicit `op1` is never an automatic label too: the unlabelled step before it is `op2`.
    func testAnExplicitLabelIsNeverGivenToAnUnlabelledStep() async throws {
        let scenario = try Self.scenario("""
            {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u"},
            {"do": "trackWithStatus", "event": {"user": "u", "name": "buy", "experiment": "sdk_contract_ab"}, "as": "op1", "async": true},
            {"await": "op1", "expect": {"value": true}}
            """)
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })")
            let labels = r.events.filter { $0.kind == .invoke }.compactMap(\.label)
            XCTAssertEqual(labels, ["op2", "op1"])
        }
    }

    /// D: two identical keyed calls at once, both requests answered 500 (or a batch's 200 with
    /// `failure_count` 1): a call that returned `true` fails, whichever request was its own.
    func testIdenticalCallsWhoseEveryRequestFailedAreJudged() async throws {
        let event = #"{"user": "u-a", "name": "purchase", "experiment": "sdk_contract_ab"}"#
        await assertCaught(try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/track"}, "action": {"hold": {}}}, "id": "h"},
            {"do": "trackWithStatus", "event": \(event), "as": "buy", "async": true, "times": 2},
            {"wait_for": {"held": "h", "count": 2}},
            {"release": "h", "count": 2, "response": {"status": 500, "json": {"detail": "x"}}}, {"await": "buy"}
            """), by: .statusIgnoresTrackAnswer, saying: "returned true, but none of the requests it may have sent (#1, #2) was delivered")
        let failures = #"{"status": 200, "json": {"success_count": 0, "failure_count": 1, "errors": [{"index": 0, "event_type": "purchase", "user_id": "u-a", "error": "x"}]}}"#
        await assertCaught(try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/batch"}, "action": {"hold": {}}}, "id": "h"},
            {"do": "trackBatch", "events": [\(event)], "as": "buy", "async": true, "times": 2},
            {"wait_for": {"held": "h", "count": 2}},
            {"release": "h", "count": 2, "response": \(failures)}, {"await": "buy"}
            """), by: .batchFailuresReportTrue, saying: "returned true, but none of the requests it may have sent (#1, #2) was delivered")
    }

    /// D, the matching: two identical keyed calls at once, one `/track` delivered and the other
    /// dropped: both cannot have returned `true` (one `/track` serves one call).
    func testIdenticalStatusCallsNeedADeliveredTrackEach() async throws {
        await assertCaught(try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/track"}, "action": {"hold": {}}}, "id": "h"},
            {"do": "trackWithStatus", "event": {"user": "u-b", "name": "view", "experiment": "sdk_contract_ab"}, "as": "c", "async": true, "times": 2},
            {"wait_for": {"held": "h", "count": 2}},
            {"release": "h"}, {"release": "h", "transport_error": true}, {"await": "c"}
            """), by: .statusIgnoresTrackAnswer, saying: "which only they may have sent (by its client, time and events), was answered with no status")
        // A plain `track` of the event begun before them may have sent either dropped one; still
        // only one `/track` was delivered for the two status calls (the matching).
        await assertCaught(try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/track"}, "action": {"hold": {}}}, "id": "h"},
            {"do": "track", "event": {"user": "u-b", "name": "view", "experiment": "sdk_contract_ab"}, "as": "p", "async": true},
            {"do": "trackWithStatus", "event": {"user": "u-b", "name": "view", "experiment": "sdk_contract_ab"}, "as": "c", "async": true, "times": 2},
            {"wait_for": {"held": "h", "count": 3}},
            {"release": "h", "transport_error": true}, {"release": "h"}, {"release": "h", "transport_error": true}, {"await": "c"}, {"await": "p"}
            """), by: .statusIgnoresTrackAnswer, saying: "2 calls of its event returned true and only 1 of them can have a delivered /track of their own")
    }

    /// D, for batches: two identical `trackBatch` calls at once, one `/batch` delivered and the
    /// other answered 200 with `failure_count` 1: whichever was whose, one call's was refused, so
    /// both cannot have returned `true`. A plain `track` of the same event beside them may have
    /// sent the refused one: then no verdict (the correct SDKs pass both).
    func testIdenticalBatchCallsCannotBothReportARefusedBatch() async throws {
        let event = #"{"user": "u-a", "name": "purchase", "experiment": "sdk_contract_ab"}"#
        let failures = #"{"status": 200, "json": {"success_count": 0, "failure_count": 1, "errors": [{"index": 0, "event_type": "purchase", "user_id": "u-a", "error": "x"}]}}"#
        await assertCaught(try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/batch"}, "action": {"hold": {}}}, "id": "h"},
            {"do": "trackBatch", "events": [\(event)], "as": "buy", "async": true, "times": 2},
            {"wait_for": {"held": "h", "count": 2}},
            {"release": "h"}, {"release": "h", "response": \(failures)}, {"await": "buy"}
            """), by: .batchFailuresReportTrue, saying: "which only they may have sent (by its client, time and events), was answered 200 with failure_count 1")
        let withTrack = try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/track"}, "action": {"hold": {}}}, "id": "h"},
            {"do": "trackWithStatus", "event": \(event), "as": "status", "async": true},
            {"do": "track", "event": \(event), "as": "plain", "async": true},
            {"wait_for": {"held": "h", "count": 2}},
            {"release": "h"}, {"release": "h", "response": {"status": 500, "json": {"detail": "x"}}}, {"await": "status"}, {"await": "plain"}
            """)
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil), MutantRun.driver(.statusIgnoresTrackAnswer)] {
            let r = await ScenarioRunner(driver: driver).run(withTrack)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })")
        }
    }

    /// E: a `failure_count` the backend never sends (0.5, 1e-300) counts neither way: the shipping
    /// SDK, which reads it as no failure, is not failed for it.
    func testAFailureCountThatIsNoWholeNumberCountsNeitherWay() async throws {
        for count in ["0.5", "1e-300", "1.5"] {
            let scenario = try Self.scenario("""
                {"fault": {"match": {"path": "/api/v1/tracking/batch"}, "action": {"respond": {"status": 200, "json": {"success_count": 0, "failure_count": \(count), "errors": null}}}}, "id": "f"},
                {"do": "trackBatch", "events": [{"user": "u-a", "name": "purchase", "experiment": "sdk_contract_ab"}], "as": "b"}
                """)
            let r = await ScenarioRunner().run(scenario)
            XCTAssertEqual(r.status, .passed, "failure_count \(count): \(r.checks.filter { !$0.passed })")
        }
    }
}
