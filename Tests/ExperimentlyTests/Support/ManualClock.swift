import Foundation
import XCTest
@testable import Experimently

/// A virtual clock: time moves only in `advance(by:)`, and `sleep` parks until time passes the
/// sleeper's deadline (or the sleeping task is cancelled). No real waiting anywhere.
final class ManualClock: ExperimentationClock, @unchecked Sendable {
    // @unchecked Sendable: every mutable field is read and written only inside `lock`.
    private struct Sleeper {
        let deadline: TimeInterval
        let continuation: CheckedContinuation<Void, Error>
    }

    private let lock = NSLock()
    private var offset: TimeInterval = 0
    private var sleepers: [UInt64: Sleeper] = [:]
    private var nextId: UInt64 = 0
    private var watchers: [(count: Int, token: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
    private let origin = Date(timeIntervalSince1970: 1_700_000_000)

    func now() -> Date { lock.withLock { origin.addingTimeInterval(offset) } }

    func sleep(seconds: TimeInterval) async throws {
        let id = lock.withLock { () -> UInt64 in nextId += 1; return nextId }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, Error>) in
                let (resumeNow, ready) = lock.withLock { () -> (Bool, [CheckedContinuation<Void, Never>]) in
                    if Task.isCancelled || seconds <= 0 { return (true, []) }
                    sleepers[id] = Sleeper(deadline: offset + seconds, continuation: c)
                    return (false, takeReady())
                }
                ready.forEach { $0.resume() }
                if resumeNow {
                    if Task.isCancelled { c.resume(throwing: CancellationError()) } else { c.resume() }
                }
            }
        } onCancel: {
            let s = lock.withLock { sleepers.removeValue(forKey: id) }
            s?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `seconds` and wakes every sleeper whose deadline has passed.
    func advance(by seconds: TimeInterval) {
        let due = lock.withLock { () -> [CheckedContinuation<Void, Error>] in
            offset += seconds
            let due = sleepers.filter { $0.value.deadline <= offset }
            due.keys.forEach { sleepers[$0] = nil }
            return due.values.map(\.continuation)
        }
        due.forEach { $0.resume() }
    }

    /// The number of tasks parked in `sleep` right now.
    var sleeperCount: Int { lock.withLock { sleepers.count } }

    private func takeReady() -> [CheckedContinuation<Void, Never>] {
        var ready: [CheckedContinuation<Void, Never>] = []
        watchers.removeAll { w in
            guard sleepers.count >= w.count else { return false }
            ready.append(w.continuation)
            return true
        }
        return ready
    }

    /// Suspends until at least `count` tasks are parked in `sleep` (a gate, no polling). A
    /// real-time safety net of `timeout` seconds turns "the SDK never started a timer" into a
    /// test failure instead of a hang.
    func waitForSleepers(_ count: Int, timeout: TimeInterval = 10, file: StaticString = #filePath, line: UInt = #line) async {
        let token = lock.withLock { () -> UInt64 in nextId += 1; return nextId }
        let watchdog = Task<Void, Never> { [weak self] in
            try? await Task<Never, Never>.sleep(nanoseconds: UInt64(timeout * 1e9))
            guard !Task<Never, Never>.isCancelled, let self else { return }
            let stuck = self.lock.withLock { () -> CheckedContinuation<Void, Never>? in
                guard let i = self.watchers.firstIndex(where: { $0.token == token }) else { return nil }
                return self.watchers.remove(at: i).continuation
            }
            if let stuck {
                XCTFail("timed out waiting for \(count) sleeper(s); \(self.sleeperCount) parked", file: file, line: line)
                stuck.resume()
            }
        }
        defer { watchdog.cancel() }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = lock.withLock { () -> Bool in
                if sleepers.count >= count { return true }
                watchers.append((count, token, c))
                return false
            }
            if now { c.resume() }
        }
    }
}
