import Foundation
import ExperimentlyMock

/// One entry of a scenario's history (Jepsen-style): an operation's invocation or completion, a
/// request the mock received or answered, or an app marker. Checks are functions over the list.
public struct HistoryEvent: Codable, Sendable, Equatable {
    /// The kinds of entries.
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// An operation started.
        case invoke
        /// An operation finished (`outcome` set).
        case complete
        /// The mock received a request (`request` is its sequence number).
        case request
        /// The mock gave its outcome for a request.
        case response
        /// Something the reference app or the runner did (`marker` names it).
        case marker
    }

    /// The position in the history (0-based).
    public var index: Int
    /// The step running when it happened (0-based; -1 before the first step).
    public var step: Int
    /// Virtual seconds since the scenario started.
    public var time: Double
    /// What happened.
    public var kind: Kind
    /// The client involved.
    public var client: String?
    /// The operation's label.
    public var label: String?
    /// The operation or marker name.
    public var name: String?
    /// The operation's arguments or the marker's details.
    public var detail: JSONValue?
    /// The operation's outcome (`complete`).
    public var outcome: JSONValue?
    /// The request (`request`, `response`).
    public var request: RequestRecord?
    /// The unrounded time in seconds (`time` is rounded to the millisecond for the history's lines
    /// and digest), for the checks' models of time: a cache entry stored at 0.0004 s with a TTL of
    /// 1 s is still fresh at 1.0003 s, which the rounded times (0.0 and 1.0) would call expired (a
    /// sixth outside tester: `fan_out` and `no_stale_write` failed correct SDKs at sub-millisecond
    /// TTL edges, and passed `fan-out-to-expired`). Not encoded (a decoded event has `nil`) and
    /// not compared; `exactTime` reads it.
    public var instant: Double? = nil

    /// `instant` to the microsecond when known, else `time`: the time the checks' models use.
    /// Scenario times are whole microseconds (the parser refuses finer ones), and the clock's
    /// `Date` is off by up to about 0.1 microsecond at today's dates, which the rounding undoes.
    /// When it was recorded on the harness's monotonic wall clock (seconds since boot; not
    /// encoded, not compared): how much real time passed between two events, for an SDK whose
    /// deadlines run on the wall clock (no `virtual_clock`). `nil` when not known.
    public var wallInstant: Double? = nil

    public var exactTime: Double { instant.map { ($0 * 1_000_000).rounded() / 1_000_000 } ?? time }

    enum CodingKeys: String, CodingKey { case index, step, time, kind, client, label, name, detail, outcome, request }

    /// Equal when every encoded field is (`instant` is not compared, as it is not encoded).
    public static func == (a: HistoryEvent, b: HistoryEvent) -> Bool {
        a.index == b.index && a.step == b.step && a.time == b.time && a.kind == b.kind && a.client == b.client && a.label == b.label
            && a.name == b.name && a.detail == b.detail && a.outcome == b.outcome && a.request == b.request
    }

    /// A one-line rendering for failure messages.
    public var line: String {
        // A JSON null prints like an absent value: a worker's record decodes `null` as absent, and
        // the line (and the digest over it) must not depend on which process recorded the event.
        func text(_ v: JSONValue?) -> String { v.flatMap { $0 == .null ? nil : "\($0)" } ?? "" }
        switch kind {
        case .invoke: return "[\(index)] t=\(time) invoke \(label ?? "") \(name ?? "") on \(client ?? "?") \(text(detail))"
        case .complete: return "[\(index)] t=\(time) complete \(label ?? "") \(name ?? "") -> \(text(outcome))"
        case .request: return "[\(index)] t=\(time) request \(request.map { $0.receivedSummary(parked: detail?["parked"]?.stringValue) } ?? "")"
        case .response: return "[\(index)] t=\(time) response \(request?.summary ?? "")"
        // A marker of an operation (a `cancel` step's) names it: `[4] t=0.0 cancel quitter` (a
        // fifty-ninth outside tester: the line read `cancel ` alone).
        case .marker: return "[\(index)] t=\(time) \(name ?? "marker")\(label.map { " \($0)" } ?? "") \(text(detail))"
        }
    }
}

