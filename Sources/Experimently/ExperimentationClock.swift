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
    /// Suspends the calling task until this clock reads `deadline` or later (returns at once when
    /// it already does). The SDK's request deadline uses it with an instant fixed when the request
    /// is sent, so a timer task that starts late (a busy machine, or a virtual clock moved before
    /// the task ran) still fires at the request's deadline, not `timeout` seconds after it started.
    /// The default sleeps for `deadline - now()` seconds; a clock that can read and register in
    /// one step (a virtual clock) should implement it.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled before the time is up.
    func sleep(until deadline: Date) async throws
}

extension ExperimentationClock {
    /// Sleeps for the seconds left until `deadline` (``sleep(seconds:)``; zero or less returns at once).
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled first.
    public func sleep(until deadline: Date) async throws {
        try await sleep(seconds: deadline.timeIntervalSince(now()))
    }
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
