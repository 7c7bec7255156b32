import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// Issue 10: `explore`, `mutants` and `run --sdk-command` stopped by SIGINT or SIGTERM kill every
/// process group they started (worker processes, the adapter), write their verdict marked
/// interrupted, and exit 130 / 143. Through the built binary; the signal is sent once the progress
/// line shows and the children exist (gates, never a sleep).
final class InterruptTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("harness-interrupt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path),
                          "contract-harness not built at \(HarnessCLITests.binary.path)")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    /// A scenario whose last step waits ten minutes (longer than the test waits for an exit, so a
    /// command that only ends once its children are done fails here): login-b's flag fetch is serialized behind user-a's
    /// held one, so the `wait_for` can never be met and is never decided early (an operation with
    /// no request of its own yet is not inert). `explore` may swap the two fault steps (2 schedules).
    func hangingScenario() throws -> String {
        let file = dir.appendingPathComponent("hangs.json")
        try Data("""
        {"format": "experimently-scenario/1", "name": "interrupt-hangs", "description": "waits ten minutes for a cancellation that never comes (a wait for cancelled requests is never decided early; a hold nothing can reach now is decided at once)",
         "step_timeout_ms": 600000, "app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab"},
         "steps": [
          {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "query": {"user_id": "user-a"}}, "action": {"hold": {}}}, "id": "held-a"},
          {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "query": {"user_id": "user-b"}}, "action": {"hold": {}}}, "id": "held-b"},
          {"app": "login", "user": "user-a", "as": "login-a", "async": true},
          {"wait_for": {"held": "held-a", "count": 1}},
          {"app": "logout", "as": "logout", "async": true},
          {"app": "login", "user": "user-b", "as": "login-b", "async": true},
          {"wait_for": {"requests": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "user": "user-b", "cancelled": true}, "count": 1}}],
         "explore": {"steps": [0, 1], "exhaustive": true},
         "checks": ["no_stale_after_logout"]}
        """.utf8).write(to: file)
        return file.path
    }

    /// The same kind of hang without reference-app steps (explore skips scenarios with app steps
    /// out of process): a lookup held, then a wait for a cancellation that never comes.
    func hangingSDKScenario() throws -> String {
        let file = dir.appendingPathComponent("hangs-sdk.json")
        try Data("""
        {"format": "experimently-scenario/1", "name": "interrupt-hangs-sdk", "description": "waits ten minutes for a cancellation that never comes (after a clock move, which might have caused one: so it is not decided at once)",
         "step_timeout_ms": 600000,
         "steps": [
          {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "query": {"user_id": "user-a"}}, "action": {"hold": {}}}, "id": "held-a"},
          {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "query": {"user_id": "user-b"}}, "action": {"hold": {}}}, "id": "held-b"},
          {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-a", "as": "a", "async": true},
          {"wait_for": {"held": "held-a", "count": 1}},
          {"advance": 1},
          {"wait_for": {"requests": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "user": "user-a", "cancelled": true}, "count": 1}}],
         "explore": {"steps": [0, 1], "exhaustive": true},
         "checks": ["no_stale_write"]}
        """.utf8).write(to: file)
        return file.path
    }

    static let pythonDriver = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"

    /// Starts the command, waits for `gate` in its output and for its children, sends `signal`;
    /// asserts the exit status, that nothing survives in the children's process groups, and
    /// returns the verdict written to `v.json`.
    func interrupt(_ arguments: [String], gate: String, signal: Int32, status: Int32,
                   file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        let p = try HarnessProcess.Started(arguments + ["--verdict", "v.json"], in: dir)
        XCTAssertTrue(p.waitFor(gate), "no '\(gate)' in: \(p.output)", file: file, line: line)
        var children: [Int32] = []
        let deadline = Date(timeIntervalSinceNow: 60)
        while children.isEmpty && Date() < deadline {
            children = p.children
            if children.isEmpty { usleep(2000) }   // polling for a condition (as the crash tests do), not ordering
        }
        XCTAssertFalse(children.isEmpty, "no child process started: \(p.output)", file: file, line: line)
        let groups = Set(children.compactMap { HarnessProcess.stat($0)?.group })
        XCTAssertEqual(p.stop(signal), status, p.output, file: file, line: line)
        XCTAssertEqual(HarnessProcess.survivors(inGroups: groups), [], "still running after \(signal): \(p.output)", file: file, line: line)
        XCTAssertTrue(p.output.contains("interrupted"), p.output, file: file, line: line)
        let verdict = try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent("v.json"))).value
        XCTAssertEqual(verdict["interrupted"], .bool(true), "\(verdict)", file: file, line: line)
        XCTAssertEqual(verdict["ok"], .bool(false), file: file, line: line)
        return verdict
    }

    func testExploreKillsItsWorkersOnSIGTERM() throws {
        let v = try interrupt(["explore", try hangingScenario()], gate: "explore: 0/2 schedules", signal: SIGTERM, status: 143)
        XCTAssertEqual(v["explore_progress"]?["total"], .number(2))
    }

    func testExploreKillsItsAdapterOnSIGINT() throws {
        _ = try interrupt(["explore", try hangingSDKScenario(), "--sdk-command", Self.pythonDriver],
                          gate: "explore: 0/2 schedules", signal: SIGINT, status: 130)
    }

    func testMutantsKillsItsWorkersOnSIGINT() throws {
        let v = try interrupt(["mutants", try hangingScenario(), "--step-timeout-ms", "600000"],
                              gate: "mutants: 1 scenarios", signal: SIGINT, status: 130)
        XCTAssertTrue(v["error"]?.stringValue?.contains("interrupted by signal \(SIGINT)") == true, "\(v)")
    }

    func testRunKillsItsAdapterOnSIGTERM() throws {
        // An earlier run's reports: an interrupted run writes its own over them (an outside tester:
        // "all green" survived a SIGTERM while the verdict and JUnit said interrupted).
        let html = dir.appendingPathComponent("r.html"), mermaid = dir.appendingPathComponent("r.md")
        for file in [html, mermaid] { try Data("OLD REPORT all green".utf8).write(to: file) }
        // The gate is the run's header line: its handler is installed by then (the verdict lists the scenario).
        let v = try interrupt(["run", try hangingScenario(), "--sdk-command", Self.pythonDriver, "--html", html.path, "--mermaid", mermaid.path],
                              gate: ": SDK python-example", signal: SIGTERM, status: 143)
        XCTAssertEqual(v["scenarios"]?.arrayValue?.first?["status"], .string("error"))
        for file in [html, mermaid] {
            XCTAssertFalse(try String(contentsOf: file, encoding: .utf8).contains("OLD REPORT"), file.lastPathComponent)
        }
        XCTAssertTrue(try String(contentsOf: html, encoding: .utf8).contains("interrupt-hangs"))
    }

    /// Interrupted while the adapter starts (before the command's own handler): the adapter is
    /// killed all the same and the exit is 143; the verdict is marked interrupted (the writer
    /// `HarnessCommand.main` registers first), no longer left in progress.
    func testRunInterruptedWhileItsAdapterStartsKillsIt() throws {
        let slow = "exec python3 -c 'import sys; sys.stderr.write(\"starting\\n\"); sys.stderr.flush(); sys.stdin.readline()'"
        let p = try HarnessProcess.Started(["run", try hangingScenario(), "--sdk-command", slow, "--verdict", "v.json"], in: dir)
        var children: [Int32] = []
        let deadline = Date(timeIntervalSinceNow: 60)
        while children.isEmpty && Date() < deadline {
            children = p.children
            if children.isEmpty { usleep(2000) }   // polling for a condition, not ordering
        }
        XCTAssertFalse(children.isEmpty, p.output)
        let groups = Set(children.compactMap { HarnessProcess.stat($0)?.group })
        XCTAssertEqual(p.stop(SIGTERM), 143, p.output)
        XCTAssertEqual(HarnessProcess.survivors(inGroups: groups), [], p.output)
        let verdict = try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent("v.json"))).value
        XCTAssertEqual(verdict["interrupted"], .bool(true), "\(verdict)")
        XCTAssertNil(verdict["in_progress"], "\(verdict)")
    }
}
