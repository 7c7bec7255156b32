#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import ExperimentlyMock

/// A driver for an SDK in another process (any language): starts an adapter command and speaks
/// `experimently-driver/1` with it (Documentation/DriverProtocol.md); `run --sdk-command CMD`.
///
/// The command runs through `/bin/sh -c` in a process group of its own (as `vectors` runs its
/// adapters); one adapter process serves the whole run, and is started again for the next
/// scenario when it died. Its clients talk to the mock over loopback TCP (`.loopbackTCP`). Each
/// scenario run is a scope: its clients get ids `s<N>.<name>`, its stores `s<N>.<store>`, and one
/// clock that `clockDidAdvance` sets. The adapter's standard error is kept (the last 400 lines)
/// and quoted in the report of a scenario that fails. A line on its standard output that is not a
/// reply is a protocol problem quoting the line; its death fails the waiting operations with
/// error kind `crashed` and the scenario with reason `crashed: ...`; an operation it never answers
/// meets the runner's step deadline.
///
/// Mutable state lives in a `HarnessLocked` box.
public final class ProcessSDKDriver: SDKDriver, @unchecked Sendable {
    // @unchecked Sendable: mutable state is inside `state` (a HarnessLocked); the rest is `let`.
    /// The adapter command, run through `/bin/sh -c`.
    public let command: String
    /// The SDK's name from `hello`.
    public let sdkName: String
    /// The SDK's version from `hello`.
    public let sdkVersion: String
    /// The capabilities from `hello`, without `interleaving`: the harness cannot choose the order
    /// of another process's tasks (Documentation/DriverProtocol.md, Capabilities), so a scenario
    /// with an `interleaving` section is skipped and `explore --interleave` refused, even for an
    /// adapter that declares it.
    public let capabilities: Set<String>
    /// Out of process: loopback TCP.
    public var transport: DriverTransport { .loopbackTCP }

    private struct ScopeInfo {
        let id: String
        let connection: DriverConnection
        let stderrMark: Int
        let problemMark: Int
        /// The scope's `settle` gate when the adapter declares `settle`.
        let gate: DriverSettleGate?
    }
    private struct State {
        var connection: DriverConnection
        /// Why an adapter started again after a death could not be used (its `hello`): every
        /// later scenario is an error naming it, without starting it again.
        var restartFailure: String?
        var scopes: [ObjectIdentifier: ScopeInfo] = [:]
        var nextScope = 0
        /// By scope clock: the adapter's earliest timer as its last `clock` reply wrote it (`next`, seconds
        /// since 1970, kept as written: `clockDidAdvance` compares it with the instant it sends).
        var nextTimers: [ObjectIdentifier: Double] = [:]
        /// By scope id (`s12`, never reused): the latest `now` sent to the adapter (`create_client`, `clock`).
        var sentNow: [String: Double] = [:]
    }
    private let state: HarnessLocked<State>

    /// The first adapter's `hello`: an adapter started again must say the same.
    private let hello: DriverHello

    private init(command: String, connection: DriverConnection, hello: DriverHello) {
        self.command = command
        self.hello = hello
        sdkName = hello.sdkName
        sdkVersion = hello.sdkVersion
        capabilities = hello.capabilities.subtracting(["interleaving"])
        state = HarnessLocked(State(connection: connection))
    }

    /// Starts `command` and exchanges `hello`.
    ///
    /// - Parameter timeoutSeconds: how long the adapter has to answer `hello`.
    /// - Throws: `DriverProtocolError` when the adapter cannot be started, dies, prints something
    ///   that is not the protocol, speaks another version, or does not answer in time (the
    ///   message quotes the offending line and its standard error).
    public static func launch(command: String, timeoutSeconds: Double = 10) async throws -> ProcessSDKDriver {
        let connection = try DriverConnection(command: command)
        let hello: DriverHello
        do {
            hello = try await connection.hello(timeoutSeconds: timeoutSeconds)
        } catch {
            await connection.stop()
            throw error
        }
        return ProcessSDKDriver(command: command, connection: connection, hello: hello)
    }

    /// Sends `shutdown`, waits up to 2 s for the adapter to exit, then kills its process group.
    public func shutdown() async {
        await state.withLock { $0.connection }.stop()
    }

    /// The connection to use now: the current one, or a fresh adapter when it died.
    private func liveConnection() throws -> DriverConnection {
        // Under the lock, so concurrent scenarios (explore) start one fresh adapter, not several.
        let (live, dead) = try state.withLock { s -> (DriverConnection, DriverConnection?) in
            if let failure = s.restartFailure { throw DriverProtocolError(failure) }
            guard s.connection.death != nil else { return (s.connection, nil) }
            let fresh = try DriverConnection(command: command)
            let dead = s.connection
            s.connection = fresh
            // Its `hello` is awaited (10 s, as the first adapter's) and must say what the first
            // said: before, it was sent and never read, so a restarted adapter stuck in start-up
            // failed every later step as the SDK's fault, and one speaking another protocol, or
            // declaring other capabilities, was used as if it were the first (a thirty-fourth
            // outside tester, F5). Waited for under the lock, so concurrent scenarios (explore)
            // start one adapter; the reply comes on the connection's reader thread, not the pool.
            if let problem = fresh.restartedHello(expecting: hello, timeoutSeconds: 10) {
                let why = "the adapter was started again after \(dead.death ?? "it died"), and \(problem)"
                fresh.fail(why)
                s.restartFailure = why
                throw DriverProtocolError(why)
            }
            return (fresh, dead)
        }
        // The one it replaces may still run (it closed its standard output but stayed alive):
        // stopped and reaped, never left behind (a sixteenth outside tester: it outlived the run).
        if let dead { Task { await dead.stop() } }
        return live
    }

    /// How long a `ping` may take before the adapter counts as hung (milliseconds).
    static let pingDeadlineMilliseconds = 5000

