import Foundation
import ExperimentlyMock

/// The wire between `contract-harness run` (the supervisor) and its worker processes
/// (`contract-harness __worker`): versioned JSON Lines, one record per line, in the manner of
/// swift-testing's ABI JSON stream: `{"version": 1, "kind": KIND, "payload": {...}}`.
///
/// Supervisor to worker (standard input): `job` (a `WorkerJob`). Worker to supervisor (its
/// standard output; anything else the worker prints goes to its standard error): `hello` (a
/// `WorkerHello`, once at start) and `result` (a `WorkerResult` per job; a passing result with
/// nothing to report but its digest comes as the smaller `passed` record, `passedLine`). A worker reads jobs until
/// its standard input ends, then exits 0. A reader refuses a record whose `version` it does not
/// know and ignores kinds it does not know.
enum WorkerProtocol {
    /// The record format's version.
    static let version = 1

    /// One line of the stream.
    struct Record<Payload: Codable & Sendable>: Codable, Sendable {
        var version: Int
        var kind: String
        var payload: Payload
    }

    /// Only the envelope, to pick the payload's type.
    struct Envelope: Decodable {
        var version: Int
        var kind: String
    }

    /// `job` as sent to a worker whose previous job had the scenario text `previous`: with an
    /// empty `scenario` and `sameScenario` when the texts are the same bytes.
    static func slimmed(_ job: WorkerJob, previous: String?) -> WorkerJob {
        guard let previous, !job.scenario.isEmpty, previous.utf8.elementsEqual(job.scenario.utf8) else { return job }
        var slim = job
        slim.scenario = ""
        slim.sameScenario = true
        return slim
    }

