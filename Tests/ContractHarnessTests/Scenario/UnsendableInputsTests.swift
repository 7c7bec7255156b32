import XCTest
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ContractHarness
@testable import ExperimentlyMock
import ExperimentlyMutants

/// Input no transport or encoder can carry is refused where it is read, and what the harness
/// writes never replaces its input (a sixth outside tester).
final class UnsendableInputsTests: XCTestCase {
    func parse(_ body: String) throws -> Scenario {
        try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "t", "description": "d", "source": "CONTRACT.md section 4", \(body)}
        """.utf8), file: "t.json")
    }

    /// `1e400` is no double: it was read as infinity, and the correct SDK was reported crashed
    /// (the worker could not write its result) or the value reached the SDK as `null`. Now every
    /// such number is refused naming its path; and a non-finite number an SDK returns is written
    /// as a string, so a verdict quoting it is still whole.
    func testANumberNoDoubleHoldsIsRefusedNamingItsPath() throws {
        let cases: [(String, String)] = [
            (#""steps": [{"do": "trackWithStatus", "event": {"user": "u", "name": "buy", "experiment": "sdk_contract_ab", "value": 1e400}, "expect": {"value": true}}]"#,
             "$.steps[0].event.value"),
            (#""steps": [{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "expect": {"value": {"enabled": true, "z": -1E+999}}}]"#,
             "$.steps[0].expect.value.z"),
        ]
        for (body, path) in cases {
            XCTAssertThrowsError(try parse(body)) { error in
                XCTAssertEqual((error as? ScenarioError)?.path, path, "\(error)")
                XCTAssertTrue("\(error)".contains("too large for a double"), "\(error)")
            }
        }
        let encoded = try JSONEncoder().encode(JSONValue.array([.number(.infinity), .number(-.infinity), .number(.nan), .number(1.5)]))
        XCTAssertEqual(String(decoding: encoded, as: UTF8.self), #"["Infinity","-Infinity","NaN",1.5]"#)
    }

    /// A fault header holding CR or LF (or a name that is no token, or a 1xx status) is refused
    /// when the file is read: over TCP the mock had answered 500 on its own while its history
    /// recorded the scripted status, and in process the SDK got the scripted answer.
    func testAFaultHeaderNoHTTPMessageMayCarryIsRefused() throws {
        let cases: [(String, String)] = [
            (#"{"respond": {"status": 503, "headers": {"X-A": "a\r\n\r\n{}"}}}"#, "CR"),
            (#"{"respond": {"status": 503, "headers": {"X A": "a"}}}"#, "space"),
            (#"{"respond": {"status": 101}}"#, "final status"),
            (#"{"rate_limited": {"retry_after_date": "Wed, 21 Oct 2015 07:28:00 GMT\nX-Injected: yes"}}"#, "LF"),
            (#"{"wrong_content_type": {"content_type": "text/html\u0000"}}"#, "NUL"),
            (#"{"respond": {"status": 204, "json": {"ok": 1}}}"#, "carries no content"),
            (#"{"respond": {"status": 304, "body": "x"}}"#, "carries no content"),
            (#"{"respond": {"status": 200, "headers": {"Content-Length": "5"}, "body": "0123456789"}}"#, "the transport's"),
            (#"{"respond": {"status": 200, "headers": {"transfer-encoding": "chunked"}}}"#, "the transport's"),
        ]
        for (action, word) in cases {
            XCTAssertThrowsError(try parse(#""steps": [{"fault": {"match": {"path": "/api/v1/tracking/track"}, "action": \#(action)}, "id": "f"}, {"advance": 1}], "checks": ["single_flight"]"#), action) { error in
                XCTAssertTrue("\(error)".contains("$.steps[0].fault.action"), "\(error)")
                XCTAssertTrue("\(error)".contains(word), "\(error)")
            }
        }
        XCTAssertNil(HeaderField.problem(name: "Retry-After", value: "Wed, 21 Oct 2015 07:28:00 GMT\t"))
        // Event properties are an object or null (metadata; every SDK's API takes a dictionary).
        for bad in ["[1,2]", "\"x\"", "3"] {
            XCTAssertThrowsError(try parse(#""steps": [{"do": "trackWithStatus", "event": {"user": "u", "name": "t", "experiment": "e", "properties": \#(bad)}, "expect": {"value": true}}]"#)) { error in
                XCTAssertEqual((error as? ScenarioError)?.path, "$.steps[0].event.properties", "\(error)")
            }
        }
    }

    /// A fault built in code can still hold such a field: the mock answers 500 naming it, and its
    /// history records that 500 (both transports send what history says).
    func testAnUnsendableFaultBuiltInCodeIsAnswered500AndHistorySaysSo() async throws {
        let backend = MockBackend()
        _ = backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/feature-flags/evaluate/sdk_contract_flag"),
                                       action: .respond(status: 503, headers: [HeaderField(name: "X-A", value: "a\r\nb")], body: Data("{}".utf8))))
        let session = backend.makeURLSession()
        var request = URLRequest(url: URL(string: backend.baseURL.absoluteString + "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u")!)
        request.setValue(Fixtures.sdkContractAPIKey, forHTTPHeaderField: "X-API-Key")
        let (body, response) = try await session.data(for: request)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 500)
        XCTAssertTrue(String(decoding: body, as: UTF8.self).contains("no transport can send"), String(decoding: body, as: UTF8.self))
        XCTAssertEqual(backend.history.last?.response?.status, 500)
        _ = backend.shutdown()
    }

    /// Object member names are compared by Unicode scalars in `expect.value`, `cached` values and
    /// `body` matchers: a dictionary finds the member of the same canonical class, whatever its
    /// spelling, and an SDK sending "\u{E9}" passed an expectation of "e\u{301}".
    func testExpectedMemberNamesAreComparedExactly() {
        let nfc = JSONValue.object(["\u{E9}": .number(1)])
        let nfd = JSONValue.object(["e\u{301}": .number(1)])
        XCTAssertTrue(nfc.contains(nfc))
        XCTAssertFalse(nfc.contains(nfd))
        XCTAssertFalse(JSONValue.object(["configuration": nfc]).contains(.object(["configuration": nfd])))
        XCTAssertTrue(nfc.contains(.object(["e\u{301}": .null])), "a null expected member matches an absent one")
    }

    /// `cache_size` bounds the SDK's cache and CONTRACT.md names no eviction order: past it the
    /// model takes every entry as optional and predicts no fan-out. Before, the shipping SDK
    /// (which evicts the oldest) failed `fan_out` and `no_stale_write`, and a variant that never
    /// evicts passed.
    func testPastTheCacheSizeTheChecksAcceptAnyEviction() async throws {
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/sixth-tester/c-cache-size-1-eviction-two-users.json").path
        let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
        for (driver, what) in [(SwiftSDKDriver(), "shipping SDK"), (MutantRun.driver(nil), "faithful variant")] {
            let result = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(result.status, .passed, "\(what): \(result.firstFailure?.message ?? result.reason ?? "")")
        }
        var model = Checks.CacheModel()
        model.flags["u"] = ["a": .init(key: "a", value: .null, expires: 10, order: 1), "b": .init(key: "b", value: .null, expires: 10, order: 2)]
        model.noteSize(limit: 2)
        XCTAssertFalse(model.overflowed)
        model.assignments["u"] = ["x": .init(key: "x", value: .null, expires: 10, order: 3)]
        model.noteSize(limit: 2)
        XCTAssertTrue(model.overflowed)
        XCTAssertTrue(model.flags["u"]!.values.allSatisfy(\.optional) && model.assignments["u"]!.values.allSatisfy(\.optional))
        model.clear()
        XCTAssertFalse(model.overflowed)
    }

    /// An output naming an input scenario is refused before the run, and no output ever replaces
    /// a scenario file; a refused `--junit` naming the verdict's file keeps the verdict.
    func testOutputsNeverReplaceAScenarioOrTheVerdict() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("outputs-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let scenario = dir.appendingPathComponent("s.json")
        try FileManager.default.copyItem(at: Repository.root.appendingPathComponent("scenarios/contract-smoke.json"), to: scenario)
        let original = try Data(contentsOf: scenario)
        for options in [["--verdict", scenario.path], ["--verdict", dir.appendingPathComponent("v.json").path, "--html", scenario.path],
                        ["--verdict", dir.appendingPathComponent("v.json").path, "--junit", dir.path + "/./s.json"]] {
            let status = await HarnessCommand.main(["run", scenario.path] + options)
            XCTAssertEqual(status, 64, "\(options)")
            XCTAssertEqual(try Data(contentsOf: scenario), original, "\(options) replaced the scenario")
        }
        // A link to the verdict's file, before the verdict exists, is the verdict's file.
        try FileManager.default.createSymbolicLink(atPath: dir.appendingPathComponent("link.xml").path, withDestinationPath: "v3.json")
        let linked = await HarnessCommand.main(["run", scenario.path, "--verdict", dir.appendingPathComponent("v3.json").path,
                                                "--junit", dir.appendingPathComponent("link.xml").path])
        XCTAssertEqual(linked, 64)
        XCTAssertTrue((try? String(contentsOfFile: dir.appendingPathComponent("v3.json").path, encoding: .utf8))?.contains("experimently-verdict/1") ?? false)
        let verdict = dir.appendingPathComponent("v2.json").path
        let status = await HarnessCommand.main(["run", scenario.path, "--verdict", verdict, "--junit", verdict])
        XCTAssertEqual(status, 64)
        let written = try String(contentsOfFile: verdict, encoding: .utf8)
        XCTAssertTrue(written.contains("experimently-verdict/1"), String(written.prefix(200)))
        XCTAssertThrowsError(try Data("x".utf8).writeOutput(to: scenario.path))
        XCTAssertEqual(try Data(contentsOf: scenario), original)
    }
}
