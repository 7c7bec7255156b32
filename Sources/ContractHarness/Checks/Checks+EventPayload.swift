import Foundation
import ExperimentlyMock

extension Checks {
    /// Every event object the SDK sends (a `/track` body, each entry of a `/batch`) carries what a
    /// tracking call of the runner gave for that user and event name (CONTRACT.md section 1, event
    /// object): `event_type` is the call's `eventType`, else its name; `value` and `metadata` (the
    /// properties) are there exactly when given, and equal; `timestamp` is there exactly when given,
    /// written as ISO-8601 UTC with milliseconds and `Z`, naming the given instant to the
    /// millisecond (cut or rounded: within 1 ms); and no member beyond those section 1 lists
    /// (`eventMembers`). A request is judged against the calls of its
    /// client with that user and name running when it arrived; when none ran (the reference
    /// app's event, one nobody asked for) the other checks judge it, and while an app `event` of
    /// the client runs too, an event matching no call may be the app's. A fanned-out entry carries
    /// the keys the cache gave it (`fan_out` judges those). Identity is exact: users and names by Unicode
    /// scalars. A sixth outside tester: an example SDK sent `...:20.000Z` for 20.9996 s and no
    /// check looked.
    static func eventPayload(_ c: CheckContext) -> [(String, [String])] {
        // Each call's events with the window it ran in (history indices) and its client: a request
        // is judged against the calls of its client running when it arrived, so each call's own
        // events are compared with what it gave (a seventh outside tester: judged against any call
        // of the user and name, an SDK repeating the first call's fields passed).
        var completes: [ExactKey: Int] = [:]
        for e in c.history where e.kind == .complete { if let label = e.label, completes[ExactKey(label)] == nil { completes[ExactKey(label)] = e.index } }
        var given: [String: [(event: JSONValue, client: String?, from: Int, to: Int)]] = [:]   // exact user \0 exact name
        var appEvents: [(client: String?, from: Int, to: Int)] = []
        var runnerCalls: [(client: String?, from: Int, to: Int)] = []
        for e in c.history where e.kind == .invoke {
            let to = e.label.flatMap { completes[ExactKey($0)] } ?? Int.max
            if e.name == "app.event" { appEvents.append((e.client, e.index, to)); continue }
            guard ["track", "trackWithStatus", "trackBatch"].contains(e.name ?? "") else { continue }
            runnerCalls.append((e.client, e.index, to))
            let events: [JSONValue]
            if e.name == "trackBatch" { if case .array(let a)? = e.detail { events = a } else { events = [] } } else { events = [e.detail ?? .null] }
            for event in events {
                guard case .string(let user)? = event["user"], case .string(let name)? = event["name"] else { continue }
                given[exact(user) + "\0" + exact(name), default: []].append((event, e.client, e.index, to))
            }
        }
        var problems: [(String, [String])] = []
        // (A 301 to 303 followed with a GET and no body is left out of `c.requests`: the stack's
        // copy, not a tracking or assign request of the SDK's: `CheckContext.redirectCopies`.)
        for (event, record) in c.requests {
            if let wrong = Self.misshapen(record) {
                problems.append(("request #\(record.seq) is \(record.method) \(record.path) \(wrong) (CONTRACT.md section 1)", c.slice(around: [event.index], radius: 1)))
                continue
            }
            let wire: [JSONValue]
            switch record.path {
            case "/api/v1/tracking/track": wire = record.body.map { [$0] } ?? []
            case "/api/v1/tracking/batch": wire = record.events
            default: continue
            }
            // The calls running when this request arrived, per user and name (found once per request).
            var running: [String: [(event: JSONValue, client: String?, from: Int, to: Int)]] = [:]
            var nextCandidate: [String: Int] = [:]
            var used: Set<String> = []
            for sent in wire {
                // Only the members CONTRACT.md section 1 gives the event object: an SDK adding its
                // own (a `variant_id` from the cached assignment) passed every named check, failing
                // only scenarios that assert whole bodies (a seventieth outside tester, F7).
                if case .object(let members) = sent {
                    let extra = members.keys.filter { !Self.eventMembers.containsExactly($0) }.sorted { $0.unicodeScalars.lexicographicallyPrecedes($1.unicodeScalars) }
                    if !extra.isEmpty {
                        problems.append(("request #\(record.seq) sends " + extra.map { "'\(Attribution.show($0))'" }.joined(separator: ", ")
                                         + " in an event of user \(Attribution.show(sent["user_id"]?.stringValue ?? "?")), which the event object does not have: "
                                         + "event_type, event_name, user_id and, when set, experiment_key, feature_flag_key, value, metadata, timestamp (CONTRACT.md section 1)",
                                         c.slice(around: [event.index], radius: 1)))
                    }
                }
                if let stamp = sent["timestamp"], stamp != .null, Self.isoMillisSeconds(stamp) == nil {
                    problems.append(("request #\(record.seq) sends the timestamp \(stamp) for user \(Attribution.show(sent["user_id"]?.stringValue ?? "?")), which is no ISO-8601 UTC time with milliseconds and Z (CONTRACT.md section 1)",
                                     c.slice(around: [event.index], radius: 1)))
                    continue
                }
                let appRan = appEvents.contains { $0.client.isExactly(record.client) && $0.from < event.index && event.index < $0.to }
                // A `/track` sent while only runner calls of the client ran is one of theirs: its user
                // and name must be one a call gave (a seventh outside tester: an SDK dropping
                // `event_name` or sending another `user_id` passed every named check). Batches are
                // attributed by `fan_out`.
                let ownedByRunner = record.path == "/api/v1/tracking/track" && !appRan
                    && runnerCalls.contains { $0.client.isExactly(record.client) && $0.from < event.index && event.index < $0.to }
                guard case .string(let user)? = sent["user_id"], case .string(let name)? = sent["event_name"] else {
                    if ownedByRunner, problems.count < 10 {
                        problems.append(("request #\(record.seq) sends an event without a string `user_id` and `event_name` (CONTRACT.md section 1, event object): \(sent)",
                                         c.slice(around: [event.index], radius: 1)))
                    }
                    continue
                }
                let key = exact(user) + "\0" + exact(name)
                let calls = running[key] ?? {
                    let found = (given[key] ?? []).filter { $0.client.isExactly(record.client) && $0.from < event.index && event.index < $0.to }
                    running[key] = found
                    return found
                }()
                // No call of that user and name ran then: an event of the reference app or one
                // nobody asked for (`fan_out` judges that), unless the runner's calls own it.
                guard !calls.isEmpty else {
                    if ownedByRunner, problems.count < 10 {
                        problems.append(("request #\(record.seq) sends event '\(Attribution.show(name))' of user \(Attribution.show(user)), which no tracking call running then gave (CONTRACT.md section 1, event object)",
                                         c.slice(around: [event.index], radius: 1)))
                    }
                    continue
                }
                // A match ends the search (a seventh outside tester: comparing with every call and
                // writing each difference was quadratic, and 1,000 events of one call ran 30 s).
                // Searched from the call after the last match: an SDK sends a batch's events in order.
                // A keyed event given is sent once, so within a request it matches once (an eighth
                // outside tester: a batch repeating its first event's fields passed); an unkeyed
                // one is fanned out to several entries, each with its fields.
                let start = nextCandidate[key] ?? 0
                if let hit = (calls.indices.map { (start + $0) % calls.count }).first(where: { i in
                    let keyed = calls[i].event["experiment"] != nil || calls[i].event["flag"] != nil
                    return !(keyed && used.contains(key + "\0\(i)")) && Self.payloadDifferences(sent: sent, given: calls[i].event, stopAtFirst: true).isEmpty
                }) {
                    nextCandidate[key] = hit + 1
                    used.insert(key + "\0\(hit)")
                    continue
                }
                // An app `event` of the client ran then too: the event may be the app's own.
                if appRan { continue }
                guard problems.count < 10 else { continue }
                let closest = calls.prefix(8).map { Self.payloadDifferences(sent: sent, given: $0.event) }.min { $0.count < $1.count } ?? []
                let what = closest.isEmpty ? "the fields of an event this request already carried, which its call gave once" : closest.joined(separator: "; ")
                problems.append(("request #\(record.seq) sends event '\(Attribution.show(name))' of user \(Attribution.show(user)) with "
                                 + what + " (CONTRACT.md section 1, event object)",
                                 c.slice(around: [event.index], radius: 1)))
            }
        }
        return problems + assignContexts(c)
    }

