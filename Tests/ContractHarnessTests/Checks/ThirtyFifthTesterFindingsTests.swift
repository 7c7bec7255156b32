import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the thirty-fifth outside tester (`/work/attack36/FINDINGS.md`): the virtual clock
/// drifted off the microsecond grid (F9: an instant reached by two advances missed a deadline due
/// there), `single_flight` took an undecodable 2xx answer as one a joiner had to take (F4), and
/// `stickiness` failed a pre-restart request's late answer (found beside F1c). A rule of
/// `exposure_after_display` that modelled the app's cache failed correct SDKs eight ways (F0-F3)
/// and was withdrawn; its files stay here, passing.
final class ThirtyFifthTesterFindingsTests: XCTestCase {
    private static let python = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"

    /// Every correct SDK passes the tester's files (run three times: F0 was a flake).
    func testCorrectSDKsPassTheFiles() throws {
        let dir = try scratchDirectory("thirty-fifth")
        let fixtures = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/thirty-fifth-tester").path
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", Self.python]] {
            for _ in 0..<3 {
                let (status, out) = try HarnessProcess.run(["run", fixtures] + sdk + ["--verdict", "v.json"], in: dir)
                XCTAssertEqual(status, 0, "\(sdk): \(out)")
                XCTAssertTrue(out.contains("7 passed, 0 failed"), "\(sdk): \(out)")
            }
        }
    }

    /// The clock keeps to the microsecond grid: 0.3 s then 0.4 s is the instant 0.7 s is, and a
    /// sleeper due at `now + 0.7` (in `Date` arithmetic, off the grid by a rounding) wakes there.
    func testTwoAdvancesReachTheInstantOneDoesAndWakeWhatIsDueThere() async throws {
        let one = VirtualClock(), two = VirtualClock()
        one.advance(by: 0.013); two.advance(by: 0.013)
        let due = two.now().addingTimeInterval(0.7)
        let woke = expectation(description: "the sleeper due at 0.713 s wakes")
        let sleeper = Task { try await two.sleep(until: due); woke.fulfill() }
        while two.sleeperCount == 0 { await Task.yield() }
        one.advance(by: 0.7)
        two.advance(by: 0.3)
        two.advance(by: 0.4)
        XCTAssertEqual(one.now(), two.now())
        await fulfillment(of: [woke], timeout: 10)
        sleeper.cancel()   // before the fix it never woke
    }

    /// The clock runs at most 80 years past its start (thirty-sixth tester, H1: past about 250
    /// years a `Date` no longer holds every microsecond, and 2 us passed a 3 us TTL): an advance
    /// beyond is the scenario's error naming the bound; eight advances of ten years still run.
    func testTheClockStopsAtItsBoundWithAnErrorNamingIt() async throws {
        func scenario(advances: Int) throws -> Scenario {
            let steps = Array(repeating: #"{"advance": 315360000}"#, count: advances).joined(separator: ",")
            return try ScenarioParser.parse(Data("""
            {"format": "experimently-scenario/1", "name": "long-\(advances)", "description": "advances up to the clock bound", "config": {"cache_ttl": 0.000003},
             "steps": [\(steps), {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u"}, {"advance": 0.000002},
                       {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u"},
                       {"assert": {"requests": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag"}, "count": 1}}]}
            """.utf8), file: "long.json")
        }
        let runner = ScenarioRunner(keepsHistory: false)
        let within = await runner.run(try scenario(advances: 8))
        XCTAssertEqual(within.status, .passed, "\(within.reason ?? "") \(within.checks.filter { !$0.passed })")
        let beyond = await runner.run(try scenario(advances: 9))
        XCTAssertEqual(beyond.status, .error)
        XCTAssertTrue((beyond.reason ?? "").contains("beyond its bound of 2524608000 s (80 years"), beyond.reason ?? "")
    }

    /// The thirty-sixth outside tester's files (`/work/attack37/FINDINGS.md`) pass on correct SDKs:
    /// an out-of-process SDK's deadline due exactly at a grid instant fires (G1: the adapter is told
    /// its own `next` when that lies on the instant), the mock's outage window is judged on the
    /// microsecond grid (W1), a seeded variant served after a restart fixes no run (S1), and any
    /// assignment answered earlier explains a shown variant (E1), and a scripted failure keeps its user
    /// judged by `stickiness` (S2).
    func testTheThirtySixthTestersFilesPassOnCorrectSDKs() throws {
        let dir = try scratchDirectory("thirty-sixth")
        let fixtures = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/thirty-sixth-tester").path
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", Self.python]] {
            let (status, out) = try HarnessProcess.run(["run", fixtures] + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            XCTAssertTrue(out.contains("9 passed, 0 failed"), "\(sdk): \(out)")
        }
        // S2: a scripted 503 no longer switches `stickiness` off for its user: an SDK serving
        // another user's persisted variant fails it.
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/thirty-sixth-tester/stick-503-excludes-user.json").path
        let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=store-ignores-user \(Self.python)",
                                                    "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("stickiness"), out)
    }
}
