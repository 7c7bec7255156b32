import Foundation
import XCTest
import ExperimentlyMock
import ExperimentlyMutants
@testable import ContractHarness

/// Out-of-process runs judge like in-process ones (an outside tester's field-race files,
/// Fixtures/oop-races): the runner waits until every operation has really reached its wait
/// (`settle`), an `interleaving` scenario is never run over the protocol, and a fully ordered file
/// gives one history digest. Loops of 20 runs catch what failed about every second run before.
final class OutOfProcessQuiescenceTests: XCTestCase {
    private static func scenario(_ name: String) throws -> Scenario {
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/oop-races/\(name).json").path
        return try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
    }

    private static func swiftDriverCommand(mutant: String? = nil) throws -> String {
        let driver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver")
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: driver.path), "experimently-driver is not built (swift build builds it)")
        return (mutant.map { "EXPERIMENTLY_DRIVER_MUTANT=\($0) " } ?? "") + "'\(driver.path)'"
    }

    private static var pythonDriverCommand: String {
        "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
    }

    /// A lookup held before a clear, and a later call for the same user and key held after it:
    /// releasing the first waits for the first call's completion, never taking the later call's
    /// parked request for its own (a seventeenth outside tester: through experimently-driver the next
    /// step ran while the first answer travelled, 19 of 20 runs of the shipping SDK failed the
    /// shipped file, and a variant without the cancel gave 2 digests in 20 runs).
    func testALaterCallsRequestAfterAClearIsNotAPendingLookupsOwn() async throws {
        let shipped = Repository.root.appendingPathComponent("scenarios/race-lookup-answered-after-clear-beside-a-later-parked-call.json").path
        let cancel = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: shipped)), file: shipped)
        let digest = try Self.scenario("t15-lookup-before-clear-digest")
        let driver = try await ProcessSDKDriver.launch(command: try Self.swiftDriverCommand())
        var digests: Set<String> = []
        for _ in 0..<10 {
            let r = await ScenarioRunner(driver: driver, stepTimeoutCap: 2000).run(cancel)
            XCTAssertEqual(r.status, .passed, "\(r.checks.filter { !$0.passed })")
            let d = await ScenarioRunner(driver: driver, stepTimeoutCap: 2000).run(digest)
            XCTAssertEqual(d.status, .passed, "\(d.checks.filter { !$0.passed })")
            digests.insert(d.historyDigest)
        }
        await driver.shutdown()
        XCTAssertEqual(digests.count, 1)
    }

    /// The same after `clearOfflineCache`, with an SDK that lets the later call send its own
    /// request (a freedom `single_flight` grants): its settle comes once that request is written,
    /// which the mock may not have read yet, and quiescence took the call to have joined the
    /// earlier request (4 of 10 runs failed; the example adapter also counted a flight's starter
    /// as settled before its request was sent). Quiescence now waits until the listeners hold
    /// nothing unread (`MockHTTPServer.transportIdle`).
    func testARequestWrittenButNotYetReadIsNotMistakenForAJoin() async throws {
        let command = "EXPERIMENTLY_EXAMPLE_FREEDOM=detach-on-clear-offline-cache " + Self.pythonDriverCommand
        let results = try await run(["t15-lookup-before-clear-offline-cache"], times: 10, command: command)
        let runs = try XCTUnwrap(results["t15-lookup-before-clear-offline-cache"])
        for r in runs { XCTAssertEqual(r.status, .passed, "\(r.checks.filter { !$0.passed })") }
        XCTAssertEqual(Set(runs.map(\.historyDigest)).count, 1)
    }

    /// Runs each of `names` `times` times through one adapter; returns the results by name.
    private func run(_ names: [String], times: Int, command: String, stepTimeoutCap: Int = 2000) async throws -> [String: [ScenarioResult]] {
        let driver = try await ProcessSDKDriver.launch(command: command)
        var out: [String: [ScenarioResult]] = [:]
        for name in names {
            let scenario = try Self.scenario(name)
            for _ in 0..<times {
                out[name, default: []].append(await ScenarioRunner(driver: driver, stepTimeoutCap: stepTimeoutCap).run(scenario))
            }
        }
        await driver.shutdown()
        return out
    }

    private func assertAllPassed(_ results: [String: [ScenarioResult]], _ via: String, file: StaticString = #filePath, line: UInt = #line) {
        for (name, runs) in results.sorted(by: { $0.key < $1.key }) {
            let failed = runs.filter { $0.status != .passed }
            XCTAssertTrue(failed.isEmpty, "\(name) via \(via): \(failed.count) of \(runs.count) did not pass; first: "
                          + "\(failed.first.map { $0.firstFailure?.message ?? $0.reason ?? "\($0.status)" } ?? "")", file: file, line: line)
        }
    }

    /// Finding 4: the second caller of a shared lookup joins it before the first caller is
    /// cancelled, so the request goes on for it and no second request is sent (CONTRACT.md
    /// section 5, defect 3). Before `settle` the joiner counted as settled once the starter's
    /// request was parked, and about every second run failed with "saw 2 requests".
    func testTheJoinerOfASharedRequestSurvivesTheStartersCancelOutOfProcess() async throws {
        let command = try Self.swiftDriverCommand()
        assertAllPassed(try await run(["r5-cancel-starter-oop", "s13-strict-mode-unmount-cancels"], times: 20, command: command), "experimently-driver")
    }

    /// The same through the Python example, which answers `settle` from its own wait hook.
    func testTheJoinerOfASharedRequestSurvivesTheStartersCancelThroughThePythonExample() async throws {
        assertAllPassed(try await run(["r5-cancel-starter-oop", "s13-strict-mode-unmount-cancels"], times: 20,
                                      command: Self.pythonDriverCommand), "driver.py")
    }

    /// The broken variant that keeps the request when every waiter is cancelled is still caught
    /// out of process (`settle` makes the runner wait for joins, never hide a defect).
    func testCancelKeepsRequestIsStillCaughtOutOfProcess() async throws {
        let command = try Self.swiftDriverCommand(mutant: "cancel-keeps-request")
        let driver = try await ProcessSDKDriver.launch(command: command)
        XCTAssertEqual(driver.sdkName, "ios-mutant-cancel-keeps-request")
        let file = Repository.root.appendingPathComponent("scenarios/defect-3-cancel-every-waiter-cancels-request.json").path
        let shipped = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
        for scenario in [shipped, try Self.scenario("s13-strict-mode-unmount-cancels")] {
            let result = await ScenarioRunner(driver: driver, stepTimeoutCap: 1000).run(scenario)
            XCTAssertEqual(result.status, .failed, "\(scenario.name): the broken variant passed")
        }
        await driver.shutdown()
    }

    /// An adapter that does not declare `settle` is never failed for a join it could not report:
    /// a scenario whose lookups may join a request a fault parks is skipped, naming `settle`.
    func testAnAdapterWithoutSettleHasSharedLookupScenariosSkipped() async throws {
        let r5 = try Self.scenario("r5-cancel-starter-oop")
        XCTAssertEqual(r5.unmet(by: Set(Scenario.knownCapabilities).subtracting(["settle"])).map(\.capability), ["settle"])
        XCTAssertEqual(r5.requirements.first { $0.capability == "settle" }?.reason, "evaluateFlag may join an earlier lookup's request at $.steps[3]")
        // The Python example with `settle` taken out of its hello.
        let command = Self.pythonDriverCommand + " | sed -u 's/\"settle\"/\"no-settle\"/'"
        let driver = try await ProcessSDKDriver.launch(command: command)
        XCTAssertFalse(driver.capabilities.contains("settle"))
        let result = await ScenarioRunner(driver: driver, stepTimeoutCap: 2000).run(r5)
        XCTAssertEqual(result.status, .skipped)
        XCTAssertTrue((result.reason ?? "").contains("settle"), result.reason ?? "")
        await driver.shutdown()
        // Without a fault nothing can park a request to join: no `settle` needed.
        var unfaulted = r5
        unfaulted.steps.removeAll { if case .addFault = $0 { return true } else { return false } }
        XCTAssertFalse(unfaulted.requirements.contains { $0.capability == "settle" })
    }

    /// App actions that fetch (`login`, `logout`, `refresh`, `display`) are lookups too: three
    /// concurrent displays under a `timeout` fault, or an app fetch beside an earlier async lookup
    /// of the same client, need `settle` (a fifty-sixth outside tester: a correct SDK without
    /// `settle` failed the shipped three-views file 9 of 10 runs). Actions that do not fetch, and
    /// lookups of another client, do not.
    func testAppLookupsThatMayJoinAnotherRequestNeedSettle() throws {
        let file = Repository.root.appendingPathComponent("scenarios/field-app-three-views-slow-backend-one-request.json").path
        let views = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
        XCTAssertEqual(views.requirements.first { $0.capability == "settle" }?.reason, "3 concurrent app display calls at $.steps[2]")
        func settleReason(_ steps: String) throws -> String? {
            let text = """
            {"format": "experimently-scenario/1", "name": "t", "description": "d", "clients": {"main": {}, "other": {}}, "checks": ["single_flight"],
             "app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab"},
             "steps": [{"fault": {"match": {"path": "/api/v1/tracking/assign"}, "action": {"hold": {}}}, "id": "h"}, \(steps)]}
            """
            return try ScenarioParser.parse(Data(text.utf8), file: "t.json").requirements.first { $0.capability == "settle" }?.reason
        }
        XCTAssertEqual(try settleReason(#"{"app": "refresh", "async": true, "as": "r"}, {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "u9"}"#),
                       "getAssignment may join an earlier lookup's request at $.steps[2]")
        XCTAssertEqual(try settleReason(#"{"do": "evaluateFlag", "flag": "f", "user": "u", "async": true, "as": "e"}, {"app": "display"}"#),
                       "app display may join an earlier lookup's request at $.steps[2]")
        XCTAssertEqual(try settleReason(#"{"app": "login", "user": "u2", "async": true, "as": "l"}, {"app": "refresh"}"#),
                       "app refresh may join an earlier lookup's request at $.steps[2]")
        XCTAssertEqual(try settleReason(#"{"app": "logout", "async": true, "as": "o"}, {"app": "display"}"#),
                       "app display may join an earlier lookup's request at $.steps[2]")
        XCTAssertEqual(try settleReason(#"{"app": "logout", "times": 2}"#), "2 concurrent app logout calls at $.steps[1]")
        // A logout clears the cache first: it joins nothing begun before it, nor does what follows it.
        XCTAssertNil(try settleReason(#"{"app": "display", "async": true, "as": "d"}, {"app": "logout"}, {"app": "display"}"#))
        // Not lookups, or not the same client: nothing to join.
        XCTAssertNil(try settleReason(#"{"app": "refresh", "async": true, "as": "r"}, {"app": "event", "name": "click"}, {"app": "report_state"}"#))
        XCTAssertNil(try settleReason(#"{"app": "refresh", "async": true, "as": "r"}, {"do": "getAssignment", "client": "other", "experiment": "sdk_contract_ab", "user": "u9"}"#))
        XCTAssertNil(try settleReason(#"{"app": "event", "name": "click", "times": 3}"#))
        XCTAssertNil(try settleReason(#"{"app": "refresh"}, {"app": "display"}"#))
    }

    /// Finding 2: `interleaving` never crosses the protocol; the shrunk one-step file (20
    /// concurrent getAssignment with an `interleaving` section) is skipped out of process instead of
    /// failing a correct SDK with a deadlock, and runs as usual without the section.
    func testInterleavingIsNeverRunOutOfProcess() async throws {
        let driver = try await ProcessSDKDriver.launch(command: try Self.swiftDriverCommand())
        XCTAssertFalse(driver.capabilities.contains("interleaving"))
        XCTAssertTrue(driver.capabilities.contains("settle"))
        var scenario = try Self.scenario("s3-shrunk-one-step-interleaving")
        let skipped = await ScenarioRunner(driver: driver).run(scenario)
        XCTAssertEqual(skipped.status, .skipped, skipped.firstFailure?.message ?? skipped.reason ?? "")
        XCTAssertTrue((skipped.reason ?? "").contains("interleaving"), skipped.reason ?? "")
        scenario.interleaving = nil
        for _ in 0..<20 {
            let result = await ScenarioRunner(driver: driver, stepTimeoutCap: 2000).run(scenario)
            XCTAssertEqual(result.status, .passed, result.firstFailure?.message ?? result.reason ?? "")
        }
        await driver.shutdown()
    }

    /// Finding 5: a fully ordered file gives one digest out of process (before: the held track
    /// request's cancellation by `close()` raced the later release, 2 digests in 8 runs).
    func testAFullyOrderedFileGivesOneDigestOutOfProcess() async throws {
        for (command, via) in [(try Self.swiftDriverCommand(), "experimently-driver"), (Self.pythonDriverCommand, "driver.py")] {
            let results = try await run(["s7-close-with-events-and-lookups-in-flight"], times: 20, command: command)
            assertAllPassed(results, via)
            let runs = results.values.flatMap { $0 }
            let digests = Set(runs.map(\.historyDigest))
            // On failure, one canonical history per digest, so the difference can be read.
            let samples = digests.sorted().compactMap { d in runs.first { $0.historyDigest == d } }
                .map { r in "\(r.historyDigest):\n" + r.history.map(\.line).joined(separator: "\n") }
            XCTAssertEqual(digests.count, 1, "\(via): \(digests.sorted())\n" + (digests.count > 1 ? samples.joined(separator: "\n---\n") : ""))
        }
    }

    /// The canonical form leaves out whether an answered request was also seen cancelled, over TCP
    /// and in process (fifth outside tester: in process the shipping SDK cancels an abandoned
    /// request on its session's delegate queue, and 2 digests in 12 runs followed).
    func testCanonicalFormLeavesOutTheCancelledFlagOfAnAnsweredRequestInBothModes() {
        func history(cancelled: Bool) -> [HistoryEvent] {
            var record = RequestRecord.placeholder(seq: 1)
            record.status = 200
            record.cancelled = cancelled
            return [HistoryEvent(index: 0, step: 3, time: 0, kind: .response, client: "main", label: nil, name: nil,
                                 detail: nil, outcome: nil, request: record)]
        }
        let seen = ScenarioExecution.digest(ScenarioExecution.canonical(history(cancelled: true), overTCP: true))
        let unseen = ScenarioExecution.digest(ScenarioExecution.canonical(history(cancelled: false), overTCP: true))
        XCTAssertEqual(seen, unseen)
        XCTAssertEqual(ScenarioExecution.digest(ScenarioExecution.canonical(history(cancelled: true))),
                       ScenarioExecution.digest(ScenarioExecution.canonical(history(cancelled: false))))
    }
    /// Second outside tester, findings 3 and 4: two shipped files (not `history-varies`) give one
    /// digest out of process. Before: the end of a request that got no answer landed before or
    /// after the next `invoke` (3-5 digests in 15-20 runs through experimently-driver), and
    /// driver.py counted a cancelled caller as still waiting until its thread ran (2 digests in 20).
    func testUnansweredEndsAndCancelledWaitersGiveOneDigestOutOfProcess() async throws {
        let cases = [("field-timeout-after-backend-processed-assign", try Self.swiftDriverCommand(), "experimently-driver"),
                     ("field-strict-mode-unmount-cancels", Self.pythonDriverCommand, "driver.py")]
        for (name, command, via) in cases {
            let file = Repository.root.appendingPathComponent("scenarios/\(name).json").path
            let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
            let driver = try await ProcessSDKDriver.launch(command: command)
            var digests: [String: Int] = [:]
            for _ in 0..<20 {
                let result = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(result.status, .passed, "\(via) \(name): \(result.firstFailure?.message ?? result.reason ?? "")")
                digests[result.historyDigest, default: 0] += 1
            }
            await driver.shutdown()
            XCTAssertEqual(digests.count, 1, "\(via) \(name): \(digests)")
        }
    }

    /// Over TCP the end of an unanswered request goes to the end of the canonical history, so its
    /// place before or after a later `invoke` does not change the digest; in process it stays.
    func testCanonicalFormOverTCPMovesTheEndOfAnUnansweredRequest() {
        var record = RequestRecord.placeholder(seq: 1)
        record.cancelled = true
        let end = HistoryEvent(index: 0, step: 7, time: 5.1, kind: .response, client: "main", label: nil, name: nil,
                               detail: nil, outcome: nil, request: record)
        let invoke = HistoryEvent(index: 0, step: 10, time: 5.1, kind: .invoke, client: "main", label: "op1",
                                  name: "getAssignment", detail: nil, outcome: nil, request: nil)
        let early = ScenarioExecution.digest(ScenarioExecution.canonical([end, invoke], overTCP: true))
        let late = ScenarioExecution.digest(ScenarioExecution.canonical([invoke, end], overTCP: true))
        XCTAssertEqual(early, late)
        XCTAssertNotEqual(ScenarioExecution.digest(ScenarioExecution.canonical([end, invoke])),
                          ScenarioExecution.digest(ScenarioExecution.canonical([invoke, end])))
    }
    /// Second outside tester, finding 2: an order that awaits an app action before the release
    /// that frees it is decided infeasible at once out of process too, when the adapter answers
    /// `settle` (before: it waited out the 5 s step limit and failed as a hang). The message names
    /// the deadlock of the order and no rule of the SDK.
    func testInfeasibleAppOrderIsDecidedAtOnceOutOfProcess() async throws {
        let scenario = try Self.scenario("a2-app-order-awaits-before-release")
        for (command, via) in [(try Self.swiftDriverCommand(), "experimently-driver"), (Self.pythonDriverCommand, "driver.py")] {
            let driver = try await ProcessSDKDriver.launch(command: command)
            let result = await ScenarioRunner(driver: driver).run(scenario)
            await driver.shutdown()
            let message = result.firstFailure?.message ?? ""
            XCTAssertEqual(result.status, .failed, via)
            XCTAssertTrue(result.infeasible, "\(via): \(message)")
            XCTAssertTrue(message.contains("waits for what only a later step provides (step 5 release init-held)"), "\(via): \(message)")
            XCTAssertFalse(message.contains("broken rule"), "\(via): \(message)")
            XCTAssertLessThan(result.durationMilliseconds, 2000, via)
        }
    }
    /// Third outside tester, finding 2: an app lookup that begins after a clear of its client (a
    /// runner `clearCache`, or the app's own logout) never counts as joined to a request received
    /// before the clear. Before, it was taken as settled (or inert) before its own request was
    /// sent: through both adapters the correct SDK failed "waits for what only a later step
    /// provides" in up to 30 of 30 runs. A variant that does join the old request is still caught.
    func testAnAppLookupAfterAClearNeverJoinsARequestFromBeforeIt() async throws {
        let names = ["t3-a3-display-after-clear-while-predclear-held", "t3-a5-relogin-display-while-old-display-held"]
        for (command, via) in [(try Self.swiftDriverCommand(), "experimently-driver"), (Self.pythonDriverCommand, "driver.py")] {
            assertAllPassed(try await run(names, times: 10, command: command), via)
        }
        for name in names {
            let scenario = try Self.scenario(name)
            let shipping = await ScenarioRunner().run(scenario)
            XCTAssertEqual(shipping.status, .passed, "\(name): \(shipping.firstFailure?.message ?? "")")
            let broken = await ScenarioRunner(driver: MutantRun.driver(.clearKeepsInFlight), stepTimeoutCap: 500).run(scenario)
            XCTAssertEqual(broken.status, .failed, "\(name): clear-keeps-in-flight passed")
        }
    }
    /// Third outside tester, finding 13: seven requests of one client held at once are all sent
    /// through experimently-driver (before, URLSession's 6 connections per host kept the 7th back
    /// and the correct SDK failed "not quiescent", sometimes named a section-5 defect).
    func testSevenHeldRequestsOfOneClientAreAllSentOutOfProcess() async throws {
        let results = try await run(["t3-seven-held-lookups-one-client"], times: 3, command: try Self.swiftDriverCommand())
        assertAllPassed(results, "experimently-driver")
    }
    /// Third outside tester, finding 12: on a virtual clock the SDK's request never ends on the
    /// wall clock, out of process as in process (before, libcurl honoured the request's
    /// `timeoutInterval` and ended it with -1001 after 1 s of wall time at virtual time 0, so the
    /// two gave different verdicts).
    func testAVirtualClockSDKNeverTimesOutOnTheWallClock() async throws {
        let results = try await run(["t3-no-wall-clock-timeout-with-virtual-clock"], times: 1, command: try Self.swiftDriverCommand())
        let inProcess = await ScenarioRunner(stepTimeoutCap: 2000).run(try Self.scenario("t3-no-wall-clock-timeout-with-virtual-clock"))
        // The synchronous step parked on the hold is stuck (only the later release can end it:
        // judged at once since stop 23, as an `await` is), never ended by a wall-clock timeout.
        for r in (results.values.first ?? []) + [inProcess] {
            XCTAssertEqual(r.status, .failed)
            XCTAssertTrue((r.firstFailure?.message ?? "").contains("waits for what only a later step provides (step 2 release h)"), r.firstFailure?.message ?? "")
            XCTAssertFalse(r.history.contains { $0.kind == .complete && $0.outcome?["code"] == .number(-1001) }, "no -1001 at virtual time 0")
        }
    }
    /// Third outside tester, finding 3: an app lookup joined to a shared request whose starter
    /// is cancelled afterwards stays settled on it (cancelling one of two waiters keeps the
    /// request, CONTRACT.md section 5.3). Before, nothing "owned" the request once the starter
    /// finished, and a correct SDK failed "not quiescent" every run, in process and out. The
    /// no-single-flight variant is still caught.
    func testAnAppLookupJoinedBeforeItsStarterWasCancelledStaysSettled() async throws {
        let names = ["t3-a6-display-joined-to-cancelled-runner-call", "t3-a9-strict-mode-two-displays-one-unmounts"]
        for name in names {
            let scenario = try Self.scenario(name)
            let shipping = await ScenarioRunner(stepTimeoutCap: 2000).run(scenario)
            XCTAssertEqual(shipping.status, .passed, "\(name): \(shipping.firstFailure?.message ?? "")")
            let broken = await ScenarioRunner(driver: MutantRun.driver(.noSingleFlight), stepTimeoutCap: 2000).run(scenario)
            XCTAssertEqual(broken.status, .failed, "\(name): no-single-flight passed")
        }
        for (command, via) in [(try Self.swiftDriverCommand(), "experimently-driver"), (Self.pythonDriverCommand, "driver.py")] {
            assertAllPassed(try await run(names, times: 5, command: command), via)
        }
    }
    /// Third outside tester, finding 6: after the only caller of a held request is cancelled, the
    /// next call for the same key is not settled on that request: it waits for its own (before,
    /// out of process it was judged infeasible before its own request arrived, 8-12 of 30 runs
    /// through experimently-driver). The variant that keeps the request is still caught.
    func testANewCallAfterTheOnlyCallerWasCancelledWaitsForItsOwnRequest() async throws {
        let name = "t3-new-call-after-cancel-sees-old-request-parked"
        for (command, via) in [(try Self.swiftDriverCommand(), "experimently-driver"), (Self.pythonDriverCommand, "driver.py")] {
            assertAllPassed(try await run([name], times: 15, command: command), via)
        }
        let broken = await ScenarioRunner(driver: MutantRun.driver(.cancelKeepsRequest), stepTimeoutCap: 500).run(try Self.scenario(name))
        XCTAssertEqual(broken.status, .failed, "cancel-keeps-request passed")
    }
    /// Third outside tester, finding 8: exploring a cancel-then-release race in process, an order
    /// that moves the release before the wait for the cancelled request is infeasible (the answer
    /// and the SDK's cancellation race), never a failure of the correct SDK (before: 1-3 of 120
    /// orders failed, and their written schedules passed). The variant that keeps the request is
    /// still caught.
    func testACancellationRacedByAnEarlierReleaseIsInfeasible() async throws {
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/oop-races/t3-explore-new-call-after-cancel.json").path
        let root = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
        let settings = try XCTUnwrap(Explorer.settings(of: root, file: file))
        for _ in 0..<3 {
            let report = await Explorer.explore(root, file: file, settings: settings, seed: 0,
                                                runner: ScenarioRunner(keepsHistory: false), reference: nil, concurrency: 2)
            XCTAssertEqual(report.failed, 0, "\(report.firstFailure.map { "\($0)" } ?? "")")
        }
        let broken = await Explorer.explore(root, file: file, settings: settings, seed: 0,
                                            runner: ScenarioRunner(driver: MutantRun.driver(.cancelKeepsRequest), stepTimeoutCap: 300, keepsHistory: false),
                                            reference: ScenarioRunner(keepsHistory: false), concurrency: 2)
        XCTAssertGreaterThan(broken.failed, 0)
    }

    /// A third outside tester, findings 10 and 11: exploring an app race in process, orders that
    /// await a held call before the release that frees it are infeasible, not SDK failures. An
    /// app call's own requests counted a later call's answered request for the same user and key
    /// (a8: 3 of 24 orders failed the shipping SDK, 144 of 720 in the tester's wider file), and a
    /// runner operation raced by an app action was never inert (a11: 3 of 6). Both files still
    /// fail the variant that keeps its in-flight requests across a clear.
    func testExploringAnAppRaceCountsAwaitsBeforeTheReleaseInfeasible() async throws {
        for name in ["t3-a8-explore-relogin-display", "t3-a11-explore-display-after-clear"] {
            let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/oop-races/\(name).json").path
            let root = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
            let settings = try XCTUnwrap(Explorer.settings(of: root, file: file))
            let report = await Explorer.explore(root, file: file, settings: settings, seed: 0,
                                                runner: ScenarioRunner(keepsHistory: false), reference: nil, concurrency: 2)
            XCTAssertEqual(report.failed, 0, "\(name): \(report.firstFailure.map { "\($0)" } ?? "")")
            XCTAssertGreaterThan(report.infeasible, 0, name)
            let broken = await Explorer.explore(root, file: file, settings: settings, seed: 0,
                                                runner: ScenarioRunner(driver: MutantRun.driver(.clearKeepsInFlight), stepTimeoutCap: 300, keepsHistory: false),
                                                reference: ScenarioRunner(keepsHistory: false), concurrency: 2)
            XCTAssertGreaterThan(broken.failed, 0, name)
        }
    }

    /// A sibling of findings 10 and 11: in process, any clock wakeup since an operation started
    /// kept it from being inert, a delay of another request included, so exploring a file that
    /// advances past that delay failed the shipping SDK on 3 of 24 orders ("did not finish within
    /// 5000 ms") that await a held call before its release. Now only a woken SDK timer the runner
    /// cannot see (its task prefers no executor) counts.
    func testAWakeupOfAnotherRequestsDelayLeavesAHeldCallInert() async throws {
        for (report, which) in try await exploreWithCorrectSDKs("t4-unrelated-delay-wakes-during-held-call") {
            XCTAssertEqual(report.failed, 0, "\(which): \(report.firstFailure.map { "\($0)" } ?? "")")
            XCTAssertGreaterThan(report.infeasible, 0, which)
        }
    }

    /// Explores fixture `name` in process with the shipping SDK and the faithful variant.
    private func exploreWithCorrectSDKs(_ name: String) async throws -> [(report: Explorer.Report, which: String)] {
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/oop-races/\(name).json").path
        let root = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
        let settings = try XCTUnwrap(Explorer.settings(of: root, file: file))
        var out: [(report: Explorer.Report, which: String)] = []
        for (driver, which) in [(SwiftSDKDriver(), "shipping"), (MutantRun.driver(nil), "faithful")] {
            out.append((await Explorer.explore(root, file: file, settings: settings, seed: 0,
                                               runner: ScenarioRunner(driver: driver, keepsHistory: false), reference: nil, concurrency: 2), which))
        }
        return out
    }

    /// One `advance` past a mock delay (2 s) and the SDK's deadline (5 s) woke both sleepers at
    /// once, and the SDK's deadline won the race in most runs (10 of 10 failed in process): the
    /// runner now moves one instant at a time, each settled before the next, the client's
    /// deadline first at a tie. In and out of process, every run; the variant without its own
    /// deadline still fails it.
    func testOneAdvanceDeliversAnAnswerDueBeforeTheDeadline() async throws {
        let name = "t4-answer-due-before-deadline-in-one-advance"
        let scenario = try Self.scenario(name)
        for (driver, which) in [(SwiftSDKDriver(), "shipping"), (MutantRun.driver(nil), "faithful")] {
            for _ in 0..<10 {
                let result = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(result.status, .passed, "\(which): \(result.firstFailure?.message ?? "")")
            }
        }
        let broken = await ScenarioRunner(driver: MutantRun.driver(.noOwnDeadline), stepTimeoutCap: 500).run(scenario)
        XCTAssertEqual(broken.status, .failed)
        for (command, via) in [(try Self.swiftDriverCommand(), "experimently-driver"), (Self.pythonDriverCommand, "driver.py")] {
            assertAllPassed(try await run([name], times: 3, command: command), via)
        }
    }

    /// A fourth outside tester, finding 1 (a regression of this stop): an app lookup joined to a
    /// held request, then at once a `clearCache` step. The call's start and the clear were
    /// ordered by history event counts, equal here (a joined call records no event), so the
    /// clear counted as before the call and the call was never settled: "not quiescent" every
    /// run, in process and out. Starts and clears are now ordered by the recorder's ordinals.
    /// The files still catch the variants that write a detached answer after the clear.
    func testAnAppLookupJoinedRightBeforeAClearStaysSettled() async throws {
        let names = ["t4-f2-display-joined-to-runner-request-then-clearcache", "t4-f2f-second-display-joins-then-clearcache"]
        for name in names {
            let scenario = try Self.scenario(name)
            for (driver, which) in [(SwiftSDKDriver(), "shipping"), (MutantRun.driver(nil), "faithful")] {
                let result = await ScenarioRunner(driver: driver, stepTimeoutCap: 2000).run(scenario)
                XCTAssertEqual(result.status, .passed, "\(name) \(which): \(result.firstFailure?.message ?? "")")
            }
            let broken = await ScenarioRunner(driver: MutantRun.driver(.staleWriteAfterClear), stepTimeoutCap: 2000).run(scenario)
            XCTAssertEqual(broken.status, .failed, name)
        }
        for (command, via) in [(try Self.swiftDriverCommand(), "experimently-driver"), (Self.pythonDriverCommand, "driver.py")] {
            assertAllPassed(try await run(names, times: 3, command: command), via)
        }
    }

    /// A fourth outside tester, finding 2: an await before the release of a held operation's
    /// request counted as the SDK's failure (after the 5 s step limit) whenever the operation's
    /// own requests included an answered one: an earlier lookup's for the same user and key (a
    /// TTL expiry), any earlier request of a tracking call's user, the batch's answered first
    /// chunk, the other copy's answered track. In process every such order is infeasible now,
    /// for the shipping SDK and the faithful variant.
    func testAnAnsweredRequestOfItsOwnNoLongerKeepsAHeldOperationFromBeingInert() async throws {
        let names = ["t4-t10-explore-track-after-earlier-lookup", "t4-t11-explore-lookup-after-ttl-expiry", "t4-t5b-explore-trackbatch-second-chunk",
                     "t4-t6-explore-times2-track-one-held", "t4-t7-explore-app-event-times2-one-held"]
        for name in names {
            for (report, which) in try await exploreWithCorrectSDKs(name) {
                XCTAssertEqual(report.failed, 0, "\(name) \(which): \(report.firstFailure.map { "\($0)" } ?? "")")
                XCTAssertEqual(report.infeasible, 1, "\(name) \(which)")
            }
        }
    }

    /// A fourth outside tester, finding 3: a request its only caller gave up on (its own deadline,
    /// a cancel) and the mock answered later. `no_stale_write` demanded the late answer cached
    /// whenever the SDK's cancellation of the abandoned task reached the mock after the release
    /// (thread timing: 9 of 30 runs in process), though the file's own assertion that nothing is
    /// cached passed in the same run. Such an answer may now be cached or not.
    func testALateAnswerNobodyWaitsForMayBeCachedOrNot() async throws {
        for name in ["t4-e5-runner-assignment-held-past-own-deadline-then-released", "t4-e7-runner-cancelled-then-released"] {
            let scenario = try Self.scenario(name)
            for (driver, which) in [(SwiftSDKDriver(), "shipping"), (MutantRun.driver(nil), "faithful")] {
                for _ in 0..<10 {
                    let result = await ScenarioRunner(driver: driver, stepTimeoutCap: 2000).run(scenario)
                    XCTAssertEqual(result.status, .passed, "\(name) \(which): \(result.firstFailure?.message ?? "")")
                }
            }
        }
    }

    /// A fourth outside tester, finding 6: a lookup begun after the SDK's own deadline had
    /// abandoned the only earlier request for its key was taken as joined to that request while
    /// the mock had not yet seen its connection close, so a correct SDK failed "waits for what
    /// only a later step provides" (experimently-driver 6 of 40). A request whose every caller had
    /// finished when the lookup began is never its shared request now; and experimently-driver's
    /// SDK tasks prefer the scope's executor, so its `settle` sees a deadline a clock move woke.
    func testANewLookupAfterTheDeadlineOfTheOnlyEarlierOneWaitsForItsOwnRequest() async throws {
        let names = ["t4-e10-new-call-after-deadline-abandoned-request", "t4-e12-display-after-deadline-abandoned-request"]
        assertAllPassed(try await run(names, times: 15, command: try Self.swiftDriverCommand()), "experimently-driver")
        assertAllPassed(try await run(names, times: 5, command: Self.pythonDriverCommand), "driver.py")
        for name in names {
            let result = await ScenarioRunner(stepTimeoutCap: 2000).run(try Self.scenario(name))
            XCTAssertEqual(result.status, .passed, "\(name): \(result.firstFailure?.message ?? "")")
        }
    }

    /// A fourth outside tester, finding 5: the defects of section 5 met through the reference app
    /// are named as they are for runner operations. A display whose assignment stays parked past
    /// the client's timeout blamed the scenario ("deadlocks ... move that step earlier"); an app
    /// lookup that joined a request from before a clear gave a bare "not quiescent". The correct
    /// SDK passes the first file; the second is a schedule that only fails a broken SDK.
    func testSectionFiveDefectsThroughTheAppAreNamed() async throws {
        let deadline = try Self.scenario("t4-e4-app-display-held-past-own-deadline")
        let passed = await ScenarioRunner(stepTimeoutCap: 2000).run(deadline)
        XCTAssertEqual(passed.status, .passed, passed.firstFailure?.message ?? "")
        let noDeadline = await ScenarioRunner(driver: MutantRun.driver(.noOwnDeadline), stepTimeoutCap: 2000).run(deadline)
        let message = noDeadline.firstFailure?.message ?? ""
        XCTAssertTrue(message.contains("defect 6") && message.contains("app action 'd'"), message)
        XCTAssertFalse(message.contains("deadlocks"), message)
        let kept = await ScenarioRunner(driver: MutantRun.driver(.clearKeepsInFlight), stepTimeoutCap: 500).run(try Self.scenario("t4-e3-clear-keeps-in-flight-schedule"))
        let keptMessage = kept.firstFailure?.message ?? ""
        XCTAssertTrue(keptMessage.contains("kept its in-flight table across the clear"), keptMessage)
    }

    /// A fifth outside tester: out of process an `advance` stopped only where the mock had
    /// something due, so the SDK's own deadline inside it fired at the end (a refetch it made
    /// then met the mock at the wrong time: k1, k2 failed every run through both adapters); and
    /// at a tie the caller's failure could be recorded after the mock's answer (`no_stale_write`
    /// failed 6 of 20). The adapters now say their next timer (`next` in the `clock` reply), the
    /// runner stops there too, and it settles after each move of the adapter's clock.
    func testAnAdvanceStopsAtTheAdaptersOwnDeadlines() async throws {
        let names = ["t5-k1-request-sent-at-sdk-deadline-instant-meets-outage-window", "t5-k2-refetch-after-sdk-deadline-inside-one-advance"]
        for (command, via) in [(try Self.swiftDriverCommand(), "experimently-driver"), (Self.pythonDriverCommand, "driver.py")] {
            assertAllPassed(try await run(names, times: 3, command: command), via)
        }
        assertAllPassed(try await run(["t5-t4x-tie-with-no-stale-write"], times: 10, command: try Self.swiftDriverCommand()), "experimently-driver")
        for name in names + ["t5-t4x-tie-with-no-stale-write"] {
            let result = await ScenarioRunner(stepTimeoutCap: 2000).run(try Self.scenario(name))
            XCTAssertEqual(result.status, .passed, "\(name): \(result.firstFailure?.message ?? "")")
        }
    }
}
