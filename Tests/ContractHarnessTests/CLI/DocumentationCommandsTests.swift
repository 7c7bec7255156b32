import XCTest
import Foundation
import ExperimentlyMutants
import ExperimentlyMock
@testable import ContractHarness

/// Every command README.md and Documentation/*.md show in a code block (`contract-harness ...`,
/// `./run.sh ...`, `swift run ...`) uses only options that exist, and runs as written (in a
/// scratch folder beside the repository's scenarios): the commands are accepted (never 64 or
/// 70), and where the docs show what a command prints, it prints that (durations and rates
/// aside; a `...` in the docs stands for anything). Commands that need a long run, the network,
/// another SDK's files or a process that runs until it is stopped are listed in `exceptions`
/// with the reason (and where they are tested instead). The YAML workflows are
/// CIWorkflowTests', the CrossSDK.md examples marked `<!-- tested: ... -->` are
/// ServeScopedKeysTests' and JournalScenarioTests'.
final class DocumentationCommandsTests: XCTestCase {
    /// A command shown in a code block, with the lines shown after it as its output.
    struct Shown {
        let file: String
        let line: Int
        let text: String
        var output: [String]
    }

    static let documents: [String] = {
        let folder = Repository.root.appendingPathComponent("Documentation")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return ["README.md"] + names.filter { $0.hasSuffix(".md") }.sorted().map { "Documentation/" + $0 }
    }()

    static let prefixes = ["contract-harness ", "./run.sh", "swift run ", "swift build ", ".build/release/", "env ", "EXPERIMENTLY_"]

    /// The commands of one Markdown text: fenced blocks (not yaml, json, python) and indented
    /// blocks; a line `$ CMD` or a command line, the non-command lines after it its output.
    static func commands(in text: String, file: String) -> [Shown] {
        var found: [Shown] = []
        var fence: String?
        var previousBlank = true
        var indented = false
        for (number, raw) in text.components(separatedBy: "\n").enumerated() {
            let line = String(raw)
            if line.hasPrefix("```") {
                fence = fence == nil ? String(line.dropFirst(3)) : nil
                previousBlank = false
                continue
            }
            let inBlock: Bool
            if let f = fence {
                inBlock = ["", "sh", "bash", "console", "shell"].contains(f)
            } else {
                if line.hasPrefix("    ") { indented = indented || previousBlank } else if !line.isEmpty { indented = false }
                inBlock = indented && line.hasPrefix("    ")
            }
            previousBlank = line.trimmingCharacters(in: .whitespaces).isEmpty
            guard inBlock else { continue }
            var body = line.trimmingCharacters(in: .whitespaces)
            let prompted = body.hasPrefix("$ ")
            if prompted { body = String(body.dropFirst(2)) }
            // `contract-harness` followed by a command or an option (not a diagram's label).
            let command = !body.hasPrefix("contract-harness ") || body.dropFirst(17).first.map { $0 == "-" || $0.isLowercase } == true
            if prompted || (command && prefixes.contains(where: { body.hasPrefix($0) })) {
                found.append(Shown(file: file, line: number + 1, text: body, output: []))
            } else if var last = found.popLast() {
                // A synopsis continued on the next line, a `\` continuation, or output.
                if body.hasPrefix("[") || last.text.hasSuffix("\\") {
                    let head = String(last.text.dropLast(last.text.hasSuffix("\\") ? 1 : 0)).trimmingCharacters(in: .whitespaces)
                    last = Shown(file: last.file, line: last.line, text: head + " " + body,
                                 output: last.output)
                } else if !body.isEmpty, last.line + last.output.count == number {
                    last.output.append(body)
                }
                found.append(last)
            }
        }
        return found
    }

    /// The command without a trailing `# comment` (outside quotes).
    static func withoutComment(_ text: String) -> String {
        var quote: Character?
        var previous: Character = " "
        for (i, c) in zip(text.indices, text) {
            if let q = quote { if c == q { quote = nil } } else if c == "\"" || c == "'" { quote = c } else if c == "#", previous == " " {
                return String(text[..<i]).trimmingCharacters(in: .whitespaces)
            }
            previous = c
        }
        return text.trimmingCharacters(in: .whitespaces)
    }

