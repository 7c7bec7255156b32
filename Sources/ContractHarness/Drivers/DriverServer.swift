#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import ExperimentlyMock
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The adapter side of `experimently-driver/1`: serves an in-process `SDKDriver` on standard
/// input and output, so any Swift SDK the harness can drive in process can also be driven out of
/// process (`experimently-driver` serves `SwiftSDKDriver`, the shipping client).
///
/// Requests are read on one thread and handled in order: `create_client`, `clock`, `cancel`,
/// `close_client` take effect before the next request is read; `perform` and `persisted` run as
/// tasks on the counting executor of their scope and answer when done, in any order. Each scope (a
/// scenario run) has its own `VirtualClock` and executor; a `clock` request moves the clock and
/// answers once the operations it woke have finished or suspended again (the scope's executor is
/// idle), so their replies come first; `settle` (declared by the server itself) answers on a task
/// of its own once every operation of the scope is suspended (`{"settled": true}`), or after 2 s
/// (`{"settled": false}`). Clients
/// talk to their `base_url` over real loopback HTTP (`URLSession`); offline stores live in memory,
/// one per store id, and `seed_store` writes into one through a live client of that store
/// (`DriverClient.seedPersisted`). A line that is not a request but has a readable `id` gets an
/// error reply. Replies are written whole, one line each, under a lock.
public final class DriverServer: @unchecked Sendable {
    // @unchecked Sendable: mutable state lives in `state` (a HarnessLocked); the rest is `let`.
    private struct Scope {
        let clock: VirtualClock
        /// The executor the scope's operations run on (`nil` before macOS 15): its idleness says
        /// every operation of the scope is suspended (`settle`, and a `clock` move's replies).
        let executor: (any IdleReporting)?
        var clients: Set<String> = []
    }
    private struct State {
        var scopes: [String: Scope] = [:]
        var clients: [String: (client: any DriverClient, scope: String, session: URLSession, store: String?)] = [:]
        var stores: [ExactKey: SharedDefaults] = [:]   // by exact store id
        var running: [Int: Task<Void, Never>] = [:]
        /// Executors of scopes whose clients are all closed: kept alive, as an operation still
        /// running may enqueue a job on its executor (which tasks hold unowned).
        var retired: [any IdleReporting] = []
        /// Sessions of closed clients, for the next clients: never invalidated (see `closeClient`).
        var idleSessions: [URLSession] = []
    }

    private let driver: any SDKDriver
    private let state = HarnessLocked(State())
    private let output = NSLock()
    private let encoder = DriverMessageEncoder()
    private let decoder = DriverMessageDecoder()

    /// Creates a server for `driver` (the SDK the adapter exposes).
    public init(driver: any SDKDriver) {
        self.driver = driver
    }

    /// Connections a served client may hold open to one host at once: more than a scenario holds
    /// requests of one client at the same time (an eighth outside tester held 300 with `times`,
    /// and the 256 of before left the rest unsent: "not quiescent" for a correct SDK). `serve()`
    /// raises the process's open-file limit to its hard limit for them.
    static let connectionsPerHost = 4096

    /// A fresh executor for a scope's operations (`nil` before macOS 15).

