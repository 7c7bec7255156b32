import Foundation
import Experimently

/// Names the likely cause of a golden-hash mismatch by recomputing the hash the ways other
/// implementations are known to get it wrong and finding the one that gives the actual value.
///
/// Causes (the `cause` field of a mismatch): `out of range` (the value is not in [0, 1), e.g.
/// exactly 1.0; named together with the reading that gives it, when one does), `byte order` (the
/// first 4 digest bytes read big-endian), `divisor` (2^32 - 1, 2^31, or a signed 32-bit read),
/// `signed abs` (abs of the signed 32-bit read, over 2^31), `float precision` (the division done
/// in 32-bit `Float`), `digest bytes` (not the first 4 bytes), `encoding` (UTF-16, NFC/NFD
/// normalisation, Latin-1, a C string cut at NUL), `separator` (missing or different, or the parts
/// swapped), `whitespace` (parts trimmed), and `unknown` when none of these reproduces the value
/// (CONTRACT.md section 6 gives the rule: the little-endian uint32 of the first 4 bytes over 2^32).
public enum VectorsDiagnosis {
    /// A named cause with a sentence explaining it.
    public struct Cause: Sendable, Equatable {
        /// The short category, e.g. `byte order`.
        public var name: String
        /// What the implementation seems to do and what it should do instead.
        public var detail: String
    }

    /// The cause when nothing known reproduces the actual value.
    public static let unknown = Cause(name: "unknown",
                                      detail: "no known mistake (byte order, encoding, separator, divisor) reproduces this value")

    struct InputVariant {
        let cause: Cause
        let bytes: [UInt8]
    }

    /// Other byte strings an implementation may hash instead of `UTF-8("{user}:{key}")`.
    static func inputVariants(user: String, key: String) -> [InputVariant] {
        let joined = user + ":" + key
        func utf16(_ bigEndian: Bool) -> [UInt8] {
            joined.utf16.flatMap { u in bigEndian ? [UInt8(u >> 8), UInt8(u & 0xff)] : [UInt8(u & 0xff), UInt8(u >> 8)] }
        }
        let latin1 = joined.unicodeScalars.map { $0.value < 256 ? UInt8($0.value) : UInt8(ascii: "?") }
        var list: [InputVariant] = [
            InputVariant(cause: Cause(name: "encoding", detail: "the input was NFC-normalised before hashing; hash the UTF-8 bytes exactly as given"),
                         bytes: Array((user.precomposedStringWithCanonicalMapping + ":" + key.precomposedStringWithCanonicalMapping).utf8)),
            InputVariant(cause: Cause(name: "encoding", detail: "the input was NFD-normalised before hashing; hash the UTF-8 bytes exactly as given"),
                         bytes: Array((user.decomposedStringWithCanonicalMapping + ":" + key.decomposedStringWithCanonicalMapping).utf8)),
            InputVariant(cause: Cause(name: "encoding", detail: "the input was encoded as UTF-16LE; encode it as UTF-8"), bytes: utf16(false)),
            InputVariant(cause: Cause(name: "encoding", detail: "the input was encoded as UTF-16BE; encode it as UTF-8"), bytes: utf16(true)),
            InputVariant(cause: Cause(name: "encoding", detail: "the input was encoded as Latin-1 (ISO-8859-1); encode it as UTF-8"), bytes: latin1),
            InputVariant(cause: Cause(name: "encoding", detail: "the input was cut at the first NUL (a C string); hash every byte"),
                         bytes: Array(Array(joined.utf8).prefix { $0 != 0 })),
            InputVariant(cause: Cause(name: "separator", detail: "the parts were joined without a separator; join them with one ':'"),
                         bytes: Array((user + key).utf8)),
        ]
        for sep in ["|", "_", "-", "/", "::", "."] {
            list.append(InputVariant(cause: Cause(name: "separator", detail: "the parts were joined with '\(sep)'; join them with one ':'"),
                                     bytes: Array((user + sep + key).utf8)))
        }
        list.append(InputVariant(cause: Cause(name: "separator", detail: "the parts were swapped ('{key}:{user}'); hash '{user}:{key}'"),
                                 bytes: Array((key + ":" + user).utf8)))
        list.append(InputVariant(cause: Cause(name: "whitespace", detail: "the parts were trimmed of whitespace; hash them as given"),
                                 bytes: Array((user.trimmingCharacters(in: .whitespacesAndNewlines) + ":" + key.trimmingCharacters(in: .whitespacesAndNewlines)).utf8)))
        list.append(InputVariant(cause: Cause(name: "encoding", detail: "the input was lower-cased before hashing; hash it as given"),
                                 bytes: Array(joined.lowercased().utf8)))
        let correct = Array(joined.utf8)
        return list.filter { $0.bytes != correct }
    }

    static func digest(_ bytes: [UInt8]) -> [UInt8] {
        let hex = Array(FeatureFlagEvaluator.md5Hex(of: bytes).utf8)
        func nibble(_ c: UInt8) -> UInt8 { c <= 57 ? c - 48 : c - 87 }
        return (0..<16).map { nibble(hex[2 * $0]) << 4 | nibble(hex[2 * $0 + 1]) }
    }

    static func le32(_ d: [UInt8], _ at: Int = 0) -> UInt32 {
        UInt32(d[at]) | UInt32(d[at + 1]) << 8 | UInt32(d[at + 2]) << 16 | UInt32(d[at + 3]) << 24
    }

    static func be32(_ d: [UInt8], _ at: Int = 0) -> UInt32 {
        UInt32(d[at]) << 24 | UInt32(d[at + 1]) << 16 | UInt32(d[at + 2]) << 8 | UInt32(d[at + 3])
    }

