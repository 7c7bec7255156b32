import Foundation

/// The control API of `contract-harness serve` (issue 12 section 6): a request handler in front
/// of a ``MockBackend`` that answers paths under `/__admin/` itself and hands every other request
/// to the backend unchanged. Admin requests are never in the backend's history (so never in the
/// journal) and never rate limited. It sits at the handler level, so any transport that takes a
/// ``MockRequestHandler`` (the loopback TCP server) serves it without change.
///
/// Routes (JSON in and out; errors are `{"error": "<what was wrong>"}`; a JSON body with a key
/// written twice in one object is refused with 400 naming the key and its JSON path,
/// ``JSONDuplicateKey``):
/// - `POST /__admin/faults`: body a fault rule as in `--faults` (``FaultRule``); 201 `{"id": N}`.
/// - `GET /__admin/faults`: `{"faults": [{"id", "rule"}]}` in the order they apply.
/// - `DELETE /__admin/faults/{id}`: 200 `{"removed": id}`; 404 when no such rule.
/// - `GET /__admin/holds`: `{"holds": [{"seq", "hold", "fault", "action", "method", "target",
///   "label", "user_id"}]}` in the order parked (`action` is `hold`, or `timeout` for a request
///   a timeout fault keeps silent until its client gives up); with `?count=N&timeout_ms=T` it first waits (suspended,
///   no thread blocked) until N requests are parked, answering 408 with the holds so far when T
///   milliseconds (default 5000, at most 600000) pass first.
/// - `POST /__admin/holds/{seq}/release`: releases the request with history sequence `seq`:
///   the backend answers it naturally, or with the optional body `{"status", "headers", "json"
///   | "body"}` (the `respond` action of a fault rule); 200 `{"released": seq}`, 404 when that
///   request is not parked, 409 when it is silent on a timeout fault (only its client giving
///   up, or shutdown, ends it).
/// - `GET /__admin/requests`: `{"requests": [...]}` the history so far (each `{seq, method,
///   target, route, note, fault, hold, headers, body, response: {status, headers, body},
///   outcome, cancelled, transport_retry_of, received_at, answered_at}`), every configured
///   secret redacted.
/// - `POST /__admin/reset`: back to the start (the fixtures and faults it was created with, no
///   history, no sticky assignments, exposures, events or rate counters); 409 while requests
///   are in flight.
///
/// When `token` is set every admin request must carry `X-Admin-Token: <token>` (compared by
/// bytes), else 401; `serve` requires a token for any `--host` other than loopback.
public final class MockAdmin: MockRequestHandler, Sendable {
    /// The backend the admin API scripts and the non-admin requests reach.
    public let backend: MockBackend
    /// The path prefix of the control API.
    public static let prefix = "/__admin/"
    /// The header carrying the admin token.
    public static let tokenHeader = "X-Admin-Token"

    private let startFixtures: Fixtures
    private let startFaults: [FaultRule]
    private let token: String?
    private let redactor: SecretRedactor

    /// Wraps `backend`; `reset` goes back to `fixtures` and `faults` (what `serve` started with).
    /// `token`, when non-nil, is required on every admin request.
    public init(backend: MockBackend, fixtures: Fixtures, faults: [FaultRule], token: String?) {
        self.backend = backend
        self.startFixtures = fixtures
        self.startFaults = faults
        self.token = token
        self.redactor = SecretRedactor(secrets: fixtures.apiKeys.map(\.key) + (token.map { [$0] } ?? []))
    }

    /// Answers admin requests itself; every other request goes to the backend.
    public func handle(_ request: MockRequest) async -> MockOutcome {
        let path = request.rawPath
        guard path.utf8.starts(with: Self.prefix.utf8) || path.utf8.elementsEqual("/__admin".utf8) else {
            return await backend.handle(request)
        }
        // An admin request the transport can no longer answer (pipelined behind one the
        // shutdown left unanswered) is not acted on.
        if request.connection?.unanswerable == true { return .respond(Self.error(503, "the server is shutting down")) }
        return .respond(await admin(request, path: path))
    }

    // MARK: Routing

