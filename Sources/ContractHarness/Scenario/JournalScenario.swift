import Foundation
import ExperimentlyMock

/// Turns a `serve` journal (format `experimently-journal/1`, `Documentation/CrossSDK.md`, "The
/// journal") into a scenario skeleton (`experimently-scenario/1`) that replays what the journal
/// shows against an SDK driver: `contract-harness scenario --from-journal JOURNAL`.
///
/// What the skeleton holds (`Documentation/CrossSDK.md`, "From a journal to a scenario"):
/// - clients: one per client connection (the journal's `peer`, `address:port`), named
///   `port-N`; one client `main` when the journal has no `peer` or with ``ClientGrouping/one``;
/// - one `do` step per request whose route is an SDK operation of CONTRACT.md section 1
///   (evaluate: `evaluateFlag`, assign: `getAssignment`, keyed track: `trackWithStatus`,
///   batch: `trackBatch`), in arrival (`seq`) order, with the answer the journal recorded as
///   its `expect`; a `clearCache` of that client first when it already asked for the same
///   (user, key), so the SDK sends the request again as the recorded client did;
/// - one fault rule per request a fault hit, added just before that request's step (`match` =
///   method, path and the request's user and key, `when` `{"first": 1}`), with the action rebuilt from the
///   recorded answer: an answer the fault made is a `respond`; holds, delays, timeouts and
///   delayed drops become holds, started `async`, waited for, and released (with the recorded
///   answer when it was not a 2xx, with a transport error when none came) in the order the
///   journal finished them, each followed by its `await`;
/// - every request it could not map (no SDK operation, a body it cannot read) in `description`.
///
/// The config turns the offline fallback off, so an error answer is expected as the error.
/// Errors: ``ScenarioError`` naming the journal file and the JSON path of what is wrong.
public enum JournalScenario {
    /// How requests are attributed to clients.
    public enum ClientGrouping: String, Sendable, CaseIterable {
        /// One client per client connection (`peer`); one client when no entry has a peer.
        case peer
        /// Every request on one client `main`.
        case one
    }

    /// One history entry, as the converter reads it.
    struct Entry {
        var seq: Int
        var position: Int
        var peer: String?
        var method: String
        var rawPath: String
        var query: String?
        var json: JSONValue?
        var faultAction: String?
        var response: (status: Int, headers: [(String, String)], body: Data)?
        var outcome: String?
        var cancelled: Bool
        var receivedAt: String
        var answeredAt: String?
        /// Why the request cannot be mapped whatever it is (its body holds `1e999`), or `nil`.
        var unreadable: String? = nil
        /// The answer's whole size when the journal kept its body only in part (`body_size`):
        /// nothing is concluded from what it says.
        var responseCut: Int? = nil

        var path: String { rawPath.removingPercentEncoding ?? rawPath }
        var label: String { "#\(seq) \(method) \(rawPath)\(query.map { "?" + $0 } ?? "")" }

        /// The decoded query parameters as the backend reads them (`+` a space; the last value
        /// of a repeated name: `PercentDecoding.queryComponent`, `IncomingRequest.query`).
        var queryItems: [String: String] {
            var items: [String: String] = [:]
            for part in (query ?? "").split(separator: "&") {
                let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
                let name = PercentDecoding.queryComponent(pair[0]) ?? pair[0]
                items[name] = pair.count > 1 ? (PercentDecoding.queryComponent(pair[1]) ?? pair[1]) : ""
            }
            return items
        }
    }

    /// The SDK operation a request stands for.
    struct Operation {
        var verb: String
        var arguments: [(String, JSONValue)]
        /// (kind, user, key) for the cache and single-flight: a repeat needs a `clearCache` first.
        var cacheKey: String?
        /// The fault `match` members beyond method and path (the request's user and key).
        var match: [String: JSONValue]
        var expect: JSONValue?
    }

