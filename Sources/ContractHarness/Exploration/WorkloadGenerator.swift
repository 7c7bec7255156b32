import Foundation
import ExperimentlyMock

/// Random concurrent workloads as scenario files (issue 11 section 3): seeded, deterministic, and
/// always feasible, so any failure of a named check against a correct SDK is a false alarm of the
/// harness (or a real SDK fault), never a deadlock of the scenario.
///
/// A workload has one or two clients (separate offline stores or one shared store), five users
/// (among them NFC `"\u{E9}"` and NFD `"e\u{301}"`, two users by CONTRACT.md section 4), two
/// experiments (one whose targeting answers `assigned:false`), two flags, and 8 to 30 steps:
/// `evaluateFlag`, `getAssignment` (sometimes `times` copies), keyed and unkeyed `track` /
/// `trackWithStatus`, `trackBatch` of 1 to 150 events, `clearCache`, `clearOfflineCache`, clock
/// steps, and in 40% of workloads reference-app steps (login, logout, refresh, display, event,
/// report_state; sometimes `times` copies at once) on an `app` client of their own, in half of
/// those also on a second app client `app2` (`client` on app steps), holds released in random order with the natural answer or a failure (503, 500, 429,
/// 404; a held `/batch` sometimes 200 with `failure_count` 1, CONTRACT.md section 5, defect 5). App races: an app action whose request the generator knows the app sends (a login,
/// logout or refresh fetching the flag, a display assigning with the flag known on and nothing
/// cached, an event keyed to a shown assignment; `AppModel`) is sometimes started async with that
/// request held; until the hold is released every further action of that app (display, event,
/// login, one logout, refresh, report_state) starts async too, so different actions of one app
/// run at once. Every operation is started async and awaited later, and only once nothing it waits on is
/// still held. A request is held only when the generator knows it will be sent: the first call for
/// a (client, user, key) since the client's last clear, a keyed track, a keyed `trackBatch`
/// (a `first: 1` hold added just before the call, so no other request can take it). Every
/// scenario runs the named checks `fan_out`, `batch_chunking`, `single_flight`, `no_stale_write`,
/// `stickiness` and `offline_fallback`, and states no outcome expectation of its own.
public struct WorkloadGenerator: Sendable {
    /// The base seed; scenario `i` is generated from `seed` and `i` alone.
    public let seed: UInt64

    /// Whether the users include canonically equivalent spellings (NFC and NFD é).
    public let equivalentIds: Bool

    /// Creates a generator.
    ///
    /// - Parameter equivalentIds: `true` (default) uses `equivalentUsers`, `false` `plainUsers`.
    public init(seed: UInt64, equivalentIds: Bool = true) {
        self.seed = seed
        self.equivalentIds = equivalentIds
    }

    /// The user ids of the workloads: NFC and NFD é are two users (CONTRACT.md section 4).
    public static let equivalentUsers = ["user-1", "user-2", "bob", "\u{E9}", "e\u{301}"]
    /// The user ids without canonically equivalent pairs.
    public static let plainUsers = ["user-1", "user-2", "bob", "carol", "dave"]
    static let experiments = ["exp_ab", "exp_us_only"]
    static let flags = ["flag_on", "flag_half"]

    /// A SplitMix64 stream (deterministic on every platform).
    struct Random {
        var generator: SplitMix64
        init(state: UInt64) { generator = SplitMix64(state: state) }
        mutating func next() -> UInt64 { generator.next() }
        mutating func int(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        mutating func chance(_ percent: Int) -> Bool { int(100) < percent }
        mutating func pick<T>(_ items: [T]) -> T { items[int(items.count)] }
    }

    /// Scenario `index` as a scenario file's JSON (format `experimently-scenario/1`).
    public func scenarioJSON(index: Int) -> JSONValue {
        var g = Build(random: Random(state: seed &* 0x100_0000_01B3 &+ UInt64(index) &* 0x9E37_79B9 &+ 1),
                      users: equivalentIds ? Self.equivalentUsers : Self.plainUsers)
        return g.scenario(name: fileName(index: index))
    }

