#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import ExperimentlyMock

/// `SocketPoller` on both of its paths (epoll where it exists, and the `poll(2)` fallback that
/// other platforms use, forced here), and the whole server on the fallback.
final class SocketPollerTests: XCTestCase {
    private func pipePair() -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
        addTeardownBlock { close(fds[0]); if fds[1] >= 0 { close(fds[1]) } }
        return (fds[0], fds[1])
    }

    private func checkReadiness(usingPoll: Bool) throws {
        let poller = try SocketPoller(usingPoll: usingPoll)
        XCTAssertEqual(poller.usesEpoll, !usingPoll && SocketPoller.epollAvailable)
        let a = pipePair(), b = pipePair()
        poller.set(a.read, id: 7, read: true, write: false, adding: true)
        poller.set(b.write, id: 8, read: false, write: true, adding: true)
        // Only the writable end is ready; nothing waits (timeout 0).
        let first = poller.wait(timeoutMilliseconds: 0)
        XCTAssertEqual(first.map(\.id), [8])
        XCTAssertEqual(first.first?.writable, true)
        // Data makes the read end readable; interest without write stops the write reports.
        var byte: UInt8 = 1
        XCTAssertEqual(write(a.write, &byte, 1), 1)
        poller.set(b.write, id: 8, read: false, write: false, adding: false)
        let second = poller.wait(timeoutMilliseconds: 1000)
        XCTAssertEqual(second.map(\.id), [7])
        XCTAssertEqual(second.first?.readable, true)
        XCTAssertEqual(second.first?.hangup, false)
        // Level-triggered: still readable until read.
        XCTAssertEqual(poller.wait(timeoutMilliseconds: 0).map(\.id), [7])
        XCTAssertEqual(read(a.read, &byte, 1), 1)
        XCTAssertEqual(poller.wait(timeoutMilliseconds: 0).map(\.id), [])
        // The writer closing is a hangup (with end of stream readable).
        close(a.write)
        let third = poller.wait(timeoutMilliseconds: 1000)
        XCTAssertEqual(third.map(\.id), [7])
        XCTAssertEqual(third.first?.hangup, true)
        // Removed descriptors are never reported again.
        poller.remove(a.read)
        XCTAssertEqual(poller.wait(timeoutMilliseconds: 0).map(\.id), [])
    }

    func testEpollReadiness() throws {
        try XCTSkipUnless(SocketPoller.epollAvailable, "no epoll on this platform")
        try checkReadiness(usingPoll: false)
    }

    func testPollFallbackReadiness() throws {
        try checkReadiness(usingPoll: true)
    }

    /// The server on the poll(2) fallback: keep-alive, pipelining, a hold released out of
    /// order, a client reset while held, shutdown answering what arrived.
    func testTheServerWorksOnThePollFallback() async throws {
        let backend = MockBackend()
        let server = MockHTTPServer(handler: backend, configuration: .init(readTimeout: 2, shutdownGracePeriod: 2))
        server.forcesPoll = true
        let port = try server.start()
        addTeardownBlock {
            backend.shutdown()
            server.shutdown()
        }
        let log = BoundedEventLog(backend)
        backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/tracking/assign"), action: .hold(label: "h")))

        let session = URLSession(configuration: .ephemeral)
        addTeardownBlock { RetiredSessions.keep(session) }
        let url = URL(string: "http://127.0.0.1:\(port)/health")!
        for _ in 0..<3 {
            let (_, response) = try await session.data(from: url)
            XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        }

        let body = #"{"experiment_key":"sdk_contract_ab","user_id":"u1"}"#
        let held = try RawClient(port: port)
        held.send("POST /api/v1/tracking/assign HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
                  + "GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
        let parked = await log.hold(4)
        let hold = try XCTUnwrap(parked)
        let leaving = try RawClient(port: port)
        leaving.send("POST /api/v1/tracking/assign HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        let parked2 = await log.hold(5)
        XCTAssertNotNil(parked2)
        leaving.reset()
        let cancelled = await log.wait { $0 == .cancelled(seq: 5) }
        XCTAssertNotNil(cancelled, "a reset is seen on the fallback too")

        let pipelined = try RawClient(port: port)
        pipelined.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\nGET /nope HTTP/1.1\r\nHost: h\r\n\r\n")
        XCTAssertEqual(pipelined.readResponse()?.status, 200)
        XCTAssertEqual(pipelined.readResponse()?.status, 404)

        XCTAssertTrue(backend.release(hold))
        XCTAssertEqual(held.readResponse()?.status, 200)
        XCTAssertEqual(held.readResponse()?.status, 200, "the pipelined request behind the hold")
        await server.shutdown()
        XCTAssertEqual(held.readToEnd(), [], "shutdown closes the idle keep-alive connection")
        XCTAssertEqual(server.statistics.openConnections, 0)
    }
}
