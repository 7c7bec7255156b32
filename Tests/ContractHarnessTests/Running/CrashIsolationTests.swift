import XCTest
import Foundation
@testable import ContractHarness

/// Issue 10 section 1: a scenario that times out with SDK work pending, or an SDK that crashes the
/// process, costs only that scenario; the verdict always lists every scenario; `--jobs` changes
/// nothing reported. These run the built `contract-harness` binary (its workers are the same binary).
final class CrashIsolationTests: XCTestCase {
    static let fixtures = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/crash").path
    static let scenarios = Repository.root.appendingPathComponent("scenarios").path

    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("harness-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path),
                          "contract-harness not built at \(HarnessCLITests.binary.path)")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    func harness(_ arguments: [String]) throws -> (status: Int32, out: String) {
        try HarnessProcess.run(arguments, in: dir)
    }

    func scenarioEntries(_ name: String) throws -> [[String: Any]] {
        let data = try Data(contentsOf: dir.appendingPathComponent(name))
        let v = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
        return try XCTUnwrap(v["scenarios"] as? [[String: Any]])
    }

    /// The two shapes of issue 10 beside passing scenarios: never an exit of 128 or more, every
    /// scenario in the verdict, the shapes fail (a timed-out step), the others pass.
    /// (`Benchmarks/crash-isolation-16.sh` runs the same 16 times against the release build.)
    func testTimedOutStepsWithPendingSDKWorkNeverKillTheRun() throws {
        let passing = ["contract-smoke.json", "app-logout-while-flag-fetch-pending.json", "s4-trackbatch-later-chunks-sent-after-failed-chunk.json"]
            .map { "\(Self.scenarios)/\($0)" }
        for round in 0..<3 {
            let r = try harness(["run", Self.fixtures] + passing + ["--verdict", "v.json", "--junit", "j.xml", "--jobs", "2"])
            XCTAssertEqual(r.status, 1, "round \(round): \(r.out)")
            let entries = try scenarioEntries("v.json")
            XCTAssertEqual(entries.count, 5, "round \(round): every scenario is listed")
            for e in entries {
                let name = e["name"] as? String ?? ""
                let status = e["status"] as? String
                if name.hasPrefix("crash-") {
                    XCTAssertEqual(status, "failed", "round \(round): \(name) times out: \(e["reason"] ?? "")")
                } else {
                    XCTAssertEqual(status, "passed", "round \(round): \(name)")
                }
            }
            XCTAssertTrue(FileManager.default.fileExists(atPath: dir.appendingPathComponent("j.xml").path))
        }
    }

    /// A variant that `fatalError`s: each scenario that makes it crash is `crashed` with SIGILL and
    /// the fatal error's line; every other scenario still runs, and the verdict is complete.
    func testAnSDKThatCrashesTheProcessIsReportedCrashedAndTheRunGoesOn() throws {
        let r = try harness(["run", Self.scenarios, "--mutant", "crash-on-clear-in-flight", "--filter", "logout", "--filter", "smoke",
                             "--verdict", "v.json", "--junit", "j.xml"])
        XCTAssertEqual(r.status, 1, r.out)
        let entries = try scenarioEntries("v.json")
        let crashed = entries.filter { $0["status"] as? String == "crashed" }
        XCTAssertFalse(crashed.isEmpty, r.out)
        XCTAssertTrue(entries.contains { $0["name"] as? String == "contract-smoke" && $0["status"] as? String == "passed" }, r.out)
        for e in crashed {
            let crash = try XCTUnwrap(e["crash"] as? [String: Any])
            XCTAssertEqual(crash["signal"] as? Int, Int(SIGILL))
            XCTAssertTrue((crash["stderr_tail"] as? [String] ?? []).contains { $0.contains("Fatal error: MutantClient.clearCache()") }, "\(crash)")
            XCTAssertTrue((e["reason"] as? String ?? "").contains("SIGILL"))
        }
        XCTAssertTrue(r.out.contains("CRASH "), r.out)
        let junit = String(decoding: try Data(contentsOf: dir.appendingPathComponent("j.xml")), as: UTF8.self)
        XCTAssertTrue(junit.contains("SIGILL"), junit)
    }

