import Foundation
import ExperimentlyMock

/// The swim-lane layout of one scenario's recorded history, shared by the HTML and Mermaid
/// renderers: which lane each event belongs to, which request each answer closes, and which
/// events each failing check cites.
struct ReportTimeline {
    /// A lane: the virtual clock, the reference app (`app(nil)`: the `app` section's; one more
    /// per other client running an app), one per client, the mock backend.
    enum Lane: Equatable, Hashable {
        case clock, app(String?), client(String), mock

        /// The lane's id (`data-lane` in the HTML, the Mermaid participant).
        var title: String {
            switch self {
            case .clock: return "virtual clock"
            case .app(nil): return "reference app"
            case .app(let name?): return "app on \(name)"
            case .client(let name): return "client \(name)"
            case .mock: return "mock backend"
            }
        }

        /// The lane's heading in the HTML report: what its events are.
        var caption: String {
            switch self {
            case .clock: return "virtual clock"
            case .app(nil): return "reference app"
            case .app(let name?): return "reference app on client \(name)"
            case .client(let name): return "SDK client \(name)"
            case .mock: return "mock backend: received, held, released, answered"
            }
        }
    }

    /// One failing check, the history indices it cites, and the index of the last event before it
    /// was decided (where its note goes).
    ///
    /// A named check (`no_stale_write`, ...) cites the events of its slice. A step's check
    /// (`step N ...`) carries the last events before it as context, so it cites only the events
    /// of its own step (else the last of its slice), and its note goes after the step's events.
    struct Citation {
        let number: Int
        let check: CheckResult
        let indices: [Int]
        let anchor: Int?
    }

    let events: [HistoryEvent]
    let lanes: [Lane]
    /// Clients running an app other than the `app` section's (their markers carry `"app"`).
    let otherApps: [String]
    let citations: [Citation]
    /// One line per step of the scenario (``ScenarioResult/stepSummaries``), empty when unknown.
    let stepSummaries: [String]
    /// The scenario's checks, passed or not.
    let checks: [CheckResult]

    /// Lays out `result`'s recorded history (`events`).
    init(_ result: ScenarioResult) {
        events = result.events
        stepSummaries = result.stepSummaries
        checks = result.checks
        var clients: [String] = []
        var others: [String] = []
        for e in events where e.kind == .marker {
            if case .string(let name)? = e.detail?["app"], !others.containsExactly(name) { others.append(name) }
        }
        otherApps = others
        var hasApp = false
        for e in events {
            // An app marker that clears the SDK cache (logout, undo) is drawn on its client's lane too.
            if let c = e.request?.client ?? (Self.isApp(e) && Self.clearedClient(e) == nil ? nil : e.client),
               !clients.contains(where: { $0.unicodeScalars.elementsEqual(c.unicodeScalars) }) {
                clients.append(c)
            }
            if Self.isApp(e), !others.containsExactly(e.client ?? "") { hasApp = true }
        }
        lanes = [.clock] + (hasApp ? [.app(nil)] : []) + others.map { Lane.app($0) } + clients.map(Lane.client) + [.mock]
        var found: [Citation] = []
        let events = self.events
        for check in result.checks where !check.passed {
            let slice = (check.history ?? []).compactMap(Self.citedIndex)
            // The requests its message names (`request #4`, `batches #2 and #3`) and their answers.
            let seqs = Self.namedRequests(check.message ?? "")
            let named = events.filter { e in e.kind != .marker && e.kind != .invoke && e.kind != .complete && e.request.map { seqs.contains($0.seq) } == true }.map(\.index)
            if let step = Self.stepNumber(check.name) {
                // A step's check with no events of its own cites what its message names, or
                // nothing (its note stands at the step's place): never an unrelated earlier event.
                let own = slice.filter { i in events.first { $0.index == i }?.step == step }
                let anchor = events.last { $0.step <= step }?.index
                found.append(Citation(number: found.count + 1, check: check, indices: own.isEmpty ? named : own, anchor: anchor))
            } else if check.name == "operations finish" || check.name == "lifecycle" {
                found.append(Citation(number: found.count + 1, check: check, indices: named.isEmpty ? Array(slice.suffix(1)) : named, anchor: events.last?.index))
            } else {
                let cited = Array(Set(slice + named)).sorted()
                found.append(Citation(number: found.count + 1, check: check, indices: cited, anchor: cited.max()))
            }
        }
        citations = found
    }

    /// The request numbers a check's message names: every `#N` (`request #4`, `batches #2 and #3`).
    static func namedRequests(_ message: String) -> Set<Int> {
        var seqs: Set<Int> = []
        var rest = Substring(message)
        while let hash = rest.firstIndex(of: "#") {
            rest = rest[rest.index(after: hash)...]
            let digits = rest.prefix { $0.isASCII && $0.isNumber }
            if let n = Int(digits) { seqs.insert(n) }
        }
        return seqs
    }

