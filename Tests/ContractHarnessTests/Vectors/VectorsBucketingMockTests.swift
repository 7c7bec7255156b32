import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// `golden-vectors/bucketing.json` against the mock backend: fixtures built from the file, every
/// assignment through `MockBackend.handle` (POST /assign) and every flag evaluation (GET evaluate)
/// answers what the hashlib generator computed (CONTRACT.md section 2).
final class VectorsBucketingMockTests: XCTestCase {
    static let folder = Repository.root.appendingPathComponent("golden-vectors")

    func file() throws -> [String: JSONValue] {
        let data = try Data(contentsOf: Self.folder.appendingPathComponent("bucketing.json"))
        return try XCTUnwrap(JSONValue.parse(data).value.objectValue)
    }

    func fixtures(_ file: [String: JSONValue]) throws -> Fixtures {
        let experiments = try XCTUnwrap(file["experiments"]?.arrayValue).map { e -> Experiment in
            let key = e["key"]!.stringValue!
            let variants = e["variants"]!.arrayValue!.map { v in
                Variant(id: "\(key)-\(v["name"]!.stringValue!)", name: v["name"]!.stringValue!, allocation: Int(v["allocation"]!.numberValue!),
                        isControl: v["is_control"] == .bool(true))
            }
            return Experiment(key: key, variants: variants)
        }
        let flags = try XCTUnwrap(file["flags"]?.arrayValue).map {
            Flag(key: $0["key"]!.stringValue!, rolloutPercentage: Int($0["rollout_percentage"]!.numberValue!))
        }
        return Fixtures(apiKeys: [APIKey(key: "k")], experiments: experiments, flags: flags, rateLimit: RateLimit(limit: 1_000_000))
    }

    static let headers: [(name: String, value: String)] = [("X-API-Key", "k"), ("Content-Type", "application/json")]

    static func percentEncoded(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: "\u{0}"..."\u{7f}"))
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed)!
    }

    func testEveryAssignmentThroughHandleLandsInTheFilesVariant() async throws {
        let file = try file()
        let backend = MockBackend(fixtures: try fixtures(file))
        let cases = try XCTUnwrap(file["assignments"]?.arrayValue)
        XCTAssertGreaterThanOrEqual(cases.count, 100)
        for c in cases {
            let user = c["user_id"]!.stringValue!, key = c["experiment_key"]!.stringValue!
            XCTAssertEqual(MockBucketing.experimentBucket(userID: user, experimentKey: key), Int(c["bucket"]!.numberValue!), "\(user) in \(key)")
            XCTAssertEqual(MockBucketing.hash(userID: user, key: key), c["expected_hash"]!.numberValue!, accuracy: VectorsFile.tolerance)
            let body = JSONValue.object(["experiment_key": .string(key), "user_id": .string(user)]).serialized()
            let outcome = await backend.handle(MockRequest(method: "POST", target: "/api/v1/tracking/assign", headers: Self.headers, body: body))
            guard case .respond(let r) = outcome else { XCTFail("no response for \(user) in \(key): \(outcome)"); continue }
            XCTAssertEqual(r.status, 200, String(decoding: r.body, as: UTF8.self))
            let answer = try JSONValue.parse(r.body).value
            XCTAssertEqual(answer["variant_name"]?.stringValue, c["variant"]?.stringValue, "\(user) in \(key)")
            XCTAssertEqual(answer["reason"]?.stringValue, "assigned")
        }
        backend.shutdown()
    }

    func testEveryFlagEvaluationThroughHandleMatchesMd5Mod100() async throws {
        let file = try file()
        let backend = MockBackend(fixtures: try fixtures(file))
        let cases = try XCTUnwrap(file["evaluations"]?.arrayValue)
        XCTAssertGreaterThanOrEqual(cases.count, 100)
        var enabledCount = 0
        for c in cases {
            let user = c["user_id"]!.stringValue!, key = c["flag_key"]!.stringValue!
            XCTAssertEqual(MockBucketing.flagBucket(userID: user, flagKey: key), Int(c["md5_mod100"]!.numberValue!), "\(user) / \(key)")
            let target = "/api/v1/feature-flags/evaluate/\(Self.percentEncoded(key))?user_id=\(Self.percentEncoded(user))"
            let outcome = await backend.handle(MockRequest(method: "GET", target: target, headers: Self.headers))
            guard case .respond(let r) = outcome else { XCTFail("no response for \(user) / \(key)"); continue }
            XCTAssertEqual(r.status, 200, String(decoding: r.body, as: UTF8.self))
            let answer = try JSONValue.parse(r.body).value
            XCTAssertEqual(answer["enabled"], c["enabled"], "\(user) / \(key)")
            if answer["enabled"] == .bool(true) { enabledCount += 1 }
        }
        XCTAssertGreaterThan(enabledCount, 0)
        XCTAssertLessThan(enabledCount, cases.count, "the file must have disabled cases too")
        backend.shutdown()
    }

    func testTheContractPinsHold() throws {
        XCTAssertEqual(MockBucketing.flagBucket(userID: "user-123", flagKey: "my-flag"), 79)
        for (user, bucket) in [("user-1", 8), ("user-2", 73), ("bob", 42), ("user-123", 84)] {
            XCTAssertEqual(MockBucketing.experimentBucket(userID: user, experimentKey: "sdk_contract_ab"), bucket, user)
        }
    }
}
