#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import XCTest
@testable import ExperimentlyMock

/// The body budget (`MockHTTPServer.Configuration.bodyBudgetBytes`): a connection whose body does
/// not fit is not read until it does, paused connections resume in arrival order, and every
/// request is answered and journaled. Order comes from holds and the server's counters, not time.
final class HTTPServerBodyBudgetTests: XCTestCase {
    /// A `/track` request whose body is exactly `size` bytes (larger than one unreserved read,
    /// 16 KiB, so the server sees the head before the body).
    private func track(_ user: String, size: Int) -> String {
        let prefix = #"{"event_type":"big","user_id":"\#(user)","experiment_key":"sdk_contract_ab","metadata":{"pad":""#
        let body = prefix + String(repeating: "x", count: size - prefix.utf8.count - 3) + #""}}"#
        XCTAssertEqual(body.utf8.count, size)
        return "POST /api/v1/tracking/track HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(size)\r\n\r\n" + body
    }

    /// The head of a chunked `/track` request (its body comes with `chunks(_:)`).
    private func chunkedTrackHead() -> String {
        "POST /api/v1/tracking/track HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\n"
            + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    }

    /// The JSON body of a small `/track` request for `user`.
    private func trackBody(_ user: String) -> String {
        #"{"event_type":"small","user_id":"\#(user)","experiment_key":"sdk_contract_ab"}"#
    }

    /// `body` in two chunks and the last chunk, as one write.
    private func chunks(_ body: String) -> String {
        let bytes = Array(body.utf8)
        let half = bytes.count / 2
        let first = String(decoding: bytes[..<half], as: UTF8.self), second = String(decoding: bytes[half...], as: UTF8.self)
        return String(half, radix: 16) + "\r\n" + first + "\r\n" + String(bytes.count - half, radix: 16) + "\r\n" + second
            + "\r\n0\r\n\r\n"
    }

    /// A chunked body is reserved at the body limit while it arrives (its size is unknown); once
    /// it is complete only its size stays reserved. Before, a held chunked request kept the whole
    /// limit until answered, so a second chunked request whose head arrived before its chunks (an
    /// adapter's `http.client` writes them apart) did not fit and was never read while the first
    /// was parked: the scenario stalled ("not quiescent"). Order comes from the server's counters
    /// and the holds: each head is read alone before its chunks are sent.
    func testAHeldChunkedRequestKeepsOnlyItsBodySizeReservedSoAnotherChunkedRequestIsRead() async throws {
        let limit = 64 * 1024
        // Room for one chunked body at the limit, not two (the loopback listeners: 64 MiB of a 96 MiB budget).
        let configuration = MockHTTPServer.Configuration(
            readTimeout: 5, shutdownGracePeriod: 2, limits: MockHTTPParserLimits(maxBodyBytes: limit), bodyBudgetBytes: limit + limit / 2)
        let (backend, server, port) = try serveBackend(configuration)
        backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/tracking/track"), action: .hold(label: "chunked")))
        let bodyA = trackBody("a"), bodyB = trackBody("b")

        let a = try RawClient(port: port)
        a.send(chunkedTrackHead())
        XCTAssertTrue(eventually { server.statistics.reservedBodyBytes == limit }, "a's head is read alone: the limit is reserved")
        a.send(chunks(bodyA))
        XCTAssertTrue(eventually { backend.heldRequests.count == 1 }, "a is complete and held")
        XCTAssertEqual(server.statistics.reservedBodyBytes, bodyA.utf8.count, "a complete chunked body keeps only its size")

        let reservedForA = server.statistics.reservedBodyBytes
        let b = try RawClient(port: port)
        b.send(chunkedTrackHead())
        XCTAssertTrue(eventually { server.statistics.budgetPauses > 0 || server.statistics.reservedBodyBytes > reservedForA },
                      "b's head is read alone (reserved, or paused for the budget)")
        XCTAssertEqual(server.statistics.budgetPauses, 0, "b's body fits beside a's")
        b.send(chunks(bodyB))
        XCTAssertTrue(eventually { backend.heldRequests.count == 2 }, "b reaches the backend while a is held")
        XCTAssertEqual(backend.heldRequests.compactMap(\.userID), ["a", "b"])

        for (user, client) in [("a", a), ("b", b)] {
            let hold = try XCTUnwrap(backend.heldRequests.first { $0.userID == user })
            XCTAssertTrue(backend.release(hold.id))
            XCTAssertEqual(client.readResponse()?.status, 200)
        }
        XCTAssertTrue(eventually { server.statistics.reservedBodyBytes == 0 }, "every reservation is given back")
        XCTAssertEqual(backend.history.compactMap { $0.response?.status }, [200, 200])
    }

