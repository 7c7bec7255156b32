import Foundation

/// The backend's configuration data: API keys, experiments, flags and the rate limit, as
/// Codable snake_case JSON (CONTRACT.md section 2).
///
/// Decoding rejects unknown keys with an error naming the key and its JSON path (see
/// ``StrictKeys``), so a typo in a scenario's fixture file never silently does nothing.
public struct Fixtures: Codable, Sendable, Equatable {
    /// API keys and whether each is still valid (revoked keys answer 401 "Invalid API Key").
    public var apiKeys: [APIKey]
    /// Experiments, by declaration order.
    public var experiments: [Experiment]
    /// Feature flags, by declaration order.
    public var flags: [Flag]
    /// The per (client, exact path) request budget (CONTRACT.md section 2, rate limit).
    public var rateLimit: RateLimit

    /// Creates a fixture set.
    public init(apiKeys: [APIKey], experiments: [Experiment] = [], flags: [Flag] = [], rateLimit: RateLimit = RateLimit()) {
        self.apiKeys = apiKeys
        self.experiments = experiments
        self.flags = flags
        self.rateLimit = rateLimit
    }

    enum CodingKeys: String, CodingKey, CaseIterable { case apiKeys = "api_keys", experiments, flags, rateLimit = "rate_limit" }

    /// Decodes strictly: unknown keys throw; `experiments`, `flags` and `rate_limit` may be omitted.
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        apiKeys = try c.decode([APIKey].self, forKey: .apiKeys)
        experiments = try c.decodeIfPresent([Experiment].self, forKey: .experiments) ?? []
        flags = try c.decodeIfPresent([Flag].self, forKey: .flags) ?? []
        rateLimit = try c.decodeIfPresent(RateLimit.self, forKey: .rateLimit) ?? RateLimit()
    }

    /// The experiment named exactly `key` (Unicode scalars, not canonical equivalence), if any.
    public func experiment(_ key: String) -> Experiment? { experiments.first { $0.key.isExactly(key) } }
    /// The flag named exactly `key` (Unicode scalars, not canonical equivalence), if any.
    public func flag(_ key: String) -> Flag? { flags.first { $0.key.isExactly(key) } }

    /// The API key every reference fixture set accepts.
    public static let sdkContractAPIKey = "sdk-contract-key"
    /// The reference set's second key, with the `sdk:ruleset` scope (the upstream seed's
    /// `.api_key_local`, read by the live runner as `EXPERIMENTLY_LOCAL_API_KEY`).
    public static let sdkContractLocalAPIKey = "sdk-contract-local-key"

    /// The reference `sdk-contract` fixtures: experiment `sdk_contract_ab` (ACTIVE, control 50
    /// `{"color":"blue"}`, treatment 50 `{"color":"green"}`), flag `sdk_contract_flag` (ACTIVE,
    /// rollout 100), the API key "sdk-contract-key" and the `sdk:ruleset` key
    /// "sdk-contract-local-key" (CONTRACT.md section 2).
    public static let sdkContract = Fixtures(
        apiKeys: [APIKey(key: sdkContractAPIKey), APIKey(key: sdkContractLocalAPIKey, scopes: [APIKey.sdkRulesetScope])],
        experiments: [
            Experiment(
                key: "sdk_contract_ab",
                status: .active,
                variants: [
                    Variant(id: "sdk_contract_ab-control", name: "control", allocation: 50, isControl: true,
                            configuration: .object(["color": .string("blue")])),
                    Variant(id: "sdk_contract_ab-treatment", name: "treatment", allocation: 50, isControl: false,
                            configuration: .object(["color": .string("green")])),
                ])
        ],
        flags: [Flag(key: "sdk_contract_flag", status: .active, rolloutPercentage: 100)])
}

/// An API key the backend knows.
public struct APIKey: Codable, Sendable, Equatable {
    /// The key text sent in `X-API-Key`.
    public var key: String
    /// A revoked key is known but rejected with 401 "Invalid API Key".
    public var revoked: Bool
    /// The key's scopes, e.g. `["sdk:ruleset"]` (JSON `scopes`, default empty). Membership is
    /// exact and case-sensitive, compared by Unicode scalars (upstream
    /// `backend/app/core/api_key_scopes.py`); only ``APIKey/sdkRulesetScope`` is enforced.
    public var scopes: [String]

