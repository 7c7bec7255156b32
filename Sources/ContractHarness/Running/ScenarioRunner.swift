import Foundation
import ExperimentlyMock
import Experimently

/// The result of one check (a step expectation, a named check, or the lifecycle check).
public struct CheckResult: Codable, Sendable, Equatable {
    /// The check's name (`stickiness`, `step 4 expect`, ...).
    public var name: String
    /// Whether it held.
    public var passed: Bool
    /// On failure: what went wrong.
    public var message: String?
    /// On failure: the history lines that show it.
    public var history: [String]?

    /// Creates a result; the message and each history line are kept to `CheckResult.limit`
    /// characters (a value an SDK returned is quoted in them, and a 64 MB one made a 67 MB
    /// console line and a 201 MB verdict: a sixth outside tester).
    public init(name: String, passed: Bool, message: String? = nil, history: [String]? = nil) {
        self.name = name
        self.passed = passed
        self.message = message.map(Self.bounded)
        self.history = history?.map(Self.bounded)
    }

    /// Most characters of a message or history line kept in a result (the rest is counted).
    public static let limit = 4_000

    /// `text` cut to `limit` characters, saying how many more there were.
    static func bounded(_ text: String) -> String {
        guard text.utf8.count > limit, text.count > limit else { return text }
        return String(text.prefix(limit)) + "… (\(text.count - limit) more characters)"
    }
}

/// The outcome of running one scenario.
public struct ScenarioResult: Sendable, Codable {
    /// `passed`, `failed`, `skipped`, `error` (the scenario could not run) or `crashed` (the worker
    /// process running it died or passed its hard deadline: `crash` says how).
    public enum Status: String, Codable, Sendable { case passed, failed, skipped, error, crashed }

    /// The scenario's name.
    public var name: String
    /// The file it was read from.
    public var file: String
    /// The scenario's tags.
    public var tags: [String]
    /// Where the scenario comes from.
    public var source: String?
    /// How it ended.
    public var status: Status
    /// Wall time, milliseconds.
    public var durationMilliseconds: Double
    /// Every check, passed or not.
    public var checks: [CheckResult]
    /// Why it was skipped or errored.
    public var reason: String?
    /// The contract-smoke fields (CONTRACT.md section 7), from a `contract_smoke` check.
    public var smoke: JSONValue?
    /// The history in canonical order.
    public var history: [HistoryEvent]
    /// MD5 of the canonical history, to compare runs.
    public var historyDigest: String

    /// `true` when a step could not be carried out as written in this order (a release with
    /// nothing held, an await of an operation never started): the explorer skips such schedules.
    public var infeasible = false
    /// `true` with `infeasible` when the order deadlocks only by a choice the contract leaves to
    /// the SDK: an operation its client's `close()` did not end (the SDK may cancel on close or
    /// not, DriverProtocol.md) is awaited before the release of its parked request. The explorer
    /// counts such an order infeasible even when its reference, making the other choice, passes it.
    public var infeasibleByChoice = false
    /// What an exploration found (`run --explore`), for the verdict.
    public var exploration: JSONValue?
    /// For `crashed`: how the worker ended (`CrashReport.json`: signal or exit status, deadline,
    /// the last lines of its standard error).
    public var crash: JSONValue?
    /// An out-of-process SDK's standard error while the scenario ran, kept when it did not pass.
    public var adapterStderr: [String] = []
    /// The history as recorded (not canonical): the mock's own request numbers and the indices
    /// failure slices cite, so a report can draw it and highlight what a check cites. Empty when
    /// the runner keeps no history.
    public var events: [HistoryEvent] = []
    /// The choices of an interleaved run (`nil` when the run was not interleaved).
    public var interleaving: InterleavingTrace? = nil
    /// One line per step (``Step/summary``), kept with `events`, so the report can show the
    /// steps that record no event (fault definitions, `wait_for`). Empty without a history.
    public var stepSummaries: [String] = []

    /// `true` when some step ran out of its real-time step limit (`step_timeout_ms`, or the
    /// runner's cap on it): a failure with this set may come from a loaded machine, so the mutant
    /// matrix confirms such a catch with the file's own limits before it counts.
    public var stepLimitReached = false
    /// `true` when some step ran out of its step limit without the run being shown stuck
    /// (`Recorder.ranOutOfTimeUnproven`): only such a catch needs the mutant matrix's
    /// confirmation; a step that ran out while nothing could move is a deadlock at any load.
    public var stepLimitUnproven = false

    /// The first failing check, for the console line.
    public var firstFailure: CheckResult? { checks.first { !$0.passed } }

    /// The message of the failed check named exactly `check`, else of the first failed check:
    /// the line naming a schedule's failing check quotes that check's own message (it paired one
    /// check's name with another's message: a twenty-seventh outside tester).
    public func failureMessage(of check: String) -> String {
        (checks.first { !$0.passed && $0.name.unicodeScalars.elementsEqual(check.unicodeScalars) } ?? firstFailure)?.message ?? ""
    }
}

extension ScenarioResult {
    /// Decodes a result (the worker protocol's `result` payload): the fields every version has are
    /// required; the later, optional ones (`infeasible`, `exploration`, `crash`, `adapterStderr`)
    /// may be absent, so an older or other-language worker's record still reads. (`events`, the
    /// recorded history for reports, and `interleaving`, likewise.)
    ///
    /// - Throws: `DecodingError` when a required field is missing or of the wrong type.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(name: try c.decode(String.self, forKey: .name), file: try c.decode(String.self, forKey: .file),
                  tags: try c.decode([String].self, forKey: .tags), source: try c.decodeIfPresent(String.self, forKey: .source),
                  status: try c.decode(Status.self, forKey: .status),
                  durationMilliseconds: try c.decode(Double.self, forKey: .durationMilliseconds),
                  checks: try c.decode([CheckResult].self, forKey: .checks), reason: try c.decodeIfPresent(String.self, forKey: .reason),
                  smoke: try c.decodeIfPresent(JSONValue.self, forKey: .smoke), history: try c.decode([HistoryEvent].self, forKey: .history),
                  historyDigest: try c.decode(String.self, forKey: .historyDigest))
        infeasible = try c.decodeIfPresent(Bool.self, forKey: .infeasible) ?? false
        infeasibleByChoice = try c.decodeIfPresent(Bool.self, forKey: .infeasibleByChoice) ?? false
        exploration = try c.decodeIfPresent(JSONValue.self, forKey: .exploration)
        crash = try c.decodeIfPresent(JSONValue.self, forKey: .crash)
        adapterStderr = try c.decodeIfPresent([String].self, forKey: .adapterStderr) ?? []
        events = try c.decodeIfPresent([HistoryEvent].self, forKey: .events) ?? []
        interleaving = try c.decodeIfPresent(InterleavingTrace.self, forKey: .interleaving)
        stepSummaries = try c.decodeIfPresent([String].self, forKey: .stepSummaries) ?? []
        stepLimitReached = try c.decodeIfPresent(Bool.self, forKey: .stepLimitReached) ?? false
        // An older worker's record without it: every limit reached counts as unproven.
        stepLimitUnproven = try c.decodeIfPresent(Bool.self, forKey: .stepLimitUnproven) ?? stepLimitReached
    }
}

/// Runs scenarios against an SDK driver and the in-process mock backend.
public struct ScenarioRunner: Sendable {
    /// The SDK under test.
    public let driver: any SDKDriver
    /// The run's seed (recorded; `{{seed}}` in scenario files is replaced by it).
    public let seed: UInt64

    /// An upper bound on every scenario's step timeout, milliseconds (`nil`: as the files say).
    public let stepTimeoutCap: Int?
    /// Whether results carry the canonical history and its digest, and offline stores are real
    /// `UserDefaults` suites (the explorer and the mutant runs only need each run's verdict, so
    /// they skip the history and keep stores in memory).
    public let keepsHistory: Bool
    /// Runs every scenario interleaved with this plan (the explorer's); `nil`: a scenario with an
    /// `interleaving` section replays its choices, any other runs as usual.
    public var interleaving: InterleavingPlan? = nil

    /// Creates a runner.
    public init(driver: any SDKDriver = SwiftSDKDriver(), seed: UInt64 = 0, stepTimeoutCap: Int? = nil, keepsHistory: Bool = true) {
        self.driver = driver
        self.seed = seed
        self.stepTimeoutCap = stepTimeoutCap
        self.keepsHistory = keepsHistory
    }

    /// Runs one scenario from a fresh state; never throws: problems become the result's status.
    public func run(_ scenario: Scenario) async -> ScenarioResult {
        let started = DispatchTime.now()
        // Listed and inferred requirements (Scenario/ScenarioRequirements.swift): a driver without one skips.
        let missing = scenario.unmet(by: driver.capabilities)
        if !missing.isEmpty {
            return ScenarioResult(name: scenario.name, file: scenario.file, tags: scenario.tags, source: scenario.source,
                                  status: .skipped, durationMilliseconds: 0, checks: [],
                                  reason: "the driver lacks " + missing.map { "\($0.capability) (\($0.reason))" }.joined(separator: ", "),
                                  smoke: nil, history: [], historyDigest: "")
        }
        let fileLimit = scenario.stepTimeoutMilliseconds
        var scenario = scenario
        if let cap = stepTimeoutCap { scenario.stepTimeoutMilliseconds = min(scenario.stepTimeoutMilliseconds, cap) }
        let execution: ScenarioExecution
        do {
            execution = try ScenarioExecution(scenario: scenario, driver: driver, keepsHistory: keepsHistory,
                                              interleaving: interleaving ?? scenario.interleaving.map { .replay($0.choices) })
        } catch {
            return ScenarioResult(name: scenario.name, file: scenario.file, tags: scenario.tags, source: scenario.source,
                                  status: .error, durationMilliseconds: Self.elapsed(since: started), checks: [],
                                  reason: "\(error)", smoke: nil, history: [], historyDigest: "")
        }
        var result = await execution.run()
        await execution.finishDriver(&result)
        result.durationMilliseconds = Self.elapsed(since: started)
        result.infeasible = execution.infeasible
        result.infeasibleByChoice = execution.infeasibleByChoice
        // The file's own order deadlocks only by a choice the contract leaves to the SDK (an await
        // after its client's close() and before the release of its request, on an SDK that lets
        // the call finish): an error of the file, not a failure of the SDK (an eighty-fourth
        // outside tester, F5: `run` failed such an SDK where explore calls the order infeasible).
        if result.infeasibleByChoice && result.status == .failed {
            result.status = .error
            result.reason = "this order deadlocks only by a choice the contract leaves to the SDK: its client's close() did not end a call the file awaits "
                + "before releasing its request (an SDK may let it finish, CONTRACT.md section 5.1); await the call after the release"
        }
        result.stepLimitReached = execution.recorder.ranOutOfTime
        result.stepLimitUnproven = execution.recorder.ranOutOfTimeUnproven
        if result.stepLimitUnproven { Self.nameTheTimeLimit(&result, limit: scenario.stepTimeoutMilliseconds, fileLimit: fileLimit) }
        return result
    }

    /// A failure whose step ran out of real time while the run was not shown stuck
    /// (`stepLimitUnproven`) names the time limit instead of the scenario's contract rule: a
    /// stalled or starved SDK process (no CPU for seconds) cannot be told from a hung one there,
    /// and a limit capped by `--step-timeout-ms` is the user's choice. Before, such a failure
    /// ended with "[broken rule: CONTRACT.md section 4 ...]" (a forty-third outside tester, F1
    /// and F2). The failure stays a failure.
    static func nameTheTimeLimit(_ result: inout ScenarioResult, limit: Int, fileLimit: Int) {
        let why = " the step limit of \(limit) ms ran out"
            + (limit < fileLimit ? " (--step-timeout-ms capped the file's \(fileLimit) ms)" : "")
            + " while the run could not be shown stuck: a hung SDK, or one that got no CPU that long"
        let note = " [not judged against a contract rule:" + why + "]"
        // A rule appended by `naming` is replaced; a message without one (a scenario file with no
        // `source`, a driver failure) gains the note; a message naming a rule in its own text
        // keeps it and says it was judged after the limit ran out (a forty-sixth outside tester,
        // finding A: a file without `source` read as a proven hang).
        func renamed(_ whole: String) -> String {
            if whole.contains("[not judged against a contract rule") || whole.contains("[judged after") { return whole }
            // The driver protocol's note stays last (it follows the rule `naming` appended).
            let tail = whole.hasSuffix(ScenarioExecution.protocolNote) ? ScenarioExecution.protocolNote : ""
            let text = String(whole.dropLast(tail.count))
            return named(text) + tail
        }
        func named(_ text: String) -> String {
            if let r = text.range(of: " [broken rule: ", options: .backwards), text.hasSuffix("]") {
                return String(text[..<r.lowerBound]) + note
            }
            if text.contains("CONTRACT.md") { return text + " [judged after" + why + "; the rule named may not be broken]" }
            return text + note
        }
        for i in result.checks.indices where !result.checks[i].passed && result.checks[i].name != "lifecycle" {
            if let m = result.checks[i].message { result.checks[i].message = renamed(m) }
        }
        // The mock's shutdown findings (holds never released, faults never matched) follow from a
        // run cut short at the limit: the steps that would have released them never ran. Said so
        // (a forty-fifth outside tester, F4: only the first failure named the limit).
        for i in result.checks.indices where !result.checks[i].passed && result.checks[i].name == "lifecycle" {
            if let m = result.checks[i].message, !m.contains("[not judged against a contract rule") {
                result.checks[i].message = m + " [may follow from the step limit of \(limit) ms that ran out: the steps after it never ran]"
            }
        }
        if let reason = result.reason { result.reason = renamed(reason) }
    }

    static func elapsed(since start: DispatchTime) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e6
    }
}

