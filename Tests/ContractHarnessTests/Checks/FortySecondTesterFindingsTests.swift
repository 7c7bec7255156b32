import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the forty-second outside tester (`/work/attack45/FINDINGS.md`: public bug reports of
/// other flag SDKs written as scenarios), proven both ways.
///
/// - F1 (false pass): an SDK that retried a failed lookup once (a 500, its own deadline) and
///   returned the retry's answer passed every named check (PostHog/posthog-js PR #260);
///   `single_flight` now fails a request that only calls waiting on a failed flight can have sent.
/// - F2 (false pass): a `/track` the SDK made up (an `$exposure` per lookup) passed `fan_out` while
///   another keyed call ran (Flagsmith/flagsmith-python-client #233); a content no call tracked
///   now fails, inside a tracking call's window too.
/// - F3 (unclear error): a cache entry kept past a TTL of 0 was named "defect 1: a response to a
///   request sent before a clear" in a scenario with no clear; the message now names the three
///   rules such an entry breaks, the TTL first.
final class FortySecondTesterFindingsTests: XCTestCase {
    private static let fixtures = TesterFixtures.folder("forty-second-tester")

    /// Every correct SDK passes the tester's files and the two shipped scenarios.
    func testCorrectSDKsPassTheFiles() throws {
        try TesterFixtures.assertCorrectSDKsPass("forty-second-tester", count: 3, in: try scratchDirectory("forty-second-tester"))
    }

    /// The Python example's defects fail the scenarios written for them, by the named checks alone.
    func testRetriesAndMadeUpTracksAreCaughtByNamedChecks() throws {
        let dir = try scratchDirectory("forty-second-defects")
        let shipped = { (name: String) in Repository.root.appendingPathComponent("scenarios/\(name).json").path }
        let cases: [(defect: String, file: String, says: [String])] = [
            ("retry-failed-lookup", Self.fixtures.appendingPathComponent("f10min-lookup-retried-after-500-checks-only.json").path,
             ["single_flight", "retried its failed lookup", "was answered 500"]),
            ("retry-failed-lookup", shipped("field-failed-lookup-never-retried"), ["single_flight", "retried its failed lookup"]),
            ("sdk-exposure-track", Self.fixtures.appendingPathComponent("f11d-made-up-track-during-a-keyed-call-fan-out-only.json").path,
             ["fan_out", "event '$exposure' of user 'user-3'", "but no call tracked it"]),
            ("sdk-exposure-track", shipped("field-no-tracking-of-the-sdks-own-during-a-keyed-call"), ["fan_out", "but no call tracked it"]),
        ]
        for c in cases {
            try TesterFixtures.assertFails(c.file, on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=\(c.defect) \(TesterFixtures.python)"],
                                           saying: c.says, in: dir)
        }
    }

    /// A cache entry the history does not support names the TTL rule, not only "a clear".
    func testAnUnsupportedCacheEntryNamesTheTTL() {
        let rule = Checks.cacheRule(want: [], got: ["sdk_contract_ab"])
        XCTAssertTrue(rule.contains("kept past its TTL"), rule)
        XCTAssertTrue(rule.contains("defect 1"), rule)
    }
}
