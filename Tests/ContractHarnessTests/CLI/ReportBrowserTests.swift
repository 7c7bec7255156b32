import XCTest
import ExperimentlyMock
import Foundation

/// The HTML report as a user sees it: written by the `contract-harness` binary for a failing race
/// (the SDK variant that writes a late answer after clearCache()), then rendered by headless
/// Chromium (`.ci/run` installs the Debian package `chromium`), whose DOM must show the lanes and
/// the failing check, and in which a hostile scenario name stays text.
final class ReportBrowserTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("harness-report-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path),
                          "contract-harness not built at \(HarnessCLITests.binary.path)")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    /// The Chromium on PATH, if any.
    static var chromium: String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for folder in path.split(separator: ":") {
            for name in ["chromium", "chromium-browser", "google-chrome"] {
                let candidate = "\(folder)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
        }
        return nil
    }

    func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        p.currentDirectoryURL = dir
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        // Read both pipes while the process runs, so neither fills up and blocks it.
        let errData = HarnessLockedData()
        let reader = Thread { errData.set(err.fileHandleForReading.readDataToEndOfFile()) }
        reader.start()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        while !errData.done { usleep(1000) }
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: errData.data, as: UTF8.self))
    }

    func harness(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        try run(HarnessCLITests.binary.path, arguments)
    }

    var raceScenario: String { Repository.root.appendingPathComponent("scenarios/defect-1-stale-write-after-clearcache.json").path }

    func testChromiumShowsTheRaceAsLanesWithTheFailingCheck() throws {
        let html = dir.appendingPathComponent("report.html").path
        let r = try harness(["run", raceScenario, "--mutant", "stale-write-after-clear", "--html", html, "--mermaid", "report.md"])
        XCTAssertEqual(r.status, 1, r.out + r.err)
        guard let chromium = Self.chromium else {
            throw XCTSkip("chromium is not installed (.ci/run installs the Debian package chromium)")
        }
        let dom = try run(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "file://" + html])
        XCTAssertEqual(dom.status, 0, dom.err)
        for text in ["no_stale_write", "client 'main' caches assignments", "data-lane=\"client main\"", "data-lane=\"mock backend\"",
                     "data-lane=\"virtual clock\"", "class=\"event request cited\"", "class=\"event response cited\"",
                     "data-check=\"no_stale_write\"", "held by fault held"] {
            XCTAssertTrue(dom.out.contains(text), "the rendered DOM lacks \(text)")
        }
        let png = dir.appendingPathComponent("report.png").path
        let shot = try run(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--screenshot=\(png)",
                                      "--window-size=1500,1100", "file://" + html])
        XCTAssertEqual(shot.status, 0, shot.err)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: png))
        XCTAssertEqual(Array(bytes.prefix(4)), [0x89, 0x50, 0x4E, 0x47], "a PNG")
        XCTAssertGreaterThan(bytes.count, 20_000, "a screenshot with content, not a blank page")
    }

    /// The status and tag filters run in the browser: a link's `#status=...&tag=...` presets them.
    /// A tag is matched whole (a tag with a space is one tag), and a hash that is not valid
    /// percent-encoding is taken as written rather than stopping the script.
    func testTheFiltersHideWhatIsNotAsked() throws {
        let cache = Repository.root.appendingPathComponent("scenarios/s4-cache-is-per-user.json").path
        // A copy whose tags hold a space and a percent sign.
        var copy = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: cache))).value
        if case .object(var o) = copy {
            o["name"] = .string("cache-with-odd-tags")
            o["tags"] = .array([.string("two words"), .string("100%"), .string("cache")])
            copy = .object(o)
        }
        let odd = dir.appendingPathComponent("odd-tags.json").path
        try copy.serialized().write(to: URL(fileURLWithPath: odd))
        let html = dir.appendingPathComponent("f.html").path
        _ = try harness(["run", raceScenario, cache, odd, "--mutant", "stale-write-after-clear", "--html", html])
        guard let chromium = Self.chromium else {
            throw XCTSkip("chromium is not installed (.ci/run installs the Debian package chromium)")
        }
        /// Each summary row's class and status, in order.
        func rows(_ hash: String) throws -> [String] {
            let dom = try run(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "file://" + html + hash])
            XCTAssertEqual(dom.status, 0, dom.err)
            return dom.out.components(separatedBy: "<tr class=\"").dropFirst().map {
                String($0.prefix { $0 != ">" }).components(separatedBy: " data-tags").first ?? ""
            }
        }
        let failed = "row\" data-status=\"failed\"", passed = "row\" data-status=\"passed\""
        let failedHidden = "row hidden\" data-status=\"failed\"", passedHidden = "row hidden\" data-status=\"passed\""
        XCTAssertEqual(try rows(""), [failed, passed, passed])
        XCTAssertEqual(try rows("#status=failed"), [failed, passedHidden, passedHidden])
        XCTAssertEqual(try rows("#tag=cache"), [failedHidden, passed, passed])
        XCTAssertEqual(try rows("#tag=two%20words"), [failedHidden, passedHidden, passed])
        XCTAssertEqual(try rows("#tag=two"), [failedHidden, passedHidden, passedHidden], "a tag is matched whole")
        XCTAssertEqual(try rows("#tag=100%25"), [failedHidden, passedHidden, passed])
        // Not valid percent-encoding: taken as written (the script used to throw and filter nothing).
        XCTAssertEqual(try rows("#tag=%ZZ&status=passed"), [failedHidden, passedHidden, passedHidden])
    }

    /// In Chromium, every arrow's `marker-end` resolves to a marker in its own timeline (a
    /// shared id resolved to the first timeline's, folded here: no arrow had a head); a link to
    /// a folded scenario opens it; filtering to nothing says so.
    func testArrowheadsResolveInTheirOwnTimelineAndLinksOpenFoldedSections() throws {
        let files = ["contract-smoke.json", "app-login-again-after-logout.json", "field-late-assignment-after-logout.json"]
            .map { Repository.root.appendingPathComponent("scenarios/\($0)").path }
        let html = dir.appendingPathComponent("r5.html").path
        let r = try harness(["run"] + files + ["--mutant", "stale-write-after-clear", "--history", "--html", html])
        XCTAssertEqual(r.status, 1, r.out + r.err)
        guard let chromium = Self.chromium else {
            throw XCTSkip("chromium is not installed (.ci/run installs the Debian package chromium)")
        }
        // A probe run after the page's script writes what the browser resolved onto <html>.
        let probe = """
        <script>(function(){var bad=0,n=0;document.querySelectorAll('svg.lanes [marker-end]').forEach(function(l){n++;
        var id=l.getAttribute('marker-end').replace(/^url\\(#|\\)$/g,'');var m=document.getElementById(id);
        if(!m||m.closest('svg')!==l.closest('svg'))bad++;});
        var d=document.querySelector('#scenario-0 details');
        document.documentElement.setAttribute('data-probe','arrows='+n+' bad='+bad+' open0='+(d&&d.open));
        document.documentElement.setAttribute('data-nomatch',document.getElementById('no-match').classList.contains('hidden')?'hidden':'shown');})();</script>
        """
        var page = try String(contentsOfFile: html, encoding: .utf8)
        page = page.replacingOccurrences(of: "</body>", with: probe + "</body>")
        try Data(page.utf8).write(to: URL(fileURLWithPath: html))
        func dom(_ hash: String) throws -> String {
            let d = try run(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "file://" + html + hash])
            XCTAssertEqual(d.status, 0, d.err)
            return d.out
        }
        let plain = try dom("")
        XCTAssertTrue(plain.contains("bad=0 open0=false"), String(plain.prefix(300)))
        XCTAssertFalse(plain.contains("arrows=0 "), "the timelines draw arrows")
        XCTAssertTrue(plain.contains("data-nomatch=\"hidden\""))
        XCTAssertTrue(try dom("#scenario-0").contains("open0=true"), "a link to a folded section opens it")
        XCTAssertTrue(try dom("#status=skipped").contains("data-nomatch=\"shown\""), "filtering to nothing says so")
    }

    func testAHostileScenarioNameDoesNotRunInTheBrowser() throws {
        let name = "<script>document.documentElement.setAttribute('data-pwned','1')</script><img src=x onerror=\"document.documentElement.setAttribute('data-pwned','2')\">"
        var text = try String(contentsOfFile: raceScenario, encoding: .utf8)
        text = text.replacingOccurrences(of: "\"defect-1-stale-write-after-clearcache\"", with: JSONValueText.quote(name))
        let file = dir.appendingPathComponent("hostile.json")
        try Data(text.utf8).write(to: file)
        let html = dir.appendingPathComponent("hostile.html").path
        let r = try harness(["run", file.path, "--mutant", "stale-write-after-clear", "--html", html])
        XCTAssertEqual(r.status, 1, r.out + r.err)
        guard let chromium = Self.chromium else {
            throw XCTSkip("chromium is not installed (.ci/run installs the Debian package chromium)")
        }
        let dom = try run(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", "file://" + html])
        XCTAssertEqual(dom.status, 0, dom.err)
        XCTAssertFalse(dom.out.contains("data-pwned=\""), "the scenario name ran as markup")
        XCTAssertTrue(dom.out.contains("&lt;script&gt;document.documentElement"), "the name is shown as text")
    }

    func testReportDrawsASavedVerdictAsTheRunDid() throws {
        let r = try harness(["run", raceScenario, "--mutant", "stale-write-after-clear", "--verdict", "v.json", "--html", "run.html", "--mermaid", "run.md"])
        XCTAssertEqual(r.status, 1, r.out + r.err)
        let again = try harness(["report", "v.json", "--html", "saved.html", "--mermaid", "saved.md"])
        XCTAssertEqual(again.status, 0, again.out + again.err)
        XCTAssertEqual(again.out, "report: 1 scenario, 1 failing (1 with a timeline); HTML saved.html; Mermaid saved.md\n")
        for (a, b) in [("run.html", "saved.html"), ("run.md", "saved.md")] {
            XCTAssertEqual(try Data(contentsOf: dir.appendingPathComponent(a)), try Data(contentsOf: dir.appendingPathComponent(b)), "\(a) vs \(b)")
        }
    }

    func testAnExploredRaceShowsTheFailingOrderTheShrunkFileAndItsReplay() throws {
        let scenario = Repository.root.appendingPathComponent("scenarios/race-explore-clear-vs-late-assignment.json").path
        let r = try harness(["run", scenario, "--explore", "--mutant", "stale-write-after-clear", "--verdict", "v.json", "--html", "x.html"])
        XCTAssertEqual(r.status, 1, r.out + r.err)
        let html = try String(contentsOfFile: dir.appendingPathComponent("x.html").path, encoding: .utf8)
        XCTAssertTrue(html.contains("first failing order: <code class=\"order\">[1, 2, 3]</code> fails <b>no_stale_write</b>"), html)
        XCTAssertTrue(html.contains("the shrunk scenario file"))
        XCTAssertTrue(html.contains("&quot;experimently-scenario/1&quot;,\n"), "the shrunk file is shown, line by line")
        XCTAssertTrue(html.contains("class=\"event response cited\""), "the replay's late answer is cited")
        // The same from the saved verdict.
        XCTAssertEqual(try harness(["report", "v.json", "--html", "y.html"]).status, 0)
        XCTAssertEqual(try Data(contentsOf: dir.appendingPathComponent("x.html")), try Data(contentsOf: dir.appendingPathComponent("y.html")))
    }

    func testReportRefusesBadInputClearly() throws {
        try Data("{\"format\": \"experimently-verdict/1\", \"scenarios\": 3}".utf8).write(to: dir.appendingPathComponent("bad.json"))
        let bad = try harness(["report", "bad.json", "--html", "r.html"])
        XCTAssertEqual(bad.status, 64)
        XCTAssertTrue(bad.err.contains("bad.json: at $.scenarios: expected an array of scenarios, found 3"), bad.err)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("r.html").path))
        let none = try harness(["report", "bad.json"])
        XCTAssertEqual(none.status, 64)
        XCTAssertTrue(none.err.contains("report needs --html FILE or --mermaid FILE"), none.err)
        let missing = try harness(["report", "nope.json", "--html", "r.html"])
        XCTAssertEqual(missing.status, 64)
        XCTAssertTrue(missing.err.contains("nope.json"), missing.err)
    }
}

/// Standard error of a child process, read on another thread (an `NSLock` guards it).
private final class HarnessLockedData: @unchecked Sendable {
    // @unchecked Sendable: `stored` and `finished` are only touched inside `lock`.
    private let lock = NSLock()
    private var stored = Data()
    private var finished = false
    func set(_ d: Data) { lock.withLock { stored = d; finished = true } }
    var done: Bool { lock.withLock { finished } }
    var data: Data { lock.withLock { stored } }
}

/// JSON string quoting for test files.
enum JSONValueText {
    static func quote(_ s: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: [s], options: []), as: UTF8.self).dropFirst().dropLast().description
    }
}