    /// Where a `Location` header sent with a 3xx answer to the request target `target` points: its
    /// decoded path and query (the last value of a repeated name, `+` a space, as `RequestRecord`
    /// reads them); `nil` when it is no URL. An absolute URL's origin is ignored (the mock serves
    /// every origin it is reached at).
    static func redirectTarget(_ location: String, from target: String) -> (path: String, query: [String: String])? {
        guard let base = URL(string: "http://mock" + target), let url = URL(string: location, relativeTo: base),
              let parts = URLComponents(url: url.absoluteURL, resolvingAgainstBaseURL: false) else { return nil }
        return (parts.path, RequestRecord.decodedQuery(parts.percentEncodedQuery))
    }

    /// What is wrong with the shape of a tracking or assign request, or nil: each is a `POST` with
    /// a JSON object body (`/track` an event object, `/batch` `{"events": [...]}`, `/assign`
    /// `experiment_key` and `user_id` texts), CONTRACT.md section 1. Before, a `/track` with no
    /// body passed `event_payload` (nothing to compare), and so did an HTTP stack that followed a
    /// 307 re-sending a POST without its body (a seventy-sixth outside tester, F3). A 301 to 303
    /// followed as a bodyless GET is the stack's copy and never reaches here
    /// (`CheckContext.redirectCopies`).
    static func misshapen(_ record: RequestRecord) -> String? {
        let path = record.path
        guard ["/api/v1/tracking/track", "/api/v1/tracking/batch", "/api/v1/tracking/assign"].contains(path) else { return nil }
        let body: String
        switch path {
        case "/api/v1/tracking/track": body = "an event object"
        case "/api/v1/tracking/batch": body = "{\"events\": [...]}"
        default: body = "{\"experiment_key\", \"user_id\", \"context\"?}"
        }
        guard record.method == "POST" else { return "where the SDK sends POST with \(body)" }
        guard case .object? = record.body else {
            // A body that is there but no JSON object (not JSON, duplicate keys) is judged elsewhere.
            return record.body == nil && record.bodyEmpty == true ? "with no body, where the SDK sends \(body)" : nil
        }
        switch path {
        case "/api/v1/tracking/batch":
            guard case .array? = record.body?["events"] else { return "whose body has no \"events\" array, where the SDK sends \(body)" }
        case "/api/v1/tracking/assign":
            guard record.body?["experiment_key"]?.stringValue != nil, record.body?["user_id"]?.stringValue != nil else {
                return "whose body lacks a text experiment_key or user_id, where the SDK sends \(body)"
            }
        default: break
        }
        return nil
    }

