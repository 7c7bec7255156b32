import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The public interface of the Experimently client, for dependency injection and test doubles
/// (CONTRACT.md section 3).
public protocol ExperimentationClientProtocol {
    /// Evaluates a flag for a user (the server decides).
    ///
    /// - Throws: `ExperimentationError` (CONTRACT.md section 4): `flagNotFound` on 404, else the
    ///   failure when no persisted value stands in for it.
    func evaluateFlag(_ flagKey: String, user: User) async throws -> EvalResult
    /// Returns the user's sticky assignment to an experiment.
    ///
    /// - Throws: `ExperimentationError` (CONTRACT.md section 4): `experimentNotFound` on 404, else
    ///   the failure when no persisted value stands in for it.
    func getAssignment(_ experimentKey: String, user: User) async throws -> Assignment
    /// Records an event. Never throws; `throws` is kept for source compatibility.
    func track(_ event: TrackEvent) async throws
    /// Records several events in batches of at most 100 (CONTRACT.md section 4); `false` when a
    /// request failed or a batch reported `failure_count > 0` (section 5.5).
    @discardableResult
    func trackBatch(_ events: [TrackEvent]) async -> Bool
    /// Deprecated no-op: there is nothing to refresh.
    @available(*, deprecated, message: "Flags are evaluated by the server per user; refreshFlags() is a no-op.")
    func refreshFlags() async throws
    /// Clears the memory caches and cancels in-flight requests (tracking calls in flight report
    /// failure); nothing answered later is written (CONTRACT.md sections 5.1 and 5.3).
    func close()
}

public extension ExperimentationClientProtocol {
    /// Sends each event through `track(_:)` and reports `true`, whatever each delivery did (a
    /// conformer that can tell should implement its own: ``ExperimentationClient`` does).
    @discardableResult
    func trackBatch(_ events: [TrackEvent]) async -> Bool {
        for event in events { try? await track(event) }
        return true
    }

    /// Default: does nothing.
    func refreshFlags() async throws {}
}

/// The Experimently client: server-side flag evaluation and sticky experiment assignment with a
/// per-user TTL cache, single-flight requests, an offline fallback, and event tracking with fan-out.
///
/// Behaviour is CONTRACT.md sections 1, 3 and 4, with the six upstream defects of section 5 fixed:
/// a response that started before `clearCache()`, `clearOfflineCache()` or `close()` is never
/// written; finishing an old request never unregisters a newer one; cancelling every waiter of a
/// shared request cancels its network task; `assigned:false` answers are never fanned out to; a
/// batch with `failure_count > 0` reports `false`; and the client enforces its own `timeout`.
///
/// Thread safety: all mutable state is one `State` value behind a `Locked` (an `NSLock`); the lock
/// is never held across a suspension point.
public final class ExperimentationClient: ExperimentationClientProtocol, Sendable {
    /// Maximum events in one `POST /api/v1/tracking/batch` request (CONTRACT.md section 1: at most 100).
    public static let batchLimit = 100

    private struct State {
        var flags: UserKeyCache<EvalResult>
        var assignments: UserKeyCache<Assignment>
        var flagFlights: [CacheKey: Flight<EvalResult>] = [:]
        var assignmentFlights: [CacheKey: Flight<Assignment>] = [:]
        /// Bumped by `clearCache()`, `clearOfflineCache()` and `close()`.
        var epoch: UInt64 = 0
        var nextWaiter: UInt64 = 0
        /// Tracking requests in flight, cancelled by `close()`.
        var tracking: [UInt64: Task<(status: Int, body: Data)?, Never>] = [:]
    }

    private let config: SdkConfig
    private let http: HTTPTransport
    private let clock: any ExperimentationClock
    /// The store the offline fallback reads and writes: `nil` when the fallback is off.
    private let offlineStore: OfflineStore?
    /// The store given at init, fallback on or off: what `clearOfflineCache()` clears.
    private let persistentStore: OfflineStore?
    private let state: Locked<State>
    /// The task executor every task the client creates prefers (`nil`: the global executor).
    private let tasks: SDKTaskSpawner

