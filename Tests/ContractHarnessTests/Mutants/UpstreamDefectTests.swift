import XCTest
import Foundation
import ExperimentlyMutants
@testable import ContractHarness

/// Issue 11 section 9: against an SDK with the six defects of CONTRACT.md section 5 at once (as
/// upstream has them), each defect is named by a failing scenario's message; defects 1 and 2
/// together are caught by the defect-2 scenario whose first answer fails; and an SDK that keeps
/// its in-flight table across clearCache() is told so, not "not quiescent".
final class UpstreamDefectTests: XCTestCase {
    func defectScenarios() throws -> [Scenario] {
        let folder = Repository.root.appendingPathComponent("scenarios").path
        let files = try HarnessCommand.discover([folder]).filter { ($0 as NSString).lastPathComponent.hasPrefix("defect-") }
        let (scenarios, invalid) = HarnessCommand.load(files, seed: 0)
        XCTAssertTrue(invalid.isEmpty, "\(invalid)")
        return scenarios
    }

    func failures(_ scenarios: [Scenario], _ defect: Defect?) async -> [String: String] {
        let runner = ScenarioRunner(driver: MutantRun.driver(defect), stepTimeoutCap: 1500, keepsHistory: false)
        var out: [String: String] = [:]
        for s in scenarios {
            let r = await runner.run(s)
            if r.status != .passed { out[s.name] = r.firstFailure.map { "\($0.name): \($0.message ?? "")" } ?? r.reason ?? "failed" }
        }
        return out
    }

    func testEachOfTheSixDefectsIsNamed() async throws {
        let scenarios = try defectScenarios()
        let baseline = await failures(scenarios, nil)
        XCTAssertEqual(baseline, [:], "the faithful variant passes every defect scenario")
        let failed = await failures(scenarios, .upstreamDefects)
        for n in 1...6 {
            XCTAssertTrue(failed.contains { $0.key.hasPrefix("defect-\(n)-") && $0.value.contains("CONTRACT.md section 5, defect \(n)") },
                          "no defect-\(n) scenario names defect \(n): \(failed)")
        }
    }

    func testDefectsOneAndTwoTogetherAreCaughtByTheDefectTwoScenario() async throws {
        let scenarios = try defectScenarios().filter { $0.name == "defect-2-inflight-bookkeeping-first-answer-fails" }
        XCTAssertEqual(scenarios.count, 1)
        let failed = await failures(scenarios, .staleWriteAndOldRequestUnregisters)
        XCTAssertTrue(failed.values.first?.contains("defect 2") ?? false, "\(failed)")
    }

    func testClearKeepingTheInFlightTableIsNamed() async throws {
        let scenarios = try defectScenarios().filter { $0.name == "defect-2-inflight-bookkeeping-after-clear" }
        let failed = await failures(scenarios, .clearKeepsInFlight)
        let message = try XCTUnwrap(failed.values.first)
        XCTAssertTrue(message.contains("sent no request of its own") && message.contains("kept its in-flight table"), message)
        XCTAssertFalse(message.contains("not quiescent"), message)
    }
}
