import Foundation
import Experimently
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A second, independent implementation of the Experimently client surface with at most one
/// deliberate defect: the broken SDKs the scenario suite must catch (`contract-harness mutants`).
///
/// With `defect == nil` it behaves as CONTRACT.md sections 1, 3, 4 and 5 ask, and the whole suite
/// must pass against it too; each `Defect` changes exactly one behaviour. It shares only the public
/// model types with the shipping SDK (none of its internals), and nothing of it is compiled into
/// the SDK. All mutable state is one `State` behind an `NSLock`, never held across `await`.
public final class MutantClient: @unchecked Sendable {
    // @unchecked Sendable: mutable state is only touched inside `lock`; the rest is `let`.

    /// The defect this variant has, or `nil` for the faithful variant.
    public let defect: Defect?
    private let config: SdkConfig
    private let session: URLSession
    private let store: OfflineStore?
    private let clock: any ExperimentationClock
    /// The task executor every task the variant creates prefers (an `any TaskExecutor`), or `nil`.
    private let taskExecutor: (any Sendable)?
    private let lock = NSLock()
    private var state = State()

    private enum Cached {
        case flag(EvalResult)
        case assignment(Assignment)
    }

    /// A fetch's value and whether it came from the network (only those are cached and persisted).
    private struct Fetched {
        let value: Cached
        let fresh: Bool
    }

    /// Whether an entry expiring at `expires` is fresh at `now`, to the microsecond (as the
    /// shipping SDK's cache: at exactly stored + cacheTTL it has expired, CONTRACT.md section 4).
    /// `expires` is whole microseconds since 2001 (``expiry(_:ttl:)``), compared with `now` in
    /// the same unit: rounding their difference expired an entry 1 us early after 2069.
    static func fresh(_ expires: Double, _ now: Date) -> Bool { Experimently.microseconds(now) < expires }

    /// When an entry stored at `now` expires, in whole microseconds since 2001 (the shipping SDK's
    /// `microseconds(_:)`): the stored instant and the TTL each rounded on their own.
    static func expiry(_ now: Date, ttl: TimeInterval) -> Double { Experimently.microseconds(now) + (ttl * 1e6).rounded() }

    private struct Entry {
        let user: String
        let key: String
        let value: Cached
        /// Whole microseconds since 2001 (``MutantClient/expiry(_:ttl:)``).
        let expires: Double
        let order: Int
    }

    /// One request shared by every caller of one (kind, user, key).
    private final class Shared: @unchecked Sendable {
        // @unchecked Sendable: fields are only touched inside the client's `lock`.
        var waiters: [Int: CheckedContinuation<Cached, Error>] = [:]
        var early: Set<Int> = []
        var expected = 0
        var result: Result<Cached, Error>?
        var task: Task<Void, Never>?
        let epoch: Int
        init(epoch: Int) { self.epoch = epoch }
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var shared: [String: Shared] = [:]
        var epoch = 0
        var order = 0
        var ticket = 0
        var forgottenExperiments: [String] = []
        /// `warms-up-known-experiments`: every experiment key asked for, in order (exact, by Unicode scalars).
        var askedExperiments: [String] = []
        /// `remembers-failure`: the last failure of each (kind, user, key), thrown again without a request.
        var failures: [String: Error] = [:]
        /// `remembers-failure`: a `/track` or `/batch` failed since the last clear.
        var trackingFailed = false
        /// `clear-ends-requests`: the keyed `/track` sends in flight, by number, to cancel on a clear.
        var trackingSends: [Int: Task<(Int, Data)?, Never>] = [:]
        var trackingSendCount = 0
    }

    /// Creates a variant.
    ///
    /// - Parameters:
    ///   - defect: the defect to have, `nil` for none.
    ///   - config, session, offlineStore, clock: as `ExperimentationClient`'s initializer.
    ///   - taskExecutor: the task executor (an `any TaskExecutor`) every task the variant creates
    ///     prefers, like `ExperimentationClient(config:session:offlineStore:clock:taskExecutor:)`;
    ///     `nil`: the global executor.
    public init(defect: Defect?, config: SdkConfig, session: URLSession, offlineStore: OfflineStore?,
                clock: any ExperimentationClock, taskExecutor: (any Sendable)? = nil) {
        self.defect = defect
        self.taskExecutor = taskExecutor
        self.config = config
        self.session = session
        self.store = config.enableOfflineFallback ? offlineStore : nil
        self.clock = clock
    }

    private func has(_ d: Defect) -> Bool { defect?.includes.contains(d) ?? false }