    /// The name of scenario `index`: `generated-SEED-INDEX` (`generated-plain-SEED-INDEX` without equivalent ids).
    public func fileName(index: Int) -> String { "generated-\(equivalentIds ? "" : "plain-")\(seed)-\(index)" }

    /// Scenario `index`, parsed as the runner reads files.
    ///
    /// - Throws: `ScenarioError` if the generated file is malformed (a generator bug).
    public func scenario(index: Int) throws -> Scenario {
        try ScenarioParser.parse(Data(scenarioJSON(index: index).jsonText.utf8), file: "\(fileName(index: index)).json")
    }

    /// The state of one generation: what is started, held, released, and awaited.
    struct Build {
        var random: Random
        let users: [String]
        var steps: [JSONValue] = []
        var clients: [String] = []
        /// Per client: the (kind, user, key) requested since the client's last clear, with the
        /// hold its flight waits on (nil when not held).
        var flights: [String: [String: String?]] = [:]
        /// Holds added and not yet released.
        var openHolds: [String] = []
        /// The path each hold matches (its id's), so a held `/batch` can be answered as a batch.
        var holdPaths: [String: String] = [:]
        /// Operations started and not yet awaited, with the hold they may wait on.
        var running: [(label: String, hold: String?)] = []
        var released: Set<String> = []
        var counter = 0
        var advanced = 0.0
        var hasApp = false
        /// The clients running a reference app: `app`, and in half of the app workloads `app2` (a
        /// second device whose identities may be the same users).
        var appClients: [String] = []

        mutating func label(_ prefix: String) -> String { counter += 1; return "\(prefix)\(counter)" }

        static func exact(_ s: String) -> String { Checks.exact(s) }

        mutating func userValue(_ user: String, experiment: String) -> JSONValue {
            // exp_us_only answers assigned:false without country US.
            if experiment == "exp_us_only", random.chance(50) {
                return .object(["id": .string(user), "attributes": .object(["country": .string(random.chance(50) ? "US" : "FR")])])
            }
            return .string(user)
        }

        mutating func scenario(name: String) -> JSONValue {
            let twoClients = random.chance(50)
            clients = twoClients ? ["c1", "c2"] : ["c1"]
            let sharedStore = twoClients && random.chance(40)
            var clientsJSON: [String: JSONValue] = [:]
            for c in clients { clientsJSON[c] = .object(["store": .string(sharedStore ? "s1" : "s-\(c)")]) }
            // Some workloads also drive the reference app (CONTRACT.md section 8) on a client of
            // its own, whose identities no hold matches, so its steps always finish.
            hasApp = random.chance(40)
            if hasApp {
                appFlag = random.pick(WorkloadGenerator.flags)
                clientsJSON["app"] = .object(["store": .string("s-app")])
                appClients = ["app"]
                if random.chance(50) {
                    appClients.append("app2")
                    clientsJSON["app2"] = .object(["store": .string("s-app2")])
                }
            }
            // Some workloads without an app give their clients a cache of 1 to 3 entries, so
            // evictions happen and `fan_out` judges past the cache size (its bounds and the proof
            // of entries still cached; a seventy-eighth outside tester, F8: no generated workload
            // set `cache_size`).
            let cacheSize: Int? = !hasApp && random.chance(40) ? 1 + random.int(3) : nil
            let length = 8 + random.int(23)
            for _ in 0..<length { step() }
            finish()
            var checks = ["fan_out", "batch_chunking", "single_flight", "no_stale_write", "stickiness", "offline_fallback", "event_payload"]
            if hasApp { checks += ["exposure_after_display", "no_stale_after_logout"] }
            var config: [String: JSONValue] = ["timeout": .number(1000)]
            if let cacheSize { config["cache_size"] = .number(Double(cacheSize)) }
            var top: [String: JSONValue] = [
                "format": .string("experimently-scenario/1"),
                "name": .string(name),
                "description": .string("A generated concurrent workload (WorkloadGenerator): random operations, holds released in random order, clears and clock steps; only the named checks judge it."),
                // Copies of an app action at once (`times` on an `app` step) make as many SDK calls
                // as the copies find to do, which thread timing decides: the history may differ
                // from run to run, as in the shipped file of that shape (a fourteenth outside
                // tester: 3 generated files gave 2-9 digests in 12 runs, untagged).
                "tags": .array([.string("generated")] + (steps.contains { $0["app"] != nil && ($0["times"]?.numberValue ?? 1) > 1 } ? [.string("history-varies")] : [])),
                "fixtures": Self.fixtures,
                "config": .object(config),
                "clients": .object(clientsJSON),
                "steps": .array(steps),
                "checks": .array(checks.map(JSONValue.string)),
            ]
            if hasApp {
                top["app"] = .object(["client": .string("app"), "flag": .string(appFlag),
                                      "experiment": .string("exp_ab"), "user": .string("app-1")])
            }
            return .object(top)
        }

