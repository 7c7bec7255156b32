import XCTest
import Foundation
@testable import ExperimentlyMock
@testable import ContractHarness
import ExperimentlyMutants

/// Findings of the twenty-second outside tester (`/work/attack23/FINDINGS.md`: CONTRACT.md read
/// rule by rule, a defect written for each): twenty rules no shipped scenario enforced, each now
/// proven both ways by a shipped scenario that fails its defect switch of the Python example and
/// passes the correct SDKs.
final class TwentySecondTesterFindingsTests: XCTestCase {
    /// The new files, each with the Python example's defects it catches and a line of the failure.
    static let cases: [(file: String, defect: String, says: String)] = [
        ("field-keyed-track-has-its-own-deadline", "track-no-deadline", "past its client's timeout of 3.0 s"),
        ("field-offline-store-entries-never-collide", "store-key-collides", "persisted flag 'b_c' for 'a'"),
        ("field-offline-store-entries-never-collide", "store-key-colon", "persisted flag 'b:c' for 'a'"),
        ("field-fallback-on-every-4xx-but-404", "no-fallback-4xx", #"expected a value containing {"configuration":{"color":"green"}"#),
        ("field-404-removes-only-that-kind-user-and-key", "404-deletes-both-kinds", "expected a persisted experiment 'dual'"),
        ("field-404-removes-only-that-kind-user-and-key", "404-deletes-user", "expected a persisted experiment"),
        ("field-cache-and-flight-keyed-by-user-and-key-only", "cache-key-attrs", "expected 1 request(s) matching /api/v1/tracking/assign"),
        ("field-cache-and-flight-keyed-by-user-and-key-only", "flight-key-attrs", "expected 1 request(s) matching /api/v1/feature-flags/evaluate/sdk_contract_flag, saw 2"),
        ("field-offline-fallback-off-never-serves-the-store", "store-ignores-fallback-off", "expected error serverError"),
        ("field-clear-offline-cache-clears-only-the-store", "clear-offline-flags-only", "expected no persisted experiment"),
        ("field-clear-offline-cache-clears-only-the-store", "clear-offline-clears-memory", "cached assignments of user-1 on main"),
        ("field-cache-hit-keeps-insertion-order", "lru-on-hit", #"expected ["exp_a", "exp_b"], got ["exp_b", "exp_a"]"#),
        ("field-is-control-read-from-the-answer", "is-control-by-name", #""is_control":true"#),
        ("field-reserved-characters-escaped-in-the-query", "query-slash-literal", "user_id=u%2F1%3F2%3A3%404"),
        ("field-event-type-given-empty-and-both-keys-sent", "both-keys-drop-flag", "feature_flag_key"),
        ("field-event-type-given-empty-and-both-keys-sent", "empty-type-as-name", "event_type"),
        ("field-every-2xx-answer-is-a-success", "track-only-200", "expected a value containing true, got false"),
        ("field-every-2xx-answer-is-a-success", "lookup-only-200", "got error serverError"),
        ("field-ineligible-answer-persisted-and-served-offline", "no-persist-ineligible", "expected a persisted experiment 'exp_us_only'"),
        ("field-base-url-with-a-trailing-slash", "trailing-slash", "got error flagNotFound"),
        ("field-evaluate-flag-sends-only-the-user-id", "evaluate-sends-context", #"got {"config":null,"enabled":true,"key":"us_only_flag"}"#),
        ("field-concurrent-unkeyed-events-each-fan-out-their-own-fields", "batch-as-text", "expected a value containing true, got false"),
        ("golden-vectors-beyond-ascii", "hash-nfc", "golden-vectors-beyond-ascii"),
        ("golden-vectors-beyond-ascii", "hash-latin1", "golden-vectors-beyond-ascii"),
    ]

    /// Each new shipped scenario fails its defect switches of the Python example and passes the
    /// example as it is (out of process, through the driver protocol).
    func testEachNewScenarioFailsItsPythonDefectsAndPassesTheExample() throws {
        let dir = try scratchDirectory("twenty-second-defects")
        let driver = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
        let files = Array(Set(Self.cases.map(\.file))).sorted().map { Repository.root.appendingPathComponent("scenarios/\($0).json").path }
        let (ok, okOut) = try HarnessProcess.run(["run"] + files + ["--sdk-command", driver, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(ok, 0, "the example: \(okOut)")
        XCTAssertTrue(okOut.contains("\(files.count) passed, 0 failed"), okOut)
        for c in Self.cases {
            let file = Repository.root.appendingPathComponent("scenarios/\(c.file).json").path
            let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=\(c.defect) " + driver,
                                                        "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, "\(c.file) with \(c.defect): \(out)")
            XCTAssertTrue(out.contains("FAIL  \(c.file)") && out.contains(c.says), "\(c.file) with \(c.defect): \(out)")
        }
    }

    /// The shipping SDK and the faithful variant pass the new files in process.
    func testTheNewScenariosPassInProcess() async throws {
        for name in Set(Self.cases.map(\.file)).sorted() {
            let scenario = try ScenarioParser.load(path: Repository.root.appendingPathComponent("scenarios/\(name).json").path)
            for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
                let r = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(r.status, .passed, "\(name) on \(driver.sdkName): \(r.checks.filter { !$0.passed })")
            }
        }
    }

    /// `{{mock}}` in a `base_url` is the mock's origin and the rest; anywhere but at the start it
    /// is refused with the field named. A client so configured is the mock's (`reachesMock`).
    func testTheMockPlaceholderResolvesToTheMocksOrigin() throws {
        var settings = ClientSettings()
        XCTAssertTrue(settings.reachesMock)
        XCTAssertEqual(settings.resolvedBaseURL(mock: "http://backend-7.mock.invalid"), "http://backend-7.mock.invalid")
        settings.baseURL = "{{mock}}/"
        XCTAssertTrue(settings.reachesMock)
        XCTAssertFalse(settings.elsewhere)
        XCTAssertEqual(settings.resolvedBaseURL(mock: "http://127.0.0.1:9"), "http://127.0.0.1:9/")
        settings.baseURL = "http://example.invalid"
        XCTAssertFalse(settings.reachesMock)
        XCTAssertEqual(settings.resolvedBaseURL(mock: "http://127.0.0.1:9"), "http://example.invalid")
        func parse(_ baseURL: String) throws -> Scenario {
            try ScenarioParser.parse(Data(#"{"format": "experimently-scenario/1", "name": "n", "description": "d", "clients": {"main": {"config": {"base_url": "\#(baseURL)"}}}, "steps": [{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "expect": {"value": {"enabled": true}}}]}"#.utf8), file: "n.json")
        }
        XCTAssertNoThrow(try parse("{{mock}}/"))
        XCTAssertNoThrow(try parse("{{mock}}"))
        // Anything else is no origin (a path, a port, a dot segment the in-process and loopback
        // loading systems read differently) or a typo: malformed, with the field named (the
        // twenty-third outside tester's `{{mock}}/.`, `{{mock}}/api`, `{{MOCK}}`).
        for bad in ["http://x/{{mock}}", "{{mock}}/.", "{{mock}}/api", "{{mock}}:80", "{{mock}}//", "{{MOCK}}", " {{mock}}", "{{mock}}?a=b",
                    "{{mock}}\u{301}"] {
            XCTAssertThrowsError(try parse(bad), bad) { error in
                XCTAssertTrue("\(error)".contains("base_url") && "\(error)".contains("{{mock}}/"), "\(error)")
            }
        }
    }

    /// Two scenario names that differ only in Unicode normalization are refused as one name, and
    /// the message shows both spellings and says why (it said `found "José"` for both).
    func testNamesThatPrintAlikeAreRefusedWithBothSpellings() throws {
        let dir = try scratchDirectory("twenty-third-names")
        for (file, name) in [("a.json", "Jos\u{E9}"), ("b.json", "Jose\u{301}")] {
            let text = #"{"format": "experimently-scenario/1", "name": "\#(name)", "description": "d", "steps": [{"do": "hashUser", "user": "u", "key": "k", "expect": {"value": 0.5}}]}"#
            try Data(text.utf8).write(to: dir.appendingPathComponent(file))
        }
        let (_, out) = try HarnessProcess.run(["run", "a.json", "b.json", "--verdict", "v.json"], in: dir)
        XCTAssertTrue(out.contains(#"found "Jose\u0301" (also in a.json as "Jos\#u{E9}": names that differ only in Unicode normalization"#), out)
    }

    /// A `hashUser` value meets an expected number within 1e-10 (CONTRACT.md section 6: published
    /// values carry 16 significant digits), not only when equal; further off it fails.
    func testAnExpectedHashIsMetWithinTheContractsTolerance() {
        let want = OutcomeExpectation.value(.number(0.6927449859213084))
        XCTAssertNil(ScenarioExecution.mismatch(.value(.number(0.692744985921308)), want), "16 significant digits")
        XCTAssertNil(ScenarioExecution.mismatch(.value(.number(0.6927449859213084 + 5e-11)), want))
        XCTAssertNotNil(ScenarioExecution.mismatch(.value(.number(0.6927449859213084 + 2e-10)), want))
        XCTAssertNotNil(ScenarioExecution.mismatch(.value(.number(0.5)), want))
        // Numbers inside a value still compare exactly (configurations are data, not hashes).
        XCTAssertNotNil(ScenarioExecution.mismatch(.value(.object(["v": .number(1 + 1e-12)])), .value(.object(["v": .number(1)]))))
    }

    /// A key fetched again after it expired may keep its place or take a new one (CONTRACT.md says
    /// "insertion order", not which): the example's `refresh-keeps-position` freedom passes every
    /// shipped file that could tell, through `fan_out` and the listing checks.
    func testARefetchedKeyMayKeepItsPlace() throws {
        let dir = try scratchDirectory("twenty-third-refetch")
        let driver = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
        let files = ["field-refetch-after-ttl-in-either-place", "field-cache-hit-keeps-insertion-order", "field-ttl-expiry-refetches-and-stops-fanout", "s4-cache-ttl-expiry"]
            .map { Repository.root.appendingPathComponent("scenarios/\($0).json").path }
            .filter { FileManager.default.fileExists(atPath: $0) }
        XCTAssertEqual(files.count, 4)
        for freedom in ["", "refresh-keeps-position"] {
            let (status, out) = try HarnessProcess.run(["run"] + files + ["--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=\(freedom) " + driver,
                                                                         "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "freedom '\(freedom)': \(out)")
        }
    }

    /// The faithful variant says `invalidConfig` for a base URL that is no http(s) origin, as the
    /// shipping SDK does (it said `networkError`: the tester's F14).
    func testTheFaithfulVariantCallsAnUnusableBaseURLInvalidConfig() async throws {
        let scenario = try ScenarioParser.parse(Data(#"""
            {"format": "experimently-scenario/1", "name": "n", "description": "d",
             "clients": {"main": {"config": {"base_url": "not a url"}}},
             "steps": [{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "expect": {"error": "invalidConfig"}},
                       {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "u", "expect": {"error": "invalidConfig"}}]}
            """#.utf8), file: "n.json")
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })")
        }
    }
}
