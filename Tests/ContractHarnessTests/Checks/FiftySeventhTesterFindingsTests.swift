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
final class FiftySeventhTesterFindingsTests: XCTestCase {
    private static func scenario(_ steps: String, app: Bool = false) throws -> Scenario {
        try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "t", "description": "d", "checks": ["fan_out"],
         \(app ? #""app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab"},"# : "")
         "steps": [\(steps)]}
        """.utf8), file: "t.json")
    }

    private func assertCaught(_ scenario: Scenario, by defect: Defect, saying text: String, file: StaticString = #filePath, line: UInt = #line) async {
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })", file: file, line: line)
        }
        let broken = await ScenarioRunner(driver: MutantRun.driver(defect)).run(scenario)
        let fanOut = broken.checks.filter { !$0.passed && $0.name == "fan_out" }.compactMap(\.message)
        XCTAssertTrue(fanOut.contains { $0.contains(text) }, "\(defect.rawValue): \(fanOut)", file: file, line: line)
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
}
