import XCTest
import Foundation
@testable import ContractHarness

/// `generate` stopped by SIGINT or SIGTERM prints the summary so far, marked interrupted, and
/// exits 130 / 143, also when it started with SIGINT ignored (a background job of a
/// non-interactive shell inherits SIG_IGN). Through the built binary; the signal is sent once the
/// handlers are installed (a gate, never a sleep); what ran by then varies, so the summary is
/// either counts per SDK or `nothing run yet`.
final class GenerateInterruptTests: XCTestCase {
    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path),
                          "contract-harness not built at \(HarnessCLITests.binary.path)")
    }

    /// Runs `generate` through `/bin/sh -c` (`trap '' INT` first when `ignored`), signals it once
    /// it catches the signal, and returns how it ended and its standard output.
    func interruptGenerate(signal: Int32, ignored: Bool) throws -> (reason: Process.TerminationReason, status: Int32, out: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("generate-interrupt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", (ignored ? "trap '' INT; " : "") + "exec \"$0\" generate --count 1000000 --out \"$1\"",
                       HarnessCLITests.binary.path, dir.appendingPathComponent("out").path]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let deadline = Date(timeIntervalSinceNow: 60)
        while !EarlyInterruptTests.catchesInterrupts(p.processIdentifier) && p.isRunning && Date() < deadline {
            usleep(500)   // polling for a condition (the handlers installed), not ordering
        }
        kill(p.processIdentifier, signal)
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        return (p.terminationReason, p.terminationStatus, text)
    }

    func testSIGINTStopsGenerateEvenWhenItArrivedIgnored() throws {
        let r = try interruptGenerate(signal: SIGINT, ignored: true)
        XCTAssertEqual(r.reason, .exit, r.out)
        XCTAssertEqual(r.status, 130, r.out)
        // The signal may land before generate registered its summary handler (the early handler
        // then says "nothing run yet"), or after (the heading and the counts so far): both are right.
        XCTAssertTrue(r.out.contains("interrupted by signal 2: generate stopped early (1000000 scenarios, seed 1, from 0 asked): ")
                      || r.out.contains("interrupted by signal 2: generate stopped early (nothing run yet)"), r.out)
        XCTAssertTrue(r.out.contains("shipping: ") || r.out.contains("nothing run yet"), r.out)
    }

    func testSIGTERMStopsGenerateWithTheSummarySoFar() throws {
        let r = try interruptGenerate(signal: SIGTERM, ignored: false)
        XCTAssertEqual(r.reason, .exit, r.out)
        XCTAssertEqual(r.status, 143, r.out)
        XCTAssertTrue(r.out.contains("interrupted by signal 15: generate stopped early"), r.out)
        XCTAssertTrue(r.out.contains(" passed, ") || r.out.contains("nothing run yet"), r.out)
    }
}
