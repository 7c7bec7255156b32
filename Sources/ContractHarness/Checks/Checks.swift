import Foundation
import ExperimentlyMock

/// What a named check reads: the scenario, its history, and the clients (for end-of-run cache queries).
struct CheckContext: Sendable {
    let scenario: Scenario
    let history: [HistoryEvent]
    let clients: [String: any DriverClient]
    let port: any BackendPort
    let driver: any SDKDriver
    let app: ReferenceApp?
    /// The SDK's requests in history order, without the copies its HTTP stack made on a redirect
    /// (`redirectCopies`); worked out once, as every check reads them.
    private(set) var requests: [(event: HistoryEvent, record: RequestRecord)]
    /// The history index of each operation's first completion, by exact label (for
    /// `followsRedirect`, which the checks ask per request).
    private let completionIndex: [ExactKey: Int]
    /// The history index from which the runner itself cancelled what was still running (the
    /// end of a scenario whose operations never finished); `Int.max`: it cancelled nothing.
    var runnerCancelledFrom = Int.max
    /// Clients (by exact name) whose loopback listener refused a request at the HTTP level (400,
    /// 413, 431: `MockHTTPServer.Statistics.protocolErrors`), out of process: such a request is
    /// in no history.
    var refusedAtTransport: Set<ExactKey> = []

    /// Whether a request of `client` for `user` and `key` may have failed before the mock
    /// recorded it, so that its absence from the history proves nothing: the client's `base_url`
    /// is not the mock (`ClientSettings.reachesMock`), its listener refused a request at the HTTP
    /// level (`refusedAtTransport`), or an HTTP stack may refuse to send it
    /// (RFC 9110 section 5.5: a field value holds no control characters, and stacks differ on
    /// bytes above 0x7E; RFC 9112 section 3: a request line over 8,000 octets may be refused):
    /// an API key with a scalar outside printable ASCII or over 8,000 bytes, or a user id and key
    /// whose percent-encoded request line may pass 8,000 octets. Before, an out-of-process SDK
    /// whose request the listener refused (an API key with NUL: 400) or whose HTTP stack would
    /// not send it (libcurl and a 1 MB key) failed the rules that need a request (a sixty-first
    /// outside tester).
    func mayFailBeforeTheMock(client: String, user: String? = nil, key: String? = nil) -> Bool {
        if refusedAtTransport.contains(ExactKey(client)) { return true }
        let settings = settings(of: client)
        if !settings.reachesMock { return true }
        if settings.apiKey.utf8.count > 8000 || settings.apiKey.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value > 0x7E }) { return true }
        return 3 * ((user?.utf8.count ?? 0) + (key?.utf8.count ?? 0)) > 7900
    }

    /// The settings of the scenario's client named exactly `client`; the defaults for a name the
    /// scenario does not declare (the main client's).
    func settings(of client: String) -> ClientSettings {
        scenario.clients.first { $0.name.isExactly(client) }?.settings ?? ClientSettings()
    }

    /// Whether a call of `client` that ran from history index `from` to `to` may have met its
    /// SDK's own deadline (CONTRACT.md section 5, defect 6: the client's `timeout` seconds), which
    /// ends its request (the mock marks it cancelled) and gives the persisted value or an error:
    /// the scenario's clock moved at least `timeout` between its start and its end (a microsecond
    /// short counts: an SDK's `Date` arithmetic decides at the edge). For an SDK that does not read
    /// the harness's clock (no `virtual_clock`), whose deadlines run on the wall clock: at least
    /// `timeout` seconds of real time passed (`HistoryEvent.wallInstant`; `true` when unknown).
    func mayHaveMetItsDeadline(client: String, from: Int, to: Int) -> Bool {
        guard history.indices.contains(from), history.indices.contains(to) else { return true }
        let timeout = settings(of: client).timeout
        guard driver.capabilities.contains("virtual_clock") else {
            // On the wall clock: as much real time must have passed (recorded with each event;
            // a sixty-eighth outside tester: without `virtual_clock` every call was excused, and
            // the SDKs these rules catch passed on calls of 14 ms against a timeout of 10 s).
            guard let start = history[from].wallInstant, let end = history[to].wallInstant else { return true }
            return end - start >= timeout - 0.001
        }
        return ((history[to].exactTime - history[from].exactTime) * 1e6).rounded() >= (timeout * 1e6).rounded() - 1
    }

    init(scenario: Scenario, history: [HistoryEvent], clients: [String: any DriverClient], port: any BackendPort,
         driver: any SDKDriver, app: ReferenceApp?) {
        self.scenario = scenario
        self.history = history
        self.clients = clients
        self.port = port
        self.driver = driver
        self.app = app
        var completions: [ExactKey: Int] = [:]
        for e in history where e.kind == .complete {
            if let label = e.label, completions[ExactKey(label)] == nil { completions[ExactKey(label)] = e.index }
        }
        completionIndex = completions
        let all: [(event: HistoryEvent, record: RequestRecord)] = history.compactMap { e in e.kind == .request ? e.request.map { (event: e, record: $0) } : nil }
        requests = all
        if all.contains(where: { (300..<400).contains($0.record.status ?? 0) }) {
            let copies = redirectCopies(all)
            requests = all.filter { !copies.contains($0.record.seq) }
        }
    }

    /// The requests an HTTP stack sent twice by following a redirect (3xx and a `Location`;
    /// `followsRedirect`), counted once: when the follower repeats the request (a 307 or 308, or
    /// a GET's 301 to 303), the answered one is the follower and the hop is left out; when it is a
    /// GET without a body made of a POST (301 to 303), the hop is the SDK's request, carrying
    /// its event or lookup, and the follower is left out. Before, an SDK whose stack followed a
    /// 307 on `/track` (as `requests`, URLSession or net/http do) failed `fan_out` for sending its
    /// event twice (a seventy-sixth outside tester), and a 303's bodyless GET failed
    /// `event_payload` (a seventy-eighth, F3).
    func redirectCopies(_ all: [(event: HistoryEvent, record: RequestRecord)]) -> Set<Int> {
        var copies = Set<Int>(), followers = Set<Int>()
        for (e, r) in all where (300..<400).contains(r.status ?? 0) {
            guard let follower = all.first(where: { q in
                q.event.index > e.index && !followers.contains(q.record.seq) && followsRedirect(q.record, at: q.event.index, of: r)
            }) else { continue }
            followers.insert(follower.record.seq)
            copies.insert(follower.record.method == r.method ? r.seq : follower.record.seq)
        }
        return copies
    }

    /// Whether request `q`, received at history index `index`, may be its client's HTTP stack
    /// following the redirect `r` was answered with (3xx and a `Location`): to that target, with
    /// `r`'s method and body (307, 308), or as a `GET` without a body (301 to 303; RFC 9110
    /// sections 15.4.2 to 15.4.9), while a call of the client begun before that answer still ran
    /// (a `track` may send after it returned). Before, a request to a `Location` long after the
    /// redirected call returned was excused too (a seventy-eighth outside tester, F6).
    func followsRedirect(_ q: RequestRecord, at index: Int, of r: RequestRecord) -> Bool {
        guard let status = r.status, (300..<400).contains(status), q.client.isExactly(r.client),
              let location = r.responseHeaders.first(where: { $0.key.lowercased() == "location" })?.value,
              let target = Checks.redirectTarget(location, from: r.target), q.path.isExactly(target.path),
              q.query.count == target.query.count,
              target.query.allSatisfy({ k, v in q.query.contains { $0.key.isExactly(k) && $0.value.isExactly(v) } }) else { return false }
        let sameRequest = q.method == r.method && q.body.map { $0.serialized() } == r.body.map { $0.serialized() }
        let turnedIntoGet = (301...303).contains(status) && q.method == "GET" && q.bodyEmpty == true
        guard sameRequest || turnedIntoGet, let answered = responseIndex(seq: r.seq), answered < index else { return false }
        return history.contains { e in
            e.kind == .invoke && e.client.isExactly(r.client) && e.index < answered
                && (e.name == "track" || (e.label.flatMap { completionIndex[ExactKey($0)] } ?? Int.max) > index)
        }
    }

    func responseIndex(seq: Int) -> Int? {
        history.first { $0.kind == .response && $0.request?.seq == seq }?.index
    }

    func slice(around indices: [Int], radius: Int = 2) -> [String] {
        guard let low = indices.min(), let high = indices.max() else { return [] }
        let from = max(0, low - radius), to = min(history.count - 1, high + radius)
        guard from <= to else { return [] }
        return history[from...to].map(\.line)
    }

    /// The history from the first to the last of `indices` as a failure's evidence, at most
    /// `limit` lines: when the span is longer, every event named in `indices` is kept (the two
    /// requests of a single-flight failure, the clear between them) with as much of the span
    /// near them as fits, and each gap says how many events it leaves out. Before, the span's
    /// last 12 lines were kept, so the first request of a failure was often missing.
    func excerpt(_ indices: [Int], limit: Int = 12) -> [String] {
        guard let low = indices.min(), let high = indices.max() else { return [] }
        let from = max(0, low), to = min(history.count - 1, high)
        guard from <= to else { return [] }
        if to - from + 1 <= limit { return history[from...to].map(\.line) }
        func render(_ keep: Set<Int>) -> [String] {
            var lines: [String] = []
            var previous: Int?
            for i in keep.sorted() {
                if let p = previous, i > p + 1 { lines.append("... (\(i - p - 1) events)") }
                lines.append(history[i].line)
                previous = i
            }
            return lines
        }
        let named = Set(indices.filter { $0 >= from && $0 <= to })
        var keep = named
        // Context: the events right after each named one, then right before, while the lines
        // (gap notes included) stay within the limit.
        for radius in stride(from: 1, to: to - from, by: 1) {
            var grew = false
            for i in named.sorted() {
                for j in [i + radius, i - radius] where j >= from && j <= to && !keep.contains(j) {
                    var wider = keep
                    wider.insert(j)
                    if render(wider).count <= limit { keep = wider; grew = true }
                }
            }
            if !grew { break }
        }
        return render(keep)
    }
}

/// The named checks over a whole history (scenario key `checks`), each a function of the history
/// that fails a broken SDK; see `Documentation/ScenarioFormat.md` for what each one asserts.
enum Checks {
    static func run(_ name: String, _ c: CheckContext) async -> [CheckResult] {
        let problems: [(String, [String])]
        switch name {
        case "stickiness": problems = stickiness(c)
        case "fan_out":
            let appEvents = AppEventFanOut(c)   // the reference app's event calls, read once for the three
            problems = fanOut(c, sizesOnly: false, appEvents: appEvents) + duplicateKeyedTracks(c, appEvents: appEvents) + keyedTracksSent(c, appEvents: appEvents)
                + trueBeforeDelivery(c, appEvents: appEvents) + falseWithoutSending(c)
        case "batch_chunking": problems = fanOut(c, sizesOnly: true, appEvents: AppEventFanOut(c))
        case "single_flight": problems = singleFlight(c)
        case "no_fallback_on_404", "offline_fallback": problems = offlineFallback(c)
        case "no_stale_write": problems = await cacheMatchesModel(c) + cacheHits(c)
        case "exposure_after_display": problems = exposureAfterDisplay(c)
        case "no_stale_after_logout": problems = await noStaleAfterLogout(c)
        case "golden_vectors": problems = await goldenVectors(c)
        case "contract_smoke": problems = smoke(c)
        case "event_payload": problems = eventPayload(c)
        default: problems = [("unknown check \(name)", [])]
        }
        if problems.isEmpty { return [CheckResult(name: name, passed: true)] }
        return [CheckResult(name: name, passed: false,
                            message: problems.prefix(3).map(\.0).joined(separator: " | ") + (problems.count > 3 ? " (+\(problems.count - 3) more)" : ""),
                            history: problems.first?.1)]
    }

    /// Whether the named check `name` had anything to judge. `fan_out`, `batch_chunking` and
    /// `event_payload` judge every request an SDK call sends (so "lookups send no events" is
    /// judged: a twentieth outside tester): any SDK call but `hashUser`. `stickiness` needs an
    /// assignment (a `getAssignment`/`getAssignments` call or an `/assign` request);
    /// `single_flight`, `no_stale_write`, `offline_fallback` and `no_fallback_on_404` a lookup
    /// (`evaluateFlag`, `getAssignment`, `getAssignments`, `getEvaluatedFlags`) or a keyed request.
    /// An app call counts for every check; the app checks, `golden_vectors` and `contract_smoke`
    /// always judge (or fail without an app). A scenario whose only statements are named checks
    /// with nothing to judge checks nothing and must not pass (ScenarioFormat.md, "Nothing passes
    /// unchecked"; a nineteenth outside tester: eight of the eleven checks passed a lone
    /// `hashUser`; a twenty-first: `stickiness` over one flag lookup passed).
    static func judgesSomething(_ name: String, _ c: CheckContext) -> Bool {
        let invoked = Set(c.history.filter { $0.kind == .invoke }.compactMap(\.name))
        if invoked.contains(where: { $0.hasPrefix("app.") }) { return true }
        let lookups: Set<String> = ["evaluateFlag", "getAssignment", "getAssignments", "getEvaluatedFlags"]
        switch name {
        case "fan_out", "batch_chunking", "event_payload": return !invoked.subtracting(["hashUser"]).isEmpty || !c.requests.isEmpty
        case "stickiness": return invoked.contains("getAssignment") || invoked.contains("getAssignments")
            || c.requests.contains { $0.record.path == "/api/v1/tracking/assign" }
        case "single_flight", "no_stale_write", "offline_fallback", "no_fallback_on_404":
            return !invoked.isDisjoint(with: lookups) || c.requests.contains { $0.record.key != nil }
        default: return true
        }
    }

    // MARK: stickiness

    /// Every answer for one (user, experiment) names the same variant: the SDK's outcomes (the
    /// reference app's getAssignment calls and the variants it shows included) and the backend's
    /// `assigned:true` responses alike.
    ///
    /// A restart of the experiment (`{"fixtures": {"experiment_restart": ...}}`) begins a new run
    /// whose sticky assignments are fresh (CONTRACT.md section 2): the backend's answers are
    /// compared within each run (one whose request came before the restart and answer after may
    /// belong to either), and the SDK, whose cache may still hold an earlier run's answer, may
    /// give any variant some run so far gave that user. Before, a scenario with a restart could
    /// not ask for `stickiness` at all: a correct SDK failed it.
    static func stickiness(_ c: CheckContext) -> [(String, [String])] {
        // exact user, exact experiment, run -> the first variant seen in that run
        var seen: [String: (variant: String, index: Int)] = [:]
        // Same key: the variants of backend answers that straddle a restart (either run's).
        var straddled: [String: [(variant: String, index: Int)]] = [:]
        var problems: [(String, [String])] = []
        // The restarts the scenario makes, by the marker text the runner records for each.
        var restartOf: [String: String] = [:]   // marker detail -> experiment
        for step in c.scenario.steps {
            if case .fixtures(let change) = step, case .experimentRestart(let key) = change { restartOf[ScenarioExecution.describe(change)] = key }
        }
        // Answers a fault scripted (a `respond` action, or a release with a response of its own)
        // are not the backend's sticky assignment: the SDK relays them (CONTRACT.md section 1), so
        // a (user, experiment) that got one is not judged (a thirty-third outside tester, F12:
        // every correct SDK failed an edge answer once, then the origin's).
        var scriptedFaults = Set<String>()
        for step in c.scenario.steps {
            switch step {
            case .addFault(let id, let rule) where rule["action"]?["respond"] != nil: scriptedFaults.insert(exact(id))
            case .release(let fault, _, _, let override) where override != nil: scriptedFaults.insert(exact(fault))
            default: break
            }
        }
        var scripted = Set<String>()   // exact user \0 exact experiment
        for (_, r) in c.requests where r.path == "/api/v1/tracking/assign" {
            // Only a scripted answer the SDK can relay: a success naming a variant (a scripted 503
            // relays nothing, and switched the user off: a thirty-sixth outside tester, S2).
            guard let fault = r.fault, scriptedFaults.contains(exact(fault)), let user = r.users.first, let key = r.key?.key,
                  r.succeeded, r.response?["variant_name"]?.stringValue != nil else { continue }
            scripted.insert("\(exact(user))\u{0}\(exact(key))")
            if case .string(let named)? = r.response?["experiment_key"] { scripted.insert("\(exact(user))\u{0}\(exact(named))") }
        }
        // exact user \0 exact experiment -> the variant names `seed_store` steps wrote for them
        var seeded: [String: [String]] = [:]
        for e in c.history where e.kind == .marker && e.name == "seed_store" && e.detail?["kind"] == .string("experiment") {
            guard case .string(let user)? = e.detail?["user"], case .string(let key)? = e.detail?["key"],
                  case .string(let variant)? = e.detail?["json"]?["variant_name"] else { continue }
            seeded["\(exact(user))\u{0}\(exact(key))", default: []].append(variant)
        }
        var runs: [String: Int] = [:]   // exact experiment -> restarts so far
        var receiptRuns: [Int: [String: Int]] = [:]   // seq -> `runs` when the request came
        func id(_ user: String, _ experiment: String, _ run: Int) -> String { "\(exact(user))\u{0}\(exact(experiment))\u{0}\(run)" }
        func same(_ a: String, _ b: String) -> Bool { a.unicodeScalars.elementsEqual(b.unicodeScalars) }
        func changed(_ user: String, _ experiment: String, _ first: (variant: String, index: Int), _ variant: String, _ index: Int) {
            problems.append(("user '\(user.unambiguous)' got variant '\(first.variant.unambiguous)' then '\(variant.unambiguous)' in experiment '\(experiment.unambiguous)'",
                             c.slice(around: [first.index, index], radius: 1)))
        }
        /// `variant` must be the first one seen for (user, experiment) in `run`, or becomes it.
        func agree(_ user: String, _ experiment: String, run: Int, _ variant: String, _ index: Int) {
            let k = id(user, experiment, run)
            if let first = seen[k] { if !same(first.variant, variant) { changed(user, experiment, first, variant, index) } } else { seen[k] = (variant, index) }
        }
        /// `runsOfAnswer`: the runs a backend answer may belong to; `nil` for the SDK's outcomes.
        func observe(user: String, experiment: String, value: JSONValue, index: Int, runsOfAnswer: ClosedRange<Int>? = nil) {
            // The SDK's assignment names its variant: an outcome `value` that is no assignment (null,
            // `{}`, one without a text `variant_name`) is no stable variant (CONTRACT.md section 3:
            // `getAssignment` returns an `Assignment`, `variantName` a string; a readable answer
            // always has one, `seededReadability`). Before, an adapter that answered every lookup
            // with `null` passed `stickiness` (a sixtieth outside tester).
            if runsOfAnswer == nil, value["variant_name"]?.stringValue == nil {
                problems.append(("user '\(user.unambiguous)' got an assignment in experiment '\(experiment.unambiguous)' that names no variant: \(value) "
                                 + "(CONTRACT.md section 3: getAssignment returns an Assignment with its variantName)", c.slice(around: [index], radius: 2)))
                return
            }
            guard value["assigned"] != .bool(false), case .string(let variant)? = value["variant_name"] else { return }
            guard !scripted.contains("\(exact(user))\u{0}\(exact(experiment))") else { return }
            // A variant a `seed_store` step wrote for this user and experiment may be served from
            // the store (a failure's fallback, CONTRACT.md section 4): it is not the backend's
            // assignment, so it fixes nothing and is not held against one (a sixty-third outside
            // tester: an older version's stored `treatment`, served on a 503, then the backend's
            // `control`, failed every correct SDK).
            if runsOfAnswer == nil, seeded["\(exact(user))\u{0}\(exact(experiment))"]?.contains(where: { same($0, variant) }) == true { return }
            let run = runs[exact(experiment)] ?? 0
            if let answerRuns = runsOfAnswer {
                if answerRuns.count > 1 {
                    // Straddles a restart: it must agree with one of its runs (a run with no
                    // variant yet agrees with anything), and fixes neither.
                    let firsts = answerRuns.compactMap { seen[id(user, experiment, $0)] }
                    if firsts.count == answerRuns.count, let first = firsts.first, !firsts.contains(where: { same($0.variant, variant) }) {
                        changed(user, experiment, first, variant, index)
                    }
                    // The SDK may have been given it, so it may give it (a thirty-fifth outside
                    // tester: a correct SDK showing a pre-restart request's late answer failed).
                    for r in answerRuns { straddled[id(user, experiment, r), default: []].append((variant, index)) }
                    return
                }
                agree(user, experiment, run: answerRuns.lowerBound, variant, index)
                return
            }
            // The SDK's outcome: in the first run, as the backend's; after a restart, any variant
            // a run so far gave (its cache may hold an earlier run's answer).
            let earlier = (0...run).compactMap { seen[id(user, experiment, $0)] } + (0...run).flatMap { straddled[id(user, experiment, $0)] ?? [] }
            if run == 0 {
                agree(user, experiment, run: run, variant, index)
            } else if earlier.isEmpty {
                // After a restart the SDK may serve what it holds from before (its cache, its
                // offline store, a seeded entry): its outcome fixes no run's variant, the
                // backend's answers do (a thirty-sixth outside tester, S1: a seeded variant served
                // as the fallback made the run's real answer "a change").
                return
            } else if !earlier.contains(where: { same($0.variant, variant) }) {
                problems.append(("user '\(user.unambiguous)' got variant '\(variant.unambiguous)' in experiment '\(experiment.unambiguous)' after \(run) restart(s) of it, but its runs so far gave only "
                                 + earlier.map { "'\($0.variant.unambiguous)'" }.joined(separator: ", "),
                                 c.slice(around: earlier.map(\.index) + [index], radius: 1)))
            }
        }
        let invokes = Dictionary(c.history.filter { $0.kind == .invoke }.compactMap { e in e.label.map { (ExactKey($0), e) } }, uniquingKeysWith: { a, _ in a })   // labels are identity data
        var appCalls: [ExactKey: AppCalls] = [:]
        for client in c.scenario.app == nil ? [] : c.scenario.appClients {
            guard let settings = c.scenario.appSettings(client: client) else { continue }
            appCalls[ExactKey(client)] = AppCalls(history: c.history, client: client, initialIdentity: settings.initialUser)
        }
        for e in c.history {
            if e.kind == .marker, e.name == "fixtures", case .string(let text)? = e.detail, let experiment = restartOf[text] {
                runs[exact(experiment), default: 0] += 1
            }
            if e.kind == .request, let r = e.request, r.path == "/api/v1/tracking/assign", !runs.isEmpty {
                receiptRuns[r.seq] = runs   // every experiment's run when the request came
            }
            if e.kind == .response, let r = e.request, r.path == "/api/v1/tracking/assign", r.succeeded, let response = r.response,
               case .string(let user)? = response["user_id"], case .string(let exp)? = response["experiment_key"] {
                let now = runs[exact(exp)] ?? 0
                let from = min(receiptRuns[r.seq]?[exact(exp)] ?? 0, now)
                observe(user: user, experiment: exp, value: response, index: e.index, runsOfAnswer: from...now)
            }
            if e.kind == .complete, e.name == "getAssignment", let label = e.label, let invoke = invokes[ExactKey(label)],
               case .object(let o)? = e.outcome, let value = o["value"],
               case .string(let exp)? = invoke.detail?["experiment"] {
                guard let user = invokedUser(invoke.detail) else { continue }
                observe(user: user, experiment: exp, value: value, index: e.index)
            }
            // The reference app's getAssignment calls: the outcome its `returned` marker carries
            // is the SDK's answer for the identity the call was made as (CONTRACT.md section 8).
            if e.kind == .marker, e.name == "returned", let client = e.client, let app = c.scenario.appSettings(client: client),
               case .number(let n)? = e.detail?["call"], let value = e.detail?["outcome"]?["value"],
               let call = appCalls[ExactKey(client)]?.calls.first(where: { $0.id == Int(n) }), call.sdk == "getAssignment" {
                observe(user: call.identity, experiment: app.experiment, value: value, index: e.index)
            }
            // The reference app's display is a getAssignment too: the variant it shows from an
            // assignment is the SDK's answer for the app's identity (CONTRACT.md section 8).
            if e.kind == .marker, e.name == "shown", let client = e.client, let app = c.scenario.appSettings(client: client),
               e.detail?["layout_source"] == .string("assignment"), case .string(let user)? = e.detail?["identity"],
               case .string(let variant)? = e.detail?["variant"] {
                observe(user: user, experiment: app.experiment, value: .object(["variant_name": .string(variant)]), index: e.index)
            }
        }
        return problems
    }

    // MARK: cache model

    /// An independent model of each client's memory cache, rebuilt from the history: a 2xx answer
    /// to a request received after the client's last clear is cached for the TTL; `clearCache` and
    /// `close` empty it; `clearOfflineCache` keeps it but counts as a clear for requests in flight.
    struct CacheModel {
        /// A cached value; the SDK wrote it somewhere in the history between `lo` (its answer)
        /// and `hi` (the first completion of an operation for it, or the next step): entries whose
        /// windows overlap may sit in the cache in either order (issue 11 section 3).
        /// `optional`: the SDK may or may not have written it (an app call began before a clear
        /// of the app's client, its request reached the mock after it: `Checks.appIssueStarts`).
        /// `expires`: microseconds since the scenario started (`CacheModel.micros`): whole numbers,
        /// so `0.1 s + 0.2 s` is exactly `0.3 s` (in doubles it was later, and an entry stored at
        /// 0.1 s with a TTL of 0.2 s was fresh at 0.3 s: a seventh outside tester).
        /// `tieCertain`: the time it was stored and the TTL are whole eighths of a second, so every
        /// SDK's arithmetic (seconds in doubles since 1970 or 2001, whole milliseconds or
        /// nanoseconds) puts its expiry exactly there (`onEighths`).
        /// `candidates`: every answer the entry may hold now, each with its own write window
        /// (`lo`, `hi`: history indices) and whether its value can be judged (`judged`: a complete,
        /// unambiguous answer). Two answers for one key whose windows overlap may be written in
        /// either order, and an answer the SDK may not have written leaves the one before it: the
        /// SDK may show any candidate (a thirty-second outside tester: the end-state listing
        /// compared keys only, so a stale answer written over the fresh one passed).
        struct Entry { var key: String; var value: JSONValue; var expires: Int64; var order: Int; var lo = 0; var hi = Int.max; var optional = false
                       var tieCertain = false
                       var candidates: [Candidate] = [] }

        /// One answer an entry may hold (see `Entry.candidates`).
        struct Candidate { var value: JSONValue; var lo: Int; var hi: Int; var judged: Bool }

        /// Whether `seconds` (since the scenario started, at 1,700,000,000 s after 1970) is a whole
        /// number of eighths of a second under 2^30 s: a time every SDK's clock arithmetic holds
        /// exactly, so a tie at it is decided as the contract says (expired), not left to rounding.
        static func onEighths(_ seconds: Double) -> Bool {
            let eighths = seconds * 8
            return eighths.isFinite && eighths == eighths.rounded() && abs(seconds) < 1_073_741_824
        }

        /// `seconds` in whole microseconds, the resolution of scenario times.
        /// Saturating: beyond about 292,000 years (or not finite) it holds at the ends, never traps.
        static func micros(_ seconds: Double) -> Int64 {
            let us = (seconds * 1_000_000).rounded()
            guard us.isFinite else { return us.isNaN ? 0 : (us > 0 ? Int64.max / 4 : Int64.min / 4) }
            return Int64(max(min(us, Double(Int64.max / 4)), Double(Int64.min / 4)))
        }
        /// More entries were written since the last clear than the client's `cache_size`: the SDK
        /// may have evicted any of them (CONTRACT.md section 3 bounds the cache by `cacheSize` and
        /// names no eviction order), so every entry is optional from then on and fan-out is not
        /// predicted (a sixth outside tester: the model kept every entry, and the shipping SDK,
        /// which evicts the oldest, failed `fan_out` and `no_stale_write`). Counted over both
        /// tables and with expired entries, an upper bound of what any SDK holds.
        var overflowed = false
        // Keyed by `Checks.exact` spellings: identity is compared by Unicode scalars (CONTRACT.md section 4).
        var flags: [String: [String: Entry]] = [:]        // exact user -> exact key -> entry
        var assignments: [String: [String: Entry]] = [:]
        var counter = 0