    /// Sends `create_client`; the reply is awaited by the client's first request.
    ///
    /// - Throws: `DriverProtocolError` when a dead adapter cannot be started again.
    public func makeClient(name: String, settings: ClientSettings, store: String?, context: DriverContext) throws -> any DriverClient {
        let key = ObjectIdentifier(context.clock)
        var scope = state.withLock { $0.scopes[key] }
        if scope == nil {
            let connection = try liveConnection()
            scope = state.withLock { s in
                s.nextScope += 1
                let id = "s\(s.nextScope)"
                let info = ScopeInfo(id: id, connection: connection, stderrMark: connection.stderrCount,
                                     problemMark: connection.problemCount,
                                     gate: capabilities.contains("settle") ? DriverSettleGate(scope: id, connection: connection) : nil)
                s.scopes[key] = info
                return info
            }
        }
        let info = scope!
        var request = DriverRequest(id: 0, type: .createClient)
        request.client = "\(info.id).\(name)"
        request.scope = info.id
        request.settings = DriverClientSettings(settings, baseURL: settings.resolvedBaseURL(mock: context.baseURL(name)))
        request.store = store.map { "\(info.id).\($0)" }
        request.now = monotonic(scope: info.id, context.clock.now().timeIntervalSince1970)
        let created = info.connection.send(request, scope: info.id)
        return ProcessDriverClient(id: request.client!, scope: info.id, clockKey: key, connection: info.connection,
                                   created: created, cancels: capabilities.contains("cancel"), store: request.store,
                                   seeds: capabilities.contains("seed_store"), gate: info.gate, problemMark: info.problemMark)
    }

    /// Sends `clock` with the scope's new time and waits for the adapter's acknowledgement, which
    /// comes after the replies of the operations the move completed.
    public func clockDidAdvance(_ clock: VirtualClock, clients: [any DriverClient], deadlineMilliseconds: Int) async -> String? {
        guard capabilities.contains("virtual_clock"), let info = state.withLock({ $0.scopes[ObjectIdentifier(clock)] }) else { return nil }
        var request = DriverRequest(id: 0, type: .clock)
        request.scope = info.id
        // The adapter's clock counts seconds since 1970 in doubles: the harness's instant (on its
        // microsecond grid) may read a rounding below the adapter's own `sent + timeout` due at
        // that same instant, so the timer would never fire and the walk drop it as due (a
        // thirty-sixth outside tester, G1: 19% of grid pairs). When the adapter's last `next`
        // lies on this instant, it is told that `next` (never more than half a microsecond on).
        var now = clock.now().timeIntervalSince1970
        if let raw = state.withLock({ $0.nextTimers[ObjectIdentifier(clock)] }), raw > now,
           clock.onGrid(Date(timeIntervalSince1970: raw)) <= clock.now() {
            now = raw
        }
        request.now = monotonic(scope: info.id, now)
        let slot = info.connection.send(request, scope: info.id)
        info.gate?.sent()
        switch await slot.value(deadlineMilliseconds: deadlineMilliseconds) {
        case .success(let result):
            let next: Double? = if case .number(let n)? = result["next"], n.isFinite { n } else { nil }
            state.withLock { $0.nextTimers[ObjectIdentifier(clock)] = next }
            return nil
        case .failure(let f): return "the adapter did not take the clock move: \(f.message)"
        }
    }

    /// `now`, or the latest instant already sent for `clock` when that is later: the adapter's
    /// clock never goes back (DriverProtocol.md). A move to an adapter's `next` may send up to
    /// half a microsecond past the harness's grid instant (above); the next move to that same
    /// instant sent the grid's value, a hair earlier, and an adapter that turns clock moves into
    /// durations crashed on a negative one (a sixty-ninth outside tester, F1).
    private func monotonic(scope: String, _ now: Double) -> Double {
        state.withLock { s in
            let sent = max(now, s.sentNow[scope] ?? now)
            s.sentNow[scope] = sent
            return sent
        }
    }

    /// The adapter's earliest timer on the scope's clock, as its last `clock` reply said (`next`,
    /// optional in the reply; `nil`: none or not said).
    public func nextTimer(of clock: VirtualClock) -> Date? {
        state.withLock { $0.nextTimers[ObjectIdentifier(clock)] }.map { Date(timeIntervalSince1970: $0) }
    }

    /// Closes the scenario's clients on the adapter, gives up on what they never answered, and
    /// reports a crash, protocol problems and standard error seen since the scenario started.
    public func scenarioDidEnd(clients: [any DriverClient]) async -> DriverScenarioReport {
        let mine = clients.compactMap { $0 as? ProcessDriverClient }
        // A clock's identifier may be reused by a later scenario's clock once this one is gone:
        // its timer is forgotten with its scope.
        guard let first = mine.first, let info = state.withLock({ s -> ScopeInfo? in
            s.nextTimers[first.clockKey] = nil
            guard let info = s.scopes.removeValue(forKey: first.clockKey) else { return nil }
            s.sentNow[info.id] = nil
            return info
        }) else {
            return DriverScenarioReport()
        }
        let connection = info.connection
        connection.closeScope(info.id)
        await connection.confirmDeath()
        if connection.death == nil {
            var answered = false
            for client in mine {
                var request = DriverRequest(id: 0, type: .closeClient)
                request.client = client.id
                if case .failure(.timedOut(_)) = await connection.send(request, scope: info.id).value(deadlineMilliseconds: 2000) { continue }
                answered = true
            }
            // No `close_client` answered in time: a `ping` (an adapter answers every request at
            // once, one of a type it does not know with `error`) tells a busy adapter from one
            // that reads or writes nothing any more. A hung one is given up, so the next scenario
            // starts a fresh adapter (a sixty-sixth outside tester: one wedged adapter made every
            // later scenario wait out its step limits, about an hour of CI).
            if !answered, !mine.isEmpty, connection.death == nil {
                if case .failure(.timedOut(_)) = await connection.send(DriverRequest(id: 0, type: .ping), scope: "").value(deadlineMilliseconds: Self.pingDeadlineMilliseconds) {
                    connection.fail("the adapter hangs: it answered no close_client within 2 s and no ping within \(Self.pingDeadlineMilliseconds / 1000) s "
                                    + "(an adapter answers every request at once, an unknown type with error: Documentation/DriverProtocol.md); "
                                    + "it is started again for the next scenario")
                }
            }
        }
        connection.abandon(scope: info.id)
        // A `close_client` may be the first write to meet a dead adapter.
        await connection.confirmDeath()
        return DriverScenarioReport(crash: connection.death, problems: connection.problems(since: info.problemMark),
                                    stderr: Array(connection.stderr(since: info.stderrMark).suffix(40)))
    }
}

