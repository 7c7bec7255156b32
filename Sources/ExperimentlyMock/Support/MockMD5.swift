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
        let words = message.withContiguousStorageIfAvailable { state(of: UnsafeRawBufferPointer($0)) }
            ?? Array(message).withUnsafeBytes { state(of: $0) }
        // Step 5 (section 3.5): the digest is A, B, C, D, each little-endian.
        var out = [UInt8](repeating: 0, count: 16)
        for i in 0..<4 {
            out[i] = UInt8(truncatingIfNeeded: words.a >> (8 * UInt32(i)))
            out[4 + i] = UInt8(truncatingIfNeeded: words.b >> (8 * UInt32(i)))
            out[8 + i] = UInt8(truncatingIfNeeded: words.c >> (8 * UInt32(i)))
            out[12 + i] = UInt8(truncatingIfNeeded: words.d >> (8 * UInt32(i)))
        }
        return out
    }

    /// The buffer A, B, C, D after hashing `message` (RFC 1321 steps 1 to 4); the digest is their
    /// little-endian bytes in that order (step 5).
    ///
    /// Whole 64-byte blocks are read from `message` in place; only the last one or two blocks
    /// (the tail with its padding) are built, in a stack buffer. No heap allocation: the
    /// bucketing functions hash on every flag evaluation and assignment.
    static func state(of message: UnsafeRawBufferPointer) -> (a: UInt32, b: UInt32, c: UInt32, d: UInt32) {
        // Step 3 (section 3.3): the four-word buffer.
        var h = (a: UInt32(0x6745_2301), b: UInt32(0xefcd_ab89), c: UInt32(0x98ba_dcfe), d: UInt32(0x1032_5476))
        let whole = message.count / 64 * 64
        var start = 0
        while start < whole {
            compress(UnsafeRawBufferPointer(rebasing: message[start..<start + 64]), into: &h)
            start += 64
        }
        // Steps 1 and 2 (sections 3.1, 3.2): the rest, 0x80, zeros to 56 mod 64, then the
        // message length in bits as a 64-bit little-endian integer: one or two more blocks.
        let rest = message.count - whole
        let tailCount = rest < 56 ? 64 : 128
        withUnsafeTemporaryAllocation(byteCount: 128, alignment: 8) { tail in
            tail.initializeMemory(as: UInt8.self, repeating: 0)
            if rest > 0 { tail.copyMemory(from: UnsafeRawBufferPointer(rebasing: message[whole...])) }
            tail[rest] = 0x80
            let bitLength = UInt64(message.count) &* 8
            for i in 0..<8 { tail[tailCount - 8 + i] = UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(i))) }
            compress(UnsafeRawBufferPointer(rebasing: tail[0..<64]), into: &h)
            if tailCount == 128 { compress(UnsafeRawBufferPointer(rebasing: tail[64..<128]), into: &h) }
        }
        return h
    }

    /// Step 4 (section 3.4) for one 64-byte block: the four rounds of 16 operations each.
    private static func compress(_ block: UnsafeRawBufferPointer, into h: inout (a: UInt32, b: UInt32, c: UInt32, d: UInt32)) {
        // The 16 words of this block, little-endian (RFC 1321 section 3.4).
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 16) { words in
            for i in 0..<16 {
                let p = 4 * i
                words[i] = UInt32(block[p]) | UInt32(block[p + 1]) << 8 | UInt32(block[p + 2]) << 16 | UInt32(block[p + 3]) << 24
            }
            shifts.withUnsafeBufferPointer { shifts in
                table.withUnsafeBufferPointer { table in
                    var a = h.a, b = h.b, c = h.c, d = h.d
                    // One step: a = b + ((a + f + T[i] + X[g]) <<< s[i]), then rotate the names.
                    @inline(__always) func step(_ f: UInt32, _ i: Int, _ g: Int) {
                        let sum = f &+ a &+ table[i] &+ words[g]
                        a = d
                        d = c
                        c = b
                        b = b &+ ((sum << shifts[i]) | (sum >> (32 - shifts[i])))
                    }
                    // The four rounds as four loops (no per-step switch on the round).
                    for i in 0..<16 { step((b & c) | (~b & d), i, i) }                    // round 1: F
                    for i in 16..<32 { step((d & b) | (~d & c), i, (5 * i + 1) & 15) }    // round 2: G
                    for i in 32..<48 { step(b ^ c ^ d, i, (3 * i + 5) & 15) }             // round 3: H
                    for i in 48..<64 { step(c ^ (b | ~d), i, (7 * i) & 15) }              // round 4: I
                    h.a = h.a &+ a
                    h.b = h.b &+ b
                    h.c = h.c &+ c
                    h.d = h.d &+ d
                }
            }
        }
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
        // The first 4 digest bytes, little-endian, are the buffer word A (RFC 1321 section 3.5).
        Double(state(userID, key).a) / 4_294_967_296.0
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

    /// The MD5 buffer words of "`user`:`key`" (the same bytes as ``message(_:_:)``), the message
    /// assembled on the stack: no heap allocation per evaluation.
    static func state(_ userID: String, _ key: String) -> (a: UInt32, b: UInt32, c: UInt32, d: UInt32) {
        let count = userID.utf8.count + 1 + key.utf8.count
        guard count <= 1024 else { return message(userID, key).withUnsafeBytes { MockMD5.state(of: $0) } }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { buffer in
            var i = buffer.initialize(from: userID.utf8).1
            buffer[i] = UInt8(ascii: ":")
            i += 1
            _ = UnsafeMutableBufferPointer(rebasing: buffer[i...]).initialize(from: key.utf8)
            return MockMD5.state(of: UnsafeRawBufferPointer(buffer))
        }
    }

    /// The experiment bucket `floor(hash(user, experiment) * 100)`, in 0...99 (CONTRACT.md section 2).
    public static func experimentBucket(userID: String, experimentKey: String) -> Int {
        min(99, Int((hash(userID: userID, key: experimentKey) * 100).rounded(.down)))
    }

    /// The flag rollout bucket ("md5-mod100"): the whole 128-bit MD5 of "`user`:`flag`" read
    /// big-endian, mod 100, in 0...99 (CONTRACT.md section 2).
    public static func flagBucket(userID: String, flagKey: String) -> Int {
        // The digest bytes are A, B, C, D, each little-endian (RFC 1321 section 3.5), so read
        // big-endian they are the byte-swapped words: the 128-bit number is hi * 2^64 + lo, and
        // mod 100 it is (hi mod 100) * (2^64 mod 100 = 16) + lo mod 100, mod 100.
        let h = state(userID, flagKey)
        let hi = UInt64(h.a.byteSwapped) << 32 | UInt64(h.b.byteSwapped)
        let lo = UInt64(h.c.byteSwapped) << 32 | UInt64(h.d.byteSwapped)
        return Int((hi % 100 * 16 + lo % 100) % 100)
    }
}
