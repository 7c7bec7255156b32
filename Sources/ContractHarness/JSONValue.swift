import Foundation

/// A JSON value, decoded without loss of kind (a `true` stays a bool, `1` a number).
public enum JSONValue: Codable, Sendable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Decodes any JSON value.
    ///
    /// - Throws: `DecodingError` for input that is not JSON.
    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let d = try? c.decode(Double.self) { self = .number(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else if let o = try? c.decode([String: JSONValue].self) { self = .object(o) }
        else { throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a JSON value") }
    }

    /// Encodes the value (object keys sorted when the encoder sorts them).
    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let d):
            if d.rounded() == d, abs(d) < 1e15 { try c.encode(Int64(d)) } else { try c.encode(d) }
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// Parses JSON text.
    ///
    /// - Throws: `ScenarioError` naming `file` when `data` is not valid JSON.
    public static func parse(_ data: Data, file: String) throws -> JSONValue {
        do { return try JSONDecoder().decode(JSONValue.self, from: data) }
        catch { throw ScenarioError(file: file, path: "$", expected: "valid JSON", found: "\(Self.describeSyntaxError(error))") }
    }

    private static func describeSyntaxError(_ error: Error) -> String {
        if case DecodingError.dataCorrupted(let ctx) = error {
            return (ctx.underlyingError.map { "\($0.localizedDescription)" } ?? ctx.debugDescription)
        }
        return "\(error)"
    }

    /// Compact JSON text with sorted keys.
    public var description: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "?"
    }

    /// A short name of the value's kind for error messages (`"string"`, `"object"`, ...).
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }

    /// The value re-encoded as JSON bytes.
    public var data: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)) ?? Data("null".utf8)
    }

    /// The member `key` of an object, else `nil`.
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    /// Converts Foundation JSON objects (from `JSONSerialization` or `AnyCodable.value`).
    public init(any value: Any?) {
        switch value {
        case nil, is NSNull: self = .null
        case let b as Bool: self = .bool(b)
        case let i as Int: self = .number(Double(i))
        case let d as Double: self = .number(d)
        case let n as NSNumber: self = .number(n.doubleValue)
        case let s as String: self = .string(s)
        case let a as [Any]: self = .array(a.map { JSONValue(any: $0) })
        case let o as [String: Any]: self = .object(o.mapValues { JSONValue(any: $0) })
        default: self = .string("\(value!)")
        }
    }

    /// `true` when every member of `expected` (recursively for objects) equals the member of
    /// `self` at the same place; arrays and scalars must be equal.
    public func contains(_ expected: JSONValue) -> Bool {
        switch (self, expected) {
        case (.object(let mine), .object(let theirs)):
            return theirs.allSatisfy { key, value in mine[key].map { $0.contains(value) } ?? (value == .null) }
        default:
            return self == expected
        }
    }
}

/// A malformed scenario (or fixture) file: where, and what was expected and found.
///
/// `description` reads `FILE: at JSON.PATH: expected X, found Y`.
public struct ScenarioError: Error, CustomStringConvertible, Equatable, Sendable {
    /// The file the error is in.
    public var file: String
    /// The JSON path of the fault, e.g. `$.steps[3].do`.
    public var path: String
    /// What the format asks for there.
    public var expected: String
    /// What the file has there.
    public var found: String

    /// Creates an error.
    public init(file: String, path: String, expected: String, found: String) {
        self.file = file
        self.path = path
        self.expected = expected
        self.found = found
    }

    public var description: String { "\(file): at \(path): expected \(expected), found \(found)" }
}

/// Reads one JSON object field by field with path-aware errors; `finish()` rejects unknown keys.
struct ObjectReader {
    let file: String
    let path: String
    private let members: [String: JSONValue]
    private var used: Set<String> = []

    init(_ value: JSONValue, file: String, path: String) throws {
        guard case .object(let members) = value else {
            throw ScenarioError(file: file, path: path, expected: "an object", found: Self.brief(value))
        }
        self.file = file
        self.path = path
        self.members = members
    }

    static func brief(_ value: JSONValue) -> String {
        let text = value.description
        return "\(value.kindName) \(text.count > 60 ? String(text.prefix(57)) + "..." : text)"
    }

    func error(_ key: String, expected: String, found: JSONValue?) -> ScenarioError {
        ScenarioError(file: file, path: "\(path).\(key)", expected: expected, found: found.map(Self.brief) ?? "nothing (the key is missing)")
    }

    func has(_ key: String) -> Bool { members[key] != nil }
    var keys: [String] { members.keys.sorted() }

    mutating func value(_ key: String) -> JSONValue? {
        used.insert(key)
        return members[key]
    }

    mutating func require(_ key: String) throws -> JSONValue {
        guard let v = value(key) else { throw error(key, expected: "a value", found: nil) }
        return v
    }

    mutating func string(_ key: String) throws -> String {
        let v = value(key)
        guard case .string(let s)? = v else { throw error(key, expected: "a string", found: v) }
        return s
    }

    mutating func optionalString(_ key: String) throws -> String? {
        guard let v = value(key), v != .null else { return nil }
        guard case .string(let s) = v else { throw error(key, expected: "a string", found: v) }
        return s
    }

    mutating func optionalNumber(_ key: String) throws -> Double? {
        guard let v = value(key), v != .null else { return nil }
        guard case .number(let d) = v else { throw error(key, expected: "a number", found: v) }
        return d
    }

    mutating func optionalInt(_ key: String, range: ClosedRange<Int> = Int.min...Int.max) throws -> Int? {
        guard let v = value(key), v != .null else { return nil }
        guard case .number(let d) = v, d.rounded() == d, let i = Int(exactly: d), range.contains(i) else {
            throw error(key, expected: "a whole number in \(range.lowerBound)...\(range.upperBound)", found: v)
        }
        return i
    }

    mutating func optionalBool(_ key: String) throws -> Bool? {
        guard let v = value(key), v != .null else { return nil }
        guard case .bool(let b) = v else { throw error(key, expected: "true or false", found: v) }
        return b
    }

    mutating func optionalStrings(_ key: String) throws -> [String]? {
        guard let v = value(key), v != .null else { return nil }
        guard case .array(let items) = v else { throw error(key, expected: "an array of strings", found: v) }
        return try items.enumerated().map { i, item in
            guard case .string(let s) = item else {
                throw ScenarioError(file: file, path: "\(path).\(key)[\(i)]", expected: "a string", found: Self.brief(item))
            }
            return s
        }
    }

    mutating func optionalArray(_ key: String) throws -> [JSONValue]? {
        guard let v = value(key), v != .null else { return nil }
        guard case .array(let items) = v else { throw error(key, expected: "an array", found: v) }
        return items
    }

    /// Fails on the first key that was never read.
    func finish(allowed: [String] = []) throws {
        if let unknown = members.keys.sorted().first(where: { !used.contains($0) }) {
            let known = (Array(used) + allowed).sorted().joined(separator: ", ")
            throw ScenarioError(file: file, path: "\(path).\(unknown)", expected: "one of the known keys (\(known))",
                                found: "unknown key '\(unknown)'")
        }
    }
}
