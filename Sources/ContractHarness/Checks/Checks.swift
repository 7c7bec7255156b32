import Foundation
import ExperimentlyMock

/// What a named check reads: the scenario, its history, and the clients (for end-of-run cache queries).
struct CheckContext: Sendable {
    let scenario: Scenario
    let history: [HistoryEvent]
    let clients: [String: any DriverClient]
    let port: any BackendPort
    let driver: any SDKDriver
    let app: ReferenceApp?

    var requests: [(event: HistoryEvent, record: RequestRecord)] {
        history.compactMap { e in e.kind == .request ? e.request.map { (e, $0) } : nil }
    }

    func responseIndex(seq: Int) -> Int? {
        history.first { $0.kind == .response && $0.request?.seq == seq }?.index
    }

    func slice(around indices: [Int], radius: Int = 2) -> [String] {
        guard let low = indices.min(), let high = indices.max() else { return [] }
        let from = max(0, low - radius), to = min(history.count - 1, high + radius)
        guard from <= to else { return [] }
        return history[from...to].map(\.line)
    }
}

/// The named checks over a whole history (scenario key `checks`), each a function of the history
/// that fails a broken SDK; see `Documentation/ScenarioFormat.md` for what each one asserts.
enum Checks {
    static func run(_ name: String, _ c: CheckContext) async -> [CheckResult] {
        let problems: [(String, [String])]
        switch name {
        case "stickiness": problems = stickiness(c)
        case "fan_out": problems = fanOut(c, sizesOnly: false)
        case "batch_chunking": problems = fanOut(c, sizesOnly: true)
        case "single_flight": problems = singleFlight(c)
        case "no_fallback_on_404", "offline_fallback": problems = offlineFallback(c)
        case "no_stale_write": problems = await cacheMatchesModel(c)
        case "exposure_after_display": problems = exposureAfterDisplay(c)
        case "no_stale_after_logout": problems = await noStaleAfterLogout(c)
        case "golden_vectors": problems = await goldenVectors(c)
        case "contract_smoke": problems = smoke(c)
        default: problems = [("unknown check \(name)", [])]
        }
        if problems.isEmpty { return [CheckResult(name: name, passed: true)] }
        return [CheckResult(name: name, passed: false,
                            message: problems.prefix(3).map(\.0).joined(separator: " | ") + (problems.count > 3 ? " (+\(problems.count - 3) more)" : ""),
                            history: problems.first?.1)]
    }

    // MARK: stickiness

    /// Every answer for one (user, experiment) names the same variant: the SDK's outcomes and the
    /// backend's `assigned:true` responses alike.
    static func stickiness(_ c: CheckContext) -> [(String, [String])] {
        var seen: [ExactKey: (variant: String, index: Int)] = [:]   // exact (user, experiment)
        var problems: [(String, [String])] = []
        func observe(user: String, experiment: String, value: JSONValue, index: Int) {
            guard value["assigned"] != .bool(false), case .string(let variant)? = value["variant_name"] else { return }
            let key: ExactKey = "\(user)\u{0}\(experiment)"
            if let first = seen[key], !first.variant.isExactly(variant) {
                problems.append(("user '\(user.unambiguous)' got variant '\(first.variant.unambiguous)' then '\(variant.unambiguous)' in experiment '\(experiment.unambiguous)'",
                                 c.slice(around: [first.index, index], radius: 1)))
            } else if seen[key] == nil {
                seen[key] = (variant, index)
            }
        }
        let invokes = Dictionary(c.history.filter { $0.kind == .invoke }.compactMap { e in e.label.map { (ExactKey($0), e) } }, uniquingKeysWith: { a, _ in a })
        for e in c.history {
            if e.kind == .response, let r = e.request, r.path == "/api/v1/tracking/assign", r.succeeded, let response = r.response,
               case .string(let user)? = response["user_id"], case .string(let exp)? = response["experiment_key"] {
                observe(user: user, experiment: exp, value: response, index: e.index)
            }
            if e.kind == .complete, e.name == "getAssignment", let label = e.label, let invoke = invokes[ExactKey(label)],
               case .object(let o)? = e.outcome, let value = o["value"],
               case .string(let exp)? = invoke.detail?["experiment"] {
                let user: String
                switch invoke.detail?["user"] {
                case .string(let u)?: user = u
                case .object(let u)?: if case .string(let id)? = u["id"] { user = id } else { continue }
                default: continue
                }
                observe(user: user, experiment: exp, value: value, index: e.index)
            }
        }
        return problems
    }

