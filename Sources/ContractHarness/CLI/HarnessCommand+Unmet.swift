import Foundation
import ExperimentlyMock

extension HarnessCommand {
    /// Reports the scenario `root` (from `file`) skipped when `driver` lacks a capability it needs
    /// (`Scenario.unmet(by:)`), as `run` does: a `SKIP` line naming each missing capability and
    /// where the scenario needs it, `0 passed, 0 failed, 1 skipped: nothing passed: ...`, and, when
    /// `--verdict` is given, a verdict with the skipped result, `"ok": false` and `error`.
    ///
    /// - Returns: `Exit.failed` (1: nothing passed, Documentation/CLI.md) when the scenario is
    ///   skipped; `nil` when the driver has every capability and exploration may go on.
    static func skipUnmet(_ root: JSONValue, file: String, driver: any SDKDriver, options: RunOptions,
                          arguments: [String], secrets: [String]) -> Int32? {
        guard let scenario = try? ScenarioParser.parse(root.serialized(), file: file) else { return nil }
        let missing = scenario.unmet(by: driver.capabilities) + [outOfProcessExploreLimit(scenario, driver: driver)].compactMap { $0 }
        guard !missing.isEmpty else { return nil }
        let reason = "the driver lacks " + missing.map { "\($0.capability) (\($0.reason))" }.joined(separator: ", ")
        let redactor = SecretRedactor(secrets: secrets)
        let result = ScenarioResult(name: scenario.name, file: file, tags: scenario.tags, source: scenario.source, status: .skipped,
                                    durationMilliseconds: 0, checks: [], reason: reason, smoke: nil, history: [], historyDigest: "")
        say(redactor.redact(line(for: result)))
        let message = "nothing passed: all 1 scenario(s) were skipped"
        if arguments.contains("--verdict") {
            var verdict = Verdict(harnessVersion: version, sdkName: driver.sdkName, sdkVersion: driver.sdkVersion, seed: options.seed,
                                  startedAt: Date(), durationMilliseconds: 0, results: [result], invalid: [])
            verdict.extra["error"] = .string(message)
            verdict.extra["ok"] = .bool(false)
            do { try verdict.write(to: options.verdict, redacting: secrets) } catch {
                StandardStream.error(Data("contract-harness: cannot write the verdict to \(options.verdict): \(error)\n".utf8))
                return Exit.internalFault.rawValue
            }
        }
        say("0 passed, 0 failed, 1 skipped: \(message)")
        complain(redactor.redact("explore cannot judge \(driver.sdkName): \(reason)"))
        return Exit.failed.rawValue
    }
}
