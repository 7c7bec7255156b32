import Foundation

extension Variant {
    /// The `variant_id` the backend sends for this variant: the fixture id itself when it is
    /// already a UUID string, else a deterministic UUID derived from the experiment key and the
    /// fixture id (``MockUUID``), as upstream's ids are UUIDs (CONTRACT.md section 2).
    public func wireID(experimentKey: String) -> String {
        MockUUID.isUUID(id) ? id : MockUUID.derive("variant", [experimentKey, id])
    }
}

extension Experiment {
    /// The experiment's `experiment_id` on the wire (a deterministic UUID from its key).
    public var wireID: String { MockUUID.derive("experiment", [key]) }
}

extension Flag {
    /// The flag's `feature_flag_id` on the wire (a deterministic UUID from its key).
    public var wireID: String { MockUUID.derive("feature_flag", [key]) }
}

/// ISO-8601 UTC timestamps with milliseconds and `Z` (e.g. `2023-11-14T22:13:20.000Z`), as the
/// mock writes `timestamp`, `created_at` and `updated_at`.
enum MockISODate {
    static func format(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.timeZone = TimeZone(identifier: "UTC")
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: date)
    }
}

/// Exact identity comparison: equal Unicode scalars (CONTRACT.md section 4, identity is exact).
@inline(__always) func sameScalars(_ a: String, _ b: String) -> Bool { a.unicodeScalars.elementsEqual(b.unicodeScalars) }

extension BackendModel {
    // MARK: /track record

    /// The stored event record `/track` answers (upstream `EventResponse`): `{id, event_type,
    /// event_name (defaults to event_type), user_id, session_id, experiment_id, feature_flag_id,
    /// variant_id (the user's sticky variant in the event's experiment), value, properties (the
    /// request's metadata), metadata (always null, as upstream's `_event_response` leaves it),
    /// timestamp (the request's, else now), created_at,
    /// updated_at}`; ids are UUID strings or null (CONTRACT.md section 2).
    func eventRecord(_ event: [String: JSONValue], id: Int, now: Date) -> JSONValue {
        let experiment = event["experiment_key"]?.stringValue.flatMap { fixtures.experiment($0) }
        let flag = event["feature_flag_key"]?.stringValue.flatMap { fixtures.flag($0) }
        let userID = event["user_id"]?.stringValue ?? ""
        var variantID = JSONValue.null
        if let experiment, let sticky = state.assignments.last(where: { sameScalars($0.experimentKey, experiment.key) && sameScalars($0.userID, userID) }) {
            let variant = experiment.variants.first { sameScalars($0.id, sticky.variantID) }
                ?? Variant(id: sticky.variantID, name: sticky.variantName, allocation: 0)
            variantID = .string(variant.wireID(experimentKey: experiment.key))
        }
        let eventType = event["event_type"] ?? .null
        let eventName: JSONValue = {
            if let name = event["event_name"]?.stringValue, !name.isEmpty { return .string(name) }
            return eventType
        }()
        let metadata = event["metadata"] ?? .null
        let created = JSONValue.string(MockISODate.format(now))
        return .object([
            "id": .string(MockUUID.derive("event", [String(id)])),
            "event_type": eventType, "event_name": eventName, "user_id": event["user_id"] ?? .null,
            "session_id": .null,
            "experiment_id": experiment.map { .string($0.wireID) } ?? .null,
            "feature_flag_id": flag.map { .string($0.wireID) } ?? .null,
            "variant_id": variantID,
            "value": event["value"] ?? .null,
            "properties": metadata, "metadata": .null,
            "timestamp": event["timestamp"].flatMap { $0 == .null ? nil : $0 } ?? created,
            "created_at": created, "updated_at": created,
        ])
    }

    // MARK: GET /api/v1/feature-flags/user/{user_id}

    /// The optional `context` query: URL-encoded JSON object (CONTRACT.md section 2); 422 issues
    /// for bad JSON, a non-object or bytes that are not UTF-8. An empty `context=` is no context, as
    /// the upstream backend reads it (a mock fidelity tester: the mock answered 422).
    static func contextQuery(_ request: IncomingRequest, issues: inout [ValidationIssue]) -> TargetingContext {
        guard let raw = request.query("context"), raw != "" else { return TargetingContext([:]) }
        guard let text = raw else {
            issues.append(ValidationIssue(type: "string_unicode", loc: ["query", "context"], msg: "Input should be a valid string, unable to parse raw data as a unicode string"))
            return TargetingContext([:])
        }
        do {
            let data = Data(text.utf8)
            let parsed = try JSONValue.parse(data)
            if let object = parsed.value.objectValue {
                return TargetingContext(object, exact: ExactJSON.mayHaveEquivalentNames(data) ? ExactJSON.parse(data) : nil)
            }
            issues.append(ValidationIssue(type: "dict_type", loc: ["query", "context"], msg: "Input should be a JSON object"))
        } catch {
            // The message names what was wrong and where, never the input (CONTRACT.md section 2).
            let what = (error as? JSONParseError).map { "\($0.message) at byte \($0.offset)" } ?? "not JSON"
            issues.append(ValidationIssue(type: "json_invalid", loc: ["query", "context"], msg: "Invalid JSON: \(what)"))
        }
        return TargetingContext([:])
    }

