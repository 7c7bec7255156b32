import Foundation
import ExperimentlyMock

/// Reads scenario files strictly: unknown keys are errors, and every error names the file, the
/// JSON path, what was expected and what was found (`ScenarioError`).
public enum ScenarioParser {
    static let verbs = ["do", "app", "await", "cancel", "fault", "remove_fault", "release", "wait_for", "advance",
                        "fixtures", "assert", "seed_store"]

    /// Loads and validates one scenario file.
    ///
    /// - Throws: `ScenarioError` when the file cannot be read, is not JSON, or breaks the format.
    public static func load(path: String) throws -> Scenario {
        try parse(InputFile.contents(of: path), file: path)
    }

    /// Parses scenario JSON.
    ///
    /// - Throws: `ScenarioError` for invalid JSON or format.
    public static func parse(_ data: Data, file: String) throws -> Scenario {
        let root = try JSONValue.parse(data, file: file)
        try refuseLargeIntegers(data, file: file)
        var r = try ObjectReader(root, file: file, path: "$")
        let format = try r.string("format")
        guard format == Scenario.format else {
            throw r.error("format", expected: "\"\(Scenario.format)\"", found: .string(format))
        }
        let name = try r.string("name")
        // A name names the scenario in every output (console, JUnit, the report): an empty or
        // blank one made an unnamed test case (an eighty-first outside tester, F5).
        guard !name.unicodeScalars.allSatisfy({ CharacterSet.whitespacesAndNewlines.contains($0) }) else {
            throw r.error("name", expected: "a name that is not empty or blank (kebab-case, e.g. \"field-stale-flag-after-logout\")", found: .string(name))
        }
        let description = try r.string("description")
        let tags = try r.optionalStrings("tags") ?? []
        let source = try r.optionalString("source")
        var fixtures: JSONValue?
        switch r.value("fixtures") {
        case nil, .string("sdk-contract")?: fixtures = nil
        case .object(let o)?:
            fixtures = .object(o)
            try validate(Fixtures.self, .object(o), file: file, path: "$.fixtures", expected: "mock fixtures (Documentation/ScenarioFormat.md, Fixtures)")
            for (i, k) in (o["api_keys"]?.arrayValue ?? []).enumerated() {
                if let key = k["key"]?.stringValue, hasEdgeWhitespace(key) {
                    throw ScenarioError(file: file, path: "$.fixtures.api_keys[\(i)].key", expected: keyWithoutEdgeWhitespace, found: SecretRedactor.mask)
                }
            }
        case let other?: throw r.error("fixtures", expected: "\"sdk-contract\" or a fixtures object", found: other)
        }
        var settings = ClientSettings()
        if let config = r.value("config") { settings = try parseSettings(config, base: settings, file: file, path: "$.config") }
        var clients: [(String, String?, ClientSettings)] = []
        var lazy: [String] = []
        if let c = r.value("clients") {
            guard case .object(let members) = c, !members.isEmpty else {
                throw r.error("clients", expected: "an object of client names", found: c)
            }
            for name in members.keys.sorted() {
                var cr = try ObjectReader(members[name]!, file: file, path: "$.clients.\(name)")
                var store: String? = name
                if cr.has("store") {
                    switch cr.value("store")! {
                    case .null: store = nil
                    case .string(let s): store = s
                    case let other: throw cr.error("store", expected: "a store name or null", found: other)
                    }
                }
                let own = try cr.value("config").map { try parseSettings($0, base: settings, file: file, path: "$.clients.\(name).config") } ?? settings
                switch try cr.optionalString("launch") {
                case nil, "at_start"?: break
                case "at_first_use"?: lazy.append(name)
                case let other?: throw cr.error("launch", expected: "\"at_start\" (the default) or \"at_first_use\"", found: .string(other))
                }
                try cr.finish()
                clients.append((name, store, own))
            }
        } else {
            clients = [("main", "main", settings)]
        }
        let clientNames = clients.map(\.0)
        var app: AppSettings?
        if let a = r.value("app") {
            var ar = try ObjectReader(a, file: file, path: "$.app")
            let client = try ar.optionalString("client") ?? clientNames[0]
            guard clientNames.containsExactly(client) else { throw ar.error("client", expected: "one of \(clientNames)", found: .string(client)) }
            app = AppSettings(client: client, flag: try ar.string("flag"), experiment: try ar.string("experiment"),
                              variants: try ar.optionalStrings("variants") ?? ["control", "treatment"],
                              initialUser: try ar.optionalString("user") ?? "anon-1")
            try ar.finish()
        }
        guard let rawSteps = try r.optionalArray("steps") else { throw r.error("steps", expected: "an array of steps", found: nil) }
        // A scenario that does nothing checks nothing, and must not pass (issue 10 section 3).
        guard !rawSteps.isEmpty else { throw r.error("steps", expected: "at least one step", found: .array([])) }
        var ctx = StepContext(file: file, clients: clientNames, hasApp: app != nil)
        if case .array(let keys)? = fixtures?["api_keys"] { ctx.apiKeys = keys.compactMap { $0["key"]?.stringValue } }
        ctx.appClient = app?.client
        let steps = try rawSteps.enumerated().map { i, raw in try ctx.parseStep(raw, path: "$.steps[\(i)]") }
        // A `persisted` assertion or a `seed_store` step on a client without a store would check
        // or write nothing ("Nothing passes unchecked"; a sixth outside tester: one passed).
        for (i, step) in steps.enumerated() {
            let named: (String, String)?
            switch step {
            case .expect(.persisted(let client, _, _, _, _, _)): named = (client, "$.steps[\(i)].assert.persisted")
            case .seedStore(let client, _, _, _, _): named = (client, "$.steps[\(i)].seed_store")
            default: named = nil
            }
            if let (client, path) = named, let entry = clients.first(where: { $0.0.isExactly(client) }), entry.1 == nil {
                throw ScenarioError(file: file, path: path, expected: "a client with an offline store (its \"store\" is not null)",
                                    found: "client '\(client)', whose \"store\" is null: nothing is persisted, so this checks nothing")
            }
        }
        let checks = try r.optionalStrings("checks") ?? []
        for (i, check) in checks.enumerated() where !Scenario.knownChecks.contains(check) {
            throw ScenarioError(file: file, path: "$.checks[\(i)]", expected: "one of \(Scenario.knownChecks.joined(separator: ", "))",
                                found: "\"\(check)\"")
        }
        let timeout = try r.optionalInt("step_timeout_ms", range: 1...600_000) ?? 5000
        let requires = try r.optionalStrings("requires") ?? []
        for (i, name) in requires.enumerated() where !Scenario.knownCapabilities.contains(where: { $0.unicodeScalars.elementsEqual(name.unicodeScalars) }) {
            throw ScenarioError(file: file, path: "$.requires[\(i)]",
                                expected: "a capability name (\(Scenario.knownCapabilities.joined(separator: ", ")))",
                                found: JSONValue.string(name).jsonText)
        }
        let explore = r.value("explore")
        // Read strictly in every command (run, run --explore, explore): a malformed section or a
        // step index out of range is an error at its JSON path, never skipped.
        if explore != nil { _ = try Explorer.settings(of: root, file: file) }
        // What `explore` found when it wrote this file (a record for people; not run).
        if let explored = r.value("explored"), explored.objectValue == nil {
            throw r.error("explored", expected: "an object (written by contract-harness explore)", found: explored)
        }
        let interleaving = try r.value("interleaving").map { try ScenarioInterleaving.parse($0, file: file) }
        try r.finish()
        // Every expectation a file states is evaluated; a file that states none checks nothing.
        if checks.isEmpty, !steps.contains(where: \.statesExpectation) {
            throw ScenarioError(file: file, path: "$", expected: "something to check: an \"expect\" on a step, an \"assert\" step or a named check in \"checks\"",
                                found: "none (a scenario that checks nothing must not pass)")
        }
        var scenario = Scenario(file: file, name: name, description: description, tags: tags, source: source, fixtures: fixtures,
                                settings: settings, clients: clients.map { ($0.0, $0.1, $0.2) }, app: app, steps: steps,
                                checks: checks, stepTimeoutMilliseconds: timeout, requires: requires, explore: explore)
        scenario.interleaving = interleaving
        scenario.launchedAtFirstUse = lazy
        return scenario
    }