    // MARK: cache model

    /// An independent model of each client's memory cache, rebuilt from the history: a 2xx answer
    /// to a request received after the client's last clear is cached for the TTL; `clearCache` and
    /// `close` empty it; `clearOfflineCache` keeps it but counts as a clear for requests in flight.
    struct CacheModel {
        struct Entry { var value: JSONValue; var expires: Double; var order: Int }
        var flags: [ExactKey: [ExactKey: Entry]] = [:]        // user -> key -> entry, both exact
        var assignments: [ExactKey: [ExactKey: Entry]] = [:]
        var counter = 0

        mutating func clear() { flags.removeAll(); assignments.removeAll() }

        func keys(_ table: [ExactKey: [ExactKey: Entry]], user: String, at time: Double, filter: (JSONValue) -> Bool = { _ in true }) -> [String] {
            (table[ExactKey(user)] ?? [:]).filter { $0.value.expires > time && filter($0.value.value) }
                .sorted { $0.value.order < $1.value.order }.map(\.key.text)
        }
    }

    /// Replays the history up to each event, calling `visit` before applying each event.
    static func replayCaches(_ c: CheckContext, visit: (HistoryEvent, [ExactKey: CacheModel]) -> Void) -> [ExactKey: CacheModel] {
        var models: [ExactKey: CacheModel] = [:]   // client name (exact) -> model
        var epochs: [ExactKey: Int] = [:]
        var epochAtReceipt: [Int: Int] = [:]
        let ttl = Dictionary(c.scenario.clients.map { (ExactKey($0.name), $0.settings.cacheTTL) }, uniquingKeysWith: { a, _ in a })
        for e in c.history {
            visit(e, models)
            switch e.kind {
            case .invoke where ["clearCache", "close"].contains(e.name ?? ""):
                if let client = e.client.exactKey { epochs[client, default: 0] += 1; models[client, default: CacheModel()].clear() }
            case .invoke where e.name == "clearOfflineCache":
                // CONTRACT.md section 5.1: a response to a request that started before
                // clearOfflineCache() is written nowhere, though the memory cache itself stays.
                if let client = e.client.exactKey { epochs[client, default: 0] += 1 }
            case .marker where e.name == "logout" || e.name == "undo":
                if let client = e.client.exactKey { epochs[client, default: 0] += 1; models[client, default: CacheModel()].clear() }
            case .request:
                if let r = e.request, let client = r.client.exactKey { epochAtReceipt[r.seq] = epochs[client, default: 0] }
            case .response:
                // A request the client cancelled (its deadline, close, every waiter gone) is never
                // cached, even when the mock answers it later (a released hold).
                guard let r = e.request, let client = r.client.exactKey, r.succeeded, !r.cancelled, let key = r.key, let user = r.users.first,
                      epochAtReceipt[r.seq] == epochs[client, default: 0], let value = r.response else { break }
                var model = models[client, default: CacheModel()]
                model.counter += 1
                let entry = CacheModel.Entry(value: value, expires: e.time + (ttl[client] ?? 300), order: model.counter)
                if key.kind == "flag" { model.flags[ExactKey(user), default: [:]][ExactKey(key.key)] = entry }
                else { model.assignments[ExactKey(user), default: [:]][ExactKey(key.key)] = entry }
                models[client] = model
            default: break
            }
        }
        return models
    }

