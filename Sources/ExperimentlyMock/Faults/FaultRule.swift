import Foundation

/// Identifies one fault rule added to a backend or a ``FaultScript``.
public struct FaultID: Hashable, Codable, Sendable, CustomStringConvertible {
    /// The sequential number, from 1, in the order rules were added.
    public let rawValue: Int
    /// Creates an id.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Encodes as the bare integer.
    public func encode(to encoder: Encoder) throws { var c = encoder.singleValueContainer(); try c.encode(rawValue) }
    /// Decodes from a bare integer.
    public init(from decoder: Decoder) throws { rawValue = try decoder.singleValueContainer().decode(Int.self) }
    /// "fault#N".
    public var description: String { "fault#\(rawValue)" }
}

/// One header field `{name, value}`, kept in order with its wire spelling.
public struct HeaderField: Codable, Sendable, Equatable {
    /// The field name as spelled on the wire.
    public var name: String
    /// The field value.
    public var value: String
    /// Creates a field.
    public init(name: String, value: String) { self.name = name; self.value = value }

    /// Whether `name` is a framing field the transport writes itself (`Content-Length`,
    /// `Transfer-Encoding`; ASCII case-insensitive). `Connection: close` stays scriptable: the
    /// TCP server closes the connection after such an answer.
    public static func isFraming(_ name: String) -> Bool {
        ["content-length", "transfer-encoding"].contains(name.lowercased())
    }

    /// Why a field with `name` and `value` cannot be sent in an HTTP/1.1 message, or `nil` when it
    /// can: the name must be a token (RFC 9110 section 5.1: visible ASCII without delimiters), the
    /// value must hold no CR, LF, NUL or other control character but tab (section 5.5: a value
    /// with CR, LF or NUL is invalid, and a sender must not generate one). Both transports and
    /// the fault rules' parser use it, so a field one of them could not send never exists.
    public static func problem(name: String, value: String) -> String? {
        if name.isEmpty { return "an empty header name" }
        let delimiters = Array("()<>@,;:\\\"/[]?={}".utf8)
        if let bad = name.unicodeScalars.first(where: { $0.value <= 0x20 || $0.value >= 0x7F || delimiters.contains(UInt8($0.value)) }) {
            return "header name \(name.debugDescription) holds \(Self.describe(bad)), which no token may (RFC 9110 section 5.1)"
        }
        if let bad = value.unicodeScalars.first(where: { ($0.value < 0x20 && $0.value != 0x09) || $0.value == 0x7F }) {
            return "the value of header \(name.debugDescription) holds \(Self.describe(bad)) (RFC 9110 section 5.5: no CR, LF, NUL or other control character)"
        }
        return nil
    }

    private static func describe(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\r": return "a CR"
        case "\n": return "an LF"
        case "\0": return "a NUL"
        case " ": return "a space"
        default: return scalar.isASCII && scalar.value >= 0x21 && scalar.value < 0x7F ? "'\(scalar)'" : String(format: "U+%04X", scalar.value)
        }
    }
}

/// A scriptable fault: which requests it matches, on which occurrences it fires, and what it does.
///
/// JSON shape (snake_case; unknown keys are rejected with an error naming the key):
/// ```json
/// {"name": "assign fails twice",
///  "match": {"method": "POST", "path": "/api/v1/tracking/assign", "body": {"user_id": "bob"}},
///  "when": {"first": 2},
///  "action": {"respond": {"status": 503, "json": {"detail": "down"}}}}
/// ```
/// `when` defaults to `{"every": true}`; `match` defaults to matching every request.
public struct FaultRule: Codable, Sendable, Equatable {
    /// A label used in history and in the shutdown report.
    public var name: String?
    /// Which requests the rule looks at.
    public var match: FaultMatch
    /// On which of the matching requests it fires.
    public var when: FaultOccurrence
    /// What happens to a request it fires on.
    public var action: FaultAction

