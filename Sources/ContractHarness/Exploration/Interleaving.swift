import Foundation
import ExperimentlyMock

/// A scenario's `interleaving` section: the settings of `explore --interleave` and the choices
/// `run` replays (`Documentation/ScenarioFormat.md`, `Documentation/Explore.md`, Interleaving).
///
/// `{"seed"?: N, "depth"?: D, "max_schedules"?: K, "choices"?: ["task name", ...]}`: `seed` and
/// `depth` say how the choices were found (and seed a new exploration); `choices` names, per
/// choice point (a moment when more than one task is ready), the task that runs.
public struct ScenarioInterleaving: Sendable, Equatable {
    /// The PCT seed (exploration; recorded with a found schedule).
    public var seed: UInt64?
    /// The PCT depth (bug depth aimed at; default 3).
    public var depth: Int?
    /// The exploration budget (default 200 runs).
    public var maxSchedules: Int?
    /// The task chosen at each choice point, in order (empty: the oldest ready task every time).
    public var choices: [String]

    /// Reads the section.
    ///
    /// - Throws: `ScenarioError` at `$.interleaving...` for a value of the wrong type or range,
    ///   or an unknown key.
    static func parse(_ value: JSONValue, file: String) throws -> ScenarioInterleaving {
        var r = try ObjectReader(value, file: file, path: "$.interleaving")
        let seed = try r.optionalNumber("seed")
        if let seed, !(seed >= 0 && seed <= 9_007_199_254_740_991 && seed.rounded() == seed) {
            throw r.error("seed", expected: "a whole number in 0...2^53-1", found: .number(seed))
        }
        let out = ScenarioInterleaving(seed: seed.map { UInt64($0) }, depth: try r.optionalInt("depth", range: 1...10),
                                       maxSchedules: try r.optionalInt("max_schedules", range: 1...100_000),
                                       choices: try r.optionalStrings("choices") ?? [])
        try r.finish()
        return out
    }
}

extension ScenarioExecution {
    /// Nothing is in transit between the SDK and the mock: the mock answers nothing right now and
    /// every request the SDK sessions created is either delivered (its completion handler returned,
    /// so the job it resumed is enqueued) or parked in the mock (held, or delayed on the clock).
    static func settled(_ port: any BackendPort) -> Bool {
        guard port.unsettledRequests == 0 else { return false }
        guard let outstanding = port.outstandingTasks else { return true }
        if outstanding == 0 { return true }
        return outstanding == port.parkedRequests().filter { !$0.answered && !$0.cancelled }.count
    }

    /// No request of the SDK's sessions is outstanding (none in transit, none parked), and the
    /// mock answers nothing: only then can "no job ready" be a hang.
    static func quiet(_ port: any BackendPort) -> Bool {
        port.unsettledRequests == 0 && (port.outstandingTasks ?? 0) == 0
    }

    /// `false` while an interleaved run has a job ready or running (outside interleaved runs: `true`).
    func interleavingIdle() -> Bool {
        guard #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let controlled = executor as? ControlledExecutor else { return true }
        return controlled.isIdle
    }

    /// How a wait ended that never saw its condition: "after N ms", or, in an interleaved run
    /// where no task could run and nothing was in transit, "(deadlock: ...)" at once.
    func hangNote(_ preposition: String = "within") -> String {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let controlled = executor as? ControlledExecutor, controlled.stuck {
            return "(deadlock: no task of the SDK can run, nothing is in transit, and only the runner could act)"
        }
        return "\(preposition) \(scenario.stepTimeoutMilliseconds) ms"
    }

    /// Ends the controlled part of an interleaved run (the steps are over: what follows is
    /// cancellation and shutdown, run oldest task first) and returns its choices.
    ///
    /// Returns once every job left has run, so no SDK task starts work after the mock shut down.
    func drainInterleaving() async -> InterleavingTrace? {
        guard #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let controlled = executor as? ControlledExecutor else { return nil }
        let trace = controlled.trace
        controlled.drain()
        await controlled.idle()
        return trace
    }

    /// Interleaved runs: returns once every job left (after cancellations) has run.
    func settleInterleaving() async {
        guard #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *), let controlled = executor as? ControlledExecutor else { return }
        await controlled.idle()
    }
}