    /// Decodes `json` as the mock's `T` to check it; a failure becomes a `ScenarioError` at
    /// `path` plus the decoder's own path.
    ///
    /// - Throws: `ScenarioError`.
    static func validate<T: Decodable & Sendable>(_ type: T.Type, _ json: JSONValue, file: String, path: String, expected: String) throws {
        do { _ = try MockBackendPort.decoded(type, json) } catch {
            let (at, what) = MockBackendPort.locate(error)
            // A rule the value breaks reads as that rule, not as something "found".
            if what.contains(" must ") {
                // "a fault rule (Documentation/...)" reads "(a fault rule: Documentation/...)" after it.
                let context = expected.hasSuffix(")") ? expected.dropLast().replacingOccurrences(of: " (", with: ": ") : expected
                throw ScenarioError(file: file, path: path + at, statement: "\(what) (\(context))")
            }
            throw ScenarioError(file: file, path: path + at, expected: expected, found: what)
        }
    }

    /// Whether `seconds` is a whole number of microseconds, the resolution of scenario times: the
    /// clock's `Date` holds about 0.1 microsecond at today's dates, so the checks' models of time
    /// (cache TTL, deadlines) read event times to the microsecond (`HistoryEvent.exactTime`); a
    /// finer TTL, advance or delay would put a boundary where the model and an SDK's `Date`
    /// arithmetic cannot agree (a sixth outside tester: sub-millisecond TTL edges failed every
    /// correct SDK when the model read milliseconds).
    static func wholeMicroseconds(_ seconds: Double) -> Bool {
        let micros = seconds * 1_000_000
        // Within a thousandth of a microsecond, or a few units in the last place for large values.
        return abs(micros - micros.rounded()) <= max(1e-3, micros.magnitude.ulp * 4)
    }

