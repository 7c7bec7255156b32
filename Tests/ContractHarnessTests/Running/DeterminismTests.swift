import XCTest
import Foundation
@testable import ContractHarness

/// The same scenario file yields the same history on every run, also with both cores busy.
final class DeterminismTests: XCTestCase {
    static let racy = """
    {"format": "experimently-scenario/1", "name": "racy", "description": "20 concurrent calls on a hold, a clear in the middle, a second wave, releases in reverse order",
     "clients": {"a": {"store": "s"}, "b": {"store": "s"}},
     "steps": [
       {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 2}, "action": {"hold": {}}}, "id": "h"},
       {"do": "getAssignment", "client": "a", "experiment": "sdk_contract_ab", "user": "user-2", "as": "w1", "async": true, "times": 20},
       {"wait_for": {"held": "h", "count": 1}},
       {"do": "clearCache", "client": "a"},
       {"do": "getAssignment", "client": "a", "experiment": "sdk_contract_ab", "user": "user-2", "as": "w2", "async": true, "times": 20},
       {"wait_for": {"held": "h", "count": 2}},
       {"do": "evaluateFlag", "client": "b", "flag": "sdk_contract_flag", "user": "user-1", "as": "f", "async": true},
       {"release": "h"},
       {"await": "w1", "expect": {"value": {"variant_name": "treatment"}}},
       {"release": "h"},
       {"await": "w2", "expect": {"value": {"variant_name": "treatment"}}},
       {"await": "f"},
       {"do": "trackWithStatus", "client": "a", "event": {"user": "user-2", "name": "page_view"}, "expect": {"value": true}},
       {"advance": 301},
       {"do": "getAssignment", "client": "a", "experiment": "sdk_contract_ab", "user": "user-2"}
     ],
     "checks": ["single_flight", "no_stale_write", "fan_out", "stickiness", "offline_fallback"]}
    """

    func testTwoHundredRunsUnderLoadGiveOneHistory() async throws {
        let scenario = try ScenarioParser.parse(Data(Self.racy.utf8), file: "racy.json")
        let stop = StopFlag.busyLoops(2)
        defer { stop.set() }
        let runner = ScenarioRunner()
        let first = await runner.run(scenario)
        XCTAssertEqual(first.status, .passed, "\(first.checks.filter { !$0.passed })")
        XCTAssertGreaterThan(first.history.count, 100)
        for i in 1..<200 {
            let again = await runner.run(scenario)
            guard again.historyDigest == first.historyDigest else {
                let diff = zip(first.history, again.history).first { $0.0 != $0.1 }
                return XCTFail("run \(i) differs (status \(again.status), failures \(again.checks.filter { !$0.passed }.map { "\($0.name): \($0.message ?? "")" })): \(diff.map { "\($0.0.line)\n  vs \($0.1.line)" } ?? "length \(first.history.count) vs \(again.history.count)")")
            }
            XCTAssertEqual(again.status, .passed)
        }
    }
}

final class StopFlag: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched inside `lock`.
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }

    /// Starts `count` threads that keep a core busy each (load for determinism tests, never an
    /// ordering device) until the returned flag is set.
    static func busyLoops(_ count: Int) -> StopFlag {
        let stop = StopFlag()
        for _ in 0..<count {
            Thread.detachNewThread {
                var x: UInt64 = 1
                while !stop.isSet { for _ in 0..<10_000 { x = x &* 6364136223846793005 &+ 1 } }
                _ = x
            }
        }
        return stop
    }
}
