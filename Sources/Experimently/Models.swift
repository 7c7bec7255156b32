import Foundation

// MARK: - SdkConfig

/// Configuration of an `ExperimentationClient` (CONTRACT.md section 3).
public struct SdkConfig: Sendable {
    /// Origin of the Experimently API, e.g. `"http://localhost:8000"`; a trailing `/` is tolerated
    /// and the SDK appends `/api/v1/...` itself.
    public let baseURL: String
    /// The API key, sent as the `X-API-Key` header on every request.
    public let apiKey: String
    /// Per-request deadline in seconds, enforced by the SDK itself (CONTRACT.md section 5.6).
    public let timeout: TimeInterval
    /// Maximum number of entries in each in-memory cache (flags, assignments), counted over every
    /// user; beyond it the oldest insertion is evicted. 0 or less is no limit (as `NSCache`).
    public let cacheSize: Int
    /// Lifetime of a cached evaluation or assignment in seconds: an entry is fresh while
    /// now < stored + cacheTTL, so at exactly stored + cacheTTL it has expired (CONTRACT.md section 4).
    public let cacheTTL: TimeInterval
    /// When `true`, every success is also persisted in the `OfflineStore` and served when a later
    /// request for the same user and key fails for any reason but 404.
    public let enableOfflineFallback: Bool

    /// Creates a configuration.
    ///
    /// - Parameters:
    ///   - baseURL: API origin; default `"http://localhost:8000"`.
    ///   - apiKey: API key sent as `X-API-Key`.
    ///   - timeout: per-request deadline in seconds; default 10.
    ///   - cacheSize: entries per in-memory cache; default 1000; 0 or less is no limit.
    ///   - cacheTTL: cache lifetime in seconds; default 300.
    ///   - enableOfflineFallback: persist successes and serve them on failure; default `true`.
    public init(
        baseURL: String = "http://localhost:8000",
        apiKey: String,
        timeout: TimeInterval = 10.0,
        cacheSize: Int = 1000,
        cacheTTL: TimeInterval = 300,
        enableOfflineFallback: Bool = true
    ) {
        self.baseURL = baseURL
        self.apiKey = apiKey
        self.timeout = timeout
        self.cacheSize = cacheSize
        self.cacheTTL = cacheTTL
        self.enableOfflineFallback = enableOfflineFallback
    }

    /// Source-compatibility initializer of the upstream SDK; `enableLocalEval` is ignored because
    /// the server evaluates every flag.
    @available(*, deprecated, message: "Flags are evaluated by the server; enableLocalEval is ignored.")
    public init(
        baseURL: String = "http://localhost:8000",
        apiKey: String,
        timeout: TimeInterval = 10.0,
        cacheSize: Int = 1000,
        cacheTTL: TimeInterval = 300,
        enableLocalEval: Bool
    ) {
        self.init(baseURL: baseURL, apiKey: apiKey, timeout: timeout, cacheSize: cacheSize, cacheTTL: cacheTTL)
    }
}

// MARK: - User

/// A user to evaluate flags and assign experiments for.
public struct User: Codable, Sendable {
    /// The user's unique id (sent as `user_id`).
    public let id: String
    /// Attributes sent as the assignment `context` (omitted when `nil`, `{}` when empty).
    public let attributes: [String: AnyCodable]?

    /// Creates a user.
    ///
    /// - Parameters:
    ///   - id: the user id.
    ///   - attributes: JSON-compatible values (`String`, `Int`, `Double`, `Bool`, arrays, objects).
    public init(id: String, attributes: [String: Any]? = nil) {
        self.id = id
        self.attributes = attributes.map { $0.mapValues { AnyCodable($0) } }
    }
}

// MARK: - Assignment

/// A user's experiment assignment, as answered by `POST /api/v1/tracking/assign`.
public struct Assignment: Codable, @unchecked Sendable {
    // @unchecked Sendable: `configuration` holds immutable JSON values (strings, numbers, bools,
    // arrays, dictionaries, NSNull) decoded from the wire; nothing mutates them after init.