        /// What the generator knows of one app (CONTRACT.md section 8), to hold only requests the
        /// app surely sends: its identity, how many anonymous ids it used, whether the current
        /// revision's flag is known on (`nil`: unknown), whether it surely shows an assignment,
        /// the identities whose assignment the SDK may have cached, and the hold of the race it
        /// is in (one held action; every other action of that app meanwhile runs async and waits
        /// for the hold's release: different actions of one app at once).
        struct AppModel {
            var identity = "app-1"
            var anonymous = 1
            var flagOn: Bool? = nil
            var showsAssignment = false
            var maybeCached: Set<String> = []
            /// The identities whose flag evaluation the SDK may have cached (a fetch of it is a hit).
            var maybeFlagCached: Set<String> = []
            var raceHold: String?
            var raceHasLogout = false
        }
        var appModels: [String: AppModel] = [:]
        var appFlag = ""

        /// Whether the app flag is on for `user` (the mock's rollout by md5-mod100, CONTRACT.md section 2).
        func flagOn(for user: String) -> Bool {
            appFlag == "flag_on" || MockBucketing.flagBucket(userID: user, flagKey: appFlag) < 50
        }

        mutating func appStep() {
            var step: [String: JSONValue] = [:]
            let action = random.int(6)
            switch action {
            case 0: step = ["app": .string("login"), "user": .string(random.pick(["app-1", "app-2"]))]
            case 1: step = ["app": .string("logout")]
            case 2: step = ["app": .string("refresh")]
            case 3: step = ["app": .string("display")]
            case 4: step = ["app": .string("event"), "name": .string("Report Previewed")]
            default: step = ["app": .string("report_state")]
            }
            // `client` on app steps: the second app, or the default one named explicitly.
            let client = random.pick(appClients)
            if client != "app" || random.chance(30) { step["client"] = .string(client) }
            // `times`: copies of the action at once on one app.
            if random.chance(20) { step["times"] = .number(Double(2 + random.int(2))) }
            var model = appModels[client] ?? AppModel()
            if let hold = model.raceHold {
                // A race is open on this app: this action runs at once with the held one (async,
                // awaited after the hold's release); a second logout would wait for the first, so
                // the identities would no longer follow the step order: none.
                if action == 1 && model.raceHasLogout { return }
                if action == 1 { step["times"] = nil; model.raceHasLogout = true }
                let l = label("p")
                step["as"] = .string(l); step["async"] = .bool(true)
                applyIdentity(&model, step: step, action: action)
                model.maybeCached.insert(model.identity)
                model.maybeFlagCached.insert(model.identity)
                appModels[client] = model
                steps.append(.object(step))
                running.append((l, hold))
                return
            }
            var loginUser: String?
            if case .string(let u)? = step["user"] { loginUser = u }
            // Only with one app: fault matches do not name a client, and two apps share identities.
            if appClients.count == 1, random.chance(60), let match = raceMatch(model, client: client, action: action, user: loginUser) {
                // The held action of a new race: its request is surely sent (the generator knows
                // the app's state), held, and waited for before anything else happens.
                step["times"] = nil
                let hold = hold(match)
                let l = label("p")
                step["as"] = .string(l); step["async"] = .bool(true)
                steps.append(.object(step))
                steps.append(.object(["wait_for": .object(["held": .string(hold), "count": .number(1)])]))
                running.append((l, hold))
                model.raceHold = hold
                model.raceHasLogout = action == 1
                applyIdentity(&model, step: step, action: action)
                model.maybeCached.insert(model.identity)
                model.maybeFlagCached.insert(model.identity)
                appModels[client] = model
                return
            }
            steps.append(.object(step))
            // A synchronous action outside a race: the app's state afterwards is known.
            switch action {
            case 0, 1, 2:
                if action == 1 { model.maybeCached = []; model.maybeFlagCached = [] }
                applyIdentity(&model, step: step, action: action)
                model.maybeFlagCached.insert(model.identity)
                model.flagOn = flagOn(for: model.identity)
                model.showsAssignment = false
            case 3:
                if model.flagOn == true { model.maybeCached.insert(model.identity) }
                model.showsAssignment = model.flagOn == true
            default: break
            }
            appModels[client] = model
        }

