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
    /// is exposed (`hash`), `seed_store` writes entries into an offline store as an earlier SDK
    /// version left them (`seed_store`; a later addition to version 1: the harness sends it only
    /// to an adapter that declares it, so adapters written before it stay valid), `settle` answers
    /// once every running `perform` of a scope has reached its wait (joined a shared request, sent
    /// its own and waits for the answer): exact quiescence out of process (also a later, optional
    /// addition to version 1; Documentation/DriverProtocol.md, "settle").
    public static let capabilityNames = ["app", "virtual_clock", "cancel", "offline_store", "hash", "seed_store", "settle"]
}

/// A request from the harness to an adapter (one JSON Lines message).
public struct DriverRequest: Sendable, Equatable, Codable {
    /// What is asked.
    public enum Kind: String, Sendable, Codable, CaseIterable {
        case hello, createClient = "create_client", perform, persisted, clock, cancel, closeClient = "close_client", shutdown
        case seedStore = "seed_store"
        case settle
        /// Whether the adapter still reads and answers: sent only after it answered no
        /// `close_client` of a scenario in time (`ProcessSDKDriver.scenarioDidEnd`).
        case ping
    }

    /// The request's id; the reply carries it.
    public var id: Int
    /// What is asked.
    public var type: Kind
    /// `hello`: the protocol version the harness speaks (`experimently-driver/1`).
    public var `protocol`: String?
    /// `create_client`, `perform`, `persisted`, `close_client`: the client's id (unique in the connection).
    public var client: String?
    /// `create_client`, `clock`, `settle`: the scenario run the client belongs to; its clients share one
    /// clock and their store names.
    public var scope: String?
    /// `create_client`: the client's settings.
    public var settings: DriverClientSettings?
    /// `create_client`: the offline store's id; clients naming the same id share the persisted
    /// values (a relaunch); absent: the client persists nothing. `seed_store`: the store written.
    public var store: String?
    /// `seed_store`: the entries to write, `[{"kind", "user", "key", "value"}]` (see `DriverSeedEntry`).
    public var entries: JSONValue?
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
        // The name heads every report of the run: an empty one printed "sdk:  1" (a sixty-sixth
        // outside tester). A version, when given, is a text: a number was dropped silently.
        guard !name.isEmpty else { throw DriverProtocolError("hello: \"sdk.name\" is empty in \(json.jsonText) (name the SDK)") }
        // Nor one that shows nothing: white space, format and bidi controls alone (an eighty-seventh
        // outside tester, L3: three spaces, or U+202E U+200B, were taken as a name).
        guard name.unicodeScalars.contains(where: { !$0.properties.isWhitespace && $0.properties.generalCategory != .format && !$0.properties.isBidiControl }) else {
            throw DriverProtocolError("hello: \"sdk.name\" \(JSONValue.string(name).unambiguousJSONText) shows nothing (white space or invisible characters alone; name the SDK)")
        }
        if let v = json["sdk"]?["version"], v.stringValue == nil, v != .null {
            throw DriverProtocolError("hello: \"sdk.version\" is \(v.jsonText), not a text, in \(json.jsonText)")
        }
        guard case .array(let caps)? = json["capabilities"] else { throw DriverProtocolError("hello: no \"capabilities\" array in \(json.jsonText)") }
        // Every capability is a text: one that is not cannot be read as any (an outside tester's
        // adapter declared 5 and null beside its names, and nothing said so).
        if let i = caps.firstIndex(where: { $0.stringValue == nil }) {
            throw DriverProtocolError("hello: capabilities[\(i)] is \(caps[i].jsonText), not a text (capabilities are an array of texts)")
        }
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
        // A member stated twice is two answers in one: parsers keep the first or the last, so the
        // verdict would depend on which (an outside tester: `"variant_name"` twice passed,
        // judged on the first, where Python and JavaScript read the second). As in scenario
        // files and the SDK's request bodies, it is refused, naming where.
        if let duplicate = JSONDuplicateKey.first(inValid: line) {
            throw DriverProtocolError("a driver reply states a member twice (\(duplicate)): \(Self.quote(line))")
        }
        return reply
    }

    /// The `id` of a line that is a JSON object with a whole-number `id`, even when it is not a
    /// valid request (so an adapter can still answer it with an error); `nil` otherwise.
    public static func id(in line: Data) -> Int? {
        guard let value = try? JSONValue.parse(line).value, case .number(let n)? = value["id"],
              n == n.rounded(), abs(n) < 1e15 else { return nil }
        return Int(n)
    }

    /// The whole-number `id` member of the JSON object `line` is (also one written as a string of
    /// digits), read by scanning its top level only (nested values are skipped, strings
    /// respected), so a line too deep or too odd to decode still names the request it answers;
    /// `nil` when there is none.
    public static func topLevelID(in line: Data) -> Int? {
        let bytes = [UInt8](line)
        var i = 0
        var depth = 0
        var inString = false
        var keyStart: Int?
        var lastKey: ArraySlice<UInt8>?
        var afterColon = false
        while i < bytes.count {
            let b = bytes[i]
            if inString {
                if b == UInt8(ascii: "\\") { i += 2; continue }
                if b == UInt8(ascii: "\"") {
                    inString = false
                    if depth == 1, let start = keyStart, !afterColon { lastKey = bytes[start..<i] }
                    keyStart = nil
                }
                i += 1
                continue
            }
            switch b {
            case UInt8(ascii: "\""):
                inString = true
                if depth == 1 && !afterColon { keyStart = i + 1 }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 1 { afterColon = false }
            case UInt8(ascii: ":") where depth == 1:
                afterColon = true
                if lastKey.map({ Array($0) == Array("id".utf8) }) ?? false {
                    var j = i + 1
                    while j < bytes.count, bytes[j] == 0x20 || bytes[j] == 0x09 { j += 1 }
                    // An id written as a string of digits (`"id": "7"`) names its request too, so
                    // that request is refused at once rather than after its step limit (a
                    // sixtieth outside tester: a suite took 588 s at a 3 s limit).
                    let quoted = j < bytes.count && bytes[j] == UInt8(ascii: "\"")
                    if quoted { j += 1 }
                    var k = j
                    while k < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[k]) || (k == j && bytes[k] == UInt8(ascii: "-")) { k += 1 }
                    if quoted && !(k < bytes.count && bytes[k] == UInt8(ascii: "\"")) { return nil }
                    guard k > j, k - j < 16, let n = Int(String(decoding: bytes[j..<k], as: UTF8.self)) else { return nil }
                    return n
                }
            case UInt8(ascii: ",") where depth == 1:
                afterColon = false
                lastKey = nil
            default:
                break
            }
            i += 1
        }
        return nil
    }

    /// Why `line` does not decode as a reply, in a few words (for a refusal naming it).
    static func whyNotAReply(_ line: Data) -> String {
        // An `id` that is JSON but no whole number an `Int` holds (`1.5`, `1e23`) is named as such
        // (a sixty-sixth outside tester: Foundation's decoder called the line "not valid JSON").
        if case .object(let o)? = try? JSONValue.parse(line).value, let id = o["id"], case .number(let n) = id,
           n != n.rounded() || abs(n) > 9_007_199_254_740_992 {
            return "a value that is not Int at $.id: \(id.jsonText)"
        }
        do {
            let reply = try JSONDecoder().decode(DriverReply.self, from: line)
            if let duplicate = JSONDuplicateKey.first(inValid: line) { return "it states a member twice: \(duplicate)" }
            return reply.result == nil && reply.error == nil ? "no result or error" : "not readable"
        }
        catch { return MockBackendPort.describe(error) }
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
    ///   A result with both `value` and `error`, an `error` that is not a text, or a `status` or
    ///   `code` that is not a whole number (`-1001.9` is no URLError code, `"503"` no status) is
    ///   a protocol problem naming the field: read as either, it was judged on a value the
    ///   adapter did not send (an outside tester: `-1001.9` passed `code -1001`).
    public static func outcome(_ json: JSONValue) throws -> OperationOutcome {
        if let error = json["error"], error != .null {
            guard case .string(let kind) = error else {
                throw DriverProtocolError("a perform result's error at $.result.error is \(error.jsonText), not the error kind as a text: \(json.jsonText)")
            }
            if let value = json["value"], value != .null {
                throw DriverProtocolError("a perform result has both \"value\" and \"error\" (it is one or the other): \(json.jsonText)")
            }
            func int(_ k: String) throws -> Int? {
                switch json[k] {
                case nil, .null?: return nil
                case .number(let n)? where n == n.rounded() && abs(n) < 1e15: return Int(n)
                case let other?:
                    throw DriverProtocolError("a perform result's \(k) at $.result.\(k) is \(other.jsonText), not a whole number: \(json.jsonText)")
                }
            }
            return .error(kind: kind, status: try int("status"), code: try int("code"), message: json["message"]?.stringValue ?? "")
        }
        guard case .object(let o) = json, let value = o["value"] else {
            throw DriverProtocolError("a perform result needs \"value\" or \"error\": \(json.jsonText)")
        }
        return .value(value)
    }
}

