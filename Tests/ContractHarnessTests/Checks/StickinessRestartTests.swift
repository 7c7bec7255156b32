import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// `stickiness` across an `experiment_restart`: the backend's answers are compared within each run,
/// the SDK may serve any variant a run so far gave (its cache), and nothing else.
final class StickinessRestartTests: XCTestCase {
    private static let file = Repository.root.appendingPathComponent("scenarios/field-restart-sdk-may-serve-the-earlier-run-until-cleared.json")

    private func problems(_ transform: (HistoryEvent) -> HistoryEvent) async throws -> [String] {
        let scenario = try ScenarioParser.parse(Data(contentsOf: Self.file), file: "restart.json")
        let result = await ScenarioRunner().run(scenario)
        XCTAssertEqual(result.status, .passed, AppStepsTests.failures(result))
        let port = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "x", clients: ["main"])
        let context = CheckContext(scenario: scenario, history: result.events.map(transform), clients: [:], port: port, driver: SwiftSDKDriver(), app: nil)
        return Checks.stickiness(context).map(\.0)
    }

    /// The recorded history passes: control served from the cache after the restart, treatment
    /// after the clear, the held answer in either run.
    func testARestartBeginsANewRunAndTheCacheMayServeTheEarlierOne() async throws {
        let found = try await problems { $0 }
        XCTAssertEqual(found, [])
    }

    /// An SDK outcome after the restart that no run gave fails, and so does a backend answer
    /// that changes within the new run.
    func testAVariantNoRunGaveAndAChangeWithinARunFail() async throws {
        func renamed(_ v: JSONValue?, to variant: String) -> JSONValue? {
            guard case .object(var o)? = v else { return v }
            o["variant_name"] = .string(variant)
            return .object(o)
        }
        var completes = 0
        let sdk = try await problems { e in
            guard e.kind == .complete, case .object(var o)? = e.outcome, o["value"]?["variant_name"] != nil else { return e }
            completes += 1
            guard completes == 4 else { return e }   // the lookup after the first clear
            o["value"] = renamed(o["value"], to: "blue")
            var e = e
            e.outcome = .object(o)
            return e
        }
        XCTAssertEqual(sdk.count, 1, "\(sdk)")
        XCTAssertTrue(sdk.first?.contains("after 1 restart(s) of it, but its runs so far gave only") ?? false, "\(sdk)")
        var answers = 0
        let backend = try await problems { e in
            guard e.kind == .response, e.request?.path == "/api/v1/tracking/assign", e.request?.response?["user_id"] == .string("user-1") else { return e }
            answers += 1
            guard answers == 3 else { return e }   // the second answer of the new run
            var e = e
            let changed = renamed(e.request?.response, to: "control")
            e.request?.response = changed
            return e
        }
        XCTAssertTrue(backend.contains { $0.contains("got variant 'treatment' then 'control'") }, "\(backend)")
    }
}
