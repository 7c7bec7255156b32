import XCTest
import Foundation
@testable import ExperimentlyMock
@testable import ContractHarness
import ExperimentlyMutants

/// Findings of the outside testers of stop 23, each fixed here: the fifteenth (`/work/attack16`:
/// other SDKs' field bugs written as scenarios), the sixteenth (`/work/attack17`: bad input and
/// hostile adapters) and the seventeenth (`/work/attack18`: flakes under load, generated workloads).
final class FifteenthTesterFindingsTests: XCTestCase {
    private func run(_ name: String) async throws -> ScenarioResult {
        let path = Repository.root.appendingPathComponent("scenarios/\(name).json").path
        return await ScenarioRunner().run(try ScenarioParser.load(path: path))
    }

    /// A seeded offline entry no SDK can read (an assignment without a text `variant_name`) is as
    /// good as absent (DriverProtocol.md, seed_store): a 503 then gives serverError, and
    /// `offline_fallback` no longer demands the seeded value. An entry with another odd field may
    /// be read or not: both pass.
    func testAnUnreadableSeededEntryIsAbsentAndADoubtfulOneMayGoEitherWay() async throws {
        let passed = try await run("s4-offline-entry-without-variant-name-is-absent")
        XCTAssertEqual(passed.status, .passed, "\(passed.checks.filter { !$0.passed })")
        let good: JSONValue = .object(["experiment_key": .string("e"), "user_id": .string("u"), "variant_name": .string("t")])
        XCTAssertEqual(Checks.seededReadability(kind: "experiment", good), .readable)
        XCTAssertEqual(Checks.seededReadability(kind: "experiment", .object(["experiment_key": .string("e"), "is_control": .bool(false)])), .unreadable)
        XCTAssertEqual(Checks.seededReadability(kind: "experiment", .object(["experiment_key": .string("e"), "variant_name": .number(1)])), .unreadable)
        XCTAssertEqual(Checks.seededReadability(kind: "experiment", .object(["experiment_key": .string("e"), "variant_name": .string("t"), "assigned": .string("yes")])), .doubtful)
        XCTAssertEqual(Checks.seededReadability(kind: "experiment", .object(["variant_name": .string("t")])), .doubtful)
        XCTAssertEqual(Checks.seededReadability(kind: "flag", .object(["key": .string("f"), "enabled": .bool(true)])), .readable)
        XCTAssertEqual(Checks.seededReadability(kind: "flag", .object(["key": .string("f"), "enabled": .string("true")])), .doubtful)
    }
}

extension FifteenthTesterFindingsTests {
    /// `wait_for held` on a timeout, delay or delay-then-drop fault counts the requests it keeps
    /// waiting, in process as over TCP (in process a timeout fault only sleeps, and the wait was
    /// reported as a deadlock blaming a later step).
    func testWaitForHeldCountsRequestsADelayOrTimeoutFaultKeeps() async throws {
        let timeout = try await run("s5-wait-for-a-request-a-timeout-fault-keeps")
        XCTAssertEqual(timeout.status, .passed, "\(timeout.checks.filter { !$0.passed })")
        for name in ["wait-for-held-delay-fault", "wait-for-held-delay-then-drop-fault"] {
            let path = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/fifteenth-tester/\(name).json").path
            let r = await ScenarioRunner(stepTimeoutCap: 3000).run(try ScenarioParser.load(path: path))
            XCTAssertEqual(r.status, .passed, "\(name): \(r.checks.filter { !$0.passed })")
        }
    }
}