    /// A synopsis (`[--seed N]`, `FILE`, `...`): checked for its options, never run.
    static func isSynopsis(_ text: String) -> Bool {
        if text.contains("[") && text.contains("]") && !text.contains("$(") { return true }
        if text.contains("...") { return true }
        let placeholders: Set<String> = ["FILE", "CMD", "NAME", "PATH", "SCENARIO", "VERDICT", "JOURNAL", "DIR", "URL", "KEY", "TEXT", "N"]
        return text.split(separator: " ").contains { placeholders.contains(String($0)) }
    }

    /// Commands shown but not run here, and why.
    static let exceptions: [String: String] = [
        "./run.sh": "the whole suite in release mode: .ci/run runs it",
        "./run.sh --junit verdict.xml --html report.html --fail-fast": "the whole suite (nothing fails, so --fail-fast stops nothing): .ci/run runs it",
        "./run.sh --mutant stale-write-after-clear --html report.html": "the whole suite against a variant (long): ReportBrowserTests draws such a report",
        "./run.sh --sdk-command \"python3 Examples/python-sdk/driver.py\"": "the whole suite through the Python driver (long): DriverProtocolTests run it",
        "./run.sh --sdk-command \"$(swift build -c release --show-bin-path)/experimently-driver\" --list": "needs a release build of experimently-driver (swift build inside a test)",
        "contract-harness run --sdk-command \"python3 Examples/python-sdk/driver.py\"": "the whole suite through the Python driver (long): DriverProtocolTests run it",
        "contract-harness run --sdk-command \"$(swift build -c release --show-bin-path)/experimently-driver\"": "needs a release build (swift build inside a test) and the whole suite",
        "swift run -c release contract-harness mutants": "the whole mutant matrix (minutes): MutantTests run it",
        "swift run -c release contract-harness generate --count 1000": "1,000 generated workloads on both SDKs (minutes): WorkloadGeneratorTests run a sample",
        "swift run -c release contract-harness serve --port 8000": "runs until stopped and needs port 8000: ServeCommandTests run serve on a free port",
        "swift build -c release --product experimently-bench && .build/release/experimently-bench sdk": "a release build and a benchmark (timing, not a test)",
        "swift run contract-harness run scenarios --html report.html --mermaid failures.md": "the whole suite: ReportBrowserTests draw a report of a failing run",
        "contract-harness vectors --vectors path/to/golden-vectors --sdk-command \"python3 tests/contract/hash_adapter.py\" --sdk-name python":
            "another SDK's files (an illustration): VectorsCommandTests run the reference and broken adapters",
        "contract-harness serve --port 0 --api-key ci-key --api-key ci-server-key:sdk:ruleset --journal journal.json > serve.out &":
            "a CI step around another SDK's smoke: ServeScopedKeysTests run serve with these keys",
        "contract-harness live-check --sdk-command \"python examples/contract_smoke.py\" --sdk-name python": "another SDK's smoke against a running serve: LiveContractCheckTests",
        "contract-harness serve --port 0 --journal journal.json > serve.out &": "the worked example: JournalScenarioTests run it as written",
        "env $(cat serve.out) EXPERIMENTLY_EXAMPLE_DEFECT=stale-write-after-clear python3 late_answer_test.py": "the worked example: JournalScenarioTests run it as written",
        "contract-harness scenario --from-journal journal.json --clients one --name late-assignment-after-clear --out late.json": "the worked example: JournalScenarioTests run it as written",
        "EXPERIMENTLY_EXAMPLE_DEFECT=stale-write-after-clear contract-harness run late-edited.json --sdk-command \"python3 Examples/python-sdk/driver.py\"":
            "the worked example: JournalScenarioTests run it as written",
    ]