/// Collects history events and wakes waiters whenever anything changes.
///
/// State lives behind an `NSLock`; waiters are resumed outside it.
final class Recorder: @unchecked Sendable {
    // @unchecked Sendable: `events`, `version`, `waiters`, `ticker` and `step` are guarded by `lock`.
    private let lock = NSLock()
    private var events: [HistoryEvent] = []
    private var ordinals = 0
    private var version: UInt64 = 0
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiter: UInt64 = 0
    private var ticker: DispatchSourceTimer?
    private(set) var step = -1
    private let clock: VirtualClock?
    private let start: Date
    /// The interleaving executor's hook (`nil` outside interleaved runs); guarded by `lock`.
    private var hook: (any WaitHook)?
    /// Some wait ran out of its real-time limit (guarded by `lock`): see `ranOutOfTime`.
    private var timedOut = false
    /// Some wait ran out of its limit without the run being shown stuck (guarded by `lock`): see
    /// `ranOutOfTimeUnproven`.
    private var timedOutUnproven = false
    /// Reads the run's progress counters when nothing can move without a step, else `nil` (see
    /// `setStuckProbe`); guarded by `lock`.
    private var stuckProbe: (@Sendable () -> [Int]?)?

    /// Whether any `wait(milliseconds:until:)` ended because its real-time limit (the scenario's
    /// step limit, possibly capped) passed, rather than because its condition held or the
    /// interleaving executor found the run stuck. A failure with this set may be the machine's
    /// load, not the SDK: the mutant matrix re-runs such a catch with the file's own limits.
    var ranOutOfTime: Bool { lock.withLock { timedOut } }

    /// Whether some wait ran out of its real-time limit while the run was not shown stuck: at the
    /// limit, the stuck probe (`setStuckProbe`) read no stamp, or a stamp different from the one
    /// it read at least `stuckWindow` earlier. A wait that ran out with the same stamp both times
    /// is a deadlock that more time cannot end: nothing could run without a step (no SDK job was
    /// queued or ran, every request in flight sat parked in the mock, the mock saw nothing new, no
    /// clock sleeper woke), so its failure is the SDK's, whatever the machine's load.
    var ranOutOfTimeUnproven: Bool { lock.withLock { timedOutUnproven } }

    /// Notes that a step ran out of its real-time limit outside `wait(milliseconds:until:)` (an
    /// advance's walk, an out-of-process adapter's clock acknowledgement): such a run was moving,
    /// never shown stuck, so its failure may be the machine's load (`ranOutOfTime` and
    /// `ranOutOfTimeUnproven` both become `true`). Before, an advance that ran out of a capped
    /// limit counted as a real catch in the mutant matrix, unconfirmed.
    func ranOutOfTimeWhileMoving() {
        lock.withLock {
            timedOut = true
            timedOutUnproven = true
        }
    }

    /// How long the stuck probe must read one stamp before a wait's limit for the run to count
    /// as stuck (two reads this far apart; the counters in a stamp only grow).
    static let stuckWindow: DispatchTimeInterval = .milliseconds(100)

    /// How far past its limit a wait may go on to complete a proof of being stuck that was under
    /// way at the limit (one stamp read, not yet for `stuckWindow`: a starved process).
    static let proofGrace: DispatchTimeInterval = .seconds(1)

    /// Installs the stuck probe: it returns the run's progress counters (SDK jobs run, requests
    /// seen, history events, clock wakeups, the parked requests) when nothing can move without a
    /// step, else `nil`. Without one, every wait that runs out of time is unproven.
    func setStuckProbe(_ probe: @escaping @Sendable () -> [Int]?) { lock.withLock { stuckProbe = probe } }

    init(clock: VirtualClock?) {
        self.clock = clock
        self.start = clock?.now() ?? Date()
    }

    func setStep(_ step: Int) { lock.withLock { self.step = step } }