    /// The scope the server-side SDK routes require (`GET /api/v1/sdk/ruleset`,
    /// `POST /api/v1/tracking/assign/batch`); other valid keys get 403 (CONTRACT.md section 2).
    public static let sdkRulesetScope = "sdk:ruleset"

    /// Creates a key.
    public init(key: String, revoked: Bool = false, scopes: [String] = []) { self.key = key; self.revoked = revoked; self.scopes = scopes }

    /// Whether the key carries `scope` exactly (Unicode scalars, surrounding whitespace ignored
    /// as upstream strips each entry).
    public func hasScope(_ scope: String) -> Bool {
        scopes.contains { entry in
            let trimmed = entry.unicodeScalars.drop { $0.properties.isWhitespace }.reversed().drop { $0.properties.isWhitespace }.reversed()
            return Array(trimmed) == Array(scope.unicodeScalars)
        }
    }

    enum CodingKeys: String, CodingKey, CaseIterable { case key, revoked, scopes }

    /// Decodes strictly; `revoked` defaults to false, `scopes` to none.
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        key = try c.decode(String.self, forKey: .key)
        revoked = try c.decodeIfPresent(Bool.self, forKey: .revoked) ?? false
        scopes = try c.decodeIfPresent([String].self, forKey: .scopes) ?? []
    }
}

/// The status of an experiment or a flag; only `ACTIVE` ones are served (CONTRACT.md section 2).
public enum LifecycleStatus: String, Codable, Sendable, Equatable, CaseIterable {
    /// Being set up; not served.
    case draft = "DRAFT"
    /// Live: the only status that assigns or evaluates.
    case active = "ACTIVE"
    /// Temporarily stopped; not served.
    case paused = "PAUSED"
    /// Finished; not served.
    case completed = "COMPLETED"
    /// Archived; not served.
    case archived = "ARCHIVED"
    /// Switched off; not served.
    case inactive = "INACTIVE"
}

/// One variant of an experiment.
public struct Variant: Codable, Sendable, Equatable {
    /// The stable variant id returned as `variant_id`.
    public var id: String
    /// The variant name returned as `variant_name`.
    public var name: String
    /// Integer traffic allocation in percent (0...100); walked cumulatively in declared order.
    public var allocation: Int
    /// Whether this is the control variant.
    public var isControl: Bool
    /// The variant's configuration object returned as `configuration` (may be null).
    public var configuration: JSONValue

    /// Creates a variant.
    public init(id: String, name: String, allocation: Int, isControl: Bool = false, configuration: JSONValue = .null) {
        self.id = id; self.name = name; self.allocation = allocation; self.isControl = isControl; self.configuration = configuration
    }

    enum CodingKeys: String, CodingKey, CaseIterable { case id, name, allocation, isControl = "is_control", configuration }

    /// Decodes strictly; `is_control` defaults to false, `configuration` to null.
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        name = try c.decode(String.self, forKey: .name)
        allocation = try c.decode(Int.self, forKey: .allocation)
        isControl = try c.decodeIfPresent(Bool.self, forKey: .isControl) ?? false
        configuration = try c.decodeIfPresent(JSONValue.self, forKey: .configuration) ?? .null
    }
}

/// An experiment: variants, targeting and exclusion rules.
public struct Experiment: Codable, Sendable, Equatable {
    /// The experiment key (`experiment_key` on the wire).
    public var key: String
    /// Only `ACTIVE` experiments assign; others answer 404.
    public var status: LifecycleStatus
    /// Variants in declared order (bucketing walks them in this order).
    public var variants: [Variant]
    /// Conditions a user's context must all meet; otherwise the answer is control with
    /// `assigned:false, reason:"targeting"`.
    public var targeting: [Condition]
    /// Users held out of the experiment (`reason:"holdout"`).
    public var holdoutUserIDs: [String]
    /// Experiments this one excludes: a user sticky-assigned to any of them gets
    /// `reason:"mutual_exclusion"`.
    public var mutuallyExclusiveWith: [String]

    /// Creates an experiment.
    public init(key: String, status: LifecycleStatus = .active, variants: [Variant], targeting: [Condition] = [],
                holdoutUserIDs: [String] = [], mutuallyExclusiveWith: [String] = []) {
        self.key = key; self.status = status; self.variants = variants; self.targeting = targeting
        self.holdoutUserIDs = holdoutUserIDs; self.mutuallyExclusiveWith = mutuallyExclusiveWith
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case key, status, variants, targeting, holdoutUserIDs = "holdout_user_ids", mutuallyExclusiveWith = "mutually_exclusive_with"
    }

