import Foundation
import ExperimentlyMock

/// Exact attribution of an app's requests to the app operations that issued them (issue 11
/// section 3, applied to the reference app of CONTRACT.md section 8).
///
/// The reference app runs in the harness, so it records each SDK call it makes: a `call` marker
/// (`{"call": N, "action", "sdk", "identity", "revision"}`: which action, as which identity, at
/// which app revision) before the call and a `returned` marker (`{"call": N}`) after it. Within
/// one app an async `display` or `event` may run at the same time as a `logout` or `login`, so a
/// request of the display can reach the mock after the logout's marker: position in the history
/// says nothing about whose request it is. A request belongs to a call of the app that was in
/// flight when the mock received it, made as the identity the request is for, through the SDK
/// operation that sends such a request (`getAssignment`: `/tracking/assign`, `evaluateFlag`:
/// `/feature-flags/evaluate/`, `trackWithStatus`: `/tracking/track` and `/tracking/batch`).
///
/// Identities by revision: every `login`, `logout` and `refresh` marker names the app's identity
/// and revision from then on, so `identity(at:)` says who the app was at any revision; an
/// operation (a call, a `shown` or `event` decision) is stale when it acted as an identity the
/// app no longer had at the revision it acted at. Identity data is compared by Unicode scalars.
struct AppCalls {
    /// One SDK call of the app.
    struct Call {
        /// The call's number (the `call` marker's `call`).
        let id: Int
        /// The app action that made it (`display`, `event`, `refresh`).
        let action: String
        /// The SDK operation (`getAssignment`, `evaluateFlag`, `trackWithStatus`).
        let sdk: String
        /// The identity it was made as.
        let identity: String
        /// The app revision of the operation that made it.
        let revision: Int
        /// History index of its `call` marker.
        let start: Int
        /// History index of its `returned` marker (`Int.max` when it never returned).
        var end: Int
    }

    /// The app's calls, in the order they began.
    let calls: [Call]
    /// (revision, identity) from each `login`, `logout` and `refresh` marker, in history order.
    let identities: [(revision: Int, identity: String)]
    /// The app's first identity (before any marker).
    let initial: String

    /// The calls and identities of the app on `client` in `history`.
    init(history: [HistoryEvent], client: String, initialIdentity: String) {
        var calls: [Call] = []
        var byID: [Int: Int] = [:]
        var identities: [(Int, String)] = []
        for e in history where e.kind == .marker && e.client.isExactly(client) {
            switch e.name {
            case "call":
                guard case .number(let n)? = e.detail?["call"], case .string(let identity)? = e.detail?["identity"],
                      case .number(let rev)? = e.detail?["revision"] else { continue }
                var action = "?", sdk = "?"
                if case .string(let a)? = e.detail?["action"] { action = a }
                if case .string(let s)? = e.detail?["sdk"] { sdk = s }
                byID[Int(n)] = calls.count
                calls.append(Call(id: Int(n), action: action, sdk: sdk, identity: identity, revision: Int(rev), start: e.index, end: Int.max))
            case "returned":
                if case .number(let n)? = e.detail?["call"], let i = byID[Int(n)] { calls[i].end = e.index }
            case "login", "logout", "refresh":
                if case .string(let identity)? = e.detail?["identity"], case .number(let rev)? = e.detail?["revision"] {
                    identities.append((Int(rev), identity))
                }
            default: break
            }
        }
        self.calls = calls
        self.identities = identities.sorted { $0.0 < $1.0 }
        self.initial = initialIdentity
    }

    /// The app's identity at `revision`: that of the latest identity marker at or before it.
    func identity(at revision: Int) -> String {
        identities.last { $0.revision <= revision }?.identity ?? initial
    }

    /// The SDK operation of the app that sends a request to `path`.
    static func sdkOperation(sending path: String) -> String? {
        if path == "/api/v1/tracking/assign" { return "getAssignment" }
        if path.hasPrefix("/api/v1/feature-flags/evaluate/") { return "evaluateFlag" }
        if path == "/api/v1/tracking/track" || path == "/api/v1/tracking/batch" { return "trackWithStatus" }
        return nil
    }