    /// Whether `key` begins or ends with SP or HTAB. A header value has neither (RFC 9110 section
    /// 5.5): such an API key arrives trimmed over TCP and in process alike, so it could never be
    /// the key meant (an eightieth outside tester, F5); refused in fixtures and configs.
    static func hasEdgeWhitespace(_ key: String) -> Bool {
        !MockURLProtocol.withoutOWS(key).unicodeScalars.elementsEqual(key.unicodeScalars)
    }

    /// What an API key with edge whitespace is refused with (`hasEdgeWhitespace`).
    static let keyWithoutEdgeWhitespace = "a key without leading or trailing space or tab (an HTTP header value has none: RFC 9110 section 5.5)"

    static func parseSettings(_ value: JSONValue, base: ClientSettings, file: String, path: String) throws -> ClientSettings {
        var r = try ObjectReader(value, file: file, path: path)
        var s = base
        s.timeout = try r.optionalNumber("timeout") ?? s.timeout
        // At most ten years, as `advance`: beyond that no step reaches them, and 9.3e12 s of TTL
        // overflowed the model's microseconds (an eighth outside tester: the worker trapped).
        guard s.timeout > 0, s.timeout <= 315_360_000, wholeMicroseconds(s.timeout) else {
            throw r.error("timeout", expected: "seconds > 0 and at most 315360000 (ten years), in whole microseconds", found: .number(s.timeout))
        }
        s.cacheTTL = try r.optionalNumber("cache_ttl") ?? s.cacheTTL
        guard s.cacheTTL >= 0, s.cacheTTL <= 315_360_000, wholeMicroseconds(s.cacheTTL) else {
            throw r.error("cache_ttl", expected: "seconds from 0 to 315360000 (ten years), in whole microseconds", found: .number(s.cacheTTL))
        }
        s.cacheSize = try r.optionalInt("cache_size", range: 1...1_000_000) ?? s.cacheSize
        s.offlineFallback = try r.optionalBool("offline_fallback") ?? s.offlineFallback
        s.baseURL = try r.optionalString("base_url") ?? s.baseURL
        // `{{mock}}` is the mock's origin; CONTRACT.md section 1 tolerates a trailing "/" after an
        // origin, and nothing else: any other use of "{{" is a typo or a URL that is no origin.
        if let b = s.baseURL, b.contains("{{"), !ClientSettings.mockForms.contains(where: { $0.utf8.elementsEqual(b.utf8) }) {
            throw r.error("base_url", expected: "an origin, \"{{mock}}\" (the mock's origin) or \"{{mock}}/\" (with the trailing slash CONTRACT.md section 1 tolerates)", found: .string(b))
        }
        s.apiKey = try r.optionalString("api_key") ?? s.apiKey
        if hasEdgeWhitespace(s.apiKey) { throw r.error("api_key", expected: keyWithoutEdgeWhitespace, found: .string(SecretRedactor.mask)) }
        try r.finish()
        return s
    }
}

