import Foundation
import ExperimentlyMock
import Experimently
import ExperimentlyMutants

extension MutantClient: SwiftClientSurface {}

/// Runs a scenario suite against every broken SDK variant (`Defect`) and reports which scenarios
/// caught which variant: the harness proving itself.
public enum MutantRun {
    /// One variant's row of the matrix.
    public struct Row: Sendable {
        /// The variant.
        public let defect: Defect
        /// The scenarios that failed (or errored) against this variant but pass against the
        /// faithful variant.
        public let caughtBy: [String]
        /// The checks that failed in those scenarios (named checks, `step N ...` expectations).
        public let failingChecks: [String]
        /// Why each catch in `caughtBy` failed, in its order: the scenario, its first failing
        /// check and that check's message (the run with the file's own limits when the catch was
        /// confirmed; an interleaving catch names its check only). Empty where not kept.
        public var catches: [(scenario: String, check: String, message: String)] = []
        /// Whether at least one scenario caught it.
        public var caught: Bool { !caughtBy.isEmpty }

        /// A row of the matrix.
        public init(defect: Defect, caughtBy: [String], failingChecks: [String],
                    catches: [(scenario: String, check: String, message: String)] = []) {
            self.defect = defect
            self.caughtBy = caughtBy
            self.failingChecks = failingChecks
            self.catches = catches
        }
    }

    /// The matrix.
    public struct Report: Sendable {
        /// One row per broken variant, in `Defect` order.
        public let rows: [Row]
        /// Scenarios that fail against the faithful (defect-free) variant: a suite or harness bug.
        public let baselineFailures: [String]
        /// Scenarios run per variant.
        public let scenarios: [String]
        /// Wall time, milliseconds.
        public let durationMilliseconds: Double
        /// Catches discarded because they did not hold with the files' own step limits: the
        /// variant failed the scenario only by running out of the capped step limit (a loaded
        /// machine), and passed it when re-run as the file says. `"<variant>: <scenario>"`.
        public var unconfirmedCatches: [String] = []

        /// The closing line of `contract-harness mutants`: what each count means, e.g.
        /// `variants: 11 caught, 16 missed (of 27); baseline: 0 scenarios fail against the faithful variant`.
        /// (It used to read `11 passed, 16 failed`, which said nothing of variants caught or missed.)
        public var summaryLine: String {
            let caught = rows.filter(\.caught).count
            let baseline = baselineFailures.count
            return "variants: \(caught) caught, \(rows.count - caught) missed (of \(rows.count)); baseline: "
                + "\(baseline) scenario\(baseline == 1 ? "" : "s") fail\(baseline == 1 ? "s" : "") against the faithful variant"
        }

        /// The share of variants caught, in [0, 1].
        public var shareCaught: Double { rows.isEmpty ? 0 : Double(rows.filter(\.caught).count) / Double(rows.count) }

        /// The matrix as the verdict's `mutants` section.
        public var json: JSONValue {
            .object([
                "variants": .array(rows.map { row in
                    .object(["defect": .string(row.defect.rawValue), "item": .number(Double(row.defect.item)),
                             "summary": .string(row.defect.summary), "caught": .bool(row.caught),
                             "caught_by": .array(row.caughtBy.map(JSONValue.string)),
                             "failing_checks": .array(row.failingChecks.map(JSONValue.string)),
                             "catches": .array(row.catches.map { c in
                                 .object(["scenario": .string(c.scenario), "check": .string(c.check), "message": .string(c.message)])
                             })])
                }),
                "baseline_failures": .array(baselineFailures.map(JSONValue.string)),
                "unconfirmed_catches": .array(unconfirmedCatches.map(JSONValue.string)),
                "scenarios": .number(Double(scenarios.count)),
                "caught": .number(Double(rows.filter(\.caught).count)),
                "total": .number(Double(rows.count)),
                "share_caught": .number(shareCaught),
                "duration_ms": .number(durationMilliseconds.rounded()),
            ])
        }
    }

