import Foundation

/// The backend as a pure value: fixtures plus built-up state, answering one request at a time
/// (CONTRACT.md section 2, all of it). No I/O, no clock of its own: the caller passes `now`.
///
/// Order of checks for a request: rate limit per (client address, path as served) (429; every
/// later answer carries the three `X-RateLimit-*` headers, as upstream's middleware adds them,
/// `/health` included); `/health`; route match (404 `Not Found`, 405 with `Allow`); API key
/// (401); scope `sdk:ruleset` for the server-side SDK routes (403); field validation (422); then
/// the route's own rules (404 for unknown experiments/flags/keys, 200 otherwise).
public struct BackendModel: Sendable {
    /// The configuration data; may be changed between requests (e.g. an experiment stops mid-run).
    public var fixtures: Fixtures
    /// Assignments, exposures and events built up so far.
    public internal(set) var state = BackendStateSnapshot()

    /// Fixed rate windows per (client address, path as served): UTF-8 bytes, so compared exactly.
    private var rateWindows: [RateWindowKey: (start: Date, count: Int)] = [:]
    /// Index into `state.assignments` per (experiment key, user id), compared by Unicode scalars:
    /// NFC and NFD spellings of one name are two users (CONTRACT.md section 2, assign).
    var stickyIndex: [[ExactKey]: Int] = [:]

    /// Creates a backend over `fixtures` with empty state.
    public init(fixtures: Fixtures = .sdkContract) { self.fixtures = fixtures }

    /// Answers `request` at time `now`, updating the state (assignments, exposures, events, rate
    /// counters).
    public mutating func respond(to request: MockRequest, now: Date) -> MockResponse {
        answer(IncomingRequest(request), now: now).response
    }

    /// Answers a pre-parsed request and explains the routing (used by ``MockBackend`` for history).
    mutating func answer(_ request: IncomingRequest, now: Date) -> ModelAnswer {
        // Rate limit: one fixed window per (client address, path), before everything else, as
        // upstream's middleware runs before the router: `/health` and a request to no route count
        // too, and their answers carry the X-RateLimit-* headers (CONTRACT.md section 2). The
        // client is the peer's address over TCP, never the API key (two keys on one device share
        // a budget: an outside audit, A-2 and A-9); in process every request comes from the one
        // device. The path is the one the server routes (`PercentDecoding.servedPath`): `f%5Fx`
        // and `f_x` share a budget, as upstream's counter keyed by the decoded path. A CORS
        // preflight (OPTIONS with Access-Control-Request-Method) is not counted, as upstream.
        let preflight = request.method == "OPTIONS" && request.raw.header("Access-Control-Request-Method") != nil
        let budget = preflight ? (refused: nil, limit: 0, remaining: 0)
            : rateLimit(client: Self.clientAddress(request.raw.peer), path: PercentDecoding.servedPath(request.rawPath), now: now)
        func counted(_ answer: ModelAnswer) -> ModelAnswer {
            if preflight { return answer }
            return ModelAnswer(response: Self.withRateLimitHeaders(answer.response, limit: budget.limit, remaining: budget.remaining,
                                                                   windowSeconds: fixtures.rateLimit.windowSeconds),
                               route: answer.route, note: answer.note)
        }
        if request.segments == ["health"] {
            if let limited = budget.refused { return ModelAnswer(response: limited, route: "GET /health", note: nil) }
            guard request.method == "GET" || request.method == "HEAD" else {
                return counted(ModelAnswer(response: Self.detail(405, "Method Not Allowed", extra: [("Allow", "GET")]), route: "GET /health",
                                           note: "GET /health does not allow \(request.method)"))
            }
            return counted(ModelAnswer(response: Self.json(200, .object(["status": .string("healthy")])), route: "GET /health", note: nil))
        }
        let match = Route.match(method: request.method, segments: request.segments)
        guard case .found(let route, let pathKey) = match else {
            if let limited = budget.refused { return ModelAnswer(response: limited, route: nil, note: nil) }
            let answer: ModelAnswer
            switch match {
            case .methodNotAllowed(let allowed, let template):
                answer = ModelAnswer(response: Self.detail(405, "Method Not Allowed", extra: [("Allow", allowed.joined(separator: ", "))]),
                                     route: nil, note: "\(template) allows \(allowed.joined(separator: ", ")), not \(request.method)")
            default:
                answer = ModelAnswer(response: Self.detail(404, "Not Found"), route: nil,
                                     note: Route.nearest(method: request.method, rawPath: request.rawPath, segments: request.segments))
            }
            return counted(answer)
        }

        let key = request.raw.header("X-API-Key") ?? ""
        if let limited = budget.refused {
            return ModelAnswer(response: limited, route: route.name, note: nil)
        }
        let response = routeResponse(route, pathKey: pathKey, key: key, request: request, now: now)
        return counted(ModelAnswer(response: response, route: route.name, note: nil))
    }