        /// The app's identity after `action` (`times` logouts each take a new anonymous id).
        func applyIdentity(_ model: inout AppModel, step: [String: JSONValue], action: Int) {
            if action == 0, case .string(let user)? = step["user"] { model.identity = user }
            if action == 1 {
                let copies: Int
                if case .number(let n)? = step["times"] { copies = Int(n) } else { copies = 1 }
                model.anonymous += copies
                model.identity = "anon-\(model.anonymous)"
            }
        }

        /// The hold for the request `action` (a login: as `user`) surely sends on `client`'s app (the only app), or `nil` when the
        /// generator cannot be sure it sends one (flag unknown or off, assignment maybe cached,
        /// no assignment shown).
        func raceMatch(_ model: AppModel, client: String, action: Int, user: String?) -> [String: JSONValue]? {
            let flagPath = JSONValue.string("/api/v1/feature-flags/evaluate/\(appFlag)")
            switch action {
            case 0:
                guard let user, !model.maybeFlagCached.contains(user) else { return nil }
                return ["path": flagPath, "query": .object(["user_id": .string(user)])]
            case 1:
                return ["path": flagPath, "query": .object(["user_id": .string("anon-\(model.anonymous + 1)")])]
            case 2:
                guard !model.maybeFlagCached.contains(model.identity) else { return nil }
                return ["path": flagPath, "query": .object(["user_id": .string(model.identity)])]
            case 3:
                guard model.flagOn == true, !model.maybeCached.contains(model.identity) else { return nil }
                return ["path": .string("/api/v1/tracking/assign"),
                        "body": .object(["user_id": .string(model.identity), "experiment_key": .string("exp_ab")])]
            case 4:
                guard model.showsAssignment else { return nil }
                return ["path": .string("/api/v1/tracking/track"),
                        "body": .object(["user_id": .string(model.identity), "event_name": .string("Report Previewed")])]
            default:
                return nil
            }
        }

        mutating func step() {
            // While an app race is open its app acts more often: more actions of one app at once.
            if hasApp && random.chance(appModels.values.contains { $0.raceHold != nil } ? 45 : 20) { return appStep() }
            let client = random.pick(clients)
            switch random.int(100) {
            case 0..<22: lookup(client, kind: "experiment")
            case 22..<40: lookup(client, kind: "flag")
            case 40..<52: track(client, keyed: false)
            case 52..<60: track(client, keyed: true)
            case 60..<68: trackBatch(client)
            case 68..<74: clear(client)
            case 74..<77: steps.append(.object(["do": .string("clearOfflineCache"), "client": .string(client)]))
            case 77..<84: advance()
            case 84..<96: release()
            default: awaitSome()
            }
        }

