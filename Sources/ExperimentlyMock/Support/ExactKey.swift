import Foundation

/// A string compared and hashed by its Unicode scalars, for identity data (user ids, experiment
/// and flag keys, API keys, fault ids) used as a dictionary key or set element.
///
/// Swift's `String` `==` and hashing are canonical equivalence, so `"\u{E9}"` (NFC é) and
/// `"e\u{301}"` (NFD é) would be one key; the contract treats ids as exact strings (the bucketing
/// hash is over the UTF-8 bytes, and the Python backend compares code points: CONTRACT.md
/// sections 2 and 4). The mock keeps its own copy of this type: it never shares the SDK's code.
struct ExactKey: Hashable, Sendable, CustomStringConvertible {
    /// The wrapped string, exactly as received.
    let text: String

    init(_ text: String) { self.text = text }

    static func == (lhs: ExactKey, rhs: ExactKey) -> Bool { lhs.text.isExactly(rhs.text) }

    func hash(into hasher: inout Hasher) {
        for scalar in text.unicodeScalars { hasher.combine(scalar.value) }
        hasher.combine(UInt32.max) // terminator: ("ab","c") and ("a","bc") hash apart in tuples
    }

    var description: String { text }
}

extension String {
    /// `true` when both strings have the same Unicode scalars in the same order (no canonical
    /// equivalence: `"\u{E9}"` is not `"e\u{301}"`).
    ///
    /// Compared as UTF-8 bytes, which is the same thing (a String's UTF-8 is its scalars'
    /// encoding, one to one) and a memory comparison when both are contiguous: it runs for every
    /// API key, flag and experiment lookup.
    func isExactly(_ other: String) -> Bool {
        let a = utf8, b = other.utf8
        guard a.count == b.count else { return false }
        let fast = a.withContiguousStorageIfAvailable { x in
            b.withContiguousStorageIfAvailable { y in x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 }
        }
        if let fast, let equal = fast { return equal }
        return a.elementsEqual(b)
    }

    /// `true` when `other`'s scalars occur contiguously in this string's scalars (Python's `in`).
    func containsExactly(_ other: String) -> Bool {
        let hay = Array(unicodeScalars), needle = Array(other.unicodeScalars)
        if needle.isEmpty { return true }
        guard needle.count <= hay.count else { return false }
        for start in 0...(hay.count - needle.count) where hay[start..<start + needle.count].elementsEqual(needle) { return true }
        return false
    }
}

extension Dictionary where Key == String {
    /// The value whose key has exactly `key`'s Unicode scalars, or `nil`: a JSON member looked up
    /// by name (a `[String: V]` subscript is canonical equivalence, so an attribute rule on NFC
    /// `"\u{E9}"` read a context member named NFD `"e\u{301}"`: an outside tester; the backend
    /// compares code points, CONTRACT.md section 4). A dictionary holds one key per canonical
    /// class, so the one candidate is checked.
    public func exactly(_ key: String) -> Value? {
        guard let i = index(forKey: key), self[i].key.isExactly(key) else { return nil }
        return self[i].value
    }
}

extension String {
    /// The string for a message, unambiguous among canonically equivalent spellings: a string
    /// already in NFC is shown as it is; any other has each non-ASCII scalar written `\u{301}`.
    /// So NFC é reads `é` and NFD é reads `e\u{301}`; the Angstrom sign reads `\u{212B}`.
    var unambiguous: String {
        // ASCII text is NFC and shown as it is: no Foundation normalization (which costs
        // microseconds and ran for every fault rule a request did not match).
        if utf8.allSatisfy({ $0 < 0x80 }) { return self }
        let nfc = precomposedStringWithCanonicalMapping
        if nfc.isExactly(self) { return self }
        var out = ""
        for scalar in unicodeScalars {
            if scalar.isASCII { out.unicodeScalars.append(scalar) } else { out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}" }
        }
        return out
    }
}
