import Foundation
import ExperimentlyMock

extension Verdict {
    /// JUnit XML as CI viewers read it (documented in `Documentation/Verdict.md`): one
    /// `testsuite` with `timestamp` (the run's start, ISO-8601 UTC) and `hostname`, its
    /// `properties` (`seed`, `sdk.name`, `sdk.version`, `harness.version`, and `mutant` when the
    /// run was against a broken variant), and a `testcase` per scenario whose `classname` is the
    /// scenario's group (``junitGroup(_:)``), so viewers build a tree. A failed scenario's
    /// `failure` has the first failing check as its `message` and every failing check, each with
    /// its history slice, as its text; its `system-out` holds the recorded history (or the first
    /// slice when none was kept). With `error`, one erroring `testcase` says why the run could not
    /// happen.
    ///
    /// Each text is redacted (``SecretRedactor``) before XML escaping, and the whole document again
    /// after; control characters other than line feed and tab become `?` (XML 1.0 cannot hold them).
    public func junit(redacting secrets: [String], error: String? = nil,
                      hostname: String = ProcessInfo.processInfo.hostName) -> Data {
        let redactor = SecretRedactor(secrets: secrets)
        func esc(_ s: String) -> String {
            var out = ""
            for ch in redactor.redact(s).unicodeScalars {
                switch ch {
                case "&": out += "&amp;"
                case "<": out += "&lt;"
                case ">": out += "&gt;"
                case "\"": out += "&quot;"
                default:
                    if (ch.value < 0x20 && ch != "\n" && ch != "\t") || ch.value == 0xFFFE || ch.value == 0xFFFF { out += "?" } else { out.unicodeScalars.append(ch) }
                }
            }
            return out
        }
        let c = counts
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        let stamp = f.string(from: startedAt)
        let tests = results.count + invalid.count + (error == nil ? 0 : 1)
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        xml += "<testsuite name=\"contract-harness\" tests=\"\(tests)\" failures=\"\(c.failed)\" errors=\"\(c.error + crashedCount + (error == nil ? 0 : 1))\" skipped=\"\(c.skipped)\" time=\"\(durationMilliseconds / 1000)\" timestamp=\"\(stamp)\" hostname=\"\(esc(hostname))\">\n"
        xml += "  <properties>\n"
        var properties: [(String, String)] = [("seed", "\(seed)"), ("sdk.name", sdkName), ("sdk.version", sdkVersion), ("harness.version", harnessVersion)]
        if let mutant = extra["mutant"]?.stringValue { properties.append(("mutant", mutant)) }
        for (name, value) in properties { xml += "    <property name=\"\(name)\" value=\"\(esc(value))\"/>\n" }
        xml += "  </properties>\n"
        for r in results {
            xml += "  <testcase classname=\"\(esc(Self.junitGroup(r)))\" name=\"\(esc(r.name))\" file=\"\(esc(r.file))\" time=\"\(r.durationMilliseconds / 1000)\""
            switch r.status {
            case .passed: xml += "/>\n"
            case .skipped: xml += "><skipped message=\"\(esc(r.reason ?? ""))\"/></testcase>\n"
            case .error: xml += "><error message=\"\(esc(r.reason ?? ""))\"/></testcase>\n"
            case .crashed:
                // The process running the scenario died: the reason, and the last lines of its stderr.
                let tail = r.crash?["stderr_tail"]?.arrayValue?.compactMap(\.stringValue) ?? []
                xml += ">\n    <error message=\"\(esc(r.reason ?? "crashed"))\" type=\"crashed\">\(esc(tail.joined(separator: "\n")))</error>\n  </testcase>\n"
            case .failed:
                let failing = r.checks.filter { !$0.passed }
                let first = failing.first
                let text = failing.enumerated().map { i, check in
                    "✗\(i + 1) \(check.name): \(check.message ?? "")" + ((check.history ?? []).isEmpty ? "" : "\n" + (check.history ?? []).map { "    " + $0 }.joined(separator: "\n"))
                }.joined(separator: "\n\n")
                let out = r.events.isEmpty ? (first?.history ?? []) : r.events.map(\.line)
                xml += ">\n    <failure message=\"\(esc("\(first?.name ?? "?"): \(first?.message ?? r.reason ?? "")"))\" type=\"\(esc(first?.name ?? "failure"))\">\(esc(text))</failure>\n"
                xml += "    <system-out>\(esc(out.joined(separator: "\n")))</system-out>\n  </testcase>\n"
            }
        }
        for item in invalid {
            xml += "  <testcase classname=\"malformed\" name=\"\(esc(item.file))\" file=\"\(esc(item.file))\" time=\"0\"><error message=\"\(esc(item.error))\"/></testcase>\n"
        }
        if let error {
            xml += "  <testcase classname=\"contract-harness\" name=\"run\" time=\"0\"><error message=\"\(esc(error))\"/></testcase>\n"
        }
        xml += "</testsuite>\n"
        // Every text went through `esc`, which redacts before it escapes; a pass over the whole
        // document replaced markup (`version="1.0"` with a key "1": an eightieth outside tester, F3).
        return Data(xml.utf8)
    }

    /// A scenario's group for JUnit's `classname`: its file name's prefix before the first `-`
    /// (`defect-1-stale-write....json` → `defect`, `s4-cache-is-per-user.json` → `s4`), else its
    /// first tag, else `scenarios`.
    static func junitGroup(_ r: ScenarioResult) -> String {
        let base = ((r.file as NSString).lastPathComponent as NSString).deletingPathExtension
        if let dash = base.firstIndex(of: "-"), dash != base.startIndex { return String(base[..<dash]) }
        return r.tags.first ?? "scenarios"
    }
}
