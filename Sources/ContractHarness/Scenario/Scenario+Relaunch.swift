import Foundation

extension Scenario {
    /// The clients that are relaunches, each with the client whose origin (base URL) it takes.
    ///
    /// A relaunch is a client launched at its first use (`"launch": "at_first_use"`) whose store an
    /// earlier client of the scenario names that sends nothing from then on: no SDK call or app
    /// action of it at or after the relaunched client's first use, and every asynchronous one it
    /// began awaited before then (a `close`, a `persisted` or `cache` assertion may follow: they
    /// send nothing). A relaunched app talks to the backend it talked to before, so an SDK that
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
        // Per client: the steps that use its instance, those that may make it send (SDK calls and
        // app actions), its asynchronous labels, and when each label was awaited first.
        var uses: [ExactKey: [Int]] = [:], sends: [ExactKey: [Int]] = [:], pending: [ExactKey: [String]] = [:]
        var awaited: [ExactKey: Int] = [:]
        for (i, step) in steps.enumerated() {
            if let client = ScenarioExecution.clientUsed(by: step, appClient: appClient) { uses[ExactKey(client), default: []].append(i) }
            switch step {
            case .sdk(let client, _, let label, let isAsync, _, _), .app(_, let label, let isAsync, _, let client, _):
                sends[ExactKey(client), default: []].append(i)
                if isAsync { pending[ExactKey(client), default: []].append(label ?? "") }
            case .seedStore(let client, _, _, _, _): uses[ExactKey(client), default: []].append(i)
            case .await(let label, _):
                let base = label.split(separator: "#", maxSplits: 1).first.map(String.init) ?? label
                if awaited[ExactKey(base)] == nil { awaited[ExactKey(base)] = i }
            default: break
            }
        }
        // Relaunches in the order they happen (a chain resolves to its first launch).
        let relaunched = clients.filter { launchedAtFirstUse.containsExactly($0.name) && $0.store != nil }
            .compactMap { c in uses[ExactKey(c.name)]?.first.map { (client: c, first: $0) } }
            .sorted { $0.first < $1.first }
        var owners: [ExactKey: String] = [:]
        var taken: Set<ExactKey> = []
        for (c, first) in relaunched {
            let earlier = clients.compactMap { p -> (name: String, last: Int)? in
                let key = ExactKey(p.name)
                guard !p.name.isExactly(c.name), let store = p.store, store.isExactly(c.store ?? ""), !taken.contains(key),
                      let last = (uses[key] ?? []).filter({ $0 < first }).max(),
                      !(sends[key] ?? []).contains(where: { $0 >= first }),
                      (pending[key] ?? []).allSatisfy({ !$0.isEmpty && (awaited[ExactKey($0)].map { $0 < first } ?? false) }) else { return nil }
                return (p.name, last)
            }
            guard let previous = earlier.max(by: { $0.last < $1.last }) else { continue }
            taken.insert(ExactKey(previous.name))
            owners[ExactKey(c.name)] = owners[ExactKey(previous.name)] ?? previous.name
        }
        return owners
    }
}
