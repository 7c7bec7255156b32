import Foundation
import ExperimentlyMock

/// The API keys a run configures, so that every output (console, verdict, JUnit, explore files)
/// can hide them with one ``SecretRedactor`` (issue 10 section 3).
enum ConfiguredSecrets {
    /// Every key of `scenario`: its fixtures' `api_keys` (the reference set's `sdk-contract-key`
    /// when it names none), and the `api_key` of its config and of each client.
    static func keys(of scenario: Scenario) -> [String] {
        var keys = [scenario.settings.apiKey] + scenario.clients.map(\.settings.apiKey)
        if let fixtures = scenario.fixtures {
            keys += fixtures["api_keys"]?.arrayValue?.compactMap { $0["key"]?.stringValue } ?? []
        } else {
            keys += Fixtures.sdkContract.apiKeys.map(\.key)
        }
        return keys
    }

    /// Every string under an `api_key` member, and every `key` of an `api_keys` array, anywhere in
    /// `json`: the keys of a file that did not parse as a scenario still get hidden.
    static func keys(in json: JSONValue) -> [String] {
        var out: [String] = []
        func walk(_ v: JSONValue) {
            switch v {
            case .object(let o):
                for (k, member) in o {
                    if k == "api_key", let s = member.stringValue { out.append(s) }
                    if k == "api_keys", let items = member.arrayValue { out += items.compactMap { $0["key"]?.stringValue } }
                    walk(member)
                }
            case .array(let a): a.forEach(walk)
            default: break
            }
        }
        walk(json)
        return out
    }

    /// The keys of every scenario file in `files` (parsed or not) plus those of `scenarios`.
    static func keys(files: [String], scenarios: [Scenario]) -> [String] {
        var keys = scenarios.flatMap(keys(of:)) + Fixtures.sdkContract.apiKeys.map(\.key)
        for file in files {
            guard let data = FileManager.default.contents(atPath: file), let parsed = try? JSONValue.parse(data) else { continue }
            keys += self.keys(in: parsed.value)
        }
        return keys
    }
}

/// Makes text safe to print on a terminal: control characters (C0 including newline and tab,
/// DEL, C1) and the bidirectional overrides and isolates (U+202A...U+202E, U+2066...U+2069,
/// "Trojan Source", CVE-2021-42574) are written as `\u{XX}` escapes, so a scenario name, label
/// or message can neither move the cursor, recolour the terminal, fake another output line nor
/// reorder what is shown.
enum TerminalText {
    /// `text` with every unsafe scalar escaped (line feeds kept when `keepingLineFeeds`, for
    /// multi-line text such as another program's standard error); other text unchanged.
    static func escape(_ text: String, keepingLineFeeds: Bool = false) -> String {
        func unsafe(_ s: Unicode.Scalar) -> Bool { isUnsafe(s) && !(keepingLineFeeds && s == "\n") }
        guard text.unicodeScalars.contains(where: unsafe) else { return text }
        var out = String.UnicodeScalarView()
        for s in text.unicodeScalars {
            if unsafe(s) {
                out.append(contentsOf: "\\u{\(String(s.value, radix: 16, uppercase: true))}".unicodeScalars)
            } else {
                out.append(s)
            }
        }
        return String(out)
    }

    static func isUnsafe(_ s: Unicode.Scalar) -> Bool {
        s.value < 0x20 || (0x7F...0x9F).contains(s.value) || (0x202A...0x202E).contains(s.value) || (0x2066...0x2069).contains(s.value)
    }
}