    /// Auth, scope and the route's own answer (CONTRACT.md section 2).
    private mutating func routeResponse(_ route: Route, pathKey: String?, key: String, request: IncomingRequest, now: Date) -> MockResponse {
        // Auth (CONTRACT.md section 2): keys are compared by Unicode scalars, never String ==.
        if key.isEmpty {
            return Self.detail(401, "API key missing", extra: [("WWW-Authenticate", "APIKey")])
        }
        guard let apiKey = fixtures.apiKeys.first(where: { $0.key.isExactly(key) && !$0.revoked }) else {
            return Self.detail(401, "Invalid API Key", extra: [("WWW-Authenticate", "APIKey")])
        }
        switch route {
        case .ruleset, .assignBatch:
            guard apiKey.hasScope(APIKey.sdkRulesetScope) else { return Self.detail(403, Self.missingScopeDetail) }
        default: break
        }

        switch route {
        case .evaluateGET: return evaluateFlagGET(request, flagKey: pathKey ?? "")
        case .evaluatePOST: return evaluateFlagPOST(request, flagKey: pathKey ?? "")
        case .assign: return assign(request, now: now)
        case .track: return track(request, now: now)
        case .batch: return batch(request, now: now)
        case .userFlags: return userFlags(request, userID: pathKey ?? "")
        case .userAssignments: return userAssignments(request, userID: pathKey ?? "")
        case .ruleset: return ruleset(request)
        case .assignBatch: return assignBatch(request, now: now)
        }
    }

    /// The 403 detail for a valid key without `sdk:ruleset` (upstream `MISSING_SCOPE_DETAIL`).
    static let missingScopeDetail = "This API key does not have the 'sdk:ruleset' scope. Create a key with the 'sdk:ruleset' scope for server-side local evaluation."

    /// The 429 detail of the rate limiter (upstream `RateLimitMiddleware`).
    public static let tooManyRequestsDetail = "Too Many Requests. Please slow down and retry after a moment."

    /// Restarts `experimentKey` (a new run): it becomes ACTIVE and its sticky assignments are
    /// forgotten, so every user is bucketed afresh (with the allocations then in force). Exposures
    /// already recorded stay. Returns false when no experiment has exactly that key.
    public mutating func restartExperiment(_ experimentKey: String) -> Bool {
        guard let i = fixtures.experiments.firstIndex(where: { $0.key.isExactly(experimentKey) }) else { return false }
        fixtures.experiments[i].status = .active
        state.assignments.removeAll { $0.experimentKey.isExactly(experimentKey) }
        stickyIndex = [:]
        for (n, a) in state.assignments.enumerated() { stickyIndex[[ExactKey(a.experimentKey), ExactKey(a.userID)]] = n }
        return true
    }

    // MARK: Rate limit

    /// Counts the request in its fixed window: a refusal (429, `Retry-After` = the window, as
    /// upstream always sends, not the time left) or the limit and what remains of it, for the
    /// answer's `X-RateLimit-*` headers (``withRateLimitHeaders(_:limit:remaining:windowSeconds:)``).
    /// The rate limiter's client: the peer's address without its port (`127.0.0.1` of
    /// `127.0.0.1:54321`; upstream keys on `request.client.host`), or `in-process` for a request
    /// that came without one (every in-process request is the one device's).
    static func clientAddress(_ peer: String?) -> String {
        guard let peer else { return "in-process" }
        guard let colon = peer.lastIndex(of: ":") else { return peer }
        return String(peer[..<colon])
    }

