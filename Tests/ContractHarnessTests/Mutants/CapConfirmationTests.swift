import XCTest
import Foundation
import ExperimentlyMutants
@testable import ContractHarness

/// The mutant matrix caps each step's real-time limit so known hangs fail fast; a catch that came
/// from running out of that cap is re-run with the file's own limits before it counts, so a loaded
/// machine can never add a catch (once seen: `fan-out-to-expired` "caught" by a field-timeout
/// scenario under load). The load is injected deterministically: a cap of 0 ms, which no step
/// that waits for an SDK round trip can meet, on scenarios that pass with their own limits.
final class CapConfirmationTests: XCTestCase {
    /// Twelve lookups one after another, each its own round trip: passes with its own limit
    /// against every variant that gets a plain assignment right; fails under a 0 ms cap.
    static let lookups: Scenario = {
        let steps = (0..<12).map { #"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-\#($0)", "expect": {"value": {"experiment_key": "sdk_contract_ab"}}}"# }
        return try! ScenarioParser.parse(Data(#"""
        {"format": "experimently-scenario/1", "name": "sequential-lookups", "description": "round trips only",
         "steps": [\#(steps.joined(separator: ", "))]}
        """#.utf8), file: "sequential-lookups.json")
    }()

    /// A held request and a clock advance past the SDK's deadline: an SDK without its own
    /// deadline (`no-own-deadline`) never ends the lookup, with any limits (a real hang).
    static let deadline = try! ScenarioParser.parse(Data(#"""
    {"format": "experimently-scenario/1", "name": "deadline-ends-a-held-lookup", "description": "the SDK's own deadline",
     "config": {"timeout": 5}, "step_timeout_ms": 1500,
     "steps": [
       {"fault": {"match": {}, "action": {"hold": {}}}, "id": "h"},
       {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true},
       {"wait_for": {"held": "h", "count": 1}},
       {"advance": 5.1},
       {"await": "a", "expect": {"error": "networkError", "code": -1001}},
       {"release": "h"}]}
    """#.utf8), file: "deadline-ends-a-held-lookup.json")

    /// What the cap does on its own: the lookups fail under it, by running out of the step limit.
    func testTheZeroCapAloneFailsTheLookups() async {
        let capped = await ScenarioRunner(driver: MutantRun.driver(.fanOutToExpired), stepTimeoutCap: 0, keepsHistory: false).run(Self.lookups)
        XCTAssertEqual(capped.status, .failed)
        XCTAssertTrue(capped.stepLimitReached)
        XCTAssertTrue(MutantRun.capMayHaveCaused(capped, Self.lookups, cap: 0))
        let own = await ScenarioRunner(driver: MutantRun.driver(.fanOutToExpired), keepsHistory: false).run(Self.lookups)
        XCTAssertEqual(own.status, .passed, own.firstFailure?.message ?? own.reason ?? "")
        XCTAssertFalse(own.stepLimitReached)
        XCTAssertFalse(MutantRun.capMayHaveCaused(capped, Self.lookups, cap: 5000), "a cap that lowers nothing causes nothing")
    }

    func testACapCausedCatchIsDiscardedAndARealHangStillCounts() async {
        for full in [true, false] {
            let report = await MutantRun.run([Self.lookups, Self.deadline], defects: [.fanOutToExpired, .noOwnDeadline],
                                             stepTimeoutCap: 0, executable: nil, full: full)
            XCTAssertEqual(report.baselineFailures, [], "full \(full): baseline failures are re-confirmed")
            let expired = report.rows.first { $0.defect == .fanOutToExpired }
            XCTAssertEqual(expired?.caughtBy, [], "full \(full): the cap alone caught fan-out-to-expired")
            let hang = report.rows.first { $0.defect == .noOwnDeadline }
            XCTAssertEqual(hang?.caughtBy, ["deadline-ends-a-held-lookup"], "full \(full): the real hang must still count")
            XCTAssertTrue(report.unconfirmedCatches.contains("fan-out-to-expired: sequential-lookups"), "full \(full): \(report.unconfirmedCatches)")
            XCTAssertTrue(report.unconfirmedCatches.contains("no-own-deadline: sequential-lookups"), "full \(full): \(report.unconfirmedCatches)")
            XCTAssertFalse(report.unconfirmedCatches.contains("no-own-deadline: deadline-ends-a-held-lookup"))
        }
    }
}
