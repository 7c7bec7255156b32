import Foundation
import ExperimentlyMock

/// Explores the orderings of a scenario's concurrent steps to find the one that breaks the SDK,
/// and writes the first failing ordering as a plain scenario file, shrunk.
///
/// A scenario declares what may move: `"explore": {"steps": [i, j, ...], "max_schedules"?: K,
/// "exhaustive"?: bool}` lists indices into `steps` (starting operations, releases, clock
/// advances, clears, logouts...). A *schedule* is one order of those steps, placed into the
/// positions they hold in the file; every other step stays where it is. Each schedule runs from a
/// fresh state (new mock, clock, clients, stores) and is judged by the scenario's own expectations
/// and checks. Orders that cannot be carried out (an `await` before its start, a `release` with
/// nothing held, a step that waits for what only a later step provides) are *infeasible* and
/// skipped; a failure counts only when a reference SDK passes the same order, and the first one is
/// shrunk differentially (Documentation/Explore.md). With few orders (at most K) or `--exhaustive`,
/// every order is tried in lexicographic order; otherwise the order as written and K - 1 distinct
/// orders drawn with a SplitMix64 generator from the seed, so the same seed gives the same schedules.
public enum Explorer {
    /// Exploration settings from the file, overridable on the command line.
    public struct Settings: Sendable, Equatable {
        /// The movable step indices, ascending.
        public var steps: [Int]
        /// The most schedules to run (the file's `max_schedules` or `--max-schedules`; 100 when
        /// neither gives one).
        public var maxSchedules: Int
        /// Try every order even when there are many: up to `maxSchedules` only when a bound was
        /// given explicitly (`maxSchedulesGiven`), else every order (at most `exhaustiveLimit`).
        public var exhaustive: Bool
        /// Whether `maxSchedules` was given (file or command line) rather than the default 100.
        public var maxSchedulesGiven = true

        /// The number of orders this exploration may run: `maxSchedules`, or with `exhaustive`
        /// and no explicit bound, `exhaustiveLimit` (every order of up to nine movable steps).
        public var bound: Int { exhaustive && !maxSchedulesGiven ? Explorer.exhaustiveLimit : maxSchedules }
    }

    /// The most orders an exhaustive exploration without an explicit `max_schedules` runs
    /// (the top of `max_schedules`'s range; 9! = 362,880 orders fit).
    public static let exhaustiveLimit = 1_000_000

    /// The first failing schedule.
    public struct Failure: Sendable {
        /// The order of the movable steps (their indices in the original file).
        public let order: [Int]
        /// The failing run.
        public let result: ScenarioResult
        /// The shrunk, fixed-order scenario as JSON (what `--out` writes).
        public let scenarioJSON: JSONValue
        /// Steps before and after shrinking.
        public let stepsBefore: Int
        /// Steps after shrinking.
        public let stepsAfter: Int
        /// The check the failing schedule fails, named as in that schedule (the shrunk scenario
        /// fails it too; a step expectation may carry another step number there, as its
        /// `explored.check` says).
        public let check: String
        /// The reference the schedule (and the shrunk scenario) passes on; `nil` when the SDK
        /// under exploration is the reference.
        public var reference: String? = nil
    }

    /// What an exploration found.
    public struct Report: Sendable {
        /// The scenario's name.
        public let scenario: String
        /// The seed the schedules were drawn with.
        public let seed: UInt64
        /// Every schedule tried, in order, as orders of the movable steps.
        public let schedules: [[Int]]
        /// Schedules that failed (crashed ones included).
        public let failed: Int
        /// Schedules whose worker process died or passed its deadline (with `Isolation`).
        public var crashed: Int = 0
        /// Schedules that could not be carried out in their order (skipped): a step waited for
        /// what only a later step provides, or released what was not held.
        public let infeasible: Int
        /// Schedules that failed on the SDK and on the reference too: the scenario fails in that
        /// order whatever the SDK (an expectation that holds only in some orders), not counted as
        /// failures.
        public var failedOnReference: Int = 0
        /// The first of those: its order and the check the reference failed in it (a seventy-third
        /// outside tester: neither the console nor the verdict said which orders they were).
        public var firstFailedOnReference: ListedFailure? = nil
        /// The reference SDK's name; `nil` when the SDK under exploration is the reference.
        public var reference: String? = nil
        /// Schedules that were not judged: the driver under exploration (or the reference, for a
        /// schedule that failed on the SDK) lacks a capability the scenario needs, so the run was
        /// `skipped`. Never passes: an exploration with skipped schedules and no failure has not
        /// shown the SDK correct (`explore` reports it skipped, exit 1).
        public var skipped: Int = 0
        /// Schedules carried out and passed: neither failed, infeasible, failed on the reference
        /// too, nor skipped.
        public var passed: Int { schedules.count - failed - infeasible - failedOnReference - skipped }
        /// `true` when every order was tried.
        public let complete: Bool
        /// `true` when the orders were drawn from the seed (too many to try in order).
        public let sampled: Bool
        /// How the schedules were chosen, for people: "every order (6)", "the first 2 of 24
        /// orders (lexicographic)", "a seeded sample of 100 of 5040 orders".
        public var mode: String {
            let total = (1...Swift.max(1, schedules.first?.count ?? 1)).reduce(1.0) { $0 * Double($1) }
            let of = total < 1e15 ? "\(Int(total))" : String(format: "%.3g", total)
            if complete { return "every order (\(schedules.count))" }
            if sampled { return "a seeded sample of \(schedules.count) of \(of) orders" }
            return "the first \(schedules.count) of \(of) orders (lexicographic)"
        }
        /// The first failing schedule, in schedule order, shrunk; `nil` when none failed.
        public let firstFailure: Failure?
        /// Every failing schedule (up to ``listedFailuresLimit``), in schedule order, as explored
        /// (not shrunk): its order, the first check it fails that the reference passes, that
        /// check's message (at most 400 characters) and whether it crashed. Counts in the verdict
        /// say how many failed; this says which, so a count that differs from run to run can be
        /// read order by order.
        public var failures: [ListedFailure] = []
        /// Wall time, milliseconds, shrinking included.
        public let durationMilliseconds: Double
        /// Wall time of running the schedules alone, milliseconds.
        public let exploringMilliseconds: Double