        mutating func clear() { flags.removeAll(); assignments.removeAll(); overflowed = false }

        /// Marks the model overflowed once it holds more entries than `limit` (see `overflowed`),
        /// and then every entry optional.
        mutating func noteSize(limit: Int) {
            if !overflowed, (flags.values.map(\.count) + assignments.values.map(\.count)).reduce(0, +) > limit { overflowed = true }
            guard overflowed else { return }
            for user in flags.keys { for key in flags[user]!.keys { flags[user]![key]!.optional = true } }
            for user in assignments.keys { for key in assignments[user]!.keys { assignments[user]![key]!.optional = true } }
        }

        /// The entries of `user` live at `time` (seconds), oldest first. One that expires exactly
        /// then has expired (CONTRACT.md section 4) when the tie is certain (its store time, its
        /// TTL and `time` on whole eighths of a second, `onEighths`: a thirtieth outside tester's
        /// SDK served an entry at exactly stored + TTL and passed); otherwise it is included as
        /// optional: an SDK's `Date` arithmetic (about 0.1 microsecond at today's dates) can land
        /// either side of the tie.
        func entries(_ table: [String: [String: Entry]], user: String, at time: Double, filter: (JSONValue) -> Bool = { _ in true }) -> [Entry] {
            let now = Self.micros(time)
            let nowCertain = Self.onEighths(time)
            return (table[Checks.exact(user)] ?? [:]).filter { item in
                (item.value.expires > now || (item.value.expires == now && !(item.value.tieCertain && nowCertain))) && filter(item.value.value)
            }
                .sorted { $0.value.order < $1.value.order }
                .map { item in var e = item.value; if e.expires == now { e.optional = true }; return e }
        }

        /// Whether a live entry of `user` at `time` may be there or not (`optional`: it expires
        /// exactly then, the SDK may or may not have written it): its fan-out cannot be predicted
        /// exactly (a seventh outside tester: `fan_out` demanded such entries, failing a correct
        /// SDK in 3 of 22 runs when a late answer nobody waited for was modelled).
        func hasUncertain(user: String, at time: Double) -> Bool {
            (entries(assignments, user: user, at: time) + entries(flags, user: user, at: time)).contains { $0.optional }
        }

        /// Whether `got` (keys in the SDK's order) holds exactly `want`'s keys in an order the
        /// history allows: no key before one that was surely written earlier.
        static func consistent(_ got: [String], _ want: [Entry]) -> Bool {
            let byKey = Dictionary(want.map { (Checks.exact($0.key), $0) }, uniquingKeysWith: { a, _ in a })
            let gotKeys = Set(got.map(Checks.exact))
            guard got.count == gotKeys.count, gotKeys.isSubset(of: Set(byKey.keys)),
                  want.allSatisfy({ $0.optional || gotKeys.contains(Checks.exact($0.key)) }) else { return false }
            let entries = got.map { byKey[Checks.exact($0)]! }
            for i in entries.indices { for j in entries.indices where i < j && entries[j].hi < entries[i].lo { return false } }
            return true
        }

        /// Whether a listing of assignments (`got`, each named by its `experiment_key`) holds the
        /// model's entries when an entry's answer names another experiment than the key it is
        /// cached under: the listing then shows the answer's name, possibly twice (a correct SDK
        /// failed: an assign for `exp_other` answered for `sdk_contract_ab` was listed as
        /// `sdk_contract_ab` beside the real one; an eighteenth outside tester). Compared as
        /// multisets: every entry that is not optional is listed by its key or by the
        /// experiment its answer names, and nothing else is listed.
        static func consistentListing(_ got: [String], _ want: [Entry]) -> Bool {
            var remaining: [String: Int] = [:]
            for g in got { remaining[Checks.exact(g), default: 0] += 1 }
            func names(_ e: Entry) -> [String] {
                var n = [Checks.exact(e.key)]
                if case .string(let answered)? = e.value["experiment_key"], !answered.isExactly(e.key) { n.append(Checks.exact(answered)) }
                return n
            }
            func take(_ e: Entry) -> Bool {
                for n in names(e) where (remaining[n] ?? 0) > 0 { remaining[n]! -= 1; return true }
                return false
            }
            for e in want where !e.optional { if !take(e) { return false } }
            for e in want where e.optional { _ = take(e) }
            return remaining.values.allSatisfy { $0 == 0 }
        }

        /// The listed assignments (`listed`, the SDK's `getAssignments` items) whose value no
        /// model entry listed under that name may hold: its `variant_name`, and every other field
        /// it shows of those `Checks.otherEntryField` compares, must be one of a candidate answer's
        /// (`Entry.candidates`), as the answer or renamed to the key it is cached under
        /// (`Checks.naming`). An item whose name no entry has is the key comparison's to report;
        /// a candidate that is no complete, unambiguous answer explains any value.
        static func unexplainedValues(_ listed: [JSONValue], _ want: [Entry]) -> [(key: String, listed: JSONValue, allowed: [JSONValue])] {
            var wrong: [(key: String, listed: JSONValue, allowed: [JSONValue])] = []
            for item in listed {
                guard case .string(let name)? = item["experiment_key"] else { continue }
                let entries = want.filter { e in
                    e.key.isExactly(name) || e.candidates.contains { $0.value["experiment_key"]?.stringValue?.isExactly(name) ?? false }
                }
                guard !entries.isEmpty else { continue }
                let explained = entries.contains { e in
                    e.candidates.isEmpty || e.candidates.contains { c in
                        !c.judged || (c.value["variant_name"] == item["variant_name"]
                            && (Checks.otherEntryField(kind: "experiment", entry: c.value, served: item) == nil
                                || Checks.otherEntryField(kind: "experiment", entry: Checks.naming(e.key, kind: "experiment", c.value), served: item) == nil))
                    }
                }
                if !explained { wrong.append((name, item, entries.flatMap { $0.candidates.map(\.value) })) }
            }
            return wrong
        }

        func keys(_ table: [String: [String: Entry]], user: String, at time: Double, filter: (JSONValue) -> Bool = { _ in true }) -> [String] {
            let now = Self.micros(time)
            return (table[Checks.exact(user)] ?? [:]).filter { $0.value.expires > now && filter($0.value.value) }
                .sorted { $0.value.order < $1.value.order }.map(\.value.key)
        }
    }

    /// Replays the history up to each event, calling `visit` before applying each event.
    static func replayCaches(_ c: CheckContext, visit: (HistoryEvent, [String: CacheModel]) -> Void) -> [String: CacheModel] {
        var models: [String: CacheModel] = [:]
        var epochs: [String: Int] = [:]
        var epochAtReceipt: [Int: Int] = [:]
        // Requests an app call may have issued before a clear its receipt follows (`appIssueStarts`).
        let issueStarts = appIssueStarts(c)
        var clearIndices: [String: [Int]] = [:]
        var receipts: [Int: Int] = [:]
        let ttl = Dictionary(c.scenario.clients.map { ($0.name, $0.settings.cacheTTL) }, uniquingKeysWith: { a, _ in a })
        let sizes = Dictionary(c.scenario.clients.map { (exact($0.name), $0.settings.cacheSize) }, uniquingKeysWith: { a, _ in a })
        let invokes = Dictionary(c.history.filter { $0.kind == .invoke }.compactMap { e in e.label.map { (ExactKey($0), e) } }, uniquingKeysWith: { a, _ in a })   // labels are identity data
        /// By when the SDK surely wrote the answer at history index `i`: the first completion of a
        /// lookup for the same (client, user, key) after it, or the first event of a later step.
        func writtenBy(_ i: Int, client: String, user: String, key: (kind: String, key: String)) -> Int {
            let step = c.history[i].step
            for e in c.history[(i + 1)...] {
                if e.step > step { return e.index }
                guard e.kind == .complete, let label = e.label, let invoke = invokes[ExactKey(label)], invoke.client.isExactly(client),
                      invoke.name == (key.kind == "flag" ? "evaluateFlag" : "getAssignment") else { continue }
                guard case .string(let k)? = invoke.detail?[key.kind == "flag" ? "flag" : "experiment"], exact(k) == exact(key.key) else { continue }
                if let u = invokedUser(invoke.detail), exact(u) == exact(user) { return e.index }
            }
            return Int.max
        }
        let completes = Dictionary(c.history.filter { $0.kind == .complete }.compactMap { e in e.label.map { (ExactKey($0), e.index) } },
                                   uniquingKeysWith: { a, _ in a })   // by exact label
        let appCalls = Dictionary(c.scenario.app == nil ? [] : c.scenario.appClients.compactMap { client -> (String, AppCalls)? in
            guard let settings = c.scenario.appSettings(client: client) else { return nil }
            return (exact(client), AppCalls(history: c.history, client: client, initialIdentity: settings.initialUser))
        }, uniquingKeysWith: { a, _ in a })
        /// Whether some lookup for (client, user, key) was waiting when the answer at history
        /// index `i` came: a runner operation invoked before it and not yet complete, or an app
        /// call in flight that sends to `path` as `user`.
        func callerWaiting(at i: Int, client: String, user: String, key: (kind: String, key: String), path: String) -> Bool {
            let name = key.kind == "flag" ? "evaluateFlag" : "getAssignment"
            for (label, invoke) in invokes where invoke.index < i && invoke.name == name && invoke.client.isExactly(client) {
                guard (completes[label] ?? Int.max) > i else { continue }
                guard case .string(let k)? = invoke.detail?[key.kind == "flag" ? "flag" : "experiment"], exact(k) == exact(key.key) else { continue }
                if let u = invokedUser(invoke.detail), exact(u) == exact(user) { return true }
            }
            return !(appCalls[exact(client)]?.issuers(path: path, user: user, at: i).isEmpty ?? true)
        }
        for e in c.history {
            visit(e, models)
            switch e.kind {
            case .invoke where ["clearCache", "close"].contains(e.name ?? ""):
                if let client = e.client { epochs[client, default: 0] += 1; models[client, default: CacheModel()].clear(); clearIndices[client, default: []].append(e.index) }
            case .invoke where e.name == "clearOfflineCache":
                // CONTRACT.md section 5.1: a response to a request that started before
                // clearOfflineCache() is written nowhere, though the memory cache itself stays.
                if let client = e.client { epochs[client, default: 0] += 1; clearIndices[client, default: []].append(e.index) }
            case .marker where e.name == "logout" || e.name == "undo":
                if let client = e.client { epochs[client, default: 0] += 1; models[client, default: CacheModel()].clear(); clearIndices[client, default: []].append(e.index) }
            case .request:
                if let r = e.request, let client = r.client { epochAtReceipt[r.seq] = epochs[client, default: 0]; receipts[r.seq] = e.index }
            case .response:
                // A request the client cancelled (its deadline, close, every waiter gone) is never
                // cached, even when the mock answers it later (a released hold).
                guard let r = e.request, let client = r.client, r.succeeded, !r.cancelled, let key = r.key, let user = r.users.first,
                      epochAtReceipt[r.seq] == epochs[client, default: 0], let value = r.response else { break }
                // An answer that is no flag or assignment object is a decoding failure for the SDK,
                // never cached (a seventh outside tester: a released `[]` was modelled as cached).
                guard case .object = value else { break }
                var model = models[client, default: CacheModel()]
                model.counter += 1
                var entry = CacheModel.Entry(key: key.key, value: value, expires: CacheModel.micros(e.exactTime) + CacheModel.micros(ttl[client] ?? 300), order: model.counter,
                                             lo: e.index, hi: writtenBy(e.index, client: client, user: user, key: key))
                entry.tieCertain = CacheModel.onEighths(e.exactTime) && CacheModel.onEighths(ttl[client] ?? 300)
                // Answered after every call that could wait on it had finished (its own deadline,
                // a cancel of its only caller): whether the SDK's cancellation of the abandoned
                // task reached the mock before the answer is thread timing, and an SDK that only
                // stopped waiting may still cache a success. Either is correct, so the entry may
                // be there or not (a fourth outside tester: `no_stale_write` demanded the late
                // answer cached in 9 of 30 runs, whenever the cancellation arrived late).
                if !callerWaiting(at: e.index, client: client, user: user, key: key, path: r.path) { entry.optional = true }
                // An object without the fields the contract gives every answer (CONTRACT.md section 1
                // table: `enabled` of a flag; `variant_name` and `is_control` of an assignment): an SDK
                // may decode it or fail, so the entry may be there or not.
                // (`key` and `enabled` of a flag; `experiment_key`, `user_id`, `variant_name` and
                // `is_control` of an assignment, each of its type: an eighth outside tester's
                // answers lacking `experiment_key`, or with `user_id: 123`, were modelled as surely
                // cached.)
                func isBool(_ v: JSONValue?) -> Bool { if case .bool? = v { return true } else { return false } }
                // `config` / `configuration` present and no object (a string, an array): an SDK may
                // map it to null or fail the call as an undecodable body (a twenty-fifth outside
                // tester's independent Node SDK did; CONTRACT.md does not say which).
                func objectOrAbsent(_ v: JSONValue?) -> Bool { present(v).map { $0.objectValue != nil } ?? true }
                let complete = key.kind == "flag" ? value["key"]?.stringValue != nil && isBool(value["enabled"]) && objectOrAbsent(value["config"])
                    : ["experiment_key", "user_id", "variant_name"].allSatisfy { value[$0]?.stringValue != nil } && isBool(value["is_control"])
                        && objectOrAbsent(value["configuration"])
                        // `assigned` and `variant_id` of another type than the table's (`"true"`, `1`):
                        // an SDK may fail to decode the answer (the Swift SDK does), so it may not be
                        // cached (an eightieth outside tester, F2: `no_stale_write` failed it).
                        && (value["assigned"].map { isBool($0) } ?? true) && (value["variant_id"].map { $0.stringValue != nil } ?? true)
                if !complete || r.ambiguousBody == true { entry.optional = true }
                // Issued by an app call that began before a clear the receipt follows: the SDK may
                // have started it before that clear (not written) or after it (written).
                if let start = issueStarts[r.seq], let receipt = receipts[r.seq],
                   (clearIndices[client] ?? []).contains(where: { $0 > start && $0 < receipt }) {
                    let table = key.kind == "flag" ? model.flags : model.assignments
                    let previous = table[exact(user)]?[exact(key.key)]
                    entry.optional = previous.map { $0.optional || $0.expires <= CacheModel.micros(e.exactTime) } ?? true
                }
                // An assignment answered for another experiment than the one asked: an SDK may cache
                // it under either key, or fail (an eighth outside tester: every correct SDK failed
                // `no_stale_write`, blamed on defect 1): optional under both.
                if key.kind == "experiment", let answered = value["experiment_key"]?.stringValue, exact(answered) != exact(key.key) {
                    entry.optional = true
                    var other = entry
                    other.key = answered
                    let earlier = model.assignments[exact(user)]?[exact(answered)]?.candidates ?? []
                    other.candidates = [CacheModel.Candidate(value: value, lo: e.index, hi: entry.hi, judged: complete && r.ambiguousBody != true)] + earlier
                    model.assignments[exact(user), default: [:]][exact(answered)] = other
                }
                // A key written again since the last clear (its entry expired and was fetched
                // anew, or two requests for it were answered): CONTRACT.md says "insertion order"
                // and not whether a rewrite is a new insertion. An SDK that removes the old entry
                // lists the key last; one that writes over it in an ordered map (Python's dict,
                // Java's LinkedHashMap, a JS Map) keeps its first place. Either is correct, so the
                // entry may stand anywhere from the old one's place on (a twenty-third outside tester:
                // `fan_out` and a shipped scenario failed the second).
                let table = key.kind == "flag" ? model.flags : model.assignments
                // The answers the entry may show: this one, any earlier one whose write may come
                // after it (its window still open at this answer), and all earlier ones when this
                // one may not be written at all.
                let candidate = CacheModel.Candidate(value: value, lo: entry.lo, hi: entry.hi, judged: complete && r.ambiguousBody != true)
                let earlier = table[exact(user)]?[exact(key.key)]?.candidates ?? []
                entry.candidates = [candidate] + earlier.filter { entry.optional || $0.hi > candidate.lo }
                if let previous = table[exact(user)]?[exact(key.key)] { entry.lo = min(entry.lo, previous.lo) }
                if key.kind == "flag" { model.flags[exact(user), default: [:]][exact(key.key)] = entry }
                else { model.assignments[exact(user), default: [:]][exact(key.key)] = entry }
                model.noteSize(limit: sizes[exact(client)] ?? 1000)
                models[client] = model
            default: break
            }
        }
        return models
    }

    /// One cache entry's identity as a dictionary key: client, kind (`flag`, `experiment`), user
    /// and key, each compared by Unicode scalars (`exact`).
    static func entryID(_ client: String, _ kind: String, _ user: String, _ key: String) -> String {
        "\(exact(client))\u{0}\(kind)\u{0}\(exact(user))\u{0}\(exact(key))"
    }

    /// The history indices of each client's clears of its memory cache, by exact client:
    /// `clearCache` and `close` calls, an app's logout or undo.
    static func clearIndices(_ c: CheckContext) -> [String: [Int]] {
        var clears: [String: [Int]] = [:]
        for e in c.history {
            switch e.kind {
            case .invoke where ["clearCache", "close"].contains(e.name ?? ""):
                if let client = e.client { clears[exact(client), default: []].append(e.index) }
            case .marker where e.name == "logout" || e.name == "undo":
                if let client = e.client { clears[exact(client), default: []].append(e.index) }
            default: break
            }
        }
        return clears
    }

    /// The history index of each request's first answer, by sequence number.
    static func answerIndices(_ c: CheckContext) -> [Int: Int] {
        var answeredAt: [Int: Int] = [:]
        for e in c.history where e.kind == .response {
            if let seq = e.request?.seq, answeredAt[seq] == nil { answeredAt[seq] = e.index }
        }
        return answeredAt
    }

    /// Every value a runner lookup returned from the cache is one the cache can hold then
    /// (CONTRACT.md section 4: a cache per exact (user id, key), fresh while now < stored + TTL,
    /// failures never cached; section 5.1: nothing from before a clear).
    ///
    /// A lookup is a *hit* when no request for its client, exact user and key was pending at any
    /// moment while it ran (received before it ended and not answered before it began; one never
    /// answered counts as pending): a lookup that sent or may have joined a request is judged by
    /// the other checks.
    /// A hit's value must then match a 2xx answer for exactly that client, user and key (for an
    /// assignment, also one answered for that key when another was asked: either may be cached) whose
    /// request arrived after the client's last clear (`clearCache`, `close`, an app's logout or
    /// undo) before the lookup, answered before it, and not older than the cache TTL (its end
    /// included). Lenient where the contract leaves room (eviction by cache size is not judged
    /// here). Before, no check judged a hit: an SDK that cached its offline fallback value and
    /// served it after the backend changed, or served "user-1"'s entry to "User-1", passed every
    /// named check (a fifteenth outside tester).
    static func cacheHits(_ c: CheckContext) -> [(String, [String])] {
        let ttl = Dictionary(c.scenario.clients.map { (exact($0.name), $0.settings.cacheTTL) }, uniquingKeysWith: { a, _ in a })
        let id = entryID
        let clears = clearIndices(c)   // exact client -> history indices of its clears
        let answeredAt = answerIndices(c)   // seq -> history index of its answer
        // id -> each request's receipt and answer (history indices; no answer: `Int.max`, as for a
        // request its client gave up on, which may have served a caller until then)
        var spans: [String: [(from: Int, to: Int)]] = [:]
        var answers: [String: [(receivedAt: Int, at: Int, time: Double, value: JSONValue)]] = [:]
        var receipt: [Int: Int] = [:]   // seq -> history index of its receipt
        for e in c.history {
            switch e.kind {
            case .request:
                if let seq = e.request?.seq { receipt[seq] = e.index }
            case .response:
                guard let r = e.request, let client = r.client, let key = r.key, let user = r.users.first else { continue }
                if r.succeeded, !r.cancelled, let value = r.response, let at = receipt[r.seq] {
                    answers[id(client, key.kind, user, key.key), default: []].append((at, e.index, e.exactTime, value))
                    // An assignment answered for another experiment than asked may be cached under
                    // either key (ScenarioFormat.md, no_stale_write).
                    if key.kind == "experiment", case .string(let answered)? = value["experiment_key"], !answered.isExactly(key.key) {
                        answers[id(client, "experiment", user, answered), default: []].append((at, e.index, e.exactTime, value))
                    }
                }
            default: break
            }
        }
        for (e, r) in c.requests {
            guard let client = r.client, let key = r.key, let user = r.users.first else { continue }
            spans[id(client, key.kind, user, key.key), default: []].append((e.index, answeredAt[r.seq] ?? Int.max))
        }
        let completes = firstCompletions(c)
        var problems: [(String, [String])] = []
        for invoke in c.history where invoke.kind == .invoke && ["evaluateFlag", "getAssignment"].contains(invoke.name ?? "") {
            guard let label = invoke.label, let client = invoke.client, let done = completes[ExactKey(label)],
                  case .object? = done.outcome, let value = done.outcome?["value"] else { continue }
            let kind = invoke.name == "evaluateFlag" ? "flag" : "experiment"
            guard case .string(let key)? = invoke.detail?[kind == "flag" ? "flag" : "experiment"] else { continue }
            guard let user = invokedUser(invoke.detail) else { continue }
            let k = id(client, kind, user, key)
            // Not a hit when a request for its key was pending at any moment of the call (it may
            // have joined it: a request its client gave up on has no answer, and may have served
            // callers until then; a fourth tester of this stop: a joiner of a request that timed
            // out was judged a hit).
            if (spans[k] ?? []).contains(where: { $0.from < done.index && $0.to > invoke.index }) { continue }
            let lastClear = (clears[exact(client)] ?? []).filter { $0 < invoke.index }.max() ?? -1
            let life = ttl[exact(client)] ?? 300
            let field = kind == "flag" ? "enabled" : "variant_name"
            // Fresh while now < stored + TTL (CONTRACT.md section 4); at the tie, expired when it is
            // certain (`CacheModel.onEighths`), else either (an SDK's clock arithmetic rounds).
            let cached = (answers[k] ?? []).filter { a in
                let certain = CacheModel.onEighths(invoke.exactTime) && CacheModel.onEighths(a.time) && CacheModel.onEighths(life)
                return a.receivedAt > lastClear && a.at < invoke.index
                    && (certain ? invoke.exactTime < a.time + life : invoke.exactTime <= a.time + life + 1e-6)
            }
            // An answer for another experiment or flag than asked may be returned naming either key.
            if cached.contains(where: { a in
                a.value[field] == value[field]
                    && (otherEntryField(kind: kind, entry: a.value, served: value) == nil
                        || otherEntryField(kind: kind, entry: naming(key, kind: kind, a.value), served: value) == nil)
            }) { continue }
            let what = "\(label) (\(invoke.name!) of \(kind) '\(Attribution.show(key))' for user '\(Attribution.show(user))' on client '\(Attribution.show(client))')"
            let why = cached.isEmpty
                ? "no answer for exactly that user and key can be cached then (none since the client's last clear, within the cache TTL of \(life) s)"
                : "the answers that can be cached then give \(field) \(cached.map { $0.value[field] ?? .null })"
            problems.append(("\(what) returned \(value) without a request of its own, but \(why) (CONTRACT.md section 4: a cache per exact (user id, key), failures never cached; section 5.1)",
                             c.excerpt([invoke.index, done.index] + (answers[k] ?? []).map(\.at))))
        }
        return problems
    }

    /// The memory caches the SDK reports at the end equal the model: nothing stale written after
    /// a clear, no failure cached, nothing lost.
    static func cacheMatchesModel(_ c: CheckContext) async -> [(String, [String])] {
        let models = replayCaches(c) { _, _ in }
        // The caches are queried now: after the last event and after the last clock step (an
        // `advance` marker is recorded at the time it starts from).
        let end = c.history.reduce(0.0) { latest, e in
            var t = e.exactTime
            if e.kind == .marker, e.name == "advance", case .number(let seconds)? = e.detail { t += seconds }
            return max(latest, t)
        }
        // Every user a request or an operation named: an SDK that serves one user's entry to a
        // canonically equivalent spelling reports it under a user the history never cached.
        var usersByScalars: [String: String] = [:]   // exact spelling -> the id
        for (_, r) in c.requests { for u in r.users { usersByScalars[exact(u)] = u } }
        for e in c.history where e.kind == .invoke && ["getAssignment", "evaluateFlag"].contains(e.name ?? "") {
            if let u = invokedUser(e.detail) { usersByScalars[exact(u)] = u }
        }
        let users = usersByScalars.keys.sorted().map { usersByScalars[$0]! }
        var problems: [(String, [String])] = staleWritesTheAppUndid(c)
        for client in c.scenario.clients.map(\.name) {
            guard let driverClient = c.clients[client] else { continue }
            let model = models[client] ?? CacheModel()
            let closedClient = c.history.contains { $0.kind == .invoke && $0.name == "close" && $0.client.isExactly(client) }
            // Entries listed over every user: `cacheSize` bounds each cache as a whole, not each
            // user's part of it (an outside tester: three users of two flags each passed a size of 2).
            var listedA = 0, listedF = 0
            defer {
                let size = c.settings(of: client).cacheSize
                for (what, count) in [("assignments", listedA), ("flags", listedF)] where count > size {
                    problems.append(("client '\(client)' caches \(count) \(what) over its users, more than its cache_size of \(size) (CONTRACT.md section 3: cacheSize bounds the in-memory cache)", []))
                }
            }
            for user in users {
                // Users canonically equivalent to this one but spelled otherwise (for messages).
                let twins = users.filter { $0 == user && !$0.isExactly(user) }
                let entriesA = model.entries(model.assignments, user: user, at: end)
                let entriesF = model.entries(model.flags, user: user, at: end)
                let wantA = entriesA.map(\.key), wantF = entriesF.map(\.key)
                // A query the SDK (or its adapter) did not answer with a value says nothing of the
                // cache: said so, never read as an empty cache (a seventh outside tester: an
                // unreadable reply was reported as "caches []").
                guard let repliedA = await ScenarioExecution.query(driverClient, .getAssignments(user: user)),
                      let repliedF = await ScenarioExecution.query(driverClient, .getEvaluatedFlags(user: user)) else {
                    problems.append(("client '\(client)' did not report its cache for user '\(Attribution.show(user))' (getAssignments or getEvaluatedFlags gave no value), so the cache cannot be compared with the history",
                                     relevant(c, user: user)))
                    continue
                }
                // A reply that is no list of assignments / keys is the driver's fault, said so (an
                // eighth outside tester: it was read as an empty cache).
                guard case .array(let itemsA) = repliedA, case .array(let itemsF) = repliedF,
                      itemsA.allSatisfy({ $0["experiment_key"]?.stringValue != nil }), itemsF.allSatisfy({ $0.stringValue != nil }) else {
                    problems.append(("client '\(client)' answered getAssignments with \(repliedA) and getEvaluatedFlags with \(repliedF) for user '\(Attribution.show(user))': not the lists the driver protocol gives (Documentation/DriverProtocol.md), so the cache cannot be compared with the history",
                                     relevant(c, user: user)))
                    continue
                }
                let gotA = assignmentKeys(repliedA), gotF = strings(repliedF)
                listedA += gotA.count
                listedF += gotF.count
                if !CacheModel.consistent(gotA, entriesA) && !CacheModel.consistentListing(gotA, entriesA) {
                    problems.append(("client '\(client)' caches assignments \(gotA) for user '\(Attribution.show(user))'; the history supports \(wantA)" + cacheRule(want: wantA, got: gotA, twins: twins, closed: closedClient),
                                     relevant(c, user: user)))
                }
                for wrong in CacheModel.unexplainedValues(itemsA, entriesA) {
                    problems.append(("client '\(client)' caches assignment '\(Attribution.show(wrong.key))' for user '\(Attribution.show(user))' as \(wrong.listed), but the answers the history lets it hold there are \(wrong.allowed)"
                                     + " (CONTRACT.md section 5, defect 1: a response to a request sent before a clear is never cached; section 4: a cache per exact (user id, key))",
                                     relevant(c, user: user)))
                }
                if !CacheModel.consistent(gotF, entriesF) {
                    problems.append(("client '\(client)' caches flags \(gotF) for user '\(Attribution.show(user))'; the history supports \(wantF)" + cacheRule(want: wantF, got: gotF, twins: twins, closed: closedClient),
                                     relevant(c, user: user)))
                }
                // CONTRACT.md section 3: `cacheSize` bounds each in-memory cache. Whatever the
                // eviction order (the contract names none), no cache lists more entries of one user
                // than that (a tenth outside tester: an SDK ignoring the size passed every check).
                let size = c.settings(of: client).cacheSize
                for (what, got) in [("assignments", gotA), ("flags", gotF)] where got.count > size {
                    problems.append(("client '\(client)' caches \(got.count) \(what) for user '\(Attribution.show(user))', more than its cache_size of \(size) (CONTRACT.md section 3: cacheSize bounds the in-memory cache)",
                                     relevant(c, user: user)))
                }
            }
        }
        return problems
    }