/// One client of an out-of-process SDK, as the runner drives it.
final class ProcessDriverClient: DriverClient, Sendable {
    /// The `perform` calls in progress: those not sent yet (`unsent`), and those sent and not
    /// answered, by request id, with whether the reference app made them (quiescence asks).
    private struct Calls {
        var unsent = 0
        var sent: [Int: (operation: SDKOperation, fromApp: Bool)] = [:]
    }
    private let calls = HarnessLocked(Calls())
    /// The operations the adapter is still working on.
    var pendingOperations: [SDKOperation] { calls.withLock { $0.sent.values.map(\.operation) } }
    /// `perform` calls made and not yet written to the adapter.
    var unsentCalls: Int { calls.withLock { $0.unsent } }
    /// `perform` requests of the runner's own operations (not the reference app's) sent and not answered.
    var runnerCallsInFlight: Int { calls.withLock { $0.sent.values.filter { !$0.fromApp }.count } }
    /// The scope's `settle` gate when the adapter declares `settle` (shared by its clients).
    let gate: DriverSettleGate?
    let id: String
    let scope: String
    let clockKey: ObjectIdentifier
    let connection: DriverConnection
    let created: ReplySlot
    let cancels: Bool
    /// The connection's problem count when this client was created: its problems since then are
    /// this scenario's (`connection.problems(since:)`).
    let problemMark: Int
    /// The adapter's id of the client's offline store (`s<N>.<store>`), `nil` when it has none.
    let store: String?
    /// Whether the adapter declared `seed_store`.
    let seeds: Bool

    init(id: String, scope: String, clockKey: ObjectIdentifier, connection: DriverConnection, created: ReplySlot, cancels: Bool,
         store: String? = nil, seeds: Bool = false, gate: DriverSettleGate? = nil, problemMark: Int = 0) {
        self.gate = gate
        self.problemMark = problemMark
        self.id = id
        self.scope = scope
        self.clockKey = clockKey
        self.connection = connection
        self.created = created
        self.cancels = cancels
        self.store = store
        self.seeds = seeds
    }

    /// How long the adapter has to answer `create_client`, `seed_store` and `persisted`,
    /// milliseconds: those replies are awaited outside any step's limit, so an adapter that never
    /// answered `create_client` or `persisted` hung the run (a sixteenth outside tester); past it
    /// the request fails, named.
    static let replyDeadlineMilliseconds = 10_000

    /// Sends `seed_store` with one entry for the client's store and waits (at most
    /// `replyDeadlineMilliseconds`) for the adapter to take it.
    func seedPersisted(kind: String, user: String, key: String, json: JSONValue) async -> String? {
        guard seeds else { return "the adapter does not declare seed_store" }
        guard let store else { return "the client has no offline store (give it a \"store\")" }
        if case .failure(let f) = await created.value(deadlineMilliseconds: Self.replyDeadlineMilliseconds) { return "create_client: \(f.message)" }
        var request = DriverRequest(id: 0, type: .seedStore)
        request.store = store
        request.entries = .array([DriverSeedEntry(kind: kind, user: user, key: key, value: json).json])
        switch await connection.send(request, scope: scope).value(deadlineMilliseconds: Self.replyDeadlineMilliseconds) {
        case .success(let json):
            // It says how many entries it wrote: one was sent.
            guard case .number(1)? = json["seeded"] else {
                return "the adapter answered seed_store with \(json.jsonText): one entry was sent, so it answers {\"seeded\": 1} when it wrote it (or an error)"
            }
            return nil
        case .failure(let f): return "the adapter did not take seed_store: \(f.message)"
        }
    }

    func perform(_ operation: SDKOperation) async -> OperationOutcome {
        // Counted before anything can suspend: until it is written, quiescence waits for it.
        let fromApp = DriverCallOrigin.app
        calls.withLock { $0.unsent += 1 }
        if case .failure(let f) = await created.value(deadlineMilliseconds: Self.replyDeadlineMilliseconds) {
            calls.withLock { $0.unsent -= 1 }
            return f.outcome(creating: true)
        }
        var request = DriverRequest(id: 0, type: .perform)
        request.client = id
        request.operation = DriverOperation.json(operation)
        let slot = connection.send(request, scope: scope)
        calls.withLock { c in
            c.unsent -= 1
            c.sent[slot.id] = (operation, fromApp)
        }
        gate?.sent()
        defer { _ = calls.withLock { $0.sent.removeValue(forKey: slot.id) } }
        let result = await withTaskCancellationHandler {
            await slot.value()
        } onCancel: { [connection, scope, cancels, gate] in
            guard cancels else { return }
            var cancel = DriverRequest(id: 0, type: .cancel)
            cancel.target = slot.id
            _ = connection.send(cancel, scope: scope)
            gate?.sent()
        }
        switch result {
        case .success(let json):
            do { return try DriverOperation.outcome(json) } catch {
                connection.noteProblem("reply to perform \(operation.name) (request \(slot.id)): \(error)")
                return .error(kind: "driverError", status: nil, code: nil, message: "\(error)")
            }
        case .failure(let f):
            return f.outcome(creating: false)
        }
    }

