import Foundation
import XCTest
@testable import ContractHarness

/// Faults over loopback TCP, out of process (`run --sdk-command`): a `timeout` fault parks the
/// request until the SDK gives up, so the scenario settles; a drop reaches an SDK on
/// FoundationNetworking (libcurl silently resends a request dropped on a reused keep-alive
/// connection) as the transport error scripted. These scenarios were known failures over TCP
/// (`.ci/known-failures-tcp.txt`, `.ci/known-failures-urlsession-tcp.txt`) before the mock did both.
final class FaultsOverTCPTests: XCTestCase {
    private static let scenarios = [
        "field-timeout-after-backend-processed-assign",
        "s4-fallback-on-transport-error-serves-persisted",
        "field-connection-reset-on-release-and-after-latency",
    ]

    private func runAll(command: String) async throws {
        let driver = try await ProcessSDKDriver.launch(command: command)
        for name in Self.scenarios {
            let file = Repository.root.appendingPathComponent("scenarios/\(name).json").path
            let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
            let result = await ScenarioRunner(driver: driver, stepTimeoutCap: 2000).run(scenario)
            XCTAssertEqual(result.status, .passed, "\(name) via \(command): \(result.firstFailure?.message ?? result.reason ?? "")")
        }
        await driver.shutdown()
    }

    /// The shipping Swift SDK out of process: URLSession on FoundationNetworking.
    func testTimeoutAndDropFaultsReachTheSwiftSDKOutOfProcess() async throws {
        let driver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver")
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: driver.path), "experimently-driver is not built (swift build builds it)")
        try await runAll(command: "'\(driver.path)'")
    }

    /// The Python example (a fresh connection per request, no silent resend).
    func testTimeoutAndDropFaultsReachThePythonExampleOutOfProcess() async throws {
        let driverPath = Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path
        try await runAll(command: "python3 '\(driverPath)'")
    }
}
