import Foundation
import ExperimentlyMock

/// The JSON verdict of a run (format `experimently-verdict/1`, documented in `Documentation/Verdict.md`).
///
/// Top-level keys `sdk`, `assign`, `flag`, `track` and `fanout` are the contract-smoke fields of
/// CONTRACT.md section 7, filled from the smoke scenario, so tooling that reads the smoke line
/// reads the verdict too. API keys never appear in it.
public struct Verdict: Sendable {
    /// The format tag.
    public static let format = "experimently-verdict/1"

    /// The harness's version.
    public var harnessVersion: String
    /// The SDK under test (the smoke `sdk` field).
    public var sdkName: String
    /// The SDK's version.
    public var sdkVersion: String
    /// The run's seed.
    public var seed: UInt64
    /// When the run started (ISO-8601 UTC).
    public var startedAt: Date
    /// Wall time of the whole run, milliseconds.
    public var durationMilliseconds: Double
    /// Every scenario run, in order.
    public var results: [ScenarioResult]
    /// Scenario files that could not be read or parsed (`file`, `error`).
    public var invalid: [(file: String, error: String)]
    /// Extra sections written by other commands (e.g. a mutant matrix), by key.
    public var extra: [String: JSONValue] = [:]
    /// Whether each scenario entry lists its whole recorded history (`run --history`).
    public var includesHistory = false

    /// Creates a verdict.
    public init(harnessVersion: String, sdkName: String, sdkVersion: String, seed: UInt64, startedAt: Date,
                durationMilliseconds: Double, results: [ScenarioResult], invalid: [(file: String, error: String)]) {
        self.harnessVersion = harnessVersion
        self.sdkName = sdkName
        self.sdkVersion = sdkVersion
        self.seed = seed
        self.startedAt = startedAt
        self.durationMilliseconds = durationMilliseconds
        self.results = results
        self.invalid = invalid
    }

    /// Counts by status.
    public var counts: (passed: Int, failed: Int, skipped: Int, error: Int) {
        (results.filter { $0.status == .passed }.count, results.filter { $0.status == .failed }.count,
         results.filter { $0.status == .skipped }.count, results.filter { $0.status == .error }.count + invalid.count)
    }

    /// Scenarios whose worker process died or passed its hard deadline (status `crashed`).
    public var crashedCount: Int { results.filter { $0.status == .crashed }.count }

    /// The verdict as a JSON value.
    public var json: JSONValue {
        let c = counts
        var root: [String: JSONValue] = [
            "format": .string(Self.format),
            "harness": .object(["name": .string("contract-harness"), "version": .string(harnessVersion)]),
            "sdk_under_test": .object(["name": .string(sdkName), "version": .string(sdkVersion)]),
            "seed": .number(Double(seed)),
            "started_at": .string(Self.iso(startedAt)),
            "duration_ms": .number((durationMilliseconds * 1000).rounded() / 1000),
            "counts": .object(["total": .number(Double(results.count + invalid.count)), "passed": .number(Double(c.passed)),
                               "failed": .number(Double(c.failed)), "skipped": .number(Double(c.skipped)), "error": .number(Double(c.error)),
                               "crashed": .number(Double(crashedCount))]),
            // A run that passed nothing (every scenario skipped) is not green; neither is one still in progress.
            "ok": .bool(okByCounts),
            "scenarios": .array(results.map { Self.json($0, history: includesHistory) } + invalid.map { item in
                .object(["file": .string(item.file), "name": .string((item.file as NSString).lastPathComponent),
                         "status": .string("error"), "reason": .string(item.error), "duration_ms": .number(0), "checks": .array([])])
            }),
        ]
        let smoke = results.first { $0.smoke != nil }?.smoke
        root["sdk"] = .string(sdkName)
        for key in ["assign", "flag", "track", "fanout"] { root[key] = smoke?[key] ?? .null }
        for (k, v) in extra { root[k] = v }
        return .object(root)
    }