    func persisted(kind: String, user: String, key: String) async -> JSONValue? {
        guard case .success = await created.value(deadlineMilliseconds: Self.replyDeadlineMilliseconds) else { return nil }
        var request = DriverRequest(id: 0, type: .persisted)
        request.client = id
        request.kind = kind
        request.user = user
        request.key = key
        let slot = connection.send(request, scope: scope)
        let reply = await slot.value(deadlineMilliseconds: Self.replyDeadlineMilliseconds)
        if case .failure(.timedOut(let ms)) = reply {
            connection.noteProblem("persisted (request \(slot.id)): no reply within \(ms) ms")
        }
        guard case .success(let json) = reply else { return nil }
        // `found` is a boolean that agrees with `value` (an outside tester's adapter answered
        // `"found": "false"` beside a value, and it went unsaid).
        let value = json["value"].flatMap { $0 == .null ? nil : $0 }
        switch json["found"] {
        case .bool(false)?:
            if value != nil { connection.noteProblem("persisted (request \(slot.id)): \"found\": false beside a value: \(json.jsonText)") }
            return nil
        case .bool(true)?:
            if value == nil { connection.noteProblem("persisted (request \(slot.id)): \"found\": true without a value: \(json.jsonText)") }
        default:
            connection.noteProblem("persisted (request \(slot.id)): \"found\" is \(json["found"]?.jsonText ?? "missing"), not a boolean: \(json.jsonText)")
        }
        return value
    }
}

/// Why a request got no result.
enum SlotFailure: Error, Sendable {
    /// The adapter answered with `error`.
    case refused(String)
    /// The adapter wrote a line naming the request that is no driver reply (not JSON, not
    /// UTF-8, nested too deep): it answered nothing the harness can read.
    case unreadable(String)
    /// The harness could not write the request (a value no JSON encoder writes).
    case unsendable(String)
    /// The adapter died first.
    case crashed(String)
    /// The scenario ended first.
    case abandoned
    /// The deadline passed first.
    case timedOut(Int)

    var message: String {
        switch self {
        case .refused(let m): return "the adapter refused: \(m)"
        case .unreadable(let m): return "the adapter's reply could not be read: \(m)"
        case .unsendable(let m): return "the harness could not send the request: \(m)"
        case .crashed(let m): return "the adapter crashed: \(m)"
        case .abandoned: return "the scenario ended before the adapter answered"
        case .timedOut(let ms): return "no answer within \(ms) ms"
        }
    }

    /// The operation outcome the runner records.
    func outcome(creating: Bool) -> OperationOutcome {
        switch self {
        case .crashed(let m): return .error(kind: "crashed", status: nil, code: nil, message: m)
        default: return .error(kind: "driverError", status: nil, code: nil, message: (creating ? "create_client: " : "") + message)
        }
    }
}

/// One request's reply, filled by the connection's reader; awaited by one or more tasks.
final class ReplySlot: Sendable {
    // Sendable: mutable state lives in `box` (a HarnessLocked).
    let id: Int
    let scope: String
    /// An `error` reply is an answer like any other, no protocol problem (`ping`: an adapter may
    /// refuse a type it does not know).
    let refusalIsAnAnswer: Bool
    private struct Box {
        var result: Result<JSONValue, SlotFailure>?
        var waiters: [CheckedContinuation<Result<JSONValue, SlotFailure>, Never>] = []
        var callbacks: [@Sendable (Result<JSONValue, SlotFailure>) -> Void] = []
    }
    private let box = HarnessLocked(Box())

    init(id: Int, scope: String, refusalIsAnAnswer: Bool = false) {
        self.id = id
        self.refusalIsAnAnswer = refusalIsAnAnswer
        self.scope = scope
    }

    /// Sets the result (the first one wins) and wakes the waiters.
    func resolve(_ result: Result<JSONValue, SlotFailure>) {
        let (waiters, callbacks) = box.withLock { b -> ([CheckedContinuation<Result<JSONValue, SlotFailure>, Never>], [@Sendable (Result<JSONValue, SlotFailure>) -> Void]) in
            guard b.result == nil else { return ([], []) }
            b.result = result
            defer { b.waiters.removeAll(); b.callbacks.removeAll() }
            return (b.waiters, b.callbacks)
        }
        waiters.forEach { $0.resume(returning: result) }
        callbacks.forEach { $0(result) }
    }

    /// Calls `body` with the result once there is one (at once when there is), on the thread
    /// that resolves it.
    func whenResolved(_ body: @escaping @Sendable (Result<JSONValue, SlotFailure>) -> Void) {
        let ready = box.withLock { b -> Result<JSONValue, SlotFailure>? in
            if b.result == nil { b.callbacks.append(body) }
            return b.result
        }
        if let ready { body(ready) }
    }

    /// The result, once there is one; with a deadline (milliseconds), `.timedOut` after it.
    func value(deadlineMilliseconds: Int? = nil) async -> Result<JSONValue, SlotFailure> {
        if let ms = deadlineMilliseconds {
            let timer = Task { [self] in
                try? await Task.sleep(nanoseconds: UInt64(ms) * 1_000_000)
                if !Task.isCancelled { resolve(.failure(.timedOut(ms))) }
            }
            defer { timer.cancel() }
            return await wait()
        }
        return await wait()
    }

    private func wait() async -> Result<JSONValue, SlotFailure> {
        await withCheckedContinuation { c in
            let ready = box.withLock { b -> Result<JSONValue, SlotFailure>? in
                if let r = b.result { return r }
                b.waiters.append(c)
                return nil
            }
            if let ready { c.resume(returning: ready) }
        }
    }
}