    /// The likely cause of `actual` where the golden hash of (`user`, `key`) was expected.
    ///
    /// Tries the digest-reading mistakes on the right input first, then every input variant with
    /// the right reading and with a big-endian reading; returns ``unknown`` when none matches
    /// within ``VectorsFile/tolerance``.
    public static func hashCause(user: String, key: String, actual: Double) -> Cause {
        if !actual.isFinite { return Cause(name: "divisor", detail: "the value is not a finite number") }
        let found = readingCause(user: user, key: key, actual: actual)
        // The hash is a uint32 over 2^32: always at least 0 and below 1 (at most 1 - 2^-32).
        if actual < 0 || actual >= 1 {
            let what = actual == 1 ? "exactly 1.0, which is out of [0, 1)" : "\(actual), which is out of [0, 1)"
            return Cause(name: "out of range",
                         detail: "the hash is \(what): a uint32 over 2^32 is always below 1"
                            + (found.map { "; the value comes from this mistake: " + $0.detail } ?? ""))
        }
        return found ?? unknown
    }

    /// The first known mistake that reproduces `actual`, or `nil`.
    static func readingCause(user: String, key: String, actual: Double) -> Cause? {
        func near(_ x: Double) -> Bool { abs(x - actual) <= VectorsFile.tolerance }
        let d = digest(Array((user + ":" + key).utf8))
        let le = le32(d), be = be32(d)
        let readings: [(Double, Cause)] = [
            (Double(be) / 4_294_967_296, Cause(name: "byte order", detail: "the first 4 digest bytes were read big-endian; read them little-endian")),
            (Double(le) / 4_294_967_295, Cause(name: "divisor", detail: "divided by 2^32 - 1 (4294967295); divide by 2^32 (4294967296)")),
            (Double(le) / 2_147_483_648, Cause(name: "divisor", detail: "divided by 2^31; divide by 2^32 (4294967296)")),
            // Java's Math.abs(int) / 2^31 (or Integer.MAX_VALUE): for a first byte below 0x80 the
            // same as the 2^31 reading above, which is then reported.
            (Double(Int32(bitPattern: le).magnitude) / 2_147_483_648, Cause(name: "signed abs", detail: "took abs() of the 4 bytes read as a signed 32-bit integer and divided by 2^31; read them as an unsigned 32-bit integer and divide by 2^32 (4294967296)")),
            (Double(Int32(bitPattern: le).magnitude) / 2_147_483_647, Cause(name: "signed abs", detail: "took abs() of the 4 bytes read as a signed 32-bit integer and divided by 2^31 - 1; read them as an unsigned 32-bit integer and divide by 2^32 (4294967296)")),
            (Double(Float(le) / Float(4_294_967_296)), Cause(name: "float precision", detail: "divided in 32-bit floating point (Float), which keeps 24 bits; divide in 64-bit (Double)")),
            (Double(Float(Double(le) / 4_294_967_296)), Cause(name: "float precision", detail: "the quotient was stored as a 32-bit Float, which keeps 24 bits; keep it a 64-bit Double")),
            (Double(Int32(bitPattern: le)) / 4_294_967_296, Cause(name: "divisor", detail: "the 4 bytes were read as a signed 32-bit integer; read them unsigned")),
            (Double(Int32(bitPattern: be)) / 4_294_967_296, Cause(name: "byte order", detail: "the first 4 digest bytes were read big-endian and signed; read them little-endian, unsigned")),
            (Double(le32(d, 12)) / 4_294_967_296, Cause(name: "digest bytes", detail: "the last 4 digest bytes were used; use the first 4")),
            (Double(be32(d, 12)) / 4_294_967_296, Cause(name: "digest bytes", detail: "the last 4 digest bytes were used, big-endian; use the first 4, little-endian")),
        ]
        for (value, cause) in readings where near(value) { return cause }
        // The right value written with fewer decimal digits (a `%.6f`, a `round(h, 6)`): the
        // decimal quotient of two whole numbers reads back as the same double as its text (a
        // seventy-third outside tester: such a hash was "likely cause: unknown").
        let right = Double(le) / 4_294_967_296
        for digits in 1...15 {
            let scale = (0..<digits).reduce(1.0) { p, _ in p * 10 }
            for (how, scaled) in [("rounded", (right * scale).rounded()), ("cut", (right * scale).rounded(.towardZero))] where scaled / scale == actual {
                return Cause(name: "rounding", detail: "the hash was \(how) to \(digits) decimal digit\(digits == 1 ? "" : "s"); write it with every digit (the shortest text that reads back as the same double)")
            }
        }
        for variant in inputVariants(user: user, key: key) {
            let v = digest(variant.bytes)
            if near(Double(le32(v)) / 4_294_967_296) { return variant.cause }
            if near(Double(be32(v)) / 4_294_967_296) {
                return Cause(name: variant.cause.name, detail: variant.cause.detail + ", and the digest bytes were read big-endian")
            }
        }
        return nil
    }

    /// The likely cause of an MD5 hex that differs from the expected one.
    public static func md5Cause(user: String, key: String, actualHex: String) -> Cause {
        let actual = actualHex.lowercased()
        let d = digest(Array((user + ":" + key).utf8))
        if actual == d.reversed().map({ String(format: "%02x", $0) }).joined() {
            return Cause(name: "byte order", detail: "the digest bytes are printed in reverse order")
        }
        for variant in inputVariants(user: user, key: key) where FeatureFlagEvaluator.md5Hex(of: variant.bytes) == actual {
            return variant.cause
        }
        return unknown
    }
}
