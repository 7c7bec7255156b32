import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import ExperimentlyMock

/// The `serve` control API (issue 12 section 6) through the real loopback TCP server: faults
/// added and removed at run time, holds listed (with a bounded wait as the gate, never a sleep),
/// released in reverse order with and without an override, the live journal redacted, reset, the
/// token, and that admin requests are neither journaled nor rate limited.
final class MockAdminTests: XCTestCase {
    private func serve(_ fixtures: Fixtures = .sdkContract, faults: [FaultRule] = [], token: String? = nil) throws -> (ServedBackend, URLSession) {
        let backend = MockBackend(fixtures: fixtures)
        for rule in faults { backend.addFault(rule) }
        let admin = MockAdmin(backend: backend, fixtures: fixtures, faults: faults, token: token)
        let server = MockHTTPServer(handler: admin, configuration: .init(port: 0, readTimeout: 5, shutdownGracePeriod: 1))
        let port = try server.start()
        let session = URLSession(configuration: .ephemeral)
        addTeardownBlock {
            RetiredSessions.keep(session)
            backend.shutdown()
            server.shutdown()
        }
        return (ServedBackend(backend: backend, server: server, port: port), session)
    }

    private func admin(_ s: ServedBackend, _ method: String, _ path: String, json: String? = nil, token: String? = nil) -> URLRequest {
        var r = s.request("/__admin/" + path, method: method, json: json, key: nil, timeout: 10)
        if let token { r.setValue(token, forHTTPHeaderField: MockAdmin.tokenHeader) }
        return r
    }

    private func json(_ r: HTTPResult) throws -> JSONValue { try JSONValue.parse(r.body).value }

