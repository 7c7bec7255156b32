import XCTest
import Foundation
@testable import Experimently

/// The committed golden-vector files (produced by `golden-vectors/generate.py` with hashlib)
/// against the SDK's hash within 1e-10 (CONTRACT.md sections 2 and 6), against the upstream file,
/// and against the generator itself (byte for byte).
final class GoldenVectorFileTests: XCTestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let folder = root.appendingPathComponent("golden-vectors")
    static let tolerance = 1e-10

    /// Any JSON value, decoded with `JSONDecoder`: on Linux `JSONSerialization` parses
    /// 0.6927449859213084 as 0.6927449859213082 (a few ULPs off), `JSONDecoder` exactly.
    enum J: Decodable, Equatable {
        case null, bool(Bool), number(Double), string(String), array([J]), object([String: J])

        init(from decoder: Decoder) throws {
            let c = try decoder.singleValueContainer()
            if c.decodeNil() { self = .null } else if let b = try? c.decode(Bool.self) { self = .bool(b) }
            else if let n = try? c.decode(Double.self) { self = .number(n) } else if let s = try? c.decode(String.self) { self = .string(s) }
            else if let a = try? c.decode([J].self) { self = .array(a) } else { self = .object(try c.decode([String: J].self)) }
        }

        subscript(_ key: String) -> Any? {
            guard case .object(let o) = self, let v = o[key] else { return nil }
            switch v {
            case .null: return nil
            case .bool(let b): return b
            case .number(let n): return n == n.rounded() && abs(n) < 1e15 && key != "expected_hash" ? Int(n) as Any : n
            case .string(let s): return s
            case .array(let a): return a.map { item -> Any in if case .string(let s) = item { return s }; return item }
            case .object: return v
            }
        }

        var keys: Set<String> { if case .object(let o) = self { return Set(o.keys) }; return [] }
    }

    func load(_ name: String) throws -> J {
        try JSONDecoder().decode(J.self, from: Data(contentsOf: Self.folder.appendingPathComponent(name)))
    }

    func list(_ object: J, _ key: String) throws -> [J] {
        try XCTUnwrap(object[key] as? [J], key)
    }

    /// MD5 of the joined input as a 128-bit big-endian integer, mod 100, from the SDK's MD5.
    func md5Mod100(_ user: String, _ key: String) -> Int {
        FeatureFlagEvaluator.md5Hex(user, flagKey: key).reduce(0) { ($0 * 16 + $1.hexDigitValue!) % 100 }
    }

    func checkHashVectors(_ vectors: [J], file: String) throws {
        for (i, v) in vectors.enumerated() {
            let user = try XCTUnwrap(v["user_id"] as? String), key = try XCTUnwrap(v["flag_key"] as? String)
            let expected = try XCTUnwrap(v["expected_hash"] as? Double)
            let where_ = "\(file) hash_vectors[\(i)] (\(user.debugDescription), \(key.debugDescription))"
            XCTAssertEqual(FeatureFlagEvaluator.hashUser(user, flagKey: key), expected, accuracy: Self.tolerance, where_)
            XCTAssertEqual(FeatureFlagEvaluator.md5Hex(user, flagKey: key), v["md5_hex"] as? String, where_)
            XCTAssertFalse((v["description"] as? String ?? "").isEmpty, where_)
        }
    }

    func testHashVectorsFileHasTheNineAndTwoInputsAndMatchesTheSDK() throws {
        let file = try load("hash-vectors.json")
        let hashes = try list(file, "hash_vectors"), rollouts = try list(file, "rollout_vectors")
        XCTAssertEqual(hashes.map { "\($0["user_id"]!)|\($0["flag_key"]!)" }, [
            "user-123|my-flag", "alice|dark-mode", "bob|new-checkout", "user-789|beta-feature", "test-user|flag-key",
            "|empty-user", "a|b", "user-001|exp-abc", "user-002|exp-abc",
        ])
        XCTAssertEqual(rollouts.map { "\($0["user_id"]!)|\($0["flag_key"]!)" }, ["alice|dark-mode", "test-user|flag-key"])
        let algorithm = try XCTUnwrap(file["algorithm"] as? J)
        XCTAssertEqual(algorithm["divisor"] as? Int, 4_294_967_296)
        XCTAssertEqual((algorithm["steps"] as? [String])?.count, 5)
        try checkHashVectors(hashes, file: "hash-vectors.json")
        XCTAssertEqual(hashes[0]["expected_hash"] as? Double, 0.6927449859213084)
        XCTAssertEqual(hashes[0]["md5_hex"] as? String, "43bc57b1e81dec71c5242122ac05170f")
        for r in rollouts {
            let user = r["user_id"] as! String, key = r["flag_key"] as! String
            let hash = FeatureFlagEvaluator.hashUser(user, flagKey: key)
            XCTAssertEqual(hash, try XCTUnwrap(r["expected_hash"] as? Double), accuracy: Self.tolerance)
            for pct in [3, 5, 50, 100] {
                XCTAssertEqual(r["rollout_\(pct)_percent"] as? Bool, hash < Double(pct) / 100, "\(user) at \(pct)%")
            }
        }
        XCTAssertEqual(rollouts.map { $0["rollout_5_percent"] as? Bool }, [true, false])
        XCTAssertEqual(rollouts.map { $0["rollout_3_percent"] as? Bool }, [false, false])
    }

    func testExtendedFileCoversWhereImplementationsPartWaysAndMatchesTheSDK() throws {
        let vectors = try list(try load("hash-extended.json"), "hash_vectors")
        XCTAssertGreaterThanOrEqual(vectors.count, 50)
        let categories = Set(vectors.compactMap { $0["category"] as? String })
        XCTAssertEqual(categories, ["nfc-nfd", "latin-1", "emoji", "cjk", "rtl", "whitespace", "control", "long", "separator", "empty", "ends"])
        try checkHashVectors(vectors, file: "hash-extended.json")
        // NFC and NFD of one name are different inputs with different values (compared by bytes:
        // Swift's String == would call them equal).
        let nfc = try XCTUnwrap(vectors.first { ($0["description"] as? String)?.contains("(NFC, U+00E9)") == true })
        let nfd = try XCTUnwrap(vectors.first { ($0["description"] as? String)?.contains("decomposed (NFD") == true })
        XCTAssertNotEqual(Array((nfc["user_id"] as! String).utf8), Array((nfd["user_id"] as! String).utf8))
        XCTAssertNotEqual(nfc["expected_hash"] as? Double, nfd["expected_hash"] as? Double)
        // Values near both ends, and the input byte counts the generator recorded.
        let hashes = vectors.compactMap { $0["expected_hash"] as? Double }
        XCTAssertLessThan(hashes.min()!, 1e-5)
        XCTAssertGreaterThan(hashes.max()!, 0.99995)
        for v in vectors {
            let joined = (v["user_id"] as! String) + ":" + (v["flag_key"] as! String)
            XCTAssertEqual(v["input_utf8_bytes"] as? Int, joined.utf8.count, joined.debugDescription)
        }
        // The separator is not escaped: ("a:b", "c") and ("a", "b:c") hash alike.
        XCTAssertEqual(FeatureFlagEvaluator.hashUser("a:b", flagKey: "c"), FeatureFlagEvaluator.hashUser("a", flagKey: "b:c"))
    }

    func testBucketingFileMatchesTheSDKHashAndTheContractValues() throws {
        let file = try load("bucketing.json")
        var variants: [String: [(name: String, allocation: Int)]] = [:]
        for e in try list(file, "experiments") {
            variants[e["key"] as! String] = (e["variants"] as! [J]).map { ($0["name"] as! String, $0["allocation"] as! Int) }
        }
        var known: [String: (Int, String)] = [:]
        let assignments = try list(file, "assignments")
        XCTAssertGreaterThanOrEqual(assignments.count, 100)
        for a in assignments {
            let user = a["user_id"] as! String, key = a["experiment_key"] as! String
            let hash = FeatureFlagEvaluator.hashUser(user, flagKey: key)
            XCTAssertEqual(hash, try XCTUnwrap(a["expected_hash"] as? Double), accuracy: Self.tolerance, "\(user) in \(key)")
            let bucket = Int((hash * 100).rounded(.down))
            XCTAssertEqual(a["bucket"] as? Int, bucket, "\(user) in \(key)")
            var cumulative = 0
            let list = try XCTUnwrap(variants[key])
            var chosen = list.last!.name
            for v in list {
                cumulative += v.allocation
                if bucket < cumulative { chosen = v.name; break }
            }
            XCTAssertEqual(a["variant"] as? String, chosen, "\(user) in \(key)")
            if key == "sdk_contract_ab" { known[user] = (bucket, chosen) }
        }
        XCTAssertEqual(known["user-1"]?.0, 8); XCTAssertEqual(known["user-1"]?.1, "control")
        XCTAssertEqual(known["user-2"]?.0, 73); XCTAssertEqual(known["user-2"]?.1, "treatment")
        XCTAssertEqual(known["bob"]?.0, 42); XCTAssertEqual(known["bob"]?.1, "control")
        XCTAssertEqual(known["user-123"]?.0, 84); XCTAssertEqual(known["user-123"]?.1, "treatment")

        var rollout: [String: Int] = [:]
        for f in try list(file, "flags") { rollout[f["key"] as! String] = f["rollout_percentage"] as? Int }
        let evaluations = try list(file, "evaluations")
        XCTAssertGreaterThanOrEqual(evaluations.count, 100)
        for e in evaluations {
            let user = e["user_id"] as! String, key = e["flag_key"] as! String
            XCTAssertEqual(e["md5_hex"] as? String, FeatureFlagEvaluator.md5Hex(user, flagKey: key))
            XCTAssertEqual(e["md5_mod100"] as? Int, md5Mod100(user, key), "\(user) / \(key)")
            XCTAssertEqual(e["enabled"] as? Bool, md5Mod100(user, key) < rollout[key]!, "\(user) / \(key)")
        }
        XCTAssertEqual(md5Mod100("user-123", "my-flag"), 79)
        let pinned = try XCTUnwrap(evaluations.first { $0["user_id"] as? String == "user-123" && $0["flag_key"] as? String == "my-flag" })
        XCTAssertEqual(pinned["md5_mod100"] as? Int, 79)
        XCTAssertEqual(pinned["enabled"] as? Bool, false, "bucket 79 is outside a 79% rollout")
        let edge = try XCTUnwrap(evaluations.first { $0["user_id"] as? String == "user-123" && $0["flag_key"] as? String == "my-flag-80" })
        XCTAssertNotNil(edge["md5_mod100"])
    }

    /// The upstream file as published (`<repo>/../shared/upstream/golden-vectors.json`), compared
    /// key by key and value by value; descriptions are ours, so only their presence is compared.
    func testAgreesWithTheUpstreamFile() throws {
        let upstreamURL = Self.root.deletingLastPathComponent().appendingPathComponent("shared/upstream/golden-vectors.json")
        guard let data = try? Data(contentsOf: upstreamURL) else {
            throw XCTSkip("the upstream golden-vectors.json is not at \(upstreamURL.path) (CI puts a copy of shared/ beside the clone)")
        }
        let upstream = try JSONDecoder().decode(J.self, from: data)
        let ours = try load("hash-vectors.json")
        XCTAssertEqual(upstream.keys, ours.keys)
        let ua = try XCTUnwrap(upstream["algorithm"] as? J), oa = try XCTUnwrap(ours["algorithm"] as? J)
        XCTAssertEqual(ua.keys, oa.keys)
        XCTAssertEqual(ua["divisor"] as? Int, oa["divisor"] as? Int)
        XCTAssertEqual(ua["name"] as? String, oa["name"] as? String)
        XCTAssertEqual((ua["steps"] as? [Any])?.count, (oa["steps"] as? [Any])?.count)
        for section in ["hash_vectors", "rollout_vectors"] {
            let u = try list(upstream, section), o = try list(ours, section)
            XCTAssertEqual(u.count, o.count, section)
            for (i, (a, b)) in zip(u, o).enumerated() {
                XCTAssertEqual(a.keys, b.keys, "\(section)[\(i)] keys")
                guard case .object(let ao) = a, case .object(let bo) = b else { XCTFail("\(section)[\(i)] is not an object"); continue }
                for key in ao.keys.sorted() where key != "description" {
                    // Exact: both files publish hashes rounded to 16 decimal places.
                    XCTAssertEqual(ao[key], bo[key], "\(section)[\(i)].\(key)")
                }
                if case .string(let d)? = bo["description"] { XCTAssertFalse(d.isEmpty) } else { XCTFail("\(section)[\(i)] has no description") }
            }
        }
        XCTAssertEqual(try list(upstream, "hash_vectors").count, 9)
        XCTAssertEqual(try list(upstream, "rollout_vectors").count, 2)
    }

    /// `generate.py --check`: the committed files are exactly what the hashlib generator writes.
    func testGeneratorReproducesTheCommittedFilesByteForByte() throws {
        let python = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            .map { URL(fileURLWithPath: String($0)).appendingPathComponent("python3") }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
        guard let python else { throw XCTSkip("python3 is not on PATH; generate.py --check cannot run") }
        let p = Process()
        p.executableURL = python
        p.arguments = [Self.folder.appendingPathComponent("generate.py").path, "--check"]
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile(), e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, String(decoding: o + e, as: UTF8.self))
        XCTAssertEqual(String(decoding: o, as: UTF8.self), "generate.py --check: 3 files match\n")
    }
}