    /// The driver for the broken variant named `name` (a `Defect` raw value, e.g.
    /// `cancel-keeps-request`; `experimently-driver` serves it when `EXPERIMENTLY_DRIVER_MUTANT`
    /// names one, so a defect can be shown caught out of process too).
    ///
    /// - Throws: `DriverProtocolError` listing the known names when `name` is none of them.
    public static func driver(named name: String) throws -> SwiftSDKDriver {
        guard let defect = Defect.allCases.first(where: { $0.rawValue.unicodeScalars.elementsEqual(name.unicodeScalars) }) else {
            throw DriverProtocolError("no broken variant named '\(name)' (known: \(Defect.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        return driver(defect)
    }

    /// A driver running `MutantClient` with `defect` (`nil`: the faithful variant).
    public static func driver(_ defect: Defect?) -> SwiftSDKDriver {
        SwiftSDKDriver(name: "ios-mutant-\(defect?.rawValue ?? "none")", version: ExperimentlySDKInfo.version,
                       interleavingFactory: { config, session, store, clock, executor in
            MutantClient(defect: defect, config: config, session: session, offlineStore: store, clock: clock, taskExecutor: executor)
        })
    }

    /// Runs `scenarios` against the faithful variant and then every defect.
    ///
    /// - Parameters:
    ///   - stepTimeoutCap: caps each step's real-time limit (milliseconds) so variants that hang
    ///     (e.g. without their own deadline) fail fast.
    ///   - executable: a `contract-harness` binary to run every (variant, scenario) pair in worker
    ///     processes (`WorkerPool`), so a variant that crashes the process (a `fatalError`) is
    ///     caught with status `crashed` instead of ending the run; `nil` runs in this process
    ///     (only safe for variants that cannot crash).
    ///   - jobs: worker processes at once (with `executable`).
    ///   - seed: replaces `{{seed}}` in the files (with `executable`).
    ///   - full: run every (variant, scenario) pair and list every scenario that catches each
    ///     variant; `false`: stop each variant at its first catch in scenario order (the
    ///     scenarios before it all run, so the catch named is the same one `full` lists first, and
    ///     which variants are caught does not change); its `caughtBy` and `failingChecks` are
    ///     that scenario's alone (plus the interleaving catches).
    ///   - progress: called with each variant's row, in `Defect` order.
    ///   - counters: live counters (runs in all, runs done, runs failed, phase) for the progress
    ///     lines `HarnessCommand.progressTicker` prints; a run is one (variant, scenario) pair.
    public static func run(_ scenarios: [Scenario], defects: [Defect] = Defect.allCases, stepTimeoutCap: Int = 1500,
                           executable: String? = nil, jobs: Int = 2, seed: UInt64 = 0, full: Bool = true,
                           counters: Explorer.Progress? = nil,
                           progress: (Row) -> Void = { _ in }) async -> Report {
        let started = DispatchTime.now()
        // Scenario names compare exactly (Unicode scalars), like every other label.
        let variants: [Defect?] = [nil] + defects.map { Optional($0) }
        let pairs = variants.flatMap { d in scenarios.map { (d, $0) } }
        counters?.start(total: pairs.count)
        let n = scenarios.count
        // Interleaving (issue 15): scenarios tagged "interleave" are also explored with
        // `explore --interleave` (default budget, seed 0) for each variant the suite misses and
        // each await-atomicity variant (`needsInterleaving`); the faithful variant must explore
        // them clean. Catches are named "interleave:<scenario>". Exploration runs in this process:
        // only variants the suite misses (which therefore did not crash on it) and the
        // await-atomicity ones reach it. The faithful variant's and the await-atomicity variants'
        // explorations start at once, beside the worker processes' runs.
        let interleaved = scenarios.filter { s in s.tags.contains { $0.unicodeScalars.elementsEqual("interleave".unicodeScalars) } }
        // With the files' own step limits, not the cap: an interleaving run's failure is judged as
        // it comes (never confirmed again, as a plain run's is), so a capped limit let load add a
        // catch or fail the faithful variant (a twenty-eighth outside tester; a deadlock is decided
        // at once either way).
        @Sendable func explored(_ defect: Defect?) async -> [ExactKey: InterleaveCatch] {
            var runner = ScenarioRunner(driver: driver(defect), stepTimeoutCap: nil, keepsHistory: false)
            runner.interleaving = nil
            var failed: [ExactKey: InterleaveCatch] = [:]
            for s in interleaved {
                guard let root = try? JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: s.file)), file: s.file) else { continue }
                let report = await InterleavingExplorer.explore(root, file: s.file, settings: .of(s), seed: 0, runner: runner)
                if let f = report.firstFailure { failed[ExactKey("interleave:" + s.name)] = InterleaveCatch(f) }
            }
            return failed
        }
        let atomicity = interleaved.isEmpty ? [] : defects.filter(\.needsInterleaving)
        let earlyExplorations = Task { () -> (baseline: [ExactKey: InterleaveCatch], byDefect: [Defect: [ExactKey: InterleaveCatch]]) in
            guard !interleaved.isEmpty else { return ([:], [:]) }
            let baseline = await explored(nil)
            var byDefect: [Defect: [ExactKey: InterleaveCatch]] = [:]
            for d in atomicity { byDefect[d] = await explored(d) }
            return (baseline, byDefect)
        }
        var results: [ScenarioResult?]
        /// Each variant's known catcher (`knownCatcher(of:)`) run beside the faithful variant:
        /// (variant offset, scenario index).
        var hinted: [(v: Int, i: Int)] = []
        var hintedResults: [ScenarioResult?] = []
        /// Confirmations started as soon as a doubtful catch came in (while the rest of the matrix
        /// ran), by position in `pairs`; `confirm` awaits them instead of running the pair again.
        let earlyConfirmations = HarnessLocked<[Int: Task<ScenarioResult?, Never>]>([:])
        /// Starts the confirmation of a failure the cap may have caused, at once.
        @Sendable func confirmEarly(_ index: Int, _ pair: (Defect?, Scenario), _ r: ScenarioResult) {
            guard Self.fails(r), Self.capMayHaveCaused(r, pair.1, cap: stepTimeoutCap) else { return }
            earlyConfirmations.withLock { tasks in
                guard tasks[index] == nil else { return }
                tasks[index] = Task { await Self.results(of: [pair], cap: nil, executable: executable, jobs: 1, seed: seed).first ?? nil }
            }
        }
        if full {
            counters?.phase("running every variant")
            results = await Self.results(of: pairs, cap: stepTimeoutCap, executable: executable, jobs: jobs, seed: seed, counters: counters)
        } else {
            // The faithful variant first: a scenario that fails on it catches nothing. Each
            // variant's known catcher runs beside it, dispatched first (the slowest catches wait
            // out a step limit), as a mutation tester's history runs a mutant's killing test first.
            counters?.phase("running the faithful variant and each variant's known catcher")
            hinted = defects.enumerated().compactMap { v, d in
                guard !atomicity.contains(d), let name = knownCatcher(of: d),
                      let i = scenarios.firstIndex(where: { $0.name.unicodeScalars.elementsEqual(name.unicodeScalars) }) else { return nil }
                return (v, i)
            }
            let hintedPairs = hinted.map { (Optional(defects[$0.v]), scenarios[$0.i]) }
            let first = await Self.results(of: hintedPairs + Array(pairs.prefix(n)), cap: stepTimeoutCap, executable: executable, jobs: jobs,
                                           seed: seed, counters: counters, onResult: { [hinted] id, r in
                guard id < hinted.count else { return }
                confirmEarly(n + hinted[id].v * n + hinted[id].i, hintedPairs[id], r)
            })
            hintedResults = Array(first.prefix(hinted.count))
            results = Array(first.dropFirst(hinted.count))
        }
        func failing(_ offset: Int) -> [ExactKey: [String]] {
            var failed: [ExactKey: [String]] = [:]
            for (i, s) in scenarios.enumerated() {
                guard let r = results[offset + i] else { continue }
                if r.status == .failed || r.status == .error || r.status == .crashed {
                    failed[ExactKey(s.name)] = r.checks.filter { !$0.passed }.map { check in
                        // "step 5 assert" and "step 3 do getAssignment as x expect" are expectations.
                        Self.kind(ofCheck: check.name)
                    }
                    if r.status == .crashed { failed[ExactKey(s.name)] = ["crashed"] }
                }
            }
            return failed
        }
        var baseline = failing(0)
        // A faithful-variant failure under the capped step limit is confirmed with the files' own
        // limits (a loaded machine can push a step past the cap): only a real failure disqualifies
        // a scenario from catching variants.
        if !baseline.isEmpty {
            let again = scenarios.filter { baseline[ExactKey($0.name)] != nil }
            counters?.phase("confirming \(again.count) baseline failures with the files' own limits")
            let patient = await Self.results(of: again.map { (nil, $0) }, cap: nil, executable: executable, jobs: jobs, seed: seed)
            for (s, r) in zip(again, patient) where r?.status == .passed { baseline[ExactKey(s.name)] = nil }
        }
        // A catch that may be the cap's doing (it ran out of the capped step limit, or passed the
        // hard deadline derived from it) counts only when the variant also fails the scenario
        // with the file's own limits: load can never add a catch. A real hang fails both ways.
        var unconfirmed: [String] = []
        /// Re-runs the pairs at `indices` (positions in `pairs` and `results`) with the files' own
        /// limits; returns those that no longer fail (their catches are discarded).
        func confirm(_ indices: [Int]) async -> [Int] {
            guard !indices.isEmpty else { return [] }
            let named = indices.map { "\(pairs[$0].0?.rawValue ?? "faithful") by \(pairs[$0].1.name)" }.joined(separator: ", ")
            counters?.phase("confirming \(indices.count) catches at the capped step limit with the files' own limits: \(named)")
            let early = earlyConfirmations.withLock { $0 }
            let rest = indices.filter { early[$0] == nil }
            let ranNow = await Self.results(of: rest.map { pairs[$0] }, cap: nil, executable: executable, jobs: jobs, seed: seed)
            var byIndex = Dictionary(uniqueKeysWithValues: zip(rest, ranNow))
            for index in indices where byIndex[index] == nil { byIndex[index] = await early[index]!.value }
            let patient = indices.map { byIndex[$0] ?? nil }
            var discarded: [Int] = []
            for (index, r) in zip(indices, patient) {
                results[index] = r
                if let r, Self.fails(r) { continue }
                discarded.append(index)
                unconfirmed.append("\(pairs[index].0?.rawValue ?? "faithful"): \(pairs[index].1.name)")
            }
            return discarded
        }
        func doubtful(_ index: Int) -> Bool {
            guard let r = results[index], Self.fails(r), baseline[ExactKey(scenarios[index % n].name)] == nil else { return false }
            return Self.capMayHaveCaused(r, scenarios[index % n], cap: stepTimeoutCap)
        }
        if full {
            _ = await confirm((n..<results.count).filter(doubtful))
        } else {
            // Each variant's scenarios run in order until one catches it (fails where the faithful
            // variant passed); the rest of that variant's scenarios are not dispatched. A first
            // catch that does not hold with the files' own limits is discarded and that variant
            // goes on with the scenarios after it.
            let disqualified = scenarios.map { baseline[ExactKey($0.name)] != nil }
            results += [ScenarioResult?](repeating: nil, count: defects.count * n)
            // A known catcher that caught its variant (confirmed with the file's own limits when the
            // cap may have caused it) ends that variant's search; one that did not (the file changed,
            // or fails the faithful variant) leaves the search in scenario order, without it.
            for (h, r) in zip(hinted, hintedResults) { results[n + h.v * n + h.i] = r }
            let hintCatches = hinted.filter { h in results[n + h.v * n + h.i].map(Self.fails) == true && !disqualified[h.i] }
            let hintDiscarded = Set(await confirm(hintCatches.map { n + $0.v * n + $0.i }.filter(doubtful)))
            var done = Set(hintCatches.filter { !hintDiscarded.contains(n + $0.v * n + $0.i) }.map(\.v))
            let ranAlready = Set(hinted.map { n + $0.v * n + $0.i })
            // An await-atomicity variant its interleaving exploration catches (while the faithful
            // variant explores clean) is not searched further: a plain run reaches its window only
            // by luck, so a plain catch would change from run to run.
            let early = await earlyExplorations.value
            for (v, d) in defects.enumerated() where d.needsInterleaving {
                if early.byDefect[d]?.keys.contains(where: { early.baseline[$0] == nil }) == true { done.insert(v) }
            }
            var todo: [(v: Int, i: Int)] = (0..<n).flatMap { i in
                (0..<defects.count).filter { !done.contains($0) && !ranAlready.contains(n + $0 * n + i) }.map { (v: $0, i: i) }
            }
            counters?.phase("running each variant until its first catch")
            while !todo.isEmpty {
                let batch = todo
                let firstCatch = HarnessLocked<[Int: Int]>([:])   // variant offset -> lowest catching scenario index
                let ran = await Self.results(of: batch.map { (Optional(defects[$0.v]), scenarios[$0.i]) }, cap: stepTimeoutCap,
                                             executable: executable, jobs: jobs, seed: seed, counters: counters,
                                             skip: { id in firstCatch.withLock { caught in caught[batch[id].v].map { batch[id].i > $0 } ?? false } },
                                             onResult: { id, r in
                    guard !disqualified[batch[id].i], Self.fails(r) else { return }
                    firstCatch.withLock { caught in caught[batch[id].v] = min(caught[batch[id].v] ?? Int.max, batch[id].i) }
                    // A catch the cap may have caused is confirmed with the file's own limits at
                    // once, overlapping the rest of the matrix (a real hang waits out that limit).
                    confirmEarly(n + batch[id].v * n + batch[id].i, (Optional(defects[batch[id].v]), scenarios[batch[id].i]), r)
                })
                // Results past a variant's first catch (in flight when it was found) are dropped, so
                // what is reported does not depend on timing.
                let catches = firstCatch.withLock { $0 }
                for (id, item) in batch.enumerated() {
                    results[n + item.v * n + item.i] = catches[item.v].map { item.i > $0 } == true ? nil : ran[id]
                }
                let discarded = await confirm(catches.map { n + $0.key * n + $0.value }.sorted().filter(doubtful))
                todo = discarded.flatMap { index in ((index % n + 1)..<n).filter { !ranAlready.contains(index - index % n + $0) }.map { (v: index / n - 1, i: $0) } }
            }
            // Confirmations started for catches a lower scenario later superseded are awaited too,
            // so no worker process of this run outlives it.
            for task in earlyConfirmations.withLock({ Array($0.values) }) { _ = await task.value }
        }
        if !interleaved.isEmpty { counters?.phase("exploring interleavings of \(interleaved.count) scenarios") }
        let early = await earlyExplorations.value
        let interleavedBaseline = early.baseline
        var rows: [Row] = []
        for (v, defect) in defects.enumerated() {
            var failed = failing((v + 1) * scenarios.count)
            var interleaveCatches: [ExactKey: InterleaveCatch] = [:]
            if let found = early.byDefect[defect] {
                interleaveCatches = found
            } else if !interleaved.isEmpty, !scenarios.contains(where: { failed[ExactKey($0.name)] != nil && baseline[ExactKey($0.name)] == nil }) {
                interleaveCatches = await explored(defect)
            }
            failed.merge(interleaveCatches.mapValues(\.checks)) { a, _ in a }
            let caught = (scenarios.map(\.name) + interleaved.map { "interleave:" + $0.name })
                .filter { failed[ExactKey($0)] != nil && baseline[ExactKey($0)] == nil && interleavedBaseline[ExactKey($0)] == nil }
            // Each catch's first failing check and message (cut at 600 characters), so a doubtful
            // catch can be read without running the pair again (a forty-fifth outside tester).
            let catches = caught.map { name -> (scenario: String, check: String, message: String) in
                if let i = scenarios.firstIndex(where: { $0.name.unicodeScalars.elementsEqual(name.unicodeScalars) }),
                   let r = results[(v + 1) * n + i], let first = r.checks.first(where: { !$0.passed }) {
                    let message = first.message ?? r.reason ?? ""
                    return (name, first.name, Self.cut(message))
                }
                if let c = interleaveCatches[ExactKey(name)] { return (name, c.check, c.message) }
                return (name, failed[ExactKey(name)]?.first ?? "", "")
            }
            let row = Row(defect: defect, caughtBy: caught, failingChecks: Array(Set(caught.flatMap { failed[ExactKey($0)] ?? [] })).sorted(),
                          catches: catches)
            rows.append(row)
            progress(row)
        }
        results.removeAll()
        var report = Report(rows: rows, baselineFailures: scenarios.map(\.name).filter { baseline[ExactKey($0)] != nil } + interleavedBaseline.keys.map(\.text).sorted(),
                            scenarios: scenarios.map(\.name), durationMilliseconds: ScenarioRunner.elapsed(since: started))
        report.unconfirmedCatches = unconfirmed
        return report
    }

    /// The shipped scenario known to catch `defect` fastest (its first catch in scenario order
    /// when the default matrix was last measured, or a quicker one that catches it too), run
    /// beside the faithful variant before the variant's search in scenario order, as a mutation
    /// tester's history runs a mutant's killing test first (PIT's incremental analysis does so from its history file): which
    /// variants are caught cannot change, only which catch is named and how soon. `nil`: none
    /// (the await-atomicity variants are caught by interleaving exploration). A name that no
    /// longer catches its variant (a file renamed or changed) costs only time: the variant is
    /// then searched in scenario order, and `MutantTests` fails until the name is mended.
    static func knownCatcher(of defect: Defect) -> String? {
        switch defect {
        case .staleWriteAfterClear, .crashOnClearInFlight, .staleWriteAndOldRequestUnregisters, .upstreamDefects:
            return "app-display-racing-login-judged-by-its-own-call"
        case .oldRequestUnregistersNewer, .clearKeepsInFlight: return "defect-2-inflight-bookkeeping-after-clear"
        case .noSingleFlight: return "app-view-appears-three-times-at-once-one-exposure"
        case .collidingCacheKey, .noPercentEncoding: return "field-offline-store-entries-never-collide"
        case .persistedValueOn404: return "app-flag-404-after-ttl-never-served-from-store"
        case .otherUsersPersistedValue: return "app-login-flag-502-never-served-another-users-store"
        case .fanOutToExpired: return "field-experiment-stops-mid-run"
        case .fanOutToOtherUsers: return "app-event-after-login-fans-out-to-new-identity-only"
        case .fanOutToIneligible: return "app-event-unkeyed-never-fanned-out-to-holdout"
        case .wrongBatchChunks, .noOwnDeadline: return "defect-6-own-deadline-on-a-later-batch-chunk"
        case .hashBigEndian, .hashWithoutSeparator: return "golden-vectors-beyond-ascii"
        case .prefetchAssignments: return "app-event-racing-logout-judged-by-its-own-call"
        case .exposureForFallback: return "field-429-retry-after-no-hammering"
        case .rateLimitAsNotFound: return "field-429-rate-limited-served-from-fallback"
        case .batchFailuresReportTrue: return "defect-5-batch-with-failures-reports-false"
        case .cachesFailure: return "app-flag-500-shows-fallback-without-exposure"
        case .cancelKeepsRequest: return "defect-3-cancel-every-waiter-cancels-request"
        // Its first catch in order waits out a step limit; this one fails at once.
        case .canonicalIdentity: return "field-canonically-equivalent-users-named-checks"
        case .unregisterBeforeCacheWrite, .joinFinishedFlight: return nil
        case .timestampWholeSeconds: return "field-event-payload-timestamps-and-fields"
        case .kindlessKey, .cachesFallbackValue: return "field-404-removes-only-that-kind-user-and-key"
        case .zeroFieldsDropped: return "s1-event-zero-and-empty-fields-are-sent"
        case .ignoresCacheSize: return "s4-cache-size-bounds-each-cache"
        case .nfcKeysOnTheWire: return "field-nfc-nfd-flag-and-experiment-keys-are-distinct"
        case .trimsUserIds: return "field-user-ids-exact-case-and-whitespace"
        case .percentDecodesIds: return "field-unicode-and-escaped-ids-on-the-wire"
        case .ttlFromRequestStart: return "field-ttl-counted-from-the-answer"
        case .batchStopsAfterTransportFailure: return "field-batch-later-chunks-after-a-transport-failure"
        case .trackWithoutOwnDeadline: return "field-keyed-track-has-its-own-deadline"
        case .noFallbackOn4xx: return "field-fallback-on-every-4xx-but-404"
        case .numbersAsBooleans: return "field-json-numbers-keep-their-kind"
        case .noCacheHits: return "field-rerendered-view-is-a-cache-hit"
        case .statusIgnoresTrackAnswer: return "field-overlapping-status-calls-each-report-their-own-delivery"
        case .remembersFailure: return "field-failures-are-never-remembered"
        case .deadlineReportsCancelled: return "field-own-deadline-is-a-timeout-not-a-cancel"
        case .cancelEndsEveryWaiter: return "field-cancelling-one-view-never-cancels-the-others"
        case .cancelStarterEndsRequest: return "field-cancelling-the-first-view-leaves-the-second-its-answer"
        case .clearEndsRequests: return "field-clear-leaves-a-call-in-flight-its-answer"
        case .warmsUpKnownExperiments: return "field-the-sdk-looks-up-only-what-it-is-asked-for"
        }
    }

    /// Whether `r` is a failure (`failed`, `error` or `crashed`).
    static func fails(_ r: ScenarioResult) -> Bool { r.status == .failed || r.status == .error || r.status == .crashed }

    /// Whether the failure `r` of `s`, run with step limits capped at `cap` milliseconds, may be
    /// the cap's doing rather than the variant's: the cap lowered the file's own step limit, and
    /// some step ran out of it while the run was not shown stuck
    /// (`ScenarioResult.stepLimitUnproven`), or the worker passed the hard deadline derived from it. Such a failure is re-run with the file's own limits before it
    /// counts (a failure with them is the file's own verdict, as `run` would give it).
    static func capMayHaveCaused(_ r: ScenarioResult, _ s: Scenario, cap: Int?) -> Bool {
        guard let cap, cap < s.stepTimeoutMilliseconds else { return false }
        if r.status == .crashed {
            if case .object(let crash)? = r.crash { return crash["deadline_ms"] != nil }
            return false
        }
        return r.stepLimitUnproven
    }

    /// Scenarios a matrix worker process runs at once: a scenario mostly waits (on quiescence, a
    /// held answer, a step limit a broken variant runs into), so several share a process.
    static let scenariosPerWorker = 4

    /// Runs each (variant, scenario) pair: in worker processes when `executable` is given, else
    /// here. A pair for which `skip(position)` is `true` when its turn comes is not run (`nil`);
    /// `onResult` is called as each pair finishes (from a pool thread); `counters` counts each
    /// finished run for the progress lines.
    static func results(of pairs: [(Defect?, Scenario)], cap: Int?, executable: String?, jobs: Int, seed: UInt64,
                        counters: Explorer.Progress? = nil, skip: (@Sendable (Int) -> Bool)? = nil,
                        onResult: @escaping @Sendable (Int, ScenarioResult) -> Void = { _, _ in }) async -> [ScenarioResult?] {
        guard let executable else {
            var out: [ScenarioResult?] = []
            for (i, (defect, s)) in pairs.enumerated() {
                if skip?(i) == true { out.append(nil); continue }
                let r = await ScenarioRunner(driver: driver(defect), stepTimeoutCap: cap, keepsHistory: false).run(s)
                onResult(i, r)
                counters?.finished(r)
                out.append(r)
            }
            return out
        }
        var texts: [String: String] = [:]
        for (_, s) in pairs where texts[s.file] == nil {
            texts[s.file] = SeedSubstitution.apply((try? String(contentsOfFile: s.file, encoding: .utf8)) ?? "", seed: seed)
        }
        let work = pairs.enumerated().map { i, pair in
            WorkerJob(id: i, file: pair.1.file, scenario: texts[pair.1.file] ?? "", seed: seed, mutant: pair.0?.rawValue ?? "none",
                      stepTimeoutCap: cap, keepsHistory: false, explore: nil, slimPassed: true)
        }
        let deadlines = pairs.map { HarnessCommand.hardDeadline($0.1, cap: cap, exploring: false) }
        let pool = WorkerPool(executable: executable, jobs: work, deadlines: deadlines, slots: jobs, perWorker: scenariosPerWorker) { id, outcome in
            switch outcome {
            case .result(let r): onResult(id, r); counters?.finished(r)
            case .crashed(let report, let ms): onResult(id, HarnessCommand.crashedResult(pairs[id].1, report, milliseconds: ms)); counters?.finishedCrashed()
            case .notRun: break
            }
        }
        if let skip { pool.skipping(skip) }
        let outcomes = await pool.run()
        return zip(pairs, outcomes).map { pair, outcome in
            switch outcome {
            case .result(let r): return r
            case .crashed(let report, let ms): return HarnessCommand.crashedResult(pair.1, report, milliseconds: ms)
            case .notRun:
                if skip != nil { return nil }
                return ScenarioResult(name: pair.1.name, file: pair.1.file, tags: pair.1.tags, source: pair.1.source, status: .error,
                                      durationMilliseconds: 0, checks: [], reason: "not run", smoke: nil, history: [], historyDigest: "")
            }
        }
    }
}