    /// The memory caches the SDK reports at the end equal the model: nothing stale written after
    /// a clear, no failure cached, nothing lost.
    static func cacheMatchesModel(_ c: CheckContext) async -> [(String, [String])] {
        let models = replayCaches(c) { _, _ in }
        let end = c.history.last?.time ?? 0
        // Every user a request or an operation named: an SDK that serves one user's entry to a
        // canonically equivalent spelling reports it under a user the history never cached.
        var users = Set<ExactKey>()
        for (_, r) in c.requests { users.formUnion(r.users.map { ExactKey($0) }) }
        for e in c.history where e.kind == .invoke && ["getAssignment", "evaluateFlag"].contains(e.name ?? "") {
            switch e.detail?["user"] {
            case .string(let u)?: users.insert(ExactKey(u))
            case .object(let u)?: if case .string(let id)? = u["id"] { users.insert(ExactKey(id)) }
            default: break
            }
        }
        var problems: [(String, [String])] = []
        for client in c.scenario.clients.map(\.name) {
            guard let driverClient = c.clients[client] else { continue }
            let model = models[ExactKey(client)] ?? CacheModel()
            for user in users.sorted().map(\.text) {
                let wantA = model.keys(model.assignments, user: user, at: end)
                let wantF = model.keys(model.flags, user: user, at: end)
                let gotA = await ScenarioExecution.query(driverClient, .getAssignments(user: user)).map(assignmentKeys) ?? []
                let gotF = await ScenarioExecution.query(driverClient, .getEvaluatedFlags(user: user)).map(strings) ?? []
                if !wantA.elementsEqual(gotA, by: { $0.isExactly($1) }) {
                    problems.append(("client '\(client.unambiguous)' caches assignments \(gotA.map(\.unambiguous)) for user '\(user.unambiguous)'; the history supports \(wantA.map(\.unambiguous))",
                                     relevant(c, user: user)))
                }
                if !wantF.elementsEqual(gotF, by: { $0.isExactly($1) }) {
                    problems.append(("client '\(client.unambiguous)' caches flags \(gotF.map(\.unambiguous)) for user '\(user.unambiguous)'; the history supports \(wantF.map(\.unambiguous))",
                                     relevant(c, user: user)))
                }
            }
        }
        return problems
    }

    static func relevant(_ c: CheckContext, user: String) -> [String] {
        Array(c.history.filter { e in
            (e.request?.users.containsExactly(user) ?? false) || ["clearCache", "close", "logout", "undo", "clearOfflineCache"].contains(e.name ?? "")
        }.suffix(10).map(\.line))
    }

    static func assignmentKeys(_ v: JSONValue) -> [String] {
        guard case .array(let items) = v else { return [] }
        return items.compactMap { if case .string(let k)? = $0["experiment_key"] { return k } else { return nil } }
    }

    static func strings(_ v: JSONValue) -> [String] {
        guard case .array(let items) = v else { return [] }
        return items.compactMap { if case .string(let s) = $0 { return s } else { return nil } }
    }

    // MARK: fan-out and batch chunking