    /// Tells `hook` about every wait and poke from now on (interleaved runs).
    func setHook(_ hook: any WaitHook) { lock.withLock { self.hook = hook } }

    /// Appends an event (its index, step and time are filled in) and wakes waiters.
    @discardableResult
    func record(_ kind: HistoryEvent.Kind, client: String? = nil, label: String? = nil, name: String? = nil,
                detail: JSONValue? = nil, outcome: JSONValue? = nil, request: RequestRecord? = nil) -> Int {
        let time = (clock?.now() ?? Date()).timeIntervalSince(start)
        let index: Int = lock.withLock {
            events.append(HistoryEvent(index: events.count, step: step, time: (time * 1000).rounded() / 1000, kind: kind,
                                       client: client, label: label, name: name, detail: detail, outcome: outcome, request: request,
                                       instant: time, wallInstant: Double(DispatchTime.now().uptimeNanoseconds) / 1e9))
            return events.count - 1
        }
        poke()
        return index
    }

    /// Wakes every waiter so it re-checks its condition.
    func poke() {
        let ready: [CheckedContinuation<Void, Never>] = lock.withLock {
            version &+= 1
            let w = Array(waiters.values)
            waiters.removeAll()
            return w
        }
        ready.forEach { $0.resume() }
        lock.withLock { hook }?.poked()
    }

    var snapshot: [HistoryEvent] { lock.withLock { events } }

    /// How many events are recorded.
    var eventCount: Int { lock.withLock { events.count } }

    /// Seconds since the scenario started, as the events' `time` counts them.
    var elapsed: Double { (clock?.now() ?? Date()).timeIntervalSince(start) }

    /// A number greater than every one handed out before (guarded by `lock`): orders the starts
    /// of steps, SDK calls and clears exactly, where two may fall between the same two history
    /// events (an app call joined to a request records none, so a clear step right after it had
    /// the same event count and was taken as before it).
    func ordinal() -> Int { lock.withLock { ordinals += 1; return ordinals } }

    /// Replaces the events (used to enrich request entries at the end).
    func replace(_ transform: (inout [HistoryEvent]) -> Void) { lock.withLock { transform(&events) } }

    /// Waits until `condition` is true or `milliseconds` of real time pass.
    ///
    /// - Returns: `true` when the condition held, `false` on timeout.
    func wait(milliseconds: Int, until condition: @escaping @Sendable () -> Bool) async -> Bool {
        let deadline = DispatchTime.now() + .milliseconds(milliseconds)
        let hook = lock.withLock { self.hook }
        guard let hook else { return await wait(deadline: deadline, until: condition) }
        hook.waitBegins(condition)
        let met = await wait(deadline: deadline, until: { condition() }, stuck: { hook.stuck })
        await hook.waitEnds()
        return met
    }

    private func wait(deadline: DispatchTime, until condition: @Sendable () -> Bool, stuck: @Sendable () -> Bool = { false }) async -> Bool {
        let probe = lock.withLock { stuckProbe }
        // The first read of the stamp the probe reads now, near the deadline (see `ranOutOfTimeUnproven`).
        var held: (stamp: [Int], since: DispatchTime)?
        let probeFrom = deadline - Self.stuckWindow - .milliseconds(60)
        /// The stamp whose proof goes on past the limit, once the limit passed.
        var extending: [Int]?
        while true {
            let seen = lock.withLock { version }
            if condition() { return true }
            // Interleaved runs: nothing but the runner can change anything, so this is a hang.
            if stuck() { return false }
            let now = DispatchTime.now()
            if let probe, now >= probeFrom {
                let stamp = probe()
                if stamp == nil || stamp != held?.stamp { held = stamp.map { ($0, now) } }
            }
            if now >= deadline {
                let proven = held.map { now >= $0.since + Self.stuckWindow } ?? false
                // A proof under way is completed: at the limit nothing could move (the probe read
                // a stamp) but that stamp was first read less than `stuckWindow` ago (a starved
                // process probed late). The wait goes on while the stamp stays the same, up to
                // `proofGrace` past the limit; a changed stamp or no stamp ends it unproven. Before,
                // a starved run of a real deadlock was called unproven (a flaky test under load).
                if !proven, let h = held, extending == nil || extending == h.stamp, now < deadline + Self.proofGrace {
                    extending = h.stamp
                } else {
                    lock.withLock {
                        timedOut = true
                        if !proven { timedOutUnproven = true }
                    }
                    return false
                }
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let registered: Bool = lock.withLock {
                    guard version == seen else { return false }
                    nextWaiter += 1
                    waiters[nextWaiter] = continuation
                    if ticker == nil { ticker = startTicker() }
                    return true
                }
                if !registered { continuation.resume() }
            }
        }
    }