    /// Creates a client on the wall clock, with upstream's parameters (CONTRACT.md section 3).
    ///
    /// - Parameters:
    ///   - config: base URL, API key, timeout, cache settings.
    ///   - session: the `URLSession` for every request (inject one with a custom `URLProtocol` in tests).
    ///   - offlineStore: where successes are persisted for the offline fallback when
    ///     `config.enableOfflineFallback` is on; `nil` persists nothing (upstream reads `nil` as the
    ///     default store). `clearOfflineCache()` clears it even when the fallback is off.
    public convenience init(config: SdkConfig, session: URLSession = .shared, offlineStore: OfflineStore? = OfflineStore()) {
        self.init(config: config, session: session, offlineStore: offlineStore, clock: SystemClock())
    }

    /// Creates a client on `clock`.
    ///
    /// A separate initializer, not a default of the one above, so that the unapplied reference
    /// `ExperimentationClient.init(config:session:offlineStore:)` written against upstream still
    /// names one.
    ///
    /// - Parameters:
    ///   - config, session, offlineStore: as ``init(config:session:offlineStore:)``.
    ///   - clock: the time source for cache TTLs (seconds) and request deadlines (CONTRACT.md
    ///     sections 4 and 5.6).
    public init(config: SdkConfig, session: URLSession = .shared, offlineStore: OfflineStore? = OfflineStore(),
                clock: any ExperimentationClock) {
        self.config = config
        self.tasks = SDKTaskSpawner(executor: nil)
        self.http = HTTPTransport(config: config, session: session, clock: clock)
        self.clock = clock
        self.persistentStore = offlineStore
        self.offlineStore = config.enableOfflineFallback ? offlineStore : nil
        self.state = Locked(State(
            flags: UserKeyCache(ttl: config.cacheTTL, countLimit: config.cacheSize),
            assignments: UserKeyCache(ttl: config.cacheTTL, countLimit: config.cacheSize)))
    }

    /// Creates a client whose own tasks (the shared request of single flight, the request
    /// deadline) prefer `taskExecutor` (SE-0417 `Task(executorPreference:)`), like the clock a seam
    /// for tests: a test harness runs them on an executor it controls to choose their interleaving.
    ///
    /// - Parameters:
    ///   - config, session, offlineStore: as ``init(config:session:offlineStore:)``.
    ///   - clock: as ``init(config:session:offlineStore:clock:)``.
    ///   - taskExecutor: the executor every task the client creates prefers; `nil` is the global
    ///     executor (the behaviour of the other initializer).
    @available(macOS 15, iOS 18, tvOS 18, watchOS 11, *)
    public init(config: SdkConfig, session: URLSession = .shared, offlineStore: OfflineStore? = OfflineStore(),
                clock: any ExperimentationClock = SystemClock(), taskExecutor: (any TaskExecutor)?) {
        self.config = config
        self.tasks = SDKTaskSpawner(executor: taskExecutor)
        self.http = HTTPTransport(config: config, session: session, clock: clock, tasks: tasks)
        self.clock = clock
        self.persistentStore = offlineStore
        self.offlineStore = config.enableOfflineFallback ? offlineStore : nil
        self.state = Locked(State(
            flags: UserKeyCache(ttl: config.cacheTTL, countLimit: config.cacheSize),
            assignments: UserKeyCache(ttl: config.cacheTTL, countLimit: config.cacheSize)))
    }

    /// Creates a client with the default configuration for `baseURL` and `apiKey`.
    public convenience init(baseURL: String, apiKey: String) {
        self.init(config: SdkConfig(baseURL: baseURL, apiKey: apiKey))
    }

    // MARK: Flags

