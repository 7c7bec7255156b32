import XCTest
import Foundation
@testable import ExperimentlyMock
@testable import ContractHarness

/// Findings of the thirtieth outside tester (`/work/attack31/FINDINGS.md`: field races in other
/// areas, on six SDKs): `offline_fallback` compared only the variant name (another user's or
/// another key's entry passed) and let a newer request's success excuse a status error; `fan_out`
/// tried every permutation of alike calls (`AttributionTests`).
final class ThirtiethTesterFindingsTests: XCTestCase {
    private static let python = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
    private static func scenario(_ name: String) -> String { Repository.root.appendingPathComponent("scenarios/\(name).json").path }

    /// The three new files pass on correct SDKs and fail the Python example's matching defects.
    func testAFallbackServesTheEntryOfThatSameUserAndKeyAndNeverHidesAStatusError() throws {
        let dir = try scratchDirectory("thirtieth-fallback")
        let exactKey = Self.scenario("field-fallback-serves-the-exact-keys-configuration")
        let late429 = Self.scenario("field-429-on-old-request-while-newer-one-succeeds")
        let otherUser = Self.scenario("field-fallback-never-another-users-entry-same-variant")
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", Self.python]] {
            let (status, out) = try HarnessProcess.run(["run", exactKey, late429, otherUser] + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
        }
        for (defect, file, says) in [("store-key-casefold", exactKey, "another entry's value"),
                                     ("no-fallback-429", late429, "a value is persisted")] {
            let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=\(defect) \(Self.python)",
                                                        "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, "\(defect): \(out)")
            XCTAssertTrue(out.contains("offline_fallback") && out.contains(says), "\(defect): \(out)")
        }
    }

    /// The comparison itself: a served value whose user or configuration is another entry's fails,
    /// fields the entry lacks or holds with another type are not compared, and a success of
    /// another request does not explain a status error.
    func testFallbackProblemComparesTheEntryAndStatusErrors() {
        let stored: JSONValue = .object(["experiment_key": .string("exp"), "user_id": .string("u1"), "variant_name": .string("control"),
                                         "is_control": .bool(true), "configuration": .object(["color": .string("blue")])])
        func record(_ seq: Int, _ status: Int, response: JSONValue? = nil) -> RequestRecord {
            RequestRecord(seq: seq, client: "main", method: "POST", path: "/api/v1/tracking/assign", target: "/api/v1/tracking/assign", query: [:],
                          headers: [:], body: nil, status: status, response: response, fault: nil, parked: false, cancelled: false, answered: true)
        }
        let failed = record(2, 503)
        func problem(_ served: JSONValue, _ entry: JSONValue = stored) -> String? {
            Checks.fallbackProblem(label: "op", kind: "experiment", user: "u1", key: "exp", record: failed,
                                   outcome: .object(["value": served]), stored: entry)
        }
        XCTAssertNil(problem(stored))
        XCTAssertNotNil(problem(.object(["variant_name": .string("control"), "user_id": .string("bob")])))
        XCTAssertNotNil(problem(.object(["variant_name": .string("control"), "configuration": .object(["color": .string("red")])])))
        XCTAssertNil(problem(.object(["variant_name": .string("control")])), "fields the SDK does not return are not compared")
        XCTAssertNil(problem(.object(["variant_name": .string("control"), "user_id": .string("u1")]),
                             .object(["variant_name": .string("control"), "user_id": .number(1)])), "a field of another type is not compared")
        // The same comparison judges cache hits (`no_stale_write`): a hit is the cached entry of
        // that user and key, not another with the same variant.
        XCTAssertEqual(Checks.otherEntryField(kind: "experiment", entry: stored, served: .object(["variant_name": .string("control"), "experiment_key": .string("Exp")])), "experiment_key")
        XCTAssertNil(Checks.otherEntryField(kind: "experiment", entry: stored, served: stored))
        XCTAssertEqual(Checks.otherEntryField(kind: "flag", entry: .object(["key": .string("f"), "enabled": .bool(true), "config": .object([:])]),
                                              served: .object(["key": .string("F"), "enabled": .bool(true)])), "key")
        let success = record(3, 200, response: stored)
        let status: JSONValue = .object(["error": .string("serverError"), "status": .number(429)])
        XCTAssertNotNil(Checks.fallbackProblem(label: "op", kind: "experiment", user: "u1", key: "exp", record: success, outcome: status, stored: stored))
        // Nor a transport error or a timeout (a thirty-first outside tester); a decodingError may
        // come of a stricter reading of the body.
        XCTAssertNotNil(Checks.fallbackProblem(label: "op", kind: "experiment", user: "u1", key: "exp", record: success,
                                               outcome: .object(["error": .string("timeout")]), stored: stored))
        XCTAssertNil(Checks.fallbackProblem(label: "op", kind: "experiment", user: "u1", key: "exp", record: success,
                                            outcome: .object(["error": .string("decodingError")]), stored: stored))
    }

    /// An entry at exactly stored + TTL has expired when the tie is certain (whole eighths of a
    /// second: every SDK's arithmetic lands on it), and stays either way where rounding decides.
    func testATieAtTheTTLIsExpiredWhenNoRoundingCanDecideIt() throws {
        XCTAssertTrue(Checks.CacheModel.onEighths(60))
        XCTAssertTrue(Checks.CacheModel.onEighths(0.375))
        XCTAssertFalse(Checks.CacheModel.onEighths(0.1))
        XCTAssertFalse(Checks.CacheModel.onEighths(0.1 + 0.2))
        let dir = try scratchDirectory("thirtieth-ttl")
        let file = Self.scenario("field-ttl-exactly-at-expiry-refetches")
        XCTAssertEqual(try HarnessProcess.run(["run", file, "--sdk-command", Self.python, "--verdict", "v.json"], in: dir).status, 0)
        let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=ttl-inclusive \(Self.python)",
                                                    "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
    }
}
