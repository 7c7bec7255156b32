import Foundation
import ExperimentlyMock

// The harness reads and writes JSON with the mock backend's `JSONValue` (one JSON model in the
// package); these are the harness's additions to it.
extension JSONValue: CustomStringConvertible {
    /// Parses JSON text.
    ///
    /// - Throws: `ScenarioError` naming `file` and the line and column when `data` is not valid JSON,
    ///   or the JSON path when one object states a key twice (RFC 8259 section 4: the parsed
    ///   object would silently keep only the last).
    public static func parse(_ data: Data, file: String) throws -> JSONValue {
        try parse(data, file: file, keepingNonFinite: nil)
    }

    /// ``parse(_:file:)``, except that a number too large for a double is reported to
    /// `keepingNonFinite` (its JSON path, `$.a[0].b`) and kept as infinity instead of refused:
    /// for a file that records what a client sent (a `serve` journal), where one such request
    /// must not make the rest unreadable.
    ///
    /// `keepingDuplicate`, when given, is asked about every key written twice in one object (or
    /// in two canonically equivalent spellings): `true` keeps the parse going (the parsed object
    /// then holds one of them), `false` refuses the file as without it.
    static func parse(_ data: Data, file: String, keepingNonFinite: ((String) -> Void)?,
                      keepingDuplicate: ((JSONDuplicateKey) -> Bool)? = nil) throws -> JSONValue {
        // RFC 8259 section 8.1: a parser MAY ignore a UTF-8 byte-order mark; editors on Windows
        // write one. A UTF-16 one means the file is not UTF-8 at all.
        let data = withoutByteOrderMark(data)
        if data.starts(with: [0xFE, 0xFF]) || data.starts(with: [0xFF, 0xFE]) {
            throw ScenarioError(file: file, path: "$", expected: "UTF-8 JSON (RFC 8259 section 8.1)",
                                found: "a UTF-16 byte-order mark: save the file as UTF-8")
        }
        do {
            let parsed = try JSONValue.parse(data)
            let value = parsed.value
            func jsonPath(_ components: [JSONPathComponent]) -> String {
                "$" + components.map { c -> String in
                    switch c {
                    case .key(let k): return DuplicateKeys.member(k)
                    case .index(let i): return "[\(i)]"
                    }
                }.joined()
            }
            if let lone = parsed.loneSurrogatePaths.first {
                // A lone surrogate escape is no Unicode scalar: read as U+FFFD, two different
                // spellings would become one identity.
                throw ScenarioError(file: file, path: jsonPath(lone), expected: "text of Unicode scalars",
                                    found: "a lone surrogate escape (\\uD800-\\uDFFF without its pair), which is no character: write the character or its surrogate pair")
            }
            if let keepingNonFinite {
                for path in parsed.nonFiniteNumberPaths { keepingNonFinite(jsonPath(path)) }
            } else if let huge = parsed.nonFiniteNumberPaths.first {
                // Read as infinity, which no JSON encoder writes: the value would reach the SDK
                // as `null`, or stop the harness from writing the step or its result (a sixth
                // outside tester: a correct SDK reported as crashed).
                throw ScenarioError(file: file, path: jsonPath(huge), expected: "a number a double can hold (magnitude below 1.8e308)",
                                    found: "a number too large for a double (RFC 8259 section 6), which would be read as infinity")
            }
            func refused(_ path: String, _ key: String, equivalentOnly: Bool) -> ScenarioError {
                ScenarioError(file: file, path: path, expected: "each key at most once per object",
                              found: "the key \(JSONValue.string(key).unambiguousJSONText) a second time"
                                  + (equivalentOnly ? " (a canonically equivalent spelling of an earlier key: two member names that differ only so cannot be kept apart in one object here; as identity data, such as two clients, use names that differ otherwise)" : ""))
            }
            if let keepingDuplicate {
                for d in JSONDuplicateKey.all(inValid: data) where !keepingDuplicate(d) {
                    throw refused(d.path, d.key, equivalentOnly: d.equivalentOnly)
                }
            } else if let d = DuplicateKeys.first(in: [UInt8](data)) {
                throw refused(d.path, d.key, equivalentOnly: d.equivalentOnly)
            }
            return value
        } catch let error as ScenarioError {
            throw error
        } catch let error as JSONParseError {
            let prefix = data.prefix(error.offset)
            let line = prefix.filter { $0 == 10 }.count + 1
            let column = prefix.count - (prefix.lastIndex(of: 10).map { $0 - prefix.startIndex + 1 } ?? 0) + 1
            throw ScenarioError(file: file, path: "$", statement: "not valid JSON (RFC 8259): \(error.saying) at line \(line), column \(column)")
        } catch {
            throw ScenarioError(file: file, path: "$", statement: "not valid JSON (RFC 8259): \(error)")
        }
    }

