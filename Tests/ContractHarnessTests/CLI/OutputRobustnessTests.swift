import XCTest
import Foundation
@testable import ContractHarness

/// Outputs that must survive how people run the harness: a closed stdout pipe, a symlinked
/// verdict path, a crashed scenario in the report, absurd clock advances (issue 10, found by a
/// review run).
final class OutputRobustnessTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path), "contract-harness not built")
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("outputs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { if let dir { try? FileManager.default.removeItem(at: dir) } }

    static var smoke: String { Repository.root.appendingPathComponent("scenarios/contract-smoke.json").path }

    /// Two outputs naming one file (also through `./` or a symbolic link) are refused before the
    /// run: a JUnit file written over the verdict would lose the verdict.
    func testTwoOutputsNamingOneFileAreRefused() throws {
        try FileManager.default.createSymbolicLink(atPath: dir.appendingPathComponent("link.json").path, withDestinationPath: "v.json")
        for pair in [["--verdict", "v.json", "--junit", "./v.json"], ["--verdict", "v.json", "--html", "link.json"],
                     ["--junit", "j.xml", "--mermaid", "sub/../j.xml"]] {
            try? FileManager.default.createDirectory(at: dir.appendingPathComponent("sub"), withIntermediateDirectories: true)
            let run = try HarnessProcess.run(["run", Self.smoke] + pair, in: dir, readingStandardError: true)
            XCTAssertEqual(run.status, 64, "\(pair): \(run.out)")
            XCTAssertTrue(run.out.contains("name the same file"), run.out)
        }
        let fine = try HarnessProcess.run(["run", Self.smoke, "--verdict", "v.json", "--junit", "v.xml"], in: dir)
        XCTAssertEqual(fine.status, 0, fine.out)
    }

    /// `run ... | head -1`: the reader goes away; the run still ends normally with its verdict.
    func testAClosedStdoutPipeLosesTextNotTheVerdict() throws {
        let p = Process()
        p.executableURL = HarnessCLITests.binary
        p.arguments = ["run", Self.smoke, Self.smoke.replacingOccurrences(of: "contract-smoke", with: "s4-cache-is-per-user"), "--verdict", "v.json"]
        p.currentDirectoryURL = dir
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try out.fileHandleForReading.close()   // nobody reads: every write gets EPIPE
        try p.run()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationReason, .exit, "killed by signal \(p.terminationStatus)")
        XCTAssertEqual(p.terminationStatus, 0)
        let v = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("v.json"))) as? [String: Any])
        XCTAssertEqual(v["ok"] as? Bool, true)
        XCTAssertNil(v["in_progress"])
    }

    /// A symlinked --verdict is written through (never replaced by a regular file); the same rule
    /// keeps `--verdict /dev/null` a device.
    func testASymlinkedVerdictIsWrittenThrough() throws {
        let target = dir.appendingPathComponent("real.json"), link = dir.appendingPathComponent("link.json")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        let p = Process()
        p.executableURL = HarnessCLITests.binary
        p.arguments = ["run", Self.smoke, "--verdict", link.path]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: link.path), target.path, "the link is still a link")
        XCTAssertEqual((try JSONSerialization.jsonObject(with: Data(contentsOf: target)) as? [String: Any])?["ok"] as? Bool, true)
    }

    /// The report counts and shows crashed and errored scenarios, with the reason and stderr tail.
    func testTheReportShowsCrashedScenarios() {
        var crashed = ScenarioResult(name: "boom", file: "boom.json", tags: ["t"], source: nil, status: .crashed, durationMilliseconds: 3,
                                     checks: [CheckResult(name: "crash", passed: false, message: "worker died of SIGILL")],
                                     reason: "worker died of SIGILL", smoke: nil, history: [], historyDigest: "")
        crashed.crash = .object(["stderr_tail": .array([.string("Fatal error: clearCache with a request in flight")])])
        let passed = ScenarioResult(name: "fine", file: "fine.json", tags: [], source: nil, status: .passed, durationMilliseconds: 1,
                                    checks: [], reason: nil, smoke: nil, history: [], historyDigest: "")
        let v = Verdict(harnessVersion: "t", sdkName: "s", sdkVersion: "1", seed: 0, startedAt: Date(), durationMilliseconds: 4,
                        results: [passed, crashed], invalid: [])
        let html = v.html(redacting: [])
        XCTAssertTrue(html.contains("1 crashed"), "the counts line names the crash")
        XCTAssertTrue(html.contains("value=\"crashed\""), "a filter for crashed scenarios")
        XCTAssertTrue(html.contains("id=\"scenario-1\""), "the crashed scenario has a section")
        XCTAssertTrue(html.contains("Fatal error: clearCache with a request in flight"), "its stderr tail is shown")
    }

    /// A clock advance beyond ten years is a malformed file (exit 64 with the path), not an SDK crash.
    func testAnAbsurdAdvanceIsMalformed() {
        let text = #"{"format": "experimently-scenario/1", "name": "n", "description": "d", "checks": ["single_flight"], "steps": [{"advance": 1e308}]}"#
        XCTAssertThrowsError(try ScenarioParser.parse(Data(text.utf8), file: "n.json")) { error in
            XCTAssertTrue("\(error)".contains("$.steps[0]"), "\(error)")
        }
    }
}
