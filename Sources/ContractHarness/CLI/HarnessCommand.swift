import Foundation
import ExperimentlyMock
import ExperimentlyMutants

/// The `contract-harness` command line (documented in `Documentation/CLI.md`).
///
/// Exit status: 0 all passed, 1 a check failed or nothing passed (every scenario skipped), 64 bad usage or a malformed scenario file
/// (sysexits `EX_USAGE`/`EX_DATAERR` folded into 64), 70 an internal fault (`EX_SOFTWARE`).
public enum HarnessCommand {
    /// The harness version written into verdicts.
    public static let version = "0.1.0"

    /// Exit statuses.
    public enum Exit: Int32 { case ok = 0, failed = 1, usage = 64, internalFault = 70 }

    static let usage = """
    usage: contract-harness run [PATH ...] [--verdict FILE] [--junit FILE] [--html FILE] [--mermaid FILE] [--filter TEXT] [--seed N] [--fail-fast]
                                [--jobs N] [--watch] [--sdk-command CMD] [--skip TEXT] [--skip-from FILE] [--list] [--step-timeout-ms N]
                                [--explore] [--history] [--mutant NAME]
           contract-harness report VERDICT [--html FILE] [--mermaid FILE]
           contract-harness schema [--out FILE]
           contract-harness scenario --from-journal JOURNAL [--out FILE] [--name NAME] [--fixtures FILE] [--clients peer|one]
           contract-harness explore SCENARIO [--seed N] [--max-schedules K] [--exhaustive] [--out FILE] [--jobs N] [--mutant NAME] [--verdict FILE] [--sdk-command CMD]
                                    [--step-timeout-ms N]
           contract-harness explore SCENARIO --interleave [--depth D] [--seed N] [--max-schedules K] [--out FILE] [--jobs N] [--mutant NAME] [--verdict FILE]
                                    [--sdk-command CMD] [--step-timeout-ms N]
           contract-harness mutants [PATH ...] [--verdict FILE] [--filter TEXT] [--step-timeout-ms N] [--jobs N] [--full]
           contract-harness mutants --list
           contract-harness vectors [--sdk-command CMD] [--vectors DIR|FILE] [--timeout SECONDS] [--sdk-name NAME] [--verdict FILE]
           contract-harness generate [--seed S] [--count N] [--from I] [--sdk shipping|faithful|both] [--out DIR] [--write] [--ids equivalent|plain]
           contract-harness serve [--port N] [--host ADDR] [--fixtures FILE] [--api-key KEY[:SCOPES]]... [--faults FILE] [--journal FILE] [--journal-body-bytes N] [--admin-token T]
           contract-harness live-check [--url URL] [--api-key KEY] [--local-api-key KEY] [--sdk-command CMD --sdk-name NAME]
           contract-harness --help | --version

    run      Runs scenario files (PATH: files or folders, default: scenarios) against the built-in Swift SDK
             driver and the in-process mock backend, prints one line per scenario, ends with
             "N passed, M failed[, K skipped]" and writes a JSON verdict.
      --verdict FILE   where the verdict goes (default verdict.json); written in every case
      --junit FILE     also write JUnit XML
      --html FILE      also write the HTML report (Documentation/Report.md): summary, swim lanes per failing scenario
      --mermaid FILE   also write the failing scenarios as Mermaid sequence diagrams (Markdown)
      --watch          after the run, rerun whenever a scenario file under PATH changes (polling), until Ctrl-C
      --filter TEXT    only scenarios whose name or a tag contains TEXT (repeatable)
      --seed N         the run's seed (up to 2^53-1), recorded in the verdict; {{seed}} in scenario files is replaced by it
      --fail-fast      stop after the first failing scenario (the rest are reported as skipped)
      --jobs N         worker processes running scenarios at once (default: the number of cores); each scenario
                       runs in a worker, and one whose worker dies or passes its hard deadline is reported crashed
      --explore        scenarios with an "explore" section are explored (see explore) instead of run once
      --history        the verdict also lists each scenario's whole history as recorded (the digest is of its canonical form)
      --sdk-command CMD  run against an SDK in another process: CMD (through /bin/sh -c) speaks the driver protocol
                       experimently-driver/1 (Documentation/DriverProtocol.md); the mock answers over loopback TCP
      --skip TEXT      scenarios whose name or a tag contains TEXT are known failures (repeatable): a failure is
                       reported as KNOWN and counted as skipped, a pass as FIXED
      --skip-from FILE known failures, one scenario name a line, # comments
      --step-timeout-ms N  caps every step's time limit (milliseconds), so known hangs fail fast
      --list           print the scenarios that would run, with their requirements, and run nothing
      --mutant NAME    run against a deliberately broken SDK variant (see mutants) instead of the SDK, or
                       "none" for the second, faithful implementation

    explore  Runs a scenario again and again from a fresh state, each time with another order of the steps its
             "explore" section lists (releases, operation starts, clock advances...): every order when there are
             few (at most K) or with --exhaustive (the first K when K is given), else K seeded random orders. Writes the first failing order, shrunk,
             as a plain scenario file that `run` replays (default SCENARIO-NAME-schedule.json); exit 1 when one fails.
      --max-schedules K  at most K schedules (default: the file's, else 100)
      --out FILE         where the failing schedule goes
      --jobs N           schedules run at once (default 16; each is an independent run)
      --step-timeout-ms N  caps every step's time limit (milliseconds), the reference's too; the replay command keeps it
      --interleave       instead of moving steps, run them in the file's order and choose which of the SDK's ready
                         tasks runs next (the SDK's own tasks on a harness executor): depth-first when the choices are
                         few, else PCT (seeded, depth D, default 3); budget K (default: the file's, else 200). Writes the
                         first failing interleaving, shrunk, with its "interleaving" choices (SCENARIO-NAME-interleaving.json)

    report   Draws a saved verdict (failing scenarios always carry their timeline; all with run --history):
             --html FILE writes the HTML report, --mermaid FILE the Mermaid diagrams (at least one of them).

    schema   Prints the JSON Schema of the scenario format (committed as Documentation/scenario.schema.json),
             or writes it to --out FILE.

    scenario Turns a serve journal (--journal FILE) into a scenario skeleton that `run` runs: clients by connection
             (--clients one: a single client), the SDK operations in arrival order with their answers as expectations,
             the faults they met, holds released in the journal's order (Documentation/CrossSDK.md). To stdout or --out FILE.

    mutants  Runs the suite against the faithful variant of a second client implementation and against every
             deliberately broken variant (Documentation/Mutants.md); prints which scenarios caught which variant
             and the share caught; exit 0 when every variant is caught and the faithful one passes everything.
      --step-timeout-ms N  caps each step's time limit (default 1500) so hanging variants fail fast
      --jobs N             worker processes at once (default: the number of cores)
      --full               run every scenario against every variant and list every scenario that catches
                           each (default: stop a variant at its first catch in scenario order)
      --list               print the variants (number, name, defect) and run nothing

    generate Generates seeded random concurrent workloads (operations, holds released in random order, clears, clock
             steps, several clients and users) and runs them in-process against the shipping SDK and the faithful
             variant: no named check may fail. `contract-harness generate --help` lists its options.

    exit status: 0 all passed, 1 a check failed, a scenario crashed or nothing passed (every scenario skipped),
    64 bad usage or a malformed scenario file, 70 an internal fault; 130/143 interrupted by SIGINT/SIGTERM (the verdict
    is still written)
    """

    /// Runs the command line `arguments` (without the program name), printing to standard output
    /// and error, and returns the exit status.
    public static func main(_ arguments: [String], driver: any SDKDriver = SwiftSDKDriver()) async -> Int32 {
        // A closed output pipe (`| head -1`) loses text, never the run or its verdict.
        StandardStream.ignoreBrokenPipes()
        // In-process runs keep their sessions' descriptors: use what the hard limit allows.
        OpenFileLimit.raiseToHardLimit()
        guard let command = arguments.first else { return usageError("no command given") }
        // SIGINT/SIGTERM handled from here on: exit 130/143, the verdict marked interrupted.
        let early = interruptFromTheStart(command, arguments: Array(arguments.dropFirst()), driver: driver)
        defer { early?.cancel() }
        let status = await dispatch(command, arguments, driver: driver)
        // A signal received while the command ended (its final verdict write) decides the exit:
        // 130 or 143 and the interrupted verdict, as CLI.md promises for any moment (a
        // thirty-fourth outside tester, F10: it exited 1, the signal swallowed).
        InterruptSignals.closeForExit()
        return status
    }

