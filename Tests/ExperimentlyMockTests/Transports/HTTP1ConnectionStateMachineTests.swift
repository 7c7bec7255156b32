import Foundation
import XCTest
@testable import ExperimentlyMock

/// `HTTP1ConnectionStateMachine` without sockets: events in, actions out, time passed in.
final class HTTP1ConnectionStateMachineTests: XCTestCase {
    typealias Machine = HTTP1ConnectionStateMachine

    private func machine(now: Double = 100) -> Machine {
        Machine(limits: MockHTTPParserLimits(maxHeaderBytes: 1024, maxBodyBytes: 4096), readTimeout: 10, idleTimeout: 60, now: now)
    }

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    private func dispatched(_ actions: [Machine.Action]) -> [String] {
        actions.compactMap { if case .dispatch(let p) = $0 { return "\(p.request.method) \(p.request.target)" }; return nil }
    }

    private func written(_ actions: [Machine.Action]) -> String {
        actions.map { if case .write(let b) = $0 { return String(decoding: b, as: UTF8.self) }; return "" }.joined()
    }

    private let ok = MockOutcome.respond(MockResponse(status: 200, body: Data("ok".utf8)))

    func testPipelinedRequestsAreDispatchedOneAtATimeInOrder() {
        var m = machine()
        let a = m.received(bytes("GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        XCTAssertEqual(dispatched(a), ["GET /1"], "the second waits until the first is answered")
        XCTAssertNil(m.deadline, "no read deadline while the handler works")
        let b = m.answered(ok, now: 101)
        XCTAssertTrue(written(b).hasPrefix("HTTP/1.1 200 OK\r\n"), written(b))
        XCTAssertFalse(written(b).contains("Connection: close"))
        XCTAssertEqual(dispatched(b), ["GET /2"])
        let c = m.answered(ok, now: 102)
        XCTAssertEqual(dispatched(c), [])
        XCTAssertEqual(m.deadline, 102 + 60, "idle keep-alive deadline after the last answer")
        XCTAssertTrue(m.isIdle)
    }

    /// Without keep-alive every answer says `Connection: close` and ends the connection: a
    /// request pipelined behind it is never dispatched (the client sends it again on a fresh
    /// connection, RFC 9112 section 9.6), so each request is the first on its connection.
    func testWithoutKeepAliveEachAnswerClosesItsConnection() {
        var m = Machine(limits: MockHTTPParserLimits(maxHeaderBytes: 1024, maxBodyBytes: 4096), readTimeout: 10, idleTimeout: 60, now: 100,
                        keepAlive: false)
        let a = m.received(bytes("GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        XCTAssertEqual(dispatched(a), ["GET /1"])
        let b = m.answered(ok, now: 101)
        XCTAssertTrue(written(b).contains("Connection: close"), written(b))
        XCTAssertEqual(dispatched(b), [], "nothing more is read from a closing connection")
        XCTAssertEqual(b.last, .lingerAfterWriting(seconds: 2))
    }

    func testExpectContinueIsWrittenBeforeTheBodyArrives() {
        var m = machine()
        let a = m.received(bytes("POST /e HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"), now: 100)
        XCTAssertEqual(written(a), "HTTP/1.1 100 Continue\r\n\r\n")
        XCTAssertEqual(dispatched(m.received(bytes("abc"), now: 100.5)), ["POST /e"])
    }

    func testProtocolErrorIsAnsweredThenLingers() {
        var m = machine()
        let a = m.received(bytes("GET / HTTP/2.0\r\n\r\n"), now: 100)
        XCTAssertTrue(a.contains(.countProtocolError))
        XCTAssertTrue(written(a).hasPrefix("HTTP/1.1 505 "), written(a))
        XCTAssertTrue(written(a).contains("Connection: close"))
        XCTAssertEqual(a.last, .lingerAfterWriting(seconds: 2))
        XCTAssertEqual(m.received(bytes("more"), now: 100), [], "input after an error is ignored")
        m.lingerStarted(seconds: 2, now: 101)
        XCTAssertEqual(m.deadline, 103)
        XCTAssertEqual(m.deadlinePassed(now: 103), [.closeNow])
        XCTAssertTrue(m.isClosed)
    }

    func testSlowRequestGets408AndSilentIdleConnectionJustCloses() {
        var slow = machine()
        _ = slow.received(bytes("GET / HTTP/1.1\r\nHo"), now: 100)
        XCTAssertEqual(slow.deadline, 110)
        XCTAssertEqual(slow.deadlinePassed(now: 109.9), [], "not yet")
        let a = slow.deadlinePassed(now: 110)
        XCTAssertTrue(written(a).hasPrefix("HTTP/1.1 408 "), written(a))
        XCTAssertTrue(written(a).contains("request not received completely within 10.0 s"), written(a))

        var fresh = machine()
        XCTAssertTrue(written(fresh.deadlinePassed(now: 110)).contains("no request received within 10.0 s"))

        var idle = machine()
        _ = idle.received(bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        _ = idle.answered(ok, now: 101)
        XCTAssertEqual(idle.deadlinePassed(now: 161), [.closeNow], "an idle keep-alive connection closes without a 408")
    }

    func testPeerResettingWhileTheRequestIsParkedCancelsIt() {
        var m = machine()
        _ = m.received(bytes("GET /held HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        XCTAssertTrue(m.hasRequestInFlight)
        XCTAssertEqual(m.peerClosed(now: 105, reset: true), [.cancelRequest, .closeNow])
        XCTAssertEqual(m.answered(ok, now: 200), [], "a late outcome is dropped")
    }

    func testEndOfStreamWhileTheRequestIsParkedProbesAndAHalfClosedPeerIsAnswered() {
        // A closed peer answers the probe with a reset (the owner's hangup, then the cancel); a
        // half-closed one (`nc -N`, Go's CloseWrite) gets its answer, then the connection closes.
        var m = machine()
        _ = m.received(bytes("GET /held HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        XCTAssertEqual(m.peerClosed(now: 105), [.write(HTTP1ConnectionStateMachine.probeBytes)])
        XCTAssertEqual(String(decoding: HTTP1ConnectionStateMachine.probeBytes, as: UTF8.self), "HTTP/1.1 100 Continue\r\n\r\n")
        XCTAssertTrue(m.hasRequestInFlight, "the request is not cancelled by an end of stream alone")
        XCTAssertEqual(m.peerClosed(now: 106), [], "one probe per end of stream")
        // Again every half second while the request is in flight: a later close sends nothing.
        XCTAssertEqual(m.deadline, 105 + HTTP1ConnectionStateMachine.probeInterval)
        XCTAssertEqual(m.deadlinePassed(now: 105.6), [.write(HTTP1ConnectionStateMachine.probeBytes)])
        XCTAssertEqual(m.deadline, 105.6 + HTTP1ConnectionStateMachine.probeInterval)
        let a = m.answered(ok, now: 200)
        XCTAssertTrue(written(a).hasPrefix("HTTP/1.1 200 "), written(a))
        XCTAssertTrue(written(a).contains("Connection: close"), written(a))
        XCTAssertEqual(a.last, .lingerAfterWriting(seconds: 2))

        // Pipelined requests sent before the half-close are all answered, the last one closing.
        var p = machine()
        _ = p.received(bytes("GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        _ = p.peerClosed(now: 101)
        let first = p.answered(ok, now: 102)
        XCTAssertFalse(written(first).contains("Connection: close"), written(first))
        XCTAssertTrue(first.contains { if case .dispatch = $0 { return true }; return false }, "the second request is handed on")
        XCTAssertEqual(first.last, .write(HTTP1ConnectionStateMachine.probeBytes), "and probed, as the first was")
        XCTAssertEqual(p.deadline, 102 + HTTP1ConnectionStateMachine.probeInterval)
        XCTAssertTrue(written(p.answered(ok, now: 103)).contains("Connection: close"))

        // No 1xx to an HTTP/1.0 client (RFC 9110 section 15.2): it is answered without a probe.
        var old = machine()
        _ = old.received(bytes("GET /held HTTP/1.0\r\nHost: h\r\n\r\n"), now: 100)
        XCTAssertEqual(old.peerClosed(now: 101), [])
        let answer = written(old.answered(ok, now: 102))
        XCTAssertTrue(answer.contains(" 200 ") && !answer.contains("100 Continue"), answer)

        // A timeout outcome after the peer ended its side closes at once (nothing more can come).
        var silent = machine()
        _ = silent.received(bytes("GET /held HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        _ = silent.peerClosed(now: 101)
        XCTAssertEqual(silent.answered(.timeout, now: 102), [.closeNow])
    }

    func testPeerClosingMidRequestIs400AndBetweenRequestsIsClean() {
        var mid = machine()
        _ = mid.received(bytes("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nab"), now: 100)
        let a = mid.peerClosed(now: 101)
        XCTAssertTrue(written(a).hasPrefix("HTTP/1.1 400 "), written(a))
        XCTAssertEqual(a.last, .closeAfterWriting)

        var clean = machine()
        XCTAssertEqual(clean.peerClosed(now: 101), [.closeNow])
    }

    func testShutdownClosesIdleAndAnswersWhatArrivedWithConnectionCloseOnTheLast() {
        var idle = machine()
        XCTAssertEqual(idle.shutdown(now: 100), [.closeNow])

        var busy = machine()
        _ = busy.received(bytes("GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        XCTAssertEqual(busy.shutdown(now: 100), [], "requests in flight or buffered are still answered")
        let first = busy.answered(ok, now: 100)
        XCTAssertFalse(written(first).contains("Connection: close"), "a second request already arrived")
        XCTAssertEqual(dispatched(first), ["GET /2"])
        let second = busy.answered(ok, now: 100)
        XCTAssertTrue(written(second).contains("Connection: close"), written(second))
        XCTAssertEqual(second.last, .lingerAfterWriting(seconds: 2))
    }

    func testRequestsPipelinedBehindOneLeftUnansweredAtShutdownAreHandedOverForTheJournal() {
        func unanswerable(_ actions: [Machine.Action]) -> [String] {
            actions.compactMap { if case .dispatchUnanswerable(let p) = $0 { return "\(p.request.method) \(p.request.target)" }; return nil }
        }
        let pipelined = bytes("GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\nGET /3 HTTP/1.1\r\nHost: h\r\n\r\nGET /4 HT")
        // A hold dropped by the backend's shutdown: /2 and /3 arrived whole, /4 did not.
        var dropped = machine()
        XCTAssertEqual(dispatched(dropped.received(pipelined, now: 100)), ["GET /1"])
        XCTAssertEqual(dropped.shutdown(now: 100), [])
        let a = dropped.answered(.dropBeforeResponse, now: 100)
        XCTAssertEqual(unanswerable(a), ["GET /2", "GET /3"])
        XCTAssertEqual(a.last, .closeNow)
        XCTAssertEqual(written(a), "", "nothing can be sent after a request that got no answer")

        // A silent timeout ended at shutdown: the same.
        var silent = machine()
        _ = silent.received(pipelined, now: 100)
        _ = silent.shutdown(now: 100)
        let b = silent.answered(.timeout, now: 100)
        XCTAssertEqual(unanswerable(b), ["GET /2", "GET /3"])
        XCTAssertEqual(b.last, .closeNow)

        // The forced close at the end of the grace period, the request still with the handler.
        var forced = machine()
        _ = forced.received(pipelined, now: 100)
        _ = forced.shutdown(now: 100)
        XCTAssertEqual(unanswerable(forced.drainBufferedRequests()), [], "not while a request is in flight")
        XCTAssertEqual(unanswerable(forced.drainBufferedRequests(force: true)), ["GET /2", "GET /3"])

        // Without shutdown a drop discards what is pipelined (the client sees the reset).
        var running = machine()
        _ = running.received(pipelined, now: 100)
        XCTAssertEqual(running.answered(.dropBeforeResponse, now: 100), [.closeNow])
    }

    func testOutcomesMapToTheWire() {
        var drop = machine()
        _ = drop.received(bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        XCTAssertEqual(drop.answered(.dropBeforeResponse, now: 100), [.closeNow])

        var mid = machine()
        _ = mid.received(bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        let a = mid.answered(.dropMidBody(MockResponse(status: 200, body: Data(repeating: 0x78, count: 100)), bodyBytes: 10), now: 100)
        XCTAssertTrue(written(a).contains("Content-Length: 100\r\n"))
        XCTAssertTrue(written(a).hasSuffix("\r\n\r\n" + String(repeating: "x", count: 10)))
        XCTAssertEqual(a.last, .closeAfterWriting)

        var silent = machine()
        _ = silent.received(bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        XCTAssertEqual(silent.answered(.timeout, now: 100), [])
        XCTAssertNil(silent.deadline, "a timeout outcome stays silent with no deadline")
        XCTAssertEqual(silent.received(bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), now: 101), [], "input is discarded")
        XCTAssertEqual(silent.shutdown(now: 102), [.closeNow])

        var head = machine()
        _ = head.received(bytes("HEAD / HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        XCTAssertTrue(written(head.answered(ok, now: 100)).hasSuffix("Content-Length: 2\r\n\r\n"), "HEAD: headers only")
    }

    func testReadingPausesWhileTooMuchUnansweredInputIsBuffered() {
        var m = machine()
        _ = m.received(bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), now: 100)
        let flood = [UInt8](repeating: 0x41, count: 1024 + 4096 + 64 * 1024 + 1)
        XCTAssertEqual(m.received(flood, now: 100).last, .pauseReading)
        XCTAssertFalse(m.answered(ok, now: 100).contains(.resumeReading), "still over the limit: the flood is a 431 next")
    }
}
