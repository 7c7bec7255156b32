import Foundation
import XCTest
@testable import Experimently

/// `close()` cancels every request in flight, tracking requests included (issue 11 section 6):
/// the tracking call reports `false`, and later calls work as usual.
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

    func testCancellingTheCallerStillCancelsTheRequest() async throws {
        let stub = Stub { _, _ in .hold }
        let client = makeClient(stub)
        let pending = Task { await client.trackWithStatus(TrackEvent(userId: "u", eventName: "click", experimentKey: "exp")) }
        await stub.waitForRequests(1)
        pending.cancel()
        let delivered = await pending.value
        XCTAssertFalse(delivered)
        await stub.wait("the held load stopped", until: { _, stops in stops >= 1 })
    }
}