    /// Creates a rule.
    public init(name: String? = nil, match: FaultMatch = FaultMatch(), when: FaultOccurrence = .every, action: FaultAction) {
        self.name = name; self.match = match; self.when = when; self.action = action
    }

    enum CodingKeys: String, CodingKey, CaseIterable { case name, match, when, action }

    /// Decodes strictly; `match` and `when` may be omitted.
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        match = try c.decodeIfPresent(FaultMatch.self, forKey: .match) ?? FaultMatch()
        when = try c.decodeIfPresent(FaultOccurrence.self, forKey: .when) ?? .every
        action = try c.decode(FaultAction.self, forKey: .action)
    }
}

/// The request pattern of a fault rule; every field that is set must match.
public struct FaultMatch: Codable, Sendable, Equatable {
    /// The method, compared case-insensitively.
    public var method: String?
    /// The raw (percent-encoded) path, without the query: exact, up to the normalization of
    /// RFC 3986 section 6.2.2 (``PercentDecoding/normalizedTarget(_:)``).
    public var path: String?
    /// A raw path prefix, compared as `path` is.
    public var pathPrefix: String?
    /// Query parameters (percent-decoded) that must be present with these values.
    public var query: [String: String]?
    /// Top-level JSON body members that must be present with these values (e.g. `user_id`).
    public var body: [String: JSONValue]?

    /// Creates a pattern; an empty pattern matches every request.
    public init(method: String? = nil, path: String? = nil, pathPrefix: String? = nil, query: [String: String]? = nil, body: [String: JSONValue]? = nil) {
        self.method = method; self.path = path; self.pathPrefix = pathPrefix; self.query = query; self.body = body
    }

    enum CodingKeys: String, CodingKey, CaseIterable { case method, path, pathPrefix = "path_prefix", query, body }

    /// Decodes strictly.
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        method = try c.decodeIfPresent(String.self, forKey: .method)
        path = try c.decodeIfPresent(String.self, forKey: .path)
        pathPrefix = try c.decodeIfPresent(String.self, forKey: .pathPrefix)
        query = try c.decodeIfPresent([String: String].self, forKey: .query)
        body = try c.decodeIfPresent([String: JSONValue].self, forKey: .body)
    }

    /// Whether the rule's `path` names the request's raw path: the same scalars, or the same
    /// URI (RFC 3986 section 6.2.2: escapes' hex case and escaped unreserved characters do not
    /// matter; `PercentDecoding.normalizedTarget`). A path that differs otherwise (another user,
    /// NFC against NFD) never matches.
    public static func samePath(_ rule: String, _ raw: String) -> Bool {
        if rule.isExactly(raw) { return true }
        guard raw.utf8.contains(UInt8(ascii: "%")) || rule.utf8.contains(UInt8(ascii: "%")) else { return false }
        return PercentDecoding.normalizedTarget(rule).isExactly(PercentDecoding.normalizedTarget(raw))
    }

    /// Whether the raw path starts with the rule's `path_prefix`, compared as ``samePath(_:_:)`` compares.
    public static func startsWith(_ raw: String, _ prefix: String) -> Bool {
        if raw.unicodeScalars.starts(with: prefix.unicodeScalars) { return true }
        guard raw.utf8.contains(UInt8(ascii: "%")) || prefix.utf8.contains(UInt8(ascii: "%")) else { return false }
        return PercentDecoding.normalizedTarget(raw).unicodeScalars.starts(with: PercentDecoding.normalizedTarget(prefix).unicodeScalars)
    }

    /// Whether `request` matches this pattern: the same test as `mismatches(request).isEmpty`,
    /// without writing the phrases (every request is tested against every rule).
    func matches(_ request: IncomingRequest) -> Bool {
        if let method, method.uppercased() != request.method { return false }
        let rawPath = request.raw.rawPath
        if let path, !Self.samePath(path, rawPath) { return false }
        if let pathPrefix, !Self.startsWith(rawPath, pathPrefix) { return false }
        for (name, value) in query ?? [:] {
            guard case .some(let actual) = request.query(name), actual.map({ $0.isExactly(value) }) ?? false else { return false }
        }
        if let body {
            let json = request.json
            for (name, value) in body where json?[name] != value { return false }
        }
        return true
    }

    /// What differs between this pattern and `request`, one phrase per field; empty when it matches.
    /// Paths, query values and body strings compare exactly (Unicode scalars, not canonical
    /// equivalence: a rule for NFC é never fires for NFD é).
    func mismatches(_ request: IncomingRequest) -> [String] {
        var out: [String] = []
        if let method, method.uppercased() != request.method { out.append("method is \(request.method), rule wants \(method.uppercased())") }
        let rawPath = request.raw.rawPath
        if let path, !Self.samePath(path, rawPath) { out.append("path is \(rawPath.unambiguous), rule wants \(path.unambiguous)") }
        if let pathPrefix, !Self.startsWith(rawPath, pathPrefix) { out.append("path \(rawPath) does not start with \(pathPrefix)") }
        for (name, value) in (query ?? [:]).sorted(by: { $0.key < $1.key }) {
            switch request.query(name) {
            case nil: out.append("query \(name) is absent, rule wants '\(value.unambiguous)'")
            case .some(let actual) where !(actual.map { $0.isExactly(value) } ?? false): out.append("query \(name) is '\(actual?.unambiguous ?? "<not UTF-8>")', rule wants '\(value.unambiguous)'")
            default: break
            }
        }
        if let body {
            let json = request.json
            for (name, value) in body.sorted(by: { $0.key < $1.key }) {
                let actual = json?[name]
                // Unambiguous: NFC and NFD spellings print apart (a forty-eighth outside tester, M).
                if actual != value { out.append("body.\(name) is \(actual?.unambiguousJSONText ?? "absent"), rule wants \(value.unambiguousJSONText)") }
            }
        }
        return out
    }
}

