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
        SwiftSDKDriver(name: "ios-mutant-\(defect?.rawValue ?? "none")", version: ExperimentlySDKInfo.version) { config, session, store, clock in
            MutantClient(defect: defect, config: config, session: session, offlineStore: store, clock: clock)
        }
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
        // Scenario names compare exactly (Unicode scalars), like every other label.
        func failing(_ defect: Defect?) async -> [ExactKey: [String]] {
            let runner = ScenarioRunner(driver: driver(defect), stepTimeoutCap: stepTimeoutCap, keepsHistory: false)
            var failed: [ExactKey: [String]] = [:]
            for s in scenarios {
                let r = await runner.run(s)
                if r.status == .failed || r.status == .error {
                    failed[ExactKey(s.name)] = r.checks.filter { !$0.passed }.map { check in
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
            for s in scenarios where baseline[ExactKey(s.name)] != nil {
                let r = await patient.run(s)
                if r.status == .passed { baseline[ExactKey(s.name)] = nil }
            }
        }
        var rows: [Row] = []
        for defect in defects {
            let failed = await failing(defect)
            let caught = scenarios.map(\.name).filter { failed[ExactKey($0)] != nil && baseline[ExactKey($0)] == nil }
            let row = Row(defect: defect, caughtBy: caught, failingChecks: Array(Set(caught.flatMap { failed[ExactKey($0)] ?? [] })).sorted())
            rows.append(row)
            progress(row)
        }
        return Report(rows: rows, baselineFailures: scenarios.map(\.name).filter { baseline[ExactKey($0)] != nil },
                      scenarios: scenarios.map(\.name), durationMilliseconds: ScenarioRunner.elapsed(since: started))
    }
}