    /// Each unkeyed event becomes one `/batch` entry per cached `assigned:true` assignment of its
    /// user, then one per cached flag, in insertion order, each with exactly one key; `trackBatch`
    /// sends keyed events as they are and chunks of 100 in order.
    static func fanOut(_ c: CheckContext, sizesOnly: Bool) -> [(String, [String])] {
        var problems: [(String, [String])] = []
        var expectations: [ExactKey: (invoke: HistoryEvent, expected: [String])] = [:]   // by label
        _ = replayCaches(c) { e, models in
            guard e.kind == .invoke, let client = e.client, let label = e.label,
                  ["track", "trackWithStatus", "trackBatch"].contains(e.name ?? "") else { return }
            let model = models[ExactKey(client)] ?? CacheModel()
            let events: [JSONValue] = e.name == "trackBatch" ? { if case .array(let a)? = e.detail { return a } else { return [] } }() : [e.detail ?? .null]
            var expected: [String] = []
            for event in events {
                guard case .string(let user)? = event["user"], case .string(let name)? = event["name"] else { continue }
                if event["experiment"] != nil || event["flag"] != nil {
                    if e.name != "trackBatch" { return }   // a keyed track goes to /track, not fan-out
                    expected.append(entry(name: name, experiment: event["experiment"], flag: event["flag"]))
                    continue
                }
                expected += model.keys(model.assignments, user: user, at: e.time, filter: { $0["assigned"] != .bool(false) })
                    .map { entry(name: name, experiment: .string($0), flag: nil) }
                expected += model.keys(model.flags, user: user, at: e.time).map { entry(name: name, experiment: nil, flag: .string($0)) }
            }
            expectations[ExactKey(label)] = (e, expected)
        }
        let completes = Dictionary(c.history.filter { $0.kind == .complete }.compactMap { e in e.label.map { (ExactKey($0), e.index) } }, uniquingKeysWith: { a, _ in a })
        // Tracking requests happen only while a tracking operation (or an app event) runs: an
        // SDK that sends events nobody asked for (an exposure for a fallback, say) is caught here.
        let windows = c.history.filter { $0.kind == .invoke && ["track", "trackWithStatus", "trackBatch", "app.event"].contains($0.name ?? "") }
            .map { (client: $0.client, from: $0.index, to: $0.label.flatMap { completes[ExactKey($0)] } ?? Int.max) }
        for (event, record) in c.requests where ["/api/v1/tracking/track", "/api/v1/tracking/batch"].contains(record.path) {
            if !windows.contains(where: { $0.client.isExactly(record.client) && $0.from < event.index && event.index < $0.to }) {
                problems.append(("a tracking request no operation asked for: \(record.summary)", c.slice(around: [event.index], radius: 3)))
            }
        }
        for (label, item) in expectations.sorted(by: { $0.value.invoke.index < $1.value.invoke.index }) {
            guard let end = completes[label] else { continue }
            let batches = c.requests.filter { $0.event.index > item.invoke.index && $0.event.index < end
                && $0.record.client.isExactly(item.invoke.client) && $0.record.path == "/api/v1/tracking/batch" }.map(\.record)
            let sizes = batches.map(\.events.count)
            let wantSizes = stride(from: 0, to: item.expected.count, by: 100).map { min(100, item.expected.count - $0) }
            if sizes != wantSizes {
                problems.append(("\(label.text.unambiguous) (\(item.invoke.name ?? "")) should send batches of \(wantSizes) for \(item.expected.count) entries, sent \(sizes)",
                                 c.slice(around: [item.invoke.index, end], radius: 0).suffix(12).map { $0 }))
                continue
            }
            if sizesOnly { continue }
            let got = batches.flatMap(\.events).map { entry(name: $0["event_name"], experiment: $0["experiment_key"], flag: $0["feature_flag_key"]) }
            if !got.elementsEqual(item.expected, by: { $0.isExactly($1) }) {
                problems.append(("\(label.text.unambiguous) fanned out to \(got.map(\.unambiguous)), expected \(item.expected.map(\.unambiguous))",
                                 c.slice(around: [item.invoke.index, end], radius: 0).suffix(12).map { $0 }))
            }
        }
        return problems
    }

    static func entry(name: String, experiment: JSONValue?, flag: JSONValue?) -> String {
        var s = name
        if case .string(let e)? = experiment { s += " experiment=\(e)" }
        if case .string(let f)? = flag { s += " flag=\(f)" }
        return s
    }

    static func entry(name: JSONValue?, experiment: JSONValue?, flag: JSONValue?) -> String {
        if case .string(let n)? = name { return entry(name: n, experiment: experiment, flag: flag) }
        return entry(name: "?", experiment: experiment, flag: flag)
    }

    // MARK: single flight

