import XCTest
import Foundation
@testable import ContractHarness

/// An adapter's child that leaves the adapter's process group (`setsid`) and outlives the adapter
/// is still killed and reaped when the driver shuts down (Linux: the harness is a child subreaper
/// and finds the adapter's processes by the token in their environment, `AdapterDescendants`).
final class EscapingAdapterChildTests: XCTestCase {
    func testASetsidChildOfTheAdapterDoesNotOutliveTheDriver() async throws {
        #if !os(Linux)
        throw XCTSkip("child subreapers are Linux only")
        #else
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("escaping-adapter-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let pidFile = dir.appendingPathComponent("escaped.pid")
        let script = dir.appendingPathComponent("adapter.py")
        // The hostile part: a `setsid` child (a session and group of its own) that sleeps for
        // 1000 s, and the adapter itself exits at shutdown, leaving it an orphan.
        try """
        import json, os, subprocess, sys
        child = subprocess.Popen(["sleep", "1000"], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        open(sys.argv[1], "w").write(str(child.pid))
        for line in sys.stdin:
            m = json.loads(line)
            if m["type"] == "hello":
                print(json.dumps({"id": m["id"], "result": {"protocol": "experimently-driver/1", "sdk": {"name": "escaper", "version": "0"}, "capabilities": ["evaluateFlag"]}}), flush=True)
            elif m["type"] == "shutdown":
                print(json.dumps({"id": m["id"], "result": {}}), flush=True)
                os._exit(0)
            else:
                print(json.dumps({"id": m["id"], "result": {}}), flush=True)
        """.write(to: script, atomically: true, encoding: .utf8)
        let driver: ProcessSDKDriver
        do { driver = try await ProcessSDKDriver.launch(command: "python3 '\(script.path)' '\(pidFile.path)'") } catch {
            throw XCTSkip("python3 is needed: \(error)")
        }
        let text = try String(contentsOf: pidFile, encoding: .utf8)
        let escaped = try XCTUnwrap(pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)))
        // Never leave it running, whatever the outcome.
        defer { kill(escaped, SIGKILL) }
        XCTAssertEqual(kill(escaped, 0), 0, "the escaped child runs while the adapter does")
        await driver.shutdown()
        // Killed and reaped: no such process any more (not even a zombie).
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/proc/\(escaped)"), "the setsid child of the adapter outlived the driver")
        #endif
    }
}
