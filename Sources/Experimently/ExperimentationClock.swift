import Foundation

/// The source of time for an `ExperimentationClient`: cache TTLs and request deadlines read it.
///
/// Inject a virtual clock in tests and in the contract harness so entries expire and deadlines
/// fire without sleeping. Times are `Date`s; durations are seconds.
public protocol ExperimentationClock: Sendable {
    /// The current time.
    func now() -> Date
    /// Suspends the calling task for `seconds` of this clock's time.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled before the time is up.
    func sleep(seconds: TimeInterval) async throws
}

/// The wall clock: `Date()` and `Task.sleep`. The default clock of every client.
public struct SystemClock: ExperimentationClock {
    /// Creates the wall clock.
    public init() {}

    /// The current wall-clock time.
    public func now() -> Date { Date() }

    /// Sleeps for `seconds` of real time (negative or zero returns at once).
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    public func sleep(seconds: TimeInterval) async throws {
        guard seconds > 0 else { return try Task.checkCancellation() }
        try await Task.sleep(nanoseconds: UInt64(min(seconds, 1e9) * 1_000_000_000))
    }
}