    /// `{flag_key: enabled}` for every ACTIVE flag, evaluated as the evaluate route does.
    func userFlags(_ request: IncomingRequest, userID: String) -> MockResponse {
        var issues: [ValidationIssue] = []
        let context = Self.contextQuery(request, issues: &issues)
        if !issues.isEmpty { return Self.validationError(issues) }
        // Members, not a dictionary: `String` keys compare by canonical equivalence, and flags whose
        // keys are NFC and NFD spellings of one name merged into one member, the last one winning
        // (an outside audit, A-3; CONTRACT.md section 4: identity is exact).
        var out: [(key: String, value: JSONValue)] = []
        for flag in fixtures.flags where flag.status == .active {
            out.append((flag.key, .bool(Self.flagDecision(flag, userID: userID, context: context).enabled)))
        }
        return Self.json(200, members: out)
    }

    // MARK: GET /api/v1/tracking/assignments/{user_id}

    /// The user's sticky assignments (upstream `AssignmentService.get_user_assignments`), each
    /// `{id, user_id, experiment_id, experiment_name, variant_id, variant_name, is_control,
    /// created_at}`, in the order they were made; `active_only` (default true; FastAPI booleans
    /// `true/false/1/0/yes/no/on/off`, else 422) keeps only ACTIVE experiments. No assignment
    /// answers `[]`.
    func userAssignments(_ request: IncomingRequest, userID: String) -> MockResponse {
        var activeOnly = true
        if let raw = request.query("active_only") {
            switch raw?.lowercased() {
            case "true", "1", "yes", "on", "t", "y": activeOnly = true
            case "false", "0", "no", "off", "f", "n": activeOnly = false
            default:
                return Self.validationError([ValidationIssue(type: "bool_parsing", loc: ["query", "active_only"], msg: "Input should be a valid boolean, unable to interpret input")])
            }
        }
        var items: [JSONValue] = []
        for sticky in state.assignments where sameScalars(sticky.userID, userID) {
            let experiment = fixtures.experiments.first { sameScalars($0.key, sticky.experimentKey) }
            if activeOnly && experiment?.status != .active { continue }
            let variant = experiment?.variants.first { sameScalars($0.id, sticky.variantID) }
                ?? Variant(id: sticky.variantID, name: sticky.variantName, allocation: 0, isControl: sticky.isControl)
            items.append(.object([
                "id": .string(MockUUID.derive("assignment", [sticky.experimentKey, sticky.userID])),
                "user_id": .string(sticky.userID),
                "experiment_id": .string(experiment?.wireID ?? MockUUID.derive("experiment", [sticky.experimentKey])),
                "experiment_name": .string(sticky.experimentKey),
                "variant_id": .string(variant.wireID(experimentKey: sticky.experimentKey)),
                "variant_name": .string(variant.name), "is_control": .bool(variant.isControl),
                "created_at": .string(MockISODate.format(sticky.assignedAt)),
            ]))
        }
        return Self.json(200, .array(items))
    }

    // MARK: GET /api/v1/sdk/ruleset

    /// The local-evaluation ruleset (``SDKRuleset``) with `ETag: "<version>"` and
    /// `Cache-Control: private, no-cache`; an `If-None-Match` naming the version (weak
    /// comparison, `*` matches, at most 32 entries read) answers 304 with no body.
    func ruleset(_ request: IncomingRequest) -> MockResponse {
        let doc = SDKRuleset.document(fixtures)
        let etag = "\"\(doc.version)\""
        let headers: [(name: String, value: String)] = [("ETag", etag), ("Cache-Control", "private, no-cache")]
        if let ifNoneMatch = request.raw.header("If-None-Match") {
            let entries = ifNoneMatch.split(separator: ",", omittingEmptySubsequences: false).prefix(32)
            for entry in entries {
                var tag = entry.trimmingCharacters(in: .whitespaces)
                if tag == "*" { return MockResponse(status: 304, headers: headers) }
                if tag.hasPrefix("W/") { tag.removeFirst(2) }
                if tag.utf8.elementsEqual(etag.utf8) { return MockResponse(status: 304, headers: headers) }
            }
        }
        return MockResponse(status: 200, headers: [("Content-Type", "application/json")] + headers, body: doc.body)
    }

    // MARK: POST /api/v1/tracking/assign/batch