    /// An attribute or property value as this variant sends it: with `numbers-as-booleans`, every
    /// value a `Bool` cast accepts (an `NSNumber` 1 or 0 among them) is a boolean, as an encoder
    /// that tries `Bool` before `Int` makes it; otherwise as given.
    private func onTheWire(value: Any) -> Any {
        guard has(.numbersAsBooleans) else { return value }
        if let b = value as? Bool { return b }
        if let a = value as? [Any] { return a.map { onTheWire(value: $0) } }
        if let o = value as? [String: Any] { return o.mapValues { onTheWire(value: $0) } }
        return value
    }

    private func locked<R>(_ body: (inout State) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }

    /// The cache and single-flight key of (kind, user, key): faithfully the Unicode scalars of
    /// each part in hex, so canonically equivalent spellings never meet as `String` keys.
    private func cacheKey(_ kind: String, _ user: String, _ key: String) -> String {
        if has(.collidingCacheKey) { return "\(kind)|\(Self.scalarsHex(user + ":" + key))" }
        // The defect: a Swift `String` key, whose `==` and hashing are canonical equivalence.
        if has(.canonicalIdentity) { return "\(kind)\u{0}\(user)\u{0}\(key)" }
        return "\(kind)|\(Self.scalarsHex(user))|\(Self.scalarsHex(key))"
    }

    /// The memory cache's key for the flight key `k`: itself, or with `kindless-key` the same
    /// without its kind, so a flag and an experiment of one name share a cache entry (their
    /// flights stay apart: the in-flight half of that defect would hang the variant on a held
    /// request; a tenth outside tester's Python SDK with it is caught by the same scenario).
    private func storedKey(_ k: String) -> String {
        guard has(.kindlessKey), let bar = k.firstIndex(of: "|") else { return k }
        return String(k[k.index(after: bar)...])
    }

    /// Evicts the oldest entries (insertion order) of `value`'s kind while there are more than
    /// `cacheSize` of them (CONTRACT.md section 3; the contract names no eviction order).
    private func evictOverSize(_ s: inout State, kindOf value: Cached) {
        if has(.ignoresCacheSize) { return }
        func sameKind(_ e: Entry) -> Bool {
            switch (e.value, value) {
            case (.flag, .flag), (.assignment, .assignment): return true
            default: return false
            }
        }
        var ofKind = s.entries.filter { sameKind($0.value) }
        while ofKind.count > max(1, config.cacheSize), let oldest = ofKind.min(by: { $0.value.order < $1.value.order }) {
            s.entries[oldest.key] = nil
            ofKind[oldest.key] = nil
        }
    }

    private static func scalarsHex(_ s: String) -> String {
        s.unicodeScalars.map { String($0.value, radix: 16) }.joined(separator: ".")
    }

    /// Identity comparison: exact Unicode scalars, or `String` `==` for the canonical-identity defect.
    private func same(_ a: String, _ b: String) -> Bool {
        has(.canonicalIdentity) ? a == b : a.unicodeScalars.elementsEqual(b.unicodeScalars)
    }

    // MARK: Public surface

    /// Evaluates a flag (see `ExperimentationClient.evaluateFlag`).
    public func evaluateFlag(_ flagKey: String, user: User) async throws -> EvalResult {
        try await prefetchIfKnown(user: user)
        guard case .flag(let r) = try await cachedOrShared("flag", user: user.id, key: flagKey, fetch: { [self] in
            try await fetchFlag(flagKey, user: user)
        }) else { throw ExperimentationError.decodingError(URLError(.cannotDecodeContentData)) }
        return r
    }

    /// Assigns a user (see `ExperimentationClient.getAssignment`).
    public func getAssignment(_ experimentKey: String, user: User) async throws -> Assignment {
        guard case .assignment(let a) = try await cachedOrShared("experiment", user: user.id, key: experimentKey, fetch: { [self] in
            try await fetchAssignment(experimentKey, user: user)
        }) else { throw ExperimentationError.decodingError(URLError(.cannotDecodeContentData)) }
        try await warmUp(user: user, after: experimentKey)
        return a
    }

    /// `warms-up-known-experiments`: assigns `user` to every other experiment asked for so far
    /// (a hit sends nothing; a miss sends an `/assign`, an exposure no caller asked for).
    private func warmUp(user: User, after experimentKey: String) async throws {
        guard has(.warmsUpKnownExperiments) else { return }
        let others = locked { s -> [String] in
            if !s.askedExperiments.contains(where: { same($0, experimentKey) }) { s.askedExperiments.append(experimentKey) }
            return s.askedExperiments.filter { !same($0, experimentKey) }
        }
        for key in others {
            _ = try? await cachedOrShared("experiment", user: user.id, key: key, fetch: { [self] in try await fetchAssignment(key, user: user) })
        }
    }

