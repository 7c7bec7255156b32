import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// `explore --sdk-command` judges the SDK it was given or says it cannot (issue 10): an adapter
/// whose `hello` lacks a capability the scenario needs makes the scenario skipped, naming the
/// capability, exit 1 and `"ok": false` (as `run` when nothing passed), and `--interleave` with an
/// adapter without `interleaving` exits 64 naming it; the built-in SDK is never explored instead.
/// Through the built binary, with a tiny adapter written here.
final class ExploreJudgesGivenSDKTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("explore-given-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path),
                          "contract-harness not built at \(HarnessCLITests.binary.path)")
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    static let scenario = Repository.root.appendingPathComponent("scenarios/race-explore-three-holds-and-logout.json").path

    /// Writes an adapter named `tiny` that declares `capabilities` and answers the lifecycle
    /// messages only (an SDK operation would never be answered); returns its command.
    func tinyAdapter(_ capabilities: [String]) throws -> String {
        try TinyAdapter.write(in: dir, capabilities: capabilities)
    }

    static let everything = Scenario.knownCapabilities

    func verdict() throws -> JSONValue {
        try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent("v.json"))).value
    }

    func testAnAdapterWithoutOfflineStoreSkipsTheScenarioAndIsNotGreen() throws {
        try Data(#"{"ok": true}"#.utf8).write(to: dir.appendingPathComponent("v.json"))   // an earlier green verdict
        let adapter = try tinyAdapter(Self.everything.filter { $0 != "offline_store" })
        let (status, out) = try HarnessProcess.run(["explore", Self.scenario, "--sdk-command", adapter, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("sdk: tiny 1"), out)
        XCTAssertTrue(out.contains("SKIP  race-explore-three-holds-and-logout: the driver lacks offline_store"), out)
        XCTAssertTrue(out.contains("0 passed, 0 failed, 1 skipped: nothing passed"), out)
        XCTAssertFalse(out.contains("schedules"), "no schedule may run: \(out)")
        let v = try verdict()
        XCTAssertEqual(v["ok"], .bool(false))
        XCTAssertEqual(v["counts"]?["skipped"], .number(1))
        XCTAssertEqual(v["sdk_under_test"]?["name"], .string("tiny"))
    }

    func testAnAdapterWithEveryCapabilityIsExplored() throws {
        // The other way: the example Python SDK declares what the scenario needs and is explored.
        let (status, out) = try HarnessProcess.run(["explore", Self.scenario, "--sdk-command", InterruptTests.pythonDriver,
                                                    "--max-schedules", "2", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
        XCTAssertTrue(out.contains("2 schedules"), out)
        XCTAssertFalse(out.contains("SKIP"), out)
        XCTAssertEqual(try verdict()["ok"], .bool(true))
        XCTAssertEqual(try verdict()["sdk_under_test"]?["name"], .string("python-example"))
    }

    /// Moving reference-app steps out of process needs `settle` (an outside tester's report: 7 of
    /// 24 schedules "failed" on the shipping SDK through experimently-driver, when infeasible app
    /// orders were decided in process only and an app action could outlive its schedule). With
    /// it, every adapter gives the in-process counts; without it, the scenario is skipped naming
    /// `settle`, never failed.
    func testAppStepsAreExploredOutOfProcessWithSettleOnly() throws {
        let app = Repository.root.appendingPathComponent("scenarios/app-explore-login-racing-held-init-every-order.json").path
        let builtIn = try HarnessProcess.run(["explore", app, "--out", "s.json"], in: dir)
        XCTAssertEqual(builtIn.status, 0, builtIn.out)
        XCTAssertTrue(builtIn.out.contains("24 schedules (every order (24)), 0 failed, 19 infeasible"), builtIn.out)
        let driver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        for adapter in [InterruptTests.pythonDriver, "'\(driver)'"] {
            let (status, out) = try HarnessProcess.run(["explore", app, "--sdk-command", adapter, "--out", "s.json", "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, out)
            XCTAssertTrue(out.contains("24 schedules (every order (24)), 0 failed, 19 infeasible"), out)
            XCTAssertEqual(try verdict()["ok"], .bool(true))
        }
        let lacking = try tinyAdapter(Self.everything.filter { $0 != "settle" })
        let (status, out) = try HarnessProcess.run(["explore", app, "--sdk-command", lacking, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("SKIP") && out.contains("settle (app at $.steps[1]"), out)
        XCTAssertTrue(out.contains("0 passed, 0 failed, 1 skipped"), out)
        XCTAssertEqual(try verdict()["ok"], .bool(false))
    }

    /// Out of process, an adapter that answers `settle` has its word that a clock move woke
    /// nothing still acting, so an advance no longer keeps an earlier operation from being inert:
    /// before, exploring a file that advances past another request's delay failed the SDK on 3
    /// of 24 orders through experimently-driver (each after the 5 s step limit).
    func testAnAdvanceLeavesAHeldCallInertOutOfProcessWithSettle() throws {
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/oop-races/t4-unrelated-delay-wakes-during-held-call.json").path
        let driver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        for adapter in [InterruptTests.pythonDriver, "'\(driver)'"] {
            let (status, out) = try HarnessProcess.run(["explore", file, "--sdk-command", adapter, "--out", "s.json", "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, out)
            XCTAssertTrue(out.contains("24 schedules (every order (24)), 0 failed, 18 infeasible"), out)
        }
    }

    /// Out of process, a request answered before the operation began is never its own (a fourth
    /// outside tester, finding 2: an earlier answered lookup for the same key, or any earlier
    /// request of a track's user, made the order that awaits the held operation before its
    /// release a failure of the SDK).
    func testARequestAnsweredBeforeAnOperationBeganIsNotItsOwnOutOfProcess() throws {
        let driver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        for name in ["t4-t10-explore-track-after-earlier-lookup", "t4-t11-explore-lookup-after-ttl-expiry"] {
            let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/oop-races/\(name).json").path
            for adapter in [InterruptTests.pythonDriver, "'\(driver)'"] {
                let (status, out) = try HarnessProcess.run(["explore", file, "--sdk-command", adapter, "--out", "s.json", "--verdict", "v.json"], in: dir)
                XCTAssertEqual(status, 0, out)
                XCTAssertTrue(out.contains("2 schedules (every order (2)), 0 failed, 1 infeasible"), "\(name): \(out)")
            }
        }
    }

    /// Out of process, an operation with an answered request of its own beside a held one (the
    /// batch's answered first chunk, the other copy's answered track, an app event's) is judged
    /// once its step ran out of its limit: the answer can no longer be on its way, so the order
    /// that awaits it before the release is infeasible, as in process. Before, it was the SDK's
    /// failure through both adapters (attack5 t5b, t6, t7). The files' step limit is lowered to
    /// 2 s here, since each such order costs one.
    func testAnAnsweredRequestBesideAHeldOneIsJudgedAfterTheStepLimitOutOfProcess() throws {
        let driver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        for name in ["t4-t5b-explore-trackbatch-second-chunk", "t4-t6-explore-times2-track-one-held", "t4-t7-explore-app-event-times2-one-held"] {
            let source = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/oop-races/\(name).json")
            guard case .object(var o) = try JSONValue.parse(Data(contentsOf: source)).value else { return XCTFail(name) }
            o["step_timeout_ms"] = .number(2000)
            let file = dir.appendingPathComponent("\(name).json")
            try JSONValue.object(o).serialized().write(to: file)
            for adapter in [InterruptTests.pythonDriver, "'\(driver)'"] {
                let (status, out) = try HarnessProcess.run(["explore", file.path, "--sdk-command", adapter, "--out", "s.json", "--verdict", "v.json"], in: dir)
                XCTAssertEqual(status, 0, "\(name) \(adapter): \(out)")
                XCTAssertTrue(out.contains("2 schedules (every order (2)), 0 failed, 1 infeasible"), "\(name) \(adapter): \(out)")
            }
        }
    }

    /// The replay command explore prints names the SDK the schedule was found on: with
    /// `--sdk-command` it carries it (a seventeenth outside tester: the printed `contract-harness run
    /// FILE` replayed on the built-in shipping SDK, which passes), quoted so that the printed line,
    /// run by a shell, fails the broken adapter again.
    func testThePrintedReplayCommandReplaysOnTheAdapterItWasFoundOn() throws {
        let driver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        let command = "EXPERIMENTLY_DRIVER_MUTANT=stale-write-after-clear '\(driver)'"
        let (status, out) = try HarnessProcess.run(["explore", Self.scenario, "--sdk-command", command, "--out", "it's here.json", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        let line = try XCTUnwrap(out.split(separator: "\n").first { $0.contains("; replay: ") }, out)
        let replay = String(line[line.range(of: "; replay: ")!.upperBound...])
        XCTAssertEqual(replay, #"contract-harness run 'it'\''s here.json' --sdk-command 'EXPERIMENTLY_DRIVER_MUTANT=stale-write-after-clear '\''"# + driver + #"'\'''"#)
        // Run as printed (the binary's path for the word contract-harness): it fails the variant.
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", "'\(HarnessCLITests.binary.path)'" + replay.dropFirst("contract-harness".count) + " --verdict r.json >/dev/null 2>&1"]
        shell.currentDirectoryURL = dir
        try shell.run()
        shell.waitUntilExit()
        XCTAssertEqual(shell.terminationStatus, 1, "the printed replay fails the broken adapter")
        XCTAssertEqual(HarnessCommand.shellWord("plain-word_1.json"), "plain-word_1.json")
        XCTAssertEqual(HarnessCommand.shellWord(""), "''")
    }

    /// The schedule explore writes replays: it keeps the scenario's API keys (a fourteenth outside
    /// tester: masked as `***`, every replayed request was answered 401, and the written schedule
    /// of `stale-write-after-clear` passed that broken variant 30 of 30).
    func testAWrittenScheduleKeepsItsKeysAndReplaysItsFailure() throws {
        let (status, out) = try HarnessProcess.run(["explore", Self.scenario, "--mutant", "stale-write-after-clear", "--out", "s.json", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        let written = try String(contentsOf: dir.appendingPathComponent("s.json"), encoding: .utf8)
        XCTAssertFalse(written.contains("***"), written)
        for _ in 0..<3 {
            let replay = try HarnessProcess.run(["run", "s.json", "--mutant", "stale-write-after-clear", "--verdict", "r.json"], in: dir)
            XCTAssertEqual(replay.status, 1, replay.out)
        }
        let shipping = try HarnessProcess.run(["run", "s.json", "--verdict", "r.json"], in: dir)
        XCTAssertEqual(shipping.status, 0, shipping.out)
    }

    /// A fourth outside tester, finding 4: out of process a runner operation raced by an app
    /// action was never inert, so through experimently-driver (its own reference) 36 of 120
    /// orders that await it before its release failed the shipping SDK; with `settle` they are
    /// infeasible, as in process, and the variant keeping its in-flight table is still caught.
    func testARunnerOperationRacedByAnAppActionIsInertOutOfProcessWithSettle() throws {
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/oop-races/t4-e3-explore-runner-held-app-logout-login-display.json").path
        let driver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        let (status, out) = try HarnessProcess.run(["explore", file, "--sdk-command", "'\(driver)'", "--out", "s.json", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
        XCTAssertTrue(out.contains("120 schedules (every order (120)), 0 failed, 60 infeasible"), out)
        // The crashing variant. One adapter serves the schedules that run at once, so each crash
        // also ended siblings at whatever step they had reached (the identity order was reported
        // as "step 3 wait_for ... deadlocks", and 26 to 109 failures varied run to run): every
        // schedule the dead adapter served runs again alone, and only its own crash counts.
        // (No backtraces: the Swift backtracer took up to 7 s per crash under load.)
        let (brokenStatus, brokenOut) = try HarnessProcess.run(["explore", file, "--sdk-command",
                                                                 "SWIFT_BACKTRACE=enable=no EXPERIMENTLY_DRIVER_MUTANT=crash-on-clear-in-flight '\(driver)'",
                                                                 "--out", "s.json", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(brokenStatus, 1, brokenOut)
        // Every order that clears with a request in flight crashes it (20); out of process one more
        // order can fail without a crash under load (seen once in four CI rehearsals, stop 26: its
        // cause is not yet known, see the closing note), so the crashes are counted exactly and the
        // failures at least.
        // The verdict lists every failing order: a failure that is not a crash is quoted, so the
        // next time it happens its order and message are in the log.
        let verdict = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("v.json"))) as? [String: Any]
        let exploration = ((verdict?["scenarios"] as? [[String: Any]])?.first?["exploration"] as? [String: Any]) ?? [:]
        let listed = exploration["failures"] as? [[String: Any]] ?? []
        XCTAssertEqual(listed.count, exploration["failed"] as? Int, "\(exploration)")
        let notCrashes = listed.filter { ($0["crashed"] as? Bool) != true }
        XCTAssertTrue(brokenOut.contains("120 schedules (every order (120)), 20 failed, 60 infeasible")
                      || brokenOut.contains("120 schedules (every order (120)), 21 failed, 60 infeasible"), brokenOut + "\n\(notCrashes)")
        XCTAssertLessThanOrEqual(notCrashes.count, 1, "\(notCrashes)")
        XCTAssertTrue(brokenOut.contains("(20 crashed)"), brokenOut)
        // The adapter's death is the failure named (its `crash` check first), not the step it
        // cut short (a twenty-seventh outside tester).
        XCTAssertTrue(brokenOut.contains("first failing schedule: order [4, 5, 6, 7, 8] fails 'crash': the SDK adapter crashed"), brokenOut)
    }

    func testInterleaveWithAnAdapterWithoutInterleavingExits64NamingIt() throws {
        let adapter = try tinyAdapter(Self.everything.filter { $0 != "interleaving" })
        let (status, err) = try HarnessProcess.run(["explore", Self.scenario, "--interleave", "--sdk-command", adapter], in: dir,
                                                   readingStandardError: true)
        XCTAssertEqual(status, 64, err)
        XCTAssertTrue(err.contains("the driver for tiny lacks the 'interleaving' capability"), err)
    }

    func testInterleaveIsRefusedEvenForAnAdapterDeclaringInterleaving() throws {
        // `interleaving` never crosses the driver protocol (the harness's executor cannot run
        // another process's tasks): an adapter declaring it is refused too, never run with an
        // executor that reaches none of its tasks (which failed a correct SDK with "deadlock"),
        // and never silently replaced by the built-in SDK, which explores as before.
        let adapter = try tinyAdapter(Self.everything)
        let (status, err) = try HarnessProcess.run(["explore", Self.scenario, "--interleave", "--sdk-command", adapter], in: dir,
                                                   readingStandardError: true)
        XCTAssertEqual(status, 64, err)
        XCTAssertTrue(err.contains("the driver for tiny lacks the 'interleaving' capability"), err)
        let builtIn = try HarnessProcess.run(["explore", Self.scenario, "--interleave", "--max-schedules", "2"], in: dir)
        XCTAssertEqual(builtIn.status, 0, builtIn.out)
    }
}
