import Foundation
import ExperimentlyMock

/// The wire format of the driver protocol `experimently-driver/1` (Documentation/DriverProtocol.md):
/// JSON Lines between the harness (on the adapter's standard input) and an SDK adapter (on its
/// standard output), one JSON object per line, UTF-8, no line breaks inside a message.
///
/// Every request carries an `id` (a positive whole number, unique within the connection) and a
/// `type`; every reply carries the `id` it answers and either `result` (an object) or `error`
/// (a text). Replies may come in any order: `perform` requests run concurrently. Unknown fields
/// are ignored by both sides, so minor additions keep the version.
public enum DriverWire {
    /// The protocol and version string exchanged in `hello`.
    public static let version = "experimently-driver/1"

    /// Capabilities beyond the operations: the reference app runs over the adapter's client
    /// (`app`), the SDK reads the harness's clock (`virtual_clock`), `cancel` requests stop a running
    /// operation (`cancel`), `persisted` inspects the offline store (`offline_store`), `hashUser`
    /// is exposed (`hash`).
    public static let capabilityNames = ["app", "virtual_clock", "cancel", "offline_store", "hash"]
}

/// A request from the harness to an adapter (one JSON Lines message).
public struct DriverRequest: Sendable, Equatable, Codable {
    /// What is asked.
    public enum Kind: String, Sendable, Codable, CaseIterable {
        case hello, createClient = "create_client", perform, persisted, clock, cancel, closeClient = "close_client", shutdown
    }

    /// The request's id; the reply carries it.
    public var id: Int
    /// What is asked.
    public var type: Kind
    /// `hello`: the protocol version the harness speaks (`experimently-driver/1`).
    public var `protocol`: String?
    /// `create_client`, `perform`, `persisted`, `close_client`: the client's id (unique in the connection).
    public var client: String?
    /// `create_client`, `clock`: the scenario run the client belongs to; its clients share one
    /// clock and their store names.
    public var scope: String?
    /// `create_client`: the client's settings.
    public var settings: DriverClientSettings?
    /// `create_client`: the offline store's id; clients naming the same id share the persisted
    /// values (a relaunch); absent: the client persists nothing.
    public var store: String?
    /// `create_client`, `clock`: the time on the scope's clock, seconds since 1970.
    public var now: Double?
    /// `perform`: the operation (`{"name": ..., arguments...}`, see `DriverOperation`).
    public var operation: JSONValue?
    /// `persisted`: `flag` or `experiment`.
    public var kind: String?
    /// `persisted`: the user id.
    public var user: String?
    /// `persisted`: the flag or experiment key.
    public var key: String?
    /// `cancel`: the id of the `perform` request to cancel.
    public var target: Int?

    /// Creates a request of `type` with `id`; set the fields the type uses.
    public init(id: Int, type: Kind) {
        self.id = id
        self.type = type
    }
}

/// The settings of `create_client` (CONTRACT.md section 3, `SdkConfig`); seconds.
public struct DriverClientSettings: Sendable, Equatable, Codable {
    /// The API origin (the mock's listener for this client).
    public var baseURL: String
    /// The API key.
    public var apiKey: String
    /// Per-request deadline, seconds.
    public var timeout: Double
    /// Entries per in-memory cache.
    public var cacheSize: Int
    /// Cache lifetime, seconds.
    public var cacheTTL: Double
    /// Whether successes are persisted and served on failure.
    public var offlineFallback: Bool

    enum CodingKeys: String, CodingKey {
        case baseURL = "base_url", apiKey = "api_key", timeout, cacheSize = "cache_size", cacheTTL = "cache_ttl"
        case offlineFallback = "offline_fallback"
    }

    /// The wire form of `settings` with `baseURL` as the origin.
    public init(_ settings: ClientSettings, baseURL: String) {
        self.baseURL = baseURL
        apiKey = settings.apiKey
        timeout = settings.timeout
        cacheSize = settings.cacheSize
        cacheTTL = settings.cacheTTL
        offlineFallback = settings.offlineFallback
    }

    /// The harness's form of these settings.
    public var clientSettings: ClientSettings {
        var s = ClientSettings()
        s.baseURL = baseURL
        s.apiKey = apiKey
        s.timeout = timeout
        s.cacheSize = cacheSize
        s.cacheTTL = cacheTTL
        s.offlineFallback = offlineFallback
        return s
    }
}

/// A reply from an adapter: the `id` of the request it answers, then `result` or `error`.
public struct DriverReply: Sendable, Equatable, Codable {
    /// The id of the request answered.
    public var id: Int
    /// The answer when the request was carried out (an object; `{}` when there is nothing to say).
    public var result: JSONValue?
    /// Why the request could not be carried out (a bad request, an unknown client). An SDK error
    /// is not this: it is the `perform` result `{"error": kind, ...}`.
    public var error: String?