    /// The user id of a lookup's `invoke` detail: its `user`, a text or a `{"id", "attributes"}`
    /// object; `nil` when it has none.
    static func invokedUser(_ detail: JSONValue?) -> String? {
        switch detail?["user"] {
        case .string(let u)?: return u
        case .object(let o)?: return o["id"]?.stringValue
        default: return nil
        }
    }

    /// What a lookup's `invoke` event asks for: its client, `"flag"` or `"experiment"`, user and
    /// key; `nil` for any other event (or one missing a part).
    static func lookupTarget(_ invoke: HistoryEvent) -> (client: String, kind: String, user: String, key: String)? {
        guard let client = invoke.client, ["evaluateFlag", "getAssignment"].contains(invoke.name ?? "") else { return nil }
        let kind = invoke.name == "evaluateFlag" ? "flag" : "experiment"
        guard case .string(let key)? = invoke.detail?[kind == "flag" ? "flag" : "experiment"], let user = invokedUser(invoke.detail) else { return nil }
        return (client, kind, user, key)
    }

    /// The first `complete` event of each operation label (labels compare by Unicode scalars).
    /// Where each tracking call (`track`, `trackWithStatus`, `trackBatch`, the reference app's
    /// `app.event`) ran: its client and the history indices of its invoke and first completion
    /// (`Int.max` while it runs).
    static func trackingWindows(_ c: CheckContext) -> [(client: String?, from: Int, to: Int)] {
        let completes = firstCompletions(c)
        return c.history.filter { $0.kind == .invoke && ["track", "trackWithStatus", "trackBatch", "app.event"].contains($0.name ?? "") }
            .map { (client: $0.client, from: $0.index, to: $0.label.flatMap { completes[ExactKey($0)]?.index } ?? Int.max) }
    }

    static func firstCompletions(_ c: CheckContext) -> [ExactKey: HistoryEvent] {
        var completes: [ExactKey: HistoryEvent] = [:]
        for e in c.history where e.kind == .complete {
            if let label = e.label, completes[ExactKey(label)] == nil { completes[ExactKey(label)] = e }
        }
        return completes
    }

    /// A `trackWithStatus` or `trackBatch` call, or a reference-app `event` call (its SDK call, a
    /// `trackWithStatus`: CONTRACT.md section 8), that returned `true` had every tracking request
    /// of its own delivered before it returned (CONTRACT.md section 3: `trackWithStatus -> Bool`,
    /// `trackBatch -> Bool` report delivery): answered 2xx, whole, and a `/batch` answered with
    /// no whole `failure_count` of 1 or more (section 5, defect 5). Its own requests are the tracking
    /// requests of its client received while it ran, except those another tracking call of the
    /// client may have sent: one begun before the request came and not finished before this one
    /// began with a tracking request of its client received while it ran (a call that returned
    /// after its own request was seen sends no more) and whose events (user and name, exact) fit
    /// the request's: such a request is nobody's in particular, and a request or a call whose
    /// events are not known (an app action with no SDK call reported) fits any. An app event's
    /// SDK call stands for the runner's `app.event` action around it.
    /// Before, an SDK that reported `true` at once, a closed client's batch cut short after one
    /// chunk of two or a request still held, passed every named check (an outside tester); a
    /// call that any other tracking call overlapped was not judged at all, so `true` after its
    /// own `/track` got 500 passed beside another user's held event, and a `/batch` answered 200
    /// with `failure_count` 1 reported `true` passed every named check (a fifty-sixth outside
    /// tester, B and C); an app event was never judged, and an earlier finished call of the same
    /// event excused every later one (a fifty-seventh, A and B). A request whose every possible
    /// sender returned `true` before it was delivered fails them, whichever was its sender.
    static func trueBeforeDelivery(_ c: CheckContext, appEvents: AppEventFanOut) -> [(String, [String])] {
        // Clients by number (names compared by scalars once, not per pair).
        var clientNumbers: [ExactKey: Int] = [:]
        func number(_ client: String?) -> Int {
            guard let client else { return -1 }
            if let n = clientNumbers[ExactKey(client)] { return n }
            clientNumbers[ExactKey(client)] = clientNumbers.count
            return clientNumbers.count - 1
        }
        struct Call {
            let clientNumber: Int, from: Int, to: Int
            /// Its events; `nil`: not known.
            let events: [TrackedEvent]?
            /// Judged (it reports delivery) and returned `true`.
            let claimsDelivery: Bool
            let shown: String
            /// It surely sent a request: a keyed event (one `/track`; a `trackBatch`'s keyed event
            /// goes into a `/batch` as it is).
            var mustSend = false
            /// A keyed `trackWithStatus`: its event's exact user, name, experiment and flag key.
            var trackContent: String?
        }
        func content(user: JSONValue?, name: JSONValue?, experiment: JSONValue?, flag: JSONValue?) -> String? {
            guard case .string(let u)? = user, case .string(let n)? = name else { return nil }
            return eventContentKey(user: u, name: n, experiment: experiment, flag: flag)
        }
        let completes = firstCompletions(c)
        let appCalls = appEvents.calls.values.sorted { $0.start < $1.start }
        var calls: [Call] = []
        for e in c.history where e.kind == .invoke && ["track", "trackWithStatus", "trackBatch", "app.event"].contains(e.name ?? "") {
            guard let client = e.client else { continue }
            let to = e.label.flatMap { completes[ExactKey($0)]?.index } ?? Int.max
            if e.name == "app.event", appCalls.contains(where: { $0.client.isExactly(client) && e.index < $0.start && $0.end <= to }) { continue }
            let claims = ["trackWithStatus", "trackBatch"].contains(e.name ?? "") && to < c.history.count && c.history[to].outcome?["value"] == .bool(true)
            var call = Call(clientNumber: number(client), from: e.index, to: to, events: trackedEvents(e), claimsDelivery: claims,
                            shown: "\(e.name!) '\(Attribution.show(e.label ?? ""))'")
            let given = e.name == "trackBatch" ? e.detail?.arrayValue ?? [] : e.name == "trackWithStatus" ? [e.detail ?? .null] : []
            call.mustSend = given.contains { present($0["experiment"]) != nil || present($0["flag"]) != nil }
            if e.name == "trackWithStatus", call.mustSend, let d = e.detail {
                call.trackContent = content(user: d["user"], name: d["name"], experiment: d["experiment"], flag: d["flag"])
            }
            calls.append(call)
        }
        for a in appCalls {
            let claims = a.end < c.history.count && c.history[a.end].detail?["outcome"]?["value"] == .bool(true)
            calls.append(Call(clientNumber: number(a.client), from: a.start, to: a.end, events: [TrackedEvent(user: exact(a.user), name: a.name.map(exact))],
                              claimsDelivery: claims,
                              shown: "app call \(a.id) (app.event '\(Attribution.show(a.name ?? "?"))' as '\(Attribution.show(a.user))')"))
        }
        var answered: [Int: Int] = [:]   // seq -> history index of its response
        for e in c.history where e.kind == .response { if let seq = e.request?.seq, answered[seq] == nil { answered[seq] = e.index } }
        let requests = c.requests.filter { ["/api/v1/tracking/track", "/api/v1/tracking/batch"].contains($0.record.path) }
            .map { (event: $0.event, record: $0.record, events: sentEvents($0.record), clientNumber: number($0.record.client)) }
        // Computed once and read as plain arrays in the loops below (comparing every call per
        // request and call, copying history events, took 50 s for a thousand identical calls):
        // each request's history index, client and events; whether each call had a tracking
        // request of its client received while it ran; per request, the calls that may have sent
        // it by their events (its client, begun before it).
        let at = requests.map(\.event.index), from = requests.map(\.clientNumber), carried = requests.map(\.events)
        let sentWhileRunning = calls.map { k in
            at.indices.contains { from[$0] == k.clientNumber && k.from < at[$0] && at[$0] < k.to }
        }
        let senders = requests.indices.map { r in
            calls.indices.filter { j in
                calls[j].clientNumber == from[r] && calls[j].from < at[r] && Self.mayHaveSent(calls[j].events, carried[r])
            }
        }
        /// The events a `/batch` answer refused: its `failure_count` when a whole number from 1 to
        /// 2^53 (the backend's counts); any other value says nothing the contract defines (an SDK
        /// may read 0.5 as 0 or as a failure), so it is not held against either answer.
        func refused(_ r: RequestRecord) -> Int? {
            guard r.path == "/api/v1/tracking/batch", let n = r.response?["failure_count"]?.numberValue,
                  n >= 1, n <= 9_007_199_254_740_992, n == n.rounded() else { return nil }
            return Int(n)
        }
        // When each request was answered delivered (2xx, whole, nothing refused), else nil.
        let deliveredAt: [Int?] = requests.map { r in
            guard let at = answered[r.record.seq], r.record.succeeded, refused(r.record) == nil else { return nil }
            return at
        }
        func delivered(_ r: Int, by end: Int) -> Bool { deliveredAt[r].map { $0 < end } ?? false }
        var problems: [(String, [String])] = []
        var judged: Set<Int> = []
        for (i, call) in calls.enumerated() where call.claimsDelivery {
            var found = false
            for r in requests.indices where from[r] == call.clientNumber && at[r] > call.from && at[r] < call.to {
                // Another call may have sent it (by its events; not one that had returned before
                // this call began, its own request seen): then whose it is is not known.
                if senders[r].contains(where: { j in j != i && !(calls[j].to < call.from && sentWhileRunning[j]) }) { continue }
                let record = requests[r].record
                let answer = answered[record.seq]
                let failures = refused(record)
                guard answer == nil || answer! > call.to || !record.succeeded || failures != nil else { continue }
                let what = answer == nil || answer! > call.to ? "had no answer yet"
                    : !record.succeeded ? "was answered \(record.status.map(String.init) ?? "with no status")"
                    : "was answered \(record.status.map(String.init) ?? "") with failure_count \(failures ?? 0)"
                problems.append(("\(call.shown) returned true, but request #\(record.seq) it sent \(what) when it returned "
                                 + "(CONTRACT.md section 3: the result reports delivery; section 5, defect 5: a /batch answered 200 with failure_count > 0 reports false)",
                                 c.excerpt([call.from, at[r], call.to])))
                found = true
                break
            }
            // Whoever sent which: a call that surely sent a request has one among those its events
            // fit, so when none of them was delivered its own was not (two identical calls whose
            // every request failed told nothing apart and were never judged: a fifty-seventh
            // outside tester, D).
            if !found, call.mustSend, let mine = call.events {
                let fitting = requests.indices.filter { r in
                    from[r] == call.clientNumber && at[r] > call.from && at[r] < call.to
                        && (carried[r].map { sent in !sent.isEmpty && sent.allSatisfy { e in mine.contains { $0.mayBe(e) } } } ?? false)
                }
                if !fitting.isEmpty, !fitting.contains(where: { delivered($0, by: call.to) }) {
                    problems.append(("\(call.shown) returned true, but none of the requests it may have sent ("
                                     + fitting.prefix(4).map { "#\(requests[$0].record.seq)" }.joined(separator: ", ") + ") was delivered when it returned "
                                     + "(CONTRACT.md section 3: the result reports delivery; section 5, defect 5: a /batch answered 200 with failure_count > 0 reports false)",
                                     c.excerpt([call.from] + fitting.prefix(4).map { at[$0] } + [call.to])))
                    found = true
                }
            }
            if found { judged.insert(i) }
        }
        // A request is some call's: when every call that may have sent it returned `true` before
        // it was delivered, one of them lied, whichever it was (two identical `trackBatch` calls
        // at once, one `/batch` delivered and one answered with `failure_count` 1, both `true`,
        // told nothing apart: a fifty-seventh outside tester, D, for batches). A plain `track`
        // among them, or one that returned `false` or never returned, may be its sender: no verdict.
        for r in requests.indices {
            let possible = senders[r]
            guard !possible.isEmpty, !possible.contains(where: judged.contains),
                  possible.allSatisfy({ calls[$0].claimsDelivery && !delivered(r, by: calls[$0].to) }) else { continue }
            let record = requests[r].record
            let answer = answered[record.seq]
            let what = answer == nil || deliveredAt[r] != nil ? "had no answer yet when \(possible.count == 1 ? "it" : "they") returned"
                : !record.succeeded ? "was answered \(record.status.map(String.init) ?? "with no status")"
                : "was answered \(record.status.map(String.init) ?? "") with failure_count \(refused(record) ?? 0)"
            let names = possible.prefix(4).map { calls[$0].shown }.joined(separator: ", ") + (possible.count > 4 ? " and \(possible.count - 4) more" : "")
            problems.append(("\(names) returned true, but request #\(record.seq), which only \(possible.count == 1 ? "it" : "they") may have sent "
                             + "(by its client, time and events), \(what) "
                             + "(CONTRACT.md section 3: the result reports delivery; section 5, defect 5: a /batch answered 200 with failure_count > 0 reports false)",
                             c.excerpt(possible.prefix(4).map { calls[$0].from } + [at[r]] + possible.prefix(4).map { calls[$0].to })))
            judged.formUnion(possible)
        }
        // Keyed status calls of one event that all returned `true` need a delivered `/track` each
        // (a keyed event goes out as one `/track`, one request serving one call: CONTRACT.md
        // section 4, as `keyedTracksSent` holds): a maximum matching of calls to the delivered
        // `/track` requests of their event received while each ran. Before, two identical calls at
        // once, one request delivered and one dropped, both `true`, passed (a fifty-seventh tester, D).
        var byContent: [String: [Int]] = [:]
        for (i, call) in calls.enumerated() where call.claimsDelivery && !judged.contains(i) {
            if let k = call.trackContent { byContent[k, default: []].append(i) }
        }
        for (k, group) in byContent.sorted(by: { $0.key.unicodeScalars.lexicographicallyPrecedes($1.key.unicodeScalars) }) where group.count > 1 {
            let tracks = requests.indices.filter { j in
                let r = requests[j].record
                guard r.path == "/api/v1/tracking/track", let body = r.body else { return false }
                return content(user: body["user_id"], name: body["event_name"], experiment: body["experiment_key"], flag: body["feature_flag_key"]) == k
            }
            let options = group.map { i in
                tracks.filter { j in
                    from[j] == calls[i].clientNumber && calls[i].from < at[j] && at[j] < calls[i].to && delivered(j, by: calls[i].to)
                }
            }
            var owner: [Int: Int] = [:]   // request index -> position in group
            func augment(_ g: Int, _ seen: inout Set<Int>) -> Bool {
                for j in options[g] where !seen.contains(j) {
                    seen.insert(j)
                    if owner[j] == nil || augment(owner[j]!, &seen) { owner[j] = g; return true }
                }
                return false
            }
            // A free request first for every call (most are matched so), then augmenting paths.
            var matched = Set<Int>()
            for g in group.indices {
                if let j = options[g].first(where: { owner[$0] == nil }) { owner[j] = g; matched.insert(g) }
            }
            let unmatched = group.indices.filter { g in
                if matched.contains(g) { return false }
                var seen: Set<Int> = []
                return !augment(g, &seen)
            }
            guard let g = unmatched.first else { continue }
            let call = calls[group[g]]
            let sent = tracks.filter { j in from[j] == call.clientNumber && call.from < at[j] && at[j] < call.to }
            problems.append(("\(call.shown) returned true, but \(group.count) calls of its event returned true and only \(group.count - unmatched.count) of them can have "
                             + "a delivered /track of their own (sent while it ran: " + sent.prefix(4).map { "#\(requests[$0].record.seq)" }.joined(separator: ", ") + ") "
                             + "(CONTRACT.md section 3: the result reports delivery; section 4: a keyed event goes out as one /track)",
                             c.excerpt(group.map { calls[$0].from } + sent.prefix(4).map { at[$0] })))
        }
        return problems
    }

    /// Whether every number in `v` is finite (a JSON encoder writes it).
    static func allFinite(_ v: JSONValue) -> Bool {
        switch v {
        case .number(let x): return x.isFinite
        case .array(let a): return a.allSatisfy(allFinite)
        case .object(let o): return o.values.allSatisfy(allFinite)
        default: return true
        }
    }

    /// A `trackWithStatus` or `trackBatch` that returned `false` met a failure: a tracking request
    /// of its client that failed while it ran (answered with a status other than 2xx, dropped or
    /// cut off, a 2xx body that is no JSON object, or a `/batch` answered with a `failure_count`
    /// other than 0), since the result
    /// reports delivery and failures are never cached (CONTRACT.md sections 3 and 4; section 5,
    /// defect 5). A request still unanswered when it returned, one answered 2xx with nothing
    /// refused, or one the SDK itself ended explains nothing. Not judged: a call given up while it
    /// ran (a `cancel` step, a `close()`), one begun after its client's `close()`, one that may
    /// have met its SDK's deadline (`CheckContext.mayHaveMetItsDeadline`), one the runner cancelled
    /// at the end, a client whose `base_url` is not the mock, a request that may fail before the
    /// mock records it (`CheckContext.mayFailBeforeTheMock`), an event holding a number no JSON
    /// encoder writes; a `trackBatch` holding no keyed event (its fan-out may send nothing).
    ///
    /// Before, an SDK that stopped sending after a failure (a circuit breaker left open) and
    /// reported `false` passed every named check (a sibling of the fifty-ninth outside tester's F1
    /// to F3), and so did one whose `close()` of one client ended another client's held `/track`,
    /// which then reported `false` although the event was stored (a sixty-fifth outside tester).
    static func falseWithoutSending(_ c: CheckContext) -> [(String, [String])] {
        let completes = firstCompletions(c)
        let givenUp = givenUpWhileRunning(c)
        let tracking = c.requests.filter { ["/api/v1/tracking/track", "/api/v1/tracking/batch"].contains($0.record.path) }
        var answeredAt: [Int: Int] = [:]   // seq -> history index of its answer
        for e in c.history where e.kind == .response { if let seq = e.request?.seq, answeredAt[seq] == nil { answeredAt[seq] = e.index } }
        /// Whether `r` failed as an SDK may read it: not 2xx, no status (dropped), cut off, a body
        /// parsers read differently or no JSON object, or a `/batch` `failure_count` other than 0
        /// (any value but a plain 0 or `null` may be read as a refusal). Never one the SDK ended.
        func failed(_ r: RequestRecord) -> Bool {
            if r.cancelled { return false }
            if !r.succeeded || r.cutOff == true || r.ambiguousBody == true { return true }
            // A 2xx body that is no JSON object (malformed, empty: a 204) may be read as a failure
            // (CONTRACT.md section 4 counts an undecodable body as one; a sixty-seventh outside
            // tester, F4: such a `false` failed).
            guard case .object(let body)? = r.response else { return true }
            guard r.path == "/api/v1/tracking/batch", let count = body["failure_count"] else { return false }
            return count != .number(0) && count != .null
        }
        var closedAt: [ExactKey: Int] = [:]
        var problems: [(String, [String])] = []
        for e in c.history where e.kind == .invoke {
            guard let client = e.client else { continue }
            if e.name == "close" { closedAt[ExactKey(client)] = closedAt[ExactKey(client)] ?? e.index; continue }
            guard let name = e.name, ["trackBatch", "trackWithStatus"].contains(name), let label = e.label, let detail = e.detail,
                  let done = completes[ExactKey(label)], done.outcome?["value"] == .bool(false) else { continue }
            if name == "trackBatch" {
                let events = detail.arrayValue ?? []
                guard events.contains(where: { present($0["experiment"]) != nil || present($0["flag"]) != nil }) else { continue }
            }
            guard allFinite(detail), !c.mayFailBeforeTheMock(client: client), (closedAt[ExactKey(client)] ?? Int.max) > e.index,
                  !givenUp(e, done.index), done.index < c.runnerCancelledFrom else { continue }
            let mine = tracking.filter { r in r.record.client.isExactly(client) && e.index < r.event.index && r.event.index < done.index }
            if mine.contains(where: { r in answeredAt[r.record.seq].map { $0 < done.index } == true && failed(r.record) }) { continue }
            if !mine.isEmpty && c.mayHaveMetItsDeadline(client: client, from: e.index, to: done.index) { continue }
            let what: String
            if mine.isEmpty {
                what = "without sending any tracking request while it ran"
                    + (name == "trackBatch" ? ": its keyed events go out as /batch entries, whatever happened to earlier ones" : "")
            } else {
                let seqs = mine.prefix(4).map { "#\($0.record.seq)" }.joined(separator: ", ") + (mine.count > 4 ? " and \(mine.count - 4) more" : "")
                what = "though no tracking request of its client failed while it ran (\(seqs): delivered, still unanswered, or ended by the SDK itself), "
                    + "nothing gave it up and its deadline (timeout \(secondsText(c.settings(of: client).timeout)) s) had not passed"
            }
            problems.append(("\(name) '\(Attribution.show(label))' returned false \(what) "
                             + "(CONTRACT.md section 3: the result reports delivery; section 4: failures are never cached; "
                             + "section 5.1: another client's close or a clear leaves a call its answer)",
                             c.excerpt([e.index] + mine.prefix(4).map(\.event.index) + [done.index])))
        }
        return problems
    }

    /// A keyed event's content as a dictionary key: its exact user, name, experiment key and flag
    /// key (`-` for one absent, null or not text), joined by NUL, equal only when every part's
    /// Unicode scalars are (CONTRACT.md section 4: identity is exact).
    static func eventContentKey(user: String, name: String, experiment: JSONValue?, flag: JSONValue?) -> String {
        [exact(user), exact(name), present(experiment)?.stringValue.map(exact) ?? "-", present(flag)?.stringValue.map(exact) ?? "-"].joined(separator: "\u{0}")
    }

    /// One tracked event for attribution: its exact user and exact name (`nil`: not known).
    struct TrackedEvent {
        var user: String
        var name: String?
        /// Whether the two may be one event: the same user, and the same name where both are known.
        func mayBe(_ other: TrackedEvent) -> Bool { user == other.user && (name == nil || other.name == nil || name == other.name) }
    }

    /// The events a tracking call's `invoke` gave (`track`, `trackWithStatus`: one; `trackBatch`:
    /// each), users and names by their scalars; `nil` when they are not known (an app event, whose
    /// user is the app's identity).
    static func trackedEvents(_ invoke: HistoryEvent) -> [TrackedEvent]? {
        func one(_ e: JSONValue) -> TrackedEvent? {
            guard case .string(let user)? = e["user"], case .string(let name)? = e["name"] else { return nil }
            return TrackedEvent(user: exact(user), name: exact(name))
        }
        switch invoke.name {
        case "track", "trackWithStatus": return invoke.detail.flatMap(one).map { [$0] }
        case "trackBatch":
            guard let items = invoke.detail?.arrayValue else { return nil }
            let events = items.compactMap(one)
            return events.count == items.count ? events : nil
        default: return nil
        }
    }

    /// The events a `/track` or `/batch` request carries (`user_id`, and `event_name` when sent);
    /// `nil` when its body cannot say (no body, an entry without a text `user_id`).
    static func sentEvents(_ r: RequestRecord) -> [TrackedEvent]? {
        func one(_ e: JSONValue) -> TrackedEvent? {
            guard case .string(let user)? = e["user_id"] else { return nil }
            return TrackedEvent(user: exact(user), name: e["event_name"]?.stringValue.map(exact))
        }
        guard let body = r.body else { return nil }
        if r.path == "/api/v1/tracking/track" { return one(body).map { [$0] } }
        guard let items = body["events"]?.arrayValue else { return nil }
        let events = items.compactMap(one)
        return events.count == items.count ? events : nil
    }

    /// Whether a call that tracked `called` may have sent a request carrying `sent`: some event in
    /// common, or either not known.
    static func mayHaveSent(_ called: [TrackedEvent]?, _ sent: [TrackedEvent]?) -> Bool {
        guard let called, let sent else { return true }
        return sent.contains { e in called.contains { $0.mayBe(e) } }
    }

    /// Whether a tracking call was given up while it ran: a `cancel` step of its label (or of
    /// its `times` group) or a `close()` of its client between its invocation and `to` (its
    /// completion's history index). Such a call may stop before its later chunks: CONTRACT.md
    /// section 4's "still sends later chunks after a failure" is about a chunk that failed, not
    /// a caller that gave up (a thirty-seventh outside tester, F6: a cancelled `trackBatch` that
    /// stopped after its first chunk failed `fan_out` and `batch_chunking`).
    static func givenUpWhileRunning(_ c: CheckContext) -> (_ invoke: HistoryEvent, _ to: Int) -> Bool {
        let cancels = c.history.filter { $0.kind == .marker && $0.name == "cancel" && $0.label != nil }
        let closes = c.history.filter { $0.kind == .invoke && $0.name == "close" && $0.client != nil }
        return { invoke, to in
            guard let label = invoke.label else { return false }
            // `times` copies are labelled `base#n`; a cancel names the base. A copy is an
            // invocation of a step with `times` above 1 (its own label, or none: an automatic one),
            // so `view#2` written as a label of its own is no copy, whatever group `view` names
            // (a sixty-second and a sixty-third outside tester: cancelling `view` excused it).
            var base = label
            if let hash = label.unicodeScalars.lastIndex(of: "#"), c.scenario.steps.indices.contains(invoke.step),
               case .sdk(_, _, let stepLabel, _, let count, _) = c.scenario.steps[invoke.step], count > 1 {
                let digits = label.unicodeScalars[label.unicodeScalars.index(after: hash)...]
                let stripped = String(label.unicodeScalars[..<hash])
                if !digits.isEmpty, digits.allSatisfy({ ("0"..."9").contains($0) }), stepLabel.map({ $0.isExactly(stripped) }) ?? true { base = stripped }
            }
            let cancelled = cancels.contains { m in
                m.index > invoke.index && m.index < to && (m.label!.isExactly(label) || m.label!.isExactly(base))
            }
            return cancelled || closes.contains { e in e.index > invoke.index && e.index < to && e.client!.isExactly(invoke.client ?? "") }
        }
    }

    /// A number of seconds as a message shows it: `10` for a whole number, `0.25` otherwise.
    static func secondsText(_ t: Double) -> String { t == t.rounded() && abs(t) < 1e15 ? String(Int(t)) : String(t) }

