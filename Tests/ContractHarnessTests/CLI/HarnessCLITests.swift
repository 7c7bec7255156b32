import XCTest
import Foundation

/// The `contract-harness` binary as CI runs it: exit statuses, console lines, the verdict file.
final class HarnessCLITests: XCTestCase {
    static var binary: URL {
        #if os(macOS)
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            return bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("contract-harness")
        }
        #endif
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("contract-harness")
    }

    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("harness-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: Self.binary.path), "contract-harness not built at \(Self.binary.path)")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    struct Run { let status: Int32; let out: String; let err: String }

    func harness(_ arguments: [String]) throws -> Run {
        let p = Process()
        p.executableURL = Self.binary
        p.arguments = arguments
        p.currentDirectoryURL = dir
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Run(status: p.terminationStatus, out: String(decoding: o, as: UTF8.self), err: String(decoding: e, as: UTF8.self))
    }

    /// Scenario files go to `scenarios/` below the working folder (verdicts land in the folder itself).
    var scenarios: String { dir.appendingPathComponent("scenarios").path }

    func write(_ name: String, _ text: String) throws -> String {
        try FileManager.default.createDirectory(atPath: scenarios, withIntermediateDirectories: true)
        let url = URL(fileURLWithPath: scenarios).appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url.path
    }

    func verdict(_ name: String = "verdict.json") throws -> [String: Any] {
        let data = try Data(contentsOf: dir.appendingPathComponent(name))
        return try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    static func scenario(_ name: String, expectEnabled: Bool) -> String {
        """
        {"format": "experimently-scenario/1", "name": "\(name)", "description": "flag for user-1", "tags": ["t"],
         "steps": [{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "expect": {"value": {"enabled": \(expectEnabled)}}}],
         "checks": ["single_flight"]}
        """
    }

    func testPassingRunExitsZeroAndWritesTheVerdict() throws {
        _ = try write("ok.json", Self.scenario("ok", expectEnabled: true))
        let r = try harness(["run", scenarios, "--junit", "junit.xml"])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        XCTAssertTrue(r.out.contains("PASS  ok ("), r.out)
        XCTAssertEqual(r.out.split(separator: "\n").last, "1 passed, 0 failed")
        let v = try verdict()
        XCTAssertEqual(v["format"] as? String, "experimently-verdict/1")
        XCTAssertEqual(v["sdk"] as? String, "ios")
        XCTAssertEqual((v["counts"] as? [String: Any])?["passed"] as? Int, 1)
        let scenarios = try XCTUnwrap(v["scenarios"] as? [[String: Any]])
        XCTAssertEqual(scenarios.first?["status"] as? String, "passed")
        XCTAssertEqual((scenarios.first?["history_digest"] as? String)?.count, 32)
        XCTAssertFalse(String(decoding: try Data(contentsOf: dir.appendingPathComponent("verdict.json")), as: UTF8.self).contains("sdk-contract-key"),
                       "the API key must never appear in the verdict")
        XCTAssertTrue(String(decoding: try Data(contentsOf: dir.appendingPathComponent("junit.xml")), as: UTF8.self).contains("<testcase classname=\"t\" name=\"ok\""))
    }

    func testFailingCheckExitsOneAndQuotesTheFailure() throws {
        _ = try write("bad.json", Self.scenario("expects-off", expectEnabled: false))
        let r = try harness(["run", scenarios, "--verdict", "v.json"])
        XCTAssertEqual(r.status, 1, r.out + r.err)
        XCTAssertTrue(r.out.contains("FAIL  expects-off"), r.out)
        XCTAssertTrue(r.out.contains("expected a value containing"), r.out)
        XCTAssertEqual(r.out.split(separator: "\n").last, "0 passed, 1 failed")
        let scenarios = try XCTUnwrap(try verdict("v.json")["scenarios"] as? [[String: Any]])
        let checks = try XCTUnwrap(scenarios.first?["checks"] as? [[String: Any]])
        XCTAssertTrue(checks.contains { ($0["passed"] as? Bool) == false && (($0["history"] as? [String])?.isEmpty == false) })
    }

    func testMalformedScenarioExitsSixtyFourNamingThePlaceAndStillWritesTheVerdict() throws {
        _ = try write("a-ok.json", Self.scenario("fine", expectEnabled: true))
        let bad = try write("b-bad.json", #"{"format": "experimently-scenario/1", "name": "b", "description": "d", "steps": [{"do": "evaluateFlag", "flg": "x"}]}"#)
        let r = try harness(["run", scenarios])
        XCTAssertEqual(r.status, 64, r.out + r.err)
        XCTAssertTrue(r.err.contains("\(bad): at $.steps[0]"), r.err)
        XCTAssertTrue(r.out.contains("PASS  fine"), "the valid scenario still runs: \(r.out)")
        let v = try verdict()
        XCTAssertEqual((v["counts"] as? [String: Any])?["error"] as? Int, 1)
    }

    func testBadUsageExitsSixtyFour() throws {
        XCTAssertEqual(try harness(["run", "--seed", "minus-one"]).status, 64)
        XCTAssertEqual(try harness(["frobnicate"]).status, 64)
        XCTAssertEqual(try harness(["run", "no-such-folder"]).status, 64)
        let help = try harness(["--help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.out.contains("--fail-fast"))
    }

    func testFilterAndFailFast() throws {
        _ = try write("1.json", Self.scenario("first-fails", expectEnabled: false))
        _ = try write("2.json", Self.scenario("second", expectEnabled: true))
        let filtered = try harness(["run", scenarios, "--filter", "second"])
        XCTAssertEqual(filtered.status, 0, filtered.out)
        XCTAssertEqual(filtered.out.split(separator: "\n").last, "1 passed, 0 failed")
        let fast = try harness(["run", scenarios, "--fail-fast", "--seed", "7"])
        XCTAssertEqual(fast.status, 1)
        XCTAssertEqual(fast.out.split(separator: "\n").last, "0 passed, 1 failed, 1 skipped")
        XCTAssertEqual(try verdict()["seed"] as? Int, 7)
    }
}
