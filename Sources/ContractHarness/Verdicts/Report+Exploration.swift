import Foundation
import ExperimentlyMock

/// What a report shows of an exploration's first failure (`explore`, `explore --interleave`,
/// `run --explore`): the shrunk scenario file, and the timeline and step lines of a replay of it.
enum ExploredFailureReplay {
    /// `result` (an explored scenario's verdict entry) with `scenarioJSON` (the shrunk file) under
    /// `exploration.first_failure.scenario`, and, when `replay` (a run of that file that kept its
    /// history) failed, its timeline (`events`), its step lines and the `explore` check citing
    /// the replay's failing slice. A replay that did not fail (a race the written order no longer
    /// loses), crashed or was not run leaves the result with its first run's message and no
    /// timeline.
    static func attach(_ scenarioJSON: JSONValue, replay: ScenarioResult?, to result: ScenarioResult) -> ScenarioResult {
        var result = result
        if case .object(var o)? = result.exploration, case .object(var first)? = o["first_failure"] {
            first["scenario"] = scenarioJSON
            o["first_failure"] = .object(first)
            result.exploration = .object(o)
        }
        guard let replay, replay.status == .failed, let failure = replay.firstFailure,
              let i = result.checks.firstIndex(where: { $0.name == "explore" }) else {
            return result
        }
        result.events = replay.events
        result.stepSummaries = replay.stepSummaries
        result.checks[i].history = failure.history
        return result
    }

    /// A replay of `scenarioJSON` that keeps its history: in a worker process when `isolation` is
    /// given (a replay that crashes the SDK is a result, never the judge's end), else on `runner`
    /// with its history kept. `nil` when the file does not parse.
    static func replay(_ scenarioJSON: JSONValue, file: String, runner: ScenarioRunner, isolation: Explorer.Isolation?) async -> ScenarioResult? {
        if let isolation {
            return await Explorer.isolated([scenarioJSON], file: file, seed: runner.seed, cap: runner.stepTimeoutCap, isolation: isolation,
                                           perWorker: 1, keepsHistory: true).first ?? nil
        }
        guard let shrunk = try? ScenarioParser.parse(scenarioJSON.serialized(), file: file) else { return nil }
        let keeping = ScenarioRunner(driver: runner.driver, seed: runner.seed, stepTimeoutCap: runner.stepTimeoutCap, keepsHistory: true)
        return await keeping.run(shrunk)
    }
}

extension Explorer.Failure {
    /// ``ExploredFailureReplay/attach(_:replay:to:)`` with a replay on `runner`'s driver, in
    /// process, for `run --explore`, which explores inside a worker process already.
    func attach(to result: ScenarioResult, file: String, runner: ScenarioRunner) async -> ScenarioResult {
        let replay = await ExploredFailureReplay.replay(scenarioJSON, file: file, runner: runner, isolation: nil)
        return ExploredFailureReplay.attach(scenarioJSON, replay: replay, to: result)
    }
}
