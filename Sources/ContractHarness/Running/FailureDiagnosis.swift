import Foundation
import ExperimentlyMock

extension ScenarioExecution {
    /// What the SDK did wrong when a step cannot finish, in the contract's terms, or `nil` when
    /// the hang has no known cause (the caller then describes what is pending).
    ///
    /// Recognized: an operation started after its client's `clearCache()`/`close()` that sent no
    /// request of its own and waits on a request for the same (user, key) sent before the clear:
    /// the SDK kept its in-flight table across the clear (CONTRACT.md section 5, defects 1-2: a
    /// clear detaches the requests in flight; issue 11 section 9). Identity is compared by
    /// Unicode scalars.
    func diagnoseHang() -> String? {
        let requests = port.requests()
        for op in pending() where op.barrier > 0 {
            guard let user = op.user, let key = op.key else { continue }
            let same = requests.filter { r in
                r.client.isExactly(op.client) && r.users.contains { $0.unicodeScalars.elementsEqual(user.unicodeScalars) }
                    && r.key?.kind == key.kind && (r.key?.key.unicodeScalars.elementsEqual(key.key.unicodeScalars) ?? false)
            }
            guard !same.contains(where: { $0.seq > op.barrier }),
                  let old = same.last(where: { $0.seq <= op.barrier && !$0.answered }) else { continue }
            let clear = recorder.snapshot.last { $0.kind == .invoke && $0.client.isExactly(op.client) && ["clearCache", "close"].contains($0.name ?? "") }
            return "\(op.label) (\(op.name) of user '\(Attribution.show(user))', \(key.kind) '\(Attribution.show(key.key))') started after "
                + "\(clear?.name ?? "clearCache")() on client '\(op.client)' but sent no request of its own: it waits on request #\(old.seq), "
                + "sent before the clear (\(old.summary)). CONTRACT.md section 5 (defects 1 and 2): a clear detaches the requests in flight, "
                + "so the next call sends its own request; this SDK kept its in-flight table across the clear"
        }
        return sharedAcrossIdentities(requests) ?? appHang(requests)
    }

    /// `diagnoseHang` for a lookup that sent no request of its own (none for its client, user,
    /// kind and key unanswered, none received since it began) while one for the same key text is
    /// unanswered that is another user's, the other kind's (a flag and an experiment sharing a
    /// key) or another client's (an in-flight table shared by every client of the process): the
    /// SDK merges what CONTRACT.md section 4 keeps apart (single flight is per client, user and
    /// key; identity is exact, by Unicode scalars).
    /// Before, such a call was reported as a bare step timeout, "not judged against a contract
    /// rule" (a seventieth outside tester, F6).
    func sharedAcrossIdentities(_ requests: [RequestRecord]) -> String? {
        for op in pending() where !op.name.hasPrefix("app.") {
            guard let user = op.user, let key = op.key else { continue }
            let own = requests.filter { Self.owns($0, client: op.client, user: user, key: key, after: 0) }
            guard !own.contains(where: { !$0.answered || $0.seq > op.since }) else { continue }
            let other = requests.last { r in
                guard !r.answered, let k = r.key, k.key.isExactly(key.key) else { return false }
                return k.kind != key.kind || !r.users.containsExactly(user) || !r.client.isExactly(op.client)
            }
            guard let other, let k = other.key else { continue }
            let whose = !other.client.isExactly(op.client) ? "a request of client '\(other.client ?? "?")' (each client has its own requests)"
                : k.kind != key.kind ? "a request for \(k.kind) '\(Attribution.show(k.key))' (the other kind, of one key text)"
                : "a request of user '\(Attribution.show(other.users.first ?? ""))'"
            let subject = "\(op.label) (\(op.name) of user '\(Attribution.show(user))', \(key.kind) '\(Attribution.show(key.key))') on client '\(op.client)' "
            let rule = "CONTRACT.md section 4: single flight joins calls of one client for one user and one flag or experiment key"
            // Stated as fact only when the run was shown stuck at the limit; else the SDK may
            // still have been about to send (a slow transport; a seventy-first outside tester, F3).
            guard recorder.ranOutOfTimeUnproven else {
                return subject + "sent no request of its own: the only request in flight for its key text is #\(other.seq), \(whose) (\(other.summary)). "
                    + rule + "; this SDK shared another's request"
            }
            return subject + "had sent no request of its own when the limit ran out (the run could not be shown stuck: it may still have been about to send); "
                + "the only request in flight for its key text is #\(other.seq), \(whose) (\(other.summary)). If it waits on that one, this SDK shared another's request: " + rule
        }
        return nil
    }

    /// `diagnoseHang` for the reference apps' SDK calls: a lookup the app began after a clear of
    /// its client (the runner's or the app's own logout) that sent no request of its own and
    /// waits on one for the same user and key received before the clear. Before, the app's form
    /// of the defect gave a bare "not quiescent" (a fourth outside tester, finding 5).
    func appHang(_ requests: [RequestRecord]) -> String? {
        var clients: [String] = []
        for op in pending() where op.name.hasPrefix("app.") && !clients.contains(where: { $0.isExactly(op.client) }) { clients.append(op.client) }
        for client in clients {
            guard let app = withAppsLocked({ $0[ExactKey(client)] }) else { continue }
            for call in app.callsInFlight {
                guard let key = Self.cachedKey(of: call.operation), let user = Self.user(of: call.operation) else { continue }
                let barrier = clearBarrier(of: client, atOrdinal: call.ordinal)
                guard barrier > 0 else { continue }
                let same = requests.filter { Self.owns($0, client: client, user: user, key: key, after: 0) }
                guard !same.contains(where: { $0.seq > call.since }),
                      let old = same.last(where: { $0.seq <= barrier && !$0.answered }) else { continue }
                return "the app's \(call.operation.name) of user '\(Attribution.show(user))', \(key.kind) '\(Attribution.show(key.key))' on client '\(client)' "
                    + "began after a clear of the cache but sent no request of its own: it waits on request #\(old.seq), sent before the clear "
                    + "(\(old.summary)). CONTRACT.md section 5 (defects 1 and 2): a clear detaches the requests in flight, so the next call sends "
                    + "its own request; this SDK kept its in-flight table across the clear"
            }
        }
        return nil
    }
}