/// On which matching requests a rule fires. Counting is per rule, over every request its pattern
/// matches (whether or not another rule answered it).
///
/// JSON: `{"every": true}`, `{"nth": 2}` (only the 2nd match), `{"first": 3}` (matches 1...3, then
/// recover), `{"window": {"from_seconds": 10, "until_seconds": 20}}` (an outage window in seconds
/// since the backend started, start inclusive, end exclusive).
public enum FaultOccurrence: Codable, Sendable, Equatable {
    /// Every matching request.
    case every
    /// Only the nth matching request (1-based); a one-shot rule.
    case nth(Int)
    /// The first n matching requests; a one-shot rule until n were seen.
    case first(Int)
    /// Every matching request whose arrival time is in [from, until) seconds after the epoch.
    case window(fromSeconds: TimeInterval, untilSeconds: TimeInterval)

    private enum Keys: String, CodingKey, CaseIterable { case every, nth, first, window }
    private enum WindowKeys: String, CodingKey, CaseIterable { case fromSeconds = "from_seconds", untilSeconds = "until_seconds" }

    /// Decodes a single-key object; throws naming unknown keys, several keys, or bad counts (< 1).
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, Keys.self)
        let c = try decoder.container(keyedBy: Keys.self)
        guard c.allKeys.count == 1, let key = c.allKeys.first else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "'when' needs exactly one of: every, nth, first, window"))
        }
        switch key {
        case .every:
            guard try c.decode(Bool.self, forKey: .every) else {
                throw DecodingError.dataCorruptedError(forKey: .every, in: c, debugDescription: "'every' must be true")
            }
            self = .every
        case .nth, .first:
            let n = try c.decode(Int.self, forKey: key)
            guard n >= 1 else { throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "'\(key.stringValue)' must be at least 1, got \(n)") }
            self = key == .nth ? .nth(n) : .first(n)
        case .window:
            let w = try c.superDecoder(forKey: .window)
            try StrictKeys.check(w, WindowKeys.self)
            let wc = try w.container(keyedBy: WindowKeys.self)
            let from = try wc.decode(Double.self, forKey: .fromSeconds), until = try wc.decode(Double.self, forKey: .untilSeconds)
            guard until > from else { throw DecodingError.dataCorruptedError(forKey: .untilSeconds, in: wc, debugDescription: "until_seconds must be after from_seconds") }
            self = .window(fromSeconds: from, untilSeconds: until)
        }
    }

    /// Encodes the single-key object form.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        switch self {
        case .every: try c.encode(true, forKey: .every)
        case .nth(let n): try c.encode(n, forKey: .nth)
        case .first(let n): try c.encode(n, forKey: .first)
        case .window(let from, let until):
            var w = c.nestedContainer(keyedBy: WindowKeys.self, forKey: .window)
            try w.encode(from, forKey: .fromSeconds)
            try w.encode(until, forKey: .untilSeconds)
        }
    }

    /// How many matches a one-shot rule needs to be used up; nil for `every` and `window`.
    var requiredMatches: Int? {
        switch self {
        case .nth(let n), .first(let n): return n
        case .every, .window: return nil
        }
    }
}

