import Foundation
import ExperimentlyMock

extension Explorer.Failure {
    /// Makes `result` (an explored scenario's verdict entry) carry what a report shows of this
    /// failure: the shrunk scenario file under `exploration.first_failure.scenario`, and the
    /// timeline of a replay of it (`runner` must keep histories), with the `explore` check citing
    /// the replay's failing slice. When the replay does not fail (a race the fixed order no
    /// longer loses), the result keeps its first run's message and no timeline.
    func attach(to result: ScenarioResult, file: String, runner: ScenarioRunner) async -> ScenarioResult {
        var result = result
        if case .object(var o)? = result.exploration, case .object(var first)? = o["first_failure"] {
            first["scenario"] = scenarioJSON
            o["first_failure"] = .object(first)
            result.exploration = .object(o)
        }
        guard let shrunk = try? ScenarioParser.parse(scenarioJSON.serialized(), file: file) else { return result }
        let replay = await runner.run(shrunk)
        guard replay.status == .failed, let failure = replay.firstFailure, let i = result.checks.firstIndex(where: { $0.name == "explore" }) else {
            return result
        }
        result.events = replay.events
        result.checks[i].history = failure.history
        return result
    }
}
