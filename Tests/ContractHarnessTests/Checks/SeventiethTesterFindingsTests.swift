import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock
import ExperimentlyMutants

/// Findings of the seventieth outside tester (`/work/attack70/REPORT.md`: other flag SDKs' field
/// bugs as broken variants), each proven both ways:
///
/// - F1: an SDK that assigned each new user to every experiment it had seen (a warm-up: exposures
///   no view made) passed every named check; `single_flight` now fails a lookup request no call
///   asked for (variant 48, `warms-up-known-experiments`; the Python example's
///   `warm-up-experiments`).
/// - F6: a call that joined another user's request, or the other kind's of one key text, failed
///   as a bare step timeout "not judged against a contract rule"; the hang is now named.
/// - F7: an event member the contract does not list (`variant_id`) passed `event_payload`.
final class SeventiethTesterFindingsTests: XCTestCase {
    private static func shipped(_ name: String) throws -> Scenario {
        try ScenarioParser.load(path: Repository.root.appendingPathComponent("scenarios/\(name).json").path)
    }

    private func assertSingleFlightCatches(_ scenario: Scenario, _ defect: Defect, saying text: String,
                                           file: StaticString = #filePath, line: UInt = #line) async {
        await NamedCheckCatch.assertCaught(scenario, by: defect, check: "single_flight", saying: text, file: file, line: line)
    }

