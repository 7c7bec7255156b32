import Foundation
import ExperimentlyMock

extension Verdict {
    /// The recorded history as the verdict's `timeline`: one object per ``HistoryEvent`` with
    /// its fields (`index`, `step`, `time` in virtual seconds, `kind`, `client`, `label`, `name`,
    /// `detail`, `outcome`, `request`), absent fields left out.
    static func timelineJSON(_ events: [HistoryEvent]) -> JSONValue {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(events), let value = try? JSONValue.parse(data, file: "timeline") else { return .array([]) }
        return value
    }

    /// Reads a verdict written by ``write(to:redacting:)`` back (format `experimently-verdict/1`),
    /// so `contract-harness report` can draw it: scenarios with their checks, tags, durations,
    /// explorations and `timeline`s; other top-level sections (a mutant matrix, `error`) go to
    /// ``extra``.
    ///
    /// - Throws: `ScenarioError` naming `file` and the JSON path when the text is not JSON, the
    ///   format is another, or a field has the wrong type.
    public init(parsing data: Data, file: String) throws {
        let root = try JSONValue.parse(data, file: file)
        func fail(_ path: String, _ expected: String, _ found: JSONValue?) -> ScenarioError {
            ScenarioError(file: file, path: path, expected: expected, found: found.map { "\($0)" }.map { String($0.prefix(80)) } ?? "nothing")
        }
        guard case .object(let top) = root else { throw fail("$", "a verdict object", root) }
        guard top["format"]?.stringValue == Verdict.format else {
            throw fail("$.format", "\"\(Verdict.format)\"", top["format"])
        }
        func number(_ v: JSONValue?) -> Double? { if case .number(let d)? = v { return d } else { return nil } }
        let started = top["started_at"]?.stringValue.flatMap { text -> Date? in
            let f = ISO8601DateFormatter()
            f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return f.date(from: text)
        } ?? Date(timeIntervalSince1970: 0)
        var results: [ScenarioResult] = []
        var invalid: [(file: String, error: String)] = []
        var withHistory = false
        guard case .array(let scenarios)? = top["scenarios"] else { throw fail("$.scenarios", "an array of scenarios", top["scenarios"]) }
        let decoder = JSONDecoder()
        for (i, item) in scenarios.enumerated() {
            let path = "$.scenarios[\(i)]"
            guard case .object(let o) = item, let name = o["name"]?.stringValue, let statusText = o["status"]?.stringValue,
                  let status = ScenarioResult.Status(rawValue: statusText) else {
                throw fail(path, "a scenario with a name and a status (passed, failed, skipped, error, crashed)", item)
            }
            let fileName = o["file"]?.stringValue ?? name
            if o["history_digest"] == nil && status == .error {
                invalid.append((fileName, o["reason"]?.stringValue ?? ""))
                continue
            }
            var checks: [CheckResult] = []
            for (j, c) in (o["checks"]?.arrayValue ?? []).enumerated() {
                guard let checkName = c["name"]?.stringValue, case .bool(let passed)? = c["passed"] else {
                    throw fail("\(path).checks[\(j)]", "a check with a name and passed", c)
                }
                checks.append(CheckResult(name: checkName, passed: passed, message: c["message"]?.stringValue,
                                          history: c["history"]?.arrayValue?.compactMap(\.stringValue)))
            }
            var events: [HistoryEvent] = []
            if let timeline = o["timeline"] {
                guard case .array(let entries) = timeline else { throw fail("\(path).timeline", "an array of history events", timeline) }
                // Each entry on its own, so the error names the entry and its field (a forty-eighth
                // outside tester, L: one bad `index` was reported at `.timeline`, quoting the array).
                for (k, entry) in entries.enumerated() {
                    // The four required fields by name (a decoding error names no field for a
                    // fraction where a whole number goes); what else fails names the entry.
                    let at = "\(path).timeline[\(k)]"
                    for field in ["index", "step"] where !(number(entry[field]).map { $0 == $0.rounded() && abs($0) < 9e15 } ?? false) {
                        throw fail("\(at).\(field)", "a whole number", entry[field])
                    }
                    if number(entry["time"]) == nil { throw fail("\(at).time", "a number (seconds)", entry["time"]) }
                    if entry["kind"]?.stringValue.flatMap(HistoryEvent.Kind.init(rawValue:)) == nil {
                        throw fail("\(at).kind", "a kind of history event (\(HistoryEvent.Kind.allCases.map(\.rawValue).joined(separator: ", ")))", entry["kind"])
                    }
                    do { events.append(try decoder.decode(HistoryEvent.self, from: entry.serialized())) } catch {
                        throw fail(at, "a history event (client, label, name strings; detail, outcome JSON; request a request record)", entry)
                    }
                }
                // A JSON null `detail` or `outcome` decodes as absent; keep it a null, as written.
                for (k, raw) in (timeline.arrayValue ?? []).enumerated() where k < events.count {
                    if raw["detail"] == .null { events[k].detail = .null }
                    if raw["outcome"] == .null { events[k].outcome = .null }
                }
            }
            if o["history"] != nil { withHistory = true }
            var r = ScenarioResult(name: name, file: fileName, tags: o["tags"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                                   source: o["source"]?.stringValue, status: status,
                                   durationMilliseconds: number(o["duration_ms"]) ?? 0, checks: checks,
                                   reason: o["reason"]?.stringValue, smoke: nil, history: [],
                                   historyDigest: o["history_digest"]?.stringValue ?? "")
            r.events = events
            r.stepSummaries = o["steps"]?.arrayValue?.compactMap(\.stringValue) ?? []
            r.exploration = o["exploration"]
            // A crashed scenario's signal and stderr tail, an adapter's stderr: the report shows them.
            r.crash = o["crash"]
            r.adapterStderr = o["adapter_stderr"]?.arrayValue?.compactMap(\.stringValue) ?? []
            results.append(r)
        }
        // A seed past what a run writes (a whole number below 2^64) is named, never converted
        // (a seed of 1e308 stopped `report` with a fatal conversion error: a sixteenth outside tester).
        var seed: UInt64 = 0
        if let v = top["seed"] {
            guard let d = number(v), d >= 0, d < 18_446_744_073_709_551_616, d == d.rounded(.down) else {
                throw fail("$.seed", "a whole number from 0 to 2^64-1", v)
            }
            seed = UInt64(d)
        }
        self.init(harnessVersion: top["harness"]?["version"]?.stringValue ?? "", sdkName: top["sdk_under_test"]?["name"]?.stringValue ?? "",
                  sdkVersion: top["sdk_under_test"]?["version"]?.stringValue ?? "", seed: seed,
                  startedAt: started, durationMilliseconds: number(top["duration_ms"]) ?? 0, results: results, invalid: invalid)
        includesHistory = withHistory
        let known: Set<String> = ["format", "harness", "sdk_under_test", "seed", "started_at", "duration_ms", "counts", "ok", "scenarios",
                                  "sdk", "assign", "flag", "track", "fanout"]
        for (k, v) in top where !known.contains(k) { extra[k] = v }
        if top["ok"] == .bool(false) && ok { extra["ok"] = .bool(false) }
    }
}
