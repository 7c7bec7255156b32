import Foundation
import ExperimentlyMock
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Adapts `ExperimentlyMock.MockBackend` to what the runner needs: scenario fault ids, per-client
/// origins (client N talks to `http://<backend host>:<10001 + N>`, so the `Host` header the mock
/// records attributes each request to its client), parked-request tracking from the mock's
/// observer, and history entries as `RequestRecord`s.
///
/// Mutable state lives in a `HarnessLocked` box.
final class MockBackendPort: BackendPort, @unchecked Sendable {
    // @unchecked Sendable: mutable state is inside `state` (a HarnessLocked); the rest is `let`.
    static let firstClientPort = 10001

    let backend: MockBackend
    let clients: [String]
    /// Relaunched clients and the client whose origin each takes (`Scenario.originOwners`).
    let originOwners: [ExactKey: String]
    /// Per origin owner: the clients relaunched on its origin, each with the number of requests
    /// the mock had received when it launched (later requests to the origin are its own).
    /// Behind a `HarnessLocked`, apart from `state`: `record` reads it while building records.
    private let handovers = HarnessLocked<[ExactKey: [(after: Int, client: String)]]>([:])
    let clock: VirtualClock
    /// Requests SDK sessions created and not yet completed; `nil` where sessions cannot count.
    let counter: TaskCounter
    private struct State {
        var faults: [ExactKey: FaultID] = [:]   // by scenario fault id, exact
        /// Parked requests and when they wake by themselves (`nil`: a hold, only a release wakes it).
        var parkedUntil: [Int: Date?] = [:]
        /// Requests received and not yet answered (parked ones included).
        var open: Set<Int> = []
        /// Records of parked requests, built once per request (quiescence asks for them often).
        var parkedRecords: [Int: RequestRecord] = [:]
        /// Records of answered requests (final but for `parked` and `cancelled`), by sequence
        /// number: `requests()` is called on every condition check and rebuilt them all.
        var finishedRecords: [Int: RequestRecord] = [:]
        var cancelled: Set<Int> = []
        /// How each request that parked at receipt was parked (`hold`, `delay N s`, `timeout N s`).
        var parkedHow: [Int: String] = [:]
        var observer: (@Sendable (Int?, Bool) -> Void)?
        /// Sessions made for this scenario alone (dedicated, or Apple platforms' plain ones).
        var sessions: [URLSession] = []
        #if canImport(FoundationNetworking)
        /// Sessions taken from `InProcessSessions`, given back at `shutdown()`.
        var pooled: [CountingURLSession] = []
        #endif
        /// Set by `shutdown()`: the counter is unregistered and the sessions went back.
        var isShutDown = false
    }
    private let state: HarnessLocked<State>