    /// Records an event; never throws.
    public func track(_ event: TrackEvent) async throws { _ = await trackWithStatus(event) }

    /// Records an event and reports whether every request succeeded.
    public func trackWithStatus(_ event: TrackEvent) async -> Bool {
        let event = onTheWire(event)
        if event.hasKey {
            guard let body = try? encode(event) else { return false }
            // `status-ignores-track-answer`: sent is as good as delivered.
            if has(.statusIgnoresTrackAnswer) { _ = try? await send("POST", "/api/v1/tracking/track", body: body); return true }
            // `remembers-failure`: after a failed /track, keyed events report false unsent.
            if has(.remembersFailure), locked({ $0.trackingFailed }) { return false }
            if has(.clearEndsRequests) {
                // The send is a task of its own that a clear cancels: then the call reports false.
                let task = Task { [self] in try? await send("POST", "/api/v1/tracking/track", body: body) }
                let number = locked { s in s.trackingSendCount += 1; s.trackingSends[s.trackingSendCount] = task; return s.trackingSendCount }
                let answer = await task.value
                locked { s in s.trackingSends[number] = nil }
                guard let (status, _) = answer, (200..<300).contains(status) else { return false }
                return true
            }
            guard let (status, _) = try? await send("POST", "/api/v1/tracking/track", body: body), (200..<300).contains(status) else {
                if has(.remembersFailure) { locked { $0.trackingFailed = true } }
                return false
            }
            return true
        }
        return await sendBatches(fanOut(event))
    }

    /// Records events in batches of 100.
    public func trackBatch(_ events: [TrackEvent]) async -> Bool {
        await sendBatches(events.map(onTheWire).flatMap { $0.hasKey ? [$0] : fanOut($0) })
    }

    /// The event as this variant sends it: with `trims-user-ids`, its user id trimmed; with
    /// `timestamp-whole-seconds`, its timestamp cut to the whole second; with `zero-fields-dropped`,
    /// without its zero or empty fields; otherwise as given.
    private func onTheWire(_ event: TrackEvent) -> TrackEvent {
        if has(.numbersAsBooleans), let properties = event.properties {
            return TrackEvent(userId: event.userId, eventName: event.eventName, properties: properties.mapValues { onTheWire(value: $0.value) },
                              experimentKey: event.experimentKey, featureFlagKey: event.featureFlagKey, value: event.value,
                              eventType: event.eventType, timestamp: event.timestamp)
        }
        if has(.trimsUserIds), onTheWire(user: event.userId) != event.userId {
            return TrackEvent(userId: onTheWire(user: event.userId), eventName: event.eventName, properties: event.properties?.mapValues(\.value),
                              experimentKey: event.experimentKey, featureFlagKey: event.featureFlagKey, value: event.value,
                              eventType: event.eventType, timestamp: event.timestamp)
        }
        if has(.zeroFieldsDropped) {
            // The defect: "if value:", "if properties:", "if timestamp:" (a set field that is zero or empty is dropped).
            let properties = event.properties.flatMap { $0.isEmpty ? nil : $0.mapValues(\.value) }
            let timestamp = event.timestamp.flatMap { $0.timeIntervalSince1970 == 0 ? nil : $0 }
            return TrackEvent(userId: event.userId, eventName: event.eventName, properties: properties,
                              experimentKey: event.experimentKey, featureFlagKey: event.featureFlagKey, value: event.value == 0 ? nil : event.value,
                              eventType: event.eventType, timestamp: timestamp)
        }
        guard has(.timestampWholeSeconds), let t = event.timestamp else { return event }
        return TrackEvent(userId: event.userId, eventName: event.eventName, properties: event.properties?.mapValues(\.value),
                          experimentKey: event.experimentKey, featureFlagKey: event.featureFlagKey, value: event.value,
                          eventType: event.eventType, timestamp: Date(timeIntervalSince1970: t.timeIntervalSince1970.rounded(.down)))
    }

    /// Cached unexpired assignments of a user, oldest first.
    public func getAssignments(for userId: String) -> [Assignment] {
        entries(user: userId, includeExpired: false).compactMap { if case .assignment(let a) = $0.value { return a } else { return nil } }
    }

    /// Keys of cached unexpired flags of a user, oldest first.
    public func getEvaluatedFlags(for userId: String) -> [String] {
        entries(user: userId, includeExpired: false).compactMap { if case .flag = $0.value { return $0.key } else { return nil } }
    }