        /// Why the exploration judged nothing when no schedule could be carried out (each
        /// infeasible, or failing on the reference too) and none failed, as a sentence ending in
        /// its conclusion: with every order tried the scenario cannot pass as written, an error of
        /// the file, never a pass (a sixteenth outside tester: a second release of one fault made
        /// 24 of 24 orders infeasible, and explore passed it); with a sample, the exploration
        /// judged nothing (an eighty-third, F8). `nil` otherwise (skipped schedules are reported
        /// as skipped).
        public var nothingCarriedOut: String? {
            guard firstFailure == nil, skipped == 0, !schedules.isEmpty,
                  schedules.count - infeasible - failedOnReference <= 0 else { return nil }
            let which = complete ? "no order of the movable steps" : "none of the \(schedules.count) orders tried (\(mode))"
            return "\(which) could be carried out (\(infeasible) infeasible, \(failedOnReference) failing on the reference too): "
                + (complete ? "the scenario cannot pass as written" : "the exploration judged nothing (raise max_schedules or use --exhaustive)")
        }

        /// Schedules per second while exploring (shrinking excluded).
        public var schedulesPerSecond: Double { Double(schedules.count) / max(exploringMilliseconds / 1000, 1e-9) }

        /// The exploration as JSON for the verdict.
        public var json: JSONValue {
            var o: [String: JSONValue] = [
                "seed": .number(Double(seed)), "schedules": .number(Double(schedules.count)),
                "failed": .number(Double(failed)), "crashed": .number(Double(crashed)), "infeasible": .number(Double(infeasible)),
                "failed_on_reference": .number(Double(failedOnReference)), "reference": reference.map(JSONValue.string) ?? .null,
                "skipped": .number(Double(skipped)), "passed": .number(Double(passed)),
                "complete": .bool(complete), "sampled": .bool(sampled), "mode": .string(mode),
                "duration_ms": .number(durationMilliseconds.rounded()),
            ]
            if let f = firstFailedOnReference {
                o["first_failed_on_reference"] = .object(["order": .array(f.order.map { .number(Double($0)) }), "check": .string(f.check),
                                                          "message": f.message.map(JSONValue.string) ?? .null])
            }
            if !failures.isEmpty {
                o["failures"] = .array(failures.map { f in
                    .object(["order": .array(f.order.map { .number(Double($0)) }), "check": .string(f.check),
                             "message": f.message.map(JSONValue.string) ?? .null, "crashed": .bool(f.crashed)])
                })
                if failed > failures.count { o["failures_not_listed"] = .number(Double(failed - failures.count)) }
            }
            if let f = firstFailure {
                o["first_failure"] = .object(["order": .array(f.order.map { .number(Double($0)) }), "check": .string(f.check),
                                              "steps_before": .number(Double(f.stepsBefore)), "steps_after": .number(Double(f.stepsAfter)),
                                              "passes_on": f.reference.map(JSONValue.string) ?? .null])
            }
            return .object(o)
        }
    }

    /// One failing schedule of ``Report/failures``.
    public struct ListedFailure: Sendable {
        /// The order of the movable steps.
        public let order: [Int]
        /// The first check the schedule fails that the reference passes (`error` when none is named).
        public let check: String
        /// That check's message, at most 400 characters.
        public let message: String?
        /// Whether the run crashed (its worker or SDK adapter died).
        public let crashed: Bool
    }

    /// How many failing schedules ``Report/failures`` lists at most.
    public static let listedFailuresLimit = 100

    /// Reads `explore` of a scenario file.
    ///
    /// - Throws: `ScenarioError` at `$.explore` for a malformed section or a step index out of range.
    public static func settings(of root: JSONValue, file: String) throws -> Settings? {
        guard let raw = root["explore"] else { return nil }
        var r = try ObjectReader(raw, file: file, path: "$.explore")
        let count = root["steps"]?.arrayValue?.count ?? 0
        guard let items = try r.optionalArray("steps"), items.count >= 2 else {
            throw r.error("steps", expected: "an array of at least two step indices", found: r.value("steps"))
        }
        var steps: [Int] = []
        for (i, item) in items.enumerated() {
            guard case .number(let d) = item, let n = Int(exactly: d), (0..<count).contains(n), !steps.contains(n) else {
                throw ScenarioError(file: file, path: "$.explore.steps[\(i)]", expected: "a distinct index of a step (0..<\(count))",
                                    found: ObjectReader.brief(item))
            }
            steps.append(n)
        }
        let given = try r.optionalInt("max_schedules", range: 1...1_000_000)
        let settings = Settings(steps: steps.sorted(), maxSchedules: given ?? 100,
                                exhaustive: try r.optionalBool("exhaustive") ?? false, maxSchedulesGiven: given != nil)
        try r.finish()
        return settings
    }