    /// Creates the backend over the scenario's fixtures (`nil`: the reference `sdk-contract` set).
    ///
    /// - Throws: `ScenarioError` at `$.fixtures` when the fixtures do not decode.
    init(fixtures: JSONValue?, clock: VirtualClock, file: String, clients: [String], originOwners: [ExactKey: String] = [:]) throws {
        self.clients = clients
        self.originOwners = originOwners
        self.clock = clock
        let state = HarnessLocked(State())
        self.state = state
        counter = TaskCounter { state.withLock { $0.observer }?(nil, false) }
        var decoded = Fixtures.sdkContract
        if let fixtures {
            do { decoded = try Self.decoded(Fixtures.self, fixtures) }
            catch { throw ScenarioError(file: file, path: "$.fixtures", expected: "mock fixtures", found: Self.describe(error)) }
        }
        backend = MockBackend(fixtures: decoded, clock: clock.mockView)
        // Requests are counted by the host their URL names (pooled sessions hold no scenario).
        InProcessSessions.register(counter, host: backend.baseURL.host ?? "")
        backend.setObserver { [state] event in
            let (observer, seq, answered): ((@Sendable (Int?, Bool) -> Void)?, Int?, Bool) = state.withLock { s in
                switch event {
                case .received(let seq): s.open.insert(seq); return (s.observer, seq, false)
                case .parked(let seq, let why):
                    switch why {
                    case .hold, .silent: s.parkedUntil[seq] = .some(nil)
                    case .delay(let seconds), .timeout(let seconds): s.parkedUntil[seq] = clock.now().addingTimeInterval(seconds)
                    }
                    switch why {
                    case .hold: s.parkedHow[seq] = "hold"
                    // A timeout fault over TCP: parked until the client gives up (closes).
                    case .silent: s.parkedHow[seq] = "timeout until the client gives up"
                    case .delay(let seconds): s.parkedHow[seq] = "delay \(seconds) s"
                    case .timeout(let seconds): s.parkedHow[seq] = "timeout \(seconds) s"
                    }
                    return (s.observer, nil, false)
                case .answered(let seq, _, _):
                    // Still open until its answer is in the history (below): a quiescence check in
                    // between saw nothing unsettled, and the next step's marker could land before
                    // the answer (2 digests in 40 runs under load, seventeenth outside tester's run).
                    s.parkedUntil[seq] = nil
                    s.parkedRecords[seq] = nil
                    return (s.observer, seq, true)
                case .cancelled(let seq):
                    s.cancelled.insert(seq)
                    s.parkedRecords[seq]?.cancelled = true
                    return (s.observer, nil, false)   // wakes waits on `cancelled` matches
                }
            }
            observer?(seq, answered)
            if answered, let seq {
                state.withLock { _ = $0.open.remove(seq) }
                observer?(nil, false)   // settled now: quiescence is checked again
            }
        }
    }

    /// Whether `body` is JSON that parsers read differently (an eighth outside tester: a UTF-8
    /// byte-order mark, a key twice, `NaN`, nesting past 256 levels each failed a correct SDK that
    /// read it the other way); then `strict` (the strict reading, `nil` when it failed) becomes the
    /// lenient one: the body without its mark, the tokens as `null`, an empty object when too deep.
    /// Whether an answer's head says its body is something else than plain JSON: a
    /// `Content-Encoding` other than `identity` (a `gzip` label over a plain body), or a
    /// `Content-Type` that is not `application/json` or `*/*+json`. A client's transport may
    /// decode the body as labelled, or an SDK refuse it, or either read it as JSON: its reading
    /// is not known, as for a body parsers read differently (an outside tester: a gzip-labelled
    /// answer the out-of-process Swift SDK could not read, correctly served from the store, was
    /// judged read and cached).
    /// The media type is the text before the first `;` (RFC 9110 section 8.3.1): an empty one
    /// (a value such as "; application/json") is something else than JSON. Headers of ASCII
    /// text (all the mock writes) are read as bytes; others go ``labelsOtherwiseByCharacters(_:)``.
    static func labelledOtherwise(_ headers: [HeaderField]) -> Bool {
        headers.contains(where: labelsOtherwise)
    }

    /// Whether one header says the body is something else than plain JSON (see
    /// ``labelledOtherwise(_:)``); ASCII text without Foundation, any other by characters.
    static func labelsOtherwise(_ h: HeaderField) -> Bool {
        guard h.name.utf8.allSatisfy({ $0 < 0x80 }) else { return labelsOtherwiseByCharacters(h) }
        let encoding = h.name.equalsIgnoringASCIICase("content-encoding")
        guard encoding || h.name.equalsIgnoringASCIICase("content-type") else { return false }
        guard h.value.utf8.allSatisfy({ $0 < 0x80 }) else { return labelsOtherwiseByCharacters(h) }
        // CharacterSet.whitespaces within ASCII: space and tab.
        func trimmed<S: StringProtocol>(_ s: S) -> String {
            String(String(s.drop { $0 == " " || $0 == "\t" }.reversed()).drop { $0 == " " || $0 == "\t" }.reversed())
        }
        let value = trimmed(h.value)
        if encoding { return !value.isEmpty && !value.equalsIgnoringASCIICase("identity") }
        let media = trimmed(value.prefix { $0 != ";" })
        return !media.equalsIgnoringASCIICase("application/json") && !String(media.suffix(5)).equalsIgnoringASCIICase("+json")
    }