    /// Each `/assign` request carries no member but `experiment_key`, `user_id` and `context`, and
    /// as `context` the attributes the `getAssignment` calls of its
    /// client, user and experiment pending when it arrived gave, when they all gave the same:
    /// exactly that object, or none (absent or `null`) when they gave none (CONTRACT.md section 1:
    /// `context = user.attributes`, omitted when nil); the reference app's calls give none. A
    /// request while no such call ran is judged by the other checks.
    /// Before, an SDK sending a user's previous attributes with a call that gave none (a stale
    /// context after identify: an exposure the backend's targeting must refuse) passed every
    /// named check (a thirty-seventh outside tester, F7).
    static func assignContexts(_ c: CheckContext) -> [(String, [String])] {
        let completes = firstCompletions(c)
        var calls: [(client: String, user: String, experiment: String, attributes: JSONValue?, from: Int, to: Int)] = []
        for e in c.history where e.kind == .invoke {
            guard let t = lookupTarget(e), t.kind == "experiment" else { continue }
            let attributes = present(e.detail?["user"]?["attributes"])
            calls.append((t.client, t.user, t.key, attributes, e.index, e.label.flatMap { completes[ExactKey($0)]?.index } ?? Int.max))
        }
        // The reference app's displays call getAssignment with no attributes (an outside tester:
        // a stale context on the app's calls passed while app clients were skipped).
        for client in c.scenario.app == nil ? [] : c.scenario.appClients {
            guard let settings = c.scenario.appSettings(client: client) else { continue }
            for call in AppCalls(history: c.history, client: client, initialIdentity: settings.initialUser).calls where call.sdk == "getAssignment" {
                calls.append((client, call.identity, settings.experiment, nil, call.start, call.end))
            }
        }
        guard !calls.isEmpty else { return [] }
        var problems: [(String, [String])] = []
        for (event, record) in c.requests where record.path == "/api/v1/tracking/assign" && problems.count < 10 {
            guard let client = record.client, let body = record.body, case .object(let members) = body,
                  case .string(let user)? = body["user_id"], case .string(let experiment)? = body["experiment_key"] else { continue }
            // The body has experiment_key, user_id and context only (CONTRACT.md section 1), as
            // an event object has only its own members (`eventMembers`).
            let extra = members.keys.filter { !["experiment_key", "user_id", "context"].containsExactly($0) }
                .sorted { $0.unicodeScalars.lexicographicallyPrecedes($1.unicodeScalars) }
            if !extra.isEmpty {
                problems.append(("request #\(record.seq) for experiment '\(Attribution.show(experiment))' of user '\(Attribution.show(user))' sends "
                                 + extra.map { "'\(Attribution.show($0))'" }.joined(separator: ", ")
                                 + ", which the assign body does not have: experiment_key, user_id and, when there are attributes, context (CONTRACT.md section 1)",
                                 c.slice(around: [event.index], radius: 1)))
            }
            let pending = calls.filter { $0.client.isExactly(client) && $0.user.isExactly(user) && $0.experiment.isExactly(experiment)
                && $0.from < event.index && event.index < $0.to }
            guard let first = pending.first, pending.allSatisfy({ $0.attributes == first.attributes }) else { continue }
            let sent = present(body["context"])
            guard sent != first.attributes else { continue }
            let gave = first.attributes.map { "the attributes \($0.jsonText)" } ?? "no attributes"
            problems.append(("request #\(record.seq) for experiment '\(Attribution.show(experiment))' of user '\(Attribution.show(user))' sends "
                             + (sent.map { "the context \($0.jsonText)" } ?? "no context") + " where the call gave \(gave) "
                             + "(CONTRACT.md section 1: the assign body's context is the user's attributes, omitted when there are none)",
                             c.slice(around: [event.index], radius: 1)))
        }
        return problems
    }

