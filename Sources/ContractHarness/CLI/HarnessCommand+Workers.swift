import Foundation

extension HarnessCommand {
    /// The pool of a running `run`, for the interrupt handler (an `NSLock` guards it).
    final class PoolBox: @unchecked Sendable {
        // @unchecked Sendable: `value` is only touched inside `lock`.
        private let lock = NSLock()
        private var value: WorkerPool?
        var pool: WorkerPool? {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }

    /// Whether `run` isolates scenarios in worker processes: when this process is the
    /// `contract-harness` binary (which has the worker mode) and the driver is the built-in one
    /// (a worker rebuilds it, or the `--mutant` variant, by name). Library callers with their own
    /// driver, and tests calling `main` in-process, run in-process.
    static func workerExecutable(for driver: any SDKDriver) -> String? {
        guard let builtIn = driver as? SwiftSDKDriver, builtIn.sdkName == SwiftSDKDriver().sdkName else { return nil }
        return WorkerPool.selfExecutable
    }

    /// The number of cores, the default of `--jobs` for `run` and `mutants`.
    static var cores: Int { max(1, ProcessInfo.processInfo.activeProcessorCount) }

    /// The hard deadline of one scenario in a worker, milliseconds: every step and the final wait
    /// at their time limit and 150 ms past it (where a stuck proof under way at the limit is
    /// completed: `Recorder.stuckWindow`), plus 10 s for start-up and teardown (an exploration:
    /// 10 minutes).
    static func hardDeadline(_ s: Scenario, cap: Int?, exploring: Bool) -> Int {
        if exploring { return 600_000 }
        let step = min(s.stepTimeoutMilliseconds, cap ?? Int.max)
        return (s.steps.count + 3) * (step + 150) + 10_000
    }

    /// The job that runs `s` in a worker.
    static func job(_ s: Scenario, id: Int, options: RunOptions, cap: Int? = nil, keepsHistory: Bool = true) -> WorkerJob {
        let text = SeedSubstitution.apply((try? String(contentsOfFile: s.file, encoding: .utf8)) ?? "", seed: options.seed)
        let exploring = options.explore && text.contains("\"explore\"")
        return WorkerJob(id: id, file: s.file, scenario: text, seed: options.seed, mutant: options.mutant, stepTimeoutCap: cap,
                         keepsHistory: keepsHistory,
                         explore: exploring ? WorkerJob.ExploreJob(maxSchedules: options.maxSchedules, exhaustive: options.exhaustive) : nil)
    }

    /// A `crashed` result for `s`.
    static func crashedResult(_ s: Scenario, _ report: CrashReport, milliseconds: Double) -> ScenarioResult {
        var r = ScenarioResult(name: s.name, file: s.file, tags: s.tags, source: s.source, status: .crashed,
                               durationMilliseconds: milliseconds, checks: [CheckResult(name: "crash", passed: false, message: report.reason)],
                               reason: report.reason, smoke: nil, history: [], historyDigest: "")
        r.crash = report.json
        return r
    }