    /// Creates a reply.
    public init(id: Int, result: JSONValue? = nil, error: String? = nil) {
        self.id = id
        self.result = result
        self.error = error
    }
}

/// The `hello` result: which SDK, which version, what it can do.
public struct DriverHello: Sendable, Equatable {
    /// The protocol version the adapter speaks; must equal `DriverWire.version`.
    public var protocolVersion: String
    /// The SDK's name as the verdict reports it.
    public var sdkName: String
    /// The SDK's version.
    public var sdkVersion: String
    /// Operation names and `DriverWire.capabilityNames` the adapter supports.
    public var capabilities: Set<String>

    /// The JSON form: `{"protocol", "sdk": {"name", "version"}, "capabilities": [...]}`.
    public var json: JSONValue {
        .object(["protocol": .string(protocolVersion),
                 "sdk": .object(["name": .string(sdkName), "version": .string(sdkVersion)]),
                 "capabilities": .array(capabilities.sorted().map(JSONValue.string))])
    }

    /// Creates a hello result.
    public init(protocolVersion: String = DriverWire.version, sdkName: String, sdkVersion: String, capabilities: Set<String>) {
        self.protocolVersion = protocolVersion
        self.sdkName = sdkName
        self.sdkVersion = sdkVersion
        self.capabilities = capabilities
    }

    /// Reads a `hello` result.
    ///
    /// - Throws: `DriverProtocolError` naming the missing or mistyped field.
    public init(json: JSONValue) throws {
        guard case .string(let version)? = json["protocol"] else { throw DriverProtocolError("hello: no \"protocol\" text in \(json.jsonText)") }
        guard case .string(let name)? = json["sdk"]?["name"] else { throw DriverProtocolError("hello: no \"sdk.name\" text in \(json.jsonText)") }
        guard case .array(let caps)? = json["capabilities"] else { throw DriverProtocolError("hello: no \"capabilities\" array in \(json.jsonText)") }
        protocolVersion = version
        sdkName = name
        sdkVersion = json["sdk"]?["version"]?.stringValue ?? ""
        capabilities = Set(caps.compactMap(\.stringValue))
    }
}

/// A message that breaks the driver protocol: a line that is not a JSON object, a reply to no
/// request, a missing field. The text quotes what was received.
public struct DriverProtocolError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What was wrong, quoting the offending line or field.
    public let description: String
    /// Creates an error.
    public init(_ description: String) { self.description = description }
}

/// Turns messages into lines of the protocol: compact JSON, keys sorted, one `\n` at the end.
public struct DriverMessageEncoder: Sendable {
    /// Creates an encoder.
    public init() {}

    /// The line (with its `\n`) for `value`.
    ///
    /// - Throws: `EncodingError` when the value cannot be encoded (a non-finite number).
    public func line<T: Encodable>(_ value: T) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = try encoder.encode(value)
        data.append(0x0A)
        return data
    }
}

/// Reads lines of the protocol back into messages.
public struct DriverMessageDecoder: Sendable {
    /// Creates a decoder.
    public init() {}

    /// Decodes one line (without its `\n`) as a request.
    ///
    /// - Throws: `DriverProtocolError` quoting the line when it is not a request.
    public func request(_ line: Data) throws -> DriverRequest {
        do { return try JSONDecoder().decode(DriverRequest.self, from: line) }
        catch { throw DriverProtocolError("not a driver request (\(MockBackendPort.describe(error))): \(Self.quote(line))") }
    }

    /// Decodes one line (without its `\n`) as a reply.
    ///
    /// - Throws: `DriverProtocolError` quoting the line when it is not a reply (no `id`, neither
    ///   `result` nor `error`).
    public func reply(_ line: Data) throws -> DriverReply {
        let reply: DriverReply
        do { reply = try JSONDecoder().decode(DriverReply.self, from: line) }
        catch { throw DriverProtocolError("not a driver reply (\(MockBackendPort.describe(error))): \(Self.quote(line))") }
        guard reply.result != nil || reply.error != nil else {
            throw DriverProtocolError("a driver reply needs \"result\" or \"error\": \(Self.quote(line))")
        }
        return reply
    }

    /// The line as text for error messages, cut at 300 characters.
    static func quote(_ line: Data) -> String {
        let text = String(decoding: line, as: UTF8.self)
        return text.count > 300 ? String(text.prefix(300)) + "…" : text
    }
}