    /// N of a check named `step N ...`.
    static func stepNumber(_ name: String) -> Int? {
        guard name.hasPrefix("step ") else { return nil }
        return Int(name.dropFirst(5).prefix { $0.isNumber })
    }

    /// The index an `[N] ...` history line cites, if it starts so.
    static func citedIndex(_ line: String) -> Int? {
        guard line.hasPrefix("["), let close = line.firstIndex(of: "]") else { return nil }
        return Int(line[line.index(after: line.startIndex)..<close])
    }

    /// The client whose SDK cache the reference app cleared at this marker (a `logout` clears
    /// it, CONTRACT.md section 8; an `undo` clears what a discarded answer may have cached), or nil.
    static func clearedClient(_ e: HistoryEvent) -> String? {
        guard e.kind == .marker, let c = e.client, ["logout", "undo"].contains(e.name ?? "") else { return nil }
        return c
    }

    /// The text drawn on the client's lane where the app cleared its cache.
    static func clearText(_ e: HistoryEvent) -> String {
        let from = e.detail?["from"]?.stringValue.map { " of \($0)" } ?? ""
        return e.name == "logout" ? "clearCache: logout\(from)" : "clearCache: app undo"
    }

    /// `true` for what the reference app did: its operations (`app.*`) and its markers.
    static func isApp(_ e: HistoryEvent) -> Bool {
        switch e.kind {
        case .invoke, .complete: return (e.name ?? "").hasPrefix("app.")
        case .marker: return e.client != nil
        case .request, .response: return false
        }
    }

    /// The lane an event is drawn in (a request or answer: its client's lane; the arrow goes to the mock).
    func lane(of e: HistoryEvent) -> Lane {
        switch e.kind {
        case .invoke, .complete:
            return Self.isApp(e) ? appLane(e) : .client(e.client ?? "?")
        case .request, .response:
            return .client(e.request?.client ?? e.client ?? "?")
        case .marker:
            if e.client != nil { return appLane(e) }
            switch e.name {
            case "advance": return .clock
            case "cancel":
                let op = events.first { $0.kind == .invoke && $0.label == e.label }
                return op.map { lane(of: $0) } ?? .mock
            default: return .mock
            }
        }
    }

    /// The lane of an app event: its own app's when its client runs an app other than the
    /// `app` section's, else the reference app's.
    func appLane(_ e: HistoryEvent) -> Lane {
        if let client = e.client, otherApps.containsExactly(client) { return .app(client) }
        return .app(nil)
    }

    /// The index (in `events`) of the answer to the request at `i`, when there is one.
    func answer(to i: Int) -> Int? {
        guard events[i].kind == .request, let seq = events[i].request?.seq, seq > 0 else { return nil }
        return events[(i + 1)...].firstIndex { $0.kind == .response && $0.request?.seq == seq }
    }

    /// The index of the completion of the operation invoked at `i`.
    func completion(of i: Int) -> Int? {
        guard events[i].kind == .invoke, let label = events[i].label else { return nil }
        return events[(i + 1)...].firstIndex { $0.kind == .complete && $0.label == label }
    }

    /// The citations that cite the event at history index `index`.
    func citing(_ index: Int) -> [Citation] { citations.filter { $0.indices.contains(index) } }

    /// A short text for an event in its lane: an operation by its name, key and user (and its
    /// label), a request by seq, method and path (and how it was parked), an answer by seq and
    /// what it answered (after a release when it was held).
    static func text(_ e: HistoryEvent) -> String {
        switch e.kind {
        case .invoke:
            return "▶ \(operation(e))\(labelled(e))"
        case .complete:
            let name = (e.name ?? "").hasPrefix("app.") ? String((e.name ?? "").dropFirst(4)) : (e.name ?? "")
            return "■ \(name)\(labelled(e)) → \(e.outcome.map(brief) ?? "")"
        case .request:
            guard let r = e.request else { return "request" }
            var s = "#\(r.seq) \(r.method) \(shortPath(r.path).visible)"
            if let u = r.users.first { s += " user=\(u.visible)" }
            switch (r.fault, e.detail?["parked"]?.stringValue) {
            case (let f?, "hold"?): s += ", held by fault \(f)"
            case (let f?, let how?): s += ", fault \(f): \(how)"
            case (let f?, nil): s += ", fault \(f)"
            case (nil, let how?): s += ", \(how)"
            case (nil, nil): break
            }
            return s
        case .response:
            guard let r = e.request else { return "answer" }
            let what = r.cancelled ? "cancelled by the client" : r.status.map { "answered \($0)" } ?? "no answer (connection dropped)"
            let body = r.cancelled ? nil : answerBrief(r)
            return "#\(r.seq) \(what)\(body.map { " \($0)" } ?? "") (\(r.method) \(shortPath(r.path))\(r.fault.map { ", fault \($0)" } ?? ""))"
        case .marker:
            if e.name == "release", let fault = e.detail?["fault"]?.stringValue {
                let count = e.detail?["count"].map { $0 == .null ? "all" : short($0) } ?? "1"
                let noun = count == "1" ? "request" : "requests"
                return "released \(count) \(noun) held by fault \(fault)"
            }
            // An app call's end: its number and the SDK's outcome in brief (`AppCalls`).
            if e.name == "returned", case .number(let n)? = e.detail?["call"] {
                return "returned call \(Int(n))" + (e.detail?["outcome"].map { " → \(brief($0))" } ?? "")
            }
            return "\(e.name ?? "marker")" + (e.detail.map { $0 == .null ? "" : " \(brief($0))" } ?? "")
        }
    }

