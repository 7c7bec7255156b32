import Foundation
import Experimently
import ExperimentlyMock

/// `contract-harness vectors`: checks the golden hash vectors (CONTRACT.md section 6) and the
/// bucketing vectors (section 2) against the built-in Swift SDK, or against any SDK through a
/// program that speaks the upstream adapter protocol (documented in `Documentation/CrossSDK.md`).
///
/// Exit status: 0 every check matched, 1 a mismatch or a failing SDK program (crash, timeout,
/// unreadable answer), 64 bad usage or a malformed vectors file, 70 an internal fault (the
/// program could not be spawned, the verdict could not be written).
enum VectorsCommand {
    static let usage = """
    usage: contract-harness vectors [--sdk-command CMD] [--vectors DIR] [--verdict FILE] [--timeout SECONDS] [--sdk-name NAME]

    Checks golden hash vectors against the built-in Swift SDK, or against CMD (run with /bin/sh -c),
    which reads {"inputs": [[user_id, flag_key], ...]} on standard input and prints
    {"hashes": [...], "md5_hex": [...] | null} on standard output.
      --sdk-command CMD   the adapter program (default: the built-in Swift SDK)
      --vectors DIR       the golden-vectors folder (default golden-vectors), or one file in the upstream format
      --verdict FILE      where the verdict goes (default vectors-verdict.json); written in every case
      --timeout SECONDS   how long CMD may take before it is killed (default 30)
      --sdk-name NAME     the SDK name recorded in the verdict (default "external" with a command, "ios" without)

    exit status: 0 all match, 1 a mismatch or a failing program, 64 bad usage or a malformed vectors file, 70 an internal fault
    """

    struct Options {
        var command: String?
        var vectors = "golden-vectors"
        var verdict = "vectors-verdict.json"
        var timeout = 30.0
        var sdkName: String?
    }

    /// One failed check.
    struct Mismatch {
        let vector: VectorCase
        let check: String
        let expected: JSONValue
        let actual: JSONValue
        let cause: VectorsDiagnosis.Cause?
    }

    /// An input pair compared by its UTF-8 bytes (never by canonical equivalence).
    struct InputKey: Hashable {
        let user: [UInt8]
        let key: [UInt8]
        init(_ c: VectorCase) { user = Array(c.userID.utf8); key = Array(c.key.utf8) }
    }

    /// What the SDK answered for the unique inputs, in order.
    struct Answers {
        var hashes: [Double]
        var md5: [String]?
    }

    /// A failure of the SDK program (exit 1), with the reason for the verdict.
    struct ProgramFailure: Error { let reason: String; let stderr: String }

    static func parse(_ arguments: [String]) throws -> Options {
        var o = Options()
        var cursor = HarnessCommand.ArgumentCursor(arguments)
        func value(_ flag: String) throws -> String { try cursor.value(for: flag) }
        while let a = cursor.next() {
            switch a {
            case "--sdk-command":
                let v = try value(a)
                guard !v.trimmingCharacters(in: .whitespaces).isEmpty else { throw HarnessCommand.UsageError("--sdk-command needs a non-empty command") }
                o.command = v
            case "--vectors": o.vectors = try value(a)
            case "--verdict": o.verdict = try value(a)
            case "--sdk-name": o.sdkName = try value(a)
            case "--timeout":
                let v = try value(a)
                guard let t = Double(v), t.isFinite, t > 0, t <= 86_400 else {
                    throw HarnessCommand.UsageError("--timeout takes seconds greater than 0 and at most 86400, not '\(v)'")
                }
                o.timeout = t
            case "--help", "-h": throw HarnessCommand.UsageError("")
            default: throw HarnessCommand.UsageError(a.hasPrefix("-") ? "vectors: unknown option '\(a)'" : "vectors: unexpected argument '\(a)'")
            }
        }
        return o
    }

    /// What a SIGINT/SIGTERM handler needs: the adapter's process group. `lock` guards it; once
    /// the handler takes it, it never lets go (the process is exiting). Whether the final verdict
    /// was written is `InterruptSignals`' to know (`finalWrite`: a signal after it rewrites that
    /// verdict instead of running this handler).
    final class Interruption: @unchecked Sendable { // `group` is guarded by `lock`
        let lock = NSLock()
        var group: pid_t?