/// One run of one scenario: its clock, mock, clients, operations and history.
final class ScenarioExecution: @unchecked Sendable {
    // @unchecked Sendable: `ops`, `groups`, `deferred`, `checks` and `launched` are guarded by `lock`; the rest is `let`
    // or only used from the runner's task.
    struct Op {
        let label: String
        let client: String
        let name: String
        let user: String?
        var outcome: OperationOutcome?
        var task: Task<Void, Never>?
        /// The operation's task has started running (it is past the scheduler).
        var entered = false
        /// The (kind, key) it caches under, when it has one.
        var key: (kind: String, key: String)?
        /// Only requests with a higher mock sequence number can be this operation's: its client
        /// cleared or closed (detaching older requests) when the mock had seen this many.
        var barrier = 0
        /// The clock's `wakeups` when the operation started.
        var wakeups = 0
        /// The clock's `unseenWakeups` when the operation started.
        var unseenWakeups = 0
        /// The virtual time when the operation started.
        var started = Date.distantPast
        /// How many `advance` steps had run when the operation started: an out-of-process SDK's
        /// timers sleep on its own copy of the clock, which `wakeups` cannot count.
        var advances = 0
        /// A step asked for its cancellation (a `cancel` of it): the cancellation travels through
        /// the SDK and URLSession where quiescence cannot see it, so the operation is never judged
        /// inert.
        var cancelRequested = false
        /// Its client's `close()` ran while it was pending. Whether close cancels is the SDK's
        /// choice (DriverProtocol.md; CONTRACT.md section 5.1 only says the caller still gets the
        /// answer), so it is judged as after an app action (`appActionRaced`): in process, where a
        /// cancellation the SDK began is seen, and out of process when the adapter answers
        /// `settle`. An operation close did not end that then waits on its parked request waits
        /// for the release, and an order that awaits it first is infeasible by the SDK's choice
        /// (`ScenarioResult.infeasibleByChoice`). Before, close marked it `cancelRequested`: an
        /// SDK that lets requests finish on close waited out the step limit there, and explore
        /// failed it in every such order because the Swift SDK, which cancels, passes them (an
        /// eighty-third outside tester, F6).
        var closedWhilePending = false
        /// The mock's request count and the history's event count when it started.
        var since = 0
        var startEvent = 0
        /// The recorder's ordinal when it started: orders it against steps and clears.
        var ordinal = 0
        /// The history's event count once its completion was recorded (`nil`: pending).
        var endEvent: Int?
        /// An app action on its client started while it was pending (`mark(.appActionRaced)`):
        /// an app action cancels nothing itself, but its logout or undo clears the
        /// cache, which another SDK may answer by cancelling requests. In process that is seen
        /// (the idle executor, and a request whose task is being cancelled is not inert:
        /// `BackendPort.cancellationsOnTheirWay`); out of process, when the adapter answers
        /// `settle` (the app's clears are SDK calls it settles, as for an app action). Without
        /// `settle` such an operation is never judged inert. Before, a runner operation raced by
        /// an app action was never inert (in process and out), and explore failed the shipping
        /// SDK on orders that await it before the release that frees it (third outside tester,
        /// finding 11; fourth, finding 4: 36 of 120 through experimently-driver).
        var appActionRaced = false
    }

    let scenario: Scenario
    let driver: any SDKDriver
    let clock: VirtualClock
    let recorder: Recorder
    let port: any BackendPort
    let executor: any IdleReporting
    /// The mock's loopback TCP listeners, one per client, for out-of-process drivers.
    let listeners: LoopbackListeners?
    /// The store name -> suite name of this run's offline stores (from `StoreSuitePool`).
    let suites: [ExactKey: String]   // by exact store id (NFC and NFD ids are two stores)
    private let lock = NSLock()
    /// Operations and groups by label, compared exactly (Unicode scalars).
    private var ops: [ExactKey: Op] = [:]
    private var order: [String] = []
    private var groups: [ExactKey: [String]] = [:]
    private var checks: [CheckResult] = []
    /// The clients' SDK instances launched so far, by name (guarded by `lock`): every client at
    /// the start but those `Scenario.launchedAtFirstUse` names, each created at the first step
    /// that uses it (`launchIfDue`).
    private var launched: [String: any DriverClient] = [:]
    /// The clients launched so far (a snapshot).
    var clients: [String: any DriverClient] { lock.withLock { launched } }
    /// SDK instances made to write a `seed_store` before any client of its store launched, by
    /// exact store id (`seeder(for:)`; guarded by `lock`). Not scenario clients: no check reads
    /// them; they are released with the clients.
    private var seeders: [ExactKey: any DriverClient] = [:]
    /// Every SDK instance the scenario made: its launched clients and its seeders (a snapshot).
    var instances: [any DriverClient] { lock.withLock { Array(launched.values) + Array(seeders.values) } }
    /// What a client is created with (kept for the clients launched at their first use).
    private var clientContext: DriverContext?
    /// The `app` section's reference app (on its client), created with the clients.
    private var app: ReferenceApp?
    /// Every reference app by client (the `app` section's included), each created on first use
    /// (guarded by `lock`).
    private var apps: [ExactKey: ReferenceApp] = [:]
    /// The executor app fetch tasks prefer (the controlled executor when interleaved, else the
    /// operations' executor; `nil` before macOS 15); set in `init`.
    private(set) var appTaskExecutor: (any Sendable)?

    /// Runs `body` on the apps by client under `lock`.
    func withAppsLocked<T>(_ body: (inout [ExactKey: ReferenceApp]) -> T) -> T { lock.withLock { body(&apps) } }
    private var autoLabel = 0
    /// `advance` steps run so far (guarded by `lock`).
    private var advances = 0
    /// A step the scenario asked for could not be carried out (the clock's bound): the result is
    /// an `error` of the scenario, not a failure of the SDK. Guarded by `lock`.
    private var scenarioError = false
    private var barriers: [ExactKey: Int] = [:]   // by client name, compared exactly
    /// Each `clearCache`/`close` step so far, by client: the history's event count and the mock's
    /// request count when it began (guarded by `lock`).
    private var clearSteps: [ExactKey: [(ordinal: Int, seen: Int)]] = [:]
    /// The `clearOfflineCache` steps of each client, likewise: an SDK may let a call after one
    /// send a request of its own rather than join one in flight (`Checks.singleFlight`), so a
    /// request received after it is never an earlier lookup's. Unlike a clear, it moves no barrier
    /// (a call after it may join). Behind `lock`.
    private var offlineClearSteps: [ExactKey: [(ordinal: Int, seen: Int)]] = [:]
    /// Each step begun so far: the history's event count and the mock's request count when it
    /// began (guarded by `lock`; `ownWindowEnd(after:)`).
    private var stepStarts: [(ordinal: Int, seen: Int)] = []
    /// Each `cancel` step so far: its marker's index and the mock's request count then (guarded
    /// by `lock`).
    private var cancelSteps: [(event: Int, seen: Int)] = []
    /// Whether a `cancel` step ran after request `seq` arrived and before history event `event`
    /// (an app call's start): it may have left that request without a caller.
    func cancelled(after seq: Int, before event: Int) -> Bool {
        lock.withLock { cancelSteps.contains { $0.seen >= seq && $0.event < event } }
    }
    /// The mock's request count at the latest clear of `client`'s cache begun before the
    /// recorder's ordinal `ordinal` (a `clearCache`/`close` step, or a clear of the client's app, logout
    /// or undo): the barrier an SDK call begun then had (0: none). A lookup begun after a clear
    /// never joins a request received before it (CONTRACT.md section 5.1: a clear detaches the
    /// requests in flight); a clear after the lookup began does not move it. Before, the latest
    /// clear served both: an app lookup after a clear was taken as settled on a request from
    /// before it (a third outside tester: correct SDKs failed in up to 30 of 30 runs out of
    /// process), and an app lookup joined before a logout was never settled again (explore:
    /// "not quiescent").
    func clearBarrier(of client: String, atOrdinal ordinal: Int) -> Int {
        clears(of: client).filter { $0.ordinal < ordinal }.map(\.seen).max() ?? 0
    }

    /// Every clear of `client`'s cache so far, the runner's steps and its reference app's: the
    /// recorder's ordinal when each began and the mock's request count then.
    func clears(of client: String) -> [(ordinal: Int, seen: Int)] {
        let steps = lock.withLock { clearSteps[ExactKey(client)] ?? [] }
        let app = withAppsLocked { $0[ExactKey(client)] }
        return steps + (app?.clearLog ?? [])
    }

    /// The mock's request count when the first step begun after the recorder's ordinal `ordinal` began, or
    /// `nil` (no such step yet): the end of the requests an SDK call begun then may have
    /// sent before any answer. That step began only once the scenario was quiescent, so the
    /// call's first request had arrived (or it had joined an earlier one); any later request of
    /// the call is a retry, which needs an answer to one of these first. So while these all
    /// wait, parked and unanswered, a later request for the same user and key is another
    /// call's. Before, every later one counted, and an await of a held call that a later call
    /// for the same key had been answered beside was never judged inert: explore failed the
    /// shipping SDK on 144 of 720 infeasible orders (a third outside tester, finding 10).
    func ownWindowEnd(after ordinal: Int) -> Int? {
        lock.withLock { stepStarts.first { $0.ordinal > ordinal }?.seen }
    }

    /// The requests among `requests` that `matches` picks and that can be the own requests of an
    /// SDK call that began when the mock had received `since` and at the recorder's `ordinal`:
    /// those received before the next step began (`ownWindowEnd`), or every one once a request
    /// the call sent in that window (after `since`) was answered or cancelled (a retry or the
    /// next chunk of a batch may follow it).
    /// A request answered before the call began (`answeredAt`: the history index of each
    /// request's answer, `startEvent`: the call's) is never its own: it cannot be travelling to
    /// it (out of process, an earlier call's answered lookup for the same user and key, or any
    /// earlier answered request of a tracking call's user, kept it from being inert).
    func ownRequests(_ requests: [RequestRecord], client: String, since: Int, ordinal: Int, startEvent: Int, answeredAt: [Int: Int],
                     _ matches: (RequestRecord) -> Bool) -> [RequestRecord] {
        let all = requests.filter { r in matches(r) && (answeredAt[r.seq].map { $0 >= startEvent } ?? true) }
        guard let end = ownWindowEnd(after: ordinal) else { return all }
        let window = all.filter { $0.seq <= end }
        guard window.contains(where: { $0.seq > since && ($0.answered || $0.cancelled) }) else { return window }
        // Never past a clear after it began: a request received after that is a later call's
        // (a call begun after the clear sends its own, CONTRACT.md section 5.1).
        let cleared = firstClear(of: client, after: ordinal) ?? Int.max
        return all.filter { $0.seq <= cleared }
    }
    /// The `expect` of each async step, by group label, checked when the group is awaited (or,
    /// never awaited, once it finished at the end of the scenario): every expectation is evaluated.
    private var deferred: [ExactKey: (index: Int, step: String, expect: OutcomeExpectation)] = [:]   // by exact group label
    /// Set when a step could not be carried out in this order (see `ScenarioResult.infeasible`).
    private(set) var infeasible = false
    /// Set with `infeasible` when the order deadlocks only by a choice the contract leaves to the
    /// SDK (see `ScenarioResult.infeasibleByChoice`).
    private(set) var infeasibleByChoice = false

    let keepsHistory: Bool