extension MutantRun {
    /// A failing check's name as the matrix groups it: "step 5 assert" and "step 3 do
    /// getAssignment as x expect" are a step's expectations ("step assert", "step expect"), any
    /// other name is kept.
    static func kind(ofCheck name: String) -> String {
        name.hasPrefix("step ") ? (name.hasSuffix("expect") ? "step expect" : "step assert") : name
    }

    /// A catch's message as the verdict keeps it: at most 600 characters, then "...".
    static func cut(_ message: String) -> String { message.count > 600 ? String(message.prefix(600)) + "..." : message }

    /// An interleaving exploration's catch: the failing check as the matrix groups it, and as
    /// the exploration's run named it with its message (cut at 600 characters). Before, an
    /// `assert` was grouped as "step expect" and the message was empty (a forty-seventh outside
    /// tester, F).
    struct InterleaveCatch: Sendable {
        let checks: [String]
        let check: String
        let message: String

        init(_ f: InterleavingExplorer.Failure) {
            let first = f.result.checks.first { !$0.passed && Explorer.sameCheck($0.name, f.check) }
                ?? f.result.checks.first { !$0.passed }
            check = first?.name ?? f.check
            checks = [MutantRun.kind(ofCheck: check)]
            message = MutantRun.cut(first?.message ?? f.result.reason ?? "")
        }
    }
}
