import Foundation

/// The backend as a pure value: fixtures plus built-up state, answering one request at a time
/// (CONTRACT.md section 2, all of it). No I/O, no clock of its own: the caller passes `now`.
///
/// Order of checks for a request: `/health`; route match (404 `Not Found`, 405 with `Allow`);
/// API key (401); rate limit per (API key, exact raw path) (429); field validation (422); then
/// the route's own rules (404 for unknown experiments/flags/keys, 200 otherwise).
public struct BackendModel: Sendable {
    /// The configuration data; may be changed between requests (e.g. an experiment stops mid-run).
    public var fixtures: Fixtures
    /// Assignments, exposures and events built up so far.
    public internal(set) var state = BackendStateSnapshot()

    private var rateWindows: [String: (start: Date, count: Int)] = [:]
    private var stickyIndex: [String: Int] = [:]

    /// Creates a backend over `fixtures` with empty state.
    public init(fixtures: Fixtures = .sdkContract) { self.fixtures = fixtures }

    /// Answers `request` at time `now`, updating the state (assignments, exposures, events, rate
    /// counters).
    public mutating func respond(to request: MockRequest, now: Date) -> MockResponse {
        answer(IncomingRequest(request), now: now).response
    }

    /// Answers a pre-parsed request and explains the routing (used by ``MockBackend`` for history).
    mutating func answer(_ request: IncomingRequest, now: Date) -> ModelAnswer {
        if request.segments == ["health"] {
            guard request.method == "GET" || request.method == "HEAD" else {
                return ModelAnswer(response: Self.detail(405, "Method Not Allowed", extra: [("Allow", "GET")]), route: "GET /health", note: "GET /health does not allow \(request.method)")
            }
            return ModelAnswer(response: Self.json(200, .object(["status": .string("healthy")])), route: "GET /health", note: nil)
        }
        let match = Route.match(method: request.method, segments: request.segments)
        guard case .found(let route, let pathKey) = match else {
            switch match {
            case .methodNotAllowed(let allowed, let template):
                return ModelAnswer(response: Self.detail(405, "Method Not Allowed", extra: [("Allow", allowed.joined(separator: ", "))]),
                                   route: nil, note: "\(template) allows \(allowed.joined(separator: ", ")), not \(request.method)")
            default:
                return ModelAnswer(response: Self.detail(404, "Not Found"), route: nil,
                                   note: Route.nearest(method: request.method, rawPath: request.raw.rawPath, segments: request.segments))
            }
        }

        // Auth (CONTRACT.md section 2).
        let key = request.raw.header("X-API-Key") ?? ""
        if key.isEmpty {
            return ModelAnswer(response: Self.detail(401, "API key missing", extra: [("WWW-Authenticate", "APIKey")]), route: route.name, note: nil)
        }
        guard fixtures.apiKeys.contains(where: { $0.key == key && !$0.revoked }) else {
            return ModelAnswer(response: Self.detail(401, "Invalid API Key", extra: [("WWW-Authenticate", "APIKey")]), route: route.name, note: nil)
        }

        // Rate limit: one fixed window per (client, exact path).
        if let limited = rateLimit(client: key, path: request.raw.rawPath, now: now) {
            return ModelAnswer(response: limited, route: route.name, note: nil)
        }

        let response: MockResponse
        switch route {
        case .evaluateGET: response = evaluateFlagGET(request, flagKey: pathKey ?? "")
        case .evaluatePOST: response = evaluateFlagPOST(request, flagKey: pathKey ?? "")
        case .assign: response = assign(request, now: now)
        case .track: response = track(request, now: now)
        case .batch: response = batch(request, now: now)
        }
        return ModelAnswer(response: response, route: route.name, note: nil)
    }

    // MARK: Rate limit

