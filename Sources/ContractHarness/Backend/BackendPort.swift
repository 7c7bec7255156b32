import Foundation
import ExperimentlyMock
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request the mock backend saw, as the runner and the checks read it.
public struct RequestRecord: Sendable, Equatable, Codable {
    /// The mock's sequence number (1-based, in arrival order).
    public var seq: Int
    /// The client that sent it (from the harness's client tag), or `nil`.
    public var client: String?
    /// The request method.
    public var method: String
    /// The decoded path, e.g. `/api/v1/feature-flags/evaluate/new ui/v2`.
    public var path: String
    /// The raw (percent-encoded) request target as sent.
    public var target: String
    /// Decoded query parameters.
    public var query: [String: String]
    /// Header fields as recorded by the mock (API key redacted).
    public var headers: [String: String]
    /// The parsed JSON body, when it is JSON.
    public var body: JSONValue?
    /// The status answered, `nil` while unanswered or when the connection was dropped.
    public var status: Int?
    /// The parsed JSON body of the answer, when it is JSON.
    public var response: JSONValue?
    /// The answer's header fields (names as sent).
    public var responseHeaders: [String: String] = [:]
    /// The id of the fault applied (the harness's id), if any.
    public var fault: String?
    /// `true` while the request sits in a hold, delay or timeout.
    public var parked: Bool
    /// `true` when the client cancelled it.
    public var cancelled: Bool
    /// `true` once the mock gave its outcome.
    public var answered: Bool
    /// `true` when the answer was cut off on the wire (a `drop_mid_body` fault: the head and part
    /// of the body, then the connection closed): the client got a transport error, whatever the
    /// status says (`nil` when not, and in records written before the field existed).
    public var cutOff: Bool? = nil
    /// `true` when the answer's body is JSON that parsers read differently (a UTF-8 byte-order
    /// mark before it, a key twice, `NaN`/`Infinity` tokens, nesting past 256 levels): an SDK may
    /// decode it or fail, and `response` holds the lenient reading (`nil` otherwise).
    public var ambiguousBody: Bool? = nil
    /// The request body's first member name stated twice in one object, exactly or in two
    /// canonically equivalent spellings (`JSONDuplicateKey`'s description, naming its JSON path);
    /// `nil` when every object's names are unique. `body` keeps one member per canonical class,
    /// so such a body cannot be judged exactly (the runner fails it: `request body`).
    public var duplicateKey: String? = nil
    /// `true` when the request came with no body at all (`nil` otherwise, and in records written
    /// before the field existed): tells an empty body from one that is no JSON, where `body` is
    /// `nil` for both.
    public var bodyEmpty: Bool? = nil
    /// Which key of the fixtures' `api_keys` the request sent (its index; `-1`: a key the
    /// fixtures lack; `nil`: none), as the mock told it before redaction.
    public var apiKeyIndex: Int? = nil

    /// The API key a request sent as messages show it: `api_keys[i]` of the fixtures, `a key the
    /// fixtures lack`, or `no key`.
    public var apiKeyText: String {
        switch apiKeyIndex {
        case nil: return "no key"
        case let i? where i >= 0: return "api_keys[\(i)]"
        default: return "a key the fixtures lack"
        }
    }

    /// A raw query string (`a=1&b=x%20y`) as the backend reads it: names and values
    /// percent-decoded, `+` a space, the last value of a repeated name, a name without `=` given
    /// `""`; empty for `nil`. Shared by the mock's records and the redirect targets the checks
    /// compare with them.
    static func decodedQuery(_ raw: String?) -> [String: String] {
        var query: [String: String] = [:]
        for pair in (raw ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            query[PercentDecoding.queryComponent(parts[0]) ?? parts[0]] = parts.count > 1 ? (PercentDecoding.queryComponent(parts[1]) ?? parts[1]) : ""
        }
        return query
    }

    /// The user ids the request is about: `user_id` of the query or body, or of each batch event.
    public var users: [String] {
        if let u = query["user_id"] { return [u] }
        if case .string(let u)? = body?["user_id"] { return [u] }
        if case .array(let events)? = body?["events"] {
            return events.compactMap { if case .string(let u)? = $0["user_id"] { return u } else { return nil } }
        }
        return []
    }

    /// The flag key (evaluate) or experiment key (assign) the request is about.
    public var key: (kind: String, key: String)? {
        let prefix = "/api/v1/feature-flags/evaluate/"
        if path.hasExactPrefix(prefix) { return ("flag", String(path.unicodeScalars.dropFirst(prefix.unicodeScalars.count))) }
        if path == "/api/v1/tracking/assign", case .string(let k)? = body?["experiment_key"] { return ("experiment", k) }
        return nil
    }

