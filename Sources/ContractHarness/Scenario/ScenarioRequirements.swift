import Foundation
import ExperimentlyMock

/// What a scenario needs of a driver: the capabilities its file names in `requires`, plus those
/// inferred from what it uses (issue 11 section 7), so that a driver without one skips the scenario
/// with the reason instead of failing it.
extension Scenario {
    /// The capability names a driver may declare (`SDKDriver.capabilities`) and a scenario may
    /// list in `requires`: the SDK operation names, plus `app` (the reference integration of
    /// CONTRACT.md section 8), `virtual_clock` (the SDK reads the scenario's clock), `cancel`
    /// (an operation's task can be cancelled), `offline_store` (the persisted fallback can be
    /// read back), `hash` (`hashUser`, the golden vectors of CONTRACT.md section 6) and
    /// `interleaving` (the SDK's own tasks prefer the task executor of `DriverContext`, so the
    /// harness can choose their interleaving; inferred from an `interleaving` section) and
    /// `seed_store` (the driver can write an entry into a client's offline store as given: the
    /// `seed_store` step; out of process, the `seed_store` message of experimently-driver/1) and
    /// `settle` (the driver can tell when every running operation has reached its wait, e.g. joined
    /// a shared request: exact quiescence; out of process, the `settle` message).
    public static let knownCapabilities: [String] = ["app", "virtual_clock", "cancel", "offline_store", "hash", "interleaving", "seed_store", "settle"] + SDKOperation.allNames

    /// One capability the scenario needs and why (the JSON path of what needs it).
    public struct Requirement: Sendable, Equatable {
        /// The capability name (one of ``knownCapabilities``).
        public var capability: String
        /// What needs it, e.g. `advance at $.steps[3]` or `requires[0]`.
        public var reason: String
    }

    /// Every capability the scenario needs, the listed ones first, then the inferred ones in step
    /// order; each capability once, with the first place that needs it.
    ///
    /// Inferred: each SDK operation's name; `app` for the `app` section and app steps; `virtual_clock`
    /// for `advance` steps and `delay` or `timeout` faults (both wait on the scenario's clock);
    /// `cancel` for `cancel` steps; `offline_store` for `persisted` assertions and the
    /// `offline_fallback` / `no_fallback_on_404` checks; `virtual_clock` for a client whose
    /// `cache_ttl` is below the default 300 s; `getAssignments` and `getEvaluatedFlags`
    /// for `cache` and `cached` assertions and the `no_stale_write` / `no_stale_after_logout`
    /// checks, which read the memory cache through them; `hash` for `hashUser` and the
    /// `golden_vectors` check; `settle` for a lookup that may join another's shared request while
    /// a fault can park it (`sharedLookupStep`).
    public var requirements: [Requirement] {
        var out: [Requirement] = []
        func need(_ capability: String, _ reason: String) {
            if !out.contains(where: { $0.capability.unicodeScalars.elementsEqual(capability.unicodeScalars) }) {
                out.append(Requirement(capability: capability, reason: reason))
            }
        }
        for (i, name) in requires.enumerated() { need(name, "requires[\(i)]") }
        if app != nil { need("app", "the \"app\" section") }
        if interleaving != nil { need("interleaving", "the \"interleaving\" section") }
        for (i, step) in steps.enumerated() {
            let at = "$.steps[\(i)]"
            switch step {
            case .sdk(_, let op, _, _, _, _):
                need(op.name, "\(op.name) at \(at)")
                if case .hashUser = op { need("hash", "hashUser at \(at)") }
            case .app: need("app", "an app step at \(at)")
            case .cancel: need("cancel", "cancel at \(at)")
            case .advance: need("virtual_clock", "advance at \(at)")
            case .addFault(_, let rule):
                for action in ["delay", "timeout"] where rule["action"]?[action] != nil {
                    need("virtual_clock", "a \(action) fault at \(at)")
                }
            case .expect(.persisted): need("offline_store", "a persisted assertion at \(at)")
            // The memory cache is read through the SDK's own lists: an adapter without them gets
            // the scenario skipped, naming them (a seventy-third outside tester: it failed with
            // "refused: unsupported getAssignments", blamed on the adapter).
            case .expect(.cache(_, _, let assignments, let flags)):
                if assignments != nil { need("getAssignments", "a cache assertion at \(at)") }
                if flags != nil { need("getEvaluatedFlags", "a cache assertion at \(at)") }
            case .expect(.cached(_, let kind, _, _, _, _)):
                need(kind == "flag" ? "getEvaluatedFlags" : "getAssignments", "a cached assertion at \(at)")
            case .seedStore:
                need("offline_store", "seed_store at \(at)")
                need("seed_store", "seed_store at \(at)")
            default: break
            }
        }
        if let (i, why) = sharedLookupStep { need("settle", "\(why) at $.steps[\(i)]") }
        for (i, check) in checks.enumerated() {
            switch check {
            case "golden_vectors": need("hash", "the golden_vectors check at $.checks[\(i)]")
            case "offline_fallback", "no_fallback_on_404": need("offline_store", "the \(check) check at $.checks[\(i)]")
            case "no_stale_write", "no_stale_after_logout":
                need("getAssignments", "the \(check) check at $.checks[\(i)]")
                need("getEvaluatedFlags", "the \(check) check at $.checks[\(i)]")
            default: break
            }
        }
        // Every client has a store of its own by default; two clients naming one store are a relaunch.
        // A cache TTL shorter than the default: the checks count it on the scenario's clock, so an
        // SDK counting it on the wall clock (no `virtual_clock`) expires entries the checks hold
        // fresh (a seventy-fifth outside tester: a correct wall-clock SDK failed a `cache_ttl` of
        // 0.001 s every run, and one of 0.31 s as the machine's speed decided).
        if let (i, client) = clients.enumerated().first(where: { $0.element.settings.cacheTTL < ClientSettings().cacheTTL }) {
            need("virtual_clock", "a cache_ttl of \(client.settings.cacheTTL) s for client '\(client.name)' at $.clients[\(i)] (counted on the scenario's clock)")
        }
        var seen: [[Unicode.Scalar]] = []
        for (i, client) in clients.enumerated() {
            guard let store = client.store else { continue }
            let key = Array(store.unicodeScalars)
            if seen.contains(key) { need("offline_store", "a store shared by two clients at $.clients[\(i)]") }
            seen.append(key)
        }
        return out
    }