    /// Decodes strictly; the rule lists default to empty.
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        key = try c.decode(String.self, forKey: .key)
        status = try c.decode(LifecycleStatus.self, forKey: .status)
        variants = try c.decode([Variant].self, forKey: .variants)
        targeting = try c.decodeIfPresent([Condition].self, forKey: .targeting) ?? []
        holdoutUserIDs = try c.decodeIfPresent([String].self, forKey: .holdoutUserIDs) ?? []
        mutuallyExclusiveWith = try c.decodeIfPresent([String].self, forKey: .mutuallyExclusiveWith) ?? []
    }

    /// The control variant: the first with `is_control`, else the first declared.
    public var controlVariant: Variant? { variants.first { $0.isControl } ?? variants.first }
}

/// A feature flag.
public struct Flag: Codable, Sendable, Equatable {
    /// The flag key (path component of the evaluate route).
    public var key: String
    /// A flag that is not `ACTIVE` answers `enabled:false, reason:"inactive"`.
    public var status: LifecycleStatus
    /// Rollout percentage 0...100 applied by md5-mod100 when no targeting rule matches.
    public var rolloutPercentage: Int
    /// Targeting rules tried in order against the context; the first match decides with its own percentage.
    public var rules: [TargetingRule]

    /// Creates a flag.
    public init(key: String, status: LifecycleStatus = .active, rolloutPercentage: Int, rules: [TargetingRule] = []) {
        self.key = key; self.status = status; self.rolloutPercentage = rolloutPercentage; self.rules = rules
    }

    enum CodingKeys: String, CodingKey, CaseIterable { case key, status, rolloutPercentage = "rollout_percentage", rules }

    /// Decodes strictly; `rules` defaults to empty.
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        key = try c.decode(String.self, forKey: .key)
        status = try c.decode(LifecycleStatus.self, forKey: .status)
        rolloutPercentage = try c.decode(Int.self, forKey: .rolloutPercentage)
        rules = try c.decodeIfPresent([TargetingRule].self, forKey: .rules) ?? []
    }
}

/// A flag targeting rule: all conditions must hold; then `percentage` (md5-mod100) decides.
public struct TargetingRule: Codable, Sendable, Equatable {
    /// Conditions, all of which must match.
    public var conditions: [Condition]
    /// Percentage 0...100 of matching users that get the flag enabled.
    public var percentage: Int

    /// Creates a rule.
    public init(conditions: [Condition], percentage: Int = 100) { self.conditions = conditions; self.percentage = percentage }

    enum CodingKeys: String, CodingKey, CaseIterable { case conditions, percentage }

    /// Decodes strictly; `percentage` defaults to 100.
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        conditions = try c.decode([Condition].self, forKey: .conditions)
        percentage = try c.decodeIfPresent(Int.self, forKey: .percentage) ?? 100
    }
}

/// One attribute test: `attribute` `operator` `value`.
///
/// `attribute` names a context member; the name `user_id` means the request's user id (so a
/// user-id list is `{"attribute":"user_id","operator":"in","value":[...]}`). A missing attribute
/// never matches.
public struct Condition: Codable, Sendable, Equatable {
    /// The comparison operators.
    public enum Operator: String, Codable, Sendable, CaseIterable {
        /// Equal values, as the backend's rules engine reads them (`Condition.valuesEqual`: a
        /// string against a number or boolean is read as that type).
        case eq
        /// Not `eq` (a missing attribute still does not match).
        case ne
        /// Greater than, both sides read as numbers as the backend reads them (`float()`: a
        /// numeric string is its number, a boolean 1 or 0); false when either is no number.
        case gt
        /// Less than, read as `gt` is.
        case lt
        /// String contains the substring, or array contains the value.
        case contains
        /// The attribute is `eq` to one of the values in the `value` array.
        case `in`
    }

    /// The context member name (or `user_id`).
    public var attribute: String
    /// The operator.
    public var op: Operator
    /// The operand.
    public var value: JSONValue

    /// Creates a condition.
    public init(attribute: String, op: Operator, value: JSONValue) { self.attribute = attribute; self.op = op; self.value = value }

    enum CodingKeys: String, CodingKey, CaseIterable { case attribute, op = "operator", value }

