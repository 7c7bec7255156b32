import XCTest
@testable import ExperimentlyMock

final class MockMD5Tests: XCTestCase {
    /// The RFC 1321 appendix A.5 test suite.
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
        for (input, expected) in suite { XCTAssertEqual(MockMD5.hex(input), expected, "MD5(\"\(input)\")") }
    }

    /// Padding edge cases around the 56-byte boundary (lengths 55, 56, 64 bytes).
    func testPaddingBoundaries() {
        XCTAssertEqual(MockMD5.hex(String(repeating: "a", count: 55)), "ef1772b6dff9a122358552954ad0df65")
        XCTAssertEqual(MockMD5.hex(String(repeating: "a", count: 56)), "3b0c8ac703f828b04c6c197006d17218")
        XCTAssertEqual(MockMD5.hex(String(repeating: "a", count: 64)), "014842d480b571495a4a0363793f7367")
    }

    /// CONTRACT.md section 6 golden hash values.
    func testGoldenHash() {
        XCTAssertEqual(MockMD5.hex("user-123:my-flag"), "43bc57b1e81dec71c5242122ac05170f")
        let vectors: [(String, String, Double)] = [
            ("user-123", "my-flag", 0.6927449859213084),
            ("alice", "dark-mode", 0.0353864398784935),
            ("test-user", "flag-key", 0.9923393740318716),
            ("", "empty-user", 0.3582690393086523),
        ]
        for (u, k, h) in vectors { XCTAssertEqual(MockBucketing.hash(userID: u, key: k), h, accuracy: 1e-10, "\(u):\(k)") }
    }

    /// CONTRACT.md section 2 buckets for `sdk_contract_ab` and md5-mod100 for ("user-123","my-flag").
    func testContractBuckets() {
        let table: [(String, Int)] = [("user-1", 8), ("user-2", 73), ("bob", 42), ("user-123", 84)]
        for (user, bucket) in table {
            XCTAssertEqual(MockBucketing.experimentBucket(userID: user, experimentKey: "sdk_contract_ab"), bucket, user)
        }
        XCTAssertEqual(MockBucketing.flagBucket(userID: "user-123", flagKey: "my-flag"), 79)
    }
}