    /// The schedules to try: every permutation (lexicographic) when there are at most `max` or
    /// `exhaustive`, else the order as written and `max - 1` distinct seeded shuffles.
    public static func schedules(of steps: [Int], max: Int, exhaustive: Bool, seed: UInt64) -> (orders: [[Int]], complete: Bool) {
        let total = (1...Swift.max(1, steps.count)).reduce(1.0) { $0 * Double($1) }
        if exhaustive || total <= Double(max) {
            var orders: [[Int]] = []
            var current = steps.sorted()
            repeat { orders.append(current) } while orders.count < max && nextPermutation(&current)
            return (orders, Double(orders.count) >= total)
        }
        var rng = SplitMix64(state: seed)
        // The order as written comes first: a sample always judges the file's own order, which
        // `run` passes (an eighty-third outside tester, F8: 40 drawn orders of 5,040, every one
        // infeasible, and the exploration of a passing file judged nothing).
        let written = steps.sorted()
        var seen: Set<[Int]> = [written]
        var orders: [[Int]] = [written]
        var attempts = 0
        while orders.count < max && attempts < max * 20 {
            attempts += 1
            let order = steps.shuffled(using: &rng)
            if seen.insert(order).inserted { orders.append(order) }
        }
        return (orders, false)
    }

    static func nextPermutation(_ a: inout [Int]) -> Bool {
        guard a.count > 1, var i = a.indices.dropLast().last(where: { a[$0] < a[$0 + 1] }) else { return false }
        var j = a.count - 1
        while a[j] <= a[i] { j -= 1 }
        a.swapAt(i, j)
        i += 1
        a[i...].reverse()
        return true
    }

    /// The scenario JSON with the movable steps in `order`, `explore` removed.
    static func fixed(_ root: JSONValue, settings: Settings, order: [Int], suffix: String, note: String) -> JSONValue {
        guard case .object(var o) = root, let steps = root["steps"]?.arrayValue else { return root }
        var placed = steps
        for (slot, index) in zip(settings.steps, order) { placed[slot] = steps[index] }
        o["steps"] = .array(placed)
        o["explore"] = nil
        o["name"] = .string((root["name"]?.stringValue ?? "scenario") + suffix)
        o["description"] = .string(note + " " + (root["description"]?.stringValue ?? ""))
        return .object(o)
    }

    /// Where schedules run when a crash must not end the exploration: worker processes started
    /// from `executable` (`contract-harness __worker`), `slots` at once, the SDK named by `mutant`
    /// (`nil`: the shipping SDK; `"none"` or a `Defect`: `MutantRun.driver`).
    public struct Isolation: Sendable {
        /// The `contract-harness` binary.
        public var executable: String
        /// The `--mutant` name, if any.
        public var mutant: String?
        /// Worker processes at once.
        public var slots: Int
        /// Creates the settings.
        public init(executable: String, mutant: String?, slots: Int) {
            self.executable = executable
            self.mutant = mutant
            self.slots = slots
        }
    }

    /// Runs scenario JSONs in worker processes; a schedule whose worker dies is `crashed`, one that
    /// does not parse is `nil` (infeasible).
    /// `keepsHistory`: each result carries its recorded history (`events`) and step lines, as a
    /// report draws them (the replay of a written failure).
    static func isolated(_ jsons: [JSONValue], file: String, seed: UInt64, cap: Int?, isolation: Isolation,
                         perWorker: Int, progress: Progress? = nil, keepsHistory: Bool = false) async -> [ScenarioResult?] {
        let parsed = Schedules(jsons.map { try? ScenarioParser.parse($0.serialized(), file: file) })
        return await isolated(parsed, file: file, seed: seed, cap: cap, isolation: isolation, perWorker: perWorker, progress: progress,
                              keepsHistory: keepsHistory) { i in
            (String(decoding: jsons[i].serialized(), as: UTF8.self), nil)
        }
    }

    /// Runs the schedules `orders` of the file `root` in worker processes: each job carries the
    /// file's text (parsed once per worker) and its order, so neither side serializes or parses a
    /// whole scenario per schedule. `parsed[i]`: schedule i permuted here (`nil`: not well-formed,
    /// not run).
    static func isolated(schedules root: JSONValue, orders: [[Int]], parsed: Schedules, settings: Settings, file: String, seed: UInt64,
                         cap: Int?, isolation: Isolation, perWorker: Int, progress: Progress? = nil) async -> [ScenarioResult?] {
        let text = String(decoding: root.serialized(), as: UTF8.self)
        return await isolated(parsed, file: file, seed: seed, cap: cap, isolation: isolation, perWorker: perWorker, progress: progress) { i in
            (text, WorkerJob.ScheduleJob(steps: settings.steps, order: orders[i]))
        }
    }