        func spawned(_ pid: pid_t) { lock.withLock { group = pid } }
    }

    static func main(_ arguments: [String]) async -> Int32 {
        let options: Options
        do { options = try parse(arguments) } catch let e as HarnessCommand.UsageError {
            if e.message.isEmpty { print(usage); return HarnessCommand.Exit.ok.rawValue }
            // A verdict in every case, a refusal too: an earlier `ok: true` verdict stayed in place
            // after a bad option (an eighty-first outside tester, F2); and one hint line, not the
            // whole usage burying the error (F11).
            let path = HarnessCommand.verdictPath(in: arguments, default: Options().verdict)
            let verdict = failedVerdict("bad usage: \(e.message)", command: HarnessCommand.rawValue(of: "--sdk-command", in: arguments),
                                        sdkName: HarnessCommand.rawValue(of: "--sdk-name", in: arguments), vectors: nil)
            if HarnessCommand.replaceableByVerdict(path) { try? verdict.write(to: path, redacting: []) }
            StandardStream.error(Data("contract-harness: \(e.message)\n(contract-harness vectors --help lists its options)\n".utf8))
            return HarnessCommand.Exit.usage.rawValue
        } catch { return HarnessCommand.Exit.internalFault.rawValue }
        // Interrupted (SIGINT, SIGTERM): kill the adapter's process group, write the verdict, exit
        // 130 / 143 (the docs promise a verdict in every case).
        let interruption = Interruption()
        let sources = HarnessCommand.onInterrupt { sig in
            interruption.lock.lock() // never unlocked: the process exits right after this handler
            if let group = interruption.group { kill(-group, SIGKILL) }
            let name = sig == SIGINT ? "SIGINT" : "SIGTERM"
            let message = "interrupted by \(name) before it finished" + (interruption.group != nil ? "; the SDK program's process group was killed" : "")
            var verdict = failedVerdict(message, command: options.command, sdkName: options.sdkName, vectors: options.vectors)
            verdict.extra["interrupted"] = .bool(true)
            do { try verdict.write(to: options.verdict, redacting: []) } catch {
                complain("cannot write the verdict to \(options.verdict): \(error.localizedDescription)")
            }
            complain(message + "; verdict written to \(options.verdict)")
        }
        defer { sources.forEach { $0.cancel() } }
        return run(options, interruption: interruption)
    }

    /// A verdict of a `vectors` run that checked nothing: `ok` false and `error` `message`, at the
    /// top and in its `vectors` section (`mode`, and `command` and `vectors` when known), for an
    /// interruption or a refused command line.
    static func failedVerdict(_ message: String, command: String?, sdkName: String?, vectors: String?) -> Verdict {
        var section: [String: JSONValue] = ["mode": .string(command == nil ? "built-in" : "command"), "ok": .bool(false), "error": .string(message)]
        if let command { section["command"] = .string(command) }
        if let vectors { section["vectors"] = .string(vectors) }
        var verdict = Verdict(harnessVersion: HarnessCommand.version, sdkName: sdkName ?? (command == nil ? "ios" : "external"),
                              sdkVersion: command == nil ? ExperimentlySDKInfo.version : "unknown", seed: 0, startedAt: Date(),
                              durationMilliseconds: 0, results: [], invalid: [])
        verdict.extra["vectors"] = .object(section)
        verdict.extra["ok"] = .bool(false)
        verdict.extra["error"] = .string(message)
        return verdict
    }

    static func say(_ line: String) { StandardStream.output(Data((TerminalText.escape(line) + "\n").utf8)) }
    static func complain(_ line: String) { StandardStream.error(Data("contract-harness vectors: \(TerminalText.escape(line))\n".utf8)) }

