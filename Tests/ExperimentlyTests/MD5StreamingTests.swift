import XCTest
@testable import Experimently

/// The streaming MD5 gives the same digest however the input is split and whatever sequence type
/// carries it (bulk copy and byte-by-byte paths), across every block boundary.
final class MD5StreamingTests: XCTestCase {
    private func digest(_ parts: [[UInt8]], contiguous: Bool) -> [UInt8] {
        var md5 = MD5()
        for part in parts {
            if contiguous { md5.update(part) } else { md5.update(AnySequence(part)) }
        }
        return MD5.bytes(md5.finalize())
    }

    func testSplitsAndSequenceKindsAgree() {
        for length in 0...200 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let reference = digest([bytes], contiguous: true)
            for cut in Set([0, 1, length / 3, length / 2, max(0, length - 1), length]) where cut <= length {
                let parts = [Array(bytes[..<cut]), [], Array(bytes[cut...])]
                XCTAssertEqual(digest(parts, contiguous: true), reference, "length \(length) cut \(cut)")
                XCTAssertEqual(digest(parts, contiguous: false), reference, "length \(length) cut \(cut), byte path")
            }
        }
    }

    func testHashUserMatchesTheDigestOfTheJoinedString() {
        for n in [0, 1, 30, 54, 55, 56, 63, 64, 100, 130] {
            let user = String(repeating: "u", count: n), key = "flag-\(n)"
            let bytes = MD5.bytes({ var m = MD5(); m.update(Array("\(user):\(key)".utf8)); return m.finalize() }())
            let word = UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24
            XCTAssertEqual(FeatureFlagEvaluator.hashUser(user, flagKey: key), Double(word) / 4_294_967_296.0, "n \(n)")
        }
    }
}
