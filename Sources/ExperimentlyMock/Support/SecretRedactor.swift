import Foundation

/// Replaces every configured secret (API keys) with `***` in any text or bytes the harness or the
/// mock writes out: console lines, verdicts, JUnit, the `serve` journal, reports.
///
/// Matching is exact on UTF-8 bytes (never Swift `String` equivalence), and each secret is also
/// found in the spellings it takes on the wire: percent-encoded (RFC 3986 section 2.1, either hex
/// case, as in a query `?api_key=`), form-encoded (`+` for space) and JSON-escaped (`\"`, `\\`,
/// `\/`, `\uXXXX` for non-ASCII and control characters, either hex case). A header such as
/// `Authorization: Bearer <key>` or a body field carrying the key is redacted because the key's
/// bytes are. Longer secrets are replaced first, so a key that contains another is hidden whole.
/// Empty secrets are ignored. Thread-safe: an immutable value.
public struct SecretRedactor: Sendable {
    /// The text that stands in for a secret.
    public static let mask = "***"

    /// Byte patterns to replace, longest first.
    private let patterns: [[UInt8]]
    /// The secrets' raw UTF-8 bytes, longest first, for the percent-decoded pass.
    private let raw: [[UInt8]]

    /// A redactor for `secrets` (each API key the run or the fixtures configure).
    public init(secrets: [String]) {
        var set = Set<[UInt8]>()
        for secret in secrets where !secret.isEmpty {
            for spelling in Self.spellings(of: secret) where !spelling.isEmpty { set.insert(spelling) }
        }
        patterns = set.sorted { $0.count != $1.count ? $0.count > $1.count : $0.lexicographicallyPrecedes($1) }
        raw = Set(secrets.filter { !$0.isEmpty }.map { Array($0.utf8) })
            .sorted { $0.count != $1.count ? $0.count > $1.count : $0.lexicographicallyPrecedes($1) }
    }

    /// True when there is nothing to redact.
    public var isEmpty: Bool { patterns.isEmpty }

    /// `text` with every spelling of every secret replaced by `***`.
    public func redact(_ text: String) -> String {
        guard !patterns.isEmpty else { return text }
        let bytes = Array(text.utf8)
        let out = redact(bytes: bytes)
        return out.count == bytes.count && out == bytes ? text : String(decoding: out, as: UTF8.self)
    }

    /// `data` with every spelling of every secret replaced by `***`.
    public func redact(_ data: Data) -> Data {
        guard !patterns.isEmpty else { return data }
        return Data(redact(bytes: Array(data)))
    }

    /// True when `text` contains any spelling of a secret.
    public func contains(secretIn text: String) -> Bool {
        let bytes = Array(text.utf8)
        return patterns.contains { Self.find($0, in: bytes, from: 0) != nil } || redactPercentEncoded(bytes) != bytes
    }

    private func redact(bytes: [UInt8]) -> [UInt8] {
        var current = bytes
        let mask = Array(Self.mask.utf8)
        for pattern in patterns {
            guard var hit = Self.find(pattern, in: current, from: 0) else { continue }
            var out: [UInt8] = []
            out.reserveCapacity(current.count)
            var start = 0
            while true {
                out.append(contentsOf: current[start..<hit])
                out.append(contentsOf: mask)
                start = hit + pattern.count
                guard let next = Self.find(pattern, in: current, from: start) else { break }
                hit = next
            }
            out.append(contentsOf: current[start...])
            current = out
        }
        return redactPercentEncoded(current)
    }

