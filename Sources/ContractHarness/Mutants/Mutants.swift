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
        /// Whether at least one scenario caught it.
        public var caught: Bool { !caughtBy.isEmpty }
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

        /// The share of variants caught, in [0, 1].
        public var shareCaught: Double { rows.isEmpty ? 0 : Double(rows.filter(\.caught).count) / Double(rows.count) }

        /// The matrix as the verdict's `mutants` section.
        public var json: JSONValue {
            .object([
                "variants": .array(rows.map { row in
                    .object(["defect": .string(row.defect.rawValue), "item": .number(Double(row.defect.item)),
                             "summary": .string(row.defect.summary), "caught": .bool(row.caught),
                             "caught_by": .array(row.caughtBy.map(JSONValue.string)),
                             "failing_checks": .array(row.failingChecks.map(JSONValue.string))])
                }),
                "baseline_failures": .array(baselineFailures.map(JSONValue.string)),
                "scenarios": .number(Double(scenarios.count)),
                "caught": .number(Double(rows.filter(\.caught).count)),
                "total": .number(Double(rows.count)),
                "share_caught": .number(shareCaught),
                "duration_ms": .number(durationMilliseconds.rounded()),
            ])
        }
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
    ///   - progress: called with each finished variant's row.
    public static func run(_ scenarios: [Scenario], defects: [Defect] = Defect.allCases, stepTimeoutCap: Int = 1500,
                           progress: (Row) -> Void = { _ in }) async -> Report {
        let started = DispatchTime.now()
        func failing(_ defect: Defect?) async -> [String: [String]] {
            let runner = ScenarioRunner(driver: driver(defect), stepTimeoutCap: stepTimeoutCap, keepsHistory: false)
            var failed: [String: [String]] = [:]
            for s in scenarios {
                let r = await runner.run(s)
                if r.status == .failed || r.status == .error {
                    failed[s.name] = r.checks.filter { !$0.passed }.map { check in
                        // "step 5 assert" and "step 3 do getAssignment as x expect" are expectations.
                        check.name.hasPrefix("step ") ? (check.name.hasSuffix("expect") ? "step expect" : "step assert") : check.name
                    }
                }
            }
            return failed
        }
        var baseline = await failing(nil)
        // A faithful-variant failure under the capped step limit is confirmed with the files' own
        // limits (a loaded machine can push a step past the cap): only a real failure disqualifies
        // a scenario from catching variants.
        if !baseline.isEmpty {
            let patient = ScenarioRunner(driver: driver(nil), keepsHistory: false)
            for s in scenarios where baseline[s.name] != nil {
                let r = await patient.run(s)
                if r.status == .passed { baseline[s.name] = nil }
            }
        }
        // Interleaving (issue 15): scenarios tagged "interleave" are also explored with
        // `explore --interleave` (default budget, seed 0) for each variant the suite misses and
        // each await-atomicity variant (`needsInterleaving`); the faithful variant must explore
        // them clean. Catches are named "interleave:<scenario>".
        let interleaved = scenarios.filter { s in s.tags.contains { $0.unicodeScalars.elementsEqual("interleave".unicodeScalars) } }
        func explored(_ defect: Defect?) async -> [String: [String]] {
            var runner = ScenarioRunner(driver: driver(defect), stepTimeoutCap: stepTimeoutCap, keepsHistory: false)
            runner.interleaving = nil
            var failed: [String: [String]] = [:]
            for s in interleaved {
                guard let root = try? JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: s.file)), file: s.file) else { continue }
                let report = await InterleavingExplorer.explore(root, file: s.file, settings: .of(s), seed: 0, runner: runner)
                if let f = report.firstFailure { failed["interleave:" + s.name] = [f.check.hasPrefix("step ") ? "step expect" : f.check] }
            }
            return failed
        }
        let interleavedBaseline = interleaved.isEmpty ? [:] : await explored(nil)
        var rows: [Row] = []
        for defect in defects {
            var failed = await failing(defect)
            if !interleaved.isEmpty, defect.needsInterleaving || !scenarios.contains(where: { failed[$0.name] != nil && baseline[$0.name] == nil }) {
                failed.merge(await explored(defect)) { a, _ in a }
            }
            let caught = (scenarios.map(\.name) + interleaved.map { "interleave:" + $0.name })
                .filter { failed[$0] != nil && baseline[$0] == nil && interleavedBaseline[$0] == nil }
            let row = Row(defect: defect, caughtBy: caught, failingChecks: Array(Set(caught.flatMap { failed[$0] ?? [] })).sorted())
            rows.append(row)
            progress(row)
        }
        return Report(rows: rows, baselineFailures: scenarios.map(\.name).filter { baseline[$0] != nil } + interleavedBaseline.keys.sorted(),
                      scenarios: scenarios.map(\.name), durationMilliseconds: ScenarioRunner.elapsed(since: started))
    }
}
