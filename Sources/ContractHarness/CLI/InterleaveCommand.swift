import Foundation
import ExperimentlyMock
import ExperimentlyMutants

/// `contract-harness explore SCENARIO --interleave`: interleaving exploration from the command
/// line (`Documentation/Explore.md`, Interleaving). Options are those of `explore` plus
/// `--interleave` and `--depth D` (1...10); `--exhaustive` does not apply.
enum InterleaveCommand {
    static func explore(_ arguments: [String], driver: any SDKDriver) async -> Int32 {
        var rest: [String] = []
        var depth: Int?
        var cursor = HarnessCommand.ArgumentCursor(arguments)
        var options: HarnessCommand.RunOptions
        var driver = driver
        do {
            while let a = cursor.next() {
                switch a {
                case "--interleave": continue
                case "--depth":
                    let v = try cursor.value(for: a)
                    guard let d = Int(v), (1...10).contains(d) else {
                        throw HarnessCommand.UsageError("--depth takes a whole number from 1 to 10, not '\(v)'")
                    }
                    depth = d
                case "--exhaustive":
                    throw HarnessCommand.UsageError("--exhaustive does not apply to --interleave (few choices are enumerated anyway)")
                default: rest.append(a)
                }
            }
            options = try HarnessCommand.parseRun(rest)
            try HarnessCommand.refuse(options, command: "explore --interleave", honoured: HarnessCommand.exploreOptions.filter { $0 != "--exhaustive" } + ["--depth"])
            if let m = options.mutant { driver = MutantRun.driver(Defect(rawValue: m)) }
        } catch let e as HarnessCommand.UsageError {
            if e.message.isEmpty { print(HarnessCommand.usage); return HarnessCommand.Exit.ok.rawValue }
            return HarnessCommand.usageError(e.message)
        } catch { return HarnessCommand.usageError("\(error)") }
        guard options.paths.count == 1, let file = options.paths.first, file != "scenarios" else {
            return HarnessCommand.usageError("explore takes exactly one scenario file")
        }
        if options.sdkCommand != nil && options.mutant != nil {
            return HarnessCommand.usageError("--sdk-command and --mutant exclude each other")
        }
        // The default schedule file is named after the scenario, read below; the given paths are
        // compared here, before an adapter starts.
        do {
            try HarnessCommand.checkExploreOutputs(file: file, name: nil, suffix: "-interleaving", out: options.out,
                                                   verdict: arguments.contains("--verdict") ? options.verdict : nil)
        } catch let e as HarnessCommand.UsageError { return HarnessCommand.usageError(e.message) } catch { return HarnessCommand.usageError("\(error)") }
        // The adapter of `--sdk-command` is the SDK explored, never the built-in one instead.
        var external: ProcessSDKDriver?
        if let command = options.sdkCommand {
            switch await HarnessCommand.launchDriver(command) {
            case .success(let d): external = d; driver = d
            case .failure(let e):
                // The SDK's failure, as in `run`: exit 1.
                if arguments.contains("--verdict") { HarnessCommand.writeRefusal("the SDK adapter cannot be used: \(e)", to: options.verdict, driver: driver) }
                StandardStream.error(Data("contract-harness: the SDK adapter cannot be used: \(e)\n".utf8))
                return HarnessCommand.Exit.failed.rawValue
            }
        }
        guard driver.capabilities.contains("interleaving") else {
            await external?.shutdown()
            return HarnessCommand.usageError("the driver for \(driver.sdkName) lacks the 'interleaving' capability (its SDK's tasks cannot be placed on the harness's executor)")
        }
        let root: JSONValue
        let scenario: Scenario
        var secrets: [String] = []
        do {
            let original = try InputFile.contents(of: file)
            let data = SeedSubstitution.apply(original, seed: options.seed)
            root = try SeedSubstitution.parsing(original, seed: options.seed) { try JSONValue.parse($0, file: file) }
            scenario = try ScenarioParser.parse(data, file: file)
            secrets = ConfiguredSecrets.keys(of: scenario) + ConfiguredSecrets.keys(in: root)
        } catch {
            HarnessCommand.complain(SecretRedactor(secrets: ConfiguredSecrets.keys(files: [file], scenarios: [])).redact("\(error)"))
            await external?.shutdown()
            return HarnessCommand.Exit.usage.rawValue
        }
        if let skipped = HarnessCommand.skipUnmet(root, file: file, driver: driver, options: options, arguments: arguments, secrets: secrets) {
            await external?.shutdown()
            return skipped
        }
        do {
            try HarnessCommand.checkExploreOutputs(file: file, name: scenario.name, suffix: "-interleaving", out: options.out,
                                                   verdict: arguments.contains("--verdict") ? options.verdict : nil)
        } catch let e as HarnessCommand.UsageError {
            await external?.shutdown()
            return HarnessCommand.usageError(e.message)
        } catch { await external?.shutdown(); return HarnessCommand.usageError("\(error)") }
        var settings = InterleavingExplorer.Settings.of(scenario)
        if let depth { settings.depth = depth }
        if let k = options.maxSchedules { settings.maxSchedules = k }
        let seed = arguments.contains("--seed") ? options.seed : (scenario.interleaving?.seed ?? options.seed)
        let redactor = SecretRedactor(secrets: secrets)
        HarnessCommand.say("explore --interleave \(scenario.name): seed \(seed), depth \(settings.depth), at most \(settings.maxSchedules) runs")
        let report = await InterleavingExplorer.explore(root, file: file, settings: settings, seed: seed,
                                                        runner: ScenarioRunner(driver: driver, seed: options.seed, stepTimeoutCap: options.stepTimeoutCap,
                                                                               keepsHistory: false),
                                                        reference: HarnessCommand.referenceRunner(options: options, driver: driver),
                                                        concurrency: min(options.jobs, 8))
        // The failure's replay (its written choices), for the verdict's timeline, while an
        // adapter is still up.
        var replayed: ScenarioResult?
        if let f = report.firstFailure, arguments.contains("--verdict") {
            replayed = await ExploredFailureReplay.replay(f.scenarioJSON, file: file,
                                                          runner: ScenarioRunner(driver: driver, seed: options.seed, stepTimeoutCap: options.stepTimeoutCap),
                                                          isolation: nil)
        }
        await external?.shutdown()
        HarnessCommand.say(String(format: "%@, %d failed, %.0f runs/s", report.mode,
                                  report.firstFailure == nil ? 0 : 1,
                                  Double(report.runs) / max(report.durationMilliseconds / 1000, 1e-9)))
        if !report.failingOnReference.isEmpty {
            HarnessCommand.say(redactor.redact("the reference fails the file in its own order (\(report.failingOnReference.joined(separator: ", "))): not counted as the SDK's"))
        }
        var scheduleUnwritten: String?
        if let f = report.firstFailure {
            let out = options.out ?? HarnessCommand.defaultOutput(report.scenario, suffix: "-interleaving")
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            do {
                // The written file keeps the scenario's own keys, as the file it came from does: it must
                // replay (masked as `***`, every request of a replay was answered 401 and a broken SDK
                // passed its own failing schedule: a fourteenth outside tester). Console and verdict hide them.
                try (encoder.encode(f.scenarioJSON) + Data("\n".utf8)).writeOutput(to: out, mayReplaceScenario: true)
            } catch {
                // Neither the choices nor the verdict are lost (the same as `explore`'s schedule file).
                StandardStream.error(Data("contract-harness: cannot write \(out): \(error)\n".utf8))
                scheduleUnwritten = "the failing interleaving could not be written to \(out): \(error.localizedDescription)"
            }
            HarnessCommand.say(redactor.redact("first failing interleaving: choices \(f.choices) fails '\(f.check)': \(f.result.failureMessage(of: f.check))"))
            if scheduleUnwritten == nil {
                HarnessCommand.say("written to \(out) (shrunk from \(f.stepsBefore) to \(f.stepsAfter) steps); replay: \(HarnessCommand.replayCommand(out, options))")
            }
        }
        // A skipped probe (a capability the driver lacks) judged nothing: never a pass.
        let unjudged = report.firstFailure == nil && report.skipped != nil
        // Nor does a scenario that cannot be carried out in its own order, or that the reference
        // fails in it (no SDK can pass it): an error of the file, as in step mode (a file every
        // SDK fails came out passed: a twenty-seventh outside tester).
        let onReference = report.failingOnReference.isEmpty ? nil
            : "the reference fails it in its own order (\(report.failingOnReference.joined(separator: ", ")))"
        let unrunnable = report.firstFailure == nil ? report.unrunnable ?? onReference : nil
        if report.firstFailure == nil, let unrunnable = report.unrunnable {
            HarnessCommand.say(redactor.redact("the scenario cannot be carried out as written, so no interleaving was explored: \(unrunnable)"))
        } else if let unrunnable {
            HarnessCommand.say(redactor.redact("no SDK can pass the scenario as written: \(unrunnable)"))
        }
        if arguments.contains("--verdict") {
            var result = ScenarioResult(name: scenario.name, file: file, tags: scenario.tags, source: scenario.source,
                                        status: report.firstFailure != nil ? .failed : unjudged ? .skipped : unrunnable != nil ? .error : .passed,
                                        durationMilliseconds: report.durationMilliseconds,
                                        checks: unjudged || unrunnable != nil ? [] : [CheckResult(name: "explore", passed: report.firstFailure == nil,
                                                                                                  message: report.firstFailure.map { "choices \($0.choices) fail '\($0.check)': \($0.result.failureMessage(of: $0.check))" })],
                                        reason: report.skipped ?? unrunnable.map { "cannot be carried out as written: \($0)" }, smoke: nil, history: [], historyDigest: "")
            result.exploration = report.json
            // The failure's replay (its written choices), for the report's swim lanes (a
            // forty-eighth outside tester, K: the verdict had no timeline).
            if let f = report.firstFailure { result = ExploredFailureReplay.attach(f.scenarioJSON, replay: replayed, to: result) }
            var verdict = Verdict(harnessVersion: HarnessCommand.version, sdkName: driver.sdkName, sdkVersion: driver.sdkVersion,
                                  seed: seed, startedAt: Date(), durationMilliseconds: report.durationMilliseconds, results: [result], invalid: [])
            if unjudged { verdict.extra["ok"] = .bool(false); verdict.extra["error"] = .string("nothing passed: all 1 scenario(s) were skipped") }
            if let scheduleUnwritten { verdict.extra["ok"] = .bool(false); verdict.extra["error"] = .string(scheduleUnwritten) }
            if let failure = HarnessCommand.writeFinal(verdict, to: options.verdict, secrets: secrets) { return failure }
        }
        if scheduleUnwritten != nil { return HarnessCommand.Exit.internalFault.rawValue }
        if unjudged {
            HarnessCommand.say("0 passed, 0 failed, 1 skipped: nothing passed: all 1 scenario(s) were skipped")
            return HarnessCommand.Exit.failed.rawValue
        }
        if unrunnable != nil {
            HarnessCommand.say("0 passed, 0 failed, 1 error")
            return HarnessCommand.Exit.failed.rawValue
        }
        HarnessCommand.say(report.firstFailure == nil ? "1 passed, 0 failed" : "0 passed, 1 failed")
        return report.firstFailure == nil ? HarnessCommand.Exit.ok.rawValue : HarnessCommand.Exit.failed.rawValue
    }
}
