import Foundation
import Experimently
import ExperimentlyMock

/// The one clock a scenario's SDK clients, mock backend and runner share: time moves only when
/// the runner advances it (`advance(by:)`), so TTLs, deadlines, delays and Retry-After windows
/// run without sleeping.
///
/// Sleepers wake in deadline order (ties in the order they went to sleep). State lives behind an
/// `NSLock`; continuations are resumed outside it.
public final class VirtualClock: ExperimentationClock, MockClock, @unchecked Sendable {
    // @unchecked Sendable: `now`, `sleepers` and `nextID` are only touched inside `lock`.
    private let lock = NSLock()
    private var current: Date
    /// The start, in seconds since the reference date: the clock keeps every instant on the
    /// microsecond grid from here (``onGrid(_:)``).
    private let origin: TimeInterval
    private var sleepers: [UInt64: Sleeper] = [:]
    /// One task sleeping on the clock.
    private struct Sleeper {
        var deadline: Date
        var continuation: CheckedContinuation<Void, Error>?
        /// An SDK sleeper whose task prefers no task executor (``unseenWakeups``).
        var unseen: Bool
        /// The mock's (through ``mockView``).
        var byMock: Bool
    }
    /// The latest instant at which the mock's sleepers were woken (``wakeMock()``, or an
    /// ``advance(by:)`` that wakes everyone): a mock sleeper that registers later with a deadline
    /// after it still waits for the next such wake, even when the clock has passed its deadline
    /// (see ``sleep(until:byMock:)``).
    private var mockWokenThrough: Date
    private var cancelledEarly: Set<UInt64> = []
    private var nextID: UInt64 = 0
    private var woken = 0
    private var wokenUnseen = 0
    private let onChange: (@Sendable () -> Void)?

    /// Creates a clock reading `start` (default 2023-11-14T22:13:20Z, 1_700_000_000 s after 1970).
    ///
    /// - Parameter onChange: called (outside the lock) whenever a sleeper is added, woken or
    ///   cancelled, so a runner can track quiescence.
    public init(start: Date = Date(timeIntervalSince1970: 1_700_000_000), onChange: (@Sendable () -> Void)? = nil) {
        self.current = start
        self.mockWokenThrough = start
        self.origin = start.timeIntervalSinceReferenceDate
        self.onChange = onChange
    }

    /// The current virtual time.
    public func now() -> Date { lock.withLock { current } }

    /// How far the clock may run past its start, in seconds: 80 years (2,524,608,000 s).
    ///
    /// Within it a `Date` (seconds since 2001) and seconds since 1970 as a double, the form an
    /// out-of-process adapter keeps, both hold every microsecond from the default start (their
    /// spacing stays under half a microsecond before 2106): past it the microsecond grid no longer
    /// holds, and an advance of 2 us could pass a 3 us TTL (a thirty-sixth outside tester, H1).
    public static let maximumElapsedSeconds: TimeInterval = 2_524_608_000

    /// Seconds from the clock's start to `date`.
    public func elapsed(at date: Date) -> TimeInterval { date.timeIntervalSinceReferenceDate - origin }

    /// `date` on the clock's microsecond grid (the nearest whole microsecond from the start), the
    /// one `Date` for each such instant. The clock moves and sleepers wake on it, so an instant
    /// reached in two advances is the instant reached in one, and a deadline computed as
    /// `now + timeout` is due exactly there: before, `Date` arithmetic drifted (0.3 s then 0.4 s
    /// fell 0.1 us short of 0.7 s, and a correct SDK's deadline due then never fired: a
    /// thirty-fifth outside tester, F9). Scenario times are whole microseconds (ScenarioFormat.md).
    public func onGrid(_ date: Date) -> Date {
        let micros = ((date.timeIntervalSinceReferenceDate - origin) * 1e6).rounded()
        return Date(timeIntervalSinceReferenceDate: origin + micros / 1e6)
    }

    /// The number of tasks sleeping on this clock.
    public var sleeperCount: Int { lock.withLock { sleepers.count } }

    /// How many sleepers `advance` has woken so far: a woken timer (an SDK deadline, a retry
    /// back-off) may still be acting on the SDK, which the runner cannot see.
    public var wakeups: Int { lock.withLock { woken } }

    /// How many of those were SDK sleepers whose task prefers no task executor: what such a
    /// task does once woken runs where the runner cannot see it (an SDK task that prefers the
    /// runner's executor is seen, as the executor is busy until it suspends again; the mock's
    /// sleepers, through ``mockView``, are seen in the requests they park). In process, an
    /// operation is judged inert only while this count has not moved since it started.
    public var unseenWakeups: Int { lock.withLock { wokenUnseen } }

    /// This clock as the mock backend's clock: the same time and sleepers, its sleepers marked as
    /// the mock's (a delay or an in-process timeout), which ``unseenWakeups`` never counts.
    public var mockView: any MockClock { MockView(clock: self) }

    private struct MockView: MockClock {
        let clock: VirtualClock
        func now() -> Date { clock.now() }
        func sleep(seconds: TimeInterval) async throws { try await clock.sleep(until: clock.now().addingTimeInterval(seconds), byMock: true) }
        func sleep(until deadline: Date) async throws { try await clock.sleep(until: deadline, byMock: true) }
    }

    /// The earliest pending deadline, or `nil` when nobody sleeps.
    public var nextDeadline: Date? { lock.withLock { sleepers.values.map(\.deadline).min() } }