/// The wire form of an `SDKOperation`: `{"name": "evaluateFlag", "flag": ..., "user": {"id", "attributes"}}`
/// and so on for every operation of CONTRACT.md section 3 (Documentation/DriverProtocol.md lists them).
public enum DriverOperation {
    /// The JSON of `operation`.
    public static func json(_ operation: SDKOperation) -> JSONValue {
        var o: [String: JSONValue] = ["name": .string(operation.name)]
        switch operation {
        case .evaluateFlag(let flag, let user): o["flag"] = .string(flag); o["user"] = json(user)
        case .getAssignment(let experiment, let user): o["experiment"] = .string(experiment); o["user"] = json(user)
        case .track(let e), .trackWithStatus(let e): o["event"] = json(e)
        case .trackBatch(let events): o["events"] = .array(events.map(json))
        case .getAssignments(let user), .getEvaluatedFlags(let user): o["user_id"] = .string(user)
        case .hashUser(let user, let key): o["user_id"] = .string(user); o["key"] = .string(key)
        case .clearCache, .clearOfflineCache, .close: break
        }
        return .object(o)
    }

    /// The operation written as `json`.
    ///
    /// - Throws: `DriverProtocolError` naming the missing or mistyped field.
    public static func operation(_ json: JSONValue) throws -> SDKOperation {
        func text(_ key: String, in v: JSONValue? = nil) throws -> String {
            guard case .string(let s)? = (v ?? json)[key] else { throw DriverProtocolError("operation \(json.jsonText): no \"\(key)\" text") }
            return s
        }
        func user() throws -> UserSpec {
            guard let u = json["user"] else { throw DriverProtocolError("operation \(json.jsonText): no \"user\"") }
            return UserSpec(id: try text("id", in: u), attributes: u["attributes"].flatMap { $0 == .null ? nil : $0 })
        }
        func event(_ e: JSONValue) throws -> EventSpec {
            func number(_ k: String) -> Double? { if case .number(let n)? = e[k] { return n } else { return nil } }
            return EventSpec(userId: try text("user_id", in: e), eventName: try text("event_name", in: e),
                             eventType: e["event_type"]?.stringValue, experimentKey: e["experiment_key"]?.stringValue,
                             featureFlagKey: e["feature_flag_key"]?.stringValue, value: number("value"),
                             properties: e["properties"].flatMap { $0 == .null ? nil : $0 }, timestamp: number("timestamp"))
        }
        switch try text("name") {
        case "evaluateFlag": return .evaluateFlag(flag: try text("flag"), user: try user())
        case "getAssignment": return .getAssignment(experiment: try text("experiment"), user: try user())
        case "track", "trackWithStatus":
            guard let e = json["event"] else { throw DriverProtocolError("operation \(json.jsonText): no \"event\"") }
            return try text("name") == "track" ? .track(try event(e)) : .trackWithStatus(try event(e))
        case "trackBatch":
            guard case .array(let items)? = json["events"] else { throw DriverProtocolError("operation \(json.jsonText): no \"events\" array") }
            return .trackBatch(try items.map(event))
        case "clearCache": return .clearCache
        case "clearOfflineCache": return .clearOfflineCache
        case "close": return .close
        case "getAssignments": return .getAssignments(user: try text("user_id"))
        case "getEvaluatedFlags": return .getEvaluatedFlags(user: try text("user_id"))
        case "hashUser": return .hashUser(user: try text("user_id"), key: try text("key"))
        case let other: throw DriverProtocolError("unknown operation '\(other)' (known: \(SDKOperation.allNames.joined(separator: ", ")))")
        }
    }

    static func json(_ u: UserSpec) -> JSONValue {
        var o: [String: JSONValue] = ["id": .string(u.id)]
        if let a = u.attributes { o["attributes"] = a }
        return .object(o)
    }

    static func json(_ e: EventSpec) -> JSONValue {
        var o: [String: JSONValue] = ["user_id": .string(e.userId), "event_name": .string(e.eventName)]
        if let v = e.eventType { o["event_type"] = .string(v) }
        if let v = e.experimentKey { o["experiment_key"] = .string(v) }
        if let v = e.featureFlagKey { o["feature_flag_key"] = .string(v) }
        if let v = e.value { o["value"] = .number(v) }
        if let v = e.properties { o["properties"] = v }
        if let v = e.timestamp { o["timestamp"] = .number(v) }
        return .object(o)
    }

    /// Reads a `perform` result (`{"value": ...}` or `{"error": kind, "status", "code", "message"}`).
    ///
    /// - Throws: `DriverProtocolError` when it is neither.
    public static func outcome(_ json: JSONValue) throws -> OperationOutcome {
        if case .string(let kind)? = json["error"] {
            func int(_ k: String) -> Int? { if case .number(let n)? = json[k] { return Int(n) } else { return nil } }
            return .error(kind: kind, status: int("status"), code: int("code"), message: json["message"]?.stringValue ?? "")
        }
        guard case .object(let o) = json, let value = o["value"] else {
            throw DriverProtocolError("a perform result needs \"value\" or \"error\": \(json.jsonText)")
        }
        return .value(value)
    }
}