/// The value of a 429's `Retry-After` (RFC 9110 section 10.2.3): delay seconds or an HTTP date.
public enum RetryAfter: Sendable, Equatable {
    /// `Retry-After: <seconds>`.
    case seconds(Int)
    /// `Retry-After: <IMF-fixdate>` given literally.
    case httpDate(String)
    /// `Retry-After: <IMF-fixdate>` of the clock's now plus this many seconds.
    case httpDateIn(seconds: Int)
}

/// What a fault does to a request it fires on.
///
/// JSON: an object with exactly one key naming the action:
/// `{"respond": {"status": 503, "headers": {"X": "y"}, "json": {...} | "body": "text"}}`,
/// `{"rate_limited": {"retry_after_seconds": 5} | {"retry_after_date": "Wed, 21 Oct 2015 07:28:00 GMT"} | {"retry_after_date_in_seconds": 30}}`,
/// `{"delay": {"seconds": 2.5}}`, `{"hold": {"label": "a"}}`, `{"timeout": {"processed": false}}`,
/// `{"drop_before_response": {"processed": false}}`, `{"drop_mid_body": {"body_bytes": 10}}`,
/// `{"delay_then_drop": {"seconds": 2, "processed": false}}` (latency, then a reset),
/// `{"malformed_json": {"body": "{oops"}}`, `{"truncated_json": {"bytes": 12}}`,
/// `{"wrong_content_type": {"content_type": "text/html", "body": "<html>"}}`.
/// `processed` says whether the backend still handled the request (state changes) before the
/// fault hit; delays, holds, drops mid-body and body mangling always process.
public enum FaultAction: Codable, Sendable, Equatable {
    /// Answer this instead of the backend (the backend never sees the request).
    case respond(status: Int, headers: [HeaderField], body: Data)
    /// Answer 429 with the backend's rate-limit detail and this `Retry-After`.
    case rateLimited(RetryAfter)
    /// Wait `seconds` of the mock clock, then let the backend answer.
    case delay(seconds: TimeInterval)
    /// Park until ``MockBackend/release(_:with:)``; the backend answers at release (natural) unless overridden.
    case hold(label: String?)
    /// Never answer (TCP) / fail the load with URLError(.timedOut) after the request's timeout (in-process).
    case timeout(processed: Bool)
    /// Close the connection / fail with URLError(.networkConnectionLost) before any response byte.
    case dropBeforeResponse(processed: Bool)
    /// Send the head and only the first `bodyBytes` of the natural body, then drop.
    case dropMidBody(bodyBytes: Int)
    /// Latency then a reset: wait `seconds` of the mock clock, then close the connection / fail the
    /// load with URLError(.networkConnectionLost) before any response byte (`processed`: whether
    /// the backend handled the request, as for `dropBeforeResponse`).
    case delayThenDrop(seconds: TimeInterval, processed: Bool)
    /// Keep the natural status and headers, replace the body with invalid JSON (`body`, default `{"detail": `).
    case malformedJSON(body: String?)
    /// Keep the natural status and headers, cut the body to `bytes` (default: half) with a matching length.
    case truncatedJSON(bytes: Int?)
    /// Keep the natural status, set `Content-Type` to `contentType`, replace the body when `body` is given.
    case wrongContentType(contentType: String, body: String?)