    /// Suspends until the clock has been advanced by `seconds` (zero or less returns at once).
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    public func sleep(seconds: TimeInterval) async throws {
        try await sleep(until: now().addingTimeInterval(seconds))
    }

    /// Suspends until the clock reads `deadline` or later (returns at once when it already does).
    /// The mock fixes a request's deadline before it reports it parked, so the runner may advance
    /// the clock at once without stranding the sleeper.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: Date) async throws {
        try await sleep(until: deadline, byMock: false)
    }

    /// ``sleep(until:)``, the sleeper marked as the mock's (`byMock`) or an SDK's.
    ///
    /// An SDK sleeper whose deadline has come returns at once. A mock sleeper returns at once
    /// only when the mock was already woken at or after its deadline; else it waits for the next
    /// ``wakeMock()``: the runner wakes the SDK's deadlines at an instant before the mock's
    /// answers, and a mock task that registered its delay only after the clock had reached its
    /// end answered at once, racing the SDK's deadline at the same instant (1 run in 100 of a
    /// tie returned the answer instead of the timeout: a fortieth-session flake).
    func sleep(until deadline: Date, byMock: Bool) async throws {
        try Task.checkCancellation()
        let deadline = onGrid(deadline)
        let unseen = !byMock && !Self.currentTaskPrefersAnExecutor()
        let id: UInt64? = lock.withLock {
            guard deadline > current || (byMock && deadline > mockWokenThrough) else { return nil }
            nextID += 1
            sleepers[nextID] = Sleeper(deadline: deadline, continuation: nil, unseen: unseen, byMock: byMock)
            return nextID
        }
        guard let id else { return }
        onChange?()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                let action: Result<Void, Error>? = lock.withLock {
                    if cancelledEarly.remove(id) != nil { return .failure(CancellationError()) }
                    guard sleepers[id] != nil else { return .success(()) }
                    sleepers[id]?.continuation = continuation
                    return nil
                }
                if let action { continuation.resume(with: action) }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Void, Error>?? = lock.withLock {
                guard let entry = sleepers.removeValue(forKey: id) else { return .none }
                if entry.continuation == nil { cancelledEarly.insert(id) }
                return .some(entry.continuation)
            }
            if case .some(let c) = continuation {
                c?.resume(throwing: CancellationError())
                onChange?()
            }
        }
    }

    /// Moves time forward by `seconds` and wakes every sleeper whose deadline has come, in order
    /// (all at once: what they do then runs concurrently; the runner moves one instant at a time
    /// with ``nextInstant(toward:)``).
    public func advance(by seconds: TimeInterval) {
        wake(moving: now().addingTimeInterval(max(0, seconds)), wakesMock: true) { _ in true }
    }

    /// The earliest deadline of a sleeper due by `target` (the next instant something wakes on
    /// the way there), or `nil`. The runner moves one instant at a time, each settled before the
    /// next (``advanceWakingSDK(to:)``, then ``wakeMock()``): before, one `advance` woke every
    /// sleeper due at once, so a mock delay of 2 s and an SDK deadline of 10 s woken by an
    /// advance of 10 s raced, and the request timed out in most runs although its answer was
    /// due 8 s earlier.
    public func nextInstant(toward target: Date) -> Date? {
        let target = onGrid(target)
        return lock.withLock { sleepers.values.map(\.deadline).filter { $0 <= target }.min() }
    }

    /// How many of the mock's sleepers are due (their deadline has come) but not woken yet: only
    /// inside an `advance`, between the SDK's wakeups at an instant and the mock's. Their
    /// requests still count as parked then.
    public var mockSleepersDue: Int {
        lock.withLock { sleepers.values.filter { $0.byMock && $0.deadline <= current }.count }
    }

    /// Moves the time to `time` (never back) and wakes the SDK's sleepers due by then (a
    /// client's deadline comes before an answer the mock has due at the same instant).
    public func advanceWakingSDK(to time: Date) {
        wake(moving: time, wakesMock: false) { !$0.byMock }
    }

    /// Wakes the mock's sleepers due by now (a delay's or an in-process timeout's end).
    ///
    /// - Returns: how many woke.
    @discardableResult
    public func wakeMock() -> Int {
        wake(moving: now(), wakesMock: true) { $0.byMock }
    }

    /// Moves the time to `time` (never back) and wakes the due sleepers `which` picks, in
    /// deadline order (ties in the order they went to sleep).
    @discardableResult
    private func wake(moving time: Date, wakesMock: Bool, _ which: (Sleeper) -> Bool) -> Int {
        let (due, count): ([CheckedContinuation<Void, Error>], Int) = lock.withLock {
            current = max(current, onGrid(time))
            if wakesMock { mockWokenThrough = current }
            let ready = sleepers.filter { $0.value.deadline <= current && which($0.value) }.sorted {
                ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key)
            }
            for (id, _) in ready { sleepers[id] = nil }
            woken += ready.count
            wokenUnseen += ready.filter(\.value.unseen).count
            // A sleeper registered but not yet suspended finds its entry gone and returns at once.
            return (ready.compactMap(\.value.continuation), ready.count)
        }
        for c in due { c.resume() }
        if !due.isEmpty { onChange?() }
        // Every sleeper woken, suspended yet or not: one registered but not yet suspended was not
        // counted, and a test that woke it read 0 (failed once in a CI rehearsal).
        return count
    }

    /// Whether the calling task prefers a task executor (SE-0417): in process, only the runner's.
    static func currentTaskPrefersAnExecutor() -> Bool {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *) {
            return withUnsafeCurrentTask { $0?.unownedTaskExecutor != nil }
        }
        return false
    }
}