/// Parses steps, knowing the scenario's clients and the labels started so far.
struct StepContext {
    let file: String
    let clients: [String]
    let hasApp: Bool
    /// The `app` section's client: app steps and app assertions without `client` use its app.
    var appClient: String? = nil
    /// Labels and fault ids so far, compared exactly (Unicode scalars): NFC and NFD spellings are
    /// two labels.
    var labels: Set<ExactKey> = []
    var faults: Set<ExactKey> = []
    /// `times` groups by label: how many copies (`label#1`..`label#N`, also in `labels`).
    var copies: [ExactKey: Int] = [:]
    /// The keys of the fixtures' `api_keys`, in order: what a request matcher's `api_key` may name.
    var apiKeys: [String] = Fixtures.sdkContract.apiKeys.map(\.key)

    mutating func parseStep(_ raw: JSONValue, path: String) throws -> Step {
        var r = try ObjectReader(raw, file: file, path: path)
        let present = ScenarioParser.verbs.filter { r.has($0) }
        guard present.count == 1, let verb = present.first else {
            throw ScenarioError(file: file, path: path, expected: "exactly one of the keys \(ScenarioParser.verbs.joined(separator: ", "))",
                                found: present.isEmpty ? "keys \(r.keys)" + (r.keys.lazy.map { ObjectReader.didYouMean($0, among: ScenarioParser.verbs) }.first { !$0.isEmpty } ?? "")
                                    : "several: \(present.joined(separator: ", "))")
        }
        let step: Step
        switch verb {
        case "seed_store": step = try parseSeedStore(&r, path: path + ".seed_store")
        case "do": step = try parseSDK(&r)
        case "app": step = try parseApp(&r)
        case "await":
            let label = try r.string("await")
            guard labels.contains(ExactKey(label)) else { throw r.error("await", expected: startedLabelsText, found: .string(label)) }
            step = .await(label: label, expect: try parseOutcome(&r))
        case "cancel":
            let label = try r.string("cancel")
            guard labels.contains(ExactKey(label)) else { throw r.error("cancel", expected: startedLabelsText, found: .string(label)) }
            step = .cancel(label: label)
        case "fault":
            let rule = try r.require("fault")
            guard case .object = rule else { throw r.error("fault", expected: "a fault rule object", found: rule) }
            try ScenarioParser.validate(FaultRule.self, rule, file: file, path: path + ".fault",
                                        expected: "a fault rule (Documentation/ScenarioFormat.md, Faults)")
            // Delays in whole microseconds, as every scenario time (`wholeMicroseconds`).
            for (key, kind) in [("delay", "delay"), ("delay_then_drop", "delay_then_drop")] {
                if case .number(let seconds)? = rule["action"]?[key]?["seconds"], !ScenarioParser.wholeMicroseconds(seconds) {
                    throw ScenarioError(file: file, path: path + ".fault.action.\(kind).seconds", expected: "seconds in whole microseconds",
                                        found: "\(seconds)")
                }
            }
            let id = try r.string("id")
            guard !faults.contains(ExactKey(id)) else { throw r.error("id", expected: "a fault id not used before in this scenario", found: .string(id)) }
            faults.insert(ExactKey(id))
            step = .addFault(id: id, rule: rule)
        case "remove_fault":
            let id = try r.string("remove_fault")
            guard faults.contains(ExactKey(id)) else { throw r.error("remove_fault", expected: "the id of a fault added earlier (\(faults.sorted().map(\.text)))", found: .string(id)) }
            step = .removeFault(id: id)
        case "release":
            let id = try r.string("release")
            guard faults.contains(ExactKey(id)) else { throw r.error("release", expected: "the id of a fault added earlier (\(faults.sorted().map(\.text)))", found: .string(id)) }
            var override = r.value("response")
            if let failure = r.value("transport_error") {
                override = try parseTransportError(failure, response: override, path: path + ".transport_error")
            } else if let override {
                var rr = try ObjectReader(override, file: file, path: path + ".response")
                // A final status, as a fault's `respond` (1xx are interim answers no transport delivers as one).
                let status = try rr.optionalInt("status", range: 200...599) ?? { throw rr.error("status", expected: "an HTTP status 200...599", found: nil) }()
                if let json = rr.value("json"), rr.has("body") {
                    throw rr.error("body", expected: "either \"json\" or \"body\", not both", found: json)
                }
                // 204 and 304 carry no content (RFC 9110 sections 15.3.5, 15.4.5): over TCP a body
                // cannot be sent, in process it would be.
                if [204, 304].contains(status), let content = rr.value("json") ?? rr.value("body"), content != .string("") {
                    throw rr.error(rr.has("json") ? "json" : "body", expected: "no content with status \(status) (RFC 9110 sections 15.3.5 and 15.4.5)", found: content)
                }
                _ = try rr.optionalString("body")
                try rr.finish()
            }
            step = .release(fault: id, count: try r.optionalInt("count", range: 1...10_000), all: try r.optionalBool("all") ?? false,
                            override: override)
        case "wait_for":
            step = .waitFor(try parseWait(r.value("wait_for")!, path: path + ".wait_for"))
        case "advance":
            // At most ten years of virtual time: beyond about 1e15 s a Date cannot tell t + 10 s
            // from t, so every deadline would pass at once (and 1e308 overflows the clock).
            guard let s = try r.optionalNumber("advance"), s >= 0, s <= 315_360_000, ScenarioParser.wholeMicroseconds(s) else {
                throw r.error("advance", expected: "seconds from 0 to 315360000 (ten years), in whole microseconds", found: r.value("advance"))
            }
            step = .advance(seconds: s)
        case "fixtures":
            step = .fixtures(try parseFixtureChange(r.value("fixtures")!, path: path + ".fixtures"))
        default:
            step = .expect(try parseExpectation(r.value("assert")!, path: path + ".assert"))
        }
        try r.finish()
        return step
    }

