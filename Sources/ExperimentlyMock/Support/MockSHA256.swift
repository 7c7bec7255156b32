/// SHA-256 message digest (FIPS 180-4 section 6.2), written out plainly for the mock backend.
///
/// Foundation on Linux has no SHA-256 (CryptoKit is Apple-only and swift-crypto is a third-party
/// package), and the ruleset's `version` is "the sha256 of its content" (CONTRACT.md section 2,
/// upstream `backend/app/services/sdk_ruleset.py`), so the mock carries this small implementation.
/// It is used for content versions and derived ids, never for security.
public enum MockSHA256 {
    /// The round constants K (FIPS 180-4 section 4.2.2): the first 32 bits of the fractional
    /// parts of the cube roots of the first 64 primes.
    private static let k: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    /// The initial hash value H(0) (FIPS 180-4 section 5.3.3).
    private static let initial: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]

    @inline(__always) private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

    /// Returns the 32-byte SHA-256 digest of `message`.
    public static func digest<Bytes: Collection>(_ message: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        // Padding (section 5.1.1): 0x80, zeros to 56 mod 64, the bit length as 64-bit big-endian.
        var bytes = Array(message)
        let bitLength = UInt64(bytes.count) &* 8
        bytes.append(0x80)
        while bytes.count % 64 != 56 { bytes.append(0) }
        for i in (0..<8).reversed() { bytes.append(UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(i)))) }

        var h = initial
        var w = [UInt32](repeating: 0, count: 64)
        // Unchecked buffers in the rounds (the bounds are the loops' own): a third of the time
        // went to index checks and the constants' lazy-initialization check.
        k.withUnsafeBufferPointer { k in
            w.withUnsafeMutableBufferPointer { w in
                h.withUnsafeMutableBufferPointer { h in
                    bytes.withUnsafeBufferPointer { bytes in
                        for block in stride(from: 0, to: bytes.count, by: 64) {
                            // Message schedule (section 6.2.2 step 1).
                            for t in 0..<16 {
                                let i = block + 4 * t
                                w[t] = UInt32(bytes[i]) << 24 | UInt32(bytes[i + 1]) << 16 | UInt32(bytes[i + 2]) << 8 | UInt32(bytes[i + 3])
                            }
                            for t in 16..<64 {
                                let s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
                                let s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
                                w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
                            }
                            // Compression (steps 2 to 4).
                            var a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7]
                            for t in 0..<64 {
                                let bigS1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
                                let ch = (e & f) ^ (~e & g)
                                let t1 = hh &+ bigS1 &+ ch &+ k[t] &+ w[t]
                                let bigS0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
                                let maj = (a & b) ^ (a & c) ^ (b & c)
                                let t2 = bigS0 &+ maj
                                hh = g; g = f; f = e; e = d &+ t1; d = c; c = b; b = a; a = t1 &+ t2
                            }
                            h[0] = h[0] &+ a; h[1] = h[1] &+ b; h[2] = h[2] &+ c; h[3] = h[3] &+ d
                            h[4] = h[4] &+ e; h[5] = h[5] &+ f; h[6] = h[6] &+ g; h[7] = h[7] &+ hh
                        }
                    }
                }
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in h { for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: word >> UInt32(shift))) } }
        return out
    }

    /// The digest of `message` as 64 lower-case hex digits.
    public static func hex<Bytes: Collection>(_ message: Bytes) -> String where Bytes.Element == UInt8 {
        digest(message).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

/// Deterministic UUID strings for the mock's records (variant ids, event ids), derived from
/// fixture ids so a run is reproducible (CONTRACT.md section 2: `variant_id` is a UUID string).
///
/// Shape: the first 16 bytes of SHA-256(`"experimently-mock:" + kind + ":" + parts joined by
/// U+0000`), with the version nibble set to 8 (RFC 9562 section 5.8, custom) and the RFC 4122
/// variant bits, formatted as 36 lower-case characters `8-4-4-4-12`.
public enum MockUUID {
    /// The derived UUID string for `kind` and `parts` (exact bytes: no normalization).
    public static func derive(_ kind: String, _ parts: [String]) -> String {
        // The text's UTF-8 bytes, built as bytes (this runs for every assignment answer).
        var text: [UInt8] = []
        text.reserveCapacity(32 + kind.utf8.count + parts.reduce(0) { $0 + $1.utf8.count + 1 })
        text.append(contentsOf: "experimently-mock:".utf8)
        text.append(contentsOf: kind.utf8)
        text.append(UInt8(ascii: ":"))
        for (i, part) in parts.enumerated() {
            if i > 0 { text.append(0) }
            text.append(contentsOf: part.utf8)
        }
        var b = MockSHA256.digest(text)
        b[6] = (b[6] & 0x0f) | 0x80
        b[8] = (b[8] & 0x3f) | 0x80
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8](repeating: UInt8(ascii: "-"), count: 36)
        var at = 0
        for i in 0..<16 {
            if at == 8 || at == 13 || at == 18 || at == 23 { at += 1 }
            out[at] = digits[Int(b[i] >> 4)]
            out[at + 1] = digits[Int(b[i] & 0x0f)]
            at += 2
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `text` already has the 8-4-4-4-12 hex shape of a UUID (any version).
    public static func isUUID(_ text: String) -> Bool {
        // 36 ASCII bytes are 36 scalars; any other byte count, or a non-ASCII byte, is not the shape.
        let bytes = text.utf8
        guard bytes.count == 36 else { return false }
        for (i, c) in bytes.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 { if c != UInt8(ascii: "-") { return false }; continue }
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): continue
            default: return false
            }
        }
        return true
    }
}
