import Foundation

/// A value behind an `NSLock`: the one place in the mock where shared mutable state lives.
///
/// `withLock` runs its body synchronously while holding the lock, so no lock is ever held across
/// a suspension point.
final class MockLocked<State>: @unchecked Sendable {
    // @unchecked Sendable: `state` is only read or written inside `lock`.
    private let lock = NSLock()
    private var state: State

    init(_ state: State) { self.state = state }

    @inline(__always)
    func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