    func client(_ r: inout ObjectReader) throws -> String {
        let name = try r.optionalString("client") ?? clients[0]
        guard clients.containsExactly(name) else { throw r.error("client", expected: "one of the scenario's clients \(clients)", found: .string(name)) }
        return name
    }

    func user(_ r: inout ObjectReader, key: String = "user") throws -> UserSpec {
        switch r.value(key) {
        case .string(let id)?: return UserSpec(id: id)
        case .object(let o)?:
            var ur = try ObjectReader(.object(o), file: file, path: r.path + "." + key)
            let id = try ur.string("id")
            let attributes = ur.value("attributes")
            if let attributes, case .object = attributes {} else if attributes != nil {
                throw ur.error("attributes", expected: "an object", found: attributes)
            }
            try ur.finish()
            return UserSpec(id: id, attributes: attributes)
        case let other: throw r.error(key, expected: "a user id or {\"id\", \"attributes\"}", found: other)
        }
    }

    func event(_ value: JSONValue, path: String) throws -> EventSpec {
        var r = try ObjectReader(value, file: file, path: path)
        let e = EventSpec(userId: try r.string("user"), eventName: try r.string("name"), eventType: try r.optionalString("type"),
                          experimentKey: try r.optionalString("experiment"), featureFlagKey: try r.optionalString("flag"),
                          value: try r.optionalNumber("value"), properties: r.value("properties"),
                          timestamp: try r.optionalNumber("timestamp"))
        // A timestamp within the years 0000-9999: ISO-8601 writes other years only in an expanded
        // form the two sides must agree on (a seventh outside tester: 1e16 s trapped an SDK, a
        // 10-digit year and years before 1 had no form `event_payload` and the SDKs shared).
        // The end is the last whole millisecond of 9999: an SDK may round to the millisecond, and
        // 253402300799.9996 rounds into the year 10000 (an outside tester: a correct SDK's
        // `+010000-01-01` was refused by `event_payload`).
        if let t = e.timestamp, !(-62_167_219_200 ... 253_402_300_799.999).contains(t) {
            throw r.error("timestamp", expected: "seconds since 1970 within the years 0000-9999 (-62167219200 up to 253402300799.999, the last millisecond of 9999)", found: .number(t))
        }
        // Properties are an object (`metadata`, CONTRACT.md section 1; a dictionary in every SDK's
        // API): anything else no SDK can be given (a sixth outside tester's successor: each driver
        // failed a correct SDK differently).
        if let p = e.properties, p != .null {
            guard case .object = p else { throw r.error("properties", expected: "an object (or null)", found: p) }
        }
        try r.finish()
        return e
    }

    mutating func label(_ r: inout ObjectReader) throws -> String? {
        guard let l = try r.optionalString("as") else { return nil }
        guard !labels.contains(ExactKey(l)) else { throw r.error("as", expected: "a label not used before", found: .string(l)) }
        labels.insert(ExactKey(l))
        return l
    }

