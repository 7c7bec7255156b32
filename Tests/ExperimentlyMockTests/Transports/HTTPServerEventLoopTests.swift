#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import XCTest
@testable import ExperimentlyMock

/// The event-loop server: cancellation of parked requests, shutdown that answers what arrived,
/// method case, absolute-form targets, the connection limit, no thread per connection.
final class HTTPServerEventLoopTests: XCTestCase {

    private func assign(_ user: String, close: Bool = false) -> String {
        let body = #"{"experiment_key":"sdk_contract_ab","user_id":"\#(user)"}"#
        return "POST /api/v1/tracking/assign HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\nContent-Type: application/json\r\n"
            + (close ? "Connection: close\r\n" : "") + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    /// A served backend holding every assignment, and a raw client whose assignment it holds.
    private func heldAssignment() async throws -> (backend: MockBackend, server: MockHTTPServer, port: UInt16, log: BoundedEventLog, client: RawClient, hold: HoldID) {
        let (backend, server, port) = try serveBackend()
        let log = BoundedEventLog(backend)
        backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/tracking/assign"), action: .hold(label: "a")))
        let client = try RawClient(port: port)
        client.send(assign("u1"))
        let parked = await log.hold(1)
        return (backend, server, port, log, client, try XCTUnwrap(parked))
    }

    func testClientResetWhileHeldMarksTheRequestCancelledAndTheHoldStaysReleasable() async throws {
        let (backend, server, port, log, client, hold) = try await heldAssignment()
        client.reset()
        let cancelled = await log.wait { $0 == .cancelled(seq: 1) }
        XCTAssertEqual(cancelled, .cancelled(seq: 1), "the backend hears that the client left")
        XCTAssertEqual(backend.history.first?.cancelled, true)
        XCTAssertEqual(backend.heldRequests.map(\.id), [hold], "as in-process: the request stays in the backend")
        XCTAssertTrue(backend.release(hold))
        let answered = await log.answered(1)
        XCTAssertEqual(answered?.outcome, "respond")
        XCTAssertTrue(eventually { server.statistics.openConnections == 0 && server.statistics.cancelledRequests == 1 })

        // A request answered normally is never marked cancelled, even when the client closes afterwards.
        let other = try RawClient(port: port)
        other.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
        XCTAssertEqual(other.readResponse()?.status, 200)
        other.reset()
        XCTAssertTrue(eventually { server.statistics.openConnections == 0 })
        XCTAssertEqual(backend.history.last?.cancelled, false)
    }

    func testShutdownAnswersEveryRequestThatAlreadyArrivedOnBusyKeepAliveConnections() async throws {
        let (backend, server, port) = try serveBackend()
        let log = BoundedEventLog(backend)
        backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/tracking/assign"), when: .first(1), action: .hold(label: "first")))
        // Connection A: one held request with two more pipelined behind it; B..E: idle keep-alive.
        let a = try RawClient(port: port)
        a.send(assign("u1") + "GET /health HTTP/1.1\r\nHost: h\r\n\r\n" + "GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
        let parked = await log.hold(1)
        let hold = try XCTUnwrap(parked)
        let idle = try (0..<4).map { _ in try RawClient(port: port) }
        for c in idle {
            c.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
            XCTAssertEqual(c.readResponse()?.status, 200)
        }
        let done = TestGate()
        Task {
            await server.shutdown()
            done.open()
        }
        XCTAssertTrue(eventually { (try? RawClient(port: port)) == nil }, "stops accepting")
        for c in idle { XCTAssertEqual(c.readToEnd(), [], "idle keep-alive connections close at once") }
        XCTAssertTrue(backend.release(hold))
        let first = try XCTUnwrap(a.readResponse())
        XCTAssertEqual(first.status, 200)
        XCTAssertNil(first.header("Connection"), "more requests had arrived behind it")
        XCTAssertEqual(a.readResponse()?.status, 200)
        let last = try XCTUnwrap(a.readResponse())
        XCTAssertEqual(last.header("Connection"), "close", "the last request that arrived says close")
        XCTAssertEqual(a.readToEnd(), [])
        await done.wait()
        XCTAssertEqual(backend.history.map(\.outcome), Array(repeating: "respond", count: 7), "every request answered and recorded")
    }

    func testShutdownJournalsRequestsPipelinedBehindHeldRequests() async throws {
        let (backend, server, port) = try serveBackend()
        backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/tracking/assign"), action: .hold(label: "held")))
        // 20 connections, each with a held request and two complete requests pipelined behind it
        // (plus the start of a fourth that never completes); 10 idle keep-alive connections.
        let n = 20
        let held = try (0..<n).map { i -> RawClient in
            let c = try RawClient(port: port)
            c.send(assign("u\(i)") + "GET /health HTTP/1.1\r\nHost: h\r\n\r\n" + "GET /api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=p\(i) HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\n\r\n" + "GET /hea")
            return c
        }
        await backend.waitForHolds(n)
        let idle = try (0..<10).map { _ in try RawClient(port: port) }
        for c in idle {
            c.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
            XCTAssertEqual(c.readResponse()?.status, 200)
        }
        // As `serve` does: the server stops accepting, then the backend shuts down and drops the holds.
        let done = TestGate()
        Task {
            await server.shutdown()
            done.open()
        }
        XCTAssertTrue(eventually { (try? RawClient(port: port)) == nil }, "stops accepting")
        let report = backend.shutdown()
        XCTAssertEqual(report.unreleasedHolds.count, n)
        for c in held { XCTAssertEqual(c.readToEnd(), [], "the held request is dropped: nothing can be answered behind it") }
        await done.wait()
        let history = backend.history
        XCTAssertEqual(history.count, 10 + 3 * n, "every complete request that arrived is journaled")
        let pipelined = history.filter { $0.path != "/api/v1/tracking/assign" && $0.response?.status != 200 }
        XCTAssertEqual(pipelined.count, 2 * n)
        XCTAssertTrue(pipelined.allSatisfy { $0.outcome == "respond" && $0.response?.status == 503 && $0.route == nil },
                      "journaled with the shutdown's 503, never processed: \(pipelined.prefix(2))")
        XCTAssertEqual(history.filter { $0.outcome == "drop_before_response" }.count, n)
        XCTAssertEqual(backend.inFlightCount, 0)
    }

    func testMethodsAreCaseSensitiveAndAbsoluteFormTargetsAreServed() throws {
        let (backend, _, port) = try serveBackend()
        let lower = try RawClient(port: port)
        lower.send("get /health HTTP/1.1\r\nHost: h\r\n\r\n")
        let refused = try XCTUnwrap(lower.readResponse())
        XCTAssertEqual(refused.status, 501)
        XCTAssertTrue(refused.text.contains("methods are case-sensitive: did you mean GET?"), refused.text)
        XCTAssertEqual(refused.header("Connection"), "close")
        let odd = try RawClient(port: port)
        odd.send("BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n")
        XCTAssertEqual(odd.readResponse()?.status, 501)
        XCTAssertEqual(backend.history.count, 0, "refused before reaching the backend")

        let absolute = try RawClient(port: port)
        absolute.send("GET http://127.0.0.1:\(port)/health HTTP/1.1\r\nHost: ignored\r\n\r\n"
            + "GET HTTP://example.test/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\n\r\n"
            + "GET http://example.test HTTP/1.1\r\nHost: h\r\n\r\n")
        XCTAssertEqual(absolute.readResponse()?.status, 200)
        XCTAssertEqual(absolute.readResponse()?.text, naturalFlagBody)
        XCTAssertEqual(absolute.readResponse()?.status, 404, "an empty path is /")
        XCTAssertEqual(backend.history.map(\.path), ["/health", "/api/v1/feature-flags/evaluate/sdk_contract_flag", "/"])
        XCTAssertEqual(backend.history[1].query, "user_id=u")
    }

    func testConnectionsOverTheLimitAreAnswered503AndClosed() throws {
        let (_, server, port) = try serveBackend(.init(readTimeout: 5, maxConnections: 2))
        let kept = try (0..<2).map { _ in try RawClient(port: port) }
        XCTAssertTrue(eventually { server.statistics.openConnections == 2 })
        let third = try RawClient(port: port)
        let bytes = try XCTUnwrap(third.readToEnd())
        XCTAssertTrue(String(decoding: bytes, as: UTF8.self).hasPrefix("HTTP/1.1 503 "), String(decoding: bytes, as: UTF8.self))
        XCTAssertEqual(server.statistics.refusedConnections, 1)
        kept[0].send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
        XCTAssertEqual(kept[0].readResponse()?.status, 200, "the others are served")
    }

    #if os(Linux)
    func testHeldRequestsOnManyConnectionsCostNoThreads() async throws {
        // A read timeout longer than the test: under load, reading 200 answers one by one can leave
        // a connection idle past the default 2 s, and the server rightly closes it.
        let (backend, server, port) = try serveBackend(.init(readTimeout: 120, shutdownGracePeriod: 2))
        let log = BoundedEventLog(backend)
        backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/tracking/assign"), action: .hold(label: "all")))
        let before = threadCount()
        let clients = try (0..<200).map { _ in try RawClient(port: port) }
        for (i, c) in clients.enumerated() { c.send(assign("user-\(i)")) }
        // Every one of them parked (request 200 can park before request 199 does).
        var parked = 0
        for seq in 1...200 where await log.hold(seq, timeout: 20) != nil { parked += 1 }
        XCTAssertEqual(parked, 200)
        XCTAssertEqual(backend.heldRequests.count, 200)
        XCTAssertLessThanOrEqual(threadCount(), before + 4, "200 held requests on 200 connections: no thread each")
        for h in backend.heldRequests { backend.release(h.id) }
        for c in clients { XCTAssertEqual(c.readResponse(timeout: 10)?.status, 200) }
        XCTAssertEqual(server.statistics.openConnections, 200)
    }

    private func threadCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
    }
    #endif
}

/// The end of a client's stream while its request is parked: a close cancels the request, a
/// half-close (the client shut only its sending side) gets the answer (a sixtieth outside tester:
/// `nc -N` and Go's `CloseWrite` got no answer while the journal said the request was answered).
extension HTTPServerEventLoopTests {
    func testAHalfClosedClientIsAnsweredAndTheRequestIsNotCancelled() async throws {
        let (backend, server, port, _, client, hold) = try await heldAssignment()
        client.shutdownWrite()
        // The probe arrives while the request is still held, and the request stays held.
        XCTAssertEqual(client.readResponse()?.status, 100)
        XCTAssertTrue(backend.heldRequests.map(\.id) == [hold])
        XCTAssertEqual(backend.history.first?.cancelled, false)
        XCTAssertTrue(backend.release(hold))
        let answer = client.readResponse()
        XCTAssertEqual(answer?.status, 200)
        XCTAssertTrue(answer?.headers.contains { $0.0.lowercased() == "connection" && $0.1 == "close" } ?? false)
        XCTAssertEqual(client.readToEnd(), [], "then the server closes")
        XCTAssertEqual(backend.history.first?.cancelled, false)
        XCTAssertTrue(eventually { server.statistics.openConnections == 0 && server.statistics.cancelledRequests == 0 })

        // Not held: a whole request and the half-close in one go (`printf ... | nc -N`).
        let quick = try RawClient(port: port)
        quick.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
        quick.shutdownWrite()
        var status = quick.readResponse()?.status
        if status == 100 { status = quick.readResponse()?.status }
        XCTAssertEqual(status, 200)
        XCTAssertEqual(server.statistics.cancelledRequests, 0)
    }