    /// `data` without a leading UTF-8 byte-order mark (EF BB BF), which RFC 8259 section 8.1
    /// lets a parser ignore.
    static func withoutByteOrderMark(_ data: Data) -> Data {
        data.starts(with: [0xEF, 0xBB, 0xBF]) ? Data(data.dropFirst(3)) : data
    }

    /// Compact JSON text with sorted keys, for messages: a string not in NFC has its non-ASCII
    /// scalars escaped (`"e\u0301"`), so canonically equivalent ids never read alike (still valid
    /// JSON for the same value).
    public var description: String { unambiguousJSONText }

    /// Converts Foundation JSON objects (from `JSONSerialization` or `AnyCodable.value`).
    init(any value: Any?) {
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
    /// `self` at the same place (a `null` expected member also matches an absent one); arrays
    /// must have the same length with each element contained; scalars must be equal.
    func contains(_ expected: JSONValue) -> Bool {
        switch (self, expected) {
        case (.object(let mine), .object(let theirs)):
            // Member names are compared by Unicode scalars: a dictionary finds the member of the
            // same canonical class, whose spelling may differ (a sixth outside tester: an SDK
            // sending "\u{E9}" passed an expectation of "e\u{301}").
            return theirs.allSatisfy { key, value in
                guard let i = mine.index(forKey: key), mine[i].key.isExactly(key) else { return value == .null }
                return mine[i].value.contains(value)
            }
        case (.array(let mine), .array(let theirs)):
            return mine.count == theirs.count && zip(mine, theirs).allSatisfy { $0.contains($1) }
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

    /// The whole sentence after `at PATH:` when the error is no "expected X, found Y" (a file
    /// that is not JSON, a value that breaks a stated rule); `nil` otherwise.
    public var statement: String?

    /// Creates an error: at `path`, `expected` was wanted and `found` is there.
    public init(file: String, path: String, expected: String, found: String) {
        self.file = file
        self.path = path
        self.expected = expected
        self.found = found
    }

    /// Creates an error stated whole (`statement`), e.g. "'first' must be at least 1, got 0 (a
    /// fault rule: ...)"; `expected` and `found` are empty.
    public init(file: String, path: String, statement: String) {
        self.init(file: file, path: path, expected: "", found: "")
        self.statement = statement
    }

    /// Adds `note` to what the error says (its `statement`, else its `found`).
    public mutating func append(_ note: String) {
        if statement != nil { statement! += note } else { found += note }
    }

    /// `FILE: at PATH: expected X, found Y`, or `FILE: at PATH: STATEMENT`.
    public var description: String {
        if let statement { return "\(file): at \(path): \(statement)" }
        return "\(file): at \(path): expected \(expected), found \(found)"
    }
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
        return "\(value.typeName) \(text.count > 60 ? String(text.prefix(57)) + "..." : text)"
    }

    func error(_ key: String, expected: String, found: JSONValue?) -> ScenarioError {
        ScenarioError(file: file, path: "\(path).\(key)", expected: expected, found: found.map(Self.brief) ?? missing)
    }

    /// "nothing (the key is missing)", naming the keys the object has, so a key written under
    /// another name shows (`getAssignment` given `flag` instead of `experiment`; a 73rd outside
    /// tester read only that `experiment` was missing).
    private var missing: String {
        let present = members.keys.sorted()
        guard !present.isEmpty else { return "nothing (the key is missing; the object is empty)" }
        let shown = present.prefix(12).map { "'\($0)'" }.joined(separator: ", ")
        return "nothing (the key is missing; the object has \(shown)\(present.count > 12 ? ", ..." : ""))"
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
            let known = (Array(used) + allowed).sorted()
            throw ScenarioError(file: file, path: "\(path).\(unknown)", expected: "one of the known keys (\(known.joined(separator: ", ")))",
                                found: "unknown key '\(unknown)'" + Self.didYouMean(unknown, among: known))
        }
    }

    /// ` (did you mean 'x'?)` for the known name within two edits of `name` (letters compared
    /// case-insensitively, `-` as `_`), nearest first; empty when none is that close.
    static func didYouMean(_ name: String, among known: [String]) -> String {
        func folded(_ s: String) -> [Character] { Array(s.lowercased().replacingOccurrences(of: "-", with: "_")) }
        func distance(_ a: [Character], _ b: [Character]) -> Int {
            if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
            var row = Array(0...b.count)
            for i in 1...a.count {
                var diagonal = row[0]
                row[0] = i
                for j in 1...b.count {
                    let above = row[j]
                    row[j] = min(above + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1))
                    diagonal = above
                }
            }
            return row[b.count]
        }
        let target = folded(name)
        let limit = min(2, max(1, target.count / 2))
        var best: (name: String, edits: Int)?
        for candidate in known.sorted() {
            let edits = distance(target, folded(candidate))
            if edits <= limit, edits < (best?.edits ?? Int.max) { best = (candidate, edits) }
        }
        return best.map { " (did you mean '\($0.name)'?)" } ?? ""
    }
}
