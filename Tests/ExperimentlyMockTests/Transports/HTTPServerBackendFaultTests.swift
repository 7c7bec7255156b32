import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import ExperimentlyMock

/// Every fault kind through the real transport: `MockBackend` (reference fixtures, wall clock
/// unless a test needs virtual time) behind `MockHTTPServer` on loopback, driven by URLSession,
/// /usr/bin/curl and raw sockets. Ordering uses the backend's observer events (bounded waits);
/// only the delay and timeout tests spend real time, and they measure it.
final class HTTPServerBackendFaultTests: XCTestCase {
    // MARK: Helpers

    /// Starts a backend and a server on an ephemeral port; both are shut down after the test.
    private func serve(fixtures: Fixtures = .sdkContract, clock: any MockClock = MockSystemClock()) throws -> ServedBackend {
        let backend = MockBackend(fixtures: fixtures, clock: clock)
        let server = MockHTTPServer(handler: backend, configuration: .init(port: 0, readTimeout: 2, shutdownGracePeriod: 1))
        let port = try server.start()
        addTeardownBlock {
            backend.shutdown()
            server.shutdown()
        }
        return ServedBackend(backend: backend, server: server, port: port)
    }

    /// A new ephemeral session (its own connection pool), invalidated after the test.
    private func newSession() -> URLSession {
        let session = URLSession(configuration: .ephemeral)
        addTeardownBlock { RetiredSessions.keep(session) }
        return session
    }

