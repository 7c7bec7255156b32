import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the seventy-eighth outside tester (`/work/attack78/REPORT.md`: the day's new rules
/// against correct SDKs), kept as fixtures (`Fixtures/seventy-eighth-tester`):
///
/// - F1, F2: `fan_out`'s proof past the cache size took a later hit as proof even when the entry
///   had expired meanwhile, or when another answer named the key, or when the "hit" was an
///   offline fallback for a request refused before the mock.
/// - F3: a 302 or 303 followed as a GET without a body (RFC 9110) failed `event_payload`.
/// - F4: the proof skipped `track`.
/// - F6: a request to a redirect's `Location` long after the redirected call returned was excused.
final class SeventyEighthTesterFindingsTests: XCTestCase {
    static let folder = TesterFixtures.folder("seventy-eighth-tester")
    static func file(_ name: String) -> String { folder.appendingPathComponent(name).path }

    /// Every file passes the correct SDKs, the Python example also with its stack following
    /// redirects (`follows-redirects`), as does the shipped redirect scenario.
    func testTheFilesPassCorrectSDKsThatFollowRedirectsOrNot() throws {
        let dir = try scratchDirectory("seventy-eighth")
        let shipped = Repository.root.appendingPathComponent("scenarios/field-redirects-followed-or-not-are-judged-alike.json").path
        let files = [Self.folder.path, shipped]
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", TesterFixtures.python],
                    ["--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=follows-redirects \(TesterFixtures.python)"]] {
            let (status, out) = try HarnessProcess.run(["run"] + files + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            XCTAssertTrue(out.contains("5 passed, 0 failed"), "\(sdk): \(out)")
        }
    }

    /// F4 and F6 both ways: a `track` past the cache size that forgot its fan-out, and a warm-up
    /// sent to a 307's `Location` two steps after the redirected call, fail.
    func testTheBugsTheRulesMissedAreCaught() throws {
        let dir = try scratchDirectory("seventy-eighth-defects")
        try TesterFixtures.assertFails(Self.file("f4-track-past-the-cache-size.json"),
                                       on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=fanout-forgets-on-evict \(TesterFixtures.python)"],
                                       saying: ["fan_out: track 'op4' (unkeyed event 'page_view' of user 'user-1') had no /batch entry for its user's cached experiment"], in: dir)
        try TesterFixtures.assertFails(Self.file("f6-a-late-request-to-a-location-is-no-follow-up.json"),
                                       on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=warm-up-experiments \(TesterFixtures.python)"],
                                       saying: ["single_flight: client 'main' sent request #4 for experiment 'exp_b' of user 'user-1'"], in: dir)
        let shipped = Repository.root.appendingPathComponent("scenarios/field-redirects-followed-or-not-are-judged-alike.json").path
        try TesterFixtures.assertFails(shipped,
                                       on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=follows-redirects EXPERIMENTLY_EXAMPLE_DEFECT=resent-without-body \(TesterFixtures.python)"],
                                       saying: ["event_payload: request #6 is POST /api/v1/tracking/track with no body"], in: dir)
    }
}