/// One adapter process: its pipes, the requests awaiting replies, its standard error and the
/// protocol problems seen. Lines are read on two threads of their own; state is in a `HarnessLocked`.
final class DriverConnection: Sendable {
    private struct State {
        var nextID = 0
        var slots: [Int: ReplySlot] = [:]
        var death: String?
        /// It wrote a line past `maxReplyLineBytes` on standard output.
        var overlong = false
        var stderr: [String] = []
        var stderrDropped = 0
        var problems: [String] = []
        /// Problems dropped from the front of `problems` (it keeps the last 200).
        var problemsDropped = 0
        /// The first problem dropped and its position among all noted (what a flood began with).
        var firstDropped: (position: Int, text: String)?
        var stdinOpen = true
        /// Why a write to its standard input failed (the adapter closed it, or is exiting), once
        /// one did: the adapter is dead or as good as dead (`confirmDeath`).
        var inputBroken: String?
        var stderrClosed = false
        /// Requests given up on at the end of their scenario: a late reply to one is no error.
        var abandoned: Set<Int> = []
        /// Requests answered (ids): a second reply to one is named so, not "a reply to no pending request".
        var answered: Set<Int> = []
        /// Scopes whose scenario is ending or over (`closeScope`): nothing but `close_client` is
        /// sent for them any more.
        var closing: Set<String> = []
    }
    private let state = HarnessLocked(State())
    private let writeLock = NSLock()
    private let child: VectorsSubprocess.Spawned
    private let exited = HarnessLocked<Int32?>(nil)
    let command: String
    /// Marks every process the adapter starts (`AdapterDescendants`).
    private let token = AdapterDescendants.newToken()

    /// `command` with `exec ` before it when it is one simple command (words, quotes, `$VAR`,
    /// no operators, no assignment or shell keyword first): the shell then becomes the adapter
    /// instead of waiting for it while holding the adapter's standard output, so an adapter that
    /// closes its standard output is seen at once (end of file), as one that exits (a sixth
    /// outside tester: with `/bin/sh` in between every later scenario waited out its step
    /// limit on a silent adapter). A compound command (`cd dir && ./adapter`) runs as written.
    static func execing(_ command: String) -> String {
        let trimmed = command.trimmingCharacters(in: .whitespaces)
        let operators = CharacterSet(charactersIn: ";&|()<>`\n\r{}!")
        guard !trimmed.isEmpty, trimmed.rangeOfCharacter(from: operators) == nil, !trimmed.contains("$(") else { return command }
        let first = String(trimmed.prefix { !$0.isWhitespace })
        // Shell words that are no program to exec: the keywords and every builtin of POSIX sh,
        // dash and bash (`exit 3` was exec'd as a program named `exit`), and `env`, `time`.
        let keywords: Set<String> = ["exec", "cd", "chdir", "export", "set", "unset", "eval", "if", "then", "else", "elif", "fi", "for", "select",
                                     "while", "until", "do", "done", "case", "esac", "in", "function", ".", ":", "source", "time", "env",
                                     "command", "builtin", "trap", "ulimit", "umask", "readonly", "local", "declare", "typeset", "let",
                                     "exit", "return", "break", "continue", "shift", "times", "wait", "read", "type", "hash", "alias",
                                     "unalias", "jobs", "fg", "bg", "getopts", "logout", "enable", "shopt", "mapfile", "readarray",
                                     "disown", "suspend", "pushd", "popd", "dirs", "history", "fc", "caller", "help", "compgen",
                                     "complete", "!", "{", "}", "(", "[", "[[", "test"]
        guard !first.contains("="), !keywords.contains(first) else { return command }
        return "exec " + trimmed
    }

    /// Starts `command` through `/bin/sh -c` in its own process group (as `exec command` when it
    /// is one simple command: `execing`).
    ///
    /// - Throws: `DriverProtocolError` when it cannot be started.
    init(command: String) throws {
        self.command = command
        // Its processes carry a token, so what escapes its process group is found at `stop()`.
        AdapterDescendants.becomeSubreaper()
        do {
            child = try VectorsSubprocess.spawn(program: "/bin/sh", arguments: ["/bin/sh", "-c", Self.execing(command)],
                                                environment: AdapterDescendants.environment(token: token))
        } catch {
            throw DriverProtocolError("cannot start the adapter '\(command)': \(error)")
        }
        signal(SIGPIPE, SIG_IGN)
        let stdoutThread = Thread { [self] in
            let whole = Self.readLines(child.stdout, maxLine: Self.maxReplyLineBytes) { [self] line in received(line) }
            if !whole {
                // Read no further: the adapter is stopped, and named for why.
                state.withLock { $0.overlong = true }
                kill(-child.pid, SIGKILL)
            }
            close(child.stdout)
            ended()
        }
        let stderrThread = Thread { [self] in
            Self.readCappedLines(child.stderr) { [self] text in
                state.withLock { s in
                    s.stderr.append(text)
                    if s.stderr.count > 400 { s.stderr.removeFirst(); s.stderrDropped += 1 }
                }
            }
            close(child.stderr)
            state.withLock { $0.stderrClosed = true }
        }
        // The adapter's exit, watched for itself: its standard output ends with it unless a child
        // it forked holds it open, and then the exit went unseen and every later step waited out
        // its limit, blamed on the SDK (a thirty-fourth outside tester, F2). Polled (waitpid with
        // WNOHANG, every 20 ms): reaping kills the adapter's group, so a child in it lets go of
        // the pipe and the reader reports as usual; one that left the group (`setsid`) is
        // reported from here after 300 ms.
        let exitWatcher = Thread { [self] in
            while state.withLock({ $0.death == nil }) {
                if reap() != nil {
                    let deadline = DispatchTime.now() + .milliseconds(300)
                    while state.withLock({ $0.death == nil }) && DispatchTime.now() < deadline { usleep(5_000) }
                    if state.withLock({ $0.death == nil }) { ended(stdoutHeld: true) }
                    return
                }
                usleep(20_000)
            }
        }
        stdoutThread.start()
        stderrThread.start()
        exitWatcher.start()
    }

    /// Why the adapter is gone (exit status or signal, and its last standard error), or `nil`
    /// while it runs.
    var death: String? { state.withLock { $0.death } }

    /// Lines of standard error received so far (also those dropped from the buffer).
    var stderrCount: Int { state.withLock { $0.stderr.count + $0.stderrDropped } }

    /// Standard error lines from position `mark` on (what is still kept).
    func stderr(since mark: Int) -> [String] {
        state.withLock { s in
            let start = max(0, mark - s.stderrDropped)
            return start < s.stderr.count ? Array(s.stderr[start...]) : []
        }
    }

    /// Protocol problems noted so far.
    var problemCount: Int { state.withLock { $0.problems.count + $0.problemsDropped } }

