import XCTest
import Foundation
@testable import ExperimentlyMock

/// The backend's observer sees events in the order they happened under the backend's lock,
/// although each is delivered outside it by the thread that caused it (`ObserverLine`). A
/// history built from the events (the harness's) then lists requests in the mock's order: before,
/// a held first request could be recorded after a second request's answer, and the single-flight
/// check saw no overlap (AppStepsTests, no-single-flight variant, 3-5 of 40 loaded debug runs).
final class ObserverOrderTests: XCTestCase {
    func testConcurrentRequestsAreObservedInTheOrderTheMockReceivedThem() {
        var fixtures = Fixtures.sdkContract
        fixtures.rateLimit = RateLimit(limit: 1_000_000, windowSeconds: 60)
        let backend = MockBackend(fixtures: fixtures, clock: ManualClock())
        let seen = MockLocked<[MockEvent]>([])
        backend.setObserver { event in seen.withLock { $0.append(event) } }
        let threads = 8, perThread = 400
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            for i in 0..<perThread {
                let ticket = backend.begin(Req.flag("user-\(t)-\(i)"))
                _ = backend.completeImmediately(ticket)
            }
        }
        let events = seen.withLock { $0 }
        XCTAssertEqual(events.count, 2 * threads * perThread)
        var received: [Int] = []
        var open = Set<Int>()
        for event in events {
            switch event {
            case .received(let seq):
                received.append(seq)
                open.insert(seq)
            case .answered(let seq, _, _):
                XCTAssertNotNil(open.remove(seq), "request #\(seq) answered before it was observed received")
            default: break
            }
        }
        XCTAssertEqual(received, Array(1...(threads * perThread)), "received events out of the mock's order")
    }
}
