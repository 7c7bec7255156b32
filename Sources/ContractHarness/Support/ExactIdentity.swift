import Foundation

/// A string compared, hashed and ordered by its Unicode scalars, for identity data used as a
/// dictionary key or set element in the harness: user ids, flag and experiment keys, event names,
/// API keys, labels, client names and fault ids.
///
/// Swift's `String` `==` and hashing are canonical equivalence, so `"\u{E9}"` (NFC é) and
/// `"e\u{301}"` (NFD é) would be one key; the contract treats ids as exact strings (the bucketing
/// hash is over the UTF-8 bytes, CONTRACT.md section 3; the golden vectors list NFC and NFD as
/// separate inputs). Written as a string literal or interpolation where a key is expected, so
/// `seen["\(user)\u{0}\(experiment)"]` keys a `[ExactKey: _]` table exactly. The harness keeps its
/// own copy (the SDK's and the mock's are internal to them: the oracle shares no code).
struct ExactKey: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringInterpolation {
    /// The wrapped string, exactly as given.
    let text: String

    init(_ text: String) { self.text = text }
    init(stringLiteral value: String) { text = value }
    init(stringInterpolation: DefaultStringInterpolation) { text = String(stringInterpolation: stringInterpolation) }

    static func == (lhs: ExactKey, rhs: ExactKey) -> Bool { lhs.text.isExactly(rhs.text) }

    /// Code point order (as Python sorts strings), so sorted output is the same on every platform.
    static func < (lhs: ExactKey, rhs: ExactKey) -> Bool {
        lhs.text.unicodeScalars.lexicographicallyPrecedes(rhs.text.unicodeScalars) { $0.value < $1.value }
    }

    func hash(into hasher: inout Hasher) {
        for scalar in text.unicodeScalars { hasher.combine(scalar.value) }
        hasher.combine(UInt32.max)
    }

    var description: String { text }
}

extension String {
    /// `true` when both strings have the same Unicode scalars in the same order (never canonical
    /// equivalence: `"\u{E9}"` is not `"e\u{301}"`).
    func isExactly(_ other: String) -> Bool {
        unicodeScalars.elementsEqual(other.unicodeScalars)
    }

    /// `true` when this string's scalars begin with `prefix`'s scalars.
    func hasExactPrefix(_ prefix: String) -> Bool {
        unicodeScalars.starts(with: prefix.unicodeScalars)
    }

    /// The string as the HTML report draws an identity (a user id, a key, a label, a name):
    /// ``unambiguous``, and besides every scalar a reader cannot see or tell from another written
    /// `\u{...}` (controls, format characters such as zero-width space, word joiner, byte-order
    /// mark and soft hyphen, separators other than a plain inner space, private-use and unassigned
    /// scalars), a leading or trailing space as `\u{20}`, and `\` as `\\` (so the text
    /// `\u{202E}` is not the override it spells). Before, the report drew NFC and NFD ids, and
    /// `bob` with a zero-width space, the same (a thirteenth outside tester).
    var visible: String {
        let notNFC = !utf8.allSatisfy({ $0 < 0x80 }) && !precomposedStringWithCanonicalMapping.isExactly(self)
        let scalars = Array(unicodeScalars)
        var out = ""
        for (i, scalar) in scalars.enumerated() {
            let hidden: Bool
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .unassigned, .surrogate: hidden = true
            case .spaceSeparator: hidden = scalar != " " || i == 0 || i == scalars.count - 1
            default: hidden = notNFC && !scalar.isASCII
            }
            if hidden { out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}" }
            else if scalar == "\\" { out += "\\\\" }
            else { out.unicodeScalars.append(scalar) }
        }
        return out
    }

    /// The string for a message, unambiguous among canonically equivalent spellings: a string
    /// already in NFC is shown as it is; any other has each non-ASCII scalar written `\u{301}`.
    /// So NFC é reads `é`, NFD é reads `e\u{301}`, the Angstrom sign reads `\u{212B}`, Hangul
    /// jamo read `\u{1112}\u{1161}\u{11AB}`.
    var unambiguous: String {
        // ASCII text is NFC: shown as it is without Foundation's normalization.
        if utf8.allSatisfy({ $0 < 0x80 }) { return self }
        if precomposedStringWithCanonicalMapping.isExactly(self) { return self }
        var out = ""
        for scalar in unicodeScalars {
            if scalar.isASCII { out.unicodeScalars.append(scalar) } else { out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}" }
        }
        return out
    }
}

extension Sequence where Element == String {
    /// `true` when some element is exactly `value` (Unicode scalars).
    func containsExactly(_ value: String) -> Bool { contains { $0.isExactly(value) } }
}

extension Optional where Wrapped == String {
    /// Exact equality of optional identity strings (`nil` equals only `nil`).
    func isExactly(_ other: String?) -> Bool {
        switch (self, other) {
        case (nil, nil): return true
        case (let a?, let b?): return a.isExactly(b)
        default: return false
        }
    }
}

extension Optional where Wrapped == String {
    /// The string as an ``ExactKey``, or `nil`.
    var exactKey: ExactKey? { map { ExactKey($0) } }
}
