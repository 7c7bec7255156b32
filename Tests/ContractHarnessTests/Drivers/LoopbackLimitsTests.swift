import XCTest
import Foundation
@testable import ContractHarness

/// What a scenario can ask of an SDK reaches the backend model over loopback TCP as in process
/// (a sixth outside tester: an 18 KiB query got 431 and a 1.1 MB batch 413 from the HTTP layer
/// through an adapter, 422 and 200 in process, and history had no request for the 431).
final class LoopbackLimitsTests: XCTestCase {
    func testALongUserIdAndALargeBatchGetTheModelsAnswerThroughAnAdapter() async throws {
        let driverPath = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver")
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: driverPath.path), "experimently-driver is not built (swift build builds it)")
        let driver = try await ProcessSDKDriver.launch(command: "'\(driverPath.path)'")
        for name in ["l-very-long-user-id", "l-large-batch-body"] {
            let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/sixth-tester/\(name).json").path
            let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
            let inProcess = await ScenarioRunner().run(scenario)
            XCTAssertEqual(inProcess.status, .passed, "\(name) in process: \(inProcess.firstFailure?.message ?? "")")
            let overTCP = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(overTCP.status, .passed, "\(name) through experimently-driver: \(overTCP.firstFailure?.message ?? overTCP.reason ?? "")")
            XCTAssertTrue(overTCP.history.contains { $0.kind == .request }, "\(name): history records the request")
        }
        await driver.shutdown()
        XCTAssertGreaterThanOrEqual(LoopbackListeners.limits.maxHeaderBytes, 4 << 20)
    }
}