    /// The first lookup step that may join a request another lookup started and a fault may park
    /// (its index and why), or `nil`. Lookups are the SDK's `evaluateFlag` and `getAssignment`
    /// and the reference app's `login`, `logout`, `refresh` and `display` (each fetches; CONTRACT.md
    /// section 8). A step may join when it runs `times` > 1 copies, or when an earlier `async`
    /// lookup of its client may still run: for two SDK calls, of the same user and key (exact)
    /// with no `clearCache` or `close` of that client between them; where an app step is one of the
    /// two, whatever its user and key (the app's identity and keys are its own state, not the
    /// file's). An app `logout` clears its client's cache first, like `clearCache`: it joins
    /// nothing begun before it. Only in a scenario with a fault step.
    /// Quiescence must then know that the joiner really joined (a parked request for its key is
    /// not enough: a `cancel` of the first caller would otherwise find no other waiter, and an
    /// `advance` may time out the request before a late joiner reached it), which out of process
    /// takes the adapter's word (`settle`); without it the scenario is skipped. Before, app steps
    /// were not counted: three concurrent app displays under a `timeout` fault failed a correct
    /// SDK without `settle` in 9 of 10 runs (a fifty-sixth outside tester).
    var sharedLookupStep: (index: Int, why: String)? {
        guard steps.contains(where: { if case .addFault = $0 { return true } else { return false } }) else { return nil }
        // Earlier async lookups that may still run: an SDK call's user and key, or an app's (nil: any).
        var started: [(client: String, key: (user: String, key: String)?)] = []
        for (i, step) in steps.enumerated() {
            // A clear or close detaches the requests in flight: a later lookup starts its own.
            if case .sdk(let client, let op, _, _, _, _) = step, op == .clearCache || op == .close {
                started.removeAll { $0.client.isExactly(client) }
            }
            let client: String, key: (user: String, key: String)?, name: String, isAsync: Bool, count: Int
            switch step {
            case .sdk(let c, let op, _, let a, let n, _):
                guard let k = op.cacheKey else { continue }
                (client, key, name, isAsync, count) = (c, (k.user, k.key), op.name, a, n)
            case .app(let action, _, let a, _, let c, let n):
                guard let lookup = Self.appLookupName(action) else { continue }
                (client, key, name, isAsync, count) = (c, nil, "app \(lookup)", a, n)
            default: continue
            }
            if count > 1 { return (i, "\(count) concurrent \(name) calls") }
            // An app logout clears the client's cache before it refetches (CONTRACT.md section 8):
            // it joins nothing begun before it, and later lookups cannot join those either.
            if case .app(.logout, _, _, _, _, _) = step {
                started.removeAll { $0.client.isExactly(client) }
                if isAsync { started.append((client, key)) }
                continue
            }
            let same = started.contains { s in
                guard s.client.isExactly(client) else { return false }
                guard let mine = key, let theirs = s.key else { return true }
                return theirs.user.isExactly(mine.user) && theirs.key.isExactly(mine.key)
            }
            if same { return (i, "\(name) may join an earlier lookup's request") }
            if isAsync { started.append((client, key)) }
        }
        return nil
    }

    /// The name of an app action that fetches flags or assignments (`login`, `logout`, `refresh`,
    /// `display`), or `nil` for one that does not (`event`, `report_state`).
    static func appLookupName(_ action: AppAction) -> String? {
        switch action {
        case .login: return "login"
        case .logout: return "logout"
        case .refresh: return "refresh"
        case .display: return "display"
        case .event, .reportState: return nil
        }
    }

    /// The requirements `capabilities` does not meet (capability names compared by scalars).
    public func unmet(by capabilities: Set<String>) -> [Requirement] {
        requirements.filter { r in !capabilities.contains { $0.unicodeScalars.elementsEqual(r.capability.unicodeScalars) } }
    }
}

extension Step {
    /// `true` when the step states something the runner checks: an `expect` or an `assert`.
    var statesExpectation: Bool {
        switch self {
        case .sdk(_, _, _, _, _, .some), .app(_, _, _, .some, _, _), .await(_, .some): return true
        case .expect: return true
        default: return false
        }
    }
}