    static func json(_ r: ScenarioResult, history: Bool) -> JSONValue {
        var o: [String: JSONValue] = [
            "name": .string(r.name), "file": .string(r.file), "status": .string(r.status.rawValue),
            "duration_ms": .number((r.durationMilliseconds * 1000).rounded() / 1000),
            "tags": .array(r.tags.map(JSONValue.string)),
            "checks": .array(r.checks.map { check in
                var c: [String: JSONValue] = ["name": .string(check.name), "passed": .bool(check.passed)]
                if let m = check.message { c["message"] = .string(m) }
                if let h = check.history { c["history"] = .array(h.map(JSONValue.string)) }
                return .object(c)
            }),
            "history_digest": .string(r.historyDigest),
            "history_events": .number(Double(r.history.count)),
        ]
        if let s = r.source { o["source"] = .string(s) }
        if let reason = r.reason { o["reason"] = .string(reason) }
        if let exploration = r.exploration { o["exploration"] = exploration }
        if let crash = r.crash { o["crash"] = crash }
        if !r.adapterStderr.isEmpty { o["adapter_stderr"] = .array(r.adapterStderr.map(JSONValue.string)) }
        // The recorded history's lines (the request numbers and indices failure slices cite);
        // the digest stays over the canonical form.
        if history { o["history"] = .array((r.events.isEmpty ? r.history : r.events).map { .string($0.line) }) }
        // The structured history a report is drawn from: always for a failing or crashed scenario
        // (a crashed one's history up to the death is what its maintainer needs: an eighty-first
        // outside tester, F3).
        if (history || r.status == .failed || r.status == .crashed), !r.events.isEmpty {
            o["timeline"] = timelineJSON(r.events)
            if !r.stepSummaries.isEmpty { o["steps"] = .array(r.stepSummaries.map(JSONValue.string)) }
        }
        return .object(o)
    }

    static func iso(_ date: Date) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: date)
    }

    /// `true` when the verdict's `ok` is true: nothing failed or errored, something passed (or
    /// there were no scenario results, as in `vectors` and `mutants` verdicts), unless an `ok`
    /// in ``extra`` says otherwise.
    public var ok: Bool {
        // As `json` writes it (`extra` may set "ok"), without building every scenario's JSON.
        if let given = extra["ok"] { return given == .bool(true) }
        return okByCounts
    }

    /// Green by the counts: nothing failed, errored or crashed, not in progress, and something
    /// passed (a run that passed nothing, every scenario skipped, is not green).
    private var okByCounts: Bool {
        let c = counts
        return c.failed == 0 && c.error == 0 && crashedCount == 0 && extra["in_progress"] == nil && (results.isEmpty || c.passed > 0)
    }

    /// Pretty JSON bytes with sorted keys, every spelling of every secret (API key) replaced by
    /// `***` (``SecretRedactor``: raw, percent-, form- and JSON-escaped, byte-exact).
    public func data(redacting secrets: [String]) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        // Secrets are taken out of the string values before encoding, never out of the encoded
        // text: an API key "1" or "true" replaced in the text made a verdict that was no JSON
        // (`"passed" : ***`), and "sdk" renamed its member `sdk` (an eightieth outside tester, F3).
        let redactor = SecretRedactor(secrets: secrets)
        func clean(_ v: JSONValue) -> JSONValue {
            switch v {
            case .string(let s): return .string(redactor.redact(s))
            case .array(let a): return .array(a.map(clean))
            case .object(let o): return .object(o.mapValues(clean))
            default: return v
            }
        }
        let value = redactor.isEmpty ? json : clean(json)
        return (try? encoder.encode(value)).map { $0 + Data("\n".utf8) } ?? Data("\n".utf8)
    }

    /// Writes the verdict atomically (a temporary file renamed over `path`), so a reader never
    /// sees half a verdict.
    ///
    /// - Throws: the file system's error when the directory is not writable.
    public func write(to path: String, redacting secrets: [String]) throws {
        try data(redacting: secrets).writeOutput(to: path)
    }
}
