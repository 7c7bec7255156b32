import Foundation
import ExperimentlyMock

/// Finds object keys written twice in one JSON object, which `JSONValue`, `JSONSerialization` and
/// `JSONDecoder` all accept silently (the last one wins), so a scenario file could state an
/// expectation that is never read.
///
/// RFC 8259 section 4 says names "SHOULD be unique"; scenario files require it. Two keys are the
/// same when their decoded strings are identical scalar for scalar, and also when they are merely
/// canonically equivalent (NFC and NFD spellings): the parsed object, keyed by Swift `String`,
/// would keep only one of them.
enum DuplicateKeys {
    /// One key written twice: where (the JSON path of the second occurrence) and how.
    struct Duplicate: Equatable {
        /// The JSON path of the second occurrence, e.g. `$.steps[2].expect`.
        var path: String
        /// The key as decoded.
        var key: String
        /// `true` when the two spellings differ in scalars but are canonically equivalent.
        var equivalentOnly: Bool
    }

    /// The first duplicate key in `bytes`, which must already be valid JSON (call after a
    /// successful `JSONValue.parse`); `nil` when every object's keys are unique. The mock's
    /// `JSONDuplicateKey` decides (one rule for scenario files, fault files and the admin API).
    static func first(in bytes: [UInt8]) -> Duplicate? {
        JSONDuplicateKey.first(in: Data(bytes)).map { Duplicate(path: $0.path, key: $0.key, equivalentOnly: $0.equivalentOnly) }
    }

    /// The first integer literal (no fraction, no exponent) beyond ±2^53 (9007199254740992) in
    /// `bytes`, which must already be valid JSON: its JSON path and text; `nil` when there is none.
    ///
    /// The backend (FastAPI/pydantic, Python's `json`) keeps such an integer exactly, while the
    /// harness and the mock hold numbers as doubles (exact only up to 2^53), so a fixture or an
    /// expectation with one would silently mean another number; scenario files refuse it.
    static func firstLargeInteger(in bytes: [UInt8]) -> (path: String, text: String)? {
        largeIntegers(in: bytes).first
    }

    /// Every integer literal beyond ±2^53 in `bytes` (valid JSON), in document order: its JSON
    /// path and text (a journal lists each request that holds one).
    static func largeIntegers(in bytes: [UInt8]) -> [(path: String, text: String)] {
        var scanner = Scanner(bytes: bytes)
        scanner.value(path: "$")
        return scanner.largeIntegers
    }

    /// Whether `token` is an integer literal whose magnitude exceeds 2^53.
    static func isLargeInteger(_ token: ArraySlice<UInt8>) -> Bool {
        var digits = token.drop { $0 == UInt8(ascii: "-") }
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return false }
        digits = digits.drop { $0 == 0x30 }
        let limit = Array("9007199254740992".utf8)
        if digits.count != limit.count { return digits.count > limit.count }
        return Array(digits).lexicographicallyPrecedes(limit) == false && Array(digits) != limit
    }

    /// `.key` for identifier-like keys, `["key"]` (JSON-escaped) otherwise.
    static func member(_ key: String) -> String {
        let simple = !key.isEmpty && key.unicodeScalars.allSatisfy { s in
            (s >= "a" && s <= "z") || (s >= "A" && s <= "Z") || (s >= "0" && s <= "9") || s == "_" || s == "-"
        }
        // Escaped when not in NFC (`unambiguousJSONText`), so two spellings never read alike.
        return simple ? "." + key : "[" + JSONValue.string(key).unambiguousJSONText + "]"
    }

    /// A minimal walk over valid JSON (values, objects with their keys, arrays with indices)
    /// that notes the first integer literal beyond ±2^53 and its path.
    private struct Scanner {
        let bytes: [UInt8]
        var i = 0
        /// The integer literals beyond ±2^53 seen, in document order (see `largeIntegers(in:)`).
        var largeIntegers: [(path: String, text: String)] = []

        mutating func skipWhitespace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0a || bytes[i] == 0x0d || bytes[i] == 0x09 { i += 1 }
        }

        /// Scans one value at `i`, noting the first large integer inside it.
        mutating func value(path: String) {
            skipWhitespace()
            guard i < bytes.count else { return }
            switch bytes[i] {
            case UInt8(ascii: "{"): object(path: path)
            case UInt8(ascii: "["): array(path: path)
            case UInt8(ascii: "\""): _ = string()
            default:
                // A number or a literal: up to the next delimiter.
                let start = i
                while i < bytes.count, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x0a, 0x0d, 0x09].contains(bytes[i]) { i += 1 }
                if DuplicateKeys.isLargeInteger(bytes[start..<i]) {
                    largeIntegers.append((path, String(decoding: bytes[start..<i], as: UTF8.self)))
                }
            }
        }

        /// The string token at `i`, decoded (escapes resolved by the mock's parser).
        mutating func string() -> String {
            let start = i
            i += 1
            while i < bytes.count, bytes[i] != UInt8(ascii: "\"") { i += bytes[i] == UInt8(ascii: "\\") ? 2 : 1 }
            i += 1
            let token = Data(bytes[start..<min(i, bytes.count)])
            return (try? JSONValue.parse(token).value.stringValue) ?? ""
        }

        mutating func object(path: String) {
            i += 1
            while true {
                skipWhitespace()
                guard i < bytes.count else { return }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                let here = path + DuplicateKeys.member(string())
                skipWhitespace()
                i += 1 // ':'
                value(path: here)
            }
        }

        mutating func array(path: String) {
            i += 1
            var index = 0
            while true {
                skipWhitespace()
                guard i < bytes.count else { return }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return }
                if bytes[i] == UInt8(ascii: ",") { i += 1; index += 1; continue }
                value(path: "\(path)[\(index)]")
            }
        }
    }
}
