import Foundation
import ExperimentlyMock

extension ScenarioExecution {
    /// The mock's loopback listeners when `driver` reaches the mock over TCP, else `nil`.
    ///
    /// - Throws: `MockHTTPServerError` when a listener cannot be bound.
    static func listeners(for driver: any SDKDriver, port: any BackendPort, clients: [String], origins: [ExactKey: String] = [:],
                          keepAlive: Bool = true) throws -> LoopbackListeners? {
        guard driver.transport == .loopbackTCP, let mock = port as? MockBackendPort else { return nil }
        return try LoopbackListeners(backend: mock.backend, clients: clients, origins: origins, keepAlive: keepAlive) { client in
            let origin = URL(string: port.baseURL(client: client))
            return "\(origin?.host ?? "localhost"):\(origin?.port ?? 80)"
        }
    }

    /// Whether a step of `scenario` can drop a request before any answer: a fault whose action is
    /// `drop_before_response` or `delay_then_drop`, or a release with a transport error. Out of
    /// process such a scenario's listeners serve one request per connection (no keep-alive), so a
    /// dropped request is always the first on its connection and no client transport resends it
    /// on its own (they resend only on a reused connection): the drop reaches the SDK whatever
    /// its transport, and no resend has to be told from the SDK's own identical request (a
    /// twenty-sixth outside tester's Go SDK: an identical later batch chunk, an app's next
    /// exposure, a chunked body that began like the dropped one, were taken for resends).
    static func canDropBeforeAnswer(_ scenario: Scenario) -> Bool {
        func names(_ v: JSONValue) -> Bool {
            switch v {
            case .object(let members):
                return members.contains { key, value in
                    ["drop_before_response", "delay_then_drop", "transport_error"].contains(key) || names(value)
                }
            case .array(let items): return items.contains(where: names)
            default: return false
            }
        }
        return scenario.steps.contains { step in
            switch step {
            case .addFault(_, let rule): return names(rule)
            case .release(_, _, _, let override?): return names(override)
            default: return false
            }
        }
    }

