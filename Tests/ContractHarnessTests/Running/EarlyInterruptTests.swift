import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// Issue 10: a SIGINT or SIGTERM at any moment after `main` starts stops `run`, `explore` and
/// `mutants` with exit 130 / 143 (never the raw signal) and leaves a verdict marked interrupted,
/// never an earlier green one nor one still "in progress". Through the built binary: each process
/// is signalled at increasing delays (0 to 100 ms) after it has installed its handlers (the gate:
/// /proc/PID/status shows SIGINT and SIGTERM caught); the outcome must be the same at every delay.
final class EarlyInterruptTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("harness-early-interrupt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path),
                          "contract-harness not built at \(HarnessCLITests.binary.path)")
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    /// Whether process `pid` catches SIGINT and SIGTERM (the SigCgt mask of /proc/PID/status).
    static func catchesInterrupts(_ pid: Int32) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
              let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16) else { return false }
        let wanted = (UInt64(1) << UInt64(SIGINT - 1)) | (UInt64(1) << UInt64(SIGTERM - 1))
        return mask & wanted == wanted
    }

    /// Starts `arguments` over an earlier green verdict `v.json`, waits for the handlers, then
    /// `delay` milliseconds, signals; asserts 130/143 by exit and the verdict marked interrupted.
    func signalled(_ arguments: [String], delay: Int, signal: Int32, file: StaticString = #filePath, line: UInt = #line) throws {
        let path = dir.appendingPathComponent("v.json")
        try Data(#"{"format": "experimently-verdict/1", "ok": true, "counts": {"total": 1, "passed": 1}}"#.utf8).write(to: path)
        let p = try HarnessProcess.Started(arguments + ["--verdict", "v.json"], in: dir)
        let deadline = Date(timeIntervalSinceNow: 60)
        while !Self.catchesInterrupts(p.process.processIdentifier) && p.process.isRunning && Date() < deadline {
            usleep(500)   // polling for a condition (the handlers installed), not ordering
        }
        XCTAssertTrue(p.process.isRunning, "ended before the signal: \(p.output)", file: file, line: line)
        usleep(useconds_t(delay * 1000))   // the moment under test; every moment must give the same outcome
        let status = p.stop(signal)
        let what = "\(arguments.first ?? "") signal \(signal) after \(delay) ms"
        XCTAssertEqual(p.process.terminationReason, .exit, "\(what): died by the raw signal: \(p.output)", file: file, line: line)
        XCTAssertEqual(status, signal == SIGINT ? 130 : 143, "\(what): \(p.output)", file: file, line: line)
        let v = try JSONValue.parse(Data(contentsOf: path)).value
        XCTAssertEqual(v["interrupted"], .bool(true), "\(what): \(v)", file: file, line: line)
        XCTAssertEqual(v["ok"], .bool(false), "\(what)", file: file, line: line)
        XCTAssertNil(v["in_progress"], "\(what): \(v)", file: file, line: line)
    }

    func testRunIsInterruptedAtEveryMoment() throws {
        let scenarios = Repository.root.appendingPathComponent("scenarios").path
        for (i, delay) in stride(from: 0, through: 100, by: 10).enumerated() {
            try signalled(["run", scenarios], delay: delay, signal: i.isMultiple(of: 2) ? SIGINT : SIGTERM)
        }
    }

    func testExploreAndMutantsAreInterruptedAtEveryMoment() throws {
        let scenario = Repository.root.appendingPathComponent("scenarios/race-explore-three-holds-and-logout.json").path
        for delay in [0, 20, 60] {
            try signalled(["explore", scenario], delay: delay, signal: SIGINT)
            try signalled(["mutants", scenario], delay: delay, signal: SIGTERM)
        }
    }
}