    private static func makeExecutor() -> (any IdleReporting)? {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *) { return OperationExecutor(onIdle: {}) }
        return nil
    }

    /// Serves until `shutdown` or the end of standard input; returns the exit status (0, or 1
    /// after a line that is not a request, which is answered with an error reply and skipped).
    public func serve() async -> Int32 {
        OpenFileLimit.raiseToHardLimit()
        signal(SIGPIPE, SIG_IGN)
        var status: Int32 = 0
        for await line in Self.lines(of: 0) {
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x0D }) { continue }
            let request: DriverRequest
            do { request = try decoder.request(line) } catch {
                status = 1
                StandardStream.error(Data("experimently-driver: \(error)\n".utf8))
                // A request with a readable id (an unknown type, a mistyped field) gets its error
                // reply, so the harness is not left waiting for it.
                if let id = DriverMessageDecoder.id(in: line) { fail(id, "\(error)") }
                continue
            }
            if request.type == .shutdown {
                await drain()
                reply(DriverReply(id: request.id, result: .object([:])))
                return status
            }
            await handle(request)
        }
        await drain()
        return status
    }

    /// The lines (without `\n`) read from `fd` on a thread of their own (a blocking read must not
    /// hold one of the few cooperative threads), until end of file.
    static func lines(of fd: Int32) -> AsyncStream<Data> {
        AsyncStream { continuation in
            let thread = Thread {
                var pending = LineBuffer()
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let n = read(fd, &buffer, buffer.count)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    pending.append(buffer[0..<n])
                    while let line = pending.nextLine() { continuation.yield(line) }
                }
                if let rest = pending.takeRest() { continuation.yield(rest) }
                continuation.finish()
            }
            thread.start()
        }
    }

    /// Waits (bounded, 2 s) until no operation runs, so the last replies are written before exit.
    private func drain() async {
        let tasks = state.withLock { Array($0.running.values) }
        for t in tasks { t.cancel() }
        let deadline = DispatchTime.now() + .seconds(2)
        while !state.withLock({ $0.running.isEmpty }) && DispatchTime.now() < deadline { await Task.yield() }
    }

    private func reply(_ r: DriverReply) {
        guard let data = try? encoder.line(r) else { return }
        output.withLock {
            data.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(1, raw.baseAddress! + offset, raw.count - offset)
                    if n < 0 { if errno == EINTR { continue }; return }
                    offset += n
                }
            }
        }
    }

    private func fail(_ id: Int, _ message: String) { reply(DriverReply(id: id, error: message)) }

    private func handle(_ r: DriverRequest) async {
        switch r.type {
        case .hello:
            // `settle` is the server's own (the scope executors), whatever the driver declares;
            // `interleaving` never crosses the protocol (the harness's executor cannot run tasks
            // in this process): declared, it made an interleaved scenario run out of process and
            // fail a correct SDK with a deadlock.
            var capabilities = driver.capabilities
            capabilities.remove("interleaving")
            if Self.makeExecutor() != nil { capabilities.insert("settle") }
            let hello = DriverHello(sdkName: driver.sdkName, sdkVersion: driver.sdkVersion, capabilities: capabilities)
            reply(DriverReply(id: r.id, result: hello.json))
        case .createClient:
            createClient(r)
        case .perform, .persisted:
            guard let id = r.client, let entry = state.withLock({ $0.clients[id] }) else {
                return fail(r.id, "\(r.type.rawValue): no client '\(r.client ?? "")' (create_client first)")
            }
            let body: @Sendable () async -> Void
            if r.type == .perform {
                let op: SDKOperation
                do { op = try DriverOperation.operation(r.operation ?? .null) } catch { return fail(r.id, "\(error)") }
                body = { [self] in
                    let outcome = await entry.client.perform(op)
                    reply(DriverReply(id: r.id, result: outcome.json))
                }
            } else {
                guard let kind = r.kind, let user = r.user, let key = r.key else {
                    return fail(r.id, "persisted needs \"kind\", \"user\" and \"key\"")
                }
                body = { [self] in
                    let value = await entry.client.persisted(kind: kind, user: user, key: key)
                    reply(DriverReply(id: r.id, result: .object(["found": .bool(value != nil), "value": value ?? .null])))
                }
            }
            launch(r.id, on: state.withLock { $0.scopes[entry.scope]?.executor }, body)
        case .clock:
            guard let scope = r.scope, let now = r.now, let found = state.withLock({ $0.scopes[scope] }) else {
                return fail(r.id, "clock needs a known \"scope\" and \"now\"")
            }
            found.clock.advance(by: now - found.clock.now().timeIntervalSince1970)
            _ = await settle(found.executor)
            // `next`: the earliest timer still pending (a request deadline), so the harness can
            // stop the clock there on its way (one instant at a time, as in process).
            var result: [String: JSONValue] = ["now": .number(found.clock.now().timeIntervalSince1970)]
            result["next"] = found.clock.nextDeadline.map { .number($0.timeIntervalSince1970) } ?? .null
            reply(DriverReply(id: r.id, result: .object(result)))
        case .settle:
            // Answered on a task of its own, so the reading of the next request goes on meanwhile;
            // the performs read before it are already on the scope's executor.
            guard let scope = r.scope, let found = state.withLock({ $0.scopes[scope] }) else {
                return fail(r.id, "settle needs a known \"scope\" (create_client first)")
            }
            Task { [self] in
                let settled = await settle(found.executor)
                reply(DriverReply(id: r.id, result: .object(["settled": .bool(settled)])))
            }
        case .cancel:
            let task = r.target.flatMap { t in state.withLock { $0.running[t] } }
            task?.cancel()
            reply(DriverReply(id: r.id, result: .object(["cancelled": .bool(task != nil)])))
        case .closeClient:
            guard let id = r.client, let entry = state.withLock({ s in s.clients.removeValue(forKey: id) }) else {
                return fail(r.id, "close_client: no client '\(r.client ?? "")'")
            }
            state.withLock { s in
                s.scopes[entry.scope]?.clients.remove(id)
                if s.scopes[entry.scope]?.clients.isEmpty == true {
                    if let executor = s.scopes[entry.scope]?.executor { s.retired.append(executor) }
                    s.scopes[entry.scope] = nil
                    let live = Set(s.clients.values.compactMap(\.store).map { ExactKey($0) })
                    s.stores = s.stores.filter { live.contains($0.key) }
                }
            }
            // The session is not invalidated: an operation of the closed client still running may
            // create another data task on it (a `trackBatch`'s next batch), and on an invalidated
            // session that is a fatalError in FoundationNetworking. It serves the next client
            // instead (each client's requests go to its own base URL; completions are per task).
            state.withLock { $0.idleSessions.append(entry.session) }
            reply(DriverReply(id: r.id, result: .object([:])))
        case .seedStore:
            await seedStore(r)
        case .ping:
            reply(DriverReply(id: r.id, result: .object([:])))
        case .shutdown:
            break
        }
    }

    /// `seed_store`: writes each entry through a live client of the named store (its
    /// `DriverClient.seedPersisted`, for the shipping SDK the `OfflineStore` key and bytes an
    /// earlier version wrote); answers `{"seeded": N}`, or an error naming the JSON path of a
    /// malformed entry, or saying that no client uses the store.
    private func seedStore(_ r: DriverRequest) async {
        let store: String, entries: [DriverSeedEntry]
        do { (store, entries) = try DriverSeedEntry.request(r) } catch { return fail(r.id, "\(error)") }
        let exact = Array(store.unicodeScalars)
        guard let client = state.withLock({ s in
            s.clients.values.first { $0.store.map { Array($0.unicodeScalars) == exact } ?? false }?.client
        }) else {
            return fail(r.id, "seed_store: no client uses store '\(store)' (create_client with that \"store\" first)")
        }
        for (i, e) in entries.enumerated() {
            if let problem = await client.seedPersisted(kind: e.kind, user: e.user, key: e.key, json: e.value) {
                return fail(r.id, "seed_store: at $.entries[\(i)]: \(problem)")
            }
        }
        reply(DriverReply(id: r.id, result: .object(["seeded": .number(Double(entries.count))])))
    }

    private func createClient(_ r: DriverRequest) {
        guard let id = r.client, let scope = r.scope, let settings = r.settings else {
            return fail(r.id, "create_client needs \"client\", \"scope\" and \"settings\"")
        }
        if state.withLock({ $0.clients[id] != nil }) { return fail(r.id, "create_client: client '\(id)' exists") }
        let clock = state.withLock { s -> VirtualClock in
            if let c = s.scopes[scope]?.clock { return c }
            let c = VirtualClock(start: Date(timeIntervalSince1970: r.now ?? 1_700_000_000))
            s.scopes[scope] = Scope(clock: c, executor: Self.makeExecutor())
            return c
        }
        let session = state.withLock { $0.idleSessions.popLast() } ?? {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = nil
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            // A held request keeps its connection: with URLSession's default of 6 per host a 7th
            // request held at once for one client (one host of the mock) was never sent, and a
            // correct SDK failed out of process where it passed in process (a third outside tester).
            configuration.httpMaximumConnectionsPerHost = Self.connectionsPerHost
            // No cookies and no redirects followed, as in process (the mock's URLProtocol hands the
            // SDK every answer as it is): sessions are reused across scenarios, and a `Set-Cookie`
            // of one scenario's mock went out with later scenarios' requests, so a verdict depended
            // on the run's order; a 3xx was followed by FoundationNetworking, a 307 POST re-sent
            // without its body (a seventy-sixth outside tester, F1, F3, F4).
            configuration.httpCookieStorage = nil
            configuration.httpShouldSetCookies = false
            configuration.httpCookieAcceptPolicy = .never
            return URLSession(configuration: configuration, delegate: RedirectRefusal.shared, delegateQueue: nil)
        }()
        let stores = state
        var context = DriverContext(makeSession: { _ in session }, clock: clock,
                                    storeSuite: { "experimently-driver-\($0)" },
                                    memoryStore: { name in
                                        stores.withLock { s in
                                            if let d = s.stores[ExactKey(name)] { return d }
                                            let d = SharedDefaults(defaults: MemoryDefaults())
                                            s.stores[ExactKey(name)] = d
                                            return d
                                        }
                                    },
                                    baseURL: { _ in settings.baseURL })
        // The SDK's own tasks (a request's deadline, a single-flight fetch) prefer the scope's
        // executor, so `settle` and a `clock` move's reply see them: on the global executor a
        // deadline a clock move woke could still be running when `settle` said true, and the
        // harness judged the operation past its own deadline (a fourth outside tester, 1 of 40).
        context.taskExecutor = state.withLock { $0.scopes[scope]?.executor }
        do {
            let client = try driver.makeClient(name: id, settings: settings.clientSettings, store: r.store, context: context)
            state.withLock { s in
                s.clients[id] = (client, scope, session, r.store)
                s.scopes[scope]?.clients.insert(id)
            }
            reply(DriverReply(id: r.id, result: .object([:])))
        } catch {
            fail(r.id, "create_client: \(error)")
        }
    }

    private func launch(_ id: Int, on executor: (any IdleReporting)?, _ body: @escaping @Sendable () async -> Void) {
        let run: @Sendable () async -> Void = { [self] in
            await body()
            _ = state.withLock { $0.running.removeValue(forKey: id) }
        }
        state.withLock { s in
            let task: Task<Void, Never>
            if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let executor = executor as? OperationExecutor {
                task = Task(executorPreference: executor, operation: run)
            } else {
                task = Task(operation: run)
            }
            s.running[id] = task
        }
    }

    /// Waits until the scope's executor is idle twice in a row (bounded, 2 s): every operation of
    /// the scope has finished (its reply written) or is suspended, waiting for something from
    /// outside (a shared request it joined, its own request's answer, a clock move, a cancel).
    /// Returns `false` when the bound ended the wait (`true` where there is no executor to ask).
    private func settle(_ executor: (any IdleReporting)?) async -> Bool {
        guard let executor else { return true }
        let deadline = DispatchTime.now() + .seconds(2)
        var idleRounds = 0
        while idleRounds < 2 && DispatchTime.now() < deadline {
            idleRounds = executor.isIdle ? idleRounds + 1 : 0
            await Task.yield()
        }
        return idleRounds >= 2
    }
}

/// A session delegate that follows no redirect: the SDK gets the 3xx answer itself, as the
/// in-process transport gives it (stateless, so `Sendable`).
final class RedirectRefusal: NSObject, URLSessionTaskDelegate, Sendable {
    static let shared = RedirectRefusal()

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}
