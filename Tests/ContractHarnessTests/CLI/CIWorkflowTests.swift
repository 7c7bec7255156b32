import XCTest
import Foundation
@testable import ContractHarness

/// The GitHub Actions workflows of `Documentation/CI.md` parse, have the shape Actions needs, use
/// only `contract-harness` commands and options that exist, and are what CI.md shows.
final class CIWorkflowTests: XCTestCase {
    static let folder = Repository.root.appendingPathComponent("Documentation/workflows")
    static let files = ["contract-suite.yml", "other-sdk.yml"]

    /// The workflow as JSON, parsed by Python's `yaml.safe_load`.
    func parse(_ file: URL) throws -> [String: Any] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", "-c", "import sys, json, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))", file.path]
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let problem = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        if p.terminationStatus != 0, String(decoding: problem, as: UTF8.self).contains("No module named") || p.terminationStatus == 127 {
            throw XCTSkip("python3 with the yaml module is not installed (.ci/run installs python3-yaml)")
        }
        XCTAssertEqual(p.terminationStatus, 0, "\(file.lastPathComponent) does not parse: \(String(decoding: problem, as: UTF8.self))")
        return try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// Every `--option` each `contract-harness COMMAND` line uses, by command.
    static func invocations(_ script: String) -> [(command: String, options: [String])] {
        var found: [(String, [String])] = []
        for line in script.split(separator: "\n") {
            let words = line.split(separator: " ").map(String.init)
            guard let i = words.firstIndex(where: { $0.hasSuffix("contract-harness") }), i + 1 < words.count else { continue }
            found.append((words[i + 1], words[(i + 2)...].filter { $0.hasPrefix("--") }))
        }
        return found
    }

    /// The usage text that lists each command's options (also used by DocumentationCommandsTests).
    static let usages = ["run": HarnessCommand.usage, "mutants": HarnessCommand.usage, "report": HarnessCommand.usage,
                         "explore": HarnessCommand.usage, "schema": HarnessCommand.usage, "scenario": HarnessCommand.usage,
                         "serve": ServeCommand.usage, "vectors": VectorsCommand.usage, "live-check": LiveCheckCommand.usage,
                         "generate": GenerateCommand.usage]

    /// `true` when `usage` lists `option` (followed by a space, `]` or a line end).
    static func lists(_ usage: String, _ option: String) -> Bool {
        usage.contains(option + " ") || usage.contains(option + "]") || usage.contains(option + "\n")
    }

    func testTheWorkflowsParseAndUseOnlyOptionsThatExist() throws {
        let usages = Self.usages
        var commands: Set<String> = []
        var uploads: [String] = []
        for name in Self.files {
            let workflow = try parse(Self.folder.appendingPathComponent(name))
            XCTAssertNotNil(workflow["name"] as? String, name)
            // YAML 1.1 reads the key `on` as true.
            XCTAssertNotNil(workflow["on"] ?? workflow["true"], "\(name) has no trigger")
            let jobs = try XCTUnwrap(workflow["jobs"] as? [String: Any], name)
            XCTAssertFalse(jobs.isEmpty)
            for (jobName, value) in jobs {
                let job = try XCTUnwrap(value as? [String: Any])
                XCTAssertNotNil(job["runs-on"], "\(name) \(jobName) has no runs-on")
                let steps = try XCTUnwrap(job["steps"] as? [[String: Any]], "\(name) \(jobName) has no steps")
                for (i, step) in steps.enumerated() {
                    XCTAssertTrue((step["run"] == nil) != (step["uses"] == nil), "\(name) \(jobName) step \(i): exactly one of run and uses")
                    if let script = step["run"] as? String {
                        for call in Self.invocations(script) {
                            let usage = try XCTUnwrap(usages[call.command], "\(name): unknown command contract-harness \(call.command)")
                            commands.insert(call.command)
                            for option in call.options {
                                XCTAssertTrue(Self.lists(usage, option),
                                              "\(name): contract-harness \(call.command) has no option \(option)")
                            }
                        }
                    }
                    if let uses = step["uses"] as? String, uses.hasPrefix("actions/upload-artifact"),
                       let with = step["with"] as? [String: Any], let path = with["path"] as? String {
                        uploads += path.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
                    }
                }
            }
        }
        XCTAssertEqual(commands, ["run", "mutants", "report", "vectors", "serve"])
        for artifact in ["verdict.json", "junit.xml", "report.html", "vectors-verdict.json", "journal.json"] {
            XCTAssertTrue(uploads.contains(artifact), "\(artifact) is not uploaded")
        }
    }

    func testCIMarkdownShowsTheWorkflowFilesVerbatim() throws {
        let doc = try String(contentsOf: Repository.root.appendingPathComponent("Documentation/CI.md"), encoding: .utf8)
        for name in Self.files {
            let text = try String(contentsOf: Self.folder.appendingPathComponent(name), encoding: .utf8)
            XCTAssertTrue(doc.contains("```yaml\n" + text + "```"), "CI.md's copy of \(name) differs from the file")
        }
    }

    func testTheOptionCheckCatchesAnOptionThatDoesNotExist() {
        let calls = Self.invocations("  .build/release/contract-harness run scenarios --verdict v.json --htlm r.html")
        XCTAssertEqual(calls.first?.command, "run")
        XCTAssertEqual(calls.first?.options, ["--verdict", "--htlm"])
        XCTAssertFalse(HarnessCommand.usage.contains("--htlm"))
    }
}