/// Interleaving exploration (issue 15): runs a scenario, steps in the file's order, many times on
/// the controlled executor, each time choosing differently which ready task runs next, and writes
/// the first failing interleaving, shrunk, as a scenario with its `interleaving` choices.
///
/// A probe run takes the oldest ready task at every point and measures the choice points. When
/// the product of their option counts is at most half the budget, every interleaving is
/// enumerated depth-first (complete when the tree is exhausted); otherwise, and for what the
/// depth-first half leaves, runs use PCT with depth `d` and seeds drawn from the run's seed, so
/// the same seed gives the same runs.
public enum InterleavingExplorer {
    /// Exploration settings.
    public struct Settings: Sendable, Equatable {
        /// PCT depth: `depth - 1` priority change points per run (default 3).
        public var depth: Int
        /// The most runs (default 200).
        public var maxSchedules: Int

        /// The defaults: depth 3, 200 runs.
        public static let standard = Settings(depth: 3, maxSchedules: 200)

        /// Creates settings.
        public init(depth: Int, maxSchedules: Int) {
            self.depth = depth
            self.maxSchedules = maxSchedules
        }

        /// The file's `interleaving` section over the defaults.
        public static func of(_ scenario: Scenario) -> Settings {
            Settings(depth: scenario.interleaving?.depth ?? standard.depth,
                     maxSchedules: scenario.interleaving?.maxSchedules ?? standard.maxSchedules)
        }
    }

    /// The first failing interleaving.
    public struct Failure: Sendable {
        /// The plan of the failing run (as explored).
        public let plan: InterleavingPlan
        /// The failing run.
        public let result: ScenarioResult
        /// The check that fails.
        public let check: String
        /// The shrunk scenario with its `interleaving` choices (what `--out` writes).
        public let scenarioJSON: JSONValue
        /// Steps before and after shrinking.
        public let stepsBefore: Int
        /// Steps after shrinking.
        public let stepsAfter: Int
        /// The choices written.
        public let choices: [String]
    }

    /// What an exploration found.
    public struct Report: Sendable {
        /// The scenario's name.
        public let scenario: String
        /// The seed.
        public let seed: UInt64
        /// Runs made (probe included, shrinking excluded).
        public let runs: Int
        /// Of which depth-first.
        public let depthFirst: Int
        /// Choice points of the probe run and their option counts.
        public let probePoints: [Int]
        /// `true` when every interleaving was enumerated.
        public let complete: Bool
        /// The first failing interleaving, shrunk; `nil` when none failed.
        public let firstFailure: Failure?
        /// Wall time, milliseconds.
        public let durationMilliseconds: Double
        /// Why nothing was judged, when the probe run was `skipped` (the driver lacks a
        /// capability the scenario needs): no interleaving ran, so this is never a pass.
        public var skipped: String? = nil
        /// Why the scenario cannot be carried out in its own order (its first run was infeasible),
        /// so nothing was explored; `nil` when it could.
        public var unrunnable: String? = nil
        /// The checks the reference fails in the file's own order (`--mutant`: the faithful
        /// variant), never counted as the SDK's: the file's own expectations are wrong there.
        public var failingOnReference: [String] = []

        /// How the runs were chosen, for people.
        public var mode: String {
            if let skipped { return "skipped: \(skipped)" }
            if complete { return "every interleaving (\(runs) runs, depth-first)" }
            let pct = runs - depthFirst - 1
            var parts = ["1 probe"]
            if depthFirst > 0 { parts.append("\(depthFirst) depth-first") }
            if pct > 0 { parts.append("\(pct) PCT") }
            return "\(runs) runs (" + parts.joined(separator: ", ") + "; \(probePoints.count) choice points in the probe)"
        }

        /// The report as JSON (verdict `exploration`).
        public var json: JSONValue {
            var o: [String: JSONValue] = ["kind": .string("interleaving"), "seed": .number(Double(seed)), "runs": .number(Double(runs)),
                                          "complete": .bool(complete), "mode": .string(mode),
                                          "failed": .number(firstFailure == nil ? 0 : 1), "skipped": skipped.map(JSONValue.string) ?? .null,
                                          "duration_ms": .number(durationMilliseconds.rounded())]
            if let f = firstFailure {
                o["first_failure"] = .object(["check": .string(f.check), "choices": .array(f.choices.map(JSONValue.string)),
                                              "steps_before": .number(Double(f.stepsBefore)), "steps_after": .number(Double(f.stepsAfter))])
            }
            return .object(o)
        }
    }

