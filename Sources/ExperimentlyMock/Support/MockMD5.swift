/// MD5 message digest (RFC 1321), written out plainly for the mock backend's bucketing.
///
/// The mock is the oracle, so it must not share the SDK's hash code: this is an independent
/// implementation following RFC 1321 section 3 step by step. MD5 is used here only as the
/// bucketing function the contract names (CONTRACT.md sections 2 and 6), never for security.
public enum MockMD5 {
    /// Per-round shift amounts (RFC 1321 section 3.4).
    private static let shifts: [UInt32] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
        5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
        4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
        6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
    ]

    /// The table T[i] = floor(2^32 * abs(sin(i + 1))) (RFC 1321 section 3.4), written as literals.
    private static let table: [UInt32] = [
        0xd76a_a478, 0xe8c7_b756, 0x2420_70db, 0xc1bd_ceee, 0xf57c_0faf, 0x4787_c62a, 0xa830_4613, 0xfd46_9501,
        0x6980_98d8, 0x8b44_f7af, 0xffff_5bb1, 0x895c_d7be, 0x6b90_1122, 0xfd98_7193, 0xa679_438e, 0x49b4_0821,
        0xf61e_2562, 0xc040_b340, 0x265e_5a51, 0xe9b6_c7aa, 0xd62f_105d, 0x0244_1453, 0xd8a1_e681, 0xe7d3_fbc8,
        0x21e1_cde6, 0xc337_07d6, 0xf4d5_0d87, 0x455a_14ed, 0xa9e3_e905, 0xfcef_a3f8, 0x676f_02d9, 0x8d2a_4c8a,
        0xfffa_3942, 0x8771_f681, 0x6d9d_6122, 0xfde5_380c, 0xa4be_ea44, 0x4bde_cfa9, 0xf6bb_4b60, 0xbebf_bc70,
        0x289b_7ec6, 0xeaa1_27fa, 0xd4ef_3085, 0x0488_1d05, 0xd9d4_d039, 0xe6db_99e5, 0x1fa2_7cf8, 0xc4ac_5665,
        0xf429_2244, 0x432a_ff97, 0xab94_23a7, 0xfc93_a039, 0x655b_59c3, 0x8f0c_cc92, 0xffef_f47d, 0x8584_5dd1,
        0x6fa8_7e4f, 0xfe2c_e6e0, 0xa301_4314, 0x4e08_11a1, 0xf753_7e82, 0xbd3a_f235, 0x2ad7_d2bb, 0xeb86_d391,
    ]

    /// Returns the 16-byte MD5 digest of `message`.
    public static func digest<Bytes: Collection>(_ message: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        // Step 1 and 2 (RFC 1321 sections 3.1, 3.2): pad with 0x80, zeros to 56 mod 64, then the
        // message length in bits as a 64-bit little-endian integer.
        var bytes = Array(message)
        bytes.reserveCapacity(bytes.count + 72)
        let bitLength = UInt64(bytes.count) &* 8
        bytes.append(0x80)
        while bytes.count % 64 != 56 { bytes.append(0) }
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(i)))) }

        // Step 3 (section 3.3): the four-word buffer.
        var a0: UInt32 = 0x6745_2301
        var b0: UInt32 = 0xefcd_ab89
        var c0: UInt32 = 0x98ba_dcfe
        var d0: UInt32 = 0x1032_5476

        // Step 4 (section 3.4): process each 16-word block.
        // The block's words live in a stack buffer (no array per digest); the bucketing functions
        // hash on every assignment and flag request.
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 16) { words in
        var blockStart = 0
        while blockStart < bytes.count {
            // The 16 words of this block, little-endian (RFC 1321 section 3.4).
            for i in 0..<16 {
                let p = blockStart + 4 * i
                words[i] = UInt32(bytes[p]) | UInt32(bytes[p + 1]) << 8 | UInt32(bytes[p + 2]) << 16 | UInt32(bytes[p + 3]) << 24
            }
            var a = a0, b = b0, c = c0, d = d0
            for i in 0..<64 {
                var f: UInt32
                let g: Int
                switch i {
                case 0..<16: f = (b & c) | (~b & d); g = i                // round 1: F
                case 16..<32: f = (d & b) | (~d & c); g = (5 * i + 1) % 16 // round 2: G
                case 32..<48: f = b ^ c ^ d; g = (3 * i + 5) % 16          // round 3: H
                default: f = c ^ (b | ~d); g = (7 * i) % 16                // round 4: I
                }
                f = f &+ a &+ table[i] &+ words[g]
                a = d
                d = c
                c = b
                b = b &+ ((f << shifts[i]) | (f >> (32 - shifts[i])))
            }
            a0 = a0 &+ a
            b0 = b0 &+ b
            c0 = c0 &+ c
            d0 = d0 &+ d
            blockStart += 64
        }
        }

        // Step 5 (section 3.5): the digest is A, B, C, D, each little-endian.
        var out = [UInt8](repeating: 0, count: 16)
        for i in 0..<4 {
            out[i] = UInt8(truncatingIfNeeded: a0 >> (8 * UInt32(i)))
            out[4 + i] = UInt8(truncatingIfNeeded: b0 >> (8 * UInt32(i)))
            out[8 + i] = UInt8(truncatingIfNeeded: c0 >> (8 * UInt32(i)))
            out[12 + i] = UInt8(truncatingIfNeeded: d0 >> (8 * UInt32(i)))
        }
        return out
    }

    /// Returns the MD5 digest of the UTF-8 bytes of `string` as 32 lower-case hex digits.
    public static func hex(_ string: String) -> String {
        let hexDigits = Array("0123456789abcdef")
        var s = ""
        for byte in digest(Array(string.utf8)) {
            s.append(hexDigits[Int(byte >> 4)])
            s.append(hexDigits[Int(byte & 0x0f)])
        }
        return s
    }
}

/// The two bucketing functions of the contract, computed with ``MockMD5``.
public enum MockBucketing {
    /// The golden hash: the first 4 digest bytes of MD5(UTF-8 "`user`:`key`") read as a
    /// little-endian UInt32, divided by 2^32; in [0, 1) (CONTRACT.md section 6).
    public static func hash(userID: String, key: String) -> Double {
        let d = MockMD5.digest(message(userID, key))
        let value = UInt32(d[0]) | UInt32(d[1]) << 8 | UInt32(d[2]) << 16 | UInt32(d[3]) << 24
        return Double(value) / 4_294_967_296.0
    }

    /// The UTF-8 bytes of "`user`:`key`", built directly (no interpolated String), with room
    /// for MD5's padding.
    static func message(_ userID: String, _ key: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(userID.utf8.count + key.utf8.count + 1 + 72)
        bytes.append(contentsOf: userID.utf8)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(contentsOf: key.utf8)
        return bytes
    }

    /// The experiment bucket `floor(hash(user, experiment) * 100)`, in 0...99 (CONTRACT.md section 2).
    public static func experimentBucket(userID: String, experimentKey: String) -> Int {
        min(99, Int((hash(userID: userID, key: experimentKey) * 100).rounded(.down)))
    }

    /// The flag rollout bucket ("md5-mod100"): the whole 128-bit MD5 of "`user`:`flag`" read
    /// big-endian, mod 100, in 0...99 (CONTRACT.md section 2).
    public static func flagBucket(userID: String, flagKey: String) -> Int {
        // Horner's rule over the bytes keeps only the remainder: (r * 256 + byte) mod 100.
        var remainder = 0
        for byte in MockMD5.digest(message(userID, flagKey)) {
            remainder = (remainder * 256 + Int(byte)) % 100
        }
        return remainder
    }
}
