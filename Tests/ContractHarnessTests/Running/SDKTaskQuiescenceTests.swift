import XCTest
import Foundation
import Experimently
@testable import ContractHarness

/// The SDK's own unstructured tasks (its request deadline timer) are part of quiescence: before
/// the runner advances the virtual clock, every timer the SDK has started must have gone to sleep
/// on it. A timer that registered after the advance would measure from the advanced time, never
/// fire, and the runner would fail a correct SDK with "the scenario deadlocks" (seen under load
/// in ExpectationCoverageTests' `advance.seconds` row, about 1 run in 20 with the CPU busy).
final class SDKTaskQuiescenceTests: XCTestCase {
    /// The clock as an SDK sees it whose timer task takes a while to start: `sleep(seconds:)`
    /// yields `delay` times before it reads the time and goes to sleep (a busy machine, or an SDK
    /// that does some work in its timer task first). Stateless: safe to share.
    struct SlowStartClock: ExperimentationClock {
        let inner: any ExperimentationClock
        let delay: Int
        func now() -> Date { inner.now() }
        func sleep(seconds: TimeInterval) async throws {
            for _ in 0..<delay { await Task.yield() }
            try await inner.sleep(seconds: seconds)
        }
    }

    /// The shipping SDK with a slow-starting deadline timer; its own tasks prefer the executor the
    /// runner offers (the task executor seam).
    static func driver(delay: Int) -> SwiftSDKDriver {
        SwiftSDKDriver(name: "slow-timer", version: "1") { config, session, store, clock, executor in
            let slow = SlowStartClock(inner: clock, delay: delay)
            return ExperimentationClient(config: config, session: session, offlineStore: store, clock: slow,
                                         taskExecutor: executor as? any TaskExecutor)
        }
    }

    static let scenario = #"""
    {"format": "experimently-scenario/1", "name": "deadline-after-advance", "description": "held request, advance past the deadline",
     "config": {"timeout": 5}, "step_timeout_ms": 5000,
     "steps": [
       {"fault": {"match": {}, "action": {"hold": {}}}, "id": "h"},
       {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true},
       {"wait_for": {"held": "h", "count": 1}},
       {"advance": 5.1},
       {"await": "a", "expect": {"error": "networkError", "code": -1001}},
       {"wait_for": {"requests": {"cancelled": true}, "count": 1}},
       {"release": "h"}]}
    """#

    func testAnAdvanceWaitsForTheSDKsTimerToGoToSleep() async throws {
        let s = try ScenarioParser.parse(Data(Self.scenario.utf8), file: "deadline-after-advance.json")
        for delay in [0, 100, 100_000] {
            let r = await ScenarioRunner(driver: Self.driver(delay: delay), keepsHistory: false).run(s)
            XCTAssertEqual(r.status, .passed, "timer delay \(delay): \(r.firstFailure?.message ?? r.reason ?? "")")
        }
    }

    /// The check still fails an SDK whose deadline never fires (no false pass from the change):
    /// a timer that sleeps twice as long as its configured timeout.
    func testAnSDKWhoseDeadlineIsTooLateStillFails() async throws {
        struct DoubleClock: ExperimentationClock {
            let inner: any ExperimentationClock
            func now() -> Date { inner.now() }
            func sleep(seconds: TimeInterval) async throws { try await inner.sleep(seconds: seconds * 2) }
        }
        let driver = SwiftSDKDriver(name: "late-deadline", version: "1") { config, session, store, clock, executor in
            ExperimentationClient(config: config, session: session, offlineStore: store, clock: DoubleClock(inner: clock),
                                  taskExecutor: executor as? any TaskExecutor)
        }
        let s = try ScenarioParser.parse(Data(Self.scenario.utf8), file: "deadline-after-advance.json")
        let r = await ScenarioRunner(driver: driver, keepsHistory: false).run(s)
        XCTAssertEqual(r.status, .failed)
    }

    /// The clock as an SDK without the task executor seam sees it whose deadline timer starts
    /// only after the runner has moved the clock (a timer task late on the global executor under
    /// load: CI saw it twice in a row in `CapabilityInferenceTests`). It then sleeps until the
    /// instant it was given, which has passed.
    struct StartsAfterTheClockMoved: ExperimentationClock {
        let inner: any ExperimentationClock
        func now() -> Date { inner.now() }
        func sleep(seconds: TimeInterval) async throws { try await sleep(until: now().addingTimeInterval(seconds)) }
        func sleep(until deadline: Date) async throws {
            // Starts sleeping only once the clock has passed the deadline (polls a condition, not
            // a duration: the order is the runner's), however late the task itself starts.
            while inner.now() < deadline { try await Task.sleep(nanoseconds: 1_000_000) }
            try await inner.sleep(until: deadline)
        }
    }

    /// In process, a driver without the seam (no `interleaving`) keeps its SDK's timers out of the
    /// runner's sight: an operation the clock passed is not judged stuck at once, so a correct SDK
    /// whose deadline timer ran after the advance ends with its -1001 and passes. Before, the
    /// runner said "this SDK has no deadline of its own" as soon as the advance returned.
    func testAnUnseenDeadlineTimerThatStartsAfterTheAdvancePasses() async throws {
        let driver = SwiftSDKDriver(name: "unseen-late-timer", version: "1") { config, session, store, clock in
            ExperimentationClient(config: config, session: session, offlineStore: store, clock: StartsAfterTheClockMoved(inner: clock))
        }
        XCTAssertFalse(driver.capabilities.contains("interleaving"))
        let s = try ScenarioParser.parse(Data(Self.scenario.utf8), file: "deadline-after-advance.json")
        for _ in 0..<3 {
            let r = await ScenarioRunner(driver: driver, keepsHistory: false).run(s)
            XCTAssertEqual(r.status, .passed, "\(r.firstFailure?.name ?? ""): \(r.firstFailure?.message ?? r.reason ?? "")")
        }
    }

    /// And the same driver whose deadline never fires still fails (waiting, not judging at once,
    /// is no false pass).
    func testAnUnseenSDKWithoutADeadlineStillFails() async throws {
        struct Never: ExperimentationClock {
            let inner: any ExperimentationClock
            func now() -> Date { inner.now() }
            func sleep(seconds: TimeInterval) async throws { try await inner.sleep(seconds: seconds * 1_000) }
        }
        let driver = SwiftSDKDriver(name: "unseen-no-deadline", version: "1") { config, session, store, clock in
            ExperimentationClient(config: config, session: session, offlineStore: store, clock: Never(inner: clock))
        }
        let s = try ScenarioParser.parse(Data(Self.scenario.utf8), file: "deadline-after-advance.json")
        let r = await ScenarioRunner(driver: driver, stepTimeoutCap: 500, keepsHistory: false).run(s)
        XCTAssertEqual(r.status, .failed)
        XCTAssertTrue(r.firstFailure?.message?.contains("'a'") == true, r.firstFailure?.message ?? "")
    }
}
