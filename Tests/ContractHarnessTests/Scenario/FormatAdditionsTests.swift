import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// Issue 11 section 6 additions: `any_of` outcome expectations and `exposures` assertions, strict
/// when read and failing when wrong.
final class FormatAdditionsTests: XCTestCase {
    func scenario(_ steps: String) -> String {
        #"{"format": "experimently-scenario/1", "name": "t", "description": "d", "checks": ["single_flight"], "steps": [\#(steps)]}"#
    }

    func run(_ steps: String) async throws -> ScenarioResult {
        await ScenarioRunner().run(try ScenarioParser.parse(Data(scenario(steps).utf8), file: "t.json"))
    }

    func testAnyOfPassesWhenOneAlternativeHoldsAndFailsNamingEach() async throws {
        let ok = try await run(#"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"any_of": [{"error": "cancelled"}, {"value": {"variant_name": "control"}}]}}"#)
        XCTAssertEqual(ok.status, .passed, "\(ok.checks.filter { !$0.passed }.map { $0.message ?? "" })")
        let bad = try await run(#"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"any_of": [{"error": "cancelled"}, {"value": {"variant_name": "treatment"}}]}}"#)
        XCTAssertEqual(bad.status, .failed)
        let message = bad.checks.first { !$0.passed }?.message ?? ""
        XCTAssertTrue(message.contains("expected one of 2 outcomes, none met"), message)
        XCTAssertTrue(message.contains("expected error cancelled") && message.contains("treatment"), message)
    }

    func testAnyOfIsStrictWhenRead() {
        for (expect, path) in [(#"{"any_of": []}"#, "any_of"), (#"{"any_of": {"value": 1}}"#, "any_of"),
                               (#"{"any_of": [{"value": 1}, {"eror": "cancelled"}]}"#, "any_of[1]"),
                               (#"{"any_of": [{"error": "nope"}]}"#, "any_of[0]")] {
            let text = scenario(#"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "u", "expect": \#(expect)}"#)
            XCTAssertThrowsError(try ScenarioParser.parse(Data(text.utf8), file: "t.json"), expect) { error in
                XCTAssertTrue("\(error)".contains(path), "\(error)")
            }
        }
    }

    func testExposuresAssertionCountsExactlyAndIsStrict() async throws {
        let ok = try await run(#"""
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "e\u0301"},
            {"assert": {"exposures": {"user": "user-2", "variant_id": "sdk_contract_ab-treatment"}, "count": 1}},
            {"assert": {"exposures": {"user": "\u00e9"}, "count": 0}},
            {"assert": {"exposures": {"user": "e\u0301"}, "count": 1}}
            """#)
        XCTAssertEqual(ok.status, .passed, "\(ok.checks.filter { !$0.passed }.map { $0.message ?? "" })")
        let bad = try await run(#"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "e\u0301"}, {"assert": {"exposures": {"user": "e\u0301"}, "count": 2}}"#)
        XCTAssertEqual(bad.status, .failed)
        let message = bad.checks.first { !$0.passed }?.message ?? ""
        XCTAssertTrue(message.contains("expected 2 exposure(s) of user e\\u{301}, the mock recorded 1"), message)
        for assert in [#"{"exposures": {"user": "u"}}"#, #"{"exposures": {"usr": "u"}, "count": 1}"#, #"{"exposures": {}, "count": -1}"#] {
            let text = scenario(#"{"assert": \#(assert)}"#)
            XCTAssertThrowsError(try ScenarioParser.parse(Data(text.utf8), file: "t.json"), assert)
        }
    }

    func testCachedAssertionChecksValuesExactlyAndIsStrict() async throws {
        let ok = try await run(#"""
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "e\u0301"},
            {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "e\u0301"},
            {"assert": {"cached": {"user": "e\u0301", "experiment": "sdk_contract_ab", "value": {"variant_name": "treatment"}}}},
            {"assert": {"cached": {"user": "e\u0301", "flag": "sdk_contract_flag"}}},
            {"assert": {"cached": {"user": "\u00e9", "experiment": "sdk_contract_ab", "present": false}}},
            {"assert": {"cached": {"user": "\u00e9", "flag": "sdk_contract_flag", "present": false}}}
            """#)
        XCTAssertEqual(ok.status, .passed, "\(ok.checks.filter { !$0.passed }.map { $0.message ?? "" })")
        let bad = try await run(#"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "e\u0301"}, {"assert": {"cached": {"user": "e\u0301", "experiment": "sdk_contract_ab", "value": {"variant_name": "control"}}}}"#)
        XCTAssertEqual(bad.status, .failed)
        let message = bad.checks.first { !$0.passed }?.message ?? ""
        XCTAssertTrue(message.contains("experiment 'sdk_contract_ab' of user 'e\\u{301}'") && message.contains("expected it to contain"), message)
        let missing = try await run(#"{"assert": {"cached": {"user": "u", "flag": "sdk_contract_flag"}}}"#)
        XCTAssertEqual(missing.status, .failed)
        for assert in [#"{"cached": {"user": "u"}}"#, #"{"cached": {"user": "u", "flag": "f", "value": true}}"#,
                       #"{"cached": {"user": "u", "experiment": "e", "present": false, "value": {}}}"#,
                       #"{"cached": {"user": "u", "experiment": "e", "flag": "f"}}"#, #"{"cached": {"user": "u", "experiment": "e", "x": 1}}"#] {
            let text = scenario(#"{"assert": \#(assert)}"#)
            XCTAssertThrowsError(try ScenarioParser.parse(Data(text.utf8), file: "t.json"), assert)
        }
    }

    func testAllocationChangesAreCheckedAndRestartForgetsStickiness() async throws {
        let wrongSum = try await run(#"{"fixtures": {"experiment_allocations": {"key": "sdk_contract_ab", "allocations": {"control": 40, "treatment": 50}}}}"#)
        XCTAssertNotEqual(wrongSum.status, .passed)
        XCTAssertTrue("\(wrongSum.reason ?? "") \(wrongSum.checks.map { $0.message ?? "" })".contains("add up to 100, got 90"),
                      "\(wrongSum.reason ?? "") \(wrongSum.checks.map { $0.message ?? "" })")
        let unknown = try await run(#"{"fixtures": {"experiment_allocations": {"key": "sdk_contract_ab", "allocations": {"control": 0, "treatmant": 100}}}}"#)
        XCTAssertTrue("\(unknown.reason ?? "") \(unknown.checks.map { $0.message ?? "" })".contains("has no variant 'treatmant'"),
                      "\(unknown.reason ?? "") \(unknown.checks.map { $0.message ?? "" })")
        for fixture in [#"{"experiment_allocations": {"key": "sdk_contract_ab", "allocations": {"control": 0.5, "treatment": 99.5}}}"#,
                        #"{"experiment_allocations": {"key": "sdk_contract_ab"}}"#, #"{"experiment_restart": {}}"#,
                        #"{"experiment_restart": {"key": "k", "now": true}}"#] {
            XCTAssertThrowsError(try ScenarioParser.parse(Data(scenario(#"{"fixtures": \#(fixture)}"#).utf8), file: "t.json"), fixture)
        }
        var model = BackendModel()
        _ = model.respond(to: MockRequest(method: "POST", target: "/api/v1/tracking/assign", headers: [("X-API-Key", "sdk-contract-key")],
                                          body: Data(#"{"experiment_key":"sdk_contract_ab","user_id":"user-1"}"#.utf8)), now: Date())
        XCTAssertEqual(model.state.assignments.count, 1)
        XCTAssertTrue(model.restartExperiment("sdk_contract_ab"))
        XCTAssertEqual(model.state.assignments.count, 0)
        XCTAssertFalse(model.restartExperiment("sdk_contract_a\u{301}b"))
    }

    func testSeedStoreWritesAsGivenAndIsStrict() async throws {
        let ok = try await run(#"""
            {"seed_store": {"user": "e\u0301", "experiment": "sdk_contract_ab", "json": {"experiment_key": "sdk_contract_ab", "user_id": "e\u0301", "variant_id": "v", "variant_name": "old", "is_control": false}}},
            {"assert": {"persisted": {"user": "e\u0301", "experiment": "sdk_contract_ab", "value": {"variant_name": "old"}}}},
            {"assert": {"persisted": {"user": "\u00e9", "experiment": "sdk_contract_ab", "present": false}}},
            {"fault": {"action": {"respond": {"status": 500, "json": {}}}}, "id": "down"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "e\u0301", "expect": {"value": {"variant_name": "old"}}},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "\u00e9", "expect": {"error": "serverError", "status": 500}}
            """#)
        XCTAssertEqual(ok.status, .passed, "\(ok.checks.filter { !$0.passed }.map { $0.message ?? "" })")
        for seed in [#"{"user": "u", "experiment": "e"}"#, #"{"user": "u", "experiment": "e", "json": 3}"#,
                     #"{"user": "u", "experiment": "e", "flag": "f", "json": {}}"#, #"{"user": "u", "flag": "f", "json": {}, "x": 1}"#,
                     #"{"client": "nope", "user": "u", "flag": "f", "json": {}}"#] {
            XCTAssertThrowsError(try ScenarioParser.parse(Data(scenario(#"{"seed_store": \#(seed)}"#).utf8), file: "t.json"), seed)
        }
    }

    func testReportedStateAssertionFailsWhenWrongAndIsStrict() async throws {
        let app = #""app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab", "user": "user-2"}, "#
        func withApp(_ steps: String) -> String {
            #"{"format": "experimently-scenario/1", "name": "t", "description": "d", \#(app)"steps": [\#(steps)]}"#
        }
        let bad = await ScenarioRunner().run(try ScenarioParser.parse(Data(withApp(#"""
            {"app": "refresh"}, {"app": "display"}, {"assert": {"reported": {"variant": "control"}}}
            """#).utf8), file: "t.json"))
        XCTAssertEqual(bad.status, .failed)
        let message = bad.checks.first { !$0.passed }?.message ?? ""
        XCTAssertTrue(message.contains("the app reports variant treatment active, expected variant control"), message)
        for assert in [#"{"reported": {}}"#, #"{"reported": {"variant": 1}}"#, #"{"reported": {"variant": null, "x": 1}}"#] {
            XCTAssertThrowsError(try ScenarioParser.parse(Data(withApp(#"{"assert": \#(assert)}"#).utf8), file: "t.json"), assert)
        }
        XCTAssertThrowsError(try ScenarioParser.parse(Data(scenario(#"{"assert": {"reported": {"variant": null}}}"#).utf8), file: "t.json"))
    }

    func testTransportErrorReleaseAndDelayThenDrop() async throws {
        let ok = try await run(#"""
            {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "h"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true},
            {"wait_for": {"held": "h", "count": 1}},
            {"release": "h", "transport_error": true},
            {"await": "a", "expect": {"error": "networkError", "code": -1005}},
            {"assert": {"exposures": {}, "count": 0}},
            {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"delay_then_drop": {"seconds": 1, "processed": true}}}, "id": "d"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "b", "async": true},
            {"wait_for": {"requests": {"path": "/api/v1/tracking/assign"}, "count": 2}},
            {"advance": 1},
            {"await": "b", "expect": {"error": "networkError", "code": -1005}},
            {"assert": {"exposures": {"user": "user-1"}, "count": 1}}
            """#)
        XCTAssertEqual(ok.status, .passed, "\(ok.reason ?? "") \(ok.checks.filter { !$0.passed }.map { $0.message ?? "" })")
        let base = #"{"fault": {"action": {"hold": {}}}, "id": "h"}, "#
        for release in [#"{"release": "h", "transport_error": false}"#, #"{"release": "h", "transport_error": {"processed": 1}}"#,
                        #"{"release": "h", "transport_error": true, "response": {"status": 200}}"#,
                        #"{"release": "h", "transport_error": {"later": true}}"#] {
            XCTAssertThrowsError(try ScenarioParser.parse(Data(scenario(base + release).utf8), file: "t.json"), release)
        }
        for action in [#"{"delay_then_drop": {}}"#, #"{"delay_then_drop": {"seconds": -1}}"#, #"{"delay_then_drop": {"seconds": 1, "x": 1}}"#] {
            XCTAssertThrowsError(try ScenarioParser.parse(Data(scenario(#"{"fault": {"action": \#(action)}, "id": "f"}"#).utf8), file: "t.json"), action)
        }
        let action = FaultAction.delayThenDrop(seconds: 2, processed: true)
        XCTAssertEqual(try JSONDecoder().decode(FaultAction.self, from: try JSONEncoder().encode(action)), action)
    }
}