extension ScenarioExecution {
    /// A step's failure `message` with the contract rule the scenario is about appended (its
    /// `source`, e.g. "CONTRACT.md section 5, defect 2 (...)"), unless the message already names
    /// one: every failure says which rule was broken (issue 11 section 9). A failure the driver
    /// caused (an outcome `driverError`: the adapter refused a request, wrote a reply that is
    /// not the protocol, or died) names no rule: the SDK's behaviour was never seen.
    static func naming(_ message: String, source: String?) -> String {
        guard let source, source.contains("CONTRACT.md"), !message.contains("CONTRACT.md"),
              !message.contains("driverError: ") else { return message }
        return message + " [broken rule: \(source)]"
    }
}

extension SDKOperation {
    /// Whether the operation may send a request to the backend (cache reads, clears and
    /// `hashUser` never do; `close` may flush queued events). Used to name the step a `wait_for`
    /// waits on when it comes too early.
    var sendsRequests: Bool {
        switch self {
        case .clearCache, .clearOfflineCache, .hashUser, .getAssignments, .getEvaluatedFlags: return false
        default: return true
        }
    }
}

extension ScenarioExecution {
    /// The explanation of a `wait_for held` whose fault never matched a request: the mock's
    /// nearest request and what differed (attack finding 10), plus a hint when a `query` field the
    /// rule wants is in the requests' JSON bodies instead (e.g. `user_id` of a POST).
    static func neverMatchedText(fault: String, why: String, requests: [RequestRecord]) -> String {
        var text = "fault '\(fault)' never matched any request, so it held none (\(why))"
        var hinted: [String] = []
        // Phrases look like `nearest request #1 POST /path: query user_id is absent, rule wants 'u'; ...`.
        let phrases = why.components(separatedBy: "; ").map { $0.components(separatedBy: ": ").last ?? $0 }
        for phrase in phrases where phrase.hasPrefix("query ") && phrase.contains(" is absent") {
            let name = String(phrase.dropFirst("query ".count).prefix { $0 != " " })
            guard !hinted.contains(name), requests.contains(where: { $0.body?[name] != nil }) else { continue }
            hinted.append(name)
            text += "; '\(name)' is in the request body, not the query: match it with \"body\": {\"\(name)\": ...}"
        }
        return text
    }
}

extension ScenarioExecution {
    /// The history lines a failed `assert` quotes: the events the assertion is about (the
    /// requests it counts, the assignment requests behind the exposures it counts, the requests
    /// for the user whose cache it reads), each with the event just before it (what sent it),
    /// then the most recent events up to `limit` lines, in history order. Without such events
    /// (or for app assertions) the last `limit` events. Attack finding 11: a slice of only the
    /// last 12 events missed the offending request of a count assertion.
    func slice(for expectation: Expectation, limit: Int = 14) -> [String] {
        Self.focused(currentHistory(), limit: limit) { e in
            guard let r = e.request else { return false }
            return Self.concerns(expectation, r)
        }
    }

    /// Whether request `r` is one `expectation` is about. Identity by Unicode scalars.
    static func concerns(_ expectation: Expectation, _ r: RequestRecord) -> Bool {
        func same(_ a: String?, _ b: String?) -> Bool {
            guard let b else { return true }
            return a.map { $0.unicodeScalars.elementsEqual(b.unicodeScalars) } ?? false
        }
        func forUser(_ user: String?) -> Bool { user == nil || r.users.contains { same($0, user) } }
        switch expectation {
        case .requests(let match, _, _): return r.matches(match)
        case .exposures(let user, let experiment, _, _):
            return r.path.hasSuffix("/tracking/assign") && forUser(user) && (experiment == nil || same(r.key?.key, experiment))
        case .cache(let client, let user, _, _), .persisted(let client, _, let user, _, _, _), .cached(let client, _, let user, _, _, _):
            return same(r.client, client) && forUser(user)
        case .app, .reported: return false
        }
    }

    /// `history` cut to `limit` lines: the events `relevant` picks (the earliest and latest when
    /// there are too many), each with its predecessor, then the tail.
    static func focused(_ history: [HistoryEvent], limit: Int, relevant: (HistoryEvent) -> Bool) -> [String] {
        let hits = history.indices.filter { relevant(history[$0]) }
        guard !hits.isEmpty, history.count > limit else { return history.suffix(limit).map(\.line) }
        let budget = max(1, limit - 4)
        let chosen = hits.count <= budget ? hits : Array(hits.prefix(budget / 2)) + Array(hits.suffix(budget - budget / 2))
        var keep = Set(chosen)
        // What sent each request: the event before the first request line of a run of hits.
        for i in chosen where i > 0 && !keep.contains(i - 1) && keep.count < budget + 2 { keep.insert(i - 1) }
        var tail = history.count - 1
        while keep.count < limit && tail >= 0 { keep.insert(tail); tail -= 1 }
        return keep.sorted().map { history[$0].line }
    }
}