    /// Whether `millis` (whole milliseconds since 1970) writes the instant `seconds` to the
    /// millisecond: the instant cut or raised (rounded is one of the two), and only itself when it
    /// is a whole millisecond. The fraction is taken apart from the whole seconds (`t - floor(t)`
    /// is exact in a double), so `t * 1000`'s own rounding never decides: a window of a
    /// millisecond either side accepted `.001Z` for 1700000000 s, and a microsecond tolerance
    /// rejected the cut `.000Z` for 1700000000.000999 s (the nineteenth and twentieth outside
    /// testers). The instant as a Foundation `Date` holds it is the SDK's too: `Date` keeps seconds
    /// since 2001, and the round trip can move an instant before 1985 by a tenth of a microsecond
    /// (86400.88 s comes back just under `.880`, cut `.879Z`: a twenty-first outside tester); no
    /// tolerance, the round trip itself.
    static func millisecondOf(_ seconds: Double, is millis: Double) -> Bool {
        func writes(_ t: Double) -> Bool {
            let whole = t.rounded(.down)
            let fraction = (t - whole) * 1000
            let base = whole * 1000
            return millis == base + fraction.rounded(.down) || millis == base + fraction.rounded(.up)
        }
        return writes(seconds) || writes(Date(timeIntervalSince1970: seconds).timeIntervalSince1970)
    }

    /// The members of an event object (CONTRACT.md section 1), compared by Unicode scalars.
    static let eventMembers: [String] = ["event_type", "event_name", "user_id", "experiment_key", "feature_flag_key", "value", "metadata", "timestamp"]

