import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the thirty-fourth outside tester (`/work/attack35/FINDINGS.md`: the judge as a
/// program): an adapter's standard error was kept whole (100 MB took a run past its hard deadline).
final class ThirtyFourthTesterFindingsTests: XCTestCase {
    /// Standard error is read a line at a time, each cut to 4,096 bytes with a count of the rest;
    /// a last line without a newline is kept too.
    func testStandardErrorLinesAreCutAndCounted() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        let writer = Thread {
            let text = "short\n" + String(repeating: "x", count: 100_000) + "\nend"
            _ = text.utf8CString.withUnsafeBufferPointer { write(writeEnd, $0.baseAddress, $0.count - 1) }
            close(writeEnd)
        }
        writer.start()
        var lines: [String] = []
        DriverConnection.readCappedLines(readEnd) { lines.append($0) }
        close(readEnd)
        XCTAssertEqual(lines.count, 3)
        XCTAssertEqual(lines.first, "short")
        XCTAssertEqual(lines[1], String(repeating: "x", count: 4096) + " … (95904 more bytes)")
        XCTAssertEqual(lines.last, "end")
    }
}
