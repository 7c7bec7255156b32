import Foundation

/// A JSON value (RFC 8259) as the mock backend reads and writes it: request bodies, contexts,
/// variant configurations, fault bodies.
///
/// Objects are unordered (RFC 8259 section 4); ``serialized()`` writes keys sorted so output is
/// deterministic. Numbers are `Double`; integral values within 2^53 are written without a fraction.
public enum JSONValue: Sendable, Equatable, Hashable, Codable {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number (IEEE 754 double).
    case number(Double)
    /// A string (lone surrogate escapes become U+FFFD; see ``ParsedJSON``).
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; member order is not kept.
    case object([String: JSONValue])

    /// Decodes any JSON value.
    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let n = try? c.decode(Double.self) { self = .number(n); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        if let a = try? c.decode([JSONValue].self) { self = .array(a); return }
        if let o = try? c.decode([String: JSONValue].self) { self = .object(o); return }
        throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a JSON value")
    }

    /// Encodes the value as itself; a number JSON cannot hold (infinity, NaN: an SDK may decode
    /// `1e400` in a body as infinity) as the string `"Infinity"`, `"-Infinity"` or `"NaN"`, so a
    /// verdict or worker record that quotes it is still written (a `JSONEncoder` throws on one).
    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n) where !n.isFinite: try c.encode(n.isNaN ? "NaN" : n > 0 ? "Infinity" : "-Infinity")
        case .number(let n): try c.encode(n)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// Exact equality: strings (and object member names) compare by Unicode scalars, never by
    /// canonical equivalence, so `"\u{E9}"` and `"e\u{301}"` differ (ids are exact strings:
    /// CONTRACT.md section 2). Numbers compare as doubles. The synthesized `hash(into:)` (canonical)
    /// stays consistent: exactly equal values are canonically equal, so they hash alike.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return a.isExactly(b)
        case (.array(let a), .array(let b)): return a.count == b.count && zip(a, b).allSatisfy { $0 == $1 }
        case (.object(let a), .object(let b)):
            guard a.count == b.count else { return false }
            return a.allSatisfy { key, value in
                // A dictionary holds one member per canonical class: check its spelling is `key`'s.
                guard let i = b.index(forKey: key) else { return false }
                return b[i].key.isExactly(key) && b[i].value == value
            }
        default: return false
        }
    }

    /// The member `key` of an object, its name compared by Unicode scalars, or `nil` (also for
    /// non-objects): a member named NFD `"e\u{301}"` is not the member `"\u{E9}"`.
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o.exactly(key) }
        return nil
    }

    /// The string payload, or `nil` when this is not a string.
    public var stringValue: String? { if case .string(let s) = self { return s }; return nil }
    /// The number payload, or `nil` when this is not a number.
    public var numberValue: Double? { if case .number(let n) = self { return n }; return nil }
    /// The object payload, or `nil` when this is not an object.
    public var objectValue: [String: JSONValue]? { if case .object(let o) = self { return o }; return nil }
    /// The array payload, or `nil` when this is not an array.
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { return a }; return nil }

    /// A short name of the JSON type (`object`, `array`, `string`, `number`, `boolean`, `null`),
    /// used in error messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    // MARK: Writing

    /// The compact UTF-8 JSON text of this value, object keys sorted.
    public func serialized() -> Data {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        write(into: &out)
        return Data(out)
    }

    /// The compact JSON text of this value, object keys sorted.
    public var jsonText: String {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The compact JSON text for messages: like ``jsonText``, but a string not in NFC has each
    /// non-ASCII scalar escaped (`"e\u0301"`), so canonically equivalent spellings (NFC and NFD é,
    /// the Angstrom sign and Å) never read alike. Still valid JSON for the same value.
    public var unambiguousJSONText: String {
        var out: [UInt8] = []
        write(into: &out, unambiguous: true)
        return String(decoding: out, as: UTF8.self)
    }

    // Written as UTF-8 bytes straight into one buffer (no intermediate Strings): the mock
    // serializes every response body with it.
    private func write(into out: inout [UInt8], unambiguous: Bool = false) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n):
            if n.isNaN || n.isInfinite { out.append(contentsOf: "null".utf8) }
            else if n == n.rounded(), abs(n) < 9_007_199_254_740_992 { out.append(contentsOf: String(Int64(n)).utf8) }
            else { out.append(contentsOf: "\(n)".utf8) }
        case .string(let s): JSONValue.writeString(s, into: &out, unambiguous: unambiguous)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                v.write(into: &out, unambiguous: unambiguous)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (i, entry) in o.sorted(by: { $0.key < $1.key }).enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(entry.key, into: &out, unambiguous: unambiguous)
                out.append(UInt8(ascii: ":"))
                entry.value.write(into: &out, unambiguous: unambiguous)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// The compact JSON text of an object with `members` (distinct keys), keys sorted: the same
    /// bytes as `JSONValue.object(...).serialized()` without building a dictionary (the mock's
    /// fixed-shape answers use it on every request).
    public static func serializedObject(_ members: [(key: String, value: JSONValue)]) -> Data {
        var out: [UInt8] = []
        out.reserveCapacity(160)
        out.append(UInt8(ascii: "{"))
        // Canonically equivalent keys (NFC and NFD spellings) are distinct members, ordered by
        // their scalars: `String`'s `<` calls them equal (CONTRACT.md section 4: identity is exact).
        let ordered = members.sorted { a, b in
            if a.key < b.key { return true }
            if b.key < a.key { return false }
            return a.key.unicodeScalars.lexicographicallyPrecedes(b.key.unicodeScalars)
        }
        for (i, entry) in ordered.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            writeString(entry.key, into: &out)
            out.append(UInt8(ascii: ":"))
            entry.value.write(into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return Data(out)
    }

    /// `s` as a JSON string with every non-ASCII or control scalar escaped as `\uXXXX` (UTF-16
    /// units), for messages that must tell two spellings of a name apart (`"\u1e31"`).
    package static func asciiJSONText(_ s: String) -> String {
        var out: [UInt8] = []
        writeEscapingNonASCII(s, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// A string with every non-ASCII scalar escaped as `\uXXXX` (UTF-16 units), for messages.
    private static func writeEscapingNonASCII(_ s: String, into out: inout [UInt8]) {
        var text = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            default:
                if scalar.value < 0x20 || !scalar.isASCII {
                    for unit in String(scalar).utf16 {
                        let hex = String(unit, radix: 16)
                        text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                    }
                } else {
                    text.unicodeScalars.append(scalar)
                }
            }
        }
        text += "\""
        out.append(contentsOf: text.utf8)
    }

    private static func writeString(_ s: String, into out: inout [UInt8], unambiguous: Bool = false) {
        if unambiguous && !s.precomposedStringWithCanonicalMapping.isExactly(s) {
            writeEscapingNonASCII(s, into: &out)
            return
        }
        out.append(UInt8(ascii: "\""))
        // Fast path: nothing to escape, the bytes go in as one block.
        let plain = s.utf8.withContiguousStorageIfAvailable { buffer -> Bool in
            for b in buffer where b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { return false }
            out.append(contentsOf: buffer)
            return true
        }
        if plain == true {
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "\n"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
            case UInt8(ascii: "\r"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
            case UInt8(ascii: "\t"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default:
                // Multi-byte scalars pass through as their UTF-8 bytes, as before.
                out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// Why a body is not valid JSON: the byte offset and what was expected there.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset (0-based) in the input where the problem was found.
    public var offset: Int
    /// What was wrong, e.g. "expected ',' or '}' in object"; never a piece of the input (the
    /// mock's 422 quotes it, and validation errors never echo input: CONTRACT.md section 2).
    public var message: String
    /// The byte found where something else was expected, for ``description`` only.
    public var found: UInt8?

    /// Creates an error at byte `offset`, optionally naming the byte `found` there.
    public init(offset: Int, message: String, found: UInt8? = nil) {
        self.offset = offset
        self.message = message
        self.found = found
    }

    /// "`message` at byte `offset`", with the byte found (a printable ASCII character quoted,
    /// any other in hex) for people reading a file's error.
    public var description: String { "\(saying) at byte \(offset)" }

    /// ``message`` with the byte found, when known: `unexpected character ','` (a printable ASCII
    /// character quoted, any other in hex).
    public var saying: String {
        guard let found else { return message }
        let shown = (0x21...0x7E).contains(found) ? "'\(Character(Unicode.Scalar(found)))'" : String(format: "0x%02X", found)
        return "\(message) \(shown)"
    }
}

/// The result of parsing a request body: the value plus the JSON paths of strings that contained
/// a lone UTF-16 surrogate escape (`"\ud800"`), which a Swift `String` cannot hold.
///
/// Lone surrogates are replaced by U+FFFD in the value; validation consults
/// ``loneSurrogatePaths`` to answer 422 (CONTRACT.md section 2, field limits).
public struct ParsedJSON: Sendable, Equatable {
    /// The parsed value.
    public var value: JSONValue
    /// Paths (object keys as `String`, array indices as `Int`) of strings that held a lone surrogate.
    public var loneSurrogatePaths: [[JSONPathComponent]]
    /// Paths of numbers too large for a double (`1e400`): RFC 8259 section 6 lets a parser limit
    /// the range; the value holds infinity there, which no JSON encoder can write back.
    public var nonFiniteNumberPaths: [[JSONPathComponent]] = []
}

/// One step of a JSON path: an object member name or an array index.
public enum JSONPathComponent: Sendable, Equatable, Hashable, Codable, CustomStringConvertible {
    /// An object member name.
    case key(String)
    /// An array index (0-based).
    case index(Int)

    /// The component as FastAPI writes it in `loc` (a string or an integer).
    public var jsonValue: JSONValue {
        switch self {
        case .key(let k): return .string(k)
        case .index(let i): return .number(Double(i))
        }
    }

    /// `key` or `[index]`.
    public var description: String {
        switch self {
        case .key(let k): return k
        case .index(let i): return "[\(i)]"
        }
    }

    /// Encodes as a JSON string or integer.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .key(let k): try c.encode(k)
        case .index(let i): try c.encode(i)
        }
    }

    /// Decodes from a JSON string or integer.
    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let i = try? c.decode(Int.self) { self = .index(i) } else { self = .key(try c.decode(String.self)) }
    }
}

extension JSONValue {
    /// Parses RFC 8259 JSON text from raw bytes, keeping track of lone surrogate escapes.
    ///
    /// Throws ``JSONParseError`` naming the byte offset for invalid JSON, invalid UTF-8, nesting
    /// deeper than 256 levels, or trailing content.
    public static func parse(_ data: Data) throws -> ParsedJSON {
        try parse(data, maxDepth: 256)
    }

    /// As ``parse(_:)``, nesting allowed up to `maxDepth` levels (at most 1,000: the recursion
    /// stays within a thread's stack), for reading a body another parser may accept deeper.
    public static func parse(_ data: Data, maxDepth: Int) throws -> ParsedJSON {
        var parser = JSONByteParser(bytes: [UInt8](data))
        parser.maxDepth = min(max(1, maxDepth), 1_000)
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        if parser.index != parser.bytes.count { throw parser.error("unexpected content after the JSON value") }
        return ParsedJSON(value: value, loneSurrogatePaths: parser.loneSurrogatePaths, nonFiniteNumberPaths: parser.nonFiniteNumberPaths)
    }
}

/// A small recursive-descent JSON parser over bytes (RFC 8259 grammar).
private struct JSONByteParser {
    let bytes: [UInt8]
    var index = 0
    var path: [JSONPathComponent] = []
    var loneSurrogatePaths: [[JSONPathComponent]] = []
    var nonFiniteNumberPaths: [[JSONPathComponent]] = []

    var maxDepth = 256

    init(bytes: [UInt8]) { self.bytes = bytes }

    func error(_ message: String) -> JSONParseError { JSONParseError(offset: index, message: message) }

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x0a, 0x0d, 0x09].contains(bytes[index]) { index += 1 }
    }

    mutating func parseValue(depth: Int) throws -> JSONValue {
        guard depth < maxDepth else { throw error("JSON nested deeper than \(maxDepth) levels") }
        guard index < bytes.count else { throw error("unexpected end of JSON") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw JSONParseError(offset: index, message: "unexpected character", found: bytes[index])
        }
    }

    mutating func expectLiteral(_ literal: String) throws {
        let lit = Array(literal.utf8)
        guard index + lit.count <= bytes.count, Array(bytes[index..<index + lit.count]) == lit else {
            throw error("invalid literal, expected '\(literal)'")
        }
        index += lit.count
    }

    mutating func parseObject(depth: Int) throws -> JSONValue {
        index += 1
        var object: [String: JSONValue] = [:]
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key in object") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after object key") }
            index += 1
            skipWhitespace()
            path.append(.key(key))
            object[key] = try parseValue(depth: depth + 1)
            path.removeLast()
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of JSON in object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") { throw error("a comma before '}' (JSON allows no trailing comma)") }
                continue
            }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(object) }
            throw error("expected ',' or '}' in object")
        }
    }

    mutating func parseArray(depth: Int) throws -> JSONValue {
        index += 1
        var array: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") { index += 1; return .array(array) }
        while true {
            skipWhitespace()
            path.append(.index(array.count))
            array.append(try parseValue(depth: depth + 1))
            path.removeLast()
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of JSON in array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") { throw error("a comma before ']' (JSON allows no trailing comma)") }
                continue
            }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(array) }
            throw error("expected ',' or ']' in array")
        }
    }

    mutating func parseNumber() throws -> Double {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits() -> Int {
            let s = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
            return index - s
        }
        guard index < bytes.count else { throw error("invalid number") }
        if bytes[index] == UInt8(ascii: "0") { index += 1 } else if digits() == 0 { throw error("invalid number") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            if digits() == 0 { throw error("invalid number: digits expected after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            if digits() == 0 { throw error("invalid number: digits expected in exponent") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(text) else { throw JSONParseError(offset: start, message: "invalid number") }
        if !value.isFinite { nonFiniteNumberPaths.append(path) }
        return value
    }

    mutating func hex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let d: UInt32
            switch b {
            case 0x30...0x39: d = UInt32(b - 0x30)
            case 0x41...0x46: d = UInt32(b - 0x41 + 10)
            case 0x61...0x66: d = UInt32(b - 0x61 + 10)
            default: throw error("invalid hex digit in \\u escape")
            }
            v = v * 16 + d
            index += 1
        }
        return v
    }

    mutating func parseString() throws -> String {
        index += 1 // opening quote
        // Fast path: a string without escapes is one validated run of bytes.
        var end = index
        while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\"), bytes[end] >= 0x20 { end += 1 }
        if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
            guard let s = String(validating: bytes[index..<end], as: UTF8.self) else {
                throw JSONParseError(offset: index, message: "invalid UTF-8 in string")
            }
            index = end + 1
            return s
        }
        var scalars = String.UnicodeScalarView()
        var runStart = index
        var hadLoneSurrogate = false
        func flushRun(_ end: Int) throws {
            if end > runStart {
                guard let s = String(validating: bytes[runStart..<end], as: UTF8.self) else {
                    throw JSONParseError(offset: runStart, message: "invalid UTF-8 in string")
                }
                scalars.append(contentsOf: s.unicodeScalars)
            }
        }
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                try flushRun(index)
                index += 1
                break
            }
            if b < 0x20 { throw error("unescaped control character in string") }
            if b != UInt8(ascii: "\\") { index += 1; continue }
            try flushRun(index)
            index += 1
            guard index < bytes.count else { throw error("unterminated escape") }
            let e = bytes[index]
            index += 1
            switch e {
            case UInt8(ascii: "\""): scalars.append("\"")
            case UInt8(ascii: "\\"): scalars.append("\\")
            case UInt8(ascii: "/"): scalars.append("/")
            case UInt8(ascii: "b"): scalars.append("\u{08}")
            case UInt8(ascii: "f"): scalars.append("\u{0C}")
            case UInt8(ascii: "n"): scalars.append("\n")
            case UInt8(ascii: "r"): scalars.append("\r")
            case UInt8(ascii: "t"): scalars.append("\t")
            case UInt8(ascii: "u"):
                let unit = try hex4()
                if (0xD800...0xDBFF).contains(unit) {
                    // A high surrogate must be followed by a \u low surrogate escape.
                    let save = index
                    if index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") {
                        index += 2
                        let low = try hex4()
                        if (0xDC00...0xDFFF).contains(low) {
                            scalars.append(Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))!)
                        } else {
                            index = save
                            hadLoneSurrogate = true
                            scalars.append("\u{FFFD}")
                        }
                    } else {
                        hadLoneSurrogate = true
                        scalars.append("\u{FFFD}")
                    }
                } else if (0xDC00...0xDFFF).contains(unit) {
                    hadLoneSurrogate = true
                    scalars.append("\u{FFFD}")
                } else {
                    scalars.append(Unicode.Scalar(unit)!)
                }
            default: throw JSONParseError(offset: index - 1, message: "invalid escape character")
            }
            runStart = index
        }
        if hadLoneSurrogate { loneSurrogatePaths.append(path) }
        return String(scalars)
    }
}