    mutating func parseSDK(_ r: inout ObjectReader) throws -> Step {
        let name = try r.string("do")
        let client = try client(&r)
        let op: SDKOperation
        switch name {
        case "evaluateFlag": op = .evaluateFlag(flag: try r.string("flag"), user: try user(&r))
        case "getAssignment": op = .getAssignment(experiment: try r.string("experiment"), user: try user(&r))
        case "track", "trackWithStatus":
            let e = try event(try r.require("event"), path: r.path + ".event")
            op = name == "track" ? .track(e) : .trackWithStatus(e)
        case "trackBatch":
            guard let items = try r.optionalArray("events") else { throw r.error("events", expected: "an array of events", found: nil) }
            op = .trackBatch(try items.enumerated().map { try event($1, path: r.path + ".events[\($0)]") })
        case "clearCache": op = .clearCache
        case "clearOfflineCache": op = .clearOfflineCache
        case "close": op = .close
        case "getAssignments": op = .getAssignments(user: try r.string("user"))
        case "getEvaluatedFlags": op = .getEvaluatedFlags(user: try r.string("user"))
        case "hashUser": op = .hashUser(user: try r.string("user"), key: try r.string("key"))
        default: throw r.error("do", expected: "an SDK operation (\(SDKOperation.allNames.joined(separator: ", ")))", found: .string(name))
        }
        let isAsync = try r.optionalBool("async") ?? false
        let count = try r.optionalInt("times", range: 1...1000) ?? 1
        let label = try label(&r, copies: count)
        if isAsync && label == nil { throw r.error("as", expected: "a label for an operation started with \"async\": true", found: nil) }
        return .sdk(client: client, operation: op, label: label, async: isAsync, count: count, expect: try parseOutcome(&r))
    }

    mutating func parseApp(_ r: inout ObjectReader) throws -> Step {
        guard hasApp else { throw r.error("app", expected: "an \"app\" section at the top of the scenario before app steps", found: r.value("app")) }
        let name = try r.string("app")
        let action: AppAction
        switch name {
        case "login": action = .login(user: try r.string("user"))
        case "logout": action = .logout
        case "refresh": action = .refresh
        case "display": action = .display
        case "event": action = .event(name: try r.string("name"))
        case "report_state": action = .reportState
        default: throw r.error("app", expected: "login, logout, refresh, display, event or report_state", found: .string(name))
        }
        let isAsync = try r.optionalBool("async") ?? false
        let (client, count) = try appClientAndTimes(&r)
        let label = try label(&r, copies: count)
        if isAsync && label == nil { throw r.error("as", expected: "a label for an action started with \"async\": true", found: nil) }
        return .app(action: action, label: label, async: isAsync, expect: try parseOutcome(&r), client: client, count: count)
    }

    func parseOutcome(_ r: inout ObjectReader) throws -> OutcomeExpectation? {
        guard let e = r.value("expect") else { return nil }
        var er = try ObjectReader(e, file: file, path: r.path + ".expect")
        let result: OutcomeExpectation
        if let v = er.value("value") {
            result = .value(v)
        } else if let alternatives = er.value("any_of") {
            result = .anyOf(try parseAlternatives(alternatives, path: er.path + ".any_of"))
        } else if let kind = try er.optionalString("error") {
            let kinds = ["invalidConfig", "networkError", "decodingError", "flagNotFound", "experimentNotFound", "serverError", "cancelled"]
            guard kinds.contains(kind) else { throw er.error("error", expected: "one of \(kinds.joined(separator: ", "))", found: .string(kind)) }
            result = .error(kind: kind, status: try er.optionalInt("status"), code: try er.optionalInt("code"))
        } else {
            throw ScenarioError(file: file, path: er.path, expected: "\"value\", \"error\" or \"any_of\"", found: "keys \(er.keys)")
        }
        try er.finish()
        return result
    }

    /// A matcher's `api_key`: a key of the fixtures' `api_keys` (compared exactly), or `null` for a
    /// request that sent none of them (no `X-API-Key`, or a key the fixtures lack).
    ///
    /// - Throws: `ScenarioError` at `api_key` for a text no fixture key is (it could never match:
    ///   the mock tells keys apart only by their place in the fixtures) or another type.
    func apiKeyMatch(_ r: inout ObjectReader) throws -> RequestMatch.APIKey? {
        guard r.has("api_key") else { return nil }
        switch r.value("api_key")! {
        case .null: return .noneOfTheFixtures
        case .string(let key):
            guard let i = apiKeys.firstIndex(where: { $0.isExactly(key) }) else {
                throw r.error("api_key", expected: "a key of the fixtures' api_keys (\(apiKeys.count) of them), or null", found: .string(SecretRedactor.mask))
            }
            return .fixture(index: i)
        case let other: throw r.error("api_key", expected: "a key of the fixtures' api_keys, or null", found: other)
        }
    }