    /// Runs `selected` in `jobs` worker processes and returns their results in the order given
    /// (the same order, statuses and digests as one worker); prints each line in that order as
    /// soon as everything before it finished. With `--fail-fast`, scenarios after the first one
    /// that fails, errs or crashes are `skipped`, whichever worker ran them. Lines go through `tell`
    /// (the run's redacting printer).
    static func runInWorkers(_ selected: [Scenario], executable: String, jobs: Int, options: RunOptions,
                             progress: RunProgress, box: PoolBox,
                             tell: @escaping @Sendable (String) -> Void) async -> [ScenarioResult] {
        let work = selected.enumerated().map { i, s in job(s, id: i, options: options, cap: options.stepTimeoutCap) }
        let deadlines = zip(selected, work).map { s, j in hardDeadline(s, cap: options.stepTimeoutCap, exploring: j.explore != nil) }
        let printer = OrderedPrinter(count: selected.count, failFast: options.failFast)
        let failFast = options.failFast
        let knownLines = HarnessLocked<[Int: String]>([:])
        let pool = WorkerPool(executable: executable, jobs: work, deadlines: deadlines, slots: jobs) { id, outcome in
            var r: ScenarioResult
            switch outcome {
            case .result(let result): r = result
            case .crashed(let report, let ms): r = crashedResult(selected[id], report, milliseconds: ms)
            case .notRun: return
            }
            // Known failures (--skip, --skip-from): a failure becomes a skip with a KNOWN line.
            if options.known.matches(selected[id]), let known = options.known.apply(&r) {
                knownLines.withLock { $0[id] = known }
            }
            if failFast && [.failed, .error, .crashed].contains(r.status) { box.pool?.stop(after: id) }
            progress.finished(id, r)
            printer.add(id, r) { ready in
                progress.append(ready)
                let index = selected.firstIndex { $0.file == ready.file && Array($0.name.unicodeScalars) == Array(ready.name.unicodeScalars) }
                tell(index.flatMap { i in knownLines.withLock { $0[i] } } ?? line(for: ready))
            }
        }
        box.pool = pool
        let outcomes = await pool.run()
        // Interrupted: the signal handler writes the verdict and exits (130 or 143); the workers
        // it killed are not crashes, so this path must not finish the run with them.
        while pool.isInterrupted { try? await Task.sleep(nanoseconds: 1_000_000_000) }
        box.pool = nil
        var results: [ScenarioResult] = []
        var stopped = false
        for (s, outcome) in zip(selected, outcomes) {
            var r: ScenarioResult
            switch outcome {
            case .result(let result): r = result
            case .crashed(let report, let ms): r = crashedResult(s, report, milliseconds: ms)
            case .notRun:
                r = ScenarioResult(name: s.name, file: s.file, tags: s.tags, source: s.source, status: .skipped, durationMilliseconds: 0,
                                   checks: [], reason: "--fail-fast: an earlier scenario failed", smoke: nil, history: [], historyDigest: "")
            }
            if options.known.matches(s) { _ = options.known.apply(&r) }
            if stopped { r = OrderedPrinter.skipped(r) }
            if failFast && [.failed, .error, .crashed].contains(r.status) { stopped = true }
            results.append(r)
        }
        // Lines not printed yet (after a --fail-fast stop): print them as reported.
        for r in results.dropFirst(printer.printed) { tell(line(for: r)) }
        return results
    }

    /// Hands out results in job order as soon as every earlier one is in (an `NSLock` guards it).
    final class OrderedPrinter: @unchecked Sendable {
        // @unchecked Sendable: `slots` and `next` are only touched inside `lock`.
        private let lock = NSLock()
        private var slots: [ScenarioResult?]
        private var next = 0
        private var stopped = false
        private let failFast: Bool
        init(count: Int, failFast: Bool) {
            slots = Array(repeating: nil, count: count)
            self.failFast = failFast
        }
        /// Stores result `id` and hands `deliver` every result now ready, in order (with
        /// `--fail-fast`, those after a failure as `skipped`), inside the lock so that deliveries
        /// from different pool threads never interleave.
        func add(_ id: Int, _ r: ScenarioResult, deliver: (ScenarioResult) -> Void) {
            lock.withLock {
                slots[id] = r
                while next < slots.count, let r = slots[next] {
                    deliver(stopped ? Self.skipped(r) : r)
                    if failFast && [.failed, .error, .crashed].contains(r.status) { stopped = true }
                    next += 1
                }
            }
        }
        /// `r` as skipped by `--fail-fast`.
        static func skipped(_ r: ScenarioResult) -> ScenarioResult {
            ScenarioResult(name: r.name, file: r.file, tags: r.tags, source: r.source, status: .skipped, durationMilliseconds: 0,
                           checks: [], reason: "--fail-fast: an earlier scenario failed", smoke: nil, history: [], historyDigest: "")
        }
        /// How many were handed out.
        var printed: Int { lock.withLock { next } }
    }

    /// Writes the verdict (and JUnit) that says a run has started and not finished, so a stale
    /// one from an earlier run is never read as this run's.
    static func writeInProgress(_ verdict: Verdict, options: RunOptions, secrets: [String], planned: Int) {
        var v = verdict
        v.extra["in_progress"] = .bool(true)
        v.extra["ok"] = .bool(false)
        v.extra["scenarios_planned"] = .number(Double(planned))
        // Never after a signal's interrupted verdict (InterruptSignals): that one must stay.
        // A FIFO holds no stale file, and its reader would take the in-progress verdict as the one.
        InterruptSignals.unlessInterrupted {
            if !isFIFO(options.verdict) { try? v.write(to: options.verdict, redacting: secrets) }
            if let junit = options.junit, !isFIFO(junit) {
                try? v.junit(redacting: secrets, error: "run in progress: the harness has not finished (or was killed)")
                    .writeOutput(to: junit)
            }
        }
    }
}