    /// The calls that may have issued a request to `path` for `user` received at history index
    /// `index`: in flight then, made as `user`, through the operation that sends to `path`.
    func issuers(path: String, user: String, at index: Int) -> [Call] {
        guard let sdk = Self.sdkOperation(sending: path) else { return [] }
        return calls.filter { $0.start < index && index < $0.end && $0.sdk == sdk && $0.identity.isExactly(user) }
    }

    /// `call 3 (app.display: getAssignment as user-1 at revision 2)`, for messages.
    static func describe(_ call: Call) -> String {
        "call \(call.id) (app.\(call.action): \(call.sdk) as '\(call.identity.unambiguous)' at revision \(call.revision))"
    }
}

extension Checks {
    /// For each request of an app's client that an app call may have issued: the history index
    /// where the earliest such call began (request sequence number -> index). The SDK started
    /// that request somewhere between the call's start and the mock's receipt, so a clear of the
    /// client in between (a concurrent logout or undo of the app) leaves open whether the request
    /// started before it (never written, CONTRACT.md section 5.1) or after it (written).
    static func appIssueStarts(_ c: CheckContext) -> [Int: Int] {
        guard c.scenario.app != nil else { return [:] }
        var starts: [Int: Int] = [:]
        for client in c.scenario.appClients {
            guard let settings = c.scenario.appSettings(client: client) else { continue }
            let calls = AppCalls(history: c.history, client: client, initialIdentity: settings.initialUser)
            guard !calls.calls.isEmpty else { continue }
            for e in c.history where e.kind == .request {
                guard let r = e.request, r.client.isExactly(client), let user = r.users.first else { continue }
                if let first = calls.issuers(path: r.path, user: user, at: e.index).map(\.start).min() { starts[r.seq] = first }
            }
        }
        return starts
    }

    /// Stale writes the app found and undid: an `undo` marker with `found` says the app found the
    /// answer of its discarded call `call` in the SDK cache although the app had cleared the cache
    /// after that call began. That is correct only when the request that answered the call may
    /// have started after the clear (the mock received it after the clear); when every request
    /// that answered the call while it ran was received before the clear, the SDK wrote the answer
    /// to a request that started before `clearCache()`: CONTRACT.md section 5, defect 1.
    static func staleWritesTheAppUndid(_ c: CheckContext) -> [(String, [String])] {
        staleWritesUndone(c).map { ($0.message, $0.slice) }
    }

    /// The stale writes of `staleWritesTheAppUndid`, with the app's client, the identity and the
    /// history index of the `undo` (for `no_stale_after_logout`: X's answer in the cache after X
    /// logged out); `only`: that app's client alone.
    static func staleWritesUndone(_ c: CheckContext, only: String? = nil) -> [(client: String, identity: String, undo: Int, message: String, slice: [String])] {
        guard c.scenario.app != nil else { return [] }
        var problems: [(client: String, identity: String, undo: Int, message: String, slice: [String])] = []
        for client in c.scenario.appClients where only.map({ $0.isExactly(client) }) ?? true {
            guard let settings = c.scenario.appSettings(client: client) else { continue }
            let calls = AppCalls(history: c.history, client: client, initialIdentity: settings.initialUser)
            let clears = c.history.filter { e in
                e.client.isExactly(client) && ((e.kind == .marker && ["logout", "undo"].contains(e.name ?? ""))
                    || (e.kind == .invoke && ["clearCache", "close"].contains(e.name ?? "")))
            }.map(\.index)
            for undo in c.history where undo.kind == .marker && undo.name == "undo" && undo.client.isExactly(client) {
                guard case .string(let kind)? = undo.detail?["found"], case .string(let key)? = undo.detail?["key"],
                      case .string(let user)? = undo.detail?["identity"], case .number(let n)? = undo.detail?["call"],
                      let call = calls.calls.first(where: { $0.id == Int(n) }),
                      let clear = clears.first(where: { $0 > call.start && $0 < undo.index }) else { continue }
                let answers = c.history.filter { e in
                    guard e.kind == .response, let r = e.request, r.client.isExactly(client), let k = r.key,
                          (k.kind == "flag") == (kind == "flag"), k.key.isExactly(key), r.users.first?.isExactly(user) ?? false else { return false }
                    return e.index > call.start && e.index < call.end
                }
                let receipts = answers.compactMap { a in c.history.first { $0.kind == .request && $0.request?.seq == a.request?.seq } }
                guard !receipts.isEmpty, receipts.allSatisfy({ $0.index < clear }) else { continue }
                let seqs = receipts.compactMap { $0.request.map { "#\($0.seq)" } }.joined(separator: ", ")
                problems.append((client, user, undo.index, "client '\(client.unambiguous)' cached the answer to \(seqs) (\(kind) '\(key.unambiguous)' of user '\(user.unambiguous)'), received before the clear at [\(clear)]; the app found it after that clear and undid it (CONTRACT.md section 5, defect 1: a response to a request that started before clearCache() must not be written)",
                                 c.excerpt(receipts.map(\.index) + [clear, undo.index])))
            }
        }
        return problems
    }
}

