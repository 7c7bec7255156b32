import Foundation

extension Scenario {
    /// The clients that are relaunches, each with the client whose origin (base URL) it takes.
    ///
    /// A relaunch is a client launched at its first use (`"launch": "at_first_use"`) whose store an
    /// earlier client of the scenario names that sends nothing from then on: no SDK call or app
    /// action of it at or after the relaunched client's launch (its first use; a `seed_store`
    /// naming it launches nothing), and every asynchronous one it began awaited before then, each
    /// copy of a `times` group by its own label (`await L#k` awaits copy k alone); a `close`, a
    /// clear, a cache read or an assertion may follow: they send nothing. Two clients of a store
    /// running at once keep two origins (that is how their requests are told apart), so values one
    /// of them persisted are under another origin than a relaunch of the other. A relaunched app talks to the backend it talked to before, so an SDK that
    /// keys its offline store by its base URL (GrowthBook keys its cache by API host and client
    /// key) finds what it persisted: with an origin per client, such an SDK never served its
    /// fallback after a relaunch (an eighty-sixth outside tester, B1). Of several such earlier
    /// clients the one used last is taken, each once; a chain of relaunches shares its first
    /// launch's origin. Requests to a shared origin are the earlier clients' until the later one
    /// launches and its own from then on (`MockBackendPort.handOver(to:)`), so every request is
    /// still attributed to one client.
    ///
    /// Shape: relaunched client (exact) -> the client that owns its origin.
    var originOwners: [ExactKey: String] {
        guard !launchedAtFirstUse.isEmpty else { return [:] }
        let appClient = app?.client
        // Per client: its launch (the first step that uses its instance: an SDK call, an app step,
        // a cache or store assertion; a `seed_store` naming it launches nothing), the steps that
        // may make it send (SDK calls other than close, clears and cache reads, and app actions),
        // and its asynchronous operations, each copy of a `times` group by its own label.
        var launches: [ExactKey: Int] = [:], lastUse: [ExactKey: [Int]] = [:], sends: [ExactKey: [Int]] = [:]
        var pending: [ExactKey: [String]] = [:]
        var awaited: [ExactKey: Int] = [:]
        for (i, step) in steps.enumerated() {
            if let client = ScenarioExecution.clientUsed(by: step, appClient: appClient) {
                if launches[ExactKey(client)] == nil { launches[ExactKey(client)] = i }
                lastUse[ExactKey(client), default: []].append(i)
            }
            switch step {
            case .sdk(let client, let op, let label, let isAsync, let count, _):
                switch op {
                case .close, .clearCache, .clearOfflineCache, .getAssignments, .getEvaluatedFlags, .hashUser: break
                default: sends[ExactKey(client), default: []].append(i)
                }
                if isAsync { pending[ExactKey(client), default: []] += Self.copyLabels(label, count: count) }
            case .app(_, let label, let isAsync, _, let client, let count):
                sends[ExactKey(client), default: []].append(i)
                if isAsync { pending[ExactKey(client), default: []] += Self.copyLabels(label, count: count) }
            case .seedStore(let client, _, _, _, _): lastUse[ExactKey(client), default: []].append(i)
            case .await(let label, _):
                // `await L` waits for L and every copy of it; `await L#k` for copy k alone.
                if awaited[ExactKey(label)] == nil { awaited[ExactKey(label)] = i }
            default: break
            }
        }
        func awaitedAt(_ label: String) -> Int? {
            let whole = label.split(separator: "#", maxSplits: 1).first.map(String.init) ?? label
            return [awaited[ExactKey(label)], label.isExactly(whole) ? nil : awaited[ExactKey(whole)]].compactMap { $0 }.min()
        }
        // Relaunches in the order they happen (a chain resolves to its first launch).
        let relaunched = clients.filter { launchedAtFirstUse.containsExactly($0.name) && $0.store != nil }
            .compactMap { c in launches[ExactKey(c.name)].map { (client: c, first: $0) } }
            .sorted { $0.first < $1.first }
        var owners: [ExactKey: String] = [:]
        var taken: Set<ExactKey> = []
        for (c, first) in relaunched {
            let earlier = clients.compactMap { p -> (name: String, last: Int)? in
                let key = ExactKey(p.name)
                guard !p.name.isExactly(c.name), let store = p.store, store.isExactly(c.store ?? ""), !taken.contains(key),
                      let last = (lastUse[key] ?? []).filter({ $0 < first }).max(),
                      !(sends[key] ?? []).contains(where: { $0 >= first }),
                      (pending[key] ?? []).allSatisfy({ !$0.isEmpty && (awaitedAt($0).map { $0 < first } ?? false) }) else { return nil }
                return (p.name, last)
            }
            guard let previous = earlier.max(by: { $0.last < $1.last }) else { continue }
            taken.insert(ExactKey(previous.name))
            owners[ExactKey(c.name)] = owners[ExactKey(previous.name)] ?? previous.name
        }
        return owners
    }

    /// The labels of an asynchronous step's operations: `label` alone, or `label#1` to
    /// `label#count` for a `times` group; `""` (never awaited) when the step has no label.
    private static func copyLabels(_ label: String?, count: Int) -> [String] {
        guard let label else { return [""] }
        return count == 1 ? [label] : (1...count).map { "\(label)#\($0)" }
    }
}