    /// Where the binaries are looked up, in order: the release folder when its `contract-harness`
    /// is built and not older than the debug one, then the debug folder (for what the release
    /// build lacks, e.g. `contract-smoke` after `./run.sh`).
    static var binaryFolders: [URL] {
        let debug = HarnessCLITests.binary
        let release = Repository.root.appendingPathComponent(".build/release/contract-harness")
        func modified(_ url: URL) -> Date? { (try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date }
        if let r = modified(release), let d = modified(debug), r >= d { return [release.deletingLastPathComponent(), debug.deletingLastPathComponent()] }
        return [debug.deletingLastPathComponent()]
    }

    /// The shell command that runs `text` with the built binaries.
    static func translated(_ text: String) -> String {
        var t = text
        for prefix in ["swift run -c release ", "swift run "] where t.hasPrefix(prefix) { t = String(t.dropFirst(prefix.count)) }
        if t.hasPrefix("./run.sh") { t = "contract-harness run --verdict verdict.json" + t.dropFirst("./run.sh".count) }
        return t
    }

    /// `line` with durations and rates made comparable (`290 schedules/s`, `(102.0 ms)`, `9.2 s`).
    static func normalized(_ line: String) -> String {
        var s = line
        for (pattern, replacement) in [(#"\d+(\.\d+)? (schedules|runs)/s"#, "R $2/s"), (#"\d+(\.\d+)? ?(ms|s)\b"#, "T")] {
            s = s.replacingOccurrences(of: pattern, with: replacement, options: .regularExpression)
        }
        return s
    }

    /// Whether the output `actual` is what the docs show (`...` in a line: anything).
    static func matches(_ shown: [String], _ actual: [String]) -> Bool {
        guard shown.count == actual.count else { return false }
        return zip(shown, actual).allSatisfy { doc, out in
            let d = normalized(doc), o = normalized(out)
            guard d.contains("...") else { return d == o }
            let pattern = "^" + d.components(separatedBy: "...").map(NSRegularExpression.escapedPattern).joined(separator: ".*") + "$"
            return o.range(of: pattern, options: .regularExpression) != nil
        }
    }

    func testEveryDocumentedCommandUsesOptionsThatExistAndRunsAsShown() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path), "contract-harness not built")
        var shown: [Shown] = []
        for file in Self.documents {
            let text = try String(contentsOf: Repository.root.appendingPathComponent(file), encoding: .utf8)
            shown += Self.commands(in: text, file: file)
        }
        XCTAssertGreaterThan(shown.count, 30, "the extraction finds the documented commands")
        let sandbox = FileManager.default.temporaryDirectory.appendingPathComponent("doc-commands-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: sandbox, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: sandbox) }
        // Copies, not symbolic links: `run` does not descend into a linked folder.
        for folder in ["scenarios", "golden-vectors", "Examples", "Documentation"] {
            try FileManager.default.copyItem(at: Repository.root.appendingPathComponent(folder), to: sandbox.appendingPathComponent(folder))
        }
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = (Self.binaryFolders.map(\.path) + [environment["PATH"] ?? "/usr/bin:/bin"]).joined(separator: ":")
        // A verdict to draw for `report verdict.json`; its header is CLI.md's example.
        let smoke = try BoundedRun.run(URL(fileURLWithPath: "/bin/sh"), ["-c", "contract-harness run scenarios/contract-smoke.json"],
                                       environment: environment, directory: sandbox, timeout: 60)
        let cli = try String(contentsOf: Repository.root.appendingPathComponent("Documentation/CLI.md"), encoding: .utf8)
        let example = try XCTUnwrap(cli.range(of: "for `contract-harness run scenarios/contract-smoke.json`:\n`"), "CLI.md's header example")
        let header = cli[example.upperBound...].prefix { $0 != "`" }
        XCTAssertEqual(smoke.out.split(separator: "\n").first.map(String.init), String(header), "CLI.md's header example")
        try checkVerdictExample(against: sandbox.appendingPathComponent("verdict.json"))
        var ran = 0, compared = 0
        for command in shown {
            let text = Self.withoutComment(command.text)
            let at = "\(command.file):\(command.line): \(text)"
            // Options: every --option of a contract-harness command is in that command's usage.
            let words = Self.translated(text).replacingOccurrences(of: #"\$\([^)]*\)"#, with: "", options: .regularExpression)
            for call in CIWorkflowTests.invocations(words) where !call.command.hasPrefix("-") {
                let usage = try XCTUnwrap(CIWorkflowTests.usages[call.command], "\(at): no command contract-harness \(call.command)")
                for option in call.options where option != "--help" {
                    XCTAssertTrue(CIWorkflowTests.lists(usage, option), "\(at): contract-harness \(call.command) has no option \(option)")
                }
            }
            if Self.isSynopsis(text) || Self.exceptions[text] != nil { continue }
            let run = try BoundedRun.run(URL(fileURLWithPath: "/bin/sh"), ["-c", Self.translated(text)], environment: environment,
                                         directory: sandbox, timeout: 60)
            ran += 1
            XCTAssertFalse(run.timedOut, "\(at): still running after 60 s (list it in exceptions with the reason)")
            XCTAssertTrue([0, 1].contains(run.status), "\(at): exit \(run.status)\n\(run.out)\n\(run.err)")
            if !command.output.isEmpty {
                compared += 1
                let lines = run.out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty }
                XCTAssertTrue(Self.matches(command.output, lines), "\(at): the docs show\n\(command.output.joined(separator: "\n"))\nbut it prints\n\(lines.joined(separator: "\n"))")
            }
        }
        XCTAssertGreaterThanOrEqual(ran, 8)
        XCTAssertGreaterThanOrEqual(compared, 3)
        // Every exception is still shown somewhere (no stale entries).
        let texts = Set(shown.map { Self.withoutComment($0.text) })
        for key in Self.exceptions.keys { XCTAssertTrue(texts.contains(key), "exception no longer in the docs: \(key)") }
    }