        mutating func hold(_ match: [String: JSONValue]) -> String {
            let id = label("h")
            steps.append(.object(["fault": .object(["match": .object(match), "when": .object(["first": .number(1)]), "action": .object(["hold": .object([:])])]),
                                  "id": .string(id)]))
            openHolds.append(id)
            holdPaths[id] = match["path"]?.stringValue
            return id
        }

        mutating func lookup(_ client: String, kind: String) {
            let user = random.pick(users)
            let key = kind == "flag" ? random.pick(WorkloadGenerator.flags) : random.pick(WorkloadGenerator.experiments)
            let id = "\(kind)\u{0}\(Self.exact(user))\u{0}\(key)"
            var waitsOn: String?
            if let existing = flights[client]?[id] {
                waitsOn = existing.flatMap { released.contains($0) ? nil : $0 }
            } else if random.chance(55) {
                // The first call for (user, key) since the last clear surely sends a request.
                waitsOn = kind == "flag"
                    ? hold(["path": .string("/api/v1/feature-flags/evaluate/\(key)"), "query": .object(["user_id": .string(user)])])
                    : hold(["path": .string("/api/v1/tracking/assign"), "body": .object(["user_id": .string(user), "experiment_key": .string(key)])])
            }
            if flights[client]?[id] == nil { flights[client, default: [:]][id] = .some(waitsOn) }
            let l = label(kind == "flag" ? "f" : "a")
            var op: [String: JSONValue] = ["client": .string(client), "as": .string(l), "async": .bool(true)]
            if kind == "flag" {
                op["do"] = .string("evaluateFlag"); op["flag"] = .string(key); op["user"] = .string(user)
            } else {
                op["do"] = .string("getAssignment"); op["experiment"] = .string(key); op["user"] = userValue(user, experiment: key)
            }
            if random.chance(15) { op["times"] = .number(Double(2 + random.int(3))) }
            steps.append(.object(op))
            running.append((l, waitsOn))
        }

        mutating func event(_ user: String, keyed: Bool) -> JSONValue {
            var e: [String: JSONValue] = ["user": .string(user), "name": .string(random.pick(["click", "view", "purchase"]))]
            if keyed {
                if random.chance(50) { e["experiment"] = .string(random.pick(WorkloadGenerator.experiments)) }
                else { e["flag"] = .string(random.pick(WorkloadGenerator.flags)) }
            }
            if random.chance(20) { e["value"] = .number(Double(random.int(100))) }
            // Timestamps with milliseconds (and a fraction below them), types and properties, for
            // `event_payload`.
            if random.chance(30) { e["timestamp"] = .number(1_700_000_000 + Double(random.int(100_000)) / 1000 + Double(random.int(10)) / 10_000) }
            if random.chance(20) { e["type"] = .string(random.pick(["custom", "revenue"])) }
            if random.chance(20) { e["properties"] = .object(["n": .number(Double(random.int(10))), "s": .string(random.pick(["a", "b\u{301}"]))]) }
            return .object(e)
        }

        mutating func track(_ client: String, keyed: Bool) {
            let user = random.pick(users)
            let e = event(user, keyed: keyed)
            var waitsOn: String?
            if keyed, random.chance(50), case .string(let name)? = e["name"] {
                waitsOn = hold(["path": .string("/api/v1/tracking/track"), "body": .object(["user_id": .string(user), "event_name": .string(name)])])
            }
            let l = label("t")
            steps.append(.object(["do": .string(random.chance(50) ? "track" : "trackWithStatus"), "client": .string(client), "event": e,
                                  "as": .string(l), "async": .bool(true)]))
            running.append((l, waitsOn))
        }

