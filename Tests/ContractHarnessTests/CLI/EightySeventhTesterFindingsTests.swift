import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// An eighty-seventh outside tester tried to make the judge lose its verdict:
///
/// - F1: `explore` of a scenario with a 300-character name found its failing order, then could not
///   write the default schedule file ("File name too long") and exited 70 with no verdict at all;
///   the same with `--out` on a full file system. Default file names now fit in 200 bytes (cut,
///   with the name's hash), and a schedule file that cannot be written loses neither the verdict
///   (written, `ok` false, the error named) nor the order (said on the console).
/// - M3: `run` counted a file that deadlocks in its own order (an await before the release that
///   frees it) the SDK's failure; it is an error of the file when the reference cannot carry it
///   out either (`HarnessCommand.deadlocksOfTheFile`).
/// - M5: `report` on the verdict of a killed run (`in_progress`) said nothing of its end; now
///   the console, the HTML and the Mermaid say the run never finished and how many scenarios of
///   those planned have a result.
/// - M8: a JSON error after a `{{seed}}` on its line named the column of the replaced text.
/// - M2: an adapter's line of a lone byte order mark, or a tab, was "not the protocol"; it is blank.
final class EightySeventhTesterFindingsTests: XCTestCase {
    func testDefaultScheduleFilesFitTheFileSystemAndStayApart() {
        let long = String(repeating: "L", count: 300)
        let a = HarnessCommand.defaultOutput(long, suffix: "-schedule")
        let b = HarnessCommand.defaultOutput(long + "x", suffix: "-schedule")
        XCTAssertLessThanOrEqual(a.utf8.count, 200, a)
        XCTAssertTrue(a.hasSuffix("-schedule.json") && a.hasPrefix("LLLL"), a)
        XCTAssertNotEqual(a, b)
        let wide = HarnessCommand.defaultOutput(String(repeating: "\u{00E9}", count: 150), suffix: "-interleaving")
        XCTAssertLessThanOrEqual(wide.utf8.count, 200, wide)
        XCTAssertTrue(wide.hasSuffix("-interleaving.json"), wide)
        XCTAssertEqual(HarnessCommand.defaultOutput("short-name", suffix: "-schedule"), "short-name-schedule.json")
    }

    func testALongNamedExplorationWritesItsScheduleAndVerdict() throws {
        let dir = try scratchDirectory("eighty-seventh-long-name")
        var root = try JSONValue.parse(Data(contentsOf: Repository.root.appendingPathComponent("scenarios/race-explore-clear-vs-late-assignment.json"))).value
        let name = String(repeating: "L", count: 300)
        guard case .object(var members) = root else { return XCTFail("not an object") }
        members["name"] = .string(name)
        root = .object(members)
        let file = dir.appendingPathComponent("long.json")
        try root.serialized().write(to: file)
        let (status, out) = try HarnessProcess.run(["explore", file.path, "--mutant", "stale-write-after-clear", "--jobs", "2",
                                                    "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        let written = HarnessCommand.defaultOutput(name, suffix: "-schedule")
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.appendingPathComponent(written).path), out)
        XCTAssertTrue(out.contains("written to \(written)"), out)
        let verdict = try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent("v.json"))).value
        XCTAssertEqual(verdict["scenarios"]?.arrayValue?.first?["status"]?.stringValue, "failed")
    }

    func testAFileThatDeadlocksInItsOwnOrderIsAnErrorOfTheFile() throws {
        let dir = try scratchDirectory("eighty-seventh-deadlock")
        let file = TesterFixtures.folder("eighty-seventh-tester").appendingPathComponent("await-before-release.json").path
        for sdk in [[], ["--sdk-command", TesterFixtures.python]] {
            let (status, out) = try HarnessProcess.run(["run", file] + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, out)
            XCTAssertTrue(out.contains("counted an error of the file"), out)
            let verdict = try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent("v.json"))).value
            XCTAssertEqual(verdict["counts"]?["error"], .number(1), "\(sdk)")
            XCTAssertEqual(verdict["counts"]?["failed"], .number(0), "\(sdk)")
        }
    }

    func testALineOfByteOrderMarksTabsAndSpacesIsBlank() {
        XCTAssertTrue(DriverConnection.isBlank(Data([0xEF, 0xBB, 0xBF])))
        XCTAssertTrue(DriverConnection.isBlank(Data([0x09, 0x20, 0x0D, 0xEF, 0xBB, 0xBF, 0x20])))
        XCTAssertTrue(DriverConnection.isBlank(Data()))
        XCTAssertFalse(DriverConnection.isBlank(Data([0xEF, 0xBB])))
        XCTAssertFalse(DriverConnection.isBlank(Data([0xEF, 0xBB, 0xBF, UInt8(ascii: "{")])))
        XCTAssertFalse(DriverConnection.isBlank(Data("x".utf8)))
    }

    func testTheReportOfAKilledRunSaysItNeverFinished() throws {
        let dir = try scratchDirectory("eighty-seventh-killed")
        let verdict = TesterFixtures.folder("eighty-seventh-tester").appendingPathComponent("killed-run-verdict.json").path
        let (status, out) = try HarnessProcess.run(["report", verdict, "--html", "r.html", "--mermaid", "r.md"], in: dir)
        XCTAssertEqual(status, 0, out)
        XCTAssertTrue(out.contains("the run never finished"), out)
        XCTAssertTrue(out.contains("0 of 257 planned"), out)
        for page in ["r.html", "r.md"] {
            let text = try String(contentsOf: dir.appendingPathComponent(page), encoding: .utf8)
            XCTAssertTrue(text.contains("the run never finished"), page)
        }
    }

    func testAJSONErrorAfterASeedNamesTheColumnAsWritten() throws {
        let text = #"{"format": "experimently-scenario/1", "name": "s-{{seed}}-{{seed}}-{{seed}}", "steps": [}"#
        let column = text.utf8.count   // the stray `}` is the last byte
        for seed: UInt64 in [0, 123_456_789_012_345] {
            XCTAssertThrowsError(try SeedSubstitution.parsing(Data(text.utf8), seed: seed) { try ScenarioParser.parse($0, file: "f.json") }) { error in
                XCTAssertTrue("\(error)".contains("at line 1, column \(column)"), "\(seed): \(error)")
            }
        }
        // An error inside a replaced seed is placed at its placeholder.
        XCTAssertEqual(SeedSubstitution.remap("x at line 1, column 5", original: Data("ab{{seed}}c".utf8), seedText: "123456"), "x at line 1, column 3")
        XCTAssertEqual(SeedSubstitution.remap("no position", original: Data(), seedText: "0"), "no position")
    }

    /// An eighty-eighth outside tester: a stale write asserted before the file's own deadlock is
    /// the broken SDK's failure, not hidden as an error of the file; the shipping SDK, which fails
    /// only where the reference does, gets the file's error.
    func testAWrongValueBeforeTheFilesDeadlockStaysTheSDKsFailure() throws {
        let dir = try scratchDirectory("eighty-eighth-deadlock")
        let file = TesterFixtures.folder("eighty-eighth-tester").appendingPathComponent("stale-write-then-deadlock.json").path
        for (sdk, counted) in [(["--mutant", "stale-write-after-clear"], "failed"), ([], "error")] {
            let (status, out) = try HarnessProcess.run(["run", file] + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, out)
            let verdict = try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent("v.json"))).value
            XCTAssertEqual(verdict["counts"]?[counted], .number(1), "\(sdk): \(out)")
        }
    }
}