    /// Protocol problems from position `mark` on.
    func problems(since mark: Int) -> [String] {
        state.withLock { s in
            let start = max(0, mark - s.problemsDropped)
            let dropped = max(0, s.problemsDropped - mark)
            let kept = start < s.problems.count ? Array(s.problems[start...]) : []
            // The first of them is named when it is this mark's (an eighty-seventh outside tester: a
            // flood of 2,000,000 stray lines named only the count, never what was printed).
            let first = s.firstDropped.flatMap { $0.position >= mark ? "; the first: \($0.text)" : nil } ?? ""
            return dropped > 0 ? ["\(dropped) earlier protocol problem(s) not kept\(first)"] + kept : kept
        }
    }

    /// Records a protocol problem (quoting what was received).
    func noteProblem(_ text: String) {
        // At most 200 kept, as standard error keeps its last lines: an adapter writing 100,000
        // stray replies made as many verdict checks (80 MB; a thirty-fourth outside tester, F3).
        state.withLock { s in
            s.problems.append(text)
            if s.problems.count > 200 {
                let text = s.problems.removeFirst()
                if s.firstDropped == nil { s.firstDropped = (s.problemsDropped, text) }
                s.problemsDropped += 1
            }
        }
    }

    /// Sends `request` with a fresh id and returns the slot its reply fills. A dead adapter's
    /// slot fails at once with `.crashed`; a request other than `close_client` for a scope that
    /// is closing (`closeScope`) is not sent, and its slot fails at once with `.abandoned`.
    func send(_ request: DriverRequest, scope: String) -> ReplySlot {
        var request = request
        let (slot, death, closed) = state.withLock { s -> (ReplySlot, String?, Bool) in
            s.nextID += 1
            request.id = s.nextID
            let slot = ReplySlot(id: s.nextID, scope: scope, refusalIsAnAnswer: request.type == .ping)
            let closed = !scope.isEmpty && request.type != .closeClient && s.closing.contains(scope)
            if s.death == nil && !closed { s.slots[s.nextID] = slot }
            return (slot, s.death, closed)
        }
        if let death { slot.resolve(.failure(.crashed(death))); return slot }
        if closed { slot.resolve(.failure(.abandoned)); return slot }
        guard let line = try? DriverMessageEncoder().line(request) else {
            slot.resolve(.failure(.unsendable("it cannot be encoded as JSON")))
            return slot
        }
        let ok = writeLock.withLock { () -> Bool in
            line.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(child.stdin, raw.baseAddress! + offset, raw.count - offset)
                    if n < 0 { if errno == EINTR { continue }; return false }
                    offset += n
                }
                return true
            }
        }
        if !ok {
            let why = "writing to its standard input failed: \(String(cString: strerror(errno)))"
            state.withLock { s in
                if s.inputBroken == nil { s.inputBroken = why }
                s.slots.removeValue(forKey: slot.id)
            }
            slot.resolve(.failure(.crashed(why)))
        }
        return slot
    }

    /// After a write to the adapter failed, waits (at most `milliseconds`) for the adapter's end
    /// to be seen (standard output's end or its exit, with the exit status for the report), and
    /// else gives it up for that write's failure: either way it is dead from then on. Before, a
    /// scenario whose write met a broken pipe before the reader saw the end was reported
    /// `failed` (its later steps blamed, the scenario said to deadlock) in some runs and
    /// `crashed` in others (an outside tester). Does nothing while every write succeeded.
    func confirmDeath(milliseconds: Int = 1000) async {
        guard let broken = state.withLock({ $0.death == nil ? $0.inputBroken : nil }) else { return }
        let deadline = DispatchTime.now() + .milliseconds(milliseconds)
        while death == nil && DispatchTime.now() < deadline { try? await Task.sleep(nanoseconds: 2_000_000) }
        if death == nil { fail("the adapter stopped reading its standard input (\(broken))") }
    }

    /// Exchanges `hello` with an adapter started again, blocking the calling thread at most
    /// `timeoutSeconds` (the reply is resolved on the reader thread), and compares it with the
    /// first adapter's `expected` one.
    ///
    /// - Returns: what was wrong (no reply, a protocol problem, another protocol version, SDK or
    ///   capabilities), or `nil`.
    func restartedHello(expecting expected: DriverHello, timeoutSeconds: Double) -> String? {
        var request = DriverRequest(id: 0, type: .hello)
        request.protocol = DriverWire.version
        let slot = send(request, scope: "")
        let done = DispatchSemaphore(value: 0)
        let reply = HarnessLocked<Result<JSONValue, SlotFailure>?>(nil)
        slot.whenResolved { result in reply.withLock { $0 = result }; done.signal() }
        if done.wait(timeout: .now() + timeoutSeconds) == .timedOut {
            return "its hello had no reply within \(Int(timeoutSeconds)) s" + stderrTail()
        }
        if let first = problems(since: 0).first { return "it broke the protocol: \(first)" }
        switch reply.withLock({ $0 })! {
        case .failure(let f): return "its hello failed: \(f.message)" + stderrTail()
        case .success(let json):
            guard let said = try? DriverHello(json: json) else { return "its hello reply is not a hello: \(DriverMessageDecoder.quote(Data(json.jsonText.utf8)))" }
            var differences: [String] = []
            if !said.protocolVersion.isExactly(expected.protocolVersion) {
                differences.append("protocol \(said.protocolVersion.unambiguous), not \(expected.protocolVersion.unambiguous)")
            }
            if !said.sdkName.isExactly(expected.sdkName) || !said.sdkVersion.isExactly(expected.sdkVersion) {
                differences.append("SDK \(said.sdkName.unambiguous) \(said.sdkVersion.unambiguous), not \(expected.sdkName.unambiguous) \(expected.sdkVersion.unambiguous)")
            }
            let lacking = expected.capabilities.subtracting(said.capabilities), extra = said.capabilities.subtracting(expected.capabilities)
            if !lacking.isEmpty { differences.append("without the capabilities \(lacking.sorted().joined(separator: ", "))") }
            if !extra.isEmpty { differences.append("with the capabilities \(extra.sorted().joined(separator: ", ")) besides") }
            guard differences.isEmpty else {
                return "its hello differs from the first adapter's (it must be the same program): " + differences.joined(separator: "; ")
            }
            return nil
        }
    }

    /// `"; its standard error: ..."` with its last lines, or "".
    private func stderrTail() -> String {
        let tail = stderr(since: 0).suffix(10).joined(separator: " | ")
        return tail.isEmpty ? "" : "; its standard error: \(tail)"
    }

    /// Gives the adapter up for `why`: it counts as dead (every waiting request fails with it)
    /// and its process group is killed.
    func fail(_ why: String) {
        let slots = state.withLock { s -> [ReplySlot] in
            if s.death == nil { s.death = why }
            defer { s.slots.removeAll() }
            return Array(s.slots.values)
        }
        kill(-child.pid, SIGKILL)
        slots.forEach { $0.resolve(.failure(.crashed(why))) }
    }

    /// Exchanges `hello`.
    ///
    /// - Throws: `DriverProtocolError` (see `ProcessSDKDriver.launch`).
    func hello(timeoutSeconds: Double) async throws -> DriverHello {
        var request = DriverRequest(id: 0, type: .hello)
        request.protocol = DriverWire.version
        let result = await send(request, scope: "").value(deadlineMilliseconds: Int(timeoutSeconds * 1000))
        let problems = self.problems(since: 0)
        if let first = problems.first { throw DriverProtocolError("the adapter '\(command)' broke the protocol: \(first)") }
        switch result {
        case .failure(let f):
            let tail = stderr(since: 0).suffix(10).joined(separator: "\n")
            throw DriverProtocolError("the adapter '\(command)' did not answer hello: \(f.message)"
                                      + (tail.isEmpty ? "" : "; its standard error:\n\(tail)"))
        case .success(let json):
            let hello = try DriverHello(json: json)
            guard hello.protocolVersion == DriverWire.version else {
                throw DriverProtocolError("the adapter speaks \(hello.protocolVersion), the harness \(DriverWire.version)")
            }
            return hello
        }
    }

    /// The scenario of `scope` is ending: from now on only `close_client` is sent for it. A call
    /// the reference app or a pending operation makes after its scenario ended (an app action of
    /// an infeasible schedule goes on after the schedule) is never sent: the adapter would refuse
    /// it for a closed client, and that refusal, noted as a protocol problem, failed the next
    /// schedule (`explore` of app steps, found by an outside tester).
    func closeScope(_ scope: String) {
        _ = state.withLock { $0.closing.insert(scope) }
    }

    /// Fails the slots of `scope` still waiting with `.abandoned`.
    func abandon(scope: String) {
        let slots = state.withLock { s -> [ReplySlot] in
            let mine = s.slots.values.filter { $0.scope == scope }
            for slot in mine { s.slots[slot.id] = nil; s.abandoned.insert(slot.id) }
            return mine
        }
        slots.forEach { $0.resolve(.failure(.abandoned)) }
    }

    /// Sends `shutdown`, closes standard input, waits up to 2 s for the exit, then kills the
    /// process group.
    func stop() async {
        if death == nil {
            var request = DriverRequest(id: 0, type: .shutdown)
            request.protocol = DriverWire.version
            _ = await send(request, scope: "").value(deadlineMilliseconds: 2000)
        }
        let wasOpen = state.withLock { s -> Bool in defer { s.stdinOpen = false }; return s.stdinOpen }
        if wasOpen { close(child.stdin) }
        let deadline = DispatchTime.now() + .seconds(2)
        while reap() == nil && DispatchTime.now() < deadline { try? await Task.sleep(nanoseconds: 5_000_000) }
        if reap() == nil {
            kill(-child.pid, SIGKILL)
            while reap() == nil { try? await Task.sleep(nanoseconds: 1_000_000) }
        }
        // What left the group (`setsid`) and outlived it: killed and reaped too.
        AdapterDescendants.killAndReap(token: token)
    }

    /// The wait status once the process has been reaped (non-blocking).
    private func reap() -> Int32? {
        exited.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            if waitpid(child.pid, &raw, WNOHANG) == child.pid {
                status = raw
                // Anything else the adapter's group started goes with it (Documentation/DriverProtocol.md).
                kill(-child.pid, SIGKILL)
                ChildProcessGroups.reaped(child.pid)
            }
            return status
        }
    }

    /// Whether an adapter's output line is blank: only spaces, tabs, carriage returns and UTF-8
    /// byte order marks (EF BB BF).
    static func isBlank(_ line: Data) -> Bool {
        var i = line.startIndex
        while i < line.endIndex {
            switch line[i] {
            case 0x20, 0x09, 0x0D: i += 1
            case 0xEF where line.index(i, offsetBy: 2, limitedBy: line.endIndex - 1) != nil && line[i + 1] == 0xBB && line[i + 2] == 0xBF: i += 3
            default: return false
            }
        }
        return true
    }

    private func received(_ line: Data) {
        // A blank line is skipped: spaces, tabs, a `\r` and UTF-8 byte order marks are white
        // space (DriverProtocol.md; an eighty-seventh outside tester: a line of a lone BOM or a
        // tab was refused as "not the protocol" and made the adapter unusable).
        if Self.isBlank(line) { return }
        let reply: DriverReply
        do { reply = try DriverMessageDecoder().reply(line) } catch {
            // Why, when the line is JSON at all (an id sent as a string: an eleventh outside tester
            // had to guess from the quoted line alone).
            let why = line.first == UInt8(ascii: "{") ? " (\(DriverMessageDecoder.whyNotAReply(line)))" : ""
            // Such a line names no request, so it is charged to the scenario running when it was
            // read, which may not be the one whose work wrote it (a thirty-fourth outside tester, F9).
            let inScenario = state.withLock { s in s.slots.values.contains { !$0.scope.isEmpty } }
            noteProblem("output that is not the protocol\(why): \(DriverMessageDecoder.quote(line))"
                        + (inScenario ? " (read while this scenario ran; a line that names no request may come from an earlier scenario's work)" : ""))
            // A line that names a pending request (its top-level `id`, read without parsing the
            // rest) ends that request as refused, so the step fails naming the driver protocol
            // at once instead of waiting out its limit and blaming the SDK (an outside tester:
            // a reply nested 600 levels deep was dropped and the operation "did not finish").
            if let id = DriverMessageDecoder.topLevelID(in: line),
               let slot = state.withLock({ s in s.slots.removeValue(forKey: id) }) {
                slot.resolve(.failure(.unreadable("the reply to request \(id) is not a driver reply (\(DriverMessageDecoder.whyNotAReply(line))): "
                                                  + DriverMessageDecoder.quote(line))))
            }
            return
        }
        let (found, late, again) = state.withLock { s in
            let slot = s.slots.removeValue(forKey: reply.id)
            let again = slot == nil && s.answered.contains(reply.id)
            if slot != nil { s.answered.insert(reply.id) }
            return (slot, s.abandoned.remove(reply.id) != nil, again)
        }
        guard let slot = found else {
            if again { noteProblem("a second reply to request \(reply.id), which was already answered: \(DriverMessageDecoder.quote(line))") }
            else if !late { noteProblem("a reply to no pending request: \(DriverMessageDecoder.quote(line))") }
            return
        }
        if let error = reply.error {
            if !slot.refusalIsAnAnswer { noteProblem("request \(reply.id) refused: \(error)") }
            slot.resolve(.failure(.refused(error)))
        } else {
            slot.resolve(.success(reply.result ?? .object([:])))
        }
    }

    /// Standard output closed: the adapter is gone (or going); every waiting request fails.
    /// Unless the command was interrupted (`ChildProcessGroups.killAll()` killed it): then the
    /// process is exiting and the killed adapter's requests are left waiting, never reported as a crash.
    ///
    /// Once only: the reader at standard output's end and the exit watcher (`stdoutHeld`: the
    /// adapter exited while a process it started still holds its standard output) may both come.
    private func ended(stdoutHeld: Bool = false) {
        ChildProcessGroups.parkThreadIfInterrupted()
        if state.withLock({ $0.death != nil }) { return }
        let deadline = DispatchTime.now() + .milliseconds(500)
        var status = reap()
        // The exit status, and the last of standard error, for the crash report (bounded).
        while (status == nil || !state.withLock({ $0.stderrClosed })) && DispatchTime.now() < deadline { usleep(2000); status = reap() }
        let how: String
        if let status {
            let signal = status & 0x7f
            how = (signal == 0 ? "exited with status \((status >> 8) & 0xff)" : "was killed by signal \(signal)")
                + (stdoutHeld ? " (a process it started, outside its process group, still holds its standard output)" : "")
        } else {
            how = "closed its standard output"
        }
        let slots = state.withLock { s -> [ReplySlot] in
            let tail = s.stderr.suffix(5).joined(separator: " | ")
            let why = s.overlong ? "wrote a line of more than \(Self.maxReplyLineBytes >> 20) MiB on standard output (the driver protocol's limit) and was stopped" : how
            if s.death == nil { s.death = "the adapter \(why)" + (tail.isEmpty ? "" : "; its last standard error: \(tail)") }
            defer { s.slots.removeAll() }
            return Array(s.slots.values)
        }
        let death = self.death ?? "the adapter is gone"
        slots.forEach { $0.resolve(.failure(.crashed(death))) }
    }

    /// The longest line an adapter may write on standard output, bytes: no reply of the driver
    /// protocol comes near it, and a longer one is read no further (a sixteenth outside tester: 100 MB
    /// reply lines were taken whole, one scenario ran 71 s past a 3 s step limit).
    static let maxReplyLineBytes = 16 << 20

    /// Reads `fd` to its end, calling `body` with each line as text, cut to `maxLine` bytes (the
    /// rest counted in a `… (N more bytes)` note), so an adapter's standard error costs at most
    /// `maxLine` bytes a line however much it writes: a line is kept whole only up to there, and
    /// nothing waits for a newline that never comes. Before, 100 MB of standard error took a run
    /// past its hard deadline and into gigabytes of memory (a thirty-fourth outside tester, F1).
    static func readCappedLines(_ fd: Int32, maxLine: Int = 4096, _ body: (String) -> Void) {
        var line: [UInt8] = []
        line.reserveCapacity(maxLine)
        var more = 0
        var buffer = [UInt8](repeating: 0, count: 65536)
        func emit() {
            var text = String(decoding: line, as: UTF8.self)
            if more > 0 { text += " … (\(more) more bytes)" }
            body(text)
            line.removeAll(keepingCapacity: true)
            more = 0
        }
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            var start = 0
            while start < n {
                let end = buffer[start..<n].firstIndex(of: UInt8(ascii: "\n")) ?? n
                let room = maxLine - line.count
                let piece = end - start
                if piece <= room { line.append(contentsOf: buffer[start..<end]) } else {
                    if room > 0 { line.append(contentsOf: buffer[start..<(start + room)]) }
                    more += piece - max(room, 0)
                }
                if end < n { emit() }
                start = end + 1
            }
        }
        if !line.isEmpty || more > 0 { emit() }
    }

    /// Reads `fd` to its end, calling `body` with each line (without `\n`). With `maxLine`, stops
    /// (returning `false`) once a line grows past it without a newline; `true` at the end of the stream.
    @discardableResult
    static func readLines(_ fd: Int32, maxLine: Int? = nil, _ body: (Data) -> Void) -> Bool {
        var pending = LineBuffer()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            pending.append(buffer[0..<n])
            while let line = pending.nextLine() {
                if let maxLine, line.count > maxLine { return false }
                body(line)
            }
            if let maxLine, pending.unterminatedCount > maxLine { return false }
        }
        if let rest = pending.takeRest() { body(rest) }
        return true
    }
}
