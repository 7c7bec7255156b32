import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock
import ExperimentlyMutants

/// An eighth outside tester's findings, each a test that failed before its fix.
final class EighthTesterFindingsTests: XCTestCase {
    static func fixture(_ name: String) throws -> Scenario {
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/eighth-tester/\(name).json").path
        return try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
    }

    /// Answers the SDK may fail to decode (a contract field missing or of another type) or cache
    /// under another key (an assignment for another experiment) are optional for the model: every
    /// correct SDK failed `fan_out` or `no_stale_write` on them.
    func testAnswersAnSDKMayReadEitherWayAreOptional() async throws {
        for name in ["k-answer-other-experiment-key", "m-flag-key-number", "m-assign-no-experiment-key"] {
            let scenario = try Self.fixture(name)
            for (driver, what) in [(SwiftSDKDriver(), "shipping SDK"), (MutantRun.driver(nil), "faithful variant")] {
                let result = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(result.status, .passed, "\(name) on the \(what): \(result.firstFailure?.message ?? "")")
            }
        }
    }

    /// Inputs the model or an SDK cannot follow are refused: a TTL or timeout past ten years (9.3e12
    /// s trapped the model's microseconds), and the model's microseconds saturate.
    func testHugeTimesAreRefusedAndTheModelNeverTraps() throws {
        for body in [#""config": {"cache_ttl": 9.3e12}"#, #""config": {"timeout": 1e300}"#] {
            XCTAssertThrowsError(try ScenarioParser.parse(Data("""
            {"format": "experimently-scenario/1", "name": "t", "description": "d", "checks": ["single_flight"], \(body), "steps": [{"advance": 1}]}
            """.utf8), file: "t.json")) { error in XCTAssertTrue("\(error)".contains("ten years"), "\(error)") }
        }
        XCTAssertGreaterThan(Checks.CacheModel.micros(1e300), 0)
        XCTAssertEqual(Checks.CacheModel.micros(.nan), 0)
        // Impossible calendar dates are no timestamp.
        XCTAssertNil(Checks.isoMillisSeconds(.string("2023-11-31T00:00:00.500Z")))
        XCTAssertNil(Checks.isoMillisSeconds(.string("2023-02-29T00:00:00.500Z")))
        XCTAssertNotNil(Checks.isoMillisSeconds(.string("2024-02-29T00:00:00.500Z")))
    }

    /// A scenario is recognised by its parsed `format`, however spelled (`\/`), and an output
    /// never replaces it; a simple command starting with a shell builtin is not exec'd.
    func testScenarioFilesAreKnownByTheirParsedFormat() throws {
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/eighth-tester/o-victim-escaped-slash.json").path
        XCTAssertTrue(Data.isScenarioFile(file))
        XCTAssertFalse(Data.isScenarioFile(Repository.root.appendingPathComponent("Documentation/scenario.schema.json").path))
        XCTAssertEqual(DriverConnection.execing("command python3 driver.py"), "command python3 driver.py")
    }

    /// More than 256 requests of one client held at once reach the mock through experimently-driver
    /// (its sessions allowed 256 connections per host: the rest were never sent, "not quiescent").
    /// The file's step limit is 30 s: under `swift test --parallel` on a loaded machine the 300
    /// requests took more than the default 5 s to reach the mock (a passing run waits no longer).
    func testThreeHundredHeldRequestsOfOneClientGoThroughTheSwiftAdapter() async throws {
        let driverPath = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver")
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: driverPath.path), "experimently-driver is not built (swift build builds it)")
        let driver = try await ProcessSDKDriver.launch(command: "'\(driverPath.path)'")
        let result = await ScenarioRunner(driver: driver).run(try Self.fixture("p-300-held"))
        await driver.shutdown()
        XCTAssertEqual(result.status, .passed, result.firstFailure?.message ?? result.reason ?? "")
    }

    /// An entry that may be there or not (here a TTL tie) no longer makes `fan_out` accept any
    /// subset: each subset of such entries is tried as the expectation, so the batches must still
    /// be chunks of 100 of one of them (`wrong-batch-chunks` passed both files).
    func testOptionalEntriesAreTriedAsSubsetsNotAnySubset() async throws {
        for name in ["u-tie-batch-150", "u-tie-other-user"] {
            let scenario = try Self.fixture(name)
            let shipping = await ScenarioRunner().run(scenario)
            XCTAssertEqual(shipping.status, .passed, "\(name): \(shipping.firstFailure?.message ?? "")")
            let broken = await ScenarioRunner(driver: MutantRun.driver(.wrongBatchChunks)).run(scenario)
            XCTAssertEqual(broken.status, .failed, name)
        }
    }

    /// A 2xx body parsers read differently (a byte-order mark, a key twice, `NaN`, nesting past
    /// 256 levels) is modelled as maybe cached: each failed a correct SDK that read it the other
    /// way. Malformed and truncated bodies stay failures for everyone (the mutant matrix's
    /// `caches-failure` is still caught).
    func testBodiesParsersReadDifferentlyMayBeCachedOrNot() async throws {
        for name in ["b-bom", "b-nan", "b-dup-enabled-last-true", "b-deep"] {
            let result = await ScenarioRunner().run(try Self.fixture(name))
            XCTAssertEqual(result.status, .passed, "\(name): \(result.firstFailure?.message ?? "")")
        }
        var strict: JSONValue? = nil
        XCTAssertTrue(MockBackendPort.ambiguous(Data([0xEF, 0xBB, 0xBF] + Array(#"{"enabled": true}"#.utf8)), strict: &strict))
        XCTAssertEqual(strict?["enabled"], .bool(true))
        strict = nil
        XCTAssertFalse(MockBackendPort.ambiguous(Data(#"{"detail": "#.utf8), strict: &strict))
        XCTAssertNil(strict)
    }

    /// A ninth outside tester: a truncated body nested past 256 levels was "maybe cached"
    /// (`caches-failure` passed), a valid deep one was read as `{}` (hiding `assigned: false`, so
    /// `fan-out-to-ineligible` passed), and a top-level key stated twice was read as its last
    /// value while the Swift SDK keeps the first (it failed).
    func testDeepAndDuplicatedBodiesAreReadAsFarAsTheyGo() async throws {
        func ninth(_ name: String) throws -> Scenario {
            let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/ninth-tester/\(name).json").path
            return try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
        }
        for name in ["v-deep-truncated", "d-deep-ineligible", "d-assigned-true-then-false"] {
            let result = await ScenarioRunner().run(try ninth(name))
            XCTAssertEqual(result.status, .passed, "\(name): \(result.firstFailure?.message ?? "")")
        }
        let cached = await ScenarioRunner(driver: MutantRun.driver(.cachesFailure)).run(try ninth("v-deep-truncated"))
        XCTAssertEqual(cached.status, .failed)
        let ineligible = await ScenarioRunner(driver: MutantRun.driver(.fanOutToIneligible)).run(try ninth("d-deep-ineligible"))
        XCTAssertEqual(ineligible.status, .failed)
    }
}
