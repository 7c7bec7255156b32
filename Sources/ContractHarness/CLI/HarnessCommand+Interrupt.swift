import Foundation
import ExperimentlyMock

extension HarnessCommand {
    /// Writes the verdict of a command stopped by SIGINT or SIGTERM before it finished: no
    /// scenario results, `"interrupted": true`, `"ok": false`, `"error"` saying so, plus `extra`
    /// (what was done so far); keys in `secrets` are redacted. Issue 10: a verdict survives anything.
    static func writeInterrupted(_ message: String, to path: String, driver: any SDKDriver, seed: UInt64,
                                 extra: [String: JSONValue] = [:], secrets: [String] = []) {
        var verdict = Verdict(harnessVersion: version, sdkName: driver.sdkName, sdkVersion: driver.sdkVersion, seed: seed,
                              startedAt: Date(), durationMilliseconds: 0, results: [], invalid: [])
        for (key, value) in extra { verdict.extra[key] = value }
        verdict.extra["interrupted"] = .bool(true)
        verdict.extra["ok"] = .bool(false)
        verdict.extra["error"] = .string(message)
        try? verdict.write(to: path, redacting: secrets)
    }
}
