import Foundation
import ExperimentlyMock

/// The app pattern of CONTRACT.md section 8 as a reference integration over any driver client.
///
/// A display decision separate from the SDK cache: every refresh or identity change bumps a
/// revision and resets what is shown to the fallback; fetches are serialized; a completion for an
/// older revision is discarded and its cache write undone (the app clears the SDK cache, marker
/// `undo`, before its next fetch for the current identity, as the flag sample does). The experiment is assigned (which records the exposure on the
/// server) only when the view is displayed and the gating flag is on; business events carry
/// `layout_source` = `assignment` | `fallback`. Logout resets the identity to a new anonymous id,
/// clears the SDK cache and refetches. Every decision is written to the history as a marker, and
/// every SDK call sits between `call` and `returned` markers (which action, identity and revision
/// made it), so the named checks attribute each request to the call that sent it (`AppCalls`).
///
/// State lives behind an `NSLock` (`Locked`-style box); no lock is held across `await`.
final class ReferenceApp: @unchecked Sendable {
    // @unchecked Sendable: mutable state lives in `lock` (a HarnessLocked); the rest is `let`.
    struct State {
        var identity: String
        var anonymousCount = 1
        /// Every identity the app has had (its first, logins, anonymous ids), compared by
        /// Unicode scalars: a logout's new anonymous id is none of them (CONTRACT.md section 8,
        /// "a new anonymous device id"; an outside tester's app logged in as `anon-2` and its
        /// logout took `anon-2` again, so the named check failed every correct SDK).
        var used: Set<ExactKey> = []
        var revision = 0
        var flagOn: [Int: Bool] = [:]
        var shown: String?
        var source = "fallback"
        var lastFetch: Task<Void, Never>?
        /// Finishes when the latest logout is done: the next one waits for it (logouts run one
        /// after another).
        var lastLogout: AsyncStream<Never>?
        var reported: String?
        /// Cache clears the app made (logout, undo): a completion of a call begun before one may
        /// still have been written (its request may have started after the clear), so the app
        /// then asks the SDK's cache before undoing (`undoCacheWrite`).
        var clears = 0
        /// SDK calls made so far (the number of the next `call` marker).
        var calls = 0
        /// The SDK calls the app is inside now, by a number of their own (quiescence, `inFlight`).
        var inFlight: [Int: InFlightCall] = [:]
        /// SDK calls begun so far (the `inFlight` numbers, every call counted, marked or not).
        var begun = 0
        /// The mock's request count when the app's latest `clearCache` began (0: none yet).
        var clearedAt = 0
        /// Every `clearCache` (or `close`) the app began: the history's event count and the mock's
        /// request count then.
        var clearLog: [(ordinal: Int, seen: Int)] = []
        /// Every SDK call the app began, by its number, with the history's event count once it
        /// returned (`nil`: in flight).
        var callLog: [Int: (call: InFlightCall, end: Int?)] = [:]
    }

    /// An SDK call the app is inside: the operation and how many requests the mock had received
    /// when it began (its own request has a higher sequence number).
    struct InFlightCall: Sendable {
        /// The SDK operation (`evaluateFlag`, `getAssignment`, `trackWithStatus`, `clearCache`, ...).
        let operation: SDKOperation
        /// The mock's request count when the call began.
        let since: Int
        /// The history's event count when the call began: orders it against the runner's
        /// `cancel` steps (`ScenarioExecution.cancelled(after:before:)`).
        var startEvent = 0
        /// The recorder's ordinal when the call began: orders it against steps and clears.
        var ordinal = 0
    }

    let settings: AppSettings
    let client: any DriverClient
    let recorder: Recorder
    private let lock: HarnessLocked<State>
    /// Interleaved runs: the executor the app's fetch tasks prefer (an `any TaskExecutor`), like the SDK's.
    let taskExecutor: (any Sendable)?