    /// The shared part: `parsed[i]` decides whether schedule i runs (and its deadline), `job(i)` its
    /// job's scenario text and schedule. Each scenario is made here once, to read its deadline,
    /// and not kept (a crashed one is made again for its result).
    private static func isolated(_ parsed: Schedules, file: String, seed: UInt64, cap: Int?, isolation: Isolation, perWorker: Int,
                                 progress: Progress?, keepsHistory: Bool = false,
                                 job: (Int) -> (String, WorkerJob.ScheduleJob?)) async -> [ScenarioResult?] {
        var runnable: [Int] = [], deadlines: [Int] = []
        for i in 0..<parsed.count {
            guard let scenario = parsed[i] else { continue }
            runnable.append(i)
            deadlines.append(HarnessCommand.hardDeadline(scenario, cap: cap, exploring: false))
        }
        let jobs = runnable.enumerated().map { id, i in
            let (text, schedule) = job(i)
            return WorkerJob(id: id, file: file, scenario: text, seed: seed, mutant: isolation.mutant, stepTimeoutCap: cap,
                             keepsHistory: keepsHistory, explore: nil, schedule: schedule)
        }
        let outcomes = await WorkerPool(executable: isolation.executable, jobs: jobs, deadlines: deadlines, slots: isolation.slots,
                                        perWorker: perWorker) { _, outcome in
            switch outcome {
            case .result(let r): progress?.finished(r)
            case .crashed: progress?.finishedCrashed()
            case .notRun: break
            }
        }.run()
        var results = [ScenarioResult?](repeating: nil, count: parsed.count)
        for (i, outcome) in zip(runnable, outcomes) {
            switch outcome {
            case .result(let r): results[i] = r
            case .crashed(let report, let ms): results[i] = parsed[i].map { HarnessCommand.crashedResult($0, report, milliseconds: ms) }
            case .notRun: results[i] = nil
            }
        }
        return results
    }

    /// Live counters of a running exploration, for progress lines (read from another thread while
    /// the exploration runs). State lives behind an `NSLock`.
    public final class Progress: @unchecked Sendable {
        // @unchecked Sendable: every field is guarded by `lock`.
        private let lock = NSLock()
        private var _total = 0, _done = 0, _failed = 0, _infeasible = 0
        private var _phase = "exploring"

        /// Creates empty counters.
        public init() {}

        /// The counters now: schedules in all, schedules run, failed and infeasible so far (on the
        /// SDK under exploration, before confirmation on the reference), and the phase
        /// (`exploring`, `confirming on the reference`, `shrinking`).
        public var snapshot: (total: Int, done: Int, failed: Int, infeasible: Int, phase: String) {
            lock.withLock { (_total, _done, _failed, _infeasible, _phase) }
        }

        func start(total: Int) { lock.withLock { _total = total } }
        func phase(_ p: String) { lock.withLock { _phase = p } }
        func finished(_ r: ScenarioResult?) {
            lock.withLock {
                _done += 1
                if r == nil || r!.infeasible { _infeasible += 1 } else if [.failed, .error, .crashed].contains(r!.status) { _failed += 1 }
            }
        }
        func finishedCrashed() { lock.withLock { _done += 1; _failed += 1 } }
    }

