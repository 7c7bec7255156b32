import Foundation
import XCTest
@testable import ExperimentlyMock

/// A virtual clock for tests: time moves only through `advance`; sleepers wake when their
/// deadline is reached. `waitForSleepers` lets a test wait (without sleeping) until a request
/// really sits in `sleep`.
final class ManualClock: MockClock, @unchecked Sendable {
    // @unchecked Sendable: every stored property is guarded by `lock`.
    private let lock = NSLock()
    private var current: Date
    private var sleepers: [(deadline: Date, continuation: CheckedContinuation<Void, Never>)] = []
    private var sleeperWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

    init(_ start: Date = Date(timeIntervalSince1970: 1_700_000_000)) { current = start }

    func now() -> Date { lock.lock(); defer { lock.unlock() }; return current }

    var sleeperCount: Int { lock.lock(); defer { lock.unlock() }; return sleepers.count }

    func sleep(seconds: TimeInterval) async throws {
        guard seconds > 0 else { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            lock.lock()
            sleepers.append((current.addingTimeInterval(seconds), c))
            let ready = sleeperWaiters.filter { $0.count <= sleepers.count }
            sleeperWaiters.removeAll { $0.count <= sleepers.count }
            lock.unlock()
            for w in ready { w.continuation.resume() }
        }
    }

    /// Suspends until at least `count` sleepers are registered.
    func waitForSleepers(_ count: Int) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            lock.lock()
            if sleepers.count >= count { lock.unlock(); c.resume(); return }
            sleeperWaiters.append((count, c))
            lock.unlock()
        }
    }

    func advance(_ seconds: TimeInterval) {
        lock.lock()
        current = current.addingTimeInterval(seconds)
        let due = sleepers.filter { $0.deadline <= current }
        sleepers.removeAll { $0.deadline <= current }
        lock.unlock()
        for s in due { s.continuation.resume() }
    }
}

/// Records a backend's observer events and lets a test await one (a gate, not a sleep).
final class EventRecorder: @unchecked Sendable {
    // @unchecked Sendable: `events` and `waiters` are guarded by `lock`.
    private let lock = NSLock()
    private var events: [MockEvent] = []
    private var waiters: [(predicate: @Sendable (MockEvent) -> Bool, continuation: CheckedContinuation<MockEvent, Never>)] = []

    init(_ backend: MockBackend) {
        backend.setObserver { [weak self] event in self?.record(event) }
    }

    var all: [MockEvent] { lock.lock(); defer { lock.unlock() }; return events }

    private func record(_ event: MockEvent) {
        lock.lock()
        events.append(event)
        let ready = waiters.filter { $0.predicate(event) }
        waiters.removeAll { $0.predicate(event) }
        lock.unlock()
        for w in ready { w.continuation.resume(returning: event) }
    }

    /// Returns the first recorded event matching `predicate`, waiting for it if needed.
    func wait(for predicate: @escaping @Sendable (MockEvent) -> Bool) async -> MockEvent {
        await withCheckedContinuation { c in
            lock.lock()
            if let e = events.first(where: predicate) { lock.unlock(); c.resume(returning: e); return }
            waiters.append((predicate, c))
            lock.unlock()
        }
    }

    /// Waits for the `parked` event of request `seq` and returns its reason.
    @discardableResult
    func parked(_ seq: Int) async -> MockEvent.Parked? {
        let e = await wait { if case .parked(seq, _) = $0 { return true }; return false }
        if case .parked(_, let reason) = e { return reason }
        return nil
    }

    /// Waits for the `answered` event of request `seq`.
    func answered(_ seq: Int) async {
        _ = await wait { if case .answered(seq, _, _) = $0 { return true }; return false }
    }
}

func response(_ outcome: MockOutcome, file: StaticString = #filePath, line: UInt = #line) -> MockResponse {
    if case .respond(let r) = outcome { return r }
    XCTFail("expected a response, got \(outcome)", file: file, line: line)
    return MockResponse(status: 0)
}

func decodeRule(_ json: String) throws -> FaultRule { try JSONDecoder().decode(FaultRule.self, from: Data(json.utf8)) }