    /// Markers carry `"app": client` (an app on a client other than the `app` section's), so the
    /// history says which app decided; the `app` section's own app keeps its markers as they were.
    let marksClient: Bool

    /// How many requests the mock has received (`BackendPort.requestCount`), read when an SDK
    /// call begins; `{ 0 }` when the app runs without a mock to ask.
    let requestCount: @Sendable () -> Int

    init(settings: AppSettings, client: any DriverClient, recorder: Recorder, taskExecutor: (any Sendable)? = nil, marksClient: Bool = false,
         requestCount: @escaping @Sendable () -> Int = { 0 }) {
        self.requestCount = requestCount
        self.taskExecutor = taskExecutor
        self.marksClient = marksClient
        self.settings = settings
        self.client = client
        self.recorder = recorder
        var state = State(identity: settings.initialUser)
        state.used.insert(ExactKey(settings.initialUser))
        self.lock = HarnessLocked(state)
    }

    var identity: String { lock.withLock { $0.identity } }
    var shown: String? { lock.withLock { $0.shown } }
    var source: String { lock.withLock { $0.source } }
    /// The variant the state reporter marks active (`nil`: none), set when the view appears with
    /// a variant and updated when it changes (CONTRACT.md section 8, seed sample 004).
    var reported: String? { lock.withLock { $0.reported } }
    /// The SDK calls the app is inside now (every call it makes, with or without `call` markers),
    /// in the order they began: what quiescence needs to see parked at the mock.
    var callsInFlight: [InFlightCall] {
        lock.withLock { s in s.inFlight.sorted { $0.key < $1.key }.map(\.value) }
    }

    /// The mock's request count when the app's latest `clearCache` began (0: none yet): no
    /// request received before it can be joined by a lookup the app begins later (CONTRACT.md
    /// section 5.1: a clear detaches the requests in flight).
    var clearedAt: Int { lock.withLock { $0.clearedAt } }

    /// Every `clearCache` (or `close`) the app began, in order: the history's event count and the
    /// mock's request count when it began.
    var clearLog: [(ordinal: Int, seen: Int)] { lock.withLock { $0.clearLog } }

    /// The SDK calls the app had begun and not yet returned at history event count `event`.
    func calls(inFlightAt event: Int) -> [InFlightCall] {
        lock.withLock { s in s.callLog.values.filter { $0.call.startEvent < event && ($0.end ?? Int.max) > event }.map(\.call) }
    }

    /// Makes one SDK call, listed in `callsInFlight` from before it starts until it returns.
    private func sdk(_ op: SDKOperation) async -> OperationOutcome {
        let number = lock.withLock { s -> Int in
            s.begun += 1
            let since = requestCount()
            let call = InFlightCall(operation: op, since: since, startEvent: recorder.eventCount, ordinal: recorder.ordinal())
            s.inFlight[s.begun] = call
            s.callLog[s.begun] = (call, nil)
            if op == .clearCache || op == .close {
                s.clearedAt = since
                s.clearLog.append((ordinal: call.ordinal, seen: since))
            }
            return s.begun
        }
        // Marked as the app's (out-of-process quiescence tells its calls from the runner's).
        let outcome = await DriverCallOrigin.$app.withValue(true) { await client.perform(op) }
        let end = recorder.eventCount
        lock.withLock { s in
            _ = s.inFlight.removeValue(forKey: number)
            s.callLog[number]?.end = end
        }
        return outcome
    }

    private func mark(_ name: String, _ detail: [String: JSONValue]) {
        var detail = detail
        if marksClient { detail["app"] = .string(settings.client) }
        recorder.record(.marker, client: settings.client, name: name, detail: .object(detail))
    }