    /// Evaluates `flagKey` for `user` with `GET /api/v1/feature-flags/evaluate/{flagKey}?user_id=`.
    ///
    /// A cached answer younger than `cacheTTL` is returned without a request; concurrent calls
    /// for the same (user, key) share one request.
    ///
    /// - Throws: `.flagNotFound` on 404 (and the persisted entry is deleted); otherwise, when no
    ///   persisted value exists for this user and key: `.networkError` (transport, deadline),
    ///   `.serverError(status, body)`, `.decodingError`, `.invalidConfig`; `.cancelled` when the
    ///   calling task is cancelled or the client is closed meanwhile.
    public func evaluateFlag(_ flagKey: String, user: User) async throws -> EvalResult {
        let key = CacheKey(userId: user.id, key: flagKey)
        return try await shared(key, cache: \.flags, flights: \.flagFlights) { [http] in
            let path = "/api/v1/feature-flags/evaluate/" + HTTPTransport.encodePathSegment(flagKey)
            let (status, body) = try await http.send(method: "GET", path: path, query: [("user_id", user.id)])
            if status == 404 { throw ExperimentationError.flagNotFound(flagKey) }
            guard (200..<300).contains(status) else { throw Self.serverError(status, body) }
            do {
                let decoded = try JSONDecoder().decode(EvalResult.self, from: body)
                return EvalResult(key: decoded.key.isEmpty ? flagKey : decoded.key, enabled: decoded.enabled, config: decoded.config)
            } catch {
                throw ExperimentationError.decodingError(error)
            }
        } persist: { store, result in
            store.saveEvaluation(result, userId: user.id, flagKey: flagKey)
        } load: { store in
            store.loadEvaluation(flagKey: flagKey, userId: user.id)
        } remove: { store in
            store.removeEvaluation(flagKey: flagKey, userId: user.id)
        }
    }

    // MARK: Experiments

    /// Returns `user`'s assignment to `experimentKey` with `POST /api/v1/tracking/assign`
    /// (`{experiment_key, user_id, context?}`, context = `user.attributes`).
    ///
    /// Cached and shared like `evaluateFlag`; an `assigned:false` answer is returned and cached but
    /// never fanned out to.
    ///
    /// - Throws: `.experimentNotFound` on 404 (the persisted entry is deleted); `.invalidConfig`
    ///   when an attribute is not a JSON value (never served from the offline store); otherwise the
    ///   errors of `evaluateFlag`.
    public func getAssignment(_ experimentKey: String, user: User) async throws -> Assignment {
        let key = CacheKey(userId: user.id, key: experimentKey)
        return try await shared(key, cache: \.assignments, flights: \.assignmentFlights) { [http] in
            var fields: [String: AnyCodable] = ["experiment_key": AnyCodable(experimentKey), "user_id": AnyCodable(user.id)]
            if let context = user.attributes { fields["context"] = AnyCodable(context.mapValues(\.value)) }
            // An attribute that is no JSON value is the app's bug: an `ExperimentationError` that
            // never falls back (it escaped as a bare EncodingError: an outside audit, A-7).
            let payload: Data
            do { payload = try Self.encode(fields) } catch {
                throw ExperimentationError.invalidConfig("the attributes of user '\(user.id)' are not all JSON values: \(error)")
            }
            let (status, body) = try await http.send(method: "POST", path: "/api/v1/tracking/assign", body: payload)
            if status == 404 { throw ExperimentationError.experimentNotFound(experimentKey) }
            guard (200..<300).contains(status) else { throw Self.serverError(status, body) }
            do {
                let a = try JSONDecoder().decode(Assignment.self, from: body)
                return Assignment(experimentKey: a.experimentKey.isEmpty ? experimentKey : a.experimentKey,
                                  userId: a.userId.isEmpty ? user.id : a.userId, variantId: a.variantId,
                                  variantName: a.variantName, isControl: a.isControl,
                                  configuration: a.configuration, assigned: a.assigned)
            } catch {
                throw ExperimentationError.decodingError(error)
            }
        } persist: { store, assignment in
            store.saveAssignment(assignment, userId: user.id, experimentKey: experimentKey)
        } load: { store in
            store.loadAssignment(experimentKey: experimentKey, userId: user.id)
        } remove: { store in
            store.removeAssignment(experimentKey: experimentKey, userId: user.id)
        }
    }

    // MARK: Tracking

    /// Records `event`; never throws (`throws` is kept for source compatibility).
    ///
    /// With a key: one `POST /api/v1/tracking/track`. Without: one `/batch` entry per cached
    /// assignment (`assigned:true`) then per cached flag of `event.userId`, in insertion order
    /// (CONTRACT.md section 4). Cancelling the calling task does not stop the request: the event
    /// is delivered and the call returns when it is answered; `close()` does cancel it.
    public func track(_ event: TrackEvent) async throws {
        await trackWithStatus(event)
    }

