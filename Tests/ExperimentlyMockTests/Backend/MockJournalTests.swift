import Foundation
import XCTest
@testable import ExperimentlyMock

/// A streaming `MockBackend` writing a `MockJournal`: bounded memory, every request journaled,
/// numbers beyond Double's range kept as written.
final class MockJournalTests: XCTestCase {
    private var path: String!

    override func setUp() {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("journal-\(UUID().uuidString).json").path
    }

    override func tearDown() { try? FileManager.default.removeItem(atPath: path) }

    private func track(_ json: String) -> MockRequest {
        MockRequest(method: "POST", target: "/api/v1/tracking/track",
                    headers: [("Host", "h"), ("X-API-Key", Fixtures.sdkContractAPIKey), ("Content-Type", "application/json")], body: Data(json.utf8))
    }

    func testNumberBeyondDoubleIsAcceptedAndJournaledWithItsOriginalText() async throws {
        let backend = MockBackend()
        let journal = try MockJournal(path: path, url: "http://127.0.0.1:1", secrets: [Fixtures.sdkContractAPIKey])
        backend.streamHistory(HistoryRetention(), to: { journal.append($0) })
        let body = #"{"event_type":"purchase","user_id":"u","experiment_key":"sdk_contract_ab","value":1e999,"metadata":{"tiny":-1E+400}}"#
        guard case .respond(let response) = await backend.handle(track(body)) else { return XCTFail("expected a response") }
        XCTAssertEqual(response.status, 200, "FastAPI/pydantic v2 accept it: json.loads gives inf, a float field allows inf")
        let report = backend.shutdown()
        try journal.finish(stoppedBy: "SIGTERM", pending: backend.finishHistoryStream(), state: backend.state, totals: backend.stateTotals, shutdown: report)

        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertTrue(text.contains(#""value":1e999"#), "the request's own text")
        XCTAssertTrue(text.contains(#""tiny":-1E+400"#), "spelling kept")
        XCTAssertFalse(text.contains(Fixtures.sdkContractAPIKey), "keys redacted")
        let j = try JSONValue.parse(Data(text.utf8)).value
        XCTAssertEqual(j["format"], .string("experimently-journal/1"))
        let entry = try XCTUnwrap(j["history"]?.arrayValue?.first)
        XCTAssertEqual(entry["json"]?["value"], .number(.infinity))
        XCTAssertEqual(entry["response"]?["status"], .number(200))
        XCTAssertEqual(j["state"]?["events"]?.arrayValue?.first?["event"]?["value"], .number(.infinity), "stored events write 1e999")
        XCTAssertEqual(j["state"]?["events_total"], .number(1))
        // Python's json (and so jq-less CI scripts) reads it too.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            p.arguments = ["-c", "import json,sys; j=json.load(open(sys.argv[1])); assert j['history'][0]['json']['value'] == float('inf')", path]
            try p.run()
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0)
        }
    }

    /// Member names that are canonically equivalent but differ in scalars (`"k\u0301"`, `"\u1e31"`)
    /// are two members, as in the backend's Python dict: the `/track` echo's `properties` and the
    /// journal's stored events (track and batch) keep both, a name written twice keeps its last
    /// value. Before, `JSONValue`'s `String` keys merged them (a forty-eighth outside tester, H1).
    func testCanonicallyEquivalentMemberNamesStayTwoMembersInTheEchoAndTheJournal() async throws {
        let backend = MockBackend()
        let journal = try MockJournal(path: path, url: "http://127.0.0.1:1", secrets: [])
        backend.streamHistory(HistoryRetention(), to: { journal.append($0) })
        let metadata = #"{"k\u0301":1,"\u1e31":2,"k\u0301":3}"#
        let event = #"{"event_type":"x","user_id":"u","experiment_key":"sdk_contract_ab","metadata":"# + metadata + "}"
        guard case .respond(let echo) = await backend.handle(track(event)) else { return XCTFail("expected a response") }
        XCTAssertEqual(echo.status, 200)
        let both = Data(#""properties":{"#.utf8) + Data("\"k\u{301}\":3,\"\u{1e31}\":2}".utf8)
        XCTAssertNotNil(echo.body.range(of: both), String(decoding: echo.body, as: UTF8.self))
        XCTAssertNotNil(echo.body.range(of: Data(#""metadata":null"#.utf8)), "the echo's own metadata stays null")
        let batch = MockRequest(method: "POST", target: "/api/v1/tracking/batch",
                                headers: [("Host", "h"), ("X-API-Key", Fixtures.sdkContractAPIKey), ("Content-Type", "application/json")],
                                body: Data((#"{"events":["# + event + "," + #"{"event_type":"y","user_id":"u","experiment_key":"sdk_contract_ab"}]}"#).utf8))
        guard case .respond(let summary) = await backend.handle(batch) else { return XCTFail("expected a response") }
        XCTAssertEqual(summary.status, 200)
        XCTAssertEqual(backend.state.events.map { $0.exact != nil }, [true, true, false], "only events that need it are read twice")
        let report = backend.shutdown()
        try journal.finish(stoppedBy: "SIGTERM", pending: backend.finishHistoryStream(), state: backend.state, totals: backend.stateTotals, shutdown: report)
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-c", """
            import json,sys
            j = json.load(open(sys.argv[1]))
            want = {'k\\u0301': 3, '\\u1e31': 2}
            events = j['state']['events']
            assert [e['event'].get('metadata') for e in events] == [want, want, None], events
            """, path]
        try p.run()
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0)
    }

    func testMemoryKeepsAWindowWhileTheJournalKeepsEveryRequest() async throws {
        let backend = MockBackend()
        let journal = try MockJournal(path: path, url: "http://127.0.0.1:1", secrets: [])
        backend.streamHistory(HistoryRetention(window: 8, bodyPrefixBytes: 16, stateWindow: 2), to: { journal.append($0) })
        backend.addFault(FaultRule(match: FaultMatch(path: "/held"), action: .hold(label: "h")))
        let held = Task { await backend.handle(MockRequest(method: "GET", target: "/held", headers: [("Host", "h")])) }
        while backend.heldRequests.isEmpty { await Task.yield() }
        let big = #"{"event_type":"e","user_id":"u","experiment_key":"sdk_contract_ab","metadata":{"pad":""# + String(repeating: "x", count: 5000) + #""}}"#
        for _ in 0..<100 { _ = await backend.handle(track(big)) }
        XCTAssertLessThanOrEqual(backend.history.count, 8 + 8 / 4 + 16 + 1, "a window, plus the held request")
        XCTAssertEqual(backend.history.first?.seq, 1, "the held request stays while in flight")
        XCTAssertEqual(backend.requestCount, 101)
        XCTAssertLessThanOrEqual(backend.state.events.count, 2 + 8, "the window, trimmed in steps of 8")
        XCTAssertEqual(backend.stateTotals.events, 100)
        let last = try XCTUnwrap(backend.history.last)
        XCTAssertEqual(last.body.count, 16, "large bodies kept as a prefix")
        XCTAssertEqual(last.bodySize, big.utf8.count)
        XCTAssertEqual(last.bodyMD5, MockMD5.digest(Array(big.utf8)).map { String(format: "%02x", $0) }.joined())
        XCTAssertNil(last.json)

        let report = backend.shutdown() // fails the hold; its outcome arrives on another task
        _ = await held.value
        try journal.finish(stoppedBy: "SIGTERM", pending: backend.finishHistoryStream(), state: backend.state, totals: backend.stateTotals, shutdown: report)
        let j = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: path))).value
        let seqs = try XCTUnwrap(j["history"]?.arrayValue).compactMap { $0["seq"]?.numberValue.map(Int.init) }
        XCTAssertEqual(seqs.sorted(), Array(1...101), "every request once")
        XCTAssertEqual(seqs.last, 1, "the held request is journaled when it was answered (dropped by the shutdown)")
        XCTAssertEqual(j["state"]?["events_total"], .number(100))
        XCTAssertEqual(j["shutdown"]?["unreleased_holds"]?.arrayValue?.count, 1)
    }

    func testRequestsStillInFlightAtTheEndAreJournaledWithoutOutcome() async throws {
        let backend = MockBackend()
        let journal = try MockJournal(path: path, url: "http://127.0.0.1:1", secrets: [])
        backend.streamHistory(HistoryRetention(), to: { journal.append($0) })
        backend.addFault(FaultRule(match: FaultMatch(path: "/held"), action: .hold(label: "h")))
        let held = Task { await backend.handle(MockRequest(method: "GET", target: "/held", headers: [("Host", "h")])) }
        while backend.heldRequests.isEmpty { await Task.yield() }
        _ = await backend.handle(MockRequest(method: "GET", target: "/health", headers: [("Host", "h")]))
        try journal.finish(stoppedBy: "SIGINT", pending: backend.finishHistoryStream(), state: backend.state, totals: backend.stateTotals,
                           shutdown: ShutdownReport(unreleasedHolds: [], unusedFaults: [], inFlight: 1))
        let j = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: path))).value
        let history = try XCTUnwrap(j["history"]?.arrayValue)
        XCTAssertEqual(history.map { $0["seq"] }, [.number(2), .number(1)])
        XCTAssertNil(history[1]["outcome"], "in flight: no outcome")
        XCTAssertEqual(history[1]["hold"], .number(1))
        backend.shutdown()
        _ = await held.value
    }
}
