import XCTest
import Foundation
@testable import ContractHarness

/// `fan_out` past the cache size (`Checks.fanOutReachesProvenEntries`): an unkeyed event goes to
/// every entry the history proves was cached while it ran (written before it, a hit after it, no
/// request for it or clear in between), whatever the eviction order. The seventy-second outside
/// tester's SDK that emptied its fan-out index on an eviction sent nothing and passed (F1).
final class FanOutProvenEntriesTests: XCTestCase {
    static let file = Repository.root.appendingPathComponent("scenarios/field-fan-out-reaches-every-entry-still-cached-past-the-cache-size.json").path

    /// Correct SDKs with either eviction order pass: in process, the faithful variant, the Python
    /// example evicting oldest first and newest first.
    func testCorrectSDKsOfEitherEvictionOrderPass() async throws {
        let scenario = try ScenarioParser.load(path: Self.file)
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })")
        }
        let dir = try scratchDirectory("fan-out-proven-entries")
        for freedom in ["", "EXPERIMENTLY_EXAMPLE_FREEDOM=evict-newest "] {
            let (status, out) = try HarnessProcess.run(["run", Self.file, "--sdk-command", freedom + TesterFixtures.python, "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(freedom): \(out)")
        }
    }

    /// The Python example's `fanout-forgets-on-evict` (an index of keys an eviction empties) fails
    /// `fan_out`, naming an entry the later hits prove was cached.
    func testAnSDKForgettingItsFanOutOnAnEvictionFails() throws {
        let dir = try scratchDirectory("fan-out-proven-entries-defect")
        try TesterFixtures.assertFails(Self.file, on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=fanout-forgets-on-evict \(TesterFixtures.python)"],
                                       saying: ["fan_out", "with no /batch entry for its user's cached experiment 'exp_c' (it sent no /batch), which was cached the whole time it ran"],
                                       in: dir)
    }
}
