import Foundation
import ExperimentlyMock

extension HarnessCommand {
    /// Makes SIGINT and SIGTERM handled from the very start of `run`, `explore`, `mutants`,
    /// `vectors` and `generate` (`InterruptSignals.install()`, before options are parsed or anything slow
    /// happens), and, for `run`, `explore`, `mutants` and `vectors`, registers the first interrupted-verdict
    /// writer: until the command registers its own (with what it has done so far), a signal writes
    /// a verdict with no results, `"interrupted": true` and `"ok": false` to the verdict path named
    /// on the command line (`run`: `--verdict`, default `verdict.json`, and `--junit`; `mutants`:
    /// `--verdict`, default `mutants-verdict.json`; `vectors`: `--verdict`, default
    /// `vectors-verdict.json`; `explore`: only with `--verdict`), so an earlier verdict never looks
    /// current (issue 10), and the process exits 130 or 143.
    ///
    /// - Returns: the registration to cancel once the command has returned, or `nil`.
    static func interruptFromTheStart(_ command: String, arguments: [String], driver: any SDKDriver) -> InterruptSignals.Registration? {
        guard ["run", "explore", "mutants", "generate", "vectors"].contains(command) else { return nil }
        let path: String? = switch command {
        case "explore": rawValue(of: "--verdict", in: arguments)
        case "mutants": rawValue(of: "--verdict", in: arguments) ?? "mutants-verdict.json"
        // `vectors` too, before it reads its options (its own handler follows): its window for a
        // signal to find no handler was the longest (a fifty-fourth outside tester).
        case "vectors": rawValue(of: "--verdict", in: arguments) ?? "vectors-verdict.json"
        default: verdictPath(in: arguments)
        }
        // `generate` writes no verdict: before it registers its own summary, a signal still says
        // what stopped (the last registered handler runs).
        if command == "generate" {
            return InterruptSignals.register { sig in say("interrupted by signal \(sig): generate stopped early (nothing run yet)") }
        }
        // `register` installs the signal handlers after the writer is in place.
        guard !arguments.contains("--watch"), !arguments.contains("--help"), !arguments.contains("-h"),
              let path, !path.isEmpty else {
            InterruptSignals.install()
            return nil
        }
        let junit = command == "run" ? rawValue(of: "--junit", in: arguments) : nil
        // The reports too: an earlier run's HTML or Mermaid never stays beside this verdict (a
        // fifty-fourth outside tester, I).
        let reports = command == "run" ? ReportOutputs(html: rawValue(of: "--html", in: arguments), mermaid: rawValue(of: "--mermaid", in: arguments))
            : ReportOutputs()
        return InterruptSignals.register { sig in
            let message = "\(command) interrupted by signal \(sig) before it started its work"
            writeInterrupted(message, to: path, driver: driver, seed: 0)
            if junit != nil || !reports.isEmpty {
                var v = Verdict(harnessVersion: version, sdkName: driver.sdkName, sdkVersion: driver.sdkVersion, seed: 0,
                                startedAt: Date(), durationMilliseconds: 0, results: [], invalid: [])
                v.extra["interrupted"] = .bool(true)
                v.extra["ok"] = .bool(false)
                v.extra["error"] = .string(message)
                if let junit { try? v.junit(redacting: [], error: message).writeOutput(to: junit) }
                _ = reports.write(v, redacting: [])
            }
            say("interrupted: \(command) stopped before it started its work; verdict written to \(path)")
        }
    }
}