    init(scenario: Scenario, driver: any SDKDriver, keepsHistory: Bool = true, interleaving: InterleavingPlan? = nil) throws {
        self.scenario = scenario
        self.keepsHistory = keepsHistory
        self.driver = driver
        let recorderBox = RecorderBox()
        let clock = VirtualClock(onChange: { recorderBox.recorder?.poke() })
        self.clock = clock
        let recorder = Recorder(clock: clock)
        recorderBox.recorder = recorder
        self.recorder = recorder
        let originOwners = scenario.originOwners
        let port = try MockBackendPort(fixtures: scenario.fixtures, clock: clock, file: scenario.file,
                                       clients: scenario.clients.map(\.name), originOwners: originOwners)
        self.port = port
        var sdkExecutor: (any Sendable)?
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let interleaving {
            // Interleaved (Interleaving.swift): the SDK's own tasks run on the controlled executor too.
            let controlled = ControlledExecutor(strategy: interleaving.makeStrategy(), settled: { Self.settled(port) },
                                                quiet: { Self.quiet(port) }, onChange: { recorder.poke() })
            recorder.setHook(controlled)
            port.counter.setDeliveryGate { controlled.afterCurrentJob($0) }
            self.executor = controlled
            sdkExecutor = controlled
        } else if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *) {
            // The SDK's own tasks (its deadline timers) run here too, so quiescence waits until a
            // timer it started is asleep on the clock before an `advance` (SDKTaskQuiescenceTests).
            let operations = OperationExecutor { recorder.poke() }
            self.executor = operations
            sdkExecutor = operations
        } else {
            self.executor = NoExecutorTracking()
        }
        port.setObserver { seq, answered in
            guard let seq else { return recorder.poke() }
            recorder.record(answered ? .response : .request, request: RequestRecord.placeholder(seq: seq))
        }
        // Store ids are identity data: two that differ only by normalization are two stores (a
        // twelfth outside tester: a Swift `Set`/`String` key merged them, failing a correct SDK).
        var acquired: [ExactKey: String] = [:]
        var memory: [ExactKey: SharedDefaults] = [:]
        for store in Set(scenario.clients.compactMap(\.store).map { ExactKey($0) }) {
            if keepsHistory { acquired[store] = StoreSuitePool.acquire() } else { memory[store] = SharedDefaults(defaults: MemoryDefaults()) }
        }
        let suites = acquired, memoryStores = memory
        self.suites = suites
        var memoryStore: (@Sendable (String) -> SharedDefaults)?
        if !keepsHistory {
            memoryStore = { @Sendable name in memoryStores[ExactKey(name)] ?? SharedDefaults(defaults: MemoryDefaults()) }
        }
        let listeners = try Self.listeners(for: driver, port: port, clients: scenario.clients.map(\.name).filter { originOwners[ExactKey($0)] == nil },
                                           origins: originOwners, keepAlive: !Self.canDropBeforeAnswer(scenario))
        self.listeners = listeners
        // A request recorded after the listeners read it: quiescence (`transportIdle`) is checked again.
        listeners?.onRecorded { [recorder] in recorder.poke() }
        // A client whose base_url is not the mock gets a session of its own (InProcessSessions).
        let elsewhere = Set(scenario.clients.filter { $0.settings.elsewhere }.map { ExactKey($0.name) })
        var context = DriverContext(makeSession: { port.session(client: $0, dedicated: elsewhere.contains(ExactKey($0))) }, clock: clock,
                                    storeSuite: { suites[ExactKey($0)] ?? "experimently-harness-unknown-\($0)" },
                                    memoryStore: memoryStore,
                                    baseURL: { listeners?.baseURL(client: $0) ?? port.baseURL(client: $0) })
        context.taskExecutor = sdkExecutor
        clientContext = context
        for c in scenario.clients where !scenario.launchedAtFirstUse.containsExactly(c.name) {
            let made = try driver.makeClient(name: c.name, settings: c.settings, store: c.store, context: context)
            lock.withLock { launched[c.name] = made }
        }
        // The app's own tasks (its serialized fetches) run where the operations do, so the
        // executor's idleness covers them (exact quiescence for app operations, `appsSettled`).
        appTaskExecutor = sdkExecutor
        if listeners == nil, executor.jobsRun != nil {
            recorder.setStuckProbe(Self.stuckProbe(executor: executor, port: port, clock: clock, recorder: recorder))
        }
        if let a = scenario.app, let client = clients[a.client] {
            let made = ReferenceApp(settings: a, client: client, recorder: recorder, taskExecutor: appTaskExecutor,
                                    requestCount: { [port] in port.requestCount })
            app = made
            apps[ExactKey(a.client)] = made
        }
        // Over loopback TCP the mock traps a transport's silent resend of a request it dropped
        // (MockBackend.TransportRetryTrap); it asks here whether a matching request can still be one.
        if listeners != nil {
            port.backend.setResendPossible { [weak self] dropped in self?.mayStillResend(dropped) ?? true }
        }
    }

    /// Whether a request the mock dropped (`dropped`, its sequence number) may still be resent by
    /// its client's transport: some operation of that client that was running when the request
    /// arrived is still running. A transport resends inside the operation that sent the request,
    /// before the operation hears of the drop; once every such operation has ended, the same
    /// request again is the SDK's own new request (a twenty-fifth outside tester: an independent
    /// Node SDK on Node's keep-alive agent had its next identical request dropped too, failing
    /// two files). Unknown requests, and those of a client with a reference app, count as
    /// resendable (the mock's trap stands).
    func mayStillResend(_ dropped: Int) -> Bool {
        guard let record = port.requests().first(where: { $0.seq == dropped }), let client = record.client else { return true }
        return lock.withLock {
            // A reference app's fetches may outlive the action that began them: its client's traps stand.
            apps[ExactKey(client)] != nil || ops.values.contains { op in
                op.outcome == nil && op.since < dropped && op.client.unicodeScalars.elementsEqual(client.unicodeScalars)
            }
        }
    }

    /// The stuck probe of an in-process run (`Recorder.setStuckProbe`): the progress counters
    /// (operation-executor jobs run, requests the mock has seen, history events, clock wakeups,
    /// then the parked requests' numbers) when the executor is idle, the mock is answering
    /// nothing, no cancellation the SDK began is still on its way to the mock, every session's
    /// delegate queue is empty (`BackendPort.delegateQueuesIdle`), and every
    /// URLSession task in flight is a request parked in the mock; else `nil`.
    /// It rests on the SDK's tasks preferring the executor the runner gives it
    /// (`DriverContext.taskExecutor`), as the shipping SDK's and the broken variants' do: work
    /// an SDK does on other threads is invisible to it. The mutant matrix uses it to tell a
    /// variant's deadlock from a loaded machine (`Recorder.ranOutOfTimeUnproven`).
    static func stuckProbe(executor: any IdleReporting, port: any BackendPort, clock: VirtualClock,
                           recorder: Recorder) -> @Sendable () -> [Int]? {
        { [weak recorder] in
            guard let recorder, executor.isIdle, let jobs = executor.jobsRun, port.unsettledRequests == 0 else { return nil }
            // A cancellation the SDK began that the mock has not yet seen will move the run
            // without a step (the loading system calls `stopLoading` on its own queue, which a
            // starved process runs late; on Linux the shipping SDK even calls `cancel()` from the
            // session's delegate queue, so the work waits there first): a forty-fifth outside tester saw twenty cancelled
            // requests judged a deadlock at a 40 ms cap under load, the failure unlabelled.
            guard port.cancellationsOnTheirWay().isEmpty, port.delegateQueuesIdle else { return nil }
            let parked = port.parkedRequests().filter { !$0.answered && !$0.cancelled }
            guard let outstanding = port.outstandingTasks, outstanding == parked.count else { return nil }
            return [jobs, port.requestCount, recorder.eventCount, clock.wakeups] + parked.map(\.seq).sorted()
        }
    }

    // MARK: Running

    func run() async -> ScenarioResult {
        var aborted: String?
        for (i, step) in scenario.steps.enumerated() {
            recorder.setStep(i)
            if let problem = await perform(step, index: i) {
                aborted = problem
                fail("step \(i) \(Self.verb(step, appClient: scenario.app?.client))", problem)
                break
            }
        }
        recorder.setStep(scenario.steps.count)
        if aborted == nil {
            // Quiescent with operations pending at the end: they wait on parked requests no step
            // will release, so waiting out the step limit would only delay the same verdict.
            let ended = await recorder.wait(milliseconds: scenario.stepTimeoutMilliseconds) { [self] in
                (pending().isEmpty && port.unsettledRequests == 0) || (quiescent() && inert(nil))
            }
            let finished = ended && pending().isEmpty
            let stuck = ended && !finished
            if !finished {
                fail("operations finish", "operations never finished by the end of the scenario: \(describePending())"
                     + (stuck ? " (they wait on parked requests and no step is left to release them)" : ""))
            }
        }
        let trace = await drainInterleaving()
        if aborted == nil {
            // Async steps never awaited: their expectations are checked on the finished outcomes.
            let left = lock.withLock { deferred.sorted { $0.value.index < $1.value.index } }
            for (key, d) in left {
                let group = key.text
                guard let labels = lock.withLock({ groups[key] }) else { continue }
                if lock.withLock({ labels.allSatisfy { ops[ExactKey($0)]?.outcome != nil } }) {
                    evaluate(labels, d.expect, name: "\(d.step) expect")
                } else {
                    fail("\(d.step) expect", "operation '\(group)' never finished, so its expectation could not be checked")
                }
            }
        }
        let runnerCancelledFrom = pending().isEmpty ? Int.max : recorder.eventCount
        cancelAll()
        await settleInterleaving()
        enrichHistory()
        if aborted == nil {
            let history = recorder.snapshot
            var context = CheckContext(scenario: scenario, history: history, clients: clients, port: port, driver: driver, app: app)
            context.runnerCancelledFrom = runnerCancelledFrom
            context.refusedAtTransport = Set((listeners?.refusedAtTransport ?? []).map { ExactKey($0) })
            // Judged before the named checks add theirs: did any step expectation run?
            let stepsJudged = lock.withLock { !checks.isEmpty }
            for name in scenario.checks {
                let results = await Checks.run(name, context)
                lock.withLock { checks.append(contentsOf: results) }
            }
            if !stepsJudged, !scenario.checks.isEmpty, !scenario.checks.contains(where: { Checks.judgesSomething($0, context) }) {
                fail("nothing judged", "the named checks \(scenario.checks.joined(separator: ", ")) had nothing to judge "
                     + "(no call or request of the kinds they judge: Checks.judgesSomething) and no step states an expectation: "
                     + "a scenario that checks nothing must not pass (ScenarioFormat.md, Nothing passes unchecked)")
            }
            // A body with a member name twice (or in two canonically equivalent spellings) is
            // read as one member here, while the backend keeps both: an extra property passed
            // `event_payload` and even `body_equals` (an outside tester). No scenario can give
            // such names (the parser refuses them), so no correct SDK sends them.
            if let r = port.requests().first(where: { $0.duplicateKey != nil }) {
                fail("request body", "request #\(r.seq) \(r.method) \(r.path): the body has a \(r.duplicateKey!): an SDK sends each member once, "
                     + "as the call gave it (RFC 8259 section 4: names SHOULD be unique; the backend keeps both spellings), and the judge cannot compare it exactly")
            }
        }
        let problems = await port.shutdown()
        if !problems.isEmpty {
            fail("lifecycle", "the mock's strict shutdown found: " + problems.joined(separator: "; "))
        }
        cleanUpStores()
        let history = recorder.snapshot
        let canonical = keepsHistory ? Self.canonical(history, overTCP: listeners != nil) : []
        let results = lock.withLock { checks }
        let smoke = results.isEmpty ? nil : Checks.smokeFields(scenario: scenario, history: history)
        var result = ScenarioResult(name: scenario.name, file: scenario.file, tags: scenario.tags, source: scenario.source,
                              status: lock.withLock({ scenarioError }) ? .error : results.allSatisfy(\.passed) ? .passed : .failed, durationMilliseconds: 0,
                              checks: results.isEmpty ? [CheckResult(name: "steps", passed: true)] : results,
                              reason: aborted, smoke: scenario.checks.contains("contract_smoke") ? smoke : nil,
                              history: canonical, historyDigest: keepsHistory ? Self.digest(canonical) : "")
        if keepsHistory { result.events = history; result.stepSummaries = scenario.steps.map(\.summary) }
        result.interleaving = trace
        return result
    }

    /// The history so far with request entries filled in from the mock (the recorder only notes
    /// sequence numbers while the run goes on).
    func currentHistory() -> [HistoryEvent] {
        let bySeq = Dictionary(port.requests().map { ($0.seq, $0) }, uniquingKeysWith: { a, _ in a })
        let parked = port.parkedAtReceipt()
        return recorder.snapshot.map { e in
            guard let seq = e.request?.seq, let full = bySeq[seq] else { return e }
            var copy = e
            copy.request = full
            copy.client = full.client
            // A request line says how the mock parked it at receipt (its answer is its own event).
            if e.kind == .request, let how = parked[seq] { copy.detail = .object(["parked": .string(how)]) }
            return copy
        }
    }

    func fail(_ name: String, _ message: String, history: [String]? = nil) {
        let slice = history ?? Array(currentHistory().suffix(12).map(\.line))
        // An infeasible order is the scenario's deadlock, not a rule the SDK broke.
        let text = name.hasPrefix("step ") && !infeasible ? Self.naming(message, source: scenario.source) : message
        lock.withLock { checks.append(CheckResult(name: name, passed: false, message: text, history: slice)) }
    }

    func pass(_ name: String) {
        lock.withLock { checks.append(CheckResult(name: name, passed: true)) }
    }

    /// A step in a few words; an app step on a client other than `appClient` (the `app`
    /// section's) names its client.
    static func verb(_ step: Step, appClient: String? = nil) -> String {
        switch step {
        case .sdk(_, let op, let label, _, _, _): return "do \(op.name)\(label.map { " as \($0)" } ?? "")"
        case .app(let action, _, _, _, let client, _): return "app \(action)" + (client.isExactly(appClient ?? client) ? "" : " on \(client)")
        case .await(let label, _): return "await \(label)"
        case .cancel(let label): return "cancel \(label)"
        case .addFault(let id, _): return "fault \(id)"
        case .removeFault(let id): return "remove_fault \(id)"
        case .release(let id, _, _, _): return "release \(id)"
        case .waitFor(let c): return "wait_for \(describe(c))"
        case .advance(let s): return "advance \(s)"
        case .fixtures(let c): return "fixtures \(c)"
        case .seedStore(let client, let kind, let user, let key, _): return "seed_store \(kind) \(key.unambiguous) of \(user.unambiguous) on \(client)"
        case .expect: return "assert"
        }
    }

    /// Launches `client` when it is launched at its first use and is not yet (a `launch` marker
    /// records it): the SDK instance is created now, over its store as earlier clients left it (a
    /// relaunch; a seventy-ninth outside tester: every client was created before the first step,
    /// so what an SDK does at its launch was never judged). Called from the step loop only, so
    /// two launches never race. Returns why it could not be launched, or `nil`.
    func launchIfDue(_ client: String) -> String? {
        guard scenario.launchedAtFirstUse.containsExactly(client), lock.withLock({ launched[client] == nil }),
              let spec = scenario.clients.first(where: { $0.name.isExactly(client) }), let context = clientContext else { return nil }
        do {
            port.handOver(to: spec.name)
            let made = try driver.makeClient(name: spec.name, settings: spec.settings, store: spec.store, context: context)
            lock.withLock { launched[spec.name] = made }
            recorder.record(.marker, client: spec.name, name: "launch")
            return nil
        } catch {
            return "client '\(client)' could not be launched: \(error)"
        }
    }

    /// A message a step ends the scenario with (an `Error` only to travel in a `Result`).
    struct StepProblem: Error {
        /// The message.
        let text: String
    }

    /// The SDK instance that writes a `seed_store` naming `client` (launched at its first use, not
    /// yet) while no client of its store is launched: made over the client's store with its
    /// settings, requests and sessions counted as the client's, used for seeding only, and
    /// released with the clients when the scenario ends (`seeders`). One per store: a later seed
    /// of the same store writes through the same instance. Called from the step loop only.
    func seeder(for client: String) -> Result<any DriverClient, StepProblem> {
        guard let spec = scenario.clients.first(where: { $0.name.isExactly(client) }), let store = spec.store,
              let context = clientContext else {
            return .failure(StepProblem(text: "seed_store names client '\(client)', which has no offline store"))
        }
        if let made = lock.withLock({ seeders[ExactKey(store)] }) { return .success(made) }
        let base = context.baseURL, session = context.makeSession, owner = spec.name
        var own = DriverContext(makeSession: { _ in session(owner) }, clock: context.clock, storeSuite: context.storeSuite,
                                memoryStore: context.memoryStore, baseURL: { _ in base(owner) })
        own.taskExecutor = context.taskExecutor
        // A name no scenario client has (each adapter keeps its clients by name).
        var name = "seed_store of \(store)"
        while scenario.clients.contains(where: { $0.name.isExactly(name) }) { name += "'" }
        do {
            let made = try driver.makeClient(name: name, settings: spec.settings, store: store, context: own)
            lock.withLock { seeders[ExactKey(store)] = made }
            return .success(made)
        } catch {
            return .failure(StepProblem(text: "an instance to seed store '\(store)' through could not be made: \(error)"))
        }
    }

    /// The client a step uses the SDK instance of (an SDK call, an app step or assertion, a
    /// cache or store assertion), if any; `appClient` is the `app` section's client (what an app
    /// assertion naming none uses).
    static func clientUsed(by step: Step, appClient: String?) -> String? {
        switch step {
        case .sdk(let client, _, _, _, _, _), .app(_, _, _, _, let client, _): return client
        case .expect(.cache(let client, _, _, _)), .expect(.persisted(let client, _, _, _, _, _)),
             .expect(.cached(let client, _, _, _, _, _)):
            return client
        case .expect(.app(_, _, _, let client)), .expect(.reported(_, _, let client)): return client ?? appClient
        default: return nil
        }
    }

    /// Runs one step; returns a message when the scenario cannot go on (a hang or a bad step).
    func perform(_ step: Step, index: Int) async -> String? {
        if let client = Self.clientUsed(by: step, appClient: scenario.app?.client), let problem = launchIfDue(client) { return problem }
        let name = "step \(index) \(Self.verb(step, appClient: scenario.app?.client))"
        let begun = (ordinal: recorder.ordinal(), seen: port.requestCount)
        lock.withLock { stepStarts.append(begun) }
        switch step {
        case .sdk(let client, let op, let label, let isAsync, let count, let expect):
            let base = label ?? nextLabel()
            let labels = count == 1 ? [base] : (1...count).map { "\(base)#\($0)" }
            lock.withLock { registerGroup(base, labels) }
            // Every invocation is recorded before any starts, so a group's first request can
            // never land between its invocations.
            if op == .clearOfflineCache {
                let seen = port.requestCount
                let ordinal = recorder.ordinal()
                lock.withLock { offlineClearSteps[ExactKey(client), default: []].append((ordinal: ordinal, seen: seen)) }
            }
            if op == .clearCache || op == .close {
                let seen = port.requestCount
                let ordinal = recorder.ordinal()
                lock.withLock {
                    barriers[ExactKey(client)] = seen
                    clearSteps[ExactKey(client), default: []].append((ordinal: ordinal, seen: seen))
                }
            }
            if op == .close { mark(.closedWhilePending) { $0.client.unicodeScalars.elementsEqual(client.unicodeScalars) } }
            let key = op.cacheKey.map { (kind: $0.kind == "flag" ? "flag" : "experiment", key: $0.key) }
            let launches = labels.map { l in
                start(label: l, client: client, name: op.name, user: Self.user(of: op), key: key, detail: Self.arguments(op)) { [self] in
                    await clients[client]!.perform(op)
                }
            }
            launches.forEach { $0() }
            // A synchronous step is judged like an `await` of it: parked while nothing else can
            // happen, it is stuck at once (infeasible when a later step provides what it waits
            // for), never after the step limit (a seventeenth outside tester: explore counted such
            // orders as failures of the shipping SDK, each after 5 s).
            if !isAsync { return await finish(group: base, expect: expect, step: name, index: index) }
            if let expect { lock.withLock { deferred[ExactKey(base)] = (index, name, expect) } }
        case .app(let action, let label, let isAsync, let expect, let client, let count):
            let base = label ?? nextLabel()
            // `times`: N copies at once on the same app, labelled as an SDK operation's copies.
            let labels = count == 1 ? [base] : (1...count).map { "\(base)#\($0)" }
            lock.withLock { registerGroup(base, labels) }
            guard let app = appInstance(on: client) else { return "no reference app can run on client '\(client)'" }
            mark(.appActionRaced) { $0.client.unicodeScalars.elementsEqual(client.unicodeScalars) }
            let launches = labels.map { l in
                start(label: l, client: client, name: "app.\(Self.appName(action))", user: nil,
                      detail: Self.appArguments(action)) { await app.perform(action) }
            }
            launches.forEach { $0() }
            // A synchronous step is judged like an `await` of it: parked while nothing else can
            // happen, it is stuck at once (infeasible when a later step provides what it waits
            // for), never after the step limit (a seventeenth outside tester: explore counted such
            // orders as failures of the shipping SDK, each after 5 s).
            if !isAsync { return await finish(group: base, expect: expect, step: name, index: index) }
            if let expect { lock.withLock { deferred[ExactKey(base)] = (index, name, expect) } }
        case .await(let label, let expect):
            return await finish(group: label, expect: expect, step: name, index: index)
        case .cancel(let label):
            guard let members = lock.withLock({ groups[ExactKey(label)] }) else {
                infeasible = true
                return "operation '\(label)' was never started"
            }
            let tasks = lock.withLock { members.compactMap { ops[ExactKey($0)]?.task } }
            mark(.cancelRequested) { op in members.contains { $0.unicodeScalars.elementsEqual(op.label.unicodeScalars) } }
            let seen = port.requestCount
            let marker = recorder.record(.marker, label: label, name: "cancel")
            lock.withLock { cancelSteps.append((event: marker, seen: seen)) }
            tasks.forEach { $0.cancel() }
        case .addFault(let id, let rule):
            do { try port.addFault(id: id, rule: rule, file: scenario.file, path: "$.steps[\(index)].fault") }
            catch { return "\(error)" }
        case .removeFault(let id):
            port.removeFault(id: id)
        case .release(let id, let count, let all, let override):
            // The marker goes first: the released requests' answers follow it in the history.
            recorder.record(.marker, name: "release", detail: .object(["fault": .string(id), "count": all ? .string("all") : .number(Double(count ?? 1))]))
            do {
                let released = try port.release(fault: id, count: all ? nil : (count ?? 1), override: override)
                if let count, !all, released < count {
                    infeasible = true
                    return "release of \(count) asked, but fault '\(id)' held only \(released) request(s) now"
                }
                if released == 0 {
                    infeasible = true
                    return "nothing to release: fault '\(id)' holds no request (it held \(port.heldCount(fault: id)) so far); requests: "
                        + port.requests().suffix(5).map(\.summary).joined(separator: "; ")
                }
            } catch { return "\(error)" }
        case .waitFor(let condition):
            // Quiescent and unmet: nothing pending can meet it (see `stuck(at:waitingFor:)`).
            // A wait for a cancellation is decided early only in process, once no request it could
            // count is still open: a cancellation travels through the SDK and URLSession, where
            // quiescence cannot see it, but in process a request answered while quiescent is final
            // (its URLSession task is over). Before, such a wait after a `release` that answered the
            // request waited out its limit and failed as a defect-3 failure that did not replay (a
            // third outside tester: 1-3 of 120 explored orders, in process too).
            // Nor is one on its way when nothing that cancels a request has happened yet (no
            // cancel, close, clear, logout or clock move, and the SDK's deadlines follow the
            // scenario's clock): a wait for a cancellation moved before its cause is then decided
            // at once, naming the later step (a seventy-third outside tester: it waited out the
            // step limit, and `explore` counted the order as failing on the reference too).
            let decidable = condition != .quiescence
                && (!condition.awaitsCancellation || (listeners == nil && noneOpen(condition)) || nothingCancelsYet())
            // Met when the wait saw it met: quiescence (and what a later answer undoes) may pass
            // again before it is read a second time (a thirty-seventh outside tester: a `wait_for`
            // quiescence that ended met was then reported as waiting for a later step, 1 run in 4
            // through an adapter whose late answer was still on its way).
            let seen = HarnessLocked(false)
            let ended = await recorder.wait(milliseconds: scenario.stepTimeoutMilliseconds) { [self] in
                if satisfied(condition) { seen.withLock { $0 = true }; return true }
                return decidable && quiescent() && inert(nil)
            }
            let met = ended && (seen.withLock { $0 } || satisfied(condition))
            if ended && !met, let raced = cancellationRaced(condition) { return raced }
            if ended && !met {
                let problem = self.stuck(at: index, waitingFor: nil, what: Self.describe(condition))
                if !infeasible, case .held(let fault, _) = condition, let late = heldTooLate(fault: fault, at: index, what: Self.describe(condition)) { return late }
                return problem + "; " + nearest(condition)
            }
            if !met { return "\(Self.describe(condition)) did not happen \(hangNote()); " + nearest(condition) }
            return nil
        case .advance(let seconds):
            // The marker goes first: what the advance wakes follows it in the history.
            recorder.record(.marker, name: "advance", detail: .number(seconds))
            lock.withLock { advances += 1 }
            // One instant at a time, each settled before the next: an answer the mock has due at
            // 2 s reaches the SDK before its deadline at 10 s fires, as in real time. Out of
            // process the adapter's clock is moved to each instant the mock or the adapter (its
            // `next` timer) has something due.
            let target = clock.onGrid(clock.now().addingTimeInterval(max(0, seconds)))
            // Every advance is at most ten years, but nothing bounds how many there are: the
            // clock stops where the microsecond grid stops holding (VirtualClock.maximumElapsedSeconds).
            if clock.elapsed(at: target) > VirtualClock.maximumElapsedSeconds {
                lock.withLock { scenarioError = true }
                return "the advance of \(seconds) s would take the virtual clock \(HTMLReport.seconds(clock.elapsed(at: target))) past its start, beyond its bound of "
                    + "\(HTMLReport.seconds(VirtualClock.maximumElapsedSeconds)) (80 years; past it a Date no longer holds every microsecond); "
                    + "the clock stays at \(HTMLReport.seconds(clock.elapsed(at: clock.now()))) after its start"
            }
            // An acknowledgement that took the whole step limit ran out of it (the limit is the
            // reply's deadline): a time-limit failure like a wait's, which a loaded machine can cause.
            let moveAdapter = { [self] () async -> String? in
                let sent = DispatchTime.now().uptimeNanoseconds
                let problem = await driver.clockDidAdvance(clock, clients: Array(clients.values), deadlineMilliseconds: scenario.stepTimeoutMilliseconds)
                if problem != nil, Double(DispatchTime.now().uptimeNanoseconds - sent) / 1e6 >= Double(scenario.stepTimeoutMilliseconds) {
                    recorder.ranOutOfTimeWhileMoving()
                }
                return problem
            }
            // Out of process, first learn the adapter's earliest timer (a move to the time it is
            // already at: its reply says `next`).
            if listeners != nil, let problem = await moveAdapter() { return problem }
            // The next instant: a sleeper's deadline, a parked delay's end the mock has reported
            // but not yet begun to sleep on, or the adapter's earliest timer.
            // After 1,000 instants (or a quarter of the step's time limit) the adapter's own timers
            // are no instants of their own any more
            // (an SDK reporting a 1 ms timer would take the walk there forever): it is moved from
            // one instant of the mock or the in-process clock to the next, so its timers still run
            // before what the mock has due later. Before, the walk stopped there and jumped to the
            // end, and a correct SDK's 30 s deadline fired before the mock's answer due at 20 s
            // (a thirty-fourth outside tester, F6).
            var coalesce = false
            func nextInstant() -> Date? {
                let now = clock.now()
                let adapter = coalesce ? [] : driver.nextTimer(of: clock).map { [$0] } ?? []
                // On the clock's microsecond grid: an instant finer than that is the nearest one.
                return ([clock.nextInstant(toward: target)].compactMap { $0 } + port.pendingDeadlines() + adapter)
                    .map(clock.onGrid).filter { $0 <= target && $0 > now }.min()
            }
            var instants = 0
            let walkStarted = DispatchTime.now().uptimeNanoseconds
            while let instant = nextInstant() {
                instants += 1
                // The walk is one step: it keeps to the step's time limit (`--step-timeout-ms`).
                let elapsedMs = Double(DispatchTime.now().uptimeNanoseconds - walkStarted) / 1e6
                if instants >= 1_000 || elapsedMs > Double(scenario.stepTimeoutMilliseconds) / 4 { coalesce = true }
                if elapsedMs > Double(scenario.stepTimeoutMilliseconds) {
                    recorder.ranOutOfTimeWhileMoving()
                    return "the advance of \(seconds) s did not finish within the step limit of \(scenario.stepTimeoutMilliseconds) ms: it had moved the clock to \(instants) instants"
                        + (listeners != nil ? " (the adapter's `next` timers among them)" : "") + ", \(String(format: "%.3f", instant.timeIntervalSince(target) + seconds)) s of the \(seconds) s"
                }
                // The SDK's deadlines at the instant first (in process; out of process the adapter
                // acknowledges the move after what it completed), then the mock's answers.
                let before = clock.wakeups
                clock.advanceWakingSDK(to: instant)
                if let problem = await moveAdapter() { return problem }
                if listeners != nil || clock.wakeups != before, let problem = await quiesce(step: name) { return problem }
                clock.wakeMock()
                if let problem = await quiesce(step: name) { return problem }
            }
            clock.advanceWakingSDK(to: target)
            if let problem = await moveAdapter() { return problem }
            // The mock's sleepers too: one that registered its delay late waits for a wake at or
            // after its deadline (`VirtualClock.sleep(until:byMock:)`).
            clock.wakeMock()
        case .seedStore(let client, let kind, let user, let key, let json):
            // Through the client named, or before its launch through a launched client of its
            // store, or when none is launched, through an instance made over the store for
            // seeding alone (`seeder(for:)`): what an earlier version left is in the store before
            // this version's first launch, as an SDK that reads its store once at construction
            // needs (an eighty-second outside tester, F8).
            let store = scenario.clients.first { $0.name.isExactly(client) }?.store
            let launchedNow = clients
            let through = launchedNow[client] ?? scenario.clients.first(where: { other in
                store != nil && other.store.isExactly(store) && launchedNow[other.name] != nil
            }).flatMap { launchedNow[$0.name] }
            let writer: any DriverClient
            if let through {
                writer = through
            } else {
                switch seeder(for: client) {
                case .success(let made): writer = made
                case .failure(let problem): return problem.text
                }
            }
            if let problem = await writer.seedPersisted(kind: kind, user: user, key: key, json: json) { return problem }
            recorder.record(.marker, client: client, name: "seed_store",
                            detail: .object(["kind": .string(kind), "user": .string(user), "key": .string(key), "json": json]))
        case .fixtures(let change):
            do { try port.updateFixtures(change) } catch { return "\(error)" }
            recorder.record(.marker, name: "fixtures", detail: .string(Self.describe(change)))
        case .expect(let expectation):
            await quiesce(step: name)
            if let problem = await check(expectation) { fail(name, problem, history: slice(for: expectation)) } else { pass(name) }
            return nil
        }
        return await quiesce(step: name)
    }

    /// Whether the pending operations among `labels` (all pending operations when `nil`) can only
    /// move when a step acts: quiescence is not enough, as it cannot see the SDK's own tasks.
    /// Each such operation has requests of its own (its client, for its user and key, after its
    /// client's last clear: `ownRequests`) and waits on a parked one (`waitsOnParked`: none is
    /// being cancelled by the SDK; out of process none is answered or cancelled either, as the
    /// answer may still be travelling to the SDK), and no clock sleeper the runner cannot see
    /// act has been woken since it started (an SDK deadline may be acting on it: in process a
    /// timer task that prefers no executor, out of process any). Evaluated only when quiescent.
    ///
    /// `afterLimit`: asked when a step ran out of its limit while quiescent. Out of process an
    /// answered request of an operation's own may be on its way to the SDK, so before the limit
    /// every own request must be parked; after seconds of quiescence (and, with `settle`, the
    /// adapter's word that every operation is at its wait) nothing is on its way any more, and an
    /// operation that still waits on a parked request of its own, beside answered ones, waits
    /// for what a step provides, as in process (an answered first chunk of a batch, an answered
    /// copy of a `times` group: attack5 t5b, t6, t7 were SDK failures out of process).
    func inert(_ labels: [String]?, afterLimit: Bool = false) -> Bool {
        let waiting = pending().filter { op in labels?.contains { $0.unicodeScalars.elementsEqual(op.label.unicodeScalars) } ?? true }
        if waiting.isEmpty { return labels == nil }
        let wakeups = clock.wakeups
        let unseenWakeups = clock.unseenWakeups
        let advancesNow = lock.withLock { advances }
        let requests = port.requests()
        // In process, a cancellation the SDK began is seen at once (its task's state), before
        // the loading system tells the mock.
        let cancelling = Set(port.cancellationsOnTheirWay())
        // In process with counted sessions, quiescence means every answer and cancellation has
        // reached the SDK (every task not parked has returned its completion), so an answered
        // request of an operation's is behind it, not on its way.
        let processed = (listeners == nil && port.outstandingTasks != nil) || (afterLimit && listeners != nil)
        let answeredAt = answerEvents()
        return waiting.allSatisfy { op in
            // A woken SDK timer may be acting on it where the runner cannot see: out of process
            // any woken sleeper counts; in process only one whose task prefers no executor (a
            // woken task on the runner's executor has acted once quiescent, and the mock's own
            // timers show in the requests they park). Before, any wakeup, a delay of another
            // request included, kept every operation started earlier from being inert.
            // Out of process the SDK's timers are invisible: any advance since it started may
            // have woken one (its own request deadline), so it is not inert, unless the adapter
            // answers `settle`: quiescence then has its word, given after the last clock move,
            // that every operation has reached its wait or answered (the SDK's timers sleep on
            // the adapter's own copy of the clock, and the mock's show in the requests they park).
            // In process, only the tasks of an SDK whose tasks prefer the runner's executor are
            // seen (a driver with `interleaving`): another's timer task may not have started
            // sleeping yet when the clock moves, so, as out of process without `settle`, an
            // operation the clock passed since it started is not inert (CI: a correct SDK on a
            // driver without the seam, its deadline task late under load, was told it had no
            // deadline of its own, twice in a row).
            let seesTimers = listeners == nil ? sdkTasksSeen : adapterSettles
            guard seesTimers ? op.unseenWakeups == unseenWakeups : op.wakeups == wakeups, !op.cancelRequested else { return false }
            if !seesTimers, op.advances != advancesNow { return false }
            // A reference-app action is judged by the SDK calls its app is inside (`appInert`);
            // out of process only when the adapter answers `settle`: then quiescence has seen every
            // SDK call of the app at its wait (a cancellation an SDK's clear started would have
            // woken one), as in process.
            if op.appActionRaced || op.closedWhilePending, listeners != nil, !adapterSettles { return false }
            if op.name.hasPrefix("app.") { return appInert(client: op.client, requests: requests, cancelling: cancelling, processed: processed, answeredAt: answeredAt) }
            // An operation that sends nothing (a clear, close, a cache listing, a hash) waits on
            // no request: still pending, it is slow, not waiting for a step (under load a
            // `clearOfflineCache` beside a held request was called a deadlock of the scenario).
            if ["clearCache", "clearOfflineCache", "close", "getAssignments", "getEvaluatedFlags", "hashUser"].contains(op.name) { return false }
            let own = ownRequests(requests, client: op.client, since: op.since, ordinal: op.ordinal, startEvent: op.startEvent, answeredAt: answeredAt) {
                Self.owns($0, client: op.client, user: op.user, key: op.key, after: op.barrier) && joinable($0, by: op)
            }
            return Self.waitsOnParked(own, cancelling: cancelling, processed: processed)
        }
    }

    /// When the mock received each request (virtual seconds, the history's time), by sequence number.
    func receiptTimes() -> [Int: Double] {
        var received: [Int: Double] = [:]
        for e in recorder.snapshot where e.kind == .request { if let seq = e.request?.seq { received[seq] = e.time } }
        return received
    }

    /// The history index of each request's answer, by sequence number.
    func answerEvents() -> [Int: Int] {
        var out: [Int: Int] = [:]
        for e in recorder.snapshot where e.kind == .response { if let seq = e.request?.seq, out[seq] == nil { out[seq] = e.index } }
        return out
    }

    /// Whether an operation whose requests are `own` waits on a parked one and nothing else it
    /// sent can still move it: one of them is parked (neither answered nor cancelled) and none
    /// is being cancelled by the SDK (`cancelling`); and, unless the answers and cancellations
    /// of `own` have all reached the SDK (`processed`: in process, quiescent), none is answered
    /// or cancelled (it may still be travelling to the SDK). Before, an answered request of its
    /// own always kept it from being inert, so an await before the release of its held request
    /// waited out the step limit and failed the SDK when an earlier call's answered request for
    /// the same user and key, an answered first chunk of a batch, or a copy's answered track
    /// counted as its own (a fourth outside tester, finding 2).
    static func waitsOnParked(_ own: [RequestRecord], cancelling: Set<Int>, processed: Bool) -> Bool {
        let waiting: (RequestRecord) -> Bool = { $0.parked && !$0.answered && !$0.cancelled && !cancelling.contains($0.seq) }
        if own.contains(where: { cancelling.contains($0.seq) }) { return false }
        return processed ? own.contains(where: waiting) : !own.isEmpty && own.allSatisfy(waiting)
    }

    /// What a step did to the operations pending when it began (`mark`): each names the `Op` flag it sets.
    enum PendingMark {
        /// A `cancel` of it: `Op.cancelRequested`.
        case cancelRequested
        /// An app action on its client: `Op.appActionRaced`.
        case appActionRaced
        /// Its client's `close()`: `Op.closedWhilePending`.
        case closedWhilePending
    }

    /// Sets `how`'s flag on every pending operation that `affects` picks.
    func mark(_ how: PendingMark, _ affects: (Op) -> Bool) {
        lock.withLock {
            for label in order.map({ ExactKey($0) }) where ops[label]?.outcome == nil {
                guard let op = ops[label], affects(op) else { continue }
                switch how {
                case .cancelRequested: ops[label]?.cancelRequested = true
                case .appActionRaced: ops[label]?.appActionRaced = true
                case .closedWhilePending: ops[label]?.closedWhilePending = true
                }
            }
        }
    }

    /// Explains a step that waits (`await`, `wait_for`) in a quiescent scenario: nothing pending
    /// can give it what it waits for. When a later step could (a release of a fault that holds a
    /// request now, a removal of such a fault, a clock advance, a cancel of the awaited operation,
    /// a clear, close or app action; for `wait_for` any later action), the order is *infeasible*:
    /// the step waits for what only a later step provides (a deadlock of the scenario, not an SDK
    /// fault). Otherwise nothing ever could, and the message says so.
    func stuck(at index: Int, waitingFor labels: [String]?, what: String) -> String {
        // Fault ids and labels are identity data: compared by Unicode scalars.
        func same(_ a: String, _ b: String) -> Bool { a.unicodeScalars.elementsEqual(b.unicodeScalars) }
        if let labels, let overdue = pastOwnDeadline(labels) { return overdue }
        let holding = port.parkedRequests().filter { !$0.answered && !$0.cancelled }.compactMap(\.fault)
        let later = scenario.steps.indices.filter { $0 > index }
        // The step named is the most direct one: a release (or removal) of a holding fault, then
        // a cancel of the awaited operation, then anything else that could.
        let direct = later.first { i in
            switch scenario.steps[i] {
            // A `wait_for` (no labels) waits for requests to arrive: the step that starts an
            // operation sending them provides it, not a release of another parked request.
            case .sdk(_, let op, _, _, _, _): return labels == nil && op.sendsRequests
            case .app: return labels == nil
            case .release(let id, _, _, _), .removeFault(let id): return labels != nil && holding.contains { same($0, id) }
            case .cancel(let label): return labels != nil && (lock.withLock { groups[ExactKey(label)] } ?? []).contains { m in labels!.contains { same($0, m) } }
            default: return false
            }
        }
        let provider = direct ?? later.first { i in
            switch scenario.steps[i] {
            case .release(let id, _, _, _), .removeFault(let id): return holding.contains { same($0, id) }
            // A clock advance moves the SDK only through a sleeper on the virtual clock (its own
            // deadline, a retry timer): in process, with none, it provides nothing (a twelfth
            // outside tester's SDK that never sent a batch's second chunk was told the scenario
            // deadlocks until `advance`). Out of process the adapter's clock is not seen.
            case .advance: return listeners != nil || !sdkTasksSeen || clock.sleeperCount > 0
            case .app: return true
            case .cancel(let label): let members = lock.withLock { groups[ExactKey(label)] } ?? []
                return labels == nil || members.contains { m in labels!.contains { same($0, m) } }
            case .sdk(_, let op, _, _, _, _):
                return labels == nil || op == .clearCache || op == .close || op == .clearOfflineCache
            case .addFault, .fixtures: return labels == nil
            case .await, .waitFor, .expect, .seedStore: return false
            }
        }
        guard let provider else {
            if labels == nil && holding.isEmpty {
                return "\(what) can never happen: nothing pending can bring it about and no later step can"
            }
            return "\(what) can never finish: it waits on parked requests and no later step can release them"
        }
        infeasible = true
        // Every operation waited for was pending when its client closed, and close did not end it:
        // the order deadlocks because of a choice the contract leaves to the SDK (to cancel on
        // close or not), so no reference's passing it makes it this SDK's failure.
        let closed = labels.map { ls in pending().filter { op in ls.contains { same($0, op.label) } } } ?? []
        let byChoice = !closed.isEmpty && closed.allSatisfy(\.closedWhilePending)
        if byChoice { infeasibleByChoice = true }
        return "\(what) waits for what only a later step provides (step \(provider) \(Self.verb(scenario.steps[provider], appClient: scenario.app?.client))): "
            + "the scenario deadlocks in this order of its steps (explore counts such an order infeasible; in a file, move that step earlier)"
            + (byChoice ? "; its client's close() did not end it, which is the SDK's choice (an SDK that cancels on close ends it there)" : "")
    }

    /// Why one of the operations `labels` can only be the SDK's fault, when it is: an SDK
    /// operation whose own requests sit parked in the mock, sent longer ago by the virtual clock
    /// than its client's `timeout`. Whatever later step could release them, the SDK had to end the
    /// operation itself, with `networkError` -1001 (CONTRACT.md section 5, defect 6: the SDK
    /// enforces its own deadline); the order is not infeasible. `nil` otherwise. Evaluated only
    /// when quiescent and inert (in process a correct SDK's deadline timer would have woken).
    func pastOwnDeadline(_ labels: [String]) -> String? {
        let now = clock.now()
        let requests = port.requests()
        for op in pending() where !op.name.hasPrefix("app.") && labels.contains(where: { $0.isExactly(op.label) }) {
            guard let timeout = scenario.clients.first(where: { $0.name.isExactly(op.client) })?.settings.timeout,
                  now.timeIntervalSince(op.started) >= timeout else { continue }
            let own = ownRequests(requests, client: op.client, since: op.since, ordinal: op.ordinal, startEvent: op.startEvent, answeredAt: answerEvents()) {
                Self.owns($0, client: op.client, user: op.user, key: op.key, after: op.barrier)
            }
            let parked = own.filter { $0.parked && !$0.answered && !$0.cancelled }
            guard !parked.isEmpty else { continue }
            if !own.allSatisfy({ $0.parked && !$0.answered && !$0.cancelled }) {
                // Beside answered requests of its own (a batch's answered first chunk), a parked one
                // is past the deadline when it was sent longer ago than the timeout (each request
                // has the deadline; a twelfth outside tester: such an SDK was told the scenario deadlocks).
                let now = recorder.elapsed, received = receiptTimes()
                guard let first = parked.compactMap({ received[$0.seq] }).min(), now - first >= timeout else { continue }
                let waited = ((now - first) * 1000).rounded() / 1000
                return "operation '\(op.label)' (\(op.name) on \(op.client)) is still pending on request(s) \(parked.map { "#\($0.seq)" }.joined(separator: ", ")) "
                    + "parked in the mock \(waited) s of virtual time, past its client's timeout of \(timeout) s (its other requests were answered): "
                    + "the SDK must end it itself with networkError -1001 whatever the backend does (CONTRACT.md section 5, defect 6: "
                    + "the SDK enforces its own deadline); this SDK has no deadline of its own"
            }
            let waited = (now.timeIntervalSince(op.started) * 1000).rounded() / 1000
            return "operation '\(op.label)' (\(op.name) on \(op.client)) is still pending \(waited) s of virtual time after it started, "
                + "past its client's timeout of \(timeout) s, on request(s) \(own.map { "#\($0.seq)" }.joined(separator: ", ")) parked in the mock: "
                + "the SDK must end it itself with networkError -1001 whatever the backend does (CONTRACT.md section 5, defect 6: "
                + "the SDK enforces its own deadline); this SDK has no deadline of its own"
        }
        return appPastOwnDeadline(labels, requests: requests)
    }

    /// `pastOwnDeadline` for the reference-app actions among `labels`: an SDK call the app is
    /// inside whose own requests sit parked in the mock longer (virtual time, since the mock
    /// received them) than its client's `timeout`. Before, such an await was called a deadlock
    /// of the scenario (a fourth outside tester, finding 5), while the same defect in a runner
    /// operation was named.
    func appPastOwnDeadline(_ labels: [String], requests: [RequestRecord]) -> String? {
        let now = recorder.elapsed, received = receiptTimes()
        let answeredAt = answerEvents()
        for op in pending() where op.name.hasPrefix("app.") && labels.contains(where: { $0.isExactly(op.label) }) {
            guard let timeout = scenario.clients.first(where: { $0.name.isExactly(op.client) })?.settings.timeout,
                  let app = withAppsLocked({ $0[ExactKey(op.client)] }) else { continue }
            for call in app.callsInFlight {
                guard let key = Self.cachedKey(of: call.operation) else { continue }
                let own = ownRequests(requests, client: op.client, since: call.since, ordinal: call.ordinal, startEvent: call.startEvent, answeredAt: answeredAt) {
                    Self.owns($0, client: op.client, user: Self.user(of: call.operation), key: key, after: call.since)
                }
                guard !own.isEmpty, own.allSatisfy({ $0.parked && !$0.answered && !$0.cancelled }),
                      let first = own.compactMap({ received[$0.seq] }).min(), now - first >= timeout else { continue }
                let waited = ((now - first) * 1000).rounded() / 1000
                return "app action '\(op.label)' (\(op.name) on \(op.client)) waits in \(call.operation.name), whose request(s) "
                    + "\(own.map { "#\($0.seq)" }.joined(separator: ", ")) have been parked in the mock \(waited) s of virtual time, "
                    + "past its client's timeout of \(timeout) s: the SDK must end the call itself with networkError -1001 whatever the backend does "
                    + "(CONTRACT.md section 5, defect 6: the SDK enforces its own deadline); this SDK has no deadline of its own"
            }
        }
        return nil
    }

    /// A `wait_for held` of fault `fault` at step `index` that nothing left can meet, in an order
    /// where the fault was added after a request it would have held had been received: the order
    /// sent the request the wait is for before the fault existed (a fault step moved after the
    /// step that sends it), so it is *infeasible*, not an SDK fault (`nil` when no such request
    /// exists: an SDK that never sent the request still fails). Sets `infeasible`.
    func heldTooLate(fault id: String, at index: Int, what: String) -> String? {
        guard let added = scenario.steps.indices.last(where: { i in
            guard i < index, case .addFault(let f, _) = scenario.steps[i] else { return false }
            return f.isExactly(id)
        }), case .addFault(_, let rule) = scenario.steps[added] else { return nil }
        let match = rule["match"] ?? .object([:])
        guard let early = currentHistory().first(where: { e in
            e.kind == .request && e.step < added && e.request.map { Self.faultMatch(match, $0) } ?? false
        })?.request else { return nil }
        infeasible = true
        return "\(what) can never be met in this order of the steps: request \(early.summary) "
            + "matching fault '\(id.unambiguous)' was received before the fault was added (step \(added)), so it was never held "
            + "(explore counts such an order infeasible; in a file, add the fault before the step that sends the request)"
    }

    /// Whether `record` matches a fault rule's `match` (the mock's `FaultMatch`: method, raw path
    /// and raw path prefix up to RFC 3986 normalization, decoded query values, top-level body members; strings compared by Unicode
    /// scalars); `false` for a pattern it cannot read.
    static func faultMatch(_ match: JSONValue, _ record: RequestRecord) -> Bool {
        guard case .object(let m) = match else { return false }
        let rawPath = String(record.target.prefix { $0 != "?" })
        for (name, value) in m {
            switch (name, value) {
            case ("method", .string(let v)): if !v.uppercased().isExactly(record.method.uppercased()) { return false }
            // As the mock compares them (`FaultMatch.samePath`: one URI up to RFC 3986 normalization).
            case ("path", .string(let v)): if !FaultMatch.samePath(v, rawPath) { return false }
            case ("path_prefix", .string(let v)): if !FaultMatch.startsWith(rawPath, v) { return false }
            case ("query", .object(let q)):
                for (k, want) in q {
                    guard case .string(let w) = want, record.query[k].map({ $0.isExactly(w) }) ?? false else { return false }
                }
            case ("body", .object(let b)):
                for (k, want) in b where record.body?[k] != want { return false }
            default: return false
            }
        }
        return true
    }

    /// The label of an operation step without `as`: `op1`, `op2`, ... in step order, skipping
    /// any label a step of the file gives itself (compared by scalars). Before, a step labelled
    /// `op1` after an unlabelled one shared its label: a correct SDK failed `fan_out` or hung
    /// (a fifty-seventh outside tester, C).
    private func nextLabel() -> String {
        repeat { autoLabel += 1 } while explicitLabels.contains(ExactKey("op\(autoLabel)"))
        return "op\(autoLabel)"
    }

    /// The labels the file's operation and app steps give themselves (`as`). Read, like
    /// `autoLabel`, only by the step loop (one task at a time).
    private lazy var explicitLabels: Set<ExactKey> = Set(scenario.steps.compactMap { step -> ExactKey? in
        switch step {
        case .sdk(_, _, let label?, _, _, _), .app(_, let label?, _, _, _, _): return ExactKey(label)
        default: return nil
        }
    })

    /// Waits until every started operation finished or parked; a timeout is a hang.
    @discardableResult
    func quiesce(step: String) async -> String? {
        let ok = await recorder.wait(milliseconds: scenario.stepTimeoutMilliseconds) { [self] in quiescent() }
        return ok ? nil : diagnoseHang() ?? "not quiescent \(hangNote("after")): \(describePending())"
    }

    /// Registers the labels a step started: its group (`base`: every copy) and, for `times`,
    /// each copy `base#k` as a group of its own, which `await` and `cancel` may name. Call under `lock`.
    func registerGroup(_ base: String, _ labels: [String]) {
        groups[ExactKey(base)] = labels
        if labels.count > 1 { for l in labels { groups[ExactKey(l)] = [l] } }
    }

    /// Waits for every operation of `group`, then checks `expect` against each outcome.
    func finish(group: String, expect: OutcomeExpectation?, step: String, index: Int? = nil) async -> String? {
        guard let labels = lock.withLock({ groups[ExactKey(group)] }) else {
            infeasible = true
            return "operation '\(group)' was never started"
        }
        // An `await` of an operation parked in the mock while nothing else can happen (quiescent)
        // would only end at the step limit: it is stuck, decided now (see `stuck(at:waitingFor:)`).
        let finished: @Sendable () -> Bool = { [self] in lock.withLock { labels.allSatisfy { ops[ExactKey($0)]?.outcome != nil } } }
        let ended = await recorder.wait(milliseconds: scenario.stepTimeoutMilliseconds) { [self] in
            finished() || (index != nil && quiescent() && inert(labels))
        }
        let done = ended && finished()
        if ended && !done, let index {
            return self.stuck(at: index, waitingFor: labels, what: "operation '\(group)'") + "; pending: \(describePending())"
        }
        guard done else {
            // Out of process an operation with an answered request of its own beside a parked one
            // is judged only now (`inert(_:afterLimit:)`): the answer is no longer on its way.
            if let index, listeners != nil, quiescent(), inert(labels, afterLimit: true) {
                return self.stuck(at: index, waitingFor: labels, what: "operation '\(group)'") + "; pending: \(describePending())"
            }
            return diagnoseHang() ?? "operation '\(group)' did not finish \(hangNote()); pending: \(describePending())"
        }
        // The async step's own expectation first (it was stated first), then the await's.
        if let started = lock.withLock({ deferred.removeValue(forKey: ExactKey(group)) }) {
            evaluate(labels, started.expect, name: "\(started.step) expect")
        }
        if let expect { evaluate(labels, expect, name: "\(step) expect") }
        return await quiesce(step: step)
    }

    /// Checks `expect` against the outcome of each finished operation of `labels`.
    func evaluate(_ labels: [String], _ expect: OutcomeExpectation, name: String) {
        let outcomes = lock.withLock { labels.map { ($0, ops[ExactKey($0)]!.outcome!) } }
        let problems = outcomes.compactMap { label, outcome in Self.mismatch(outcome, expect).map { "\(label): \($0)" } }
        if problems.isEmpty { pass(name) }
        else {
            let lines = currentHistory().filter { labels.contains($0.label ?? "") || $0.kind == .request || $0.kind == .response }.suffix(12).map(\.line)
            fail(name, problems.prefix(3).joined(separator: "; "), history: Array(lines))
        }
    }

    /// Registers and records the invocation of an operation; the returned closure launches it.
    func start(label: String, client: String, name: String, user: String?, key: (kind: String, key: String)? = nil,
               detail: JSONValue, body: @escaping @Sendable () async -> OperationOutcome) -> () -> Void {
        lock.withLock {
            ops[ExactKey(label)] = Op(label: label, client: client, name: name, user: user, key: key, barrier: max(barriers[ExactKey(client)] ?? 0, apps[ExactKey(client)]?.clearedAt ?? 0),
                            wakeups: clock.wakeups, unseenWakeups: clock.unseenWakeups, started: clock.now(), advances: advances,
                            since: port.requestCount, startEvent: recorder.eventCount, ordinal: recorder.ordinal())
            order.append(label)
        }
        recorder.record(.invoke, client: client, label: label, name: name, detail: detail)
        return { [self] in
            let run: @Sendable () async -> Void = { [self] in
                lock.withLock { ops[ExactKey(label)]?.entered = true }
                recorder.poke()
                let outcome = await body()
                // The completion is in the history before anyone can see the operation finished,
                // so the next step's events always come after it.
                recorder.record(.complete, client: client, label: label, name: name, outcome: outcome.json)
                let end = recorder.eventCount
                lock.withLock { ops[ExactKey(label)]?.outcome = outcome; ops[ExactKey(label)]?.endEvent = end }
                recorder.poke()
            }
            let task: Task<Void, Never>
            if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let executor = executor as? ControlledExecutor {
                task = executor.launch(label) { Task(executorPreference: executor, operation: run) }
            } else if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let executor = executor as? OperationExecutor {
                task = Task(executorPreference: executor, operation: run)
            } else {
                task = Task(operation: run)
            }
            lock.withLock { ops[ExactKey(label)]?.task = task }
        }
    }

    func pending() -> [Op] {
        lock.withLock { order.compactMap { ops[ExactKey($0)] }.filter { $0.outcome == nil } }
    }

    /// Nothing can happen without the runner: the mock holds no request it is still answering,
    /// and every operation finished, or it is running and
    /// every request the SDK sessions have in flight sits parked in the mock (a hold, a delay, a
    /// timeout), with a parked request of its client (for its user, when known) among them; an
    /// app action is held to the SDK calls its app is inside (`appsSettled`).
    func quiescent() -> Bool {
        // The mock first: a released request is answered even when no operation waits for it.
        guard port.unsettledRequests == 0 else { return false }
        // Out of process, nothing an adapter wrote may still wait unread at the listeners: its
        // `settle` can come before the mock has read the request its SDK just sent.
        if let listeners, !listeners.transportIdle { return false }
        let waiting = pending()
        // Interleaved runs: the SDK's own tasks are on the executor too, and run before the runner acts.
        if waiting.isEmpty { return interleavingIdle() }
        guard waiting.allSatisfy(\.entered), executor.isIdle else { return false }
        let parked = port.parkedRequests().filter { !$0.answered && !$0.cancelled }
        if listeners == nil, let outstanding = port.outstandingTasks, outstanding != parked.count { return false }
        if !adapterSettled(parked) { return false }
        func mine(_ r: RequestRecord, _ op: Op) -> Bool {
            Self.owns(r, client: op.client, user: op.user, key: op.key, after: op.barrier) && joinable(r, by: op)
        }
        // Tracking operations never share a request: each needs a parked tracking request of its
        // own (a matching, not just any parked request of its client, which another operation's
        // held batch would satisfy while this one has not sent yet). Lookups may share one
        // (single flight). App actions wait on the SDK calls their app is inside (`appsSettled`).
        let tracking: Set<String> = ["track", "trackWithStatus", "trackBatch"]
        let trackers = waiting.filter { tracking.contains($0.name) }
        let others = waiting.filter { !tracking.contains($0.name) && !$0.name.hasPrefix("app.") }
        // Once a later step began, a lookup's own requests are those `ownRequests` allows: the
        // ones received before that step, later ones only after one of those was answered (a
        // retry), and never one received after a clear begun after it started: that one is a
        // later call's. Before, a parked request of a later call for the same user and key,
        // sent after a clear, counted as the pending lookup's while that lookup's own answer
        // travelled to an out-of-process SDK, and the next step ran too early (a fifteenth
        // outside tester: 19 of 20 runs of a correct SDK failed through experimently-driver).
        var known: (requests: [RequestRecord], answeredAt: [Int: Int])?
        func owned(_ op: Op) -> Bool {
            guard let end = ownWindowEnd(after: op.ordinal) else { return parked.contains { mine($0, op) } }
            // Nor one received after a `clearOfflineCache` begun after it started (an SDK may let
            // a later call send its own then; a seventeenth outside tester's Python SDK did).
            let offlineCleared = lock.withLock { offlineClearSteps[ExactKey(op.client)] ?? [] }
                .filter { $0.ordinal > op.ordinal }.map(\.seen).min() ?? Int.max
            // A parked request received within its own window is its own whatever else came (the
            // common case, decided without reading every request and answer).
            if parked.contains(where: { $0.seq <= min(end, offlineCleared) && mine($0, op) }) { return true }
            if known == nil { known = (port.requests(), answerEvents()) }
            let own = ownRequests(known!.requests, client: op.client, since: op.since, ordinal: op.ordinal, startEvent: op.startEvent,
                                  answeredAt: known!.answeredAt) { mine($0, op) && $0.seq <= offlineCleared }
            return own.contains { r in parked.contains { $0.seq == r.seq } }
        }
        guard others.allSatisfy(owned) else { return false }
        let trackingRequests = parked.filter { ["/api/v1/tracking/track", "/api/v1/tracking/batch"].contains($0.path) }
        guard let appTrackers = appsSettled(waiting, parked: parked, trackingRequests: trackingRequests) else { return false }
        guard Self.everyOneHasItsOwn(trackers.map { op in trackingRequests.indices.filter { mine(trackingRequests[$0], op) } } + appTrackers) else { return false }
        // Out of process, last: the adapter says every operation reached its wait (`settle`).
        return adapterConfirmed(parked)
    }

    /// Whether request `r`, one `op`'s client, user and key would share, can be `op`'s: sent
    /// after `op` began, or (a lookup joining an earlier request, single flight) no `cancel` step
    /// ran between its arrival and `op`'s start, or another operation still waiting and not
    /// cancelled owns it. A request whose only caller was cancelled before `op` began is on its
    /// way out (the SDK cancels it; the mock sees that later, over TCP much later): a correct SDK
    /// sends `op` a request of its own, which must arrive before `op` counts as settled (a third
    /// outside tester: out of process the next call was judged infeasible before its own request
    /// arrived, 8-12 of 30 runs). Nor is a request whose every caller had finished before `op`
    /// began (its own deadline, say): nobody waited on it then, so the SDK had let it go (a
    /// fourth outside tester: out of process a call after the deadline of the only earlier one
    /// was judged infeasible before its own request arrived, 6 of 40 runs).
    func joinable(_ r: RequestRecord, by op: Op) -> Bool {
        guard op.key != nil, r.seq <= op.since else { return true }
        let ownedNow = pending().contains { w in
            !w.label.isExactly(op.label) && !w.cancelRequested && !w.name.hasPrefix("app.") && w.user != nil && w.key != nil
                && Self.owns(r, client: w.client, user: w.user, key: w.key, after: w.barrier)
        }
        if ownedNow || appCallWaits(on: r) { return true }
        return !cancelled(after: r.seq, before: op.startEvent) && callerWaited(on: r, atEvent: op.startEvent, except: op.label)
    }

    /// The mock's request count at the first clear of `client`'s cache begun after the recorder's
    /// `ordinal` (a `clearCache`/`close` step or a clear of the client's app), or `nil`.
    func firstClear(of client: String, after ordinal: Int) -> Int? {
        clears(of: client).filter { $0.ordinal > ordinal }.map(\.seen).min()
    }

    /// Whether a lookup other than runner operation `label` that `r` can serve (its client, user
    /// and key) had begun and not yet finished at history event `event`: a runner operation, or
    /// an SDK call of the client's reference app.
    func callerWaited(on r: RequestRecord, atEvent event: Int, except label: String?) -> Bool {
        let runner = lock.withLock {
            ops.values.contains { w in
                !(label.map { w.label.isExactly($0) } ?? false) && !w.name.hasPrefix("app.") && w.user != nil && w.key != nil
                    && w.startEvent < event && (w.endEvent ?? Int.max) > event
                    && Self.owns(r, client: w.client, user: w.user, key: w.key, after: w.barrier)
            }
        }
        if runner { return true }
        guard let client = r.client, let app = withAppsLocked({ $0[ExactKey(client)] }) else { return false }
        return app.calls(inFlightAt: event).contains { call in
            guard let key = Self.cachedKey(of: call.operation) else { return false }
            return Self.owns(r, client: client, user: Self.user(of: call.operation), key: key, after: clearBarrier(of: client, atOrdinal: call.ordinal))
        }
    }

    /// Whether each item can be given a distinct one of its `candidates` (indices): a bipartite
    /// matching by augmenting paths (Kuhn's algorithm), small enough here to run at every check.
    static func everyOneHasItsOwn(_ candidates: [[Int]]) -> Bool {
        var owner: [Int: Int] = [:]   // candidate -> item
        func assign(_ item: Int, _ seen: inout Set<Int>) -> Bool {
            for c in candidates[item] where !seen.contains(c) {
                seen.insert(c)
                if owner[c] == nil || assign(owner[c]!, &seen) { owner[c] = item; return true }
            }
            return false
        }
        for item in candidates.indices {
            var seen = Set<Int>()
            if !assign(item, &seen) { return false }
        }
        return true
    }

    func describePending() -> String {
        let waiting = pending()
        let parked = port.requests().filter { $0.parked && !$0.answered }
        var text = waiting.isEmpty ? "no operation pending" : waiting.map { "\($0.label) (\($0.name) on \($0.client))" }.joined(separator: ", ")
        // Each request in 300 characters (a 1,000-event batch's body made a 5 KB reason).
        text += parked.isEmpty ? "; no request parked" : "; parked requests: " + parked.map { r in
            let line = r.summary
            return line.count > 300 ? String(line.prefix(300)) + "… (\(line.count - 300) more characters)" : line
        }.joined(separator: "; ")
        if !waiting.isEmpty { text += settleNote() }
        return text
    }

    func cancelAll() {
        let tasks = lock.withLock { ops.values.compactMap { $0.outcome == nil ? $0.task : nil } }
        tasks.forEach { $0.cancel() }
    }

    /// A wait for cancelled requests (in process, quiescent, unmet) whose candidate request was
    /// answered although a `cancel` step had left it without a caller before: whether the SDK's
    /// cancellation or the step that answered it (a `release`) reached the mock first is thread
    /// timing, so the order is *infeasible* (sets `infeasible`); `nil` otherwise. Without this, an
    /// explored order that moved the release before the wait failed a correct SDK in 1-3 of 120
    /// orders, as a defect-3 failure its written schedule did not reproduce (a third outside tester).
    func cancellationRaced(_ condition: WaitCondition) -> String? {
        guard listeners == nil, condition.awaitsCancellation, let r = candidates(condition).first(where: {
            $0.answered && !$0.cancelled && cancelled(after: $0.seq, before: Int.max)
        }) else { return nil }
        infeasible = true
        return "\(Self.describe(condition)) can never be met in this order of the steps: request \(r.summary) was answered "
            + "after a cancel step had left it without a caller, so whether the SDK's cancellation or the answer reached the mock "
            + "first was thread timing (explore counts such an order infeasible; in a file, release the request after this wait)"
    }

    /// The requests a `requests` wait could count once they end: its match, whatever their
    /// `cancelled` and `status` (none for other conditions).
    func candidates(_ condition: WaitCondition) -> [RequestRecord] {
        guard case .requests(var match, _) = condition else { return [] }
        match.cancelled = nil
        match.status = nil
        return port.requests().filter { $0.matches(match) }
    }

    /// Whether some request `condition` could count exists and every such request has been
    /// answered or cancelled: none can still change. (With none yet, the wait is left to its
    /// limit, as before.)
    /// Whether no request can have been cancelled yet, nor be on its way to it: the SDK's
    /// deadlines follow the scenario's clock (`virtual_clock`) and nothing that cancels a request
    /// has happened (a `cancel` step, a clock move, a logout or undo of an app, a `close()` or a
    /// clear). A request parked now then stays uncancelled until a later step acts.
    func nothingCancelsYet() -> Bool {
        guard driver.capabilities.contains("virtual_clock") else { return false }
        return !recorder.snapshot.contains { e in
            (e.kind == .marker && ["cancel", "advance", "logout", "undo"].contains(e.name ?? ""))
                || (e.kind == .invoke && ["close", "clearCache", "clearOfflineCache"].contains(e.name ?? ""))
        }
    }

    func noneOpen(_ condition: WaitCondition) -> Bool {
        let candidates = candidates(condition)
        return !candidates.isEmpty && candidates.allSatisfy { $0.answered || $0.cancelled }
    }

    func satisfied(_ condition: WaitCondition) -> Bool {
        switch condition {
        case .held(let fault, let count): return port.heldCount(fault: fault) >= count
        case .requests(let match, let count): return port.requests().filter { $0.matches(match) }.count >= count
        case .quiescence: return quiescent()
        }
    }

    static func describe(_ condition: WaitCondition) -> String {
        switch condition {
        case .held(let fault, let count): return "\(count) request(s) held by fault '\(fault)'"
        case .requests(let match, let count): return "\(count) request(s) matching \(describe(match))"
        case .quiescence: return "quiescence"
        }
    }

    /// A request that missed `match`, as a near miss is shown: its summary, and when `match`
    /// names headers, each of those the request sent otherwise, with the value it sent (`absent`
    /// when it sent none; an API key's value is not shown). Before, a `Content-Type` with
    /// `; charset=utf-8` showed no difference at all (a sixty-ninth outside tester, F2).
    static func nearMiss(_ r: RequestRecord, _ match: RequestMatch) -> String {
        // The API key a request sent, by its place in the fixtures (never its value).
        let key = match.apiKey.map { _ in " (sent \(r.apiKeyText))" } ?? ""
        guard let wanted = match.headers else { return r.summary + key }
        let differing = wanted.sorted { $0.key < $1.key }.compactMap { name, value -> String? in
            let sent = r.headers.first { $0.key.lowercased() == name.lowercased() }
            if let sent, sent.value.isExactly(value) { return nil }
            guard let sent else { return "\(name) absent" }
            // An API key by its place in the fixtures (never its value); a record without that
            // place (built in code) says "another key".
            return name.lowercased() == "x-api-key" ? "\(sent.key): \(r.apiKeyIndex == nil ? "another key" : r.apiKeyText)" : "\(sent.key): \(JSONValue.string(sent.value).jsonText)"
        }
        return r.summary + (differing.isEmpty ? "" : " (sent " + differing.joined(separator: ", ") + ")") + key
    }

    func nearest(_ condition: WaitCondition) -> String {
        let requests = port.requests()
        switch condition {
        case .held(let fault, _):
            if let why = port.neverMatched(fault: fault) { return Self.neverMatchedText(fault: fault, why: why, requests: requests) }
            return "fault '\(fault)' held \(port.heldCount(fault: fault)); requests seen: "
                + (requests.isEmpty ? "none" : requests.suffix(6).map(\.summary).joined(separator: "; ")) + "; " + describePending()
        case .requests(let match, _):
            let near = requests.filter { ($0.path == match.path || match.path == nil) }.suffix(4).map(\.summary)
            return "requests with that path: " + (near.isEmpty ? "none" : near.joined(separator: "; "))
        case .quiescence: return describePending()
        }
    }

    // MARK: Expectations

    /// How far a `hashUser` value may be from the expected one (CONTRACT.md section 6).
    static let hashTolerance = 1e-10

    static func mismatch(_ outcome: OperationOutcome, _ expect: OutcomeExpectation) -> String? {
        switch (expect, outcome) {
        case (.anyOf(let alternatives), _):
            return anyOfMismatch(outcome, alternatives)
        case (.value(.number(let wanted)), .value(.number(let got))):
            // A number is `hashUser`'s value (no other operation returns one): compared within
            // 1e-10, as CONTRACT.md section 6 says (an adapter may print 16 significant digits,
            // as the published values carry; a twenty-third outside tester).
            return abs(wanted - got) <= Self.hashTolerance ? nil : "expected a value containing \(JSONValue.number(wanted)), got \(JSONValue.number(got)) (compared within \(Self.hashTolerance))"
        case (.value(let wanted), .value(let got)):
            return got.contains(wanted) ? nil : "expected a value containing \(wanted), got \(got)"
        case (.value(let wanted), .error(let kind, _, _, let message)):
            return "expected a value containing \(wanted), got error \(kind): \(message)"
        case (.error(let kind, let status, let code), .error(let gotKind, let gotStatus, let gotCode, let message)):
            if kind != gotKind { return "expected error \(kind), got error \(gotKind): \(message)" }
            if let status, status != gotStatus { return "expected status \(status), got \(gotStatus.map(String.init) ?? "none")" }
            if let code, code != gotCode { return "expected code \(code), got \(gotCode.map(String.init) ?? "none")" }
            return nil
        case (.error(let kind, _, _), .value(let got)):
            return "expected error \(kind), got value \(got)"
        }
    }

    func check(_ expectation: Expectation) async -> String? {
        switch expectation {
        case .cache(let client, let user, let assignments, let flags):
            guard let c = clients[client] else { return "no client \(client)" }
            var problems: [String] = []
            // A query with no answer (the adapter's error, or none within the query deadline) is
            // no empty cache: said so (a sixty-eighth outside tester: an SDK keeping its cache
            // past close() whose queries hung passed `cache: []`).
            let unanswered = { (what: String) in "\(what) of \(user.unambiguous) on \(client): the SDK gave no list (an error, or no answer within \(Self.queryDeadlineMilliseconds) ms)" }
            if let assignments {
                guard let got = await Self.query(c, .getAssignments(user: user)) else { return unanswered("cached assignments") }
                let keys: [String] = { if case .array(let items) = got { return items.compactMap { if case .string(let k)? = $0["experiment_key"] { return k } else { return nil } } }; return [] }()
                if !keys.elementsEqual(assignments, by: { $0.isExactly($1) }) {
                    problems.append("cached assignments of \(user.unambiguous) on \(client): expected \(assignments.map(\.unambiguous)), got \(keys.map(\.unambiguous))")
                }
            }
            if let flags {
                guard let got = await Self.query(c, .getEvaluatedFlags(user: user)) else { return unanswered("cached flags") }
                let keys: [String] = { if case .array(let items) = got { return items.compactMap { if case .string(let s) = $0 { return s } else { return nil } } }; return [] }()
                if !keys.elementsEqual(flags, by: { $0.isExactly($1) }) {
                    problems.append("cached flags of \(user.unambiguous) on \(client): expected \(flags.map(\.unambiguous)), got \(keys.map(\.unambiguous))")
                }
            }
            return problems.isEmpty ? nil : problems.joined(separator: "; ")
        case .persisted(let client, let kind, let user, let key, let present, let value):
            guard let c = clients[client] else { return "no client \(client)" }
            let stored = await c.persisted(kind: kind, user: user, key: key)
            if present && stored == nil { return "expected a persisted \(kind) '\(key)' for user '\(user.unambiguous)' in \(client)'s store, found none" }
            if !present, let stored { return "expected no persisted \(kind) '\(key)' for user '\(user.unambiguous)' in \(client)'s store, found \(stored)" }
            if let value, let stored, !stored.contains(value) { return "persisted \(kind) '\(key)' for '\(user)': expected \(value), found \(stored)" }
            return nil
        case .requests(let match, let count, let sizes):
            let matching = port.requests().filter { $0.matches(match) }
            if let count, matching.count != count {
                var text = "expected \(count) request(s) matching \(Self.describe(match)), saw \(matching.count)"
                if !matching.isEmpty { text += ": " + matching.prefix(8).map(\.summary).joined(separator: "; ") }
                // None matched: the near misses, requests to the same path (or of the same
                // method), so what differed can be read (a sixth outside tester: "saw 0: ").
                if matching.isEmpty {
                    var near = RequestMatch()
                    near.path = match.path
                    near.pathPrefix = match.pathPrefix
                    near.method = match.path == nil && match.pathPrefix == nil ? match.method : nil
                    let misses = port.requests().filter { $0.matches(near) }
                    text += misses.isEmpty ? "; no request to that path either" : "; near misses (same path): " + misses.prefix(3).map { Self.nearMiss($0, match) }.joined(separator: "; ")
                        + (misses.count > 3 ? " (+\(misses.count - 3) more)" : "")
                }
                return text
            }
            if let sizes {
                let got = matching.map(\.events.count)
                if got != sizes { return "expected batch sizes \(sizes), got \(got)" }
            }
            return nil
        case .app(let shown, let identity, let source, let client):
            guard let app = appInstance(on: client) else { return "no app" }
            let prefix = appPrefix(client)
            var problems: [String] = []
            if let shown, !(app.shown ?? "fallback").isExactly(shown) { problems.append("\(prefix)app shows \((app.shown ?? "fallback").unambiguous), expected \(shown.unambiguous)") }
            if let identity, !app.identity.isExactly(identity) { problems.append("\(prefix)app identity is \(app.identity.unambiguous), expected \(identity.unambiguous)") }
            if let source, app.source != source { problems.append("\(prefix)layout_source is \(app.source), expected \(source)") }
            return problems.isEmpty ? nil : problems.joined(separator: "; ")
        case .reported(let experiment, let variant, let client):
            guard let app = appInstance(on: client) else { return "no app" }
            let prefix = appPrefix(client)
            if let experiment, !experiment.isExactly(app.settings.experiment) {
                return "\(prefix)the app reports experiment \(app.settings.experiment.unambiguous), expected \(experiment.unambiguous)"
            }
            guard app.reported.isExactly(variant) else {
                return "\(prefix)the app reports \(app.reported.map { "variant \($0.unambiguous) active" } ?? "no active variant"), expected \(variant.map { "variant \($0.unambiguous)" } ?? "none")"
            }
            return nil
        case .cached(let client, let kind, let user, let key, let present, let value):
            guard let c = clients[client] else { return "no client \(client)" }
            return await Self.cachedMismatch(c, client: client, kind: kind, user: user, key: key, present: present, value: value)
        case .exposures(let user, let experiment, let variantID, let count):
            return Self.exposuresMismatch(port, user: user, experiment: experiment, variantID: variantID, count: count)
        }
    }

    static func describe(_ m: RequestMatch) -> String {
        var parts: [String] = []
        if let v = m.method { parts.append(v) }
        if let v = m.path { parts.append(v) }
        if let v = m.pathPrefix { parts.append(v + "*") }
        if let v = m.client { parts.append("client=\(v)") }
        if let v = m.user { parts.append("user=\(v)") }
        if let v = m.status { parts.append("status=\(v)") }
        if let v = m.body { parts.append("body⊇\(v)") }
        if let v = m.bodyEquals { parts.append("body=\(v)") }
        if let v = m.target { parts.append("target=\(v)") }
        if let v = m.headers { parts.append("headers⊇\(v.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" })") }
        if let v = m.responseHeaders { parts.append("response_headers⊇\(v.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" })") }
        if let v = m.cancelled { parts.append("cancelled=\(v)") }
        switch m.apiKey {
        case .fixture(let i)?: parts.append("api_key=api_keys[\(i)]")
        case .noneOfTheFixtures?: parts.append("api_key=none of the fixtures")
        case nil: break
        }
        return parts.isEmpty ? "(any request)" : parts.joined(separator: " ")
    }

    /// Runs a cache query on a client and returns its value (`nil` on error).
    ///
    /// Waits at most `queryDeadlineMilliseconds` of real time: an adapter that hangs answers no
    /// query, and a check or assertion that waited for it waited forever (a sixty-sixth outside
    /// tester: one hung adapter held a whole run past 10 minutes at the checks of one scenario).
    /// Then `nil`, which the callers report as no answer; the query itself is left to end with
    /// the adapter.
    static func query(_ client: any DriverClient, _ op: SDKOperation) async -> JSONValue? {
        // The waiting caller and the timer, guarded by the lock; whichever of the answer and the
        // timer comes first resumes the caller (and stops the timer).
        let pending = HarnessLocked<(caller: CheckedContinuation<JSONValue?, Never>?, timer: Task<Void, Never>?)>((nil, nil))
        @Sendable func finish(_ value: JSONValue?) {
            let (caller, timer) = pending.withLock { p in let taken = p; p = (nil, nil); return taken }
            timer?.cancel()
            caller?.resume(returning: value)
        }
        return await withCheckedContinuation { (continuation: CheckedContinuation<JSONValue?, Never>) in
            let timer = Task {
                try? await Task.sleep(nanoseconds: UInt64(queryDeadlineMilliseconds) * 1_000_000)
                finish(nil)
            }
            pending.withLock { $0 = (continuation, timer) }
            Task {
                if case .value(let v) = await client.perform(op) { finish(v) } else { finish(nil) }
            }
        }
    }

    /// How long a query of the SDK's state (`getAssignments`, `getEvaluatedFlags`, a hash) may
    /// take, milliseconds of real time.
    static let queryDeadlineMilliseconds = 5000

    // MARK: History

    func enrichHistory() {
        let full = currentHistory()
        recorder.replace { $0 = full }
    }

    /// The history in canonical form: mock sequence numbers and step numbers cleared, the answers
    /// a release or advance freed moved to its marker (see `freedAnswersFirst`), each
    /// operation's completion moved to the end of its segment (see `floatingCompletions`), and
    /// each run of consecutive events of one kind at one virtual time (concurrent completions,
    /// concurrent arrivals) sorted by content, so that equal runs give equal histories.
    ///
    /// A request's `cancelled` is cleared in both modes: the mock marks a request cancelled when
    /// it sees its client give up, and that cancellation reaches it on a thread of its own (over
    /// TCP through the adapter's HTTP stack and the kernel; in process through URLSession's
    /// delegate queue), so whether it lands before or after a later `release` answers the request
    /// is thread timing that no step can wait for (the runner cannot know whether an SDK will
    /// cancel at all). Checks and `wait_for` still see the flag as recorded.
    ///
    /// `overTCP` (an out-of-process SDK): the end of a request that got no answer (its `response`
    /// event with no status: the client gave up on a timeout or hold, or cancelled) is moved to the
    /// end of the history, in content order: the mock records it when the adapter's connection closes, which
    /// can fall after the next step's `invoke` (a second outside tester: 3-5 digests in 15-20 runs
    /// of `field-timeout-after-backend-processed-assign` through experimently-driver).
    /// The request headers CONTRACT.md section 1 gives every request, lower-cased: the only ones
    /// the canonical history keeps.
    static let contractHeaders: Set<String> = ["x-api-key", "accept", "content-type"]

    static func canonical(_ history: [HistoryEvent], overTCP: Bool = false) -> [HistoryEvent] {
        var out: [HistoryEvent] = []
        var run: [(String, HistoryEvent)] = []
        var unanswered: [(String, HistoryEvent)] = []
        // Keys compare by Unicode scalars: `String <` sees canonically equivalent text (an NFC and
        // an NFD label) as a tie, which kept the thread order of recording (a fifteenth outside
        // tester: 2 digests in 30 runs of two equivalent labels answered together).
        func precedes(_ a: (String, HistoryEvent), _ b: (String, HistoryEvent)) -> Bool {
            a.0.unicodeScalars.lexicographicallyPrecedes(b.0.unicodeScalars) { $0.value < $1.value }
        }
        func flush() {
            out += run.sorted(by: precedes).map(\.1)
            run.removeAll()
        }
        for event in floatingCompletions(freedAnswersFirst(history)) {
            var copy = event
            copy.request?.seq = 0
            // Which step was running when a request arrived is a matter of thread timing (the step
            // that started its operation, or the next one); the order of events is not.
            copy.step = 0
            // A request that ended without an answer ended so by whichever came first of two
            // timers due at one virtual instant (the SDK's own deadline cancelling it, the mock's
            // timeout fault failing it) or of a cancellation on its way through URLSession: the
            // canonical form says only that it got no answer. (Checks still see which it was.)
            if copy.request != nil, copy.request?.status == nil { copy.request?.parked = false }
            // An answered request seen cancelled too: the cancellation (the client gave up at its
            // deadline, or on a `cancel` step) reaches the mock on a thread of its own (over TCP
            // through the kernel; in process through URLSession's delegate queue), so whether it
            // lands before the answer is thread timing (fifth outside tester: 2 digests in 12 runs
            // in process). The canonical form leaves it out in both modes.
            if copy.request != nil { copy.request?.cancelled = false }
            // What the contract leaves to the SDK is left out too (a seventeenth outside tester: a
            // per-request `X-Request-Id` changed the digest of 109 of 118 files on every run, an
            // error message naming the mock's port that of 8): an error's free-text `message`
            // (never compared, DriverProtocol.md) and the request headers CONTRACT.md section 1
            // does not name (it names X-API-Key, Accept and Content-Type).
            if case .object(var o)? = copy.outcome, o["error"] != nil, o["message"] != nil {
                o["message"] = nil
                copy.outcome = .object(o)
            }
            if let headers = copy.request?.headers {
                copy.request?.headers = headers.filter { Self.contractHeaders.contains($0.key.lowercased()) }
            }
            copy.index = 0
            // Over TCP the end of an unanswered request is seen when its connection closes: the
            // virtual instant and step it lands in are thread timing too (an advance that stops at
            // the SDK's deadline and then at its end saw it at either), so they are left out.
            if overTCP, copy.kind == .response, copy.request?.status == nil { copy.time = 0; copy.step = -1 }
            // The answer's headers too: answers of equal content differ in them (each has its own
            // `X-RateLimit-Remaining`, given in the mock's canonical order), and without them a
            // tie kept the thread order of recording (a sixth outside tester: 3 digests in 14
            // runs of 15 identical held tracks released together).
            let headers = (copy.request?.responseHeaders ?? [:]).map { "\($0.key)=\($0.value)" }
                .sorted { $0.unicodeScalars.lexicographicallyPrecedes($1.unicodeScalars) { $0.value < $1.value } }.joined(separator: ",")
            let key = copy.line + "|" + (copy.label ?? "") + "|" + (copy.request?.response?.jsonText ?? "") + "|" + headers
            if overTCP, copy.kind == .response, copy.request?.status == nil {
                unanswered.append((key, copy))
                continue
            }
            if let last = run.last?.1, last.kind != copy.kind || last.time != copy.time { flush() }
            run.append((key, copy))
        }
        flush()
        out += unanswered.sorted(by: precedes).map(\.1)
        for i in out.indices { out[i].index = i }
        return out
    }

    /// The history with every `complete` event moved, in order, to the end of its segment: the
    /// events up to the runner's next own event (an `invoke`, or a runner marker such as
    /// `release`, `advance`, `cancel`, which carry no client).
    ///
    /// An operation's completion is recorded by the operation's task when its body returns; where
    /// that falls among other concurrent work (another operation's request, an app marker) is a
    /// matter of thread timing (issue 10 section 4: a login's completion against the next user's
    /// flag fetch). Which segment it falls in is not: the runner records its own events in step
    /// order and waits for quiescence between steps, and `await` sees an operation finished only
    /// after its completion is recorded.
    static func floatingCompletions(_ history: [HistoryEvent]) -> [HistoryEvent] {
        var out: [HistoryEvent] = []
        out.reserveCapacity(history.count)
        var completions: [HistoryEvent] = []
        for event in history {
            if event.kind == .invoke || (event.kind == .marker && event.client == nil) {
                out += completions
                completions.removeAll()
            }
            if event.kind == .complete { completions.append(event) } else { out.append(event) }
        }
        return out + completions
    }

    static func digest(_ history: [HistoryEvent]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(history)) ?? Data()
        return FeatureFlagEvaluator.md5Hex(of: Array(data))
    }

    func cleanUpStores() {
        // A suite goes back to the pool only when nothing of the SDK can still write to it (an
        // operation left running by a timed-out step would write into the next scenario's store).
        let idle = pending().isEmpty && (port.outstandingTasks ?? 0) == 0
        suites.values.forEach(idle ? StoreSuitePool.release : StoreSuitePool.retire)
    }

    // MARK: Arguments

    /// A fixture change as the history records it: the same text every run (a dictionary's
    /// `description` follows its hash order, which changes from process to process).
    static func describe(_ change: FixtureChange) -> String {
        guard case .experimentAllocations(let key, let allocations) = change else { return "\(change)" }
        let sorted = allocations.sorted { $0.key.unicodeScalars.lexicographicallyPrecedes($1.key.unicodeScalars) }
        return "experimentAllocations(key: \(key.debugDescription), allocations: ["
            + sorted.map { "\($0.key.debugDescription): \($0.value)" }.joined(separator: ", ") + "])"
    }

    static func user(of op: SDKOperation) -> String? {
        switch op {
        case .evaluateFlag(_, let u), .getAssignment(_, let u): return u.id
        case .track(let e), .trackWithStatus(let e): return e.userId
        default: return nil
        }
    }

    static func appName(_ action: AppAction) -> String {
        switch action {
        case .login: return "login"
        case .logout: return "logout"
        case .refresh: return "refresh"
        case .display: return "display"
        case .event: return "event"
        case .reportState: return "report_state"
        }
    }

    static func appArguments(_ action: AppAction) -> JSONValue {
        switch action {
        case .login(let user): return .object(["user": .string(user)])
        case .event(let name): return .object(["name": .string(name)])
        default: return .null
        }
    }

    static func arguments(_ op: SDKOperation) -> JSONValue {
        func user(_ u: UserSpec) -> JSONValue {
            u.attributes.map { .object(["id": .string(u.id), "attributes": $0]) } ?? .string(u.id)
        }
        func event(_ e: EventSpec) -> JSONValue {
            var o: [String: JSONValue] = ["user": .string(e.userId), "name": .string(e.eventName)]
            if let v = e.experimentKey { o["experiment"] = .string(v) }
            if let v = e.featureFlagKey { o["flag"] = .string(v) }
            if let v = e.value { o["value"] = .number(v) }
            if let v = e.properties { o["properties"] = v }
            if let v = e.eventType { o["event_type"] = .string(v) }
            if let v = e.timestamp { o["timestamp"] = .number(v) }
            return .object(o)
        }
        switch op {
        case .evaluateFlag(let flag, let u): return .object(["flag": .string(flag), "user": user(u)])
        case .getAssignment(let exp, let u): return .object(["experiment": .string(exp), "user": user(u)])
        case .track(let e), .trackWithStatus(let e): return event(e)
        case .trackBatch(let events): return .array(events.map(event))
        case .getAssignments(let u), .getEvaluatedFlags(let u): return .object(["user": .string(u)])
        case .hashUser(let u, let k): return .object(["user": .string(u), "key": .string(k)])
        case .clearCache, .clearOfflineCache, .close: return .null
        }
    }
}

private final class RecorderBox: @unchecked Sendable {
    // @unchecked Sendable: written once in ScenarioExecution.init before any reader can run.
    var recorder: Recorder?
}

extension RequestRecord {
    static func placeholder(seq: Int) -> RequestRecord {
        RequestRecord(seq: seq, client: nil, method: "", path: "", target: "", query: [:], headers: [:], body: nil, status: nil,
                      response: nil, fault: nil, parked: false, cancelled: false, answered: false)
    }
}
