import XCTest
import Foundation
@testable import ContractHarness

/// Issue 10 section 4: where an operation's completion falls among concurrent work (the login's
/// completion against the next user's flag fetch) is thread timing; the canonical history and its
/// digest must not depend on it.
final class CanonicalOrderTests: XCTestCase {
    static let logoutFile = Repository.root.appendingPathComponent("scenarios/app-logout-while-flag-fetch-pending.json").path

    func event(_ kind: HistoryEvent.Kind, _ name: String, label: String? = nil, client: String? = "main") -> HistoryEvent {
        HistoryEvent(index: 0, step: 0, time: 0, kind: kind, client: client, label: label, name: name,
                     detail: nil, outcome: kind == .complete ? .string(name) : nil, request: nil)
    }

    /// The interleavings seen under load: the login completion before, between or after the
    /// logout's fetch events give one canonical history; moving it past the runner's next own
    /// event (a different segment) does not.
    func testACompletionsPlaceAmongConcurrentEventsDoesNotChangeTheCanonicalHistory() {
        let release = event(.marker, "release", client: nil)
        let discarded = event(.marker, "discarded")
        let login = event(.complete, "app.login", label: "login")
        let fetch = [event(.marker, "refresh-request"), event(.marker, "refresh-response"), event(.marker, "fetched")]
        let logout = event(.complete, "app.logout", label: "logout")
        let next = event(.invoke, "app.display", label: "op1")
        var variants: [[HistoryEvent]] = []
        for position in 0...fetch.count {
            var tail = fetch
            tail.insert(login, at: position)
            variants.append([release, discarded] + tail + [logout, next])
        }
        variants.append([release, discarded] + fetch + [logout, login, next])
        let canonical = variants.map { ScenarioExecution.canonical($0) }
        for c in canonical.dropFirst() { XCTAssertEqual(c, canonical[0]) }
        XCTAssertEqual(Set(canonical.map(ScenarioExecution.digest)).count, 1)
        // A completion after the next invoke is another history.
        let later = ScenarioExecution.canonical([release, discarded] + fetch + [logout, next, login])
        XCTAssertNotEqual(ScenarioExecution.digest(later), ScenarioExecution.digest(canonical[0]))
    }

    /// Two completions of canonically equivalent but different labels (NFC `é`, NFD `e` + U+0301)
    /// in either recorded order give one canonical history: ties are broken by Unicode scalars, not
    /// by `String <` (which calls them equal and kept the thread order: a seventeenth outside tester's
    /// 2 digests in 30 runs).
    func testCompletionsOfEquivalentLabelsAreOrderedByScalars() {
        let release = event(.marker, "release", client: nil)
        let nfc = event(.complete, "getAssignment", label: "\u{E9}"), nfd = event(.complete, "getAssignment", label: "e\u{301}")
        let one = ScenarioExecution.canonical([release, nfc, nfd]), other = ScenarioExecution.canonical([release, nfd, nfc])
        XCTAssertEqual(one.map { $0.label.map { Array($0.unicodeScalars) } }, other.map { $0.label.map { Array($0.unicodeScalars) } })
        XCTAssertEqual(ScenarioExecution.digest(one), ScenarioExecution.digest(other))
        XCTAssertTrue(one[1].label?.unicodeScalars.elementsEqual("e\u{301}".unicodeScalars) == true, "U+0065 sorts before U+00E9")
    }

    /// The reference-app logout-while-fetch-pending scenario run again and again while busy
    /// threads compete for the cores: one history digest. (Before the fix, about 1 run in 10
    /// gave a second digest under three busy loops on one core; with the completions
    /// left where they fell, this test failed 4 of 7 times here; the test above fails every time.)
    func testLogoutWhileFetchPendingGivesOneDigestUnderLoad() async throws {
        let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: Self.logoutFile)), file: Self.logoutFile)
        // The field report: three busy loops competing with the runner's threads.
        let stop = StopFlag.busyLoops(3)
        defer { stop.set() }
        let runner = ScenarioRunner()
        let first = await runner.run(scenario)
        XCTAssertEqual(first.status, .passed, "\(first.checks.filter { !$0.passed })")
        var digests: [String: Int] = [first.historyDigest: 1]
        var example: [String: [HistoryEvent]] = [first.historyDigest: first.history]
        for _ in 1..<200 {
            let again = await runner.run(scenario)
            XCTAssertEqual(again.status, .passed)
            digests[again.historyDigest, default: 0] += 1
            example[again.historyDigest] = example[again.historyDigest] ?? again.history
        }
        if digests.count > 1 {
            let (a, b) = (example[first.historyDigest]!, example.first { $0.key != first.historyDigest }!.value)
            let diff = zip(a, b).first { $0.0 != $0.1 }
            XCTFail("\(digests.count) digests in 200 runs \(digests.values.sorted()): \(diff.map { "\($0.0.line)\n  vs \($0.1.line)" } ?? "lengths differ")")
        }
    }
}