    static func run(_ options: Options, interruption: Interruption = Interruption()) -> Int32 {
        let startedAt = Date()
        let started = DispatchTime.now()
        var section: [String: JSONValue] = [
            "mode": .string(options.command == nil ? "built-in" : "command"),
            "vectors": .string(options.vectors),
            "tolerance": .number(VectorsFile.tolerance),
        ]
        if let command = options.command { section["command"] = .string(command) }
        let sdkName = options.sdkName ?? (options.command == nil ? "ios" : "external")
        let sdkVersion = options.command == nil ? ExperimentlySDKInfo.version : "unknown"

        func finish(_ status: HarnessCommand.Exit, error: String? = nil) -> Int32 {
            section["duration_ms"] = .number((ScenarioRunner.elapsed(since: started) * 1000).rounded() / 1000)
            section["ok"] = .bool(status == .ok)
            section["error"] = error.map(JSONValue.string) ?? .null
            var verdict = Verdict(harnessVersion: HarnessCommand.version, sdkName: sdkName, sdkVersion: sdkVersion, seed: 0,
                                  startedAt: startedAt, durationMilliseconds: ScenarioRunner.elapsed(since: started), results: [], invalid: [])
            verdict.extra["vectors"] = .object(section)
            verdict.extra["ok"] = .bool(status == .ok)
            // Not once a signal was taken: its handler kills the adapter's group first, so this
            // path can see the adapter's output end and get here before the handler writes. The
            // handler's interrupted verdict is the one written (before, this one was: a verdict
            // without `interrupted` and exit 143, once in a parallel `swift test`).
            if let failure = HarnessCommand.writeFinal(verdict, to: options.verdict, secrets: []) { return failure }
            return status.rawValue
        }

        let cases: [VectorCase]
        do {
            let loaded = try VectorsFile.load(options.vectors)
            cases = loaded.cases
            section["files"] = .array(loaded.files.map(JSONValue.string))
        } catch let e as VectorsFile.Malformed {
            complain("malformed vectors: \(e.description)")
            return finish(.usage, error: "malformed vectors: \(e.description)")
        } catch {
            complain("\(error)")
            return finish(.internalFault, error: "\(error)")
        }

        // Unique input pairs in first-seen order: what the SDK is asked about. Keyed by bytes:
        // Swift `String` equality is canonical equivalence, which would merge NFC and NFD inputs.
        var index: [InputKey: Int] = [:]
        var inputs: [(String, String)] = []
        for c in cases {
            let id = InputKey(c)
            if index[id] == nil { index[id] = inputs.count; inputs.append((c.userID, c.key)) }
        }
        section["inputs"] = .number(Double(inputs.count))

        let answers: Answers
        if let command = options.command {
            do {
                answers = try ask(command, inputs: inputs, timeout: options.timeout, section: &section, onSpawn: interruption.spawned)
            } catch let failure as ProgramFailure {
                complain(failure.reason)
                if !failure.stderr.isEmpty {
                    complain("its standard error ended with:")
                    StandardStream.error(Data((TerminalText.escape(failure.stderr, keepingLineFeeds: true) + "\n").utf8))
                }
                section["program_stderr"] = .string(failure.stderr)
                return finish(.failed, error: failure.reason)
            } catch {
                complain("cannot run the SDK program: \(error)")
                return finish(.internalFault, error: "cannot run the SDK program: \(error)")
            }
        } else {
            answers = Answers(hashes: inputs.map { FeatureFlagEvaluator.hashUser($0.0, flagKey: $0.1) },
                              md5: inputs.map { FeatureFlagEvaluator.md5Hex($0.0, flagKey: $0.1) })
        }

        let (checks, mismatches) = compare(cases, answers: answers, index: index)
        for m in mismatches { say(line(m)) }
        var causes: [String: Int] = [:]
        for m in mismatches { if let c = m.cause { causes[c.name, default: 0] += 1 } }
        section["checks"] = .number(Double(checks))
        section["cases"] = .number(Double(cases.count))
        section["passed"] = .number(Double(checks - mismatches.count))
        section["failed"] = .number(Double(mismatches.count))
        section["md5_checked"] = .bool(answers.md5 != nil)
        section["causes"] = .object(causes.mapValues { .number(Double($0)) })
        section["mismatches"] = .array(mismatches.map(json))
        let time = String(format: "%.1f ms", ScenarioRunner.elapsed(since: started))
        if mismatches.isEmpty {
            say("vectors: \(cases.count) vectors, \(checks) checks, all match (\(time))")
            return finish(.ok)
        }
        let likely = causes.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.first
        let summary = "vectors: \(cases.count) vectors, \(checks) checks, \(mismatches.count) mismatched" +
            (likely.map { "; most likely cause: \($0.key) (\($0.value) of \(mismatches.count))" } ?? "") + " (\(time))"
        say(summary)
        return finish(.failed, error: likely.map { "\(mismatches.count) mismatches; most likely cause: \($0.key)" } ?? "\(mismatches.count) mismatches")
    }