    /// Every change the conditions read pokes the recorder. As a safety net, while anyone waits,
    /// a timer also pokes every 20 ms, so conditions are re-checked and deadlines noticed: a hang
    /// guard and a re-check of an exact condition, never an ordering device. Called under `lock`.
    private func startTicker() -> DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: .global())
        timer.schedule(deadline: .now() + .milliseconds(20), repeating: .milliseconds(20))
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            let idle = self.lock.withLock { () -> Bool in
                guard self.waiters.isEmpty else { return false }
                self.ticker?.cancel()
                self.ticker = nil
                return true
            }
            if !idle { self.poke() }
        }
        timer.resume()
        return timer
    }

    deinit { ticker?.cancel() }
}

extension RequestRecord {
    /// The request as the mock received it, for a history `request` line: no answer (that is the
    /// `response` line's), the fault applied, and how it was parked at receipt, e.g.
    /// `#1 [main] POST /api/v1/tracking/assign {...} (fault held: hold at receipt)`.
    func receivedSummary(parked: String?) -> String {
        var s = "#\(seq) \(client.map { "[\($0)] " } ?? "")\(method) \(target)"
        if let body { s += " \(body)" }
        switch (fault, parked) {
        case (let f?, let how?): s += " (fault \(f): \(how) at receipt)"
        case (let f?, nil): s += " (fault \(f))"
        case (nil, let how?): s += " (\(how) at receipt)"
        case (nil, nil): break
        }
        return s
    }
}

extension ScenarioExecution {
    /// The history with the answers a `release` or `advance` step freed moved to just after that
    /// step's marker: every `response` event, up to the runner's next own event, of a request
    /// received before the marker (a held request the release answered, a delayed one the advance
    /// ended, one the advance timed out).
    ///
    /// The mock decides all of those answers at that instant, in a canonical order by content
    /// (MockBackend `release`, delays ended together), before the SDK sees any; each `response`
    /// is recorded later, by the request's own task, so a request the SDK sends in reaction to
    /// one answer could land before or after another answer's record: thread timing. Which
    /// events a step caused is not. (Attack finding 6; Documentation/ScenarioFormat.md, History.)
    static func freedAnswersFirst(_ history: [HistoryEvent]) -> [HistoryEvent] {
        var out: [HistoryEvent] = []
        out.reserveCapacity(history.count)
        var i = 0
        while i < history.count {
            let event = history[i]
            out.append(event)
            i += 1
            guard event.kind == .marker, event.client == nil, event.name == "release" || event.name == "advance" else { continue }
            // The step's segment: up to the runner's next own event.
            var end = i
            while end < history.count, !isRunnerEvent(history[end]) { end += 1 }
            let before = Set(history[..<(i - 1)].compactMap { $0.kind == .request ? $0.request?.seq : nil })
            let segment = history[i..<end]
            let freed = segment.filter { $0.kind == .response && $0.request.map { before.contains($0.seq) } == true }
            out += freed + segment.filter { e in !(e.kind == .response && e.request.map { before.contains($0.seq) } == true) }
            i = end
        }
        return out
    }

    /// An event the runner records itself (an `invoke`, or a marker with no client).
    static func isRunnerEvent(_ event: HistoryEvent) -> Bool {
        event.kind == .invoke || (event.kind == .marker && event.client == nil)
    }
}