    /// Runs one action; the returned JSON is the app's state afterwards.
    func perform(_ action: AppAction) async -> OperationOutcome {
        switch action {
        case .login(let user):
            let rev = lock.withLock { s -> Int in
                s.identity = user; s.used.insert(ExactKey(user)); s.revision += 1; s.shown = nil; s.source = "fallback"; return s.revision
            }
            mark("login", ["identity": .string(user), "revision": .number(Double(rev))])
            await refresh()
        case .logout:
            // Logouts of one app run one after another (`times` copies, or an async logout and
            // another): each switches identity, clears the cache and refetches before the next
            // begins, so a logout never retires the identity an earlier one is still fetching for.
            // It runs in the action's own task (on the runner's counting executor, so quiescence
            // sees it), after the previous logout's `done` stream finished.
            let (done, finish) = AsyncStream<Never>.makeStream()
            let previous = lock.withLock { s -> AsyncStream<Never>? in
                defer { s.lastLogout = done }
                return s.lastLogout
            }
            if let previous { for await _ in previous {} }
            await logOut()
            finish.finish()
        case .refresh:
            await refresh()
        case .display:
            await display()
        case .event(let name):
            let (identity, shown, source, rev) = lock.withLock { s in (s.identity, s.shown, s.source, s.revision) }
            var properties: [String: JSONValue] = ["layout_source": .string(source)]
            if let shown { properties["variant"] = .string(shown) }
            let event = EventSpec(userId: identity, eventName: name,
                                  experimentKey: source == "assignment" ? settings.experiment : nil,
                                  properties: .object(properties))
            // The properties go in the marker, so `fan_out` can hold each entry of the event to them.
            mark("event", ["name": .string(name), "identity": .string(identity), "layout_source": .string(source),
                           "revision": .number(Double(rev)), "properties": .object(properties)])
            _ = await call(.trackWithStatus(event), action: "event", identity: identity, revision: rev)
        case .reportState:
            let (shown, source) = lock.withLock { s in (s.shown, s.source) }
            let active = source == "assignment" ? shown : nil
            lock.withLock { $0.reported = active }
            mark("state", ["experiment": .string(settings.experiment), "variant": active.map(JSONValue.string) ?? .null])
        }
        return .value(stateJSON)
    }

    /// One logout: a new anonymous id, a cleared SDK cache, a refetch (CONTRACT.md section 8).
    private func logOut() async {
        let (old, new, rev) = lock.withLock { s -> (String, String, Int) in
            let old = s.identity
            repeat { s.anonymousCount += 1 } while s.used.contains(ExactKey("anon-\(s.anonymousCount)"))
            s.identity = "anon-\(s.anonymousCount)"
            s.used.insert(ExactKey(s.identity))
            s.revision += 1; s.shown = nil; s.source = "fallback"; s.reported = nil
            s.clears += 1
            return (old, s.identity, s.revision)
        }
        mark("logout", ["from": .string(old), "identity": .string(new), "revision": .number(Double(rev))])
        _ = await sdk(.clearCache)
        await refresh()
    }

    /// One SDK call of the action `action` at app revision `revision`, made as `identity`, between
    /// a `call` marker (`{"call": N, "action", "sdk", "identity", "revision"}`) and a `returned`
    /// marker (`{"call": N}`): the named checks attribute each request of the app's client to the
    /// call in flight that sent it, not to where it falls among the app's other markers (an async
    /// display's request can reach the mock after a concurrent logout's marker; `AppCalls`); the
    /// `returned` marker also carries the call's `outcome` (`{"value"}` or `{"error", "status"?, "code"?}`).
    private func call(_ op: SDKOperation, action: String, identity: String, revision: Int) async -> (OperationOutcome, call: Int) {
        let id = lock.withLock { s -> Int in s.calls += 1; return s.calls }
        mark("call", ["call": .number(Double(id)), "action": .string(action), "sdk": .string(op.name),
                      "identity": .string(identity), "revision": .number(Double(revision))])
        let outcome = await sdk(op)
        // The outcome without its message (which may name a port): the named checks judge the
        // app's lookups like any other (`no_fallback_on_404`, `offline_fallback`).
        var result: [String: JSONValue] = [:]
        switch outcome {
        case .value(let v): result["value"] = v
        case .error(let kind, let status, let code, _):
            result["error"] = .string(kind)
            if let status { result["status"] = .number(Double(status)) }
            if let code { result["code"] = .number(Double(code)) }
        }
        mark("returned", ["call": .number(Double(id)), "outcome": .object(result)])
        return (outcome, id)
    }