    /// Runs the adapter program once with every input and validates its answer.
    static func ask(_ command: String, inputs: [(String, String)], timeout: Double, section: inout [String: JSONValue],
                    onSpawn: ((pid_t) -> Void)? = nil) throws -> Answers {
        let request = JSONValue.object(["inputs": .array(inputs.map { .array([.string($0.0), .string($0.1)]) })])
        let result = try VectorsSubprocess.run(command, input: request.serialized() + Data("\n".utf8), timeout: timeout, onSpawn: onSpawn)
        section["program_seconds"] = .number((result.seconds * 1000).rounded() / 1000)
        let stderrTail = String(decoding: result.stderr.suffix(2000), as: UTF8.self)
        func fail(_ reason: String) -> ProgramFailure { ProgramFailure(reason: reason, stderr: stderrTail) }
        switch result.termination {
        case .timedOut:
            throw fail("the SDK program did not finish within \(timeout) s (--timeout); it was killed")
        case .outputTooLarge:
            throw fail("the SDK program printed more than 64 MiB; it was killed")
        case .signaled(let s):
            throw fail("the SDK program was killed by signal \(s) (\(String(cString: strsignal(s))))")
        case .exited(let code) where code != 0:
            throw fail("the SDK program exited with status \(code)" + (code == 127 ? " (command not found)" : ""))
        case .exited:
            break
        }
        let text = String(decoding: result.stdout, as: UTF8.self)
        let preview = text.count > 200 ? String(text.prefix(200)) + "..." : text
        let value: JSONValue
        do { value = try JSONValue.parse(Data(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8)).value } catch {
            throw fail("the SDK program's standard output is not one JSON object {\"hashes\": [...], \"md5_hex\": [...] | null} (\(error)); it printed: \(preview.debugDescription)")
        }
        guard let object = value.objectValue else { throw fail("the SDK program printed a JSON \(value.typeName), expected an object with \"hashes\"") }
        // A member written twice is the adapter's fault, named as such (the driver protocol
        // refuses it too): before, the last one counted, and a stale `hashes` written first and
        // again last sent the SDK's author to debug the hash function ("cause unknown").
        if let duplicate = JSONDuplicateKey.first(inValid: Data(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8)) {
            throw fail("the SDK program's standard output has a \(duplicate): write each member once")
        }
        guard let list = object["hashes"]?.arrayValue else {
            throw fail("the SDK program's answer has no \"hashes\" array (members: \(object.keys.sorted().joined(separator: ", ")))")
        }
        guard list.count == inputs.count else {
            throw fail("the SDK program answered \(list.count) hashes for \(inputs.count) inputs")
        }
        var hashes: [Double] = []
        for (i, item) in list.enumerated() {
            guard let n = item.numberValue else { throw fail("hashes[\(i)] is a \(item.typeName), expected a number") }
            hashes.append(n)
        }
        var md5: [String]?
        switch object["md5_hex"] {
        case nil, .null?: md5 = nil
        case .array(let a)?:
            guard a.count == inputs.count else { throw fail("the SDK program answered \(a.count) md5_hex values for \(inputs.count) inputs") }
            md5 = try a.enumerated().map { i, item in
                guard let s = item.stringValue else { throw fail("md5_hex[\(i)] is a \(item.typeName), expected 32 hex digits") }
                return s.lowercased()
            }
        case let other?:
            throw fail("md5_hex is a \(other.typeName), expected an array of strings or null")
        }
        return Answers(hashes: hashes, md5: md5)
    }