    /// Decodes strictly.
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        attribute = try c.decode(String.self, forKey: .attribute)
        op = try c.decode(Operator.self, forKey: .op)
        value = try c.decode(JSONValue.self, forKey: .value)
    }

    /// Whether the condition holds for `userID` and `context`.
    public func matches(userID: String, context: [String: JSONValue]) -> Bool {
        matches(userID: userID, context: TargetingContext(context))
    }

    /// Whether the condition holds for `userID` and `context`, whose attribute names are told
    /// apart scalar by scalar (`TargetingContext`).
    func matches(userID: String, context: TargetingContext) -> Bool {
        let actual: ExactJSON
        if attribute == "user_id" { actual = .value(.string(userID)) } else if let v = context.value(attribute) { actual = v } else { return false }
        switch op {
        case .eq: return Self.valuesEqual(actual, value)
        case .ne: return !Self.valuesEqual(actual, value)
        case .gt, .lt:
            // As the backend's rules engine: `float(actual) > float(expected)`, false where either
            // is no number (upstream `apply_operator`): "10" > 9 holds, "abc" > "abb" does not.
            guard case .value(let a) = actual, let x = Self.pythonFloat(a), let y = Self.pythonFloat(value) else { return false }
            return op == .gt ? x > y : x < y
        case .contains:
            switch (actual, value) {
            case (.value(.string(let a)), .string(let b)): return a.containsExactly(b)
            case (.array(let items), _): return items.contains { $0.equals(value) }
            default: return false
            }
        case .in:
            return value.arrayValue?.contains { Self.valuesEqual(actual, $0) } ?? false
        }
    }

    /// Equality as the backend's rules engine decides it for `eq`, `ne` and `in` (upstream
    /// `backend/app/core/rules_engine.py`, `_values_equal`; the published ruleset vectors, e.g.
    /// `eq-str-2#20`: `{"a": 5}` matches `eq "5"`): Python's `==` first (a boolean equals the
    /// number 1 or 0; names and strings compared scalar by scalar), then, when exactly one side is
    /// a string and the other a boolean or a number, the string read as that type: `true`, `1`,
    /// `yes` / `false`, `0`, `no` (stripped, any case) for a boolean, Python's `float()` for a
    /// number. Two strings, or two typed values, are never coerced.
    static func valuesEqual(_ actual: ExactJSON, _ expected: JSONValue) -> Bool {
        if actual.equals(expected, leaf: pythonEqual) { return true }
        guard case .value(let a) = actual else { return false }
        switch (a, expected) {
        case (.string(let text), .bool(let b)), (.bool(let b), .string(let text)): return PythonText.bool(text) == b
        case (.string(let text), .number(let n)), (.number(let n), .string(let text)): return PythonText.float(text).map { $0 == n } ?? false
        default: return false
        }
    }

    /// Python's `float(v)` of a JSON leaf: a number itself, a boolean 1 or 0, a string by
    /// `PythonText.float`; `nil` where Python raises (null, arrays, objects, other text).
    static func pythonFloat(_ v: JSONValue) -> Double? {
        switch v {
        case .number(let n): return n
        case .bool(let b): return b ? 1 : 0
        case .string(let s): return PythonText.float(s)
        default: return nil
        }
    }

    /// Python's `==` on two JSON leaves: a boolean equals the number 1 or 0 (`True == 1`).
    static func pythonEqual(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.bool(let x), .number(let y)): return (x ? 1 : 0) == y
        case (.number(let x), .bool(let y)): return x == (y ? 1 : 0)
        default: return a == b
        }
    }
}

/// A request's targeting context (its `context` object of attributes), with attribute names
/// told apart scalar by scalar, as the backend's Python dict keeps them (CONTRACT.md section 4:
/// identity is exact): `"k\u0301"` and `"\u1e31"` are two attributes, which a `[String: JSONValue]`
/// merges into one (a fifty-third outside tester, D: a rule on one spelling read the other's value).
struct TargetingContext: Sendable {
    /// The members as `JSONValue` reads them (canonically equivalent names merged).
    let members: [String: JSONValue]
    /// Every member by its exact name, when some names were merged in `members` (at any depth);
    /// else `nil`.
    let exact: [ExactKey: ExactJSON]?

    /// A context from parsed members and, when the request's text had names that differ only as
    /// canonically equivalent spellings, its exact reading (`ExactJSON`; other values ignored).
    init(_ members: [String: JSONValue], exact: ExactJSON? = nil) {
        self.members = members
        if let exact, exact.hasEquivalentNames, case .object(let list) = exact {
            self.exact = Dictionary(list.map { (ExactKey($0.name), $0.value) }, uniquingKeysWith: { _, last in last })
        } else {
            self.exact = nil
        }
    }