    /// Runs `command` (the first of `arguments`).
    private static func dispatch(_ command: String, _ arguments: [String], driver: any SDKDriver) async -> Int32 {
        switch command {
        case "--help", "-h", "help":
            print(usage)
            return Exit.ok.rawValue
        case "--version":
            print("contract-harness \(version)")
            return Exit.ok.rawValue
        case "run":
            let rest = Array(arguments.dropFirst())
            if rest.contains("--watch") { return await WatchCommand.main(rest.filter { $0 != "--watch" }, driver: driver) }
            return await run(rest, driver: driver)
        case "explore":
            let rest = Array(arguments.dropFirst())
            let status = await explore(rest, driver: driver)
            // A refused input (bad usage, a malformed file) still replaces the verdict asked for,
            // so an earlier green one is never read as this run's (a sixteenth outside tester).
            if status == Exit.usage.rawValue, rest.contains("--verdict") {
                writeRefusal(lastComplaint.withLock { $0 } ?? "explore refused its input", to: verdictPath(in: rest), driver: driver)
            }
            return status
        case "mutants":
            return await mutants(Array(arguments.dropFirst()))
        case "vectors":
            return await VectorsCommand.main(Array(arguments.dropFirst()))
        case "serve":
            return await ServeCommand.main(Array(arguments.dropFirst()))
        case "live-check":
            return await LiveCheckCommand.main(Array(arguments.dropFirst()))
        case "__worker":
            return await WorkerCommand.main()
        case "generate":
            return await GenerateCommand.main(Array(arguments.dropFirst()))
        case "report":
            return ReportCommand.main(Array(arguments.dropFirst()))
        case "schema":
            return SchemaCommand.main(Array(arguments.dropFirst()))
        case "scenario":
            return ScenarioCommand.main(Array(arguments.dropFirst()))
        default:
            return usageError("unknown command '\(command)'")
        }
    }

    static func usageError(_ message: String) -> Int32 {
        lastComplaint.withLock { $0 = message }
        StandardStream.error(Data("contract-harness: \(TerminalText.escape(message))\n(contract-harness --help lists every command and option)\n".utf8))
        return Exit.usage.rawValue
    }

    struct RunOptions {
        var paths: [String] = []
        var verdict = "verdict.json"
        var junit: String?
        var filters: [String] = []
        var seed: UInt64 = 0
        var failFast = false
        var explore = false
        var exhaustive = false
        var maxSchedules: Int?
        var out: String?
        var mutant: String?
        var jobs = 16
        var history = false
        /// `--sdk-command`: the adapter of an out-of-process SDK (Documentation/DriverProtocol.md).
        var sdkCommand: String?
        /// `--skip`, `--skip-from`: known failures.
        var known = KnownFailures()
        /// `--list`: print what would run, run nothing.
        var list = false
        /// `--step-timeout-ms`: a cap on every step's time limit, milliseconds.
        var stepTimeoutCap: Int?
        /// `--html FILE`, `--mermaid FILE`: the report outputs (ReportCommand.swift).
        var report = ReportOutputs()
        /// Every option given, in order (`--seed`, `--html`...): a command refuses those it does
        /// not honour (``refuse(_:command:honoured:)``).
        var given: [String] = []
    }

    /// The options `explore` honours (with `--interleave`, also `--depth`).
    static let exploreOptions = ["--seed", "--max-schedules", "--exhaustive", "--out", "--jobs", "--mutant", "--verdict", "--sdk-command",
                                 "--step-timeout-ms"]

    /// Refuses the first option in `options.given` that `command` does not honour: a `run` option
    /// such as `--html` or `--fail-fast` was accepted by `explore` and silently did nothing.
    ///
    /// - Throws: `UsageError` naming the option and the command's options.
    static func refuse(_ options: RunOptions, command: String, honoured: [String]) throws {
        // `--help` never gets here: `parseRun` ends at it.
        guard let ignored = options.given.first(where: { !honoured.contains($0) }) else { return }
        throw UsageError("\(command) takes no \(ignored) (its options: SCENARIO, \(honoured.joined(separator: ", ")))")
    }

    static func parseRun(_ arguments: [String]) throws -> RunOptions {
        var o = RunOptions()
        var cursor = ArgumentCursor(arguments)
        func value(_ flag: String) throws -> String { try cursor.value(for: flag) }
        while let a = cursor.next() {
            if a.hasPrefix("-") { o.given.append(a) }
            switch a {
            case "--verdict": o.verdict = try value(a)
            case "--junit": o.junit = try value(a)
            case "--filter":
                let v = try value(a)
                guard !v.isEmpty else { throw UsageError("--filter needs a non-empty text") }
                o.filters.append(v)
            case "--seed":
                let v = try value(a)
                // Up to 2^53 - 1, so the verdict's JSON number records it exactly.
                guard let n = UInt64(v), n <= 9_007_199_254_740_991 else {
                    throw UsageError("--seed takes a whole number from 0 to 9007199254740991 (2^53 - 1), not '\(v)'")
                }
                o.seed = n
            case "--fail-fast": o.failFast = true
            case "--explore": o.explore = true
            case "--history": o.history = true
            case "--skip":
                let v = try value(a)
                guard !v.isEmpty else { throw UsageError("--skip needs a non-empty text") }
                o.known.patterns.append(v)
            case "--skip-from": try o.known.load(try value(a))
            case "--list": o.list = true
            case "--step-timeout-ms":
                let v = try value(a)
                guard let n = Int(v), n > 0 else { throw UsageError("--step-timeout-ms takes a positive whole number of milliseconds, not '\(v)'") }
                o.stepTimeoutCap = n
            case "--sdk-command":
                let v = try value(a)
                guard !v.trimmingCharacters(in: .whitespaces).isEmpty else { throw UsageError("--sdk-command needs a command") }
                o.sdkCommand = v
            case "--html", "--mermaid": try o.report.take(a, try value(a))
            case "--exhaustive": o.exhaustive = true
            case "--max-schedules":
                let v = try value(a)
                guard let n = Int(v), n > 0 else { throw UsageError("--max-schedules takes a positive whole number, not '\(v)'") }
                o.maxSchedules = n
            case "--out": o.out = try value(a)
            case "--jobs":
                let v = try value(a)
                guard let n = Int(v), (1...256).contains(n) else { throw UsageError("--jobs takes a whole number from 1 to 256, not '\(v)'") }
                o.jobs = n
            case "--mutant":
                let v = try value(a)
                guard v == "none" || Defect(rawValue: v) != nil else {
                    throw UsageError("--mutant takes none or one of: \(Defect.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                o.mutant = v
            case "--help", "-h": throw UsageError("")
            default:
                if a.hasPrefix("-") { throw UsageError("unknown option '\(a)'") }
                o.paths.append(a)
            }
        }
        if o.paths.isEmpty { o.paths = ["scenarios"] }
        return o
    }

    struct UsageError: Error { let message: String; init(_ m: String) { message = m } }

    /// Walks command-line arguments: each option, and the value that follows it.
    struct ArgumentCursor {
        private let arguments: [String]
        private var index = 0

        init(_ arguments: [String]) { self.arguments = arguments }

        /// The next argument, or `nil` at the end.
        mutating func next() -> String? {
            guard index < arguments.count else { return nil }
            defer { index += 1 }
            return arguments[index]
        }

        /// The value after `flag`.
        ///
        /// - Throws: `UsageError` when there is none (or the next argument is another option).
        mutating func value(for flag: String) throws -> String {
            guard index < arguments.count, !arguments[index].hasPrefix("--") else { throw UsageError("\(flag) needs a value") }
            defer { index += 1 }
            return arguments[index]
        }
    }

    /// The scenario files under `paths` (files as given; folders searched for `*.json`, sorted).
    ///
    /// - Throws: `UsageError` for a path that does not exist.
    static func discover(_ paths: [String]) throws -> [String] {
        var files: [String] = []
        let fm = FileManager.default
        for path in paths {
            var isDir: ObjCBool = false
            guard fm.fileExists(atPath: path, isDirectory: &isDir) else { throw UsageError("\(InputFile.problem(path) == "a symbolic link loop" ? "a symbolic link loop" : "no such file or folder"): \(path)") }
            if isDir.boolValue {
                let found = (fm.enumerator(atPath: path)?.compactMap { $0 as? String } ?? [])
                    .filter { $0.hasSuffix(".json") }.sorted().map { (path as NSString).appendingPathComponent($0) }
                files += found
            } else {
                files.append(path)
            }
        }
        return files
    }

    /// The command that replays a written schedule or interleaving `out` on the SDK it was found
    /// on: `--mutant` or `--sdk-command` as given (without it, `run` would replay on the built-in
    /// shipping SDK, which passes: a seventeenth outside tester), each word quoted for a POSIX shell
    /// where needed.
    static func replayCommand(_ out: String, _ options: RunOptions) -> String {
        var words = ["contract-harness", "run", out]
        if let mutant = options.mutant { words += ["--mutant", mutant] }
        if let command = options.sdkCommand { words += ["--sdk-command", command] }
        // Replayed under the limits it was found under.
        if let cap = options.stepTimeoutCap { words += ["--step-timeout-ms", String(cap)] }
        return words.map(shellWord).joined(separator: " ")
    }

    /// `word` as one POSIX shell word: as is when it holds only characters no shell treats
    /// specially, else in single quotes (a `'` inside written `'\''`).
    static func shellWord(_ word: String) -> String {
        let plain = !word.isEmpty && word.unicodeScalars.allSatisfy { c in
            c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || "-_./:=,+@%".unicodeScalars.contains(c))
        }
        return plain ? word : "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    /// Prints a line and flushes at once (standard output is block-buffered when piped); control
    /// characters in it are escaped (`TerminalText`), so a name cannot fake or hide a line.
    static func say(_ line: String) {
        StandardStream.output(Data((TerminalText.escape(line) + "\n").utf8))
    }

    /// Writes `contract-harness: LINE` to standard error, escaped like ``say(_:)``.
    static func complain(_ line: String) {
        lastComplaint.withLock { $0 = line }
        StandardStream.error(Data("contract-harness: \(TerminalText.escape(line))\n".utf8))
    }

    /// The last usage or input error printed (`complain`, `usageError`): what a refusal verdict says.
    static let lastComplaint = HarnessLocked<String?>(nil)

    /// Where a verdict goes when the arguments could not be read: the last `--verdict` value, if
    /// any, else `fallback` (`verdict.json`; `vectors` gives its own default).
    static func verdictPath(in arguments: [String], default fallback: String = "verdict.json") -> String {
        var path = fallback
        for (i, a) in arguments.enumerated() where a == "--verdict" && i + 1 < arguments.count { path = arguments[i + 1] }
        return path
    }

    /// Whether a verdict may be written at `path`: nothing is there, it is empty or no regular
    /// file (`/dev/null`, a FIFO), or it holds a verdict (`"experimently-verdict/1"` in its head).
    static func replaceableByVerdict(_ path: String, marker: String = "experimently-verdict/1") -> Bool {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size > 0 else { return true }
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 65_536)) ?? Data()
        return head.range(of: Data(marker.utf8)) != nil
    }