    /// A task of the app's own, on the harness's executor in interleaved runs (like the SDK's).
    private func spawn(_ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let executor = taskExecutor as? any TaskExecutor {
            return Task(executorPreference: executor, operation: body)
        }
        return Task(operation: body)
    }

    var stateJSON: JSONValue {
        lock.withLock { s in
            .object(["identity": .string(s.identity), "shown": s.shown.map(JSONValue.string) ?? .string("fallback"),
                     "source": .string(s.source), "revision": .number(Double(s.revision))])
        }
    }

    /// Bumps the revision, shows the fallback, and fetches the gating flag after any fetch in
    /// progress (serialized); a completion for an older revision is discarded.
    private func refresh() async {
        // The fetch starts only once its `refresh` marker is written (`opened`): the new task is
        // installed as `lastFetch` in the same locked step that reads the previous one, so
        // concurrent refreshes (`times`) still fetch one after another.
        let (opened, open) = AsyncStream<Never>.makeStream()
        let (rev, identity, fetch) = lock.withLock { s -> (Int, String, Task<Void, Never>) in
            s.revision += 1; s.shown = nil; s.source = "fallback"
            let task = makeFetch(revision: s.revision, identity: s.identity, previous: s.lastFetch, opened: opened)
            s.lastFetch = task
            return (s.revision, s.identity, task)
        }
        mark("refresh", ["identity": .string(identity), "revision": .number(Double(rev))])
        open.finish()
        await fetch.value
    }

    /// The serialized fetch of the gating flag for `revision`: waits for `opened` to finish and
    /// for the `previous` fetch, then evaluates the flag; a completion for an older revision is
    /// discarded (and its cache write undone).
    private func makeFetch(revision rev: Int, identity: String, previous: Task<Void, Never>?, opened: AsyncStream<Never>) -> Task<Void, Never> {
        let body: @Sendable () async -> Void = { [self] in
            for await _ in opened {}
            await previous?.value
            // A fetch superseded while it waited its turn (another refresh, a login or logout
            // since) is not sent: it would request the flag for an identity that may be gone.
            guard lock.withLock({ $0.revision == rev }) else {
                mark("superseded", ["identity": .string(identity), "revision": .number(Double(rev))])
                return
            }
            let clears = lock.withLock { $0.clears }
            let (outcome, callID) = await call(.evaluateFlag(flag: settings.flag, user: UserSpec(id: identity)), action: "refresh", identity: identity, revision: rev)
            var on = false
            if case .value(let v) = outcome, v["enabled"] == .bool(true) { on = true }
            let current = lock.withLock { s -> Bool in
                guard s.revision == rev else { return false }
                s.flagOn[rev] = on
                return true
            }
            mark(current ? "fetched" : "discarded",
                 ["identity": .string(identity), "revision": .number(Double(rev)), "flag_on": .bool(on)])
            // The next serialized fetch starts only after this task: the stale value is gone first.
            if !current, case .value = outcome {
                await undoCacheWrite(identity: identity, revision: rev, clearsAtStart: clears, kind: "flag", key: settings.flag, call: callID)
            }
        }
        return spawn(body)
    }