    /// Records `event` like `track(_:)` and reports the outcome.
    ///
    /// - Returns: `true` when every request answered 2xx and no batch reported `failure_count > 0`
    ///   (or nothing had to be sent); `false` otherwise (CONTRACT.md section 5.5).
    @discardableResult
    public func trackWithStatus(_ event: TrackEvent) async -> Bool {
        if event.hasKey {
            guard let body = try? Self.encode(event),
                  let (status, _) = await sendTracking(path: "/api/v1/tracking/track", body: body)
            else { return false }
            return (200..<300).contains(status)
        }
        return await sendBatches(fanOut(event))
    }

    /// Records `events` with `POST /api/v1/tracking/batch` in chunks of 100, in order; keyed events
    /// are sent as they are, unkeyed ones fanned out. A failed chunk does not stop later chunks.
    ///
    /// - Returns: `true` when every chunk answered 2xx with `failure_count` 0 (or nothing was sent).
    @discardableResult
    public func trackBatch(_ events: [TrackEvent]) async -> Bool {
        await sendBatches(events.flatMap { $0.hasKey ? [$0] : fanOut($0) })
    }

    /// Deprecated no-op kept for source compatibility.
    @available(*, deprecated, message: "Flags are evaluated by the server per user; refreshFlags() is a no-op.")
    public func refreshFlags() async throws {}

    // MARK: Cache access

    /// The user's cached, unexpired assignments in insertion order (including `assigned:false` ones).
    ///
    /// `userId` is matched exactly (Unicode scalars): NFC and NFD spellings are different users.
    public func getAssignments(for userId: String) -> [Assignment] {
        let now = clock.now()
        return state.withLock { $0.assignments.entries(forUser: userId, now: now).map(\.value) }
    }

    /// The keys of the user's cached, unexpired flag evaluations in insertion order.
    public func getEvaluatedFlags(for userId: String) -> [String] {
        let now = clock.now()
        return state.withLock { $0.flags.entries(forUser: userId, now: now).map(\.key) }
    }

    /// Drops every in-memory entry. Requests in flight still answer their callers but are not
    /// written anywhere, and later calls start fresh requests (CONTRACT.md section 5.1, 5.2).
    public func clearCache() {
        state.withLock { Self.detach(&$0) }
    }

    /// Deletes everything the offline store holds, whether or not the fallback is on; requests in
    /// flight will not write to it (CONTRACT.md sections 3 and 5.1).
    ///
    /// A client with `enableOfflineFallback: false` still clears the store it was given: an app
    /// that turns persistence off (a privacy opt-out) wipes what an earlier run stored, as
    /// upstream's does (it was a no-op: an outside audit, 47 item 2).
    public func clearOfflineCache() {
        state.withLock { s in
            s.epoch &+= 1
            persistentStore?.clearAll()
        }
    }

    /// Clears the memory caches and cancels every request in flight: flag and assignment callers
    /// get `.cancelled`, tracking calls (`track`, `trackWithStatus`, `trackBatch`) whose request is
    /// in flight report `false` (a batch's later chunks are still sent). Calls made after `close()`
    /// work as usual. The persisted entries stay for the next launch; the client stays usable.
    public func close() {
        let (flights, tracking) = state.withLock { s -> (([Flight<EvalResult>], [Flight<Assignment>]), [Task<(status: Int, body: Data)?, Never>]) in
            let f = (Array(s.flagFlights.values), Array(s.assignmentFlights.values))
            f.0.forEach { $0.closed = true }
            f.1.forEach { $0.closed = true }
            Self.detach(&s)
            let t = Array(s.tracking.values)
            s.tracking.removeAll()
            return (f, t)
        }
        flights.0.forEach { $0.task?.cancel() }
        flights.1.forEach { $0.task?.cancel() }
        tracking.forEach { $0.cancel() }
    }

    /// Test probe: the callers registered on the in-flight request for (`userId`, `key`), counting
    /// both flag and assignment requests.
    func inFlightWaiters(userId: String, key: String) -> Int {
        let k = CacheKey(userId: userId, key: key)
        return state.withLock { s in
            (s.flagFlights[k]?.waiters.count ?? 0) + (s.assignmentFlights[k]?.waiters.count ?? 0)
        }
    }