    /// The snake_case name of the action, as used in JSON and history.
    public var kind: String {
        switch self {
        case .respond: return "respond"
        case .rateLimited: return "rate_limited"
        case .delay: return "delay"
        case .hold: return "hold"
        case .timeout: return "timeout"
        case .dropBeforeResponse: return "drop_before_response"
        case .dropMidBody: return "drop_mid_body"
        case .delayThenDrop: return "delay_then_drop"
        case .malformedJSON: return "malformed_json"
        case .truncatedJSON: return "truncated_json"
        case .wrongContentType: return "wrong_content_type"
        }
    }

    /// A plain 5xx/4xx answer with a FastAPI-style `{"detail": text}` body.
    public static func status(_ status: Int, detail: String = "Injected fault", headers: [HeaderField] = []) -> FaultAction {
        .respond(status: status, headers: [HeaderField(name: "Content-Type", value: "application/json")] + headers,
                 body: JSONValue.object(["detail": .string(detail)]).serialized())
    }

    private enum Keys: String, CodingKey, CaseIterable {
        case respond, rateLimited = "rate_limited", delay, hold, timeout, dropBeforeResponse = "drop_before_response"
        case dropMidBody = "drop_mid_body", malformedJSON = "malformed_json", truncatedJSON = "truncated_json", wrongContentType = "wrong_content_type"
        case delayThenDrop = "delay_then_drop"
    }
    private enum DelayDropKeys: String, CodingKey, CaseIterable { case seconds, processed }
    private enum RespondKeys: String, CodingKey, CaseIterable { case status, headers, json, body }
    private enum RateKeys: String, CodingKey, CaseIterable { case retryAfterSeconds = "retry_after_seconds", retryAfterDate = "retry_after_date", retryAfterDateIn = "retry_after_date_in_seconds" }
    private enum DelayKeys: String, CodingKey, CaseIterable { case seconds }
    private enum HoldKeys: String, CodingKey, CaseIterable { case label }
    private enum ProcessedKeys: String, CodingKey, CaseIterable { case processed }
    private enum MidBodyKeys: String, CodingKey, CaseIterable { case bodyBytes = "body_bytes" }
    private enum BodyKeys: String, CodingKey, CaseIterable { case body }
    private enum BytesKeys: String, CodingKey, CaseIterable { case bytes }
    private enum ContentTypeKeys: String, CodingKey, CaseIterable { case contentType = "content_type", body }

