import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// The harness's stickiness observations no longer read `reason` (the backend says `assigned`
/// for new and sticky users alike): they compare variants across clients and with the mock's own
/// answers. Shown both ways on the shipped contract-smoke flow: it passes as shipped, and fails
/// when the second assignment answer names another variant.
final class StickinessChecksTests: XCTestCase {
    private func smoke(withFault fault: String?) throws -> Scenario {
        var text = try String(contentsOf: Repository.root.appendingPathComponent("scenarios/contract-smoke.json"), encoding: .utf8)
        if let fault {
            let anchor = "\"steps\": [\n"
            let range = try XCTUnwrap(text.range(of: anchor))
            text.replaceSubrange(range, with: anchor + "    " + fault + ",\n")
        }
        return try ScenarioParser.parse(Data(text.utf8), file: "contract-smoke.json")
    }

    func testShippedSmokeIsStickyAndReasonIsAssigned() async throws {
        let result = await ScenarioRunner().run(try smoke(withFault: nil))
        XCTAssertEqual(result.status, .passed, "\(result.checks.filter { !$0.passed })")
        let reasons = result.history.compactMap { e -> JSONValue? in
            e.kind == .response && e.request?.path == "/api/v1/tracking/assign" ? e.request?.response?["reason"] : nil
        }
        XCTAssertEqual(reasons, [.string("assigned"), .string("assigned")], "new then sticky: both 'assigned'")
    }

    func testAnotherVariantOnTheSecondAssignmentFailsTheSmokeCheck() async throws {
        let fault = #"{"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"nth": 2}, "action": {"respond": {"status": 200, "json": {"experiment_key": "sdk_contract_ab", "user_id": "smoke-0", "variant_id": "00000000-0000-8000-8000-000000000000", "variant_name": "elsewhere", "is_control": false, "configuration": null, "assigned": true, "reason": "assigned"}}}}, "id": "unsticky"}"#
        let result = await ScenarioRunner().run(try smoke(withFault: fault))
        XCTAssertEqual(result.status, .failed)
        let failed = Dictionary(uniqueKeysWithValues: result.checks.filter { !$0.passed }.map { ($0.name, $0.message ?? "") })
        XCTAssertTrue(failed["contract_smoke"]?.contains("assign.sticky is false") ?? false, "\(failed)")
        // A fault-scripted answer is not the backend's sticky assignment: `stickiness` does not
        // blame the SDK that relays it (a thirty-third outside tester, F12); `contract_smoke`,
        // which judges the backend's answers, does.
        XCTAssertNil(failed["stickiness"], "\(failed)")
    }
}