    /// The events of a `/batch` body (or the single `/track` event), else empty.
    public var events: [JSONValue] {
        if path == "/api/v1/tracking/batch", case .array(let events)? = body?["events"] { return events }
        if path == "/api/v1/tracking/track", let body { return [body] }
        return []
    }

    /// `true` when the answer was 2xx.
    /// A 2xx answer the client received whole: a `drop_mid_body` answer is a failure for the
    /// client (a sixth outside tester: the cache model cached it, failing every correct SDK).
    public var succeeded: Bool { (status ?? 0) / 100 == 2 && cutOff != true }

    /// Whether the request matches a scenario's pattern. Every string compares exactly (Unicode
    /// scalars, never canonical equivalence): `user` NFC é does not match a request for NFD é, and
    /// `body`/`body_equals` strings differ likewise; header names compare case-insensitively (ASCII).
    public func matches(_ m: RequestMatch) -> Bool {
        if let method = m.method, !method.uppercased().isExactly(self.method) { return false }
        if let p = m.path, !p.isExactly(path) { return false }
        if let p = m.pathPrefix, !path.hasExactPrefix(p) { return false }
        if let c = m.client, !client.isExactly(c) { return false }
        if let u = m.user, !users.containsExactly(u) { return false }
        if let s = m.status, s != status { return false }
        if let b = m.body { guard let body, body.contains(b) else { return false } }
        // The same URI, as RFC 3986 section 6.2.2 normalizes it (`%2f` is `%2F`, `%5F` is `_`).
        if let t = m.target, !t.isExactly(target),
           !PercentDecoding.normalizedTarget(t).isExactly(PercentDecoding.normalizedTarget(target)) { return false }
        if let wanted = m.headers {
            for (name, value) in wanted {
                guard let sent = headers.first(where: { $0.key.lowercased() == name.lowercased() })?.value,
                      Self.headerValue(sent, matches: value, name: name) else { return false }
            }
        }
        if let exact = m.bodyEquals, (body ?? .null) != exact { return false }
        if let c = m.cancelled, c != cancelled { return false }
        switch m.apiKey {
        case .fixture(let i)?: if apiKeyIndex != i { return false }
        case .noneOfTheFixtures?: if let i = apiKeyIndex, i >= 0 { return false }
        case nil: break
        }
        if let wanted = m.responseHeaders {
            for (name, value) in wanted {
                guard responseHeaders.first(where: { $0.key.lowercased() == name.lowercased() })?.value.isExactly(value) ?? false else { return false }
            }
        }
        return true
    }

    /// Whether a request header's value `sent` is the value `wanted` a matcher names: exactly, or
    /// for `Content-Type` the same media type (type and subtype compared case-insensitively, RFC
    /// 9110 section 8.3.1) where `wanted` has no parameters and `sent` has none but `charset=utf-8`
    /// (any case, quoted or not, or spelled `utf8`) and empty ones. RFC 8259 section 11: a charset
    /// parameter on `application/json` "has no effect on compliant recipients", and OkHttp and
    /// .NET's `StringContent` add it to every JSON body (an eighty-second outside tester, F9: a
    /// Kotlin or C# SDK failed `s4-request-headers-on-every-call` on a header the backend reads
    /// alike). Whitespace around each part is OWS, trimmed as the transport trims header values.
    static func headerValue(_ sent: String, matches wanted: String, name: String) -> Bool {
        if sent.isExactly(wanted) { return true }
        guard name.lowercased() == "content-type", !wanted.contains(";") else { return false }
        let parts = sent.split(separator: ";", omittingEmptySubsequences: false).map { MockURLProtocol.withoutOWS(String($0)) }
        guard let type = parts.first, type.lowercased() == MockURLProtocol.withoutOWS(wanted).lowercased() else { return false }
        // RFC 9110 section 5.6.6 allows an empty parameter (`; charset=utf-8;`); `utf8` is the
        // common misspelling the backend reads alike (an eighty-fourth outside tester, F6).
        return parts.dropFirst().allSatisfy { parameter in
            if parameter.isEmpty { return true }
            let pair = parameter.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2, MockURLProtocol.withoutOWS(pair[0]).lowercased() == "charset" else { return false }
            var value = MockURLProtocol.withoutOWS(pair[1])
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            return ["utf-8", "utf8"].contains(value.lowercased())
        }
    }

