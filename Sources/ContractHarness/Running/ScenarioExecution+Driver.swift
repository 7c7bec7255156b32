import Foundation
import ExperimentlyMock

extension ScenarioExecution {
    /// The mock's loopback listeners when `driver` reaches the mock over TCP, else `nil`.
    ///
    /// - Throws: `MockHTTPServerError` when a listener cannot be bound.
    static func listeners(for driver: any SDKDriver, port: any BackendPort, clients: [String]) throws -> LoopbackListeners? {
        guard driver.transport == .loopbackTCP, let mock = port as? MockBackendPort else { return nil }
        return try LoopbackListeners(backend: mock.backend, clients: clients) { client in
            let origin = URL(string: port.baseURL(client: client))
            return "\(origin?.host ?? "localhost"):\(origin?.port ?? 80)"
        }
    }

    /// For an out-of-process driver: every operation its adapter is still working on has a
    /// request parked at the mock (of its client, for its user and key when it has them); one
    /// without a request (a clear, a cache query) is not settled until it is answered. This covers
    /// operations the reference app makes on its own, which the runner's list does not show.
    func adapterSettled(_ parked: [RequestRecord]) -> Bool {
        guard listeners != nil else { return true }
        for (name, client) in clients {
            guard let remote = client as? ProcessDriverClient else { continue }
            for op in remote.pendingOperations {
                let user = Self.user(of: op)
                let key = op.cacheKey
                let needsRequest: Bool
                switch op {
                case .evaluateFlag, .getAssignment, .track, .trackWithStatus, .trackBatch: needsRequest = true
                default: needsRequest = false
                }
                guard needsRequest else { return false }
                let found = parked.contains { r in
                    r.client == name && (user == nil || r.users.contains(user!))
                        && (key == nil || (r.key?.kind == key!.kind && r.key?.key == key!.key))
                }
                if !found { return false }
            }
        }
        return true
    }

    /// Tells the driver the scenario is over, stops the listeners, and folds the driver's report
    /// into `result`: a crash makes it `error` with reason `crashed: ...` (the runner's `crashed`
    /// status where it has one), each protocol problem a failed `driver protocol` check, and the
    /// adapter's standard error is kept when the scenario did not pass.
    func finishDriver(_ result: inout ScenarioResult) async {
        let report = await driver.scenarioDidEnd(clients: Array(clients.values))
        await listeners?.shutdown()
        for problem in report.problems {
            result.checks.append(CheckResult(name: "driver protocol", passed: false, message: problem))
            if result.status == .passed { result.status = .failed }
        }
        if let crash = report.crash {
            result.status = .error
            result.reason = "crashed: \(crash)" + (result.reason.map { "; \($0)" } ?? "")
        }
        if result.status != .passed && result.status != .skipped { result.adapterStderr = report.stderr }
    }
}

/// What a scenario needs of a driver beyond the operations: its `requires` list, `app` for the
/// reference app, and what its steps use: each operation's name, `hash` for `hashUser`,
/// `virtual_clock` for an `advance`, `cancel` for a `cancel` step, `offline_store` for a
/// `persisted` expectation or two clients sharing a store (a relaunch).
enum ScenarioRequirements {
    /// The capabilities `scenario` needs, in a stable order.
    static func needed(_ scenario: Scenario) -> [String] {
        var needs = scenario.requires
        func add(_ c: String) { if !needs.contains(c) { needs.append(c) } }
        if scenario.app != nil { add("app") }
        for step in scenario.steps {
            switch step {
            case .advance: add("virtual_clock")
            case .cancel: add("cancel")
            case .expect(.persisted): add("offline_store")
            case .sdk(_, let op, _, _, _, _):
                add(op.name)
                if case .hashUser = op { add("hash") }
            default: break
            }
        }
        // Every client has a store by default; two clients sharing one is a relaunch.
        let stores = scenario.clients.compactMap(\.store)
        if Set(stores).count < stores.count { add("offline_store") }
        return needs
    }

    /// The capabilities `scenario` needs that `capabilities` lacks.
    static func missing(_ scenario: Scenario, capabilities: Set<String>) -> [String] {
        needed(scenario).filter { !capabilities.contains($0) }
    }
}
