import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// Findings of the thirty-eighth outside tester (`/work/attack39/FINDINGS.md`), run against the
/// judge rules the thirty-seventh's findings brought, proven both ways.
///
/// - F1: a configuration number out of a double's range (`1e400`) is `null` to the harness and
///   `"Infinity"` through the driver protocol: neither `offline_fallback` nor `no_stale_write` may
///   tell them apart.
/// - F2: a tracking call given up while it ran that returned `true` must have sent and delivered
///   every chunk.
/// - F3: an answer with an empty `user_id` may be cached and returned with the asked id.
/// - F5: a field a fresh answer lacks is never filled in from the persisted entry.
/// - F7, F8: the reference app's `/assign` contexts are judged; `cache_size` bounds each cache over
///   all its users.
/// - F9: an answer labelled gzip, or with a content type that is not JSON, may be read or not.
final class ThirtyEighthTesterFindingsTests: XCTestCase {
    private static let python = TesterFixtures.python
    private static let fixtures = TesterFixtures.folder("thirty-eighth-tester")

    /// Every correct SDK passes the files (before: F1, F3 and F9 failed correct SDKs).
    func testCorrectSDKsPassTheFiles() throws {
        try TesterFixtures.assertCorrectSDKsPass("thirty-eighth-tester", count: 11, runs: 1, in: try scratchDirectory("thirty-eighth-tester"))
    }

    /// The broken SDKs the files were written for fail them: a cache with no bound over its
    /// users (F8) and a stale context on the reference app's display (F7).
    func testTheDefectsFail() throws {
        let dir = try scratchDirectory("thirty-eighth-defects")
        try TesterFixtures.assertFails(Self.fixtures.appendingPathComponent("cache-size-total.json").path, on: ["--mutant", "ignores-cache-size"],
                                       saying: ["over its users, more than its cache_size of 2"], in: dir)
        try TesterFixtures.assertFails(Self.fixtures.appendingPathComponent("app-ctx.json").path,
                                       on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=previous-context \(Self.python)"],
                                       saying: ["event_payload", "where the call gave no attributes"], in: dir)
    }

    /// `fan_out` fails a `trackWithStatus` that returned `true` before its held `/track` was
    /// answered (F2's rule), shown both ways on one history: as the shipping SDK ran it, and with
    /// the completion moved before the answer.
    func testTrueBeforeTheAnswerFailsFanOut() async throws {
        let scenario = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "true-after-delivery", "description": "a held keyed track", "checks": ["fan_out"],
         "steps": [{"fault": {"match": {"path": "/api/v1/tracking/track"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "h"},
                   {"do": "trackWithStatus", "event": {"user": "u", "name": "buy", "experiment": "sdk_contract_ab"}, "as": "t", "async": true},
                   {"wait_for": {"held": "h", "count": 1}}, {"release": "h"}, {"await": "t", "expect": {"value": true}}]}
        """.utf8), file: "t.json")
        let run = await ScenarioRunner().run(scenario)
        XCTAssertEqual(run.status, .passed, "\(run.checks.filter { !$0.passed })")
        let port = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "x", clients: ["main"])
        func problems(_ h: [HistoryEvent]) -> [String] {
            let context = CheckContext(scenario: scenario, history: h, clients: [:], port: port, driver: SwiftSDKDriver(), app: nil)
            return Checks.trueBeforeDelivery(context, appEvents: AppEventFanOut(context)).map(\.0)
        }
        XCTAssertEqual(problems(run.events), [])
        let done = try XCTUnwrap(run.events.firstIndex { $0.kind == .complete && $0.label == "t" })
        let answer = try XCTUnwrap(run.events.firstIndex { $0.kind == .response && $0.request?.path == "/api/v1/tracking/track" })
        XCTAssertLessThan(answer, done)
        let early = AppCallAttributionTests.move(run.events, from: done, after: answer - 1)
        XCTAssertEqual(problems(early).count, 1)
        XCTAssertTrue(problems(early).first?.contains("returned true, but request #1 it sent had no answer yet") ?? false, "\(problems(early))")
    }

    /// Non-finite numbers agree with the protocol's strings; an answer field the SDK filled in
    /// from elsewhere (F5) does not.
    func testNonFiniteNumbersAgreeAndFilledInFieldsDoNot() {
        func obj(_ members: [String: JSONValue]) -> JSONValue { .object(members) }
        XCTAssertTrue(Checks.nonFiniteAgree(obj(["n": .number(.infinity)]), obj(["n": .string("Infinity")])))
        XCTAssertTrue(Checks.nonFiniteAgree(obj(["n": .number(-.infinity)]), obj(["n": .string("-Infinity")])))
        XCTAssertFalse(Checks.nonFiniteAgree(obj(["n": .number(.infinity)]), obj(["n": .string("-Infinity")])))
        XCTAssertFalse(Checks.nonFiniteAgree(obj(["n": .number(1)]), obj(["n": .number(2)])))
        let lean = obj(["experiment_key": .string("e"), "variant_name": .string("control")])
        XCTAssertNil(Checks.answerMismatch(kind: "experiment", answer: lean,
                                           served: obj(["experiment_key": .string("e"), "variant_name": .string("control"), "assigned": .bool(true), "is_control": .bool(false)])))
        XCTAssertEqual(Checks.answerMismatch(kind: "experiment", answer: lean,
                                             served: obj(["experiment_key": .string("e"), "variant_name": .string("control"), "assigned": .bool(false)]))?.field, "assigned")
        XCTAssertEqual(Checks.answerMismatch(kind: "experiment", answer: lean,
                                             served: obj(["experiment_key": .string("e"), "variant_name": .string("control"), "variant_id": .string("old")]))?.field, "variant_id")
    }
}
