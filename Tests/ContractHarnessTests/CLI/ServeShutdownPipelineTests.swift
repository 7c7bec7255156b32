import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import ContractHarness
import ExperimentlyMock

/// `serve` at SIGTERM journals every complete request that arrived, also those pipelined behind
/// a held request that the shutdown drops (they cannot be answered on the wire: HTTP/1.1 answers
/// in order; they are journaled with the shutdown's 503).
final class ServeShutdownPipelineTests: XCTestCase {
    func testSIGTERMJournalsRequestsPipelinedBehindHeldRequests() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("serve-pipeline-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let journal = dir.appendingPathComponent("journal.json")
        let faults = dir.appendingPathComponent("faults.json")
        try Data(#"[{"match": {"path": "/api/v1/tracking/assign"}, "action": {"hold": {}}}]"#.utf8).write(to: faults)
        let serve = try ServeProcess(["--journal", journal.path, "--faults", faults.path], directory: dir)
        // 50 connections: a held assignment, then a health check and a flag evaluation pipelined
        // behind it; 20 more connections answered normally and left idle.
        let n = 50
        let held = try (0..<n).map { i -> WireClient in
            let c = try WireClient(url: serve.url)
            let body = #"{"experiment_key":"sdk_contract_ab","user_id":"user-\#(i)"}"#
            c.send(Array(("POST /api/v1/tracking/assign HTTP/1.1\r\nHost: h\r\nX-API-Key: \(serve.key)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
                          + "GET /health HTTP/1.1\r\nHost: h\r\n\r\n"
                          + "GET /api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=p\(i) HTTP/1.1\r\nHost: h\r\nX-API-Key: \(serve.key)\r\n\r\n").utf8))
            return c
        }
        let idle = try (0..<20).map { _ in try WireClient(url: serve.url) }
        for c in idle { c.send(Array("GET /health HTTP/1.1\r\nHost: h\r\n\r\n".utf8)) }
        for c in idle { XCTAssertEqual(c.readStatus(), 200) }
        // Every held request is parked (the admin API waits on the server, no polling).
        let (data, response) = try await URLSession.shared.data(from: URL(string: "\(serve.url)/__admin/holds?count=\(n)&timeout_ms=20000")!)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200, String(decoding: data, as: UTF8.self))

        XCTAssertEqual(serve.stop(SIGTERM), 0, serve.stderrText)
        for c in held { XCTAssertNil(c.readStatus(timeout: 5), "nothing can be answered behind a dropped hold") }
        let j = try JSONValue.parse(Data(contentsOf: journal)).value
        let history = try XCTUnwrap(j["history"]?.arrayValue)
        XCTAssertEqual(history.count, 20 + 3 * n, "every complete request that arrived is journaled")
        XCTAssertEqual(history.filter { $0["outcome"] == .string("drop_before_response") }.count, n)
        let pipelined = history.filter { $0["response"]?["status"] == .number(503) }
        XCTAssertEqual(pipelined.count, 2 * n, "pipelined behind the holds: the shutdown's 503")
        XCTAssertTrue(pipelined.allSatisfy { $0["route"] == nil }, "never processed")
        XCTAssertEqual(j["shutdown"]?["unreleased_holds"]?.arrayValue?.count, n)
    }
}
