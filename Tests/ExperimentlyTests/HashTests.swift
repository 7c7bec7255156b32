import XCTest
@testable import Experimently

/// MD5 against the RFC 1321 test suite (appendix A.5) and the golden hash of CONTRACT.md section 6.
final class HashTests: XCTestCase {
    func testRFC1321Suite() {
        let suite: [(String, String)] = [
            ("", "d41d8cd98f00b204e9800998ecf8427e"),
            ("a", "0cc175b9c0f1b6a831c399e269772661"),
            ("abc", "900150983cd24fb0d6963f7d28e17f72"),
            ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
            ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
            ("12345678901234567890123456789012345678901234567890123456789012345678901234567890", "57edf4a22be3c955ac49da2e2107b67a"),
        ]
        for (input, digest) in suite {
            XCTAssertEqual(FeatureFlagEvaluator.md5Hex(of: Array(input.utf8)), digest, "MD5(\"\(input)\")")
        }
    }

    func testBlockBoundaries() {
        // 55, 56, 63, 64 and 65 bytes straddle the padding cases of RFC 1321 section 3.1.
        let expected = [
            55: "ef1772b6dff9a122358552954ad0df65", 56: "3b0c8ac703f828b04c6c197006d17218",
            63: "b06521f39153d618550606be297466d5", 64: "014842d480b571495a4a0363793f7367",
            65: "c743a45e0d2e6a95cb859adae0248435",
        ]
        for (count, digest) in expected {
            XCTAssertEqual(FeatureFlagEvaluator.md5Hex(of: Array(repeating: UInt8(ascii: "a"), count: count)), digest, "\(count) x 'a'")
        }
    }

    func testGoldenHashes() {
        let vectors: [(String, String, Double, String?)] = [
            ("user-123", "my-flag", 0.6927449859213084, "43bc57b1e81dec71c5242122ac05170f"),
            ("alice", "dark-mode", 0.0353864398784935, nil),
            ("test-user", "flag-key", 0.9923393740318716, nil),
            ("", "empty-user", 0.3582690393086523, nil),
        ]
        for (user, key, hash, md5) in vectors {
            XCTAssertEqual(FeatureFlagEvaluator.hashUser(user, flagKey: key), hash, accuracy: 1e-10, "\(user):\(key)")
            if let md5 { XCTAssertEqual(FeatureFlagEvaluator.md5Hex(user, flagKey: key), md5) }
        }
    }
}