    private static func detach(_ s: inout State) {
        s.epoch &+= 1
        s.flags.removeAll()
        s.assignments.removeAll()
        s.flagFlights.removeAll()
        s.assignmentFlights.removeAll()
    }

    // MARK: Single flight

    private func shared<Value: Sendable>(
        _ key: CacheKey,
        cache: WritableKeyPath<State, UserKeyCache<Value>> & Sendable,
        flights: WritableKeyPath<State, [CacheKey: Flight<Value>]> & Sendable,
        fetch: @escaping @Sendable () async throws -> Value,
        persist: @escaping @Sendable (OfflineStore, Value) -> Void,
        load: @escaping @Sendable (OfflineStore) -> Value?,
        remove: @escaping @Sendable (OfflineStore) -> Void
    ) async throws -> Value {
        let now = clock.now()
        let step: FlightStep<Value> = state.withLock { s in
            if let value = s[keyPath: cache].value(for: key, now: now) { return .hit(value) }
            s.nextWaiter &+= 1
            let waiter = s.nextWaiter
            if let flight = s[keyPath: flights][key] {
                flight.waiters[waiter] = .some(nil)
                return .wait(flight, waiter)
            }
            let flight = Flight<Value>(epoch: s.epoch)
            flight.waiters[waiter] = .some(nil)
            s[keyPath: flights][key] = flight
            return .start(flight, waiter)
        }
        let flight: Flight<Value>, waiter: UInt64
        switch step {
        case .hit(let value): return value
        case .wait(let f, let w): (flight, waiter) = (f, w)
        case .start(let f, let w):
            (flight, waiter) = (f, w)
            let task = tasks.spawn { [self] in
                let outcome: Result<Value, Error>
                do { outcome = .success(try await fetch()) } catch { outcome = .failure(error) }
                finish(flight, key: key, outcome: outcome, cache: cache, flights: flights,
                       persist: persist, load: load, remove: remove)
            }
            // close() may have detached this flight before its task existed: cancel it here then.
            let closed = state.withLock { _ -> Bool in flight.task = task; return flight.closed }
            if closed { task.cancel() }
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, Error>) in
                let ready: Result<Value, Error>? = state.withLock { _ in
                    if flight.preCancelled.remove(waiter) != nil { return .failure(ExperimentationError.cancelled) }
                    if let result = flight.result { flight.waiters[waiter] = nil; return result }
                    flight.waiters[waiter] = .some(continuation)
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let (resume, abandon) = state.withLock { s -> (CheckedContinuation<Value, Error>?, Task<Void, Never>?) in
                guard flight.result == nil, let slot = flight.waiters.removeValue(forKey: waiter) else { return (nil, nil) }
                if slot == nil { flight.preCancelled.insert(waiter) }
                guard flight.waiters.isEmpty else { return (slot ?? nil, nil) }
                // Every waiter is gone: stop the request, and let later calls start a new one.
                if s[keyPath: flights][key] === flight { s[keyPath: flights][key] = nil }
                return (slot ?? nil, flight.task)
            }
            abandon?.cancel()
            resume?.resume(throwing: ExperimentationError.cancelled)
        }
    }