    func testConnectionsOverTheBudgetPauseAndResumeInArrivalOrderAndEveryRequestIsJournaled() async throws {
        let size = 40_000
        // Room for two bodies; the body limit (64 KiB) is below the budget, so one always fits.
        let configuration = MockHTTPServer.Configuration(
            readTimeout: 5, shutdownGracePeriod: 2, limits: MockHTTPParserLimits(maxBodyBytes: 64 * 1024), bodyBudgetBytes: 2 * size + size / 2)
        let (backend, server, port) = try serveBackend(configuration)
        backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/tracking/track"), action: .hold(label: "big")))

        let users = ["a", "b", "c", "d", "e"]
        var clients: [RawClient] = []
        for (i, user) in users.enumerated() {
            let client = try RawClient(port: port)
            client.send(track(user, size: size))
            clients.append(client)
            if i < 2 {
                await backend.waitForHolds(i + 1)
            } else {
                XCTAssertTrue(eventually { server.statistics.pausedForBudget == i - 1 }, "\(user) is paused: its body does not fit")
            }
        }
        var stats = server.statistics
        XCTAssertEqual(stats.budgetPauses, 3)
        XCTAssertEqual(stats.reservedBodyBytes, 2 * size)
        XCTAssertEqual(backend.heldRequests.compactMap(\.userID), ["a", "b"], "paused bodies are not read, so not dispatched")

        // Each answer frees one body's room: the first paused connection (and only it) goes on.
        for (answered, next) in [(0, 2), (1, 3), (2, 4)] {
            let hold = try XCTUnwrap(backend.heldRequests.first { $0.userID == users[answered] })
            XCTAssertTrue(backend.release(hold.id))
            XCTAssertEqual(clients[answered].readResponse()?.status, 200)
            await backend.waitForHolds(2)
            XCTAssertEqual(backend.heldRequests.compactMap(\.userID), [users[answered + 1], users[next]], "resumed in arrival order")
            XCTAssertEqual(server.statistics.pausedForBudget, users.count - 1 - next)
        }
        for user in ["d", "e"] {
            let hold = try XCTUnwrap(backend.heldRequests.first { $0.userID == user })
            XCTAssertTrue(backend.release(hold.id))
        }
        XCTAssertEqual(clients[3].readResponse()?.status, 200)
        XCTAssertEqual(clients[4].readResponse()?.status, 200)
        XCTAssertTrue(eventually { server.statistics.reservedBodyBytes == 0 }, "every reservation is given back")
        stats = server.statistics
        XCTAssertEqual(stats.pausedForBudget, 0)
        XCTAssertEqual(stats.peakReservedBodyBytes, 2 * size, "never more than the budget")
        let history = backend.history
        XCTAssertEqual(history.map(\.outcome), Array(repeating: "respond", count: users.count))
        XCTAssertEqual(history.map { $0.response?.status }, Array(repeating: 200, count: users.count))
    }

    func testAPausedConnectionWhoseClientResetsIsClosedAndTheQueueMovesOn() async throws {
        let size = 40_000
        let configuration = MockHTTPServer.Configuration(
            readTimeout: 5, shutdownGracePeriod: 2, limits: MockHTTPParserLimits(maxBodyBytes: 64 * 1024), bodyBudgetBytes: size + size / 2)
        let (backend, server, port) = try serveBackend(configuration)
        backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/tracking/track"), action: .hold(label: "big")))
        let a = try RawClient(port: port)
        a.send(track("a", size: size))
        await backend.waitForHolds(1)
        var b: RawClient? = try RawClient(port: port)
        b?.send(track("b", size: size))
        XCTAssertTrue(eventually { server.statistics.pausedForBudget == 1 })
        let c = try RawClient(port: port)
        c.send(track("c", size: size))
        XCTAssertTrue(eventually { server.statistics.pausedForBudget == 2 })
        // The client gives up: close(2) with SO_LINGER 0 sends a reset. (A client that only
        // half-closes, FIN, may still read its answer: it stays queued and is served in turn.)
        var l = linger(l_onoff: 1, l_linger: 0)
        setsockopt(try XCTUnwrap(b).fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
        b = nil
        XCTAssertTrue(eventually { server.statistics.pausedForBudget == 1 && server.statistics.openConnections == 2 }, "b is cleaned up")
        let hold = try XCTUnwrap(backend.heldRequests.first)
        XCTAssertTrue(backend.release(hold.id))
        XCTAssertEqual(a.readResponse()?.status, 200)
        await backend.waitForHolds(1)
        XCTAssertEqual(backend.heldRequests.compactMap(\.userID), ["c"], "c goes on in b's place")
        XCTAssertTrue(backend.release(try XCTUnwrap(backend.heldRequests.first).id))
        XCTAssertEqual(c.readResponse()?.status, 200)
        XCTAssertEqual(backend.history.compactMap { $0.response?.status }, [200, 200])
    }
}
