import XCTest
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ContractHarness
@testable import ExperimentlyMock

/// Issue 10 section 3 through the real binary: no configured key in any output (console,
/// verdict, JUnit, the serve journal), a run that passed nothing is not green, and `vectors`
/// interrupted kills its adapter and still writes its verdict.
final class SecretsAndSignalsCLITests: XCTestCase {
    var dir: URL!
    /// A key with characters that are spelled differently in a query, in JSON and raw.
    static let key = "s3cr3t/k\u{E9}y 42"
    static var spellings: [String] {
        let redactor = SecretRedactor(secrets: [key])
        return SecretRedactor.spellings(of: key).map { String(decoding: $0, as: UTF8.self) }.filter { redactor.contains(secretIn: $0) }
    }

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path), "contract-harness not built at \(HarnessCLITests.binary.path)")
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("secrets-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    func assertNoKey(_ text: String, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(text.isEmpty, "\(what) is empty", file: file, line: line)
        for spelling in Self.spellings {
            XCTAssertFalse(text.contains(spelling), "\(what) shows the key as \(spelling.debugDescription): \(text.prefix(3000))", file: file, line: line)
        }
    }

    /// A failing check whose message quotes the key (a header match, a query, a body) must not
    /// print it anywhere; before, the console FAIL line showed it.
    func testKeyNeverReachesConsoleVerdictOrJUnit() throws {
        let keyJSON = JSONValue.string(Self.key).jsonText
        let scenario = """
        {"format": "experimently-scenario/1", "name": "leaky", "description": "a failing check quoting the key",
         "config": {"api_key": \(keyJSON)},
         "fixtures": {"api_keys": [{"key": \(keyJSON)}], "flags": [{"key": "f", "status": "ACTIVE", "rollout_percentage": 100}]},
         "steps": [
          {"do": "evaluateFlag", "flag": "f", "user": \(keyJSON), "expect": {"value": {"enabled": true}}},
          {"do": "trackWithStatus", "event": {"user": "u", "name": "e", "flag": "f", "properties": {"token": \(keyJSON)}}, "expect": {"value": true}},
          {"assert": {"requests": {"headers": {"X-API-Key": \(keyJSON)}}, "count": 2}},
          {"assert": {"requests": {"path_prefix": "/api/v1/"}, "count": 3}}
         ]}
        """
        let file = dir.appendingPathComponent("leaky.json")
        try Data(scenario.utf8).write(to: file)
        let r = try BoundedRun.run(HarnessCLITests.binary, ["run", file.path, "--verdict", "v.json", "--junit", "j.xml"], directory: dir, timeout: 120)
        XCTAssertEqual(r.status, 1, r.out + r.err)
        XCTAssertTrue(r.out.contains("FAIL  leaky"), r.out)
        XCTAssertTrue(r.out.contains("***"), r.out)
        assertNoKey(r.out + r.err, "the console")
        let verdict = String(decoding: try Data(contentsOf: dir.appendingPathComponent("v.json")), as: UTF8.self)
        assertNoKey(verdict, "the verdict")
        XCTAssertTrue(verdict.contains("user_id=***"), "the percent-encoded key in a target is masked: \(verdict.prefix(2000))")
        assertNoKey(String(decoding: try Data(contentsOf: dir.appendingPathComponent("j.xml")), as: UTF8.self), "the JUnit file")
    }

    /// A scenario name and a label with terminal escapes reach the console escaped, through the binary.
    func testControlCharactersInNamesNeverReachTheTerminalRaw() throws {
        let file = dir.appendingPathComponent("evil.json")
        try Data(#"""
        {"format": "experimently-scenario/1", "name": "evil\u001b[2J\u001b]0;owned\u0007\nPASS  forged\u202e", "description": "d",
         "steps": [{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "as": "lbl\u001b[31m", "expect": {"value": {"enabled": false}}}]}
        """#.utf8).write(to: file)
        let r = try BoundedRun.run(HarnessCLITests.binary, ["run", file.path, "--verdict", "v.json"], directory: dir, timeout: 120)
        XCTAssertEqual(r.status, 1, r.out + r.err)
        let unsafe = (r.out + r.err).unicodeScalars.filter { $0 != "\n" && TerminalText.isUnsafe($0) }
        XCTAssertTrue(unsafe.isEmpty, "raw control characters on the terminal: \(unsafe.map { $0.value }) in \((r.out + r.err).debugDescription)")
        XCTAssertTrue(r.out.contains(#"FAIL  evil\u{1B}[2J\u{1B}]0;owned\u{7}\u{A}PASS  forged\u{202E}"#), r.out)
        XCTAssertTrue(r.out.contains(#"lbl\u{1B}[31m"#), r.out)
        XCTAssertEqual(r.out.split(separator: "\n").filter { $0.hasPrefix("PASS") }, [], "a name forged a PASS line")
    }

    /// A run where every scenario was skipped passed nothing: exit 1, `ok: false`, said so.
    func testRunThatPassedNothingIsNotGreen() async throws {
        let file = dir.appendingPathComponent("clock.json")
        try Data(#"{"format": "experimently-scenario/1", "name": "clocked", "description": "d", "steps": [{"advance": 1}, {"assert": {"requests": {}, "count": 0}}]}"#.utf8).write(to: file)
        let verdict = dir.appendingPathComponent("v.json").path
        let junit = dir.appendingPathComponent("j.xml").path
        let status = await HarnessCommand.main(["run", file.path, "--verdict", verdict, "--junit", junit], driver: LimitedDriver(lacking: ["virtual_clock"]))
        XCTAssertEqual(status, 1)
        let v = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: verdict))).value
        XCTAssertEqual(v["ok"], .bool(false))
        XCTAssertEqual(v["counts"]?["skipped"], .number(1))
        XCTAssertEqual(v["error"], .string("nothing passed: all 1 scenario(s) were skipped"))
        XCTAssertTrue(try String(contentsOfFile: junit, encoding: .utf8).contains("<error message=\"nothing passed"))
        // The same file with a driver that has the clock passes: exit 0, ok.
        let green = await HarnessCommand.main(["run", file.path, "--verdict", verdict])
        XCTAssertEqual(green, 0)
        XCTAssertEqual(try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: verdict))).value["ok"], .bool(true))
    }

    /// The serve journal hides the key however the client sent it: `X-API-Key`, `Authorization:
    /// Bearer`, the query, the body (JSON-escaped), and what the answer echoed back.
    func testJournalEntriesAreRedactedWhereverTheKeyWas() async throws {
        let backend = MockBackend(fixtures: Fixtures(apiKeys: [APIKey(key: Self.key)]), redactor: SecretRedactor(secrets: [Self.key]))
        let query = String(decoding: SecretRedactor.spellings(of: Self.key)[1], as: UTF8.self) // percent-encoded, upper hex
        _ = await backend.handle(MockRequest(method: "POST", target: "/api/v1/tracking/track?api_key=\(query)",
                                             headers: [("X-API-Key", Self.key), ("Authorization", "Bearer \(Self.key)"), ("Content-Type", "application/json")],
                                             body: JSONValue.object(["user_id": .string(Self.key), "event_name": .string(Self.key)]).serialized()))
        _ = await backend.handle(MockRequest(method: "GET", target: "/api/v1/feature-flags/evaluate/\(query)?user_id=u",
                                             headers: [("Authorization", "Bearer \(Self.key)")]))
        let report = backend.shutdown()
        let path = dir.appendingPathComponent("redacted-journal.json").path
        let journal = try MockJournal(path: path, url: "http://127.0.0.1:1", secrets: [Self.key])
        try journal.finish(stoppedBy: "SIGTERM", pending: backend.history, state: backend.state, totals: backend.stateTotals, shutdown: report)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        assertNoKey(text, "the journal")
        for entry in backend.history {
            assertNoKey(String(decoding: entry.body, as: UTF8.self) + " " + entry.path + " " + (entry.query ?? "")
                        + entry.headers.map(\.value).joined(separator: " ") + (entry.response?.bodyText ?? ""), "entry \(entry.seq)")
        }
        XCTAssertEqual(backend.history.first?.headers.first { $0.name == "Authorization" }?.value, "Bearer ***")
        XCTAssertEqual(backend.history.first?.query, "api_key=***")
        XCTAssertEqual(backend.history.first?.json?["user_id"], .string("***"))
        // The model saw the request as sent: the key authenticated it.
        XCTAssertNotEqual(backend.history.first?.response?.status, 401)
        // A backend without secrets (the harness's in-process one) records as before.
        let plain = MockBackend(fixtures: Fixtures(apiKeys: [APIKey(key: Self.key)]))
        _ = await plain.handle(MockRequest(method: "GET", target: "/health", headers: [("Authorization", "Bearer \(Self.key)")]))
        XCTAssertEqual(plain.history.first?.headers.first?.value, "Bearer \(Self.key)")
    }

    /// Through the binary: `serve --api-key K` writes a journal without K.
    func testServeJournalThroughTheBinaryHidesTheKey() async throws {
        let journal = dir.appendingPathComponent("journal.json")
        let serve = try ServeProcess(["--api-key", "ci-secret-key-7", "--journal", journal.path], directory: dir)
        var request = URLRequest(url: URL(string: serve.url + "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u&api_key=ci-secret-key-7")!, timeoutInterval: 10)
        request.setValue("Bearer ci-secret-key-7", forHTTPHeaderField: "Authorization")
        request.setValue("ci-secret-key-7", forHTTPHeaderField: "X-API-Key")
        let session = URLSession(configuration: .ephemeral)
        defer { RetiredSessions.keep(session) }
        let (_, response) = try await session.data(for: request)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        XCTAssertEqual(serve.stop(SIGTERM), 0, serve.stderrText)
        let text = String(decoding: try Data(contentsOf: journal), as: UTF8.self)
        XCTAssertTrue(text.contains("evaluate/sdk_contract_flag"), text)
        XCTAssertFalse(text.contains("ci-secret-key-7"), text)
    }

    /// `vectors` stopped by SIGTERM (SIGINT) while its adapter runs: the adapter's whole process
    /// group is killed, the verdict says interrupted, exit 143 (130).
    func testVectorsInterruptedKillsTheAdapterGroupAndWritesTheVerdict() throws {
        for (sig, status) in [(SIGTERM, Int32(143)), (SIGINT, Int32(130))] {
            let childFile = dir.appendingPathComponent("child-\(sig).pid"), shellFile = dir.appendingPathComponent("sh-\(sig).pid")
            let p = Process()
            p.executableURL = HarnessCLITests.binary
            p.arguments = ["vectors", "--vectors", Repository.root.appendingPathComponent("golden-vectors").path, "--verdict", "v-\(sig).json",
                           "--sdk-command", "sleep 300 & echo $! > \(childFile.path).tmp; mv \(childFile.path).tmp \(childFile.path); echo $$ > \(shellFile.path).tmp; mv \(shellFile.path).tmp \(shellFile.path); wait"]
            p.currentDirectoryURL = dir
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            let exited = DispatchSemaphore(value: 0)
            p.terminationHandler = { _ in exited.signal() }
            try p.run()
            // Gate: the adapter wrote its pids (a file appears; no fixed sleep decides anything).
            // Each pid file is written aside and renamed into place: a file made by `>` exists
            // before its number is in it (a reader once found it empty, under load).
            let deadline = Date(timeIntervalSinceNow: 30)
            while !(FileManager.default.fileExists(atPath: childFile.path) && FileManager.default.fileExists(atPath: shellFile.path)), Date() < deadline {
                usleep(10_000)
            }
            let child = try XCTUnwrap(Int32(String(contentsOf: childFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            let shell = try XCTUnwrap(Int32(String(contentsOf: shellFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
            kill(p.processIdentifier, sig)
            if exited.wait(timeout: .now() + 30) == .timedOut {
                // Never read terminationStatus of a running Process (Foundation traps): kill, reap, fail.
                kill(p.processIdentifier, SIGKILL)
                p.waitUntilExit()
                XCTFail("vectors did not stop within 30 s of \(sig)")
                continue
            }
            XCTAssertEqual(p.terminationStatus, status)
            let v = try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent("v-\(sig).json"))).value
            XCTAssertEqual(v["interrupted"], .bool(true))
            XCTAssertEqual(v["ok"], .bool(false))
            for pid in [shell, child] { XCTAssertFalse(Self.alive(pid), "adapter process \(pid) still runs after \(sig)") }
        }
    }

    /// Running (not gone and not a zombie waiting to be reaped). SIGKILL is delivered before
    /// `kill` returns, but the kernel tears the process down asynchronously: look for up to 10 s.
    static func alive(_ pid: Int32) -> Bool {
        let deadline = Date(timeIntervalSinceNow: 10)
        repeat {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return kill(pid, 0) == 0 }
            guard let close = stat.lastIndex(of: ")") else { return false }
            let state = stat[stat.index(close, offsetBy: 2)]
            if state == "Z" || state == "X" { return false }
            usleep(10_000)
        } while Date() < deadline
        return true
    }
}