    /// A half-closed client that closes later sends nothing; the probe written again every
    /// half second meets the close and cancels the request (a sixty-seventh outside tester: it
    /// was journaled answered).
    func testAHalfClosedClientThatClosesLaterCancelsTheRequest() async throws {
        let (backend, server, _, log, client, _) = try await heldAssignment()
        client.shutdownWrite()
        XCTAssertEqual(client.readResponse()?.status, 100)
        client.shutdownBoth()
        let cancelled = await log.wait { $0 == .cancelled(seq: 1) }
        XCTAssertEqual(cancelled, .cancelled(seq: 1))
        XCTAssertEqual(backend.history.first?.cancelled, true)
        XCTAssertTrue(eventually { server.statistics.openConnections == 0 && server.statistics.cancelledRequests == 1 })
    }

    func testAClientThatClosesWhileHeldStillCancelsTheRequest() async throws {
        let (backend, server, _, log, client, _) = try await heldAssignment()
        client.shutdownBoth() // as a close(): a FIN, then a reset in answer to the probe
        let cancelled = await log.wait { $0 == .cancelled(seq: 1) }
        XCTAssertEqual(cancelled, .cancelled(seq: 1))
        XCTAssertEqual(backend.history.first?.cancelled, true)
        XCTAssertTrue(eventually { server.statistics.openConnections == 0 && server.statistics.cancelledRequests == 1 })
    }
}