    /// Writes a verdict (and the JUnit file, when one is asked for) that says the run could not
    /// happen, so a stale one is never read as this run's.
    static func writeRefusal(_ message: String, to path: String, junit: String? = nil, otherOutputs: [String] = [], driver: any SDKDriver,
                             invalid: [(file: String, error: String)] = []) {
        var verdict = Verdict(harnessVersion: version, sdkName: driver.sdkName, sdkVersion: driver.sdkVersion, seed: 0,
                              startedAt: Date(), durationMilliseconds: 0, results: [], invalid: invalid)
        verdict.extra["error"] = .string(message)
        verdict.extra["ok"] = .bool(false)
        // A refusal never replaces a file that is not a verdict: the usage error may be that
        // `--verdict` names an input (the adapter's program, a journal, a scenario).
        guard replaceableByVerdict(path) else { return }
        try? verdict.write(to: path, redacting: [])
        // Not over the verdict: a refusal of `--junit` naming the verdict's file keeps the verdict.
        // Nor over another output named: a refused `--html Y --junit Y` left Y holding JUnit XML.
        let others = otherOutputs.map(resolvedPath)
        if let junit, !resolvedPath(junit).utf8.elementsEqual(resolvedPath(path).utf8),
           !others.contains(where: { $0.utf8.elementsEqual(resolvedPath(junit).utf8) }), replaceableByVerdict(junit, marker: "<testsuite") {
            try? verdict.junit(redacting: [], error: message).writeOutput(to: junit)
        }
    }

    /// The value after the last `flag` in raw arguments, if any.
    static func rawValue(of flag: String, in arguments: [String]) -> String? {
        var found: String?
        for (i, a) in arguments.enumerated() where a == flag && i + 1 < arguments.count { found = arguments[i + 1] }
        return found
    }

