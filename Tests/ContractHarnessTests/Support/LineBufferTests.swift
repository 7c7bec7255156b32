import Foundation
import XCTest
@testable import ContractHarness

/// `LineBuffer` splits any chunking of a stream into the same lines, keeps a final unterminated
/// line for `takeRest`, and scans a long line once (the work counted, not timed).
final class LineBufferTests: XCTestCase {
    func testEveryChunkingGivesTheSameLines() {
        let text = Array("first\n\nsecond line\nthird é\n{\"a\":1}\nrest".utf8)
        let expected = ["first", "", "second line", "third é", "{\"a\":1}"]
        for size in 1...text.count {
            var buffer = LineBuffer()
            var lines: [String] = []
            var i = 0
            while i < text.count {
                buffer.append(text[i..<min(i + size, text.count)])
                while let line = buffer.nextLine() { lines.append(String(decoding: line, as: UTF8.self)) }
                i += size
            }
            XCTAssertEqual(lines, expected, "chunks of \(size)")
            XCTAssertEqual(buffer.takeRest().map { String(decoding: $0, as: UTF8.self) }, "rest")
            XCTAssertNil(buffer.takeRest())
        }
    }

    func testALongLineInSmallChunksArrivesWhole() {
        var buffer = LineBuffer()
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 65536)
        for _ in 0..<64 { buffer.append(chunk); XCTAssertNil(buffer.nextLine()) }
        buffer.append([0x0A, UInt8(ascii: "y"), 0x0A])
        XCTAssertEqual(buffer.nextLine()?.count, 64 * 65536)
        XCTAssertEqual(buffer.nextLine(), Data("y".utf8))
        XCTAssertNil(buffer.nextLine())
        XCTAssertNil(buffer.takeRest())
    }
}
