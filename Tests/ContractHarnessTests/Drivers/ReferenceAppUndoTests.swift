import XCTest
import Foundation
import ExperimentlyMutants
@testable import ContractHarness

/// CONTRACT.md section 8: a completion for an older revision is discarded and its cache write
/// undone (issue 11 section 5).
final class ReferenceAppUndoTests: XCTestCase {
    func testHeldAssignmentReleasedAfterLoginLeavesNothingInTheCache() async throws {
        let url = ExplorerTests.repository.appendingPathComponent("scenarios/app-login-while-assignment-held-undoes-cache-write.json")
        let scenario = try ScenarioParser.parse(try Data(contentsOf: url), file: url.path)
        for (driver, what) in [(SwiftSDKDriver(), "shipping SDK"), (MutantRun.driver(nil), "faithful variant")] {
            let result = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(result.status, .passed, "\(what): \(result.checks.filter { !$0.passed }.map { "\($0.name): \($0.message ?? "")" })")
            // The discarded display of user-1 is followed by the undo, before user-2's display.
            let markers = result.history.filter { $0.kind == .marker }.map { "\($0.name ?? "") \($0.detail?["identity"]?.stringValue ?? "")" }
            guard let discarded = markers.firstIndex(of: "discarded user-1"), let undo = markers.firstIndex(of: "undo user-1"),
                  let shown = markers.firstIndex(of: "shown user-2") else {
                return XCTFail("\(what): markers \(markers)")
            }
            XCTAssertLessThan(discarded, undo, what)
            XCTAssertLessThan(undo, shown, what)
        }
    }

    func testACurrentCompletionIsNotUndone() async throws {
        let text = """
        {"format": "experimently-scenario/1", "name": "current", "description": "a display for the current revision is kept and cached",
         "app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab", "user": "user-2"},
         "steps": [
           {"app": "refresh"},
           {"app": "display", "expect": {"value": {"shown": "treatment", "source": "assignment"}}},
           {"assert": {"cache": {"user": "user-2", "assignments": ["sdk_contract_ab"], "flags": ["sdk_contract_flag"]}}}
         ],
         "checks": ["no_stale_write", "exposure_after_display"]}
        """
        let result = await ScenarioRunner().run(try ScenarioParser.parse(Data(text.utf8), file: "current.json"))
        XCTAssertEqual(result.status, .passed, "\(result.checks.filter { !$0.passed }.map { "\($0.name): \($0.message ?? "")" })")
        XCTAssertFalse(result.history.contains { $0.kind == .marker && $0.name == "undo" })
    }
}