    private mutating func rateLimit(client: String, path: String, now: Date) -> (refused: MockResponse?, limit: Int, remaining: Int) {
        let config = fixtures.rateLimit
        let limit = config.limit(forPath: path)
        let window = TimeInterval(max(1, config.windowSeconds))
        // Exact bytes: the client (its address) and the path are identity data.
        let counterKey = RateWindowKey(client: client, path: path)
        // One dictionary lookup: the entry is updated in place.
        let entry = Self.count(in: &rateWindows[counterKey, default: (start: now, count: 0)], now: now, window: window)
        guard entry.count > limit else { return (nil, limit, limit - entry.count) }
        return (Self.detail(429, Self.tooManyRequestsDetail, extra: [
            ("Retry-After", String(config.windowSeconds)),
            ("X-RateLimit-Limit", String(limit)),
            ("X-RateLimit-Remaining", "0"),
            ("X-RateLimit-Window", String(config.windowSeconds)),
        ]), limit, 0)
    }

    /// Counts one request in `entry`'s fixed window (a new window when `window` seconds passed
    /// since its start, or the clock went back) and returns it.
    private static func count(in entry: inout (start: Date, count: Int), now: Date, window: TimeInterval) -> (start: Date, count: Int) {
        if now.timeIntervalSince(entry.start) >= window || now < entry.start { entry = (start: now, count: 0) }
        entry.count += 1
        return entry
    }

    // MARK: Flags

    private func evaluateFlagGET(_ request: IncomingRequest, flagKey: String) -> MockResponse {
        var issues: [ValidationIssue] = []
        let userID = Validate.queryString(request.query("user_id"), loc: ["query", "user_id"], min: 1, max: 255, issues: &issues)
        let context = Self.contextQuery(request, issues: &issues)
        if !issues.isEmpty { return Self.validationError(issues) }
        return evaluateFlag(flagKey, userID: userID ?? "", context: context)
    }

    private func evaluateFlagPOST(_ request: IncomingRequest, flagKey: String) -> MockResponse {
        var issues: [ValidationIssue] = []
        guard let body = Validate.bodyObject(request, issues: &issues) else { return Self.validationError(issues) }
        let userID = Validate.string(body, "user_id", loc: ["body"], min: 1, max: 255, required: true, surrogates: request.loneSurrogates, issues: &issues)
        let context = Validate.optionalObject(body, "context", loc: ["body"], issues: &issues)
        if !issues.isEmpty { return Self.validationError(issues) }
        return evaluateFlag(flagKey, userID: userID ?? "", context: TargetingContext(context ?? [:], exact: Self.exactBody(request)?["context"]))
    }

    private func evaluateFlag(_ key: String, userID: String, context: TargetingContext) -> MockResponse {
        guard let flag = fixtures.flag(key) else { return Self.detail(404, "Feature flag with key '\(key)' not found") }
        let decision = Self.flagDecision(flag, userID: userID, context: context)
        return MockResponse(status: 200, headers: Self.jsonHeaders, body: Self.flagEvaluationBody(key: key, enabled: decision.enabled, reason: decision.reason))
    }

    /// The evaluation of `flag` for `userID` and `context`: `inactive` unless ACTIVE, then the
    /// first targeting rule whose conditions all match (its percentage, `targeting_rule`), else
    /// the rollout percentage (`rollout`), both by md5-mod100 (CONTRACT.md section 2).
    static func flagDecision(_ flag: Flag, userID: String, context: TargetingContext) -> (enabled: Bool, reason: String) {
        guard flag.status == .active else { return (false, "inactive") }
        let bucket = MockBucketing.flagBucket(userID: userID, flagKey: flag.key)
        for rule in flag.rules where rule.conditions.allSatisfy({ $0.matches(userID: userID, context: context) }) {
            return (bucket < rule.percentage, "targeting_rule")
        }
        return (bucket < flag.rolloutPercentage, "rollout")
    }

