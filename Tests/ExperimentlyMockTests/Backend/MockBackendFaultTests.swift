import XCTest
@testable import ExperimentlyMock

/// Every fault kind through `handle()` directly (no I/O), plus history and shutdown.
final class MockBackendFaultTests: XCTestCase {
    func testFailFirstNThenRecover() async throws {
        let backend = MockBackend(clock: ManualClock())
        let id = backend.addFault(try decodeRule(#"{"name":"down","match":{"path_prefix":"/api/v1/feature-flags/"},"when":{"first":2},"action":{"respond":{"status":503,"json":{"detail":"down"}}}}"#))
        var statuses: [Int] = []
        for _ in 0..<3 { statuses.append(response(await backend.handle(Req.flag("u"))).status) }
        XCTAssertEqual(statuses, [503, 503, 200])
        let h = backend.history
        XCTAssertEqual(h.map(\.seq), [1, 2, 3])
        XCTAssertEqual(h[0].fault, AppliedFault(id: id, name: "down", action: "respond", occurrence: 1))
        XCTAssertEqual(h[1].fault?.occurrence, 2)
        XCTAssertNil(h[2].fault)
        XCTAssertEqual(h[0].response?.bodyText, #"{"detail":"down"}"#)
        XCTAssertNil(h[0].route, "a fault answer never reached the backend model")
        XCTAssertEqual(h[2].route, "GET /api/v1/feature-flags/evaluate/{key}")
        XCTAssertTrue(backend.shutdown().isClean)
    }

    func testNthAndMatchOnBodyQueryMethod() async throws {
        let backend = MockBackend(clock: ManualClock())
        backend.addFault(FaultRule(match: FaultMatch(method: "post", path: "/api/v1/tracking/assign", body: ["user_id": "bob"]),
                                   when: .nth(2), action: .status(500)))
        backend.addFault(FaultRule(match: FaultMatch(query: ["user_id": "carol"]), action: .status(404, detail: "gone")))
        let r1 = response(await backend.handle(Req.assign("bob"))).status
        let r2 = response(await backend.handle(Req.assign("alice"))).status
        let r3 = response(await backend.handle(Req.assign("bob"))).status
        let r4 = response(await backend.handle(Req.assign("bob"))).status
        let r5 = response(await backend.handle(Req.flag("carol"))).status
        let r6 = response(await backend.handle(Req.flag("dave"))).status
        XCTAssertEqual([r1, r2, r3, r4, r5, r6], [200, 200, 500, 200, 404, 200])
        // The 500 answer never reached the model: bob has one assignment and two exposures.
        XCTAssertEqual(backend.state.exposures.filter { $0.userID == "bob" }.count, 2)
    }

    func testRemoveFault() async {
        let backend = MockBackend(clock: ManualClock())
        let id = backend.addFault(FaultRule(action: .status(503)))
        let awaited1 = await backend.handle(Req.flag("u"))
        XCTAssertEqual(response(awaited1).status, 503)
        XCTAssertTrue(backend.removeFault(id))
        XCTAssertFalse(backend.removeFault(id))
        let awaited2 = await backend.handle(Req.flag("u"))
        XCTAssertEqual(response(awaited2).status, 200)
    }

    func testRateLimitedFaultSecondsAndHTTPDate() async throws {
        let backend = MockBackend(clock: ManualClock())
        backend.addFault(try decodeRule(#"{"when":{"nth":1},"action":{"rate_limited":{"retry_after_seconds":7}}}"#))
        backend.addFault(try decodeRule(#"{"when":{"nth":2},"action":{"rate_limited":{"retry_after_date_in_seconds":30}}}"#))
        let a = response(await backend.handle(Req.flag("u")))
        XCTAssertEqual(a.status, 429)
        XCTAssertEqual(a.header("Retry-After"), "7")
        XCTAssertEqual(a.header("X-RateLimit-Limit"), "6000")
        XCTAssertEqual(text(a), #"{"detail":"Too Many Requests. Please slow down and retry after a moment."}"#, "the backend's words; only Retry-After is scripted")
        let b = response(await backend.handle(Req.flag("u")))
        // 1_700_000_000 + 30 s = Tue, 14 Nov 2023 22:13:50 GMT
        XCTAssertEqual(b.header("Retry-After"), "Tue, 14 Nov 2023 22:13:50 GMT")
    }

    func testDelayRunsInVirtualTime() async {
        let clock = ManualClock()
        let backend = MockBackend(clock: clock)
        let events = EventRecorder(backend)
        backend.addFault(FaultRule(action: .delay(seconds: 2.5)))
        let task = Task { await backend.handle(Req.assign("user-1")) }
        let reason = await events.parked(1)
        XCTAssertEqual(reason, .delay(seconds: 2.5))
        await clock.waitForSleepers(1)
        XCTAssertEqual(backend.inFlightCount, 1)
        XCTAssertEqual(backend.state.assignments.count, 0, "the backend processes after the delay")
        clock.advance(2.4)
        XCTAssertEqual(clock.sleeperCount, 1)
        clock.advance(0.1)
        let r = response(await task.value)
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(backend.inFlightCount, 0)
        let entry = backend.history[0]
        XCTAssertEqual(entry.answeredAt!.timeIntervalSince(entry.receivedAt), 2.5, accuracy: 1e-9)
        XCTAssertEqual(events.all, [.received(seq: 1), .parked(seq: 1, .delay(seconds: 2.5)), .answered(seq: 1, outcome: "respond", status: 200)])
    }

    func testHoldsReleasedInAnyOrderWithOverride() async {
        let backend = MockBackend(clock: ManualClock())
        let events = EventRecorder(backend)
        backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/tracking/assign"), action: .hold(label: "assign")))
        let a = Task { await backend.handle(Req.assign("user-1")) }
        guard case .hold(let holdA)? = await events.parked(1) else { return XCTFail("not held") }
        let b = Task { await backend.handle(Req.assign("user-2")) }
        guard case .hold(let holdB)? = await events.parked(2) else { return XCTFail("not held") }
        XCTAssertEqual(backend.heldRequests.map(\.userID), ["user-1", "user-2"])
        XCTAssertEqual(backend.heldRequests.map(\.label), ["assign", "assign"])
        XCTAssertEqual(backend.inFlightCount, 2)

        XCTAssertTrue(backend.release(holdB))
        let rb = response(await b.value)
        XCTAssertEqual(bodyJSON(rb)["variant_name"], "treatment")
        XCTAssertTrue(backend.release(holdA, with: MockResponse(status: 502, body: Data("bad gateway".utf8))))
        XCTAssertFalse(backend.release(holdA), "a hold releases once")
        let ra = response(await a.value)
        XCTAssertEqual(ra.status, 502)
        // Natural responses are computed at release: user-2 assigned, user-1 never reached the model.
        XCTAssertEqual(backend.state.assignments.map(\.userID), ["user-2"])
        XCTAssertEqual(backend.history.map(\.hold), [holdA, holdB])
        XCTAssertEqual(backend.history.map { $0.response?.status }, [502, 200])
        XCTAssertTrue(backend.heldRequests.isEmpty)
    }

    func testHoldSeesFixtureChangeMadeWhileHeld() async {
        let backend = MockBackend(clock: ManualClock())
        let events = EventRecorder(backend)
        backend.addFault(FaultRule(when: .nth(1), action: .hold(label: nil)))
        let t = Task { await backend.handle(Req.assign("user-1")) }
        guard case .hold(let id)? = await events.parked(1) else { return XCTFail("not held") }
        backend.updateFixtures { $0.experiments[0].status = .completed }
        backend.release(id)
        let awaited3 = await t.value
        XCTAssertEqual(response(awaited3).status, 404)
    }

    func testTimeoutDropsAndBodyMangling() async throws {
        let backend = MockBackend(clock: ManualClock())
        let rules = [
            #"{"when":{"nth":1},"action":{"timeout":{}}}"#,
            #"{"when":{"nth":2},"action":{"timeout":{"processed":true}}}"#,
            #"{"when":{"nth":3},"action":{"drop_before_response":{}}}"#,
            #"{"when":{"nth":4},"action":{"drop_mid_body":{"body_bytes":10}}}"#,
            #"{"when":{"nth":5},"action":{"malformed_json":{}}}"#,
            #"{"when":{"nth":6},"action":{"truncated_json":{"bytes":12}}}"#,
            #"{"when":{"nth":7},"action":{"wrong_content_type":{"content_type":"text/html","body":"<html>oops</html>"}}}"#,
        ]
        for r in rules { backend.addFault(try decodeRule(r)) }
        let flagBody = #"{"config":null,"enabled":true,"key":"sdk_contract_flag","reason":"rollout"}"#
        var outcomes: [MockOutcome] = []
        for i in 0..<7 {
            let request = i == 1 ? Req.assign("user-1") : Req.flag("u")
            guard i < 2 else { outcomes.append(await backend.handle(request)); continue }
            // A timeout (the TCP form) parks until the client gives up: the task is cancelled.
            let task = Task { await backend.handle(request) }
            await backend.waitForHolds(1)
            XCTAssertEqual(backend.heldRequests.map(\.action), ["timeout"])
            task.cancel()
            outcomes.append(await task.value)
            XCTAssertEqual(backend.heldRequests, [])
        }
        XCTAssertEqual(outcomes[0], .timeout)
        XCTAssertEqual(outcomes[1], .timeout)
        XCTAssertEqual(backend.state.assignments.map(\.userID), ["user-1"], "processed:true reaches the model")
        XCTAssertEqual(outcomes[2], .dropBeforeResponse)
        guard case .dropMidBody(let full, 10) = outcomes[3] else { return XCTFail("\(outcomes[3])") }
        XCTAssertEqual(text(full), flagBody)
        XCTAssertEqual(text(response(outcomes[4])), #"{"detail": "#)
        XCTAssertEqual(response(outcomes[4]).status, 200)
        XCTAssertEqual(text(response(outcomes[5])), String(flagBody.prefix(12)))
        XCTAssertEqual(response(outcomes[6]).header("Content-Type"), "text/html")
        XCTAssertEqual(text(response(outcomes[6])), "<html>oops</html>")
        XCTAssertEqual(backend.history.map(\.outcome), ["timeout", "timeout", "drop_before_response", "drop_mid_body", "respond", "respond", "respond"])
        XCTAssertEqual(backend.history.map { $0.fault?.action }, ["timeout", "timeout", "drop_before_response", "drop_mid_body", "malformed_json", "truncated_json", "wrong_content_type"])
    }

    func testOutageWindow() async throws {
        let clock = ManualClock()
        let backend = MockBackend(clock: clock)
        backend.addFault(try decodeRule(#"{"when":{"window":{"from_seconds":10,"until_seconds":20}},"action":{"respond":{"status":503,"body":"outage"}}}"#))
        var statuses: [Int] = []
        for step in [0.0, 10, 9.5, 0.5, 5] {
            clock.advance(step)
            statuses.append(response(await backend.handle(Req.flag("u"))).status)
        }
        XCTAssertEqual(statuses, [200, 503, 503, 200, 200])  // t = 0, 10, 19.5, 20, 25
    }

    func testModelRateLimitInVirtualTime() async {
        var f = Fixtures.sdkContract
        f.rateLimit = RateLimit(limit: 1, windowSeconds: 10)
        let clock = ManualClock()
        let backend = MockBackend(fixtures: f, clock: clock)
        let awaited4 = await backend.handle(Req.flag("u"))
        XCTAssertEqual(response(awaited4).status, 200)
        clock.advance(3)
        let limited = response(await backend.handle(Req.flag("u")))
        XCTAssertEqual(limited.status, 429)
        XCTAssertEqual(limited.header("Retry-After"), "10", "a natural 429 always sends the window")
        clock.advance(7)
        let awaited5 = await backend.handle(Req.flag("u"))
        XCTAssertEqual(response(awaited5).status, 200)
    }

    func testHistoryRedactsKeyAndKeepsOrder() async {
        let backend = MockBackend(clock: ManualClock())
        var req = Req.assign("user-1")
        req.headers.append((MockBackend.routingHeader, backend.routeToken))
        _ = await backend.handle(req)
        _ = await backend.handle(Req.post("/api/v1/tracking/asign", "{}"))
        let h = backend.history
        XCTAssertEqual(h[0].headers, [HeaderField(name: "X-Api-Key", value: "***"), HeaderField(name: "Content-Type", value: "application/json")])
        XCTAssertEqual(h[0].json?["user_id"], "user-1")
        XCTAssertEqual(h[0].method, "POST")
        XCTAssertEqual(h[0].path, "/api/v1/tracking/assign")
        XCTAssertNil(h[0].query)
        XCTAssertEqual(h[0].route, "POST /api/v1/tracking/assign")
        XCTAssertEqual(h[1].response?.status, 404)
        XCTAssertEqual(h[1].note, "no route for POST /api/v1/tracking/asign; nearest is POST /api/v1/tracking/assign: segment 4 is 'asign', expected 'assign'")
        // History is Codable and round-trips.
        let data = try! JSONEncoder().encode(h)
        XCTAssertEqual(try! JSONDecoder().decode([HistoryEntry].self, from: data), h)
        XCTAssertFalse(String(decoding: data, as: UTF8.self).contains(Fixtures.sdkContractAPIKey))
    }

    /// A rule for NFC "café" never fires for NFD "café", and the report prints the two apart
    /// (a forty-eighth outside tester, M: `body.user_id is "café", rule wants "café"`).
    func testANearMissOfAnotherSpellingPrintsBothUnambiguously() async {
        let backend = MockBackend(clock: ManualClock())
        backend.addFault(FaultRule(name: "nfc", match: FaultMatch(method: "POST", path: "/api/v1/tracking/track", body: ["user_id": "caf\u{E9}"]),
                                   when: .nth(1), action: .status(500)))
        let answer = await backend.handle(Req.post("/api/v1/tracking/track", #"{"event_type":"x","user_id":"cafe\u0301","experiment_key":"sdk_contract_ab"}"#))
        if case .respond(let r) = answer { XCTAssertNotEqual(r.status, 500, "an NFD id does not match the NFC rule") } else { XCTFail("\(answer)") }
        let report = backend.shutdown()
        XCTAssertEqual(report.unusedFaults.first?.nearest,
                       #"nearest request #1 POST /api/v1/tracking/track: body.user_id is "cafe\u0301", rule wants "café""#)
    }

    func testStrictShutdownReport() async {
        let backend = MockBackend(clock: ManualClock())
        let events = EventRecorder(backend)
        backend.addFault(FaultRule(name: "hold bob", match: FaultMatch(body: ["user_id": "bob"]), action: .hold(label: "bob")))
        let unused = backend.addFault(FaultRule(name: "never", match: FaultMatch(method: "POST", path: "/api/v1/tracking/track", body: ["user_id": "zed"]),
                                                when: .nth(1), action: .status(500)))
        let partly = backend.addFault(FaultRule(name: "twice", match: FaultMatch(path: "/api/v1/tracking/assign"), when: .first(3), action: .delay(seconds: 0)))
        let held = Task { await backend.handle(Req.assign("bob")) }
        await events.parked(1)
        _ = await backend.handle(Req.post("/api/v1/tracking/track", #"{"event_type":"x","user_id":"amy","experiment_key":"sdk_contract_ab"}"#))
        let report = backend.shutdown()
        XCTAssertEqual(report.unreleasedHolds.map(\.userID), ["bob"])
        XCTAssertEqual(report.inFlight, 1)
        XCTAssertEqual(report.unusedFaults.map(\.id), [unused, partly])
        XCTAssertEqual(report.unusedFaults[0].nearest, "nearest request #2 POST /api/v1/tracking/track: body.user_id is \"amy\", rule wants \"zed\"")
        XCTAssertEqual(report.unusedFaults[1].nearest, "only 1 of 3 matching requests arrived")
        XCTAssertFalse(report.isClean)
        let awaited6 = await held.value
        XCTAssertEqual(awaited6, .dropBeforeResponse)
        let awaited7 = await backend.handle(Req.flag("u"))
        XCTAssertEqual(response(awaited7).status, 503)
        XCTAssertTrue(backend.shutdown().unreleasedHolds.isEmpty)
    }

    func testHoldNeverReachedNamesNearestRequest() async {
        let backend = MockBackend(clock: ManualClock())
        let id = backend.addFault(FaultRule(match: FaultMatch(method: "POST", path: "/api/v1/tracking/assign", body: ["user_id": "bob"]), action: .hold(label: nil)))
        _ = await backend.handle(Req.assign("rob"))
        _ = await backend.handle(Req.flag("bob"))
        let report = backend.shutdown()
        XCTAssertEqual(report.unusedFaults, [UnusedFault(id: id, name: nil, matched: 0, needed: 1,
            nearest: "nearest request #1 POST /api/v1/tracking/assign: body.user_id is \"rob\", rule wants \"bob\"")])
    }

    func testFaultRuleJSONRoundTripAndErrors() throws {
        let rules = [
            FaultRule(name: "a", match: FaultMatch(method: "GET", pathPrefix: "/api", query: ["user_id": "u"]), when: .first(2), action: .status(503)),
            FaultRule(when: .window(fromSeconds: 1, untilSeconds: 2), action: .rateLimited(.httpDate("Wed, 21 Oct 2015 07:28:00 GMT"))),
            FaultRule(action: .delay(seconds: 1.5)), FaultRule(action: .hold(label: "x")), FaultRule(action: .timeout(processed: true)),
            FaultRule(action: .dropBeforeResponse(processed: false)), FaultRule(action: .dropMidBody(bodyBytes: 3)),
            FaultRule(action: .malformedJSON(body: nil)), FaultRule(action: .truncatedJSON(bytes: 4)),
            FaultRule(action: .wrongContentType(contentType: "text/plain", body: nil)),
        ]
        for rule in rules {
            let data = try JSONEncoder().encode(rule)
            XCTAssertEqual(try JSONDecoder().decode(FaultRule.self, from: data), rule, String(decoding: data, as: UTF8.self))
        }
        let bad: [(String, String)] = [
            // The path is the error's coding path (printed as `Path:`), not repeated in the text.
            (#"{"action":{"hold":{}},"whne":{"nth":1}}"#, "Path: whne. Debug description: unknown key 'whne';"),
            (#"{"action":{"hodl":{}}}"#, "Path: action.hodl. Debug description: unknown key 'hodl';"),
            (#"{"action":{"delay":{"secs":1}}}"#, "Path: action.delay.secs. Debug description: unknown key 'secs';"),
            (#"{"match":{"user_id":"bob"},"action":{"hold":{}}}"#, "Path: match.user_id. Debug description: unknown key 'user_id';"),
            (#"{"when":{"nth":0},"action":{"hold":{}}}"#, "'nth' must be at least 1, got 0"),
            (#"{"action":{"hold":{},"delay":{"seconds":1}}}"#, "'action' needs exactly one of"),
            (#"{"action":{"respond":{"status":700}}}"#, "status must be 200...599 (a final status), got 700"),
        ]
        for (json, message) in bad {
            XCTAssertThrowsError(try decodeRule(json), json) { XCTAssertTrue("\($0)".contains(message), "\(json): \($0)") }
        }
    }

    func testScriptIsAValueType() {
        var script = FaultScript(epoch: Date(timeIntervalSince1970: 0))
        script.add(FaultRule(when: .nth(2), action: .status(500)))
        let copy = script
        XCTAssertNil(script.decide(for: Req.flag("u"), now: Date(timeIntervalSince1970: 0)))
        XCTAssertEqual(script.decide(for: Req.flag("u"), now: Date(timeIntervalSince1970: 0))?.occurrence, 2)
        var other = copy
        XCTAssertNil(other.decide(for: Req.flag("u"), now: Date(timeIntervalSince1970: 0)), "copies count separately")
    }
}
