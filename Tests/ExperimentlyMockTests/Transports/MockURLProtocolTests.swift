import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ExperimentlyMock

struct Reply: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data
    var text: String { String(decoding: body, as: UTF8.self) }
}

func request(_ backend: MockBackend, _ target: String, method: String = "GET", body: String? = nil,
             key: String? = Fixtures.sdkContractAPIKey, timeout: TimeInterval = 10) -> URLRequest {
    var r = URLRequest(url: URL(string: backend.baseURL.absoluteString + target)!)
    r.httpMethod = method
    r.timeoutInterval = timeout
    if let key { r.setValue(key, forHTTPHeaderField: "X-API-Key") }
    r.setValue("application/json", forHTTPHeaderField: "Accept")
    if let body { r.httpBody = Data(body.utf8); r.setValue("application/json", forHTTPHeaderField: "Content-Type") }
    return r
}

func send(_ session: URLSession, _ request: URLRequest) async -> Result<Reply, URLError> {
    do {
        let (data, response) = try await session.data(for: request)
        let http = response as! HTTPURLResponse
        var headers: [String: String] = [:]
        for (k, v) in http.allHeaderFields { headers["\(k)"] = "\(v)" }
        return .success(Reply(status: http.statusCode, headers: headers, body: data))
    } catch let e as URLError {
        return .failure(e)
    } catch {
        return .failure(URLError(.unknown))
    }
}

func reply(_ r: Result<Reply, URLError>, file: StaticString = #filePath, line: UInt = #line) -> Reply {
    switch r {
    case .success(let reply): return reply
    case .failure(let e): XCTFail("expected a reply, got \(e.code)", file: file, line: line); return Reply(status: 0, headers: [:], body: Data())
    }
}

func errorCode(_ r: Result<Reply, URLError>) -> URLError.Code? {
    if case .failure(let e) = r { return e.code }
    return nil
}