/// The fan-out the reference app's `event` actions must send (CONTRACT.md sections 4 and 8),
/// for `fan_out` and `batch_chunking`: an app event is a `trackWithStatus` of the SDK like any
/// other, so an unkeyed one (the app shows the fallback) becomes one `/batch` entry per cached
/// `assigned:true` assignment of the app's identity, then one per cached flag.
///
/// Each app `call` of action `event` (`AppCalls`) is one operation from its `call` marker to its
/// `returned` marker, for the identity the call was made as and the event name and
/// `layout_source` of the app's `event` marker of the same identity and revision. The expected
/// entries come from the cache model at the `call` marker. When the history cannot fix what the
/// SDK's cache held when the call read it, the call's window absorbs its batches instead
/// (`uncertain`; never a verdict on a correct SDK): a clear of the client (logout, undo,
/// `clearCache`, `close`) that may still have been under way while the call ran, an answer for
/// the identity received while it ran or not surely written before it began, an entry the SDK
/// may or may not have written (`CacheModel.Entry.optional`), a clock step while it ran, or two
/// event markers it may belong to with different names or sources.
struct AppEventFanOut {
    /// One app event call.
    struct Call {
        let client: String
        let id: Int
        let start: Int
        let end: Int
        let user: String
        /// The event name, `nil` when the markers leave it open.
        let name: String?
        /// Whether the app sent it keyed (`layout_source` `assignment`: to `/track`).
        let keyed: Bool
        /// The properties the app gave the event (its `event` marker's), `nil` when the marker has none.
        let properties: JSONValue?
    }

    /// The app event calls by the history index of their `call` marker.
    private(set) var calls: [Int: Call] = [:]
    /// Windows of app event calls whose fan-out the history leaves open (their batches are absorbed).
    private(set) var uncertain: [Attribution.Window] = []
    /// For each window of `uncertain`: what its batches may hold (`Bound`).
    private(set) var bounds: [Bound] = []

    /// What the batches of an uncertain app event may hold, whatever the history leaves open: only
    /// entries of its user (`user`), under its name when known (`name`), for keys the cache may
    /// hold while it runs (`keys`: `"a"`/`"f"` \0 exact key; live entries when it began, answers
    /// for that user during it), each key at most once, assignments before flags (CONTRACT.md
    /// section 4). Before, such a window absorbed any batch (a thirty-third outside tester, F4:
    /// fan-out to other users' entries and to ineligible answers passed).
    struct Bound {
        let window: Attribution.Window
        let label: String
        let user: String
        let name: String?
        let keys: Set<String>
    }
    /// Per client: (clear begins, surely done by) history indices.
    private var clears: [ExactKey: [(from: Int, by: Int)]] = [:]
    private let history: [HistoryEvent]