    /// `explore` against the crashing variant: the schedule that crashes is a reported failure, the
    /// exploration goes on to the end and writes the shrunk schedule.
    func testACrashingScheduleIsReportedAndExploreGoesOn() throws {
        let file = Repository.root.appendingPathComponent("scenarios/race-explore-clear-vs-late-assignment.json").path
        let r = try harness(["explore", file, "--mutant", "crash-on-clear-in-flight", "--out", "schedule.json", "--verdict", "v.json"])
        XCTAssertEqual(r.status, 1, r.out)
        XCTAssertTrue(r.out.contains("6 schedules"), r.out)
        XCTAssertTrue(r.out.contains("crashed)"), r.out)
        XCTAssertTrue(r.out.contains("fails 'crash'"), r.out)
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.appendingPathComponent("schedule.json").path))
        // The verdict counts the crash as `run` does (a sixty-sixth outside tester: `failed`, crashed 0).
        let entry = try XCTUnwrap(try scenarioEntries("v.json").first)
        XCTAssertEqual(entry["status"] as? String, "crashed")
        XCTAssertTrue((entry["reason"] as? String)?.hasPrefix("the SDK crashed in ") ?? false, "\(entry)")
        let verdict = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("v.json"))) as? [String: Any]
        XCTAssertEqual((verdict?["counts"] as? [String: Any])?["crashed"] as? Int, 1)
    }

    /// `--jobs 2` reports the same scenarios in the same order with the same statuses and history
    /// digests as `--jobs 1`.
    func testJobsTwoGivesTheSameStatusesDigestsAndOrderAsJobsOne() throws {
        let one = try harness(["run", Self.scenarios, "--verdict", "one.json", "--jobs", "1"])
        let two = try harness(["run", Self.scenarios, "--verdict", "two.json", "--jobs", "2"])
        XCTAssertEqual(one.status, 0, one.out)
        XCTAssertEqual(two.status, 0, two.out)
        func summary(_ file: String) throws -> [String] {
            // A scenario tagged history-varies may legitimately record another history: its status counts.
            try scenarioEntries(file).map { e in
                let varies = (e["tags"] as? [String])?.contains("history-varies") ?? false
                return "\(e["name"] ?? "") \(e["status"] ?? "") \(varies ? "-" : e["history_digest"] ?? "")"
            }
        }
        let a = try summary("one.json"), b = try summary("two.json")
        XCTAssertGreaterThan(a.count, 40)
        XCTAssertEqual(a.count, b.count)
        var mismatched = zip(a, b).filter { $0 != $1 }
        if !mismatched.isEmpty && mismatched.allSatisfy({ $0.split(separator: " ").prefix(2) == $1.split(separator: " ").prefix(2) }) {
            // Only digests differ: once more, both ways. A difference that follows --jobs comes
            // back; a scenario whose history varies with thread timing now and then (a
            // determinism bug of its own, printed for the record) does not come back for the
            // same scenario twice in a row.
            let names = Set(mismatched.map { String($0.0.split(separator: " ").first ?? "") })
            print("note: digests differed once for \(names.sorted()); running both again")
            _ = try harness(["run", Self.scenarios, "--verdict", "one-again.json", "--jobs", "1"])
            _ = try harness(["run", Self.scenarios, "--verdict", "two-again.json", "--jobs", "2"])
            mismatched = zip(try summary("one-again.json"), try summary("two-again.json"))
                .filter { $0 != $1 && names.contains(String($0.split(separator: " ").first ?? "")) }
        }
        for (x, y) in mismatched {
            let failures = try scenarioEntries("two.json").filter { $0["status"] as? String != "passed" }.map { "\($0["name"] ?? ""): \($0["reason"] ?? "")" }
            XCTFail("--jobs 1: \(x)\n--jobs 2: \(y)\n(not passed with --jobs 2: \(failures))")
        }
    }

    /// SIGTERM while a worker runs a scenario: exit 143, the verdict says interrupted and lists the
    /// scenario, and the worker (its whole process group) is gone.
    func testSIGTERMKillsTheWorkersAndWritesTheVerdict() throws {
        let file = dir.appendingPathComponent("waits.json")
        try Data("""
        {"format": "experimently-scenario/1", "name": "waits", "description": "waits for a hold never reached", "step_timeout_ms": 20000, "checks": ["single_flight"],
         "steps": [{"fault": {"match": {"path": "/api/v1/tracking/batch"}, "action": {"hold": {}}}, "id": "never"},
                   {"wait_for": {"held": "never", "count": 1}}]}
        """.utf8).write(to: file)
        let p = Process()
        p.executableURL = HarnessCLITests.binary
        p.arguments = ["run", file.path, "--verdict", "v.json"]
        p.currentDirectoryURL = dir
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        // Wait (bounded) until the supervisor has started its worker.
        func children() -> [Int32] {
            let all = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            return all.compactMap(Int32.init).filter { pid in
                guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                      let close = stat.range(of: ") ", options: .backwards) else { return false }
                let fields = stat[close.upperBound...].split(separator: " ")
                return fields.count > 1 && Int32(fields[1]) == p.processIdentifier
            }
        }
        var workers: [Int32] = []
        // Gate: a worker exists (a generous bound: under load a worker can take seconds to start).
        let deadline = Date(timeIntervalSinceNow: 60)
        while workers.isEmpty, Date() < deadline {
            workers = children()
            if workers.isEmpty { usleep(2000) }
        }
        guard !workers.isEmpty else {
            kill(p.processIdentifier, SIGKILL); p.waitUntilExit()
            return XCTFail("no worker process started within 60 s")
        }
        kill(p.processIdentifier, SIGTERM)
        p.waitUntilExit()
        XCTAssertEqual(p.terminationReason, .exit)
        XCTAssertEqual(p.terminationStatus, 143)
        let data = try Data(contentsOf: dir.appendingPathComponent("v.json"))
        let v = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
        XCTAssertEqual(v["interrupted"] as? Bool, true)
        XCTAssertEqual((v["scenarios"] as? [[String: Any]])?.first?["status"] as? String, "error")
        for pid in workers {
            // Gone, or a zombie waiting for init to reap it: never still running the scenario.
            var state: String?
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
               let close = stat.range(of: ") ", options: .backwards) {
                state = String(stat[close.upperBound...].prefix(1))
            }
            XCTAssertTrue(state == nil || state == "Z", "worker \(pid) still running (state \(state ?? "?"))")
        }
    }

    /// At start the verdict is replaced by one marked in progress: a run killed outright never
    /// leaves an earlier run's verdict looking current.
    func testAKilledRunLeavesAnInProgressVerdictNotAStaleOne() throws {
        let stale = #"{"format": "experimently-verdict/1", "ok": true, "stale": true, "scenarios": []}"#
        try Data(stale.utf8).write(to: dir.appendingPathComponent("v.json"))
        let p = Process()
        p.executableURL = HarnessCLITests.binary
        p.arguments = ["run", "\(Self.fixtures)/crash-app-relogin-wait-for-unreached-hold.json", "--verdict", "v.json", "--jobs", "1"]
        p.currentDirectoryURL = dir
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        // Wait (bounded) for the fresh verdict, then kill the supervisor outright.
        var seen: [String: Any]?
        for _ in 0..<2000 {
            if let data = try? Data(contentsOf: dir.appendingPathComponent("v.json")),
               let v = try? JSONSerialization.jsonObject(with: data) as? [String: Any], v["stale"] == nil {
                seen = v
                break
            }
            usleep(1000)
        }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        let v = try XCTUnwrap(seen, "the stale verdict was never replaced")
        if v["in_progress"] != nil {
            XCTAssertEqual(v["in_progress"] as? Bool, true)
            XCTAssertEqual(v["ok"] as? Bool, false)
            XCTAssertEqual(v["scenarios_planned"] as? Int, 1)
        } else {
            // The run finished before the kill: then it is the final verdict.
            XCTAssertEqual((v["scenarios"] as? [Any])?.count, 1)
        }
    }
}

