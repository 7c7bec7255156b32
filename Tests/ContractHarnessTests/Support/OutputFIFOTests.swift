import XCTest
import Foundation
@testable import ContractHarness

/// Outputs (`--verdict`, `--junit`, `--html`) pointed at a FIFO: with no reader the write fails at
/// once, naming the path ("no reader on the FIFO"; the command exits 70), never blocks forever;
/// with a reader the whole output arrives, and no in-progress verdict is sent before it.
final class OutputFIFOTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("output-fifo-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    func fifo(_ name: String) throws -> String {
        let path = dir.appendingPathComponent(name).path
        XCTAssertEqual(mkfifo(path, 0o600), 0, String(cString: strerror(errno)))
        return path
    }

    func testNoReaderFailsAtOnceNamingThePath() throws {
        let path = try fifo("v.json")
        XCTAssertThrowsError(try Data("{}".utf8).writeOutput(to: path)) { error in
            XCTAssertEqual("\(error)", "no reader on the FIFO \(path)")
            XCTAssertEqual(error.localizedDescription, "no reader on the FIFO \(path)")
        }
    }

    func testAReaderGetsTheWholeOutput() throws {
        let path = try fifo("v.json")
        let reader = open(path, O_RDONLY | O_NONBLOCK)   // the reader is there before the write (a gate)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        let text = String(repeating: "verdict ", count: 1000)
        try Data(text.utf8).writeOutput(to: path)
        var got = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(reader, &buffer, buffer.count)
            if n <= 0 { break }
            got.append(contentsOf: buffer[0..<n])
        }
        XCTAssertEqual(String(decoding: got, as: UTF8.self), text)
    }

    func testRunExits70NamingTheFIFOOfEachOutput() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path),
                          "contract-harness not built at \(HarnessCLITests.binary.path)")
        let scenario = Repository.root.appendingPathComponent("scenarios/app-assigned-control-shown-with-exposure-before-event.json").path
        for option in ["--verdict", "--junit", "--html"] {
            let path = try fifo("out\(option).fifo")
            let (status, err) = try HarnessProcess.run(["run", scenario, option, path], in: dir, readingStandardError: true)
            XCTAssertEqual(status, 70, "\(option): \(err)")
            XCTAssertTrue(err.contains("no reader on the FIFO \(path)"), "\(option): \(err)")
        }
    }
}
