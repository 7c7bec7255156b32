import Foundation
import XCTest
@testable import Experimently

/// Tracking and fan-out: CONTRACT.md sections 1 and 4, defects 5.4 and 5.5.
final class TrackingTests: SDKTestCase {
    private static let okBatch = #"{"success_count":1,"failure_count":0,"errors":null}"#

    /// A stub that answers flags, assignments (`assigned:false` for keys starting with "inelig")
    /// and tracking.
    private func backend(batch: @escaping @Sendable (Int) -> StubReply = { _ in .respond(200, TrackingTests.okBatch) }) -> Stub {
        Stub { i, r in
            switch r.url.path {
            case "/api/v1/tracking/assign":
                let b = r.jsonBody()
                let key = b["experiment_key"] as? String ?? ""
                return .respond(200, Body.assignment(key, user: b["user_id"] as? String ?? "", assigned: !key.hasPrefix("inelig")))
            case "/api/v1/tracking/track": return .respond(200, #"{"ok":true}"#)
            case "/api/v1/tracking/batch": return batch(i)
            default: return .respond(200, Body.flag(r.url.lastPathComponent))
            }
        }
    }

    private func batches(_ stub: Stub) -> [[[String: Any]]] {
        stub.recorded.filter { $0.url.path == "/api/v1/tracking/batch" }.map { ($0.jsonBody()["events"] as? [[String: Any]]) ?? [] }
    }

    func testKeyedEventIsOneTrackRequest() async throws {
        let stub = backend()
        let client = makeClient(stub)
        _ = try await client.getAssignment("e1", user: User(id: "u"))  // a cached assignment must not fan out a keyed event
        try await client.track(TrackEvent(userId: "u", eventName: "purchase", experimentKey: "e9", value: 3))
        XCTAssertEqual(stub.recorded.map(\.url.path), ["/api/v1/tracking/assign", "/api/v1/tracking/track"])
        XCTAssertEqual(stub.recorded.last?.jsonBody()["experiment_key"] as? String, "e9")
    }

    func testTrackNeverThrowsAndStatusReportsFailures() async throws {
        for reply in [StubReply.respond(500, "x"), .respond(401, "{}"), .fail(.networkConnectionLost), .respond(404, "{}")] {
            let stub = Stub { _, _ in reply }
            let client = makeClient(stub)
            let event = TrackEvent(userId: "u", eventName: "e", experimentKey: "k")
            do { try await client.track(event) } catch { XCTFail("track threw \(error)") }
            let ok = await client.trackWithStatus(event)
            XCTAssertFalse(ok, "\(reply)")
            XCTAssertEqual(stub.requestCount, 2)
        }
        let stub = Stub { _, _ in .respond(204, "") }
        let ok = await makeClient(stub).trackWithStatus(TrackEvent(userId: "u", eventName: "e", featureFlagKey: "f"))
        XCTAssertTrue(ok, "any 2xx is ok, the body is ignored")
    }

    func testUnkeyedEventWithNothingCachedSendsNothing() async throws {
        let stub = backend()
        let client = makeClient(stub)
        let ok = await client.trackWithStatus(TrackEvent(userId: "u", eventName: "page_view"))
        XCTAssertTrue(ok)
        let batched = await client.trackBatch([TrackEvent(userId: "u", eventName: "page_view")])
        XCTAssertTrue(batched)
        let empty = await client.trackBatch([])
        XCTAssertTrue(empty)
        XCTAssertEqual(stub.requestCount, 0)
    }

    func testFanOutOrderPerUserSkippingExpiredAndIneligible() async throws {
        let clock = ManualClock()
        let stub = backend()
        let client = makeClient(stub, clock: clock, cacheTTL: 100)
        let u = User(id: "u")
        _ = try await client.getAssignment("expired-exp", user: u)
        _ = try await client.evaluateFlag("expired-flag", user: u)
        clock.advance(by: 60)
        _ = try await client.evaluateFlag("flag-b", user: u)  // flags interleaved with assignments on purpose
        _ = try await client.getAssignment("exp-z", user: u)
        _ = try await client.getAssignment("inelig-exp", user: u)
        _ = try await client.evaluateFlag("flag-a", user: u)
        _ = try await client.getAssignment("exp-a", user: u)
        _ = try await client.getAssignment("other-exp", user: User(id: "v"))
        _ = try await client.evaluateFlag("other-flag", user: User(id: "v"))
        clock.advance(by: 40)  // the first two reach their TTL
        let before = stub.requestCount
        try await client.track(TrackEvent(userId: "u", eventName: "page_view", properties: ["p": 1], value: 2))
        XCTAssertEqual(stub.requestCount, before + 1, "one /batch request")
        let events = try XCTUnwrap(batches(stub).last)
        XCTAssertEqual(events.map { $0["experiment_key"] as? String ?? "-" }, ["exp-z", "exp-a", "-", "-"])
        XCTAssertEqual(events.map { $0["feature_flag_key"] as? String ?? "-" }, ["-", "-", "flag-b", "flag-a"])
        for event in events {
            XCTAssertEqual(event["user_id"] as? String, "u")
            XCTAssertEqual(event["event_name"] as? String, "page_view")
            XCTAssertEqual(event["event_type"] as? String, "page_view")
            XCTAssertEqual(event["value"] as? Double, 2)
            XCTAssertEqual(event["metadata"] as? NSDictionary, ["p": 1] as NSDictionary)
            XCTAssertEqual(event.keys.filter { $0.hasSuffix("_key") }.count, 1, "exactly one key per entry")
        }
    }

    func testIneligibleOnlyMeansNothingToSend() async throws {
        let stub = backend()
        let client = makeClient(stub)
        let a = try await client.getAssignment("inelig-1", user: User(id: "u"))
        XCTAssertFalse(a.assigned)
        XCTAssertEqual(client.getAssignments(for: "u").count, 1, "returned and cached")
        let ok = await client.trackWithStatus(TrackEvent(userId: "u", eventName: "x"))
        XCTAssertTrue(ok)
        XCTAssertEqual(stub.requestCount, 1, "no /batch for an assigned:false answer (section 5.4)")
    }

    func testTrackBatchChunksOf100InOrder() async throws {
        let stub = backend()
        let client = makeClient(stub)
        _ = try await client.getAssignment("fan", user: User(id: "u"))
        var events = (0..<149).map { TrackEvent(userId: "u", eventName: "k\($0)", experimentKey: "e") }
        events.insert(TrackEvent(userId: "u", eventName: "unkeyed"), at: 120)
        let ok = await client.trackBatch(events)
        XCTAssertTrue(ok)
        let sent = batches(stub)
        XCTAssertEqual(sent.map(\.count), [100, 50])
        let names = sent.flatMap { $0.map { $0["event_name"] as? String ?? "?" } }
        var expected = (0..<149).map { "k\($0)" }
        expected.insert("unkeyed", at: 120)
        XCTAssertEqual(names, expected)
        XCTAssertEqual(sent[1][20]["experiment_key"] as? String, "fan", "the unkeyed event fanned out to the cached assignment")
        XCTAssertEqual(stub.recorded.filter { $0.url.path == "/api/v1/tracking/track" }.count, 0, "trackBatch never uses /track")
    }

    func testFailedChunkDoesNotStopLaterChunks() async throws {
        let stub = backend { i in i == 0 ? .respond(500, "x") : .respond(200, TrackingTests.okBatch) }
        let client = makeClient(stub)
        let events = (0..<201).map { TrackEvent(userId: "u", eventName: "e\($0)", featureFlagKey: "f") }
        let ok = await client.trackBatch(events)
        XCTAssertFalse(ok)
        XCTAssertEqual(batches(stub).map(\.count), [100, 100, 1])
    }

    func testBatchWithPerEventFailuresReportsFalse() async throws {
        let failing = #"{"success_count":1,"failure_count":1,"errors":[{"index":1,"error":"unknown key"}]}"#
        let stub = backend { _ in .respond(200, failing) }
        let client = makeClient(stub)
        let batched = await client.trackBatch([TrackEvent(userId: "u", eventName: "a", experimentKey: "e"),
                                               TrackEvent(userId: "u", eventName: "b", experimentKey: "nope")])
        XCTAssertFalse(batched)
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        let fanned = await client.trackWithStatus(TrackEvent(userId: "u", eventName: "c"))
        XCTAssertFalse(fanned, "section 5.5 also for the fan-out batch")

        let okStub = backend()
        let okClient = makeClient(okStub)
        let allGood = await okClient.trackBatch([TrackEvent(userId: "u", eventName: "a", experimentKey: "e")])
        XCTAssertTrue(allGood)
    }

    func testConcurrentTrackingFromManyTasks() async throws {
        let stub = backend()
        let client = makeClient(stub)
        _ = try await client.getAssignment("e", user: User(id: "u"))
        let results = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<20 {
                group.addTask { await client.trackWithStatus(TrackEvent(userId: "u", eventName: "n\(i)")) }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        XCTAssertEqual(results, Array(repeating: true, count: 20))
        XCTAssertEqual(Set(batches(stub).flatMap { $0.map { $0["event_name"] as? String ?? "" } }).count, 20)
    }
}
