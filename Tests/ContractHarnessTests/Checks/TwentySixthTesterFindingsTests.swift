import XCTest
import Foundation
@testable import ExperimentlyMock
@testable import ContractHarness

/// Findings of the twenty-sixth outside tester (`/work/attack27/FINDINGS.md`: an SDK written in Go
/// from CONTRACT.md alone, on Go's keep-alive transport, which resends only GETs): the mock's guess
/// at a transport's silent resend dropped the SDK's own identical request three ways; out of
/// process a scenario that can drop a request is now served without keep-alive, so no transport
/// resends and nothing has to be guessed.
final class TwentySixthTesterFindingsTests: XCTestCase {
    /// The scenarios whose listeners serve one request per connection are exactly those with a
    /// drop before any answer (a fault's `drop_before_response` or `delay_then_drop`, a release
    /// with `transport_error`).
    func testOnlyAScenarioThatCanDropARequestIsServedWithoutKeepAlive() throws {
        let folder = Repository.root.appendingPathComponent("scenarios")
        let (scenarios, invalid) = HarnessCommand.load(try HarnessCommand.discover([folder.path]), seed: 0)
        XCTAssertTrue(invalid.isEmpty, "\(invalid)")
        let dropping = Set(scenarios.filter { ScenarioExecution.canDropBeforeAnswer($0) }.map(\.name))
        XCTAssertEqual(dropping, ["field-batch-later-chunks-after-a-transport-failure", "field-connection-reset-on-release-and-after-latency",
                                  "field-network-failure-never-serves-other-users-cache", "s4-fallback-on-transport-error-serves-persisted",
                                  "s4-transport-error-without-persisted-throws", "field-identical-batch-chunk-after-a-dropped-one",
                                  "field-app-displays-again-after-a-dropped-exposure", "field-overlapping-status-calls-each-report-their-own-delivery",
                                  "field-failures-are-never-remembered"])
    }

    /// The tester's two files pass through experimently-driver (libcurl, which resends on a reused
    /// connection) and the Python example, as in process: the third chunk, identical to the
    /// dropped second, is sent and answered; the app's second display is answered.
    func testAnIdenticalRequestAfterADropIsTheSDKsOwnOutOfProcess() throws {
        let driverPath = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver")
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: driverPath.path), "experimently-driver is not built (swift build builds it)")
        let dir = try scratchDirectory("twenty-sixth-drops")
        let python = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
        let files = ["field-identical-batch-chunk-after-a-dropped-one", "field-app-displays-again-after-a-dropped-exposure"]
            .map { Repository.root.appendingPathComponent("scenarios/\($0).json").path }
        for driver in ["'\(driverPath.path)'", python] {
            let (status, out) = try HarnessProcess.run(["run"] + files + ["--sdk-command", driver, "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(driver): \(out)")
        }
    }
}