    /// Assigns 1..1000 users (`{experiment_key, users: [{user_id, context?}]}`) as N `/assign`
    /// calls would (sticky, eligibility, bucketing), recording assignments but no exposures.
    /// Answers `{experiment_key, counts: {assigned, holdout, mutual_exclusion, targeting},
    /// assignments: [{user_id, variant_id, assigned, reason}] (in the order sent), variants:
    /// {variant_id: {name, is_control, configuration}}}` (upstream `AssignmentBatchResponse`).
    /// Any invalid field, an unknown member (`extra_forbidden`), more than 1,000 users or a
    /// repeated `user_id` (`duplicate_user_id`, exact scalars) is a 422 for the whole request and
    /// assigns nobody; an unknown or inactive experiment is 404.
    mutating func assignBatch(_ request: IncomingRequest, now: Date) -> MockResponse {
        var issues: [ValidationIssue] = []
        guard let body = Validate.bodyObject(request, issues: &issues) else { return Self.validationError(issues) }
        let experimentKey = Validate.string(body, "experiment_key", loc: ["body"], min: 1, max: 100, required: true, surrogates: request.loneSurrogates, issues: &issues)
        var users: [(userID: String, context: TargetingContext)] = []
        let exactUsers = Self.exactBody(request)?["users"]
        func forbidExtra(_ object: [String: JSONValue], allowed: [String], loc: [JSONPathComponent]) {
            for key in object.keys.sorted() where !allowed.contains(where: { sameScalars($0, key) }) {
                issues.append(ValidationIssue(type: "extra_forbidden", loc: loc + [.key(key)], msg: "Extra inputs are not permitted"))
            }
        }
        forbidExtra(body, allowed: ["experiment_key", "users"], loc: ["body"])
        switch body["users"] {
        case nil, .null?:
            issues.append(ValidationIssue(type: "missing", loc: ["body", "users"], msg: "Field required"))
        case .array(let list)?:
            if list.isEmpty {
                issues.append(ValidationIssue(type: "too_short", loc: ["body", "users"], msg: "List should have at least 1 item after validation, not 0"))
            } else if list.count > 1000 {
                issues.append(ValidationIssue(type: "too_long", loc: ["body", "users"], msg: "at most 1,000 users per request; split the list"))
            } else {
                var firstSeen: [[UInt8]: Int] = [:]
                for (i, item) in list.enumerated() {
                    let loc: [JSONPathComponent] = ["body", "users", .index(i)]
                    guard let object = item.objectValue else {
                        issues.append(ValidationIssue(type: "model_attributes_type", loc: loc, msg: "Input should be a valid dictionary or object to extract fields from"))
                        continue
                    }
                    forbidExtra(object, allowed: ["user_id", "context"], loc: loc)
                    let userID = Validate.string(object, "user_id", loc: loc, min: 1, max: 255, required: true, surrogates: request.loneSurrogates, issues: &issues)
                    let context = TargetingContext(Validate.optionalObject(object, "context", loc: loc, issues: &issues) ?? [:],
                                                   exact: exactUsers?[i]?["context"])
                    if let userID {
                        if let first = firstSeen[Array(userID.utf8)] {
                            issues.append(ValidationIssue(type: "duplicate_user_id", loc: loc + ["user_id"],
                                                          msg: "duplicate user_id; each user may appear once per request (first seen at users[\(first)])"))
                        } else {
                            firstSeen[Array(userID.utf8)] = i
                        }
                        users.append((userID, context))
                    }
                }
            }
        case _?:
            issues.append(ValidationIssue(type: "list_type", loc: ["body", "users"], msg: "Input should be a valid list"))
        }
        guard issues.isEmpty, let experimentKey else { return Self.validationError(issues) }
        guard let experiment = fixtures.experiment(experimentKey), experiment.status == .active else {
            return Self.detail(404, "Active experiment with key '\(experimentKey)' not found")
        }
        guard experiment.controlVariant != nil else { return Self.detail(500, "Experiment has no variants") }

        var counts: [String: Int] = ["assigned": 0, "holdout": 0, "mutual_exclusion": 0, "targeting": 0]
        var assignments: [JSONValue] = []
        for user in users {
            let (variant, assigned, reason) = enroll(experiment, userID: user.userID, context: user.context, now: now, recordExposure: false)
            counts[reason, default: 0] += 1
            assignments.append(.object([
                "user_id": .string(user.userID), "variant_id": .string(variant.wireID(experimentKey: experiment.key)),
                "assigned": .bool(assigned), "reason": .string(reason),
            ]))
        }
        var variants: [String: JSONValue] = [:]
        for variant in experiment.variants {
            variants[variant.wireID(experimentKey: experiment.key)] = .object([
                "name": .string(variant.name), "is_control": .bool(variant.isControl), "configuration": variant.configuration,
            ])
        }
        return Self.json(200, .object([
            "experiment_key": .string(experimentKey),
            "counts": .object(counts.mapValues { .number(Double($0)) }),
            "assignments": .array(assignments), "variants": .object(variants),
        ]))
    }
}