    /// The value of the attribute named exactly `name`, or `nil` when there is none.
    func value(_ name: String) -> ExactJSON? {
        if let exact { return exact[ExactKey(name)] }
        return members.exactly(name).map(ExactJSON.init)
    }
}

/// The rate limit: a fixed window of `windowSeconds` per (client, exact path), with the budget
/// chosen by path as upstream's middleware does (CONTRACT.md section 2, rate limit details):
/// `POST /api/v1/tracking/assign/batch` gets `assignBatchLimit`; paths under the SDK prefixes
/// (`/api/v1/tracking/`, `/api/v1/feature-flags/evaluate/`, `/api/v1/feature-flags/user/`,
/// `/api/v1/sdk/`) get `limit`; every other path gets `otherLimit`.
public struct RateLimit: Codable, Sendable, Equatable {
    /// Requests allowed per window on the SDK prefixes (default 6000).
    public var limit: Int
    /// Window length in seconds (default 60); also the `Retry-After` of a natural 429.
    public var windowSeconds: Int
    /// Requests allowed per window on paths outside the SDK prefixes (default 300).
    public var otherLimit: Int
    /// Requests allowed per window on `/api/v1/tracking/assign/batch` (default 60).
    public var assignBatchLimit: Int

    /// The SDK path prefixes that get ``limit`` (upstream `SDK_PATH_PREFIXES`).
    public static let sdkPathPrefixes = ["/api/v1/tracking/", "/api/v1/feature-flags/evaluate/", "/api/v1/feature-flags/user/", "/api/v1/sdk/"]
    /// `sdkPathPrefixes` and the batch-assign path as UTF-8 bytes (compared byte by byte).
    private static let sdkPathPrefixBytes = sdkPathPrefixes.map { Array($0.utf8) }
    private static let assignBatchPathBytes = Array("/api/v1/tracking/assign/batch".utf8)

    /// Creates a limit (defaults 6000 / 300 / 60 per 60 s, CONTRACT.md section 2).
    public init(limit: Int = 6000, windowSeconds: Int = 60, otherLimit: Int = 300, assignBatchLimit: Int = 60) {
        self.limit = limit; self.windowSeconds = windowSeconds; self.otherLimit = otherLimit; self.assignBatchLimit = assignBatchLimit
    }

    /// The budget for the raw request path `path`.
    public func limit(forPath path: String) -> Int {
        // Byte comparisons: the raw path is matched exactly, never by String equivalence.
        var path = path
        return path.withUTF8 { bytes in
            if bytes.elementsEqual(Self.assignBatchPathBytes) { return assignBatchLimit }
            if Self.sdkPathPrefixBytes.contains(where: { bytes.starts(with: $0) }) { return limit }
            return otherLimit
        }
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case limit, windowSeconds = "window_seconds", otherLimit = "other_limit", assignBatchLimit = "assign_batch_limit"
    }

    /// Decodes strictly; every field defaults.
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        limit = try c.decodeIfPresent(Int.self, forKey: .limit) ?? 6000
        windowSeconds = try c.decodeIfPresent(Int.self, forKey: .windowSeconds) ?? 60
        otherLimit = try c.decodeIfPresent(Int.self, forKey: .otherLimit) ?? 300
        assignBatchLimit = try c.decodeIfPresent(Int.self, forKey: .assignBatchLimit) ?? 60
    }
}

/// Rejects unknown object keys while decoding, with an error naming the key and the JSON path.
public enum StrictKeys {
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Throws `DecodingError.dataCorrupted` ("unknown key 'x'; expected one of: ...", the key's
    /// path in its `codingPath`) when
    /// the object being decoded has a key that `Keys` does not list.
    public static func check<Keys: CodingKey & CaseIterable>(_ decoder: Decoder, _: Keys.Type) throws {
        let c = try decoder.container(keyedBy: AnyKey.self)
        let allowed = Set(Keys.allCases.map(\.stringValue))
        for key in c.allKeys where !allowed.contains(key.stringValue) {
            // The path is the error's `codingPath`, which every reader prints (`at $.flags[0].rollout:`);
            // the text naming it too read it twice (a 73rd outside tester).
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: decoder.codingPath + [key],
                debugDescription: "unknown key '\(key.stringValue)'; expected one of: \(allowed.sorted().joined(separator: ", "))"))
        }
    }
}