    /// The experiment's key.
    public let experimentKey: String
    /// The user id the assignment is for.
    public let userId: String
    /// The variant's id, when the server sent one.
    public let variantId: String?
    /// The variant's name, e.g. `"control"` or `"treatment"`.
    public let variantName: String
    /// `true` when the variant is the experiment's control.
    public let isControl: Bool
    /// The variant's configuration object; `nil` when absent, `null` or not a JSON object.
    public let configuration: [String: Any]?
    /// `false` when the server answered the control variant because the user is not eligible
    /// (targeting, holdout, mutual exclusion): such an answer is returned and cached but never
    /// fanned out to (CONTRACT.md section 5.4). Defaults to `true`.
    public let assigned: Bool

    /// Source-compatibility alias for `variantName`.
    @available(*, deprecated, renamed: "variantName")
    public var variantKey: String { variantName }

    /// Creates an enrolled assignment (`assigned` is `true`), with upstream's parameters.
    ///
    /// A separate initializer, not a default of the one below, so that the unapplied reference
    /// `Assignment.init(experimentKey:userId:variantId:variantName:isControl:configuration:)`
    /// written against upstream still names one (CONTRACT.md section 3: source compatibility).
    public init(
        experimentKey: String,
        userId: String,
        variantId: String?,
        variantName: String,
        isControl: Bool,
        configuration: [String: Any]? = nil
    ) {
        self.init(experimentKey: experimentKey, userId: userId, variantId: variantId, variantName: variantName,
                  isControl: isControl, configuration: configuration, assigned: true)
    }

    /// Creates an assignment, saying whether the user is enrolled.
    ///
    /// - Parameters:
    ///   - experimentKey, userId, variantId, variantName, isControl, configuration: the answer's
    ///     fields (CONTRACT.md section 1).
    ///   - assigned: `false` for a control answer to an ineligible user (targeting, holdout,
    ///     mutual exclusion), never fanned out to (CONTRACT.md section 5.4).
    public init(
        experimentKey: String,
        userId: String,
        variantId: String?,
        variantName: String,
        isControl: Bool,
        configuration: [String: Any]?,
        assigned: Bool
    ) {
        self.experimentKey = experimentKey
        self.userId = userId
        self.variantId = variantId
        self.variantName = variantName
        self.isControl = isControl
        self.configuration = configuration
        self.assigned = assigned
    }

    enum CodingKeys: String, CodingKey {
        case experimentKey = "experiment_key"
        case userId = "user_id"
        case variantId = "variant_id"
        case variantName = "variant_name"
        case isControl = "is_control"
        case configuration
        case assigned
    }

    /// Decodes the wire shape; missing `user_id`, `is_control` and `assigned` default to `""`,
    /// `false` and `true`.
    ///
    /// - Throws: `DecodingError` when `experiment_key` or `variant_name` is missing or not a
    ///   string, or `is_control` or `assigned` is present and not a boolean (an `"assigned": "false"`
    ///   read as enrolled would be fanned out to: CONTRACT.md section 5, defect 4).
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        experimentKey = try c.decode(String.self, forKey: .experimentKey)
        userId = try c.decodeIfPresent(String.self, forKey: .userId) ?? ""
        variantId = try? c.decodeIfPresent(String.self, forKey: .variantId)
        variantName = try c.decode(String.self, forKey: .variantName)
        isControl = try c.decodeIfPresent(Bool.self, forKey: .isControl) ?? false
        configuration = JSONObject.object(try? c.decodeIfPresent(AnyCodable.self, forKey: .configuration))
        assigned = try c.decodeIfPresent(Bool.self, forKey: .assigned) ?? true
    }

    /// Encodes the wire shape (used by the offline store).
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(experimentKey, forKey: .experimentKey)
        try c.encode(userId, forKey: .userId)
        try c.encodeIfPresent(variantId, forKey: .variantId)
        try c.encode(variantName, forKey: .variantName)
        try c.encode(isControl, forKey: .isControl)
        try c.encodeIfPresent(configuration.map(AnyCodable.init), forKey: .configuration)
        try c.encode(assigned, forKey: .assigned)
    }
}