    /// A one-line summary for failure messages.
    public var summary: String {
        var s = "#\(seq) \(client.map { "[\($0)] " } ?? "")\(method) \(target)"
        if let body { s += " \(body)" }
        s += " -> " + (status.map(String.init) ?? (cancelled ? "cancelled" : parked ? "parked" : "no answer"))
        if cutOff == true { s += " cut off mid-body" }
        if let fault { s += " (fault \(fault))" }
        return s
    }
}

/// What the runner needs of a mock backend; `MockBackendPort` adapts `ExperimentlyMock.MockBackend`.
protocol BackendPort: AnyObject, Sendable {
    /// The origin `client`'s requests go to (the port tags them with the client).
    func baseURL(client: String) -> String
    /// A session to the backend for `client`.
    func session(client: String) -> URLSession
    /// Adds a fault written in the mock's JSON fault format.
    ///
    /// - Throws: `ScenarioError` (file, path) when the rule does not decode.
    func addFault(id: String, rule: JSONValue, file: String, path: String) throws
    func removeFault(id: String)
    /// How many requests fault `id` ever held.
    func heldCount(fault id: String) -> Int
    /// Releases up to `count` (all when `nil`) of the requests fault `id` holds, oldest first.
    ///
    /// - Returns: how many were released.
    func release(fault id: String, count: Int?, override: JSONValue?) throws -> Int
    func updateFixtures(_ change: FixtureChange) throws
    /// Every request so far, in arrival order.
    func requests() -> [RequestRecord]
    /// The requests parked in the mock now (a cheap subset of `requests()`).
    func parkedRequests() -> [RequestRecord]
    /// How many requests the mock has received.
    var requestCount: Int { get }
    /// The exposures the mock recorded, in order (`nil` when the backend cannot tell).
    func exposures() -> [Exposure]?
    /// Requests the mock is still working on: received, neither parked nor answered (e.g. one
    /// just released whose answer is being written, even when its client has gone).
    var unsettledRequests: Int { get }
    /// Called (from any thread) when a request is received (`answered` false) and when the mock
    /// gives its outcome (`answered` true), and with `nil` on any other change (a request parks).
    func setObserver(_ observer: @escaping @Sendable (_ seq: Int?, _ answered: Bool) -> Void)
    /// Strict shutdown: releases what is still held and describes holds never released and
    /// one-shot faults never used.
    func shutdown() async -> [String]
    /// Requests the SDK sessions created whose completion has not returned (in transit, parked,
    /// or on the way back); `nil` when the platform's sessions cannot count them.
    var outstandingTasks: Int? { get }
    /// How each request that the mock parked at receipt was parked (`hold`, `delay N s`,
    /// `timeout N s`), by sequence number, for the history's request lines.
    func parkedAtReceipt() -> [Int: String]
    /// Why fault `id` has not fired when it never matched a request (the nearest request and the
    /// fields that differed, the mock's phrases), or `nil`.
    func neverMatched(fault id: String) -> String?
    /// In process: the requests whose SDK has begun cancelling them (`URLSessionTask.cancel()`)
    /// while the mock has not yet seen the cancellation, in ascending order; empty over TCP.
    func cancellationsOnTheirWay() -> [Int]
    /// In process: whether every session this port handed out has an empty delegate queue (no
    /// completion handler and no work an SDK queued there, such as the shipping SDK's
    /// `cancel()` on Linux, is waiting or running); `true` over TCP, where the port has none.
    var delegateQueuesIdle: Bool { get }
    /// When the delays and timeouts the mock has parked end (virtual time), those still ahead.
    func pendingDeadlines() -> [Date]
    /// Marks the launch of `client` where it is relaunched on an earlier client's origin: the
    /// port's requests on that origin are its own from now on (`Scenario.originOwners`).
    func handOver(to client: String)
}

extension BackendPort {
    /// None known (a port that cannot tell).
    func parkedAtReceipt() -> [Int: String] { [:] }

    /// An origin per client: nothing to hand over.
    func handOver(to client: String) {}

    /// Why fault `id` has not fired yet when it never matched a request (the nearest request and
    /// what differed), or `nil` when it matched, is unknown, or the port cannot tell.
    func neverMatched(fault id: String) -> String? { nil }

    /// None known (a port that cannot tell).
    func cancellationsOnTheirWay() -> [Int] { [] }
    /// No sessions: nothing queued.
    var delegateQueuesIdle: Bool { true }

    /// None known.
    func pendingDeadlines() -> [Date] { [] }
}