    /// Empties the memory cache; requests in flight are detached.
    public func clearCache() {
        locked { s -> [@Sendable () -> Void] in
            if self.has(.crashOnClearInFlight) && !s.shared.isEmpty {
                // The deliberate crash: the harness must report it, not die of it (issue 10).
                fatalError("MutantClient.clearCache(): \(s.shared.count) request(s) in flight")
            }
            if self.has(.prefetchAssignments) {
                s.forgottenExperiments = s.entries.values.compactMap { if case .assignment(let a) = $0.value { return a.experimentKey } else { return nil } }
            }
            s.epoch += 1
            s.entries.removeAll()
            s.failures.removeAll()
            s.trackingFailed = false
            // `clear-ends-requests`: every request in flight, lookups and keyed `/track` sends.
            var inFlight: [@Sendable () -> Void] = []
            if self.has(.clearEndsRequests) {
                for task in s.shared.values.compactMap(\.task) { inFlight.append { @Sendable in task.cancel() } }
                for task in s.trackingSends.values { inFlight.append { @Sendable in task.cancel() } }
            }
            if !self.has(.clearKeepsInFlight) { s.shared.removeAll() }
            return inFlight
        }.forEach { $0() }
    }

    /// Deletes every persisted value.
    public func clearOfflineCache() {
        locked { s in
            s.epoch += 1
            store?.clearAll()
        }
    }

    /// Clears the memory cache and cancels requests in flight.
    public func close() {
        let tasks = locked { s -> [Task<Void, Never>?] in
            let t = s.shared.values.map(\.task)
            s.epoch += 1
            s.entries.removeAll()
            s.failures.removeAll()
            s.trackingFailed = false
            s.shared.removeAll()
            return t
        }
        tasks.forEach { $0?.cancel() }
    }

    /// The cross-SDK hash (CONTRACT.md section 6), or its broken variants.
    public func hashUser(_ userId: String, flagKey: String) -> Double {
        let hex = FeatureFlagEvaluator.md5Hex(of: Array(userId.utf8) + (has(.hashWithoutSeparator) ? [] : [UInt8(ascii: ":")]) + Array(flagKey.utf8))
        var bytes: [UInt32] = []
        var i = hex.startIndex
        for _ in 0..<4 {
            let j = hex.index(i, offsetBy: 2)
            bytes.append(UInt32(hex[i..<j], radix: 16)!)
            i = j
        }
        let word = has(.hashBigEndian)
            ? bytes[0] << 24 | bytes[1] << 16 | bytes[2] << 8 | bytes[3]
            : bytes[3] << 24 | bytes[2] << 16 | bytes[1] << 8 | bytes[0]
        return Double(word) / 4_294_967_296.0
    }

    // MARK: Cache and single flight

    private func entries(user: String, includeExpired: Bool) -> [Entry] {
        let now = clock.now()
        return locked { s in
            s.entries.values.filter { same($0.user, user) && (includeExpired || Self.fresh($0.expires, now)) }.sorted { $0.order < $1.order }
        }
    }

