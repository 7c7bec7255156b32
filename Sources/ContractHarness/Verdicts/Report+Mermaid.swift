import Foundation
import ExperimentlyMock

extension Verdict {
    /// The failing scenarios as Mermaid sequence diagrams in Markdown, to paste into a pull
    /// request: per failing scenario a heading, its failing checks, and a fenced `mermaid` block
    /// with a participant per lane (reference app, each client, the mock), an arrow per request
    /// and per answer, notes for operations and markers, the events a failing check cites
    /// marked `✗N`, and the checks' messages as notes at the end. Scenarios without a recorded
    /// `timeline` get the heading and checks only. Documented in `Documentation/Report.md`.
    ///
    /// Every text is redacted (``SecretRedactor``) and Mermaid's special characters are written
    /// as entity codes (`#35;` `#59;` `#60;` `#62;` `#96;` `#37;`), so a name cannot end or configure a diagram.
    public func mermaid(redacting secrets: [String]) -> String {
        let redactor = SecretRedactor(secrets: secrets)
        func m(_ text: String) -> String {
            var out = ""
            for ch in TerminalText.escape(redactor.redact(text)).unicodeScalars {
                switch ch {
                case "#": out += "#35;"
                case ";": out += "#59;"
                case "<": out += "#60;"
                case ">": out += "#62;"
                case "`": out += "#96;"
                // `%%` starts a Mermaid comment or a `%%{init: ...}%%` directive: a user id must
                // not configure or cut the diagram (a forty-eighth outside tester, N).
                case "%": out += "#37;"
                default: out.unicodeScalars.append(ch)
                }
            }
            return out
        }
        /// Plain Markdown text: redacted, control characters visible, Markdown/HTML specials escaped.
        func md(_ text: String) -> String {
            var out = ""
            for ch in TerminalText.escape(redactor.redact(text)).unicodeScalars {
                if "\\`*_[]<>#|".unicodeScalars.contains(ch) { out += "\\" }
                out.unicodeScalars.append(ch)
            }
            return out
        }
        // Crashed and errored scenarios are failing too (a thirteenth outside tester: a run with
        // crashes said 0; a forty-eighth, J: a malformed file's run, exit 64, said 0).
        let failing = results.filter { $0.status == .failed || $0.status == .crashed || $0.status == .error }
        var doc = "# contract-harness: \(failing.count) failing scenario(s)\(ok ? "" : ", NOT OK")\n\n"
        doc += "SDK under test \(md(sdkName)) \(md(sdkVersion)), seed \(seed), harness \(md(harnessVersion)).\n"
        // What made the run not OK when no scenario says it (no scenario to run, a `vectors`
        // mismatch, an interrupted run): the verdict's own `error`.
        if !ok {
            let why = extra["error"]?.stringValue ?? (failing.isEmpty ? "the verdict's ok is false" : nil)
            if let why { doc += "\n**NOT OK**: \(md(why))\n" }
        }
        for r in failing {
            let t = ReportTimeline(r)
            doc += "\n## \(md(r.name))\n\n"
            for c in t.citations { doc += "- ✗\(c.number) **\(md(c.check.name))**: \(md(c.check.message ?? ""))\n" }
            // A scenario with no failed check (a malformed file, one not run) says why.
            if t.citations.isEmpty, let reason = r.reason { doc += "- **\(r.status)**: \(md(reason))\n" }
            guard !r.events.isEmpty else { continue }
            var ids: [ReportTimeline.Lane: String] = [:]
            doc += "\n```mermaid\nsequenceDiagram\n"
            for (i, lane) in t.lanes.enumerated() where lane != .clock {
                ids[lane] = "p\(i)"
                doc += "    participant p\(i) as \(m(lane.title))\n"
            }
            let mock = ids[.mock]!
            for e in t.events {
                let cited = t.citing(e.index).map { "✗\($0.number) " }.joined()
                let text = m("\(cited)[\(e.index)] t=\(e.time) " + ReportTimeline.text(e))
                let lane = t.lane(of: e)
                let who = ids[lane] ?? mock
                switch e.kind {
                case .request: doc += "    \(who)->>\(mock): \(text)\n"
                case .response:
                    let ok = e.request.map { $0.succeeded && !$0.cancelled } ?? false
                    doc += "    \(mock)\(ok ? "-->>" : "--x")\(who): \(text)\n"
                case .invoke, .complete, .marker:
                    if lane == .clock { doc += "    Note over \(ids.values.sorted().first ?? mock),\(mock): \(text)\n" }
                    else { doc += "    Note over \(who): \(text)\n" }
                }
                // The app's logout (or undo) clears its SDK client's cache: a note on that client too.
                if let c = ReportTimeline.clearedClient(e), let id = ids[.client(c)] {
                    doc += "    Note over \(id): \(m(ReportTimeline.clearText(e)))\n"
                }
            }
            let first = ids.values.sorted().first ?? mock
            for c in t.citations {
                doc += "    Note over \(first),\(mock): \(m("✗\(c.number) \(c.check.name): \(c.check.message ?? "")"))\n"
            }
            doc += "```\n"
        }
        return doc
    }
}
