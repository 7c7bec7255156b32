import XCTest
import Foundation
@testable import ContractHarness

/// An app operation is settled only when the SDK call it is inside has a parked request of its
/// own (ScenarioExecution+AppQuiescence.swift): a parked request of the same client for someone
/// else does not let the next step begin before the app's own request is sent.
final class AppQuiescenceTests: XCTestCase {
    /// bob's flag evaluation on the app's client is parked first; then an async display whose
    /// assignment is held; then a lookup on another client. The display's assign request must
    /// reach the mock before the next step begins.
    static let display = """
    {"format": "experimently-scenario/1", "name": "app-display-waits-for-its-own-request",
     "description": "an async display settles on its own parked assignment, not on bob's parked flag evaluation",
     "clients": {"main": {"store": "s"}, "other": {"store": null}},
     "app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab", "user": "user-1"},
     "steps": [
       {"app": "refresh"},
       {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "query": {"user_id": "bob"}}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "slow-bob"},
       {"fault": {"match": {"path": "/api/v1/tracking/assign", "body": {"user_id": "user-1"}}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "slow-own"},
       {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "bob", "as": "bob", "async": true},
       {"wait_for": {"held": "slow-bob", "count": 1}},
       {"app": "display", "as": "display", "async": true},
       {"do": "evaluateFlag", "client": "other", "flag": "sdk_contract_flag", "user": "carol", "as": "carol"},
       {"release": "slow-own"},
       {"await": "display", "expect": {"value": {"identity": "user-1", "source": "assignment"}}},
       {"release": "slow-bob"},
       {"await": "bob"}
     ]}
    """

    /// An async event (a `trackWithStatus` call of the app) behind bob's parked evaluation: its
    /// tracking request must be parked before the next step begins.
    static let event = """
    {"format": "experimently-scenario/1", "name": "app-event-waits-for-its-own-request",
     "description": "an async event settles on its own parked tracking request",
     "clients": {"main": {"store": "s"}, "other": {"store": null}},
     "app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab", "user": "user-1"},
     "steps": [
       {"app": "refresh"},
       {"app": "display", "expect": {"value": {"source": "assignment"}}},
       {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "query": {"user_id": "bob"}}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "slow-bob"},
       {"fault": {"match": {"path": "/api/v1/tracking/track"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "slow-track"},
       {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "bob", "as": "bob", "async": true},
       {"wait_for": {"held": "slow-bob", "count": 1}},
       {"app": "event", "name": "purchase", "as": "event", "async": true},
       {"do": "evaluateFlag", "client": "other", "flag": "sdk_contract_flag", "user": "carol", "as": "carol"},
       {"release": "slow-track"},
       {"await": "event", "expect": {"value": {"identity": "user-1"}}},
       {"release": "slow-bob"},
       {"await": "bob"}
     ]}
    """

    /// Runs `text` `runs` times with both cores busy; every run passes, the app's own request
    /// (`path`) precedes the invocation of `carol` in every history, and there is one digest.
    func check(_ text: String, path: String, runs: Int = 30) async throws {
        let scenario = try ScenarioParser.parse(Data(text.utf8), file: "app-quiescence.json")
        let stop = StopFlag.busyLoops(2)
        defer { stop.set() }
        let runner = ScenarioRunner()
        var digests: Set<String> = []
        for i in 0..<runs {
            let result = await runner.run(scenario)
            XCTAssertEqual(result.status, .passed, "run \(i): \(result.reason ?? "")")
            let lines = result.history.map(\.line)
            let own = lines.firstIndex { $0.contains(" request ") && $0.contains(path) && !$0.contains("bob") }
            let next = lines.firstIndex { $0.contains("invoke carol") }
            guard let own, let next else { return XCTFail("run \(i): no request to \(path), or carol never invoked") }
            if own > next {
                XCTFail("run \(i): the next step began before the app's own request was sent:\n" + lines.joined(separator: "\n"))
            }
            digests.insert(result.historyDigest)
        }
        XCTAssertEqual(digests.count, 1, "\(runs) runs gave \(digests.count) history digests")
    }

    func testAsyncDisplayWaitsForItsOwnAssignRequest() async throws {
        try await check(Self.display, path: "/api/v1/tracking/assign")
    }

    func testAsyncEventWaitsForItsOwnTrackingRequest() async throws {
        try await check(Self.event, path: "/api/v1/tracking/track")
    }
}
