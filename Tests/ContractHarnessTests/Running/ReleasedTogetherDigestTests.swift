import XCTest
import Foundation
@testable import ContractHarness

/// Requests freed by one step (a `release` of several holds, an `advance` ending several delays)
/// are answered by the mock in a canonical order, by content: the history digest of such a step
/// does not vary (attack finding 6: two clients' held answers released by `release ... count 2`
/// swapped their X-RateLimit-Remaining values, 1 digest in 30 differed).
final class ReleasedTogetherDigestTests: XCTestCase {
    private func scenario(_ name: String) throws -> Scenario {
        let file = Repository.root.appendingPathComponent("scenarios/\(name).json")
        return try ScenarioParser.parse(try Data(contentsOf: file), file: file.path)
    }

    /// Client b's requests park first; client a's are answered first anyway (its assertions on
    /// the rate-limit header fail when the mock answers in parking or wake-up order).
    func testRequestsFreedTogetherAreAnsweredInContentOrder() async throws {
        let s = try scenario("field-answers-released-together-answered-in-content-order")
        let runner = ScenarioRunner()
        var digests: Set<String> = []
        for _ in 0..<20 {
            let result = await runner.run(s)
            XCTAssertEqual(result.status, .passed, "\(result.checks.filter { !$0.passed }.map { "\($0.name): \($0.message ?? "")" })")
            digests.insert(result.historyDigest)
        }
        XCTAssertEqual(digests.count, 1)
    }

    /// The tester's scenario (two SDK instances, one user, both held answers released by one
    /// step): 100 runs with both cores busy give one history digest.
    func testTwoClientsReleasedTogetherGiveOneDigestUnderLoad() async throws {
        let s = try scenario("field-two-sdk-instances-same-user")
        let stop = StopFlag.busyLoops(2)
        defer { stop.set() }
        let runner = ScenarioRunner()
        let first = await runner.run(s)
        XCTAssertEqual(first.status, .passed, "\(first.checks.filter { !$0.passed })")
        for i in 1..<100 {
            let again = await runner.run(s)
            guard again.historyDigest == first.historyDigest else {
                let diff = zip(first.history, again.history).first { $0.0 != $0.1 }
                return XCTFail("run \(i) differs: \(diff.map { "\($0.0.line)\n  vs \($0.1.line)" } ?? "length \(first.history.count) vs \(again.history.count)")")
            }
        }
    }
}