    /// Runs the exploration.
    ///
    /// A schedule *fails* only when it fails on the SDK under exploration and the reference
    /// carries it out and passes; when it fails (or cannot be carried out) on the reference too,
    /// it says nothing about the SDK: such schedules are counted in `failedOnReference` (a
    /// failure of the scenario in that order) or `infeasible`. An order the SDK cannot carry out
    /// (a step waits for what only a later step provides) but the reference passes is a failure
    /// of the SDK. Without a reference (the SDK under exploration is the reference) a failing
    /// schedule fails and an infeasible one is skipped.
    ///
    /// - Parameters:
    ///   - root: the scenario file's JSON (after `{{seed}}` substitution); `file` its path.
    ///   - settings: what may move and how many schedules; `seed` the run's seed.
    ///   - runner: runs each schedule (its driver is the SDK under test).
    ///   - reference: runs schedules on the reference SDK (the shipping SDK, or the faithful
    ///     variant when exploring a broken one); `nil` when `runner`'s SDK is the reference.
    ///   - concurrency: how many schedules run at once.
    ///   - isolation: run the schedules (and shrinking candidates) on the SDK under exploration in
    ///     worker processes, so a schedule that crashes the SDK's process is reported `crashed` (a
    ///     failure) and the rest go on; `nil`: in this process.
    ///   - referenceIsolation: confirm on the reference in worker processes (its `mutant` names the
    ///     reference: `nil` the shipping SDK, `"none"` the faithful variant); `nil`: in this process.
    ///     An in-process run of an order the reference cannot carry out can leave SDK tasks waiting
    ///     for good, and with them its whole execution (about 50 KB each: 8,000 orders of eight
    ///     movable steps held 261 MB); a worker that ran one is replaced.
    ///   - progress: counters updated as schedules finish (for progress lines).
    public static func explore(_ root: JSONValue, file: String, settings: Settings, seed: UInt64,
                               runner: ScenarioRunner, reference: ScenarioRunner? = nil, concurrency: Int = 16,
                               isolation: Isolation? = nil, referenceIsolation: Isolation? = nil, progress: Progress? = nil) async -> Report {
        let started = DispatchTime.now()
        let name = root["name"]?.stringValue ?? file
        let (orders, complete) = schedules(of: settings.steps, max: settings.bound, exhaustive: settings.exhaustive, seed: seed)
        progress?.start(total: orders.count)
        // The file is parsed once; each schedule permutes the parsed steps (serializing and
        // re-parsing every schedule was a tenth of the exploration's CPU time).
        let base = try? ScenarioParser.parse(root.serialized(), file: file)
        func scenarios(_ indices: [Int]) -> Schedules {
            Schedules(count: indices.count) { k in base.flatMap { permuted($0, settings: settings, order: orders[indices[k]]) } }
        }
        var outcomes: [ScenarioResult?]
        if let isolation {
            // In workers the schedule travels as the file plus its order (each worker parses the
            // file once and permutes it, as runAll does here); an order that is not well-formed
            // stays nil. Serializing and parsing a fixed file per schedule, on both sides, was
            // two fifths of the supervisor's time and a tenth of each worker's.
            let perWorker = max(1, (concurrency + isolation.slots - 1) / isolation.slots)
            outcomes = await isolated(schedules: root, orders: orders, parsed: scenarios(Array(orders.indices)), settings: settings, file: file,
                                      seed: seed, cap: runner.stepTimeoutCap, isolation: isolation, perWorker: perWorker, progress: progress)
        } else {
            outcomes = await runAll(scenarios(Array(orders.indices)), runner: runner, concurrency: concurrency, progress: progress)
        }
        // One SDK adapter serves the schedules that run at once (all of them with `--sdk-command`,
        // a worker's with a built-in SDK): when it dies, every schedule it was serving fails with
        // it, whichever of them made it die. A sibling's crash showed as another order's failure
        // at whatever step that order had reached ("deadlocks" at a `wait_for`), and that order
        // was written and shrunk as the first failure. Each such schedule runs again alone (its
        // adapter serves only it), and that result counts.
        let suspects = concurrency > 1 ? outcomes.indices.filter { outcomes[$0].map(adapterDied) ?? false } : []
        if !suspects.isEmpty {
            let again: [ScenarioResult?]
            if let isolation {
                again = await isolated(schedules: root, orders: suspects.map { orders[$0] }, parsed: scenarios(suspects), settings: settings,
                                       file: file, seed: seed, cap: runner.stepTimeoutCap, isolation: isolation, perWorker: 1)
            } else {
                again = await runAll(scenarios(suspects), runner: runner, concurrency: 1, progress: nil)
            }
            let before = outcomes
            for (i, r) in zip(suspects, again) where outcomes[i] != nil { outcomes[i] = r }
            // None crashed again alone: the adapter did die, in one of them, but not reproducibly.
            // The crash still counts, kept on the first of them and saying so (it was dropped, and
            // the verdict depended on --jobs: a twenty-seventh outside tester).
            if !again.contains(where: { $0.map(adapterDied) ?? false }), let i = suspects.first(where: { before[$0] != nil }), var r = before[i] {
                let note = "the SDK adapter died while serving \(suspects.count) schedules at once, this one among them; run again one at a time, none crashed: a crash that does not replay"
                if let c = r.checks.firstIndex(where: { !$0.passed && $0.name == "crash" }) { r.checks[c].message = (r.checks[c].message ?? "") + " (\(note))" }
                r.reason = (r.reason ?? "crashed") + " (\(note))"
                outcomes[i] = r
            }
        }
        // Confirmation: what failed or could not be carried out on the SDK is run on the reference.
        var onReference = [ScenarioResult?](repeating: nil, count: orders.count)
        if let reference {
            progress?.phase("confirming on the reference")
            let suspicious = orders.indices.filter { i in
                guard let r = outcomes[i], !r.infeasibleByChoice else { return false }
                return r.infeasible || r.status == .failed || r.status == .error || r.status == .crashed
            }
            let confirmed: [ScenarioResult?]
            if let referenceIsolation {
                let perWorker = max(1, (concurrency + referenceIsolation.slots - 1) / referenceIsolation.slots)
                confirmed = await isolated(schedules: root, orders: suspicious.map { orders[$0] }, parsed: scenarios(suspicious), settings: settings,
                                           file: file, seed: seed, cap: reference.stepTimeoutCap, isolation: referenceIsolation, perWorker: perWorker)
            } else {
                confirmed = await runAll(scenarios(suspicious), runner: reference, concurrency: concurrency, progress: nil)
            }
            for (i, r) in zip(suspicious, confirmed) { onReference[i] = r }
        }
        let exploring = ScenarioRunner.elapsed(since: started)
        var failed = 0, infeasible = 0, failedOnReference = 0, crashed = 0, skipped = 0
        var firstOnReference: ListedFailure?
        var firstIndex: Int?
        var listed: [ListedFailure] = []
        for i in orders.indices {
            guard let result = outcomes[i] else { infeasible += 1; continue }
            // Not run (a capability the driver lacks): neither a pass nor a failure.
            if result.status == .skipped { skipped += 1; continue }
            let fails = result.infeasible || result.status == .failed || result.status == .error || result.status == .crashed
            guard fails else { continue }
            // Deadlocked by a choice the contract leaves to the SDK (close cancels or not): not
            // carried out, whatever the reference, which may have chosen otherwise, does with it.
            if result.infeasibleByChoice { infeasible += 1; continue }
            if reference != nil {
                guard let ref = onReference[i] else { infeasible += 1; continue }
                if ref.status == .skipped { skipped += 1; continue }
                if ref.infeasible { infeasible += 1; continue }
                // Failing on the reference too excuses only the checks the reference fails: an
                // SDK failing another one in that order (a stale write beside the file's own
                // order-dependent assertion) is the SDK's failure (an outside tester: the broken
                // SDK passed with "2 fail on the reference too" while the correct one failed).
                if ref.status != .passed && ownFailure(result, reference: ref) == nil {
                    failedOnReference += 1
                    if firstOnReference == nil {
                        let check = ref.firstFailure
                        firstOnReference = ListedFailure(order: orders[i], check: check?.name ?? "error",
                                                         message: (check?.message ?? ref.reason).map { String($0.prefix(400)) }, crashed: false)
                    }
                    continue
                }
            } else if result.infeasible {
                infeasible += 1
                continue
            }
            failed += 1
            if result.status == .crashed { crashed += 1 }
            if firstIndex == nil { firstIndex = i }
            if listed.count < listedFailuresLimit {
                let own = onReference[i].flatMap { ownFailure(result, reference: $0) } ?? result.firstFailure
                listed.append(ListedFailure(order: orders[i], check: own?.name ?? "error",
                                            message: (own?.message ?? result.reason).map { String($0.prefix(400)) },
                                            crashed: result.status == .crashed))
            }
        }
        var first: Failure?
        if let i = firstIndex, let result = outcomes[i] {
            progress?.phase("shrinking")
            let order = orders[i]
            // With a reference, the first check the SDK fails and the reference does not.
            let own = reference == nil ? result.firstFailure : onReference[i].flatMap { ownFailure(result, reference: $0) } ?? result.firstFailure
            let check = own?.name ?? "error"
            let referenceName = (reference ?? runner).driver.sdkName
            // The reference passes the order, or fails only checks the SDK's failure is not one of
            // (its own failure then is another): said as it is (an eighty-third outside tester, F7:
            // such a file said "passes on ios" while ios failed it, on another check).
            let referenceFails = reference == nil ? [] : (onReference[i].map(failedChecks) ?? [])
            let passesOnReference = reference != nil && referenceFails.isEmpty && onReference[i]?.status == .passed
            func note(_ named: String) -> String {
                // The check as the written file names it (its replay reports that name), and as the
                // explored order named it when shrinking moved the step.
                let was = named.unicodeScalars.elementsEqual(check.unicodeScalars) ? "" : " ('\(check)' in the explored order)"
                let onReference = reference == nil ? "." : passesOnReference ? ", passes on \(referenceName)."
                    : ", which \(referenceName) does not fail there (it fails \(referenceFails.isEmpty ? "the order otherwise" : referenceFails.map { "'\($0)'" }.joined(separator: ", ")) instead)."
                return "Found by contract-harness explore (seed \(seed), order \(order.map(String.init).joined(separator: ",")) of steps \(settings.steps.map(String.init).joined(separator: ","))), shrunk; fails '\(named)'\(was) on \(runner.driver.sdkName)"
                    + onReference
            }
            let fixedJSON = fixed(root, settings: settings, order: order, suffix: "-schedule", note: note(check))
            var (shrunk, shrunkCheck) = await shrink(fixedJSON, file: file, check: check, reason: own?.message, runner: runner,
                                                     reference: reference, isolation: isolation)
            if case .object(var o) = shrunk {
                o["description"] = .string(note(shrunkCheck) + " " + (root["description"]?.stringValue ?? ""))
                var explored: [String: JSONValue] = [
                    "by": .string("contract-harness explore"), "file": .string(file), "seed": .number(Double(seed)),
                    "movable_steps": .array(settings.steps.map { .number(Double($0)) }),
                    "order": .array(order.map { .number(Double($0)) }),
                    "check": .string(shrunkCheck), "fails_on": .string(runner.driver.sdkName),
                ]
                if !shrunkCheck.unicodeScalars.elementsEqual(check.unicodeScalars) { explored["check_in_explored_order"] = .string(check) }
                explored["passes_on"] = passesOnReference ? .string(referenceName) : .null
                if reference != nil && !passesOnReference {
                    explored["reference"] = .string(referenceName)
                    explored["reference_fails"] = .array(referenceFails.map(JSONValue.string))
                }
                o["explored"] = .object(explored)
                shrunk = .object(o)
            }
            first = Failure(order: order, result: result, scenarioJSON: shrunk,
                            stepsBefore: fixedJSON["steps"]?.arrayValue?.count ?? 0,
                            stepsAfter: shrunk["steps"]?.arrayValue?.count ?? 0, check: check,
                            reference: passesOnReference ? referenceName : nil)
        }
        let total = (1...Swift.max(1, settings.steps.count)).reduce(1.0) { $0 * Double($1) }
        var report = Report(scenario: name, seed: seed, schedules: orders, failed: failed, crashed: crashed, infeasible: infeasible,
                            failedOnReference: failedOnReference, reference: reference?.driver.sdkName, skipped: skipped, complete: complete,
                            sampled: !(settings.exhaustive || total <= Double(settings.maxSchedules)),
                            firstFailure: first, durationMilliseconds: ScenarioRunner.elapsed(since: started),
                            exploringMilliseconds: exploring)
        report.failures = listed
        report.firstFailedOnReference = firstOnReference
        return report
    }

