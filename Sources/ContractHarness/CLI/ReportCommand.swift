import Foundation
import ExperimentlyMock

/// The report outputs a run or `contract-harness report` writes: `--html FILE` and `--mermaid FILE`.
struct ReportOutputs {
    /// Where the HTML report goes (`--html`), if anywhere.
    var html: String?
    /// Where the Mermaid diagrams go (`--mermaid`), if anywhere.
    var mermaid: String?

    var isEmpty: Bool { html == nil && mermaid == nil }

    /// Records `--html` or `--mermaid` with its value.
    ///
    /// - Throws: `HarnessCommand.UsageError` for an empty value.
    mutating func take(_ flag: String, _ value: String) throws {
        guard !value.isEmpty else { throw HarnessCommand.UsageError("\(flag) needs a file name") }
        if flag == "--html" { html = value } else { mermaid = value }
    }

    /// Checks before any work that each output can be written.
    ///
    /// - Throws: `HarnessCommand.UsageError` naming the option and the path.
    func checkWritable() throws {
        if let html { try HarnessCommand.checkWritable(html, option: "--html") }
        if let mermaid { try HarnessCommand.checkWritable(mermaid, option: "--mermaid") }
    }

    /// Writes each asked-for output atomically; returns what went wrong, or `nil`.
    func write(_ verdict: Verdict, redacting secrets: [String]) -> String? {
        let outputs: [(String?, String, () -> String)] = [
            (html, "HTML report", { verdict.html(redacting: secrets) }),
            (mermaid, "Mermaid diagrams", { verdict.mermaid(redacting: secrets) }),
        ]
        for case let (path?, what, render) in outputs {
            do { try Data(render().utf8).writeOutput(to: path) } catch {
                return "cannot write the \(what) to \(path): \(error.localizedDescription)"
            }
        }
        return nil
    }
}

/// `contract-harness report VERDICT [--html FILE] [--mermaid FILE]`: draws a saved verdict
/// (documented in `Documentation/Report.md`).
///
/// Exit status: 0 written, 64 bad usage or a verdict that cannot be read (named with the JSON
/// path), 70 an output that cannot be written.
enum ReportCommand {
    static func main(_ arguments: [String]) -> Int32 {
        var outputs = ReportOutputs()
        var verdictPath: String?
        do {
            var cursor = HarnessCommand.ArgumentCursor(arguments)
            while let a = cursor.next() {
                switch a {
                case "--html", "--mermaid": try outputs.take(a, try cursor.value(for: a))
                case "--help", "-h": throw HarnessCommand.UsageError("")
                default:
                    if a.hasPrefix("-") { throw HarnessCommand.UsageError("unknown option '\(a)' for report") }
                    guard verdictPath == nil else { throw HarnessCommand.UsageError("report takes one verdict file, not also '\(a)'") }
                    verdictPath = a
                }
            }
            guard verdictPath != nil else { throw HarnessCommand.UsageError("report needs a verdict file") }
            guard !outputs.isEmpty else { throw HarnessCommand.UsageError("report needs --html FILE or --mermaid FILE") }
            try outputs.checkWritable()
            // Not over the verdict it draws (a seventh outside tester: `--html VERDICT` replaced it).
            try HarnessCommand.checkDistinct([("the verdict", verdictPath), ("--html", outputs.html), ("--mermaid", outputs.mermaid)])
        } catch let e as HarnessCommand.UsageError {
            if e.message.isEmpty { print(HarnessCommand.usage); return HarnessCommand.Exit.ok.rawValue }
            return HarnessCommand.usageError(e.message)
        } catch {
            return HarnessCommand.usageError("\(error)")
        }
        let path = verdictPath!
        var verdict: Verdict
        do {
            verdict = try Verdict(parsing: InputFile.contents(of: path), file: path)
        } catch let e as ScenarioError {
            HarnessCommand.complain("cannot read the verdict: \(e)")
            return HarnessCommand.Exit.usage.rawValue
        } catch {
            HarnessCommand.complain("cannot read the verdict \(path): \(error.localizedDescription)")
            return HarnessCommand.Exit.usage.rawValue
        }
        // The verdict of a run that never finished (still going, or killed: `in_progress`) says so
        // in every output, with how many of the planned scenarios have a result (an eighty-seventh
        // outside tester, M5: the page said "0 passed · 0 failed" and nothing of the run's end).
        var unfinished: String?
        if verdict.extra["in_progress"] == .bool(true) {
            // A count as a verdict writes it; anything else (a hand-edited 1e300, -1) is not shown
            // (an eighty-eighth outside tester: 1e300 crashed the conversion).
            let planned = verdict.extra["scenarios_planned"]?.numberValue.flatMap { Int(exactly: $0) }.flatMap { $0 >= 0 ? " of \($0) planned" : nil } ?? ""
            unfinished = "the run never finished (in_progress: still running, or killed): \(verdict.results.count)\(planned) scenario(s) have a result"
            verdict.extra["error"] = .string(unfinished! + (verdict.extra["error"]?.stringValue.map { "; \($0)" } ?? ""))
        }
        // A saved verdict is already redacted; nothing more is known to hide.
        if let failure = outputs.write(verdict, redacting: []) {
            HarnessCommand.complain(failure)
            return HarnessCommand.Exit.internalFault.rawValue
        }
        let failing = verdict.results.filter { $0.status == .failed || $0.status == .error || $0.status == .crashed }
        let page = HTMLReport(verdict: verdict, redactor: SecretRedactor(secrets: []))
        let drawn = verdict.results.filter(page.hasTimeline).count
        let count = verdict.results.count
        HarnessCommand.say("report: \(count) scenario\(count == 1 ? "" : "s"), \(failing.count) failing (\(drawn) with a timeline)"
                           + (outputs.html.map { "; HTML \($0)" } ?? "") + (outputs.mermaid.map { "; Mermaid \($0)" } ?? "")
                           + (unfinished.map { "; \($0)" } ?? ""))
        return HarnessCommand.Exit.ok.rawValue
    }
}

extension HarnessCommand {
    /// The first console line of `run`: the SDK under test and its version, the seed, how many
    /// files were read and scenarios selected, and where each output goes, e.g.
    /// `contract-harness 0.1.0: SDK ios 1.0.0, seed 0, 62 files, 62 scenarios; verdict -> verdict.json`.
    static func runHeader(driver: any SDKDriver, options: RunOptions, files: Int, selected: Int) -> String {
        var outputs = ["verdict -> \(options.verdict)"]
        if let junit = options.junit { outputs.append("JUnit -> \(junit)") }
        if let html = options.report.html { outputs.append("HTML -> \(html)") }
        if let mermaid = options.report.mermaid { outputs.append("Mermaid -> \(mermaid)") }
        return "contract-harness \(version): SDK \(driver.sdkName) \(driver.sdkVersion)"
            + (options.mutant.map { " (variant \($0))" } ?? "")
            + ", seed \(options.seed), \(files) file\(files == 1 ? "" : "s"), \(selected) scenario\(selected == 1 ? "" : "s")"
            + (options.history ? ", with histories" : "") + "; " + outputs.joined(separator: ", ")
    }
}
