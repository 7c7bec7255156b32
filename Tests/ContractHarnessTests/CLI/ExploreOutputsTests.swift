import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// `explore` (and `explore --interleave`) refuse, with exit 64 before any schedule runs, outputs
/// that would overwrite each other or the scenario explored, as `run` refuses outputs naming one
/// file (`checkDistinct`). The scenario is a copy in a scratch folder: a missing refusal would
/// overwrite the copy, never a shipped file.
final class ExploreOutputsTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path), "contract-harness not built")
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("explore-outputs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: Repository.root.appendingPathComponent("scenarios/race-explore-clear-vs-late-assignment.json"),
                                         to: dir.appendingPathComponent("s.json"))
    }

    override func tearDownWithError() throws { if let dir { try? FileManager.default.removeItem(at: dir) } }

    func testOutputsNamingOneFileOrTheScenarioAreRefused() throws {
        let original = try Data(contentsOf: dir.appendingPathComponent("s.json"))
        for command in [["explore"], ["explore", "--interleave"]] {
            let suffix = command.count == 2 ? "interleaving" : "schedule"
            for options in [["--out", "x.json", "--verdict", "./x.json"], ["--out", "s.json"], ["--verdict", "sub/../s.json"],
                            ["--verdict", "race-explore-clear-vs-late-assignment-\(suffix).json"]] {
                try? FileManager.default.createDirectory(at: dir.appendingPathComponent("sub"), withIntermediateDirectories: true)
                let run = try HarnessProcess.run(command + ["s.json"] + options, in: dir, readingStandardError: true)
                XCTAssertEqual(run.status, 64, "\(command) \(options): \(run.out)")
                XCTAssertTrue(run.out.contains("name the same file"), run.out)
            }
        }
        XCTAssertEqual(try Data(contentsOf: dir.appendingPathComponent("s.json")), original, "the scenario file is untouched")
        let fine = try HarnessProcess.run(["explore", "s.json", "--out", "o.json", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(fine.status, 0, fine.out)
    }

    /// `run` options explore does not honour are refused with exit 64, naming the option: before,
    /// `explore --html r.html` (or `--fail-fast`, `--junit`, `--skip`, `--history`...) was accepted
    /// and did nothing, and `--step-timeout-ms` was ignored.
    func testRunOptionsExploreDoesNotHonourAreRefused() throws {
        try Data("x\n".utf8).write(to: dir.appendingPathComponent("k.txt"))
        for command in [["explore"], ["explore", "--interleave"]] {
            for options in [["--html", "r.html"], ["--fail-fast"], ["--junit", "j.xml"], ["--skip", "x"], ["--history"], ["--list"],
                            ["--filter", "x"], ["--mermaid", "m.md"], ["--explore"], ["--skip-from", "k.txt"]] {
                let run = try HarnessProcess.run(command + ["s.json"] + options, in: dir, readingStandardError: true)
                XCTAssertEqual(run.status, 64, "\(command) \(options): \(run.out)")
                XCTAssertTrue(run.out.contains("takes no \(options[0])"), run.out)
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("r.html").path))
    }

    /// `--step-timeout-ms` caps explore's step limits and is kept in the replay command, so the
    /// written schedule replays under the limits it was found under.
    func testTheStepLimitCapIsHonouredAndKeptInTheReplayCommand() throws {
        let run = try HarnessProcess.run(["explore", "s.json", "--mutant", "stale-write-after-clear", "--step-timeout-ms", "900", "--out", "o.json"], in: dir)
        XCTAssertEqual(run.status, 1, run.out)
        XCTAssertTrue(run.out.contains("replay: contract-harness run o.json --mutant stale-write-after-clear --step-timeout-ms 900"), run.out)
        let replay = try HarnessProcess.run(["run", "o.json", "--mutant", "stale-write-after-clear", "--step-timeout-ms", "900", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(replay.status, 1, replay.out)
    }

    /// The verdicts of `explore` and `explore --interleave` give their failing scenario the
    /// timeline and step lines of a replay of the written file, as `run --explore` does, so
    /// `report --html` draws its swim lanes (Verdict.md: a failing scenario always has its
    /// timeline). Before, neither had one (a forty-eighth outside tester, K).
    func testExploreVerdictsCarryTheReplayedTimeline() throws {
        try FileManager.default.copyItem(at: Repository.root.appendingPathComponent("scenarios/defect-1-stale-write-after-clearcache.json"),
                                         to: dir.appendingPathComponent("d.json"))
        for (command, verdict) in [(["explore", "s.json"], "ex.json"), (["explore", "d.json", "--interleave"], "il.json"),
                                   (["run", "s.json", "--explore"], "rex.json")] {
            let out = verdict.replacingOccurrences(of: ".json", with: "-out.json")
            let run = try HarnessProcess.run(command + ["--mutant", "stale-write-after-clear", "--verdict", verdict]
                                             + (command[0] == "explore" ? ["--out", out] : []), in: dir)
            XCTAssertEqual(run.status, 1, run.out)
            let v = try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent(verdict))).value
            let scenario = try XCTUnwrap(v["scenarios"]?.arrayValue?.first)
            XCTAssertEqual(scenario["status"], .string("failed"), verdict)
            XCTAssertFalse(scenario["timeline"]?.arrayValue?.isEmpty ?? true, "\(verdict): no timeline")
            XCTAssertFalse(scenario["steps"]?.arrayValue?.isEmpty ?? true, "\(verdict): no step lines")
            XCTAssertNotNil(scenario["exploration"]?["first_failure"]?["scenario"], verdict)
            let report = try HarnessProcess.run(["report", verdict, "--html", verdict + ".html"], in: dir)
            XCTAssertTrue(report.out.contains("1 failing (1 with a timeline)"), report.out)
        }
    }

    /// `run` refuses explore's `--out`, and the schedule budget without `--explore`: accepted and
    /// ignored before.
    func testExploreOptionsRunDoesNotHonourAreRefused() throws {
        for options in [["--out", "o.json"], ["--exhaustive"], ["--max-schedules", "3"]] {
            let run = try HarnessProcess.run(["run", "s.json"] + options + ["--verdict", "v.json"], in: dir, readingStandardError: true)
            XCTAssertEqual(run.status, 64, "\(options): \(run.out)")
            XCTAssertTrue(run.out.contains(options[0]), run.out)
        }
        let explored = try HarnessProcess.run(["run", "s.json", "--explore", "--max-schedules", "3", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(explored.status, 0, explored.out)
    }
}