    private func finish<Value: Sendable>(
        _ flight: Flight<Value>, key: CacheKey, outcome: Result<Value, Error>,
        cache: WritableKeyPath<State, UserKeyCache<Value>> & Sendable,
        flights: WritableKeyPath<State, [CacheKey: Flight<Value>]> & Sendable,
        persist: (OfflineStore, Value) -> Void, load: (OfflineStore) -> Value?, remove: (OfflineStore) -> Void
    ) {
        let now = clock.now()
        let store = offlineStore
        let (result, waiters) = state.withLock { s -> (Result<Value, Error>, [CheckedContinuation<Value, Error>]) in
            // Only this flight may unregister itself (section 5.2).
            if s[keyPath: flights][key] === flight { s[keyPath: flights][key] = nil }
            let current = flight.epoch == s.epoch
            let result: Result<Value, Error>
            switch outcome {
            case .success(let value):
                if current {
                    s[keyPath: cache].set(value, for: key, now: now)
                    if let store { persist(store, value) }
                }
                result = .success(value)
            case .failure(ExperimentationError.flagNotFound(let k)):
                // Deleting is never stale, so a 404 deletes even after a clear (section 4: "never a
                // stale value"); only writes of values are epoch-guarded (section 5.1).
                if let store { remove(store) }
                result = .failure(ExperimentationError.flagNotFound(k))
            case .failure(ExperimentationError.experimentNotFound(let k)):
                // Deleting is never stale, so a 404 deletes even after a clear (section 4: "never a
                // stale value"); only writes of values are epoch-guarded (section 5.1).
                if let store { remove(store) }
                result = .failure(ExperimentationError.experimentNotFound(k))
            case .failure(let error):
                // Cancellation is the caller's choice and a bad configuration is the app's bug:
                // neither is a failure to hide behind a persisted value (section 4 lists transport,
                // timeout and HTTP failures).
                let fallsBack: Bool
                switch error {
                case ExperimentationError.cancelled, ExperimentationError.invalidConfig: fallsBack = false
                default: fallsBack = true
                }
                if fallsBack, let store, let fallback = load(store) {
                    result = .success(fallback)
                } else {
                    result = .failure(error)
                }
            }
            flight.result = result
            let waiters = flight.waiters.values.compactMap { $0 }
            flight.waiters.removeAll()
            return (result, waiters)
        }
        for waiter in waiters { waiter.resume(with: result) }
    }

    // MARK: Helpers

    private func fanOut(_ event: TrackEvent) -> [TrackEvent] {
        let now = clock.now()
        return state.withLock { s in
            s.assignments.entries(forUser: event.userId, now: now).filter(\.value.assigned)
                .map { event.attributed(experimentKey: $0.key) }
                + s.flags.entries(forUser: event.userId, now: now).map { event.attributed(featureFlagKey: $0.key) }
        }
    }

    /// Sends one tracking request that `close()` can cancel (registered under the state lock
    /// before it starts); `nil` when it failed or `close()` cancelled it.
    ///
    /// The caller's cancellation does not reach the request: the event is sent and the call
    /// returns once it is answered (or its deadline passes). A SwiftUI `.task` ended by its view
    /// going away lost its conversion event; upstream delivers it (an outside audit, 47 item 4).
    private func sendTracking(path: String, body: Data) async -> (status: Int, body: Data)? {
        let (id, task) = state.withLock { s -> (UInt64, Task<(status: Int, body: Data)?, Never>) in
            s.nextWaiter &+= 1
            // Through the spawner like every task the client creates (a plain `Task {}` ran on the
            // global executor, where a harness's executor could not see it: the runner judged a
            // batch stuck while this task was about to report its chunk's timeout, 3 of 60 runs).
            let task = tasks.spawn(returning: { [http] () -> (status: Int, body: Data)? in
                try? await http.send(method: "POST", path: path, body: body)
            })
            s.tracking[s.nextWaiter] = task
            return (s.nextWaiter, task)
        }
        defer { _ = state.withLock { $0.tracking.removeValue(forKey: id) } }
        return await task.value
    }

    private func sendBatches(_ events: [TrackEvent]) async -> Bool {
        var ok = true
        var start = 0
        while start < events.count {
            let chunk = Array(events[start..<min(start + Self.batchLimit, events.count)])
            start += Self.batchLimit
            struct Batch: Encodable { let events: [TrackEvent] }
            guard let body = try? Self.encode(Batch(events: chunk)),
                  let (status, data) = await sendTracking(path: "/api/v1/tracking/batch", body: body),
                  (200..<300).contains(status) else { ok = false; continue }
            // A 200 with per-event failures is still a failure (section 5.5).
            if let summary = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
               let failures = summary["failure_count"] as? NSNumber, failures.intValue > 0 {
                ok = false
            }
        }
        return ok
    }

    private static func encode<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }

    private static func serverError(_ status: Int, _ body: Data) -> ExperimentationError {
        .serverError(status, String(decoding: body, as: UTF8.self))
    }
}

private enum FlightStep<Value: Sendable> {
    case hit(Value)
    case wait(Flight<Value>, UInt64)
    case start(Flight<Value>, UInt64)
}
