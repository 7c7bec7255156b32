import XCTest
import Foundation
import ExperimentlyMutants
@testable import ContractHarness

/// The shipped suite catches every deliberately broken SDK variant, and the faithful variant of
/// the second implementation passes all of it.
final class MutantTests: XCTestCase {
    func testEveryVariantIsCaughtByAShippedScenario() async throws {
        let folder = ExplorerTests.repository.appendingPathComponent("scenarios").path
        let files = try HarnessCommand.discover([folder])
        let (scenarios, invalid) = HarnessCommand.load(files, seed: 0)
        XCTAssertTrue(invalid.isEmpty, "\(invalid)")
        XCTAssertGreaterThanOrEqual(scenarios.count, 40)
        // In worker processes: variant 20 crashes the process it runs in.
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path),
                          "contract-harness not built at \(HarnessCLITests.binary.path)")
        // Each variant until its first catch, its known catcher first (the whole matrix, every
        // pair, was 55 s of the debug test run); a named check no first catch fails is then looked for in the files that name
        // it, each variant again until its first catch among those files alone, else in every pair
        // of those files.
        let report = await MutantRun.run(scenarios, stepTimeoutCap: 1500, executable: HarnessCLITests.binary.path, jobs: 2, full: false)
        XCTAssertEqual(report.rows.count, Defect.allCases.count)
        let crashing = try XCTUnwrap(report.rows.first { $0.defect == .crashOnClearInFlight })
        XCTAssertTrue(crashing.caught && crashing.failingChecks.contains("crashed"), "variant 20 is caught through crashed: \(crashing)")
        XCTAssertEqual(report.baselineFailures, [], "the faithful variant must pass the whole suite")
        for row in report.rows {
            XCTAssertTrue(row.caught, "variant \(row.defect.item) \(row.defect.rawValue) (\(row.defect.summary)) slipped through every scenario")
        }
        XCTAssertEqual(report.shareCaught, 1)
        // Each variant's known catcher still catches it (else the matrix searches in order: mend
        // `MutantRun.knownCatcher(of:)`); the await-atomicity variants are caught by interleaving alone.
        for row in report.rows {
            if let known = MutantRun.knownCatcher(of: row.defect) {
                XCTAssertEqual(row.caughtBy, [known], "variant \(row.defect.rawValue): its known catcher no longer catches it")
            } else {
                XCTAssertTrue(row.defect.needsInterleaving, row.defect.rawValue)
                XCTAssertEqual(row.caughtBy, ["interleave:interleave-two-concurrent-assignments-one-request"], row.defect.rawValue)
            }
        }
        // Each named check earns its place: it is what fails for at least one broken variant.
        let named = ["stickiness", "fan_out", "batch_chunking", "single_flight", "no_fallback_on_404", "offline_fallback",
                     "no_stale_write", "exposure_after_display", "no_stale_after_logout", "golden_vectors"]
        var failing = Set(report.rows.flatMap(\.failingChecks))
        for check in named where !failing.contains(check) {
            let naming = scenarios.filter { $0.checks.contains(check) }
            guard !naming.isEmpty else { continue }
            let again = await MutantRun.run(naming, stepTimeoutCap: 1500, executable: HarnessCLITests.binary.path, jobs: 2, full: false)
            failing.formUnion(again.rows.flatMap(\.failingChecks))
            if !failing.contains(check) {
                // Failing only behind another check or file: every pair of those files.
                let every = await MutantRun.run(naming, stepTimeoutCap: 1500, executable: HarnessCLITests.binary.path, jobs: 2, full: true)
                failing.formUnion(every.rows.flatMap(\.failingChecks))
            }
        }
        for check in named {
            XCTAssertTrue(failing.contains(check), "no broken variant fails '\(check)'")
        }
    }

    /// The counters the once-a-second progress line of `mutants` prints (the ticker `explore`
    /// uses) count every (variant, scenario) run and the failing ones, and end at the total.
    func testProgressCountersCountEveryRun() async throws {
        let folder = ExplorerTests.repository.appendingPathComponent("scenarios")
        let files = ["s4-single-flight-50-concurrent-flag-calls.json", "s4-cache-is-per-user.json"].map { folder.appendingPathComponent($0).path }
        let (scenarios, invalid) = HarnessCommand.load(files, seed: 0)
        XCTAssertTrue(invalid.isEmpty, "\(invalid)")
        let counters = Explorer.Progress()
        let report = await MutantRun.run(scenarios, defects: [.noSingleFlight], stepTimeoutCap: 1500, counters: counters)
        let seen = counters.snapshot
        XCTAssertEqual(seen.total, 4, "2 scenarios x (faithful + 1 variant)")
        XCTAssertEqual(seen.done, 4)
        XCTAssertEqual(seen.failed, 1, "no-single-flight fails the single-flight scenario only")
        XCTAssertEqual(report.rows.map(\.caught), [true])
        XCTAssertEqual(seen.phase, "running every variant")
    }
}