    // MARK: Assign

    private mutating func assign(_ request: IncomingRequest, now: Date) -> MockResponse {
        var issues: [ValidationIssue] = []
        guard let body = Validate.bodyObject(request, issues: &issues) else { return Self.validationError(issues) }
        let experimentKey = Validate.string(body, "experiment_key", loc: ["body"], min: 1, max: 100, required: true, surrogates: request.loneSurrogates, issues: &issues)
        let userID = Validate.string(body, "user_id", loc: ["body"], min: 1, max: 255, required: true, surrogates: request.loneSurrogates, issues: &issues)
        let context = TargetingContext(Validate.optionalObject(body, "context", loc: ["body"], issues: &issues) ?? [:],
                                       exact: Self.exactBody(request)?["context"])
        guard issues.isEmpty, let experimentKey, let userID else { return Self.validationError(issues) }

        guard let experiment = fixtures.experiment(experimentKey), experiment.status == .active else {
            return Self.detail(404, "Active experiment with key '\(experimentKey)' not found")
        }
        guard experiment.controlVariant != nil else { return Self.detail(500, "Experiment has no variants") }
        let (variant, assigned, reason) = enroll(experiment, userID: userID, context: context, now: now, recordExposure: true)
        return Self.json(200, .object([
            "experiment_key": .string(experimentKey), "user_id": .string(userID),
            "variant_id": .string(variant.wireID(experimentKey: experiment.key)), "variant_name": .string(variant.name),
            "is_control": .bool(variant.isControl), "configuration": variant.configuration,
            "assigned": .bool(assigned), "reason": .string(reason),
        ]))
    }

    /// Enrolls `userID` in `experiment` (which has variants) as `/assign` does: the sticky
    /// variant if any, else eligibility (holdout, mutual exclusion, targeting: control,
    /// `assigned:false`, nothing recorded), else bucketing and a new sticky assignment. Enrolled
    /// users get reason `assigned`, new or sticky (CONTRACT.md section 2). An exposure is recorded
    /// for every enrolled call when `recordExposure` (the batch route records none).
    mutating func enroll(_ experiment: Experiment, userID: String, context: TargetingContext, now: Date,
                         recordExposure: Bool) -> (variant: Variant, assigned: Bool, reason: String) {
        let experimentKey = experiment.key
        let control = experiment.controlVariant!
        func answer(_ variant: Variant, assigned: Bool, reason: String) -> (variant: Variant, assigned: Bool, reason: String) {
            (variant, assigned, reason)
        }

        let stickyKey = [ExactKey(experimentKey), ExactKey(userID)]
        if let index = stickyIndex[stickyKey] {
            let sticky = state.assignments[index]
            let variant = experiment.variants.first { $0.id.isExactly(sticky.variantID) }
                ?? Variant(id: sticky.variantID, name: sticky.variantName, allocation: 0, isControl: sticky.isControl)
            if recordExposure { state.exposures.append(Exposure(experimentKey: experimentKey, userID: userID, variantID: variant.id, at: now)) }
            return answer(variant, assigned: true, reason: "assigned")
        }

        // Eligibility: holdout, mutual exclusion, targeting; ineligible users get control,
        // assigned:false, no exposure and no stickiness.
        if experiment.holdoutUserIDs.contains(where: { $0.isExactly(userID) }) { return answer(control, assigned: false, reason: "holdout") }
        if experiment.mutuallyExclusiveWith.contains(where: { stickyIndex[[ExactKey($0), ExactKey(userID)]] != nil }) {
            return answer(control, assigned: false, reason: "mutual_exclusion")
        }
        if !experiment.targeting.allSatisfy({ $0.matches(userID: userID, context: context) }) {
            return answer(control, assigned: false, reason: "targeting")
        }

        let bucket = MockBucketing.experimentBucket(userID: userID, experimentKey: experimentKey)
        var cumulative = 0
        var chosen = experiment.variants[experiment.variants.count - 1]
        for variant in experiment.variants {
            cumulative += variant.allocation
            if bucket < cumulative { chosen = variant; break }
        }
        stickyIndex[stickyKey] = state.assignments.count
        state.assignments.append(StickyAssignment(experimentKey: experimentKey, userID: userID, variantID: chosen.id,
                                                  variantName: chosen.name, isControl: chosen.isControl, assignedAt: now))
        if recordExposure { state.exposures.append(Exposure(experimentKey: experimentKey, userID: userID, variantID: chosen.id, at: now)) }
        return answer(chosen, assigned: true, reason: "assigned")
    }