/// The worker pool against stand-in workers (shell scripts): deaths by signal and by exit status,
/// the hard deadline, and a fresh worker going on with the rest.
final class WorkerPoolTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("worker-pool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    /// A stand-in worker: answers each job with a passing result named after its process id,
    /// except job `crashID` (it runs `crash`, a shell command); job `retireID` asks to be replaced.
    func script(crashID: Int, crash: String, retireID: Int = -1, slowID: Int = -1) throws -> String {
        let path = dir.appendingPathComponent("worker.sh").path
        let text = """
        #!/bin/sh
        while IFS= read -r line; do
          id=$(printf '%s' "$line" | sed 's/.*"id":\\([0-9]*\\).*/\\1/')
          if [ "$id" = "\(crashID)" ]; then echo "about to fail job $id" >&2; \(crash); fi
          [ "$id" = "\(slowID)" ] && sleep 2
          retire=false; [ "$id" = "\(retireID)" ] && retire=true
          printf '{"version":1,"kind":"result","payload":{"id":%s,"retire":%s,"result":{"name":"%s","file":"f","tags":[],"status":"passed","durationMilliseconds":1,"checks":[],"history":[],"historyDigest":"d","infeasible":false}}}\\n' "$id" "$retire" "$$"
        done
        """
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o755)
        return path
    }

    func jobs(_ n: Int) -> [WorkerJob] {
        (0..<n).map { WorkerJob(id: $0, file: "f", scenario: "{}", seed: 0, mutant: nil, stepTimeoutCap: nil, keepsHistory: true, explore: nil) }
    }

    func run(_ executable: String, count: Int = 4, deadline: Int = 20_000, slots: Int = 1, perWorker: Int = 1) async -> [WorkerPool.Outcome] {
        await WorkerPool(executable: executable, jobs: jobs(count), deadlines: Array(repeating: deadline, count: count),
                         slots: slots, perWorker: perWorker).run()
    }

    func crash(_ outcome: WorkerPool.Outcome) -> CrashReport? {
        if case .crashed(let report, _) = outcome { return report }
        return nil
    }

    func passed(_ outcome: WorkerPool.Outcome) -> Bool {
        if case .result(let r) = outcome { return r.status == .passed }
        return false
    }

    func testASignalCostsOnlyItsJob() async throws {
        let outcomes = await run(try script(crashID: 1, crash: "kill -SEGV $$"))
        XCTAssertTrue(passed(outcomes[0]) && passed(outcomes[2]) && passed(outcomes[3]), "\(outcomes)")
        let report = try XCTUnwrap(crash(outcomes[1]))
        XCTAssertEqual(report.signal, SIGSEGV)
        XCTAssertEqual(report.stderrTail.last, "about to fail job 1")
        XCTAssertTrue(report.reason.contains("SIGSEGV"), report.reason)
    }

    func testAnExitStatusIsReported() async throws {
        let outcomes = await run(try script(crashID: 0, crash: "exit 3"), slots: 2)
        XCTAssertEqual(crash(outcomes[0])?.exitStatus, 3)
        XCTAssertNil(crash(outcomes[0])?.signal)
        XCTAssertTrue(outcomes.dropFirst().allSatisfy(passed), "\(outcomes)")
    }

    func testAHangPastTheDeadlineIsKilledAndTheRestGoOn() async throws {
        let outcomes = await run(try script(crashID: 2, crash: "sleep 30"), deadline: 300)
        let report = try XCTUnwrap(crash(outcomes[2]))
        XCTAssertEqual(report.deadlineMilliseconds, 300)
        XCTAssertTrue(report.reason.contains("hard deadline of 300 ms"), report.reason)
        XCTAssertTrue(passed(outcomes[0]) && passed(outcomes[1]) && passed(outcomes[3]), "\(outcomes)")
    }

    /// With several jobs in one worker, the crash is pinned on the job that crashes alone.
    func testSharedWorkersPinTheCrashOnItsJob() async throws {
        let outcomes = await run(try script(crashID: 3, crash: "kill -ABRT $$"), count: 8, slots: 2, perWorker: 4)
        for (i, o) in outcomes.enumerated() {
            if i == 3 { XCTAssertEqual(crash(o)?.signal, SIGABRT) } else { XCTAssertTrue(passed(o), "job \(i): \(o)") }
        }
    }

    /// A worker whose scenario did not pass asks to be replaced: the next job gets a fresh process.
    func testARetiringWorkerIsReplaced() async throws {
        let outcomes = await run(try script(crashID: -1, crash: "true", retireID: 1))
        let pids = outcomes.map { o -> String in if case .result(let r) = o { return r.name } else { return "?" } }
        XCTAssertEqual(pids[0], pids[1], "\(pids)")
        XCTAssertNotEqual(pids[1], pids[2], "\(pids)")
        XCTAssertEqual(pids[2], pids[3], "\(pids)")
    }

    /// A retiring worker with jobs still in flight gets no new job and finishes them on a thread
    /// of its own, while its slot goes on with a fresh worker: the later jobs end before the slow
    /// one the old worker still runs (the slot used to idle until it ended).
    func testARetiringWorkerFinishesItsJobsWhileTheSlotGoesOn() async throws {
        let executable = try script(crashID: -1, crash: "true", retireID: 0, slowID: 1)
        let order = HarnessLocked<[Int]>([])
        let outcomes = await WorkerPool(executable: executable, jobs: jobs(4), deadlines: Array(repeating: 20_000, count: 4), slots: 1,
                                        perWorker: 2) { id, _ in order.withLock { $0.append(id) } }.run()
        let pids = outcomes.map { o -> String in if case .result(let r) = o { return r.name } else { return "?" } }
        XCTAssertEqual(pids[0], pids[1], "job 1 ends in the worker it was sent to: \(pids)")
        XCTAssertNotEqual(pids[1], pids[2], "\(pids)")
        XCTAssertEqual(pids[2], pids[3], "\(pids)")
        XCTAssertEqual(order.withLock { $0 }, [0, 2, 3, 1], "jobs 2 and 3 ran while the old worker finished job 1")
    }

    func testRecordsRoundTripWithTheirVersion() throws {
        let job = jobs(1)[0]
        let line = WorkerProtocol.line("job", job)
        XCTAssertTrue(String(decoding: line, as: UTF8.self).hasPrefix(#"{"kind":"job","payload":{"#))
        XCTAssertEqual(try WorkerProtocol.kind(of: line.dropLast()), "job")
        XCTAssertEqual(try WorkerProtocol.payload(WorkerJob.self, from: line.dropLast()), job)
        XCTAssertThrowsError(try WorkerProtocol.kind(of: Data(#"{"version":2,"kind":"job","payload":{}}"#.utf8)))
        XCTAssertThrowsError(try WorkerProtocol.kind(of: Data("Fatal error".utf8)))
    }
}
