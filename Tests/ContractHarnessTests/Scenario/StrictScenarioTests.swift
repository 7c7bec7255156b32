import XCTest
import ExperimentlyMock
@testable import ContractHarness

/// Every expectation a file states is evaluated or the file is malformed (issue 11 section 2), and
/// hostile input is refused or made harmless (issue 10 section 3): duplicate keys, empty steps,
/// misspelt capabilities, assertions that check nothing, control characters.
final class StrictScenarioTests: XCTestCase {
    let head = #""format": "experimently-scenario/1", "name": "n", "description": "d""#
    let good = #"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"value": {"variant_name": "control"}}}"#

    func expectError(_ text: String, path: String, contains fragment: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try ScenarioParser.parse(Data(text.utf8), file: "x.json"), file: file, line: line) { error in
            guard let e = error as? ScenarioError else { return XCTFail("not a ScenarioError: \(error)", file: file, line: line) }
            XCTAssertEqual(e.path, path, "\(e)", file: file, line: line)
            XCTAssertTrue(e.description.contains(fragment), "\(e)", file: file, line: line)
        }
    }

    func testTheGoodScenarioParses() throws {
        XCTAssertNoThrow(try ScenarioParser.parse(Data("{\(head), \"steps\": [\(good)]}".utf8), file: "x.json"))
    }

    // MARK: Duplicate keys

    func testDuplicateKeysAreRejectedWithTheirPath() {
        expectError("{\(head), \"name\": \"again\", \"steps\": [\(good)]}", path: "$.name", contains: "a second time")
        expectError(#"{\#(head), "steps": [{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"value": {"variant_name": "control", "variant_name": "treatment"}}}]}"#,
                    path: "$.steps[0].expect.value.variant_name", contains: "each key at most once")
        expectError(#"{\#(head), "steps": [\#(good), {"assert": {"requests": {"path": "/a"}, "count": 1, "count": 2}}]}"#,
                    path: "$.steps[1].assert.count", contains: "\"count\" a second time")
    }

    func testDuplicateKeysAreFoundThroughEscapesAndCanonicalEquivalence() {
        // "\u0063ount" is "count" spelled with an escape: the same key.
        expectError(#"{\#(head), "steps": [\#(good), {"assert": {"requests": {}, "count": 1, "\u0063ount": 2}}]}"#,
                    path: "$.steps[1].assert.count", contains: "a second time")
        // NFC and NFD é as two member names of one object: the parsed object would keep one.
        expectError("{\(head), \"steps\": [\(good)], \"fixtures\": {\"api_keys\": [], \"\u{E9}\": 1, \"e\u{301}\": 2}}",
                    path: #"$.fixtures["e\u0301"]"#, contains: "canonically equivalent")   // escaped: not in NFC
    }

    func testSameKeyInDifferentObjectsIsFine() throws {
        XCTAssertNoThrow(try ScenarioParser.parse(Data("{\(head), \"steps\": [\(good), \(good)]}".utf8), file: "x.json"))
        XCTAssertNil(DuplicateKeys.first(in: Array(#"{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}], "c": "\"a\": 1, \"a\""}"#.utf8)))
    }

    // MARK: Scenarios and assertions that check nothing

    func testEmptyStepsAreMalformed() {
        expectError("{\(head), \"steps\": []}", path: "$.steps", contains: "at least one step")
    }

    func testAScenarioWithoutAnyExpectationIsMalformed() {
        expectError(#"{\#(head), "steps": [{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1"}]}"#,
                    path: "$", contains: "something to check")
        // A named check is something to check.
        XCTAssertNoThrow(try ScenarioParser.parse(Data(#"{\#(head), "steps": [{"advance": 1}], "checks": ["stickiness"]}"#.utf8), file: "x.json"))
    }

    func testRequestsAssertionWithoutCountOrBatchSizesIsMalformed() {
        expectError(#"{\#(head), "steps": [{"assert": {"requests": {"path": "/api/v1/tracking/assign"}}}]}"#,
                    path: "$.steps[0].assert", contains: "\"count\" or \"batch_sizes\"")
    }

    func testCacheAssertionNamingOnlyAUserIsMalformed() {
        expectError(#"{\#(head), "steps": [{"assert": {"cache": {"user": "user-1"}}}]}"#,
                    path: "$.steps[0].assert.cache", contains: "\"assignments\" or \"flags\"")
        // A misspelt key is reported as such, not as an empty assertion.
        expectError(#"{\#(head), "steps": [{"assert": {"cache": {"user": "user-1", "asignments": []}}}]}"#,
                    path: "$.steps[0].assert.cache.asignments", contains: "unknown key")
    }

    func testEmptyAppAssertionIsMalformed() {
        expectError(#"{\#(head), "app": {"flag": "f", "experiment": "e"}, "steps": [{"assert": {"app": {}}}]}"#,
                    path: "$.steps[0].assert.app", contains: "\"shown\", \"identity\" or \"source\"")
    }

    func testPersistedValueWithPresentFalseIsMalformed() {
        expectError(#"{\#(head), "steps": [{"assert": {"persisted": {"user": "u", "experiment": "e", "present": false, "value": {"a": 1}}}}]}"#,
                    path: "$.steps[0].assert.persisted.value", contains: "present")
    }

    func testMisspeltCapabilityIsMalformed() {
        expectError("{\(head), \"steps\": [\(good)], \"requires\": [\"virtual_clock\", \"virtual-clock\"]}",
                    path: "$.requires[1]", contains: "virtual_clock")
    }

    /// The CLI: a malformed file exits 64 naming the JSON path (through `HarnessCommand.main`).
    func testMalformedFileExitsSixtyFourWithThePath() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("strict-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("bad.json")
        try Data("{\(head), \"steps\": [\(good)], \"requires\": [\"virtual-clock\"]}".utf8).write(to: file)
        let verdict = dir.appendingPathComponent("v.json").path
        let status = await HarnessCommand.main(["run", file.path, "--verdict", verdict])
        XCTAssertEqual(status, 64)
        let text = try String(contentsOfFile: verdict, encoding: .utf8)
        XCTAssertTrue(text.contains("$.requires[0]"), text)
    }

    // MARK: Terminal safety

    func testControlCharactersAreEscapedForTheTerminal() {
        XCTAssertEqual(TerminalText.escape("plain name é"), "plain name é")
        XCTAssertEqual(TerminalText.escape("a\u{1B}[2Jb\nPASS  fake\r"), "a\\u{1B}[2Jb\\u{A}PASS  fake\\u{D}")
        XCTAssertEqual(TerminalText.escape("x\u{202E}y\u{9B}z\u{7F}"), "x\\u{202E}y\\u{9B}z\\u{7F}")
    }

    func testConsoleLineOfAScenarioWithControlCharactersInItsNameIsEscaped() {
        let r = ScenarioResult(name: "evil\u{1B}]0;title\u{07}\nPASS  other", file: "f", tags: [], source: nil, status: .failed,
                               durationMilliseconds: 1, checks: [CheckResult(name: "c", passed: false, message: "m\u{1B}[31m")],
                               reason: nil, smoke: nil, history: [], historyDigest: "")
        let shown = TerminalText.escape(HarnessCommand.line(for: r))
        XCTAssertFalse(shown.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, shown)
        XCTAssertTrue(shown.contains("evil\\u{1B}]0;title\\u{7}\\u{A}PASS  other"), shown)
        // A name not in NFC reads apart from its NFC twin; an NFC one as it is.
        for (name, reads) in [("Jose\u{301}", "PASS  Jose\\u{301} ("), ("Jos\u{E9}", "PASS  Jos\u{E9} (")] {
            let passed = ScenarioResult(name: name, file: "f", tags: [], source: nil, status: .passed, durationMilliseconds: 1, checks: [],
                                        reason: nil, smoke: nil, history: [], historyDigest: "")
            XCTAssertTrue(HarnessCommand.line(for: passed).hasPrefix(reads), HarnessCommand.line(for: passed))
        }
    }
}