    /// `v`, or `nil` when it is JSON `null`: a member sent as `null` is as good as absent.
    static func present(_ v: JSONValue?) -> JSONValue? { v == .null ? nil : v }

    /// `text` as a string that is equal to another only when their Unicode scalars are: the
    /// scalars' hexadecimal values, for dictionary keys and comparisons of identity data
    /// (Swift `String` equality is canonical equivalence; CONTRACT.md section 4).
    static func exact(_ text: String) -> String {
        // Written byte by byte (the same text as `map { String($0.value, radix: 16) }.joined(separator: ".")`,
        // which allocated a string per scalar and was a tenth of the checks' time).
        let digits: StaticString = "0123456789abcdef"
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count * 3)
        for (n, scalar) in text.unicodeScalars.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ".")) }
            let v = scalar.value
            var shift = 20
            while shift > 0 && (v >> UInt32(shift)) == 0 { shift -= 4 }
            while shift >= 0 {
                out.append(digits.utf8Start[Int((v >> UInt32(shift)) & 0xF)])
                shift -= 4
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The rule a cache mismatch breaks: an entry the history does not support (CONTRACT.md
    /// section 5 defect 1, or a failure cached, section 4), or a success lost (section 4).
    ///
    /// `closed`: the client was closed; then an entry from before the `close()` is named as the
    /// likely cause (a sixty-sixth outside tester: an SDK whose `close()` kept its memory cache
    /// was told of TTLs, defect 1 and failures, not of `close()`).
    static func cacheRule(want: [String], got: [String], twins: [String] = [], closed: Bool = false) -> String {
        let wanted = Set(want.map(exact))
        if got.contains(where: { !wanted.contains(exact($0)) }) {
            if closed && twins.isEmpty {
                return " (close() empties the memory cache, as the upstream SDK documents its close(): it clears all in-memory caches and releases resources, "
                    + "CONTRACT.md section 3 and DriverProtocol.md; otherwise no answer the history holds leaves such an entry: one kept past its TTL, "
                    + "section 4; a response to a request sent before a clear, section 5, defect 1; or a failure, section 4)"
            }
            // A user whose canonically equivalent twin (NFC beside NFD) the history has: the entry
            // is most likely the twin's under a merged key (a thirty-seventh outside tester, F9:
            // such a merge was named a stale write after a clear).
            if let twin = twins.first {
                return " (CONTRACT.md section 4: identity is exact, user ids equal only when their Unicode scalars are: '\(Attribution.show(twin))' is another user, whose entry this may be; section 5, defect 1: a response to a request sent before a clear is never cached)"
            }
            // Which of the three the history shows is not decided here: each is named (a
            // forty-second outside tester, F3: a TTL of 0 served as 300 s read as "a stale write
            // after a clear" in a scenario with no clear and no failure).
            return " (no answer the history holds leaves such an entry: one kept past its TTL, CONTRACT.md section 4: fresh while now < stored + cacheTTL; "
                + "a response to a request sent before a clear, section 5, defect 1; or a failure, section 4: failures are never cached)"
        }
        return " (CONTRACT.md section 4: every success is cached for the TTL, in insertion order)"
    }

    static func relevant(_ c: CheckContext, user: String) -> [String] {
        Array(c.history.filter { e in
            (e.request?.users.contains(user) ?? false) || ["clearCache", "close", "logout", "undo", "clearOfflineCache"].contains(e.name ?? "")
        }.suffix(10).map(\.line))
    }

    static func assignmentKeys(_ v: JSONValue) -> [String] {
        guard case .array(let items) = v else { return [] }
        return items.compactMap { if case .string(let k)? = $0["experiment_key"] { return k } else { return nil } }
    }

    static func strings(_ v: JSONValue) -> [String] {
        guard case .array(let items) = v else { return [] }
        return items.compactMap { if case .string(let s) = $0 { return s } else { return nil } }
    }

    // MARK: fan-out and batch chunking

    /// A keyed event (`track`, `trackWithStatus` with an experiment or flag) goes out once, as one
    /// `/track` (CONTRACT.md section 4): for every event content (client, exact user, name,
    /// experiment and flag key), the `/track` requests carrying it are no more than the runner's
    /// calls that sent it (copies of a `times` step and identical calls each count), the reference
    /// app's keyed `event` calls included (not judged on an app client where an event call's name or
    /// source is left open). Before, an SDK that sent
    /// each keyed event twice passed every named check (`event_payload` accepts each copy, `fan_out`
    /// judged unkeyed events only: a fifteenth outside tester).
    static func duplicateKeyedTracks(_ c: CheckContext, appEvents: AppEventFanOut) -> [(String, [String])] {
        // Every client is judged (a thirty-third outside tester, F6: any app section switched the
        // rule off for all), an app client when every event call of its app is known (name and
        // source: `unjudged` holds the others); each keyed app event counts as a call with the
        // app's experiment.
        let events = appEvents.calls.values
        let unjudged = Set(c.scenario.app == nil ? [] : c.scenario.appClients.map(exact).filter { client in
            events.contains { exact($0.client) == client && $0.name == nil }
        })
        var calls: [String: (count: Int, invokes: [Int], shown: String)] = [:]
        for call in events.sorted(by: { $0.start < $1.start }) where call.keyed && !unjudged.contains(exact(call.client)) {
            guard let name = call.name, let app = c.scenario.appSettings(client: call.client) else { continue }
            let k = exact(call.client) + "\u{0}" + eventContentKey(user: call.user, name: name, experiment: .string(app.experiment), flag: nil)
            var entry = calls[k] ?? (0, [], "event '\(Attribution.show(name))' of user '\(Attribution.show(call.user))' for experiment '\(Attribution.show(app.experiment))' on client '\(Attribution.show(call.client))' (the reference app's)")
            entry.count += 1
            entry.invokes.append(call.start)
            calls[k] = entry
        }
        /// The keyed calls by client, user and event name: a request whose keys no call gave is
        /// shown beside the call of that user and name that ran (a seventy-third outside tester:
        /// an SDK dropping an empty experiment key was told only "no call tracked it").
        var sameEvent: [String: [(invoke: Int, shown: String)]] = [:]
        for e in c.history where e.kind == .invoke && ["track", "trackWithStatus"].contains(e.name ?? "") {
            guard let client = e.client, !unjudged.contains(exact(client)), let event = e.detail, event["experiment"] != nil || event["flag"] != nil,
                  case .string(let user)? = event["user"], case .string(let name)? = event["name"] else { continue }
            let k = exact(client) + "\u{0}" + eventContentKey(user: user, name: name, experiment: event["experiment"], flag: event["flag"])
            var entry = calls[k] ?? (0, [], "event '\(Attribution.show(name))' of user '\(Attribution.show(user))'"
                + (event["experiment"]?.stringValue.map { " for experiment '\(Attribution.show($0))'" } ?? "")
                + (event["flag"]?.stringValue.map { " for flag '\(Attribution.show($0))'" } ?? "") + " on client '\(Attribution.show(client))'")
            entry.count += 1
            entry.invokes.append(e.index)
            calls[k] = entry
            sameEvent[exact(client) + "\u{0}" + exact(user) + "\u{0}" + exact(name), default: []].append((e.index, entry.shown))
        }
        var sent: [String: [(seq: Int, index: Int)]] = [:]
        var shownSent: [String: String] = [:], clientSent: [String: String] = [:]
        var sentEvent: [String: String] = [:]   // content key -> client, user and name key of `sameEvent`
        for (e, r) in c.requests where r.path == "/api/v1/tracking/track" {
            guard let client = r.client, !unjudged.contains(exact(client)), let body = r.body, case .string(let user)? = body["user_id"] else { continue }
            guard case .string(let name)? = body["event_name"] ?? body["event_type"] else { continue }
            let k = exact(client) + "\u{0}" + eventContentKey(user: user, name: name, experiment: body["experiment_key"], flag: body["feature_flag_key"])
            sent[k, default: []].append((r.seq, e.index))
            sentEvent[k] = exact(client) + "\u{0}" + exact(user) + "\u{0}" + exact(name)
            if shownSent[k] == nil {
                clientSent[k] = client
                shownSent[k] = "event '\(Attribution.show(name))' of user '\(Attribution.show(user))'"
                    + (body["experiment_key"]?.stringValue.map { " for experiment '\(Attribution.show($0))'" } ?? "")
                    + (body["feature_flag_key"]?.stringValue.map { " for flag '\(Attribution.show($0))'" } ?? "") + " on client '\(Attribution.show(client))'"
            }
        }
        var problems: [(String, [String])] = []
        // A content no call tracked, sent while a tracking call of its client ran (outside every
        // such call `fanOut`'s window rule names it): the SDK made the event up. Before, an SDK
        // that sent an `$exposure` /track with each lookup passed `fan_out` whenever some keyed
        // call was running, for a user no call had (a forty-second outside tester, F2:
        // Flagsmith/flagsmith-python-client #233).
        let windows = trackingWindows(c)
        for (k, requests) in sent.sorted(by: { $0.value[0].index < $1.value[0].index }) where calls[k] == nil && problems.count < 10 {
            let client = clientSent[k]
            let inside = requests.filter { r in windows.contains { $0.client.isExactly(client) && $0.from < r.index && r.index < $0.to } }
            guard !inside.isEmpty else { continue }
            // The calls of that user and name running then, whose keys differ from the request's.
            let first = inside[0].index
            let running = (sentEvent[k].flatMap { sameEvent[$0] } ?? []).filter { call in
                windows.contains { $0.from == call.invoke && $0.from < first && first < $0.to }
            }
            let others = running.isEmpty ? "the tracking calls running then tracked other events"
                : "the call running then tracked the " + running.map(\.shown).joined(separator: "; the ") + ": the request's keys differ from the call's"
            problems.append(("the \(shownSent[k] ?? "event") was sent in /track request(s) " + inside.map { "#\($0.seq)" }.joined(separator: ", ")
                             + " but no call tracked it (\(others)): an SDK sends the events it is given, "
                             + "a keyed event as one /track (CONTRACT.md section 4)", c.slice(around: inside.map(\.index), radius: 3)))
        }
        guard !calls.isEmpty else { return problems }
        for (k, call) in calls.sorted(by: { $0.key.unicodeScalars.lexicographicallyPrecedes($1.key.unicodeScalars) }) {
            let requests = sent[k] ?? []
            guard requests.count > call.count else { continue }
            problems.append(("the \(call.shown) was tracked by \(call.count) call(s) but sent in \(requests.count) /track requests ("
                             + requests.map { "#\($0.seq)" }.joined(separator: ", ") + "): a keyed event goes out once (CONTRACT.md section 4)",
                             c.excerpt(call.invokes + requests.map(\.index))))
        }
        return problems
    }

    /// Every keyed `track`/`trackWithStatus` call that finished has a `/track` request of its own
    /// (CONTRACT.md section 4: keyed event -> one `/track`), received while it ran, from its client,
    /// carrying exactly its user, name, experiment or flag key (the other key absent) and fields
    /// (`payloadDifferences`); one request serves one call (a maximum matching, so identical calls
    /// share nothing). Judged for a `trackWithStatus` that returned `true` and a `track` that did
    /// not fail, unless it began after its client's `close` or its client has a `base_url` of its
    /// own and sent no request at all (an origin no request can reach). Before, two overlapping calls sent with the first one's
    /// fields, an event sent under another experiment (NFC for an NFD key), under the wrong field
    /// or not at all passed every named check (a nineteenth outside tester).
    static func keyedTracksSent(_ c: CheckContext, appEvents: AppEventFanOut) -> [(String, [String])] {
        let completes = firstCompletions(c)
        let givenUp = givenUpWhileRunning(c)
        // A client on the mock's own origin reaches it; one given a `base_url` only if some
        // request of it arrived (an origin no request can reach sends nothing, correctly).
        var reaching = Set(c.requests.compactMap { $0.record.client.map { ExactKey($0) } })
        for client in c.scenario.clients where client.settings.reachesMock { reaching.insert(ExactKey(client.name)) }
        var closed: Set<ExactKey> = []
        // `app`: how to name a reference app's keyed event call (its `call` marker is `invoke`).
        var calls: [(invoke: HistoryEvent, to: Int, event: JSONValue, client: String, app: String?)] = []
        var closedAt: [ExactKey: Int] = [:]
        for e in c.history where e.kind == .invoke {
            guard let client = e.client else { continue }
            if e.name == "close" { closed.insert(ExactKey(client)); closedAt[ExactKey(client)] = closedAt[ExactKey(client)] ?? e.index; continue }
            guard ["track", "trackWithStatus"].contains(e.name ?? ""), let label = e.label, let event = e.detail,
                  event["experiment"] != nil || event["flag"] != nil, !closed.contains(ExactKey(client)),
                  reaching.contains(ExactKey(client)), let done = completes[ExactKey(label)],
                  case .object(let outcome)? = done.outcome, outcome["error"] == nil else { continue }
            // One that reported `false` sent its `/track` too (a keyed event goes out whatever its
            // answer: CONTRACT.md section 4), one each, unless it may never have reached the mock:
            // given up, a request that may fail before the mock records it, a number no encoder
            // writes (a sixty-second outside tester, F2: identical calls merged into fewer
            // requests, all reporting `false`, passed).
            if e.name == "trackWithStatus" && outcome["value"] != .bool(true) {
                guard outcome["value"] == .bool(false), !givenUp(e, done.index), !c.mayFailBeforeTheMock(client: client), Self.allFinite(event) else { continue }
            }
            calls.append((e, done.index, event, client, nil))
        }
        // The reference app's keyed events (layout_source `assignment`: a `trackWithStatus` with the
        // app's experiment, CONTRACT.md section 8) that returned `true` need their `/track` too
        // (a thirty-third outside tester, F11: dropped, or sent under a flag key, they passed).
        for call in appEvents.calls.values.sorted(by: { $0.start < $1.start }) where call.keyed {
            guard let name = call.name, call.end < c.history.count, let app = c.scenario.appSettings(client: call.client),
                  reaching.contains(ExactKey(call.client)), (closedAt[ExactKey(call.client)] ?? Int.max) > call.start else { continue }
            // Judged when it returned `true`, or when a `/track` of its client came while it ran
            // (then one of them is its own: sent under a flag key, it was answered 404 and the
            // call returned false).
            let sentSome = c.requests.contains { $0.record.path == "/api/v1/tracking/track" && $0.record.client.isExactly(call.client)
                && call.start < $0.event.index && $0.event.index < call.end }
            guard c.history[call.end].detail?["outcome"]?["value"] == .bool(true) || sentSome else { continue }
            let event: JSONValue = .object(["user": .string(call.user), "name": .string(name), "experiment": .string(app.experiment)])
            calls.append((c.history[call.start], call.end, event, call.client,
                          "app call \(call.id) (app.event '\(Attribution.show(name))' as '\(Attribution.show(call.user))')"))
        }
        guard !calls.isEmpty else { return [] }
        let tracks = c.requests.filter { $0.record.path == "/api/v1/tracking/track" && $0.record.body != nil }
        // Requests alike (one client, the same body) form one group: a call compares its fields
        // with each group once and takes the group's requests sent while it ran, a contiguous run
        // (1,000 concurrent keyed calls compared a million pairs: 7 s).
        let alike = AlikeGroups(count: tracks.count, index: { tracks[$0].event.index }) { j in
            Array((tracks[j].record.client.map { "s" + exact($0) } ?? "-").utf8) + [0] + Array((tracks[j].record.body ?? .null).serialized())
        }
        func fits(_ call: Int, group g: Int) -> Bool {
            let r = tracks[alike.groups[g][0]].record
            let k = calls[call]
            guard r.client.isExactly(k.client), let body = r.body else { return false }
            let keys = present(body["user_id"]) == k.event["user"] && present(body["event_name"]) == k.event["name"]
                && present(body["experiment_key"]) == present(k.event["experiment"]) && present(body["feature_flag_key"]) == present(k.event["flag"])
            // The app's event carries `layout_source` (and the variant shown) in its metadata.
            if k.app != nil { return keys && body["metadata"]?["layout_source"] == .string("assignment") }
            return keys && payloadDifferences(sent: body, given: k.event, stopAtFirst: true).isEmpty
        }
        let slices = calls.indices.map { i in
            alike.groups.indices.filter { fits(i, group: $0) }.compactMap { alike.run($0, after: calls[i].invoke.index, before: calls[i].to) }
        }
        let order = calls.indices.sorted { (calls[$0].to, calls[$0].invoke.index, $0) < (calls[$1].to, calls[$1].invoke.index, $1) }
        var problems: [(String, [String])] = []
        for i in unmatched(groups: alike.groups, slices: slices, right: tracks.count, order: order) where problems.count < 10 {
            let k = calls[i]
            let key = k.event["experiment"]?.stringValue.map { "experiment '\(Attribution.show($0))'" }
                ?? k.event["flag"]?.stringValue.map { "flag '\(Attribution.show($0))'" } ?? "?"
            let mine = tracks.filter { $0.record.client.isExactly(k.client) && k.invoke.index < $0.event.index && $0.event.index < k.to }
            let who = k.app ?? "\(k.invoke.name ?? "track") '\(Attribution.show(k.invoke.label ?? ""))'"
            problems.append(("\(who) (event '\(Attribution.show(k.event["name"]?.stringValue ?? "?"))' of user '\(Attribution.show(k.event["user"]?.stringValue ?? "?"))' for \(key)) "
                             + "has no /track request of its own carrying its user, name, key and fields"
                             + (mine.isEmpty ? " (none was sent while it ran)" : " (sent while it ran: " + mine.prefix(4).map { "#\($0.record.seq)" }.joined(separator: ", ")
                                + (slices[i].isEmpty ? ", none of them its own" : ", each one another call's") + ")")
                             + ": a keyed event goes out once, as one /track, as the call gave it (CONTRACT.md section 4; section 1, event object)",
                             c.excerpt([k.invoke.index] + mine.map(\.event.index))))
        }
        return problems
    }

    /// Requests or entries alike, by position: those whose `key` bytes are equal form a group, in
    /// position order (history order), so the members a call may take, those that arrived while it
    /// ran, are one contiguous run of each group (`run`). Keyed by bytes: a `String` key would merge
    /// canonically equivalent text (NFC and NFD user ids or properties), and a call would be
    /// compared with another's body only (a thirty-first outside tester: all six correct SDKs
    /// failed, a broken one passed).
    struct AlikeGroups {
        /// Each group's positions, in order; the first is the one compared.
        private(set) var groups: [[Int]] = []
        private let index: (Int) -> Int

        /// Groups positions `0..<count`; `index(i)` is the history index at which i arrived
        /// (non-decreasing in i).
        init(count: Int, index: @escaping (Int) -> Int, key: (Int) -> [UInt8]) {
            self.index = index
            var of: [[UInt8]: Int] = [:]
            for i in 0..<count {
                let k = key(i)
                if let g = of[k] { groups[g].append(i) } else { of[k] = groups.count; groups.append([i]) }
            }
        }

        /// The run of group `g` that arrived strictly between history indices `after` and
        /// `before`, as `Checks.unmatched` takes a slice; `nil` when empty.
        func run(_ g: Int, after: Int, before: Int) -> (group: Int, from: Int, to: Int)? {
            func firstPast(_ limit: Int) -> Int {
                var (lo, hi) = (0, groups[g].count)
                while lo < hi { let mid = (lo + hi) / 2; if index(groups[g][mid]) <= limit { lo = mid + 1 } else { hi = mid } }
                return lo
            }
            let (from, to) = (firstPast(after), firstPast(before - 1))
            return from < to ? (g, from, to) : nil
        }
    }

    /// The left vertices (`edges.indices`) a maximum matching of the bipartite graph `edges` (left
    /// vertex -> the right vertices in `0..<right` it may take) leaves unmatched, in order.
    static func unmatched(_ edges: [[Int]], right: Int) -> [Int] {
        unmatched(groups: edges, slices: edges.indices.map { [(group: $0, from: 0, to: edges[$0].count)] }, right: right,
                  order: Array(edges.indices))
    }

    /// The left vertices (`slices.indices`) a maximum matching leaves unmatched, in order, where
    /// left vertex i may take the right vertices `groups[g][from..<to]` of each of its slices.
    ///
    /// A first pass gives each left vertex, in `order`, the first free right vertex it may take
    /// (earliest deadline first, `order` sorted by the end of each call's window, matches
    /// everything when the calls are alike); Kuhn's augmenting paths (iterative: a path may be
    /// thousands of calls long) then try each left vertex still unmatched once, and the right
    /// vertices a failed search visited stay visited until a search succeeds (none of them can
    /// lead to a free vertex while the matching is unchanged). Without both, 30 concurrent
    /// identical `trackBatch` calls of 101 events (3,030 entries, 9 million edges) took `fan_out`
    /// 18 s, and 60 passed the scenario's hard deadline (a thirtieth outside tester: a correct
    /// SDK was reported crashed).
    static func unmatched(groups: [[Int]], slices: [[(group: Int, from: Int, to: Int)]], right: Int, order: [Int]) -> [Int] {
        var owner = [Int?](repeating: nil, count: right)
        var matched = [Bool](repeating: false, count: slices.count)
        for i in order where !matched[i] {
            search: for slice in slices[i] {
                for j in groups[slice.group][slice.from..<slice.to] where owner[j] == nil {
                    owner[j] = i
                    matched[i] = true
                    break search
                }
            }
        }
        var seen = [Bool](repeating: false, count: right)
        func augment(_ start: Int) -> Bool {
            // Each frame: a left vertex, its slice and the next position in it; `via[k]` is the
            // right vertex frame k took to reach frame k + 1.
            var stack: [(left: Int, slice: Int, at: Int)] = [(start, 0, slices[start].first?.from ?? 0)]
            var via: [Int] = []
            while !stack.isEmpty {
                var (l, k, at) = stack[stack.count - 1]
                var next: Int?
                while k < slices[l].count {
                    let slice = slices[l][k]
                    if at < slice.to {
                        let j = groups[slice.group][at]
                        at += 1
                        if !seen[j] { seen[j] = true; next = j; break }
                    } else {
                        k += 1
                        at = k < slices[l].count ? slices[l][k].from : 0
                    }
                }
                stack[stack.count - 1] = (l, k, at)
                guard let j = next else {
                    stack.removeLast()
                    if !via.isEmpty { via.removeLast() }
                    continue
                }
                via.append(j)
                if let o = owner[j] {
                    stack.append((o, 0, slices[o].first?.from ?? 0))
                } else {
                    for (d, frame) in stack.enumerated() { owner[via[d]] = frame.left }
                    return true
                }
            }
            return false
        }
        for i in slices.indices where !matched[i] {
            if augment(i) {
                matched[i] = true
                seen = [Bool](repeating: false, count: right)
            }
        }
        return slices.indices.filter { !matched[$0] }
    }

    /// The `/batch` entries `unkeyedCallsSentTheirFields` requires, one per call, event and key,
    /// gathered while `fanOut` replays the caches (one replay for both).
    struct UnkeyedCalls {
        private let completes: [ExactKey: HistoryEvent]
        /// Each required entry: the call, its end (history index), the event given, its client and
        /// the key the entry carries.
        var items: [(invoke: HistoryEvent, to: Int, event: JSONValue, client: String, experiment: String?, flag: String?)] = []

        /// Whether a call was given up while it ran (``Checks/givenUpWhileRunning(_:)``): which of
        /// its entries went out is not known, so none is required here (`fan_out` still takes
        /// its batches as a prefix of its chunks).
        private let givenUp: (HistoryEvent, Int) -> Bool

        init(_ c: CheckContext) { completes = Checks.firstCompletions(c); givenUp = Checks.givenUpWhileRunning(c) }

        /// Takes `e` when it is such a call, with the client's cache model as it is then: an
        /// unkeyed event of `track`, `trackWithStatus` or `trackBatch` needs one entry per cached
        /// key of its user (when the model is sure of them), a keyed event of `trackBatch` one
        /// entry with its own key.
        mutating func visit(_ e: HistoryEvent, _ models: [String: CacheModel]) {
            guard e.kind == .invoke, ["track", "trackWithStatus", "trackBatch"].contains(e.name ?? ""), let client = e.client, let label = e.label,
                  let done = completes[ExactKey(label)], case .object(let outcome)? = done.outcome, outcome["error"] == nil,
                  !givenUp(e, done.index) || outcome["value"] == .bool(true) else { return }
            let batch = e.name == "trackBatch"
            let events: [JSONValue] = batch ? (e.detail?.arrayValue ?? []) : [e.detail ?? .null]
            let model = models[client] ?? CacheModel()
            for event in events {
                guard case .string(let user)? = event["user"], event["name"]?.stringValue != nil else { continue }
                if event["experiment"] != nil || event["flag"] != nil {
                    // A keyed event of a batch is sent as given (a keyed `track` goes to /track).
                    if batch { items.append((e, done.index, event, client, event["experiment"]?.stringValue, event["flag"]?.stringValue)) }
                    continue
                }
                guard !model.overflowed, !model.hasUncertain(user: user, at: e.exactTime) else { continue }
                for a in model.entries(model.assignments, user: user, at: e.exactTime, filter: { $0["assigned"] != .bool(false) }) where !a.optional {
                    items.append((e, done.index, event, client, a.key, nil))
                }
                for f in model.entries(model.flags, user: user, at: e.exactTime) where !f.optional {
                    items.append((e, done.index, event, client, nil, f.key))
                }
            }
        }
    }

    /// Every unkeyed event of a `track`, `trackWithStatus` or `trackBatch` call that finished while
    /// the cache model was sure of its user's entries (not past the cache size, no entry that may
    /// be there or not) has, for each of those entries, a `/batch` entry of its own among the
    /// requests its client sent while the call ran: that entry's key (`experiment_key` or
    /// `feature_flag_key`, the other absent) with the event's user, name and fields
    /// (`payloadDifferences`); so has every keyed event of a `trackBatch`, with its own key. An
    /// entry serves one event and key (a maximum matching). `fanOut` attributes entries by user,
    /// name and key only: overlapping calls of one user and name fanned out with the first one's
    /// value and properties (a nineteenth outside tester), with them on one key only (a twentieth),
    /// or one batch's two events sent with the first one's (a twenty-first) passed every named check.
    static func unkeyedCallsSentTheirFields(_ c: CheckContext, _ gathered: UnkeyedCalls) -> [(String, [String])] {
        let items = gathered.items
        guard !items.isEmpty else { return [] }
        var entries: [(index: Int, seq: Int, client: String?, event: JSONValue)] = []
        for (e, r) in c.requests where r.path == "/api/v1/tracking/batch" {
            for entry in r.events { entries.append((e.index, r.seq, r.client, entry)) }
        }
        // Entries by client, user, name and keys (exact): each item looks at its own only (over
        // every entry, a batch of 100 events with 100 entries each was most of a generated run).
        func identity(_ client: String?, _ user: JSONValue?, _ name: JSONValue?, _ experiment: JSONValue?, _ flag: JSONValue?) -> String {
            func part(_ v: JSONValue?) -> String { if case .string(let s)? = v { return "s" + exact(s) } else { return v == nil || v == .null ? "-" : "?" } }
            return [client.map { "s" + exact($0) } ?? "-", part(user), part(name), part(experiment), part(flag)].joined(separator: "\u{0}")
        }
        // Entries alike (one identity, the same event object) form one group: an item compares its
        // fields with each group of its identity once, and takes the group's entries sent while it
        // ran, a contiguous run.
        let identities = entries.map { x in identity(x.client, x.event["user_id"], x.event["event_name"], x.event["experiment_key"], x.event["feature_flag_key"]) }
        let alike = AlikeGroups(count: entries.count, index: { entries[$0].index }) { j in Array(identities[j].utf8) + [0] + Array(entries[j].event.serialized()) }
        var byIdentity: [String: [Int]] = [:]   // identity (`exact` text) -> its groups
        for (g, members) in alike.groups.enumerated() { byIdentity[identities[members[0]], default: []].append(g) }
        let slices = items.map { k in
            (byIdentity[identity(k.client, k.event["user"], k.event["name"], k.experiment.map(JSONValue.string), k.flag.map(JSONValue.string))] ?? [])
                .filter { payloadDifferences(sent: entries[alike.groups[$0][0]].event, given: k.event, stopAtFirst: true).isEmpty }
                .compactMap { alike.run($0, after: k.invoke.index, before: k.to) }
        }
        let order = items.indices.sorted { (items[$0].to, items[$0].invoke.index, $0) < (items[$1].to, items[$1].invoke.index, $1) }
        var problems: [(String, [String])] = []
        let unmatchedItems = unmatched(groups: alike.groups, slices: slices, right: entries.count, order: order)
        for i in unmatchedItems where problems.count < 10 {
            let k = items[i]
            let key = k.experiment.map { "experiment '\(Attribution.show($0))'" } ?? k.flag.map { "flag '\(Attribution.show($0))'" } ?? "?"
            let keyed = k.event["experiment"] != nil || k.event["flag"] != nil
            let mine = entries.filter { $0.client.isExactly(k.client) && k.invoke.index < $0.index && $0.index < k.to }
            problems.append(("\(k.invoke.name ?? "track") '\(Attribution.show(k.invoke.label ?? ""))' (\(keyed ? "keyed" : "unkeyed") event '\(Attribution.show(k.event["name"]?.stringValue ?? "?"))' of user '\(Attribution.show(k.event["user"]?.stringValue ?? "?"))') "
                             + "has no /batch entry of its own for \(keyed ? "its" : "its user's cached") \(key) carrying its user, name and fields"
                             + (mine.isEmpty ? " (no /batch entry was sent while it ran)" : slices[i].isEmpty ? " (the entries sent while it ran carry other fields or keys)" : " (each such entry is another event's)")
                             + ": an event goes out with the fields its call gave (CONTRACT.md section 4; section 1, event object)",
                             c.excerpt([k.invoke.index] + Array(Set(mine.map(\.index))).sorted().prefix(4))))
        }
        return problems
    }

    /// Every tracking entry of an app's client with the user and name of a reference-app `event`
    /// call in flight carries the fields that call gave (`metadata` = its properties, with
    /// `layout_source`; `event_type` = its name: `payloadDifferences`), or those of another such
    /// call then (CONTRACT.md section 8: business events carry `layout_source`; section 1, event
    /// object). Left alone while a scenario call of the client tracks for that user. Before, the
    /// app's events were attributed by user, name and key only: an SDK that dropped `metadata`
    /// from fanned-out entries passed every named check (an outside audit).
    static func appEventsSentTheirFields(_ c: CheckContext, appEvents: AppEventFanOut) -> [(String, [String])] {
        // The app's event calls whose name and properties their markers settle (`AppEventFanOut`
        // pairs each call with its `event` marker), as the event each gave.
        let events = appEvents.calls.values.sorted { $0.start < $1.start }.compactMap { call -> (call: AppEventFanOut.Call, given: JSONValue)? in
            guard let name = call.name, let properties = call.properties else { return nil }
            return (call, .object(["name": .string(name), "properties": properties]))
        }
        guard !events.isEmpty else { return [] }
        var problems: [(String, [String])] = []
        for client in c.scenario.appClients {
            let mine = events.filter { $0.call.client.isExactly(client) }
            guard !mine.isEmpty else { continue }
            let runner = RunnerCalls(history: c.history, client: client)
            for (e, r) in c.requests where r.client.isExactly(client) && (r.path == "/api/v1/tracking/track" || r.path == "/api/v1/tracking/batch") {
                for entry in r.events {
                    guard case .string(let user)? = entry["user_id"], case .string(let name)? = entry["event_name"],
                          !runner.inFlight(path: r.path, user: user, key: nil, at: e.index) else { continue }
                    let running = mine.filter { $0.call.start < e.index && e.index < $0.call.end && $0.call.user.isExactly(user)
                        && $0.call.name.map { $0.isExactly(name) } ?? false }
                    guard let first = running.first, !running.contains(where: { payloadDifferences(sent: entry, given: $0.given, stopAtFirst: true).isEmpty }) else { continue }
                    let why = payloadDifferences(sent: entry, given: first.given).joined(separator: "; ")
                    problems.append(("\(appPrefix(c, client))the app's event '\(Attribution.show(name))' of '\(Attribution.show(user))' went out in request #\(r.seq) with other fields than its app call \(first.call.id) (app.event as '\(first.call.user.unambiguous)') gave: \(why) (CONTRACT.md section 8: business events carry layout_source; section 1, event object)",
                                     c.excerpt([first.call.start, e.index])))
                    break
                }
            }
        }
        return problems
    }

    /// Each unkeyed event becomes one `/batch` entry per cached `assigned:true` assignment of its
    /// user, then one per cached flag, in insertion order, each with exactly one key; `trackBatch`
    /// sends keyed events as they are and chunks of 100 in order. Concurrent operations' batches
    /// are attributed exactly (`Attribution`): the check fails only when no assignment of the
    /// batches to the operations running when they were sent satisfies every operation.
    static func fanOut(_ c: CheckContext, sizesOnly: Bool, appEvents: AppEventFanOut) -> [(String, [String])] {
        var problems: [(String, [String])] = []
        // Each operation's possible expectations: one, or (when some entries may be there or not)
        // one per subset of those entries, all of them first.
        var expectations: [(invoke: HistoryEvent, variants: [(expected: [Attribution.Entry], ranks: [Attribution.Rank])])] = []
        // The reference app's unkeyed events, judged like a plain trackWithStatus (`appEventFanOut`).
        let appEventsGiven = appEvents
        var appEvents = appEvents
        var appOperations: [Attribution.Operation] = []
        var unpredictable: [Attribution.Window] = []
        var bounded: [(window: Attribution.Window, allowed: Set<Attribution.Entry>, label: String, single: Bool)] = []
        let completesByLabel = Dictionary(c.history.filter { $0.kind == .complete }.compactMap { e in e.label.map { (ExactKey($0), e.index) } },
                                          uniquingKeysWith: { a, _ in a })   // the first completion of each exact label
        var unkeyedCalls = UnkeyedCalls(c)
        _ = replayCaches(c) { e, models in
            if !sizesOnly { unkeyedCalls.visit(e, models) }
            if let op = appEvents.operation(at: e, model: models[e.client ?? ""] ?? CacheModel()) { appOperations.append(op) }
            guard e.kind == .invoke, e.client != nil, e.label != nil,
                  ["track", "trackWithStatus", "trackBatch"].contains(e.name ?? "") else { return }
            let model = models[e.client!] ?? CacheModel()
            let events: [JSONValue] = e.name == "trackBatch" ? { if case .array(let a)? = e.detail { return a } else { return [] } }() : [e.detail ?? .null]
            // Past the cache size the entries an unkeyed event fans out to are unknown: its
            // batches are taken as its own, whatever they hold (`CacheModel.overflowed`).
            let unkeyed = events.filter { $0["experiment"] == nil && $0["flag"] == nil }
            let uncertain = unkeyed.contains { event in event["user"]?.stringValue.map { model.hasUncertain(user: $0, at: e.exactTime) } ?? false }
            // A few entries that may be there or not (a tie, a late answer, an incomplete answer):
            // every subset is tried, so the batches must still be one of them, in chunks of 100 (an
            // eighth outside tester: taken as "any subset", `wrong-batch-chunks` passed).
            if uncertain, !model.overflowed, !unkeyed.isEmpty,
               let fan = fanOutExpectation(events: events, keyedAllowed: e.name == "trackBatch", model: model, at: e.exactTime) {
                // The cache entries that may be there or not, by user and key: one entry is in the
                // cache or not for every event of the operation alike.
                var optional = Set<String>()   // "a"|"f" \0 exact user \0 exact key
                for event in unkeyed {
                    guard let user = event["user"]?.stringValue else { continue }
                    for a in model.entries(model.assignments, user: user, at: e.exactTime, filter: { $0["assigned"] != .bool(false) }) where a.optional {
                        optional.insert("a\0" + exact(user) + "\0" + exact(a.key))
                    }
                    for f in model.entries(model.flags, user: user, at: e.exactTime) where f.optional {
                        optional.insert("f\0" + exact(user) + "\0" + exact(f.key))
                    }
                }
                func group(_ entry: Attribution.Entry) -> String? {
                    let user = String(decoding: entry.user, as: UTF8.self)
                    if let x = entry.experiment { return "a\0" + exact(user) + "\0" + exact(String(decoding: x, as: UTF8.self)) }
                    if let f = entry.flag { return "f\0" + exact(user) + "\0" + exact(String(decoding: f, as: UTF8.self)) }
                    return nil
                }
                // Which expected entries are fanned out (droppable) and which are keyed events of a
                // batch, sent as given: walked in `fanOutExpectation`'s order.
                var fanned: [Bool] = []
                for event in events {
                    guard event["user"]?.stringValue != nil, event["name"]?.stringValue != nil else { continue }
                    if event["experiment"] != nil || event["flag"] != nil { fanned.append(false); continue }
                    let user = event["user"]!.stringValue!
                    let count = model.entries(model.assignments, user: user, at: e.exactTime, filter: { $0["assigned"] != .bool(false) }).count
                        + model.entries(model.flags, user: user, at: e.exactTime).count
                    fanned += Array(repeating: true, count: count)
                }
                let groups = optional.sorted()
                if groups.count <= 4, fanned.count == fan.0.count {
                    let variants = (0..<(1 << groups.count)).reversed().map { mask -> ([Attribution.Entry], [Attribution.Rank]) in
                        let dropped = Set(groups.enumerated().filter { mask & (1 << $0.offset) == 0 }.map(\.element))
                        let kept = fan.0.indices.filter { i in !fanned[i] || (group(fan.0[i]).map { !dropped.contains($0) } ?? true) }
                        return (kept.map { fan.0[$0] }, kept.map { fan.1[$0] })
                    }
                    expectations.append((e, variants))
                    return
                }
            }
            if model.overflowed || uncertain, !unkeyed.isEmpty {
                let window = Attribution.Window(client: e.client, from: e.index, to: e.label.flatMap { completesByLabel[ExactKey($0)] } ?? Int.max)
                unpredictable.append(window)
                // Whatever the SDK evicted, it fans out only to live entries of the event's user
                // (a subset of the model's) (a seventh outside tester: past the size
                // any batch passed, `fan-out-to-other-users` and `fan-out-to-expired` too).
                if let fan = fanOutExpectation(events: events, keyedAllowed: e.name == "trackBatch", model: model, at: e.exactTime) {
                    bounded.append((window, Set(fan.0), e.label ?? "", events.count == 1))
                }
                return
            }
            guard let fan = fanOutExpectation(events: events, keyedAllowed: e.name == "trackBatch", model: model, at: e.exactTime) else { return }
            expectations.append((e, [(fan.0, fan.1)]))
        }
        // Labels are identity data: the completions by exact label, read once for the function.
        let completes: (String) -> Int? = { completesByLabel[ExactKey($0)] }
        // Tracking requests happen only while a tracking operation (or an app event) runs: an
        // SDK that sends events nobody asked for (an exposure for a fallback, say) is caught here.
        let windows = trackingWindows(c)
        for (event, record) in c.requests where record.path == "/api/v1/tracking/track" {
            if !windows.contains(where: { $0.client.isExactly(record.client) && $0.from < event.index && event.index < $0.to }) {
                problems.append(("a tracking request no operation asked for: \(record.summary)", c.slice(around: [event.index], radius: 3)))
            }
        }
        // Every /batch belongs to exactly one fan-out operation (or lies inside an app event,
        // whose batches no model predicts); CONTRACT.md section 4.
        func operation(_ invoke: HistoryEvent, _ v: (expected: [Attribution.Entry], ranks: [Attribution.Rank])) -> Attribution.Operation {
            Attribution.Operation(label: invoke.label!, name: invoke.name ?? "", client: invoke.client,
                                  from: invoke.index, to: completes(invoke.label!) ?? Int.max,
                                  expected: stride(from: 0, to: v.expected.count, by: 100).map { Array(v.expected[$0..<min($0 + 100, v.expected.count)]) },
                                  ranks: stride(from: 0, to: v.ranks.count, by: 100).map { Array(v.ranks[$0..<min($0 + 100, v.ranks.count)]) })
        }
        // At most 64 combinations of variants are tried; past that, operations with several are
        // taken as unpredictable (their batches bounded by their entries, below).
        // Entries that may come in either order and straddle a chunk boundary may fall in either
        // chunk: each way is a variant (`chunkings`).
        // A call given up while it ran (cancelled, its client closed) may have stopped after any
        // of its chunks: each prefix of whole chunks is one of its expectations (F6 above).
        let givenUp = givenUpWhileRunning(c)
        expectations = expectations.map { item in
            // A call that reported success (`true`) sent every chunk, given up or not (an
            // outside tester: a closed client's trackBatch that returned true after one chunk of
            // two passed).
            let end = completes(item.invoke.label!) ?? Int.max
            guard givenUp(item.invoke, end), !(end < c.history.count && c.history[end].outcome?["value"] == .bool(true)) else { return item }
            var variants = item.variants
            for v in item.variants {
                for k in stride(from: (v.expected.count + 99) / 100 - 1, through: 0, by: -1) {
                    let cut = (Array(v.expected.prefix(k * 100)), Array(v.ranks.prefix(k * 100)))
                    if !variants.contains(where: { $0.expected == cut.0 && $0.ranks == cut.1 }) { variants.append(cut) }
                }
            }
            return (item.invoke, variants)
        }
        expectations = expectations.map { item in
            var variants: [(expected: [Attribution.Entry], ranks: [Attribution.Rank])] = []
            for v in item.variants {
                for w in chunkings(v) where !variants.contains(where: { $0.expected == w.expected && $0.ranks == w.ranks }) { variants.append(w) }
            }
            return (item.invoke, variants)
        }
        var combinations = expectations.reduce(1) { $0 * $1.variants.count }
        if combinations > 64 {
            for item in expectations where item.variants.count > 1 {
                let window = Attribution.Window(client: item.invoke.client, from: item.invoke.index, to: completes(item.invoke.label!) ?? Int.max)
                unpredictable.append(window)
                bounded.append((window, Set(item.variants[0].expected), item.invoke.label ?? "", false))
            }
            expectations.removeAll { $0.variants.count > 1 }
            combinations = 1
        }
        let operations = expectations.map { operation($0.invoke, $0.variants[0]) }
        let batches = c.requests.filter { $0.record.path == "/api/v1/tracking/batch" }.map { event, record in
            Attribution.Request(seq: record.seq, index: event.index, client: record.client, entries: record.events.compactMap { Attribution.Entry(wire: $0) })
        }
        // An unpredictable operation's batches hold only entries it may send, unless another
        // operation of the client ran at the time (then the attribution below decides).
        // One unkeyed event (`single`) sends each entry at most once, assignments before flags,
        // whatever was evicted (a thirty-third outside tester, F5: past the cache size a key sent
        // twice, or flags first, passed).
        for (window, allowed, label, single) in bounded {
            var seen = Set<Attribution.Entry>()
            var flagsBegun = false
            for b in batches where window.contains(b) {
                // Another unpredictable call of the client running then may have sent it too (two
                // unkeyed calls at once past the cache size: a seventy-fourth outside tester, F1:
                // each call was judged by the other's batch, on every SDK).
                let shared = operations.contains { $0.client.isExactly(b.client) && $0.from < b.index && b.index < $0.to }
                    || appEvents.uncertain.contains { $0.contains(b) }
                    || unpredictable.contains { ($0.from, $0.to) != (window.from, window.to) && $0.contains(b) }
                if shared { continue }
                if let stray = b.entries.first(where: { !allowed.contains($0) }) {
                    problems.append(("batch #\(b.seq) sent while \(label) ran holds \(stray), which no live cache entry of its user explains (CONTRACT.md section 4)",
                                     c.slice(around: [b.index], radius: 1)))
                    continue
                }
                guard single else { continue }
                for entry in b.entries {
                    if seen.contains(entry) || (entry.experiment != nil && flagsBegun) {
                        let why = seen.contains(entry) ? "a second time" : "after a flag"
                        problems.append(("batch #\(b.seq) sent while \(label) ran holds \(entry) \(why) (CONTRACT.md section 4: one entry per cached assignment of that user, then per cached flag)",
                                         c.slice(around: [b.index], radius: 1)))
                        break
                    }
                    seen.insert(entry)
                    if entry.flag != nil { flagsBegun = true }
                }
            }
            // Nor more entries of a kind than one cache can hold: `cacheSize` bounds each
            // in-memory cache (CONTRACT.md section 3), whatever the eviction order. Before, past the
            // size an SDK fanning out to its evicted keys too passed (a seventy-second outside
            // tester, F1).
            let size = c.settings(of: window.client ?? "").cacheSize
            for (what, count) in [("assignment", seen.filter { $0.experiment != nil }.count), ("flag", seen.filter { $0.flag != nil }.count)] where single && count > size {
                problems.append(("the batches sent while \(label) ran hold \(count) \(what) entries for its one event, more than the client's cache_size of \(size): "
                                 + "fan-out goes to cached entries only, and no cache holds more (CONTRACT.md sections 3 and 4)", []))
            }
        }
        // An app event whose fan-out the history cannot fix (`AppEventFanOut.uncertain`) may send
        // its user's live entries in any subset, but nothing else (`AppEventFanOut.Bound`), unless
        // another tracking operation of the client ran at the time.
        for bound in appEvents.bounds {
            let mine = batches.filter { bound.window.contains($0) }
            let shared = mine.contains { b in
                operations.contains { $0.client.isExactly(b.client) && $0.from < b.index && b.index < $0.to }
                    || appEvents.bounds.contains { other in (other.window.from, other.window.to) != (bound.window.from, bound.window.to) && other.window.contains(b) }
                    || unpredictable.contains { $0.contains(b) }
            }
            if shared { continue }
            var seen = Set<String>()
            var flagsBegun = false
            for b in mine {
                for entry in b.entries {
                    let user = String(decoding: entry.user, as: UTF8.self), name = String(decoding: entry.name, as: UTF8.self)
                    let key = entry.experiment.map { "a\u{0}" + exact(String(decoding: $0, as: UTF8.self)) }
                        ?? entry.flag.map { "f\u{0}" + exact(String(decoding: $0, as: UTF8.self)) } ?? "-"
                    var why: String?
                    if !user.isExactly(bound.user) || !(bound.name.map { name.isExactly($0) } ?? true) {
                        why = "is not its event (user '\(bound.user.unambiguous)')"
                    } else if !bound.keys.contains(key) {
                        why = "names a key no cache entry of its user can hold then"
                    } else if seen.contains(key) {
                        why = "names a key a second time"
                    } else if key.hasPrefix("a"), flagsBegun {
                        why = "puts an assignment after a flag"
                    }
                    if let why {
                        problems.append(("batch #\(b.seq) sent while \(bound.label) ran holds \(entry), which \(why) (CONTRACT.md section 4: one entry per cached assignment of that user, then per cached flag)",
                                         c.slice(around: [b.index], radius: 1)))
                        break
                    }
                    seen.insert(key)
                    if key.hasPrefix("f") { flagsBegun = true }
                }
            }
        }
        let absorbers = appEvents.uncertain + unpredictable
        var outcome = Attribution.solve(operations: operations + appOperations, requests: batches, absorbers: absorbers, mode: sizesOnly ? .sizes : .entries)
        var combination = 1
        while combination < combinations, !{ if case .attributed = outcome { return true } else { return false } }() {
            var rest = combination
            let chosen = expectations.map { item -> Attribution.Operation in
                let pick = rest % item.variants.count
                rest /= item.variants.count
                return operation(item.invoke, item.variants[pick])
            }
            let attempt = Attribution.solve(operations: chosen + appOperations, requests: batches, absorbers: absorbers, mode: sizesOnly ? .sizes : .entries)
            if case .attributed = attempt { outcome = attempt }
            combination += 1
        }
        switch outcome {
        case .attributed: break
        case .unattributable(let reasons):
            for reason in reasons {
                problems.append((reason.message, c.excerpt(reason.indices)))
            }
        case .undecided(let states):
            problems.append(("could not attribute \(batches.count) batches to \(operations.count) tracking operations within \(states) search states; split the scenario", []))
        }
        return sizesOnly ? problems : problems + unkeyedCallsSentTheirFields(c, unkeyedCalls) + appEventsSentTheirFields(c, appEvents: appEventsGiven)
            + fanOutReachesProvenEntries(c)
    }

    /// An unkeyed event of a `track`, or of a `trackWithStatus` or `trackBatch` that returned
    /// `true`, has a `/batch` entry for every cache entry of its user that the history proves was
    /// cached while it ran (CONTRACT.md section 4: one entry per cached assignment, then per cached
    /// flag).
    ///
    /// Past the cache size the model cannot say which entries an SDK kept (`CacheModel.overflowed`),
    /// so this proof is the SDK's own: an entry written before the call (a lookup of the client,
    /// user and key answered 2xx, whose caller got the value before the call began) and served as
    /// a hit after the call ended (a lookup that returned an object value), with no request for
    /// that key pending between the two, no 2xx answer of the client naming that key in its body
    /// (an SDK may cache an answer under the key it names), no clear of the client (`clearCache`,
    /// `close`, a logout or undo) since that request, and the answer still fresh at the hit on the
    /// scenario's clock (stored + TTL later than the hit): an entry once gone comes back only
    /// through a request, whatever the eviction order, so it was cached the whole time. A hit that
    /// may be an offline fallback for a request refused before the mock (`mayFailBeforeTheMock`)
    /// proves nothing. A `track` may send after it returned, so any later `/batch` of its client
    /// counts for it (it fans out what is cached when it is called). Assignments answered `assigned: false` or for another
    /// key are left out; so are the reference app's clients (their lookups are the app's). Before,
    /// an SDK that emptied its fan-out index on an eviction (sending nothing at all) passed every
    /// named check (a seventy-second outside tester, F1); the TTL, a key named by another answer
    /// and a refused request were added after a seventy-eighth.
    static func fanOutReachesProvenEntries(_ c: CheckContext) -> [(String, [String])] {
        let id = entryID
        let completes = firstCompletions(c)
        let appClients = c.scenario.appClients
        let clears = clearIndices(c)
        let answeredAt = answerIndices(c)
        // id -> its requests: receipt, answer (`Int.max`: none), whether the answer may be cached.
        var spans: [String: [(from: Int, to: Int, cacheable: Bool)]] = [:]
        // id -> history indices of 2xx answers for another key whose body names this one.
        var namedBy: [String: [Int]] = [:]
        for (e, r) in c.requests {
            guard let client = r.client, let key = r.key, let user = r.users.first else { continue }
            var cacheable = r.succeeded && !r.cancelled && r.response != nil
            if key.kind == "experiment", let value = r.response {
                if value["assigned"] == .bool(false) { cacheable = false }
                if case .string(let answered)? = value["experiment_key"], !answered.isExactly(key.key) {
                    cacheable = false
                    if r.succeeded { namedBy[id(client, key.kind, user, answered), default: []].append(answeredAt[r.seq] ?? e.index) }
                }
            }
            if key.kind == "flag", r.succeeded, case .string(let answered)? = r.response?["key"], !answered.isExactly(key.key) {
                namedBy[id(client, key.kind, user, answered), default: []].append(answeredAt[r.seq] ?? e.index)
            }
            spans[id(client, key.kind, user, key.key), default: []].append((e.index, answeredAt[r.seq] ?? Int.max, cacheable))
        }
        // id -> runner lookups: invoke and completion indices, and the value returned (nil: none).
        var lookups: [String: [(start: Int, end: Int, value: JSONValue?)]] = [:]
        var targets: [String: (client: String, kind: String, user: String, key: String)] = [:]
        for invoke in c.history where invoke.kind == .invoke {
            guard let target = lookupTarget(invoke), let label = invoke.label else { continue }
            let done = completes[ExactKey(label)]
            var value: JSONValue?
            if let v = done?.outcome?["value"], case .object = v { value = v }
            if target.kind == "experiment", let v = value {
                if v["assigned"] == .bool(false) { value = nil }
                if case .string(let answered)? = v["experiment_key"], !answered.isExactly(target.key) { value = nil }
            }
            let k = id(target.client, target.kind, target.user, target.key)
            lookups[k, default: []].append((invoke.index, done?.index ?? Int.max, value))
            targets[k] = target
        }
        let givenUp = givenUpWhileRunning(c)
        var problems: [(String, [String])] = []
        for invoke in c.history where invoke.kind == .invoke && ["track", "trackWithStatus", "trackBatch"].contains(invoke.name ?? "") {
            guard let client = invoke.client, let label = invoke.label, !appClients.containsExactly(client),
                  !c.mayFailBeforeTheMock(client: client), let done = completes[ExactKey(label)] else { continue }
            // A `track` reports nothing: one that did not fail; the others: `true`. A `track` may
            // send after it returned: any later batch of its client counts for it.
            let plain = invoke.name == "track"
            guard plain ? done.outcome?["error"] == nil : done.outcome?["value"] == .bool(true), !givenUp(invoke, done.index) else { continue }
            let events: [JSONValue] = invoke.name == "trackBatch" ? (invoke.detail?.arrayValue ?? []) : [invoke.detail ?? .null]
            let batches = c.requests.filter { $0.record.path == "/api/v1/tracking/batch" && $0.record.client.isExactly(client)
                && invoke.index < $0.event.index && (plain || $0.event.index < done.index) }
            let sent = Set(batches.flatMap { $0.record.events.compactMap { Attribution.Entry(wire: $0) } })
            let ttl = c.settings(of: client).cacheTTL
            var reported = Set<String>()
            for event in events where event["experiment"] == nil && event["flag"] == nil {
                guard case .string(let user)? = event["user"], case .string(let name)? = event["name"] else { continue }
                for (k, calls) in lookups.sorted(by: { $0.key < $1.key }) {
                    guard let target = targets[k], target.client.isExactly(client), target.user.isExactly(user),
                          !c.mayFailBeforeTheMock(client: client, user: user, key: target.key) else { continue }
                    // The hit after the call: a lookup that began after it ended and returned a value.
                    guard let hit = calls.first(where: { $0.start > done.index && $0.value != nil && $0.end != Int.max }) else { continue }
                    let until = hit.end
                    let own = spans[k] ?? []
                    // No request for the key pending from the call's start on.
                    guard !own.contains(where: { $0.from < until && $0.to > invoke.index }) else { continue }
                    // The entry's write: the last request before the call, answered 2xx for the key.
                    guard let written = own.filter({ $0.to < invoke.index }).max(by: { $0.to < $1.to }), written.cacheable else { continue }
                    // Fresh at the hit on the scenario's clock, surely.
                    guard c.history[hit.start].exactTime < c.history[written.to].exactTime + ttl - 1e-6 else { continue }
                    // No other answer naming the key in between (it may be cached under that key).
                    guard !(namedBy[k] ?? []).contains(where: { $0 > written.from && $0 < until }) else { continue }
                    // Its caller got the value before the call began; no lookup of the key ran across the call's start.
                    guard calls.contains(where: { $0.start < written.to && $0.end < invoke.index && $0.value != nil }),
                          !calls.contains(where: { $0.start < invoke.index && $0.end > invoke.index }) else { continue }
                    // No clear of the client from that request on.
                    guard !(clears[exact(client)] ?? []).contains(where: { $0 > written.from && $0 < until }) else { continue }
                    let (kind, key) = (target.kind, target.key)
                    let entry = Attribution.Entry(user: user, name: name, experiment: kind == "experiment" ? key : nil, flag: kind == "flag" ? key : nil)
                    guard !sent.contains(entry), reported.insert(k + "\u{0}" + exact(name)).inserted, problems.count < 10 else { continue }
                    let how = plain ? "had" : "returned true with"
                    problems.append(("\(invoke.name!) '\(Attribution.show(label))' (unkeyed event '\(Attribution.show(name))' of user '\(Attribution.show(user))') \(how) "
                                     + "no /batch entry for its user's cached \(kind) '\(Attribution.show(key))'" + (batches.isEmpty ? " (it sent no /batch)" : "")
                                     + ", which was cached the whole time it ran: answered 2xx before it (#\(c.history[written.from].request?.seq ?? 0)) and served as a hit after it "
                                     + "(\(c.history[hit.start].label.map { "'\(Attribution.show($0))'" } ?? "a lookup")), within its TTL, with no request for it or clear in between "
                                     + "(CONTRACT.md section 4: an unkeyed event goes to every cached assignment and flag of its user)",
                                     c.excerpt([written.from, invoke.index, done.index, hit.start])))
                }
            }
        }
        return problems
    }

    /// The ways `v`'s entries may fall into chunks of 100 (CONTRACT.md section 4: "sends chunks of
    /// 100 in order"): entries of one rank group that may come in either order (`Attribution.Rank`)
    /// and lie on both sides of a chunk boundary may each be on either side, as long as none goes
    /// after one it surely precedes. Each way is `v` reordered so that its chunks hold those
    /// entries; within a chunk the ranks still let them swap. At most `limit` ways (beyond that,
    /// the first `limit`: the caller then treats the operation as unpredictable). Before, the
    /// chunks were cut from the one order, and a correct SDK that cached two answers released
    /// together the other way failed `fan_out` when they straddled the boundary, or flaked (a
    /// thirty-third outside tester, F8).
    static func chunkings(_ v: (expected: [Attribution.Entry], ranks: [Attribution.Rank]), limit: Int = 65)
        -> [(expected: [Attribution.Entry], ranks: [Attribution.Rank])] {
        var ways = [v]
        var boundary = 100
        while boundary < v.expected.count {
            var next: [(expected: [Attribution.Entry], ranks: [Attribution.Rank])] = []
            for way in ways {
                let rk = way.ranks
                let g = rk[boundary - 1].group
                // Groups run in order along the list, so only the group on both sides can move.
                guard rk[boundary].group == g else { next.append(way); continue }
                let members = rk.indices.filter { rk[$0].group == g }
                let leftMembers = members.filter { $0 < boundary }, rightMembers = members.filter { $0 >= boundary }
                let lowestRight = rightMembers.map { rk[$0].lo }.min()!, highestLeft = leftMembers.map { rk[$0].hi }.max()!
                let movableLeft = leftMembers.filter { rk[$0].hi >= lowestRight }
                let movableRight = rightMembers.filter { rk[$0].lo <= highestLeft }
                let movable = movableLeft + movableRight
                guard !movableLeft.isEmpty, movable.count <= 20 else { next.append(way); continue }
                let moving = Set(movable)
                let order: (Int, Int) -> Bool = { (rk[$0].group, rk[$0].lo, $0) < (rk[$1].group, rk[$1].lo, $1) }
                for mask in 0..<(1 << movable.count) where mask.nonzeroBitCount == movableLeft.count {
                    let goesLeft = Set(movable.indices.filter { mask & (1 << $0) != 0 }.map { movable[$0] })
                    let goesRight = movable.filter { !goesLeft.contains($0) }
                    // No entry that surely precedes another may go after it.
                    if goesRight.contains(where: { r in goesLeft.contains { l in rk[r].surelyBefore(rk[l]) } }) { continue }
                    let left = ((0..<boundary).filter { !moving.contains($0) } + goesLeft).sorted(by: order)
                    let right = (goesRight + (boundary..<rk.count).filter { !moving.contains($0) }).sorted(by: order)
                    let indices = left + right
                    let candidate = (expected: indices.map { way.expected[$0] }, ranks: indices.map { rk[$0] })
                    if !next.contains(where: { $0.expected == candidate.expected && $0.ranks == candidate.ranks }) { next.append(candidate) }
                    if next.count >= limit { return next }
                }
            }
            ways = next
            boundary += 100
        }
        return ways
    }

    /// The `/batch` entries an unkeyed event becomes (CONTRACT.md section 4): one per cached
    /// `assigned:true` assignment of its user, then one per cached flag, each group in cache order
    /// (`ranks`: entries the SDK may have written in either order); keyed events of a `trackBatch`
    /// (`keyedAllowed`) as they are. `nil` for a keyed single track (it goes to `/track`).
    static func fanOutExpectation(events: [JSONValue], keyedAllowed: Bool, model: CacheModel, at time: Double) -> ([Attribution.Entry], [Attribution.Rank])? {
        var expected: [Attribution.Entry] = []
        var ranks: [Attribution.Rank] = []
        var group = 0
        for event in events {
            guard case .string(let user)? = event["user"], case .string(let name)? = event["name"] else { continue }
            var experiment: String?, flag: String?
            if case .string(let x)? = event["experiment"] { experiment = x }
            if case .string(let x)? = event["flag"] { flag = x }
            if experiment != nil || flag != nil {
                if !keyedAllowed { return nil }   // a keyed track goes to /track, not fan-out
                expected.append(Attribution.Entry(user: user, name: name, experiment: experiment, flag: flag))
                group += 1
                ranks.append(Attribution.Rank(group: group, lo: 0, hi: 0))
                continue
            }
            // Assignments then flags, each in cache order; entries the SDK may have written in
            // either order (answers released together) may be fanned out in either order.
            let assignments = model.entries(model.assignments, user: user, at: time, filter: { $0["assigned"] != .bool(false) })
            group += 1
            expected += assignments.map { Attribution.Entry(user: user, name: name, experiment: $0.key, flag: nil) }
            ranks += assignments.map { Attribution.Rank(group: group, lo: $0.lo, hi: $0.hi) }
            let flags = model.entries(model.flags, user: user, at: time)
            group += 1
            expected += flags.map { Attribution.Entry(user: user, name: name, experiment: nil, flag: $0.key) }
            ranks += flags.map { Attribution.Rank(group: group, lo: $0.lo, hi: $0.hi) }
        }
        return (expected, ranks)
    }

    // MARK: single flight

    /// No request for a (client, user, key) is received while an earlier one for the same triple
    /// is still unanswered, unless the client cleared or closed in between, or gave the earlier
    /// one up (cancelled it: its own deadline, every waiter cancelled); and none is received that
    /// no call asked for (`unrequested`: no lookup of that client, user and key had begun, or
    /// every one had returned a value, nothing giving it up).
    static func singleFlight(_ c: CheckContext) -> [(String, [String])] {
        var open: [String: (seq: Int, index: Int, epoch: Int)] = [:]
        // An app call that began before a clear whose request reached the mock after it may have
        // started that request before the clear: a later call need not join it (`appIssueStarts`).
        let issueStarts = appIssueStarts(c)
        var clearIndices: [String: [Int]] = [:]   // by exact client (`exact`), as every key here
        var detachable: Set<Int> = []
        var staleAnswers: [String: (seq: Int, index: Int)] = [:]   // an older request answered while a newer one was open
        var epochs: [String: Int] = [:]
        var problems: [(String, [String])] = []
        // The runner's lookups per (client, exact user, kind, exact key): when each began and ended.
        let completes = firstCompletions(c)
        var lookups: [String: [(invoke: Int, complete: Int)]] = [:]
        for e in c.history where e.kind == .invoke {
            guard let label = e.label, let t = lookupTarget(e) else { continue }
            lookups["\(exact(t.client))\u{0}\(exact(t.user))\u{0}\(t.kind)\u{0}\(exact(t.key))", default: []].append((e.index, completes[ExactKey(label)]?.index ?? Int.max))
        }
        let runnerLookups = lookups
        // The reference app's lookups too: a display asks for the app's experiment, a refresh for its flag.
        for client in c.scenario.app == nil ? [] : c.scenario.appClients {
            guard let settings = c.scenario.appSettings(client: client) else { continue }
            for call in AppCalls(history: c.history, client: client, initialIdentity: settings.initialUser).calls {
                guard call.sdk == "getAssignment" || call.sdk == "evaluateFlag" else { continue }
                let (kind, key) = call.sdk == "evaluateFlag" ? ("flag", settings.flag) : ("experiment", settings.experiment)
                lookups["\(exact(client))\u{0}\(exact(call.identity))\u{0}\(kind)\u{0}\(exact(key))", default: []].append((call.start, call.end))
            }
        }
        /// Whether the request open under `id` (received at history index `first`) had been given
        /// up by every caller before a lookup pending at `index` began: the lookups that may have
        /// waited on it (one pending when it came, any begun since; the reference app's calls
        /// included) all ended before the earliest of those still pending then (CONTRACT.md
        /// section 5, items 3 and 6: cancelling every waiter, or the SDK's deadline, ends the
        /// flight). Judged from the history alone: the mock's `cancelled` mark, read before, comes
        /// whenever the SDK's cancellation arrives, so an SDK without single flight passed when its
        /// duplicates ended cancelled, and one history got both verdicts (a thirty-third outside
        /// tester, F1 and F3); a correct SDK's next request after its deadline raced the mark.
        func abandoned(_ id: String, client: String, first: Int, at index: Int) -> Bool {
            guard var ops = lookups[id] else { return false }
            // A lookup of the runner begun before its client's last clear preceding the flight
            // waits on a request from before that clear (detached: CONTRACT.md section 5.1), never
            // on this flight. Before, such a call still pending kept a cancelled flight after the
            // clear "in flight" for a later call, and a correct SDK failed (a seventy-first outside
            // tester, F1: every SDK, every run).
            if let clear = (clearIndices[exact(client)] ?? []).filter({ $0 < first }).max() {
                let runner = Set((runnerLookups[id] ?? []).map(\.invoke))
                ops = ops.filter { !(runner.contains($0.invoke) && $0.invoke < clear) }
            }
            guard let start = ops.filter({ $0.invoke < index && $0.complete > index }).map(\.invoke).min(), start > first,
                  ops.contains(where: { $0.invoke < first && $0.complete > first }) else { return false }
            return ops.allSatisfy { $0.invoke >= start || $0.complete < start }
        }
        /// The last flight per id ended by a usable answer: the request, when it was received and
        /// answered (history indices), and the client's epoch then.
        var served: [String: (seq: Int, first: Int, index: Int, epoch: Int)] = [:]
        /// Whether a request for `id` received at `index`, after the flight `shared` was answered,
        /// can only come from a call that waited on that flight: lookups for `id` are pending now,
        /// every one of them was invoked before the answer (so it was waiting then, and the
        /// answer was its own), and the flight was not given up by its callers before them
        /// (`abandoned`: a call begun after every earlier caller ended need not join). A call
        /// invoked after the answer may miss the cache (an eviction, an unreadable answer) and is
        /// never judged. Before, a joiner that woke, missed its cache and fetched again passed:
        /// every concurrent call still cost a request and an exposure, only later (a thirty-third
        /// outside tester, F10).
        ///
        /// A call the runner invoked before the answer whose SDK call began only after the SDK had
        /// read it (quiescence cannot always see how far an adapter got) finds the answer cached,
        /// so the rule holds only while a correct SDK's cache still holds it: within the client's
        /// TTL, and with fewer answers of its client since than its `cache_size` (no eviction).
        func refetchedByJoiner(_ id: String, client: String, shared: (seq: Int, first: Int, index: Int, epoch: Int), at index: Int) -> Bool {
            guard let ops = lookups[id] else { return false }
            let pendingNow = ops.filter { $0.invoke < index && $0.complete > index }
            guard !pendingNow.isEmpty, pendingNow.allSatisfy({ $0.invoke < shared.index }),
                  !abandoned(id, client: client, first: shared.first, at: index) else { return false }
            return stillCached(client: client, shared: shared, at: index)
        }
        /// Whether a request for `id` received at `index` comes only from calls begun after a call
        /// that waited on the flight `shared` returned its value: the SDK had read that answer
        /// and cached it (CONTRACT.md section 4: successes are cached; a hit sends nothing), so
        /// while a correct SDK's cache still holds it (`stillCached`) those calls are hits. Returns
        /// the history index of that call's return. Before, an SDK that fetched again on every
        /// call within the TTL (a request and an exposure per view) passed every named check (a
        /// thirty-seventh outside tester, F1).
        func refetchedAfterAHit(_ id: String, client: String, shared: (seq: Int, first: Int, index: Int, epoch: Int), at index: Int) -> Int? {
            guard let ops = lookups[id] else { return nil }
            // A call that waited on the flight and returned a value after its answer came.
            let takers = ops.filter { $0.invoke < shared.index && $0.complete > shared.index && $0.complete < index
                && $0.complete < c.history.count && Self.returnedValue(c.history[$0.complete]) }
            guard let taken = takers.map(\.complete).min() else { return nil }
            let pendingNow = ops.filter { $0.invoke < index && $0.complete > index }
            guard !pendingNow.isEmpty, pendingNow.allSatisfy({ $0.invoke > taken }) else { return nil }
            return stillCached(client: client, shared: shared, at: index) ? taken : nil
        }
        /// Whether a correct SDK still holds the answer of `shared` at `index`: within the client's
        /// TTL of the answer (the entry was stored no earlier), and with fewer keys answered to the
        /// client so far than its `cache_size` (no eviction).
        func stillCached(client: String, shared: (seq: Int, first: Int, index: Int, epoch: Int), at index: Int) -> Bool {
            // In whole microseconds of the unrounded times (`exactTime`; `time` is rounded to the
            // millisecond): at exactly the TTL an SDK's `Date` arithmetic decides, so the entry is
            // sure only a microsecond before it (with `time`, an answer at 0.7 s and a call at
            // 1.033333 s under a TTL of 0.333333 s were 0.333 s apart, and a correct SDK's fetch of
            // the expired entry failed).
            guard let settings = c.scenario.clients.first(where: { $0.name.isExactly(client) })?.settings,
                  shared.index < c.history.count, index < c.history.count,
                  ((c.history[index].exactTime - c.history[shared.index].exactTime) * 1e6).rounded() < (settings.cacheTTL * 1e6).rounded() else { return false }
            // Every key the client was answered for so far (clears ignored: a bound): with as many
            // as its `cache_size`, the shared answer may have been evicted at once (an SDK may
            // evict the newest entry: a thirty-sixth outside tester, SF2).
            let keysAnswered = Set(c.history[..<index].compactMap { e -> String? in
                guard e.kind == .response, let r = e.request, r.succeeded, r.client.map({ exact($0) == exact(client) }) == true,
                      let key = r.key, let user = r.users.first else { return nil }
                return "\(exact(user))\u{0}\(key.kind)\u{0}\(exact(key.key))"
            })
            return keysAnswered.count < settings.cacheSize
        }
        /// The last flight per id ended by a failure (an HTTP error, no answer, the client gave it
        /// up): the request, when it was received and ended (history indices), the client's epoch.
        var failed: [String: (seq: Int, first: Int, index: Int, epoch: Int, how: String)] = [:]
        /// Per id, the history index of the last answer received for it (any status): a call that
        /// ended before it cannot have sent a request received after it.
        var lastAnswer: [String: Int] = [:]
        /// Per request (seq), `lastAnswer` of its id when it was received.
        var answeredBefore: [Int: Int] = [:]
        /// Whether a request for `id` received at `index`, after the flight `failed` failed, can
        /// only come from a call that waited on that flight: lookups for `id` are pending now, each
        /// invoked before the failure (so it was waiting then, and the failure was its own), and
        /// the flight was not given up by its callers before them (`abandoned`). Such a call gets
        /// the persisted value or the error (CONTRACT.md section 4), never a second request: an
        /// SDK that retried a failed lookup once (a 500, its own deadline) and returned the retry's
        /// answer passed every named check, with a second exposure on `/assign` (a forty-second
        /// outside tester, F1: PostHog/posthog-js PR #260).
        func retriedByWaiter(_ id: String, client: String, failed: (seq: Int, first: Int, index: Int, epoch: Int, how: String), at index: Int) -> Bool {
            guard let ops = lookups[id] else { return false }
            // The runner's calls only: a reference-app call may be queued behind the failed fetch
            // (its fetches are serialized) and issue its own request once that one ended.
            guard let runnerOps = runnerLookups[id] else { return false }
            let pendingNow = ops.filter { $0.invoke < index && $0.complete > index }
            guard !pendingNow.isEmpty, pendingNow.count == runnerOps.filter({ $0.invoke < index && $0.complete > index }).count,
                  !abandoned(id, client: client, first: failed.first, at: index) else { return false }
            // Each pending call surely waited on the failed flight: it is the only lookup for `id`
            // invoked before that request came (so it sent it: no earlier call, given up, can have
            // sent it late), or it was invoked in an earlier step than the failure (the runner saw
            // it settle, waiting on the flight, before the failure's step). An invoke marker alone
            // is no proof: of two copies of a `times` step, the second may reach the SDK after the
            // first one's request failed at once, find nothing in flight and nothing cached, and
            // send its own (a forty-fourth outside tester: 6 in 100 runs).
            let settledBefore = answeredBefore[failed.seq] ?? -1
            let before = ops.filter { $0.invoke < failed.first && $0.complete > settledBefore }
            let failureStep = c.history[failed.index].step
            return pendingNow.allSatisfy { call in
                (before.count == 1 && before[0].invoke == call.invoke) || c.history[call.invoke].step < failureStep
            }
        }
        let givenUp = givenUpWhileRunning(c)
        let appClients = c.scenario.appClients
        // Each client's requests answered with a redirect, and whether a request has followed each.
        var redirects: [String: [(record: RequestRecord, followed: Bool)]] = [:]
        for e in c.history where e.kind == .response {
            guard let r = e.request, let client = r.client, (300..<400).contains(r.status ?? 0) else { continue }
            redirects[exact(client), default: []].append((r, false))
        }
        /// Why a lookup request for `id` of `client` received at `index` is no call's, or nil: the
        /// SDK sends a lookup for a (user, key) only when a call asks for it (CONTRACT.md section 1:
        /// `getAssignment(exp, user)` sends one `POST /assign` for that experiment and user; section
        /// 2: every assign records an exposure; section 4: a hit sends nothing). No lookup of its
        /// client for that user and key had begun, or every one that had begun returned a value
        /// before the request came, nothing gave it up (no cancel, no `close()`) and its own deadline
        /// cannot have passed (a call that timed out may have its request arrive late). A client
        /// the reference app drives is left to `exposure_after_display`. Before, an SDK that
        /// assigned each new user to every experiment it had seen (a warm-up: exposures no view
        /// made) passed every named check (a seventieth outside tester, F1).
        func unrequested(_ id: String, client: String, record: RequestRecord, at index: Int) -> String? {
            guard !appClients.containsExactly(client) else { return nil }
            // A request to where an earlier 3xx answer of its client pointed may be its HTTP stack
            // following that `Location` by itself (URLSession, requests, net/http do; in process the
            // mock's URLProtocol does not): one such request per redirect is the stack's (a
            // seventy-fourth outside tester, F2). Before, any 3xx excused every later request of the
            // client, and a warm-up SDK passed after one redirect (a seventy-sixth, F2).
            // It carries the redirected request's body (a 307 or 308 keeps it) or none (a 301 to
            // 303 may turn a POST into a GET), while a call begun before the redirect still runs
            // (`CheckContext.followsRedirect`): a POST path names no key, so another call's body is
            // another lookup (the seventy-sixth's warm-up after a 307 to `/assign` itself).
            if let i = redirects[exact(client)]?.firstIndex(where: { r in !r.followed && c.followsRedirect(record, at: index, of: r.record) }) {
                redirects[exact(client)]![i].followed = true
                return nil
            }
            let begun = (runnerLookups[id] ?? []).filter { $0.invoke < index }
            guard let last = begun.map(\.complete).max() else { return "no call of client '\(client)' had asked for it" }
            let settled = begun.allSatisfy { call in
                call.complete < index && Self.returnedValue(c.history[call.complete])
                    && !givenUp(c.history[call.invoke], call.complete) && !c.mayHaveMetItsDeadline(client: client, from: call.invoke, to: call.complete)
            }
            return settled ? "every call of client '\(client)' for it had returned a value before it came (the last at [\(last)]) and none was given up or timed out" : nil
        }
        for e in c.history {
            switch e.kind {
            // clearOfflineCache too: a response to a request from before it is written nowhere
            // (CONTRACT.md section 5.1, as after clearCache and close), so an SDK may let a later
            // call send a request of its own rather than join it (a tenth outside tester: 3 of 60
            // generated workloads failed such an SDK).
            case .invoke where ["clearCache", "close", "clearOfflineCache"].contains(e.name ?? ""):
                if let client = e.client { epochs[exact(client), default: 0] += 1; clearIndices[exact(client), default: []].append(e.index) }
            case .marker where e.name == "logout" || e.name == "undo":
                if let client = e.client { epochs[exact(client), default: 0] += 1; clearIndices[exact(client), default: []].append(e.index) }
            case .request:
                guard let r = e.request, let client = r.client, let key = r.key, let user = r.users.first else { continue }
                let id = "\(exact(client))\u{0}\(exact(user))\u{0}\(key.kind)\u{0}\(exact(key.key))"   // identity by Unicode scalars
                answeredBefore[r.seq] = lastAnswer[id]
                if let why = unrequested(id, client: client, record: r, at: e.index) {
                    problems.append(("client '\(client)' sent request #\(r.seq) for \(key.kind) '\(Attribution.show(key.key))' of user '\(Attribution.show(user))', "
                                     + "but \(why): an SDK looks up what its callers ask for, no more (CONTRACT.md section 1; section 2: every "
                                     + "assign records an exposure)", c.excerpt([e.index])))
                }
                if let start = issueStarts[r.seq], (clearIndices[exact(client)] ?? []).contains(where: { $0 > start && $0 < e.index }) { detachable.insert(r.seq) }
                if let first = open[id], first.epoch == epochs[exact(client), default: 0], !detachable.contains(first.seq),
                   !abandoned(id, client: client, first: first.index, at: e.index) {
                    let rule: String
                    if let stale = staleAnswers[id], stale.index > first.index {
                        rule = "; request #\(stale.seq), sent before the clear, was answered in between and the SDK forgot #\(first.seq) (CONTRACT.md section 5, defect 2: finishing an old request must never remove a newer one)"
                    } else {
                        rule = " (CONTRACT.md section 4: single flight)"
                    }
                    problems.append(("client '\(client)' sent a second request for \(key.kind) '\(Attribution.show(key.key))' of user '\(Attribution.show(user))' while request #\(first.seq) was in flight" + rule,
                                     c.excerpt([first.index, e.index])))
                } else if let shared = served[id], shared.epoch == epochs[exact(client), default: 0], !detachable.contains(r.seq),
                          refetchedByJoiner(id, client: client, shared: shared, at: e.index) {
                    problems.append(("client '\(client)' sent request #\(r.seq) for \(key.kind) '\(Attribution.show(key.key))' of user '\(Attribution.show(user))' "
                                     + "after request #\(shared.seq) was answered, while only calls begun before that answer were pending: a call that "
                                     + "joined #\(shared.seq) fetched again instead of taking its answer (CONTRACT.md section 4: concurrent calls share one "
                                     + "request, so one assignment and one exposure)", c.excerpt([shared.first, shared.index, e.index])))
                    open[id] = (r.seq, e.index, epochs[exact(client), default: 0])
                } else if let shared = served[id], shared.epoch == epochs[exact(client), default: 0], !detachable.contains(r.seq),
                          let taken = refetchedAfterAHit(id, client: client, shared: shared, at: e.index) {
                    problems.append(("client '\(client)' sent request #\(r.seq) for \(key.kind) '\(Attribution.show(key.key))' of user '\(Attribution.show(user))' "
                                     + "although a call had returned request #\(shared.seq)'s answer for it before the calls now pending began, within the TTL "
                                     + "and the cache size: those calls are cache hits (CONTRACT.md section 4: successes are cached; a hit sends nothing)",
                                     c.excerpt([shared.index, taken, e.index])))
                    open[id] = (r.seq, e.index, epochs[exact(client), default: 0])
                } else if let failure = failed[id], failure.epoch == epochs[exact(client), default: 0], !detachable.contains(r.seq),
                          retriedByWaiter(id, client: client, failed: failure, at: e.index) {
                    problems.append(("client '\(client)' sent request #\(r.seq) for \(key.kind) '\(Attribution.show(key.key))' of user '\(Attribution.show(user))' "
                                     + "after request #\(failure.seq) \(failure.how), while only calls that were waiting on it were pending: a call retried "
                                     + "its failed lookup (CONTRACT.md section 4: on a failure the call returns the persisted value or throws; one request "
                                     + (key.kind == "experiment" ? "per flight, so one exposure" : "per flight; a transport's own resend of a request on a reused connection is not the SDK's")
                                     + ")", c.excerpt([failure.first, failure.index, e.index])))
                    open[id] = (r.seq, e.index, epochs[exact(client), default: 0])
                } else {
                    open[id] = (r.seq, e.index, epochs[exact(client), default: 0])
                }
            case .response:
                guard let r = e.request, let client = r.client, let key = r.key, let user = r.users.first else { continue }
                let id = "\(exact(client))\u{0}\(exact(user))\u{0}\(key.kind)\u{0}\(exact(key.key))"
                defer { lastAnswer[id] = e.index }
                if let first = open[id], first.seq == r.seq {
                    open[id] = nil
                    // A usable answer (2xx, a readable JSON object, whole, not cancelled) ends the
                    // flight for every call waiting on it.
                    // Readable too (`seededReadability`): an answer an SDK cannot decode is a
                    // failure it never caches, so a call that began in the SDK after it fetches
                    // again (a thirty-fifth outside tester, F4: a flake of the Python example).
                    // And for the key asked (an answer naming another key may be cached or not:
                    // a thirty-sixth outside tester, SF1).
                    let named = key.kind == "experiment" ? r.response?["experiment_key"] : r.response?["key"]
                    if r.succeeded, let body = r.response, case .object = body, r.ambiguousBody != true, !r.cancelled,
                       seededReadability(kind: key.kind, body) == .readable, named == nil || named?.stringValue.map({ $0.isExactly(key.key) }) == true {
                        served[id] = (r.seq, first.index, e.index, first.epoch)
                        failed[id] = nil
                    } else {
                        served[id] = nil
                        // A redirect (3xx) is no failure: an HTTP stack may follow it by itself
                        // (URLSession does), sending the next request (a forty-fourth outside tester).
                        if r.cancelled || (!r.succeeded && !(300..<400).contains(r.status ?? 0)) {
                            let how = r.cancelled ? "was given up (no answer read)" : r.status.map { "was answered \($0)" } ?? "got no answer"
                            failed[id] = (r.seq, first.index, e.index, first.epoch, how)
                        } else {
                            failed[id] = nil
                        }
                    }
                } else if open[id] != nil { staleAnswers[id] = (r.seq, e.index) }
            default: break
            }
        }
        return problems
    }

    /// Whether the history event that ends a lookup (its `complete`, or the reference app's
    /// `returned` marker) carries a value.
    static func returnedValue(_ e: HistoryEvent) -> Bool {
        (e.outcome ?? e.detail?["outcome"])?["value"] != nil
    }

    // MARK: offline fallback

    /// Whether an SDK can read a `seed_store` entry, or a 2xx answer, of `kind` (`"flag"` or
    /// `"experiment"`) holding `json` (DriverProtocol.md, seed_store; CONTRACT.md section 1 for the
    /// shapes): anything but an object, or an assignment without a text `variant_name`, cannot be
    /// read (an answer like that is a `decodingError`); an assignment whose `experiment_key`,
    /// `user_id`, `variant_id`, `is_control`, `assigned` or `configuration` (not an object) is
    /// present with another type (or whose `experiment_key` is missing), or a flag whose `key` or
    /// `config` (not an object) has another type or whose `enabled` is not a boolean (missing,
    /// null), may be read or not (an SDK may map a `config` that is no object to null, or fail).
    enum SeededReadability { case readable, unreadable, doubtful }

    /// The `SeededReadability` of a `seed_store` entry of `kind` holding `json` (rules above).
    static func seededReadability(kind: String, _ json: JSONValue) -> SeededReadability {
        func isString(_ v: JSONValue?) -> Bool { if case .string? = v { return true }; return false }
        func isBool(_ v: JSONValue?) -> Bool { if case .bool? = v { return true }; return false }
        func isObject(_ v: JSONValue?) -> Bool { if case .object? = v { return true }; return false }
        func absentOr(_ v: JSONValue?, _ ok: (JSONValue?) -> Bool) -> Bool { v == nil || v == .null || ok(v) }
        guard case .object = json else { return .unreadable }
        if kind == "experiment" {
            guard isString(json["variant_name"]) else { return .unreadable }
            let sound = isString(json["experiment_key"]) && absentOr(json["user_id"], isString) && absentOr(json["variant_id"], isString)
                && absentOr(json["is_control"], isBool) && absentOr(json["assigned"], isBool) && absentOr(json["configuration"], isObject)
            return sound ? .readable : .doubtful
        }
        return absentOr(json["key"], isString) && isBool(json["enabled"]) && absentOr(json["config"], isObject) ? .readable : .doubtful
    }

    /// A 404 answer gives `flagNotFound`/`experimentNotFound`, never a value, and deletes the
    /// persisted entry; any other failure gives the value persisted for that same user and key in
    /// the client's store, or an error when none is.
    ///
    /// An operation's answer may come from any request for its (client, user, key) settled while
    /// it ran (its own, or a flight it joined; after a clear a newer request for the same key can
    /// settle first): the operation passes when one of those requests explains its outcome
    /// (issue 11 section 3), and a failure names every candidate request. An error with no such
    /// request needs one of its client for its kind, key and user in flight while it ran (failures
    /// are never cached: section 4), and `cancelled` needs a `cancel` step of the operation or a
    /// `close()` of its client while it ran. Identity data is compared by Unicode scalars.
    static func offlineFallback(_ c: CheckContext) -> [(String, [String])] {
        // By exact client name (NFC and NFD names are two clients).
        let storeOf = Dictionary(c.scenario.clients.map { (ExactKey($0.name), $0.store) }, uniquingKeysWith: { a, _ in a })
        let fallbackOn = Dictionary(c.scenario.clients.map { (ExactKey($0.name), $0.settings.offlineFallback) }, uniquingKeysWith: { a, _ in a })
        // Every state the contract leaves an entry in, by store \0 kind \0 exact user \0 exact key:
        // `nil` is absent, and an entry not listed is absent only. Where CONTRACT.md allows more
        // than one behaviour, the entry may be in either state afterwards, and a fallback is
        // explained by any of them: a seeded entry or an answer with a field of an unexpected
        // type (read or not); a 404 to a request from before a clear (section 4 deletes on 404,
        // section 5.1 forbids writing such an answer: deleting may or may not count); a 404 or a
        // success seen by a client with fallback off that shares the store (an outside tester's
        // Go and Node SDKs delete and write there, the others do not). Never ambiguous: an
        // answer the SDK never read (it gave up first) changes nothing, and neither does a 2xx
        // body that is not an answer (`decodingError`, a failure: section 4).
        var persisted: [String: [JSONValue?]] = [:]
        func states(_ pid: String) -> [JSONValue?] { persisted[pid] ?? [nil] }
        // Each launched client's own view of its store (by exact client name, then pid): what the
        // store held when the client read it, then its own writes, deletes and clears. An SDK may
        // read its store once per client and write through (a copy of its own), so a client's
        // fallback may give what its view holds as well as what the store holds now: two instances
        // running at once need not see each other's later writes (CONTRACT.md section 4 asks a
        // value persisted before a relaunch; an eighty-second outside tester, F8: such an SDK
        // failed generated workloads with two clients of one store). The copy may be made at the
        // launch or at the client's first use of its store (a lazy read of a file): until that
        // use the view takes in every state the store passes through (`floating`; an
        // eighty-fourth outside tester, F4). A `seed_store` goes to the store, never through a
        // running instance's copy (out of process it names a store; the same tester's F1).
        var views: [ExactKey: [String: [JSONValue?]]] = [:]
        var floating: Set<ExactKey> = []
        func storePrefix(_ store: String) -> String { exact(store) + "\u{0}" }
        func launch(_ client: String) {
            guard let store = storeOf[ExactKey(client)] ?? nil else { return }
            views[ExactKey(client)] = persisted.filter { $0.key.hasPrefix(storePrefix(store)) }
            floating.insert(ExactKey(client))
        }
        for client in c.scenario.clients where !c.scenario.launchedAtFirstUse.containsExactly(client.name) { launch(client.name) }
        /// The client's own view of `pid` is the store's now (after its own write or delete).
        func follow(_ client: String, _ pid: String) {
            guard views[ExactKey(client)] != nil else { return }
            views[ExactKey(client)]![pid] = persisted[pid]
        }
        /// A floating view takes in the store's states now (after any event that may change them).
        func drift() {
            for key in floating {
                guard let store = storeOf[key] ?? nil, var view = views[key] else { continue }
                let prefix = storePrefix(store)
                for pid in Set(persisted.keys.filter { $0.hasPrefix(prefix) }).union(view.keys) {
                    var held = view[pid] ?? [nil]
                    for state in persisted[pid] ?? [nil] where !held.contains(where: { $0 == state }) { held.append(state) }
                    view[pid] = held
                }
                views[key] = view
            }
        }
        /// The client uses its store now (a lookup's answer or failure, a clear): its copy is made.
        func pin(_ client: String) { floating.remove(ExactKey(client)) }
        func allow(_ pid: String, _ state: JSONValue?) {
            let now = states(pid)
            if !now.contains(where: { $0 == state }) { persisted[pid] = now + [state] }
        }
        var epochs: [String: Int] = [:]
        var epochAtReceipt: [Int: Int] = [:]
        var clearsAt: [String: [Int]] = [:]   // client -> history indices of its clears, logouts, undos
        var receipts: [Int: Int] = [:]   // seq -> history index of its receipt
        let issueStarts = appIssueStarts(c)
        // client \0 kind \0 exact user \0 exact key -> every settled attempt, in order
        var attempts: [String: [(record: RequestRecord, index: Int)]] = [:]
        var invokes: [ExactKey: HistoryEvent] = [:]   // by exact label
        var problems: [(String, [String])] = []
        func id(_ prefix: String, _ kind: String, _ user: String, _ key: String) -> String {
            "\(exact(prefix))\u{0}\(kind)\u{0}\(exact(user))\u{0}\(exact(key))"
        }
        var appCalls: [ExactKey: AppCalls] = [:]
        for client in c.scenario.app == nil ? [] : c.scenario.appClients {
            guard let settings = c.scenario.appSettings(client: client) else { continue }
            appCalls[ExactKey(client)] = AppCalls(history: c.history, client: client, initialIdentity: settings.initialUser)
        }
        // Where each request was answered (seq -> history index), read ahead: a request still in
        // flight when a lookup returned is answered later in the history.
        var answerIndex: [Int: Int] = [:]
        for e in c.history where e.kind == .response { if let seq = e.request?.seq, answerIndex[seq] == nil { answerIndex[seq] = e.index } }
        // Lookup requests received so far, by client \0 kind \0 exact key (the user exact, `nil`
        // when the request names none); `unread` holds those whose key the mock could not read.
        var lookupsSent: [String: [(index: Int, seq: Int, user: String?)]] = [:]
        var unreadLookups: [ExactKey: [(index: Int, seq: Int)]] = [:]
        func keyID(_ client: String, _ kind: String, _ key: String) -> String { "\(exact(client))\u{0}\(kind)\u{0}\(exact(key))" }
        let givenUp = givenUpWhileRunning(c)
        var closesAt: [ExactKey: Int] = [:]   // the first close() of each client
        for e in c.history where e.kind == .invoke && e.name == "close" { if let client = e.client, closesAt[ExactKey(client)] == nil { closesAt[ExactKey(client)] = e.index } }
        /// The lookup requests of `client` for `kind` and `key` that may carry `user`'s answer
        /// (naming that user exactly, or none), as received so far.
        func lookupRequests(client: String, kind: String, user: String, key: String) -> [(index: Int, seq: Int, user: String?)] {
            let mine = exact(user)
            return (lookupsSent[keyID(client, kind, key)] ?? []).filter { $0.user == nil || $0.user == mine }
        }
        /// The history index of the last memory clear of `client` before `index` (`clearCache()`,
        /// `close()`, and with `logout` the reference app's logout), or -1.
        func lastMemoryClear(of client: String, before index: Int, logout: Bool) -> Int {
            c.history[..<index].last { e in
                e.client.isExactly(client) && ((e.kind == .invoke && (e.name == "clearCache" || e.name == "close")) || (logout && e.kind == .marker && e.name == "logout"))
            }?.index ?? -1
        }
        /// Where the deadline of a lookup that ran from `from` to `to` may have started: at its own
        /// start, or at the receipt of any request for its client, kind and key (its user, or
        /// none) in flight while it ran, whoever sent it (a call it joined, the reference app's,
        /// a chain of joiners whose first was cancelled). Before, only the runner's own lookups
        /// pending when it began counted, and a correct SDK's joiner of an app's request, or of
        /// a cancelled caller's, failed at that request's deadline (a sixty-seventh outside
        /// tester, F1 and F3).
        ///
        /// Not a request received before a `clearCache()`, `close()` or app logout of its client
        /// that came before the call: a call begun after a clear joins nothing begun before it
        /// (CONTRACT.md section 5.1; a sixty-eighth outside tester: a pre-clear request's deadline
        /// excused an SDK that failed every request for the key when one timed out).
        func earliestSender(client: String, kind: String, user: String, key: String, from: Int, to: Int) -> Int {
            let cleared = lastMemoryClear(of: client, before: from, logout: true)
            return lookupRequests(client: client, kind: kind, user: user, key: key).filter { r in
                r.index > cleared && r.index < to && (answerIndex[r.seq] ?? Int.max) > from
            }.map(\.index).min().map { min($0, from) } ?? from
        }
        /// Whether a lookup that returned a value may have read it from the memory cache: a
        /// success for it was answered (and not ended by the SDK) before it began, since the last
        /// clear of its client, less than the client's `cache_ttl` before (CONTRACT.md section 4;
        /// on the scenario's clock, or on the wall clock for an SDK without `virtual_clock`). Such a call
        /// waits on no request, whatever the SDK did to another.
        func mayBeACacheHit(client: String, kind: String, user: String, key: String, from: Int, outcome: JSONValue) -> Bool {
            guard outcome["value"] != nil else { return false }
            // Memory clears only (`clearOfflineCache()` leaves the memory cache as it was).
            let lastClear = lastMemoryClear(of: client, before: from, logout: false)
            let ttl = c.settings(of: client).cacheTTL
            let wallClock = !c.driver.capabilities.contains("virtual_clock")
            // An answer for another key that names this one may be cached under this one (an SDK
            // may keep the key an answer names: `naming`); a hit at exactly the TTL is a tie an
            // SDK's `Date` or float arithmetic decides either way, as `no_stale_write` has it (a
            // sixty-seventh outside tester, F2 and F5).
            let field = kind == "flag" ? "key" : "experiment_key"
            let prefix = "\(exact(client))\u{0}\(kind)\u{0}\(exact(user))\u{0}"
            let answers = (attempts[id(client, kind, user, key)] ?? []) + attempts.filter { $0.key.hasPrefix(prefix) }.flatMap { entry in
                entry.value.filter { $0.record.response?[field]?.stringValue.map { $0.isExactly(key) } ?? false }
            }
            return answers.contains { a in
                guard a.index < from, a.index > lastClear, a.record.succeeded, !a.record.cancelled else { return false }
                if wallClock {
                    // On the wall clock, as the SDK's entry ages: the answer is stored when the
                    // adapter reads it, a moment after the mock recorded it (a second allowed).
                    guard let answered = c.history[a.index].wallInstant, let began = c.history[from].wallInstant else { return true }
                    return began - answered <= ttl + 1
                }
                return ((c.history[from].exactTime - c.history[a.index].exactTime) * 1e6).rounded() <= (ttl * 1e6).rounded()
            }
        }
        /// Whether a request that could carry the lookup's answer was in flight while it ran: one
        /// of its client for its kind and key, for its user or naming none (or whose key the mock
        /// could not read), received before it returned and not answered before it began.
        func requestInFlight(client: String, kind: String, user: String, key: String, from: Int, to: Int) -> Bool {
            func during(_ index: Int, _ seq: Int) -> Bool { index < to && (answerIndex[seq] ?? Int.max) > from }
            return lookupRequests(client: client, kind: kind, user: user, key: key).contains { during($0.index, $0.seq) }
                || (unreadLookups[ExactKey(client)] ?? []).contains { during($0.index, $0.seq) }
        }
        /// Judges the outcome of a lookup that ran from history index `from` to `to` (`invoke`:
        /// a runner operation's; `nil` for the reference app's calls).
        func judge(label: String, client: String, kind: String, user: String, key: String, from: Int, to: Int, outcome: JSONValue, invoke: HistoryEvent?) {
            let error = outcome["error"]?.stringValue
            if error == "cancelled" {
                // Only a caller that gave up ends `cancelled`: a `cancel` step of its own label (or
                // `times` group) or a `close()` of its client while it ran, or the runner's own at
                // the end (CONTRACT.md section 4: a timeout or any other failure gives the persisted
                // value or its own error; section 5, defect 3: cancelling one waiter of a shared
                // request leaves the others theirs). An app's calls end as its actions decide.
                // Before, an SDK whose deadline cancelled (the persisted value lost), or whose
                // cancel of one waiter cancelled every waiter, passed every named check (a
                // fifty-ninth outside tester, F4 and F5).
                guard let invoke, !givenUp(invoke, to), to < c.runnerCancelledFrom else { return }
                problems.append(("\(label) (\(invoke.name ?? "lookup") of '\(Attribution.show(key))' for '\(Attribution.show(user))') ended cancelled, "
                                 + "but nothing cancelled it: no cancel step of its label and no close() of its client ran while it did "
                                 + "(CONTRACT.md section 4: a timeout or other failure gives the persisted value, else its own error; "
                                 + "section 5, defect 3: cancelling one waiter of a shared request leaves the others their answer)",
                                 c.excerpt([from, to])))
                return
            }
            // The candidates: every attempt for (client, user, key) settled while it ran.
            var candidates = (attempts[id(client, kind, user, key)] ?? []).filter { $0.index > from && $0.index < to }
            // A call nothing gave up ends with a failure (an error, or a value that is no cache
            // hit: the persisted one) only when a request of its own failed while it ran. A request
            // the SDK itself ended (the mock's `cancelled` mark) or one still in flight when the
            // call returned explains nothing, unless something ended it for this call: a `cancel`
            // step of its label or a `close()` of its client while it ran (or before: a closed
            // client), the runner at the end, or its own deadline (`mayHaveMetItsDeadline`).
            // Cancelling one waiter of a shared request leaves the others their answer (CONTRACT.md
            // section 5, defect 3), and a clear or another client's close leaves a call its answer
            // (section 5.1). Before, an SDK that ended the shared request (or its waiters) when its
            // starter was cancelled, every client's requests on one client's close, or in-flight
            // lookups on `clearCache()`, gave the others a `networkError` or the stale persisted
            // value and passed every named check (a sixty-fifth outside tester, findings 1 to 3).
            // The reference app's calls keep the rule they had (its actions decide what ends them).
            if let invoke, !givenUp(invoke, to), to < c.runnerCancelledFrom, (closesAt[ExactKey(client)] ?? Int.max) > to,
               !c.mayHaveMetItsDeadline(client: client, from: earliestSender(client: client, kind: kind, user: user, key: key, from: from, to: to), to: to) {
                let ended = candidates.filter { $0.record.cancelled }
                candidates.removeAll { $0.record.cancelled }
                let failed = error.map { $0 != "invalidConfig" } ?? !mayBeACacheHit(client: client, kind: kind, user: user, key: key, from: from, outcome: outcome)
                if candidates.isEmpty, failed, !c.mayFailBeforeTheMock(client: client, user: user, key: key) {
                    let open = lookupRequests(client: client, kind: kind, user: user, key: key).filter { r in
                        r.index < to && (answerIndex[r.seq] ?? Int.max) > to
                    }
                    // An error with none sent at all is the rule below's, in its own words.
                    if !ended.isEmpty || !open.isEmpty || error == nil {
                        let cause = !ended.isEmpty
                            ? "after the SDK itself ended request #\(ended.last!.record.seq)\(ended.count > 1 ? " (and \(ended.count - 1) more)" : "")"
                            : !open.isEmpty ? "while request #\(open.last!.seq)\(open.count > 1 ? " (and \(open.count - 1) more)" : "") for its user and key was still unanswered"
                            : "with no request for its user and key failed while it ran and no answer of its own in its memory cache "
                                + "(none since the last clearCache() or close(), within the cache_ttl): another user's or key's entry, or the persisted value without a failure"
                        problems.append(("\(label) (\(kind == "flag" ? "evaluateFlag" : "getAssignment") of '\(Attribution.show(key))' for '\(Attribution.show(user))') "
                                         + "gave \(outcome) \(cause), but nothing ended it for this call: no cancel step of its label, no close() of its client, "
                                         + "and its deadline (timeout \(secondsText(c.settings(of: client).timeout)) s) had not passed "
                                         + "(CONTRACT.md section 4: only a failure gives the persisted value or an error; section 5, defect 3: cancelling "
                                         + "one waiter of a shared request leaves the others their answer; section 5.1: after a clear its own caller still gets the answer)",
                                         c.excerpt(ended.map(\.index) + open.map(\.index) + [from, to])))
                        return
                    }
                }
            }
            guard !candidates.isEmpty else {
                // An error with no request that could carry it: the SDK kept a failure, or made
                // one up (CONTRACT.md section 4: failures are never cached; any failure but a 404
                // gives the persisted value). `invalidConfig` needs no request, and one that may
                // fail before the mock records it proves nothing (`mayFailBeforeTheMock`). Before, an SDK that cached a 404 or a 500,
                // or stayed offline after one dropped connection, passed every named check (a
                // fifty-ninth outside tester, F1 to F3).
                guard let error, error != "invalidConfig", !c.mayFailBeforeTheMock(client: client, user: user, key: key),
                      !requestInFlight(client: client, kind: kind, user: user, key: key, from: from, to: to) else { return }
                problems.append(("\(label) (\(kind == "flag" ? "evaluateFlag" : "getAssignment") of '\(Attribution.show(key))' for '\(Attribution.show(user))') "
                                 + "threw \(error), but no request for its user and key was sent or in flight while it ran "
                                 + "(CONTRACT.md section 4: failures are never cached; a lookup the cache cannot answer asks the backend, "
                                 + "and any failure but a 404 gives the persisted value)",
                                 c.excerpt([from, to])))
                return
            }
            let pid = (storeOf[ExactKey(client)] ?? nil).map { id($0, kind, user, key) }
            // The most recent state first: the failure message is judged against it.
            var stored: [JSONValue?] = fallbackOn[ExactKey(client)] == true ? (pid.map(states) ?? [nil]) : [nil]
            // Then what the client's own view holds (`views`), where it differs.
            if fallbackOn[ExactKey(client)] == true, let pid, let view = views[ExactKey(client)] {
                for state in view[pid] ?? [nil] where !stored.contains(where: { $0 == state }) { stored.append(state) }
            }
            let explanations = stored.map { state in
                candidates.map { attempt in
                    fallbackProblem(label: label, kind: kind, user: user, key: key, record: attempt.record, outcome: outcome, stored: state)
                }
            }
            if explanations.contains(where: { $0.contains { $0 == nil } }) { return }
            var message = explanations[0].last!!
            if candidates.count > 1 {
                message += " (nor does any other request settled while it ran explain it: "
                    + candidates.dropLast().map { "#\($0.record.seq) \($0.record.status.map(String.init) ?? "no answer")" }.joined(separator: ", ") + ")"
            }
            problems.append((message, c.excerpt(candidates.map(\.index) + [from, to])))
        }
        // Lookups invoked and not completed, by client \0 kind \0 exact user \0 exact key: an
        // answer that comes when none is waiting (every caller gave up: its deadline, a cancel)
        // may have been read or not. Whether the SDK's cancellation reached the mock before the
        // answer did is thread timing the history does not keep, and the check read the mock's
        // `cancelled` mark alone: one history got both verdicts (a thirty-seventh outside tester,
        // F8: a correct SDK's 503 after an unread late answer failed in 2 to 6 runs of 8).
        var waiting: [String: Int] = [:]
        var completed: Set<ExactKey> = []
        func lookup(_ invoke: HistoryEvent) -> String? { lookupTarget(invoke).map { id($0.client, $0.kind, $0.user, $0.key) } }
        for e in c.history {
            // Floating views take in what the events before this one left in the store.
            if !floating.isEmpty { drift() }
            switch e.kind {
            case .invoke:
                if let label = e.label { invokes[ExactKey(label)] = e }
                if let k = lookup(e) { waiting[k, default: 0] += 1 }
                if let client = e.client, ["clearCache", "close", "clearOfflineCache"].contains(e.name ?? "") {
                    epochs[client, default: 0] += 1
                    clearsAt[client, default: []].append(e.index)
                    if e.name == "clearOfflineCache", let store = storeOf[ExactKey(client)] ?? nil {
                        persisted = persisted.filter { !$0.key.hasPrefix(storePrefix(store)) }
                        pin(client)
                        if views[ExactKey(client)] != nil { views[ExactKey(client)] = [:] }
                    }
                }
            case .marker where e.name == "launch":
                if let client = e.client { launch(client) }
            case .marker where e.name == "seed_store":
                // An entry written into the store as given (seed_store step): persisted from now.
                if let client = e.client, let store = storeOf[ExactKey(client)] ?? nil, case .string(let kind)? = e.detail?["kind"],
                   case .string(let user)? = e.detail?["user"], case .string(let key)? = e.detail?["key"], let json = e.detail?["json"] {
                    // An entry the SDK cannot read is as good as absent (DriverProtocol.md,
                    // seed_store): an assignment without a text `variant_name` replaces what was
                    // there with nothing (a fifteenth outside tester: every correct SDK threw the
                    // 503 and the check demanded the seeded value). One with another field of an
                    // unexpected type may be read or not.
                    let pid = id(store, kind, user, key)
                    switch Self.seededReadability(kind: kind, json) {
                    case .unreadable: persisted[pid] = nil
                    case .readable: persisted[pid] = [json]
                    case .doubtful: persisted[pid] = [json, nil]
                    }
                }
            case .marker where e.name == "logout" || e.name == "undo":
                if let client = e.client { epochs[client, default: 0] += 1; clearsAt[client, default: []].append(e.index) }
            case .request:
                if let r = e.request, let client = r.client {
                    if let key = r.key {
                        lookupsSent[keyID(client, key.kind, key.key), default: []].append((e.index, r.seq, r.users.first.map(exact)))
                    } else if !["/api/v1/tracking/track", "/api/v1/tracking/batch"].contains(r.path) {
                        unreadLookups[ExactKey(client), default: []].append((e.index, r.seq))
                    }
                    epochAtReceipt[r.seq] = epochs[client, default: 0]
                    receipts[r.seq] = e.index
                    // The client gave up on it (deadline, cancellation): its outcome is decided
                    // without an answer, so the attempt counts from now.
                    if r.cancelled, let key = r.key, let user = r.users.first {
                        attempts[id(client, key.kind, user, key.key), default: []].append((r, e.index))
                    }
                }
            case .response:
                guard let r = e.request, let client = r.client, let key = r.key, let user = r.users.first else { continue }
                attempts[id(client, key.kind, user, key.key), default: []].append((r, e.index))
                // An answer the client gave up on before it came (its deadline, a cancellation) was never read.
                guard let store = storeOf[ExactKey(client)] ?? nil, !r.cancelled else { continue }
                pin(client)
                let pid = id(store, key.kind, user, key.key)
                let on = fallbackOn[ExactKey(client)] == true
                let current = epochAtReceipt[r.seq] == epochs[client, default: 0]
                // Sent by an app call begun before a clear its receipt follows: the SDK may have
                // started it before that clear (never written) or after it (written), as the
                // memory cache's model has it (`cacheMatchesModel`).
                let straddles = issueStarts[r.seq].map { start in (clearsAt[client] ?? []).contains { $0 > start && $0 < (receipts[r.seq] ?? e.index) } } ?? false
                // No call of this client waits for it: its callers all gave up, and whether the SDK
                // still read it is not known (F8 above). App calls are not lookups here: their
                // answers keep the rule they had.
                let unread = (waiting[id(client, key.kind, user, key.key)] ?? 0) == 0 && issueStarts[r.seq] == nil
                if r.succeeded, current, let value = r.response {
                    // An answer for another experiment or flag than asked may be stored under either
                    // key, naming either (an SDK may keep the answered key or write the asked one; the
                    // faithful variant does the latter), or fail: each of those states may hold.
                    let field = key.kind == "experiment" ? "experiment_key" : "key"
                    let other = value[field]?.stringValue.flatMap { $0.isExactly(key.key) ? nil : $0 }
                    let readability = Self.seededReadability(kind: key.kind, value)
                    switch readability {
                    case .unreadable: break   // not an answer: decodingError, nothing written
                    case .readable where on && !straddles && !unread && other == nil && r.ambiguousBody != true: persisted[pid] = [value]
                    case .readable, .doubtful:
                        allow(pid, value)
                        if other != nil { allow(pid, Self.naming(key.key, kind: key.kind, value)) }
                    }
                    if let other, readability != .unreadable {
                        allow(id(store, key.kind, user, other), value)
                        follow(client, id(store, key.kind, user, other))
                    }
                    if readability != .unreadable { follow(client, pid) }
                }
                if r.status == 404 {
                    if on && current && !unread { persisted[pid] = [nil] } else { allow(pid, nil) }
                    follow(client, pid)
                }
            case .complete:
                if let label = e.label, let invoke = invokes[ExactKey(label)], let k = lookup(invoke), let n = waiting[k], n > 0,
                   completed.insert(ExactKey(label)).inserted {
                    waiting[k] = n - 1   // the first completion of a label only
                }
                guard let label = e.label, let invoke = invokes[ExactKey(label)], let t = lookupTarget(invoke), let outcome = e.outcome else { continue }
                judge(label: label, client: t.client, kind: t.kind, user: t.user, key: t.key, from: invoke.index, to: e.index, outcome: outcome, invoke: invoke)
            case .marker where e.name == "returned":
                // A lookup of the reference app (CONTRACT.md section 8) is judged like any other:
                // its `returned` marker carries the SDK's outcome (`AppCalls`).
                guard let client = e.client, case .number(let n)? = e.detail?["call"], let outcome = e.detail?["outcome"],
                      let call = appCalls[ExactKey(client)]?.calls.first(where: { $0.id == Int(n) }),
                      ["evaluateFlag", "getAssignment"].contains(call.sdk), let app = c.scenario.appSettings(client: client) else { continue }
                let kind = call.sdk == "evaluateFlag" ? "flag" : "experiment"
                judge(label: AppCalls.describe(call), client: client, kind: kind, user: call.identity,
                      key: kind == "flag" ? app.flag : app.experiment, from: call.start, to: e.index, outcome: outcome, invoke: nil)
            default: break
            }
        }
        return problems
    }

    /// `answer` naming `key` as its experiment (`experiment_key`) or flag (`key`), as an SDK may
    /// store or return an answer for another key than it asked for; `answer` itself when it is no object.
    static func naming(_ key: String, kind: String, _ answer: JSONValue) -> JSONValue {
        guard case .object(var o) = answer else { return answer }
        o[kind == "flag" ? "key" : "experiment_key"] = .string(key)
        return .object(o)
    }

    /// The first field in which a value an SDK served (`served`, from its cache or its store)
    /// shows it is not `entry` but another one with the same variant: every field the entry holds
    /// with its type and the SDK returns must be the entry's (`experiment_key`, `user_id`,
    /// `variant_id`, `is_control`, `configuration`; a flag's `key`, `config`), compared exactly
    /// (identity data); `nil` when none differs. (A thirtieth outside tester: another user's entry,
    /// or another key's, with the same variant name and another configuration, passed.)
    static func otherEntryField(kind: String, entry: JSONValue, served: JSONValue) -> String? {
        func isString(_ v: JSONValue?) -> Bool { if case .string? = v { return true }; return false }
        // An empty `key`, `experiment_key` or `user_id` may be filled in from the call (the
        // shipping SDK does): the entry then names the asked one (an outside tester: an answer
        // with `"user_id": ""` failed every correct SDK in `no_stale_write`).
        func isNamingString(_ v: JSONValue?) -> Bool { if case .string(let s)? = v { return !s.isEmpty }; return false }
        func isBool(_ v: JSONValue?) -> Bool { if case .bool? = v { return true }; return false }
        func isObject(_ v: JSONValue?) -> Bool { if case .object? = v { return true }; return false }
        let fields: [(String, (JSONValue?) -> Bool)] = kind == "flag" ? [("key", isNamingString), ("config", isObject)]
            : [("experiment_key", isNamingString), ("user_id", isNamingString), ("variant_id", isString), ("is_control", isBool), ("configuration", isObject)]
        return fields.first { name, typed in
            guard typed(entry[name]), let sent = served[name] else { return false }
            // A member served as `null` where the entry holds a value is not the entry's (a
            // seventy-ninth outside tester: a fallback with `variant_id: null` passed, read as
            // the member's absence); but for `config` and `configuration`, which an SDK may fail
            // to read (a number past a double's range) and serve as `null`.
            guard let got = present(sent) else { return !(name == "config" || name == "configuration") }
            guard got != entry[name] else { return false }
            return !(name == "config" || name == "configuration") || !nonFiniteAgree(entry[name]!, got)
        }?.0
    }

    /// Whether `served` is `answer` but for numbers out of a double's range or not numbers at all
    /// (`1e400`), which the harness reads as `null` and an adapter sends as the string
    /// `"Infinity"`, `"-Infinity"` or `"NaN"` (DriverProtocol.md): the same JSON as an SDK read it
    /// (an outside tester: every out-of-process SDK failed `no_stale_write` on such a body).
    static func nonFiniteAgree(_ answer: JSONValue, _ served: JSONValue) -> Bool {
        switch (answer, served) {
        case (.null, .string(let s)): return ["Infinity", "-Infinity", "NaN"].contains(s)
        case (.number(let x), .string(let s)) where !x.isFinite:
            return s == (x.isNaN ? "NaN" : x > 0 ? "Infinity" : "-Infinity")
        case (.number(let x), .null) where !x.isFinite: return true
        case (.object(let a), .object(let b)):
            guard a.count == b.count else { return false }
            return a.allSatisfy { k, v in b.exactly(k).map { nonFiniteAgree(v, $0) } ?? false }
        case (.array(let a), .array(let b)): return a.count == b.count && zip(a, b).allSatisfy { nonFiniteAgree($0, $1) }
        default: return answer == served
        }
    }

    /// The first field in which `served`, a value an SDK returned, is not the readable 2xx
    /// `answer` of `kind` that decided it, or `nil`: a flag's `enabled`, an assignment's
    /// `variant_name`; where the answer carries them typed, an assignment's `is_control`,
    /// `assigned`, `variant_id`, and `user_id` and `experiment_key` when not empty (an SDK may
    /// fill an empty one in from the call, and keep the `user` and `key` asked where the answer
    /// names others). Compared as JSON values (identity data by Unicode scalars).
    static func answerMismatch(kind: String, answer: JSONValue, served: JSONValue, user: String? = nil, key: String? = nil) -> (field: String, answered: JSONValue, served: JSONValue)? {
        func isBool(_ v: JSONValue?) -> Bool { if case .bool? = v { return true }; return false }
        func isObject(_ v: JSONValue?) -> Bool { if case .object? = v { return true }; return false }
        func nonEmptyString(_ v: JSONValue?) -> Bool { if case .string(let s)? = v { return !s.isEmpty }; return false }
        var fields: [(String, (JSONValue?) -> Bool, Bool)] = []   // name, answer typed, required in served
        // Not the `config`/`configuration` objects: their numbers are read as each parser reads
        // them (an outside tester: 1e400 is null to the harness and "Infinity" through the
        // driver protocol), and no named check compares a value's configuration.
        if kind == "flag" {
            fields = [("enabled", isBool, true)]
        } else {
            fields = [("variant_name", nonEmptyString, true), ("is_control", isBool, false), ("assigned", isBool, false),
                      ("variant_id", nonEmptyString, false), ("user_id", nonEmptyString, false), ("experiment_key", nonEmptyString, false)]
        }
        // A field the answer lacks is read as its absence, never filled in from elsewhere (the
        // persisted entry: an outside tester's SDK completed a lean fresh answer from its stale
        // store, `assigned: false` included, and passed): no `assigned` is `true` (the Python
        // example's `missing-assigned-false` is a defect), no `is_control` is not `true`, no
        // `variant_id` is none (or empty).
        if kind == "experiment" {
            let absent: [(String, (JSONValue) -> Bool)] = [
                ("assigned", { $0 == .bool(true) }), ("is_control", { $0 == .bool(false) }), ("variant_id", { $0 == .string("") }),
            ]
            for (name, allowed) in absent where present(answer[name]) == nil {
                if let got = present(served[name]), !allowed(got) { return (name, .null, got) }
            }
        }
        for (name, typed, required) in fields where typed(answer[name]) {
            guard let got = present(served[name]) else {
                // Absent, it may be a field the SDK's value does not have; `null`, it says the
                // answer had none (a seventy-ninth outside tester: `variant_id: null` passed).
                if required || served[name] == .null { return (name, answer[name]!, served[name] ?? .null) }
                continue
            }
            if got == answer[name]! { continue }
            // An answer naming another experiment or user than asked may be kept as asked (the
            // faithful variant writes the asked key: `offlineFallback`'s stored states).
            if name == "experiment_key", let key, got == .string(key) { continue }
            if name == "user_id", let user, got == .string(user) { continue }
            return (name, answer[name]!, got)
        }
        return nil
    }

    /// What is wrong with `outcome` if `record` is the request that decided it, or `nil` when it
    /// is explained (CONTRACT.md section 4, offline fallback).
    static func fallbackProblem(label: String, kind: String, user: String, key: String, record: RequestRecord,
                                outcome: JSONValue, stored: JSONValue?) -> String? {
        let who = "user '\(Attribution.show(user))' and \(kind) '\(Attribution.show(key))'"
        if record.status == 404, !record.cancelled {
            let want = kind == "flag" ? "flagNotFound" : "experimentNotFound"
            return outcome["error"] == .string(want) ? nil
                : "\(label): the backend answered 404 (request #\(record.seq)) but the SDK gave \(outcome) instead of \(want) (CONTRACT.md section 4: never a stale value on 404)"
        }
        if record.succeeded, !record.cancelled {
            // A 2xx answer is judged by the other checks, but it explains no error: only a failed
            // request does (a thirtieth outside tester: a newer request's success, settled while a
            // held request's 429 was thrown instead of the persisted value, excused an SDK with no
            // fallback on 4xx; a thirty-first: the same with a transport error or a timeout). A
            // `decodingError` may come of a body an SDK reads more strictly; `cancelled` is not
            // judged; an answer the SDK gave up on before it came is `cancelled` in its record.
            let readable = record.response.map { Self.seededReadability(kind: kind, $0) == .readable } ?? false
            guard readable, record.ambiguousBody != true, let answer = record.response else { return nil }
            // A value this answer decided is this answer: its flag decision or variant, and the
            // identity fields it carries (a thirty-seventh outside tester, F2-F4: another user's
            // evaluation or assignment object, or the persisted value in place of a fresh answer,
            // returned from a call's own request passed every named check).
            if let value = outcome["value"] {
                return answerMismatch(kind: kind, answer: answer, served: value, user: user, key: key).map {
                    "\(label): the backend answered request #\(record.seq) for \(who) with \($0.field) \($0.answered), but the SDK returned \($0.field) \($0.served) "
                        + "(CONTRACT.md section 4: a success is what the call returns; section 1, the response used)"
                }
            }
            guard case .string(let error)? = outcome["error"], error != "decodingError" else { return nil }
            return "\(label): the backend answered \(record.status.map(String.init) ?? "2xx") (request #\(record.seq)) but the SDK gave \(outcome) (CONTRACT.md section 4)"
        }
        let failure = record.status.map(String.init) ?? "no answer"
        guard let stored else {
            if let value = outcome["value"] {
                return "\(label): the request failed (#\(record.seq): \(failure)) and nothing is persisted for \(who), yet the SDK returned \(value) (CONTRACT.md section 4: never another user's or a stale value)"
            }
            if outcome["error"] == .string("flagNotFound") || outcome["error"] == .string("experimentNotFound") {
                return "\(label): a \(record.status.map(String.init) ?? "transport") failure (#\(record.seq)) was reported as not found (CONTRACT.md section 4)"
            }
            return nil
        }
        guard let value = outcome["value"] else {
            return "\(label): the request failed (#\(record.seq): \(failure)) and a value is persisted for \(who), but the SDK gave \(outcome) (CONTRACT.md section 4: offline fallback)"
        }
        let field = kind == "flag" ? "enabled" : "variant_name"
        // A flag stored without `enabled` (absent or null), where an SDK reads it at all, reads as
        // disabled (the shipping SDK's reading; such an entry is doubtful: `seededReadability`).
        let want = kind == "flag" && (stored[field] == nil || stored[field] == .null) ? JSONValue.bool(false) : stored[field]
        guard value[field] == want else {
            return "\(label): fallback for \(who) gave \(field) \(value[field] ?? .null), persisted is \(want ?? .null) (CONTRACT.md section 4)"
        }
        if let name = otherEntryField(kind: kind, entry: stored, served: value) {
            return "\(label): fallback for \(who) gave \(name) \(value[name] ?? .null), persisted is \(stored[name] ?? .null): another entry's value (CONTRACT.md section 4: the persisted value for that same user and key)"
        }
        return nil
    }

    // MARK: the app pattern (CONTRACT.md section 8)

    /// Assignments (exposures) happen only after the view is displayed with the gating flag on,
    /// for the identity displayed; a variant is shown only after a matching assignment; business
    /// events come after the exposure and carry the `layout_source` of what is shown.
    ///
    /// Runs per app instance (`Scenario.appClients`): each app's markers and requests are its own
    /// client's, so two apps on two clients never blame each other. An assignment request belongs
    /// to the app's `getAssignment` call in flight that sent it (`AppCalls`), and passes when that
    /// call was made by a display of the request's identity with the flag on, wherever the
    /// request falls among other actions' markers (a display racing a logout or login).
    static func exposureAfterDisplay(_ c: CheckContext) -> [(String, [String])] {
        guard c.scenario.app != nil else { return [("the scenario has no app section", [])] }
        return c.scenario.appClients.flatMap { client in
            exposureAfterDisplay(c, app: c.scenario.appSettings(client: client)!).map { (appPrefix(c, client) + $0.0, $0.1) }
        }
    }

    /// `exposure_after_display` for the app on `app.client`.
    static func exposureAfterDisplay(_ c: CheckContext, app: AppSettings) -> [(String, [String])] {
        var problems: [(String, [String])] = []
        let calls = AppCalls(history: c.history, client: app.client, initialIdentity: app.initialUser)
        let runner = RunnerCalls(history: c.history, client: app.client)
        var displays: Set<String> = []   // exact identity \0 revision of each display with the flag on
        var exposed: [ExactKey: [String]] = [:]   // identity (exact) -> every variant answered (a thirty-sixth outside tester, E1: only the last was kept)
        // Variants the app's client may serve from its offline store (CONTRACT.md section 4: on a
        // failure, the persisted value): assignments fetched by any client sharing that store (a
        // relaunch, an earlier launch's exposure) and entries seeded there. Showing one is showing a
        // fetched assignment (section 8); before, every correct SDK failed an offline relaunch
        // (a thirty-third outside tester, F9).
        let storeOf = Dictionary(c.scenario.clients.map { (exact($0.name), $0.store) }, uniquingKeysWith: { a, _ in a })
        let appStore = storeOf[exact(app.client)] ?? nil
        func sharesStore(_ client: String?) -> Bool {
            guard let appStore, let client, let store = storeOf[exact(client)] ?? nil else { return false }
            return store.isExactly(appStore)
        }
        var stored: [ExactKey: [String]] = [:]   // identity (exact) -> variants persisted for the app's experiment
        for e in c.history {
            if e.kind == .marker, e.name == "seed_store", sharesStore(e.client), e.detail?["kind"] == .string("experiment"),
               case .string(let key)? = e.detail?["key"], key.isExactly(app.experiment), case .string(let user)? = e.detail?["user"],
               case .string(let variant)? = e.detail?["json"]?["variant_name"] {
                stored[ExactKey(user), default: []].append(variant)
            }
            if e.kind == .response, let r = e.request, sharesStore(r.client), r.path == "/api/v1/tracking/assign", r.succeeded,
               r.key?.key.isExactly(app.experiment) ?? false, case .string(let variant)? = r.response?["variant_name"], let user = r.users.first {
                stored[ExactKey(user), default: []].append(variant)
            }
            if e.kind == .marker, e.client.isExactly(app.client) {
                switch e.name {
                case "display":
                    if case .string(let id)? = e.detail?["identity"], case .number(let rev)? = e.detail?["revision"], e.detail?["flag_on"] == .bool(true) {
                        displays.insert("\(exact(id))\u{0}\(Int(rev))")
                    }
                case "shown":
                    guard case .string(let id)? = e.detail?["identity"], case .string(let variant)? = e.detail?["variant"] else { break }
                    if variant != "fallback", !(exposed[ExactKey(id)] ?? []).contains(where: { $0.isExactly(variant) }),
                       !(stored[ExactKey(id)] ?? []).contains(where: { $0.isExactly(variant) }) {
                        problems.append(("variant '\(variant.unambiguous)' shown to '\(id.unambiguous)' without a matching assignment", c.slice(around: [e.index])))
                    }
                default: break
                }
            }
            if e.kind == .request, let r = e.request, r.client.isExactly(app.client), r.path == "/api/v1/tracking/assign",
               !runner.inFlight(path: r.path, user: r.users.first ?? "", key: r.key?.key, at: e.index) {
                // (A scenario's own getAssignment on the app's client is no display decision.)
                let user = r.users.first ?? "?"
                let issuers = calls.issuers(path: r.path, user: user, at: e.index)
                // A display asks for the app's experiment only: an assignment of another one sent
                // meanwhile (a prefetch) is an exposure nothing displayed (a thirty-third outside
                // tester, F7: it passed).
                if let key = r.key?.key, !key.isExactly(app.experiment) {
                    problems.append(("assignment (exposure) of experiment '\(key.unambiguous)' for '\(user.unambiguous)' requested, but the app displays only '\(app.experiment.unambiguous)' (CONTRACT.md section 8: exposure only when a fetched assignment is displayed)",
                                     c.slice(around: [e.index], radius: 3)))
                } else if !issuers.contains(where: { $0.action == "display" && displays.contains("\(exact($0.identity))\u{0}\($0.revision)") }) {
                    let why = issuers.isEmpty ? "no getAssignment call of the app for '\(user.unambiguous)' was in flight"
                        : "in flight: " + issuers.map(AppCalls.describe).joined(separator: ", ")
                    problems.append(("assignment (exposure) for '\(user.unambiguous)' requested without a display of '\(user.unambiguous)' with the flag on (\(why))",
                                     c.slice(around: [e.index], radius: 3)))
                }
            }
            if e.kind == .response, let r = e.request, r.client.isExactly(app.client), r.path == "/api/v1/tracking/assign", r.succeeded,
               case .string(let variant)? = r.response?["variant_name"], let user = r.users.first {
                exposed[ExactKey(user), default: []].append(variant)
            }
            // The app tracks only through its `event` action: a tracking request of its client that
            // neither an app call nor a scenario call in flight sent is an event the SDK made up (an
            // exposure recorded for the fallback, say: CONTRACT.md section 8, "never for the
            // fallback"). Before, only `fan_out` saw it, where a scenario named it (an outside audit).
            if e.kind == .request, let r = e.request, r.client.isExactly(app.client),
               r.path == "/api/v1/tracking/track" || r.path == "/api/v1/tracking/batch" {
                let users = r.events.compactMap { $0["user_id"]?.stringValue }
                if let user = (users.isEmpty ? ["?"] : users).first(where: { user in
                    calls.issuers(path: r.path, user: user, at: e.index).isEmpty && !runner.inFlight(path: r.path, user: user, key: nil, at: e.index)
                }) {
                    problems.append(("tracking request for '\(user.unambiguous)' sent by no app event and no call of the scenario: \(r.summary) (CONTRACT.md section 8: exposure only when a fetched assignment is displayed, never for the fallback)",
                                     c.slice(around: [e.index], radius: 3)))
                }
            }
            if e.kind == .request, let r = e.request, r.client.isExactly(app.client) {
                for event in r.events {
                    guard case .string(let source)? = event["metadata"]?["layout_source"], case .string(let user)? = event["user_id"] else { continue }
                    if source == "assignment" && exposed[ExactKey(user)] == nil && (stored[ExactKey(user)] ?? []).isEmpty {
                        problems.append(("event for '\(user.unambiguous)' says layout_source assignment before any exposure", c.slice(around: [e.index])))
                    }
                }
            }
        }
        return problems
    }

    /// After a logout from identity X, nothing of X is shown, requested, exposed or left in the
    /// app client's cache, and later events carry the new identity, until X logs in again.
    ///
    /// Judged by the operation that acted, not by where its marker or request falls (`AppCalls`):
    /// a `shown` or `event` decision, or an SDK call, for X is stale when the app was no longer X
    /// at the revision it acted at (it began after the logout, or showed a completion of an older
    /// revision); a request for X received after the logout passes only when an app call made as
    /// X at a revision when the app was X was in flight through the operation that sends it (an
    /// async display or event that began before a concurrent logout).
    ///
    /// Runs per app instance (`Scenario.appClients`): a logout of one app retires the identity
    /// on that app's client only; another app (another device) may still be that user.
    static func noStaleAfterLogout(_ c: CheckContext) async -> [(String, [String])] {
        guard c.scenario.app != nil else { return [("the scenario has no app section", [])] }
        var problems: [(String, [String])] = []
        for client in c.scenario.appClients {
            problems += await noStaleAfterLogout(c, app: c.scenario.appSettings(client: client)!).map { (appPrefix(c, client) + $0.0, $0.1) }
        }
        return problems
    }

    /// `"app on 'b': "` for an app on a client other than the `app` section's, else empty.
    static func appPrefix(_ c: CheckContext, _ client: String) -> String {
        guard let main = c.scenario.app?.client, !client.isExactly(main) else { return "" }
        return "app on '\(client.unambiguous)': "
    }

    /// `no_stale_after_logout` for the app on `app.client`.
    static func noStaleAfterLogout(_ c: CheckContext, app: AppSettings) async -> [(String, [String])] {
        var problems: [(String, [String])] = []
        let calls = AppCalls(history: c.history, client: app.client, initialIdentity: app.initialUser)
        let runner = RunnerCalls(history: c.history, client: app.client)
        var retired: [ExactKey: Int] = [:]   // identity (exact) -> logout index
        for e in c.history {
            if e.kind == .marker, e.client.isExactly(app.client), e.name == "logout", case .string(let from)? = e.detail?["from"] {
                retired[ExactKey(from)] = e.index
            }
            // Logging in as X again makes X the current identity: what follows is X's by right
            // (found by `contract-harness generate`: login, logout, login as the same user).
            if e.kind == .marker, e.client.isExactly(app.client), e.name == "login", case .string(let user)? = e.detail?["identity"] {
                retired[ExactKey(user)] = nil
            }
            if e.kind == .marker, e.client.isExactly(app.client), ["shown", "event", "call"].contains(e.name ?? ""),
               case .string(let id)? = e.detail?["identity"], let at = retired[ExactKey(id)] {
                // The revision it acted at: a shown completion's decision (`decided_at`), an
                // event's or a call's own revision; without one, where the marker falls.
                var acted: Int?
                if case .number(let n)? = e.detail?["decided_at"] { acted = Int(n) }
                else if e.name != "shown", case .number(let n)? = e.detail?["revision"] { acted = Int(n) }
                if acted.map({ !calls.identity(at: $0).isExactly(id) }) ?? true {
                    let what = e.name == "call" ? "SDK call (\(e.detail?["sdk"]?.stringValue ?? "?") by app.\(e.detail?["action"]?.stringValue ?? "?"))" : e.name!
                    problems.append(("\(what) for '\(id.unambiguous)' after that identity logged out", c.excerpt([at, e.index])))
                }
            }
            if e.kind == .request, let r = e.request, r.client.isExactly(app.client) {
                for user in r.users where retired[ExactKey(user)] != nil {
                    // Its own call, begun as `user` before the logout, may still be in flight.
                    let issuers = calls.issuers(path: r.path, user: user, at: e.index)
                    if issuers.contains(where: { calls.identity(at: $0.revision).isExactly(user) }) { continue }
                    // A scenario's own call for X on the app's client asks for X by right.
                    if runner.inFlight(path: r.path, user: user, key: r.key?.key, at: e.index) { continue }
                    problems.append(("request for '\(user.unambiguous)' received after that identity logged out, sent by no app operation begun as '\(user.unambiguous)': \(r.summary)",
                                     c.excerpt([retired[ExactKey(user)]!, e.index])))
                }
            }
        }
        // X's answer written after X's logout and found and undone by the app (defect 1 behind
        // the app's undo, `Checks.staleWritesUndone`): the cache held X after the logout.
        let logouts = c.history.filter { $0.kind == .marker && $0.name == "logout" && $0.client.isExactly(app.client) }
        for stale in staleWritesUndone(c, only: app.client)
        where logouts.contains(where: { $0.index < stale.undo && $0.detail?["from"]?.stringValue.map { $0.isExactly(stale.identity) } ?? false }) {
            problems.append(("after logout the cache held '\(stale.identity.unambiguous)' until the app undid it: " + stale.message, stale.slice))
        }
        if let client = c.clients[app.client] {
            for user in retired.keys.sorted().map(\.text) {
                // The scenario's own lookup for X on the app's client after X's logout may cache X.
                if runner.calls.contains(where: { $0.key != nil && $0.start > retired[ExactKey(user)]! && $0.users.contains { $0.isExactly(user) } }) { continue }
                guard let a = await ScenarioExecution.query(client, .getAssignments(user: user)).map(assignmentKeys),
                      let f = await ScenarioExecution.query(client, .getEvaluatedFlags(user: user)).map(strings) else {
                    problems.append(("after logout the app's client did not report its cache for '\(user.unambiguous)' (getAssignments or getEvaluatedFlags gave no list), "
                                     + "so whether it still holds that identity is unknown", relevant(c, user: user)))
                    continue
                }
                if !a.isEmpty || !f.isEmpty {
                    problems.append(("after logout the cache still holds '\(user.unambiguous)': assignments \(a), flags \(f)", relevant(c, user: user)))
                }
            }
        }
        return problems
    }

    // MARK: golden vectors

    /// The driver's `hashUser` equals every golden vector within 1e-10 (CONTRACT.md section 6).
    static func goldenVectors(_ c: CheckContext) async -> [(String, [String])] {
        guard let client = c.clients.values.first else { return [("no client", [])] }
        var problems: [(String, [String])] = []
        for v in GoldenVectors.hash {
            let got = await ScenarioExecution.query(client, .hashUser(user: v.user, key: v.key))
            guard case .number(let h)? = got else { problems.append(("hashUser(\(v.user), \(v.key)) gave no number", [])); continue }
            if abs(h - v.hash) > 1e-10 {
                problems.append(("hashUser(\"\(v.user)\", \"\(v.key)\") = \(h), expected \(v.hash) (md5 \(v.md5))", []))
            }
        }
        return problems
    }

    // MARK: contract smoke (CONTRACT.md section 7)

    static func outcome(_ c: CheckContext, _ label: String) -> JSONValue? {
        c.history.last { $0.kind == .complete && $0.label == label }?.outcome
    }

    /// The contract-smoke fields from the operations labelled `assign_a`, `assign_b`, `flag`,
    /// `track`, `fanout` (and `batch`).
    static func smokeFields(scenario: Scenario, history: [HistoryEvent]) -> JSONValue {
        func value(_ label: String) -> JSONValue? { history.last { $0.kind == .complete && $0.label == label }?.outcome?["value"] }
        let a = value("assign_a"), b = value("assign_b")
        // Stickiness is observed through variant equality and the mock's own history (never the
        // `reason`, which the backend sends as `assigned` for new and sticky users alike): both
        // clients got the same variant, and it is the variant the mock answered every time.
        let answered = history.compactMap { e -> JSONValue? in
            guard e.kind == .response, let r = e.request, r.path == "/api/v1/tracking/assign", r.status == 200 else { return nil }
            return r.response?["variant_id"] ?? .null
        }
        let sticky = a != nil && a?["variant_name"] == b?["variant_name"] && a?["variant_id"] == b?["variant_id"]
            && !answered.isEmpty && answered.allSatisfy { $0 == a?["variant_id"] }
        let fanoutBatch = history.contains { $0.kind == .response && $0.request?.path == "/api/v1/tracking/batch" && $0.request?.events.count == 2 }
        return .object([
            "sdk": .string("ios"),
            "assign": .object(["variant_name": a?["variant_name"] ?? .null, "is_control": a?["is_control"] ?? .null, "sticky": .bool(sticky)]),
            "flag": .object(["enabled": value("flag")?["enabled"] ?? .null]),
            "track": .object(["ok": .bool(value("track") == .bool(true))]),
            "fanout": .object(["ok": .bool(value("fanout") == .bool(true) && fanoutBatch && (value("batch") ?? .bool(true)) == .bool(true))]),
        ])
    }

    /// The upstream live runner's rules: variant in {control, treatment}, boolean is_control,
    /// sticky, flag enabled, track ok, fanout ok.
    static func smoke(_ c: CheckContext) -> [(String, [String])] {
        let s = smokeFields(scenario: c.scenario, history: c.history)
        var problems: [String] = []
        if s["assign"]?["variant_name"] != .string("control") && s["assign"]?["variant_name"] != .string("treatment") {
            problems.append("assign.variant_name is \(s["assign"]?["variant_name"] ?? .null)")
        }
        if case .bool? = s["assign"]?["is_control"] {} else { problems.append("assign.is_control is not a boolean") }
        if s["assign"]?["sticky"] != .bool(true) { problems.append("assign.sticky is false") }
        if s["flag"]?["enabled"] != .bool(true) { problems.append("flag.enabled is not true") }
        if s["track"]?["ok"] != .bool(true) { problems.append("track.ok is false") }
        if s["fanout"]?["ok"] != .bool(true) { problems.append("fanout.ok is false (unkeyed page_view must send one batch of 2)") }
        return problems.map { ($0, ["smoke line: \(s)"]) }
    }
}
