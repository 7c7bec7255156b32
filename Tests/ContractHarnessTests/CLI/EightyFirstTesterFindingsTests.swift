import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the eighty-first outside tester (`/work/attack81/REPORT.md`: a newcomer following
/// the README):
///
/// - F1: `run --list` replaced the last verdict with an in-progress stub.
/// - F2: `vectors` with a bad option wrote no verdict (an earlier `ok: true` one stayed).
/// - F3, F4: a scenario whose adapter died had no `timeline`, and a check failing after the death
///   told the user the scenario deadlocks.
/// - F5: an empty or blank scenario name was accepted.
final class EightyFirstTesterFindingsTests: XCTestCase {
    func verdict(_ dir: URL) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("v.json"))) as? [String: Any] ?? [:]
    }

    /// F1 and F2: `--list` leaves the verdict as it was; `vectors` refuses a bad option with a
    /// verdict saying so and one hint line.
    func testListWritesNothingAndABadVectorsOptionWritesARefusal() throws {
        let dir = try scratchDirectory("eighty-first-outputs")
        let file = Repository.root.appendingPathComponent("scenarios/field-fallback-on-410-gone.json").path
        let ran = try HarnessProcess.run(["run", file, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(ran.status, 0, ran.out)
        let before = try Data(contentsOf: dir.appendingPathComponent("v.json"))
        let listed = try HarnessProcess.run(["run", "--list", file, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(listed.status, 0, listed.out)
        XCTAssertEqual(try Data(contentsOf: dir.appendingPathComponent("v.json")), before, "--list wrote the verdict")
        let bad = try HarnessProcess.run(["vectors", "--bogus", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(bad.status, 64, bad.out)
        let refusal = try verdict(dir)
        XCTAssertEqual(refusal["ok"] as? Bool, false)
        XCTAssertEqual(refusal["error"] as? String, "bad usage: vectors: unknown option '--bogus'")
    }

    /// F3 and F4: an adapter that dies on its first lookup: the crashed scenario keeps its
    /// timeline, and every other failed check says it follows from the death.
    func testACrashedScenarioKeepsItsTimelineAndLabelsWhatFollows() throws {
        let dir = try scratchDirectory("eighty-first-crash")
        let driver = Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path
        let wrapper = TwentySeventhTesterFindingsTests.adapter(wrapping: driver, onClearCache: "        p.kill(); os._exit(11)")
        try Data(wrapper.utf8).write(to: dir.appendingPathComponent("dies.py"))
        let file = Repository.root.appendingPathComponent("scenarios/defect-1-stale-write-after-clearcache.json").path
        let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", "python3 dies.py", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        let result = (try verdict(dir)["scenarios"] as? [[String: Any]])?.first ?? [:]
        XCTAssertEqual(result["status"] as? String, "crashed", out)
        XCTAssertNotNil(result["timeline"], "a crashed scenario's timeline")
        let failed = (result["checks"] as? [[String: Any]] ?? []).filter { ($0["passed"] as? Bool) == false }
        XCTAssertEqual(failed.first?["name"] as? String, "crash")
        for check in failed.dropFirst() {
            XCTAssertTrue((check["message"] as? String ?? "").hasSuffix(ScenarioExecution.crashNote), "\(check)")
        }
    }

    /// F5: a name that is empty or blank is refused at `$.name`.
    func testABlankNameIsRefused() {
        for name in ["", "   ", "\n"] {
            let text = #"{"format": "experimently-scenario/1", "name": "# + String(reflecting: name) + #", "description": "d", "steps": [{"do": "hashUser", "user": "u", "key": "k", "expect": {"value": 0.5}}]}"#
            XCTAssertThrowsError(try ScenarioParser.parse(Data(text.utf8), file: "x.json"), String(reflecting: name)) { error in
                XCTAssertEqual((error as? ScenarioError)?.path, "$.name", "\(error)")
            }
        }
    }
}
