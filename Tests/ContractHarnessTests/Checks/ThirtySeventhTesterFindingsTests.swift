import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// Findings of the thirty-seventh outside tester (`/work/attack38/FINDINGS.md`) and of an outside
/// audit against CONTRACT.md (`/work/attack38/AUDIT.md`), proven both ways: the files pass on
/// correct SDKs, and the defects they were written for fail.
///
/// - F5: an SDK that created a URLSession task and dropped it unresumed (its caller cancelled)
///   blocked in-process quiescence for the rest of the scenario (every later held step failed).
/// - F6: a `trackBatch` cancelled (or its client closed) while it ran may stop after any chunk.
/// - F2-F4: a value decided by a 2xx answer must be that answer (`offline_fallback`).
/// - F8: an answer that came when every caller had given up may have been read or not (the
///   verdict flipped on one history with the timing of the SDK's cancellation).
/// - the mock's rate limit is per client address and path, not per API key.
final class ThirtySeventhTesterFindingsTests: XCTestCase {
    private static let python = TesterFixtures.python
    private static let fixtures = TesterFixtures.folder("thirty-seventh-tester")

    /// Every correct SDK passes the files, twice (before: F5's three failed in process after 5 s
    /// each, F6's failed the shipping SDK, F8's failed in about half the runs in and out of
    /// process, A-2's failed every SDK).
    func testCorrectSDKsPassTheFiles() throws {
        try TesterFixtures.assertCorrectSDKsPass("thirty-seventh-tester", count: 15, runs: 2, in: try scratchDirectory("thirty-seventh-tester"))
    }

    /// `offline_fallback` fails an SDK returning another user's evaluation or assignment object,
    /// or the persisted value in place of its own fresh answer, from a call's own request.
    func testAValueNotItsOwnAnswerFailsOfflineFallback() throws {
        let dir = try scratchDirectory("thirty-seventh-values")
        for (defect, file, field) in [("interned-flag", "f03-previous-users-flag-value-returned", "enabled"),
                                      ("interned-flag", "f06-app-exposure-outside-rollout", "enabled"),
                                      ("interned-variant", "f02-previous-users-assignment-returned", "user_id"),
                                      ("store-first", "f04-rollout-change-served-from-store", "enabled")] {
            let path = Self.fixtures.appendingPathComponent(file + ".json").path
            let (status, out) = try HarnessProcess.run(["run", path, "--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=\(defect) \(Self.python)",
                                                        "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, "\(defect): \(out)")
            XCTAssertTrue(out.contains("offline_fallback") && out.contains("but the SDK returned \(field)"), "\(defect): \(out)")
        }
    }

    /// `single_flight` fails an SDK that fetches again on a call begun after an earlier call
    /// returned the cached answer (F1: every re-render cost a request and an exposure), in plain
    /// calls and in the reference app's displays.
    func testARefetchWhereAHitWasDueFailsSingleFlight() throws {
        let dir = try scratchDirectory("thirty-seventh-hits")
        for file in ["f01-hit-sends-nothing-named-checks", "r09-app-rerender-no-duplicate-exposure"] {
            let path = Self.fixtures.appendingPathComponent(file + ".json").path
            let (status, out) = try HarnessProcess.run(["run", path, "--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=no-cache-hit \(Self.python)",
                                                        "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, "\(file): \(out)")
            XCTAssertTrue(out.contains("single_flight") && out.contains("a hit sends nothing"), "\(file): \(out)")
        }
    }

    /// A value is judged against the answer field by field: equal passes, another decision,
    /// variant or identity fails, and an empty identity field (an SDK may fill it in) is skipped.
    func testAnswerMismatchComparesTheDecisionAndIdentityFields() {
        func str(_ s: String) -> JSONValue { .string(s) }
        let answer: JSONValue = .object(["experiment_key": str("e"), "user_id": str("u\u{E9}"), "variant_id": str("v1"), "variant_name": str("control"),
                                         "is_control": .bool(true), "assigned": .bool(true), "configuration": .object(["c": .number(1)])])
        XCTAssertNil(Checks.answerMismatch(kind: "experiment", answer: answer, served: answer))
        var other = answer.objectValue!
        other["user_id"] = str("ue\u{301}")
        XCTAssertEqual(Checks.answerMismatch(kind: "experiment", answer: answer, served: .object(other))?.field, "user_id", "NFD is another user")
        other = answer.objectValue!
        other["variant_name"] = str("treatment")
        XCTAssertEqual(Checks.answerMismatch(kind: "experiment", answer: answer, served: .object(other))?.field, "variant_name")
        var empty = answer.objectValue!
        empty["user_id"] = str("")
        other = answer.objectValue!
        other["user_id"] = str("filled-in")
        XCTAssertNil(Checks.answerMismatch(kind: "experiment", answer: .object(empty), served: .object(other)), "an empty user_id may be filled in")
        XCTAssertNil(Checks.answerMismatch(kind: "flag", answer: .object(["key": str("f"), "enabled": .bool(false), "config": .null]),
                                           served: .object(["key": str("f"), "enabled": .bool(false)])))
        XCTAssertEqual(Checks.answerMismatch(kind: "flag", answer: .object(["key": str("f"), "enabled": .bool(false)]),
                                             served: .object(["key": str("f"), "enabled": .bool(true)]))?.field, "enabled")
        XCTAssertNil(Checks.answerMismatch(kind: "flag", answer: .object(["key": str("f"), "enabled": .bool(true), "config": .object(["a": .number(1)])]),
                                           served: .object(["key": str("f"), "enabled": .bool(true), "config": .object(["a": .string("Infinity")])])),
                     "configurations are not compared (each parser reads their numbers its own way)")
    }
}
