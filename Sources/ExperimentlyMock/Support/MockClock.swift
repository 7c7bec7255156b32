import Foundation

/// The time source of the mock backend: rate-limit windows, outage windows, delays and the
/// in-process timeout all read it, so tests can run them in virtual time (DESIGN.md, "Time is a
/// dependency").
public protocol MockClock: Sendable {
    /// The current time.
    func now() -> Date
    /// Suspends for `seconds` (seconds of this clock's time).
    ///
    /// Throws `CancellationError` when the calling task is cancelled while waiting.
    func sleep(seconds: TimeInterval) async throws
    /// Suspends until the clock reads `deadline` or later; returns at once when it already does.
    ///
    /// The backend fixes a delay's or timeout's deadline before it reports the request `parked`,
    /// then calls this, so a virtual clock advanced right after `parked` (before the sleep is
    /// registered) cannot strand the sleeper. The default computes the remaining seconds from
    /// `now()` and calls ``sleep(seconds:)``; virtual clocks may override it.
    /// Throws `CancellationError` when the calling task is cancelled while waiting.
    func sleep(until deadline: Date) async throws
}

extension MockClock {
    /// Sleeps the seconds remaining until `deadline` (none when it has passed).
    public func sleep(until deadline: Date) async throws {
        let remaining = deadline.timeIntervalSince(now())
        if remaining > 0 { try await sleep(seconds: remaining) }
    }
}

/// The wall clock: `Date()` and `Task.sleep` in real time (used over TCP and in benchmarks).
public struct MockSystemClock: MockClock {
    /// Creates the wall clock.
    public init() {}

    /// The current wall-clock time.
    public func now() -> Date { Date() }

    /// Sleeps `seconds` of real time; non-positive values return at once.
    ///
    /// Throws `CancellationError` when the task is cancelled.
    public func sleep(seconds: TimeInterval) async throws {
        guard seconds > 0 else { return }
        try await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
    }
}