    private func admin(_ request: MockRequest, path: String) async -> MockResponse {
        if let token {
            guard let sent = request.header(Self.tokenHeader), sent.utf8.elementsEqual(token.utf8) else {
                return Self.error(401, "this serve requires the admin token in the \(Self.tokenHeader) header")
            }
        }
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst(2).map(String.init)
        let method = request.method.uppercased()
        switch (method, segments) {
        case ("POST", ["faults"]): return addFault(request)
        case ("GET", ["faults"]): return listFaults()
        case ("DELETE", let s) where s.count == 2 && s[0] == "faults": return removeFault(s[1])
        case ("GET", ["holds"]): return await holds(request)
        case ("POST", let s) where s.count == 3 && s[0] == "holds" && s[2] == "release": return release(s[1], request)
        case ("GET", ["requests"]): return requests()
        case ("POST", ["reset"]): return reset()
        default:
            // A route that exists under other methods is 405 naming them (RFC 9110 section 15.5.6).
            let allowed: [String] = switch segments {
            case ["faults"]: ["GET", "POST"]
            case let s where s.count == 2 && s[0] == "faults": ["DELETE"]
            case ["holds"], ["requests"]: ["GET"]
            case let s where s.count == 3 && s[0] == "holds" && s[2] == "release": ["POST"]
            case ["reset"]: ["POST"]
            default: []
            }
            if !allowed.isEmpty {
                var response = Self.error(405, "\(method) is not allowed on \(path); allowed: \(allowed.joined(separator: ", "))")
                response.headers.append((name: "Allow", value: allowed.joined(separator: ", ")))
                return response
            }
            return Self.error(404, "no admin route \(method) \(path); the routes are POST /__admin/faults, GET /__admin/faults, DELETE /__admin/faults/{id}, GET /__admin/holds[?count=N&timeout_ms=T], POST /__admin/holds/{seq}/release, GET /__admin/requests, POST /__admin/reset")
        }
    }

    // MARK: Faults

    private func addFault(_ request: MockRequest) -> MockResponse {
        if let duplicate = JSONDuplicateKey.first(in: request.body) {
            return Self.error(400, "the body is not a fault rule (the --faults format): \(duplicate); each key may appear once per object")
        }
        do {
            let rule = try JSONDecoder().decode(FaultRule.self, from: request.body)
            let id = backend.addFault(rule)
            return Self.json(201, .object(["id": .number(Double(id.rawValue))]))
        } catch let error as DecodingError {
            return Self.error(400, "the body is not a fault rule (the --faults format): \(Self.describe(error))")
        } catch {
            return Self.error(400, "the body is not a fault rule (the --faults format): \(error)")
        }
    }

    private func listFaults() -> MockResponse {
        let encoder = JSONEncoder()
        let items: [JSONValue] = backend.faults.map { entry in
            let rule = (try? encoder.encode(entry.rule)).flatMap { try? JSONValue.parse($0).value } ?? .null
            return .object(["id": .number(Double(entry.id.rawValue)), "rule": rule])
        }
        return Self.json(200, .object(["faults": .array(items)]))
    }

    private func removeFault(_ text: String) -> MockResponse {
        guard let n = Int(text), n > 0 else { return Self.error(400, "fault id '\(text)' is not a positive whole number") }
        guard backend.removeFault(FaultID(rawValue: n)) else { return Self.error(404, "no fault rule with id \(n)") }
        return Self.json(200, .object(["removed": .number(Double(n))]))
    }

    // MARK: Holds

    private func holdsJSON() -> JSONValue {
        let history = backend.history
        return .array(backend.heldRequests.map { h in
            let entry = h.seq >= 1 && h.seq <= history.count ? history[h.seq - 1] : nil
            let target = h.path + (entry?.query.map { "?" + $0 } ?? "")
            return .object([
                "seq": .number(Double(h.seq)), "hold": .number(Double(h.id.rawValue)), "fault": .number(Double(h.fault.rawValue)),
                "action": .string(h.action),
                "method": .string(h.method), "target": .string(target),
                "label": h.label.map { .string($0) } ?? .null, "user_id": h.userID.map { .string($0) } ?? .null,
            ])
        })
    }

