import Foundation

/// A JSON value whose objects tell member names apart scalar by scalar, as the backend's Python
/// `dict` does: `"k\u0301"` and `"\u1e31"` are two members. ``JSONValue`` objects are keyed by
/// Swift `String`, whose equality is canonical equivalence, so they keep one of the two; the
/// mock stores and echoes a tracked event through this type when its body has such names
/// (CONTRACT.md section 4: identity is exact).
///
/// Member order and duplicates follow Python's `json.loads`: a name written twice (the same
/// scalars) keeps its first position and its last value. Written out, members are sorted as
/// ``JSONValue/serializedObject(_:)`` sorts them: by `String` order, canonically equivalent names
/// by their scalars.
package indirect enum ExactJSON: Sendable, Equatable {
    /// A value with no object inside that needs telling apart: null, a boolean, a number, a
    /// string, or any ``JSONValue`` built by the mock itself.
    case value(JSONValue)
    /// An array.
    case array([ExactJSON])
    /// An object's members in first-seen order, names distinct scalar by scalar.
    case object([Member])

    /// One member of an object.
    package struct Member: Sendable, Equatable {
        /// The member's name, as decoded (escapes resolved).
        package var name: String
        /// The member's value (the last one written, for a name written twice).
        package var value: ExactJSON

        /// A member named `name` holding `value`.
        package init(name: String, value: ExactJSON) {
            self.name = name
            self.value = value
        }
    }

    /// `value` read as this type holds it (objects as their members, arrays as their items).
    package init(_ value: JSONValue) {
        switch value {
        case .array(let items): self = .array(items.map(ExactJSON.init))
        case .object(let members): self = .object(members.map { Member(name: $0.key, value: ExactJSON($0.value)) })
        default: self = .value(value)
        }
    }

    /// Whether this value equals `value`: arrays item by item, objects member by member with
    /// names matched scalar by scalar (an object with two canonically equivalent names never
    /// equals a ``JSONValue`` object, which cannot hold both), everything else by `leaf`.
    package func equals(_ value: JSONValue, leaf: (JSONValue, JSONValue) -> Bool = { $0 == $1 }) -> Bool {
        switch (self, value) {
        case (.value(let v), _): return leaf(v, value)
        case (.array(let items), .array(let others)):
            return items.count == others.count && zip(items, others).allSatisfy { $0.equals($1, leaf: leaf) }
        case (.object(let members), .object(let others)):
            return members.count == others.count
                && members.allSatisfy { m in others.exactly(m.name).map { m.value.equals($0, leaf: leaf) } ?? false }
        default: return false
        }
    }

    /// The value of the JSON text `data`, or `nil` when `data` is not valid JSON (``JSONValue``'s
    /// parser decides) or is nested deeper than that parser allows.
    package static func parse(_ data: Data) -> ExactJSON? {
        guard (try? JSONValue.parse(data)) != nil else { return nil }
        var reader = Reader(bytes: [UInt8](data))
        return reader.value()
    }

    /// Whether `data` can hold two canonically equivalent member names that differ in scalars:
    /// only a name with a non-ASCII scalar can (two ASCII strings are equivalent only when
    /// identical), written as UTF-8 (a byte of 0x80 or more) or as a `\u` escape. A cheap test
    /// that keeps the exact reading off the common path.
    package static func mayHaveEquivalentNames(_ data: Data) -> Bool {
        var previous: UInt8 = 0
        for byte in data {
            if byte >= 0x80 || (previous == UInt8(ascii: "\\") && byte == UInt8(ascii: "u")) { return true }
            previous = previous == UInt8(ascii: "\\") && byte == UInt8(ascii: "\\") ? 0 : byte
        }
        return false
    }

    /// Whether some object in this value has two member names that Swift `String` calls equal
    /// (canonically equivalent, different scalars): then ``JSONValue`` would merge them.
    package var hasEquivalentNames: Bool {
        switch self {
        case .value: return false
        case .array(let items): return items.contains { $0.hasEquivalentNames }
        case .object(let members):
            for (i, m) in members.enumerated() where members[..<i].contains(where: { $0.name == m.name }) { return true }
            return members.contains { $0.value.hasEquivalentNames }
        }
    }

    /// The value of the member named exactly `name` (scalar by scalar), or `nil` when this is not
    /// an object or has no such member.
    package subscript(name: String) -> ExactJSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.name.unicodeScalars.elementsEqual(name.unicodeScalars) }?.value
    }

    /// The element at `index`, or `nil` when this is not an array or is shorter.
    package subscript(index: Int) -> ExactJSON? {
        guard case .array(let items) = self, items.indices.contains(index) else { return nil }
        return items[index]
    }

    /// Compact JSON text, members sorted (see the type's note); each ``value(_:)`` written by `leaf`.
    package func text(leaf: (JSONValue) -> String = { $0.jsonText }) -> String {
        switch self {
        case .value(let v): return leaf(v)
        case .array(let items): return "[" + items.map { $0.text(leaf: leaf) }.joined(separator: ",") + "]"
        case .object(let members):
            let ordered = members.sorted { a, b in
                if a.name < b.name { return true }
                if b.name < a.name { return false }
                return a.name.unicodeScalars.lexicographicallyPrecedes(b.name.unicodeScalars)
            }
            return "{" + ordered.map { JSONValue.string($0.name).jsonText + ":" + $0.value.text(leaf: leaf) }.joined(separator: ",") + "}"
        }
    }

    /// A walk over valid JSON that builds the value; strings and numbers are read by
    /// ``JSONValue``'s parser, so escapes and number forms mean what they mean everywhere else.
    private struct Reader {
        let bytes: [UInt8]
        var i = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func skipWhitespace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0a || bytes[i] == 0x0d || bytes[i] == 0x09 { i += 1 }
        }

        mutating func value() -> ExactJSON? {
            skipWhitespace()
            guard i < bytes.count else { return nil }
            switch bytes[i] {
            case UInt8(ascii: "{"): return object()
            case UInt8(ascii: "["): return array()
            case UInt8(ascii: "\""): return string().map { .value(.string($0)) }
            default:
                let start = i
                while i < bytes.count, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x0a, 0x0d, 0x09].contains(bytes[i]) { i += 1 }
                return (try? JSONValue.parse(Data(bytes[start..<i])).value).map { .value($0) }
            }
        }

        mutating func string() -> String? {
            let start = i
            i += 1
            while i < bytes.count, bytes[i] != UInt8(ascii: "\"") { i += bytes[i] == UInt8(ascii: "\\") ? 2 : 1 }
            i += 1
            guard i <= bytes.count else { return nil }
            return (try? JSONValue.parse(Data(bytes[start..<i])).value)?.stringValue
        }

        mutating func object() -> ExactJSON? {
            i += 1
            var members: [Member] = []
            while true {
                skipWhitespace()
                guard i < bytes.count else { return nil }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                guard let name = string() else { return nil }
                skipWhitespace()
                i += 1 // ':'
                guard let v = value() else { return nil }
                if let at = members.firstIndex(where: { $0.name.unicodeScalars.elementsEqual(name.unicodeScalars) }) {
                    members[at].value = v
                } else {
                    members.append(Member(name: name, value: v))
                }
            }
        }

        mutating func array() -> ExactJSON? {
            i += 1
            var items: [ExactJSON] = []
            while true {
                skipWhitespace()
                guard i < bytes.count else { return nil }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                guard let v = value() else { return nil }
                items.append(v)
            }
        }
    }
}