    /// Checks, before any work, that no two outputs name the same file (one would overwrite the
    /// other: a JUnit file written over the verdict loses the verdict). Paths are compared after
    /// standardizing and resolving symbolic links, byte for byte.
    ///
    /// - Throws: `UsageError` naming both options and the path.
    /// `path` standardized with every symbolic link followed, also one whose target does not
    /// exist yet (a link to the verdict's file before the verdict is written: Foundation's
    /// `resolvingSymlinksInPath` leaves such a link as it is, and a seventh outside tester's
    /// `--junit` through one replaced the verdict). At most 40 links, as the kernel.
    static func resolvedPath(_ path: String) -> String {
        var current = URL(fileURLWithPath: path).standardizedFileURL.path
        for _ in 0..<40 {
            // The folders first (they may be links), then the last component.
            let folder = URL(fileURLWithPath: (current as NSString).deletingLastPathComponent).resolvingSymlinksInPath().path
            current = (folder as NSString).appendingPathComponent((current as NSString).lastPathComponent)
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: current) else { return current }
            current = URL(fileURLWithPath: target, relativeTo: URL(fileURLWithPath: folder, isDirectory: true)).standardizedFileURL.path
        }
        return current
    }

    static func checkDistinct(_ outputs: [(option: String, path: String?)]) throws {
        var seen: [(option: String, resolved: String)] = []
        for (option, path) in outputs {
            guard let path, !path.isEmpty else { continue }
            let resolved = resolvedPath(path)
            if let earlier = seen.first(where: { $0.resolved.utf8.elementsEqual(resolved.utf8) }) {
                throw UsageError("\(earlier.option) and \(option) name the same file \(path): give each output its own file")
            }
            seen.append((option, resolved))
        }
    }

    /// Checks, before any work, that `path` can be written: its folder exists and is writable and
    /// it is not a folder itself.
    ///
    /// - Throws: `UsageError` naming the option and the path.
    static func checkWritable(_ path: String, option: String, mayReplaceScenario: Bool = false) throws {
        guard !path.isEmpty else { throw UsageError("\(option) needs a file name") }
        // Bad usage, before any work (a seventh outside tester: the write was refused at the end
        // with exit 70, an internal fault, after a run that passed).
        // A link that leads nowhere it can end (a loop): said now, not as exit 70 at the end.
        var linkInfo = stat()
        if lstat(path, &linkInfo) == 0, (linkInfo.st_mode & S_IFMT) == S_IFLNK, stat(path, &linkInfo) != 0, errno == ELOOP {
            throw UsageError("\(option) \(path) is a loop of symbolic links")
        }
        if !mayReplaceScenario, Data.isScenarioFile(path) { throw UsageError("\(option) \(path) is a scenario file: an output never replaces one (name another file)") }
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), isDir.boolValue {
            throw UsageError("\(option) \(path) is a folder, not a file")
        }
        let folder = (path as NSString).deletingLastPathComponent
        let dir = folder.isEmpty ? "." : folder
        guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue, FileManager.default.isWritableFile(atPath: dir) else {
            throw UsageError("\(option) \(path): the folder '\(dir)' does not exist or is not writable")
        }
    }

    /// Kills every process group this process started (workers, adapters: `ChildProcessGroups`),
    /// runs `handler` (then exits with 130 for SIGINT, 143 for SIGTERM) when the process is
    /// interrupted; returns the registrations to cancel when the command is done (`InterruptSignals`).
    static func onInterrupt(_ handler: @escaping @Sendable (_ signal: Int32) -> Void) -> [InterruptSignals.Registration] {
        [InterruptSignals.register(handler)]
    }

    /// Results so far, shared with the signal handler (an `NSLock` guards it): those printed (in
    /// order), and those finished in worker processes but not yet printed (a slow scenario before
    /// them holds their lines back), by position.
    final class RunProgress: @unchecked Sendable {
        // @unchecked Sendable: `results` and `unprinted` are only touched inside `lock`.
        private let lock = NSLock()
        private var results: [ScenarioResult] = []
        private var unprinted: [Int: ScenarioResult] = [:]
        func append(_ r: ScenarioResult) { lock.withLock { results.append(r) } }
        /// Records the result of the scenario at `position` as it finishes, before its line.
        func finished(_ position: Int, _ r: ScenarioResult) { lock.withLock { unprinted[position] = r } }
        var snapshot: [ScenarioResult] { lock.withLock { results } }
        /// Every finished result: the printed ones, then the others by position (an interrupt
        /// kept only the printed ones: a slow first scenario made the verdict say that none of 36
        /// had finished, a twenty-eighth outside tester).
        var finishedSoFar: [ScenarioResult] {
            lock.withLock {
                let printed = Set(results.map { ExactKey($0.file + "\u{0}" + $0.name) })
                return results + unprinted.sorted { $0.key < $1.key }.map(\.value).filter { !printed.contains(ExactKey($0.file + "\u{0}" + $0.name)) }
            }
        }
    }

    static func run(_ arguments: [String], driver: any SDKDriver) async -> Int32 {
        let options: RunOptions
        let files: [String]
        let originalDriver = driver
        var driver = driver
        do {
            options = try parseRun(arguments)
            // Explore's own options: `--out` is explore's alone, the schedule budget applies only
            // with `--explore` (accepted and ignored before).
            if options.given.contains("--out") { throw UsageError("run takes no --out (explore writes schedules; run's outputs: --verdict, --junit, --html, --mermaid)") }
            if !options.explore, let budget = options.given.first(where: { $0 == "--exhaustive" || $0 == "--max-schedules" }) {
                throw UsageError("\(budget) applies to run only with --explore")
            }
            try checkWritable(options.verdict, option: "--verdict")
            if let junit = options.junit { try checkWritable(junit, option: "--junit") }
            try options.report.checkWritable()
            files = try discover(options.paths)
            // No output over an input: `--verdict scenarios/x.json` would delete the scenario.
            let outputs: [(option: String, path: String?)] = [("--verdict", options.verdict), ("--junit", options.junit),
                                                                ("--html", options.report.html), ("--mermaid", options.report.mermaid)]
            try checkDistinct(outputs)
            for file in files { try checkDistinct([("the scenario file", file)] + outputs) }
            // Nor over a file the adapter command names (its program, its script: an eighth
            // outside tester's `--verdict` replaced the adapter).
            for word in (options.sdkCommand ?? "").split(whereSeparator: { $0 == " " || $0 == "'" || $0 == "\"" }).map(String.init)
            where FileManager.default.fileExists(atPath: word) {
                try checkDistinct([("a file of --sdk-command", word)] + outputs)
            }
            if let m = options.mutant { driver = MutantRun.driver(Defect(rawValue: m)) }
            if options.sdkCommand != nil && options.mutant != nil { throw UsageError("--sdk-command and --mutant exclude each other") }
        } catch let e as UsageError {
            if e.message.isEmpty { print(usage); return Exit.ok.rawValue }
            writeRefusal("bad usage: \(e.message)", to: verdictPath(in: arguments), junit: rawValue(of: "--junit", in: arguments),
                         otherOutputs: ["--html", "--mermaid"].compactMap { rawValue(of: $0, in: arguments) }, driver: driver)
            return usageError(e.message)
        } catch {
            writeRefusal("bad usage: \(error)", to: verdictPath(in: arguments), junit: rawValue(of: "--junit", in: arguments),
                         otherOutputs: ["--html", "--mermaid"].compactMap { rawValue(of: $0, in: arguments) }, driver: driver)
            return usageError("\(error)")
        }
        // At once, before files are read: a run killed from here on never leaves an earlier run's
        // verdict looking current (SIGINT/SIGTERM get their handler once the scenarios are known).
        // `--list` runs nothing and writes nothing: it replaced the last real verdict with an
        // in-progress stub (an eighty-first outside tester, F1).
        if !options.list { writeInProgress(Verdict(harnessVersion: version, sdkName: driver.sdkName, sdkVersion: driver.sdkVersion, seed: options.seed,
                                startedAt: Date(), durationMilliseconds: 0, results: [], invalid: []),
                        options: options, secrets: [], planned: files.count) }
        var external: ProcessSDKDriver?
        // An adapter that cannot start (no `hello`, a broken one) is the SDK's failure, not the
        // harness's: every selected scenario is an `error` naming why, and the run exits 1 (an
        // eleventh outside tester: it exited 70, "internal fault", with no scenario in the verdict).
        var unusableAdapter: String?
        if let command = options.sdkCommand {
            switch await launchDriver(command) {
            case .success(let d): external = d; driver = d
            case .failure(let e): unusableAdapter = "the SDK adapter cannot be used: \(e)"
            }
        }
        let startedAt = Date()
        let started = DispatchTime.now()
        let (scenarios, invalid) = load(files, seed: options.seed)
        // One redaction for every output of the run: every key of every file's fixtures and configs.
        let secrets = Array(Set(ConfiguredSecrets.keys(files: files, scenarios: scenarios)))
        let redactor = SecretRedactor(secrets: secrets)
        @Sendable func tell(_ line: String) { say(redactor.redact(line)) }
        for item in invalid {
            // The error names its file first (`FILE: at PATH: ...`); the line names it once.
            let reason = item.error.hasPrefix(item.file + ": ") ? String(item.error.dropFirst(item.file.count + 2)) : item.error
            tell("ERROR \(item.file): malformed: \(reason)")
            complain(redactor.redact("malformed scenario: \(item.error)"))
        }
        let selected = scenarios.filter { s in
            options.filters.isEmpty || options.filters.contains { f in s.name.contains(f) || s.tags.contains { $0.contains(f) } }
        }
        for (name, file) in options.known.unmatched(in: scenarios) {
            tell("WARNING --skip-from \(file): '\(name.unambiguous)' names no scenario of this run")
        }
        if let unusableAdapter, !selected.isEmpty {
            let results = selected.map {
                ScenarioResult(name: $0.name, file: $0.file, tags: $0.tags, source: $0.source, status: .error, durationMilliseconds: 0,
                               checks: [], reason: unusableAdapter, smoke: nil, history: [], historyDigest: "")
            }
            var v = Verdict(harnessVersion: version, sdkName: driver.sdkName, sdkVersion: driver.sdkVersion, seed: options.seed,
                            startedAt: startedAt, durationMilliseconds: ScenarioRunner.elapsed(since: started), results: results, invalid: invalid)
            v.extra["error"] = .string(unusableAdapter)
            v.extra["ok"] = .bool(false)
            try? v.write(to: options.verdict, redacting: secrets)
            if let junit = options.junit { try? v.junit(redacting: secrets, error: unusableAdapter).writeOutput(to: junit) }
            tell("ERROR \(unusableAdapter)")
            say("0 passed, \(results.count + invalid.count) failed (\(results.count + invalid.count) error\(results.count + invalid.count == 1 ? "" : "s"): malformed or not run)")
            complain(redactor.redact(unusableAdapter))
            return Exit.failed.rawValue
        }
        if options.list {
            list(selected, driver: driver, known: options.known)
            await external?.shutdown()
            return invalid.isEmpty ? Exit.ok.rawValue : Exit.usage.rawValue
        }
        let driverForVerdict = driver
        @Sendable func verdict(_ results: [ScenarioResult]) -> Verdict {
            var v = Verdict(harnessVersion: version, sdkName: driverForVerdict.sdkName, sdkVersion: driverForVerdict.sdkVersion, seed: options.seed,
                            startedAt: startedAt, durationMilliseconds: ScenarioRunner.elapsed(since: started),
                            results: results, invalid: invalid)
            v.includesHistory = options.history
            if let m = options.mutant { v.extra["mutant"] = .string(m) }
            return v
        }
        if selected.isEmpty {
            await external?.shutdown()
            // A mistyped path or filter must not look like a green run.
            let message = "no scenario to run: \(scenarios.count) read from \(files.count) file(s)"
                + (invalid.isEmpty ? "" : " (\(invalid.count) malformed, named above)")
                + (options.filters.isEmpty ? "" : ", none matching \(options.filters)")
            var v = verdict([])
            v.extra["error"] = .string(message)
            v.extra["ok"] = .bool(false)
            try? v.write(to: options.verdict, redacting: secrets)
            if let junit = options.junit { try? v.junit(redacting: secrets, error: message).writeOutput(to: junit) }
            say("0 passed, \(invalid.count) failed (\(invalid.count) error\(invalid.count == 1 ? "" : "s"): malformed or not run)")
            complain(redactor.redact(message))
            return Exit.usage.rawValue
        }
        // A fresh verdict marked in progress first, so a stale one never looks current.
        writeInProgress(verdict([]), options: options, secrets: secrets, planned: selected.count)
        // Interrupted (SIGINT, SIGTERM): write what finished, and say which were not run.
        let progress = RunProgress()
        let box = PoolBox()
        let sources = onInterrupt { sig in
            box.pool?.killAll()
            let done = progress.finishedSoFar
            let finished = Set(done.map { ExactKey($0.file + "\u{0}" + $0.name) })
            let rest = selected.filter { !finished.contains(ExactKey($0.file + "\u{0}" + $0.name)) }.map {
                ScenarioResult(name: $0.name, file: $0.file, tags: $0.tags, source: $0.source, status: .error, durationMilliseconds: 0,
                               checks: [], reason: "interrupted by signal \(sig) before it finished", smoke: nil, history: [], historyDigest: "")
            }
            var v = verdict(done + rest)
            v.extra["interrupted"] = .bool(true)
            // Never `ok` beside exit 130/143, whatever finished (a fifty-third outside tester, C).
            v.extra["ok"] = .bool(false)
            v.extra["error"] = .string("interrupted by signal \(sig): \(done.count) of \(selected.count) scenarios finished")
            try? v.write(to: options.verdict, redacting: secrets)
            // The JUnit file says it too: a run whose every scenario had finished read green there
            // beside exit 130/143 (a fifty-fourth outside tester, H).
            if let junit = options.junit { try? v.junit(redacting: secrets, error: v.extra["error"]?.stringValue).writeOutput(to: junit) }
            // The reports too: what failed before the signal is shown, and an earlier run's report
            // never stays as if it were this one's (an outside tester: "all green" survived).
            _ = options.report.write(v, redacting: secrets)
            tell("interrupted: \(done.count) of \(selected.count) scenarios finished; verdict written to \(options.verdict)")
        }
        defer { sources.forEach { $0.cancel() } }
        tell(runHeader(driver: driver, options: options, files: files.count, selected: selected.count))
        let runner = ScenarioRunner(driver: driver, seed: options.seed, stepTimeoutCap: options.stepTimeoutCap)
        var stop = false
        // Each scenario in a worker process (crash isolation, `--jobs`), unless run as a library.
        let isolated = external == nil ? workerExecutable(for: originalDriver) : nil
        var workerResults: [ScenarioResult]?
        if let executable = isolated {
            let jobs = arguments.contains("--jobs") ? options.jobs : cores
            workerResults = await runInWorkers(selected, executable: executable, jobs: jobs, options: options, progress: progress, box: box, tell: tell)
        }
        for s in selected where isolated == nil {
            if stop {
                progress.append(ScenarioResult(name: s.name, file: s.file, tags: s.tags, source: s.source, status: .skipped,
                                               durationMilliseconds: 0, checks: [], reason: "--fail-fast: an earlier scenario failed",
                                               smoke: nil, history: [], historyDigest: ""))
                continue
            }
            var r: ScenarioResult
            if options.explore, let root = try? JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: s.file)), file: s.file),
               let settings = try? Explorer.settings(of: root, file: s.file) {
                r = await exploreAsResult(s, root: root, settings: settings, options: options, runner: runner)
            } else {
                r = await runner.run(s)
            }
            let knownLine = options.known.matches(s) ? options.known.apply(&r) : nil
            progress.append(r)
            tell(knownLine ?? line(for: r))
            if options.failFast && (r.status == .failed || r.status == .error || r.status == .crashed) { stop = true }
        }
        await external?.shutdown()
        // Interrupted: the handler writes the verdict and exits; what its kills did is no result.
        await ChildProcessGroups.parkIfInterrupted()
        let confirmed = await Self.deadlocksOfTheFile(workerResults ?? progress.snapshot, selected: selected, options: options,
                                                      driver: originalDriver, tell: tell)
        var final = verdict(confirmed)
        var problem: String?
        let counts = final.counts
        if counts.passed == 0 && counts.failed + counts.error + final.crashedCount == 0 {
            // Nothing was checked: not a green run (exit 1, "ok": false).
            let message = "nothing passed: all \(counts.skipped) scenario(s) were skipped"
            final.extra["error"] = .string(message)
            problem = message
        }
        // The final files, unless a signal came first (its handler writes them); a signal after
        // them rewrites them marked interrupted (InterruptSignals.finalWrite).
        var writeFailure: Int32?
        let written = final, junitPath = options.junit, report = options.report, verdictPath = options.verdict
        let wrote = InterruptSignals.finalWrite({
            do { try final.write(to: options.verdict, redacting: secrets) } catch {
                StandardStream.error(Data("contract-harness: cannot write the verdict to \(options.verdict): \(error.localizedDescription)\n".utf8))
                writeFailure = Exit.internalFault.rawValue
                return
            }
            if let junit = options.junit {
                do { try final.junit(redacting: secrets, error: problem).writeOutput(to: junit) } catch {
                    StandardStream.error(Data("contract-harness: cannot write the JUnit file to \(junit): \(error.localizedDescription)\n".utf8))
                    writeFailure = Exit.internalFault.rawValue
                    return
                }
            }
            if let failure = options.report.write(final, redacting: secrets) {
                complain(failure)
                writeFailure = Exit.internalFault.rawValue
            }
        }, rewrite: { sig in
            let v = written.interruptedAfterFinishing(sig)
            // Said only when it is so (an eighty-seventh outside tester: "verdict written" followed a
            // write that had failed).
            do {
                try v.write(to: verdictPath, redacting: secrets)
                say("interrupted as the run finished; verdict written to \(verdictPath)")
            } catch {
                StandardStream.error(Data("contract-harness: interrupted as the run finished; cannot write the verdict to \(verdictPath): \(error.localizedDescription)\n".utf8))
            }
            if let junitPath { try? v.junit(redacting: secrets, error: v.extra["error"]?.stringValue).writeOutput(to: junitPath) }
            _ = report.write(v, redacting: secrets)
        })
        if !wrote { return Exit.failed.rawValue }
        if let writeFailure { return writeFailure }
        let c = final.counts
        say("\(c.passed) passed, \(c.failed + c.error + final.crashedCount) failed" + (c.skipped > 0 ? ", \(c.skipped) skipped" : "")
            + (final.crashedCount > 0 ? " (\(final.crashedCount) crashed)" : "")
            // The verdict counts these as `error`, not `failed`: said, so the two agree (a sixth outside tester).
            + (c.error > 0 ? " (\(c.error) error\(c.error == 1 ? "" : "s"): malformed or not run)" : "") + (problem.map { ": \($0)" } ?? ""))
        if !invalid.isEmpty { return Exit.usage.rawValue }
        return c.failed + c.error + final.crashedCount > 0 || problem != nil ? Exit.failed.rawValue : Exit.ok.rawValue
    }

    /// Loads the scenario files under `paths`, splitting good ones from malformed ones.
    static func load(_ files: [String], seed: UInt64) -> (scenarios: [Scenario], invalid: [(file: String, error: String)]) {
        var scenarios: [Scenario] = []
        var invalid: [(file: String, error: String)] = []
        // Keyed by `String`, so canonically equivalent names (NFC and NFD) collide on purpose: two
        // scenarios whose names print alike would be one line in every report.
        var names: [String: (file: String, name: String)] = [:]
        // One file named twice (`run a.json a.json`, a folder and its own subfolder, a symbolic
        // link beside its target) runs once: it is no second scenario of the same name (a
        // sixty-fifth outside tester: reported malformed, exit 64).
        // By the resolved path's bytes: two names that differ only in Unicode normalization
        // (NFC and NFD `é`) are two files on Linux, and a `Set<String>` would take them for one.
        var seen: Set<[UInt8]> = []
        for file in files {
            if let real = realpath(file, nil) {
                defer { free(real) }
                let bytes = Array(UnsafeBufferPointer(start: UnsafeRawPointer(real).assumingMemoryBound(to: UInt8.self), count: strlen(real)))
                if !seen.insert(bytes).inserted { continue }
            }
            do {
                let s = try SeedSubstitution.parsing(try InputFile.contents(of: file), seed: seed) { try ScenarioParser.parse($0, file: file) }
                if let other = names[s.name] {
                    let spelled = JSONValue.string(s.name).unambiguousJSONText
                    let same = other.name.unicodeScalars.elementsEqual(s.name.unicodeScalars)
                    invalid.append((file, "\(file): at $.name: expected a name no other scenario uses, found \(spelled) (also in \(other.file)"
                                    + (same ? ")" : " as \(JSONValue.string(other.name).unambiguousJSONText): names that differ only in Unicode normalization print alike, so they count as one)")))
                    continue
                }
                names[s.name] = (file, s.name)
                scenarios.append(s)
            } catch {
                invalid.append((file, "\(error)"))
            }
        }
        return (scenarios, invalid)
    }

    static func mutants(_ arguments: [String]) async -> Int32 {
        // `--list`: the variants by number, name and defect, and nothing run (a sixty-third outside
        // tester looked for them in the README).
        if arguments.contains("--list") {
            guard arguments == ["--list"] else { return usageError("mutants --list takes no other option") }
            for (i, defect) in Defect.allCases.enumerated() {
                print("\(String(repeating: " ", count: i < 9 ? 1 : 0))\(i + 1) \(defect.rawValue): \(defect.summary)")
            }
            return Exit.ok.rawValue
        }
        var options: RunOptions
        var cap = 1500
        var full = false
        do {
            var rest: [String] = []
            var cursor = ArgumentCursor(arguments)
            while let a = cursor.next() {
                if a == "--full" { full = true; continue }
                guard a == "--step-timeout-ms" else { rest.append(a); continue }
                guard let n = Int(try cursor.value(for: a)), n > 0 else {
                    throw UsageError("--step-timeout-ms takes a positive whole number of milliseconds")
                }
                cap = n
            }
            // `run` options this command does not honour are refused, not ignored (a sixth outside
            // tester: `mutants --list` ran the whole matrix).
            let ignoredOptions = ["--sdk-command", "--mutant", "--junit", "--html", "--mermaid", "--skip", "--skip-from",
                                  "--fail-fast", "--history", "--explore", "--watch"]
            if let ignored = rest.first(where: { ignoredOptions.contains($0) }) {
                throw UsageError("mutants takes no \(ignored) (its options: PATH..., --filter, --jobs, --step-timeout-ms, --full, --verdict)")
            }
            options = try parseRun(rest)
            if !rest.contains("--verdict") { options.verdict = "mutants-verdict.json" }
            try checkWritable(options.verdict, option: "--verdict")
        } catch let e as UsageError {
            if e.message.isEmpty { print(usage); return Exit.ok.rawValue }
            return usageError(e.message)
        } catch {
            return usageError("\(error)")
        }
        let startedAt = Date()
        let seed = options.seed
        @Sendable func mutantsVerdict(_ invalid: [(file: String, error: String)]) -> Verdict {
            Verdict(harnessVersion: version, sdkName: "ios-mutants", sdkVersion: "", seed: seed, startedAt: startedAt,
                    durationMilliseconds: Date().timeIntervalSince(startedAt) * 1000, results: [], invalid: invalid)
        }
        // A fresh verdict marked in progress first, and one marked interrupted on SIGINT/SIGTERM:
        // a killed matrix never leaves an earlier verdict looking current.
        var inProgress = mutantsVerdict([])
        inProgress.extra["in_progress"] = .bool(true)
        inProgress.extra["ok"] = .bool(false)
        InterruptSignals.unlessInterrupted { if !isFIFO(options.verdict) { try? inProgress.write(to: options.verdict, redacting: []) } }
        let verdictPath = options.verdict
        let sources = onInterrupt { sig in
            var v = mutantsVerdict([])
            v.extra["interrupted"] = .bool(true)
            v.extra["ok"] = .bool(false)
            v.extra["error"] = .string("interrupted by signal \(sig) before the matrix finished")
            try? v.write(to: verdictPath, redacting: [])
            say("interrupted: the mutant matrix did not finish; verdict written to \(verdictPath)")
        }
        defer { sources.forEach { $0.cancel() } }
        let files: [String]
        do { files = try discover(options.paths) } catch let e as UsageError { return usageError(e.message) } catch { return usageError("\(error)") }
        let (all, invalid) = load(files, seed: options.seed)
        for item in invalid { StandardStream.error(Data("contract-harness: malformed scenario: \(item.error)\n".utf8)) }
        let scenarios = all.filter { s in
            options.filters.isEmpty || options.filters.contains { f in s.name.contains(f) || s.tags.contains { $0.contains(f) } }
        }
        say("mutants: \(scenarios.count) scenarios x \(Defect.allCases.count) broken variants and the faithful one (step limit \(cap) ms)"
            + (full ? ", every pair" : ", each variant until its first catch (--full: every pair)"))
        let counters = Explorer.Progress()
        let ticker = progressTicker(counters, command: "mutants", unit: "runs")
        defer { ticker.cancel() }
        let report = await MutantRun.run(scenarios, stepTimeoutCap: cap, executable: WorkerPool.selfExecutable,
                                         jobs: arguments.contains("--jobs") ? options.jobs : cores, seed: options.seed, full: full,
                                         counters: counters) { row in
            let by = row.caughtBy.prefix(4).joined(separator: ", ") + (row.caughtBy.count > 4 ? ", +\(row.caughtBy.count - 4) more" : "")
            say(String(format: "%@ %2d %-32@ %@", row.caught ? "CAUGHT " : "MISSED ", row.defect.item, row.defect.rawValue as NSString,
                       row.caught ? (full ? "by \(row.caughtBy.count): \(by)" : "first by \(by)") : "by no scenario: \(row.defect.summary)"))
        }
        await ChildProcessGroups.parkIfInterrupted()   // the handler writes the verdict and exits
        for name in report.baselineFailures { say("BASELINE FAIL \(name): fails against the faithful variant") }
        for pair in report.unconfirmedCatches { say("UNCONFIRMED \(pair): failed only at the capped step limit, passed with the file's own (not a catch)") }
        let caught = report.rows.filter(\.caught).count
        say(String(format: "caught %d of %d variants (%.0f%%) in %.1f s", caught, report.rows.count, report.shareCaught * 100,
                   report.durationMilliseconds / 1000))
        var verdict = Verdict(harnessVersion: version, sdkName: "ios-mutants", sdkVersion: "", seed: options.seed, startedAt: startedAt,
                              durationMilliseconds: report.durationMilliseconds, results: [], invalid: invalid)
        verdict.extra["mutants"] = report.json
        // `ok` says what the exit status says (Verdict.md): every variant caught, no baseline
        // failure (it read true beside exit 1 with variants missed: a twenty-eighth outside tester).
        let allCaught = caught == report.rows.count && report.baselineFailures.isEmpty
        if !allCaught { verdict.extra["ok"] = .bool(false) }
        if let failure = writeFinal(verdict, to: options.verdict, secrets: ConfiguredSecrets.keys(files: files, scenarios: all)) { return failure }
        say(report.summaryLine)
        if !invalid.isEmpty { return Exit.usage.rawValue }
        return allCaught ? Exit.ok.rawValue : Exit.failed.rawValue
    }

    /// Explores `s` and reports it as one scenario result: failed when a schedule fails.
    static func exploreAsResult(_ s: Scenario, root: JSONValue, settings: Explorer.Settings, options: RunOptions,
                                runner: ScenarioRunner) async -> ScenarioResult {
        if let limit = outOfProcessExploreLimit(s, driver: runner.driver) {
            return ScenarioResult(name: s.name, file: s.file, tags: s.tags, source: s.source, status: .skipped, durationMilliseconds: 0,
                                  checks: [], reason: "the driver lacks \(limit.capability) (\(limit.reason))", smoke: nil, history: [],
                                  historyDigest: "")
        }
        var settings = settings
        if let k = options.maxSchedules { settings.maxSchedules = k; settings.maxSchedulesGiven = true }
        if options.exhaustive { settings.exhaustive = true }
        let progress = Explorer.Progress()
        let ticker = progressTicker(progress)
        let report = await Explorer.explore(root, file: s.file, settings: settings, seed: options.seed,
                                            runner: ScenarioRunner(driver: runner.driver, seed: options.seed, keepsHistory: false),
                                            reference: referenceRunner(options: options, driver: runner.driver), progress: progress)
        ticker.cancel()
        var check = CheckResult(name: "explore", passed: report.firstFailure == nil,
                                message: "\(report.schedules.count) schedules, \(report.failed) failed, \(report.infeasible) infeasible"
                                    + (report.failedOnReference > 0 ? ", \(report.failedOnReference) fail on the reference too" : ""))
        if let f = report.firstFailure {
            check.message = "schedule \(f.order) fails '\(f.check)': \(f.result.failureMessage(of: f.check)) (\(report.schedules.count) schedules, \(report.failed) failed)"
            check.history = f.result.firstFailure?.history
        }
        // Skipped schedules (a capability the driver lacks) never pass: without a failure, the
        // exploration is skipped.
        let unjudged = report.firstFailure == nil && report.skipped > 0
        let unrunnable = report.nothingCarriedOut
        var result = ScenarioResult(name: s.name, file: s.file, tags: s.tags, source: s.source,
                                    status: report.firstFailure != nil ? .failed : unjudged ? .skipped : unrunnable != nil ? .error : .passed,
                                    durationMilliseconds: report.durationMilliseconds, checks: unjudged || unrunnable != nil ? [] : [check],
                                    reason: unjudged ? "\(report.skipped) of \(report.schedules.count) schedules were skipped (the driver lacks a capability the scenario needs)"
                                        : unrunnable,
                                    smoke: nil, history: [], historyDigest: "")
        result.exploration = report.json
        // The report shows the shrunk file and a replay's timeline (Report+Exploration.swift).
        if let f = report.firstFailure { result = await f.attach(to: result, file: s.file, runner: runner) }
        return result
    }

    /// `results` with each failure that is the file's own deadlock made an `error` of the file: a
    /// scenario that failed because a step could not be carried out in the file's order (it waits
    /// for what only a later step provides, releases a hold with nothing held: `infeasible`) is
    /// run on the reference SDK (`referenceRunner`), and when the reference cannot carry it out
    /// either, no SDK can pass it as written. Before, `run` counted such a file the SDK's failure
    /// (an eighty-seventh outside tester, M3), as `explore` had counted such orders (the guide:
    /// deadlocks of a scenario reported as SDK failures). A failure the reference does not share
    /// stays the SDK's (it sent a request a correct SDK does not, and a hold caught it), and so
    /// does a result with any failed check the reference passes (a wrong value before the
    /// deadlock).
    static func deadlocksOfTheFile(_ results: [ScenarioResult], selected: [Scenario], options: RunOptions, driver: any SDKDriver,
                                   tell: (String) -> Void) async -> [ScenarioResult] {
        guard results.contains(where: { $0.status == .failed && $0.infeasible && !$0.infeasibleByChoice }),
              let reference = referenceRunner(options: options, driver: driver) else { return results }
        var out = results
        for (i, r) in results.enumerated() where r.status == .failed && r.infeasible && !r.infeasibleByChoice {
            guard let s = selected.first(where: { $0.file.isExactly(r.file) && $0.name.isExactly(r.name) }) else { continue }
            let shared = await reference.run(s)
            // Only when the SDK fails nothing the reference does not: a wrong value before the
            // deadlock is the SDK's failure, whatever the file's order does later (an eighty-eighth
            // outside tester: a stale write asserted at step 6 was hidden as the file's error).
            let failing = { (x: ScenarioResult) in Set(x.checks.filter { !$0.passed }.map(\.name)) }
            guard shared.infeasible, shared.status != .passed, failing(r).isSubset(of: failing(shared)) else { continue }
            out[i].status = .error
            out[i].reason = "the scenario cannot be carried out as written: the reference SDK (\(reference.driver.sdkName)) cannot carry it out "
                + "in this order either, and fails every check this SDK fails (an error of the file, not of the SDK): \(r.reason ?? r.checks.first(where: { !$0.passed }).map { r.failureMessage(of: $0.name) } ?? "")"
            tell("ERROR \(r.name): counted an error of the file: the reference SDK cannot carry it out in this order either")
        }
        return out
    }

    /// The reference a schedule must pass on for its failure to count (Explorer.explore): an
    /// implementation written apart from the SDK under exploration, so that an order both fail
    /// is the file's, not the SDK's. The faithful variant (`MutantRun.driver(nil)`) when exploring
    /// the shipping SDK (in process or through its adapter: the same name) or a broken variant; the
    /// shipping SDK when exploring the faithful variant or another SDK. Before, the shipping SDK
    /// was its own reference, and an order no SDK can carry out (a clock advance moved before the
    /// operation it was to wake, a wait for a cancellation moved before the cancel, a one-shot
    /// fault a cache hit leaves unused) failed it (a twenty-seventh outside tester).
    static func referenceRunner(options: RunOptions, driver: any SDKDriver) -> ScenarioRunner? {
        let shipping = SwiftSDKDriver()
        let faithful = MutantRun.driver(nil)
        let name = driver.sdkName.unicodeScalars
        let isShipping = name.elementsEqual(shipping.sdkName.unicodeScalars)
        let isFaithful = name.elementsEqual(faithful.sdkName.unicodeScalars)
        // `--mutant NAME` makes the driver `ios-mutant-NAME`: the name alone decides.
        let isVariant = !isFaithful && driver.sdkName.hasPrefix("ios-mutant-")
        // Under the same step limits as the SDK judged.
        return ScenarioRunner(driver: isShipping || isVariant ? faithful : shipping, seed: options.seed,
                              stepTimeoutCap: options.stepTimeoutCap, keepsHistory: false)
    }

    /// Worker processes running `reference` (a `referenceRunner`: the faithful variant, `--mutant
    /// none` in a worker, or the shipping SDK), or `nil` when this binary cannot start workers.
    static func referenceIsolation(of reference: ScenarioRunner) -> Explorer.Isolation? {
        let faithful = reference.driver.sdkName.unicodeScalars.elementsEqual(MutantRun.driver(nil).sdkName.unicodeScalars)
        return WorkerPool.selfExecutable.map { Explorer.Isolation(executable: $0, mutant: faithful ? "none" : nil, slots: cores) }
    }

    /// Prints a progress line to stderr once a second while an exploration (or the mutant matrix,
    /// `command` "mutants", `unit` "runs": one run per variant and scenario) runs; cancel the
    /// returned timer when it ends.
    static func progressTicker(_ progress: Explorer.Progress, command: String = "explore", unit: String = "schedules") -> DispatchSourceTimer {
        let started = DispatchTime.now()
        let timer = DispatchSource.makeTimerSource(queue: .global())
        timer.schedule(deadline: .now() + .seconds(1), repeating: .seconds(1))
        timer.setEventHandler {
            let p = progress.snapshot
            let seconds = Int(ScenarioRunner.elapsed(since: started) / 1000)
            StandardStream.error(Data("\(command): \(p.done)/\(p.total) \(unit), \(p.failed) failed, \(p.infeasible) infeasible, \(seconds) s (\(p.phase))\n".utf8))
        }
        timer.resume()
        return timer
    }

    static func explore(_ arguments: [String], driver: any SDKDriver) async -> Int32 {
        if arguments.contains("--interleave") { return await InterleaveCommand.explore(arguments, driver: driver) }
        let options: RunOptions
        let originalDriver = driver
        var driver = driver
        do {
            options = try parseRun(arguments)
            try refuse(options, command: "explore", honoured: exploreOptions)
            if let m = options.mutant { driver = MutantRun.driver(Defect(rawValue: m)) }
        } catch let e as UsageError {
            if e.message.isEmpty { print(usage); return Exit.ok.rawValue }
            return usageError(e.message)
        } catch { return usageError("\(error)") }
        guard options.paths.count == 1, let file = options.paths.first, file != "scenarios" else {
            return usageError("explore takes exactly one scenario file")
        }
        if options.sdkCommand != nil && options.mutant != nil { return usageError("--sdk-command and --mutant exclude each other") }
        let root: JSONValue
        let settings: Explorer.Settings
        var secrets: [String] = []
        do {
            let original = try InputFile.contents(of: file)
            let data = SeedSubstitution.apply(original, seed: options.seed)
            root = try SeedSubstitution.parsing(original, seed: options.seed) { try JSONValue.parse($0, file: file) }
            secrets = ConfiguredSecrets.keys(of: try ScenarioParser.parse(data, file: file)) + ConfiguredSecrets.keys(in: root)
            guard var s = try Explorer.settings(of: root, file: file) else {
                throw ScenarioError(file: file, path: "$.explore", expected: "an \"explore\" section listing the steps that may move", found: "none")
            }
            if let k = options.maxSchedules { s.maxSchedules = k; s.maxSchedulesGiven = true }
            if options.exhaustive { s.exhaustive = true }
            settings = s
        } catch {
            complain(SecretRedactor(secrets: ConfiguredSecrets.keys(files: [file], scenarios: [])).redact("\(error)"))
            return Exit.usage.rawValue
        }
        // Keys are hidden on the console and in the verdict; the schedule file keeps them (below).
        do {
            try checkExploreOutputs(file: file, name: root["name"]?.stringValue, suffix: "-schedule", out: options.out,
                                    verdict: arguments.contains("--verdict") ? options.verdict : nil)
        } catch let e as UsageError { return usageError(e.message) } catch { return usageError("\(error)") }
        let redactor = SecretRedactor(secrets: secrets)
        var external: ProcessSDKDriver?
        if let command = options.sdkCommand {
            switch await launchDriver(command) {
            case .success(let d): external = d; driver = d
            case .failure(let e):
                // The SDK's failure, as in `run`: exit 1, and the verdict says why when one is asked for.
                if arguments.contains("--verdict") { writeRefusal("the SDK adapter cannot be used: \(e)", to: options.verdict, driver: driver) }
                StandardStream.error(Data("contract-harness: the SDK adapter cannot be used: \(e)\n".utf8))
                return Exit.failed.rawValue
            }
        }
        // Explore judges the SDK it was given or says it cannot: a driver without a capability the
        // scenario needs skips it, as `run` does, and nothing passed (exit 1, "ok": false).
        if let skipped = skipUnmet(root, file: file, driver: driver, options: options, arguments: arguments, secrets: secrets) {
            await external?.shutdown()
            return skipped
        }
        let exploreVerdict = arguments.contains("--verdict") ? options.verdict : nil
        let interruptedDriver = driver
        let progress = Explorer.Progress()
        let interruptSecrets = secrets
        let sources = onInterrupt { sig in
            let p = progress.snapshot
            if let path = exploreVerdict {
                writeInterrupted("explore interrupted by signal \(sig) before it finished", to: path, driver: interruptedDriver, seed: options.seed,
                                 extra: ["explore_progress": .object(["done": .number(Double(p.done)), "total": .number(Double(p.total)),
                                                                      "failed": .number(Double(p.failed)), "infeasible": .number(Double(p.infeasible))])],
                                 secrets: interruptSecrets)
            }
            say("interrupted: explore stopped after \(p.done) of \(p.total) schedules" + (exploreVerdict.map { "; verdict written to \($0)" } ?? ""))
        }
        defer { sources.forEach { $0.cancel() } }
        say("explore \(root["name"]?.stringValue ?? file): seed \(options.seed), steps \(settings.steps) may move, \(settings.exhaustive && !settings.maxSchedulesGiven ? "every order" : "at most \(settings.maxSchedules) schedules")\(settings.exhaustive ? ", in order" : "")")
        // Schedules run in worker processes, so one that crashes the SDK is reported, not fatal.
        let isolation = workerExecutable(for: originalDriver).map { Explorer.Isolation(executable: $0, mutant: options.mutant, slots: cores) }
        let ticker = progressTicker(progress)
        let reference = referenceRunner(options: options, driver: driver)
        // The reference confirms in workers too (in process, runs it could not finish stayed in memory).
        let referenceIsolation = reference.flatMap(referenceIsolation(of:))
        let report = await Explorer.explore(root, file: file, settings: settings, seed: options.seed,
                                            runner: ScenarioRunner(driver: driver, seed: options.seed, stepTimeoutCap: options.stepTimeoutCap, keepsHistory: false),
                                            reference: reference, concurrency: options.jobs, isolation: external == nil ? isolation : nil,
                                            referenceIsolation: referenceIsolation, progress: progress)
        ticker.cancel()
        // The failure's replay, for the verdict's timeline, while an adapter is still up.
        var replayed: ScenarioResult?
        if let f = report.firstFailure, options.verdict != "verdict.json" || arguments.contains("--verdict") {
            replayed = await ExploredFailureReplay.replay(f.scenarioJSON, file: file,
                                                          runner: ScenarioRunner(driver: driver, seed: options.seed, stepTimeoutCap: options.stepTimeoutCap),
                                                          isolation: external == nil ? isolation : nil)
        }
        await external?.shutdown()
        await ChildProcessGroups.parkIfInterrupted()   // the handler writes the verdict and exits
        say(String(format: "%d schedules (%@), %d failed, %d infeasible, %.0f schedules/s", report.schedules.count,
                   report.mode, report.failed, report.infeasible, report.schedulesPerSecond)
            + (report.crashed > 0 ? " (\(report.crashed) crashed)" : "")
            + (report.failedOnReference > 0 ? ", \(report.failedOnReference) fail on the reference too (not counted"
               + (report.firstFailedOnReference.map { "; the first, order \($0.order), fails '\($0.check)' there" } ?? "") + ")" : ""))
        say("reference: " + (report.reference.map { "\($0) (a failure counts only when the reference passes the same order)" }
                             ?? "\(driver.sdkName) itself"))
        // Skipped schedules never pass: with no failure, the exploration judged nothing.
        let unjudged = report.firstFailure == nil && report.skipped > 0
        if unjudged { say("\(report.skipped) of \(report.schedules.count) schedules were skipped: the driver lacks a capability the scenario needs") }
        // Nor do orders none of which could be carried out (each infeasible, or failing on the
        // reference too): the scenario cannot pass as written, an error of the file (a sixteenth
        // outside tester: a second release of one fault made 24 of 24 orders infeasible, passed).
        let unrunnable = report.nothingCarriedOut != nil
        if let why = report.nothingCarriedOut { say("\(why); contract-harness run \(shellWord(file)) says why") }
        var scheduleUnwritten: String?
        if let f = report.firstFailure {
            let out = options.out ?? Self.defaultOutput(report.scenario, suffix: "-schedule")
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            // The written file keeps the scenario's own keys, as the file it came from does: it must
            // replay (masked as `***`, every request of a replay was answered 401 and a broken SDK
            // passed its own failing schedule: a fourteenth outside tester). Console and verdict hide them.
            // Which order failed is said first: a file that cannot be written loses nothing else.
            say(redactor.redact("first failing schedule: order \(f.order) fails '\(f.check)': \(f.result.failureMessage(of: f.check))"
                + (f.reference.map { " (passes on \($0))" } ?? "")))
            // A schedule file that cannot be written loses neither the verdict nor the order: both
            // are still written and said, and the exit is an internal fault (an eighty-seventh
            // outside tester: a full disk or a name too long for the file system ended the run
            // with exit 70 before the verdict, and no verdict at all).
            do {
                try (encoder.encode(f.scenarioJSON) + Data("\n".utf8)).writeOutput(to: out, mayReplaceScenario: true)
                say("written to \(out) (shrunk from \(f.stepsBefore) to \(f.stepsAfter) steps); replay: \(replayCommand(out, options))")
            } catch {
                StandardStream.error(Data("contract-harness: cannot write \(out): \(error)\n".utf8))
                scheduleUnwritten = "the failing schedule could not be written to \(out): \(error.localizedDescription)"
            }
        }
        if options.verdict != "verdict.json" || arguments.contains("--verdict") {
            guard let s = try? ScenarioParser.parse(root.serialized(), file: file) else { return Exit.internalFault.rawValue }
            // A first failure that is the SDK's crash is the scenario's crash, counted as `run`
            // counts one (`counts.crashed`; a sixty-sixth outside tester: `failed`, crashed 0).
            let crashed = report.firstFailure?.result.status == .crashed
            var result = ScenarioResult(name: s.name, file: file, tags: s.tags, source: s.source,
                                        status: crashed ? .crashed : report.firstFailure != nil ? .failed : unjudged ? .skipped : unrunnable ? .error : .passed,
                                        durationMilliseconds: report.durationMilliseconds,
                                        checks: unjudged || unrunnable ? [] : [CheckResult(name: "explore", passed: report.firstFailure == nil,
                                                                                          message: report.firstFailure.map { "order \($0.order) fails '\($0.check)': \($0.result.failureMessage(of: $0.check))" })],
                                        reason: unjudged ? "\(report.skipped) of \(report.schedules.count) schedules were skipped"
                                            : crashed ? "the SDK crashed in \(report.crashed) of \(report.schedules.count) schedules; first: order \(report.firstFailure!.order)"
                                            : report.nothingCarriedOut,
                                        smoke: nil, history: [], historyDigest: "")
            result.exploration = report.json
            // The failure's replay, for the report's swim lanes (Verdict.md: a failing scenario
            // always has its timeline; a forty-eighth outside tester, K: it had none).
            if let f = report.firstFailure { result = ExploredFailureReplay.attach(f.scenarioJSON, replay: replayed, to: result) }
            var verdict = Verdict(harnessVersion: version, sdkName: driver.sdkName, sdkVersion: driver.sdkVersion, seed: options.seed,
                                  startedAt: Date(), durationMilliseconds: report.durationMilliseconds, results: [result], invalid: [])
            if unjudged { verdict.extra["ok"] = .bool(false); verdict.extra["error"] = .string("nothing passed: all 1 scenario(s) were skipped") }
            if let scheduleUnwritten { verdict.extra["ok"] = .bool(false); verdict.extra["error"] = .string(scheduleUnwritten) }
            // A verdict that cannot be written is an internal fault, said (it was dropped silently,
            // exit 0, the old file left in place: a twenty-seventh outside tester).
            if let failure = writeFinal(verdict, to: options.verdict, secrets: secrets) { return failure }
        }
        if scheduleUnwritten != nil { return Exit.internalFault.rawValue }
        if unjudged {
            say("0 passed, 0 failed, 1 skipped: nothing passed: all 1 scenario(s) were skipped")
            return Exit.failed.rawValue
        }
        if unrunnable {
            say("0 passed, 0 failed, 1 error")
            return Exit.failed.rawValue
        }
        say(report.firstFailure == nil ? "1 passed, 0 failed" : "0 passed, 1 failed")
        return report.firstFailure == nil ? Exit.ok.rawValue : Exit.failed.rawValue
    }

    /// The console line of one result; the scenario's name as messages show a string
    /// (`unambiguous`: a name not in NFC has its non-ASCII scalars escaped, so an NFD name never
    /// reads as its NFC twin; a twenty-third outside tester).
    static func line(for r: ScenarioResult) -> String {
        let time = String(format: "%.1f ms", r.durationMilliseconds)
        let name = r.name.unambiguous
        switch r.status {
        case .passed: return "PASS  \(name) (\(time))"
        case .skipped: return "SKIP  \(name): \(r.reason ?? "")"
        case .error: return "ERROR \(name) (\(time)): \(r.reason ?? "")"
        case .crashed: return "CRASH \(name) (\(time)): \(r.reason ?? "")"
        case .failed:
            let f = r.firstFailure
            return "FAIL  \(name) (\(time)): \(f?.name ?? "?"): \(f?.message ?? r.reason ?? "")"
        }
    }
}