    private func cachedOrShared(_ kind: String, user: String, key: String,
                                fetch: @escaping @Sendable () async throws -> Fetched) async throws -> Cached {
        let k = cacheKey(kind, user, key)
        let now = clock.now()
        let (hit, shared, ticket, starts): (Cached?, Shared?, Int, Bool) = locked { s in
            if !has(.noCacheHits), let e = s.entries[storedKey(k)], Self.fresh(e.expires, now) { return (e.value, nil, 0, false) }
            if has(.remembersFailure), s.failures[storedKey(k)] != nil { return (nil, nil, 0, false) }
            s.ticket += 1
            if !self.has(.noSingleFlight), let existing = s.shared[k] {
                existing.expected += 1
                return (nil, existing, s.ticket, false)
            }
            let fresh = Shared(epoch: s.epoch)
            fresh.expected = 1
            s.shared[k] = fresh
            return (nil, fresh, s.ticket, true)
        }
        if let hit { return hit }
        if let failure = locked({ s in has(.remembersFailure) ? s.failures[storedKey(k)] : nil }) { throw failure }
        guard let shared else { throw ExperimentationError.cancelled }
        if starts {
            let task = spawn { [self] in
                let started = clock.now()
                let result: Result<Fetched, Error>
                do { result = .success(try await fetch()) } catch { result = .failure(error) }
                if has(.unregisterBeforeCacheWrite) || has(.joinFinishedFlight) {
                    await completeSplit(shared, key: k, user: user, entryKey: key, result: result)
                } else {
                    complete(shared, key: k, user: user, entryKey: key, result: result, started: started)
                }
            }
            locked { _ in shared.task = task }
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Cached, Error>) in
                let ready: Result<Cached, Error>? = locked { _ in
                    if shared.early.remove(ticket) != nil { return .failure(ExperimentationError.cancelled) }
                    if let r = shared.result { return r }
                    shared.waiters[ticket] = c
                    return nil
                }
                if let ready { c.resume(with: ready) }
            }
        } onCancel: {
            if self.has(.cancelEndsEveryWaiter) {
                // Every caller waiting on the request ends with this one; the request goes on.
                let all: [CheckedContinuation<Cached, Error>] = locked { _ in
                    guard shared.result == nil else { return [] }
                    if shared.waiters[ticket] == nil { shared.early.insert(ticket) }
                    defer { shared.waiters.removeAll() }
                    return Array(shared.waiters.values)
                }
                all.forEach { $0.resume(throwing: ExperimentationError.cancelled) }
                return
            }
            let (c, task): (CheckedContinuation<Cached, Error>?, Task<Void, Never>?) = locked { s in
                guard shared.result == nil else { return (nil, nil) }
                let c = shared.waiters.removeValue(forKey: ticket)
                if c == nil { shared.early.insert(ticket) }
                shared.expected -= 1
                // The request belongs to the caller that started it: its cancel ends it for all.
                if self.has(.cancelStarterEndsRequest) && starts { return (c, shared.task) }
                guard shared.expected == 0 else { return (c, nil) }
                if s.shared[k] === shared { s.shared[k] = nil }
                return (c, self.has(.cancelKeepsRequest) ? nil : shared.task)
            }
            task?.cancel()
            c?.resume(throwing: ExperimentationError.cancelled)
        }
    }

    private func complete(_ shared: Shared, key k: String, user: String, entryKey: String, result fetched: Result<Fetched, Error>,
                          started: Date) {
        // `ttl-from-request-start`: the entry's age counts from when its request started.
        let now = has(.ttlFromRequestStart) ? started : clock.now()
        let result = fetched.map(\.value)
        let waiters: [CheckedContinuation<Cached, Error>] = locked { s in
            if self.has(.oldRequestUnregistersNewer) || s.shared[k] === shared { s.shared[k] = nil }
            if case .success(let f) = fetched, f.fresh || self.has(.cachesFailure) || self.has(.cachesFallbackValue),
               self.has(.staleWriteAfterClear) || shared.epoch == s.epoch {
                s.order += 1
                s.entries[storedKey(k)] = Entry(user: user, key: entryKey, value: f.value, expires: Self.expiry(now, ttl: config.cacheTTL), order: s.order)
                evictOverSize(&s, kindOf: f.value)
                if f.fresh { self.persist(f.value, user: user) }
            }
            if self.has(.remembersFailure), case .failure(let error) = result, shared.epoch == s.epoch {
                switch error { case ExperimentationError.cancelled, is CancellationError: break; default: s.failures[storedKey(k)] = error }
            }
            shared.result = result
            defer { shared.waiters.removeAll() }
            return Array(shared.waiters.values)
        }
        waiters.forEach { $0.resume(with: result) }
    }

    /// A new task preferring the variant's task executor, if any.
    private func spawn(_ operation: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let executor = taskExecutor as? any TaskExecutor {
            return Task(executorPreference: executor, operation: operation)
        }
        return Task(operation: operation)
    }

    /// `complete` with an `await` in the middle (the offline-store write handed to a task and
    /// awaited): `unregisterBeforeCacheWrite` unregisters before it and caches after it;
    /// `joinFinishedFlight` takes the waiters before it and caches, unregisters and answers those
    /// waiters after it, so a caller joining in between is never answered.
    private func completeSplit(_ shared: Shared, key k: String, user: String, entryKey: String,
                               result fetched: Result<Fetched, Error>) async {
        let now = clock.now()
        let result = fetched.map(\.value)
        var fresh: Cached?
        if case .success(let f) = fetched, f.fresh { fresh = f.value }
        func write(_ s: inout State) {
            guard case .success(let f) = fetched, f.fresh, shared.epoch == s.epoch else { return }
            s.order += 1
            s.entries[storedKey(k)] = Entry(user: user, key: entryKey, value: f.value, expires: Self.expiry(now, ttl: config.cacheTTL), order: s.order)
            evictOverSize(&s, kindOf: f.value)
        }
        let current = locked { s -> Bool in
            if has(.unregisterBeforeCacheWrite), s.shared[k] === shared { s.shared[k] = nil }
            return shared.epoch == s.epoch
        }
        var taken: [CheckedContinuation<Cached, Error>] = []
        if has(.joinFinishedFlight) {
            taken = locked { _ in defer { shared.waiters.removeAll() }; return Array(shared.waiters.values) }
        }
        if current, let fresh { await spawn { [self] in persist(fresh, user: user) }.value }
        let waiters: [CheckedContinuation<Cached, Error>] = locked { s in
            write(&s)
            if s.shared[k] === shared { s.shared[k] = nil }
            shared.result = result
            defer { shared.waiters.removeAll() }
            return has(.joinFinishedFlight) ? taken : Array(shared.waiters.values)
        }
        waiters.forEach { $0.resume(with: result) }
    }

    private func persist(_ value: Cached, user: String) {
        guard let store else { return }
        switch value {
        case .flag(let r):
            store.saveEvaluation(r, userId: user)
            if has(.otherUsersPersistedValue) { store.saveEvaluation(r, userId: "*") }
        case .assignment(let a):
            store.saveAssignment(a, userId: user)
            if has(.otherUsersPersistedValue) { store.saveAssignment(a, userId: "*") }
        }
    }

    private func prefetchIfKnown(user: User) async throws {
        guard has(.prefetchAssignments) else { return }
        let keys = locked { s -> [String] in defer { s.forgottenExperiments = [] }; return s.forgottenExperiments }
        for key in keys { _ = try? await getAssignment(key, user: user) }
    }

    // MARK: Requests

    /// A flag or experiment key as this variant sends it: with `nfc-keys-on-the-wire`, in Unicode
    /// Normalization Form C (CONTRACT.md section 4: never normalize); otherwise as given.
    private func onTheWire(key: String) -> String {
        has(.nfcKeysOnTheWire) ? key.precomposedStringWithCanonicalMapping : key
    }

    private func fetchFlag(_ flagKey: String, user: User) async throws -> Fetched {
        let path = "/api/v1/feature-flags/evaluate/" + escape(onTheWire(key: flagKey), path: true)
        do {
            let (status, data) = try await send("GET", path, query: "user_id=" + escape(onTheWire(user: user.id), path: false))
            try classify(status, data, notFound: .flagNotFound(flagKey))
            let decoded = try decode(EvalResult.self, data)
            return Fetched(value: .flag(EvalResult(key: decoded.key.isEmpty ? flagKey : decoded.key, enabled: decoded.enabled, config: decoded.config)),
                           fresh: true)
        } catch {
            return Fetched(value: try fallback(error, kind: "flag", key: flagKey, user: user.id), fresh: false)
        }
    }

    private func fetchAssignment(_ experimentKey: String, user: User) async throws -> Fetched {
        var body: [String: AnyCodable] = ["experiment_key": AnyCodable(onTheWire(key: experimentKey)), "user_id": AnyCodable(onTheWire(user: user.id))]
        if let attributes = user.attributes { body["context"] = AnyCodable(attributes.mapValues { onTheWire(value: $0.value) }) }
        do {
            let (status, data) = try await send("POST", "/api/v1/tracking/assign", body: try encode(body))
            try classify(status, data, notFound: .experimentNotFound(experimentKey))
            let a = try decode(Assignment.self, data)
            return Fetched(value: .assignment(Assignment(experimentKey: experimentKey, userId: a.userId.isEmpty ? user.id : a.userId,
                                                         variantId: a.variantId, variantName: a.variantName, isControl: a.isControl,
                                                         configuration: a.configuration, assigned: a.assigned)), fresh: true)
        } catch {
            do {
                return Fetched(value: try fallback(error, kind: "experiment", key: experimentKey, user: user.id), fresh: false)
            } catch let failure {
                if has(.exposureForFallback), case ExperimentationError.serverError = failure {
                    // The app will show control: this variant records that as an exposure.
                    let exposure = TrackEvent(userId: user.id, eventName: "$exposure",
                                              properties: ["variant": "control", "source": "fallback"], experimentKey: experimentKey)
                    if let body = try? encode(exposure) { _ = try? await send("POST", "/api/v1/tracking/track", body: body) }
                }
                throw failure
            }
        }
    }

    private func classify(_ status: Int, _ data: Data, notFound: ExperimentationError) throws {
        if status == 404 || (status == 429 && has(.rateLimitAsNotFound)) { throw notFound }
        guard (200..<300).contains(status) else { throw ExperimentationError.serverError(status, String(decoding: data, as: UTF8.self)) }
    }

    private func fallback(_ error: Error, kind: String, key: String, user: String) throws -> Cached {
        let persistedUser = has(.otherUsersPersistedValue) ? "*" : user
        switch error {
        case ExperimentationError.flagNotFound, ExperimentationError.experimentNotFound:
            if has(.persistedValueOn404), let stored = load(kind, key: key, user: persistedUser) { return stored }
            if let store {
                if kind == "flag" { store.removeEvaluation(flagKey: key, userId: user) } else { store.removeAssignment(experimentKey: key, userId: user) }
            }
            throw error
        case ExperimentationError.cancelled, is CancellationError:
            // These two read their own cancelled request as a transport failure (URLSession's
            // NSURLErrorCancelled, -999), as an SDK that owns the request does: the other callers
            // get the persisted value or a networkError.
            guard has(.cancelStarterEndsRequest) || has(.clearEndsRequests) else { throw ExperimentationError.cancelled }
            if let stored = load(kind, key: key, user: persistedUser) { return stored }
            throw ExperimentationError.networkError(URLError(.cancelled))
        case ExperimentationError.serverError(let status, _) where has(.noFallbackOn4xx) && [400, 403, 409, 422].contains(status):
            throw error
        default:
            if let stored = load(kind, key: key, user: persistedUser) { return stored }
            if has(.cachesFailure), kind == "flag" {
                // The failure is served as "disabled", and `complete` caches it.
                return .flag(EvalResult(key: key, enabled: false))
            }
            throw error
        }
    }

    private func load(_ kind: String, key: String, user: String) -> Cached? {
        guard let store else { return nil }
        if kind == "flag" { return store.loadEvaluation(flagKey: key, userId: user).map(Cached.flag) }
        return store.loadAssignment(experimentKey: key, userId: user).map(Cached.assignment)
    }

    /// A user id as this variant sends it: with `trims-user-ids`, without spaces around it.
    private func onTheWire(user id: String) -> String {
        has(.trimsUserIds) ? id.trimmingCharacters(in: .whitespaces) : id
    }

    private func escape(_ raw: String, path: Bool) -> String {
        // `percent-decodes-ids`: what looks percent-encoded is decoded before encoding.
        let text = has(.percentDecodesIds) ? (raw.removingPercentEncoding ?? raw) : raw
        if has(.noPercentEncoding) {
            return text.addingPercentEncoding(withAllowedCharacters: path ? .urlPathAllowed : .urlQueryAllowed) ?? text
        }
        let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        let encoded = text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
        // A dot segment would be removed on the way (RFC 3986 section 5.2.4): its dots go as %2E.
        if path && (encoded == "." || encoded == "..") { return String(repeating: "%2E", count: encoded.count) }
        return encoded
    }

    private func encode<T: Encodable>(_ value: T) throws -> Data {
        let e = JSONEncoder()
        e.outputFormatting = .sortedKeys
        return try e.encode(value)
    }

    private func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        do { return try JSONDecoder().decode(type, from: data) } catch { throw ExperimentationError.decodingError(error) }
    }

    /// One request with the SDK's own deadline (unless `noOwnDeadline`); cancellation reaches the task.
    private func send(_ method: String, _ path: String, query: String? = nil, body: Data? = nil) async throws -> (Int, Data) {
        var base = config.baseURL
        while base.hasSuffix("/") { base.removeLast() }
        // An origin is http(s) with a host; anything else is the configuration's fault
        // (`invalidConfig`, as the shipping SDK says it), not the network's.
        guard let origin = URL(string: base), let scheme = origin.scheme?.lowercased(), scheme == "http" || scheme == "https",
              origin.host != nil, let url = URL(string: base + path + (query.map { "?" + $0 } ?? "")) else {
            throw ExperimentationError.invalidConfig("cannot form a URL from '\(config.baseURL)'")
        }
        // As the shipping SDK: the loading system's own timeout only with the wall clock.
        var request = URLRequest(url: url, timeoutInterval: clock is SystemClock ? config.timeout : 86_400)
        request.httpMethod = method
        request.httpBody = body
        for (name, value) in [("X-API-Key", config.apiKey), ("Accept", "application/json"), ("Content-Type", "application/json")] {
            request.setValue(value, forHTTPHeaderField: name)
        }
        let gate = Gate()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<(Int, Data), Error>) in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error { gate.finish(.failure(ExperimentationError.networkError(error))) }
                    else if let http = response as? HTTPURLResponse { gate.finish(.success((http.statusCode, data ?? Data()))) }
                    else { gate.finish(.failure(ExperimentationError.networkError(URLError(.badServerResponse)))) }
                }
                var deadline: Task<Void, Never>?
                if !has(.noOwnDeadline), !(has(.trackWithoutOwnDeadline) && path == "/api/v1/tracking/track") {
                    let clock = self.clock, due = clock.now().addingTimeInterval(config.timeout)
                    deadline = spawn {
                        guard (try? await clock.sleep(until: due)) != nil else { return }
                        gate.finish(.failure(self.has(.deadlineReportsCancelled) ? ExperimentationError.cancelled : ExperimentationError.networkError(URLError(.timedOut))))
                    }
                }
                gate.arm(c, task: task, deadline: deadline, delegateQueue: session.delegateQueue)
            }
        } onCancel: {
            gate.finish(.failure(ExperimentationError.cancelled))
        }
    }

    private final class Gate: @unchecked Sendable {
        // @unchecked Sendable: every field is guarded by `lock`.
        private let lock = NSLock()
        private var continuation: CheckedContinuation<(Int, Data), Error>?
        private var task: URLSessionDataTask?
        private var deadline: Task<Void, Never>?
        private var delegateQueue: OperationQueue?
        private var pending: Result<(Int, Data), Error>?
        private var finished = false

        func arm(_ c: CheckedContinuation<(Int, Data), Error>, task: URLSessionDataTask, deadline: Task<Void, Never>?,
                 delegateQueue: OperationQueue) {
            lock.lock()
            if let pending {
                lock.unlock()
                deadline?.cancel()
                c.resume(with: pending)
                return
            }
            continuation = c
            self.task = task
            self.deadline = deadline
            self.delegateQueue = delegateQueue
            lock.unlock()
            task.resume()
        }

        func finish(_ result: Result<(Int, Data), Error>) {
            lock.lock()
            guard !finished else { lock.unlock(); return }
            finished = true
            guard let c = continuation else { pending = result; lock.unlock(); return }
            continuation = nil
            let task = self.task, deadline = self.deadline, delegateQueue = self.delegateQueue
            lock.unlock()
            deadline?.cancel()
            if case .failure = result, let task {
                // From the session's delegate queue on Linux, as the shipping SDK does
                // (HTTPTransport.swift, `Exchange.cancel`): a cancel racing a completion can
                // otherwise trap inside FoundationNetworking, which would count as a catch.
                #if canImport(FoundationNetworking)
                struct Handle: @unchecked Sendable { let task: URLSessionDataTask }   // URLSessionTask is thread-safe
                let handle = Handle(task: task)
                if let delegateQueue { delegateQueue.addOperation { handle.task.cancel() } } else { task.cancel() }
                #else
                task.cancel()
                #endif
            }
            c.resume(with: result)
        }
    }

    // MARK: Tracking

    private func fanOut(_ event: TrackEvent) -> [TrackEvent] {
        let now = clock.now()
        let all = locked { s in s.entries.values.sorted { $0.order < $1.order } }
        let mine = all.filter { (has(.fanOutToOtherUsers) || same($0.user, event.userId)) && (has(.fanOutToExpired) || Self.fresh($0.expires, now)) }
        let assignments = mine.compactMap { e -> TrackEvent? in
            guard case .assignment(let a) = e.value, a.assigned || has(.fanOutToIneligible) else { return nil }
            return event.attributed(experimentKey: e.key)
        }
        let flags = mine.compactMap { e -> TrackEvent? in
            guard case .flag = e.value else { return nil }
            return event.attributed(featureFlagKey: e.key)
        }
        return assignments + flags
    }

    private func sendBatches(_ events: [TrackEvent]) async -> Bool {
        // `remembers-failure`: after a failed /track or /batch, batches report false unsent.
        if has(.remembersFailure), !events.isEmpty, locked({ $0.trackingFailed }) { return false }
        var ok = true
        var start = 0
        while start < events.count {
            let chunk = Array(events[start..<min(start + 100, events.count)])
            start += 100
            struct Batch: Encodable { let events: [TrackEvent] }
            let body = try? encode(Batch(events: chunk))
            let answer = body == nil ? nil : try? await send("POST", "/api/v1/tracking/batch", body: body)
            // `batch-stops-after-transport-failure`: no answer (dropped, timed out) ends the batch.
            if body != nil, answer == nil, has(.batchStopsAfterTransportFailure) { return false }
            if let (status, data) = answer, (200..<300).contains(status) {
                if !has(.batchFailuresReportTrue),
                   let summary = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                   let failures = summary["failure_count"] as? NSNumber, failures.intValue > 0 {
                    ok = false
                }
            } else {
                ok = false
            }
            if has(.wrongBatchChunks) { break }
        }
        if !ok, has(.remembersFailure) { locked { $0.trackingFailed = true } }
        return ok
    }
}
