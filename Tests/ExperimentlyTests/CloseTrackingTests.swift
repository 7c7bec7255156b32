import Foundation
import XCTest
@testable import Experimently

/// `close()` cancels every request in flight, tracking requests included (issue 11 section 6):
/// the tracking call reports `false`, and later calls work as usual. The caller's own
/// cancellation does not: its event is delivered.
final class CloseTrackingTests: SDKTestCase {
    func testCloseCancelsAKeyedTrackInFlight() async throws {
        let stub = Stub { i, _ in i == 0 ? .hold : .respond(200, #"{"status":"ok","event_id":1}"#) }
        let client = makeClient(stub)
        let event = TrackEvent(userId: "u", eventName: "click", experimentKey: "exp")
        let pending = Task { await client.trackWithStatus(event) }
        await stub.waitForRequests(1)
        client.close()
        let delivered = await pending.value
        XCTAssertFalse(delivered, "a tracking request cancelled by close() reports false")
        await stub.wait("the held load stopped", until: { _, stops in stops >= 1 })
        let after = await client.trackWithStatus(event)
        XCTAssertTrue(after, "after close() tracking works as usual")
        XCTAssertEqual(stub.requestCount, 2)
    }

    func testCloseCancelsABatchInFlightAndForgetsIt() async throws {
        let stub = Stub { _, _ in .hold }
        let client = makeClient(stub)
        let events = (0..<3).map { TrackEvent(userId: "u", eventName: "e\($0)", experimentKey: "exp") }
        let pending = Task { await client.trackBatch(events) }
        await stub.waitForRequests(1)
        client.close()
        let ok = await pending.value
        XCTAssertFalse(ok)
        await stub.wait("the held load stopped", until: { _, stops in stops >= 1 })
        XCTAssertEqual(stub.requestCount, 1)
    }

    /// The caller's cancellation does not reach a tracking request (an outside audit, 47 item 4):
    /// a SwiftUI `.task` ended by its view going away still delivers its conversion event. On the
    /// old code the cancellation failed the request at once and the call reported `false`.
    func testCancellingTheCallerDoesNotDropTheEvent() async throws {
        let stub = Stub { _, _ in .hold }
        let client = makeClient(stub)
        let pending = Task { await client.trackWithStatus(TrackEvent(userId: "u", eventName: "purchase", experimentKey: "exp")) }
        await stub.waitForRequests(1)
        pending.cancel()
        stub.release(0, with: .respond(200, #"{"status":"ok"}"#))
        let delivered = await pending.value
        XCTAssertTrue(delivered, "a cancelled caller's event is still delivered")
        XCTAssertEqual(stub.requestCount, 1)
        XCTAssertEqual(stub.stopCount, 0, "the request was not stopped")
    }

    /// A `track` made from a task already cancelled is sent too (it sent nothing: the transport
    /// made no network task for a call cancelled before it started).
    func testATrackFromAnAlreadyCancelledTaskIsSent() async throws {
        let stub = Stub { _, _ in .respond(200, #"{"success_count":2,"failure_count":0,"errors":null}"#) }
        let client = makeClient(stub)
        let gate = AsyncGate()
        let pending = Task {
            await gate.wait()
            return await client.trackBatch([TrackEvent(userId: "u", eventName: "a", experimentKey: "e"),
                                            TrackEvent(userId: "u", eventName: "b", experimentKey: "e")])
        }
        pending.cancel()
        gate.open()
        let delivered = await pending.value
        XCTAssertTrue(delivered)
        XCTAssertEqual(stub.requestCount, 1)
    }
}