    /// The first check `result` fails that `reference` (the same schedule on the reference SDK)
    /// does not fail, by exact name; the result's first failure when the reference passed;
    /// `nil` when every failure of `result` is one of the reference's too.
    static func ownFailure(_ result: ScenarioResult, reference: ScenarioResult) -> CheckResult? {
        firstFailure(of: result, excusing: failedChecks(reference)) ?? (reference.status == .passed ? result.firstFailure : nil)
    }

    /// The names of the checks `result` fails.
    static func failedChecks(_ result: ScenarioResult) -> [String] { result.checks.filter { !$0.passed }.map(\.name) }

    /// The first check `result` fails whose name is none of `excused` (compared by Unicode scalars:
    /// names carry labels and ids).
    static func firstFailure(of result: ScenarioResult, excusing excused: [String]) -> CheckResult? {
        result.checks.first { c in !c.passed && !excused.contains { $0.unicodeScalars.elementsEqual(c.name.unicodeScalars) } }
    }

    /// Whether `result` ended with its SDK adapter's death (`ScenarioExecution.finishDriver`
    /// marks it `crashed` with a `crash.reason` naming the adapter), as opposed to its worker's.
    static func adapterDied(_ result: ScenarioResult) -> Bool {
        result.status == .crashed && (result.crash?["reason"]?.stringValue?.hasPrefix(ScenarioExecution.adapterCrashPrefix) ?? false)
    }