extension FifteenthTesterFindingsTests {
    /// Exploring without a reference (the shipping SDK is its own), the shrunk file fails with the
    /// failing schedule's message, up to request and step numbers: before, any failing `assert`
    /// counted as the same check, and the file shrank to a lone assert that failed because nothing
    /// had run at all.
    func testShrinkingWithoutAReferenceKeepsTheSameFailure() async throws {
        let path = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/fifteenth-tester/explore-identify-no-reference.json").path
        let root = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: path)), file: path)
        let settings = try XCTUnwrap(try Explorer.settings(of: root, file: path))
        let report = await Explorer.explore(root, file: path, settings: settings, seed: 0, runner: ScenarioRunner(keepsHistory: false), concurrency: 4)
        let failure = try XCTUnwrap(report.firstFailure)
        let original = try XCTUnwrap(failure.result.firstFailure?.message)
        XCTAssertGreaterThan(failure.stepsAfter, 1, "more than a lone assert")
        let replay = await ScenarioRunner().run(try ScenarioParser.parse(failure.scenarioJSON.serialized(), file: "s.json"))
        let message = try XCTUnwrap(replay.firstFailure?.message)
        XCTAssertEqual(Explorer.messageShape(message), Explorer.messageShape(original))
        XCTAssertEqual(Explorer.messageShape("step 12 assert: #7 and #12 of step 3"), "step  assert: # and # of step ")
    }
}

extension FifteenthTesterFindingsTests {
    /// A synchronous step parked behind a held request that only a later step releases (a lookup
    /// joining it, an app logout queued behind a held refresh) is stuck at once, as an `await` is:
    /// explore counts such orders infeasible, never as failures of the shipping SDK after the step
    /// limit.
    func testASynchronousStepBeforeTheReleaseItNeedsIsInfeasible() async throws {
        for name in ["sync-joiner-explore", "app-logout-behind-held-refresh-explore"] {
            let path = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/fifteenth-tester/\(name).json").path
            var root = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: path)), file: path)
            // A ten-minute step limit: an order decided only by running out of it would end this
            // test far past the bound below (no wall-clock race: the decision is structural).
            if case .object(var o) = root { o["step_timeout_ms"] = .number(600_000); root = .object(o) }
            let settings = try XCTUnwrap(try Explorer.settings(of: root, file: path))
            let report = await Explorer.explore(root, file: path, settings: settings, seed: 0, runner: ScenarioRunner(keepsHistory: false))
            XCTAssertEqual(report.failed, 0, "\(name): \(String(describing: report.firstFailure?.result.firstFailure))")
            XCTAssertEqual(report.infeasible, 4, name)
            XCTAssertLessThan(report.durationMilliseconds, 120_000, "\(name): decided without the step limit")
        }
    }

    /// The canonical history leaves out what the contract leaves to the SDK: an error's free-text
    /// message and request headers CONTRACT.md section 1 does not name (a per-request id changed
    /// the digest of almost every file on every run).
    func testTheDigestIgnoresErrorMessagesAndHeadersTheContractDoesNotName() {
        func history(message: String, requestID: String) -> [HistoryEvent] {
            let request = RequestRecord(seq: 1, client: "main", method: "GET", path: "/api/v1/feature-flags/evaluate/f", target: "/api/v1/feature-flags/evaluate/f?user_id=u",
                                        query: ["user_id": "u"], headers: ["X-API-Key": "k", "Accept": "application/json", "X-Request-Id": requestID],
                                        body: nil, status: nil, response: nil, fault: nil, parked: false, cancelled: false, answered: false)
            return [HistoryEvent(index: 0, step: 0, time: 0, kind: .request, client: "main", label: nil, name: nil, detail: nil, outcome: nil, request: request),
                    HistoryEvent(index: 1, step: 0, time: 0, kind: .complete, client: "main", label: "op1", name: "evaluateFlag", detail: nil,
                                 outcome: .object(["error": .string("networkError"), "code": .number(-1005), "message": .string(message)]), request: nil)]
        }
        let a = ScenarioExecution.digest(ScenarioExecution.canonical(history(message: "lost (http://127.0.0.1:39687)", requestID: "r-1")))
        let b = ScenarioExecution.digest(ScenarioExecution.canonical(history(message: "lost (http://127.0.0.1:33507)", requestID: "r-2")))
        XCTAssertEqual(a, b)
        // What the contract names still counts.
        var other = history(message: "x", requestID: "r-1")
        other[0].request?.headers["X-API-Key"] = "other"
        XCTAssertNotEqual(ScenarioExecution.digest(ScenarioExecution.canonical(other)), a)
    }
}