    /// The skeleton as JSON text (one step a line), checked with ``ScenarioParser`` before it is
    /// returned.
    ///
    /// - Parameters:
    ///   - data: the journal's bytes; `file` its name for messages.
    ///   - name: the scenario's name (default `from-journal-<file name>`).
    ///   - fixtures: the fixtures `serve` ran with (`--fixtures`), copied into the skeleton;
    ///     `nil`: the reference set, as `serve` without `--fixtures`.
    /// - Throws: ``ScenarioError`` (file, JSON path) when the journal is not valid JSON, not
    ///   format `experimently-journal/1`, or an entry lacks a field or has one of the wrong kind;
    ///   also when the journal is unfinished (serve still running or killed).
    public static func skeleton(journal data: Data, file: String, name: String? = nil, grouping: ClientGrouping = .peer,
                                fixtures: JSONValue? = nil) throws -> String {
        let root: JSONValue
        // A request body holding a number beyond a double's range (`1e999`, which `serve` accepts
        // and the journal keeps verbatim) cannot be stated in a scenario: that request is listed
        // as not mapped, the rest are converted (an eleventh outside tester: the whole journal was
        // refused, exit 64).
        var huge: [String] = []
        // So is a request whose recorded body has a member name twice, or two canonically
        // equivalent spellings of one (an SDK test about property spelling: `"k\u0301"` and
        // `"\u1e31"`, both kept by the backend): a scenario's parsed object cannot keep them
        // apart. Before, the whole journal was refused (a forty-eighth outside tester, H2).
        var duplicates: [JSONDuplicateKey] = []
        func inAnEntry(_ d: JSONDuplicateKey) -> Bool {
            // The backend's stored events (`state`, which serve writes with both names since H1)
            // are not read here: nothing to list (a fifty-third outside tester, A: serve's own
            // journal was refused).
            if d.path.hasExactPrefix("$.state.") { return true }
            guard d.path.hasExactPrefix("$.history[") else { return false }
            duplicates.append(d)
            return true
        }
        do {
            root = try JSONValue.parse(data, file: file, keepingNonFinite: { huge.append($0) }, keepingDuplicate: inAnEntry)
        } catch var error as ScenarioError {
            if error.path == "$", String(decoding: data.prefix(64), as: UTF8.self).contains("experimently-journal/1") {
                error.append(" (an unfinished journal: serve completes it when it exits on SIGINT or SIGTERM)")
            }
            throw error
        }
        var entries = try read(root, file: file)
        for i in entries.indices where huge.contains(where: { $0.hasExactPrefix("$.history[\(entries[i].position)].") }) {
            entries[i].unreadable = "its body holds a number beyond a double's range (RFC 8259 section 6), which a scenario cannot state"
        }
        // So is one holding an integer beyond ±2^53: Python keeps it exactly, a scenario's numbers
        // are doubles (a fifty-fourth outside tester, M: 9007199254740993 became ...992.0 silently).
        let large = String(decoding: data.prefix(64), as: UTF8.self).contains("experimently-journal/1")
            ? DuplicateKeys.largeIntegers(in: [UInt8](data)) : []
        for i in entries.indices where entries[i].unreadable == nil {
            guard let l = large.first(where: { $0.path.hasExactPrefix("$.history[\(entries[i].position)].json") }) else { continue }
            entries[i].unreadable = "its body holds the integer \(l.text) (\(String(String.UnicodeScalarView(l.path.unicodeScalars.dropFirst("$.history[\(entries[i].position)].".unicodeScalars.count))))), "
                + "beyond 2^53, which Python keeps exactly and a scenario's numbers (doubles) cannot state"
        }
        for i in entries.indices where entries[i].unreadable == nil {
            let entry = "$.history[\(entries[i].position)]."
            guard let d = duplicates.first(where: { $0.path.hasExactPrefix(entry) }) else { continue }
            entries[i].unreadable = "it has " + duplicateReason(d, drop: entry)
        }
        return try build(entries, file: file, name: name ?? defaultName(file), grouping: grouping, fixtures: fixtures)
    }

    /// Why a request with the duplicate `d` cannot be stated: `d`'s kind, the object it is in
    /// (`d.path` with `drop` removed from its front, written after `object`) and the second
    /// spelling escaped, e.g. `two canonically equivalent spellings of one member name in
    /// json.context (the second one "\u1e31")`.
    static func duplicateReason(_ d: JSONDuplicateKey, drop: String, object: String = "") -> String {
        let spelling = d.equivalentOnly ? "two canonically equivalent spellings of one member name" : "a member name written twice"
        let inside = d.path.unicodeScalars.dropFirst(drop.unicodeScalars.count)
        let member = DuplicateKeys.member(d.key).unicodeScalars
        let parent = inside.count >= member.count && inside.suffix(member.count).elementsEqual(member) ? inside.dropLast(member.count) : inside
        return "\(spelling) in \(object)\(String(String.UnicodeScalarView(parent))) (the second one \(JSONValue.asciiJSONText(d.key))), "
            + "which a scenario's object cannot keep apart"
    }

