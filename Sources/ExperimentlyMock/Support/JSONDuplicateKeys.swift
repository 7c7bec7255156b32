import Foundation

/// The mock's check for object keys written twice in one JSON object (`"a": 1, "a": 2`), which
/// `JSONDecoder` accepts silently, keeping one of them: a fault rule sent to `POST
/// /__admin/faults` or read from `serve --faults` could then state a condition that is never
/// applied. RFC 8259 section 4 says names "SHOULD be unique"; the mock requires it, as the
/// scenario parser does (ContractHarness `DuplicateKeys`, which the mock does not depend on).
///
/// Two keys are the same when their decoded strings are identical scalar for scalar, and also
/// when they are merely canonically equivalent (NFC and NFD spellings): a decoder keyed by Swift
/// `String` would keep only one of them.
public struct JSONDuplicateKey: Sendable, Equatable, CustomStringConvertible {
    /// The JSON path of the second occurrence, e.g. `$.action.respond.status` or `$[1].match`.
    public var path: String
    /// The key as decoded.
    public var key: String
    /// True when the two spellings differ in scalars but are canonically equivalent.
    public var equivalentOnly: Bool

    /// "duplicate key \"k\" at $.path" (naming canonical equivalence when that is all they share).
    public var description: String {
        "duplicate key \(JSONValue.string(key).unambiguousJSONText) at \(path)"
            + (equivalentOnly ? " (canonically equivalent to an earlier key of the same object)" : "")
    }

    /// The first duplicate key in `data` (in document order of the second occurrences' objects),
    /// or nil when every object's keys are unique or `data` is not valid JSON (then the parser
    /// or decoder reports the syntax error).
    public static func first(in data: Data) -> JSONDuplicateKey? {
        guard (try? JSONValue.parse(data)) != nil else { return nil }
        return first(inValid: data)
    }

    /// ``first(in:)`` for `data` already known to be valid JSON (parsed by ``JSONValue/parse(_:)``):
    /// the walk alone. A body without an object of two or more members has no duplicate, and is
    /// answered without walking.
    public static func first(inValid data: Data) -> JSONDuplicateKey? {
        guard data.contains(UInt8(ascii: ",")) && data.contains(UInt8(ascii: "{")) else { return nil }
        var walker = Walker(bytes: [UInt8](data), all: false)
        walker.value(path: "$")
        return walker.found.first
    }

    /// Every duplicate key in `data`, already known to be valid JSON, in document order (each
    /// object walked whole; a key written three times gives two entries): for a file that records
    /// what clients sent (a `serve` journal), where each request with one is reported on its own.
    public static func all(inValid data: Data) -> [JSONDuplicateKey] {
        guard data.contains(UInt8(ascii: ",")) && data.contains(UInt8(ascii: "{")) else { return [] }
        var walker = Walker(bytes: [UInt8](data), all: true)
        walker.value(path: "$")
        return walker.found
    }

    /// `.key` for identifier-like keys, `["key"]` (JSON-escaped) otherwise.
    static func member(_ key: String) -> String {
        let simple = !key.isEmpty && key.unicodeScalars.allSatisfy { s in
            (s >= "a" && s <= "z") || (s >= "A" && s <= "Z") || (s >= "0" && s <= "9") || s == "_" || s == "-"
        }
        // A key not in NFC is escaped (`unambiguousJSONText`), so the second spelling reads apart.
        return simple ? "." + key : "[" + JSONValue.string(key).unambiguousJSONText + "]"
    }

    /// A walk over valid JSON: objects with their keys, arrays with their indices.
    private struct Walker {
        let bytes: [UInt8]
        /// `false`: stop at the first duplicate.
        let all: Bool
        var i = 0
        /// The duplicates seen so far, in document order.
        var found: [JSONDuplicateKey] = []
        /// The walk has what it was asked for.
        var done: Bool { !all && !found.isEmpty }

        init(bytes: [UInt8], all: Bool) {
            self.bytes = bytes
            self.all = all
        }

        mutating func skipWhitespace() {
            while i < bytes.count, [0x20, 0x0a, 0x0d, 0x09].contains(bytes[i]) { i += 1 }
        }

        mutating func value(path: String) {
            skipWhitespace()
            guard i < bytes.count else { return }
            switch bytes[i] {
            case UInt8(ascii: "{"): object(path: path)
            case UInt8(ascii: "["): array(path: path)
            case UInt8(ascii: "\""): _ = string()
            default:
                while i < bytes.count, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x0a, 0x0d, 0x09].contains(bytes[i]) { i += 1 }
            }
        }

        /// The string token at `i`, decoded by the mock's own JSON parser (escapes resolved).
        mutating func string() -> String {
            let start = i
            i += 1
            var escaped = false
            while i < bytes.count, bytes[i] != UInt8(ascii: "\"") {
                if bytes[i] == UInt8(ascii: "\\") { escaped = true; i += 2 } else { i += 1 }
            }
            i += 1
            // Without an escape the token's bytes are the string (valid UTF-8: the JSON parsed).
            if !escaped, i <= bytes.count { return String(decoding: bytes[(start + 1)..<(i - 1)], as: UTF8.self) }
            return (try? JSONValue.parse(Data(bytes[start..<min(i, bytes.count)])).value.stringValue) ?? ""
        }

        mutating func object(path: String) {
            i += 1
            var seen: [String] = []
            while !done {
                skipWhitespace()
                guard i < bytes.count else { return }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                let key = string()
                let here = path + JSONDuplicateKey.member(key)
                // Identity by scalars first; then String equality, which is canonical equivalence.
                if seen.contains(where: { $0.unicodeScalars.elementsEqual(key.unicodeScalars) }) {
                    found.append(JSONDuplicateKey(path: here, key: key, equivalentOnly: false))
                } else if seen.contains(key) {
                    found.append(JSONDuplicateKey(path: here, key: key, equivalentOnly: true))
                } else {
                    seen.append(key)
                }
                skipWhitespace()
                i += 1 // ':'
                value(path: here)
            }
        }

        mutating func array(path: String) {
            i += 1
            var index = 0
            while !done {
                skipWhitespace()
                guard i < bytes.count else { return }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return }
                if bytes[i] == UInt8(ascii: ",") { i += 1; index += 1; continue }
                value(path: "\(path)[\(index)]")
            }
        }
    }
}
