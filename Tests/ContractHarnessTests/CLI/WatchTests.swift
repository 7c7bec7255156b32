import XCTest
import Foundation

/// `run --watch`: a change to a scenario file reruns it; a removed folder is waited for; SIGTERM stops the watch.
final class WatchTests: XCTestCase {
    func testAChangedScenarioIsRunAgain() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path), "contract-harness not built")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("harness-watch-\(UUID().uuidString)")
        let scenarios = dir.appendingPathComponent("scenarios")
        try FileManager.default.createDirectory(at: scenarios, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = scenarios.appendingPathComponent("ok.json")
        try Data(HarnessCLITests.scenario("ok", expectEnabled: true).utf8).write(to: file)

        let p = Process()
        p.executableURL = HarnessCLITests.binary
        p.arguments = ["run", "scenarios", "--watch", "--verdict", "v.json"]
        p.currentDirectoryURL = dir
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        // A hang guard, not an ordering device: the reads below end when the lines come.
        let guardTimer = DispatchWorkItem { if p.isRunning { p.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 120, execute: guardTimer)
        defer { guardTimer.cancel() }

        var buffer = ""
        var lines: [String] = []
        func readUntil(_ prefix: String) -> Bool {
            while true {
                if let i = lines.firstIndex(where: { $0.hasPrefix(prefix) }) { lines.removeSubrange(...i); return true }
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { return false }
                buffer += String(decoding: chunk, as: UTF8.self)
                while let nl = buffer.firstIndex(of: "\n") {
                    lines.append(String(buffer[..<nl]))
                    buffer = String(buffer[buffer.index(after: nl)...])
                }
            }
        }
        XCTAssertTrue(readUntil("1 passed, 0 failed"))
        XCTAssertTrue(readUntil("watch: waiting for a change to 1 scenario file(s) under scenarios"))
        try Data(HarnessCLITests.scenario("ok", expectEnabled: false).utf8).write(to: file)
        XCTAssertTrue(readUntil("watch: changed: ok.json; running again"))
        XCTAssertTrue(readUntil("0 passed, 1 failed"))
        XCTAssertTrue(readUntil("watch: waiting"))
        // The folder removed: the watch waits for it to come back (it ended before), then runs again.
        try FileManager.default.removeItem(at: scenarios)
        XCTAssertTrue(readUntil("watch: changed: ok.json; running again"))
        XCTAssertTrue(readUntil("watch: no scenario file under scenarios now; waiting for one"))
        XCTAssertTrue(p.isRunning)
        try FileManager.default.createDirectory(at: scenarios, withIntermediateDirectories: true)
        try Data(HarnessCLITests.scenario("ok", expectEnabled: true).utf8).write(to: file)
        XCTAssertTrue(readUntil("watch: changed: ok.json; running again"))
        XCTAssertTrue(readUntil("1 passed, 0 failed"))
        XCTAssertTrue(readUntil("watch: waiting"))
        p.terminate()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 143)
        let verdict = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("v.json"))) as? [String: Any]
        XCTAssertEqual(verdict?["ok"] as? Bool, true, "the verdict is the last run's")
    }
}