    func parseMatch(_ value: JSONValue, path: String) throws -> RequestMatch {
        var r = try ObjectReader(value, file: file, path: path)
        var m = RequestMatch(method: try r.optionalString("method"), path: try r.optionalString("path"),
                             pathPrefix: try r.optionalString("path_prefix"), client: try r.optionalString("client"),
                             user: try r.optionalString("user"), body: r.value("body"), status: try r.optionalInt("status"),
                             target: try r.optionalString("target"), headers: try headers(&r), bodyEquals: r.value("body_equals"),
                             cancelled: try r.optionalBool("cancelled"), responseHeaders: try headers(&r, key: "response_headers"),
                             apiKey: try apiKeyMatch(&r))
        try r.finish()
        // An `X-API-Key` header written with a key of the fixtures means that key: the mock
        // records every key as `***`, so it is matched by its place in the fixtures (a
        // seventy-sixth outside tester: such a matcher never matched, and said "another key").
        // Any other value but `***` (any key) could never match: refused, not a matcher that
        // silently counts nothing (an eightieth outside tester, F8).
        if let name = m.headers?.keys.first(where: { $0.lowercased() == "x-api-key" }), let value = m.headers?[name], value != SecretRedactor.mask {
            guard let i = apiKeys.firstIndex(where: { $0.isExactly(value) }) else {
                throw ScenarioError(file: file, path: path + ".headers.\(name)",
                                    expected: "a key of the fixtures' api_keys (matched by its place there) or \"***\" (any key): every key is recorded as ***, and a request that sent a key the fixtures lack is matched with \"api_key\": null",
                                    found: SecretRedactor.mask)
            }
            if let other = m.apiKey, other != .fixture(index: i) {
                throw ScenarioError(file: file, path: path + ".api_key", expected: "the key the matcher's X-API-Key header names", found: "another")
            }
            m.headers?[name] = nil
            if m.headers?.isEmpty == true { m.headers = nil }
            m.apiKey = .fixture(index: i)
        }
        return m
    }

    func headers(_ r: inout ObjectReader, key: String = "headers") throws -> [String: String]? {
        guard let v = r.value(key) else { return nil }
        guard case .object(let o) = v else { throw r.error(key, expected: "an object of header names and values", found: v) }
        return try o.mapValues { value in
            guard case .string(let s) = value else { throw r.error(key, expected: "string header values", found: value) }
            return s
        }
    }

    func parseWait(_ value: JSONValue, path: String) throws -> WaitCondition {
        if value == .string("quiescence") { return .quiescence }
        var r = try ObjectReader(value, file: file, path: path)
        let count = try r.optionalInt("count", range: 0...100_000) ?? 1
        let condition: WaitCondition
        if let fault = try r.optionalString("held") {
            guard faults.contains(ExactKey(fault)) else { throw r.error("held", expected: "the id of a fault added earlier", found: .string(fault)) }
            condition = .held(fault: fault, count: count)
        } else if let m = r.value("requests") {
            condition = .requests(try parseMatch(m, path: path + ".requests"), count: count)
        } else {
            throw ScenarioError(file: file, path: path, expected: "\"quiescence\", {\"held\": ID} or {\"requests\": MATCH}", found: ObjectReader.brief(value))
        }
        try r.finish()
        return condition
    }

