import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// The `contract-smoke` executable, against `contract-harness serve` over TCP and against its
/// embedded mock, judged by the upstream live runner's rules (CONTRACT.md section 7).
final class ContractSmokeTests: XCTestCase {
    static var smokeBinary: URL { HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("contract-smoke") }

    var dir: URL!

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: Self.smokeBinary.path), "contract-smoke not built at \(Self.smokeBinary.path)")
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("smoke-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    /// The upstream runner's judgement: the last stdout line, sdk name, variant in {control,
    /// treatment}, boolean is_control, sticky, flag enabled, track ok, fanout ok.
    func judge(_ stdout: String, file: StaticString = #filePath, line: UInt = #line) throws -> [String: JSONValue] {
        let last = try XCTUnwrap(stdout.split(separator: "\n").last, "no output", file: file, line: line)
        let o = try XCTUnwrap(JSONValue.parse(Data(last.utf8)).value.objectValue, file: file, line: line)
        XCTAssertEqual(o["sdk"], .string("ios"), file: file, line: line)
        XCTAssertTrue(["control", "treatment"].contains(o["assign"]?["variant_name"]?.stringValue ?? ""), "\(last)", file: file, line: line)
        guard case .bool? = o["assign"]?["is_control"] else { XCTFail("is_control is not a boolean: \(last)", file: file, line: line); return o }
        XCTAssertEqual(o["assign"]?["sticky"], .bool(true), file: file, line: line)
        XCTAssertEqual(o["flag"]?["enabled"], .bool(true), file: file, line: line)
        XCTAssertEqual(o["track"]?["ok"], .bool(true), file: file, line: line)
        XCTAssertEqual(o["fanout"]?["ok"], .bool(true), file: file, line: line)
        return o
    }

    func smoke(_ env: [String: String], _ arguments: [String] = ["--embedded"]) throws -> BoundedRun {
        var environment = ProcessInfo.processInfo.environment
        for k in ["EXPERIMENTLY_API_URL", "EXPERIMENTLY_API_KEY", "CONTRACT_EXPERIMENT_KEY", "CONTRACT_FLAG_KEY", "CONTRACT_USER_ID"] {
            environment[k] = nil
        }
        for (k, v) in env { environment[k] = v }
        return try BoundedRun.run(Self.smokeBinary, arguments, environment: environment, directory: dir, timeout: 60)
    }

    func testSmokeAgainstServeOverTCPPassesAndTheJournalShowsTheSteps() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path), "contract-harness not built")
        let journal = dir.appendingPathComponent("journal.json")
        let serve = try ServeProcess(["--journal", journal.path], directory: dir)
        let r = try smoke(["EXPERIMENTLY_API_URL": serve.url, "EXPERIMENTLY_API_KEY": serve.key, "CONTRACT_USER_ID": "user-123"], [])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        XCTAssertEqual(r.out, #"{"sdk":"ios","assign":{"variant_name":"treatment","is_control":false,"sticky":true},"flag":{"enabled":true},"track":{"ok":true},"fanout":{"ok":true}}"# + "\n")
        _ = try judge(r.out)
        XCTAssertEqual(serve.stop(), 0, serve.stderrText)

        let history = try XCTUnwrap(JSONValue.parse(Data(contentsOf: journal)).value["history"]?.arrayValue)
        XCTAssertEqual(history.map { $0["path"]?.stringValue ?? "" }, [
            "/api/v1/tracking/assign", "/api/v1/tracking/assign", "/api/v1/feature-flags/evaluate/sdk_contract_flag",
            "/api/v1/tracking/track", "/api/v1/tracking/batch", "/api/v1/tracking/batch",
        ])
        XCTAssertEqual(history.map { $0["response"]?["status"] }, Array(repeating: .number(200), count: 6))
        let pageView = try XCTUnwrap(history[4]["json"]?["events"]?.arrayValue)
        XCTAssertEqual(pageView.map { $0["event_type"] }, [.string("page_view"), .string("page_view")], "one batch of 2")
        XCTAssertEqual(pageView.map { $0["experiment_key"] ?? $0["feature_flag_key"] }, [.string("sdk_contract_ab"), .string("sdk_contract_flag")])
        XCTAssertEqual(history[5]["json"]?["events"]?.arrayValue?.count, 2)
        XCTAssertEqual(history[3]["json"]?["event_type"], .string("purchase"))
        XCTAssertEqual(history[3]["json"]?["experiment_key"], .string("sdk_contract_ab"))
    }

    func testSmokeWithTheEmbeddedMockAndARandomUser() throws {
        let r = try smoke([:])
        XCTAssertEqual(r.status, 0, r.out + r.err)
        XCTAssertEqual(r.out.split(separator: "\n").count, 1)
        _ = try judge(r.out)
        let bob = try smoke(["CONTRACT_USER_ID": "bob"])
        XCTAssertEqual(try judge(bob.out)["assign"]?["variant_name"], .string("control"), "bob is in bucket 42 of sdk_contract_ab")
    }

    func testSmokeFailuresPrintALineToStderrAndExitOne() throws {
        let noKey = try smoke(["EXPERIMENTLY_API_URL": "http://127.0.0.1:9"], [])
        XCTAssertEqual(noKey.status, 1)
        XCTAssertEqual(noKey.err, "contract-smoke: FAIL: EXPERIMENTLY_API_KEY is required (the backend is http://127.0.0.1:9; `contract-smoke --embedded` runs against an embedded mock)\n")
        XCTAssertEqual(noKey.out, "")
        // CONTRACT.md section 7: the key is required and the URL defaults to http://localhost:8000,
        // never an embedded mock unless asked for (an outside audit, A-11: with no variable set it
        // passed against its own mock).
        let nothing = try smoke([:], [])
        XCTAssertEqual(nothing.status, 1)
        XCTAssertEqual(nothing.err, "contract-smoke: FAIL: EXPERIMENTLY_API_KEY is required (the backend is http://localhost:8000; `contract-smoke --embedded` runs against an embedded mock)\n")
        let unknownArgument = try smoke([:], ["--mock"])
        XCTAssertEqual(unknownArgument.status, 1)
        XCTAssertTrue(unknownArgument.err.contains("unknown argument --mock"), unknownArgument.err)
        let unknown = try smoke(["CONTRACT_EXPERIMENT_KEY": "no_such_experiment", "CONTRACT_USER_ID": "u"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.err.hasPrefix("contract-smoke: FAIL: getAssignment(no_such_experiment, u) failed:"), unknown.err)
        let off = try smoke(["CONTRACT_FLAG_KEY": "no_such_flag", "CONTRACT_USER_ID": "u"])
        XCTAssertEqual(off.status, 1)
        XCTAssertTrue(off.err.contains("evaluateFlag(no_such_flag, u) failed"), off.err)
    }
}