    /// `scenario` with its movable steps in `order` (as `fixed` places them), or `nil` when that
    /// order is not a well-formed scenario: an `await` or `cancel` before the operation's start,
    /// a `release`, `remove_fault` or `wait_for held` before its fault is added (the parser's
    /// ordering rules, which the file as written satisfies).
    static func permuted(_ scenario: Scenario, settings: Settings, order: [Int]) -> Scenario? {
        var s = scenario
        for (slot, index) in zip(settings.steps, order) { s.steps[slot] = scenario.steps[index] }
        // Labels and fault ids are identity data: compared by Unicode scalars.
        var labels: [String] = [], faults: [String] = []
        func known(_ list: [String], _ x: String) -> Bool { list.contains { $0.unicodeScalars.elementsEqual(x.unicodeScalars) } }
        for step in s.steps {
            switch step {
            case .sdk(_, _, let label?, _, let count, _), .app(_, let label?, _, _, _, let count):
                labels += [label] + (count > 1 ? StepContext.copyLabels(label, count: count) : [])
            case .await(let label, _), .cancel(let label): if !known(labels, label) { return nil }
            case .addFault(let id, _): faults.append(id)
            case .removeFault(let id), .release(let id, _, _, _), .waitFor(.held(let id, _)): if !known(faults, id) { return nil }
            default: break
            }
        }
        return s
    }

    /// Scenarios by position, each made when it is about to run (`nil`: its order is not
    /// well-formed, see `permuted`): every order of nine movable steps, made up front, was
    /// 362,880 permuted scenarios and 3.4 GB before the first ran (a twenty-seventh outside tester).
    struct Schedules: Sendable {
        /// How many there are.
        let count: Int
        private let make: @Sendable (Int) -> Scenario?
        /// The schedules `make(0..<count)`.
        init(count: Int, make: @escaping @Sendable (Int) -> Scenario?) {
            self.count = count
            self.make = make
        }
        /// Scenarios already made.
        init(_ scenarios: [Scenario?]) { self.init(count: scenarios.count) { scenarios[$0] } }
        /// The scenario at `i`, made now.
        subscript(i: Int) -> Scenario? { make(i) }
    }

    /// `result` as an exploration keeps it: without its timeline (`events`, `history`, step lines,
    /// the adapter's standard error), which explore reports for no schedule; its status, checks
    /// (with their slices), reason and crash stay. A failing or infeasible run keeps its timeline
    /// (`run`'s verdicts draw it), about 50 KB: kept for every such schedule, 8,000 orders of
    /// eight movable steps held 260 MB.
    static func lean(_ result: ScenarioResult) -> ScenarioResult {
        var lean = result
        lean.events = []
        lean.history = []
        lean.stepSummaries = []
        lean.adapterStderr = []
        return lean
    }

    /// Runs every scenario on `runner`, up to `concurrency` at once; results by position (`nil`:
    /// the scenario's order is not well-formed, see `permuted`).
    static func runAll(_ scenarios: Schedules, runner: ScenarioRunner, concurrency: Int,
                       progress: Progress?) async -> [ScenarioResult?] {
        // Schedules are independent runs from a fresh state, so several run at once (their waits
        // are mostly thread hand-offs); outcomes are collected by position, so what is reported
        // does not depend on which finished first.
        var outcomes = [ScenarioResult?](repeating: nil, count: scenarios.count)
        await withTaskGroup(of: (Int, ScenarioResult?).self) { group in
            var next = 0
            func launch() {
                guard next < scenarios.count else { return }
                let index = next
                next += 1
                let scenario = scenarios[index]
                group.addTask {
                    guard let scenario else { return (index, nil) }
                    return (index, await runner.run(scenario))
                }
            }
            for _ in 0..<max(1, concurrency) { launch() }
            while let (index, result) = await group.next() {
                outcomes[index] = result.map(lean)
                progress?.finished(result)
                launch()
            }
        }
        return outcomes
    }