    /// A last pass over the text percent-decoded (any `%XX`, either case, and `+` as a space): a
    /// secret spelled with escapes no encoder would choose (`%2D` for `-`) is found too, and the
    /// original bytes it spans are replaced.
    private func redactPercentEncoded(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.contains(UInt8(ascii: "%")) || bytes.contains(UInt8(ascii: "+")) else { return bytes }
        func hexValue(_ b: UInt8) -> UInt8? {
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        // The decoded bytes, each with the range of original bytes it came from.
        var decoded: [UInt8] = []
        var origin: [Range<Int>] = []
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let h = hexValue(bytes[i + 1]), let l = hexValue(bytes[i + 2]) {
                decoded.append(h << 4 | l); origin.append(i..<(i + 3)); i += 3
            } else if bytes[i] == UInt8(ascii: "+") {
                decoded.append(UInt8(ascii: " ")); origin.append(i..<(i + 1)); i += 1
            } else {
                decoded.append(bytes[i]); origin.append(i..<(i + 1)); i += 1
            }
        }
        var cut: [Range<Int>] = []   // original ranges to replace, in order, not overlapping
        for secret in raw {
            var from = 0
            while let hit = Self.find(secret, in: decoded, from: from) {
                let range = origin[hit].lowerBound..<origin[hit + secret.count - 1].upperBound
                if !cut.contains(where: { $0.overlaps(range) }) { cut.append(range) }
                from = hit + secret.count
            }
        }
        guard !cut.isEmpty else { return bytes }
        var out: [UInt8] = []
        var at = 0
        for range in cut.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            out.append(contentsOf: bytes[at..<range.lowerBound])
            out.append(contentsOf: Array(Self.mask.utf8))
            at = range.upperBound
        }
        out.append(contentsOf: bytes[at...])
        return out
    }

    private static func find(_ pattern: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard let first = pattern.first, bytes.count - start >= pattern.count else { return nil }
        var i = start
        let last = bytes.count - pattern.count
        while i <= last {
            if bytes[i] == first {
                var j = 1
                while j < pattern.count && bytes[i + j] == pattern[j] { j += 1 }
                if j == pattern.count { return i }
            }
            i += 1
        }
        return nil
    }

    /// Every wire spelling of `secret`: raw, percent-encoded (upper and lower hex), form-encoded
    /// and JSON-escaped (upper and lower hex).
    static func spellings(of secret: String) -> [[UInt8]] {
        // Its own scalars only: a canonically equivalent text is another identity (SecretRedactorTests).
        let raw = Array(secret.utf8)
        var out = [raw]
        for upper in [true, false] {
            out.append(percentEncoded(raw, upper: upper, plusForSpace: false))
            out.append(percentEncoded(raw, upper: upper, plusForSpace: true))
            out.append(jsonEscaped(secret, upper: upper, escapeSlash: false))
            out.append(jsonEscaped(secret, upper: upper, escapeSlash: true))
        }
        // As a JSON encoder writes it inside a string (an eightieth outside tester, F4: a key with
        // a quote showed in a verdict line).
        out.append(quoted(raw))
        // JSON text quoted in a JSON string, once or twice more (an adapter's standard error that
        // logged its JSON request, quoted in a crashed outcome, written in a history line): each
        // escaped spelling with its `\` and `"` escaped again (an eighty-seventh outside tester: a
        // key with a quote or a non-ASCII letter showed in a verdict's history lines and HTML).
        var level = out.filter { $0.contains(UInt8(ascii: "\\")) }
        for _ in 0..<2 {
            level = level.map(quoted)
            out.append(contentsOf: level)
        }
        return out
    }

    /// `bytes` as a JSON encoder writes them inside a string, non-ASCII left as is: only `"` and
    /// `\` escaped (scalar by scalar: a `"` before a combining mark is one Character).
    private static func quoted(_ bytes: [UInt8]) -> [UInt8] {
        bytes.flatMap { b -> [UInt8] in b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") ? [UInt8(ascii: "\\"), b] : [b] }
    }

    private static func hex(_ value: UInt32, digits: Int, upper: Bool) -> [UInt8] {
        let s = String(value, radix: 16, uppercase: upper)
        return Array((String(repeating: "0", count: max(0, digits - s.count)) + s).utf8)
    }

    private static func percentEncoded(_ raw: [UInt8], upper: Bool, plusForSpace: Bool) -> [UInt8] {
        var out: [UInt8] = []
        for b in raw {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(b)
            case UInt8(ascii: " ") where plusForSpace:
                out.append(UInt8(ascii: "+"))
            default:
                out.append(UInt8(ascii: "%"))
                out.append(contentsOf: hex(UInt32(b), digits: 2, upper: upper))
            }
        }
        return out
    }

    private static func jsonEscaped(_ secret: String, upper: Bool, escapeSlash: Bool) -> [UInt8] {
        var out: [UInt8] = []
        for scalar in secret.unicodeScalars {
            switch scalar {
            case "\"": out.append(contentsOf: Array("\\\"".utf8))
            case "\\": out.append(contentsOf: Array("\\\\".utf8))
            case "/" where escapeSlash: out.append(contentsOf: Array("\\/".utf8))
            case _ where scalar.value < 0x20 || scalar.value >= 0x7F:
                if scalar.value > 0xFFFF {
                    let v = scalar.value - 0x10000
                    out.append(contentsOf: Array("\\u".utf8) + hex(0xD800 + (v >> 10), digits: 4, upper: upper))
                    out.append(contentsOf: Array("\\u".utf8) + hex(0xDC00 + (v & 0x3FF), digits: 4, upper: upper))
                } else {
                    out.append(contentsOf: Array("\\u".utf8) + hex(scalar.value, digits: 4, upper: upper))
                }
            default: out.append(contentsOf: Array(String(scalar).utf8))
            }
        }
        return out
    }
}