    /// A record as one line of JSON bytes, newline included.
    static func line<P: Codable & Sendable>(_ kind: String, _ payload: P) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = (try? encoder.encode(Record(version: version, kind: kind, payload: payload))) ?? Data()
        data.append(0x0A)
        return data
    }

    /// A `job` record line: the same record as `line("job", job)`, with the scenario's text
    /// encoded once per distinct text (an exploration sends one file with every schedule; encoding
    /// its text per job was half of the supervisor's time).
    static func jobLine(_ job: WorkerJob) -> Data {
        var rest = job
        rest.scenario = ""
        let line = self.jobRecord(rest) ?? self.line("job", rest)
        // A slimmed job (`sameScenario`, the common case of an exploration) has no text to splice:
        // before, it went the whole way through `JSONEncoder` again.
        if job.scenario.isEmpty { return line }
        // With sorted keys the empty scenario is written `"scenario":""` once (a quote inside
        // another string is escaped, so these bytes can only be the key and its value).
        guard !job.scenario.isEmpty, let text = encodedText(job.scenario), let range = line.range(of: Data(#""scenario":"""#.utf8)) else {
            return self.line("job", job)
        }
        var spliced = line
        spliced.replaceSubrange(range, with: Data(#""scenario":"#.utf8) + text)
        return spliced
    }

    /// A `job` record line written with `JSONValue`: the same bytes as `line("job", job)` (keys
    /// sorted, absent optionals left out), without Foundation's `JSONEncoder` (it and `JSONDecoder`
    /// were a tenth of an exploration's CPU time); `nil` when a number would not survive a double
    /// (`WorkerJob.json`).
    static func jobRecord(_ job: WorkerJob) -> Data? {
        guard let payload = job.json else { return nil }
        var line = JSONValue.object(["version": .number(Double(version)), "kind": .string("job"), "payload": payload]).serialized()
        line.append(0x0A)
        return line
    }

    /// The job of a `job` record line, read with `JSONValue`; `nil` when the line is not a
    /// current-version `job` record this reader can take (the caller then tries `record`, whose
    /// `JSONDecoder` reads every number `Codable` writes, and reports what is wrong).
    static func job(from line: Data) -> WorkerJob? {
        guard let root = (try? JSONValue.parse(line, maxDepth: 8))?.value, root["version"]?.numberValue == Double(version),
              root["kind"]?.stringValue.map({ $0.unicodeScalars.elementsEqual("job".unicodeScalars) }) == true,
              let payload = root["payload"] else { return nil }
        return WorkerJob(json: payload)
    }

    /// The last scenario text and its JSON string encoding (quotes included). Behind a
    /// `HarnessLocked` (pool slots send jobs from several threads).
    private static let lastEncoded = HarnessLocked<(text: String, json: Data)?>(nil)

    /// `text` as a JSON string, as `line` writes it (`nil` if it cannot be encoded).
    private static func encodedText(_ text: String) -> Data? {
        if let last = lastEncoded.withLock({ $0 }), last.text.utf8.elementsEqual(text.utf8) { return last.json }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let json = try? encoder.encode(text) else { return nil }
        lastEncoded.withLock { $0 = (text, json) }
        return json
    }

    /// A passing result with nothing but its name, file, duration and history digest (a slimmed
    /// schedule or matrix result: `WorkerCommand.slimmed`) as a `passed` record line,
    /// `{"version":1,"kind":"passed","payload":{"duration_ms":D,"file":F,"history_digest":H,"id":N,"name":S}}`,
    /// written with `JSONValue` (Foundation's `JSONEncoder` and `JSONDecoder` were a tenth of an
    /// exploration's CPU time, most of it on these records); `nil` when `result` has anything more
    /// or the worker retires (then a `result` record carries it whole).
    static func passedLine(id: Int, _ result: ScenarioResult, retire: Bool?) -> Data? {
        guard retire == nil, result.status == .passed, !result.infeasible, !result.infeasibleByChoice, result.checks.isEmpty, result.history.isEmpty,
              result.events.isEmpty, result.stepSummaries.isEmpty, result.tags.isEmpty, result.source == nil, result.reason == nil,
              result.smoke == nil, result.exploration == nil, result.crash == nil, result.adapterStderr.isEmpty,
              result.interleaving == nil, !result.stepLimitReached, !result.stepLimitUnproven,
              result.durationMilliseconds.isFinite else { return nil }
        var line = JSONValue.object([
            "version": .number(Double(version)), "kind": .string("passed"),
            "payload": .object(["id": .number(Double(id)), "name": .string(result.name), "file": .string(result.file),
                                "duration_ms": .number(result.durationMilliseconds), "history_digest": .string(result.historyDigest)]),
        ]).serialized()
        line.append(0x0A)
        return line
    }

    /// The job id and result of a `passed` record line (`passedLine`); `nil` for any other line.
    static func passedResult(from line: Data) -> (id: Int, result: ScenarioResult)? {
        // Every other record is written by `JSONEncoder` with sorted keys: `kind` comes first.
        guard line.count > 40, line.starts(with: passedPrefix),
              let root = (try? JSONValue.parse(line, maxDepth: 4))?.value, root["version"]?.numberValue == Double(version),
              root["kind"]?.stringValue.map({ $0.unicodeScalars.elementsEqual("passed".unicodeScalars) }) == true,
              let payload = root["payload"], let id = payload["id"]?.numberValue, id == id.rounded(), abs(id) < WorkerJob.exactLimit,
              let name = payload["name"]?.stringValue, let file = payload["file"]?.stringValue,
              let ms = payload["duration_ms"]?.numberValue, let digest = payload["history_digest"]?.stringValue else { return nil }
        return (Int(id), ScenarioResult(name: name, file: file, tags: [], source: nil, status: .passed, durationMilliseconds: ms,
                                        checks: [], reason: nil, smoke: nil, history: [], historyDigest: digest))
    }

    /// How every `passed` record line starts (keys sorted: `kind` before `payload` and `version`).
    private static let passedPrefix = Data(#"{"kind":"passed","#.utf8)

    /// The payload of a line that is a current-version record of `kind`, decoded in one pass
    /// (`kind(of:)` then `payload(_:from:)` decode the line twice); `nil` for anything else, which
    /// the caller then examines with `kind(of:)` for its error.
    static func record<P: Codable & Sendable>(_ type: P.Type, kind: String, from line: Data) -> P? {
        guard let record = try? JSONDecoder().decode(Record<P>.self, from: line), record.version == version,
              record.kind.unicodeScalars.elementsEqual(kind.unicodeScalars) else { return nil }
        return record.payload
    }

    /// A malformed or unknown-version record.
    struct BadRecord: Error, CustomStringConvertible {
        let description: String
    }

    /// Decodes one line: its kind and the raw bytes to decode the payload from.
    ///
    /// - Throws: `BadRecord` when the line is not a record of a known version.
    static func kind(of line: Data) throws -> String {
        let envelope: Envelope
        do { envelope = try JSONDecoder().decode(Envelope.self, from: line) } catch {
            throw BadRecord(description: "not a worker record: \(String(decoding: line.prefix(200), as: UTF8.self))")
        }
        guard envelope.version == version else {
            throw BadRecord(description: "worker record version \(envelope.version), this supervisor speaks \(version)")
        }
        return envelope.kind
    }

    /// The payload of a record whose kind is known.
    ///
    /// - Throws: `DecodingError` when the payload does not have the kind's shape.
    static func payload<P: Codable & Sendable>(_ type: P.Type, from line: Data) throws -> P {
        try JSONDecoder().decode(Record<P>.self, from: line).payload
    }
}

/// One scenario run asked of a worker (kind `job`).
struct WorkerJob: Codable, Sendable, Equatable {
    /// The job's number: its position in the supervisor's list (results are put back by it).
    var id: Int
    /// The scenario file's path (for messages and the verdict).
    var file: String
    /// The scenario's JSON text, `{{seed}}` already replaced (explore schedules have no file).
    var scenario: String
    /// The run's seed.
    var seed: UInt64
    /// `nil`: the shipping SDK; `"none"`: the faithful second implementation; else a `Defect`.
    var mutant: String?
    /// `ScenarioRunner.stepTimeoutCap`, milliseconds.
    var stepTimeoutCap: Int?
    /// `ScenarioRunner.keepsHistory`.
    var keepsHistory: Bool
    /// `run --explore`: explore a scenario that has an `explore` section instead of running it once.
    var explore: ExploreJob?
    /// One schedule of an exploration: `scenario` is then the explored file's JSON (the same text
    /// for every schedule, parsed once per worker) and the run is that file with its movable
    /// steps in this order (`Explorer.permuted`). `nil`: run `scenario` as it is.
    var schedule: ScheduleJob? = nil
    /// `true`: `scenario` was sent empty because its text is the previous job's on this worker
    /// (exploration sends one file with every schedule: decoding its text per job was a tenth of
    /// a worker's time). The worker refuses it when it has no previous job. Absent: `false`.
    var sameScenario: Bool? = nil
    /// `true`: a passing result comes back slimmed (`WorkerCommand.slimmed`: status, name and
    /// digest), as schedule results always do. The mutant matrix reads only failures' checks.
    /// Absent: `false`.
    var slimPassed: Bool? = nil

    /// Which order of the movable steps to run.
    struct ScheduleJob: Codable, Sendable, Equatable {
        /// The movable step indices (`Explorer.Settings.steps`).
        var steps: [Int]
        /// The order they are placed in.
        var order: [Int]
    }

    /// The `run --explore` options a worker needs.
    struct ExploreJob: Codable, Sendable, Equatable {
        var maxSchedules: Int?
        var exhaustive: Bool
    }
}

extension WorkerJob {
    /// The largest integer every number of a job must stay below to be written as a JSON number
    /// that a double holds exactly (2^53).
    static let exactLimit = 9_007_199_254_740_992.0

    /// This job as the JSON object `Codable` writes for it (member names as the properties are
    /// named, absent optionals left out); `nil` when a number is 2^53 or more in magnitude (a
    /// seed near `UInt64.max`): such a job goes through `JSONEncoder`.
    var json: JSONValue? {
        func number(_ n: Int) -> JSONValue? { abs(Double(n)) < Self.exactLimit ? .number(Double(n)) : nil }
        guard Double(seed) < Self.exactLimit, let id = number(id) else { return nil }
        var members: [String: JSONValue] = ["id": id, "file": .string(file), "scenario": .string(scenario),
                                            "seed": .number(Double(seed)), "keepsHistory": .bool(keepsHistory)]
        if let mutant { members["mutant"] = .string(mutant) }
        if let stepTimeoutCap { guard let n = number(stepTimeoutCap) else { return nil }; members["stepTimeoutCap"] = n }
        if let explore {
            var e: [String: JSONValue] = ["exhaustive": .bool(explore.exhaustive)]
            if let max = explore.maxSchedules { guard let n = number(max) else { return nil }; e["maxSchedules"] = n }
            members["explore"] = .object(e)
        }
        if let schedule {
            let steps = schedule.steps.compactMap(number), order = schedule.order.compactMap(number)
            guard steps.count == schedule.steps.count, order.count == schedule.order.count else { return nil }
            members["schedule"] = .object(["steps": .array(steps), "order": .array(order)])
        }
        if let sameScenario { members["sameScenario"] = .bool(sameScenario) }
        if let slimPassed { members["slimPassed"] = .bool(slimPassed) }
        return .object(members)
    }

    /// The job `json` describes (`json` read back); `nil` when a member is missing or has another
    /// type, or a number is not a whole number below 2^53 in magnitude.
    init?(json: JSONValue) {
        func int(_ v: JSONValue?) -> Int? {
            guard let n = v?.numberValue, n == n.rounded(), abs(n) < Self.exactLimit else { return nil }
            return Int(n)
        }
        func bool(_ v: JSONValue?) -> Bool? { if case .bool(let b)? = v { return b }; return nil }
        /// An array of whole numbers, or `nil` when it is none or any element is not one.
        func ints(_ v: JSONValue?) -> [Int]? {
            guard let items = v?.arrayValue else { return nil }
            let read = items.compactMap(int)
            return read.count == items.count ? read : nil
        }
        /// An optional member: absent or null is `.some(nil)`; present with another type is `nil`.
        func optional<T>(_ key: String, of object: JSONValue = json, _ read: (JSONValue?) -> T?) -> T?? {
            guard let v = object[key], v != .null else { return .some(nil) }
            return read(v).map { .some($0) } ?? nil
        }
        guard let id = int(json["id"]), let file = json["file"]?.stringValue, let scenario = json["scenario"]?.stringValue,
              let seedNumber = json["seed"]?.numberValue, seedNumber >= 0, seedNumber == seedNumber.rounded(), seedNumber < Self.exactLimit,
              let keepsHistory = bool(json["keepsHistory"]),
              let mutant = optional("mutant", { $0?.stringValue }), let cap = optional("stepTimeoutCap", int),
              let sameScenario = optional("sameScenario", bool), let slimPassed = optional("slimPassed", bool) else { return nil }
        var explore: ExploreJob?
        if let e = json["explore"], e != .null {
            guard let exhaustive = bool(e["exhaustive"]), let maxSchedules = optional("maxSchedules", of: e, int) else { return nil }
            explore = ExploreJob(maxSchedules: maxSchedules, exhaustive: exhaustive)
        }
        var schedule: ScheduleJob?
        if let sj = json["schedule"], sj != .null {
            guard let steps = ints(sj["steps"]), let order = ints(sj["order"]) else { return nil }
            schedule = ScheduleJob(steps: steps, order: order)
        }
        self.init(id: id, file: file, scenario: scenario, seed: UInt64(seedNumber), mutant: mutant, stepTimeoutCap: cap,
                  keepsHistory: keepsHistory, explore: explore, schedule: schedule, sameScenario: sameScenario, slimPassed: slimPassed)
    }
}

/// The worker's greeting (kind `hello`).
struct WorkerHello: Codable, Sendable {
    /// The worker's process id.
    var pid: Int32
}

/// A finished job (kind `result`).
struct WorkerResult: Codable, Sendable {
    /// The job's `id`.
    var id: Int
    /// What the scenario did.
    var result: ScenarioResult
    /// The worker asks to be replaced once its jobs in flight are done: SDK work may still be
    /// running in it (a step timed out, operations never finished) and must not reach the next
    /// scenario (`WorkerCommand.leavesWork`).
    var retire: Bool?
}

/// How a worker process ended while it ran a scenario: what a `crashed` result reports.
struct CrashReport: Sendable, Equatable {
    /// The signal that ended it (e.g. 4 SIGILL for a Swift `fatalError`), if one did.
    var signal: Int32?
    /// Its exit status, when it exited.
    var exitStatus: Int32?
    /// The hard deadline it passed, milliseconds (it was then killed with SIGKILL).
    var deadlineMilliseconds: Int?
    /// The last lines of its standard error while it ran the scenario.
    var stderrTail: [String]
    /// Something else went wrong (a malformed record, a worker that could not be started).
    var problem: String?

    /// The signal's name (`SIGILL`), or the number.
    static func name(of signal: Int32) -> String {
        let names: [Int32: String] = [SIGILL: "SIGILL", SIGTRAP: "SIGTRAP", SIGABRT: "SIGABRT", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE",
                                      SIGKILL: "SIGKILL", SIGSEGV: "SIGSEGV", SIGPIPE: "SIGPIPE", SIGTERM: "SIGTERM", SIGINT: "SIGINT"]
        return names[signal] ?? "signal \(signal)"
    }

    /// One sentence for the console and the verdict's `reason`.
    var reason: String {
        var text: String
        if let d = deadlineMilliseconds {
            text = "the worker passed the scenario's hard deadline of \(d) ms and was killed"
        } else if let s = signal {
            text = "the worker process died of \(Self.name(of: s)) (signal \(s))"
        } else if let e = exitStatus {
            text = "the worker process exited with status \(e) before it reported a result"
        } else {
            text = "the worker process failed"
        }
        if let problem { text += ": \(problem)" }
        let fatal = stderrTail.last { $0.range(of: "fatal error", options: .caseInsensitive) != nil }
        if let last = fatal ?? stderrTail.last(where: { !$0.trimmingCharacters(in: .whitespaces).isEmpty }) { text += "; stderr: \(last)" }
        return text
    }

    /// The verdict's `crash` object.
    var json: JSONValue {
        var o: [String: JSONValue] = ["stderr_tail": .array(stderrTail.map(JSONValue.string))]
        if let signal { o["signal"] = .number(Double(signal)); o["signal_name"] = .string(Self.name(of: signal)) }
        if let exitStatus { o["exit_status"] = .number(Double(exitStatus)) }
        if let deadlineMilliseconds { o["deadline_ms"] = .number(Double(deadlineMilliseconds)) }
        if let problem { o["problem"] = .string(problem) }
        return .object(o)
    }
}
