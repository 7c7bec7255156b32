import XCTest
import ExperimentlyMock
@testable import ContractHarness

/// Nothing passes unchecked (issue 11 section 2): every step kind and every expectation key of
/// the scenario format, given a wrong value, fails the scenario, and given the right value passes
/// (so each row proves the key is evaluated, not that the scenario fails anyway). Each row is a
/// small scenario run in-process against the shipping Swift SDK.
final class ExpectationCoverageTests: XCTestCase {
    /// One generated scenario: `steps` (and `extra` top-level members) with `%V%` replaced by the
    /// right or the wrong value.
    struct Row {
        let covers: [String]
        let steps: String
        var extra = ""
        let right: String
        let wrong: String
    }

    static let assign = #"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1"}"#
    static let flag = #"{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1"}"#
    static let app = #""app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab", "user": "user-1"}, "#
    static let twoApps = #""clients": {"main": {}, "b": {}}, "app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab", "user": "user-1"}, "#
    /// A request MATCH on the flag evaluation of user-1 that must match exactly once.
    static func match(_ member: String) -> Row {
        Row(covers: ["match.\(member)"], steps: "\(flag), {\"assert\": {\"requests\": {\"\(member)\": %V%}, \"count\": 1}}", right: "", wrong: "")
    }

    static let rows: [Row] = {
        var rows: [Row] = [
            // Outcome expectations on every kind of step that carries one.
            Row(covers: ["verb.do", "op.getAssignment", "expect.value", "do.sync"],
                steps: #"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"value": {"variant_name": %V%}}}"#,
                right: #""control""#, wrong: #""treatment""#),
            Row(covers: ["do.async.awaited", "verb.await"],
                steps: #"{"do": "getAssignment", "experiment": %V%, "user": "user-1", "async": true, "as": "a", "expect": {"value": {"variant_name": "control"}}}, {"await": "a"}"#,
                right: #""sdk_contract_ab""#, wrong: #""no_such_experiment""#),
            Row(covers: ["do.async.never_awaited"],
                steps: #"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "async": true, "as": "a", "expect": {"value": {"variant_name": %V%}}}"#,
                right: #""control""#, wrong: #""treatment""#),
            Row(covers: ["do.async.times"],
                steps: #"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "async": true, "times": 3, "as": "a", "expect": {"value": {"variant_name": %V%}}}, {"await": "a"}"#,
                right: #""treatment""#, wrong: #""control""#),
            Row(covers: ["do.sync.times"],
                steps: #"{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "times": 2, "expect": {"value": {"enabled": %V%}}}"#,
                right: "true", wrong: "false"),
            Row(covers: ["await.expect"],
                steps: #"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "async": true, "as": "a"}, {"await": "a", "expect": {"value": {"variant_name": %V%}}}"#,
                right: #""control""#, wrong: #""treatment""#),
            Row(covers: ["expect.error"],
                steps: #"{"do": "getAssignment", "experiment": "nope", "user": "user-1", "expect": {"error": %V%}}"#,
                right: #""experimentNotFound""#, wrong: #""flagNotFound""#),
            Row(covers: ["expect.status", "verb.fault"],
                steps: #"{"fault": {"match": {"path": "/api/v1/tracking/assign"}, "action": {"respond": {"status": 503}}}, "id": "f"}, {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"error": "serverError", "status": %V%}}"#,
                right: "503", wrong: "500"),
            Row(covers: ["fault.action"],
                steps: #"{"fault": {"match": {"path": "/api/v1/tracking/assign"}, "action": {"respond": {"status": %V%}}}, "id": "f"}, {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"error": "serverError", "status": 503}}"#,
                right: "503", wrong: "502"),
            Row(covers: ["expect.code", "verb.advance", "verb.release", "verb.wait_for"],
                steps: #"{"fault": {"match": {}, "action": {"hold": {}}}, "id": "h"}, {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true}, {"wait_for": {"held": "h", "count": 1}}, {"advance": 5.1}, {"await": "a", "expect": {"error": "networkError", "code": %V%}}, {"wait_for": {"requests": {"cancelled": true}, "count": 1}}, {"release": "h"}"#,
                extra: #""config": {"timeout": 5}, "#, right: "-1001", wrong: "-1009"),
            Row(covers: ["advance.seconds"],
                steps: #"{"fault": {"match": {}, "action": {"hold": {}}}, "id": "h"}, {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true}, {"wait_for": {"held": "h", "count": 1}}, {"advance": %V%}, {"await": "a", "expect": {"error": "networkError", "code": -1001}}, {"wait_for": {"requests": {"cancelled": true}, "count": 1}}, {"release": "h"}"#,
                extra: #""config": {"timeout": 5}, "step_timeout_ms": 2000, "#, right: "5.1", wrong: "4.9"),
            Row(covers: ["release.response"],
                steps: #"{"fault": {"match": {}, "action": {"hold": {}}}, "id": "h"}, {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true}, {"wait_for": {"held": "h", "count": 1}}, {"release": "h", "response": {"status": %V%}}, {"await": "a", "expect": {"error": "serverError", "status": 503}}"#,
                right: "503", wrong: "500"),
            Row(covers: ["wait_for.requests"],
                steps: #"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "async": true, "as": "a"}, {"wait_for": {"requests": {"path": %V%}, "count": 1}}, {"await": "a", "expect": {"value": {"variant_name": "control"}}}"#,
                extra: #""step_timeout_ms": 2000, "#, right: #""/api/v1/tracking/assign""#, wrong: #""/api/v1/tracking/nope""#),
            Row(covers: ["verb.cancel"],
                steps: #"{"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "h"}, {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "as": "a", "async": true}, {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-2", "as": "b", "async": true}, {"await": "b"}, {"wait_for": {"held": "h", "count": 1}}, {"cancel": %V%}, {"wait_for": {"requests": {"cancelled": true}, "count": 1}}, {"release": "h"}, {"await": "a", "expect": {"error": "cancelled"}}"#,
                extra: #""step_timeout_ms": 2000, "#, right: #""a""#, wrong: #""b""#),
            Row(covers: ["verb.remove_fault"],
                steps: #"{"fault": {"match": {"path": "/api/v1/tracking/assign"}, "action": {"respond": {"status": 500}}}, "id": "f1"}, {"fault": {"match": {"path_prefix": "/api/v1/feature-flags/"}, "action": {"respond": {"status": 500}}}, "id": "f2"}, {"remove_fault": %V%}, {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"value": {"variant_name": "control"}}}"#,
                right: #""f1""#, wrong: #""f2""#),
            Row(covers: ["verb.fixtures", "fixtures.experiment_status"],
                steps: #"{"fixtures": {"experiment_status": {"key": "sdk_contract_ab", "status": %V%}}}, {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"error": "experimentNotFound"}}"#,
                right: #""COMPLETED""#, wrong: #""ACTIVE""#),
            Row(covers: ["fixtures.flag_status"],
                steps: #"{"fixtures": {"flag_status": {"key": "sdk_contract_flag", "status": %V%}}}, {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "expect": {"value": {"enabled": false}}}"#,
                right: #""INACTIVE""#, wrong: #""ACTIVE""#),
            Row(covers: ["fixtures.flag_rollout"],
                steps: #"{"fixtures": {"flag_rollout": {"key": "sdk_contract_flag", "percentage": %V%}}}, {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "expect": {"value": {"enabled": false}}}"#,
                right: "0", wrong: "100"),

            // Every other SDK operation's value.
            Row(covers: ["op.evaluateFlag"], steps: #"{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "expect": {"value": {"key": %V%}}}"#,
                right: #""sdk_contract_flag""#, wrong: #""other_flag""#),
            Row(covers: ["op.track"], steps: #"{"do": "track", "event": {"user": "user-1", "name": "e", "experiment": "sdk_contract_ab"}, "expect": {"value": %V%}}"#,
                right: "null", wrong: "true"),
            Row(covers: ["op.trackWithStatus"], steps: #"{"fault": {"match": {}, "action": {"respond": {"status": 500}}}, "id": "f"}, {"do": "trackWithStatus", "event": {"user": "user-1", "name": "e", "experiment": "sdk_contract_ab"}, "expect": {"value": %V%}}"#,
                right: "false", wrong: "true"),
            Row(covers: ["op.trackBatch", "assert.requests.batch_sizes"],
                steps: #"{"do": "trackBatch", "events": [{"user": "user-1", "name": "a", "experiment": "sdk_contract_ab"}, {"user": "user-1", "name": "b", "experiment": "sdk_contract_ab"}, {"user": "user-1", "name": "c", "experiment": "sdk_contract_ab"}], "expect": {"value": true}}, {"assert": {"requests": {"path": "/api/v1/tracking/batch"}, "batch_sizes": %V%}}"#,
                right: "[3]", wrong: "[2, 1]"),
            Row(covers: ["op.clearCache"], steps: #"{"do": "clearCache", "expect": {"value": %V%}}"#, right: "null", wrong: "false"),
            Row(covers: ["op.clearOfflineCache"], steps: #"{"do": "clearOfflineCache", "expect": {"value": %V%}}"#, right: "null", wrong: "false"),
            Row(covers: ["op.close"], steps: #"{"do": "close", "expect": {"value": %V%}}"#, right: "null", wrong: "false"),
            Row(covers: ["op.getAssignments"], steps: "\(assign), " + #"{"do": "getAssignments", "user": "user-1", "expect": {"value": [{"experiment_key": %V%}]}}"#,
                right: #""sdk_contract_ab""#, wrong: #""other""#),
            Row(covers: ["op.getEvaluatedFlags"], steps: "\(flag), " + #"{"do": "getEvaluatedFlags", "user": "user-1", "expect": {"value": %V%}}"#,
                right: #"["sdk_contract_flag"]"#, wrong: "[]"),
            Row(covers: ["op.hashUser"], steps: #"{"do": "hashUser", "user": "user-123", "key": "my-flag", "expect": {"value": %V%}}"#,
                right: "\(GoldenVectors.hash.first { $0.user == "user-123" && $0.key == "my-flag" }?.hash ?? -1)", wrong: "0.5"),

            // Assertions.
            Row(covers: ["verb.assert", "assert.cache.assignments"], steps: "\(assign), " + #"{"assert": {"cache": {"user": "user-1", "assignments": %V%}}}"#,
                right: #"["sdk_contract_ab"]"#, wrong: "[]"),
            Row(covers: ["assert.cache.flags"], steps: "\(flag), " + #"{"assert": {"cache": {"user": "user-1", "flags": %V%}}}"#,
                right: #"["sdk_contract_flag"]"#, wrong: "[]"),
            Row(covers: ["assert.persisted.present"], steps: "\(assign), " + #"{"assert": {"persisted": {"user": "user-1", "experiment": "sdk_contract_ab", "present": %V%}}}"#,
                right: "true", wrong: "false"),
            Row(covers: ["assert.persisted.absent"], steps: "\(assign), " + #"{"assert": {"persisted": {"user": "user-2", "experiment": "sdk_contract_ab", "present": %V%}}}"#,
                right: "false", wrong: "true"),
            Row(covers: ["assert.persisted.value"], steps: "\(assign), " + #"{"assert": {"persisted": {"user": "user-1", "experiment": "sdk_contract_ab", "value": {"variant_name": %V%}}}}"#,
                right: #""control""#, wrong: #""treatment""#),
            Row(covers: ["verb.seed_store"], steps: #"{"seed_store": {"user": "user-2", "experiment": "sdk_contract_ab", "json": {"experiment_key": "sdk_contract_ab", "user_id": "user-2", "variant_name": "treatment"}}}, "# + #"{"assert": {"persisted": {"user": "user-2", "experiment": "sdk_contract_ab", "value": {"variant_name": %V%}}}}"#,
                right: #""treatment""#, wrong: #""control""#),
            Row(covers: ["assert.requests.count"], steps: "\(assign), \(assign), " + #"{"assert": {"requests": {"path": "/api/v1/tracking/assign"}, "count": %V%}}"#,
                right: "1", wrong: "2"),

            // The reference app: every action, and every app assertion.
            Row(covers: ["verb.app", "app.login", "app.sync"], steps: #"{"app": "login", "user": "user-2", "expect": {"value": {"identity": %V%}}}"#,
                extra: app, right: #""user-2""#, wrong: #""user-1""#),
            Row(covers: ["app.logout"], steps: #"{"app": "logout", "expect": {"value": {"identity": %V%}}}"#,
                extra: app, right: #""anon-2""#, wrong: #""user-1""#),
            Row(covers: ["app.refresh"], steps: #"{"app": "refresh", "expect": {"value": {"shown": %V%}}}"#,
                extra: app, right: #""fallback""#, wrong: #""control""#),
            Row(covers: ["app.display"], steps: #"{"app": "refresh"}, {"app": "display", "expect": {"value": {"shown": %V%}}}"#,
                extra: app, right: #""control""#, wrong: #""treatment""#),
            Row(covers: ["app.async"], steps: #"{"app": "refresh"}, {"app": "display", "async": true, "as": "d", "expect": {"value": {"shown": %V%}}}, {"await": "d"}"#,
                extra: app, right: #""control""#, wrong: #""treatment""#),
            Row(covers: ["app.event"], steps: #"{"app": "refresh"}, {"app": "event", "name": "e", "expect": {"value": {"source": %V%}}}"#,
                extra: app, right: #""fallback""#, wrong: #""assignment""#),
            Row(covers: ["app.report_state"], steps: #"{"app": "refresh"}, {"app": "display"}, {"app": "report_state", "expect": {"value": {"shown": %V%}}}"#,
                extra: app, right: #""control""#, wrong: #""fallback""#),
            Row(covers: ["assert.app.shown"], steps: #"{"app": "refresh"}, {"app": "display"}, {"assert": {"app": {"shown": %V%}}}"#,
                extra: app, right: #""control""#, wrong: #""treatment""#),
            Row(covers: ["assert.app.identity"], steps: #"{"app": "login", "user": "bob"}, {"assert": {"app": {"identity": %V%}}}"#,
                extra: app, right: #""bob""#, wrong: #""user-1""#),
            Row(covers: ["assert.app.source"], steps: #"{"app": "refresh"}, {"app": "display"}, {"assert": {"app": {"source": %V%}}}"#,
                extra: app, right: #""assignment""#, wrong: #""fallback""#),
            // `times` and `client` on app steps, `client` on app assertions (each client its own app).
            Row(covers: ["app.sync.times"], steps: #"{"app": "refresh"}, {"app": "display", "times": 2, "expect": {"value": {"shown": %V%}}}"#,
                extra: app, right: #""control""#, wrong: #""treatment""#),
            Row(covers: ["app.async.times"], steps: #"{"app": "refresh"}, {"app": "display", "times": 3, "async": true, "as": "d", "expect": {"value": {"shown": %V%}}}, {"await": "d"}"#,
                extra: app, right: #""control""#, wrong: #""treatment""#),
            Row(covers: ["app.client"], steps: #"{"app": "login", "client": "b", "user": "user-2"}, {"app": "display", "client": "b", "expect": {"value": {"shown": %V%}}}"#,
                extra: twoApps, right: #""treatment""#, wrong: #""control""#),
            Row(covers: ["assert.app.client"], steps: #"{"app": "login", "client": "b", "user": "user-2"}, {"assert": {"app": {"client": %V%, "identity": "user-2"}}}"#,
                extra: twoApps, right: #""b""#, wrong: #""main""#),
            Row(covers: ["assert.reported.client"], steps: #"{"app": "login", "client": "b", "user": "user-2"}, {"app": "display", "client": "b"}, {"app": "report_state", "client": "b"}, {"assert": {"reported": {"client": %V%, "variant": "treatment"}}}"#,
                extra: twoApps, right: #""b""#, wrong: #""main""#),
        ]
        // Every member of a request MATCH, on `evaluateFlag(sdk_contract_flag, user-1)`.
        let matches: [(String, String, String)] = [
            ("method", #""GET""#, #""POST""#),
            ("path", #""/api/v1/feature-flags/evaluate/sdk_contract_flag""#, #""/api/v1/feature-flags/evaluate/other""#),
            ("path_prefix", #""/api/v1/feature-flags/""#, #""/api/v1/tracking/""#),
            ("target", #""/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=user-1""#, #""/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=user-2""#),
            ("client", #""main""#, #""other""#),
            ("user", #""user-1""#, #""user-2""#),
            ("status", "200", "404"),
            // An X-API-Key header names a fixture key or `***` (anything else is refused at parse).
            ("headers", #"{"X-API-Key": "***"}"#, #"{"X-API-Key": "***", "Accept": "text/plain"}"#),
            ("response_headers", #"{"Content-Type": "application/json"}"#, #"{"Content-Type": "text/html"}"#),
            ("cancelled", "false", "true"),
        ]
        for (member, right, wrong) in matches {
            let m = match(member)
            rows.append(Row(covers: m.covers, steps: m.steps, right: right, wrong: wrong))
        }
        rows.append(Row(covers: ["match.body"], steps: "\(assign), " + #"{"assert": {"requests": {"body": {"user_id": %V%}}, "count": 1}}"#,
                        right: #""user-1""#, wrong: #""user-2""#))
        rows.append(Row(covers: ["match.body_equals"], steps: "\(assign), " + #"{"assert": {"requests": {"body_equals": {"experiment_key": "sdk_contract_ab", "user_id": %V%}}, "count": 1}}"#,
                        right: #""user-1""#, wrong: #""user-2""#))
        return rows
    }()

    /// What the format has: every verb, operation and app action, and every expectation key of
    /// Documentation/ScenarioFormat.md (outcome expectations, assertions, request MATCH members).
    static let required: Set<String> = {
        var keys = Set(ScenarioParser.verbs.map { "verb.\($0)" } + SDKOperation.allNames.map { "op.\($0)" })
        keys.formUnion(["login", "logout", "refresh", "display", "event", "report_state"].map { "app.\($0)" })
        keys.formUnion(["expect.value", "expect.error", "expect.status", "expect.code", "await.expect",
                        "do.sync", "do.sync.times", "do.async.awaited", "do.async.never_awaited", "do.async.times", "app.sync", "app.async",
                        "app.sync.times", "app.async.times", "app.client", "assert.app.client", "assert.reported.client",
                        "assert.cache.assignments", "assert.cache.flags", "assert.persisted.present", "assert.persisted.absent",
                        "assert.persisted.value", "assert.requests.count", "assert.requests.batch_sizes",
                        "assert.app.shown", "assert.app.identity", "assert.app.source",
                        "fixtures.experiment_status", "fixtures.flag_status", "fixtures.flag_rollout"])
        keys.formUnion(["method", "path", "path_prefix", "target", "client", "user", "body", "body_equals", "headers", "status",
                        "response_headers", "cancelled"].map { "match.\($0)" })
        return keys
    }()

    func scenario(_ row: Row, value: String, index: Int) throws -> Scenario {
        let text = """
        {"format": "experimently-scenario/1", "name": "coverage-\(index)", "description": "generated", \(row.extra)
         "steps": [\(row.steps.replacingOccurrences(of: "%V%", with: value))]}
        """
        return try ScenarioParser.parse(Data(text.utf8), file: "coverage-\(index).json")
    }

    func testEveryStepKindAndExpectationKeyIsCovered() {
        let covered = Set(Self.rows.flatMap(\.covers))
        XCTAssertEqual(Self.required.subtracting(covered).sorted(), [], "format keys without a row")
    }

    func testEachExpectationFailsTheScenarioWhenWrongAndPassesWhenRight() async throws {
        let runner = ScenarioRunner(keepsHistory: false)
        for (i, row) in Self.rows.enumerated() {
            let good = await runner.run(try scenario(row, value: row.right, index: i))
            XCTAssertEqual(good.status, .passed, "\(row.covers) with \(row.right): \(good.firstFailure?.message ?? good.reason ?? "")")
            let bad = await runner.run(try scenario(row, value: row.wrong, index: i))
            XCTAssertEqual(bad.status, .failed, "\(row.covers) with the wrong value \(row.wrong) passed")
        }
    }

    /// The issue's own input: an async getAssignment of an experiment that does not exist,
    /// expecting control, then awaited, used to pass.
    func testAsyncExpectationOfMissingExperimentFails() async throws {
        let s = try ScenarioParser.parse(Data(#"""
        {"format": "experimently-scenario/1", "name": "n", "description": "d", "steps": [
          {"do": "getAssignment", "experiment": "does_not_exist", "user": "user-1", "async": true, "as": "a", "expect": {"value": {"variant_name": "control"}}},
          {"await": "a"}]}
        """#.utf8), file: "x.json")
        let r = await ScenarioRunner(keepsHistory: false).run(s)
        XCTAssertEqual(r.status, .failed)
        XCTAssertEqual(r.firstFailure?.name, "step 0 do getAssignment as a expect")
        XCTAssertTrue(r.firstFailure?.message?.contains("experimentNotFound") == true, "\(r.firstFailure?.message ?? "")")
    }
}
