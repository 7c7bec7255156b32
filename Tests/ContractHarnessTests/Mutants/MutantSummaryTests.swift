import XCTest
import ExperimentlyMutants
@testable import ContractHarness

/// The closing line of `contract-harness mutants` counts variants caught and missed (attack
/// finding 12: it read `11 passed, 16 failed`, which named neither).
final class MutantSummaryTests: XCTestCase {
    func testSummaryLineSaysCaughtAndMissedVariants() {
        let defects = Array(Defect.allCases.prefix(4))
        let rows = defects.enumerated().map { i, d in
            MutantRun.Row(defect: d, caughtBy: i < 3 ? ["s\(i)"] : [], failingChecks: [])
        }
        let report = MutantRun.Report(rows: rows, baselineFailures: ["broken-baseline"], scenarios: ["a", "b"], durationMilliseconds: 1)
        XCTAssertEqual(report.summaryLine,
                       "variants: 3 caught, 1 missed (of 4); baseline: 1 scenario fails against the faithful variant")
        let clean = MutantRun.Report(rows: rows, baselineFailures: [], scenarios: ["a"], durationMilliseconds: 1)
        XCTAssertEqual(clean.summaryLine,
                       "variants: 3 caught, 1 missed (of 4); baseline: 0 scenarios fail against the faithful variant")
        XCTAssertFalse(report.summaryLine.contains("passed"), "the line counts variants, not passing scenarios")
    }
}