    /// Drops steps (and lowers `times`) one at a time while the scenario still fails `check` on
    /// `runner`'s SDK and, with a `reference`, passes on it (differential shrinking: a candidate
    /// that fails on the reference too no longer shows what is wrong with the SDK).
    ///
    /// Returns the shrunk file and the name its failing check has in it: a step expectation is
    /// named by its position (`step 7 assert`), which moves as steps are dropped (`step 4 assert`
    /// in the shrunk file, as its replay reports it).
    static func shrink(_ root: JSONValue, file: String, check: String, reason: String? = nil, runner original: ScenarioRunner,
                       reference: ScenarioRunner? = nil, isolation: Isolation? = nil) async -> (json: JSONValue, check: String) {
        // A candidate that drops a release is stuck, decided without waiting; a short limit
        // bounds the rest.
        let cap = min(original.stepTimeoutCap ?? 500, 500)
        let runner = ScenarioRunner(driver: original.driver, seed: original.seed, stepTimeoutCap: cap, keepsHistory: false)
        let referenceRunner = reference.map { ScenarioRunner(driver: $0.driver, seed: $0.seed, stepTimeoutCap: cap, keepsHistory: false) }
        // The matching failed check's name in the candidate last found failing.
        var matched = check
        // What the reference already fails on the file being shrunk (the explored order, e.g. its
        // order-dependent `assert`): a candidate may keep those failing, never add a failure of its
        // own ("nothing judged" once the steps that judged were dropped: a twenty-seventh outside
        // tester's shrunk file failed on every SDK while it said it passed on the reference).
        var referenceFailed: [String] = []
        if let referenceRunner, let s = try? ScenarioParser.parse(root.serialized(), file: file) {
            referenceFailed = await referenceRunner.run(s).checks.filter { !$0.passed }.map(\.name)
        }
        func stillFails(_ candidate: JSONValue) async -> Bool {
            guard let s = try? ScenarioParser.parse(candidate.serialized(), file: file) else { return false }
            async let onReference: ScenarioResult? = referenceRunner == nil ? nil : referenceRunner!.run(s)
            let result: ScenarioResult?
            if let isolation {
                result = await isolated([candidate], file: file, seed: original.seed, cap: cap, isolation: isolation, perWorker: 1).first ?? nil
            } else {
                result = await runner.run(s)
            }
            guard let r = result else { _ = await onReference; return false }
            // The same check failing for another reason is not the same failure: a candidate whose
            // step is stuck (nothing left can finish it, never started, nothing to release) while
            // the original failure was not would write a file that only shows the shrinking.
            // Without a reference nothing tells the original failure from another of the same
            // step (a lone `assert` failing because nothing ran at all was kept as the shrunk
            // file: a fifteenth outside tester), so the message must be the same too, up to the
            // request and step numbers that move as steps are dropped.
            let failing = r.infeasible ? nil : r.checks.first {
                !$0.passed && sameCheck($0.name, check) && (structural(reason) || !structural($0.message))
                    && (referenceRunner != nil || reason == nil || messageShape($0.message ?? "") == messageShape(reason!))
            }
            let ref = await onReference
            // The reference may fail another check it failed before shrinking (the file shows
            // both), never this one, and nothing new.
            guard let failing, ref == nil || referenceAllows(ref, failedBefore: referenceFailed, isTheCheck: { $0.unicodeScalars.elementsEqual(failing.name.unicodeScalars) })
            else { return false }
            matched = failing.name
            return true
        }
        var current = root
        var currentCheck = check
        var changed = true
        var rounds = 0
        while changed && rounds < 8 {
            changed = false
            rounds += 1
            var i = (current["steps"]?.arrayValue?.count ?? 0) - 1
            while i >= 0 {
                guard case .object(var o) = current, var steps = o["steps"]?.arrayValue else { break }
                let removed = steps.remove(at: i)
                o["steps"] = .array(steps)
                if await stillFails(.object(o)) {
                    current = .object(o)
                    currentCheck = matched
                    changed = true
                } else if case .object(var step) = removed, case .number(let n)? = step["times"], n > 1 {
                    // Keep the step but with fewer copies.
                    step["times"] = nil
                    var again = steps
                    again.insert(.object(step), at: i)
                    o["steps"] = .array(again)
                    if await stillFails(.object(o)) { current = .object(o); currentCheck = matched; changed = true }
                }
                i -= 1
            }
        }
        return (current, currentCheck)
    }

    /// The differential rule of shrinking: the reference's run `r` of a candidate was carried out
    /// (not infeasible, passed or failed) and fails neither the check shrinking keeps failing
    /// (`isTheCheck`) nor anything it did not fail on the file before shrinking (`failedBefore`).
    /// Shared by the step and the interleaving explorer; `nil` (no run) never allows.
    static func referenceAllows(_ r: ScenarioResult?, failedBefore: [String], isTheCheck: (String) -> Bool) -> Bool {
        guard let r else { return false }
        return !r.infeasible && (r.status == .passed || r.status == .failed) && r.checks.allSatisfy { c in
            c.passed || (!isTheCheck(c.name) && failedBefore.contains { sameCheck($0, c.name) })
        }
    }

    /// Whether a failure message says the scenario's steps cannot be carried out rather than the
    /// SDK answered wrongly: a step nothing left can finish, an operation never started, a release
    /// with nothing held (the runner's messages, `ScenarioExecution.stuck(at:waitingFor:what:)`).
    static func structural(_ message: String?) -> Bool {
        guard let message else { return false }
        return ["can never finish", "can never happen", "can never be met", "was never started", "nothing to release", "waits for what only a later step provides"]
            .contains { message.contains($0) }
    }

    /// A failure message without the numbers that move as steps are dropped: request sequence
    /// numbers (`#12`) and step numbers (`step 7`). Both shrinkers compare failures by it.
    static func messageShape(_ message: String) -> String {
        var out = ""
        var skipping = false
        for c in message {
            if skipping, c.isNumber { continue }
            skipping = c == "#" || (c == " " && out.hasSuffix("step"))
            out.append(c)
        }
        return out
    }

    /// Step expectations are named after their position (`step 4 ...`), which moves as steps are
    /// dropped: compare them by what follows the number.
    static func sameCheck(_ a: String, _ b: String) -> Bool {
        func key(_ s: String) -> String {
            guard s.hasPrefix("step ") else { return s }
            return String(s.drop(while: { $0 != " " }).dropFirst().drop(while: { $0 != " " }))
        }
        return key(a) == key(b)
    }
}
