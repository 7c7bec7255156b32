import Foundation
import ExperimentlyMock

extension Verdict {
    /// The verdict as one self-contained HTML page (inline CSS, JavaScript and SVG; nothing is
    /// fetched): a summary of every scenario (status, duration, tags) filterable by status and
    /// tag, the mutant matrix when the verdict holds one, and per scenario with a recorded
    /// `timeline` a swim-lane diagram (virtual clock, reference app, each client, the mock) with
    /// arrows from each request to the mock and from the mock back with its answer, the events
    /// each failing check cites highlighted and its message beside them, and what an
    /// exploration found. Documented in `Documentation/Report.md`.
    ///
    /// Every text is redacted (``SecretRedactor``: each spelling of each of `secrets`) and then
    /// HTML-escaped, control characters made visible, so a scenario name cannot inject markup.
    public func html(redacting secrets: [String]) -> String {
        HTMLReport(verdict: self, redactor: SecretRedactor(secrets: secrets)).render()
    }
}

/// Builds the HTML page of ``Verdict/html(redacting:)``.
struct HTMLReport {
    let verdict: Verdict
    let redactor: SecretRedactor

    /// `text` redacted, HTML-escaped (`& < > " '`) and with control characters and bidi
    /// overrides written as visible `\u{XX}` escapes (line feeds kept when `keepingLineFeeds`,
    /// for `<pre>` blocks).
    func h(_ text: String, keepingLineFeeds: Bool = false) -> String {
        var out = ""
        for ch in TerminalText.escape(redactor.redact(text), keepingLineFeeds: keepingLineFeeds).unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(ch)
            }
        }
        return out
    }

    func render() -> String {
        let c = verdict.counts
        var page = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8">
        <meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
        <title>contract-harness report: \(h(verdict.sdkName)) \(h(verdict.sdkVersion))</title>
        <style>\(Self.css)</style></head><body>
        <header><h1>contract-harness report</h1>
        <p class="meta">SDK under test <b id="sdk">\(h(verdict.sdkName)) \(h(verdict.sdkVersion))</b>\(verdict.extra["mutant"]?.stringValue.map { " (broken variant <b>\(h($0))</b>)" } ?? "") · harness \(h(verdict.harnessVersion)) · seed \(verdict.seed) · started \(h(Verdict.iso(verdict.startedAt))) · \(String(format: "%.1f", Self.rounded(verdict.durationMilliseconds) / 1000)) s</p>
        <p class="counts"><span class="badge \(verdict.ok ? "passed" : "failed")">\(verdict.ok ? "OK" : "NOT OK")</span> \(c.passed) passed · \(c.failed) failed · \(verdict.crashedCount) crashed · \(c.skipped) skipped · \(c.error) error\(verdict.extra["error"]?.stringValue.map { " · " + h($0) } ?? "")</p>
        </header>

        """
        page += filters()
        page += summary()
        page += mutantMatrix()
        for (i, r) in verdict.results.enumerated() where hasSection(r) {
            page += section(r, number: i)
        }
        page += "<script>\(Self.script)</script>\n</body></html>\n"
        return page
    }

    /// Whether `r` has a timeline to draw: failing scenarios always, others with `run --history`
    /// (so a report drawn during the run equals one drawn from its saved verdict).
    func hasTimeline(_ r: ScenarioResult) -> Bool { !r.events.isEmpty && (r.status != .passed && r.status != .skipped || verdict.includesHistory) }

    /// Whether `r` gets its own section (a timeline, a failure, or an exploration).
    /// A scenario that failed, errored or crashed always has one (its checks and reason).
    func hasSection(_ r: ScenarioResult) -> Bool { hasTimeline(r) || (r.status != .passed && r.status != .skipped) || r.exploration != nil }

    var allTags: [String] {
        var seen: [String] = []
        for t in verdict.results.flatMap(\.tags) where !seen.contains(where: { $0.unicodeScalars.elementsEqual(t.unicodeScalars) }) { seen.append(t) }
        return seen.sorted()
    }

    func filters() -> String {
        var s = "<nav id=\"filters\"><span>show</span>"
        for status in ["passed", "failed", "crashed", "skipped", "error"] {
            s += "<label><input type=\"checkbox\" class=\"status-filter\" value=\"\(status)\" checked> <span class=\"badge \(status)\">\(status)</span></label>"
        }
        s += "<label>tag <select id=\"tag-filter\"><option value=\"\">any</option>"
        for t in allTags { s += "<option value=\"\(h(t))\">\(h(t))</option>" }
        s += "</select></label></nav>\n"
        return s
    }

    /// The tags as one attribute value: a JSON array (escaped for the attribute), so a tag with a
    /// space or any other character is one tag to the filter.
    func tagAttribute(_ tags: [String]) -> String {
        h(String(decoding: JSONValue.array(tags.map(JSONValue.string)).serialized(), as: UTF8.self))
    }

    func summary() -> String {
        var s = "<table id=\"summary\"><thead><tr><th>scenario</th><th>status</th><th>duration</th><th>tags</th><th>first failure</th></tr></thead><tbody>\n"
        for (i, r) in verdict.results.enumerated() {
            let name = hasSection(r) ? "<a href=\"#scenario-\(i)\">\(h(r.name))</a>" : h(r.name)
            let failure = r.firstFailure.map { "<b>\(h($0.name))</b>: \(h($0.message ?? ""))" } ?? h(r.reason ?? "")
            s += "<tr class=\"row\" data-status=\"\(r.status.rawValue)\" data-tags=\"\(tagAttribute(r.tags))\"><td>\(name)</td><td><span class=\"badge \(r.status.rawValue)\">\(r.status.rawValue)</span></td>"
            s += "<td class=\"num\">\(String(format: "%.1f ms", Self.rounded(r.durationMilliseconds)))</td><td>\(r.tags.map { "<span class=\"tag\">\(h($0))</span>" }.joined(separator: " "))</td><td class=\"failure\">\(failure)</td></tr>\n"
        }
        for item in verdict.invalid {
            s += "<tr class=\"row\" data-status=\"error\" data-tags=\"\"><td>\(h(item.file))</td><td><span class=\"badge error\">error</span></td><td class=\"num\">–</td><td></td><td class=\"failure\">\(h(item.error))</td></tr>\n"
        }
        s += "</tbody></table>\n<p id=\"no-match\" class=\"hidden\">no scenario matches the filters</p>\n"
        return s
    }

    func mutantMatrix() -> String {
        guard let m = verdict.extra["mutants"], case .array(let rows)? = m["variants"] else { return "" }
        var s = "<section id=\"mutants\"><h2>Mutant matrix</h2><p>\(h(m["caught"].map { "\($0)" } ?? "?")) of \(h(m["total"].map { "\($0)" } ?? "?")) broken variants caught by \(h(m["scenarios"].map { "\($0)" } ?? "?")) scenarios</p>"
        s += "<table class=\"matrix\"><thead><tr><th>#</th><th>variant</th><th>what is broken</th><th>caught</th><th>caught by</th><th>failing checks</th></tr></thead><tbody>\n"
        for row in rows {
            let caught = row["caught"] == .bool(true)
            s += "<tr class=\"\(caught ? "caught" : "missed")\"><td class=\"num\">\(h(row["item"].map { "\($0)" } ?? ""))</td><td><code>\(h(row["defect"]?.stringValue ?? ""))</code></td><td>\(h(row["summary"]?.stringValue ?? ""))</td>"
            s += "<td><span class=\"badge \(caught ? "passed" : "failed")\">\(caught ? "caught" : "missed")</span></td>"
            s += "<td>\((row["caught_by"]?.arrayValue ?? []).compactMap(\.stringValue).map { h($0) }.joined(separator: "<br>"))</td>"
            s += "<td>\((row["failing_checks"]?.arrayValue ?? []).compactMap(\.stringValue).map { h($0) }.joined(separator: ", "))</td></tr>\n"
        }
        let baseline = (m["baseline_failures"]?.arrayValue ?? []).compactMap(\.stringValue)
        s += "</tbody></table>" + (baseline.isEmpty ? "" : "<p class=\"bad\">fails against the faithful variant: \(baseline.map { h($0) }.joined(separator: ", "))</p>") + "</section>\n"
        return s
    }

    func section(_ r: ScenarioResult, number: Int) -> String {
        let open = r.status == .failed || r.status == .error || r.status == .crashed
        var s = "<section class=\"scenario\" id=\"scenario-\(number)\" data-status=\"\(r.status.rawValue)\" data-tags=\"\(tagAttribute(r.tags))\">"
        s += "<details\(open ? " open" : "")><summary><span class=\"badge \(r.status.rawValue)\">\(r.status.rawValue)</span> <span class=\"name\">\(h(r.name))</span> <span class=\"file\">\(h(r.file))</span></summary>\n"
        if let source = r.source { s += "<p class=\"source\">\(h(source))</p>" }
        let timeline = ReportTimeline(r)
        if !timeline.citations.isEmpty {
            s += "<ol class=\"checks\">"
            for c in timeline.citations {
                s += "<li class=\"failing-check\" value=\"\(c.number)\"><b class=\"check-name\">\(h(c.check.name))</b>: \(h(c.check.message ?? ""))"
                if c.indices.isEmpty, let lines = c.check.history, !lines.isEmpty { s += "<details class=\"context\"><summary>the history before it (\(lines.count) events)</summary><pre>\(lines.map { h($0) }.joined(separator: "\n"))</pre></details>" }
                s += "</li>"
            }
            s += "</ol>\n"
        }
        if r.status == .error || r.status == .crashed, let reason = r.reason {
            s += "<p class=\"bad\">\(h(reason))</p>"
            let tail = r.crash?["stderr_tail"]?.arrayValue?.compactMap(\.stringValue) ?? []
            if !tail.isEmpty { s += "<pre class=\"stderr\">\(tail.map { h($0) }.joined(separator: "\n"))</pre>" }
        }
        if open, !r.adapterStderr.isEmpty {
            s += "<details class=\"adapter-stderr\"><summary>the adapter's stderr (\(r.adapterStderr.count) lines)</summary><pre class=\"stderr\">\(r.adapterStderr.map { h($0) }.joined(separator: "\n"))</pre></details>"
        }
        let passed = r.checks.filter(\.passed).map(\.name)
        if !passed.isEmpty { s += "<p class=\"passed-checks\">checks that passed: \(passed.map { h($0) }.joined(separator: ", "))</p>\n" }
        if let e = r.exploration { s += exploration(e) }
        if hasTimeline(r) { s += "<div class=\"timeline\">" + svg(timeline, id: "s\(number)") + "</div>\n" }
        else if r.status == .failed { s += "<p class=\"note\">No timeline recorded for this scenario (a verdict written without histories).</p>" }
        s += "</details></section>\n"
        return s
    }

    func exploration(_ e: JSONValue) -> String {
        var s = "<div class=\"explore\"><h3>Exploration</h3><p>\(h(e["mode"]?.stringValue ?? "")): \(h(e["schedules"].map { "\($0)" } ?? "?")) schedules, \(h(e["failed"].map { "\($0)" } ?? "?")) failed, \(h(e["infeasible"].map { "\($0)" } ?? "?")) infeasible (seed \(h(e["seed"].map { "\($0)" } ?? "?")))</p>"
        if let f = e["first_failure"] {
            let order = (f["order"]?.arrayValue ?? []).map { "\($0)" }.joined(separator: ", ")
            s += "<p class=\"bad\">first failing order: <code class=\"order\">[\(h(order))]</code> fails <b>\(h(f["check"]?.stringValue ?? ""))</b>; shrunk from \(h(f["steps_before"].map { "\($0)" } ?? "?")) to \(h(f["steps_after"].map { "\($0)" } ?? "?")) steps</p>"
            if let file = f["scenario"] {
                s += "<details class=\"shrunk\"><summary>the shrunk scenario file (replay it with <code>contract-harness run FILE</code>)</summary><pre>\(h(Self.pretty(file), keepingLineFeeds: true))</pre></details>"
            }
        }
        return s + "</div>\n"
    }

    static func pretty(_ v: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(v)).map { String(decoding: $0, as: UTF8.self) } ?? v.jsonText
    }

    // MARK: The swim lanes

    static let rowHeight = 24.0
    static let top = 56.0
    static let gutter = 120.0
    /// A lane's width in pixels: clients share what a 1400 px window leaves them (at least 220,
    /// at most 420 each), so an operation's name, key and user fit when the lanes allow it.
    static func laneWidth(_ lane: ReportTimeline.Lane, in t: ReportTimeline) -> Double {
        switch lane {
        case .clock: return 110
        case .app: return 250
        case .mock: return 560
        case .client:
            let clients = t.lanes.filter { if case .client = $0 { return true } else { return false } }.count
            let fixed = gutter + t.lanes.reduce(0.0) { sum, l in if case .client = l { return sum } else { return sum + laneWidth(l, in: t) } }
            return min(420, max(220, (1290 - fixed) / Double(max(1, clients))))
        }
    }

    /// Height of a failing check's note of `lines` lines.
    static func noteHeight(_ lines: [String]) -> Double { Double(lines.count) * 15 + 12 }

    /// The swim-lane drawing of `t`; `id` makes its arrowhead markers' ids unique in the page
    /// (a `url(#id)` resolves to the page's first element with that id: a shared id would lose
    /// every arrowhead when the first timeline is folded or filtered out).
    func svg(_ t: ReportTimeline, id: String = "t") -> String {
        func laneWidth(_ lane: ReportTimeline.Lane) -> Double { Self.laneWidth(lane, in: t) }
        var x: [ReportTimeline.Lane: Double] = [:]
        var cursor = Self.gutter
        for lane in t.lanes {
            x[lane] = cursor + 14
            cursor += laneWidth(lane)
        }
        let lanesRight = cursor
        let width = lanesRight + 10
        let row = Dictionary(t.events.enumerated().map { ($1.index, $0) }, uniquingKeysWith: { a, _ in a })
        // Each failing check's note goes right below the row where it was decided, across the
        // lanes and wrapped to their width (so it is never cut off at the window's edge); the
        // rows below move down to make room. Row -1: before the first event.
        let columns = Int((lanesRight - 36 - 24) / 6.7)
        var notesAfter: [Int: [(ReportTimeline.Citation, [String])]] = [:]
        for c in t.citations {
            let r = c.anchor.flatMap { row[$0] } ?? -1
            notesAfter[r, default: []].append((c, Self.wrap("✗\(c.number) \(c.check.name): \(c.check.message ?? "")", columns: columns)))
        }
        // Each step that recorded no event of its own (a fault definition, a wait_for, an
        // assertion): a grey line where it ran, after the last row of the steps before it.
        var stepsAfter: [Int: [String]] = [:]
        let stepped = Set(t.events.map(\.step))
        // The step whose failure stopped the scenario (a failing check named for the step itself,
        // not its `expect` or an `assert`, which let it go on): the steps after it never ran and
        // are drawn so (a thirteenth outside tester: a `release` that never ran was drawn as run).
        let stoppedAt = t.checks.filter { !$0.passed }.compactMap { c -> Int? in
            guard let n = ReportTimeline.stepNumber(c.name), !c.name.hasSuffix(" expect"), !c.name.hasPrefix("step \(n) assert") else { return nil }
            return n
        }.min()
        for (n, summary) in t.stepSummaries.enumerated() where !stepped.contains(n) {
            if let stoppedAt, n > stoppedAt {
                let r = t.events.lastIndex { $0.step <= stoppedAt } ?? -1
                stepsAfter[r, default: []].append(Self.clip("step \(n): \(summary): not run (the scenario stopped at step \(stoppedAt))", lanesRight - 60))
                continue
            }
            let r = t.events.lastIndex { $0.step < n } ?? -1
            let check = t.checks.first { ReportTimeline.stepNumber($0.name) == n }
            var verdict = ""
            if let check {
                let number = t.citations.first { $0.check.name == check.name }?.number
                verdict = check.passed ? " ✓" : " ✗" + (number.map { "\($0)" } ?? "")
            }
            stepsAfter[r, default: []].append(Self.clip("step \(n): \(summary)\(verdict)", lanesRight - 60))
        }
        func notesHeight(_ r: Int) -> Double {
            Double(stepsAfter[r]?.count ?? 0) * Self.stepNoteHeight + (notesAfter[r] ?? []).reduce(0) { $0 + Self.noteHeight($1.1) + 6 }
        }
        // Operation spans (invocation to completion) side by side when they overlap in a lane,
        // at most across a third of the lane (then they overlap: 50 concurrent operations never spill
        // into the next lane).
        var open: [ReportTimeline.Lane: [Int]] = [:]
        var offset: [Int: Double] = [:]
        var spans: [(i: Int, j: Int, lane: ReportTimeline.Lane)] = []
        for (i, e) in t.events.enumerated() where e.kind == .invoke {
            let lane = t.lane(of: e)
            guard let j = t.completion(of: i) else { continue }
            let busy = (open[lane] ?? []).filter { $0 > i }
            let slots = max(1, Int(laneWidth(lane) / 3 / 9))
            offset[i] = Double(busy.count % slots) * 9
            open[lane] = busy + [j]
            spans.append((i, j, lane))
        }
        func dx(_ i: Int) -> Double {
            let e = t.events[i]
            switch e.kind {
            case .invoke: return offset[i] ?? 0
            case .complete: return t.events[..<i].lastIndex { $0.kind == .invoke && $0.label == e.label }.flatMap { offset[$0] } ?? 0
            default: return 0
            }
        }
        // Each event's label, wrapped onto up to 3 lines in its lane (the row grows to hold
        // them), so the user, key, outcome and what the app showed are never cut off.
        var labels: [[String]] = []
        var clears: [[String]] = []
        for (i, e) in t.events.enumerated() {
            let text = ReportTimeline.text(e)
            switch e.kind {
            case .request, .response: labels.append(Self.lines(text, laneWidth(.mock) - 14))
            case .invoke, .complete: labels.append(Self.lines(text, laneWidth(t.lane(of: e)) - 24 - dx(i)))
            case .marker: labels.append(Self.lines(text, laneWidth(t.lane(of: e)) - 24))
            }
            if let c = ReportTimeline.clearedClient(e), t.lanes.contains(.client(c)) {
                clears.append(Self.lines(ReportTimeline.clearText(e), laneWidth(.client(c)) - 24))
            } else { clears.append([]) }
        }
        func extraHeight(_ i: Int) -> Double { Double(max(labels[i].count, clears[i].count) - 1) * Self.lineHeight }
        var shift: [Double] = []
        var room = notesHeight(-1)
        for i in t.events.indices { shift.append(room); room += notesHeight(i) + extraHeight(i) }
        func y(_ i: Int) -> Double { Self.top + Double(i) * Self.rowHeight + Self.rowHeight / 2 + (shift.indices.contains(i) ? shift[i] : room) }
        let rowsBottom = Self.top + Double(t.events.count) * Self.rowHeight + 8 + room
        var body = ""
        var back = ""

        // Highlighted rows: every event a failing check cites, marked with the checks' numbers.
        for (i, e) in t.events.enumerated() {
            let cited = t.citing(e.index)
            guard !cited.isEmpty else { continue }
            back += "<rect class=\"cited-row\" data-index=\"\(e.index)\" x=\"0\" y=\"\(y(i) - Self.rowHeight / 2)\" width=\"\(lanesRight)\" height=\"\(Self.rowHeight + extraHeight(i))\"/>"
            back += "<text class=\"cite-mark\" x=\"4\" y=\"\(y(i) + 4)\">✗\(cited.map { "\($0.number)" }.joined(separator: ","))</text>"
        }
        // Lane headers and lifelines.
        var left = Self.gutter
        for lane in t.lanes {
            let lx = x[lane]!
            back += "<line class=\"lifeline\" x1=\"\(lx)\" y1=\"\(Self.top - 8)\" x2=\"\(lx)\" y2=\"\(rowsBottom)\"/>"
            body += "<g class=\"lane-head\" data-lane=\"\(h(lane.title))\"><rect x=\"\(left + 2)\" y=\"6\" width=\"\(laneWidth(lane) - 4)\" height=\"30\" rx=\"4\"/><text x=\"\(left + 10)\" y=\"26\">\(h(Self.clip(lane.caption, laneWidth(lane) - 12, pixelsPerCharacter: 7.3)))</text></g>"
            left += laneWidth(lane)
        }
        body += "<text class=\"gutter-head\" x=\"4\" y=\"26\">check</text><text class=\"gutter-head\" x=\"40\" y=\"26\">event</text>"
        // Operation spans, and holds (request to answer) in the mock's lane.
        for span in spans {
            if let lx = x[span.lane] {
                back += "<rect class=\"op-span\" x=\"\(lx - 4 + (offset[span.i] ?? 0))\" y=\"\(y(span.i))\" width=\"8\" height=\"\(y(span.j) - y(span.i))\"/>"
            }
        }
        for (i, e) in t.events.enumerated() {
            if let j = t.answer(to: i), let mx = x[.mock], j > i + 1 {
                let held = e.request?.fault != nil
                back += "<rect class=\"\(held ? "hold" : "wait")\" x=\"\(mx - 5)\" y=\"\(y(i))\" width=\"10\" height=\"\(y(j) - y(i))\"><title>\(h("#\(e.request?.seq ?? 0) " + (held ? "held by fault \(e.request?.fault ?? "") from receipt to release" : "in flight")))</title></rect>"
            }
        }
        // The events.
        var lastTime: Double?
        for (i, e) in t.events.enumerated() {
            let yy = y(i)
            let cited = !t.citing(e.index).isEmpty
            let hover = e.kind == .response ? e.request.flatMap(ReportTimeline.answerBody).map { e.line + "\n" + $0 } ?? e.line : e.line
            body += "<g class=\"event \(e.kind.rawValue)\(cited ? " cited" : "")\" data-index=\"\(e.index)\"><title>\(h(hover))</title>"
            body += "<text class=\"gutter\" x=\"40\" y=\"\(yy + 4)\">[\(e.index)] step \(e.step)</text>"
            if lastTime != e.time, let cx = x[.clock] {
                body += "<text class=\"clock\" x=\"\(cx + 8)\" y=\"\(yy + 4)\">t=\(Self.seconds(e.time))</text>"
                lastTime = e.time
            }
            let lane = t.lane(of: e)
            let lx = x[lane] ?? Self.gutter
            switch e.kind {
            case .request, .response:
                let mx = x[.mock]!
                let ok = e.request.map { $0.succeeded && !$0.cancelled } ?? false
                let cls = e.kind == .request ? "arrow-request" : (ok ? "arrow-answer" : "arrow-failed")
                let (x1, x2) = e.kind == .request ? (lx + 5, mx - 7) : (mx - 5, lx + 7)
                body += "<line class=\"\(cls)\" x1=\"\(x1)\" y1=\"\(yy)\" x2=\"\(x2)\" y2=\"\(yy)\" marker-end=\"url(#arrowhead-\(id))\"/>"
                body += textBlock(labels[i], x: mx + 10, y: yy + 4, cls: "mock-text")
            case .invoke, .complete:
                let dx = dx(i)
                body += "<circle class=\"dot\" cx=\"\(lx + dx)\" cy=\"\(yy)\" r=\"4\"/>"
                body += textBlock(labels[i], x: lx + dx + 10, y: yy + 4)
            case .marker:
                body += "<rect class=\"mark\" x=\"\(lx - 4)\" y=\"\(yy - 4)\" width=\"8\" height=\"8\"/>"
                body += textBlock(labels[i], x: lx + 10, y: yy + 4)
                // The app's logout (or undo) clears its SDK client's cache: drawn on that lane too.
                if let c = ReportTimeline.clearedClient(e), let cx = x[.client(c)] {
                    body += "<g class=\"cache-clear\"><line class=\"clear-link\" x1=\"\(cx - 24)\" y1=\"\(yy)\" x2=\"\(cx - 7)\" y2=\"\(yy)\"/>"
                    body += "<rect class=\"clear\" x=\"\(cx - 5)\" y=\"\(yy - 5)\" width=\"10\" height=\"10\"/>"
                    body += textBlock(clears[i], x: cx + 10, y: yy + 4) + "</g>"
                }
            }
            body += "</g>"
        }
        // The steps without events of their own, then each failing check: a line where it was
        // decided and its message right below it.
        for r in Set(notesAfter.keys).union(stepsAfter.keys).sorted() {
            var top = (r < 0 ? Self.top - 8 : y(r) + Self.rowHeight / 2 + extraHeight(r)) + 3
            for line in stepsAfter[r] ?? [] {
                body += "<g class=\"step-note\"><text x=\"40\" y=\"\(top + 11)\">\(h(line))</text></g>"
                top += Self.stepNoteHeight
            }
            for (c, lines) in notesAfter[r] ?? [] {
                let height = Self.noteHeight(lines)
                back += "<line class=\"decided\" x1=\"0\" y1=\"\(top - 1)\" x2=\"\(lanesRight)\" y2=\"\(top - 1)\"/>"
                body += "<g class=\"note\" data-check=\"\(h(c.check.name))\"><rect x=\"36\" y=\"\(top + 2)\" width=\"\(lanesRight - 42)\" height=\"\(height)\" rx=\"4\"/>"
                for (k, line) in lines.enumerated() {
                    body += "<text x=\"\(44.0)\" y=\"\(top + 19 + Double(k) * 15)\"\(k == 0 ? " class=\"note-head\"" : "")>\(h(line))</text>"
                }
                body += "</g>"
                top += height + 6
            }
        }
        let height = rowsBottom
        return """
        <svg class="lanes" xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(height)" viewBox="0 0 \(width) \(height)">\
        <defs><marker id="arrowhead-\(id)" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="context-stroke"/></marker></defs>\
        \(back)\(body)</svg>
        """
    }

    /// Milliseconds as the verdict file keeps them (3 decimals), so a report drawn during the run
    /// and one drawn from the saved verdict print the same.
    static func rounded(_ ms: Double) -> Double { (ms * 1000).rounded() / 1000 }

    /// A virtual time as the lanes label it: whole seconds as `30 s`, else every digit the history
    /// keeps (microseconds), trailing zeros dropped: `29.999 s`, `300.5 s` (three significant
    /// digits drew both 29.999 and 30 as `30 s`, in the file whose point is that difference: a
    /// thirteenth outside tester).
    static func seconds(_ t: Double) -> String {
        if t == t.rounded() { return String(format: "%.0f s", t) }
        var text = String(format: "%.6f", t)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text + " s"
    }

    /// The height of the line of a step that recorded no event.
    static let stepNoteHeight = 16.0

    /// The height of a label's second and third line.
    static let lineHeight = 13.0

    /// `text` wrapped to what fits `pixels` of 11 px monospace, on at most 3 lines (the last
    /// one cut with an ellipsis); the whole text stays in the event's hover.
    static func lines(_ text: String, _ pixels: Double) -> [String] {
        let columns = max(8, Int(pixels / 6.7))
        var lines = text.count <= columns ? [text] : wrap(text, columns: columns)
        if lines.count > 3 {
            lines = Array(lines.prefix(3))
            lines[2] = clip(lines[2] + " …", pixels)
        }
        return lines
    }

    /// A `<text>` of `lines` (one `<tspan>` per line after the first), its first baseline at `y`.
    func textBlock(_ lines: [String], x: Double, y: Double, cls: String? = nil) -> String {
        var s = "<text\(cls.map { " class=\"\($0)\"" } ?? "") x=\"\(x)\" y=\"\(y)\">"
        for (k, line) in lines.enumerated() {
            s += k == 0 ? h(line) : "<tspan x=\"\(x)\" dy=\"\(Self.lineHeight)\">\(h(line))</tspan>"
        }
        return s + "</text>"
    }

    /// `text` cut to what fits `pixels` of 11 px monospace (`pixelsPerCharacter`), with an ellipsis.
    static func clip(_ text: String, _ pixels: Double, pixelsPerCharacter: Double = 6.7) -> String {
        let n = max(4, Int(pixels / pixelsPerCharacter))
        return text.count > n ? String(text.prefix(n - 1)) + "…" : text
    }

    /// `text` broken into lines of at most `columns` characters at spaces (at most 8 lines).
    /// Linear in the text, and it stops once a ninth line is due: a failing scenario with a user
    /// id of a million characters took minutes to draw (a sixteenth outside tester).
    static func wrap(_ text: String, columns: Int) -> [String] {
        var lines: [String] = []
        var line = "", lineCount = 0
        for word in text.split(separator: " ", omittingEmptySubsequences: false) {
            if lines.count > 8 { break }
            var rest = word[...]
            var restCount = rest.count
            while restCount > columns && lines.count <= 8 {
                if !line.isEmpty { lines.append(line); line = ""; lineCount = 0 }
                let cut = rest.index(rest.startIndex, offsetBy: columns)
                lines.append(String(rest[..<cut]))
                rest = rest[cut...]
                restCount -= columns
            }
            if lines.count > 8 { break }
            if line.isEmpty {
                line = String(rest); lineCount = restCount
            } else if lineCount + 1 + restCount <= columns {
                line += " " + rest; lineCount += 1 + restCount
            } else {
                lines.append(line); line = String(rest); lineCount = restCount
            }
        }
        if !line.isEmpty && lines.count <= 8 { lines.append(line) }
        if lines.count > 8 { lines = Array(lines.prefix(7)) + ["… (the whole message is in the list above)"] }
        return lines
    }

    static let css = """
    body{font:14px/1.4 system-ui,-apple-system,Segoe UI,sans-serif;margin:16px 24px;color:#1d2329;background:#fff}
    h1{font-size:22px;margin:0 0 4px}h2{font-size:18px}h3{font-size:15px;margin:8px 0 4px}
    .meta,.counts{margin:2px 0;color:#444}
    .badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;font-weight:600;color:#fff;background:#888}
    .badge.passed{background:#2e7d32}.badge.failed{background:#c62828}.badge.skipped{background:#8d6e63}.badge.error{background:#6a1b9a}.badge.crashed{background:#000}
    nav#filters{margin:12px 0;display:flex;gap:14px;align-items:center;flex-wrap:wrap}
    table{border-collapse:collapse;margin:8px 0 16px}th,td{border-bottom:1px solid #e3e6ea;padding:4px 8px;text-align:left;vertical-align:top}
    th{background:#f3f5f7;font-weight:600}td.num{text-align:right;white-space:nowrap}td.failure{color:#8e1c1c;max-width:620px}
    .tag{display:inline-block;background:#eef2f7;border-radius:4px;padding:0 5px;margin:1px;font-size:12px}
    tr.missed td{background:#fff0f0}
    section.scenario{border:1px solid #dde1e6;border-radius:6px;margin:12px 0;padding:6px 12px}
    section.scenario summary{cursor:pointer;font-size:16px}.name{font-weight:600}.file{color:#777;font-size:12px;margin-left:8px}
    ol.checks li{margin:3px 0}.check-name{color:#b71c1c}.passed-checks{color:#2e7d32;font-size:13px}.bad{color:#b71c1c}
    .timeline{overflow:auto;max-height:88vh;border-top:1px solid #eee;margin-top:6px}
    svg.lanes{font:11px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
    .lane-head rect{fill:#eef2f7;stroke:#c5ccd4}.lane-head text{font-weight:700;font-size:12px;fill:#1d2329}
    .gutter-head{font-weight:700;fill:#555}.gutter{fill:#888}.clock{fill:#6a1b9a}
    .lifeline{stroke:#b8c0c8;stroke-dasharray:3 3}
    .op-span{fill:#bbdefb;stroke:#64b5f6}.hold{fill:#ffe0b2;stroke:#fb8c00}.wait{fill:#eeeeee;stroke:#bbb}
    .dot{fill:#1565c0}.mark{fill:#7b1fa2}
    .arrow-request{stroke:#1565c0;stroke-width:1.6}.arrow-answer{stroke:#2e7d32;stroke-width:1.6;stroke-dasharray:5 3}
    .arrow-failed{stroke:#c62828;stroke-width:1.6;stroke-dasharray:5 3}
    .mock-text{fill:#333}.event.cited text{fill:#b71c1c;font-weight:700}
    .cited-row{fill:#ffebee}.cite-mark{fill:#c62828;font-weight:700}.decided{stroke:#c62828;stroke-width:1.5;stroke-dasharray:6 3}.cite-link{stroke:#e57373;stroke-width:.8}
    .note rect{fill:#fff5f5;stroke:#c62828}.note text{fill:#7f0000}.note .note-head{font-weight:700}.cache-clear .clear{fill:#6a1b9a}.cache-clear .clear-link{stroke:#6a1b9a;stroke-dasharray:2 3}.cache-clear text{fill:#4a148c;font-weight:600}.step-note text{fill:#5f6b77;font-style:italic;paint-order:stroke;stroke:#fff;stroke-width:3px}
    pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:12px}
    .hidden{display:none}
    """

    static let script = """
    (function(){
      function apply(){
        var shown={};document.querySelectorAll('.status-filter').forEach(function(b){shown[b.value]=b.checked;});
        var tag=document.getElementById('tag-filter').value;
        document.querySelectorAll('[data-status]').forEach(function(el){
          var tags;try{tags=JSON.parse(el.getAttribute('data-tags')||'[]');}catch(e){tags=[];}
          var ok=shown[el.getAttribute('data-status')]&&(tag===''||tags.indexOf(tag)>=0);
          el.classList.toggle('hidden',!ok);
        });
        var any=document.querySelector('#summary tr.row:not(.hidden)')!==null;
        document.getElementById('no-match').classList.toggle('hidden',any);
        document.getElementById('summary').classList.toggle('hidden',!any);
      }
      // A link to a scenario opens its folded section.
      function reveal(){
        var m=location.hash.match(/^#(scenario-[0-9]+)$/);if(!m)return;
        var sec=document.getElementById(m[1]);if(!sec)return;
        var d=sec.querySelector('details');if(d)d.open=true;
        sec.scrollIntoView();
      }
      window.addEventListener('hashchange',reveal);
      reveal();
      document.querySelectorAll('.status-filter').forEach(function(b){b.addEventListener('change',apply);});
      document.getElementById('tag-filter').addEventListener('change',apply);
      // A link can preset the filters: report.html#status=failed,error&tag=race
      // A value that is not valid percent-encoding (#tag=%ZZ) is taken as written.
      var params={};location.hash.replace(/^#/,'').split('&').forEach(function(p){var i=p.indexOf('=');var k=i<0?p:p.slice(0,i),v=i<0?'':p.slice(i+1);if(!k)return;try{params[k]=decodeURIComponent(v);}catch(e){params[k]=v;}});
      if(params.status!==undefined){var want=params.status.split(',');document.querySelectorAll('.status-filter').forEach(function(b){b.checked=want.indexOf(b.value)>=0;});}
      // A tag no scenario has is still the filter (it matches nothing), not "any".
      if(params.tag!==undefined){var sel=document.getElementById('tag-filter');
        if(!Array.prototype.some.call(sel.options,function(o){return o.value===params.tag;})){var o=document.createElement('option');o.value=params.tag;o.textContent=params.tag+' (no scenario)';sel.appendChild(o);}
        sel.value=params.tag;}
      apply();
    })();
    """
}