// MARK: - EvalResult

/// A flag evaluation, as answered by `GET /api/v1/feature-flags/evaluate/{key}`.
public struct EvalResult: Codable, @unchecked Sendable {
    // @unchecked Sendable: `config` holds immutable JSON values decoded from the wire.

    /// The flag key.
    public let key: String
    /// Whether the flag is on for the user (the server decides).
    public let enabled: Bool
    /// The flag's config; `nil` when absent, `null` or not a JSON object.
    public let config: [String: Any]?

    /// Creates an evaluation result.
    public init(key: String, enabled: Bool, config: [String: Any]? = nil) {
        self.key = key
        self.enabled = enabled
        self.config = config
    }

    enum CodingKeys: String, CodingKey { case key, enabled, config }

    /// Decodes the wire shape; a missing `key` is `""` and a missing `enabled` is `false`.
    ///
    /// - Throws: `DecodingError` when the payload is not a JSON object or a field has the wrong type.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        key = try c.decodeIfPresent(String.self, forKey: .key) ?? ""
        enabled = try c.decodeIfPresent(Bool.self, forKey: .enabled) ?? false
        config = JSONObject.object(try? c.decodeIfPresent(AnyCodable.self, forKey: .config))
    }

    /// Encodes the wire shape (used by the offline store).
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(key, forKey: .key)
        try c.encode(enabled, forKey: .enabled)
        try c.encodeIfPresent(config.map(AnyCodable.init), forKey: .config)
    }
}

enum JSONObject {
    /// The dictionary inside `value` when it is a JSON object, else `nil`.
    static func object(_ value: AnyCodable?) -> [String: Any]? {
        value?.value as? [String: Any]
    }
}

// MARK: - TrackEvent

/// An analytics event, encoded as the body of `POST /api/v1/tracking/track` (CONTRACT.md section 1).
///
/// `event_type` is always sent (`eventType ?? eventName`); `experiment_key`, `feature_flag_key`,
/// `value`, `metadata` (= `properties`) and `timestamp` (ISO-8601 UTC with milliseconds and `Z`)
/// only when set.
public struct TrackEvent: Codable, Sendable {
    /// The user who did it.
    public let userId: String
    /// The event name, e.g. `"purchase"`; experiment metrics match on it.
    public let eventName: String
    /// The event type; `eventName` on the wire when `nil`.
    public let eventType: String?
    /// The experiment the event is attributed to.
    public let experimentKey: String?
    /// The flag the event is attributed to.
    public let featureFlagKey: String?
    /// A numeric value (revenue, duration, ...).
    public let value: Double?
    /// Extra properties, sent as `metadata`.
    public let properties: [String: AnyCodable]?
    /// When it happened; the server stamps the event when `nil`.
    public let timestamp: Date?

    /// Creates an event.
    public init(
        userId: String,
        eventName: String,
        properties: [String: Any]? = nil,
        experimentKey: String? = nil,
        featureFlagKey: String? = nil,
        value: Double? = nil,
        eventType: String? = nil,
        timestamp: Date? = nil
    ) {
        self.userId = userId
        self.eventName = eventName
        self.eventType = eventType
        self.experimentKey = experimentKey
        self.featureFlagKey = featureFlagKey
        self.value = value
        self.properties = properties.map { $0.mapValues { AnyCodable($0) } }
        self.timestamp = timestamp
    }

    private init(copying other: TrackEvent, experimentKey: String?, featureFlagKey: String?) {
        userId = other.userId
        eventName = other.eventName
        eventType = other.eventType
        value = other.value
        properties = other.properties
        timestamp = other.timestamp
        self.experimentKey = experimentKey
        self.featureFlagKey = featureFlagKey
    }

    /// `true` when the event names an experiment or a flag (it then goes to `/track`, not fan-out).
    public var hasKey: Bool { experimentKey != nil || featureFlagKey != nil }

