import XCTest
import Foundation
@testable import ContractHarness

/// At an instant the runner wakes the SDK's deadlines before the mock's answers
/// (`advanceWakingSDK`, then `wakeMock`). A mock task that registered its delay only after the
/// clock had reached the delay's end answered at once, racing an SDK deadline due at the same
/// instant: 1 run in 100 of `dl-grid-delay-07-0333333` (a tie) returned the answer, not the timeout.
final class VirtualClockTieTests: XCTestCase {
    func testAMockSleeperRegisteredLateWaitsForTheMockWake() async throws {
        let clock = VirtualClock()
        let due = clock.now().addingTimeInterval(1)
        clock.advanceWakingSDK(to: due)
        // The mock's delay ends at `due`, registered after the clock reached it: it waits for wakeMock.
        let woke = HarnessLocked(false)
        let mock = Task { try await clock.mockView.sleep(until: due); woke.withLock { $0 = true } }
        // A gate, not a sleep: wait until the sleeper is registered.
        while clock.sleeperCount == 0 && !woke.withLock({ $0 }) { await Task.yield() }
        XCTAssertFalse(woke.withLock { $0 }, "the mock's sleeper returned before the mock was woken at its instant")
        XCTAssertEqual(clock.wakeMock(), 1)
        try await mock.value
        XCTAssertTrue(woke.withLock { $0 })
        // Once the mock was woken at (or after) a deadline, a sleeper for it returns at once, as an
        // SDK sleeper always does when its deadline has come.
        try await clock.mockView.sleep(until: due)
        try await clock.sleep(until: due.addingTimeInterval(-0.5))
        XCTAssertEqual(clock.sleeperCount, 0)
    }

    /// The tie file: the deadline comes first in every one of 50 runs.
    func testTheTieFileTimesOutEveryRun() async throws {
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/thirty-sixth-tester/dl-grid-delay-07-0333333.json")
        let scenario = try ScenarioParser.parse(Data(contentsOf: file), file: file.lastPathComponent)
        for run in 0..<50 {
            let result = await ScenarioRunner(keepsHistory: false).run(scenario)
            XCTAssertEqual(result.status, .passed, "run \(run): \(result.firstFailure?.message ?? result.reason ?? "")")
        }
    }
}