    /// No request for a (client, user, key) is received while an earlier one for the same triple
    /// is still unanswered, unless the client cleared or closed in between, or gave the earlier
    /// one up (cancelled it: its own deadline, every waiter cancelled).
    static func singleFlight(_ c: CheckContext) -> [(String, [String])] {
        var open: [ExactKey: (seq: Int, index: Int, epoch: Int)] = [:]   // exact (client, user, kind, key)
        var epochs: [ExactKey: Int] = [:]
        var problems: [(String, [String])] = []
        let cancelled = Set(c.requests.filter { $0.record.cancelled }.map(\.record.seq))
        for e in c.history {
            switch e.kind {
            case .invoke where ["clearCache", "close"].contains(e.name ?? ""):
                if let client = e.client { epochs[ExactKey(client), default: 0] += 1 }
            case .marker where e.name == "logout" || e.name == "undo":
                if let client = e.client { epochs[ExactKey(client), default: 0] += 1 }
            case .request:
                guard let r = e.request, let client = r.client, let key = r.key, let user = r.users.first else { continue }
                let id: ExactKey = "\(client)\u{0}\(user)\u{0}\(key.kind)\u{0}\(key.key)"
                if let first = open[id], first.epoch == epochs[ExactKey(client), default: 0], !cancelled.contains(first.seq) {
                    problems.append(("client '\(client.unambiguous)' sent a second request for \(key.kind) '\(key.key.unambiguous)' of user '\(user.unambiguous)' while request #\(first.seq) was in flight",
                                     c.slice(around: [first.index, e.index], radius: 0).suffix(12).map { $0 }))
                } else {
                    open[id] = (r.seq, e.index, epochs[ExactKey(client), default: 0])
                }
            case .response:
                guard let r = e.request, let client = r.client, let key = r.key, let user = r.users.first else { continue }
                let id: ExactKey = "\(client)\u{0}\(user)\u{0}\(key.kind)\u{0}\(key.key)"
                if open[id]?.seq == r.seq { open[id] = nil }
            default: break
            }
        }
        return problems
    }

    // MARK: offline fallback