    init(_ c: CheckContext) {
        history = c.history
        guard c.scenario.app != nil else { return }
        // Labels and client names are identity data: keyed by Unicode scalars (ExactKey).
        let completes = Dictionary(c.history.filter { $0.kind == .complete }.compactMap { e in e.label.map { (ExactKey($0), e.index) } },
                                   uniquingKeysWith: { a, _ in a })
        for client in c.scenario.appClients {
            guard let settings = c.scenario.appSettings(client: client) else { continue }
            let appCalls = AppCalls(history: c.history, client: client, initialIdentity: settings.initialUser)
            let actions = c.history.filter { $0.kind == .invoke && $0.client.isExactly(client) && ($0.name ?? "").hasPrefix("app.") }
                .map { (from: $0.index, to: $0.label.flatMap { completes[ExactKey($0)] } ?? Int.max) }
            var windows: [(from: Int, by: Int)] = []
            for e in c.history where e.client.isExactly(client) {
                if e.kind == .marker, e.name == "logout" || e.name == "undo" {
                    // The app clears the SDK cache after the marker, within the action that made it.
                    let by = actions.filter { $0.from < e.index && e.index < $0.to }.map(\.to).max() ?? Int.max
                    windows.append((e.index, by))
                } else if e.kind == .invoke, ["clearCache", "close"].contains(e.name ?? "") {
                    windows.append((e.index, e.label.flatMap { completes[ExactKey($0)] } ?? Int.max))
                }
            }
            clears[ExactKey(client)] = windows
            let events = c.history.filter { $0.kind == .marker && $0.name == "event" && $0.client.isExactly(client) }
            var paired: Set<Int> = []
            for call in appCalls.calls where call.action == "event" && call.sdk == "trackWithStatus" {
                let candidates = events.filter { m in
                    guard m.index < call.start, !paired.contains(m.index), case .string(let id)? = m.detail?["identity"],
                          case .number(let rev)? = m.detail?["revision"] else { return false }
                    return id.isExactly(call.identity) && Int(rev) == call.revision
                }
                guard let mine = candidates.last else { continue }
                paired.insert(mine.index)
                let names = Set(candidates.compactMap { $0.detail?["name"]?.stringValue }.map(Checks.exact))
                let sources = Set(candidates.compactMap { $0.detail?["layout_source"]?.stringValue })
                let name = names.count == 1 && sources.count == 1 ? mine.detail?["name"]?.stringValue : nil
                calls[call.start] = Call(client: client, id: call.id, start: call.start, end: call.end, user: call.identity,
                                         name: name, keyed: mine.detail?["layout_source"]?.stringValue == "assignment",
                                         properties: mine.detail?["properties"])
            }
        }
    }

    /// The operation the app event call whose `call` marker is `e` must satisfy, given the cache
    /// `model` of its client just before it; `nil` for any other event, a keyed event (judged by
    /// the `/track` window check, like a keyed `trackWithStatus`), or an uncertain call (its
    /// window is added to `uncertain`).
    mutating func operation(at e: HistoryEvent, model: Checks.CacheModel) -> Attribution.Operation? {
        guard e.kind == .marker, e.name == "call", let call = calls[e.index] else { return nil }
        if call.keyed && call.name != nil { return nil }
        let window = Attribution.Window(client: call.client, from: call.start, to: call.end)
        let entries = model.entries(model.assignments, user: call.user, at: e.exactTime) + model.entries(model.flags, user: call.user, at: e.exactTime)
        let during = call.end == Int.max ? history[(call.start + 1)...] : history[(call.start + 1)..<min(call.end, history.count)]
        let open = call.name == nil
            || entries.contains { $0.optional || $0.hi > call.start }
            || (clears[ExactKey(call.client)] ?? []).contains { $0.from < call.end && $0.by > call.start }
            || during.contains { d in
                (d.kind == .marker && d.name == "advance")
                    || (d.kind == .response && d.request.map { $0.client.isExactly(call.client) && $0.key != nil && ($0.users.first?.isExactly(call.user) ?? false) } ?? false)
            }
        if open {
            uncertain.append(window)
            var keys = Set(model.entries(model.assignments, user: call.user, at: e.exactTime, filter: { $0["assigned"] != .bool(false) })
                .map { "a\u{0}" + Checks.exact($0.key) })
            keys.formUnion(model.entries(model.flags, user: call.user, at: e.exactTime).map { "f\u{0}" + Checks.exact($0.key) })
            for d in during where d.kind == .response {
                guard let r = d.request, r.client.isExactly(call.client), r.succeeded, let key = r.key, r.users.first?.isExactly(call.user) ?? false else { continue }
                if key.kind == "flag" { keys.insert("f\u{0}" + Checks.exact(key.key)); continue }
                guard r.response?["assigned"] != .bool(false) else { continue }
                keys.insert("a\u{0}" + Checks.exact(key.key))
                // An answer naming another experiment may be cached under that key too.
                if case .string(let named)? = r.response?["experiment_key"] { keys.insert("a\u{0}" + Checks.exact(named)) }
            }
            bounds.append(Bound(window: window, label: "app call \(call.id) (app.event '\((call.name ?? "?").unambiguous)' as '\(call.user.unambiguous)')",
                                user: call.user, name: call.name, keys: keys))
            return nil
        }
        let event: JSONValue = .object(["user": .string(call.user), "name": .string(call.name!)])
        guard let fan = Checks.fanOutExpectation(events: [event], keyedAllowed: false, model: model, at: e.exactTime) else { return nil }
        let (expected, ranks) = fan
        return Attribution.Operation(label: "app call \(call.id) (app.event '\(call.name!.unambiguous)' as '\(call.user.unambiguous)')", name: "trackWithStatus",
                                     client: call.client, from: call.start, to: call.end,
                                     expected: stride(from: 0, to: expected.count, by: 100).map { Array(expected[$0..<min($0 + 100, expected.count)]) },
                                     ranks: stride(from: 0, to: ranks.count, by: 100).map { Array(ranks[$0..<min($0 + 100, ranks.count)]) })
    }
}

