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
        defer { session.invalidateAndCancel() }
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

    func testBadJournalsExitSixtyFourNamingFileAndPath() throws {
        func convert(_ text: String) throws -> (status: Int32, err: String) {
            let file = dir.appendingPathComponent("bad.json")
            try Data(text.utf8).write(to: file)
            let p = Process()
            p.executableURL = HarnessCLITests.binary
            p.arguments = ["scenario", "--from-journal", file.path]
            let err = Pipe()
            p.standardError = err
            p.standardOutput = FileHandle.nullDevice
            try p.run()
            let e = err.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            return (p.terminationStatus, String(decoding: e, as: UTF8.self))
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
        ]
        for (text, message) in cases {
            let r = try convert(text)
            XCTAssertEqual(r.status, 64, "\(text): \(r.err)")
            XCTAssertTrue(r.err.contains(message), "\(text): \(r.err)")
        }
        let missing = try HarnessProcess.run(["scenario"], in: dir)
        XCTAssertEqual(missing.status, 64)
    }
}