    private mutating func rateLimit(client: String, path: String, now: Date) -> MockResponse? {
        let limit = fixtures.rateLimit
        let window = TimeInterval(max(1, limit.windowSeconds))
        let counterKey = client + "\u{0}" + path
        var entry = rateWindows[counterKey] ?? (start: now, count: 0)
        if now.timeIntervalSince(entry.start) >= window || now < entry.start { entry = (start: now, count: 0) }
        entry.count += 1
        rateWindows[counterKey] = entry
        guard entry.count > limit.limit else { return nil }
        let retryAfter = max(1, Int((entry.start.addingTimeInterval(window).timeIntervalSince(now)).rounded(.up)))
        return Self.detail(429, "Too Many Requests. Retry after \(retryAfter) seconds.", extra: [
            ("Retry-After", String(retryAfter)),
            ("X-RateLimit-Limit", String(limit.limit)),
            ("X-RateLimit-Remaining", "0"),
            ("X-RateLimit-Window", String(limit.windowSeconds)),
        ])
    }

    // MARK: Flags

    private func evaluateFlagGET(_ request: IncomingRequest, flagKey: String) -> MockResponse {
        var issues: [ValidationIssue] = []
        let userID = Validate.queryString(request.query("user_id"), loc: ["query", "user_id"], min: 1, max: 255, issues: &issues)
        var context: [String: JSONValue] = [:]
        if let raw = request.query("context") {
            if let text = raw {
                do {
                    let parsed = try JSONValue.parse(Data(text.utf8))
                    if let object = parsed.value.objectValue { context = object } else {
                        issues.append(ValidationIssue(type: "dict_type", loc: ["query", "context"], msg: "Input should be a JSON object"))
                    }
                } catch {
                    issues.append(ValidationIssue(type: "json_invalid", loc: ["query", "context"], msg: "Invalid JSON: \(error)"))
                }
            } else {
                issues.append(ValidationIssue(type: "string_unicode", loc: ["query", "context"], msg: "Input should be a valid string, unable to parse raw data as a unicode string"))
            }
        }
        if !issues.isEmpty { return Self.validationError(issues) }
        return evaluateFlag(flagKey, userID: userID ?? "", context: context)
    }

    private func evaluateFlagPOST(_ request: IncomingRequest, flagKey: String) -> MockResponse {
        var issues: [ValidationIssue] = []
        guard let body = Validate.bodyObject(request, issues: &issues) else { return Self.validationError(issues) }
        let userID = Validate.string(body, "user_id", loc: ["body"], min: 1, max: 255, required: true, surrogates: request.loneSurrogates, issues: &issues)
        let context = Validate.optionalObject(body, "context", loc: ["body"], issues: &issues)
        if !issues.isEmpty { return Self.validationError(issues) }
        return evaluateFlag(flagKey, userID: userID ?? "", context: context ?? [:])
    }

    private func evaluateFlag(_ key: String, userID: String, context: [String: JSONValue]) -> MockResponse {
        guard let flag = fixtures.flag(key) else { return Self.detail(404, "Feature flag not found") }
        func body(_ enabled: Bool, _ reason: String) -> MockResponse {
            Self.json(200, .object(["key": .string(key), "enabled": .bool(enabled), "config": .null, "reason": .string(reason)]))
        }
        guard flag.status == .active else { return body(false, "inactive") }
        let bucket = MockBucketing.flagBucket(userID: userID, flagKey: key)
        for rule in flag.rules where rule.conditions.allSatisfy({ $0.matches(userID: userID, context: context) }) {
            return body(bucket < rule.percentage, "targeting_rule")
        }
        return body(bucket < flag.rolloutPercentage, "rollout")
    }

    // MARK: Assign