    func testHoldTwoReleaseInReverseOrderWithOverride() async throws {
        let (s, session) = try serve()
        let added = try await fetch(session, admin(s, "POST", "faults", json: #"{"match": {"path": "/api/v1/tracking/assign"}, "action": {"hold": {"label": "gate"}}}"#))
        XCTAssertEqual(added.status, 201, added.text)
        XCTAssertEqual(try json(added), .object(["id": 1]))

        let first = Task { try await fetch(session, s.assign("user-1")) }
        // The first must be parked before the second is sent, so their seqs are known.
        let one = try await fetch(session, admin(s, "GET", "holds?count=1&timeout_ms=10000"))
        XCTAssertEqual(one.status, 200, one.text)
        let second = Task { try await fetch(session, s.assign("user-2")) }
        let two = try await fetch(session, admin(s, "GET", "holds?count=2&timeout_ms=10000"))
        XCTAssertEqual(two.status, 200, two.text)
        let holds = try XCTUnwrap(try json(two)["holds"]?.arrayValue)
        XCTAssertEqual(holds.map { $0["seq"] }, [1, 2])
        XCTAssertEqual(holds.map { $0["user_id"] }, ["user-1", "user-2"])
        XCTAssertEqual(holds[0]["method"], "POST")
        XCTAssertEqual(holds[0]["target"], "/api/v1/tracking/assign")
        XCTAssertEqual(holds[0]["fault"], 1)
        XCTAssertEqual(holds[0]["label"], "gate")

        // Release the second first: it is answered while the first stays parked.
        let r2 = try await fetch(session, admin(s, "POST", "holds/2/release"))
        XCTAssertEqual(r2.text, #"{"released":2}"#)
        let answer2 = try await second.value
        XCTAssertEqual(answer2.status, 200)
        XCTAssertEqual(try json(answer2)["variant_name"], "treatment")
        XCTAssertEqual(s.backend.heldRequests.map(\.seq), [1], "the first is still held")
        let r1 = try await fetch(session, admin(s, "POST", "holds/1/release", json: #"{"status": 503, "json": {"detail": "overridden"}}"#))
        XCTAssertEqual(r1.status, 200)
        let answer1 = try await first.value
        XCTAssertEqual(answer1.status, 503)
        XCTAssertEqual(answer1.text, #"{"detail":"overridden"}"#)
        let again = try await fetch(session, admin(s, "POST", "holds/1/release"))
        XCTAssertEqual(again.status, 404)
    }

    func testHoldsWaitTimesOutWith408AndBadQueries() async throws {
        let (s, session) = try serve()
        let none = try await fetch(session, admin(s, "GET", "holds?count=1&timeout_ms=1"))
        XCTAssertEqual(none.status, 408)
        XCTAssertEqual(none.text, #"{"error":"0 of 1 requests parked within 1 ms","holds":[]}"#)
        let zero = try await fetch(session, admin(s, "GET", "holds?count=0"))
        XCTAssertEqual(zero.text, #"{"holds":[]}"#)
        let bad = try await fetch(session, admin(s, "GET", "holds?count=x"))
        XCTAssertEqual(bad.status, 400)
        let badTimeout = try await fetch(session, admin(s, "GET", "holds?count=1&timeout_ms=0"))
        XCTAssertEqual(badTimeout.status, 400)
        // A name given twice is refused: which count was meant cannot be told (a sixty-sixth
        // outside tester: one of the two was used, silently).
        let twice = try await fetch(session, admin(s, "GET", "holds?count=1&count=2"))
        XCTAssertEqual(twice.status, 400)
        XCTAssertTrue(twice.text.contains("query parameter 'count' is given more than once"), twice.text)
        // Releasing with nothing parked says so, not "parked: " and an empty list.
        let nothing = try await fetch(session, admin(s, "POST", "holds/7/release"))
        XCTAssertEqual(nothing.status, 404)
        XCTAssertTrue(nothing.text.contains("request 7 is not parked on a hold; no request is parked"), nothing.text)
    }

    func testFaultsAddListDeleteAndBadRule() async throws {
        let (s, session) = try serve()
        let bad = try await fetch(session, admin(s, "POST", "faults", json: #"{"action": {"explode": {}}}"#))
        XCTAssertEqual(bad.status, 400)
        XCTAssertTrue(bad.text.contains("not a fault rule"), bad.text)
        _ = try await fetch(session, admin(s, "POST", "faults", json: #"{"match": {"path": "/health"}, "action": {"respond": {"status": 503, "json": {"detail": "down"}}}}"#))
        let down = try await fetch(session, s.request("/health", key: nil))
        XCTAssertEqual(down.status, 503)
        let list = try json(try await fetch(session, admin(s, "GET", "faults")))
        XCTAssertEqual(list["faults"]?.arrayValue?.first?["id"], 1)
        let removed = try await fetch(session, admin(s, "DELETE", "faults/1"))
        XCTAssertEqual(removed.text, #"{"removed":1}"#)
        let up = try await fetch(session, s.request("/health", key: nil))
        XCTAssertEqual(up.status, 200)
        let missing = try await fetch(session, admin(s, "DELETE", "faults/1"))
        XCTAssertEqual(missing.status, 404)
        let unknown = try await fetch(session, admin(s, "GET", "nope"))
        XCTAssertEqual(unknown.status, 404)
        XCTAssertTrue(unknown.text.contains("POST /__admin/reset"), unknown.text)
    }

    func testDuplicateKeysInAFaultRuleOrAnOverrideAre400NamingThePath() async throws {
        let (s, session) = try serve()
        let dup = try await fetch(session, admin(s, "POST", "faults",
            json: #"{"match": {"path": "/health"}, "action": {"respond": {"status": 503, "status": 200}}}"#))
        XCTAssertEqual(dup.status, 400)
        XCTAssertEqual(dup.header("Content-Type"), "application/json")
        let error = try json(dup)["error"]?.stringValue ?? ""
        XCTAssertTrue(error.contains(#"duplicate key "status" at $.action.respond.status"#), error)
        XCTAssertTrue(s.backend.faults.isEmpty, "nothing was added")
        // An unknown key is named once, with its path.
        let extra = try await fetch(session, admin(s, "POST", "faults", json: #"{"match": {"path": "/x"}, "action": {"hold": {}}, "extra": 1}"#))
        XCTAssertEqual(extra.status, 400)
        XCTAssertEqual(try json(extra)["error"]?.stringValue,
                       "the body is not a fault rule (the --faults format): at $.extra: unknown key 'extra'; expected one of: action, match, name, when")
        let top = try await fetch(session, admin(s, "POST", "faults", json: #"{"action": {"timeout": {}}, "action": {"hold": {}}}"#))
        XCTAssertEqual(top.status, 400)
        XCTAssertTrue(top.text.contains(#"at $.action"#), top.text)

        // The release override is JSON too.
        s.backend.addFault(FaultRule(match: FaultMatch(path: "/health"), action: .hold(label: nil)))
        let task = Task { try await fetch(session, s.request("/health", key: nil)) }
        await s.backend.waitForHolds(1)
        let badOverride = try await fetch(session, admin(s, "POST", "holds/1/release", json: #"{"status": 500, "json": {"a": 1, "a": 2}}"#))
        XCTAssertEqual(badOverride.status, 400)
        XCTAssertTrue(badOverride.text.contains(#"at $.json.a"#), badOverride.text)
        // The override's members are named where the caller put them, not under the `respond`
        // the mock wraps it in, and in words rather than Foundation's (a 73rd outside tester).
        let badStatus = try await fetch(session, admin(s, "POST", "holds/1/release", json: #"{"status": "abc"}"#))
        XCTAssertEqual(badStatus.status, 400)
        XCTAssertEqual(try json(badStatus)["error"]?.stringValue,
                       #"the override is not a response {"status", "headers", "json" | "body"}: at $.status: expected a whole number, found a string"#)
        XCTAssertEqual(s.backend.heldRequests.count, 1, "still held")
        let released = try await fetch(session, admin(s, "POST", "holds/1/release"))
        XCTAssertEqual(released.status, 200)
        let answer = try await task.value
        XCTAssertEqual(answer.status, 200)
    }

    func testATimeoutParkedOverTCPIsListedWithItsActionAndIsNotReleasable() async throws {
        let (s, session) = try serve()
        s.backend.addFault(try decodeRule(#"{"match": {"path": "/health"}, "action": {"timeout": {}}}"#))
        let raw = try RawClient(port: s.port)
        raw.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
        let holds = try json(try await fetch(session, admin(s, "GET", "holds?count=1&timeout_ms=5000")))
        XCTAssertEqual(holds["holds"]?.arrayValue?.first?["action"], "timeout")
        XCTAssertEqual(holds["holds"]?.arrayValue?.first?["seq"], 1)
        let release = try await fetch(session, admin(s, "POST", "holds/1/release"))
        XCTAssertEqual(release.status, 409)
        XCTAssertTrue(release.text.contains("timeout fault"), release.text)
        raw.reset()
        XCTAssertTrue(eventually { s.backend.history.first?.outcome == "timeout" })
        XCTAssertEqual(s.backend.history.first?.cancelled, true)
    }

    func testRequestsJournalIsRedactedAndAdminIsNeitherJournaledNorRateLimited() async throws {
        var f = Fixtures.sdkContract
        f.rateLimit = RateLimit(limit: 1, otherLimit: 1)
        let (s, session) = try serve(f)
        // The key also travels in a query and a body: both must be redacted.
        _ = try await fetch(session, s.request("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u&k=\(Fixtures.sdkContractAPIKey)"))
        _ = try await fetch(session, s.request("/api/v1/tracking/assign", method: "POST", json: #"{"experiment_key":"sdk_contract_ab","user_id":"\#(Fixtures.sdkContractAPIKey)"}"#))
        for _ in 0..<5 {
            let r = try await fetch(session, admin(s, "GET", "requests"))
            XCTAssertEqual(r.status, 200, "admin requests are never rate limited")
        }
        let journal = try await fetch(session, admin(s, "GET", "requests"))
        XCTAssertFalse(journal.text.contains(Fixtures.sdkContractAPIKey), journal.text)
        let items = try XCTUnwrap(try json(journal)["requests"]?.arrayValue)
        XCTAssertEqual(items.count, 2, "admin requests are not in the journal")
        XCTAssertEqual(items[0]["target"], "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u&k=***")
        XCTAssertEqual(items[1]["response"]?["status"], 200)
        XCTAssertEqual(s.backend.history.count, 2)
    }

    func testResetRefusedWhileHeldThenBackToStart() async throws {
        let startFault = FaultRule(match: FaultMatch(path: "/api/v1/tracking/track"), when: .nth(1), action: .status(500))
        let (s, session) = try serve(faults: [startFault])
        _ = try await fetch(session, s.assign("user-1"))
        _ = try await fetch(session, admin(s, "POST", "faults", json: #"{"match": {"path": "/api/v1/tracking/assign"}, "action": {"hold": {}}}"#))
        let held = Task { try await fetch(session, s.assign("user-2")) }
        _ = try await fetch(session, admin(s, "GET", "holds?count=1&timeout_ms=10000"))
        let refused = try await fetch(session, admin(s, "POST", "reset"))
        XCTAssertEqual(refused.status, 409)
        XCTAssertTrue(refused.text.contains("1 request(s) still in flight (held: 1)"), refused.text)
        _ = try await fetch(session, admin(s, "POST", "holds/2/release"))
        _ = try await held.value
        let reset = try await fetch(session, admin(s, "POST", "reset"))
        XCTAssertEqual(reset.text, #"{"reset":true}"#)
        XCTAssertEqual(s.backend.history.count, 0)
        XCTAssertTrue(s.backend.state.assignments.isEmpty)
        XCTAssertEqual(s.backend.faults.map(\.rule), [startFault], "the start faults, and only them")
        // Fault ids go on: the start fault is now 3, and 1 or 2 (from before) name no rule.
        XCTAssertEqual(s.backend.faults.map(\.id.rawValue), [3])
        let stale = try await fetch(session, admin(s, "DELETE", "faults/1"))
        XCTAssertEqual(stale.status, 404)
        // A route under another method is 405 naming the allowed ones.
        let put = try await fetch(session, admin(s, "PUT", "faults"))
        XCTAssertEqual(put.status, 405)
        XCTAssertTrue(put.text.contains("allowed: GET, POST"), put.text)
        // The start fault's counter is back at zero: it fires again on the first /track.
        let track = try await fetch(session, s.request("/api/v1/tracking/track", method: "POST", json: #"{"event_type":"x","user_id":"u","experiment_key":"sdk_contract_ab"}"#))
        XCTAssertEqual(track.status, 500)
        // Sequence numbers go on after a reset (the streamed journal never repeats one): the two
        // assigns before it were #1 and #2.
        XCTAssertEqual(s.backend.history.first?.seq, 3)
    }

    func testTokenRequiredWhenConfigured() async throws {
        let (s, session) = try serve(token: "t0ken")
        let missing = try await fetch(session, admin(s, "GET", "holds"))
        XCTAssertEqual(missing.status, 401)
        let wrong = try await fetch(session, admin(s, "GET", "holds", token: "other"))
        XCTAssertEqual(wrong.status, 401)
        let ok = try await fetch(session, admin(s, "GET", "holds", token: "t0ken"))
        XCTAssertEqual(ok.status, 200)
        let backendStill = try await fetch(session, s.flag("u"))
        XCTAssertEqual(backendStill.status, 200, "the token guards only /__admin/")
    }
}