        mutating func trackBatch(_ client: String) {
            let size = random.pick([1, 2, 3, 4, 7, 99, 100, 101, 150])
            let allKeyed = random.chance(50)
            var events: [JSONValue] = []
            for _ in 0..<size {
                events.append(event(random.pick(users), keyed: allKeyed || random.chance(60)))
            }
            var waitsOn: String?
            if allKeyed, random.chance(60) { waitsOn = hold(["path": .string("/api/v1/tracking/batch")]) }
            let l = label("b")
            steps.append(.object(["do": .string("trackBatch"), "client": .string(client), "events": .array(events), "as": .string(l), "async": .bool(true)]))
            running.append((l, waitsOn))
        }

        mutating func clear(_ client: String) {
            steps.append(.object(["do": .string("clearCache"), "client": .string(client)]))
            flights[client] = [:]
        }

        mutating func advance() {
            let seconds = random.pick([1.0, 5.0, 60.0, 301.0])
            guard advanced + seconds < 900 else { return }   // held requests stay within the SDK's 1000 s deadline
            advanced += seconds
            steps.append(.object(["advance": .number(seconds)]))
        }

        mutating func release() {
            guard !openHolds.isEmpty else { return }
            let id = openHolds.remove(at: random.int(openHolds.count))
            var r: [String: JSONValue] = ["release": .string(id)]
            if random.chance(30) {
                if holdPaths[id] == "/api/v1/tracking/batch", random.chance(40) {
                    // Answered 200 with an event refused: the call reports false (CONTRACT.md
                    // section 5, defect 5), and no check may blame a correct SDK for what it does next.
                    r["response"] = .object(["status": .number(200), "json": .object([
                        "success_count": .number(0), "failure_count": .number(1),
                        "errors": .array([.object(["index": .number(0), "event_type": .string("generated"), "user_id": .string("generated"),
                                                   "error": .string("generated failure")])]),
                    ])])
                } else {
                    let status = random.pick([503, 500, 429, 404])
                    r["response"] = .object(["status": .number(Double(status)), "json": .object(["detail": .string("generated failure")])])
                }
            }
            steps.append(.object(r))
            released.insert(id)
            // The race of an app ends: what it leaves (flag, shown variant) is unknown from now.
            for (client, model) in appModels where model.raceHold == id {
                var m = model
                m.raceHold = nil; m.raceHasLogout = false; m.flagOn = nil; m.showsAssignment = false
                appModels[client] = m
            }
        }

        mutating func awaitSome() {
            let ready = running.indices.filter { running[$0].hold.map { released.contains($0) } ?? true }
            guard !ready.isEmpty else { return }
            let i = ready[random.int(ready.count)]
            steps.append(.object(["await": .string(running[i].label)]))
            running.remove(at: i)
        }

        mutating func finish() {
            while !openHolds.isEmpty { release() }
            for op in running { steps.append(.object(["await": .string(op.label)])) }
            running = []
        }

        static let fixtures: JSONValue = {
            func variants(_ key: String) -> JSONValue {
                .array([
                    .object(["id": .string("\(key)-control"), "name": .string("control"), "allocation": .number(50), "is_control": .bool(true), "configuration": .object(["v": .number(0)])]),
                    .object(["id": .string("\(key)-treatment"), "name": .string("treatment"), "allocation": .number(50), "configuration": .object(["v": .number(1)])]),
                ])
            }
            return .object([
                "api_keys": .array([.object(["key": .string("sdk-contract-key")])]),
                "experiments": .array([
                    .object(["key": .string("exp_ab"), "status": .string("ACTIVE"), "variants": variants("exp_ab")]),
                    .object(["key": .string("exp_us_only"), "status": .string("ACTIVE"), "variants": variants("exp_us_only"),
                             "targeting": .array([.object(["attribute": .string("country"), "operator": .string("eq"), "value": .string("US")])])]),
                ]),
                "flags": .array([
                    .object(["key": .string("flag_on"), "status": .string("ACTIVE"), "rollout_percentage": .number(100)]),
                    .object(["key": .string("flag_half"), "status": .string("ACTIVE"), "rollout_percentage": .number(50)]),
                ]),
            ])
        }()
    }
}