    /// What an answer's body says in a few words, or nil when it has none: an assignment's
    /// `variant_name`, an evaluation's `enabled`/`value`, a batch's success and failure counts, an
    /// error's `detail` (its `msg`s for a 422).
    static func answerBrief(_ r: RequestRecord) -> String? {
        guard let body = r.response else { return nil }
        var parts: [String] = []
        if !r.succeeded {
            switch body["detail"] {
            case .string(let d)?: parts.append("detail=\(d)")
            case .array(let issues)?: parts.append("detail=" + issues.compactMap { $0["msg"]?.stringValue }.joined(separator: "; "))
            default: if let e = body["error"] { parts.append("error=\(short(e))") }
            }
        } else {
            for key in ["variant_name", "enabled", "value", "success_count", "failure_count"] {
                if let v = body[key], v != .null { parts.append("\(key)=\(short(v))") }
            }
        }
        guard !parts.isEmpty else { return nil }
        let text = "→ " + parts.joined(separator: " ")
        return text.count > 70 ? String(text.prefix(69)) + "…" : text
    }

    /// The answer's body for a hover: its JSON, at most 400 characters.
    static func answerBody(_ r: RequestRecord) -> String? {
        guard let body = r.response else { return nil }
        let text = body.jsonText
        return "body: " + (text.count > 400 ? String(text.prefix(399)) + "…" : text)
    }

    /// ` as LABEL` unless the label only repeats the operation's name.
    static func labelled(_ e: HistoryEvent) -> String {
        guard let label = e.label, !label.isEmpty else { return "" }
        let name = e.name ?? ""
        return label.isExactly(name) || ("app." + label).isExactly(name) ? "" : " as \(label.visible)"
    }

    /// `/api/v1/...` without its prefix.
    static func shortPath(_ path: String) -> String { path.hasPrefix("/api/v1/") ? String(path.dropFirst(7)) : path }

    /// An operation as `name key user=U`: `getAssignment sdk_contract_ab user=user-1`,
    /// `track page_view user=u`, `app.login user=user-1`.
    static func operation(_ e: HistoryEvent) -> String {
        var s = e.name ?? "operation"
        guard case .object(let o)? = e.detail else { return s }
        for key in ["flag", "experiment", "key"] { if let k = o[key] { s += " \(short(k))" } }
        if case .object(let event)? = o["event"] {
            if let n = event["name"] { s += " \(short(n))" }
            if let k = event["experiment"] ?? event["flag"] { s += " key=\(short(k))" }
            if let u = event["user"] { s += " user=\(short(u))" }
        }
        if case .array(let events)? = o["events"] { s += " \(events.count) events" }
        if let u = o["user"] { s += " user=\(short(u["id"] ?? u))" }
        if let n = o["name"] { s += " \(short(n))" }
        return s
    }

    /// A value in at most 60 characters: an outcome's `value`/`error` unwrapped, objects compacted.
    static func brief(_ v: JSONValue) -> String {
        var v = v
        if case .object(let o) = v, o.count == 1, let inner = o["value"] { v = inner }
        var text: String
        switch v {
        case .string(let s): text = s
        case .object(let o):
            // The fields a reader looks for first.
            let keys = ["error", "kind", "variant_name", "enabled", "shown", "identity", "revision", "fault", "count", "user", "flag", "experiment", "name"]
            let picked = keys.compactMap { k in o[k].map { "\(k)=\(short($0))" } }
            text = picked.isEmpty ? v.jsonText : picked.joined(separator: " ")
        default: text = v.jsonText
        }
        return text.count > 60 ? String(text.prefix(59)) + "…" : text
    }

    static func short(_ v: JSONValue) -> String {
        // Identities drawn so that two different ones never look the same (`String.visible`).
        if case .string(let s) = v { return s.visible }
        return v.jsonText
    }
}