/// The scenario's own SDK calls (its `do` steps, not the reference app's actions) on one client,
/// with the users they ask for and when they ran: a request of the app's client that one of them
/// sends is no app decision, so the app checks leave it to the other checks (an outside audit: a
/// `do getAssignment` on the app's client made `exposure_after_display` fail a correct SDK for
/// an exposure no display asked for). Identity data is compared by Unicode scalars.
struct RunnerCalls {
    /// One call: its SDK operation, the users and key it asks for, and its history window.
    struct Call {
        let name: String
        let users: [String]
        /// The flag or experiment key of a lookup (`nil` for tracking calls).
        let key: String?
        /// History index of its `invoke` event.
        let start: Int
        /// History index of its first `complete` event (`Int.max` when it never completed, and
        /// for `track`, which may send after it returned).
        let end: Int
    }

    /// The calls, in the order they began.
    let calls: [Call]

    /// The runner's calls on `client` in `history`.
    init(history: [HistoryEvent], client: String) {
        var completes: [ExactKey: Int] = [:]
        for e in history where e.kind == .complete {
            if let label = e.label, completes[ExactKey(label)] == nil { completes[ExactKey(label)] = e.index }
        }
        func users(_ event: JSONValue) -> [String] { event["user"]?.stringValue.map { [$0] } ?? [] }
        calls = history.compactMap { e -> Call? in
            guard e.kind == .invoke, let name = e.name, !name.hasPrefix("app."), e.client?.isExactly(client) ?? false else { return nil }
            let end = e.label.flatMap { completes[ExactKey($0)] } ?? Int.max
            if let target = Checks.lookupTarget(e) { return Call(name: name, users: [target.user], key: target.key, start: e.index, end: end) }
            switch name {
            // `track` reports nothing: its request may come after it returned.
            case "track": return Call(name: name, users: e.detail.map(users) ?? [], key: nil, start: e.index, end: Int.max)
            case "trackWithStatus": return Call(name: name, users: e.detail.map(users) ?? [], key: nil, start: e.index, end: end)
            case "trackBatch": return Call(name: name, users: (e.detail?.arrayValue ?? []).flatMap(users), key: nil, start: e.index, end: end)
            default: return nil
            }
        }
    }

    /// Whether a call that sends requests to `path` for `user` (and `key`, for a lookup) was in
    /// flight at history index `index` (begun before it, not completed by then).
    func inFlight(path: String, user: String, key: String?, at index: Int) -> Bool {
        let names: Set<String>
        switch path {
        case "/api/v1/tracking/assign": names = ["getAssignment"]
        case "/api/v1/tracking/track", "/api/v1/tracking/batch": names = ["track", "trackWithStatus", "trackBatch"]
        default: names = path.hasPrefix("/api/v1/feature-flags/evaluate/") ? ["evaluateFlag"] : []
        }
        return calls.contains { call in
            names.contains(call.name) && call.start < index && index < call.end
                && call.users.contains { $0.isExactly(user) }
                && (call.key == nil || key.map { call.key!.isExactly($0) } ?? true)
        }
    }
}
