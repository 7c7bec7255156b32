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
    /// `seed_store` step; out of process, the `seed_store` message of experimently-driver/1).
    public static let knownCapabilities: [String] = ["app", "virtual_clock", "cancel", "offline_store", "hash", "interleaving", "seed_store"] + SDKOperation.allNames

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
    /// `offline_fallback` / `no_fallback_on_404` checks; `hash` for `hashUser` and the
    /// `golden_vectors` check.
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
            case .seedStore:
                need("offline_store", "seed_store at \(at)")
                need("seed_store", "seed_store at \(at)")
            default: break
            }
        }
        for (i, check) in checks.enumerated() {
            switch check {
            case "golden_vectors": need("hash", "the golden_vectors check at $.checks[\(i)]")
            case "offline_fallback", "no_fallback_on_404": need("offline_store", "the \(check) check at $.checks[\(i)]")
            default: break
            }
        }
        // Every client has a store of its own by default; two clients naming one store are a relaunch.
        var seen: [[Unicode.Scalar]] = []
        for (i, client) in clients.enumerated() {
            guard let store = client.store else { continue }
            let key = Array(store.unicodeScalars)
            if seen.contains(key) { need("offline_store", "a store shared by two clients at $.clients[\(i)]") }
            seen.append(key)
        }
        return out
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