    /// How the event object `sent` differs from the event a call gave (`given`, as the history's
    /// invoke records it: `name`, `event_type`, `value`, `properties`, `timestamp` in seconds).
    static func payloadDifferences(sent: JSONValue, given: JSONValue, stopAtFirst: Bool = false) -> [String] {
        var out: [String] = []
        func differs(_ text: @autoclosure () -> String) -> Bool {
            out.append(stopAtFirst ? "" : text())
            return stopAtFirst
        }
        let type = given["event_type"] ?? given["name"] ?? .null
        if sent["event_type"].map({ $0 != type }) ?? true, differs("event_type \(sent["event_type"]?.description ?? "absent") where the call gave \(type)") { return out }
        switch (present(sent["value"]), present(given["value"])) {
        case (nil, nil): break
        // Equal as doubles: JSON carries a double exactly (the shortest text that reads back as
        // it, in Swift, Python, Go and JavaScript alike), so any difference is the SDK's (an
        // outside tester's SDK cut values to 10 digits and passed under a 1e-9 tolerance).
        case (.number(let a)?, .number(let b)?) where a == b: break
        case (let a, let b): if differs("value \(a?.description ?? "absent") where the call gave \(b?.description ?? "none")") { return out }
        }
        if present(sent["metadata"]) != present(given["properties"]),
           differs("metadata \(present(sent["metadata"])?.description ?? "absent") where the call gave properties \(present(given["properties"])?.description ?? "none")") { return out }
        switch (present(sent["timestamp"]), present(given["timestamp"])) {
        case (nil, nil): break
        case (let a?, .number(let t)?):
            if let s = isoMillisSeconds(a), Self.millisecondOf(t, is: (s * 1000).rounded()) { break }
            _ = differs("timestamp \(a) where the call gave \(t) s, \(isoMillisText(t)) to the millisecond")
        case (let a, let b):
            _ = differs("timestamp \(a?.description ?? "absent") where the call gave \(b.map { "\($0) s" } ?? "none")")
        }
        return out
    }

    /// The seconds since 1970 an ISO-8601 UTC time with milliseconds and `Z` names
    /// (`2023-11-14T22:13:20.999Z`; a year of four digits: scenarios give years 0000-9999), or
    /// `nil` for anything else.
    static func isoMillisSeconds(_ value: JSONValue) -> Double? {
        guard case .string(let text) = value else { return nil }
        let u = Array(text.utf8)
        guard u.count >= 24, u.last == UInt8(ascii: "Z") else { return nil }
        let y = u.count - 20   // digits of the year
        func num(_ from: Int, _ count: Int) -> Int64? {
            var v: Int64 = 0
            for i in from..<(from + count) { guard (48...57).contains(u[i]) else { return nil }; v = v * 10 + Int64(u[i] - 48) }
            return v
        }
        let marks: [(Int, UInt8)] = [(y, 45), (y + 3, 45), (y + 6, 84), (y + 9, 58), (y + 12, 58), (y + 15, 46)]
        guard y == 4, marks.allSatisfy({ u[$0.0] == $0.1 }),
              let year = num(0, y), let month = num(y + 1, 2), let day = num(y + 4, 2), let hour = num(y + 7, 2),
              let minute = num(y + 10, 2), let second = num(y + 13, 2), let millis = num(y + 16, 3),
              (1...12).contains(month), day >= 1, hour < 24, minute < 60, second < 60 else { return nil }
        // A day the month has (an eighth outside tester: 2023-11-31 was read as 2023-12-01).
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays: [Int64] = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard day <= monthDays[Int(month) - 1] else { return nil }
        // Days from the civil date (proleptic Gregorian; H. Hinnant's days_from_civil).
        let yy = month <= 2 ? year - 1 : year
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return Double(days * 86_400 + hour * 3600 + minute * 60 + second) + Double(millis) / 1000
    }

    /// `seconds` since 1970 as ISO-8601 UTC with milliseconds (cut) and `Z`, for messages (by
    /// arithmetic: H. Hinnant's civil_from_days; no formatter per message).
    static func isoMillisText(_ seconds: Double) -> String {
        let millis = Int64((seconds * 1000).rounded(.down))
        var days = millis / 86_400_000, ms = millis % 86_400_000
        if ms < 0 { ms += 86_400_000; days -= 1 }
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func pad(_ v: Int64, _ w: Int) -> String { let t = String(v); return String(repeating: "0", count: max(0, w - t.count)) + t }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(ms / 3_600_000, 2)):\(pad(ms / 60_000 % 60, 2)):\(pad(ms / 1000 % 60, 2)).\(pad(ms % 1000, 3))Z"
    }
}
