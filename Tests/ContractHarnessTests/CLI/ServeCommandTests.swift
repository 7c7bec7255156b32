import XCTest
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ContractHarness
import ExperimentlyMock

/// A running `contract-harness serve`: started with `--port 0`, up once it printed its URL line
/// (read with a deadline, never a sleep), stopped with a signal and waited for with a deadline.
final class ServeProcess: @unchecked Sendable { // `out` and `err` are LockedData; `process` is set once in init
    let process = Process()
    private let out = LockedData(), err = LockedData()
    private let output = NSCondition()
    private let exited = DispatchSemaphore(value: 0)
    private(set) var url = ""
    private(set) var key = ""

    /// Starts serve with `arguments` (after `serve --port 0`) and waits up to `timeout` seconds for
    /// the URL and key lines; throws (after killing it) when they do not come.
    init(_ arguments: [String], directory: URL, timeout: Double = 30) throws {
        process.executableURL = HarnessCLITests.binary
        process.arguments = ["serve", "--port", "0"] + arguments
        process.currentDirectoryURL = directory
        let stdout = Pipe(), stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        process.terminationHandler = { [exited] _ in exited.signal() }
        for (pipe, sink) in [(stdout, out), (stderr, err)] {
            pipe.fileHandleForReading.readabilityHandler = { [output] handle in
                let data = handle.availableData
                if data.isEmpty { handle.readabilityHandler = nil }
                sink.append(data)
                output.lock(); output.broadcast(); output.unlock()
            }
        }
        try process.run()
        let deadline = Date(timeIntervalSinceNow: timeout)
        output.lock()
        while !(stdoutText.contains("EXPERIMENTLY_API_KEY=") || !process.isRunning) && output.wait(until: deadline) {}
        output.unlock()
        for line in stdoutText.split(separator: "\n") {
            if line.hasPrefix("EXPERIMENTLY_API_URL=") { url = String(line.dropFirst("EXPERIMENTLY_API_URL=".count)) }
            if line.hasPrefix("EXPERIMENTLY_API_KEY=") { key = String(line.dropFirst("EXPERIMENTLY_API_KEY=".count)) }
        }
        if url.isEmpty || key.isEmpty {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            throw ServeFailure(message: "serve printed no URL/key within \(timeout) s; stdout: \(stdoutText) stderr: \(stderrText)")
        }
    }

    struct ServeFailure: Error, CustomStringConvertible { let message: String; var description: String { message } }

    var stdoutText: String { String(decoding: out.get(), as: UTF8.self) }
    var stderrText: String { String(decoding: err.get(), as: UTF8.self) }

    /// Whether standard error holds `text` within `timeout` seconds: its reader runs apart from
    /// standard output's, so a line serve wrote before its URL may be read after it.
    func stderrContains(_ text: String, timeout: Double = 10) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        output.lock()
        while !stderrText.contains(text) && output.wait(until: deadline) {}
        output.unlock()
        return stderrText.contains(text)
    }

    /// Sends `signal` and waits up to `timeout` seconds for the exit; returns the status, or nil
    /// (after killing it) when it did not stop.
    func stop(_ signal: Int32 = SIGTERM, timeout: Double = 20) -> Int32? {
        kill(process.processIdentifier, signal)
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            exited.wait()
            return nil
        }
        // Let the readers drain what was written before the exit.
        let deadline = Date(timeIntervalSinceNow: 5)
        output.lock()
        while !stderrText.contains("stopped on") && output.wait(until: deadline) {}
        output.unlock()
        return process.terminationStatus
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}