    /// A copy attributed to exactly the given experiment and/or flag (the other keys cleared).
    public func attributed(experimentKey: String? = nil, featureFlagKey: String? = nil) -> TrackEvent {
        TrackEvent(copying: self, experimentKey: experimentKey, featureFlagKey: featureFlagKey)
    }

    enum CodingKeys: String, CodingKey {
        case eventType = "event_type"
        case eventName = "event_name"
        case userId = "user_id"
        case experimentKey = "experiment_key"
        case featureFlagKey = "feature_flag_key"
        case value
        case properties = "metadata"
        case timestamp
    }

    /// Decodes the wire shape.
    ///
    /// - Throws: `DecodingError` when `user_id` is missing or a field has the wrong type.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        eventType = try c.decodeIfPresent(String.self, forKey: .eventType)
        eventName = try c.decodeIfPresent(String.self, forKey: .eventName) ?? eventType ?? ""
        userId = try c.decode(String.self, forKey: .userId)
        experimentKey = try c.decodeIfPresent(String.self, forKey: .experimentKey)
        featureFlagKey = try c.decodeIfPresent(String.self, forKey: .featureFlagKey)
        value = try c.decodeIfPresent(Double.self, forKey: .value)
        properties = try c.decodeIfPresent([String: AnyCodable].self, forKey: .properties)
        timestamp = try c.decodeIfPresent(String.self, forKey: .timestamp).flatMap(ISO8601Millis.parse)
    }

    /// Encodes the wire shape of CONTRACT.md section 1.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(eventType ?? eventName, forKey: .eventType)
        try c.encode(eventName, forKey: .eventName)
        try c.encode(userId, forKey: .userId)
        try c.encodeIfPresent(experimentKey, forKey: .experimentKey)
        try c.encodeIfPresent(featureFlagKey, forKey: .featureFlagKey)
        try c.encodeIfPresent(value, forKey: .value)
        try c.encodeIfPresent(properties, forKey: .properties)
        try c.encodeIfPresent(timestamp.map(ISO8601Millis.format), forKey: .timestamp)
    }
}

// MARK: - AnyCodable

/// A JSON value of any shape: `NSNull`, `Bool`, `Int`, `Double`, `String`, `[Any]`, `[String: Any]`.
public struct AnyCodable: Codable, @unchecked Sendable {
    // @unchecked Sendable: holds immutable JSON values; callers hand over value types or
    // Foundation JSON objects and nothing mutates them afterwards.

    /// The wrapped value.
    public let value: Any

    /// Wraps a JSON-compatible value.
    public init(_ value: Any) {
        self.value = (value as? AnyCodable)?.value ?? value
    }