    /// A 404 answer gives `flagNotFound`/`experimentNotFound`, never a value, and deletes the
    /// persisted entry; any other failure gives the value persisted for that same user and key in
    /// the client's store, or an error when none is.
    static func offlineFallback(_ c: CheckContext) -> [(String, [String])] {
        // Every table is keyed exactly (Unicode scalars): NFC and NFD spellings of a user are two
        // users, each with its own persisted entries.
        let storeOf = Dictionary(c.scenario.clients.map { (ExactKey($0.name), $0.store) }, uniquingKeysWith: { a, _ in a })
        let fallbackOn = Dictionary(c.scenario.clients.map { (ExactKey($0.name), $0.settings.offlineFallback) }, uniquingKeysWith: { a, _ in a })
        var persisted: [ExactKey: JSONValue] = [:]   // store \0 kind \0 user \0 key
        var epochs: [ExactKey: Int] = [:]
        var epochAtReceipt: [Int: Int] = [:]
        var lastAttempt: [ExactKey: (record: RequestRecord, index: Int)] = [:]   // client \0 kind \0 user \0 key
        var invokes: [ExactKey: HistoryEvent] = [:]
        var problems: [(String, [String])] = []
        for e in c.history {
            switch e.kind {
            case .invoke:
                if let label = e.label { invokes[ExactKey(label)] = e }
                if let client = e.client.exactKey, ["clearCache", "close", "clearOfflineCache"].contains(e.name ?? "") {
                    epochs[client, default: 0] += 1
                    if e.name == "clearOfflineCache", let store = storeOf[client] ?? nil {
                        persisted = persisted.filter { !$0.key.text.hasExactPrefix(store + "\u{0}") }
                    }
                }
            case .marker where e.name == "logout" || e.name == "undo":
                if let client = e.client { epochs[ExactKey(client), default: 0] += 1 }
            case .marker where e.name == "seed_store":
                // An entry written into the store as given (seed_store step): persisted from now.
                if let client = e.client, let store = storeOf[ExactKey(client)] ?? nil, case .string(let kind)? = e.detail?["kind"],
                   case .string(let user)? = e.detail?["user"], case .string(let key)? = e.detail?["key"], let json = e.detail?["json"] {
                    persisted["\(store)\u{0}\(kind)\u{0}\(user)\u{0}\(key)"] = json
                }
            case .request:
                if let r = e.request, let client = r.client {
                    epochAtReceipt[r.seq] = epochs[ExactKey(client), default: 0]
                    // The client gave up on it (deadline, cancellation): its outcome is decided
                    // without an answer, so the attempt counts from now.
                    if r.cancelled, let key = r.key, let user = r.users.first {
                        lastAttempt["\(client)\u{0}\(key.kind)\u{0}\(user)\u{0}\(key.key)"] = (r, e.index)
                    }
                }
            case .response:
                guard let r = e.request, let client = r.client, let key = r.key, let user = r.users.first else { continue }
                lastAttempt["\(client)\u{0}\(key.kind)\u{0}\(user)\u{0}\(key.key)"] = (r, e.index)
                guard fallbackOn[ExactKey(client)] == true, let store = storeOf[ExactKey(client)] ?? nil,
                      epochAtReceipt[r.seq] == epochs[ExactKey(client), default: 0] else { continue }
                let id: ExactKey = "\(store)\u{0}\(key.kind)\u{0}\(user)\u{0}\(key.key)"
                if r.succeeded, !r.cancelled, let value = r.response { persisted[id] = value }
                if r.status == 404 { persisted[id] = nil }
            case .complete:
                guard let label = e.label, let invoke = invokes[ExactKey(label)], let client = invoke.client,
                      ["evaluateFlag", "getAssignment"].contains(invoke.name ?? ""), let outcome = e.outcome else { continue }
                let kind = invoke.name == "evaluateFlag" ? "flag" : "experiment"
                guard case .string(let key)? = invoke.detail?[kind == "flag" ? "flag" : "experiment"] else { continue }
                let user: String
                switch invoke.detail?["user"] {
                case .string(let u)?: user = u
                case .object(let u)?: if case .string(let id)? = u["id"] { user = id } else { continue }
                default: continue
                }
                guard let attempt = lastAttempt["\(client)\u{0}\(kind)\u{0}\(user)\u{0}\(key)"], attempt.index > invoke.index
                        || (attempt.index < e.index && attempt.index > invoke.index) else { continue }
                if case .string("cancelled")? = outcome["error"] { continue }
                let where_ = c.slice(around: [attempt.index, e.index], radius: 1)
                if attempt.record.status == 404 {
                    let want = kind == "flag" ? "flagNotFound" : "experimentNotFound"
                    if outcome["error"] != .string(want) {
                        problems.append(("\(label): the backend answered 404 but the SDK gave \(outcome) instead of \(want)", where_))
                    }
                } else if !attempt.record.succeeded || attempt.record.cancelled {
                    let stored = (storeOf[ExactKey(client)] ?? nil).flatMap { persisted["\($0)\u{0}\(kind)\u{0}\(user)\u{0}\(key)"] }
                    if fallbackOn[ExactKey(client)] != true || stored == nil {
                        if outcome["value"] != nil {
                            problems.append(("\(label): the request failed (\(attempt.record.status.map(String.init) ?? "no answer")) and nothing is persisted for user '\(user.unambiguous)' and \(kind) '\(key.unambiguous)', yet the SDK returned \(outcome["value"]!)", where_))
                        } else if outcome["error"] == .string("flagNotFound") || outcome["error"] == .string("experimentNotFound") {
                            problems.append(("\(label): a \(attempt.record.status.map(String.init) ?? "transport") failure was reported as not found", where_))
                        }
                    } else if let stored, let value = outcome["value"] {
                        let field = kind == "flag" ? "enabled" : "variant_name"
                        if value[field] != stored[field] {
                            problems.append(("\(label): fallback for user '\(user.unambiguous)' gave \(field) \(value[field] ?? .null), persisted is \(stored[field] ?? .null)", where_))
                        }
                    } else {
                        problems.append(("\(label): the request failed (\(attempt.record.status.map(String.init) ?? "no answer")) and a value is persisted for user '\(user.unambiguous)', but the SDK gave \(outcome)", where_))
                    }
                }
            default: break
            }
        }
        return problems
    }

    // MARK: the app pattern (CONTRACT.md section 8)