    // MARK: Track and batch

    /// Returns the 404 detail for an event whose keys resolve to nothing (neither its experiment
    /// key nor its flag key names a fixture), else nil. An absent key is rendered `None`, as
    /// upstream's f-string does (CONTRACT.md section 2).
    private func unknownKeyDetail(_ event: [String: JSONValue]) -> String? {
        let experimentKey = event["experiment_key"]?.stringValue
        let flagKey = event["feature_flag_key"]?.stringValue
        if experimentKey.flatMap({ fixtures.experiment($0) }) != nil || flagKey.flatMap({ fixtures.flag($0) }) != nil { return nil }
        return "Neither experiment key '\(experimentKey ?? "None")' nor feature flag key '\(flagKey ?? "None")' found"
    }

    private mutating func track(_ request: IncomingRequest, now: Date) -> MockResponse {
        var issues: [ValidationIssue] = []
        guard let body = Validate.bodyObject(request, issues: &issues) else { return Self.validationError(issues) }
        Validate.event(body, loc: ["body"], surrogates: request.loneSurrogates, issues: &issues)
        if !issues.isEmpty { return Self.validationError(issues) }
        if let detail = unknownKeyDetail(body) { return Self.detail(404, detail) }
        // The last id + 1 (not the count): a streaming backend trims old events.
        let id = (state.events.last?.id ?? 0) + 1
        // Member names that differ only as canonically equivalent spellings are two members to
        // the backend (a Python dict): stored and echoed exactly (a forty-eighth outside tester,
        // H1: `"k\u0301"` and `"\u1e31"` in `metadata` became one, the other value kept).
        let exact = Self.exactBody(request)
        var stored = StoredEvent(id: id, source: "track", event: .object(body), receivedAt: now)
        stored.exact = exact
        state.events.append(stored)
        let record = eventRecord(body, id: id, now: now)
        guard let exact, case .object(let members) = record else { return Self.json(200, record) }
        // The echo's `properties` is the request's `metadata`, member for member.
        let echo = ExactJSON.object(members.map { name, value in
            ExactJSON.Member(name: name, value: name == "properties" ? (exact["metadata"] ?? .value(.null)) : .value(value))
        })
        return MockResponse(status: 200, headers: Self.jsonHeaders, body: Data(echo.text().utf8))
    }

    /// The body read with member names told apart scalar by scalar, when it has two that
    /// `JSONValue` merged (canonically equivalent, different scalars); else `nil` (the common
    /// case, decided from the bytes without a second reading when the body has no non-ASCII name).
    static func exactBody(_ request: IncomingRequest) -> ExactJSON? {
        guard ExactJSON.mayHaveEquivalentNames(request.raw.body), let exact = ExactJSON.parse(request.raw.body),
              exact.hasEquivalentNames else { return nil }
        return exact
    }