    private func jsonObject(_ data: Data, file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            XCTFail("not a JSON object: \(String(decoding: data, as: UTF8.self))", file: file, line: line)
            return [:]
        }
        return object
    }

    /// Asserts that a load failed because the connection was cut. FoundationNetworking (curl)
    /// reports an empty reply as -1011 (badServerResponse) and a short body as -1 (unknown),
    /// measured here; Apple platforms report -1005 (networkConnectionLost).
    private func assertDropped(_ code: URLError.Code?, linux: URLError.Code, file: StaticString = #filePath, line: UInt = #line) {
        #if canImport(FoundationNetworking)
        XCTAssertEqual(code, linux, "\(String(describing: code?.rawValue))", file: file, line: line)
        #else
        XCTAssertTrue(code.map { [.networkConnectionLost, .badServerResponse, .cannotParseResponse].contains($0) } ?? false,
                      "\(String(describing: code?.rawValue))", file: file, line: line)
        #endif
    }

    // MARK: respond

    func testRespond404AndA5xxWithAJSONBody() async throws {
        let s = try serve()
        let gone = s.backend.addFault(try decodeRule(#"{"name":"gone","match":{"query":{"user_id":"ghost"}},"action":{"respond":{"status":404,"json":{"detail":"gone"}}}}"#))
        let down = s.backend.addFault(try decodeRule(
            #"{"name":"down","match":{"query":{"user_id":"down"}},"action":{"respond":{"status":503,"headers":{"X-Fault":"outage"},"json":{"detail":"down","retry":true}}}}"#))
        let boom = s.backend.addFault(FaultRule(name: "boom", match: FaultMatch(path: "/api/v1/tracking/assign"), action: .status(500, detail: "boom")))
        let session = newSession()

        let a = try await fetch(session, s.flag("ghost"))
        XCTAssertEqual(a.status, 404)
        XCTAssertEqual(a.header("Content-Type"), "application/json")
        XCTAssertEqual(a.text, #"{"detail":"gone"}"#)

        let b = try await fetch(session, s.flag("down"))
        XCTAssertEqual(b.status, 503)
        XCTAssertEqual(b.header("Content-Type"), "application/json")
        XCTAssertEqual(b.header("X-Fault"), "outage")
        XCTAssertEqual(b.text, #"{"detail":"down","retry":true}"#)
        XCTAssertEqual(jsonObject(b.body)["retry"] as? Bool, true)

        let c = try await fetch(session, s.assign("user-1"))
        XCTAssertEqual(c.status, 500)
        XCTAssertEqual(c.text, #"{"detail":"boom"}"#)

        let d = try await fetch(session, s.flag("fine"))
        XCTAssertEqual(d.status, 200)
        XCTAssertEqual(d.text, naturalFlagBody)

        // On the wire: the status line and the rule's headers as the rule ordered them.
        let raw = try RawClient(port: s.port)
        raw.send("GET /api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=down HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\n\r\n")
        let head = try XCTUnwrap(raw.readResponseHeadOnly())
        XCTAssertTrue(head.hasPrefix("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nX-Fault: outage\r\nContent-Length: 30\r\n\r\n"), head)

        let h = s.backend.history
        XCTAssertEqual(h.map { $0.fault?.id }, [gone, down, boom, nil, down])
        XCTAssertEqual(h.map { $0.response?.status }, [404, 503, 500, 200, 503])
        XCTAssertEqual(h.map(\.route), [nil, nil, nil, "GET /api/v1/feature-flags/evaluate/{key}", nil], "a respond fault never reaches the model")
        XCTAssertTrue(s.backend.state.assignments.isEmpty)
    }

    // MARK: 429

    func testRateLimitedFaultRetryAfterSecondsAndHTTPDates() async throws {
        let s = try serve()
        s.backend.addFault(try decodeRule(#"{"match":{"query":{"user_id":"r1"}},"action":{"rate_limited":{"retry_after_seconds":7}}}"#))
        s.backend.addFault(try decodeRule(#"{"match":{"query":{"user_id":"r2"}},"action":{"rate_limited":{"retry_after_date":"Wed, 21 Oct 2015 07:28:00 GMT"}}}"#))
        s.backend.addFault(try decodeRule(#"{"match":{"query":{"user_id":"r3"}},"action":{"rate_limited":{"retry_after_date_in_seconds":30}}}"#))
        let session = newSession()

        let a = try await fetch(session, s.flag("r1"))
        XCTAssertEqual(a.status, 429)
        XCTAssertEqual(a.header("Retry-After"), "7")
        XCTAssertEqual(a.header("X-RateLimit-Limit"), "6000")
        XCTAssertEqual(a.header("X-RateLimit-Remaining"), "0")
        XCTAssertEqual(a.header("X-RateLimit-Window"), "60")
        XCTAssertEqual(a.header("Content-Type"), "application/json")
        XCTAssertEqual(a.text, #"{"detail":"Too Many Requests. Please slow down and retry after a moment."}"#, "the backend's words; only Retry-After is scripted")

        let b = try await fetch(session, s.flag("r2"))
        XCTAssertEqual(b.status, 429)
        XCTAssertEqual(b.header("Retry-After"), "Wed, 21 Oct 2015 07:28:00 GMT")
        XCTAssertEqual(b.text, #"{"detail":"Too Many Requests. Please slow down and retry after a moment."}"#)

        let before = Date()
        let c = try await fetch(session, s.flag("r3"))
        let after = Date()
        XCTAssertEqual(c.status, 429)
        let value = try XCTUnwrap(c.header("Retry-After"))
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let date = try XCTUnwrap(formatter.date(from: value), "Retry-After \(value) is not an IMF-fixdate")
        XCTAssertEqual(MockHTTPDate.format(date), value, "IMF-fixdate round-trips")
        // now + 30 s, truncated to whole seconds by the format.
        XCTAssertGreaterThanOrEqual(date.timeIntervalSince1970, (before.timeIntervalSince1970 + 30).rounded(.down))
        XCTAssertLessThanOrEqual(date.timeIntervalSince1970, after.timeIntervalSince1970 + 30)
        XCTAssertEqual(c.text, #"{"detail":"Too Many Requests. Please slow down and retry after a moment."}"#)

        XCTAssertEqual(s.backend.history.map { $0.fault?.action }, ["rate_limited", "rate_limited", "rate_limited"])
        XCTAssertEqual(s.backend.history.map { $0.response?.status }, [429, 429, 429])
    }

    func testBackendRateLimitOfTwoPerWindowPerPath() async throws {
        var fixtures = Fixtures.sdkContract
        fixtures.rateLimit = RateLimit(limit: 2, windowSeconds: 60)
        let s = try serve(fixtures: fixtures)
        let session = newSession()

        var statuses: [Int] = []
        var last: HTTPResult?
        for user in ["u1", "u2", "u3"] {
            let r = try await fetch(session, s.flag(user))
            statuses.append(r.status)
            last = r
        }
        XCTAssertEqual(statuses, [200, 200, 429], "the counter is per exact path, not per query")
        let limited = try XCTUnwrap(last)
        XCTAssertEqual(limited.header("X-RateLimit-Limit"), "2")
        XCTAssertEqual(limited.header("X-RateLimit-Remaining"), "0")
        XCTAssertEqual(limited.header("X-RateLimit-Window"), "60")
        // Retry-After is always the window (the backend's middleware), not the time left.
        let h = s.backend.history
        XCTAssertEqual(limited.header("Retry-After"), "60")
        XCTAssertEqual(limited.text, #"{"detail":"Too Many Requests. Please slow down and retry after a moment."}"#)
        XCTAssertNil(h[2].fault, "the backend's own limit, not a fault")
        XCTAssertEqual(h[2].route, "GET /api/v1/feature-flags/evaluate/{key}")

        // Another path has its own counter.
        let other = try await fetch(session, s.assign("user-1"))
        XCTAssertEqual(other.status, 200)
    }

    // MARK: delay

    func testDelayAnswersAfterAtLeastTheDelay() async throws {
        let s = try serve()
        let log = BoundedEventLog(s.backend)
        s.backend.addFault(FaultRule(match: FaultMatch(query: ["user_id": "slow"]), action: .delay(seconds: 0.2)))
        let session = newSession()

        let start = monotonicNow()
        let r = try await fetch(session, s.flag("slow"))
        let elapsed = monotonicNow() - start
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, naturalFlagBody)
        XCTAssertGreaterThanOrEqual(elapsed, 0.2, "measured by the client")
        XCTAssertLessThan(elapsed, 3)
        XCTAssertEqual(log.all, [.received(seq: 1), .parked(seq: 1, .delay(seconds: 0.2)), .answered(seq: 1, outcome: "respond", status: 200)])
        let entry = try XCTUnwrap(s.backend.history.first)
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(entry.answeredAt).timeIntervalSince(entry.receivedAt), 0.2, "measured by the backend")
        XCTAssertEqual(entry.fault?.action, "delay")
        XCTAssertEqual(entry.outcome, "respond")
    }

    // MARK: hold

    func testTwoHoldsReleasedInReverseOrderOneWithAnOverride() async throws {
        let s = try serve()
        let log = BoundedEventLog(s.backend)
        let rule = s.backend.addFault(FaultRule(name: "park assigns", match: FaultMatch(path: "/api/v1/tracking/assign"), action: .hold(label: "assign")))
        // Separate sessions: separate connections, so neither request waits behind the other.
        let sessionA = newSession()
        let sessionB = newSession()
        let requestA = s.assign("user-1")
        let requestB = s.assign("user-2")

        let taskA = Task { try await fetch(sessionA, requestA) }
        let parked1 = await log.hold(1)
        let holdA = try XCTUnwrap(parked1, "request 1 parked")
        let taskB = Task { try await fetch(sessionB, requestB) }
        let parked2 = await log.hold(2)
        let holdB = try XCTUnwrap(parked2, "request 2 parked")
        XCTAssertEqual(s.backend.heldRequests, [
            HeldRequest(id: holdA, seq: 1, method: "POST", path: "/api/v1/tracking/assign", userID: "user-1", label: "assign", fault: rule),
            HeldRequest(id: holdB, seq: 2, method: "POST", path: "/api/v1/tracking/assign", userID: "user-2", label: "assign", fault: rule),
        ])
        XCTAssertEqual(s.backend.inFlightCount, 2)

        XCTAssertTrue(s.backend.release(holdB))
        let b = try await taskB.value
        XCTAssertEqual(b.status, 200)
        let bJSON = jsonObject(b.body)
        XCTAssertEqual(bJSON["variant_name"] as? String, "treatment")
        XCTAssertEqual(bJSON["assigned"] as? Bool, true)
        // A is still parked after B was answered.
        XCTAssertEqual(s.backend.heldRequests.map(\.id), [holdA])
        XCTAssertNil(s.backend.history[0].outcome)

        XCTAssertTrue(s.backend.release(holdA, with: MockResponse(status: 502, headers: [("Content-Type", "text/plain"), ("X-Override", "yes")], body: Data("bad gateway".utf8))))
        XCTAssertFalse(s.backend.release(holdA), "a hold releases once")
        let a = try await taskA.value
        XCTAssertEqual(a.status, 502)
        XCTAssertEqual(a.header("X-Override"), "yes")
        XCTAssertEqual(a.header("Content-Type"), "text/plain")
        XCTAssertEqual(a.text, "bad gateway")

        let events = log.all
        let answeredB = try XCTUnwrap(events.firstIndex(of: .answered(seq: 2, outcome: "respond", status: 200)))
        let answeredA = try XCTUnwrap(events.firstIndex(of: .answered(seq: 1, outcome: "respond", status: 502)))
        XCTAssertLessThan(answeredB, answeredA)
        // The natural answer is computed at release; the override never reached the model.
        XCTAssertEqual(s.backend.state.assignments.map(\.userID), ["user-2"])
        XCTAssertEqual(s.backend.history.map(\.hold), [holdA, holdB])
        XCTAssertEqual(s.backend.history.map { $0.response?.status }, [502, 200])
        XCTAssertTrue(s.backend.shutdown().isClean)
    }

    // MARK: timeout

    func testTimeoutKeepsTheServerSilentUntilURLSessionGivesUp() async throws {
        let s = try serve()
        let log = BoundedEventLog(s.backend)
        let rule = s.backend.addFault(try decodeRule(#"{"name":"silent","match":{"query":{"user_id":"silent"}},"action":{"timeout":{}}}"#))
        s.backend.addFault(try decodeRule(#"{"match":{"path":"/api/v1/tracking/assign"},"action":{"timeout":{"processed":true}}}"#))
        let session = newSession()

        // FoundationNetworking truncates timeoutInterval to whole seconds (0.3 fails at once),
        // so the shortest honest client timeout is 1 s.
        let start = monotonicNow()
        let code = await fetchError(session, s.flag("silent", timeout: 1))
        let elapsed = monotonicNow() - start
        XCTAssertEqual(code, .timedOut)
        // Dispatch timers may fire a little early (0.9994 s measured): allow 5 %.
        XCTAssertGreaterThanOrEqual(elapsed, 0.95, "the server said nothing for the whole interval")
        XCTAssertLessThan(elapsed, 4)

        // Parked (silent) until URLSession gave up and closed the connection: then cancelled.
        guard case .silent? = await log.parked(1) else { return XCTFail("the timed-out request was not parked: \(log.all)") }
        let answered = await log.answered(1)
        XCTAssertEqual(answered?.outcome, "timeout")
        XCTAssertNil(answered?.status)
        let entry = s.backend.history[0]
        XCTAssertEqual(entry.fault, AppliedFault(id: rule, name: "silent", action: "timeout", occurrence: 1))
        XCTAssertEqual(entry.outcome, "timeout")
        XCTAssertTrue(entry.cancelled, "the client gave up")
        XCTAssertNil(entry.response)
        XCTAssertNil(entry.route, "processed:false never reaches the model")
        XCTAssertEqual(s.backend.inFlightCount, 0)
        XCTAssertEqual(s.backend.heldRequests, [])
    }

    func testTimeoutOverTCPParksTheRequestUntilTheClientCloses() async throws {
        let s = try serve()
        let log = BoundedEventLog(s.backend)
        let rule = s.backend.addFault(try decodeRule(#"{"match":{"path":"/api/v1/tracking/assign"},"action":{"timeout":{"processed":true}}}"#))

        // processed:true over a raw socket: the backend acted (an assignment and an exposure),
        // the request is parked, silent, listed among the held requests, not releasable.
        let raw = try RawClient(port: s.port)
        let body = #"{"experiment_key":"sdk_contract_ab","user_id":"user-1"}"#
        raw.send("POST /api/v1/tracking/assign HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        guard case .silent(let id)? = await log.parked(1) else { return XCTFail("not parked: \(log.all)") }
        XCTAssertEqual(s.backend.heldRequests, [HeldRequest(id: id, seq: 1, method: "POST", path: "/api/v1/tracking/assign", userID: "user-1",
                                                            label: nil, fault: rule, action: "timeout")])
        XCTAssertEqual(s.backend.inFlightCount, 1, "parked inside the backend")
        XCTAssertFalse(s.backend.release(id), "a silent timeout is not released")
        XCTAssertFalse(s.backend.releaseFailing(id))
        XCTAssertTrue(raw.staysSilent(for: 0.2))
        XCTAssertEqual(s.backend.state.assignments.map(\.userID), ["user-1"])
        XCTAssertEqual(s.backend.state.exposures.count, 1)
        XCTAssertEqual(s.backend.history[0].route, "POST /api/v1/tracking/assign")
        XCTAssertNil(s.backend.history[0].outcome, "not answered while parked")

        // The client gives up (a reset): cancelled, then answered with outcome timeout.
        raw.reset()
        let cancelled = await log.wait { $0 == .cancelled(seq: 1) }
        XCTAssertNotNil(cancelled)
        let answered = await log.answered(1)
        XCTAssertEqual(answered?.outcome, "timeout")
        XCTAssertEqual(s.backend.history[0].outcome, "timeout")
        XCTAssertTrue(s.backend.history[0].cancelled)
        XCTAssertEqual(s.backend.heldRequests, [])

        // The server keeps serving, and a parked timeout at shutdown ends without a report.
        let fine = try await fetch(newSession(), s.flag("fine"))
        XCTAssertEqual(fine.status, 200)
        let raw2 = try RawClient(port: s.port)
        raw2.send("POST /api/v1/tracking/assign HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        guard case .silent? = await log.parked(3) else { return XCTFail("not parked: \(log.all)") }
        let report = s.backend.shutdown()
        XCTAssertTrue(report.isClean, "a silent timeout is not an unreleased hold: \(report)")
        let answered3 = await log.answered(3)
        XCTAssertEqual(answered3?.outcome, "timeout")
        XCTAssertTrue(raw2.staysSilent(for: 0.05), "a timeout outcome sends nothing")
        await s.server.shutdown()
        XCTAssertEqual(raw2.readToEnd(), [], "closed at shutdown without a byte")
        XCTAssertEqual(s.backend.history.count, 3, "no retries on the wire")
    }

    // MARK: drops

    /// libcurl (URLSession on Linux) resends at once, on a new connection, a request whose reused
    /// keep-alive connection closed before any answer byte; the mock gives the resend the same
    /// drop, so the client sees the transport error the fault scripted.
    func testURLSessionsSilentRetryOfADropOnAReusedConnectionGetsTheSameDrop() async throws {
        let s = try serve()
        let session = newSession()
        let warm = try await fetch(session, s.flag("warm"))
        XCTAssertEqual(warm.status, 200)
        let rule = s.backend.addFault(try decodeRule(#"{"name":"reset","match":{"path":"/api/v1/tracking/assign"},"when":{"first":1},"action":{"drop_before_response":{}}}"#))
        let code = await fetchError(session, s.assign("user-1"))
        XCTAssertNotNil(code, "the drop reaches the client as a transport error")
        let history = s.backend.history
        XCTAssertEqual(history.count, 3, "the request and curl's silent resend: \(history.map { "\($0.seq) \($0.path) \($0.outcome ?? "-")" })")
        XCTAssertEqual(history[1].fault, AppliedFault(id: rule, name: "reset", action: "drop_before_response", occurrence: 1))
        XCTAssertNil(history[1].transportRetryOf)
        XCTAssertEqual(history[2].transportRetryOf, 2, "journaled as the same attempt")
        XCTAssertEqual(history[2].fault, history[1].fault, "the same fault, not counted again")
        XCTAssertEqual(history[2].outcome, "drop_before_response")
        XCTAssertNil(history[2].route, "never processed")
        XCTAssertEqual(s.backend.state.assignments.count, 0)
        // The next call is a new attempt: the rule is used up, the answer is natural.
        let next = try await fetch(session, s.assign("user-1"))
        XCTAssertEqual(next.status, 200)
        XCTAssertNil(s.backend.history[3].transportRetryOf)
    }

    /// A harness that knows no operation can still be waiting on the dropped request
    /// (`setResendPossible` answers `false`) has the same request again handled as a new one: a
    /// keep-alive client that reports the drop and asks again (Node's agent) is answered; asked
    /// `true`, the trap stands as before, and the predicate is asked with the dropped request's seq.
    func testAResendNoRunningOperationCanMakeIsANewRequest() async throws {
        for possible in [false, true] {
            let s = try serve()
            let asked = MockLocked<[Int]>([])
            s.backend.setResendPossible { seq in asked.withLock { $0.append(seq) }; return possible }
            let session = newSession()
            let warm = try await fetch(session, s.flag("warm"))
            XCTAssertEqual(warm.status, 200)
            s.backend.addFault(try decodeRule(#"{"match":{"path":"/api/v1/tracking/assign"},"when":{"first":1},"action":{"drop_before_response":{}}}"#))
            if possible {
                let code = await fetchError(session, s.assign("user-1"))
                XCTAssertNotNil(code, "trapped: the drop reaches the client")
                XCTAssertEqual(s.backend.history[2].transportRetryOf, 2)
            } else {
                // curl's silent resend is now a request of its own, answered naturally.
                let answered = try await fetch(session, s.assign("user-1"))
                XCTAssertEqual(answered.status, 200)
                XCTAssertNil(s.backend.history[2].transportRetryOf)
                XCTAssertEqual(s.backend.history[2].outcome, "respond")
            }
            XCTAssertEqual(asked.withLock { $0 }, [2], "asked once, with the dropped request's seq")
        }
    }

    /// Without keep-alive (the listeners of a scenario that can drop a request, under `run`) every
    /// request arrives on a fresh connection: a drop is never resent by libcurl (it resends only on
    /// a reused connection), no trap is set, and the client's own identical request after the drop
    /// is a new request, answered (a twenty-sixth outside tester's Go SDK had such requests dropped).
    func testWithoutKeepAliveADropIsNeverResentAndTheSameRequestAgainIsAnswered() async throws {
        let backend = MockBackend(fixtures: .sdkContract)
        let server = MockHTTPServer(handler: backend, configuration: .init(port: 0, readTimeout: 2, shutdownGracePeriod: 1, keepAlive: false))
        let port = try server.start()
        addTeardownBlock {
            backend.shutdown()
            server.shutdown()
        }
        let s = ServedBackend(backend: backend, server: server, port: port)
        let session = newSession()
        let warm = try await fetch(session, s.flag("warm"))
        XCTAssertEqual(warm.status, 200)
        XCTAssertEqual(warm.headers["connection"], "close")
        backend.addFault(try decodeRule(#"{"match":{"path":"/api/v1/tracking/assign"},"when":{"first":1},"action":{"drop_before_response":{}}}"#))
        let code = await fetchError(session, s.assign("user-1"))
        XCTAssertNotNil(code, "the drop reaches the client")
        let again = try await fetch(session, s.assign("user-1"))
        XCTAssertEqual(again.status, 200, "the same request again is the client's own, answered")
        let history = backend.history
        XCTAssertEqual(history.map(\.outcome), ["respond", "drop_before_response", "respond"])
        XCTAssertTrue(history.allSatisfy { $0.transportRetryOf == nil })
        XCTAssertEqual(Set(history.compactMap(\.peer)).count, 3, "each request on a connection of its own: \(history.map(\.peer))")
    }

    func testOnlyAnIdenticalResendOfADropOnAReusedConnectionIsTakenForATransportRetry() async throws {
        let s = try serve()
        let log = BoundedEventLog(s.backend)
        s.backend.addFault(try decodeRule(#"{"match":{"path":"/api/v1/tracking/assign"},"when":{"first":2},"action":{"drop_before_response":{}}}"#))
        let body = #"{"experiment_key":"sdk_contract_ab","user_id":"user-1"}"#
        let assign = "POST /api/v1/tracking/assign HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"

        // A drop on a fresh connection: a resend is a new attempt (a client that sends each
        // request on its own connection never meets the mechanism).
        let fresh = try RawClient(port: s.port)
        fresh.send(assign)
        XCTAssertEqual(fresh.readToEnd(), [])
        // A drop on a reused connection, then a different request, then the identical one.
        let reused = try RawClient(port: s.port)
        reused.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
        XCTAssertEqual(reused.readResponse()?.status, 200)
        reused.send(assign)
        XCTAssertEqual(reused.readToEnd(), [])
        let other = try RawClient(port: s.port)
        other.send(assign.replacingOccurrences(of: "Host: h", with: "Host: other"))
        XCTAssertEqual(other.readResponse()?.status, 200, "another request (another Host) is not the resend")
        let resend = try RawClient(port: s.port)
        resend.send(assign)
        XCTAssertEqual(resend.readToEnd(), [], "the identical resend gets the same drop")
        let again = try RawClient(port: s.port)
        again.send(assign)
        XCTAssertEqual(again.readResponse()?.status, 200, "a trap catches one resend")

        let history = s.backend.history
        XCTAssertEqual(history.map(\.transportRetryOf), [nil, nil, nil, nil, 3, nil])
        XCTAssertEqual(history.map(\.outcome), ["drop_before_response", "respond", "drop_before_response", "respond", "drop_before_response", "respond"])
        XCTAssertEqual(history.map { $0.fault?.occurrence }, [1, nil, 2, nil, 2, nil])
        XCTAssertFalse(log.all.contains { if case .received(5) = $0 { return true }; return false }, "no observer events for the resend")
        XCTAssertEqual(s.backend.inFlightCount, 0)
    }

    func testDropBeforeResponseClosesWithoutAByte() async throws {
        let s = try serve()
        let rule = s.backend.addFault(try decodeRule(#"{"match":{"query":{"user_id":"drop"}},"action":{"drop_before_response":{}}}"#))
        s.backend.addFault(try decodeRule(#"{"match":{"path":"/api/v1/tracking/assign"},"action":{"drop_before_response":{"processed":true}}}"#))

        // URLSession: a fresh session, so the request is the first on its connection.
        let code = await fetchError(newSession(), s.flag("drop"))
        assertDropped(code, linux: .badServerResponse)

        // curl: "empty reply from server" (exit 52), no status.
        let curl = try curlRun(["-o", "/dev/null", "-w", "%{http_code}", "-H", "X-API-Key: \(Fixtures.sdkContractAPIKey)",
                                s.url("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=drop").absoluteString])
        XCTAssertEqual(curl.exitCode, 52)
        XCTAssertEqual(curl.stdout, "000")

        // Raw socket: the connection closes and not one byte arrives.
        let raw = try RawClient(port: s.port)
        raw.send("GET /api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=drop HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\n\r\n")
        XCTAssertEqual(raw.readToEnd(), [])

        // processed:true: the assignment happened even though the client got nothing.
        let assigner = try RawClient(port: s.port)
        let body = #"{"experiment_key":"sdk_contract_ab","user_id":"user-2"}"#
        assigner.send("POST /api/v1/tracking/assign HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        XCTAssertEqual(assigner.readToEnd(), [])
        XCTAssertEqual(s.backend.state.assignments.map(\.userID), ["user-2"])

        let h = s.backend.history
        XCTAssertEqual(h.count, 4, "one request per client, no retries")
        XCTAssertEqual(h.map(\.outcome), Array(repeating: "drop_before_response", count: 4))
        XCTAssertEqual(h.map { $0.fault?.occurrence }, [1, 2, 3, 1])
        XCTAssertEqual(h.prefix(3).map { $0.fault?.id }, [rule, rule, rule])
        XCTAssertTrue(h.allSatisfy { $0.response == nil })
    }

    func testDropMidBodySendsTheHeadAndPartOfTheBody() async throws {
        let s = try serve()
        s.backend.addFault(try decodeRule(#"{"match":{"query":{"user_id":"cut"}},"action":{"drop_mid_body":{"body_bytes":10}}}"#))
        let target = "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=cut"

        let raw = try RawClient(port: s.port)
        raw.send("GET \(target) HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\n\r\n")
        let text = String(decoding: try XCTUnwrap(raw.readToEnd()), as: UTF8.self)
        XCTAssertEqual(text, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-RateLimit-Limit: 6000\r\nX-RateLimit-Remaining: 5999\r\nX-RateLimit-Window: 60\r\n"
                       + "Content-Length: \(naturalFlagBody.utf8.count)\r\nConnection: close\r\n\r\n"
                       + naturalFlagBody.prefix(10))

        // curl: "transfer closed with outstanding read data" (exit 18) after a 200 head.
        let curl = try curlRun(["-o", "/dev/null", "-w", "%{http_code}", "-H", "X-API-Key: \(Fixtures.sdkContractAPIKey)", s.url(target).absoluteString])
        XCTAssertEqual(curl.exitCode, 18)
        XCTAssertEqual(curl.stdout, "200")

        let code = await fetchError(newSession(), s.flag("cut"))
        assertDropped(code, linux: .unknown)

        let h = s.backend.history
        XCTAssertEqual(h.count, 3)
        XCTAssertEqual(h.map(\.outcome), Array(repeating: "drop_mid_body", count: 3))
        XCTAssertEqual(h.map { $0.response?.bodyText }, Array(repeating: naturalFlagBody, count: 3), "history keeps the full body that was cut")
    }

    // MARK: body mangling

    func testMalformedTruncatedAndWrongContentTypeBodies() async throws {
        let s = try serve()
        let rules = [
            #"{"match":{"query":{"user_id":"malformed"}},"action":{"malformed_json":{}}}"#,
            #"{"match":{"query":{"user_id":"oops"}},"action":{"malformed_json":{"body":"{oops"}}}"#,
            #"{"match":{"query":{"user_id":"trunc"}},"action":{"truncated_json":{"bytes":12}}}"#,
            #"{"match":{"query":{"user_id":"half"}},"action":{"truncated_json":{}}}"#,
            #"{"match":{"query":{"user_id":"html"}},"action":{"wrong_content_type":{"content_type":"text/html","body":"<html>oops</html>"}}}"#,
            #"{"match":{"query":{"user_id":"plain"}},"action":{"wrong_content_type":{"content_type":"text/plain"}}}"#,
        ]
        for rule in rules { s.backend.addFault(try decodeRule(rule)) }
        let session = newSession()
        var results: [String: HTTPResult] = [:]
        for user in ["malformed", "oops", "trunc", "half", "html", "plain"] {
            results[user] = try await fetch(session, s.flag(user))
        }
        XCTAssertEqual(results.values.map(\.status), Array(repeating: 200, count: 6), "the natural status is kept")

        let malformed = try XCTUnwrap(results["malformed"])
        XCTAssertEqual(malformed.text, #"{"detail": "#)
        XCTAssertEqual(malformed.header("Content-Type"), "application/json")
        XCTAssertEqual(malformed.header("Content-Length"), "11")
        XCTAssertNil(try? JSONSerialization.jsonObject(with: malformed.body))
        XCTAssertEqual(results["oops"]?.text, "{oops")

        let trunc = try XCTUnwrap(results["trunc"])
        XCTAssertEqual(trunc.text, String(naturalFlagBody.prefix(12)))
        XCTAssertEqual(trunc.header("Content-Length"), "12", "the length matches the cut body")
        XCTAssertEqual(trunc.header("Content-Type"), "application/json")
        XCTAssertNil(try? JSONSerialization.jsonObject(with: trunc.body))
        XCTAssertEqual(results["half"]?.text, String(naturalFlagBody.prefix(naturalFlagBody.utf8.count / 2)))

        let html = try XCTUnwrap(results["html"])
        XCTAssertEqual(html.header("Content-Type"), "text/html")
        XCTAssertEqual(html.text, "<html>oops</html>")
        let plain = try XCTUnwrap(results["plain"])
        XCTAssertEqual(plain.header("Content-Type"), "text/plain")
        XCTAssertEqual(plain.text, naturalFlagBody, "without a body the natural one is kept")

        XCTAssertEqual(s.backend.history.map { $0.fault?.action },
                       ["malformed_json", "malformed_json", "truncated_json", "truncated_json", "wrong_content_type", "wrong_content_type"])
        XCTAssertEqual(s.backend.history.map(\.outcome), Array(repeating: "respond", count: 6))
    }

    // MARK: occurrences

    func testFirstTwoFailThenRecover() async throws {
        let s = try serve()
        let id = s.backend.addFault(try decodeRule(
            #"{"name":"flaky","match":{"path_prefix":"/api/v1/feature-flags/"},"when":{"first":2},"action":{"respond":{"status":503,"json":{"detail":"down"}}}}"#))
        let session = newSession()
        var answers: [(Int, String)] = []
        for _ in 0..<3 {
            let r = try await fetch(session, s.flag("u"))
            answers.append((r.status, r.text))
        }
        XCTAssertEqual(answers.map(\.0), [503, 503, 200])
        XCTAssertEqual(answers.map(\.1), [#"{"detail":"down"}"#, #"{"detail":"down"}"#, naturalFlagBody])
        XCTAssertEqual(s.backend.history.map(\.fault), [
            AppliedFault(id: id, name: "flaky", action: "respond", occurrence: 1),
            AppliedFault(id: id, name: "flaky", action: "respond", occurrence: 2),
            nil,
        ])
        XCTAssertTrue(s.backend.shutdown().isClean, "the one-shot rule was used up")
    }

    func testOutageWindowOverTCPInVirtualTime() async throws {
        // The window counts from the backend's creation on its clock; a virtual clock makes the
        // edges exact without waiting (the transport does not read the clock).
        let clock = ManualClock()
        let s = try serve(clock: clock)
        s.backend.addFault(try decodeRule(#"{"when":{"window":{"from_seconds":10,"until_seconds":20}},"action":{"respond":{"status":503,"body":"outage"}}}"#))
        let session = newSession()
        var statuses: [Int] = []
        var bodies: [String] = []
        for step in [0.0, 10, 9.5, 0.5] {
            clock.advance(step)
            let r = try await fetch(session, s.flag("u"))
            statuses.append(r.status)
            bodies.append(r.text)
        }
        XCTAssertEqual(statuses, [200, 503, 503, 200]) // t = 0, 10, 19.5, 20 (end exclusive)
        XCTAssertEqual(bodies, [naturalFlagBody, "outage", "outage", naturalFlagBody])
        let h = s.backend.history
        XCTAssertEqual(h.map { $0.receivedAt.timeIntervalSince(h[0].receivedAt) }, [0, 10, 19.5, 20])
        XCTAssertEqual(h.map { $0.fault?.occurrence }, [nil, 2, 3, nil], "a window counts every match, firing or not")
    }

    // MARK: auth

    func testAuthMissingEmptyAndWrongKey() async throws {
        let s = try serve()
        let session = newSession()

        let missing = try await fetch(session, s.flag("u", key: nil))
        XCTAssertEqual(missing.status, 401)
        XCTAssertEqual(missing.header("WWW-Authenticate"), "APIKey")
        XCTAssertEqual(missing.header("Content-Type"), "application/json")
        XCTAssertEqual(missing.text, #"{"detail":"API key missing"}"#)

        let wrong = try await fetch(session, s.flag("u", key: "not-a-key"))
        XCTAssertEqual(wrong.status, 401)
        XCTAssertEqual(wrong.header("WWW-Authenticate"), "APIKey")
        XCTAssertEqual(wrong.text, #"{"detail":"Invalid API Key"}"#)

        // An empty value on the wire counts as missing.
        let raw = try RawClient(port: s.port)
        raw.send("GET /api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u HTTP/1.1\r\nHost: h\r\nX-API-Key: \r\n\r\n")
        let empty = try XCTUnwrap(raw.readResponse())
        XCTAssertEqual(empty.status, 401)
        XCTAssertEqual(empty.header("WWW-Authenticate"), "APIKey")
        XCTAssertEqual(empty.text, #"{"detail":"API key missing"}"#)

        let h = s.backend.history
        XCTAssertEqual(h.map { $0.response?.status }, [401, 401, 401])
        XCTAssertNil(h[0].headers.first { $0.name.lowercased() == "x-api-key" }, "no key was sent")
        XCTAssertEqual(h[1].headers.first { $0.name.lowercased() == "x-api-key" }?.value, "***", "keys are redacted, even wrong ones")
        XCTAssertEqual(h[2].headers.first { $0.name.lowercased() == "x-api-key" }?.value, "***")
    }

    // MARK: history and shutdown

    func testHistoryRecordsEachTCPRequestWithItsFault() async throws {
        let s = try serve()
        let log = BoundedEventLog(s.backend)
        let a = s.backend.addFault(FaultRule(name: "a503", match: FaultMatch(query: ["user_id": "a"]), action: .status(503)))
        let b = s.backend.addFault(FaultRule(name: "bmal", match: FaultMatch(query: ["user_id": "b"]), action: .malformedJSON(body: nil)))
        let d = s.backend.addFault(FaultRule(name: "ddrop", match: FaultMatch(body: ["user_id": "d"]), when: .nth(1), action: .dropBeforeResponse(processed: false)))
        let key = Fixtures.sdkContractAPIKey
        let flag = "/api/v1/feature-flags/evaluate/sdk_contract_flag"
        let body = #"{"experiment_key":"sdk_contract_ab","user_id":"d"}"#

        let raw = try RawClient(port: s.port)
        for user in ["a", "b", "c"] {
            raw.send("GET \(flag)?user_id=\(user) HTTP/1.1\r\nHost: h\r\nX-API-Key: \(key)\r\n\r\n")
            XCTAssertNotNil(raw.readResponse(), user)
        }
        raw.send("POST /api/v1/tracking/assign HTTP/1.1\r\nHost: h\r\nX-API-Key: \(key)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        XCTAssertEqual(raw.readToEnd(), [])

        let h = s.backend.history
        XCTAssertEqual(h.map(\.seq), [1, 2, 3, 4])
        XCTAssertEqual(h.map(\.method), ["GET", "GET", "GET", "POST"])
        XCTAssertEqual(h.map(\.path), [flag, flag, flag, "/api/v1/tracking/assign"])
        XCTAssertEqual(h.map(\.query), ["user_id=a", "user_id=b", "user_id=c", nil])
        XCTAssertEqual(h[0].headers, [HeaderField(name: "Host", value: "h"), HeaderField(name: "X-API-Key", value: "***")], "wire spelling, key redacted")
        XCTAssertEqual(h[3].headers.map(\.name), ["Host", "X-API-Key", "Content-Type", "Content-Length"])
        XCTAssertEqual(h[3].body, Data(body.utf8))
        XCTAssertEqual(h[3].json?["user_id"], "d")
        XCTAssertEqual(h.map(\.fault), [
            AppliedFault(id: a, name: "a503", action: "respond", occurrence: 1),
            AppliedFault(id: b, name: "bmal", action: "malformed_json", occurrence: 1),
            nil,
            AppliedFault(id: d, name: "ddrop", action: "drop_before_response", occurrence: 1),
        ])
        XCTAssertEqual(h.map(\.outcome), ["respond", "respond", "respond", "drop_before_response"])
        XCTAssertEqual(h.map { $0.response?.status }, [503, 200, 200, nil])
        XCTAssertEqual(h.map { $0.response?.bodyText }, [#"{"detail":"Injected fault"}"#, #"{"detail": "#, naturalFlagBody, nil])
        XCTAssertEqual(h.map(\.route), [nil, "GET /api/v1/feature-flags/evaluate/{key}", "GET /api/v1/feature-flags/evaluate/{key}", nil])
        XCTAssertTrue(h.allSatisfy { $0.answeredAt != nil && !$0.cancelled })
        XCTAssertEqual(log.all, [
            .received(seq: 1), .answered(seq: 1, outcome: "respond", status: 503),
            .received(seq: 2), .answered(seq: 2, outcome: "respond", status: 200),
            .received(seq: 3), .answered(seq: 3, outcome: "respond", status: 200),
            .received(seq: 4), .answered(seq: 4, outcome: "drop_before_response", status: nil),
        ])
        let encoded = String(decoding: try JSONEncoder().encode(h), as: UTF8.self)
        XCTAssertFalse(encoded.contains(key), "the key never reaches the history")
        XCTAssertEqual(s.server.statistics.handledRequests, 4)
    }

    func testBackendShutdownReportsAndDropsAnUnreleasedHold() async throws {
        let s = try serve()
        let log = BoundedEventLog(s.backend)
        let rule = s.backend.addFault(FaultRule(name: "park bob", match: FaultMatch(body: ["user_id": "bob"]), action: .hold(label: "bob")))
        let body = #"{"experiment_key":"sdk_contract_ab","user_id":"bob"}"#

        let raw = try RawClient(port: s.port)
        raw.send("POST /api/v1/tracking/assign HTTP/1.1\r\nHost: h\r\nX-API-Key: \(Fixtures.sdkContractAPIKey)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        let parked1 = await log.hold(1)
        let hold1 = try XCTUnwrap(parked1, "raw request parked")
        let session = newSession()
        let request = s.assign("bob")
        let task = Task { await fetchError(session, request) }
        let parked2 = await log.hold(2)
        let hold2 = try XCTUnwrap(parked2, "URLSession request parked")

        let report = s.backend.shutdown()
        XCTAssertEqual(report.unreleasedHolds, [
            HeldRequest(id: hold1, seq: 1, method: "POST", path: "/api/v1/tracking/assign", userID: "bob", label: "bob", fault: rule),
            HeldRequest(id: hold2, seq: 2, method: "POST", path: "/api/v1/tracking/assign", userID: "bob", label: "bob", fault: rule),
        ])
        XCTAssertEqual(report.inFlight, 2)
        XCTAssertEqual(report.unusedFaults, [])
        XCTAssertFalse(report.isClean)

        // Both TCP clients see the connection dropped without a response byte.
        XCTAssertEqual(raw.readToEnd(), [])
        let code = await task.value
        assertDropped(code, linux: .badServerResponse)
        XCTAssertEqual(s.backend.history.map(\.outcome), ["drop_before_response", "drop_before_response"])
        XCTAssertEqual(s.backend.history.map(\.hold), [hold1, hold2])
        XCTAssertTrue(s.backend.state.assignments.isEmpty, "a failed hold never reaches the model")
        XCTAssertEqual(s.backend.inFlightCount, 0)

        // Later requests over TCP get 503.
        let after = try await fetch(newSession(), s.flag("u"))
        XCTAssertEqual(after.status, 503)
        XCTAssertEqual(after.text, #"{"detail":"mock backend shut down"}"#)
        XCTAssertTrue(s.backend.shutdown().unreleasedHolds.isEmpty)
    }
}
