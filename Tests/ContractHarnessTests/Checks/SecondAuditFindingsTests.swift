import XCTest
import Foundation
@testable import ContractHarness

/// Findings of an outside audit of the app checks against CONTRACT.md section 8
/// (`/work/attack43/AUDIT.md`), proven both ways.
///
/// - 1 (false pass): an SDK tracking an exposure of its own when it falls back passed
///   `exposure_after_display`, which counted `/assign` requests only.
/// - 2 (false pass): no named check held an app event's fanned-out entries to its fields, so an
///   SDK dropping `metadata` (`layout_source`) passed.
/// - 3 (false fail): a scenario's own `getAssignment` on the app's client was blamed as an
///   exposure no display asked for; its sibling in `no_stale_after_logout` (the scenario's own
///   lookup for the logged-out user) likewise.
final class SecondAuditFindingsTests: XCTestCase {
    private static let python = TesterFixtures.python

    /// Every correct SDK passes the audit's files and the two shipped scenarios made from them.
    func testCorrectSDKsPassTheFiles() throws {
        try TesterFixtures.assertCorrectSDKsPass("second-audit", count: 3, in: try scratchDirectory("second-audit"))
        let dir = try scratchDirectory("second-audit-shipped")
        let files = ["app-fallback-display-records-no-exposure", "app-scenario-calls-on-the-app-client-are-its-own"]
            .map { Repository.root.appendingPathComponent("scenarios/\($0).json").path }
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", Self.python]] {
            let (status, out) = try HarnessProcess.run(["run"] + files + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
        }
    }

    /// The broken SDKs fail the shipped scenario, each by the check named for its rule.
    func testTheDefectsFail() throws {
        let dir = try scratchDirectory("second-audit-defects")
        let file = Repository.root.appendingPathComponent("scenarios/app-fallback-display-records-no-exposure.json").path
        try TesterFixtures.assertFails(file, on: ["--mutant", "exposure-for-fallback"],
                                       saying: ["exposure_after_display: tracking request for 'user-2' sent by no app event"], in: dir)
        try TesterFixtures.assertFails(file, on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=fanout-drops-properties \(Self.python)"],
                                       saying: ["fan_out: the app's event 'Report Previewed' of 'user-2' went out in request", "metadata absent"], in: dir)
    }

}