    private mutating func batch(_ request: IncomingRequest, now: Date) -> MockResponse {
        var issues: [ValidationIssue] = []
        guard let body = Validate.bodyObject(request, issues: &issues) else { return Self.validationError(issues) }
        guard let eventsValue = body["events"] else {
            return Self.validationError([ValidationIssue(type: "missing", loc: ["body", "events"], msg: "Field required")])
        }
        guard let events = eventsValue.arrayValue else {
            return Self.validationError([ValidationIssue(type: "list_type", loc: ["body", "events"], msg: "Input should be a valid list")])
        }
        if events.isEmpty {
            return Self.validationError([ValidationIssue(type: "too_short", loc: ["body", "events"], msg: "List should have at least 1 item after validation, not 0")])
        }
        if events.count > 100 {
            return Self.validationError([ValidationIssue(type: "too_long", loc: ["body", "events"], msg: "List should have at most 100 items after validation, not \(events.count)")])
        }
        var objects: [[String: JSONValue]] = []
        for (i, event) in events.enumerated() {
            let loc: [JSONPathComponent] = [.key("body"), .key("events"), .index(i)]
            guard let object = event.objectValue else {
                issues.append(ValidationIssue(type: "model_attributes_type", loc: loc, msg: "Input should be a valid dictionary or object to extract fields from"))
                continue
            }
            Validate.event(object, loc: loc, surrogates: request.loneSurrogates, issues: &issues)
            objects.append(object)
        }
        if !issues.isEmpty { return Self.validationError(issues) }
        var errors: [JSONValue] = []
        var successes = 0
        let exactEvents = Self.exactBody(request)?["events"]
        for (i, object) in objects.enumerated() {
            if let detail = unknownKeyDetail(object) {
                errors.append(.object([
                    "index": .number(Double(i)), "event_type": object["event_type"] ?? .null,
                    "user_id": object["user_id"] ?? .null, "error": .string(detail),
                ]))
                continue
            }
            successes += 1
            var stored = StoredEvent(id: (state.events.last?.id ?? 0) + 1, source: "batch", event: .object(object), receivedAt: now)
            stored.exact = exactEvents?[i].flatMap { $0.hasEquivalentNames ? $0 : nil }
            state.events.append(stored)
        }
        return Self.json(200, .object([
            "success_count": .number(Double(successes)), "failure_count": .number(Double(errors.count)),
            "errors": errors.isEmpty ? .null : .array(errors),
        ]))
    }

    // MARK: Response helpers

    /// A JSON response with `Content-Type: application/json`.
    static func json(_ status: Int, _ body: JSONValue, extra: [(name: String, value: String)] = []) -> MockResponse {
        MockResponse(status: status, headers: extra.isEmpty ? jsonHeaders : jsonHeaders + extra, body: body.serialized())
    }

    /// A JSON object response from its members (distinct keys), written without building a
    /// dictionary: the same bytes as `json(status, .object(...))`.
    static func json(_ status: Int, members: [(key: String, value: JSONValue)]) -> MockResponse {
        MockResponse(status: status, headers: jsonHeaders, body: JSONValue.serializedObject(members))
    }

    static let jsonHeaders: [(name: String, value: String)] = [("Content-Type", "application/json")]

    /// A FastAPI-style error `{"detail": text}`.
    static func detail(_ status: Int, _ text: String, extra: [(name: String, value: String)] = []) -> MockResponse {
        json(status, .object(["detail": .string(text)]), extra: extra)
    }

    /// A 422 `{"detail":[{type, loc, msg}]}`; never echoes the input.
    static func validationError(_ issues: [ValidationIssue]) -> MockResponse {
        json(422, .object(["detail": .array(issues.map(\.json))]))
    }
}

/// What the model answered and how it routed the request.
struct ModelAnswer: Sendable {
    var response: MockResponse
    /// The matched route ("POST /api/v1/tracking/assign"), nil when none matched.
    var route: String?
    /// When no route matched: the nearest route and what differed.
    var note: String?
}

/// A rate window's key: the API key and the raw path, compared by their UTF-8 bytes (exact
/// bytes: both are identity data, never compared as Strings) and hashed as two length-prefixed
/// blocks of bytes. It keeps the two strings themselves (no byte array built per request).
struct RateWindowKey: Hashable, Sendable {
    let client: String
    let path: String

    init(client: String, path: String) {
        self.client = client
        self.path = path
    }

    static func == (lhs: RateWindowKey, rhs: RateWindowKey) -> Bool { lhs.client.isExactly(rhs.client) && lhs.path.isExactly(rhs.path) }

    func hash(into hasher: inout Hasher) {
        func combine(_ text: String) {
            let utf8 = text.utf8
            hasher.combine(utf8.count)
            if utf8.withContiguousStorageIfAvailable({ hasher.combine(bytes: UnsafeRawBufferPointer($0)) }) == nil {
                for byte in utf8 { hasher.combine(byte) }
            }
        }
        combine(client)
        combine(path)
    }
}