    /// The view appears: assign (the exposure) only when the current revision's flag is on, and
    /// show a recognized variant; otherwise show the fallback.
    private func display() async {
        let (rev, identity, on) = lock.withLock { s in (s.revision, s.identity, s.flagOn[s.revision] ?? false) }
        mark("display", ["identity": .string(identity), "revision": .number(Double(rev)), "flag_on": .bool(on)])
        var variant: String?
        var fetched = false
        var callID = 0
        let clears = lock.withLock { $0.clears }
        if on {
            let (outcome, made) = await call(.getAssignment(experiment: settings.experiment, user: UserSpec(id: identity)), action: "display", identity: identity, revision: rev)
            callID = made
            if case .value(let v) = outcome {
                fetched = true
                if case .string(let name)? = v["variant_name"], settings.variants.containsExactly(name), v["assigned"] != .bool(false) {
                    variant = name
                }
            }
        }
        let (shownNow, decidedAt) = lock.withLock { s -> (Bool, Int) in
            guard s.revision == rev else { return (false, s.revision) }
            s.shown = variant
            s.source = variant == nil ? "fallback" : "assignment"
            if s.reported != nil || variant != nil { s.reported = variant }
            return (true, s.revision)
        }
        if shownNow {
            // `decided_at`: the app's revision when it decided to show (its own, or the check
            // `no_stale_after_logout` finds a completion shown for a revision no longer current).
            mark("shown", ["identity": .string(identity), "revision": .number(Double(rev)), "decided_at": .number(Double(decidedAt)),
                           "variant": variant.map(JSONValue.string) ?? .string("fallback"),
                           "layout_source": .string(variant == nil ? "fallback" : "assignment")])
        } else {
            mark("discarded", ["identity": .string(identity), "revision": .number(Double(rev)), "display": .bool(true)])
            if fetched {
                await undoCacheWrite(identity: identity, revision: rev, clearsAtStart: clears, kind: "experiment", key: settings.experiment, call: callID)
            }
        }
    }

    /// Undoes the cache write of a discarded completion (CONTRACT.md section 8): the SDK cached the
    /// answer for an older revision (another identity, after a login while the assignment was
    /// held), so the app clears the SDK cache; the history gets an `undo` marker, which the named
    /// checks treat as a clear of the app's client.
    ///
    /// When the app cleared the cache (logout, an earlier undo) after the call began, a request
    /// that started before that clear was never written (section 5.1); but the call may reach the
    /// SDK after the app's clear (an async display racing a logout), and then its request starts
    /// after it and the answer is written. So the app asks the SDK's cache (`kind` `flag` or
    /// `experiment`, `key`, for `identity`) and undoes what it finds; that `undo` marker carries
    /// `found` (kind), `key` and `call` (the discarded call), so `no_stale_write` can tell an
    /// SDK that wrote an answer to a request it received before the clear (defect 1), which the
    /// undo would otherwise hide.
    private func undoCacheWrite(identity: String, revision: Int, clearsAtStart: Int, kind: String, key: String, call: Int) async {
        let unchanged = lock.withLock { s -> Bool in
            guard s.clears == clearsAtStart else { return false }
            s.clears += 1
            return true
        }
        var detail: [String: JSONValue] = ["identity": .string(identity), "revision": .number(Double(revision))]
        if !unchanged {
            guard await cacheHolds(kind: kind, key: key, user: identity) else { return }
            lock.withLock { $0.clears += 1 }
            detail["found"] = .string(kind); detail["key"] = .string(key); detail["call"] = .number(Double(call))
        }
        mark("undo", detail)
        _ = await sdk(.clearCache)
    }

    /// Whether the SDK cache holds `user`'s entry for flag or experiment `key` (compared by Unicode
    /// scalars); `true` when the driver cannot say (an undo too many is harmless, a stale entry is not).
    private func cacheHolds(kind: String, key: String, user: String) async -> Bool {
        let outcome = await sdk(kind == "flag" ? .getEvaluatedFlags(user: user) : .getAssignments(user: user))
        guard case .value(let v) = outcome else { return true }
        let keys = kind == "flag" ? Checks.strings(v) : Checks.assignmentKeys(v)
        return keys.containsExactly(key)
    }
}
