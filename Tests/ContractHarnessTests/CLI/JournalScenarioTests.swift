import XCTest
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ContractHarness
import ExperimentlyMock

/// `contract-harness scenario --from-journal`: a journal written by a real `serve` process (the
/// wire traffic of the shipped scenario `field-identity-switch-earlier-response-last-sdk`, sent
/// with URLSession, plus a 404, an injected 503 and a health check) becomes a skeleton that the
/// strict parser reads and that passes against the shipping SDK; bad journals exit 64 naming the
/// file and the JSON path.
final class JournalScenarioTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path), "contract-harness not built at \(HarnessCLITests.binary.path)")
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("from-journal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    /// One HTTP exchange; returns the status and the parsed JSON body.
    static func call(_ session: URLSession, _ method: String, _ url: String, _ body: JSONValue? = nil, key: String? = nil) async throws -> (Int, JSONValue?) {
        var request = URLRequest(url: URL(string: url)!, timeoutInterval: 30)
        request.httpMethod = method
        if let key { request.setValue(key, forHTTPHeaderField: "X-API-Key") }
        if let body {
            request.httpBody = body.serialized()
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await session.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, try? JSONValue.parse(data).value)
    }

    /// Records the journal: two held assignments released in reverse order (user-2 first), the
    /// fan-out batch of user-2's page view, a flag evaluation, a 404, an injected 503 and `/health`.
    func recordJournal() async throws -> URL {
        let journal = dir.appendingPathComponent("journal.json")
        let serve = try ServeProcess(["--journal", journal.path], directory: dir)
        let api = serve.url, key = serve.key, admin = serve.url + "/__admin"
        let session = URLSession(configuration: .ephemeral)
        defer { RetiredSessions.keep(session) }
        for user in ["user-1", "user-2"] {
            let rule: JSONValue = .object(["match": .object(["path": .string("/api/v1/tracking/assign"), "body": .object(["user_id": .string(user)])]),
                                           "when": .object(["first": .number(1)]), "action": .object(["hold": .object([:])])])
            let (status, _) = try await Self.call(session, "POST", admin + "/faults", rule)
            XCTAssertEqual(status, 201)
        }
        func assign(_ user: String) -> Task<(Int, JSONValue?), Error> {
            Task { try await Self.call(session, "POST", api + "/api/v1/tracking/assign",
                                       .object(["experiment_key": .string("sdk_contract_ab"), "user_id": .string(user)]), key: key) }
        }
        let first = assign("user-1")
        // The server answers once that many requests are parked: order without sleeping.
        _ = try await Self.call(session, "GET", admin + "/holds?count=1&timeout_ms=20000")
        let second = assign("user-2")
        let (_, parked) = try await Self.call(session, "GET", admin + "/holds?count=2&timeout_ms=20000")
        let holds = try XCTUnwrap(parked?["holds"]?.arrayValue)
        XCTAssertEqual(holds.compactMap { $0["user_id"]?.stringValue }, ["user-1", "user-2"])
        let seqs = holds.compactMap { $0["seq"]?.numberValue }.map { Int($0) }
        _ = try await Self.call(session, "POST", admin + "/holds/\(seqs[1])/release")
        let secondAnswer = try await second.value
        XCTAssertEqual(secondAnswer.1?["variant_name"], .string("treatment"))
        _ = try await Self.call(session, "POST", admin + "/holds/\(seqs[0])/release")
        let firstAnswer = try await first.value
        XCTAssertEqual(firstAnswer.1?["variant_name"], .string("control"))
        let event: JSONValue = .object(["event_type": .string("page_view"), "event_name": .string("page_view"),
                                        "user_id": .string("user-2"), "experiment_key": .string("sdk_contract_ab")])
        let (batch, _) = try await Self.call(session, "POST", api + "/api/v1/tracking/batch", .object(["events": .array([event])]), key: key)
        XCTAssertEqual(batch, 200)
        let flag = api + "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=user-1"
        let (enabled, _) = try await Self.call(session, "GET", flag, key: key)
        XCTAssertEqual(enabled, 200)
        let (missing, _) = try await Self.call(session, "GET", api + "/api/v1/feature-flags/evaluate/nope?user_id=user-1", key: key)
        XCTAssertEqual(missing, 404)
        let down: JSONValue = .object(["match": .object(["path": .string("/api/v1/feature-flags/evaluate/sdk_contract_flag")]),
                                       "when": .object(["first": .number(1)]),
                                       "action": .object(["respond": .object(["status": .number(503), "json": .object(["detail": .string("down")])])])])
        _ = try await Self.call(session, "POST", admin + "/faults", down)
        let (failed, _) = try await Self.call(session, "GET", flag, key: key)
        XCTAssertEqual(failed, 503)
        let (health, _) = try await Self.call(session, "GET", api + "/health")
        XCTAssertEqual(health, 200)
        XCTAssertEqual(serve.stop(SIGTERM), 0, serve.stderrText)
        return journal
    }

    func testJournalOfARealServeRunBecomesAScenarioThatPasses() async throws {
        let journal = try await recordJournal()
        let text = try String(contentsOf: journal, encoding: .utf8)
        XCTAssertTrue(text.contains("\"peer\":\"127.0.0.1:"), "each request records its client connection")

        for grouping in ["one", "peer"] {
            let out = dir.appendingPathComponent("skeleton-\(grouping).json")
            let made = try HarnessProcess.run(["scenario", "--from-journal", journal.path, "--clients", grouping, "--out", out.path], in: dir)
            XCTAssertEqual(made.status, 0, made.out)
            // The harness's own strict parser reads it.
            let scenario = try ScenarioParser.parse(Data(contentsOf: out), file: out.path)
            XCTAssertTrue(scenario.description.contains("Not mapped: #7 GET /health"), scenario.description)
            let skeleton = try String(contentsOf: out, encoding: .utf8)
            // The holds are released in the order the journal finished them: user-2's (seq 2) first.
            let releaseSecond = try XCTUnwrap(skeleton.range(of: "{\"release\": \"f2\"}"))
            let releaseFirst = try XCTUnwrap(skeleton.range(of: "{\"release\": \"f1\"}"))
            XCTAssertLessThan(releaseSecond.lowerBound, releaseFirst.lowerBound)
            XCTAssertTrue(skeleton.contains("\"expect\": {\"error\":\"flagNotFound\"}"), skeleton)
            XCTAssertTrue(skeleton.contains("{\"respond\":{\"json\":{\"detail\":\"down\"},\"status\":503}}"), skeleton)
            XCTAssertTrue(skeleton.contains("\"expect\": {\"error\":\"serverError\",\"status\":503}"), skeleton)
            XCTAssertTrue(skeleton.contains("{\"do\": \"trackBatch\""), skeleton)
            if grouping == "one" {
                XCTAssertNil(skeleton.range(of: "\"clients\""))
                // The recorded client asked for the flag again: the SDK under test must send it too.
                XCTAssertTrue(skeleton.contains("{\"do\": \"clearCache\"}"), skeleton)
            } else {
                XCTAssertGreaterThanOrEqual(scenario.clients.count, 2, "the two held requests came on two connections")
            }
            // And it runs and passes against the shipping SDK.
            let run = try HarnessProcess.run(["run", out.path, "--verdict", dir.appendingPathComponent("v-\(grouping).json").path], in: dir)
            XCTAssertEqual(run.status, 0, run.out + skeleton)
            XCTAssertTrue(run.out.contains("1 passed, 0 failed"), run.out)
        }
    }

    /// The text of the fenced block after `<!-- tested: NAME -->` in CrossSDK.md.
    static func block(_ name: String, in doc: String) throws -> String {
        let marker = try XCTUnwrap(doc.range(of: "<!-- tested: \(name) -->\n```"), "CrossSDK.md lost the block '\(name)'")
        let rest = doc[marker.upperBound...]
        let start = try XCTUnwrap(rest.firstIndex(of: "\n"))
        let body = rest[rest.index(after: start)...]
        let end = try XCTUnwrap(body.range(of: "\n```\n"))
        return String(body[..<end.lowerBound]) + "\n"
    }

    /// CrossSDK.md's worked example, exactly as written: the Python SDK's test with its defect
    /// against a real serve, the skeleton the doc shows, and the edited scenario that passes the
    /// Swift SDK and the Python SDK without the defect and fails both broken ones.
    func testCrossSDKWorkedExampleRunsAsWritten() throws {
        let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let interpreter = URL(fileURLWithPath: try XCTUnwrap(python, "python3 is not installed (.ci/run installs it)"))
        let doc = try String(contentsOf: Repository.root.appendingPathComponent("Documentation/CrossSDK.md"), encoding: .utf8)
        let script = dir.appendingPathComponent("late_answer_test.py")
        try Data(try Self.block("from-journal-python", in: doc).utf8).write(to: script)

        let serve = try ServeProcess(["--journal", "journal.json"], directory: dir)
        var environment = ProcessInfo.processInfo.environment
        environment["EXPERIMENTLY_API_URL"] = serve.url
        environment["EXPERIMENTLY_ADMIN_URL"] = serve.url + "/__admin"
        environment["EXPERIMENTLY_API_KEY"] = serve.key
        environment["EXPERIMENTLY_EXAMPLE_DEFECT"] = "stale-write-after-clear"
        let test = try BoundedRun.run(interpreter, [script.path], environment: environment, directory: Repository.root, timeout: 60)
        XCTAssertEqual(serve.stop(SIGTERM), 0, serve.stderrText)
        XCTAssertEqual(test.status, 0, test.err)
        XCTAssertEqual(test.out, "cached for user-1 after the clear: ['sdk_contract_ab']\n", test.err)

        let made = try HarnessProcess.run(["scenario", "--from-journal", "journal.json", "--clients", "one", "--name", "late-assignment-after-clear"], in: dir)
        XCTAssertEqual(made.status, 0)
        XCTAssertEqual(made.out, try Self.block("from-journal-skeleton", in: doc), "CrossSDK.md shows another skeleton than the command writes")
        let skeleton = dir.appendingPathComponent("late.json")
        try Data(made.out.utf8).write(to: skeleton)
        XCTAssertEqual(try HarnessProcess.run(["run", skeleton.path, "--verdict", dir.appendingPathComponent("v0.json").path], in: dir).status, 0)

        let edited = dir.appendingPathComponent("late-edited.json")
        try Data(try Self.block("from-journal-edited", in: doc).utf8).write(to: edited)
        let verdict = dir.appendingPathComponent("v.json").path
        let shipping = try HarnessProcess.run(["run", edited.path, "--verdict", verdict], in: dir)
        XCTAssertEqual(shipping.status, 0, shipping.out)
        let mutant = try HarnessProcess.run(["run", edited.path, "--verdict", verdict, "--mutant", "stale-write-after-clear"], in: dir)
        XCTAssertEqual(mutant.status, 1, mutant.out)
        let caught = "step 7 assert: expected 0 request(s) matching /api/v1/tracking/batch, saw 1"
        XCTAssertTrue(mutant.out.contains(caught), mutant.out)
        let driver = ["run", edited.path, "--verdict", verdict, "--sdk-command", "\(interpreter.path) Examples/python-sdk/driver.py"]
        environment["EXPERIMENTLY_EXAMPLE_DEFECT"] = nil
        let fixed = try BoundedRun.run(HarnessCLITests.binary, driver, environment: environment, directory: Repository.root, timeout: 120)
        XCTAssertEqual(fixed.status, 0, fixed.out + fixed.err)
        environment["EXPERIMENTLY_EXAMPLE_DEFECT"] = "stale-write-after-clear"
        let broken = try BoundedRun.run(HarnessCLITests.binary, driver, environment: environment, directory: Repository.root, timeout: 120)
        XCTAssertEqual(broken.status, 1, broken.out + broken.err)
        XCTAssertTrue(broken.out.contains(caught), broken.out)
    }

    /// Bodies `serve` journaled only in part (`body_size`: its first bytes, size and MD5) are
    /// never read as what was sent or answered (an outside tester: a cut 5 KB configuration became
    /// `decodingError`, a cut batch answer with 40 failures `true`, a cut 100-event batch "has no
    /// events"): a cut request is named as such and not mapped, a cut 2xx answer states no
    /// expectation, and the skeleton still judges its tracking calls.
    func testBodiesJournaledInPartAreNamedNeverRead() throws {
        func b64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }
        let key = #"[{"name":"X-API-Key","value":"***"}]"#
        let assign = #"{"seq":1,"received_at":"2026-01-01T00:00:00.000Z","answered_at":"2026-01-01T00:00:00.001Z","method":"POST","path":"/api/v1/tracking/assign","headers":\#(key),"body":"\#(b64(#"{"experiment_key":"sdk_contract_ab","user_id":"u","context":{"a":"xx"#))","body_size":5000,"outcome":"respond","cancelled":false,"response":{"status":200,"headers":[],"body":"\#(b64(#"{"experiment_key":"sdk_contract_ab","user_id":"u","variant_name":"control"}"#))"}}"#
        let event = #"{"event_type":"e","event_name":"e","user_id":"u","feature_flag_key":"nope"}"#
        let batch = #"{"seq":2,"received_at":"2026-01-01T00:00:00.002Z","answered_at":"2026-01-01T00:00:00.003Z","method":"POST","path":"/api/v1/tracking/batch","headers":\#(key),"body":"\#(b64(#"{"events":[\#(event)]}"#))","json":{"events":[\#(event)]},"outcome":"respond","cancelled":false,"response":{"status":200,"headers":[],"body":"\#(b64(#"{"errors":[{"error":"Nei"#))","body_size":4829}}"#
        let journal = dir.appendingPathComponent("cut.json")
        try Data(#"{"format": "experimently-journal/1", "history": [\#(assign), \#(batch)]}"#.utf8).write(to: journal)
        let out = dir.appendingPathComponent("cut-skeleton.json")
        let (status, text) = try HarnessProcess.run(["scenario", "--from-journal", journal.path, "--out", out.path], in: dir, readingStandardError: true)
        XCTAssertEqual(status, 0, text)
        let skeleton = try JSONValue.parse(Data(contentsOf: out)).value
        let description = skeleton["description"]?.stringValue ?? ""
        XCTAssertTrue(description.contains("#1 POST /api/v1/tracking/assign: its body of 5000 bytes was journaled only in part"), description)
        XCTAssertTrue(description.contains("#2 POST /api/v1/tracking/batch: its answer of 4829 bytes was journaled only in part; no expectation"), description)
        let steps = skeleton["steps"]?.arrayValue ?? []
        XCTAssertEqual(steps.compactMap { $0["do"]?.stringValue }, ["trackBatch"])
        XCTAssertNil(steps.first { $0["do"] == .string("trackBatch") }?["expect"], "a cut answer's failure_count is unknown")
        XCTAssertEqual(skeleton["checks"], .array(["stickiness", "single_flight", "no_stale_write", "batch_chunking", "fan_out"].map(JSONValue.string)))
        let run = try HarnessProcess.run(["run", out.path, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(run.status, 0, run.out)
    }

    func testBadJournalsExitSixtyFourNamingFileAndPath() throws {
        func convert(_ text: String) throws -> (status: Int32, err: String) {
            let file = dir.appendingPathComponent("bad.json")
            try Data(text.utf8).write(to: file)
            let run = try HarnessProcess.run(["scenario", "--from-journal", file.path], in: dir, readingStandardError: true)
            return (run.status, run.out)
        }
        let entry = #"{"seq":1,"received_at":"2026-01-01T00:00:00.000Z","method":"GET","path":"/health","headers":[],"body":"","cancelled":false}"#
        let cases: [(String, String)] = [
            (#"{"format": "experimently-journal/1", "history": [{"seq": "one"}]}"#, "bad.json: at $.history[0].seq: expected an integer, found string \"one\""),
            (#"{"format": "experimently-scenario/1", "history": []}"#, "bad.json: at $.format: expected \"experimently-journal/1\""),
            (#"{"format": "experimently-journal/1", "history": {}}"#, "bad.json: at $.history: expected an array of requests"),
            (#"{"format": "experimently-journal/1", "url": "x", "history": [{"seq":1,"#, "(an unfinished journal"),
            (#"{"format": "experimently-journal/1", "history": [\#(entry)]}"#, "at $.history: expected at least one request of an SDK operation"),
            (#"{"format": "experimently-journal/1", "history": [{"seq":1,"received_at":"t","method":"POST","path":"/x","response":{"status":200,"body":"%%"}}]}"#,
             "at $.history[0].response.body: expected base64 text"),
            (#"{"format": "experimently-journal/1", "history": [\#(entry), \#(entry)]}"#,
             "at $.history[1].seq: expected a request number used once ($.history[0] has it too)"),
        ]
        for (text, message) in cases {
            let r = try convert(text)
            XCTAssertEqual(r.status, 64, "\(text): \(r.err)")
            XCTAssertTrue(r.err.contains(message), "\(text): \(r.err)")
        }
        let missing = try HarnessProcess.run(["scenario"], in: dir)
        XCTAssertEqual(missing.status, 64)
        // --fixtures: copied into the skeleton; a fixtures file that is not an object is refused.
        let journal = dir.appendingPathComponent("ok.json")
        let assign = #"{"seq":1,"received_at":"2026-01-01T00:00:00.000Z","method":"POST","path":"/api/v1/tracking/assign","headers":[],"body":"","json":{"experiment_key":"e","user_id":"u"},"response":{"status":404,"headers":[],"body":""},"outcome":"respond","cancelled":false}"#
        try Data(#"{"format": "experimently-journal/1", "history": [\#(assign)]}"#.utf8).write(to: journal)
        let fixtures = dir.appendingPathComponent("fixtures.json")
        try Data(#"{"api_keys": [{"key": "k"}], "experiments": [], "flags": []}"#.utf8).write(to: fixtures)
        let made = try HarnessProcess.run(["scenario", "--from-journal", journal.path, "--fixtures", fixtures.path], in: dir)
        XCTAssertEqual(made.status, 0)
        XCTAssertTrue(made.out.contains(#""fixtures": {"api_keys":[{"key":"k"}],"experiments":[],"flags":[]}"#), made.out)
        XCTAssertTrue(made.out.contains(#""expect": {"error":"experimentNotFound"}"#), made.out)
        try Data("[1]".utf8).write(to: fixtures)
        XCTAssertEqual(try HarnessProcess.run(["scenario", "--from-journal", journal.path, "--fixtures", fixtures.path], in: dir).status, 64)
        try Data(#"{"experiments": []}"#.utf8).write(to: fixtures)
        let p = Process()
        p.executableURL = HarnessCLITests.binary
        p.arguments = ["scenario", "--from-journal", journal.path, "--fixtures", fixtures.path]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 64, text)
        XCTAssertTrue(text.contains("fixtures.json: at $: expected mock fixtures"), text)
    }
}
