import Foundation
import ExperimentlyMock
import Experimently

/// One golden-vector check target: an input pair with everything a file says about it.
///
/// Read from the files of `golden-vectors/` (CONTRACT.md sections 2 and 6): `hash-vectors.json`
/// (the upstream cross-SDK format), `hash-extended.json` and `bucketing.json`.
public struct VectorCase: Sendable, Equatable {
    /// The file name the case comes from, e.g. `hash-vectors.json`.
    public var file: String
    /// Where in the file, e.g. `hash_vectors[3]`.
    public var location: String
    /// The user id (hashed exactly as given).
    public var userID: String
    /// The flag or experiment key.
    public var key: String
    /// The expected golden hash in [0, 1), compared within ``VectorsFile/tolerance``.
    public var expectedHash: Double
    /// The expected MD5 of `"{user}:{key}"`, 32 lowercase hex digits, when the file gives it.
    public var md5Hex: String?
    /// Rollout decisions `(percent, included)`: included when hash < percent / 100.
    public var rollouts: [Rollout]
    /// The experiment bucket `floor(hash * 100)`, when the file gives it.
    public var bucket: Int?
    /// The md5-mod100 flag bucket, when the file gives it.
    public var md5Mod100: Int?

    /// One rollout decision.
    public struct Rollout: Sendable, Equatable {
        /// The rollout percentage, 0...100.
        public var percent: Int
        /// Whether the user is inside that rollout.
        public var included: Bool
    }
}

/// Reads and validates golden-vector files, with errors naming the file, the JSON path and what
/// was expected there.
public enum VectorsFile {
    /// The tolerance for hash comparisons (CONTRACT.md section 6).
    public static let tolerance = 1e-10

    /// The file names read from a vectors folder, in order; only the first is required.
    public static let fileNames = ["hash-vectors.json", "hash-extended.json", "bucketing.json"]

    /// A malformed vectors file or a missing folder (exit 64).
    public struct Malformed: Error, CustomStringConvertible, Equatable {
        /// "`file`: at `$.path`: expected ..., found ...".
        public let description: String
    }

