import XCTest
import Foundation
@testable import ContractHarness

/// Messages, slices and `times` copies from the outside tester's findings (9, 10, 11, 14 of
/// /work/issues/ATTACK-FINDINGS.md), each shown failing before its change and passing after.
final class AttackFindingsTests: XCTestCase {
    private func run(_ steps: String, checks: String = #"["single_flight"]"#) async throws -> ScenarioResult {
        let text = #"{"format": "experimently-scenario/1", "name": "n", "description": "d", "step_timeout_ms": 600000, "checks": "# + checks + #", "steps": ["# + steps + "]}"
        let scenario = try ScenarioParser.parse(Data(text.utf8), file: "x.json")
        return await ScenarioRunner(keepsHistory: false).run(scenario)
    }

    /// Finding 9: a `wait_for` that comes before the call sending the awaited request names
    /// that call, not the release of another parked request (repro/r4).
    func testAnEarlyWaitForNamesTheStepThatSendsTheRequest() async throws {
        let result = try await run("""
            {"fault": {"match": {"path": "/api/v1/tracking/assign", "body": {"user_id": "user-1"}}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "a"},
            {"fault": {"match": {"path": "/api/v1/tracking/assign", "body": {"user_id": "user-2"}}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "f"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "v", "async": true},
            {"wait_for": {"held": "f", "count": 1}},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "as": "lo", "async": true},
            {"release": "a"}, {"release": "f"}, {"await": "v"}, {"await": "lo"}
            """, checks: #"["no_stale_write"]"#)
        XCTAssertTrue(result.infeasible)
        let message = try XCTUnwrap(result.firstFailure?.message)
        XCTAssertTrue(message.contains("only a later step provides (step 4 do getAssignment as lo)"), message)
        XCTAssertFalse(message.contains("step 5 release a"), message)
    }

    /// Finding 10: a hold fault whose `match.query` wants a field the POST carries in its body
    /// never matches; the message says so, with the mock's nearest request and a hint, instead of
    /// "it waits on parked requests ... no request parked".
    func testAWaitOnAFaultThatNeverMatchedSaysSoAndWhy() async throws {
        let result = try await run("""
            {"fault": {"match": {"path": "/api/v1/tracking/assign", "query": {"user_id": "user-1"}}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "h"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true},
            {"wait_for": {"held": "h", "count": 1}}, {"release": "h"}, {"await": "a"}
            """)
        let message = try XCTUnwrap(result.firstFailure?.message)
        XCTAssertTrue(message.contains("fault 'h' never matched any request"), message)
        XCTAssertTrue(message.contains("query user_id is absent, rule wants 'user-1'"), message)
        XCTAssertTrue(message.contains("'user_id' is in the request body"), message)
        XCTAssertFalse(message.contains("waits on parked requests"), message)
        XCTAssertFalse(result.infeasible, "no order of these steps can meet it")
        // A fault that did match is not reported as never matching.
        let matched = try await run("""
            {"fault": {"match": {"path": "/api/v1/tracking/assign", "body": {"user_id": "user-1"}}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "h"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true},
            {"wait_for": {"held": "h", "count": 2}}, {"release": "h"}, {"await": "a"}
            """)
        let other = try XCTUnwrap(matched.firstFailure?.message)
        XCTAssertFalse(other.contains("never matched"), other)
    }

    /// Finding 11: a failed count assertion quotes the requests it counts, even when they are
    /// far from the end of the history (s10 with variant prefetch-assignments: #3, not #5/#6).
    func testAFailedAssertQuotesTheRequestsItIsAbout() async throws {
        var padding: [String] = []
        for i in 0..<8 { padding.append(#"{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "pad-\#(i)"}"#) }
        let result = try await run(#"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "early"}, "#
            + padding.joined(separator: ", ")
            + #", {"assert": {"requests": {"path": "/api/v1/tracking/assign"}, "count": 0}}"#)
        let failure = try XCTUnwrap(result.checks.first { !$0.passed && $0.name.hasPrefix("step 9 assert") }, "\(result.checks)")
        let lines = try XCTUnwrap(failure.history)
        XCTAssertTrue(lines.contains { $0.contains("request #1 [main] POST /api/v1/tracking/assign") }, lines.joined(separator: "\n"))
        XCTAssertTrue(lines.contains { $0.contains("pad-7") }, "the tail is still there: \(lines)")
        XCTAssertLessThanOrEqual(lines.count, 14)
    }

    /// Finding 14: one copy of a `times` group is awaited or cancelled by `label#k`; a copy that
    /// does not exist, or a later label equal to a copy's, is malformed at its JSON path.
    func testOneCopyOfATimesGroupCanBeAwaitedAndCancelled() async throws {
        let file = Repository.root.appendingPathComponent("scenarios/field-cancel-one-copy-of-a-times-group.json")
        let scenario = try ScenarioParser.parse(try Data(contentsOf: file), file: file.path)
        let result = await ScenarioRunner().run(scenario)
        XCTAssertEqual(result.status, .passed, "\(result.checks.filter { !$0.passed })")
        XCTAssertTrue(result.checks.contains { $0.name.hasPrefix("step 4 await viewers#2") && $0.passed }, "\(result.checks.map(\.name))")

        let start = #"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "u", "as": "a", "async": true, "times": 3}"#
        func parse(_ steps: String) throws {
            let text = #"{"format": "experimently-scenario/1", "name": "n", "description": "d", "checks": ["single_flight"], "steps": ["# + steps + "]}"
            _ = try ScenarioParser.parse(Data(text.utf8), file: "x.json")
        }
        XCTAssertNoThrow(try parse(start + #", {"await": "a#3"}, {"await": "a"}"#))
        for (steps, path) in [(start + #", {"await": "a#4"}"#, "$.steps[1].await"), (start + #", {"cancel": "a#0"}"#, "$.steps[1].cancel"),
                              (start + #", {"do": "clearCache", "as": "a#1"}"#, "$.steps[1].as"),
                              (#"{"do": "clearCache", "as": "b#2"}, {"do": "clearCache", "as": "b", "times": 2}"#, "$.steps[1].as")] {
            XCTAssertThrowsError(try parse(steps), steps) { error in
                XCTAssertEqual((error as? ScenarioError)?.path, path, "\(error)")
            }
        }
        // Without `times` there are no copies.
        XCTAssertThrowsError(try parse(#"{"do": "clearCache", "as": "c"}, {"await": "c#1"}"#))
    }
}
