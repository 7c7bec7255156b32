import Foundation

/// The known failures of a run (`--skip TEXT`, `--skip-from FILE`): such scenarios still run; one
/// that fails (or errors) is reported as `KNOWN` and counted as skipped with reason
/// `known failure: ...`, one that passes is reported as `FIXED` so the list can be trimmed, and
/// one that crashes stays `CRASH`.
struct KnownFailures {
    /// Texts of `--skip`: a scenario whose name or a tag contains one is a known failure.
    var patterns: [String] = []
    /// Names read from `--skip-from` files (by Unicode scalars: NFC and NFD spellings are two
    /// names, as two scenarios), with the file each came from.
    var names: [ExactKey: String] = [:]

    var isEmpty: Bool { patterns.isEmpty && names.isEmpty }

    /// Reads a `--skip-from` file: one scenario name a line; `#` starts a comment (the reason);
    /// blank lines are ignored; a line ending `\r\n` (a file written on Windows) is read as
    /// ending `\n` (before, every name of such a file kept its `\r` and matched nothing: an outside
    /// tester).
    ///
    /// - Throws: `HarnessCommand.UsageError` naming the file when it cannot be read.
    mutating func load(_ file: String) throws {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            throw HarnessCommand.UsageError("--skip-from \(file): cannot read the file")
        }
        // `\r\n` is one Character in Swift: split where any line ends, so a CRLF file's lines split too.
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            let name = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if !name.isEmpty { names[ExactKey(name)] = file }
        }
    }

    /// Whether `scenario` is a known failure; compares names by Unicode scalars.
    func matches(_ scenario: Scenario) -> Bool {
        if names[ExactKey(scenario.name)] != nil { return true }
        return patterns.contains { p in scenario.name.contains(p) || scenario.tags.contains { $0.contains(p) } }
    }

    /// The `--skip-from` names that name none of `scenarios` (a typo, a renamed scenario, another
    /// spelling), with their file, sorted: a warning each, so a known failure never shows as a
    /// FAIL for a list that silently missed it.
    func unmatched(in scenarios: [Scenario]) -> [(name: String, file: String)] {
        let present = Set(scenarios.map { ExactKey($0.name) })
        return names.filter { !present.contains($0.key) }.map { ($0.key.text, $0.value) }.sorted { ($0.file, $0.name) < ($1.file, $1.name) }
    }

    /// Turns a failing known failure into a skipped result; returns the console line. A crash
    /// stays a crash (counted, failing the run), its reason saying it was listed: a known failure
    /// covers a check that fails, and one that turns into a crash is a new failure (a forty-seventh
    /// outside tester, G: a known failure that crashed left the run green).
    func apply(_ r: inout ScenarioResult) -> String? {
        switch r.status {
        case .crashed:
            let note = " [listed as a known failure, but it crashed: a known failure never covers a crash]"
            if !(r.reason ?? "").hasSuffix(note) { r.reason = (r.reason ?? "crashed") + note }
            return nil
        case .failed, .error:
            let why = r.firstFailure.map { "\($0.name): \($0.message ?? "")" } ?? r.reason ?? ""
            r.status = .skipped
            r.reason = "known failure: " + why
            return "KNOWN \(r.name): \(why)"
        case .passed:
            let source = names[ExactKey(r.name)]
            return "FIXED \(r.name): listed as a known failure but passes now" + (source.map { "; remove it from \($0)" } ?? "; drop its --skip")
        case .skipped:
            return nil
        }
    }
}

extension HarnessCommand {
    /// `--list`: each scenario that would run, with what it needs and, for a driver lacking it,
    /// that it would be skipped.
    static func list(_ scenarios: [Scenario], driver: any SDKDriver, known: KnownFailures) {
        for s in scenarios {
            let needs = ScenarioRequirements.needed(s).filter { !SDKOperation.allNames.contains($0) }
            let missing = ScenarioRequirements.missing(s, capabilities: driver.capabilities)
            var line = s.name + (needs.isEmpty ? "" : "  requires: \(needs.joined(separator: ", "))")
            if !missing.isEmpty { line += "  [SKIP: lacks \(missing.joined(separator: ", "))]" }
            if known.matches(s) { line += "  [known failure]" }
            say(line)
        }
        say("\(scenarios.count) scenario(s)")
    }
}
