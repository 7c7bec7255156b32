import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the twenty-seventh outside tester (`/work/attack28/FINDINGS.md`: `explore` as a
/// judge). Exploring the shipping SDK, it was its own reference, so an order no SDK can carry out
/// failed it; now the faithful variant is its reference. An interleaving exploration of a file the
/// reference fails in its own order was a pass; now it is an error of the file.
final class TwentySeventhTesterFindingsTests: XCTestCase {
    static let fixtures = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/twenty-seventh-tester")

    /// A clock advance moved before the operation it was to wake, and a one-shot fault a cache
    /// hit leaves unused: orders the faithful variant fails too, never the shipping SDK's failure.
    func testAnOrderTheFaithfulVariantFailsTooIsNotTheShippingSDKsFailure() throws {
        let dir = try scratchDirectory("twenty-seventh-orders")
        for name in ["delay-advance", "lifecycle-order"] {
            let file = Self.fixtures.appendingPathComponent("\(name).json").path
            let (status, out) = try HarnessProcess.run(["explore", file, "--out", "s.json", "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(name): \(out)")
            XCTAssertTrue(out.contains("fail on the reference too (not counted; the first, order ["), out)
            XCTAssertTrue(out.contains("reference: ios-mutant-none"), out)
            // The first such order and the reference's failing check are named (a seventy-third
            // outside tester: neither the console nor the verdict said which).
            let verdict = try String(contentsOf: dir.appendingPathComponent("v.json"), encoding: .utf8)
            XCTAssertTrue(verdict.contains("\"first_failed_on_reference\""), String(verdict.prefix(3000)))
        }
    }

    /// A file every SDK fails in its own order is an error of the file under `--interleave`, as in
    /// step mode, never a pass.
    func testAnInterleavingExplorationOfAFileNoSDKCanPassIsAnError() throws {
        let dir = try scratchDirectory("twenty-seventh-interleave")
        let file = Self.fixtures.appendingPathComponent("il-wrong.json").path
        let (status, out) = try HarnessProcess.run(["explore", file, "--interleave", "--out", "i.json", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("no SDK can pass the scenario as written"), out)
        let verdict = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("v.json"))) as? [String: Any]
        let result = (verdict?["scenarios"] as? [[String: Any]])?.first
        XCTAssertEqual(result?["status"] as? String, "error")
    }

    /// An adapter that crashes once, while it serves several schedules at once: run again one at a
    /// time none crashes, and the crash still counts (it was dropped with --jobs 2 or more, so the
    /// verdict depended on --jobs), named as the adapter's crash and saying it does not replay.
    func testACrashThatDoesNotReplayStillCounts() throws {
        let dir = try scratchDirectory("twenty-seventh-crash-once")
        let driver = Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path
        let mark = dir.appendingPathComponent("crashed-once").path
        let wrapper = Self.adapter(wrapping: driver, onClearCache: """
                if not os.path.exists(\(String(reflecting: mark))):
                    open(\(String(reflecting: mark)), "w").close(); p.kill(); os._exit(3)
        """)
        try Data(wrapper.utf8).write(to: dir.appendingPathComponent("crash-once.py"))
        let file = Repository.root.appendingPathComponent("Benchmarks/explore-three-holds-and-logout.json").path
        let (status, out) = try HarnessProcess.run(["explore", file, "--max-schedules", "12", "--jobs", "4", "--sdk-command", "python3 crash-once.py",
                                                    "--out", "s.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(FileManager.default.fileExists(atPath: mark), "the adapter crashed once")
        XCTAssertTrue(out.contains("1 failed") && out.contains("(1 crashed)"), out)
        XCTAssertTrue(out.contains("fails 'crash': the SDK adapter crashed"), out)
    }

    /// Explore's outputs: a `--out` in no folder is bad usage before any work; a verdict that cannot
    /// be written is an internal fault, said; the default schedule file is named after the
    /// scenario with its separators and controls replaced, in the working folder.
    func testExploreOutputsAreCheckedFirstAndNamedSafely() throws {
        let dir = try scratchDirectory("twenty-seventh-outputs")
        let file = Repository.root.appendingPathComponent("scenarios/race-explore-clear-vs-late-assignment.json").path
        let (usage, usageOut) = try HarnessProcess.run(["explore", file, "--out", "no-such-folder/o.json"], in: dir, readingStandardError: true)
        XCTAssertEqual(usage, 64, usageOut)
        XCTAssertTrue(usageOut.contains("--out no-such-folder/o.json"), usageOut)
        let (full, fullOut) = try HarnessProcess.run(["explore", file, "--out", "o.json", "--verdict", "/dev/full"], in: dir, readingStandardError: true)
        XCTAssertEqual(full, 70, fullOut)
        XCTAssertTrue(fullOut.contains("cannot write the verdict /dev/full"), fullOut)
        XCTAssertEqual(HarnessCommand.defaultOutput("../../escape", suffix: "-schedule"), "_.._escape-schedule.json")
        XCTAssertEqual(HarnessCommand.defaultOutput("a\u{0}b\u{202E}c/d", suffix: "-interleaving"), "a_b_c_d-interleaving.json")
        XCTAssertEqual(HarnessCommand.defaultOutput("caf\u{e9}-race", suffix: "-schedule"), "caf\u{e9}-race-schedule.json")
    }

    /// An adapter that writes a line that is no protocol on `clearCache`: the shrunk file keeps
    /// the steps that judge, so the reference passes it as its `explored` record says (it was
    /// shrunk to a lone `clearCache` the reference failed as "nothing judged").
    func testTheReferencePassesTheShrunkSchedule() throws {
        let dir = try scratchDirectory("twenty-seventh-shrink")
        let driver = Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path
        let wrapper = Self.adapter(wrapping: driver, onClearCache: """
                sys.stdout.write("this is not json\\n"); sys.stdout.flush()
        """)
        try Data(wrapper.utf8).write(to: dir.appendingPathComponent("garbage.py"))
        let file = Repository.root.appendingPathComponent("scenarios/race-explore-field-clear-while-assignment-held.json").path
        let (status, out) = try HarnessProcess.run(["explore", file, "--sdk-command", "python3 garbage.py", "--out", "s.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("fails 'driver protocol'"), out)
        let (replay, replayOut) = try HarnessProcess.run(["run", "s.json", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(replay, 0, "the reference passes the shrunk file: \(replayOut)")
    }

    /// A Python adapter in front of `driver` that forwards every line and runs `onClearCache`
    /// (Python, indented 8 spaces; `p` is the driver's process) when a `clearCache` is performed.
    static func adapter(wrapping driver: String, onClearCache: String) -> String {
        """
        import os, sys, subprocess, threading, json
        p = subprocess.Popen([sys.executable, \(String(reflecting: driver))], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        def pump():
            for line in p.stdout:
                sys.stdout.buffer.write(line); sys.stdout.buffer.flush()
            os._exit(0)
        threading.Thread(target=pump, daemon=True).start()
        for line in sys.stdin.buffer:
            try:
                m = json.loads(line)
            except Exception:
                m = {}
            if m.get("type") == "perform" and "clearCache" in json.dumps(m.get("operation", "")):
        \(onClearCache)
            p.stdin.write(line); p.stdin.flush()
        """
    }

    /// The failing line quotes the message of the check it names, not of another failed check.
    func testAFailureLineQuotesTheNamedChecksOwnMessage() {
        let r = ScenarioResult(name: "n", file: "f", tags: [], source: nil, status: .failed, durationMilliseconds: 1,
                               checks: [CheckResult(name: "step 9 await a1 expect", passed: false, message: "the file's own mistake"),
                                        CheckResult(name: "step 15 assert", passed: false, message: "the variant's failure")],
                               reason: nil, smoke: nil, history: [], historyDigest: "")
        XCTAssertEqual(r.failureMessage(of: "step 15 assert"), "the variant's failure")
        XCTAssertEqual(r.failureMessage(of: "no such check"), "the file's own mistake")
    }
}