    func parseFixtureChange(_ value: JSONValue, path: String) throws -> FixtureChange {
        var r = try ObjectReader(value, file: file, path: path)
        let change: FixtureChange
        if let v = r.value("experiment_status") {
            var vr = try ObjectReader(v, file: file, path: path + ".experiment_status")
            change = .experimentStatus(key: try vr.string("key"), status: try vr.string("status")); try vr.finish()
        } else if let v = r.value("flag_status") {
            var vr = try ObjectReader(v, file: file, path: path + ".flag_status")
            change = .flagStatus(key: try vr.string("key"), status: try vr.string("status")); try vr.finish()
        } else if let v = r.value("flag_rollout") {
            var vr = try ObjectReader(v, file: file, path: path + ".flag_rollout")
            guard let p = try vr.optionalNumber("percentage"), (0...100).contains(p) else {
                throw vr.error("percentage", expected: "a number from 0 to 100", found: vr.value("percentage"))
            }
            change = .flagRollout(key: try vr.string("key"), percentage: p); try vr.finish()
        } else if let additional = try parseFixtureChangeAddition(&r, path: path) {
            change = additional
        } else {
            throw ScenarioError(file: file, path: path, expected: "experiment_status, flag_status, flag_rollout, experiment_allocations or experiment_restart", found: ObjectReader.brief(value))
        }
        try r.finish()
        return change
    }

    func parseExpectation(_ value: JSONValue, path: String) throws -> Expectation {
        var r = try ObjectReader(value, file: file, path: path)
        let result: Expectation
        if let v = r.value("cache") {
            var cr = try ObjectReader(v, file: file, path: path + ".cache")
            result = .cache(client: try client(&cr), user: try cr.string("user"), assignments: try cr.optionalStrings("assignments"),
                            flags: try cr.optionalStrings("flags"))
            try cr.finish()
            if case .cache(_, _, nil, nil) = result {
                throw ScenarioError(file: file, path: path + ".cache", expected: "\"assignments\" or \"flags\" (what the cache must hold)",
                                    found: "keys \(cr.keys): this assertion checks nothing")
            }
        } else if let v = r.value("persisted") {
            var pr = try ObjectReader(v, file: file, path: path + ".persisted")
            let c = try client(&pr)
            let user = try pr.string("user")
            let flag = try pr.optionalString("flag"), experiment = try pr.optionalString("experiment")
            guard (flag == nil) != (experiment == nil) else {
                throw ScenarioError(file: file, path: path + ".persisted", expected: "exactly one of \"flag\" or \"experiment\"", found: "keys \(pr.keys)")
            }
            result = .persisted(client: c, kind: flag != nil ? "flag" : "experiment", user: user, key: flag ?? experiment!,
                                present: try pr.optionalBool("present") ?? true, value: pr.value("value"))
            if case .persisted(_, _, _, _, false, let value?) = result {
                throw pr.error("value", expected: "no \"value\" with \"present\": false (nothing is stored to compare it with)", found: value)
            }
            try pr.finish()
        } else if let v = r.value("requests") {
            result = .requests(try parseMatch(v, path: path + ".requests"), count: try r.optionalInt("count", range: 0...1_000_000),
                               batchSizes: try r.optionalArray("batch_sizes").map { items in
                                   try items.enumerated().map { i, item in
                                       guard case .number(let d) = item, let n = Int(exactly: d) else {
                                           throw ScenarioError(file: file, path: path + ".batch_sizes[\(i)]", expected: "a whole number", found: ObjectReader.brief(item))
                                       }
                                       return n
                                   }
                               })
        } else if let v = r.value("app") {
            guard hasApp else { throw r.error("app", expected: "an \"app\" section in the scenario", found: v) }
            var ar = try ObjectReader(v, file: file, path: path + ".app")
            result = .app(shown: try ar.optionalString("shown"), identity: try ar.optionalString("identity"), source: try ar.optionalString("source"),
                          client: try optionalAppClient(&ar))
            try ar.finish()
            if case .app(nil, nil, nil, _) = result {
                throw ScenarioError(file: file, path: path + ".app", expected: "\"shown\", \"identity\" or \"source\"",
                                    found: "keys \(ar.keys): this assertion checks nothing")
            }
        } else if let v = r.value("reported") {
            guard hasApp else { throw r.error("reported", expected: "an \"app\" section in the scenario", found: v) }
            result = try parseReported(v, path: path + ".reported")
        } else if let v = r.value("cached") {
            result = try parseCached(v, path: path + ".cached")
        } else if let v = r.value("exposures") {
            result = try parseExposures(v, count: r.value("count"), path: path)
        } else {
            throw ScenarioError(file: file, path: path, expected: "one of cache, cached, persisted, requests, app, reported, exposures", found: ObjectReader.brief(value))
        }
        try r.finish()
        if case .requests(_, nil, nil) = result {
            throw ScenarioError(file: file, path: path, expected: "\"count\" or \"batch_sizes\" beside \"requests\" (what to check of the matching requests)",
                                found: "neither: this assertion checks nothing")
        }
        return result
    }
}
