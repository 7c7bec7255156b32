import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// An eleventh outside tester wrote an SDK and adapter in JavaScript from the docs alone and used
/// `serve`, journals and `scenario --from-journal` as another language's maintainer would
/// (`/work/attack12/FINDINGS.md`). What it found at the edges, each fixed here.
final class EleventhTesterFindingsTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws { dir = try scratchDirectory("eleventh") }

    /// A journal `serve` wrote, with a `/track` holding `"value": 1e999` (accepted by the mock,
    /// kept verbatim by the journal), a request sent without an API key (answered 401) and an
    /// assignment with `context: {}`: the skeleton maps the rest, lists those two as not mapped
    /// with why, keeps the empty attributes, and passes against the shipping SDK. Before, the
    /// whole journal was refused (exit 64), and the skeleton expected a 401 no SDK can produce.
    func testAJournalWithAnUnstatableRequestStillBecomesAPassingSkeleton() throws {
        let journal = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/eleventh-tester/journal-huge-value-no-key-empty-context.json")
        let text = try JournalScenario.skeleton(journal: Data(contentsOf: journal), file: journal.path, grouping: .one)
        let root = try JSONValue.parse(Data(text.utf8)).value
        let description = root["description"]?.stringValue ?? ""
        XCTAssertTrue(description.contains("#7 POST /api/v1/tracking/track: its body holds a number beyond a double's range"), description)
        XCTAssertTrue(description.contains("sent without an X-API-Key header (answered 401)"), description)
        let steps = root["steps"]?.arrayValue ?? []
        XCTAssertTrue(steps.contains { $0["user"] == .object(["id": .string("u4"), "attributes": .object([:])]) }, "\(steps)")
        let file = dir.appendingPathComponent("skeleton.json")
        try Data(text.utf8).write(to: file)
        let (status, out) = try HarnessProcess.run(["run", file.path, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
    }

    /// A journal `serve` wrote with a batch whose event metadata, an assignment whose context and
    /// an evaluation whose `?context=` have the member names `"k\u0301"` and `"\u1e31"`
    /// (canonically equivalent, different scalars; the backend keeps both, and so does the
    /// journal's `state.events`): those three requests are listed as not mapped, naming the
    /// member, and the rest is converted. Before, the whole journal was refused (exit 64; a
    /// forty-eighth outside tester, H2; then for its `state`, a fifty-third, A), and the query's
    /// context was merged silently (the fifty-third, E).
    func testAJournalWithEquivalentMemberNamesListsThoseRequestsAndConvertsTheRest() throws {
        let journal = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/forty-eighth-tester/journal-equivalent-names-with-state.json")
        let text = try JournalScenario.skeleton(journal: Data(contentsOf: journal), file: journal.path, grouping: .one)
        let root = try JSONValue.parse(Data(text.utf8)).value
        let description = root["description"]?.stringValue ?? ""
        XCTAssertTrue(description.contains(#"#2 POST /api/v1/tracking/batch: it has two canonically equivalent spellings of one member name in json.events[0].metadata (the second one "\u1e31"), which a scenario's object cannot keep apart"#), description)
        XCTAssertTrue(description.contains(#"#3 POST /api/v1/tracking/assign: it has two canonically equivalent spellings of one member name in json.context (the second one "\u1e31")"#), description)
        XCTAssertTrue(description.contains(#"its context query has two canonically equivalent spellings of one member name in context (the second one "\u1e31")"#), description)
        let steps = root["steps"]?.arrayValue ?? []
        XCTAssertTrue(steps.contains { $0["do"] == .string("getAssignment") && $0["user"] == .string("user-1") }, "\(steps)")
        XCTAssertTrue(steps.contains { $0["do"] == .string("evaluateFlag") && $0["user"] == .string("user-4") }, "\(steps)")
        XCTAssertEqual(steps.filter { $0["do"] != nil }.count, 2, "\(steps)")
        let file = dir.appendingPathComponent("equivalent.json")
        try Data(text.utf8).write(to: file)
        let (status, out) = try HarnessProcess.run(["run", file.path, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
        // Anywhere else in the journal, such a name still refuses the file, naming where.
        var bad = String(decoding: try Data(contentsOf: journal), as: UTF8.self)
        bad = bad.replacingOccurrences(of: #""format""#, with: #""note": 1, "note": 2, "format""#)
        XCTAssertThrowsError(try JournalScenario.skeleton(journal: Data(bad.utf8), file: "j.json")) { error in
            XCTAssertTrue("\(error)".contains("$.note"), "\(error)")
        }
    }

    /// Two kinds of request no scenario can replay are listed by request, never converted into
    /// something else (a fifty-fourth outside tester): an evaluate with a `context` (an SDK keeping
    /// to the contract sends only `user_id`, so the skeleton failed the shipping SDK; L), and a body
    /// with an integer beyond 2^53 (Python keeps it exactly; it became a rounded double; M). These
    /// journals hold nothing else, so the file is refused, naming each request.
    func testEvaluateContextsAndIntegersBeyondTwoToThe53AreListedNotChanged() throws {
        let folder = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/forty-eighth-tester")
        for (name, says) in [("journal-evaluate-with-context.json", ["#1 GET", "#2 POST", "it sends a context on evaluate"]),
                             ("journal-integers-beyond-2-53.json", ["its body holds the integer 9007199254740993 (json.metadata.n)",
                                                                    "(json.events[0].metadata.n)", "(json.value)"])] {
            let url = folder.appendingPathComponent(name)
            XCTAssertThrowsError(try JournalScenario.skeleton(journal: Data(contentsOf: url), file: url.path, grouping: .one)) { error in
                for text in says { XCTAssertTrue("\(error)".contains(text), "\(name): \(error)") }
            }
        }
    }

    /// An adapter that cannot start (it exits before `hello`) is the SDK's failure: exit 1 and
    /// every selected scenario an `error` naming why. Before: exit 70 ("internal fault") and a
    /// verdict with no scenario.
    func testAnAdapterThatCannotStartFailsEveryScenarioWithExitOne() throws {
        let scenarios = ["contract-smoke", "s4-cache-is-per-user"].map { Repository.root.appendingPathComponent("scenarios/\($0).json").path }
        let (status, out) = try HarnessProcess.run(["run"] + scenarios + ["--sdk-command", "exit 3", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        let verdict = try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent("v.json"))).value
        XCTAssertEqual(verdict["counts"]?["error"], .number(2))
        XCTAssertEqual(verdict["ok"], .bool(false))
        let reasons = (verdict["scenarios"]?.arrayValue ?? []).compactMap { $0["reason"]?.stringValue }
        XCTAssertEqual(reasons.count, 2)
        XCTAssertTrue(reasons.allSatisfy { $0.hasPrefix("the SDK adapter cannot be used") }, "\(reasons)")
    }

    /// A capability name the harness does not know is named, with the one it most likely means.
    func testUnknownCapabilitiesAreNamedWithTheLikelyMeaning() {
        XCTAssertEqual(HarnessCommand.unknownCapabilities(["virtualClock", "settle", "Offline-Store", "bogus"]),
                       ["'Offline-Store' (did you mean 'offline_store'?)", "'bogus'", "'virtualClock' (did you mean 'virtual_clock'?)"])
        XCTAssertEqual(HarnessCommand.unknownCapabilities(Set(Scenario.knownCapabilities)), [])
        XCTAssertTrue(HarnessCommand.importantCapabilities.contains("seed_store"))
    }
}