    private mutating func assign(_ request: IncomingRequest, now: Date) -> MockResponse {
        var issues: [ValidationIssue] = []
        guard let body = Validate.bodyObject(request, issues: &issues) else { return Self.validationError(issues) }
        let experimentKey = Validate.string(body, "experiment_key", loc: ["body"], min: 1, max: 100, required: true, surrogates: request.loneSurrogates, issues: &issues)
        let userID = Validate.string(body, "user_id", loc: ["body"], min: 1, max: 255, required: true, surrogates: request.loneSurrogates, issues: &issues)
        let context = Validate.optionalObject(body, "context", loc: ["body"], issues: &issues) ?? [:]
        guard issues.isEmpty, let experimentKey, let userID else { return Self.validationError(issues) }

        guard let experiment = fixtures.experiment(experimentKey), experiment.status == .active else {
            return Self.detail(404, "Experiment not found or not active")
        }
        guard let control = experiment.controlVariant else { return Self.detail(500, "Experiment has no variants") }

        func answer(_ variant: Variant, assigned: Bool, reason: String) -> MockResponse {
            Self.json(200, .object([
                "experiment_key": .string(experimentKey), "user_id": .string(userID),
                "variant_id": .string(variant.id), "variant_name": .string(variant.name),
                "is_control": .bool(variant.isControl), "configuration": variant.configuration,
                "assigned": .bool(assigned), "reason": .string(reason),
            ]))
        }

        let stickyKey = experimentKey + "\u{0}" + userID
        if let index = stickyIndex[stickyKey] {
            let sticky = state.assignments[index]
            let variant = experiment.variants.first { $0.id == sticky.variantID }
                ?? Variant(id: sticky.variantID, name: sticky.variantName, allocation: 0, isControl: sticky.isControl)
            state.exposures.append(Exposure(experimentKey: experimentKey, userID: userID, variantID: variant.id, at: now))
            return answer(variant, assigned: true, reason: "sticky")
        }

        // Eligibility: holdout, mutual exclusion, targeting; ineligible users get control,
        // assigned:false, no exposure and no stickiness.
        if experiment.holdoutUserIDs.contains(userID) { return answer(control, assigned: false, reason: "holdout") }
        if experiment.mutuallyExclusiveWith.contains(where: { stickyIndex[$0 + "\u{0}" + userID] != nil }) {
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
        state.exposures.append(Exposure(experimentKey: experimentKey, userID: userID, variantID: chosen.id, at: now))
        return answer(chosen, assigned: true, reason: "bucketed")
    }

    // MARK: Track and batch

    private func keyKnown(_ key: String) -> Bool { fixtures.experiment(key) != nil || fixtures.flag(key) != nil }

    /// Returns the 404 detail for an event whose keys name nothing, else nil.
    private func unknownKeyDetail(_ event: [String: JSONValue]) -> String? {
        for field in ["experiment_key", "feature_flag_key"] {
            if let key = event[field]?.stringValue, !keyKnown(key) { return "Experiment or feature flag not found: \(field)" }
        }
        return nil
    }

    private mutating func track(_ request: IncomingRequest, now: Date) -> MockResponse {
        var issues: [ValidationIssue] = []
        guard let body = Validate.bodyObject(request, issues: &issues) else { return Self.validationError(issues) }
        Validate.event(body, loc: ["body"], surrogates: request.loneSurrogates, issues: &issues)
        if !issues.isEmpty { return Self.validationError(issues) }
        if let detail = unknownKeyDetail(body) { return Self.detail(404, detail) }
        // The last id + 1 (not the count): a streaming backend trims old events.
        let id = (state.events.last?.id ?? 0) + 1
        state.events.append(StoredEvent(id: id, source: "track", event: .object(body), receivedAt: now))
        return Self.json(200, .object(["status": .string("ok"), "event_id": .number(Double(id))]))
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
        for (i, object) in objects.enumerated() {
            if let detail = unknownKeyDetail(object) {
                errors.append(.object(["index": .number(Double(i)), "detail": .string(detail)]))
                continue
            }
            successes += 1
            state.events.append(StoredEvent(id: (state.events.last?.id ?? 0) + 1, source: "batch", event: .object(object), receivedAt: now))
        }
        return Self.json(200, .object([
            "success_count": .number(Double(successes)), "failure_count": .number(Double(errors.count)),
            "errors": errors.isEmpty ? .null : .array(errors),
        ]))
    }

    // MARK: Response helpers

    /// A JSON response with `Content-Type: application/json`.
    static func json(_ status: Int, _ body: JSONValue, extra: [(name: String, value: String)] = []) -> MockResponse {
        MockResponse(status: status, headers: [("Content-Type", "application/json")] + extra, body: body.serialized())
    }

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