extension FifteenthTesterFindingsTests {
    /// An adapter that never answers `persisted` ends the run in bounded time, the silence named
    /// as a driver protocol failure (it hung the run before: the reply was awaited outside any
    /// step's limit).
    func testAnAdapterThatNeverAnswersPersistedIsBoundedAndNamed() throws {
        let dir = try scratchDirectory("sixteenth")
        let adapter = try TinyAdapter.write(in: dir, name: "silent", capabilities: ["offline_store"])
        let scenario = dir.appendingPathComponent("s.json")
        try Data(#"{"format": "experimently-scenario/1", "name": "persisted-unanswered", "description": "d", "steps": [{"assert": {"persisted": {"user": "u", "flag": "f", "value": {"enabled": true}}}}]}"#.utf8).write(to: scenario)
        let started = Date()
        let (status, _) = try HarnessProcess.run(["run", scenario.path, "--sdk-command", adapter, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1)
        XCTAssertLessThan(Date().timeIntervalSince(started), 30)
        let verdict = try String(contentsOf: dir.appendingPathComponent("v.json"), encoding: .utf8)
        XCTAssertTrue(verdict.contains("no reply within 10000 ms"), verdict)
    }
}

extension FifteenthTesterFindingsTests {
    /// A scenario no order of which can be carried out (a second release of one fault) is an
    /// error of the file in `explore`, `explore --interleave` and `run --explore`, never a pass.
    func testAnExplorationThatCarriedNothingOutIsAnErrorNotAPass() throws {
        let dir = try scratchDirectory("sixteenth-unrunnable")
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/fifteenth-tester/explore-release-twice.json").path
        for extra in [[], ["--interleave"]] {
            let (status, out) = try HarnessProcess.run(["explore", file] + extra + ["--out", "s.json", "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, "\(extra): \(out)")
            XCTAssertTrue(out.contains("0 passed, 0 failed, 1 error"), out)
            let v = try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent("v.json"))).value
            XCTAssertEqual(v["ok"], .bool(false))
            XCTAssertEqual(v["scenarios"]?.arrayValue?.first?["status"]?.stringValue, "error")
        }
        let (status, out) = try HarnessProcess.run(["run", file, "--explore", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("no order of the movable steps could be carried out (24 infeasible"), out)
    }
}

extension FifteenthTesterFindingsTests {
    /// `explore --verdict V` that refuses its input (exit 64) replaces an earlier verdict with a
    /// refusal naming why, as `run` does; an earlier green verdict was left in place.
    func testARefusedExplorationReplacesTheVerdict() throws {
        let dir = try scratchDirectory("sixteenth-refusal")
        let smoke = Repository.root.appendingPathComponent("scenarios/contract-smoke.json").path
        let explorable = Repository.root.appendingPathComponent("scenarios/race-explore-three-holds-and-logout.json").path
        try Data("{\"format\": \"x\"".utf8).write(to: dir.appendingPathComponent("bad.json"))
        for arguments in [["explore", "bad.json"], ["explore", explorable, "--interleave", "--depth", "0"]] {
            XCTAssertEqual(try HarnessProcess.run(["run", smoke, "--verdict", "v.json"], in: dir).status, 0)
            let (status, _) = try HarnessProcess.run(arguments + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 64)
            let v = try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent("v.json"))).value
            XCTAssertEqual(v["ok"], .bool(false), "\(arguments)")
            XCTAssertNotNil(v["error"]?.stringValue, "\(arguments)")
        }
    }
}

extension FifteenthTesterFindingsTests {
    /// The report's line wrapping is linear and stops after the lines it shows: a failing scenario
    /// with a user id of a million characters took minutes to draw (the wrapping was quadratic).
    func testWrappingAHugeWordKeepsEightLines() {
        let lines = HTMLReport.wrap("id " + String(repeating: "é", count: 1_000_000) + " end", columns: 40)
        XCTAssertEqual(lines.count, 8)
        XCTAssertEqual(lines[0], "id")
        XCTAssertEqual(lines[1], String(repeating: "é", count: 40))
        XCTAssertEqual(lines.last, "… (the whole message is in the list above)")
        XCTAssertEqual(HTMLReport.wrap("a bb ccc dddddd eeeeeeeeee", columns: 6), ["a bb", "ccc", "dddddd", "eeeeee", "eeee"])
        XCTAssertEqual(HTMLReport.wrap("", columns: 6), [])
    }
}

extension FifteenthTesterFindingsTests {
    /// An adapter that writes a reply line past the protocol's limit is stopped and named at once
    /// (100 MB lines were read whole, a scenario ran 71 s past a 3 s step limit); one that closes
    /// its standard output but stays alive is stopped too, never left running after the run.
    func testAnOverlongReplyAndAClosedStandardOutputAreStoppedAndNamed() throws {
        let dir = try scratchDirectory("sixteenth-adapters")
        // Two scenarios: the second starts a fresh adapter in place of the first, which must not
        // be left running.
        let folder = dir.appendingPathComponent("scenarios")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for n in [1, 2] {
            try Data(#"{"format": "experimently-scenario/1", "name": "one-flag-\#(n)", "description": "d", "steps": [{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "expect": {"value": {"enabled": true}}}]}"#.utf8)
                .write(to: folder.appendingPathComponent("one-flag-\(n).json"))
        }
        let smoke = folder.path
        let marker = "sixteenth-\(UUID().uuidString)"
        for (mode, expected) in [("bigline", "wrote a line of more than 16 MiB"), ("closestdout", "closed its standard output")] {
            let adapter = dir.appendingPathComponent("\(mode).py")
            try Data("""
            import json, os, sys, time
            # \(marker)
            for line in sys.stdin:
                m = json.loads(line)
                t = m.get("type")
                if t == "hello":
                    r = {"protocol": "experimently-driver/1", "sdk": {"name": "hostile", "version": "1"}, "capabilities": ["evaluateFlag"]}
                elif t == "perform":
                    if "\(mode)" == "bigline":
                        sys.stdout.write("x" * (17 << 20)); sys.stdout.flush(); time.sleep(60)
                    else:
                        os.close(1); time.sleep(60)
                else:
                    r = {}
                sys.stdout.write(json.dumps({"id": m["id"], "result": r}) + "\\n"); sys.stdout.flush()
                if t == "shutdown": sys.exit(0)
            """.utf8).write(to: adapter)
            let started = Date()
            let (status, out) = try HarnessProcess.run(["run", smoke, "--sdk-command", "python3 '\(adapter.path)'", "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, out)
            XCTAssertTrue(out.contains(expected), "\(mode): \(out)")
            XCTAssertLessThan(Date().timeIntervalSince(started), 20, mode)
        }
        // No adapter of this test is left running.
        let pgrep = Process()
        pgrep.executableURL = URL(fileURLWithPath: "/usr/bin/pgrep")
        pgrep.arguments = ["-f", dir.path]
        pgrep.standardOutput = FileHandle.nullDevice
        try pgrep.run()
        pgrep.waitUntilExit()
        XCTAssertEqual(pgrep.terminationStatus, 1, "an adapter outlived its run")
    }
}

extension FifteenthTesterFindingsTests {
    /// A scenario or verdict path that is no regular file is named for what it is (a FIFO was "You
    /// don't have permission", a link loop "no such file", a folder "NSCocoaErrorDomain error 256").
    func testSpecialInputFilesAreNamedForWhatTheyAre() throws {
        let dir = try scratchDirectory("sixteenth-files")
        let fifo = dir.appendingPathComponent("pipe.json").path
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let a = dir.appendingPathComponent("a.json").path, b = dir.appendingPathComponent("b.json").path
        XCTAssertEqual(symlink(b, a), 0)
        XCTAssertEqual(symlink(a, b), 0)
        XCTAssertEqual(InputFile.problem(fifo), "a FIFO (named pipe), not a regular file")
        XCTAssertEqual(InputFile.problem(a), "a symbolic link loop")
        XCTAssertEqual(InputFile.problem(dir.path), "a directory, not a file")
        XCTAssertEqual(InputFile.problem("/dev/zero"), "a device, not a regular file")
        XCTAssertEqual(InputFile.problem(dir.appendingPathComponent("none.json").path), "no such file")
        XCTAssertThrowsError(try ScenarioParser.load(path: fifo)) { error in
            XCTAssertTrue("\(error)".contains("expected a readable file, found a FIFO"), "\(error)")
        }
    }
}

extension FifteenthTesterFindingsTests {
    /// `no_stale_write` judges every cache hit: a variant that caches its offline fallback value
    /// serves it without a request after the backend changed; the entry has expired by the end,
    /// so only the hit rule sees it. The shipping SDK and the faithful variant pass.
    func testACacheHitOfAFallbackValueIsCaught() async throws {
        let path = Repository.root.appendingPathComponent("scenarios/s4-cache-hit-never-serves-a-fallback-value.json").path
        let scenario = try ScenarioParser.load(path: path)
        let broken = await ScenarioRunner(driver: MutantRun.driver(.cachesFallbackValue)).run(scenario)
        XCTAssertEqual(broken.status, .failed)
        let failure = try XCTUnwrap(broken.checks.first { !$0.passed && $0.name == "no_stale_write" })
        XCTAssertTrue(failure.message?.contains("without a request of its own") == true, failure.message ?? "")
        // `offline_fallback` sees it too: a value with no answer of its own cached and no failure.
        let fallback = try XCTUnwrap(broken.checks.first { !$0.passed && $0.name == "offline_fallback" })
        XCTAssertTrue(fallback.message?.contains("the persisted value without a failure") == true, fallback.message ?? "")
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })")
        }
    }
}

extension FifteenthTesterFindingsTests {
    /// `fan_out` judges keyed events too: one sent twice fails it, with only named checks in the
    /// file; the example SDK as shipped passes.
    func testAKeyedEventSentTwiceFailsFanOut() throws {
        let dir = try scratchDirectory("fifteenth-dup-track")
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/fifteenth-tester/duplicate-keyed-track-named-checks.json").path
        let driver = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
        let (ok, okOut) = try HarnessProcess.run(["run", file, "--sdk-command", driver, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(ok, 0, okOut)
        let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=keyed-event-twice " + driver, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("fan_out: the event 'purchase' of user 'user-1' for experiment 'sdk_contract_ab' on client 'main' was tracked by 1 call(s) but sent in 2 /track requests"), out)
    }
}

extension FifteenthTesterFindingsTests {
    /// The eighteenth tester (`/work/attack19`): a lookup that joined a request which then timed
    /// out (its caller got the offline fallback) is no cache hit; an assignment answered for another
    /// experiment than asked may be cached under either key, and listed under the answer's name.
    /// Correct SDKs pass, in process, on the faithful variant and through the adapters.
    func testJoinersOfATimedOutRequestAndAnAnswerForAnotherExperimentPass() async throws {
        for name in ["hit-join-timeout-fallback", "hit-join-timeout-fault-fallback", "assignment-answered-for-other-experiment"] {
            let path = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/fifteenth-tester/\(name).json").path
            let scenario = try ScenarioParser.load(path: path)
            for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
                let r = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(r.status, .passed, "\(name) on \(driver.sdkName): \(r.checks.filter { !$0.passed })")
            }
        }
        XCTAssertTrue(Checks.CacheModel.consistentListing(["a", "a"], [
            .init(key: "other", value: .object(["experiment_key": .string("a")]), expires: 0, order: 0),
            .init(key: "a", value: .object(["experiment_key": .string("a")]), expires: 0, order: 1)]))
        XCTAssertFalse(Checks.CacheModel.consistentListing(["a", "a", "b"], [
            .init(key: "a", value: .object(["experiment_key": .string("a")]), expires: 0, order: 0)]))
    }
}

extension FifteenthTesterFindingsTests {
    /// A hand-edited journal whose response status is no final status, or whose header holds a
    /// control character, is refused naming its journal path (exit 64), not as an internal fault
    /// of the skeleton (exit 70).
    func testAJournalWithAnImpossibleResponseIsNamedAtItsPath() throws {
        for (name, path) in [("journal-status0", "$.history[0].response.status"), ("journal-header-nul", "$.history[0].response.headers[0]")] {
            let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/sixteenth-tester/\(name).json").path
            XCTAssertThrowsError(try JournalScenario.skeleton(journal: Data(contentsOf: URL(fileURLWithPath: file)), file: file)) { error in
                XCTAssertTrue("\(error)".contains("at \(path): expected"), "\(error)")
            }
        }
    }
}