    /// Explores the interleavings of `root` (the scenario file's JSON; `explore` is ignored: steps
    /// run in the file's order).
    ///
    /// - Parameters:
    ///   - runner: runs each interleaving (its driver must have the `interleaving` capability).
    ///   - concurrency: PCT runs at once (depth-first runs go one by one).
    public static func explore(_ root: JSONValue, file: String, settings: Settings, seed: UInt64,
                               runner: ScenarioRunner, reference: ScenarioRunner? = nil, concurrency: Int = 8) async -> Report {
        let started = DispatchTime.now()
        let name = root["name"]?.stringValue ?? file
        var base = root
        if case .object(var o) = root { o["explore"] = nil; o["interleaving"] = nil; base = .object(o) }
        guard let scenario = try? ScenarioParser.parse(base.serialized(), file: file) else {
            return Report(scenario: name, seed: seed, runs: 0, depthFirst: 0, probePoints: [], complete: false, firstFailure: nil,
                          durationMilliseconds: ScenarioRunner.elapsed(since: started))
        }
        func run(_ plan: InterleavingPlan) async -> ScenarioResult {
            var r = runner
            r.interleaving = plan
            return await r.run(scenario)
        }
        // What the reference fails in the file's own order is the file's, not the SDK's (as the
        // step explorer confirms on the reference; a nineteenth outside tester: a file's own
        // wrong count was blamed on the broken variant's single flight).
        var excused: [String] = []
        if let reference {
            let r = await reference.run(scenario)
            if !r.infeasible { excused = Explorer.failedChecks(r) }
        }
        func own(_ r: ScenarioResult) -> CheckResult? { Explorer.firstFailure(of: r, excusing: excused) }
        func failed(_ r: ScenarioResult) -> Bool {
            !r.infeasible && (r.status == .failed || r.status == .error) && (own(r) != nil || r.firstFailure == nil)
        }

        var runs = 0, depthFirst = 0
        var failing: (InterleavingPlan, ScenarioResult)?
        var complete = false
        // The probe: the oldest ready task first, everywhere.
        let probe = await run(.prefix([]))
        runs += 1
        if probe.status == .skipped {
            // Not run at all (a capability the driver lacks): nothing to explore, and not a pass.
            var report = Report(scenario: name, seed: seed, runs: runs, depthFirst: 0, probePoints: [], complete: false, firstFailure: nil,
                                durationMilliseconds: ScenarioRunner.elapsed(since: started))
            report.skipped = probe.reason ?? "the driver cannot run it"
            return report
        }
        if probe.infeasible {
            // The file as written cannot be carried out (a release with nothing held, a wait only
            // a later step meets): no interleaving judges the SDK, and none is a pass (a sixteenth
            // outside tester: 200 such runs were reported "0 failed", passed).
            var report = Report(scenario: name, seed: seed, runs: runs, depthFirst: 0, probePoints: [], complete: false, firstFailure: nil,
                                durationMilliseconds: ScenarioRunner.elapsed(since: started))
            report.failingOnReference = excused
            report.unrunnable = probe.firstFailure.map { "\($0.name): \($0.message ?? "")" } ?? "the scenario cannot be carried out as written"
            return report
        }
        let probePoints = probe.interleaving?.points.map(\.options) ?? []
        if failed(probe) { failing = (.prefix([]), probe) }
        let size = probePoints.reduce(1.0) { $0 * Double($1) }
        if failing == nil, size <= Double(settings.maxSchedules) / 2 {
            // Depth-first: the next path changes the last choice point that has an untried option.
            var last = probe.interleaving?.points ?? []
            let cap = settings.maxSchedules / 2
            while failing == nil {
                guard let i = last.lastIndex(where: { $0.index + 1 < $0.options }) else { complete = true; break }
                guard depthFirst < cap else { break }
                let plan = InterleavingPlan.prefix(last[..<i].map(\.index) + [last[i].index + 1])
                let r = await run(plan)
                runs += 1
                depthFirst += 1
                if failed(r) { failing = (plan, r) }
                last = r.interleaving?.points ?? []
            }
        }
        if failing == nil, !complete {
            let steps = max(probe.interleaving?.steps ?? 1, 1)
            // Run seeds below 2^53, so the written file records them exactly as JSON numbers.
            var rng = SplitMix64(state: seed)
            let plans = (runs..<settings.maxSchedules).map { _ in InterleavingPlan.pct(seed: rng.next() >> 11, depth: settings.depth, steps: steps) }
            var next = 0
            while failing == nil && next < plans.count {
                let batch = Array(plans[next..<min(next + concurrency, plans.count)])
                next += batch.count
                let results = await withTaskGroup(of: (Int, ScenarioResult).self) { group in
                    for (i, plan) in batch.enumerated() { group.addTask { (i, await run(plan)) } }
                    var out = [ScenarioResult?](repeating: nil, count: batch.count)
                    for await (i, r) in group { out[i] = r }
                    return out.compactMap { $0 }
                }
                runs += results.count
                // The first failing run in plan order, whatever finished first.
                if let i = results.firstIndex(where: failed) { failing = (batch[i], results[i]) }
            }
        }
        var failure: Failure?
        if let (plan, result) = failing {
            failure = await writeUp(base, file: file, plan: plan, result: result, check: own(result)?.name, seed: seed, depth: settings.depth, runner: runner,
                                    reference: reference)
        }
        var report = Report(scenario: name, seed: seed, runs: runs, depthFirst: depthFirst, probePoints: probePoints, complete: complete,
                            firstFailure: failure, durationMilliseconds: ScenarioRunner.elapsed(since: started))
        report.failingOnReference = excused
        return report
    }