    // MARK: Reading

    static func read(_ root: JSONValue, file: String) throws -> [Entry] {
        func fail(_ path: String, _ expected: String, _ found: JSONValue?) -> ScenarioError {
            ScenarioError(file: file, path: path, expected: expected, found: found.map { ObjectReader.brief($0) } ?? "nothing (the member is missing)")
        }
        guard case .object(let top) = root else { throw fail("$", "a journal object", root) }
        guard top["format"]?.stringValue == "experimently-journal/1" else {
            throw fail("$.format", "\"experimently-journal/1\" (a `contract-harness serve --journal` file)", top["format"])
        }
        guard case .array(let history)? = top["history"] else { throw fail("$.history", "an array of requests", top["history"]) }
        var entries: [Entry] = []
        var firstWithSeq: [Int: Int] = [:]   // seq -> index in history
        for (i, item) in history.enumerated() {
            let at = "$.history[\(i)]"
            guard case .object(let o) = item else { throw fail(at, "a request object", item) }
            func string(_ key: String) throws -> String {
                guard let s = o[key]?.stringValue else { throw fail("\(at).\(key)", "a string", o[key]) }
                return s
            }
            func optionalString(_ key: String) throws -> String? {
                guard let v = o[key] else { return nil }
                guard let s = v.stringValue else { throw fail("\(at).\(key)", "a string", v) }
                return s
            }
            func integer(_ value: JSONValue?, _ path: String) throws -> Int {
                guard let n = value?.numberValue, n == n.rounded(), abs(n) < 1e15 else { throw fail(path, "an integer", value) }
                return Int(n)
            }
            var entry = Entry(seq: try integer(o["seq"], "\(at).seq"), position: i, peer: try optionalString("peer"),
                              method: try string("method"), rawPath: try string("path"), query: try optionalString("query"),
                              json: o["json"], faultAction: nil, response: nil, outcome: try optionalString("outcome"),
                              cancelled: false, receivedAt: try string("received_at"), answeredAt: try optionalString("answered_at"))
            // A request that carried no API key was answered 401 for that alone: an SDK always sends
            // its key, so no operation of one reproduces it (an eleventh outside tester: the skeleton
            // expected a 401 no correct SDK can meet). Headers the journal does not list say nothing.
            // Only a 401 is so explained: a request a route answers without a key is still mapped.
            if case .array(let fields)? = o["headers"], !fields.isEmpty, o["response"]?["status"]?.numberValue == 401,
               !fields.contains(where: { $0["name"]?.stringValue?.lowercased() == "x-api-key" }) {
                entry.unreadable = "it was sent without an X-API-Key header (answered 401); an SDK always sends its key, so no operation reproduces it"
            }
            // A body `serve` kept only in part (its first bytes, `body_size` and `body_md5`): the
            // operation cannot be rebuilt from it. Before, a cut 100-event batch read as "the body has
            // no events" and a 130-event call replayed as 30 (an outside tester).
            if let size = o["body_size"] {
                guard let n = size.numberValue, n == n.rounded(), n >= 0 else { throw fail("\(at).body_size", "a whole number of bytes", size) }
                entry.unreadable = "its body of \(Int(n)) bytes was journaled only in part (serve keeps the first --journal-body-bytes of a longer body, its size and MD5), so the operation it stands for cannot be rebuilt; record with a larger serve --journal-body-bytes (up to 1048576)"
            }
            if let c = o["cancelled"] {
                guard case .bool(let b) = c else { throw fail("\(at).cancelled", "true or false", c) }
                entry.cancelled = b
            }
            if let f = o["fault"] {
                guard let action = f["action"]?.stringValue else { throw fail("\(at).fault.action", "the fault's action kind (a string)", f["action"] ?? f) }
                entry.faultAction = action
            }
            if let r = o["response"] {
                guard case .object(let ro) = r else { throw fail("\(at).response", "a response object", r) }
                let status = try integer(ro["status"], "\(at).response.status")
                // What no journal `serve` wrote holds, named here at its journal path rather than
                // later as the skeleton's fault (exit 70 "internal fault"; a sixteenth outside tester).
                guard (200...599).contains(status) else {
                    throw fail("\(at).response.status", "a final HTTP status from 200 to 599 (RFC 9110 section 15)", ro["status"])
                }
                var headers: [(String, String)] = []
                if let h = ro["headers"] {
                    guard case .array(let list) = h else { throw fail("\(at).response.headers", "an array of {name, value}", h) }
                    for (j, field) in list.enumerated() {
                        guard let n = field["name"]?.stringValue, let v = field["value"]?.stringValue else {
                            throw fail("\(at).response.headers[\(j)]", "{\"name\": string, \"value\": string}", field)
                        }
                        // RFC 9110 section 5.5: no CR, LF, NUL or other control character (tab allowed in a value).
                        if n.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
                            || v.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }) {
                            throw fail("\(at).response.headers[\(j)]", "a header without control characters (RFC 9110 section 5.5)", field)
                        }
                        headers.append((n, v))
                    }
                }
                var body = Data()
                if let b = ro["body"] {
                    guard let text = b.stringValue, let decoded = Data(base64Encoded: text) else {
                        throw fail("\(at).response.body", "base64 text", b)
                    }
                    body = decoded
                }
                entry.response = (status, headers, body)
                if let size = ro["body_size"] {
                    guard let n = size.numberValue, n == n.rounded(), n >= 0 else { throw fail("\(at).response.body_size", "a whole number of bytes", size) }
                    entry.responseCut = Int(n)
                }
            }
            // `seq` numbers requests in arrival order, each once (a journal `serve` wrote never
            // repeats one); the skeleton names its faults and labels by it.
            if let earlier = firstWithSeq[entry.seq] {
                throw fail("\(at).seq", "a request number used once ($.history[\(earlier)] has it too)", o["seq"])
            }
            firstWithSeq[entry.seq] = i
            entries.append(entry)
        }
        return entries
    }

    static func defaultName(_ file: String) -> String {
        let base = URL(fileURLWithPath: file).deletingPathExtension().lastPathComponent.lowercased()
        let kebab = base.unicodeScalars.map { ("a"..."z").contains($0) || ("0"..."9").contains($0) ? String($0) : "-" }.joined()
        let trimmed = kebab.split(separator: "-").joined(separator: "-")
        return "from-journal" + (trimmed.isEmpty ? "" : "-" + trimmed)
    }

    // MARK: Mapping

    /// The operation `e` stands for, or why there is none.
    static func operation(_ e: Entry) -> Result<Operation, Reason> {
        if let unreadable = e.unreadable { return .failure(Reason(unreadable)) }
        let path = e.path
        let evaluate = "/api/v1/feature-flags/evaluate/"
        func user(_ id: String, context: JSONValue?) -> JSONValue {
            // An empty context is `{}` on the wire, an absent one is left out (CONTRACT.md section
            // 1): `attributes: {}` keeps the difference (an eleventh outside tester: it was dropped).
            if case .object(let c)? = context { return .object(["id": .string(id), "attributes": .object(c)]) }
            return .string(id)
        }
        if path.hasExactPrefix(evaluate), ["GET", "POST"].contains(e.method) {
            let flag = String(path.unicodeScalars.dropFirst(evaluate.unicodeScalars.count))
            let id: String?
            var context: JSONValue?
            if e.method == "GET" {
                id = e.queryItems["user_id"]
                if let c = e.queryItems["context"] {
                    // A name written twice, or in two canonically equivalent spellings, cannot be
                    // stated: listed, as such a body is (a fifty-third outside tester, E: one name
                    // was dropped and the other given its value, silently).
                    if let d = JSONDuplicateKey.first(in: Data(c.utf8)) {
                        return .failure(Reason("its context query has " + duplicateReason(d, drop: "$", object: "context")))
                    }
                    context = try? JSONValue.parse(Data(c.utf8)).value
                }
            } else {
                id = e.json?["user_id"]?.stringValue
                context = e.json?["context"]
            }
            guard let id, !flag.isEmpty else { return .failure(Reason("no flag key or user_id")) }
            // An SDK keeping to the contract sends only `user_id` on evaluate (CONTRACT.md section 1),
            // so a replay would ask without this context and get another answer where a rule reads
            // it (a fifty-fourth outside tester, L: the skeleton failed the shipping SDK).
            if let c = context?.objectValue, !c.isEmpty {
                return .failure(Reason("it sends a context on evaluate (\(ObjectReader.brief(.object(c)))), which an SDK keeping to the contract "
                                       + "never does (CONTRACT.md section 1: only user_id), so no evaluateFlag replays it"))
            }
            let match: [String: JSONValue] = e.method == "GET" ? ["query": .object(["user_id": .string(id)])] : ["body": .object(["user_id": .string(id)])]
            return .success(Operation(verb: "evaluateFlag", arguments: [("flag", .string(flag)), ("user", user(id, context: context))],
                                      cacheKey: "flag\u{0}\(id)\u{0}\(flag)", match: match, expect: expectFlag(e)))
        }
        if path.isExactly("/api/v1/tracking/assign"), e.method == "POST" {
            guard let key = e.json?["experiment_key"]?.stringValue, let id = e.json?["user_id"]?.stringValue else {
                return .failure(Reason("the body has no experiment_key and user_id"))
            }
            return .success(Operation(verb: "getAssignment", arguments: [("experiment", .string(key)), ("user", user(id, context: e.json?["context"]))],
                                      cacheKey: "experiment\u{0}\(id)\u{0}\(key)",
                                      match: ["body": .object(["user_id": .string(id), "experiment_key": .string(key)])], expect: expectAssignment(e)))
        }
        if path.isExactly("/api/v1/tracking/track"), e.method == "POST" {
            guard let json = e.json, let event = event(json) else { return .failure(Reason("the body is not an event with user_id and event_name")) }
            var match: [String: JSONValue] = [:]
            if let u = json["user_id"] { match["body"] = .object(["user_id": u]) }
            return .success(Operation(verb: "trackWithStatus", arguments: [("event", event)], cacheKey: nil, match: match,
                                      expect: .object(["value": .bool(succeeded(e))])))
        }
        if path.isExactly("/api/v1/tracking/batch"), e.method == "POST" {
            guard case .array(let list)? = e.json?["events"], !list.isEmpty else { return .failure(Reason("the body has no events")) }
            let events = list.compactMap(event)
            guard events.count == list.count else { return .failure(Reason("an event without user_id or event_name")) }
            var ok = succeeded(e)
            if ok, let body = responseJSON(e), let failures = body["failure_count"]?.numberValue, failures > 0 { ok = false }
            // Its `failure_count` is unknown when the answer was journaled only in part.
            let unknown = ok && e.responseCut != nil
            return .success(Operation(verb: "trackBatch", arguments: [("events", .array(events))], cacheKey: nil, match: [:],
                                      expect: unknown ? nil : .object(["value": .bool(ok)])))
        }
        switch path {
        case "/health": return .failure(Reason("a health check, no SDK operation"))
        case "/api/v1/sdk/ruleset": return .failure(Reason("the local-evaluation ruleset (a server-side SDK), no operation of CONTRACT.md section 1"))
        case "/api/v1/tracking/assign/batch": return .failure(Reason("a batch assignment (a server-side SDK), no operation of CONTRACT.md section 1"))
        default:
            if path.hasExactPrefix("/api/v1/tracking/assignments/") || path.hasExactPrefix("/api/v1/feature-flags/user/") {
                return .failure(Reason("a list read the contract's SDK answers from its cache (getAssignments/getEvaluatedFlags send no request)"))
            }
            return .failure(Reason("no SDK operation sends \(e.method) \(path)"))
        }
    }

    /// Why a request has no step.
    struct Reason: Error { let text: String; init(_ text: String) { self.text = text } }

    /// A wire event (`event_type`, `event_name`, `user_id`, keys, `value`, `metadata`) as a
    /// scenario event; `timestamp` is left to the SDK.
    static func event(_ json: JSONValue) -> JSONValue? {
        guard let user = json["user_id"]?.stringValue, let name = json["event_name"]?.stringValue else { return nil }
        var o: [String: JSONValue] = ["user": .string(user), "name": .string(name)]
        if let t = json["event_type"]?.stringValue, !t.isExactly(name) { o["type"] = .string(t) }
        if let k = json["experiment_key"]?.stringValue { o["experiment"] = .string(k) }
        if let k = json["feature_flag_key"]?.stringValue { o["flag"] = .string(k) }
        if case .number? = json["value"] { o["value"] = json["value"] }
        if case .object(let m)? = json["metadata"], !m.isEmpty { o["properties"] = .object(m) }
        return .object(o)
    }

    static func succeeded(_ e: Entry) -> Bool { e.outcome == "respond" && (e.response.map { (200..<300).contains($0.status) } ?? false) }

    static func responseJSON(_ e: Entry) -> JSONValue? {
        guard let body = e.response?.body, !body.isEmpty else { return nil }
        return try? JSONValue.parse(body).value
    }

    /// The expectation of an evaluate or assign from its recorded answer; nil when the client
    /// cancelled it (the SDK under test gives no outcome to compare).
    static func expectation(_ e: Entry, notFound: String, value: ([String: JSONValue]) -> JSONValue?) -> JSONValue? {
        if e.cancelled { return nil }
        // A 2xx answer journaled only in part says nothing certain (its value, or that it was
        // unreadable): no expectation. Before, a 5 KB configuration became "decodingError".
        if e.responseCut != nil, e.outcome == "respond", let r = e.response, (200..<300).contains(r.status) { return nil }
        guard e.outcome == "respond", let r = e.response else { return .object(["error": .string("networkError")]) }
        if r.status == 404 { return .object(["error": .string(notFound)]) }
        guard (200..<300).contains(r.status) else { return .object(["error": .string("serverError"), "status": .number(Double(r.status))]) }
        guard case .object(let o)? = responseJSON(e), let v = value(o) else { return .object(["error": .string("decodingError")]) }
        return .object(["value": v])
    }

    static func expectFlag(_ e: Entry) -> JSONValue? {
        expectation(e, notFound: "flagNotFound") { o in
            guard let key = o["key"]?.stringValue, case .bool(let enabled)? = o["enabled"] else { return nil }
            return .object(["key": .string(key), "enabled": .bool(enabled)])
        }
    }

    static func expectAssignment(_ e: Entry) -> JSONValue? {
        expectation(e, notFound: "experimentNotFound") { o in
            guard let name = o["variant_name"]?.stringValue, let user = o["user_id"]?.stringValue else { return nil }
            var v: [String: JSONValue] = ["user_id": .string(user), "variant_name": .string(name)]
            for key in ["experiment_key", "variant_id", "is_control", "assigned"] { if let x = o[key], x != .null { v[key] = x } }
            return .object(v)
        }
    }

    /// The fault action that gives the recorded answer when the request is not parked.
    static func respondAction(_ e: Entry) -> JSONValue? {
        switch e.outcome {
        case "respond"?:
            // An answer journaled only in part cannot be given again as it was.
            guard let r = e.response, e.responseCut == nil else { return nil }
            return .object(["respond": response(r)])
        case "drop_before_response"?: return .object(["drop_before_response": .object([:])])
        case "drop_mid_body"?:
            return .object(["drop_mid_body": .object(["body_bytes": .number(Double(max(0, (e.response?.body.count ?? 2) / 2)))])])
        default: return nil
        }
    }

    /// `{"status", "json" | "body", "headers"?}` of a recorded answer (headers only those the
    /// SDK reads besides the body: `Retry-After`, and `Content-Type` when it is not JSON).
    static func response(_ r: (status: Int, headers: [(String, String)], body: Data)) -> JSONValue {
        var o: [String: JSONValue] = ["status": .number(Double(r.status))]
        var headers: [String: JSONValue] = [:]
        let contentType = r.headers.first { $0.0.caseInsensitiveCompare("Content-Type") == .orderedSame }?.1
        if let json = try? JSONValue.parse(r.body).value, !r.body.isEmpty, contentType?.lowercased().hasPrefix("application/json") ?? true {
            o["json"] = json
        } else {
            o["body"] = .string(String(decoding: r.body, as: UTF8.self))
            if let contentType { headers["Content-Type"] = .string(contentType) }
        }
        if let retry = r.headers.first(where: { $0.0.caseInsensitiveCompare("Retry-After") == .orderedSame })?.1 { headers["Retry-After"] = .string(retry) }
        if !headers.isEmpty { o["headers"] = .object(headers) }
        return .object(o)
    }

    // MARK: Building

    static let parkingActions: Set<String> = ["hold", "delay", "timeout", "delay_then_drop"]

    static func build(_ all: [Entry], file: String, name: String, grouping: ClientGrouping, fixtures: JSONValue?) throws -> String {
        let entries = all.sorted { $0.seq < $1.seq }
        var notes: [String] = []
        var mapped: [(Entry, Operation)] = []
        for e in entries {
            switch operation(e) {
            case .success(let op): mapped.append((e, op))
            case .failure(let reason): notes.append("\(e.label): \(reason.text)")
            }
        }
        // Clients: by connection when the journal records it.
        var ports: [String] = []
        if grouping == .peer {
            for (e, _) in mapped { if let p = e.peer, !ports.containsExactly(p) { ports.append(p) } }
        }
        let multi = ports.count > 1
        func client(_ e: Entry) -> String? {
            guard multi, let p = e.peer else { return nil }
            return "port-" + (p.split(separator: ":").last.map(String.init) ?? p)
        }
        var clientNames: [String] = []
        for (e, _) in mapped { if let c = client(e), !clientNames.containsExactly(c) { clientNames.append(c) } }
        if multi, mapped.contains(where: { $0.0.peer == nil }) { clientNames.append("main") }

        var steps: [[(String, JSONValue)]] = []
        var seenKeys: Set<ExactKey> = []
        var faults = 0, holds = 0, clears = 0
        // The holds to release, in the order the journal finished them (its array order).
        let releaseOrder = mapped.filter { parkingActions.contains($0.0.faultAction ?? "") }
            .sorted { a, b in
                switch (a.0.answeredAt, b.0.answeredAt) {
                case (nil, nil): return a.0.seq < b.0.seq
                case (nil, _): return false
                case (_, nil): return true
                default: return a.0.position < b.0.position
                }
            }
        var pendingReleases = releaseOrder
        var started: Set<Int> = []

        func releaseSteps(before time: String?) {
            while let next = pendingReleases.first, started.contains(next.0.seq) {
                if let time, let answered = next.0.answeredAt, answered > time { break }
                if time != nil, next.0.answeredAt == nil { break }
                pendingReleases.removeFirst()
                let (e, op) = next
                var release: [(String, JSONValue)] = [("release", .string("f\(e.seq)"))]
                if e.outcome == "respond", let r = e.response, !(200..<300).contains(r.status) {
                    release.append(("response", response(r)))
                } else if e.outcome != "respond" {
                    release.append(("transport_error", .bool(true)))
                    if e.outcome == nil { notes.append("\(e.label): never answered (released at the end with a transport error)") }
                }
                steps.append(release)
                var wait: [(String, JSONValue)] = [("await", .string("r\(e.seq)"))]
                if let x = op.expect { wait.append(("expect", x)) }
                steps.append(wait)
            }
        }

        for (e, op) in mapped {
            releaseSteps(before: e.receivedAt)
            let who = client(e) ?? (multi ? "main" : nil)
            var clientArgument: [(String, JSONValue)] = []
            if let who { clientArgument = [("client", .string(who))] }
            if let key = op.cacheKey {
                let k = ExactKey((who ?? "") + "\u{0}" + key)
                if seenKeys.contains(k) {
                    steps.append([("do", .string("clearCache"))] + clientArgument)
                    clears += 1
                }
                seenKeys.insert(k)
            }
            // The match of a fault for this request (added just before it, so its first match).
            var match: [String: JSONValue] = ["method": .string(e.method), "path": .string(e.rawPath)]
            for (k, v) in op.match { match[k] = v }
            let parked = parkingActions.contains(e.faultAction ?? "")
            if let action = e.faultAction {
                let rule: JSONValue?
                if parked {
                    rule = .object(["hold": .object([:])])
                    if action != "hold" { notes.append("\(e.label): its \(action) fault is a hold here, released where the journal finished it") }
                } else {
                    rule = respondAction(e)
                    if rule == nil { notes.append("\(e.label): its \(action) fault gave no answer to copy; no fault") }
                }
                if let rule {
                    steps.append([("fault", .object(["match": .object(match), "when": .object(["first": .number(1)]), "action": rule])),
                                  ("id", .string("f\(e.seq)"))])
                    faults += 1
                }
            }
            if e.cancelled { notes.append("\(e.label): the client cancelled it; no expectation") }
            if let size = e.responseCut, op.expect == nil, !e.cancelled {
                notes.append("\(e.label): its answer of \(size) bytes was journaled only in part; no expectation")
            }
            var step: [(String, JSONValue)] = [("do", .string(op.verb))] + clientArgument + op.arguments
            if parked {
                steps.append(step + [("as", .string("r\(e.seq)")), ("async", .bool(true))])
                steps.append([("wait_for", .object(["held": .string("f\(e.seq)"), "count": .number(1)]))])
                holds += 1
            } else {
                if let x = op.expect { step.append(("expect", x)) }
                steps.append(step)
            }
            started.insert(e.seq)
        }
        releaseSteps(before: nil)

        let clientsPhrase = multi ? "\(clientNames.count) clients (one per client connection: merge those that were one SDK client)" : "one client"
        func count(_ n: Int, _ thing: String) -> String { "\(n) \(thing)\(n == 1 ? "" : "s")" }
        var description = "Skeleton from the serve journal \(URL(fileURLWithPath: file).lastPathComponent): \(mapped.count) of \(count(entries.count, "request")) as SDK operations in arrival order on \(clientsPhrase), the recorded answers as expectations, \(count(faults, "fault rule")) rebuilt from the answers they gave, \(count(holds, "hold")) released in the order the journal finished them"
        if clears > 0 { description += ", \(count(clears, "clearCache step")) where the recorded client asked again for what it had asked before" }
        description += ". Edit it to state what the SDK should have done."
        if !notes.isEmpty { description += " Not mapped: " + notes.joined(separator: "; ") + "." }

        var top: [(String, JSONValue)] = [
            ("format", .string("experimently-scenario/1")), ("name", .string(name)), ("description", .string(description)),
            ("tags", .array([.string("from-journal")])), ("source", .string("serve journal \(URL(fileURLWithPath: file).lastPathComponent)")),
        ]
        if let fixtures { top.append(("fixtures", fixtures)) }
        top.append(("config", .object(["offline_fallback": .bool(false)])))
        if multi {
            top.append(("clients", .object(Dictionary(uniqueKeysWithValues: clientNames.map { ($0, JSONValue.object(["store": .string($0)])) }))))
        }
        guard !steps.isEmpty else {
            throw ScenarioError(file: file, path: "$.history", expected: "at least one request of an SDK operation (evaluate, assign, track, batch)",
                                found: entries.isEmpty ? "no requests" : "only requests no SDK operation sends: " + notes.joined(separator: "; "))
        }
        var text = "{\n"
        for (k, v) in top { text += "  " + JSONValue.string(k).jsonText + ": " + ascii(v.jsonText) + ",\n" }
        text += "  \"steps\": [\n"
        text += steps.map { step in "    {" + step.map { JSONValue.string($0.0).jsonText + ": " + ascii($0.1.jsonText) }.joined(separator: ", ") + "}" }
            .joined(separator: ",\n")
        // Tracking calls are judged too (chunks, fan-out): else a skeleton whose only calls track,
        // one of them without an expectation (its answer journaled in part), judged nothing.
        let tracks = steps.contains { step in step.contains { $0.0 == "do" && ["track", "trackWithStatus", "trackBatch"].contains($0.1.stringValue ?? "") } }
        let checks = ["stickiness", "single_flight", "no_stale_write"] + (tracks ? ["batch_chunking", "fan_out"] : [])
        text += "\n  ],\n  \"checks\": [" + checks.map { "\"\($0)\"" }.joined(separator: ", ") + "]\n}\n"
        return text
    }

    /// JSON text with every non-ASCII scalar escaped (`\u00e9`, surrogate pairs above the BMP), so
    /// no editor can normalise an identity's spelling (NFC and NFD stay distinct users).
    static func ascii(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar.isASCII { out.unicodeScalars.append(scalar); continue }
            for unit in String(scalar).utf16 { out += String(format: "\\u%04x", unit) }
        }
        return out
    }
}