    /// Assignments (exposures) happen only after the view is displayed with the gating flag on,
    /// for the identity displayed; a variant is shown only after a matching assignment; business
    /// events come after the exposure and carry the `layout_source` of what is shown.
    static func exposureAfterDisplay(_ c: CheckContext) -> [(String, [String])] {
        guard let app = c.scenario.app else { return [("the scenario has no app section", [])] }
        var problems: [(String, [String])] = []
        var lastDisplay: (identity: String, flagOn: Bool, index: Int)?
        var exposed: [ExactKey: String] = [:]   // identity (exact) -> variant answered
        for e in c.history {
            if e.kind == .marker, e.client.isExactly(app.client) {
                switch e.name {
                case "display":
                    if case .string(let id)? = e.detail?["identity"] { lastDisplay = (id, e.detail?["flag_on"] == .bool(true), e.index) }
                case "login", "logout", "refresh":
                    lastDisplay = nil
                case "shown":
                    guard case .string(let id)? = e.detail?["identity"], case .string(let variant)? = e.detail?["variant"] else { break }
                    if variant != "fallback", !exposed[ExactKey(id)].isExactly(variant) {
                        problems.append(("variant '\(variant.unambiguous)' shown to '\(id.unambiguous)' without a matching assignment", c.slice(around: [e.index])))
                    }
                default: break
                }
            }
            if e.kind == .request, let r = e.request, r.client.isExactly(app.client), r.path == "/api/v1/tracking/assign" {
                let user = r.users.first ?? "?"
                if lastDisplay == nil || !lastDisplay!.identity.isExactly(user) || !lastDisplay!.flagOn {
                    problems.append(("assignment (exposure) for '\(user.unambiguous)' requested without a display of '\(user.unambiguous)' with the flag on",
                                     c.slice(around: [e.index], radius: 3)))
                }
            }
            if e.kind == .response, let r = e.request, r.client.isExactly(app.client), r.path == "/api/v1/tracking/assign", r.succeeded,
               case .string(let variant)? = r.response?["variant_name"], let user = r.users.first {
                exposed[ExactKey(user)] = variant
            }
            if e.kind == .request, let r = e.request, r.client.isExactly(app.client) {
                for event in r.events {
                    guard case .string(let source)? = event["metadata"]?["layout_source"], case .string(let user)? = event["user_id"] else { continue }
                    if source == "assignment" && exposed[ExactKey(user)] == nil {
                        problems.append(("event for '\(user.unambiguous)' says layout_source assignment before any exposure", c.slice(around: [e.index])))
                    }
                }
            }
        }
        return problems
    }

    /// After a logout from identity X, nothing of X is shown, requested, exposed or left in the
    /// app client's cache, and later events carry the new identity.
    static func noStaleAfterLogout(_ c: CheckContext) async -> [(String, [String])] {
        guard let app = c.scenario.app else { return [("the scenario has no app section", [])] }
        var problems: [(String, [String])] = []
        var retired: [ExactKey: Int] = [:]   // identity (exact) -> logout index
        for e in c.history {
            if e.kind == .marker, e.client.isExactly(app.client), e.name == "logout", case .string(let from)? = e.detail?["from"] {
                retired[ExactKey(from)] = e.index
            }
            if e.kind == .marker, e.client.isExactly(app.client), ["shown", "event"].contains(e.name ?? ""),
               case .string(let id)? = e.detail?["identity"], let at = retired[ExactKey(id)] {
                problems.append(("\(e.name!) for '\(id.unambiguous)' after that identity logged out", c.slice(around: [at, e.index], radius: 0)))
            }
            if e.kind == .request, let r = e.request, r.client.isExactly(app.client) {
                for user in r.users where retired[ExactKey(user)] != nil {
                    problems.append(("request for '\(user.unambiguous)' received after that identity logged out: \(r.summary)",
                                     c.slice(around: [retired[ExactKey(user)]!, e.index], radius: 0).suffix(12).map { $0 }))
                }
            }
        }
        if let client = c.clients[app.client] {
            for user in retired.keys.sorted().map(\.text) {
                let a = await ScenarioExecution.query(client, .getAssignments(user: user)).map(assignmentKeys) ?? []
                let f = await ScenarioExecution.query(client, .getEvaluatedFlags(user: user)).map(strings) ?? []
                if !a.isEmpty || !f.isEmpty {
                    problems.append(("after logout the cache still holds '\(user.unambiguous)': assignments \(a), flags \(f)", relevant(c, user: user)))
                }
            }
        }
        return problems
    }