/// One entry of a `seed_store` request: what an earlier version of the SDK persisted in its
/// offline store for (user, key), written into a store before the SDK under test reads it
/// (Documentation/DriverProtocol.md, `seed_store`; the scenario step `seed_store`,
/// Documentation/ScenarioFormat.md).
///
/// Wire form: `{"kind": "flag" | "experiment", "user": USER_ID, "key": FLAG_OR_EXPERIMENT_KEY,
/// "value": OBJECT}`. `value` is the persisted object in the shape of the backend's answer it was
/// made from (CONTRACT.md section 1): a flag `{"key", "enabled", "config"}`, an assignment
/// `{"experiment_key", "user_id", "variant_id", "variant_name", "is_control", "configuration",
/// "assigned"}`, possibly lacking fields an earlier version did not write (`assigned`, `config`).
/// The adapter stores it as its SDK's store would hold that object; the SDK then reads it with the
/// defaults it applies to an answer lacking those fields.
public struct DriverSeedEntry: Sendable, Equatable {
    /// `flag` or `experiment` (as in `persisted`).
    public var kind: String
    /// The user id (compared exactly, by Unicode scalars).
    public var user: String
    /// The flag or experiment key.
    public var key: String
    /// The persisted object, exactly as given.
    public var value: JSONValue