    /// Every check of every case against the answers: hash (within the tolerance), MD5 when both
    /// sides have it, and the decisions derived from a matching hash (rollout, bucket, md5-mod100).
    static func compare(_ cases: [VectorCase], answers: Answers, index: [InputKey: Int]) -> (checks: Int, mismatches: [Mismatch]) {
        var checks = 0
        var out: [Mismatch] = []
        for c in cases {
            let i = index[InputKey(c)]!
            let actual = answers.hashes[i]
            checks += 1
            let hashOK = abs(actual - c.expectedHash) <= VectorsFile.tolerance
            if !hashOK {
                out.append(Mismatch(vector: c, check: "hash", expected: .number(c.expectedHash), actual: .number(actual),
                                    cause: VectorsDiagnosis.hashCause(user: c.userID, key: c.key, actual: actual)))
            }
            let actualMD5 = answers.md5?[i]
            if let expected = c.md5Hex, let actualMD5 {
                checks += 1
                if expected != actualMD5 {
                    out.append(Mismatch(vector: c, check: "md5_hex", expected: .string(expected), actual: .string(actualMD5),
                                        cause: VectorsDiagnosis.md5Cause(user: c.userID, key: c.key, actualHex: actualMD5)))
                }
            }
            guard hashOK else { continue }
            for r in c.rollouts {
                checks += 1
                let included = actual < Double(r.percent) / 100
                if included != r.included {
                    out.append(Mismatch(vector: c, check: "rollout_\(r.percent)_percent", expected: .bool(r.included), actual: .bool(included),
                                        cause: VectorsDiagnosis.Cause(name: "comparison", detail: "included means hash < percent / 100 (strictly less)")))
                }
            }
            if let bucket = c.bucket {
                checks += 1
                let b = min(99, Int((actual * 100).rounded(.down)))
                if b != bucket {
                    out.append(Mismatch(vector: c, check: "bucket", expected: .number(Double(bucket)), actual: .number(Double(b)),
                                        cause: VectorsDiagnosis.Cause(name: "comparison", detail: "bucket = floor(hash * 100)")))
                }
            }
            if let mod = c.md5Mod100, let actualMD5, actualMD5.count == 32 {
                checks += 1
                var remainder = 0
                for ch in actualMD5 { remainder = (remainder * 16 + (ch.hexDigitValue ?? 0)) % 100 }
                if remainder != mod {
                    out.append(Mismatch(vector: c, check: "md5_mod100", expected: .number(Double(mod)), actual: .number(Double(remainder)),
                                        cause: VectorsDiagnosis.Cause(name: "byte order", detail: "the whole digest is read as a 128-bit big-endian integer, then mod 100")))
                }
            }
        }
        return (checks, out)
    }

    static func shown(_ s: String) -> String {
        // JSON text with a non-NFC string's non-ASCII scalars escaped (`"Jose\u0301"`), so two
        // spellings never read alike (a sixth outside tester: an NFD id printed as "José").
        func text(_ t: String) -> String { JSONValue.string(t).unambiguousJSONText }
        return s.count <= 60 ? text(s) : text(String(s.prefix(40))) + "... (\(s.count) characters)"
    }

    static func line(_ m: Mismatch) -> String {
        "MISMATCH \(m.vector.file) \(m.vector.location) user_id=\(shown(m.vector.userID)) flag_key=\(shown(m.vector.key)): " +
            "\(m.check) expected \(m.expected.jsonText), actual \(m.actual.jsonText)" +
            (m.cause.map { "; likely cause: \($0.name) (\($0.detail))" } ?? "")
    }

    static func json(_ m: Mismatch) -> JSONValue {
        var o: [String: JSONValue] = [
            "file": .string(m.vector.file), "location": .string(m.vector.location),
            "user_id": .string(m.vector.userID), "flag_key": .string(m.vector.key),
            "check": .string(m.check), "expected": m.expected, "actual": m.actual,
        ]
        if let c = m.cause { o["cause"] = .string(c.name); o["cause_detail"] = .string(c.detail) }
        return .object(o)
    }
}
