import Foundation
import ExperimentlyMock

/// A value behind an `NSLock`; the harness's box for shared mutable state.
///
/// `withLock` runs its body synchronously under the lock: never across a suspension point.
final class HarnessLocked<State>: @unchecked Sendable {
    // @unchecked Sendable: `state` is only read or written inside `lock`.
    private let lock = NSLock()
    private var state: State

    init(_ state: State) { self.state = state }

    func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
