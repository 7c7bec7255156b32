import XCTest
import ExperimentlyMock
@testable import ContractHarness

/// Malformed scenario files are rejected with the file, the JSON path, what was expected and what was found.
final class ScenarioParserTests: XCTestCase {
    func parse(_ text: String) throws -> Scenario {
        try ScenarioParser.parse(Data(text.utf8), file: "x.json")
    }

    func expectError(_ text: String, path: String, contains fragment: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try parse(text), file: file, line: line) { error in
            guard let e = error as? ScenarioError else { return XCTFail("not a ScenarioError: \(error)", file: file, line: line) }
            XCTAssertEqual(e.file, "x.json", file: file, line: line)
            XCTAssertEqual(e.path, path, "\(e)", file: file, line: line)
            XCTAssertTrue(e.description.contains(fragment), "\(e)", file: file, line: line)
        }
    }

    let head = #""format": "experimently-scenario/1", "name": "n", "description": "d""#

    func testMinimalScenarioParses() throws {
        let s = try parse("{\(head), \"steps\": [{\"do\": \"hashUser\", \"user\": \"u\", \"key\": \"k\", \"expect\": {\"value\": 0.5}}]}")
        XCTAssertEqual(s.name, "n")
        XCTAssertEqual(s.clients.map(\.name), ["main"])
        XCTAssertEqual(s.stepTimeoutMilliseconds, 5000)
    }

    func testInvalidJSONNamesLineAndColumn() {
        expectError("{\n  \"format\": ,\n}", path: "$", contains: "line 2")
    }

    /// A file that is not JSON says so and what the parser met, with no "expected ..., found
    /// expected ..." (a 73rd outside tester); a trailing comma is named as one.
    func testInvalidJSONReadsAsWhatWasWrong() {
        expectError("{\n  \"format\": ,\n}", path: "$", contains: "x.json: at $: not valid JSON (RFC 8259): unexpected character ',' at line 2, column 13")
        expectError("{\(head), \"steps\": [],\n}", path: "$", contains: "not valid JSON (RFC 8259): a comma before '}' (JSON allows no trailing comma) at line 2, column 1")
        expectError("{\(head), \"steps\": [1, 2,]}", path: "$", contains: "a comma before ']' (JSON allows no trailing comma)")
    }

    /// A missing key names the keys the object has, so one written under another name shows.
    func testAMissingKeyNamesTheKeysTheObjectHas() {
        expectError("{\(head), \"steps\": [{\"do\": \"getAssignment\", \"flag\": \"e\", \"user\": \"u\"}]}", path: "$.steps[0].experiment",
                    contains: "expected a string, found nothing (the key is missing; the object has 'do', 'flag', 'user')")
    }

    /// A value that breaks a stated rule reads as that rule.
    func testABrokenFaultRuleReadsAsTheRule() {
        expectError("{\(head), \"steps\": [{\"fault\": {\"match\": {\"path\": \"/a\"}, \"when\": {\"first\": 0}, \"action\": {\"hold\": {}}}}]}",
                    path: "$.steps[0].fault.when.first",
                    contains: "x.json: at $.steps[0].fault.when.first: 'first' must be at least 1, got 0 (a fault rule: Documentation/ScenarioFormat.md, Faults)")
    }

    func testUnknownTopLevelKey() {
        expectError("{\(head), \"steps\": [{\"do\": \"hashUser\", \"user\": \"u\", \"key\": \"k\", \"expect\": {\"value\": 0.5}}], \"stpes\": []}", path: "$.stpes", contains: "unknown key 'stpes'")
    }

    /// A misspelt key names the known key it most likely means (a seventy-third outside tester);
    /// a name far from every known key gets no guess.
    func testAMisspeltKeyNamesTheKeyItMostLikelyMeans() {
        expectError("{\(head), \"steps\": [{\"do\": \"hashUser\", \"user\": \"u\", \"key\": \"k\", \"expct\": {\"value\": 0.5}}]}",
                    path: "$.steps[0].expct", contains: "unknown key 'expct' (did you mean 'expect'?)")
        expectError("{\(head), \"steps\": [{\"asert\": {\"quiescence\": true}}]}", path: "$.steps[0]", contains: "(did you mean 'assert'?)")
        XCTAssertEqual(ObjectReader.didYouMean("xyzzy", among: ["steps", "checks"]), "")
        XCTAssertEqual(ObjectReader.didYouMean("wait-for", among: ["wait_for", "await"]), " (did you mean 'wait_for'?)")
    }

    func testWrongFormatTag() {
        expectError(#"{"format": "experimently-scenario/2", "name": "n", "description": "d", "steps": []}"#,
                    path: "$.format", contains: "experimently-scenario/1")
    }

    func testMissingSteps() {
        expectError("{\(head)}", path: "$.steps", contains: "the key is missing")
    }

    func testUnknownKeyInStep() {
        expectError("{\(head), \"steps\": [{\"do\": \"evaluateFlag\", \"flag\": \"f\", \"user\": \"u\", \"usr\": 1}]}",
                    path: "$.steps[0].usr", contains: "unknown key 'usr'")
    }

    func testUnknownOperation() {
        expectError("{\(head), \"steps\": [{\"do\": \"evaluate\", \"flag\": \"f\"}]}", path: "$.steps[0].do", contains: "evaluateFlag")
    }

    func testWrongValueKind() {
        expectError("{\(head), \"steps\": [{\"advance\": \"ten\"}]}", path: "$.steps[0].advance", contains: "found string \"ten\"")
    }

    func testTwoVerbsInOneStep() {
        expectError("{\(head), \"steps\": [{\"advance\": 1, \"await\": \"x\"}]}", path: "$.steps[0]", contains: "several")
    }

    func testAwaitOfUnknownLabel() {
        expectError("{\(head), \"steps\": [{\"await\": \"nope\"}]}", path: "$.steps[0].await", contains: "started earlier")
    }

    func testAsyncNeedsLabel() {
        expectError("{\(head), \"steps\": [{\"do\": \"clearCache\", \"async\": true}]}", path: "$.steps[0].as", contains: "label")
    }

    func testUnknownErrorKind() {
        expectError("{\(head), \"steps\": [{\"do\": \"evaluateFlag\", \"flag\": \"f\", \"user\": \"u\", \"expect\": {\"error\": \"notFound\"}}]}",
                    path: "$.steps[0].expect.error", contains: "flagNotFound")
    }

    func testUnknownCheck() {
        expectError("{\(head), \"steps\": [{\"do\": \"hashUser\", \"user\": \"u\", \"key\": \"k\", \"expect\": {\"value\": 0.5}}], \"checks\": [\"stickyness\"]}", path: "$.checks[0]", contains: "stickiness")
    }

    func testUnknownClient() {
        expectError("{\(head), \"steps\": [{\"do\": \"clearCache\", \"client\": \"z\"}]}", path: "$.steps[0].client", contains: "main")
    }

    func testReleaseOfUnknownFault() {
        expectError("{\(head), \"steps\": [{\"release\": \"h\"}]}", path: "$.steps[0].release", contains: "fault added earlier")
    }

    func testAppStepNeedsAppSection() {
        expectError("{\(head), \"steps\": [{\"app\": \"display\"}]}", path: "$.steps[0].app", contains: "\"app\" section")
    }

    func testBadFaultRuleIsAMalformedFileWithItsPath() {
        expectError("{\(head), \"steps\": [{\"fault\": {\"action\": {\"hold\": {}, \"delay\": {\"seconds\": 1}}}, \"id\": \"f\"}]}",
                    path: "$.steps[0].fault.action", contains: "exactly one of")
        expectError("{\(head), \"steps\": [{\"fault\": {\"action\": {\"respond\": {\"status\": -5}}}, \"id\": \"f\"}]}",
                    path: "$.steps[0].fault.action.respond", contains: "200...599")
        expectError("{\(head), \"steps\": [{\"fault\": {\"action\": {\"hold\": {}}}, \"id\": \"f\"}, {\"fault\": {\"action\": {\"hold\": {}}}, \"id\": \"f\"}]}",
                    path: "$.steps[1].id", contains: "not used before")
    }

    func testBadFixturesAreAMalformedFile() {
        expectError("{\(head), \"fixtures\": {\"api_keys\": [], \"flagz\": []}, \"steps\": []}", path: "$.fixtures.flagz", contains: "unknown key")
    }
}