    /// Verdict.md's example ("after `contract-harness run scenarios/contract-smoke.json`") has the
    /// members such a verdict has, and the same counts, SDK, smoke fields and scenario entry keys.
    func checkVerdictExample(against file: URL) throws {
        let doc = try String(contentsOf: Repository.root.appendingPathComponent("Documentation/Verdict.md"), encoding: .utf8)
        let intro = try XCTUnwrap(doc.range(of: "For example, after `contract-harness run scenarios/contract-smoke.json`:"))
        let open = try XCTUnwrap(doc.range(of: "```json\n", range: intro.upperBound..<doc.endIndex))
        let close = try XCTUnwrap(doc.range(of: "\n```", range: open.upperBound..<doc.endIndex))
        let shown = try JSONValue.parse(Data(doc[open.upperBound..<close.lowerBound].utf8), file: "Verdict.md")
        let actual = try JSONValue.parse(Data(contentsOf: file), file: file.path)
        XCTAssertEqual(shown.objectValue?.keys.sorted(), actual.objectValue?.keys.sorted(), "Verdict.md's example has other members")
        for key in ["format", "harness", "sdk_under_test", "seed", "counts", "ok", "sdk", "assign", "flag", "track", "fanout"] {
            XCTAssertEqual(shown[key], actual[key], "Verdict.md's example: \(key)")
        }
        let shownEntry = shown["scenarios"]?.arrayValue?.first, actualEntry = actual["scenarios"]?.arrayValue?.first
        XCTAssertEqual(shownEntry?.objectValue?.keys.sorted(), actualEntry?.objectValue?.keys.sorted(), "Verdict.md's scenario entry")
        for key in ["name", "file", "status", "tags", "source", "history_events"] {
            XCTAssertEqual(shownEntry?[key], actualEntry?[key], "Verdict.md's scenario entry: \(key)")
        }
    }

    /// The figures the docs state about the suite: the variant counts.
    func testTheFiguresTheDocsStateAreTheSuites() throws {
        let variants = Defect.allCases.count
        let mutants = try String(contentsOf: Repository.root.appendingPathComponent("Documentation/Mutants.md"), encoding: .utf8)
        let caught = try XCTUnwrap(mutants.range(of: #"caught \d+ of \d+ variants"#, options: .regularExpression))
        XCTAssertEqual(String(mutants[caught]), "caught \(variants) of \(variants) variants", "Mutants.md's example output")
        let readme = try String(contentsOf: Repository.root.appendingPathComponent("README.md"), encoding: .utf8)
        XCTAssertTrue(readme.contains("\(variants) deliberately broken SDK variants"), "README.md's variant count")
    }

    /// The extraction itself: a `$` block with output, a synopsis, an indented block, a comment.
    func testTheExtractionFindsCommandsOutputsAndSynopses() {
        let text = "Text\n\n    $ contract-harness explore x.json\n    line one\n    2 passed\n\n    contract-harness run --jobs 2   # a comment\n\n```\ncontract-harness serve [--port N]\n                       [--journal FILE]\n```\n```python\ncontract-harness run never\n```\n"
        let found = Self.commands(in: text, file: "t.md")
        XCTAssertEqual(found.map(\.text), ["contract-harness explore x.json", "contract-harness run --jobs 2   # a comment",
                                           "contract-harness serve [--port N] [--journal FILE]"])
        XCTAssertEqual(found[0].output, ["line one", "2 passed"])
        XCTAssertEqual(Self.withoutComment(found[1].text), "contract-harness run --jobs 2")
        XCTAssertTrue(Self.isSynopsis(found[2].text))
        XCTAssertTrue(Self.matches(["24 schedules, 290 schedules/s (deadlock: ...)"], ["24 schedules, 12 schedules/s (deadlock: a b c)"]))
        XCTAssertFalse(Self.matches(["4 failed"], ["5 failed"]))
    }
}