/// `contract-harness serve` over real loopback TCP.
final class ServeCommandTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path), "contract-harness not built at \(HarnessCLITests.binary.path)")
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    func get(_ url: String, key: String? = nil) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: url)!, timeoutInterval: 10)
        if let key { request.setValue(key, forHTTPHeaderField: "X-API-Key") }
        let session = URLSession(configuration: .ephemeral)
        defer { RetiredSessions.keep(session) }
        let (data, response) = try await session.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    func testServesHealthAndStopsOnSIGTERMWritingTheJournal() async throws {
        let journal = dir.appendingPathComponent("journal.json")
        let serve = try ServeProcess(["--journal", journal.path], directory: dir)
        XCTAssertTrue(serve.url.hasPrefix("http://127.0.0.1:"), serve.url)
        XCTAssertNotEqual(serve.url, "http://127.0.0.1:0")
        XCTAssertEqual(serve.key, "sdk-contract-key")
        let health = try await get(serve.url + "/health")
        XCTAssertEqual(health.0, 200)
        let flag = try await get(serve.url + "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=bob", key: serve.key)
        XCTAssertEqual(flag.0, 200)
        XCTAssertEqual(flag.1, #"{"config":null,"enabled":true,"key":"sdk_contract_flag","reason":"rollout"}"#)
        XCTAssertEqual(serve.stop(SIGTERM), 0, serve.stderrText)
        XCTAssertTrue(serve.stderrText.contains("stopped on SIGTERM after 2 requests"), serve.stderrText)
        let j = try JSONValue.parse(Data(contentsOf: journal)).value
        XCTAssertEqual(j["format"], .string("experimently-journal/1"))
        XCTAssertEqual(j["stopped_by"], .string("SIGTERM"))
        XCTAssertEqual(j["history"]?.arrayValue?.map { $0["path"]?.stringValue ?? "" }, ["/health", "/api/v1/feature-flags/evaluate/sdk_contract_flag"])
        XCTAssertEqual(j["history"]?.arrayValue?.last?["response"]?["status"], .number(200))
        XCTAssertFalse(String(decoding: try Data(contentsOf: journal), as: UTF8.self).contains("sdk-contract-key"), "the key is recorded as ***")
    }

    func testFixturesFaultsAndAPIKeyOptionsAndSIGINT() async throws {
        let fixtures = dir.appendingPathComponent("fixtures.json")
        try Data(#"{"api_keys": [{"key": "old", "revoked": true}], "flags": [{"key": "f", "status": "ACTIVE", "rollout_percentage": 0}]}"#.utf8).write(to: fixtures)
        let faults = dir.appendingPathComponent("faults.json")
        try Data(#"[{"name": "health down", "match": {"path": "/health"}, "when": {"first": 1}, "action": {"respond": {"status": 503, "json": {"detail": "down"}}}}]"#.utf8).write(to: faults)
        let serve = try ServeProcess(["--fixtures", fixtures.path, "--faults", faults.path, "--api-key", "ci-key"], directory: dir)
        XCTAssertEqual(serve.key, "ci-key")
        let first = try await get(serve.url + "/health")
        let second = try await get(serve.url + "/health")
        XCTAssertEqual(first.0, 503)
        XCTAssertEqual(second.0, 200)
        let flag = try await get(serve.url + "/api/v1/feature-flags/evaluate/f?user_id=u", key: "ci-key")
        XCTAssertEqual(flag.1, #"{"config":null,"enabled":false,"key":"f","reason":"rollout"}"#)
        let revoked = try await get(serve.url + "/api/v1/feature-flags/evaluate/f?user_id=u", key: "old")
        XCTAssertEqual(revoked.0, 401)
        XCTAssertEqual(serve.stop(SIGINT), 0, serve.stderrText)
        XCTAssertTrue(serve.stderrText.contains("stopped on SIGINT after 4 requests"), serve.stderrText)
    }

    func testMalformedFilesAndBadUsageExitSixtyFour() throws {
        let fixtures = dir.appendingPathComponent("fixtures.json")
        try Data(#"{"api_keys": [{"key": "k"}], "flags": [{"key": "f", "status": "ACTIVE", "rollout": 5}]}"#.utf8).write(to: fixtures)
        let r = try BoundedRun.run(HarnessCLITests.binary, ["serve", "--port", "0", "--fixtures", fixtures.path], directory: dir, timeout: 30)
        XCTAssertEqual(r.status, 64, r.err)
        XCTAssertTrue(r.err.contains("malformed fixtures file \(fixtures.path): at $.flags[0].rollout: unknown key 'rollout'"), r.err)
        let faults = dir.appendingPathComponent("faults.json")
        try Data(#"{"not": "an array"}"#.utf8).write(to: faults)
        let f = try BoundedRun.run(HarnessCLITests.binary, ["serve", "--port", "0", "--faults", faults.path], directory: dir, timeout: 30)
        XCTAssertEqual(f.status, 64, f.err)
        XCTAssertTrue(f.err.contains("malformed faults file"), f.err)
        XCTAssertEqual(try BoundedRun.run(HarnessCLITests.binary, ["serve", "--port", "70000"], directory: dir, timeout: 30).status, 64)
        XCTAssertEqual(try BoundedRun.run(HarnessCLITests.binary, ["serve", "--bogus"], directory: dir, timeout: 30).status, 64)
        let busy = try ServeProcess([], directory: dir)
        let port = String(busy.url.split(separator: ":").last!)
        let clash = try BoundedRun.run(HarnessCLITests.binary, ["serve", "--port", port], directory: dir, timeout: 30)
        XCTAssertEqual(clash.status, 70, clash.err)
        XCTAssertTrue(clash.err.contains("cannot listen on 127.0.0.1:\(port)"), clash.err)
        XCTAssertEqual(busy.stop(), 0)
    }
}