    /// ``labelsOtherwise(_:)`` by Unicode characters, as first written: Unicode trimming and
    /// lower-casing, for headers of any text.
    static func labelsOtherwiseByCharacters(_ h: HeaderField) -> Bool {
        let name = h.name.lowercased()
        let value = h.value.trimmingCharacters(in: .whitespaces).lowercased()
        if name == "content-encoding", !value.isEmpty, value != "identity" { return true }
        if name == "content-type" {
            let media = value.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces)
            if media != "application/json" && !media.hasSuffix("+json") { return true }
        }
        return false
    }

    static func ambiguous(_ body: Data, strict: inout JSONValue?) -> Bool {
        if let value = strict {
            guard let duplicate = JSONDuplicateKey.first(in: body) else { return false }
            // A top-level member stated twice is unknown to the model (`null`): parsers keep the
            // first or the last (a ninth outside tester: `assigned` true then false, the Swift SDK
            // kept the first and fanned out, the model the last and failed it).
            if case .object(var members) = value, duplicate.path == "$" + DuplicateKeys.member(duplicate.key) {
                for key in members.keys where key.isExactly(duplicate.key) { members[key] = .null }
                strict = .object(members)
            }
            return true
        }
        if body.starts(with: [0xEF, 0xBB, 0xBF]), let v = try? JSONValue.parse(Data(body.dropFirst(3))).value {
            strict = v
            return true
        }
        let text = String(decoding: body, as: UTF8.self)
        if text.range(of: #"\b(NaN|-?Infinity)\b"#, options: .regularExpression) != nil,
           let v = try? JSONValue.parse(Data(text.replacingOccurrences(of: #"-?\bInfinity\b|\bNaN\b"#, with: "null", options: .regularExpression).utf8)).value {
            strict = v
            return true
        }
        // Nesting past 256 levels that is otherwise valid JSON (read to 1,000): Python reads it. A
        // truncated or malformed deep body stays a failure for everyone, and the value is the
        // body's own (a ninth outside tester: as `{}` it hid an `assigned: false`, and a truncated
        // one let `caches-failure` pass).
        if let v = try? JSONValue.parse(body, maxDepth: 1_000).value {
            // Kept to 64 levels (deeper values `null`): the record is written in histories and
            // worker records, whose encoders stop short of such depths.
            strict = Self.shallow(v, levels: 64)
            return true
        }
        return false
    }

    /// `value` with everything nested deeper than `levels` replaced by `null`.
    static func shallow(_ value: JSONValue, levels: Int) -> JSONValue {
        guard levels > 0 else { return .null }
        switch value {
        case .array(let a): return .array(a.map { shallow($0, levels: levels - 1) })
        case .object(let o): return .object(o.mapValues { shallow($0, levels: levels - 1) })
        default: return value
        }
    }

    /// Decoded fixtures and fault rules by their JSON: the explorer and the mutant runs start the
    /// same scenario thousands of times. Behind an `NSLock`; only successful decodes are kept.
    private static let decodeLock = NSLock()
    // nonisolated(unsafe): only touched inside `decodeLock`.
    nonisolated(unsafe) private static var decodeCache: [JSONValue: any Sendable] = [:]

    static func decoded<T: Decodable & Sendable>(_ type: T.Type, _ json: JSONValue) throws -> T {
        if let hit = decodeLock.withLock({ decodeCache[json] }) as? T { return hit }
        let value = try JSONDecoder().decode(type, from: json.serialized())
        decodeLock.withLock {
            if decodeCache.count > 4096 { decodeCache.removeAll() }
            decodeCache[json] = value
        }
        return value
    }

    func baseURL(client: String) -> String {
        let owner = originOwners[ExactKey(client)] ?? client
        let index = clients.firstIndex(where: { $0.isExactly(owner) }) ?? clients.count
        return "http://\(backend.baseURL.host ?? "localhost"):\(Self.firstClientPort + index)"
    }

    static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let c):
            return "\(c.debugDescription) at \(path(c.codingPath))"
        case DecodingError.keyNotFound(let key, let c):
            return "missing key '\(key.stringValue)' at \(path(c.codingPath))"
        case DecodingError.typeMismatch(let type, let c):
            return "a value that is not \(type) at \(path(c.codingPath)): \(c.debugDescription)"
        case DecodingError.valueNotFound(let type, let c):
            return "null where \(type) is needed at \(path(c.codingPath))"
        default:
            return "\(error)"
        }
    }

    /// A decoding error as (the JSON path below the decoded value, what was wrong), e.g.
    /// (`.action.respond`, `status must be 200...599 (a final status), got -5`).
    static func locate(_ error: Error) -> (path: String, what: String) {
        func rel(_ keys: [CodingKey]) -> String { String(path(keys).dropFirst()) }
        switch error {
        case DecodingError.dataCorrupted(let c):
            let text = c.underlyingError.map { "\($0)" } ?? c.debugDescription
            return (rel(c.codingPath), text.isEmpty ? "data that does not decode" : text)
        case DecodingError.keyNotFound(let key, let c):
            return (rel(c.codingPath), "no '\(key.stringValue)' (required)")
        case DecodingError.typeMismatch(let type, let c):
            return (rel(c.codingPath), "a value that is not \(type == Double.self || type == Int.self ? "a number in range" : "\(type)")")
        case DecodingError.valueNotFound(let type, let c):
            return (rel(c.codingPath), "null or an out-of-range number where \(type) is needed")
        default:
            return ("", "\(error)")
        }
    }

    static func path(_ keys: [CodingKey]) -> String {
        "$" + keys.map { k in k.intValue.map { "[\($0)]" } ?? ".\(k.stringValue)" }.joined()
    }

    #if canImport(FoundationNetworking)
    // Built once, then only ever copied.
    static let configurationTemplate: URLSessionConfiguration = {
        let c = URLSessionConfiguration.ephemeral
        c.protocolClasses = [MockURLProtocol.self]
        c.urlCache = nil
        c.requestCachePolicy = .reloadIgnoringLocalCacheData
        return c
    }()
    #endif

    func session(client: String) -> URLSession { session(client: client, dedicated: false) }

    /// A session for `client`: on Linux one taken from ``InProcessSessions`` (given back at
    /// ``shutdown()``), or, `dedicated`, one of this scenario's own whose every request counts
    /// here (a client whose `base_url` is not this backend: its requests name no host of ours).
    func session(client: String, dedicated: Bool) -> URLSession {
        #if canImport(FoundationNetworking)
        if !dedicated {
            let session = InProcessSessions.take()
            // Taken after shutdown (an SDK client creating a session late): straight back.
            let kept = state.withLock { s -> Bool in
                if !s.isShutDown { s.pooled.append(session) }
                return !s.isShutDown
            }
            if !kept { InProcessSessions.giveBack([session]) }
            return session
        }
        // Routing is by the backend's host, so one configuration serves every backend; building
        // an ephemeral configuration costs more than a scenario's own work, so it is copied.
        let configuration = Self.configurationTemplate.copy() as! URLSessionConfiguration
        let session: URLSession = CountingURLSession(configuration: configuration, counter: counter)
        #else
        let session = backend.makeURLSession()
        #endif
        state.withLock { $0.sessions.append(session) }
        return session
    }

    func addFault(id: String, rule: JSONValue, file: String, path: String) throws {
        let decoded: FaultRule
        do { decoded = try Self.decoded(FaultRule.self, rule) }
        catch {
            let inner = Self.describe(error)
            throw ScenarioError(file: file, path: path, expected: "a fault rule (Documentation/ScenarioFormat.md, Faults)",
                                found: inner.replacingOccurrences(of: "at $", with: "at \(path)"))
        }
        var named = decoded
        if named.name == nil { named.name = id }
        let faultID = backend.addFault(named)
        state.withLock { $0.faults[ExactKey(id)] = faultID }
    }

    func removeFault(id: String) {
        if let faultID = state.withLock({ $0.faults[ExactKey(id)] }) { backend.removeFault(faultID) }
    }

    /// Why fault `id` never fired: it matched no request; the mock's nearest request and the
    /// fields that differed (see `neverMatched(fault:)` in BackendPort).
    func neverMatched(fault id: String) -> String? {
        guard let faultID = state.withLock({ $0.faults[ExactKey(id)] }),
              let unused = backend.unusedFaults.first(where: { $0.id == faultID }), unused.matched == 0 else { return nil }
        return unused.nearest
    }

    /// How many requests fault `id` has ever made wait at the mock: held, or kept for a delay
    /// or a timeout. The same in process and over TCP: a timeout fault parks its request silently
    /// over TCP (a hold of action `timeout`) but only sleeps in process, and `wait_for held` on it
    /// passed through an adapter and reported a deadlock in process (a fifteenth outside tester).
    func heldCount(fault id: String) -> Int {
        guard let faultID = state.withLock({ $0.faults[ExactKey(id)] }) else { return 0 }
        let waiting: Set<String> = ["hold", "timeout", "delay", "delay_then_drop"]
        return backend.history.filter { $0.fault?.id == faultID && ($0.hold != nil || waiting.contains($0.fault!.action)) }.count
    }

    func release(fault id: String, count: Int?, override: JSONValue?) throws -> Int {
        guard let faultID = state.withLock({ $0.faults[ExactKey(id)] }) else { return 0 }
        var response: MockResponse?
        // A transport failure instead of an answer (the parser's `transport_error` form).
        var failing: Bool?
        if case .object(let o)? = override, case .object(let failure)? = o["transport_error"] {
            failing = failure["processed"] == .bool(true)
        } else if let override {
            guard case .object(let o) = override, case .number(let status)? = o["status"] else {
                throw ScenarioError(file: "", path: "release.response", expected: "{\"status\": N, \"json\": ...}", found: override.jsonText)
            }
            let body = o["json"].map { $0.serialized() } ?? Data((o["body"]?.stringValue ?? "").utf8)
            response = MockResponse(status: Int(status), headers: [("Content-Type", "application/json")], body: body)
        }
        let held = backend.heldRequests.filter { $0.fault == faultID }
        var released = 0
        // The mock answers each request as it is released: the ones released together (`count`
        // N, `all`) are released in a canonical order, by content (client, method, target, body),
        // not in the order they happened to park, so the mock's answers (rate-limit counters,
        // which request creates the sticky assignment) are the same on every run.
        for h in canonicalOrder(Array(held.prefix(count ?? held.count))) {
            // No longer parked from this moment: quiescence waits for its answer.
            let wake = state.withLock { $0.parkedUntil.removeValue(forKey: h.seq) }
            let done = failing.map { backend.releaseFailing(h.id, processed: $0) } ?? backend.release(h.id, with: response)
            if done { released += 1 } else if let wake { state.withLock { $0.parkedUntil[h.seq] = wake } }
        }
        return released
    }

    /// `held` sorted by the content of each request (client, method, target, body), then by
    /// sequence number; identity text compared by Unicode scalars.
    private func canonicalOrder(_ held: [HeldRequest]) -> [HeldRequest] {
        guard held.count > 1 else { return held }
        let history = backend.history
        let bySeq = Dictionary(history.map { ($0.seq, $0) }, uniquingKeysWith: { a, _ in a })
        func key(_ h: HeldRequest) -> [UInt32] {
            guard let e = bySeq[h.seq] else { return [] }
            let r = record(e, parked: true)
            let text = "\(r.client ?? "")\u{0}\(r.method)\u{0}\(r.target)\u{0}\(r.body?.jsonText ?? "")"
            return text.unicodeScalars.map(\.value)
        }
        let keyed = held.map { (key($0), $0) }
        return keyed.sorted { a, b in a.0 != b.0 ? a.0.lexicographicallyPrecedes(b.0) : a.1.seq < b.1.seq }.map(\.1)
    }

    func updateFixtures(_ change: FixtureChange) throws {
        var problem: String?
        backend.updateFixtures { f in
            switch change {
            case .experimentStatus(let key, let status):
                guard let i = f.experiments.firstIndex(where: { $0.key.isExactly(key) }) else { problem = "no experiment '\(key)'"; return }
                guard let s = LifecycleStatus(rawValue: status) else { problem = "unknown status '\(status)'"; return }
                f.experiments[i].status = s
            case .flagStatus(let key, let status):
                guard let i = f.flags.firstIndex(where: { $0.key.isExactly(key) }) else { problem = "no flag '\(key)'"; return }
                guard let s = LifecycleStatus(rawValue: status) else { problem = "unknown status '\(status)'"; return }
                f.flags[i].status = s
            case .flagRollout(let key, let percentage):
                guard let i = f.flags.firstIndex(where: { $0.key.isExactly(key) }) else { problem = "no flag '\(key)'"; return }
                f.flags[i].rolloutPercentage = Int(percentage)
            case .experimentAllocations(let key, let allocations):
                guard let i = f.experiments.firstIndex(where: { $0.key.isExactly(key) }) else { problem = "no experiment '\(key)'"; return }
                problem = MockBackendPort.reallocate(&f.experiments[i], allocations)
            case .experimentRestart(let key):
                if f.experiments.firstIndex(where: { $0.key.isExactly(key) }) == nil { problem = "no experiment '\(key)'" }
            }
        }
        if problem == nil, case .experimentRestart(let key) = change { backend.restartExperiment(key) }
        if let problem {
            throw ScenarioError(file: "", path: "fixtures", expected: "a change to existing fixtures (statuses: \(LifecycleStatus.allCases.map(\.rawValue)))", found: problem)
        }
    }

    /// How each request that parked at receipt was parked, by sequence number.
    func parkedAtReceipt() -> [Int: String] { state.withLock { $0.parkedHow } }

    /// The requests parked now: holds, and delays or timeouts whose time has not come, or has
    /// come while the mock's sleepers due then have not been woken yet (an `advance` wakes the
    /// SDK's sleepers at an instant, lets them settle, then the mock's).
    private func parkedNow(_ s: State) -> Set<Int> {
        let now = clock.now()
        let dueUnwoken = clock.mockSleepersDue > 0
        // On the clock's grid, where the mock's sleeper wakes: a delay ending off the grid (0.1 s
        // plus 1.2 s is a hair past 1.3 s in `Date` arithmetic) was still "parked" at 1.3 s, after
        // its sleeper was due, so the runner moved on before the mock answered and the answer
        // came at the next instant (a seventy-first outside tester, F2: the end of the advance).
        return Set(s.parkedUntil.compactMap { seq, until in (until.map { clock.onGrid($0) > now || dueUnwoken } ?? true) ? seq : nil })
    }

    func pendingDeadlines() -> [Date] {
        let now = clock.now()
        return state.withLock { s in s.parkedUntil.values.compactMap { $0 }.map(clock.onGrid).filter { $0 > now } }
    }

    func requests() -> [RequestRecord] {
        let (parked, finished) = state.withLock { (parkedNow($0), $0.finishedRecords) }
        var fresh: [Int: RequestRecord] = [:]
        // A transport's silent retry is the same request attempt as its original (the mock
        // journals it with `transport_retry_of`): not a request of the SDK's own.
        let records = backend.history.filter { $0.transportRetryOf == nil }.map { e -> RequestRecord in
            if e.outcome != nil, var r = finished[e.seq] {
                r.parked = parked.contains(e.seq)
                r.cancelled = e.cancelled
                return r
            }
            let r = record(e, parked: parked.contains(e.seq))
            if e.outcome != nil { fresh[e.seq] = r }
            return r
        }
        if !fresh.isEmpty { state.withLock { s in s.finishedRecords.merge(fresh) { old, _ in old } } }
        return records
    }

    func cancellationsOnTheirWay() -> [Int] { backend.cancellationsOnTheirWay() }

    func parkedRequests() -> [RequestRecord] {
        let (parked, known) = state.withLock { s in (parkedNow(s), s.parkedRecords) }
        guard !parked.isEmpty else { return [] }
        let missing = parked.filter { known[$0] == nil }
        var built: [Int: RequestRecord] = [:]
        if !missing.isEmpty {
            let history = backend.history
            for seq in missing where history.indices.contains(seq - 1) { built[seq] = record(history[seq - 1], parked: true) }
        }
        return state.withLock { s in
            for (seq, r) in built where s.parkedUntil[seq] != nil {
                var r = r
                r.cancelled = r.cancelled || s.cancelled.contains(seq)
                s.parkedRecords[seq] = r
            }
            return parkedNow(s).sorted().compactMap { s.parkedRecords[$0] }
        }
    }

    var requestCount: Int { backend.history.count }

    func exposures() -> [Exposure]? { backend.state.exposures }

    var unsettledRequests: Int { state.withLock { $0.open.subtracting(parkedNow($0)).count } }

    func record(_ e: HistoryEntry, parked: Bool) -> RequestRecord {
        var headers: [String: String] = [:]
        var client: String?
        for h in e.headers {
            if h.name.utf8.count == 4 && h.name.lowercased() == "host" {
                // The host names this run's backend instance: it attributes the request and is
                // left out of the record so equal runs give equal histories.
                if let colon = h.value.lastIndex(of: ":"), let port = Int(h.value[h.value.index(after: colon)...]),
                   clients.indices.contains(port - Self.firstClientPort) {
                    let owner = clients[port - Self.firstClientPort]
                    client = owner
                    // An origin a relaunched client took: the client launched last before it came.
                    if !originOwners.isEmpty, let relaunched = handovers.withLock({ $0[ExactKey(owner)] }),
                       let last = relaunched.last(where: { e.seq > $0.after }) {
                        client = last.client
                    }
                }
                continue
            }
            headers[h.name] = h.value
        }
        // Foundation's removingPercentEncoding is slow; most components have nothing to decode.
        func decoded(_ s: String) -> String? { s.utf8.contains(UInt8(ascii: "%")) ? s.removingPercentEncoding : s }
        // The query as the backend reads it (`+` is a space: a literal `+` in `user_id=a+b` is
        // user "a b" there, so it is here; a sixth outside tester: the checks and matchers took
        // it for user "a+b" while the mock served "a b"), the last value of a repeated name.
        let query = RequestRecord.decodedQuery(e.query)
        var response = e.response.flatMap { try? JSONValue.parse($0.body).value }
        let ambiguous = e.response.map { Self.ambiguous($0.body, strict: &response) || Self.labelledOtherwise($0.headers) } ?? false
        var responseHeaders: [String: String] = [:]
        for h in e.response?.headers ?? [] { responseHeaders[h.name] = h.value }
        return RequestRecord(seq: e.seq, client: client, method: e.method, path: decoded(e.path) ?? e.path,
                             target: e.path + (e.query.map { "?" + $0 } ?? ""), query: query, headers: headers,
                             body: e.json, status: e.response?.status, response: response, responseHeaders: responseHeaders,
                             fault: e.fault?.name, parked: parked, cancelled: e.cancelled, answered: e.outcome != nil,
                             cutOff: e.outcome == "drop_mid_body" ? true : nil, ambiguousBody: ambiguous ? true : nil,
                             duplicateKey: e.json == nil ? nil : JSONDuplicateKey.first(inValid: e.body)?.description,
                             bodyEmpty: e.body.isEmpty ? true : nil, apiKeyIndex: e.apiKeyIndex)
    }

    /// Marks the launch of `client`, relaunched on an earlier client's origin: requests the mock
    /// receives on that origin from now on are its own (`Scenario.originOwners`). Called before
    /// its SDK instance is made, so a request sent at construction counts as its.
    func handOver(to client: String) {
        guard let owner = originOwners[ExactKey(client)] else { return }
        let seen = backend.history.count
        handovers.withLock { $0[ExactKey(owner), default: []].append((seen, client)) }
    }

    func setObserver(_ observer: @escaping @Sendable (Int?, Bool) -> Void) {
        state.withLock { $0.observer = observer }
    }

    func shutdown() async -> [String] {
        let report = backend.shutdown()
        // The sessions are never invalidated: after a step timed out, the SDK under test may still
        // create data tasks on them (a later chunk, the next serialized fetch), and creating a
        // task on an invalidated session is a fatalError in FoundationNetworking (issue 10,
        // NOTES-linux-foundation.md). A session lives as long as the SDK client that holds it and
        // every task it created (CountingURLSession's completions keep it), then goes by itself.
        // Pooled sessions go back to InProcessSessions for the next scenario: from now on a
        // request to this backend's host (a late one of this scenario's clients) counts nowhere.
        InProcessSessions.unregister(host: backend.baseURL.host ?? "")
        #if canImport(FoundationNetworking)
        let pooled = state.withLock { s -> [CountingURLSession] in
            s.isShutDown = true
            s.sessions.removeAll()
            defer { s.pooled.removeAll() }
            return s.pooled
        }
        InProcessSessions.giveBack(pooled)
        #else
        state.withLock { s in s.isShutDown = true; s.sessions.removeAll() }
        #endif
        var problems: [String] = []
        let names = state.withLock { s in Dictionary(s.faults.map { ($0.value, $0.key.text) }, uniquingKeysWith: { a, _ in a }) }
        for h in report.unreleasedHolds {
            problems.append("request #\(h.seq) \(h.method) \(h.path)\(h.userID.map { " for user '\($0.unambiguous)'" } ?? "") still held by fault '\(names[h.fault] ?? h.label ?? "\(h.fault)")' (never released)")
        }
        for f in report.unusedFaults {
            let what = f.needed > 0 ? "matched \(f.matched) of the \(f.needed) requests it is for" : "never held a request"
            problems.append("fault '\(names[f.id] ?? f.name ?? "\(f.id)")' \(what) (\(f.nearest))")
        }
        return problems
    }

    deinit {
        // A port that never shut down (its runner failed to start) leaves nothing behind either.
        InProcessSessions.unregister(host: backend.baseURL.host ?? "")
        #if canImport(FoundationNetworking)
        InProcessSessions.giveBack(state.withLock { $0.pooled })
        #endif
    }

    var delegateQueuesIdle: Bool {
        #if canImport(FoundationNetworking)
        let queues = state.withLock { $0.sessions.map(\.delegateQueue) + $0.pooled.map(\.delegateQueue) }
        #else
        let queues = state.withLock { $0.sessions.map(\.delegateQueue) }
        #endif
        return queues.allSatisfy { $0.operationCount == 0 }
    }

    var outstandingTasks: Int? {
        #if canImport(FoundationNetworking)
        return counter.outstanding
        #else
        return nil
        #endif
    }

}