    private static func fail(_ decoder: Decoder, _ message: String) -> DecodingError {
        .dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: message))
    }

    /// Decodes the single-key object form; throws naming unknown actions/keys and bad values.
    public init(from decoder: Decoder) throws {
        try StrictKeys.check(decoder, Keys.self)
        let c = try decoder.container(keyedBy: Keys.self)
        guard c.allKeys.count == 1, let key = c.allKeys.first else {
            throw Self.fail(decoder, "'action' needs exactly one of: \(Keys.allCases.map(\.stringValue).joined(separator: ", "))")
        }
        let d = try c.superDecoder(forKey: key)
        switch key {
        case .respond:
            try StrictKeys.check(d, RespondKeys.self)
            let r = try d.container(keyedBy: RespondKeys.self)
            let status = try r.decode(Int.self, forKey: .status)
            // A final status: 1xx are interim answers, which no transport can deliver as the answer.
            guard (200...599).contains(status) else { throw Self.fail(d, "status must be 200...599 (a final status), got \(status)") }
            var headers = (try r.decodeIfPresent([String: String].self, forKey: .headers) ?? [:])
                .sorted { $0.key < $1.key }.map { HeaderField(name: $0.key, value: $0.value) }
            if let problem = headers.lazy.compactMap({ HeaderField.problem(name: $0.name, value: $0.value) }).first {
                throw Self.fail(d, "'headers': \(problem)")
            }
            // The message's framing belongs to the transport, which writes its own (RFC 9112
            // sections 6 and 9.6): a scripted one would be recorded but never sent.
            if let framing = headers.first(where: { HeaderField.isFraming($0.name) }) {
                throw Self.fail(d, "'headers': \(framing.name.debugDescription) is the transport's (the body's real length is sent as it is): leave it out")
            }
            let json = try r.decodeIfPresent(JSONValue.self, forKey: .json)
            let text = try r.decodeIfPresent(String.self, forKey: .body)
            if json != nil && text != nil { throw Self.fail(d, "'respond' takes 'json' or 'body', not both") }
            // 204 and 304 carry no content (RFC 9110 sections 15.3.5, 15.4.5): over TCP a body
            // cannot be sent, in process it would be.
            if [204, 304].contains(status), json != nil || !(text ?? "").isEmpty {
                throw Self.fail(d, "status \(status) carries no content (RFC 9110 sections 15.3.5 and 15.4.5): drop 'json' and 'body'")
            }
            if json != nil, !headers.contains(where: { $0.name.lowercased() == "content-type" }) {
                headers.insert(HeaderField(name: "Content-Type", value: "application/json"), at: 0)
            }
            self = .respond(status: status, headers: headers, body: json.map { $0.serialized() } ?? Data((text ?? "").utf8))
        case .rateLimited:
            try StrictKeys.check(d, RateKeys.self)
            let r = try d.container(keyedBy: RateKeys.self)
            guard r.allKeys.count == 1 else { throw Self.fail(d, "'rate_limited' needs exactly one of: retry_after_seconds, retry_after_date, retry_after_date_in_seconds") }
            if let s = try r.decodeIfPresent(Int.self, forKey: .retryAfterSeconds) { self = .rateLimited(.seconds(s)) }
            else if let s = try r.decodeIfPresent(String.self, forKey: .retryAfterDate) {
                if let problem = HeaderField.problem(name: "Retry-After", value: s) { throw Self.fail(d, "'retry_after_date': \(problem)") }
                self = .rateLimited(.httpDate(s))
            }
            else { self = .rateLimited(.httpDateIn(seconds: try r.decode(Int.self, forKey: .retryAfterDateIn))) }
        case .delay:
            try StrictKeys.check(d, DelayKeys.self)
            let s = try d.container(keyedBy: DelayKeys.self).decode(Double.self, forKey: .seconds)
            guard s >= 0 else { throw Self.fail(d, "delay seconds must be >= 0, got \(s)") }
            self = .delay(seconds: s)
        case .hold:
            try StrictKeys.check(d, HoldKeys.self)
            self = .hold(label: try d.container(keyedBy: HoldKeys.self).decodeIfPresent(String.self, forKey: .label))
        case .timeout, .dropBeforeResponse:
            try StrictKeys.check(d, ProcessedKeys.self)
            let p = try d.container(keyedBy: ProcessedKeys.self).decodeIfPresent(Bool.self, forKey: .processed) ?? false
            self = key == .timeout ? .timeout(processed: p) : .dropBeforeResponse(processed: p)
        case .delayThenDrop:
            try StrictKeys.check(d, DelayDropKeys.self)
            let r = try d.container(keyedBy: DelayDropKeys.self)
            let s = try r.decode(Double.self, forKey: .seconds)
            guard s >= 0 else { throw Self.fail(d, "delay_then_drop seconds must be >= 0, got \(s)") }
            self = .delayThenDrop(seconds: s, processed: try r.decodeIfPresent(Bool.self, forKey: .processed) ?? false)
        case .dropMidBody:
            try StrictKeys.check(d, MidBodyKeys.self)
            let n = try d.container(keyedBy: MidBodyKeys.self).decode(Int.self, forKey: .bodyBytes)
            guard n >= 0 else { throw Self.fail(d, "body_bytes must be >= 0, got \(n)") }
            self = .dropMidBody(bodyBytes: n)
        case .malformedJSON:
            try StrictKeys.check(d, BodyKeys.self)
            self = .malformedJSON(body: try d.container(keyedBy: BodyKeys.self).decodeIfPresent(String.self, forKey: .body))
        case .truncatedJSON:
            try StrictKeys.check(d, BytesKeys.self)
            self = .truncatedJSON(bytes: try d.container(keyedBy: BytesKeys.self).decodeIfPresent(Int.self, forKey: .bytes))
        case .wrongContentType:
            try StrictKeys.check(d, ContentTypeKeys.self)
            let w = try d.container(keyedBy: ContentTypeKeys.self)
            let contentType = try w.decodeIfPresent(String.self, forKey: .contentType) ?? "text/html"
            if let problem = HeaderField.problem(name: "Content-Type", value: contentType) { throw Self.fail(d, "'content_type': \(problem)") }
            self = .wrongContentType(contentType: contentType, body: try w.decodeIfPresent(String.self, forKey: .body))
        }
    }

    /// Encodes the single-key object form.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        switch self {
        case .respond(let status, let headers, let body):
            var r = c.nestedContainer(keyedBy: RespondKeys.self, forKey: .respond)
            try r.encode(status, forKey: .status)
            if !headers.isEmpty { try r.encode(Dictionary(headers.map { ($0.name, $0.value) }, uniquingKeysWith: { a, _ in a }), forKey: .headers) }
            if let parsed = try? JSONValue.parse(body), headers.contains(where: { $0.name.lowercased() == "content-type" && $0.value.hasPrefix("application/json") }) {
                try r.encode(parsed.value, forKey: .json)
            } else {
                try r.encode(String(decoding: body, as: UTF8.self), forKey: .body)
            }
        case .rateLimited(let retry):
            var r = c.nestedContainer(keyedBy: RateKeys.self, forKey: .rateLimited)
            switch retry {
            case .seconds(let s): try r.encode(s, forKey: .retryAfterSeconds)
            case .httpDate(let s): try r.encode(s, forKey: .retryAfterDate)
            case .httpDateIn(let s): try r.encode(s, forKey: .retryAfterDateIn)
            }
        case .delay(let s):
            var r = c.nestedContainer(keyedBy: DelayKeys.self, forKey: .delay)
            try r.encode(s, forKey: .seconds)
        case .hold(let label):
            var r = c.nestedContainer(keyedBy: HoldKeys.self, forKey: .hold)
            try r.encodeIfPresent(label, forKey: .label)
        case .timeout(let p), .dropBeforeResponse(let p):
            var r = c.nestedContainer(keyedBy: ProcessedKeys.self, forKey: kind == "timeout" ? .timeout : .dropBeforeResponse)
            try r.encode(p, forKey: .processed)
        case .delayThenDrop(let s, let p):
            var r = c.nestedContainer(keyedBy: DelayDropKeys.self, forKey: .delayThenDrop)
            try r.encode(s, forKey: .seconds)
            try r.encode(p, forKey: .processed)
        case .dropMidBody(let n):
            var r = c.nestedContainer(keyedBy: MidBodyKeys.self, forKey: .dropMidBody)
            try r.encode(n, forKey: .bodyBytes)
        case .malformedJSON(let body):
            var r = c.nestedContainer(keyedBy: BodyKeys.self, forKey: .malformedJSON)
            try r.encodeIfPresent(body, forKey: .body)
        case .truncatedJSON(let bytes):
            var r = c.nestedContainer(keyedBy: BytesKeys.self, forKey: .truncatedJSON)
            try r.encodeIfPresent(bytes, forKey: .bytes)
        case .wrongContentType(let type, let body):
            var r = c.nestedContainer(keyedBy: ContentTypeKeys.self, forKey: .wrongContentType)
            try r.encode(type, forKey: .contentType)
            try r.encodeIfPresent(body, forKey: .body)
        }
    }
}