/// Every fault kind through the in-process transport, driven by a real `URLSession`.
final class MockURLProtocolTests: XCTestCase {
    func testNaturalRoundTripAndRecordedHeaders() async {
        let backend = MockBackend(clock: ManualClock())
        let session = backend.makeURLSession()
        let flag = reply(await send(session, request(backend, "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=user%20a%26b")))
        XCTAssertEqual(flag.status, 200)
        XCTAssertEqual(flag.text, #"{"config":null,"enabled":true,"key":"sdk_contract_flag","reason":"rollout"}"#)
        let assign = reply(await send(session, request(backend, "/api/v1/tracking/assign", method: "POST", body: #"{"experiment_key":"sdk_contract_ab","user_id":"user-2"}"#)))
        XCTAssertEqual(try JSONValue.parse(assign.body).value["variant_name"], "treatment")
        let h = backend.history
        XCTAssertEqual(h.map(\.seq), [1, 2])
        XCTAssertEqual(h[0].query, "user_id=user%20a%26b")
        XCTAssertEqual(h[1].body, Data(#"{"experiment_key":"sdk_contract_ab","user_id":"user-2"}"#.utf8))
        let names = h[1].headers.map { $0.name.lowercased() }
        XCTAssertTrue(names.contains("x-api-key"))
        XCTAssertFalse(names.contains(MockBackend.routingHeader.lowercased()), "routing token stripped")
        XCTAssertEqual(h[1].headers.first { $0.name.lowercased() == "x-api-key" }?.value, "***")
        let unauthorized = reply(await send(session, request(backend, "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u", key: nil)))
        XCTAssertEqual(unauthorized.status, 401)
        XCTAssertEqual(unauthorized.headers["WWW-Authenticate"], "APIKey")
    }

    func testTwoBackendsInOneProcessRouteSeparately() async {
        var f = Fixtures.sdkContract
        f.flags[0].rolloutPercentage = 0
        let a = MockBackend(clock: ManualClock())
        let b = MockBackend(fixtures: f, clock: ManualClock())
        let ra = reply(await send(a.makeURLSession(), request(a, "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u")))
        let rb = reply(await send(b.makeURLSession(), request(b, "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u")))
        XCTAssertTrue(ra.text.contains(#""enabled":true"#))
        XCTAssertTrue(rb.text.contains(#""enabled":false"#))
        XCTAssertEqual(a.history.count, 1)
        XCTAssertEqual(b.history.count, 1)
    }

    func testUnknownHostFailsWithoutNetwork() async {
        let backend = MockBackend(clock: ManualClock())
        var r = URLRequest(url: URL(string: "http://localhost:8000/health")!)
        r.timeoutInterval = 5
        let result = await send(backend.makeURLSession(), r)
        XCTAssertEqual(errorCode(result), .cannotFindHost)
        XCTAssertTrue(backend.history.isEmpty)
    }

    func testStatusFaultsThroughURLSession() async throws {
        let backend = MockBackend(clock: ManualClock())
        let session = backend.makeURLSession()
        backend.addFault(try decodeRule(#"{"when":{"nth":1},"action":{"respond":{"status":404,"json":{"detail":"Not Found"}}}}"#))
        backend.addFault(try decodeRule(#"{"when":{"nth":2},"action":{"rate_limited":{"retry_after_seconds":3}}}"#))
        backend.addFault(try decodeRule(#"{"when":{"nth":3},"action":{"respond":{"status":503,"headers":{"Retry-After":"Wed, 21 Oct 2015 07:28:00 GMT"},"body":"busy"}}}"#))
        backend.addFault(try decodeRule(#"{"when":{"nth":4},"action":{"malformed_json":{}}}"#))
        backend.addFault(try decodeRule(#"{"when":{"nth":5},"action":{"truncated_json":{"bytes":5}}}"#))
        backend.addFault(try decodeRule(#"{"when":{"nth":6},"action":{"wrong_content_type":{"content_type":"text/html"}}}"#))
        let target = "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u"
        var replies: [Reply] = []
        for _ in 0..<6 { replies.append(reply(await send(session, request(backend, target)))) }
        XCTAssertEqual(replies.map(\.status), [404, 429, 503, 200, 200, 200])
        XCTAssertEqual(replies[1].headers["Retry-After"], "3")
        XCTAssertEqual(replies[1].headers["X-RateLimit-Remaining"], "0")
        XCTAssertEqual(replies[2].headers["Retry-After"], "Wed, 21 Oct 2015 07:28:00 GMT")
        XCTAssertEqual(replies[2].text, "busy")
        XCTAssertEqual(replies[3].text, #"{"detail": "#)
        XCTAssertEqual(replies[4].text, #"{"con"#)
        XCTAssertEqual(replies[4].headers["Content-Length"], "5")
        XCTAssertEqual(replies[5].headers["Content-Type"], "text/html")
    }

    func testDropsThroughURLSession() async throws {
        let backend = MockBackend(clock: ManualClock())
        let session = backend.makeURLSession()
        backend.addFault(FaultRule(when: .nth(1), action: .dropBeforeResponse(processed: false)))
        backend.addFault(FaultRule(when: .nth(2), action: .dropMidBody(bodyBytes: 4)))
        let target = "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u"
        let awaited1 = await send(session, request(backend, target))
        XCTAssertEqual(errorCode(awaited1), .networkConnectionLost)
        let awaited2 = await send(session, request(backend, target))
        XCTAssertEqual(errorCode(awaited2), .networkConnectionLost)
        XCTAssertEqual(backend.history.map(\.outcome), ["drop_before_response", "drop_mid_body"])
    }

    func testDelayThroughURLSessionInVirtualTime() async {
        let clock = ManualClock()
        let backend = MockBackend(clock: clock)
        let events = EventRecorder(backend)
        backend.addFault(FaultRule(action: .delay(seconds: 30)))
        let session = backend.makeURLSession()
        let req = request(backend, "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u")
        let task = Task { await send(session, req) }
        await events.parked(1)
        await clock.waitForSleepers(1)
        clock.advance(30)
        let r = reply(await task.value)
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(backend.history[0].answeredAt!.timeIntervalSince(backend.history[0].receivedAt), 30, accuracy: 1e-9)
    }

    func testTimeoutFailsLoadAfterTimeoutIntervalOfMockClock() async {
        let clock = ManualClock()
        let backend = MockBackend(clock: clock)
        let events = EventRecorder(backend)
        backend.addFault(FaultRule(action: .timeout(processed: false)))
        let session = backend.makeURLSession()
        let req = request(backend, "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u", timeout: 4)
        let task = Task { await send(session, req) }
        let reason = await events.parked(1)
        XCTAssertEqual(reason, .timeout(seconds: 4))
        await clock.waitForSleepers(1)
        clock.advance(3.9)
        XCTAssertEqual(backend.inFlightCount, 1)
        clock.advance(0.1)
        let result = await task.value
        XCTAssertEqual(errorCode(result), .timedOut)
        XCTAssertEqual(backend.history[0].outcome, "timeout")
        XCTAssertNil(backend.history[0].response)
    }

    func testHoldsReleasedOutOfOrderThroughURLSession() async {
        let backend = MockBackend(clock: ManualClock())
        let events = EventRecorder(backend)
        backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/tracking/assign"), action: .hold(label: nil)))
        let session = backend.makeURLSession()
        let r1 = request(backend, "/api/v1/tracking/assign", method: "POST", body: #"{"experiment_key":"sdk_contract_ab","user_id":"user-1"}"#)
        let r2 = request(backend, "/api/v1/tracking/assign", method: "POST", body: #"{"experiment_key":"sdk_contract_ab","user_id":"user-2"}"#)
        let t1 = Task { await send(session, r1) }
        let t2 = Task { await send(session, r2) }
        // Arrival order between the two tasks is not fixed: wait for both holds (seq 1 and 2), then look them up by user.
        await events.parked(1)
        await events.parked(2)
        let held = Dictionary(uniqueKeysWithValues: backend.heldRequests.map { ($0.userID!, $0.id) })
        XCTAssertTrue(backend.release(held["user-2"]!))
        let second = reply(await t2.value)
        XCTAssertTrue(second.text.contains(#""variant_name":"treatment""#))
        XCTAssertTrue(backend.release(held["user-1"]!, with: MockResponse(status: 500, headers: [("Content-Type", "application/json")], body: Data(#"{"detail":"boom"}"#.utf8))))
        let first = reply(await t1.value)
        XCTAssertEqual(first.status, 500)
        XCTAssertEqual(first.text, #"{"detail":"boom"}"#)
        XCTAssertEqual(backend.state.assignments.map(\.userID), ["user-2"])
    }

    func testCancelledLoadIsRecordedAndLaterReleaseIsSafe() async {
        let backend = MockBackend(clock: ManualClock())
        let events = EventRecorder(backend)
        backend.addFault(FaultRule(action: .hold(label: "c")))
        let session = backend.makeURLSession()
        let req = request(backend, "/api/v1/tracking/assign", method: "POST", body: #"{"experiment_key":"sdk_contract_ab","user_id":"bob"}"#)
        let task = Task { await send(session, req) }
        guard case .hold(let id)? = await events.parked(1) else { return XCTFail("not held") }
        task.cancel()
        let awaited = await task.value
        XCTAssertEqual(errorCode(awaited), .cancelled)
        XCTAssertTrue(backend.history[0].cancelled)
        XCTAssertTrue(backend.release(id), "the hold is still releasable after the client went away")
        await events.answered(1)
        XCTAssertEqual(backend.history[0].response?.status, 200)
        XCTAssertEqual(backend.state.assignments.map(\.userID), ["bob"])
        XCTAssertTrue(backend.shutdown().isClean)
    }
}

/// Request conversion details (Apple body streams, header spelling) and raw-byte validation.
final class MockRequestConversionTests: XCTestCase {
    func testBodyFromStreamAndCaseInsensitiveHeaders() {
        var r = URLRequest(url: URL(string: "http://backend-1.mock.invalid/api/v1/tracking/assign?b=2&a=1")!)
        r.httpMethod = "POST"
        r.httpBodyStream = InputStream(data: Data(#"{"user_id":"x"}"#.utf8))
        r.setValue("k", forHTTPHeaderField: "X-API-Key")
        let m = MockURLProtocol.mockRequest(from: r)
        XCTAssertEqual(m.target, "/api/v1/tracking/assign?b=2&a=1")
        XCTAssertEqual(m.body, Data(#"{"user_id":"x"}"#.utf8))
        XCTAssertEqual(m.header("x-api-key"), "k")
        XCTAssertEqual(m.header("X-Api-Key"), "k")
    }

    func testRawUTF8SurrogateBytesAre422() {
        var model = BackendModel()
        // ED A0 80 is a UTF-8-encoded lone surrogate: not valid UTF-8, so not valid JSON text.
        var body = Data(#"{"experiment_key":"sdk_contract_ab","user_id":""#.utf8)
        body.append(contentsOf: [0xED, 0xA0, 0x80])
        body.append(Data(#""}"#.utf8))
        let r = model.respond(to: MockRequest(method: "POST", target: "/api/v1/tracking/assign", headers: [("x-api-key", Fixtures.sdkContractAPIKey)], body: body), now: Date())
        XCTAssertEqual(r.status, 422)
        XCTAssertEqual(String(decoding: r.body, as: UTF8.self), #"{"detail":[{"loc":["body",47],"msg":"JSON decode error: invalid UTF-8 in string","type":"json_invalid"}]}"#)
        // A valid surrogate pair escape is fine (U+1F600).
        let ok = model.respond(to: Req.assign(#"\ud83d\ude00"#), now: Date())
        XCTAssertEqual(bodyJSON(ok)["user_id"], "\u{1F600}")
    }

    func testDelayDeadlineFixedBeforeParked() async {
        // A clock advanced between `parked` and the sleep registration must not strand the request.
        let clock = ManualClock()
        let backend = MockBackend(clock: clock)
        backend.setObserver { event in if case .parked = event { clock.advance(5) } }
        backend.addFault(FaultRule(action: .delay(seconds: 5)))
        let r = await backend.handle(Req.flag("u"))
        XCTAssertEqual(response(r).status, 200)
    }
}
