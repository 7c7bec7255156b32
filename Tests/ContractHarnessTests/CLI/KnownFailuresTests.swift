import XCTest
@testable import ContractHarness

/// `--skip` / `--skip-from`: a failing known failure is reported KNOWN and counted as skipped, a
/// passing one FIXED; names compare by Unicode scalars; `#` comments are the reasons.
final class KnownFailuresTests: XCTestCase {
    func result(_ name: String, _ status: ScenarioResult.Status) -> ScenarioResult {
        ScenarioResult(name: name, file: "f.json", tags: ["race"], source: nil, status: status, durationMilliseconds: 1,
                       checks: status == .failed ? [CheckResult(name: "step 2 assert", passed: false, message: "expected 1, saw 2")] : [],
                       reason: nil, smoke: nil, history: [], historyDigest: "")
    }

    func scenario(_ name: String) throws -> Scenario {
        try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "\(name)", "description": "d", "tags": ["race"], "checks": ["single_flight"], "steps": [{"do": "clearCache"}]}
        """.utf8), file: "f.json")
    }

    func testSkipFromFileReadsNamesAndCommentsAndReportsKnownAndFixed() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("known-\(getpid()).txt")
        try "# reasons go in comments\nflaky-one   # over TCP\n\n  caf\u{E9}\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        var known = KnownFailures()
        try known.load(file.path)
        XCTAssertEqual(Set(known.names.keys), ["flaky-one", "caf\u{E9}"])
        XCTAssertTrue(known.matches(try scenario("flaky-one")))
        XCTAssertTrue(known.matches(try scenario("caf\u{E9}")))
        XCTAssertFalse(known.matches(try scenario("cafe\u{301}")), "canonically equal but other scalars: not the same name")
        XCTAssertFalse(known.matches(try scenario("other")))

        var failing = result("flaky-one", .failed)
        XCTAssertEqual(known.apply(&failing), "KNOWN flaky-one: step 2 assert: expected 1, saw 2")
        XCTAssertEqual(failing.status, .skipped)
        XCTAssertEqual(failing.reason, "known failure: step 2 assert: expected 1, saw 2")
        var passing = result("flaky-one", .passed)
        XCTAssertEqual(known.apply(&passing), "FIXED flaky-one: listed as a known failure but passes now; remove it from \(file.path)")
        XCTAssertEqual(passing.status, .passed)
    }

    /// A file written on Windows (CRLF) reads as one with LF; NFC and NFD spellings of a name are
    /// two entries; an entry naming no scenario of the run is listed for a warning (an outside
    /// tester: a CRLF file matched nothing and said nothing).
    func testWindowsLineEndsBothSpellingsAndUnmatchedNames() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("known-crlf-\(getpid()).txt")
        try "flaky-one\r\ncaf\u{E9}  # NFC\r\ncafe\u{301}\r\ntypo-name\r\n".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        var known = KnownFailures()
        try known.load(file.path)
        XCTAssertEqual(known.names.count, 4)
        for name in ["flaky-one", "caf\u{E9}", "cafe\u{301}"] { XCTAssertTrue(known.matches(try scenario(name)), name) }
        let unmatched = known.unmatched(in: [try scenario("flaky-one"), try scenario("caf\u{E9}")])
        XCTAssertEqual(unmatched.map(\.name), ["cafe\u{301}", "typo-name"].sorted())
        XCTAssertEqual(Set(unmatched.map(\.file)), [file.path])
    }

    func testSkipTextMatchesNamesAndTagsAndAMissingFileIsAUsageError() throws {
        var known = KnownFailures(patterns: ["rac"])
        XCTAssertTrue(known.matches(try scenario("anything")), "the tag 'race' contains 'rac'")
        XCTAssertThrowsError(try known.load("/nonexistent/known.txt")) { error in
            XCTAssertTrue((error as? HarnessCommand.UsageError)?.message.contains("/nonexistent/known.txt") == true)
        }
    }

    /// A known failure that crashed stays a crash (counted, failing the run) and says it was
    /// listed (a forty-seventh outside tester, G: it was KNOWN, `crashed` 0, exit 0).
    func testAKnownFailureThatCrashedStaysACrash() throws {
        let known = KnownFailures(patterns: ["flaky"])
        var crashed = result("flaky-one", .crashed)
        crashed.reason = "crash: the worker process died of SIGILL"
        XCTAssertNil(known.apply(&crashed), "the CRASH line is printed")
        XCTAssertEqual(crashed.status, .crashed)
        XCTAssertEqual(crashed.reason, "crash: the worker process died of SIGILL [listed as a known failure, but it crashed: a known failure never covers a crash]")
        _ = known.apply(&crashed)
        XCTAssertEqual(crashed.reason?.components(separatedBy: "[listed").count, 2, "said once")
    }
}