    /// Creates an entry.
    public init(kind: String, user: String, key: String, value: JSONValue) {
        self.kind = kind
        self.user = user
        self.key = key
        self.value = value
    }

    /// The wire form.
    public var json: JSONValue {
        .object(["kind": .string(kind), "user": .string(user), "key": .string(key), "value": value])
    }

    /// The store and the entries of a `seed_store` request, checked.
    ///
    /// - Throws: `DriverProtocolError` naming the JSON path of the first thing wrong (`$.store`,
    ///   `$.entries`, `$.entries[1].kind`, ...) and what was found there.
    public static func request(_ request: DriverRequest) throws -> (store: String, entries: [DriverSeedEntry]) {
        func wrong(_ path: String, _ expected: String, _ found: JSONValue?) -> DriverProtocolError {
            DriverProtocolError("seed_store: at \(path): expected \(expected), found \(found.map { Self.describe($0) } ?? "nothing")")
        }
        guard let store = request.store, !store.isEmpty else {
            throw wrong("$.store", "the id of the store to write (a non-empty text, as in create_client)", request.store.map { .string($0) })
        }
        guard case .array(let items)? = request.entries, !items.isEmpty else {
            throw wrong("$.entries", "a non-empty array of {\"kind\", \"user\", \"key\", \"value\"}", request.entries)
        }
        return (store, try items.enumerated().map { i, item in
            let at = "$.entries[\(i)]"
            guard case .object(let o) = item else { throw wrong(at, "an object {\"kind\", \"user\", \"key\", \"value\"}", item) }
            guard case .string(let kind)? = o["kind"], ["flag", "experiment"].contains(where: { $0.unicodeScalars.elementsEqual(kind.unicodeScalars) }) else {
                throw wrong(at + ".kind", "\"flag\" or \"experiment\"", o["kind"])
            }
            guard case .string(let user)? = o["user"], !user.isEmpty else { throw wrong(at + ".user", "the user id (a non-empty text)", o["user"]) }
            guard case .string(let key)? = o["key"], !key.isEmpty else { throw wrong(at + ".key", "the \(kind) key (a non-empty text)", o["key"]) }
            guard case .object? = o["value"] else {
                throw wrong(at + ".value", "the persisted object (a JSON object, as the earlier SDK version stored it)", o["value"])
            }
            return DriverSeedEntry(kind: kind, user: user, key: key, value: o["value"]!)
        })
    }

    /// A short description of a JSON value for error messages.
    static func describe(_ value: JSONValue) -> String {
        switch value {
        case .null: return "null"
        case .bool(let b): return "the boolean \(b)"
        case .number(let n): return "the number \(n)"
        case .string(let t): return "the text \"\(t.count > 60 ? String(t.prefix(60)) + "…" : t)\""
        case .array(let a): return "an array of \(a.count)"
        case .object: return "an object"
        }
    }
}