    // MARK: golden vectors

    /// The driver's `hashUser` equals every golden vector within 1e-10 (CONTRACT.md section 6).
    static func goldenVectors(_ c: CheckContext) async -> [(String, [String])] {
        guard let client = c.clients.values.first else { return [("no client", [])] }
        var problems: [(String, [String])] = []
        for v in GoldenVectors.hash {
            let got = await ScenarioExecution.query(client, .hashUser(user: v.user, key: v.key))
            guard case .number(let h)? = got else { problems.append(("hashUser(\(v.user), \(v.key)) gave no number", [])); continue }
            if abs(h - v.hash) > 1e-10 {
                problems.append(("hashUser(\"\(v.user)\", \"\(v.key)\") = \(h), expected \(v.hash) (md5 \(v.md5))", []))
            }
        }
        return problems
    }

    // MARK: contract smoke (CONTRACT.md section 7)

    static func outcome(_ c: CheckContext, _ label: String) -> JSONValue? {
        c.history.last { $0.kind == .complete && $0.label == label }?.outcome
    }

    /// The contract-smoke fields from the operations labelled `assign_a`, `assign_b`, `flag`,
    /// `track`, `fanout` (and `batch`).
    static func smokeFields(scenario: Scenario, history: [HistoryEvent]) -> JSONValue {
        func value(_ label: String) -> JSONValue? { history.last { $0.kind == .complete && $0.label == label }?.outcome?["value"] }
        let a = value("assign_a"), b = value("assign_b")
        let sticky = a != nil && a?["variant_name"] == b?["variant_name"] && a?["variant_id"] == b?["variant_id"]
        let fanoutBatch = history.contains { $0.kind == .response && $0.request?.path == "/api/v1/tracking/batch" && $0.request?.events.count == 2 }
        return .object([
            "sdk": .string("ios"),
            "assign": .object(["variant_name": a?["variant_name"] ?? .null, "is_control": a?["is_control"] ?? .null, "sticky": .bool(sticky)]),
            "flag": .object(["enabled": value("flag")?["enabled"] ?? .null]),
            "track": .object(["ok": .bool(value("track") == .bool(true))]),
            "fanout": .object(["ok": .bool(value("fanout") == .bool(true) && fanoutBatch && (value("batch") ?? .bool(true)) == .bool(true))]),
        ])
    }

    /// The upstream live runner's rules: variant in {control, treatment}, boolean is_control,
    /// sticky, flag enabled, track ok, fanout ok.
    static func smoke(_ c: CheckContext) -> [(String, [String])] {
        let s = smokeFields(scenario: c.scenario, history: c.history)
        var problems: [String] = []
        if s["assign"]?["variant_name"] != .string("control") && s["assign"]?["variant_name"] != .string("treatment") {
            problems.append("assign.variant_name is \(s["assign"]?["variant_name"] ?? .null)")
        }
        if case .bool? = s["assign"]?["is_control"] {} else { problems.append("assign.is_control is not a boolean") }
        if s["assign"]?["sticky"] != .bool(true) { problems.append("assign.sticky is false") }
        if s["flag"]?["enabled"] != .bool(true) { problems.append("flag.enabled is not true") }
        if s["track"]?["ok"] != .bool(true) { problems.append("track.ok is false") }
        if s["fanout"]?["ok"] != .bool(true) { problems.append("fanout.ok is false (unkeyed page_view must send one batch of 2)") }
        return problems.map { ($0, ["smoke line: \(s)"]) }
    }
}