    private func holds(_ request: MockRequest) async -> MockResponse {
        let (query, repeated) = Self.query(request)
        // A sixty-sixth outside tester: `count=1&count=2` was read as one of the two, silently.
        if let repeated { return Self.error(400, "query parameter '\(repeated)' is given more than once") }
        guard let countText = query["count"] else {
            return redacted(Self.json(200, .object(["holds": holdsJSON()])))
        }
        guard let count = Int(countText), count >= 0 else { return Self.error(400, "count must be a whole number >= 0, not '\(countText)'") }
        var timeoutMS = 5000
        if let t = query["timeout_ms"] {
            guard let v = Int(t), v > 0, v <= 600_000 else { return Self.error(400, "timeout_ms must be a whole number from 1 to 600000, not '\(t)'") }
            timeoutMS = v
        }
        let backend = self.backend
        let waitNanoseconds = UInt64(timeoutMS) * 1_000_000
        // Race the wait against a timer; the loser is cancelled. Nothing blocks a thread.
        let reached = await withTaskGroup(of: Bool.self) { group -> Bool in
            group.addTask { await backend.waitForHolds(count); return !Task.isCancelled }
            group.addTask {
                try? await Task.sleep(nanoseconds: waitNanoseconds)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        let holds = holdsJSON()
        // A wait ended by shutdown did not see its count reached: the holds were failed, so 200
        // would say what never happened (a sixtieth outside tester: `{"holds": []}` at SIGTERM).
        if backend.isShutDown { return redacted(Self.json(503, .object(["error": .string("the server is shutting down"), "holds": holds]))) }
        if reached || (holds.arrayValue?.count ?? 0) >= count {
            return redacted(Self.json(200, .object(["holds": holds])))
        }
        return redacted(Self.json(408, .object([
            "error": .string("\(holds.arrayValue?.count ?? 0) of \(count) requests parked within \(timeoutMS) ms"),
            "holds": holds,
        ])))
    }

    private func release(_ text: String, _ request: MockRequest) -> MockResponse {
        guard let seq = Int(text), seq > 0 else { return Self.error(400, "request seq '\(text)' is not a positive whole number") }
        var override: MockResponse?
        if !request.body.isEmpty {
            // The optional override is the `respond` action of a fault rule.
            if let duplicate = JSONDuplicateKey.first(in: request.body) {
                return Self.error(400, "the override is not a response {\"status\", \"headers\", \"json\" | \"body\"}: \(duplicate); each key may appear once per object")
            }
            let wrapped = Data("{\"respond\":".utf8) + request.body + Data("}".utf8)
            do {
                guard case .respond(let status, let headers, let body) = try JSONDecoder().decode(FaultAction.self, from: wrapped) else {
                    return Self.error(400, "the override must be {\"status\", \"headers\", \"json\" | \"body\"}")
                }
                override = MockResponse(status: status, headers: headers.map { ($0.name, $0.value) }, body: body)
            } catch let error as DecodingError {
                return Self.error(400, "the override is not a response {\"status\", \"headers\", \"json\" | \"body\"}: \(Self.describe(error, dropping: 1))")
            } catch {
                return Self.error(400, "the override is not a response {\"status\", \"headers\", \"json\" | \"body\"}: \(error)")
            }
        }
        guard let hold = backend.heldRequests.first(where: { $0.seq == seq }) else {
            let parked = backend.heldRequests.map { String($0.seq) }
            return Self.error(404, "request \(seq) is not parked on a hold; " + (parked.isEmpty ? "no request is parked" : "parked: " + parked.joined(separator: ", ")))
        }
        if hold.isSilentTimeout {
            return Self.error(409, "request \(seq) is silent on a timeout fault, not held: it ends when its client gives up (closes the connection) or at shutdown")
        }
        guard backend.release(hold.id, with: override) else { return Self.error(404, "request \(seq) was released meanwhile") }
        return Self.json(200, .object(["released": .number(Double(seq))]))
    }

    // MARK: Journal and reset

    private func requests() -> MockResponse {
        func headers(_ h: [HeaderField]) -> JSONValue {
            .array(h.map { .object(["name": .string($0.name), "value": .string($0.value)]) })
        }
        let items: [JSONValue] = backend.history.map { e in
            var o: [String: JSONValue] = [
                "seq": .number(Double(e.seq)), "method": .string(e.method),
                "target": .string(e.path + (e.query.map { "?" + $0 } ?? "")),
                "headers": headers(e.headers), "body": .string(String(decoding: e.body, as: UTF8.self)),
                "route": e.route.map { .string($0) } ?? .null, "note": e.note.map { .string($0) } ?? .null,
                "fault": e.fault.map { .number(Double($0.id.rawValue)) } ?? .null,
                "hold": e.hold.map { .number(Double($0.rawValue)) } ?? .null,
                "outcome": e.outcome.map { .string($0) } ?? .null, "cancelled": .bool(e.cancelled),
                "transport_retry_of": e.transportRetryOf.map { .number(Double($0)) } ?? .null,
                "received_at": .string(MockISODate.format(e.receivedAt)),
                "answered_at": e.answeredAt.map { .string(MockISODate.format($0)) } ?? .null,
            ]
            o["response"] = e.response.map { r in
                .object(["status": .number(Double(r.status)), "headers": headers(r.headers), "body": .string(r.bodyText)])
            } ?? .null
            return .object(o)
        }
        return redacted(Self.json(200, .object(["requests": .array(items)])))
    }

    private func reset() -> MockResponse {
        let result = backend.reset(fixtures: startFixtures, faults: startFaults)
        if result == 0 { return Self.json(200, .object(["reset": .bool(true)])) }
        if result < 0 { return Self.error(409, "the backend is shut down") }
        return Self.error(409, "\(result) request(s) still in flight (held: \(backend.heldRequests.count)); release them before reset")
    }

    // MARK: Helpers

    private func redacted(_ r: MockResponse) -> MockResponse {
        var r = r
        r.body = redactor.redact(r.body)
        return r
    }

    private static func json(_ status: Int, _ body: JSONValue) -> MockResponse {
        MockResponse(status: status, headers: [("Content-Type", "application/json")], body: body.serialized())
    }

    private static func error(_ status: Int, _ text: String) -> MockResponse {
        json(status, .object(["error": .string(text)]))
    }

    /// The admin request's query parameters by name, and the first name given more than once
    /// (refused by the caller: which of two counts was meant cannot be told).
    private static func query(_ request: MockRequest) -> (values: [String: String], repeated: String?) {
        var out: [String: String] = [:]
        var repeated: String?
        for pair in (request.rawQuery ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            if out[name] == nil { out[name] = parts.count > 1 ? String(parts[1]).removingPercentEncoding ?? String(parts[1]) : "" }
            else if repeated == nil { repeated = name }
        }
        return (out, repeated)
    }

    /// `at PATH: what was wrong` for a body that does not decode; `dropping` leading coding keys
    /// the body itself does not have (the release override is decoded wrapped in `{"respond": ...}`,
    /// so its `status` is at `$.status` for the caller, not `$.respond.status`: a 73rd outside tester).
    private static func describe(_ error: DecodingError, dropping: Int = 0) -> String {
        func path(_ keys: [CodingKey]) -> String { "$" + keys.dropFirst(dropping).map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined() }
        switch error {
        case .typeMismatch(let type, let c):
            // Foundation words it "Expected to decode Int but found a string instead."
            let found = c.debugDescription.range(of: "but found ").map { String(c.debugDescription[$0.upperBound...]) }
                .map { $0.hasSuffix(" instead.") ? String($0.dropLast(" instead.".count)) : $0 }
            let wanted = type == Int.self ? "a whole number" : type == Double.self ? "a number" : type == String.self ? "a string"
                : type == Bool.self ? "true or false" : "\(type)"
            return "at \(path(c.codingPath)): expected \(wanted)" + (found.map { ", found \($0)" } ?? "")
        case .valueNotFound(let type, let c): return "at \(path(c.codingPath)): expected \(type), found null"
        case .keyNotFound(let key, let c): return "at \(path(c.codingPath)): missing member \"\(key.stringValue)\""
        case .dataCorrupted(let c): return "at \(path(c.codingPath)): \(c.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}