    /// Drops steps (and lowers `times`) one at a time, last first, while `stillFails` (the step
    /// explorer's shrinking, with a stricter test: the same check failing with the same message).
    static func shrinkSteps(_ root: JSONValue, file: String, runner: ScenarioRunner,
                            stillFails: (JSONValue) async -> Bool) async -> JSONValue {
        var current = root
        var changed = true
        var rounds = 0
        while changed && rounds < 8 {
            changed = false
            rounds += 1
            var i = (current["steps"]?.arrayValue?.count ?? 0) - 1
            while i >= 0 {
                guard case .object(var o) = current, var steps = o["steps"]?.arrayValue, steps.count > 1 else { break }
                let removed = steps.remove(at: i)
                o["steps"] = .array(steps)
                if await stillFails(.object(o)) {
                    current = .object(o)
                    changed = true
                } else if case .object(var step) = removed, case .number(let n)? = step["times"], n > 1 {
                    step["times"] = n > 2 ? .number(n - 1) : nil
                    var again = steps
                    again.insert(.object(step), at: i)
                    o["steps"] = .array(again)
                    if await stillFails(.object(o)) { current = .object(o); changed = true }
                }
                i -= 1
            }
        }
        return current
    }

    /// The failing run as a scenario that replays it: the choices it made, the steps shrunk (as
    /// the step explorer does), trailing choices dropped while it still fails the same check, and
    /// the choices re-recorded from the final replay.
    ///
    /// Shrinking is differential when there is a `reference` (the faithful variant, or the
    /// shipping SDK): a candidate is kept only when the reference, replaying it, does not fail
    /// that check and fails nothing it did not fail on the unshrunk file. Judged on the SDK alone,
    /// the shrinker dropped the very step that made the race (the `clearCache` before a cache
    /// assertion), and the written file failed every SDK (a forty-seventh outside tester, B: 27 of
    /// 66 files written from the shipped scenarios failed the shipping SDK).
    static func writeUp(_ base: JSONValue, file: String, plan: InterleavingPlan, result: ScenarioResult, check own: String? = nil, seed: UInt64,
                        depth: Int, runner: ScenarioRunner, reference: ScenarioRunner? = nil) async -> Failure {
        let check = own ?? result.firstFailure?.name ?? "error"
        var seedNote: String {
            if case .pct(let s, _, _) = plan { return "PCT seed \(s) (exploration seed \(seed)), depth \(depth)" }
            return "depth-first (exploration seed \(seed))"
        }
        func with(_ json: JSONValue, choices: [String], runSeed: UInt64?) -> JSONValue {
            guard case .object(var o) = json else { return json }
            var section: [String: JSONValue] = ["depth": .number(Double(depth)), "choices": .array(choices.map(JSONValue.string))]
            if let runSeed { section["seed"] = .number(Double(runSeed)) }
            o["interleaving"] = .object(section)
            return .object(o)
        }
        var runSeed: UInt64?
        if case .pct(let s, _, _) = plan { runSeed = s }
        let original = result.interleaving?.choices ?? []
        var json = base
        if case .object(var o) = json {
            o["name"] = .string((base["name"]?.stringValue ?? "scenario") + "-interleaving")
            o["description"] = .string("Found by contract-harness explore --interleave (\(seedNote)), shrunk; fails '\(check)'. "
                                       + (base["description"]?.stringValue ?? ""))
            json = .object(o)
        }
        let unshrunk = with(json, choices: original, runSeed: runSeed)
        var patient = runner
        patient.interleaving = nil
        var patientReference = reference
        patientReference?.interleaving = nil
        func replay(_ candidate: JSONValue, on r: ScenarioRunner? = nil) async -> ScenarioResult? {
            guard let s = try? ScenarioParser.parse(candidate.serialized(), file: file) else { return nil }
            return await (r ?? patient).run(s)
        }
        let message = Explorer.messageShape(result.firstFailure?.message ?? "")
        func fails(_ r: ScenarioResult?) -> Bool {
            guard let r else { return false }
            return !r.infeasible && r.checks.contains {
                !$0.passed && Explorer.sameCheck($0.name, check) && Explorer.messageShape($0.message ?? "").unicodeScalars.elementsEqual(message.unicodeScalars)
            }
        }
        // What the reference fails replaying the unshrunk file (its choices follow the SDK's task
        // names, the oldest task where a name is not ready): a candidate may keep those failing,
        // never this check, and nothing new (the step explorer's rule, `Explorer.shrink`).
        var referenceFailed: [String] = []
        if let patientReference { referenceFailed = (await replay(unshrunk, on: patientReference))?.checks.filter { !$0.passed }.map(\.name) ?? [] }
        func stillFails(_ candidate: JSONValue) async -> Bool {
            // The reference runs only for a candidate that still fails (most do not).
            guard fails(await replay(candidate)) else { return false }
            guard let patientReference else { return true }
            return Explorer.referenceAllows(await replay(candidate, on: patientReference), failedBefore: referenceFailed,
                                            isTheCheck: { Explorer.sameCheck($0, check) })
        }
        // Steps first (the replayed choices follow the tasks by name), then trailing choices.
        var current = await shrinkSteps(unshrunk, file: file, runner: patient) { await stillFails($0) }
        var choices = current["interleaving"]?["choices"]?.arrayValue?.compactMap(\.stringValue) ?? original
        while !choices.isEmpty {
            let shorter = Array(choices.dropLast())
            let candidate = with(current, choices: shorter, runSeed: runSeed)
            guard await stillFails(candidate) else { break }
            choices = shorter
            current = candidate
        }
        // Record what the replay really chose, so the file states every choice it relies on.
        if let final = await replay(current), fails(final), let trace = final.interleaving {
            let recorded = with(current, choices: trace.choices, runSeed: runSeed)
            if await stillFails(recorded) {
                current = recorded
                choices = trace.choices
            }
        }
        var replayed = await replay(current)
        if !fails(replayed) { current = unshrunk; choices = original; replayed = nil }
        // Whether the reference passes the written file's check (it may fail what it failed in
        // the file's own order): said in the file, as the step explorer says `passes_on`.
        var referenceVerdict: (name: String, passes: Bool)?
        if let patientReference {
            let r = await replay(current, on: patientReference)
            let passes = r.map { !$0.infeasible && ($0.status == .passed || $0.status == .failed)
                && !$0.checks.contains { c in !c.passed && Explorer.sameCheck(c.name, check) } } ?? false
            referenceVerdict = (patientReference.driver.sdkName, passes)
        }
        // The check as the written file's replay names it (a step expectation is named by its
        // position, which moves when shrinking drops steps before it), and what found it.
        let named = replayed?.checks.first { !$0.passed && Explorer.sameCheck($0.name, check) }?.name ?? check
        if case .object(var o) = current {
            let was = named.unicodeScalars.elementsEqual(check.unicodeScalars) ? "" : " ('\(check)' as explored)"
            o["description"] = .string("Found by contract-harness explore --interleave (\(seedNote)), shrunk; fails '\(named)'\(was). "
                                       + (base["description"]?.stringValue ?? ""))
            var explored: [String: JSONValue] = [
                "by": .string("contract-harness explore --interleave"), "file": .string(file), "seed": .number(Double(seed)),
                "depth": .number(Double(depth)), "check": .string(named), "fails_on": .string(runner.driver.sdkName),
            ]
            if !named.unicodeScalars.elementsEqual(check.unicodeScalars) { explored["check_in_explored_order"] = .string(check) }
            if let referenceVerdict { explored[referenceVerdict.passes ? "passes_on" : "also_fails_on"] = .string(referenceVerdict.name) }
            o["explored"] = .object(explored)
            current = .object(o)
        }
        return Failure(plan: plan, result: result, check: check, scenarioJSON: current,
                       stepsBefore: base["steps"]?.arrayValue?.count ?? 0, stepsAfter: current["steps"]?.arrayValue?.count ?? 0,
                       choices: choices)
    }
}
