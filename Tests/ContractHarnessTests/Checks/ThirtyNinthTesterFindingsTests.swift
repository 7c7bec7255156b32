import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the thirty-ninth outside tester (`/work/attack40/FINDINGS.md`), proven both ways.
///
/// - 1 (false failure): the reference app's logout took `anon-N` from a counter even when the app
///   had already been `anon-N` (its first identity, or a login), so `no_stale_after_logout` read
///   the new identity's cache entries as the logged-out user's and failed every correct SDK.
/// - 2 (false failure of the out-of-process Swift SDK): a flag keyed `.` or `..` went as a literal
///   dot segment, which libcurl removes (RFC 3986 section 5.2.4): the SDK asked `/evaluate/`.
/// - 3 (suite gaps): three broken SDKs passed the whole suite; the shipped scenarios
///   `field-trackbatch-later-chunk-after-a-partial-failure`, `field-fan-out-matches-the-user-exactly-not-by-prefix`
///   and `field-separator-ids-never-share-a-flight` catch the Python example's defects of the same names.
final class ThirtyNinthTesterFindingsTests: XCTestCase {
    private static let fixtures = TesterFixtures.folder("thirty-ninth-tester")

    /// Every correct SDK passes the files (before: all four failed on one or more of them).
    func testCorrectSDKsPassTheFiles() throws {
        try TesterFixtures.assertCorrectSDKsPass("thirty-ninth-tester", count: 4, in: try scratchDirectory("thirty-ninth-tester"))
    }

    /// The dot-segment keys reach the mock through experimently-driver (the Swift SDK over
    /// URLSession and libcurl), where the literal segment was removed.
    func testDotSegmentKeysReachTheMockOutOfProcess() throws {
        let dir = try scratchDirectory("thirty-ninth-dots")
        let driver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        let files = ["x-flagkey-dot.json", "x-flagkey-dotdot.json"].map { Self.fixtures.appendingPathComponent($0).path }
        let (status, out) = try HarnessProcess.run(["run"] + files + ["--sdk-command", "'\(driver)'", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
        XCTAssertTrue(out.contains("2 passed, 0 failed"), out)
    }

    /// The Python example's defects fail the shipped scenario written for each, and only it.
    func testTheSuiteGapDefectsFailTheirScenarios() throws {
        let dir = try scratchDirectory("thirty-ninth-defects")
        let cases = [
            ("batch-stops-after-failure-count", "field-trackbatch-later-chunk-after-a-partial-failure", "batch_chunking"),
            ("fanout-prefix-user", "field-fan-out-matches-the-user-exactly-not-by-prefix", "fan_out"),
            ("flight-key-concat", "field-separator-ids-never-share-a-flight", "step 3"),
        ]
        let files = cases.map { Repository.root.appendingPathComponent("scenarios/\($0.1).json").path }
        for (defect, scenario, check) in cases {
            let (status, out) = try HarnessProcess.run(["run"] + files + ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=\(defect) \(TesterFixtures.python)",
                                                                         "--step-timeout-ms", "1500", "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, out)
            XCTAssertTrue(out.contains("FAIL  \(scenario)") && out.contains("\(check)"), "\(defect): \(out)")
            XCTAssertTrue(out.contains("2 passed, 1 failed"), "\(defect): \(out)")
        }
    }
}