    /// F1, both forms: a request for a user and key no call had asked for; and one that came
    /// after every call for that user and key had returned a value (here the warm-up after a
    /// clear), nothing giving them up.
    func testALookupNoCallAskedForFailsSingleFlight() async throws {
        await assertSingleFlightCatches(try Self.shipped("field-the-sdk-looks-up-only-what-it-is-asked-for"), .warmsUpKnownExperiments,
                                        saying: "for experiment 'exp_a' of user 'user-2', but no call of client 'main' had asked for it")
        let afterAClear = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "t", "description": "d", "checks": ["single_flight"],
         "fixtures": {"api_keys": [{"key": "sdk-contract-key"}], "experiments": [
           {"key": "exp_a", "status": "ACTIVE", "variants": [{"id": "a-c", "name": "control", "allocation": 100, "is_control": true}]},
           {"key": "exp_b", "status": "ACTIVE", "variants": [{"id": "b-c", "name": "control", "allocation": 100, "is_control": true}]}]},
         "steps": [
           {"do": "getAssignment", "experiment": "exp_a", "user": "user-1"},
           {"do": "getAssignment", "experiment": "exp_b", "user": "user-1"},
           {"do": "clearCache"},
           {"do": "getAssignment", "experiment": "exp_b", "user": "user-1"}]}
        """.utf8), file: "t.json")
        await assertSingleFlightCatches(afterAClear, .warmsUpKnownExperiments,
                                        saying: "for experiment 'exp_a' of user 'user-1', but every call of client 'main' for it had returned a value before it came")
    }

    /// The seventy-second tester's F1: one event's fan-out holds no more entries of a kind than a
    /// cache can, whatever the eviction order. The shipped file passes on the correct SDKs and fails
    /// an SDK ignoring `cacheSize` in `fan_out` (before, past the size only "live entries" were asked).
    func testOneEventsFanOutHoldsNoMoreThanACache() async throws {
        await NamedCheckCatch.assertCaught(try Self.shipped("field-fan-out-after-eviction-holds-no-more-than-a-cache"), by: .ignoresCacheSize,
                                           check: "fan_out", saying: "hold 3 assignment entries for its one event, more than the client's cache_size of 2")
    }

    /// F1 and F6 out of process, with the Python example's defects: the warm-up fails
    /// `single_flight`; a flight keyed without the user, or without the kind, is named as the
    /// request of another user or of the other kind that the call joined.
    func testThePythonExamplesSharedFlightsAndWarmUpAreNamed() throws {
        let dir = try scratchDirectory("seventieth-defects")
        let shipped = { (name: String) in Repository.root.appendingPathComponent("scenarios/\(name).json").path }
        var cases: [(defect: String, file: String, says: [String])] = [
            ("warm-up-experiments", shipped("field-the-sdk-looks-up-only-what-it-is-asked-for"),
             ["single_flight", "of user 'user-2', but no call of client 'main' had asked for it"]),
            ("flight-key-no-user", shipped("field-two-users-of-one-experiment-never-share-a-flight"),
             ["the only request in flight for its key text is #1, a request of user 'user-1'", "this SDK shared another's request", "CONTRACT.md section 4"]),
            ("flight-key-no-kind", shipped("s4-flag-and-experiment-of-one-key-are-distinct"),
             ["a request for flag 'checkout' (the other kind, of one key text)"]),
            // F7: a member the event object does not have fails `event_payload` (before, only
            // scenarios asserting whole bodies failed it).
            ("event-variant-id", shipped("field-the-sdk-looks-up-only-what-it-is-asked-for"),
             ["event_payload", "sends 'variant_id' in an event of user user-2, which the event object does not have"]),
            // The seventy-third tester's F3: a dropped empty key is shown beside the call that gave it.
            ("falsy-event-fields", shipped("field-event-experiment-key-empty-is-still-keyed"),
             ["but no call tracked it (the call running then tracked the event 'purchase' of user 'user-1' for experiment '' on client 'main': the request's keys differ from the call's)"]),
            ("assign-sdk-member", shipped("field-the-sdk-looks-up-only-what-it-is-asked-for"),
             ["event_payload", "of user 'user-1' sends 'sdk', which the assign body does not have"]),
        ]
        // Another client's request, joined through an in-flight table every client shares.
        let twoClients = dir.appendingPathComponent("two-clients.json")
        try """
        {"format": "experimently-scenario/1", "name": "two-clients", "description": "d", "checks": ["single_flight"],
         "clients": {"a": {}, "b": {}}, "steps": [
          {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "hold-a"},
          {"do": "getAssignment", "client": "a", "experiment": "sdk_contract_ab", "user": "user-1", "as": "one", "async": true},
          {"wait_for": {"held": "hold-a", "count": 1}},
          {"do": "getAssignment", "client": "b", "experiment": "sdk_contract_ab", "user": "user-1"},
          {"release": "hold-a"}, {"await": "one"}]}
        """.write(to: twoClients, atomically: true, encoding: .utf8)
        cases.append(("flights-shared-by-clients", twoClients.path, ["the only request in flight for its key text is #1, a request of client 'a' (each client has its own requests)", "this SDK shared another's request"]))
        for c in cases {
            try TesterFixtures.assertFails(c.file, on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=\(c.defect) \(TesterFixtures.python)",
                                                        "--step-timeout-ms", "1000"], saying: [], in: dir)
            // Every failing check's message is in the verdict (the console names the first).
            let verdict = try String(contentsOf: dir.appendingPathComponent("v.json"), encoding: .utf8)
            for text in c.says { XCTAssertTrue(verdict.contains(text), "\(c.defect): no '\(text)' in \(verdict.prefix(3000))") }
        }
    }

    /// The sixty-ninth tester's F2: a near miss of an `assert requests` naming headers shows the
    /// value sent for each header that differed (an API key's value never); before, a
    /// `Content-Type` with `; charset=utf-8` looked like a match.
    func testANearMissShowsTheHeadersThatDiffered() {
        let sent = RequestRecord(seq: 3, client: "main", method: "GET", path: "/api/v1/feature-flags/evaluate/f", target: "", query: [:],
                                 headers: ["content-type": "application/json; charset=utf-8", "x-api-key": "secret-key", "Accept": "application/json"],
                                 body: nil, status: 200, response: nil, fault: nil, parked: false, cancelled: false, answered: true)
        var match = RequestMatch()
        match.headers = ["Content-Type": "application/json", "Accept": "application/json", "X-API-Key": "sdk-contract-key", "X-Trace": "1"]
        let shown = ScenarioExecution.nearMiss(sent, match)
        XCTAssertTrue(shown.hasSuffix(#"(sent content-type: "application/json; charset=utf-8", x-api-key: another key, X-Trace absent)"#), shown)
        XCTAssertFalse(shown.contains("secret-key"), shown)
        XCTAssertEqual(ScenarioExecution.nearMiss(sent, RequestMatch()), sent.summary, "no headers asked: the summary alone")
    }
}
