/// MD5 (RFC 1321) in Swift, one code path on every platform (CommonCrypto does not exist on Linux).
///
/// Streaming: `update` any number of times, then `finalize`. No heap allocation per message.
struct MD5 {
    private var a: UInt32 = 0x6745_2301
    private var b: UInt32 = 0xefcd_ab89
    private var c: UInt32 = 0x98ba_dcfe
    private var d: UInt32 = 0x1032_5476
    private var block = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
    private var blockCount = 0
    private var totalBytes: UInt64 = 0

    init() {}

    /// Per-round left-rotation amounts (RFC 1321 section 3.4).
    private static let shifts: [UInt32] = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21]

    /// The sine-derived constants T[i] = floor(2^32 * |sin(i + 1)|) (RFC 1321 section 3.4).
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

    mutating func update<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        for byte in bytes { append(byte) }
    }

    @inline(__always)
    private mutating func append(_ byte: UInt8) {
        let i = blockCount
        withUnsafeMutableBytes(of: &block) { $0[i] = byte }
        blockCount += 1
        totalBytes &+= 1
        if blockCount == 64 { compress(); blockCount = 0 }
    }

    /// Pads (RFC 1321 sections 3.1 and 3.2), processes the last block(s) and returns the digest.
    mutating func finalize() -> (UInt32, UInt32, UInt32, UInt32) {
        let bitLength = totalBytes &* 8
        append(0x80)
        while blockCount != 56 { append(0) }
        for i in 0..<8 { append(UInt8(truncatingIfNeeded: bitLength >> (8 * UInt64(i)))) }
        return (a, b, c, d)
    }

    /// The 16-byte digest of `finalize()` in the RFC's byte order.
    static func bytes(_ words: (UInt32, UInt32, UInt32, UInt32)) -> [UInt8] {
        [words.0, words.1, words.2, words.3].flatMap { w in (0..<4).map { UInt8(truncatingIfNeeded: w >> (8 * $0)) } }
    }

    private mutating func compress() {
        let t = MD5.table, s = MD5.shifts
        var aa = a, bb = b, cc = c, dd = d
        withUnsafeBytes(of: &block) { raw in
            // Words are little-endian (RFC 1321 section 2).
            @inline(__always) func word(_ i: Int) -> UInt32 { UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)) }
            for i in 0..<64 {
                var f: UInt32
                let g: Int
                switch i >> 4 {
                case 0: f = (bb & cc) | (~bb & dd); g = i
                case 1: f = (dd & bb) | (~dd & cc); g = (5 &* i &+ 1) & 15
                case 2: f = bb ^ cc ^ dd; g = (3 &* i &+ 5) & 15
                default: f = cc ^ (bb | ~dd); g = (7 &* i) & 15
                }
                f = f &+ aa &+ t[i] &+ word(g)
                aa = dd; dd = cc; cc = bb
                let r = s[(i >> 4) << 2 | (i & 3)]
                bb = bb &+ ((f << r) | (f >> (32 - r)))
            }
        }
        a = a &+ aa; b = b &+ bb; c = c &+ cc; d = d &+ dd
    }
}
