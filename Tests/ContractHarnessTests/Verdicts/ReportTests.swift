import XCTest
import Foundation
import ExperimentlyMutants
import ExperimentlyMock
@testable import ContractHarness

/// The HTML report and the Mermaid diagrams, drawn from real runs: a race scenario against the
/// SDK variant that writes a late answer after clearCache() (it fails) and against the SDK (it
/// passes).
final class ReportTests: XCTestCase {
    static func verdict(mutant: Defect?, files: [String] = ["defect-1-stale-write-after-clearcache.json"], history: Bool = false) async throws -> Verdict {
        let driver: any SDKDriver = mutant.map { MutantRun.driver($0) } ?? SwiftSDKDriver()
        let runner = ScenarioRunner(driver: driver)
        var results: [ScenarioResult] = []
        for name in files {
            let file = Repository.root.appendingPathComponent("scenarios/\(name)").path
            results.append(await runner.run(try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)))
        }
        var v = Verdict(harnessVersion: "test", sdkName: driver.sdkName, sdkVersion: driver.sdkVersion, seed: 7,
                        startedAt: Date(timeIntervalSince1970: 1_700_000_000), durationMilliseconds: 12.5, results: results, invalid: [])
        v.includesHistory = history
        return v
    }

    /// A thirteenth outside tester: when a step's failure stops the scenario, the steps after it
    /// were drawn as if they had run (a `release` the lifecycle check says never happened). They
    /// are drawn "not run" now.
    func testStepsAfterTheStoppingStepAreDrawnNotRun() async throws {
        let v = try await Self.verdict(mutant: .cancelKeepsRequest, files: ["field-strict-mode-unmount-cancels.json"])
        XCTAssertEqual(v.results.first?.status, .failed)
        let html = v.html(redacting: [])
        XCTAssertTrue(html.contains("step 17: release 1 held by fault held: not run (the scenario stopped at step 16)"), html)
        let passing = try await Self.verdict(mutant: nil, files: ["field-strict-mode-unmount-cancels.json"])
        XCTAssertFalse(passing.html(redacting: []).contains("not run (the scenario stopped"))
    }

    func testFailingRaceIsDrawnAsLanesWithTheCitedEventsHighlighted() async throws {
        let v = try await Self.verdict(mutant: .staleWriteAfterClear)
        XCTAssertEqual(v.results.first?.status, .failed)
        let html = v.html(redacting: [])
        for lane in ["virtual clock", "client main", "mock backend"] {
            XCTAssertTrue(html.contains("data-lane=\"\(lane)\""), "lane \(lane) missing")
        }
        // no_stale_write cites the held request, the clearCache and the late answer.
        let note = try XCTUnwrap(html.range(of: "data-check=\"no_stale_write\""))
        XCTAssertFalse(html[note.upperBound...].isEmpty)
        XCTAssertTrue(html.contains("class=\"event request cited\""), "the held request is highlighted")
        XCTAssertTrue(html.contains("class=\"event response cited\""), "the late answer is highlighted")
        XCTAssertTrue(html.contains("class=\"hold\""), "the hold is drawn from receipt to release")
        XCTAssertTrue(html.contains(">#1 POST /tracking/assign user=user-2, held by fault held"))
        // Labels say what each event is: the answer names its request, the release its hold,
        // an operation its name, key and user (and its label when that adds something).
        XCTAssertTrue(html.contains(">#1 answered 200 → variant_name=control (POST /tracking/assign, fault held)<") || html.contains(">#1 answered 200 → variant_name=treatment (POST /tracking/assign, fault held)<"), html)
        XCTAssertTrue(html.contains(">released 1 request held by fault held<"))
        XCTAssertTrue(html.contains(">▶ getAssignment sdk_contract_ab user=user-2 as late<"))
        XCTAssertTrue(html.contains(">SDK client main<") && html.contains(">mock backend: received, held, released, answered<"))
        // The failing checks' notes sit below the row they were decided at, wrapped to the
        // lanes' width: the drawing is no wider than its lanes (nothing cut at a 1400 px window).
        let width = try XCTUnwrap(html.range(of: "<svg class=\"lanes\" xmlns=\"http://www.w3.org/2000/svg\" width=\"")
            .map { html[$0.upperBound...].prefix { $0 != "\"" } }.flatMap { Double($0) })
        XCTAssertLessThanOrEqual(width, 1300, "one client: the lanes and notes fit a 1400 px window")
        XCTAssertTrue(html.contains("class=\"arrow-request\"") && html.contains("class=\"arrow-answer\""))
        // Self-contained: nothing is fetched.
        XCTAssertNil(html.range(of: "src=\"http"))
        XCTAssertNil(html.range(of: "href=\"http"))
        XCTAssertNil(html.range(of: "@import"))
    }

    /// The reference app's logout clears its SDK client's cache: drawn on that client's lane, at
    /// the logout, not only in the app's lane.
    func testAppLogoutCacheClearIsDrawnOnTheClientsLane() async throws {
        let v = try await Self.verdict(mutant: .staleWriteAfterClear, files: ["app-logout-while-flag-fetch-pending.json"])
        XCTAssertEqual(v.results.first?.status, .failed)
        let html = v.html(redacting: [])
        XCTAssertTrue(html.contains("data-lane=\"client main\""))
        let clear = try XCTUnwrap(html.range(of: "<g class=\"cache-clear\">"), "the logout's cache clear is not drawn")
        XCTAssertTrue(html[clear.upperBound...].prefix(400).contains(">clearCache: logout of user-1<"))
        // In the row of the app's logout marker.
        let row = try XCTUnwrap(html.range(of: ">logout identity=anon-2 revision=3<"))
        XCTAssertLessThan(row.lowerBound, clear.lowerBound)
        XCTAssertNil(html[row.upperBound..<clear.lowerBound].range(of: "<g class=\"event"), "drawn in the logout's own row")
        // Without the defect the same scenario passes and draws the clear as well (with --history).
        let passing = try await Self.verdict(mutant: nil, files: ["app-logout-while-flag-fetch-pending.json"], history: true)
        XCTAssertEqual(passing.results.first?.status, .passed)
        XCTAssertTrue(passing.html(redacting: []).contains("<g class=\"cache-clear\">"))
    }

    func testTheSDKsPassingRunHighlightsNothing() async throws {
        let v = try await Self.verdict(mutant: nil, history: true)
        XCTAssertEqual(v.results.first?.status, .passed, "\(v.results.first?.checks.filter { !$0.passed } ?? [])")
        let html = v.html(redacting: [])
        XCTAssertTrue(html.contains("data-lane=\"mock backend\""), "with --history a passing scenario is drawn too")
        XCTAssertFalse(html.contains("<rect class=\"cited-row\"") || html.contains(" cited\""), "a passing run cites nothing")
        XCTAssertFalse(html.contains("class=\"note\""))
        // Without --history a passing scenario has a summary row only.
        var plain = v
        plain.includesHistory = false
        XCTAssertFalse(plain.html(redacting: []).contains("<svg"))
    }

    func testVerdictCarriesTheFailingTimelineAndRequestNumbersMatchTheSlices() async throws {
        let failing = try await Self.verdict(mutant: .staleWriteAfterClear, files: ["defect-1-stale-write-after-clearcache.json", "s4-cache-is-per-user.json"])
        let json = failing.json
        let scenarios = try XCTUnwrap(json["scenarios"]?.arrayValue)
        XCTAssertNotNil(scenarios[0]["timeline"], "a failing scenario always carries its timeline")
        XCTAssertNil(scenarios[1]["timeline"], "a passing one only with --history")
        var withHistory = failing
        withHistory.includesHistory = true
        let lines = try XCTUnwrap(withHistory.json["scenarios"]?.arrayValue?[0]["history"]?.arrayValue).compactMap(\.stringValue)
        XCTAssertFalse(lines.contains { $0.contains("request #0 ") }, "request numbers are the mock's: \(lines)")
        // Every line a failure slice shows is the --history line of the same index.
        for check in failing.results[0].checks where !check.passed {
            for line in check.history ?? [] {
                let index = try XCTUnwrap(ReportTimeline.citedIndex(line))
                XCTAssertEqual(lines[index], line)
            }
        }
    }

    func testAReportDrawnFromTheSavedVerdictEqualsTheOneDrawnDuringTheRun() async throws {
        let v = try await Self.verdict(mutant: .staleWriteAfterClear, files: ["defect-1-stale-write-after-clearcache.json", "s4-cache-is-per-user.json"])
        let read = try Verdict(parsing: v.data(redacting: []), file: "verdict.json")
        XCTAssertEqual(read.results.count, 2)
        XCTAssertEqual(read.html(redacting: []), v.html(redacting: []))
        XCTAssertEqual(read.mermaid(redacting: []), v.mermaid(redacting: []))
    }

    func testAReportDrawnFromTheSavedVerdictKeepsACrashsStderrAndTheAdaptersStderr() async throws {
        // The thirteenth tester's F8: `report` of a crashed scenario dropped its signal and stderr
        // tail (the verdict had them; reading it back did not).
        var v = try await Self.verdict(mutant: .staleWriteAfterClear, files: ["defect-1-stale-write-after-clearcache.json", "s4-cache-is-per-user.json"])
        v.results[1].status = .crashed
        v.results[1].events = []  // a worker that died reported no history
        v.results[1].reason = "the worker process died of SIGSEGV (signal 11)"
        v.results[1].crash = .object(["signal": .number(11), "signal_name": .string("SIGSEGV"),
                                      "stderr_tail": .array([.string("Fatal error: Unexpectedly found nil <at> SDK.swift:42")])])
        v.results[0].adapterStderr = ["adapter: <warning> retrying"]
        let read = try Verdict(parsing: v.data(redacting: []), file: "verdict.json")
        XCTAssertEqual(read.results[1].crash, v.results[1].crash)
        XCTAssertEqual(read.results[0].adapterStderr, ["adapter: <warning> retrying"])
        let html = read.html(redacting: [])
        XCTAssertEqual(html, v.html(redacting: []))
        XCTAssertTrue(html.contains("Fatal error: Unexpectedly found nil &lt;at&gt; SDK.swift:42"), "the crash's stderr tail is drawn")
        XCTAssertTrue(html.contains("adapter: &lt;warning&gt; retrying"), "the adapter's stderr is drawn")
    }

    func testASeedBeyondWhatARunWritesIsNamedNotConverted() throws {
        // A sixteenth outside tester: `report` of a verdict with seed 1e308 died of a fatal
        // Double-to-UInt64 conversion (SIGILL); it is a malformed verdict, named with its path.
        for seed in ["1e308", "18446744073709551616", "-1", "1.5"] {
            let text = #"{"format": "experimently-verdict/1", "seed": "# + seed + #", "scenarios": []}"#
            XCTAssertThrowsError(try Verdict(parsing: Data(text.utf8), file: "v.json"), seed) { error in
                XCTAssertTrue("\(error)".contains("at $.seed: expected a whole number from 0 to 2^64-1"), "\(error)")
            }
        }
        let largest = try Verdict(parsing: Data(#"{"format": "experimently-verdict/1", "seed": 9007199254740991, "scenarios": []}"#.utf8), file: "v.json")
        XCTAssertEqual(largest.seed, 9_007_199_254_740_991)
    }

    func testAVerdictThatCannotBeReadIsNamedWithItsPath() {
        XCTAssertThrowsError(try Verdict(parsing: Data("{\"format\": \"other/1\"}".utf8), file: "v.json")) { error in
            XCTAssertEqual("\(error)", "v.json: at $.format: expected \"experimently-verdict/1\", found \"other/1\"")
        }
        let bad = #"{"format": "experimently-verdict/1", "scenarios": [{"name": "x", "status": "failed", "history_digest": "", "timeline": [{"kind": "nope"}]}]}"#
        XCTAssertThrowsError(try Verdict(parsing: Data(bad.utf8), file: "v.json")) { error in
            // The entry and its first missing field (the forty-eighth outside tester, L).
            XCTAssertEqual("\(error)", "v.json: at $.scenarios[0].timeline[0].index: expected a whole number, found nothing")
        }
    }

    /// A hostile scenario name, tag, check message and label reach the page as text, never as
    /// markup, and a secret is redacted everywhere.
    func testEverythingPrintedIsEscapedAndRedacted() async throws {
        var v = try await Self.verdict(mutant: .staleWriteAfterClear)
        let evil = "<script>alert(1)</script>\"'&\u{1B}[31m"
        v.results[0].name = evil
        v.results[0].tags.append(evil)
        v.results[0].checks[1].message = "key sk-secret-123 leaked " + evil
        v.results[0].events[0].label = evil
        let html = v.html(redacting: ["sk-secret-123"])
        XCTAssertEqual(html.components(separatedBy: "<script").count - 1, 1, "only the report's own script")
        XCTAssertTrue(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;\\u{1B}[31m"))
        XCTAssertFalse(html.contains("sk-secret-123"))
        XCTAssertTrue(html.contains("key *** leaked"))
        XCTAssertFalse(html.unicodeScalars.contains { $0.value == 0x1B })
        let mermaid = v.mermaid(redacting: ["sk-secret-123"])
        XCTAssertFalse(mermaid.contains("<script>"))
        XCTAssertFalse(mermaid.contains("sk-secret-123"))
        XCTAssertFalse(mermaid.unicodeScalars.contains { $0.value == 0x1B })
    }

    static let fieldReport = ["contract-smoke.json", "app-login-again-after-logout.json", "field-late-assignment-after-logout.json"]

    /// Each `<svg class="lanes">` of `html`.
    static func drawings(_ html: String) -> [Substring] {
        html.components(separatedBy: "<svg class=\"lanes\"").dropFirst().map { Substring($0.components(separatedBy: "</svg>")[0]) }
    }

    /// The texts drawn in `svg`: each `<text>` with its `<tspan>` lines, tags removed, unescaped.
    static func texts(_ svg: Substring) -> [String] {
        svg.components(separatedBy: "<text").dropFirst().map { chunk in
            let inner = chunk.drop { $0 != ">" }.dropFirst().components(separatedBy: "</text>")[0]
            var out = "", inTag = false
            for ch in inner { if ch == "<" { inTag = true } else if ch == ">" { inTag = false } else if !inTag { out.append(ch) } }
            return out.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
                .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&amp;", with: "&")
        }
    }

    /// Every timeline has its own arrowhead marker and its arrows use it: folding or filtering
    /// out one timeline (the first) leaves every other arrow its head.
    func testEveryTimelineHasItsOwnArrowheadMarker() async throws {
        let v = try await Self.verdict(mutant: .staleWriteAfterClear, files: Self.fieldReport, history: true)
        let html = v.html(redacting: [])
        let svgs = Self.drawings(html)
        XCTAssertEqual(svgs.count, 3)
        var ids: [String] = []
        for svg in svgs {
            let defined = svg.components(separatedBy: "<marker id=\"").dropFirst().map { String($0.prefix { $0 != "\"" }) }
            XCTAssertEqual(defined.count, 1)
            ids += defined
            let used = Set(svg.components(separatedBy: "url(#").dropFirst().map { String($0.prefix { $0 != ")" }) })
            XCTAssertEqual(used, Set(defined), "each arrow points at its own timeline's marker")
        }
        XCTAssertEqual(Set(ids).count, 3, "marker ids are unique in the page: \(ids)")
    }

    /// A label longer than its lane wraps onto more lines (the row grows): every event's label
    /// is drawn whole (user, key, outcome, what was shown), never cut with an ellipsis.
    func testLabelsWrapInsteadOfBeingCutOff() async throws {
        let v = try await Self.verdict(mutant: .staleWriteAfterClear, files: Self.fieldReport)
        let failing = try XCTUnwrap(v.results.first { $0.status == .failed })
        let html = v.html(redacting: [])
        let svg = try XCTUnwrap(Self.drawings(html).first)
        let drawn = Self.texts(svg).map { $0.filter { $0 != " " } }
        for e in failing.events {
            let label = ReportTimeline.text(e).filter { $0 != " " }
            XCTAssertTrue(drawn.contains(label), "label of [\(e.index)] not drawn whole: \(ReportTimeline.text(e))")
        }
        XCTAssertTrue(drawn.contains { $0.hasPrefix("■display") && $0.contains("shown=fallback") }, "what the app showed")
        XCTAssertTrue(svg.contains("<tspan "), "a long label wraps onto a second line")
        XCTAssertFalse(Self.texts(svg).contains { $0.hasSuffix("…") && !$0.contains("body:") }, "nothing is cut")
    }

    /// An answer shows what its body says (an assignment's variant, an evaluation's enabled, a
    /// batch's counts), and its hover carries the body itself.
    func testAnswersShowTheirBody() async throws {
        let v = try await Self.verdict(mutant: .staleWriteAfterClear, files: Self.fieldReport)
        let html = v.html(redacting: [])
        let svg = try XCTUnwrap(Self.drawings(html).first)
        let drawn = Self.texts(svg).joined(separator: "\n")
        XCTAssertTrue(drawn.contains("#2 answered 200 → variant_name=control (POST /tracking/assign, fault slow-assign)"), drawn)
        XCTAssertTrue(drawn.contains("#1 answered 200 → enabled=true (GET /feature-flags/evaluate/sdk_contract_flag)"), drawn)
        let hover = try XCTUnwrap(svg.range(of: "response #2 [main] POST /api/v1/tracking/assign"))
        XCTAssertTrue(svg[hover.upperBound...].prefix(400).contains("body: {&quot;"), "the hover carries the answer's body")
        // An error answer shows its status and detail.
        var failed = RequestRecord(seq: 9, client: "main", method: "GET", path: "/api/v1/feature-flags/evaluate/f", target: "", query: [:], headers: [:],
                                   body: nil, status: 503, response: .object(["detail": .string("down")]), fault: "f1", parked: false, cancelled: false, answered: true)
        XCTAssertEqual(ReportTimeline.answerBrief(failed), "→ detail=down")
        failed.response = .object(["detail": .array([.object(["msg": .string("field required")])])])
        XCTAssertEqual(ReportTimeline.answerBrief(failed), "→ detail=field required")
        // A batch's answer shows its counts.
        var batch = failed
        batch.path = "/api/v1/tracking/batch"; batch.status = 200
        batch.response = .object(["success_count": .number(1), "failure_count": .number(0), "errors": .array([])])
        XCTAssertEqual(ReportTimeline.answerBrief(batch), "→ success_count=1 failure_count=0")
    }

    /// A step's check with no events of its own highlights nothing unrelated: its note stands at
    /// the step's place; the requests a check's message names (`#N`) are highlighted.
    func testAStepCheckWithoutEventsOfItsOwnHighlightsNothingUnrelated() async throws {
        let v = try await Self.verdict(mutant: .staleWriteAfterClear, files: Self.fieldReport)
        let failing = try XCTUnwrap(v.results.first { $0.status == .failed })
        let t = ReportTimeline(failing)
        let steps = t.citations.filter { ReportTimeline.stepNumber($0.check.name) != nil }
        XCTAssertFalse(steps.isEmpty)
        for c in steps {
            XCTAssertEqual(c.indices, [], "\(c.check.name) has no events of its own and names no request")
            XCTAssertNotNil(c.anchor)
        }
        // The app's fallback display (the last event of step 5) is not highlighted by them.
        let display = try XCTUnwrap(failing.events.last { $0.kind == .complete && $0.name == "app.display" })
        XCTAssertTrue(t.citing(display.index).filter { ReportTimeline.stepNumber($0.check.name) != nil }.isEmpty)
        XCTAssertEqual(ReportTimeline.namedRequests("no attribution of batches #2 and #3; request #14 (x)"), [2, 3, 14])
        // A named check naming requests cites each of them, request and answer.
        var named = failing
        named.checks = [CheckResult(name: "fan_out", passed: false, message: "requests #1 and #3 carry the same event", history: [])]
        let cited = try XCTUnwrap(ReportTimeline(named).citations.first).indices
        let seqs = Set(cited.compactMap { i in named.events.first { $0.index == i }?.request?.seq })
        XCTAssertEqual(seqs, [1, 3])
        XCTAssertEqual(cited.count, 4, "each request and its answer")
    }

    /// The page says when the filters hide every scenario, opens a folded section a summary
    /// link points at, and Mermaid notes the app logout's cache clear on its client.
    func testFilteringToNothingLinksAndMermaidCacheClear() async throws {
        let v = try await Self.verdict(mutant: .staleWriteAfterClear, files: Self.fieldReport, history: true)
        let html = v.html(redacting: [])
        XCTAssertTrue(html.contains("<p id=\"no-match\" class=\"hidden\">no scenario matches the filters</p>"))
        XCTAssertTrue(html.contains("addEventListener('hashchange',reveal)"))
        let mermaid = v.mermaid(redacting: [])
        XCTAssertTrue(mermaid.contains("Note over p2: clearCache: logout of user-1"), mermaid)
    }

    /// A step that records no event (the fault definition, the wait_for, the assertions) is
    /// drawn as a grey line where it ran; the saved verdict keeps the step lines.
    func testStepsWithoutEventsAreShownWhereTheyRan() async throws {
        let v = try await Self.verdict(mutant: .staleWriteAfterClear, files: Self.fieldReport)
        let failing = try XCTUnwrap(v.results.first { $0.status == .failed })
        XCTAssertEqual(failing.stepSummaries.count, 14)
        let svg = try XCTUnwrap(Self.drawings(v.html(redacting: [])).first)
        let notes = svg.components(separatedBy: "<g class=\"step-note\">").dropFirst().map { String($0.components(separatedBy: "</text>")[0].drop { $0 != ">" }.dropFirst()) }
        XCTAssertTrue(notes.first?.hasPrefix("step 0: fault slow-assign added: {&quot;action&quot;:{&quot;hold&quot;") == true, "\(notes)")
        XCTAssertTrue(notes.contains("step 3: wait_for 1 request held by fault slow-assign"), "\(notes)")
        XCTAssertTrue(notes.contains("step 8: assert ✓") && notes.contains("step 9: assert ✗1"), "\(notes)")
        XCTAssertFalse(notes.contains { $0.hasPrefix("step 1:") }, "a step with events of its own has no extra line")
        // The fault definition comes before the first event, the wait_for after step 2's last.
        func y(before marker: String) throws -> Double {
            let end = try XCTUnwrap(svg.range(of: marker)).lowerBound
            let tag = try XCTUnwrap(svg[..<end].range(of: " y=\"", options: .backwards))
            return try XCTUnwrap(Double(svg[tag.upperBound...].prefix { $0 != "\"" }))
        }
        XCTAssertLessThan(try y(before: ">step 0: fault"), try y(before: ">[0] step 1<"))
        // (Step 2's last event is its held assign request; step 4 starts with the logout.)
        let step2Last = try XCTUnwrap(failing.events.last { $0.step == 2 }).index
        let step4First = try XCTUnwrap(failing.events.first { $0.step == 4 }).index
        XCTAssertGreaterThan(try y(before: ">step 3: wait_for"), try y(before: ">[\(step2Last)] step 2<"))
        XCTAssertLessThan(try y(before: ">step 3: wait_for"), try y(before: ">[\(step4First)] step 4<"))
        let read = try Verdict(parsing: v.data(redacting: []), file: "v.json")
        XCTAssertEqual(read.results.first { $0.status == .failed }?.stepSummaries, failing.stepSummaries)
    }

    func testMermaidDrawsTheFailingScenariosAsSequenceDiagrams() async throws {
        let v = try await Self.verdict(mutant: .staleWriteAfterClear, files: ["defect-1-stale-write-after-clearcache.json", "s4-cache-is-per-user.json"])
        let text = v.mermaid(redacting: [])
        XCTAssertTrue(text.contains("## defect-1-stale-write-after-clearcache"))
        XCTAssertFalse(text.contains("s4-cache-is-per-user"), "only failing scenarios")
        XCTAssertEqual(text.components(separatedBy: "```mermaid\nsequenceDiagram\n").count, 2)
        XCTAssertTrue(text.contains("participant p1 as client main"))
        XCTAssertTrue(text.contains("participant p2 as mock backend"))
        // The request, its answer after the release, and the cited events marked.
        XCTAssertTrue(text.contains("p1->>p2: ✗"), text)
        XCTAssertTrue(text.contains("#35;1 POST /tracking/assign user=user-2, held by fault held"), text)
        XCTAssertTrue(text.contains("p2-->>p1: ✗"), text)
        XCTAssertTrue(text.contains("Note over p1,p2: ✗4 no_stale_write: client 'main' caches assignments"), text)
        // No line of a diagram carries a raw ';' or '#' (Mermaid reads them as separators/entities).
        let diagram = text.components(separatedBy: "```mermaid\n")[1].components(separatedBy: "```")[0]
        for line in diagram.split(separator: "\n") {
            XCTAssertFalse(line.replacingOccurrences(of: "#35;", with: "").replacingOccurrences(of: "#59;", with: "")
                .replacingOccurrences(of: "#60;", with: "").replacingOccurrences(of: "#62;", with: "").contains { $0 == ";" || $0 == "#" }, String(line))
        }
    }

    func testTheMutantMatrixIsDrawn() async throws {
        let file = Repository.root.appendingPathComponent("scenarios/defect-1-stale-write-after-clearcache.json").path
        let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
        let report = await MutantRun.run([scenario], stepTimeoutCap: 1500, executable: HarnessCLITests.binary.path, jobs: 2)
        var v = Verdict(harnessVersion: "test", sdkName: "ios-mutants", sdkVersion: "", seed: 0, startedAt: Date(),
                        durationMilliseconds: report.durationMilliseconds, results: [], invalid: [])
        v.extra["mutants"] = report.json
        let html = v.html(redacting: [])
        XCTAssertTrue(html.contains("<h2>Mutant matrix</h2>"))
        XCTAssertEqual(html.components(separatedBy: "<tr class=\"caught\">").count - 1, report.rows.filter(\.caught).count)
        XCTAssertEqual(html.components(separatedBy: "<tr class=\"missed\">").count - 1, report.rows.filter { !$0.caught }.count)
        XCTAssertTrue(html.contains("<code>stale-write-after-clear</code>"))
        XCTAssertTrue(report.rows.first { $0.defect == .staleWriteAfterClear }?.caught == true)
    }

    /// A run that is not OK says so in Mermaid: an errored scenario counts as failing and says why,
    /// and a verdict whose `error` no scenario carries (no scenario to run, a `vectors`
    /// mismatch) is named (a forty-eighth outside tester, J: "0 failing scenario(s)" for exit 64).
    /// `%` is an entity code, so `%%{init: ...}%%` in a name cannot configure the diagram (N).
    func testANotOKRunSaysSoInMermaidAndPercentIsEscaped() throws {
        let errored = ScenarioResult(name: "malformed", file: "m.json", tags: [], source: nil, status: .error, durationMilliseconds: 0,
                                     checks: [], reason: "m.json $.steps[0].do: expected an operation", smoke: nil, history: [], historyDigest: "")
        let v = Verdict(harnessVersion: "test", sdkName: "sdk", sdkVersion: "1", seed: 0, startedAt: Date(timeIntervalSince1970: 0),
                        durationMilliseconds: 1, results: [errored], invalid: [])
        let text = v.mermaid(redacting: [])
        XCTAssertTrue(text.hasPrefix("# contract-harness: 1 failing scenario(s), NOT OK"), text)
        XCTAssertTrue(text.contains("**error**: m.json $.steps\\[0\\].do: expected an operation"), text)
        var empty = Verdict(harnessVersion: "test", sdkName: "sdk", sdkVersion: "1", seed: 0, startedAt: Date(timeIntervalSince1970: 0),
                            durationMilliseconds: 1, results: [], invalid: [])
        empty.extra["ok"] = .bool(false)
        empty.extra["error"] = .string("482 hash mismatches")
        let none = empty.mermaid(redacting: [])
        XCTAssertTrue(none.hasPrefix("# contract-harness: 0 failing scenario(s), NOT OK"), none)
        XCTAssertTrue(none.contains("**NOT OK**: 482 hash mismatches"), none)
        XCTAssertFalse(Verdict(harnessVersion: "t", sdkName: "s", sdkVersion: "1", seed: 0, startedAt: Date(), durationMilliseconds: 1,
                               results: [], invalid: []).mermaid(redacting: []).contains("NOT OK"), "no results: OK, as vectors and mutants verdicts")
    }

    /// `%` in a diagram's text is an entity code: `%%{init: ...}%%` in a message cannot configure
    /// the diagram (a forty-eighth outside tester, N).
    func testPercentInADiagramIsAnEntityCode() async throws {
        var v = try await Self.verdict(mutant: .staleWriteAfterClear)
        let i = try XCTUnwrap(v.results[0].checks.firstIndex { !$0.passed })
        v.results[0].checks[i].message = (v.results[0].checks[i].message ?? "") + " %%{init: {'theme': 'dark'}}%%"
        let text = v.mermaid(redacting: [])
        let diagram = try XCTUnwrap(text.components(separatedBy: "```mermaid").last)
        XCTAssertTrue(diagram.contains("#37;#37;{init"), diagram)
        XCTAssertFalse(diagram.contains("%%"), diagram)
    }

    /// A bad field of one timeline entry is named by entry and field (a forty-eighth outside
    /// tester, L: `$.scenarios[0].timeline`, quoting the whole array).
    func testABadTimelineEntryIsNamedByEntryAndField() async throws {
        let v = try await Self.verdict(mutant: .staleWriteAfterClear)
        guard case .object(var root) = try JSONValue.parse(v.data(redacting: [])).value,
              case .array(var scenarios)? = root["scenarios"], case .object(var first) = scenarios[0],
              case .array(var timeline)? = first["timeline"], case .object(let entry) = timeline[3] else { return XCTFail("no timeline") }
        for (field, bad) in [("index", JSONValue.number(1.5)), ("kind", .string("teleport")), ("time", .string("NaN"))] {
            var e = entry
            e[field] = bad
            timeline[3] = .object(e)
            first["timeline"] = .array(timeline)
            scenarios[0] = .object(first)
            root["scenarios"] = .array(scenarios)
            XCTAssertThrowsError(try Verdict(parsing: JSONValue.object(root).serialized(), file: "v.json"), field) { error in
                XCTAssertTrue("\(error)".contains("$.scenarios[0].timeline[3].\(field)"), "\(error)")
            }
        }
    }
}