    /// For an out-of-process driver: every operation its adapter is still working on has a
    /// request parked at the mock (of its client, for its user and key when it has them); one
    /// without a request (a clear, a cache query) is not settled until it is answered. This covers
    /// operations the reference app makes on its own, which the runner's list does not show.
    ///
    /// Every pending operation of the runner must also have its `perform` written to the adapter
    /// (none may be on its way there); `adapterConfirmed` then asks an adapter with `settle`.
    func adapterSettled(_ parked: [RequestRecord]) -> Bool {
        guard listeners != nil else { return true }
        let waiting = pending()
        for (name, client) in clients {
            guard let remote = client as? ProcessDriverClient else { continue }
            let mine = waiting.filter { $0.client.isExactly(name) && !$0.name.hasPrefix("app.") }.count
            guard remote.unsentCalls == 0, remote.runnerCallsInFlight == mine else { return false }
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
                    r.client.isExactly(name) && (user == nil || r.users.containsExactly(user!))
                        && (key == nil || (r.key?.kind == key!.kind && r.key?.key.isExactly(key!.key) == true))
                }
                if !found { return false }
            }
        }
        return true
    }

    /// In process, whether the SDK's own tasks (its deadline timers) are seen by quiescence: they
    /// prefer the runner's task executor, which a driver declares with the `interleaving`
    /// capability (`DriverContext.taskExecutor` passed to its client). Without it an SDK timer
    /// runs on the global executor and may start sleeping only after the clock moved.
    var sdkTasksSeen: Bool { driver.capabilities.contains("interleaving") }

    /// Whether every out-of-process client's adapter answers `settle` (`true` in process).
    var adapterSettles: Bool {
        clients.values.allSatisfy { client in (client as? ProcessDriverClient).map { $0.gate != nil } ?? true }
    }

    /// What the adapters' `settle` gates and the adapters' protocol problems in this scenario add to a
    /// step's timeout message ("; " and their notes),
    /// or "" (in process, or nothing to add).
    func settleNote() -> String {
        var gates: [DriverSettleGate] = []
        for client in clients.values {
            if let gate = (client as? ProcessDriverClient)?.gate, !gates.contains(where: { $0 === gate }) { gates.append(gate) }
        }
        var notes = gates.compactMap(\.describe)
        // What the adapter wrote outside the protocol in this scenario (a reply to no pending
        // request, a line that is no reply): named at the step that waited, not only in the
        // driver protocol check (a sixth outside tester: a stray reply's step said only "did
        // not finish").
        var connections: [DriverConnection] = []
        for case let client as ProcessDriverClient in clients.values where !connections.contains(where: { $0 === client.connection }) {
            connections.append(client.connection)
            let problems = client.connection.problems(since: client.problemMark)
            if !problems.isEmpty {
                notes.append("the adapter's output had \(client.connection.problemCount - client.problemMark) problem(s) in this scenario, the last: \(problems.last!)")
            }
        }
        return notes.isEmpty ? "" : "; " + notes.joined(separator: "; ")
    }

    /// The last condition of out-of-process quiescence, checked once every other one holds (so
    /// that `settle` is asked only then): an adapter that declares `settle` said every operation of
    /// the scope reached its wait, after the last `perform`, `cancel` or clock move and with the
    /// mock as it is now (`DriverSettleGate`). `true` in process and for adapters without `settle`.
    func adapterConfirmed(_ parked: [RequestRecord]) -> Bool {
        guard listeners != nil else { return true }
        var gates: [DriverSettleGate] = []
        for client in clients.values {
            if let gate = (client as? ProcessDriverClient)?.gate, !gates.contains(where: { $0 === gate }) { gates.append(gate) }
        }
        guard !gates.isEmpty else { return true }
        let stamp = [port.requestCount] + parked.map(\.seq).sorted()
        let poke: @Sendable () -> Void = { [recorder] in recorder.poke() }
        return gates.allSatisfy { $0.settled(mock: stamp, poke: poke) }
    }

    /// Ends each failing check's message in a scenario whose adapter broke the driver protocol.
    static let protocolNote = " [may follow from the adapter's driver protocol problem: a reply the harness could not read]"

    /// What every other failed check of a scenario whose adapter died ends with: it follows from
    /// the death, and its advice ("move that step earlier") is not the scenario's to take (an
    /// eighty-first outside tester, F4: a correct shipped file was told it deadlocks).
    static let crashNote = " [follows from the SDK adapter's death (check crash): not a judgment of the SDK or the scenario]"

    /// How `crash.reason` begins when the SDK adapter died during the scenario.
    static let adapterCrashPrefix = "the SDK adapter crashed: "

    /// Tells the driver the scenario is over, stops the listeners, and folds the driver's report
    /// into `result`: a crash of the adapter makes it `crashed` with reason `crashed: ...` and a
    /// `crash` object (`reason`, `stderr`), each protocol problem a failed `driver protocol` check, and the
    /// adapter's standard error is kept when the scenario did not pass.
    func finishDriver(_ result: inout ScenarioResult) async {
        let report = await driver.scenarioDidEnd(clients: instances)
        await listeners?.shutdown()
        // The first 20 problems as checks, then one that counts the rest. They come first, and
        // the reason names them: a reply the harness could not read became the operation's
        // `driverError`, so what failed after it (an `assert` on a cache the reference app did not
        // undo) may follow from it. Before, the headline was that follow-on failure with its
        // contract rule, and the protocol checks came last (a forty-seventh outside tester, E).
        var protocolChecks = report.problems.prefix(20).map { CheckResult(name: "driver protocol", passed: false, message: $0) }
        if report.problems.count > 20 {
            protocolChecks.append(CheckResult(name: "driver protocol", passed: false,
                                              message: "\(report.problems.count - 20) more protocol problem(s) in this scenario, the last: \(report.problems.last!)"))
        }
        if let first = protocolChecks.first {
            let note = Self.protocolNote
            for i in result.checks.indices where !result.checks[i].passed {
                if let m = result.checks[i].message, !m.hasSuffix(note) { result.checks[i].message = m + note }
            }
            let others = result.checks.filter { !$0.passed }.count
            result.checks.insert(contentsOf: protocolChecks, at: 0)
            result.reason = "the adapter broke the driver protocol: \(first.message ?? "")"
                + (others > 0 ? "; \(others) other check(s) failed with it and may follow from it (see checks)" : "")
            if result.status == .passed { result.status = .failed }
        }
        if let crash = report.crash {
            result.status = .crashed
            for i in result.checks.indices where !result.checks[i].passed {
                if let m = result.checks[i].message, !m.hasSuffix(Self.crashNote) { result.checks[i].message = m + Self.crashNote }
            }
            // The crash is the failure (its check first, as for a worker's death): what the named
            // checks say after it (a client that "did not report its cache") follows from it, and
            // `explore` named the adapter's death after them (a twenty-seventh outside tester).
            result.checks.insert(CheckResult(name: "crash", passed: false, message: Self.adapterCrashPrefix + crash), at: 0)
            // The reason is the crash: steps that failed after it (a `wait_for` that never met
            // its request, "the scenario deadlocks in this order") follow from the death and are
            // only counted here, their messages kept in the checks (an outside tester: a dead
            // adapter's scenario was told to move a step).
            let others = result.checks.dropFirst().filter { !$0.passed }.count
            result.reason = "crashed: \(crash)" + (others > 0 ? "; \(others) other check(s) failed with it (see checks)" : "")
            result.crash = .object(["reason": .string(Self.adapterCrashPrefix + crash),
                                    "stderr_tail": .array(report.stderr.suffix(20).map(JSONValue.string))])
        }
        if result.status != .passed && result.status != .skipped { result.adapterStderr = report.stderr }
    }
}

/// What a scenario needs of a driver, as capability names: a view of ``Scenario/requirements``
/// (listed and inferred, Scenario/ScenarioRequirements.swift) for `--list` and the skip check.
enum ScenarioRequirements {
    /// The capabilities `scenario` needs, in a stable order (listed first, then inferred in step order).
    static func needed(_ scenario: Scenario) -> [String] {
        scenario.requirements.map(\.capability)
    }

    /// The capabilities `scenario` needs that `capabilities` lacks.
    static func missing(_ scenario: Scenario, capabilities: Set<String>) -> [String] {
        scenario.unmet(by: capabilities).map(\.capability)
    }
}
