import XCTest
import Foundation
import ExperimentlyMock
import ExperimentlyMutants
@testable import ContractHarness

/// Interleaving exploration (issue 15): the SDK's own tasks run on the harness's executor, the
/// explorer chooses among ready tasks, catches the await-atomicity variants a plain run misses,
/// finds nothing against the shipping SDK, and a written interleaving replays exactly.
final class InterleavingTests: XCTestCase {
    static let file = Repository.root.appendingPathComponent("scenarios/interleave-two-concurrent-assignments-one-request.json").path
    static let awaitVariants: [Defect] = [.unregisterBeforeCacheWrite, .joinFinishedFlight]

    func root() throws -> JSONValue { try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: Self.file)), file: Self.file) }

    func explore(_ driver: SwiftSDKDriver, seed: UInt64 = 0) async throws -> InterleavingExplorer.Report {
        let scenario = try ScenarioParser.load(path: Self.file)
        return await InterleavingExplorer.explore(try root(), file: Self.file, settings: .of(scenario), seed: seed,
                                                  runner: ScenarioRunner(driver: driver, stepTimeoutCap: 1500, keepsHistory: false))
    }

    func testTheShippingSDKAndTheFaithfulVariantExploreClean() async throws {
        for (name, driver) in [("shipping", SwiftSDKDriver()), ("faithful", MutantRun.driver(nil))] {
            let report = try await explore(driver)
            XCTAssertNil(report.firstFailure, "\(name): \(String(describing: report.firstFailure?.result.firstFailure))")
            XCTAssertTrue(report.complete, "\(name): few choices, so every interleaving is enumerated (\(report.mode))")
            XCTAssertGreaterThan(report.runs, 10, "\(name): more than one interleaving exists")
            XCTAssertGreaterThanOrEqual(report.probePoints.count, 3, name)
        }
    }

    func testTheSDKsOwnTasksRunOnTheControlledExecutor() async throws {
        let scenario = try ScenarioParser.load(path: Self.file)
        var runner = ScenarioRunner(keepsHistory: false)
        runner.interleaving = .prefix([])
        let r = await runner.run(scenario)
        XCTAssertEqual(r.status, .passed, "\(r.checks.filter { !$0.passed })")
        let trace = try XCTUnwrap(r.interleaving)
        let chosen = Set(trace.points.map(\.chosen))
        // views#1 and views#2 are the operations; views#1/1 the single-flight task the SDK creates,
        // views#1/1/1 its deadline task: both reach the executor only through the SDK's seam.
        XCTAssertTrue(chosen.contains("views#2"), "\(trace.points)")
        XCTAssertTrue(trace.points.contains { $0.chosen.hasPrefix("views#1/1") }, "\(trace.points)")
        XCTAssertGreaterThan(trace.steps, trace.points.count)
        // Without a plan, the same scenario runs as before: no trace.
        let plain = await ScenarioRunner(keepsHistory: false).run(scenario)
        XCTAssertNil(plain.interleaving)
    }

    func testEachAwaitAtomicityVariantIsCaughtByInterleavingAndTheFileReplaysIt() async throws {
        let scenario = try ScenarioParser.load(path: Self.file)
        for defect in Self.awaitVariants {
            XCTAssertTrue(defect.needsInterleaving)
            // In the oldest-task-first interleaving (every caller joins before the answer) it passes:
            // the bug needs a caller to arrive in the window across the variant's await.
            var oldestFirst = ScenarioRunner(driver: MutantRun.driver(defect), stepTimeoutCap: 1500, keepsHistory: false)
            oldestFirst.interleaving = .prefix([])
            let passing = await oldestFirst.run(scenario)
            XCTAssertEqual(passing.status, .passed, "\(defect.rawValue): \(passing.checks.filter { !$0.passed })")
            // Interleaving exploration with the default budget catches it, and writes a file that replays it.
            let report = try await explore(MutantRun.driver(defect))
            let failure = try XCTUnwrap(report.firstFailure, "\(defect.rawValue): \(report.mode)")
            XCTAssertLessThanOrEqual(report.runs, InterleavingExplorer.Settings.standard.maxSchedules)
            XCTAssertNotNil(failure.scenarioJSON["interleaving"]?["choices"], "\(failure.scenarioJSON)")
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("interleaving-\(UUID().uuidString).json").path
            try failure.scenarioJSON.serialized().write(to: URL(fileURLWithPath: path))
            defer { try? FileManager.default.removeItem(atPath: path) }
            let replay = try ScenarioParser.load(path: path)
            XCTAssertEqual(replay.interleaving?.choices, failure.choices)
            let again = await ScenarioRunner(driver: MutantRun.driver(defect), stepTimeoutCap: 1500).run(replay)
            XCTAssertEqual(again.status, .failed, defect.rawValue)
            XCTAssertTrue(again.checks.contains { !$0.passed && Explorer.sameCheck($0.name, failure.check) }, "\(again.checks)")
            // The file records what found it and names the check as its replay does (shrinking
            // may renumber a step expectation: `unregister-before-cache-write` fails step 2's assert
            // as explored, step 1's in the file).
            let explored = try XCTUnwrap(failure.scenarioJSON["explored"], "\(failure.scenarioJSON)")
            XCTAssertEqual(explored["by"]?.stringValue, "contract-harness explore --interleave")
            XCTAssertEqual(explored["fails_on"]?.stringValue, MutantRun.driver(defect).sdkName)
            XCTAssertEqual(explored["check"]?.stringValue, again.firstFailure?.name)
            if again.firstFailure?.name != failure.check {
                XCTAssertEqual(explored["check_in_explored_order"]?.stringValue, failure.check)
            } else {
                XCTAssertNil(explored["check_in_explored_order"])
            }
            if defect == .unregisterBeforeCacheWrite { XCTAssertEqual(again.firstFailure?.name, "step 1 assert") }
            // The shipping SDK passes the written interleaving file.
            let real = await ScenarioRunner().run(replay)
            XCTAssertEqual(real.status, .passed, "\(real.checks.filter { !$0.passed })")
        }
    }

    func testReplayingAWrittenInterleavingGivesTheSameHistoryDigest100Times() async throws {
        let report = try await explore(MutantRun.driver(.unregisterBeforeCacheWrite))
        let failure = try XCTUnwrap(report.firstFailure)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("interleaving-\(UUID().uuidString).json").path
        try failure.scenarioJSON.serialized().write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let replay = try ScenarioParser.load(path: path)
        let runner = ScenarioRunner(driver: MutantRun.driver(.unregisterBeforeCacheWrite), stepTimeoutCap: 1500)
        let started = DispatchTime.now()
        var digests = Set<String>()
        var choices = Set<[String]>()
        for _ in 0..<100 {
            let r = await runner.run(replay)
            XCTAssertEqual(r.status, .failed)
            digests.insert(r.historyDigest)
            choices.insert(r.interleaving?.choices ?? [])
        }
        XCTAssertEqual(digests.count, 1, "replays gave different histories: \(digests)")
        XCTAssertEqual(choices, [failure.choices])
        // Bounded: 100 replays are well under a minute even on a loaded machine.
        XCTAssertLessThan(ScenarioRunner.elapsed(since: started), 60_000)
    }

    func testTheOrderOfNetworkAnswersIsAChoice() async throws {
        let text = """
        {"format": "experimently-scenario/1", "name": "two-answers", "description": "two held requests released at once",
         "steps": [
          {"fault": {"match": {"path_prefix": "/api/v1/"}, "when": {"first": 2}, "action": {"hold": {}}}, "id": "both"},
          {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "u-1", "as": "a", "async": true},
          {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u-1", "as": "f", "async": true},
          {"wait_for": {"held": "both", "count": 2}},
          {"release": "both", "all": true},
          {"await": "a", "expect": {"value": {"variant_name": "control"}}},
          {"await": "f", "expect": {"value": {"enabled": true}}}
         ]}
        """
        let scenario = try ScenarioParser.parse(Data(text.utf8), file: "two-answers.json")
        var runner = ScenarioRunner(keepsHistory: true)
        runner.interleaving = .prefix([])
        let first = await runner.run(scenario)
        XCTAssertEqual(first.status, .passed, "\(first.checks.filter { !$0.passed })")
        // After the release both answers are in: both request tasks are ready at one point.
        let points = try XCTUnwrap(first.interleaving?.points)
        let both = try XCTUnwrap(points.firstIndex { $0.options >= 2 && $0.chosen == "a/1" }, "\(points)")
        // The flag's request task can run there instead (the canonical history sorts concurrent
        // completions, so both orders give one history; the trace differs).
        runner.interleaving = .replay(points[..<both].map(\.chosen) + ["f/1"])
        let second = await runner.run(scenario)
        XCTAssertEqual(second.status, .passed, "\(second.checks.filter { !$0.passed })")
        XCTAssertEqual(second.interleaving?.points[both].chosen, "f/1", "\(String(describing: second.interleaving?.points))")
        XCTAssertNotEqual(first.interleaving, second.interleaving)
    }

    func testTheCommandWritesTheInterleavingAndRefusesBadOptions() async throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("interleaving-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let failed = await HarnessCommand.main(["explore", Self.file, "--interleave", "--mutant", "join-finished-flight", "--out", out])
        XCTAssertEqual(failed, HarnessCommand.Exit.failed.rawValue)
        let written = try ScenarioParser.load(path: out)
        XCTAssertNotNil(written.interleaving)
        XCTAssertEqual(written.interleaving?.depth, 3)
        let clean = await HarnessCommand.main(["explore", Self.file, "--interleave", "--out", out + ".none"])
        XCTAssertEqual(clean, HarnessCommand.Exit.ok.rawValue)
        XCTAssertFalse(FileManager.default.fileExists(atPath: out + ".none"))
        for bad in [["--depth", "0"], ["--depth", "x"], ["--exhaustive"]] {
            let status = await HarnessCommand.main(["explore", Self.file, "--interleave"] + bad)
            XCTAssertEqual(status, HarnessCommand.Exit.usage.rawValue, "\(bad)")
        }
    }

    func testPCTIsSeededAndPicksTheHighestPriorityReadyTask() {
        func run(_ seed: UInt64) -> [Int] {
            let pct = InterleavingPlan.pct(seed: seed, depth: 3, steps: 20).makeStrategy()
            let tasks = (0..<5).map { InterleavingTask(name: "t\($0)", serial: $0) }
            tasks.forEach(pct.created)
            var picks: [Int] = []
            for step in 0..<20 {
                let ready = tasks.filter { ($0.serial + step) % 3 != 0 }
                let i = pct.choose(ready, step: step)
                picks.append(ready[i].serial)
                pct.ran(ready[i], step: step + 1)
            }
            return picks
        }
        XCTAssertEqual(run(7), run(7))
        XCTAssertGreaterThan(Set((0..<8).map { run($0) }).count, 1, "different seeds give different schedules")
        // Without change points (depth 1) the same task wins whenever it is ready.
        let fixed = InterleavingPlan.pct(seed: 3, depth: 1, steps: 20).makeStrategy()
        let a = InterleavingTask(name: "a", serial: 0), b = InterleavingTask(name: "b", serial: 1)
        fixed.created(a); fixed.created(b)
        let first = fixed.choose([a, b], step: 0)
        for step in 1..<10 { XCTAssertEqual(fixed.choose([a, b], step: step), first); fixed.ran([a, b][first], step: step) }
        // Replay follows names, and falls back to the oldest ready task.
        let replay = InterleavingPlan.replay(["b", "zz"]).makeStrategy()
        XCTAssertEqual(replay.choose([a, b], step: 0), 1)
        XCTAssertEqual(replay.choose([a, b], step: 1), 0)
        XCTAssertEqual(replay.choose([a], step: 2), 0)
    }

    func testTheInterleavingSectionIsCheckedAndNeedsTheCapability() throws {
        func parse(_ section: String) throws -> Scenario {
            let text = """
            {"format": "experimently-scenario/1", "name": "x", "description": "d", "interleaving": \(section),
             "steps": [{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "expect": {"value": {"enabled": true}}}]}
            """
            return try ScenarioParser.parse(Data(text.utf8), file: "x.json")
        }
        let ok = try parse(#"{"seed": 5, "depth": 2, "max_schedules": 50, "choices": ["op1", "op1/1"]}"#)
        XCTAssertEqual(ok.interleaving, ScenarioInterleaving(seed: 5, depth: 2, maxSchedules: 50, choices: ["op1", "op1/1"]))
        XCTAssertTrue(ok.requirements.contains { $0.capability == "interleaving" })
        for (bad, path) in [(#"{"choices": [1]}"#, "$.interleaving.choices"), (#"{"depth": 0}"#, "$.interleaving.depth"),
                            (#"{"seed": -1}"#, "$.interleaving.seed"), (#"{"order": []}"#, "$.interleaving")] {
            XCTAssertThrowsError(try parse(bad), bad) { error in
                XCTAssertTrue("\(error)".contains(path), "\(bad): \(error)")
            }
        }
        // A driver whose SDK cannot take the executor skips the scenario, with the reason.
        let fourArguments = SwiftSDKDriver(name: "plain", version: "1") { config, session, store, clock in
            MutantClient(defect: nil, config: config, session: session, offlineStore: store, clock: clock)
        }
        XCTAssertFalse(fourArguments.capabilities.contains("interleaving"))
        XCTAssertTrue(SwiftSDKDriver().capabilities.contains("interleaving"))
        XCTAssertTrue(ok.unmet(by: fourArguments.capabilities).contains { $0.capability == "interleaving" })
    }

    func testTheMutantMatrixCatchesTheAwaitVariantsOnlyByInterleaving() async throws {
        let files = try HarnessCommand.discover([Self.file, Repository.root.appendingPathComponent("scenarios/field-50-concurrent-assignments-one-request.json").path])
        let (scenarios, invalid) = HarnessCommand.load(files, seed: 0)
        XCTAssertTrue(invalid.isEmpty, "\(invalid)")
        let report = await MutantRun.run(scenarios, defects: Self.awaitVariants + [.noSingleFlight], stepTimeoutCap: 1500)
        XCTAssertEqual(report.baselineFailures, [])
        for row in report.rows where row.defect.needsInterleaving {
            XCTAssertTrue(row.caughtBy.contains("interleave:interleave-two-concurrent-assignments-one-request"), "\(row.defect.rawValue): \(row.caughtBy)")
        }
        // A variant the plain suite catches is not explored.
        let plain = try XCTUnwrap(report.rows.first { $0.defect == .noSingleFlight })
        XCTAssertTrue(plain.caught)
        XCTAssertFalse(plain.caughtBy.contains { $0.hasPrefix("interleave:") }, "\(plain.caughtBy)")
    }

    /// Shrinking is differential: a step whose removal makes the file fail the reference too (the
    /// `clearCache` that makes the race) is kept, and the file says the reference passes it.
    /// Before, the shrunk file of this shipped scenario failed every SDK (a forty-seventh outside
    /// tester, B: 27 of 66 files written from the shipped scenarios failed the shipping SDK).
    func testShrinkingKeepsWhatTheReferenceNeedsToPass() async throws {
        let file = Repository.root.appendingPathComponent("scenarios/race-explore-field-clear-while-assignment-held.json").path
        let scenario = try ScenarioParser.load(path: file)
        let root = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
        let report = await InterleavingExplorer.explore(root, file: file, settings: .of(scenario), seed: 0,
                                                        runner: ScenarioRunner(driver: MutantRun.driver(.staleWriteAfterClear), stepTimeoutCap: 1500, keepsHistory: false),
                                                        reference: ScenarioRunner(driver: MutantRun.driver(nil), stepTimeoutCap: 1500, keepsHistory: false))
        let failure = try XCTUnwrap(report.firstFailure, report.mode)
        XCTAssertTrue(failure.scenarioJSON["steps"]?.arrayValue?.contains { $0["do"]?.stringValue == "clearCache" } ?? false,
                      "the clear that makes the race is kept: \(failure.scenarioJSON)")
        XCTAssertEqual(failure.scenarioJSON["explored"]?["passes_on"]?.stringValue, MutantRun.driver(nil).sdkName)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("interleaving-\(UUID().uuidString).json").path
        try failure.scenarioJSON.serialized().write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let written = try ScenarioParser.load(path: path)
        for (name, driver) in [("shipping", SwiftSDKDriver()), ("faithful", MutantRun.driver(nil))] {
            let r = await ScenarioRunner(driver: driver, stepTimeoutCap: 1500).run(written)
            XCTAssertEqual(r.status, .passed, "\(name): \(r.checks.filter { !$0.passed })")
        }
        let variant = await ScenarioRunner(driver: MutantRun.driver(.staleWriteAfterClear), stepTimeoutCap: 1500).run(written)
        XCTAssertEqual(variant.status, .failed)
    }
}