    /// Decodes any JSON value.
    ///
    /// - Throws: `DecodingError.dataCorrupted` for a value that is not JSON.
    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            value = NSNull()
        } else if let b = try? c.decode(Bool.self) {
            value = b
        } else if let i = try? c.decode(Int.self) {
            value = i
        } else if let d = try? c.decode(Double.self) {
            value = d
        } else if let s = try? c.decode(String.self) {
            value = s
        } else if let a = try? c.decode([AnyCodable].self) {
            value = a.map(\.value)
        } else if let o = try? c.decode([String: AnyCodable].self) {
            value = o.mapValues(\.value)
        } else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "AnyCodable: not a JSON value")
        }
    }

    /// Encodes the wrapped value.
    ///
    /// Numbers keep their kind: an `NSNumber` (what `JSONSerialization`, `NSDictionary` and
    /// `UserDefaults` give an app) holding 1 or 0 is a number, not `true`/`false`, and a boolean
    /// `NSNumber` is a boolean; every Swift integer width, `Float`, `Double` and `Decimal` is a JSON
    /// number (before, an `NSNumber` 1 was sent as `true`, and an `Int64` threw: an outside audit,
    /// A-7; CONTRACT.md section 1, the assign body's `context` is the user's attributes as given).
    ///
    /// - Throws: `EncodingError.invalidValue` when the value is not JSON-compatible.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        if type(of: value) is NSNumber.Type, let n = value as? NSNumber {
            try Self.encode(n, into: &c)
            return
        }
        switch value {
        case is NSNull: try c.encodeNil()
        case let b as Bool: try c.encode(b)
        case let i as Int: try c.encode(i)
        case let i as Int8: try c.encode(i)
        case let i as Int16: try c.encode(i)
        case let i as Int32: try c.encode(i)
        case let i as Int64: try c.encode(i)
        case let i as UInt: try c.encode(i)
        case let i as UInt8: try c.encode(i)
        case let i as UInt16: try c.encode(i)
        case let i as UInt32: try c.encode(i)
        case let i as UInt64: try c.encode(i)
        case let d as Double: try c.encode(d)
        case let f as Float: try c.encode(Double(f))
        case let d as Decimal: try c.encode(d)
        case let s as String: try c.encode(s)
        case let a as [Any]: try c.encode(a.map(AnyCodable.init))
        case let o as [String: Any]: try c.encode(o.mapValues(AnyCodable.init))
        default:
            throw EncodingError.invalidValue(value, .init(codingPath: encoder.codingPath,
                debugDescription: "AnyCodable: \(type(of: value)) is not a JSON value"))
        }
    }

    /// The class of a boolean `NSNumber` (`__NSCFBoolean` on Apple platforms and in
    /// swift-corelibs-foundation alike): `JSONSerialization` gives `true`/`false` as it.
    private static let booleanNumberClass: AnyClass = type(of: NSNumber(value: true))

    /// Encodes an `NSNumber` by its kind: a boolean, a signed or unsigned integer, or a double.
    private static func encode(_ n: NSNumber, into c: inout any SingleValueEncodingContainer) throws {
        if type(of: n) == booleanNumberClass { try c.encode(n.boolValue); return }
        switch String(cString: n.objCType) {
        case "c", "s", "i", "l", "q": try c.encode(n.int64Value)
        case "C", "S", "I", "L", "Q": try c.encode(n.uint64Value)
        default: try c.encode(n.doubleValue)
        }
    }
}

// MARK: - ExperimentationError

/// The errors `evaluateFlag` and `getAssignment` throw (CONTRACT.md sections 3 and 4).
public enum ExperimentationError: Error, LocalizedError, @unchecked Sendable {
    // @unchecked Sendable: the wrapped `Error`s are transport and decoding errors that are not
    // mutated after they are thrown.

    /// The configuration cannot be used (e.g. `baseURL` is not an http(s) origin), or a user's
    /// attributes hold a value that is not JSON (`getAssignment` cannot send them).
    case invalidConfig(String)
    /// The request failed in transport (connection, DNS, the SDK's own deadline: `URLError(.timedOut)`).
    case networkError(Error)
    /// A 2xx answer whose body could not be decoded.
    case decodingError(Error)
    /// The flag is unknown (HTTP 404); carries the flag key.
    case flagNotFound(String)
    /// The experiment is unknown or not ACTIVE (HTTP 404); carries the experiment key.
    case experimentNotFound(String)
    /// Any other non-2xx answer: the status code and the body as text.
    case serverError(Int, String)
    /// The calling task was cancelled, or the client was closed while the request was in flight.
    case cancelled

    /// A one-line description.
    public var errorDescription: String? {
        switch self {
        case .invalidConfig(let m): return "Invalid SDK configuration: \(m)"
        case .networkError(let e): return "Network error: \(e.localizedDescription)"
        case .decodingError(let e): return "Decoding error: \(e.localizedDescription)"
        case .flagNotFound(let k): return "Feature flag not found: '\(k)'"
        case .experimentNotFound(let k): return "Experiment not found or not active: '\(k)'"
        case .serverError(let code, let body): return "Server error \(code): \(body)"
        case .cancelled: return "Operation was cancelled"
        }
    }
}

/// Facts about this SDK build.
public enum ExperimentlySDKInfo {
    /// The SDK's semantic version.
    public static let version = "1.0.0"
}