    /// Loads every case from `path`: a folder holding the files of ``fileNames`` (the first
    /// required), or a single file in the upstream `hash-vectors.json` format.
    ///
    /// - Returns: the cases and the files read.
    /// - Throws: ``Malformed`` naming the file and JSON path of the first problem.
    public static func load(_ path: String) throws -> (cases: [VectorCase], files: [String]) {
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDir) else {
            throw Malformed(description: "\(path): no such folder (give --vectors the golden-vectors folder of this package)")
        }
        if !isDir.boolValue {
            let all = try cases(in: read(path), file: path, name: (path as NSString).lastPathComponent)
            if all.isEmpty { throw Malformed(description: "\(path): holds no vectors at all: a run would check nothing (CONTRACT.md section 6: the upstream file has 9 hash vectors and 2 rollout vectors)") }
            return (all, [path])
        }
        var all: [VectorCase] = []
        var files: [String] = []
        for (i, name) in fileNames.enumerated() {
            let file = (path as NSString).appendingPathComponent(name)
            guard FileManager.default.fileExists(atPath: file) else {
                if i == 0 { throw Malformed(description: "\(file): missing (a vectors folder must hold hash-vectors.json)") }
                continue
            }
            all += try cases(in: read(file), file: file, name: name)
            files.append(file)
        }
        if all.isEmpty { throw Malformed(description: "\(path): holds no vectors at all: a run would check nothing (CONTRACT.md section 6: the upstream file has 9 hash vectors and 2 rollout vectors)") }
        return (all, files)
    }

    /// Refuses a case whose own values disagree (CONTRACT.md section 6): `md5_hex` against the MD5
    /// of its own `"{user_id}:{key}"` and, without one, `expected_hash` against its hash;
    /// `expected_hash` against the `md5_hex` it comes from (its first 4 bytes little-endian over 2^32, within
    /// ``tolerance``), `md5_mod100` against that digest (128-bit big-endian, mod 100), `bucket`
    /// against `floor(expected_hash * 100)`, and each rollout decision against `expected_hash <
    /// percent / 100`; a value within the tolerance of a boundary is not held against the file.
    /// Before, a file whose `expected_hash` contradicted its own `md5_hex` blamed a correct SDK
    /// (a sixtieth outside tester).
    static func checkConsistent(_ c: VectorCase, file: String, at: String) throws {
        func refuse(_ what: String) -> Malformed { Malformed(description: "\(file): at \(at): \(what) (CONTRACT.md section 6): the file contradicts itself") }
        // Its values against its own input, by this package's MD5 (checked against the upstream
        // file's known values): a vector whose digest or hash is not of its user id and key would
        // blame a correct SDK (a sixty-third outside tester).
        let digest = FeatureFlagEvaluator.md5Hex(c.userID, flagKey: c.key)
        if let hex = c.md5Hex, hex != digest {
            throw refuse("md5_hex \(hex) is not the MD5 of its own \"{user_id}:{key}\", which is \(digest)")
        }
        let own = FeatureFlagEvaluator.hashUser(c.userID, flagKey: c.key)
        if c.md5Hex == nil, abs(own - c.expectedHash) > tolerance {
            throw refuse("expected_hash \(c.expectedHash) is not the hash of its own user id and key, which is \(own)")
        }
        if let hex = c.md5Hex {
            let bytes = stride(from: 0, to: 8, by: 2).map { UInt32(hex.dropFirst($0).prefix(2), radix: 16)! }
            let fromDigest = Double(bytes[0] | bytes[1] << 8 | bytes[2] << 16 | bytes[3] << 24) / 4_294_967_296
            if abs(fromDigest - c.expectedHash) > tolerance {
                throw refuse("expected_hash \(c.expectedHash) disagrees with its md5_hex \(hex), whose first 4 bytes give \(fromDigest)")
            }
            if let mod = c.md5Mod100 {
                let fromHex = hex.reduce(0) { ($0 * 16 + Int(String($1), radix: 16)!) % 100 }
                if fromHex != mod { throw refuse("md5_mod100 \(mod) disagrees with its md5_hex \(hex), which gives \(fromHex)") }
            }
        }
        let scaled = c.expectedHash * 100
        if let bucket = c.bucket, abs(scaled - scaled.rounded()) > tolerance * 100, bucket != Int(scaled.rounded(.down)) {
            throw refuse("bucket \(bucket) disagrees with expected_hash \(c.expectedHash), which gives bucket \(Int(scaled.rounded(.down)))")
        }
        for r in c.rollouts where abs(c.expectedHash - Double(r.percent) / 100) > tolerance && r.included != (c.expectedHash < Double(r.percent) / 100) {
            throw refuse("rollout_\(r.percent)_percent \(r.included) disagrees with expected_hash \(c.expectedHash) (included when the hash is below \(r.percent)/100)")
        }
    }

    static func read(_ file: String) throws -> JSONValue {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: file)) } catch {
            throw Malformed(description: "\(file): cannot be read (\(error.localizedDescription))")
        }
        do { return try JSONValue.parse(data).value } catch {
            throw Malformed(description: "\(file): not valid JSON: \(error)")
        }
    }

    /// The cases of one parsed file; the shape is chosen by the members present.
    static func cases(in root: JSONValue, file: String, name: String) throws -> [VectorCase] {
        let reader = Reader(file: file)
        let object = try reader.object(root, "$")
        var out: [VectorCase] = []
        if object["assignments"] != nil || object["evaluations"] != nil {
            for (i, item) in try reader.array(object["assignments"] ?? .array([]), "$.assignments").enumerated() {
                let at = "$.assignments[\(i)]"
                let o = try reader.object(item, at)
                let hash = try reader.hash(o, "expected_hash", at)
                let bucket = try reader.int(o, "bucket", at, 0...99)
                out.append(VectorCase(file: name, location: "assignments[\(i)]", userID: try reader.string(o, "user_id", at),
                                      key: try reader.string(o, "experiment_key", at), expectedHash: hash, md5Hex: nil,
                                      rollouts: [], bucket: bucket, md5Mod100: nil))
            }
            for (i, item) in try reader.array(object["evaluations"] ?? .array([]), "$.evaluations").enumerated() {
                let at = "$.evaluations[\(i)]"
                let o = try reader.object(item, at)
                out.append(VectorCase(file: name, location: "evaluations[\(i)]", userID: try reader.string(o, "user_id", at),
                                      key: try reader.string(o, "flag_key", at), expectedHash: try reader.hash(o, "expected_hash", at),
                                      md5Hex: try reader.md5(o, at), rollouts: [], bucket: nil,
                                      md5Mod100: try reader.int(o, "md5_mod100", at, 0...99)))
            }
            for c in out { try checkConsistent(c, file: file, at: "$." + c.location) }
            return out
        }
        guard object["hash_vectors"] != nil else {
            throw Malformed(description: "\(file): at $: expected \"hash_vectors\" (a hash vectors file) or \"assignments\"/\"evaluations\" (a bucketing file)")
        }
        for (i, item) in try reader.array(object["hash_vectors"]!, "$.hash_vectors").enumerated() {
            let at = "$.hash_vectors[\(i)]"
            let o = try reader.object(item, at)
            out.append(VectorCase(file: name, location: "hash_vectors[\(i)]", userID: try reader.string(o, "user_id", at),
                                  key: try reader.string(o, "flag_key", at), expectedHash: try reader.hash(o, "expected_hash", at),
                                  md5Hex: try reader.md5(o, at), rollouts: [], bucket: nil, md5Mod100: nil))
        }
        for (i, item) in try reader.array(object["rollout_vectors"] ?? .array([]), "$.rollout_vectors").enumerated() {
            let at = "$.rollout_vectors[\(i)]"
            let o = try reader.object(item, at)
            var rollouts: [VectorCase.Rollout] = []
            for (k, v) in o where k.hasPrefix("rollout_") && k.hasSuffix("_percent") {
                let digits = k.dropFirst("rollout_".count).dropLast("_percent".count)
                guard let pct = Int(digits), (0...100).contains(pct) else {
                    throw Malformed(description: "\(file): at \(at).\(k): expected a key rollout_<0..100>_percent, found \(k)")
                }
                guard case .bool(let included) = v else {
                    throw Malformed(description: "\(file): at \(at).\(k): expected a boolean, found \(v.typeName)")
                }
                rollouts.append(.init(percent: pct, included: included))
            }
            if rollouts.isEmpty { throw Malformed(description: "\(file): at \(at): expected at least one rollout_<N>_percent boolean") }
            out.append(VectorCase(file: name, location: "rollout_vectors[\(i)]", userID: try reader.string(o, "user_id", at),
                                  key: try reader.string(o, "flag_key", at), expectedHash: try reader.hash(o, "expected_hash", at),
                                  md5Hex: nil, rollouts: rollouts.sorted { $0.percent < $1.percent }, bucket: nil, md5Mod100: nil))
        }
        for c in out { try checkConsistent(c, file: file, at: "$." + c.location) }
        return out
    }

    struct Reader {
        let file: String

        func fail(_ at: String, _ expected: String, _ found: JSONValue?) -> Malformed {
            Malformed(description: "\(file): at \(at): expected \(expected), found \(found.map(describe) ?? "nothing (the member is missing)")")
        }

        func describe(_ v: JSONValue) -> String {
            switch v {
            case .string(let s): return "the string \((s.count > 40 ? String(s.prefix(40)) + "..." : s).debugDescription)"
            case .number(let n): return "the number \(n)"
            default: return v.typeName
            }
        }

        func object(_ v: JSONValue, _ at: String) throws -> [String: JSONValue] {
            guard let o = v.objectValue else { throw fail(at, "an object", v) }
            return o
        }

        func array(_ v: JSONValue, _ at: String) throws -> [JSONValue] {
            guard let a = v.arrayValue else { throw fail(at, "an array", v) }
            return a
        }

        func string(_ o: [String: JSONValue], _ key: String, _ at: String) throws -> String {
            guard let s = o[key]?.stringValue else { throw fail("\(at).\(key)", "a string", o[key]) }
            return s
        }

        func hash(_ o: [String: JSONValue], _ key: String, _ at: String) throws -> Double {
            guard let n = o[key]?.numberValue, n >= 0, n < 1 else { throw fail("\(at).\(key)", "a number in [0, 1)", o[key]) }
            return n
        }

        func int(_ o: [String: JSONValue], _ key: String, _ at: String, _ range: ClosedRange<Int>) throws -> Int {
            guard let n = o[key]?.numberValue, n == n.rounded(), n >= Double(range.lowerBound), n <= Double(range.upperBound) else {
                throw fail("\(at).\(key)", "a whole number in \(range.lowerBound)...\(range.upperBound)", o[key])
            }
            return Int(n)
        }

        func md5(_ o: [String: JSONValue], _ at: String) throws -> String? {
            guard let v = o["md5_hex"] else { return nil }
            guard let s = v.stringValue, s.count == 32, s.allSatisfy({ $0.isHexDigit }) else {
                throw fail("\(at).md5_hex", "32 hex digits", v)
            }
            return s.lowercased()
        }
    }
}
