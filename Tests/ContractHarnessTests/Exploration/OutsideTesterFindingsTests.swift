import XCTest
import Foundation
import ExperimentlyMock
import ExperimentlyMutants
@testable import ContractHarness

/// Wrong verdicts an outside tester found with field-race scenarios (findings 1, 3, 7, 8), each
/// shown both ways: the broken SDK (or broken order) is caught, the correct SDK is never failed.
final class OutsideTesterFindingsTests: XCTestCase {
    static func scenario(_ json: String, file: String = "inline.json") throws -> Scenario {
        try ScenarioParser.parse(Data(json.utf8), file: file)
    }

    static func failures(_ r: ScenarioResult) -> String {
        "\(r.checks.filter { !$0.passed }.map { "\($0.name): \($0.message ?? "")" }) \(r.reason ?? "")"
    }

    // MARK: 1. fan_out judges the reference app's events

    /// The app's unkeyed business event is a trackWithStatus: fan_out catches a variant fanning
    /// it out to an assigned:false answer (defect 4) or to another user's entries (section 4);
    /// the shipping SDK and the faithful variant pass. Before, the app event's window absorbed
    /// every batch and both variants passed.
    func testFanOutJudgesTheAppsEventCalls() async throws {
        let cases: [(String, Defect)] = [("app-event-unkeyed-never-fanned-out-to-holdout", .fanOutToIneligible),
                                         ("app-event-after-login-fans-out-to-new-identity-only", .fanOutToOtherUsers)]
        for (name, defect) in cases {
            let s = try AppStepsTests.load(name)
            XCTAssertNil(s.steps.first { if case .sdk = $0 { return true } else { return false } }, "\(name): app steps only")
            for driver in [SwiftSDKDriver() as any SDKDriver, MutantRun.driver(nil)] {
                let r = await ScenarioRunner(driver: driver).run(s)
                XCTAssertEqual(r.status, .passed, "\(name) on \(driver.sdkName): \(Self.failures(r))")
            }
            let broken = await ScenarioRunner(driver: MutantRun.driver(defect)).run(s)
            let fanOut = try XCTUnwrap(broken.checks.first { $0.name == "fan_out" })
            XCTAssertFalse(fanOut.passed, "\(name) on \(defect.rawValue)")
            XCTAssertTrue(fanOut.message?.contains("app call") ?? false, fanOut.message ?? "")
        }
    }

    /// The app's lookups are judged by the fallback checks through the outcome of their
    /// `returned` marker: a variant serving the persisted value on 404, or another user's
    /// persisted value on 502, to the app's refresh fails the named check (the assertion on the
    /// store dropped, so the check alone judges); the shipping SDK and the faithful variant pass.
    /// Before, only plain SDK steps were judged and both variants passed.
    func testFallbackChecksJudgeTheAppsLookups() async throws {
        let cases: [(String, Defect, String)] = [("app-flag-404-after-ttl-never-served-from-store", .persistedValueOn404, "no_fallback_on_404"),
                                                 ("app-login-flag-502-never-served-another-users-store", .otherUsersPersistedValue, "offline_fallback")]
        for (name, defect, check) in cases {
            var s = try AppStepsTests.load(name)
            s.steps.removeAll { if case .expect = $0 { return true } else { return false } }
            for driver in [SwiftSDKDriver() as any SDKDriver, MutantRun.driver(nil)] {
                let r = await ScenarioRunner(driver: driver).run(s)
                XCTAssertEqual(r.status, .passed, "\(name) on \(driver.sdkName): \(Self.failures(r))")
            }
            let broken = await ScenarioRunner(driver: MutantRun.driver(defect)).run(s)
            let judged = try XCTUnwrap(broken.checks.first { $0.name == check })
            XCTAssertFalse(judged.passed, "\(name) on \(defect.rawValue): \(Self.failures(broken))")
            XCTAssertTrue(judged.message?.contains("(app.refresh: evaluateFlag as") ?? false, judged.message ?? "")
        }
    }

    /// The variant the app shows from an assignment is the SDK's answer: stickiness reads it. The
    /// same run with the shown variant changed (an SDK answering the app another variant than it
    /// cached) fails stickiness; as recorded, it passes.
    func testStickinessReadsTheVariantTheAppShows() async throws {
        let s = try AppStepsTests.load("app-assigned-treatment-shown-with-exposure-before-event")
        let r = await ScenarioRunner().run(s)
        XCTAssertEqual(r.status, .passed, Self.failures(r))
        let port = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "x", clients: ["main"])
        func context(_ h: [HistoryEvent]) -> CheckContext {
            CheckContext(scenario: s, history: h, clients: [:], port: port, driver: SwiftSDKDriver(), app: nil)
        }
        XCTAssertEqual(Checks.stickiness(context(r.events)).map(\.0), [])
        let shown = try XCTUnwrap(r.events.firstIndex { $0.kind == .marker && $0.name == "shown" && $0.detail?["layout_source"] == .string("assignment") })
        var changed = r.events
        guard case .object(var o)? = changed[shown].detail, case .string(let variant)? = o["variant"] else { return XCTFail("no variant") }
        o["variant"] = .string(variant == "control" ? "treatment" : "control")
        changed[shown].detail = .object(o)
        XCTAssertTrue(Checks.stickiness(context(changed)).contains { $0.0.contains("then") }, "\(Checks.stickiness(context(changed)))")
    }

    // MARK: 3. infeasible orders with app actions pending

    /// An await only a later release can satisfy, with two app actions pending (an init refresh
    /// held, a login waiting its turn): infeasible, decided at quiescence, not a failure at the
    /// step limit (before: "did not finish within 5000 ms", not infeasible).
    static let awaitBeforeReleaseWithApp = #"""
    {"format": "experimently-scenario/1", "name": "r1", "description": "d",
     "app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab", "user": "anon-1"},
     "steps": [
      {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "query": {"user_id": "anon-1"}}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "init-held"},
      {"app": "refresh", "as": "init", "async": true},
      {"wait_for": {"held": "init-held", "count": 1}},
      {"app": "login", "user": "user-2", "as": "identify", "async": true},
      {"await": "init"},
      {"release": "init-held"},
      {"await": "identify"}],
     "checks": ["no_stale_write"]}
    """#

    /// A wait_for a held request only a later release can bring, an app display held meanwhile.
    static let waitForBeforeProviderWithApp = #"""
    {"format": "experimently-scenario/1", "name": "r3", "description": "d",
     "app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab", "user": "user-1"},
     "steps": [
      {"app": "refresh"},
      {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "a"},
      {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "query": {"user_id": "anon-2"}}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "f"},
      {"app": "display", "as": "v", "async": true},
      {"wait_for": {"held": "f", "count": 1}},
      {"app": "logout", "as": "lo", "async": true},
      {"release": "a"},
      {"release": "f"},
      {"await": "v"},
      {"await": "lo"}],
     "checks": ["no_stale_write"]}
    """#

    func testAWaitOnlyALaterStepCanSatisfyIsInfeasibleWithAppActionsPending() async throws {
        for json in [Self.awaitBeforeReleaseWithApp, Self.waitForBeforeProviderWithApp] {
            let r = await ScenarioRunner().run(try Self.scenario(json))
            XCTAssertTrue(r.infeasible, Self.failures(r))
            // Which later step it names is finding 9's (the release, or the step that sends the request).
            XCTAssertTrue(Self.failures(r).contains("waits for what only a later step provides (step "), Self.failures(r))
            XCTAssertFalse(Self.failures(r).contains("did not finish within"), Self.failures(r))
        }
    }

    /// Explored on the shipping SDK, the login-racing-init file has no failing order: the orders
    /// awaiting before the release are infeasible (before: 2 failed, exit 1 on the correct SDK).
    func testExploringTheAppRaceFailsNoOrderOfTheCorrectSDK() async throws {
        let path = Repository.root.appendingPathComponent("scenarios/app-explore-login-racing-held-init-every-order.json").path
        let root = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: path)), file: path)
        let settings = try XCTUnwrap(try Explorer.settings(of: root, file: path))
        let report = await Explorer.explore(root, file: path, settings: settings, seed: 0, runner: ScenarioRunner(keepsHistory: false))
        XCTAssertEqual(report.schedules.count, 24)
        XCTAssertEqual(report.failed, 0, "\(String(describing: report.firstFailure?.result.firstFailure))")
        XCTAssertGreaterThan(report.infeasible, 0)
    }

    /// The other way: with app actions pending and no later step that could free the awaited
    /// one (the release dropped), the await can never finish: a failure, not infeasible.
    /// An await of an operation past its client's timeout, on a request parked in the mock, is
    /// the SDK's missing deadline (CONTRACT.md section 5, defect 6), not an infeasible order,
    /// although a later step (`release never`) could free the request: the variant without its own
    /// deadline fails naming defect 6 and the order is not counted infeasible (before, the message
    /// blamed the scenario's order of steps, and explore would have skipped such an order). The
    /// shipping SDK ends the operation itself and passes.
    func testAnAwaitPastTheClientsTimeoutBlamesTheMissingDeadlineNotTheOrder() async throws {
        let file = Repository.root.appendingPathComponent("scenarios/defect-6-own-deadline-times-out.json").path
        let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
        let broken = await ScenarioRunner(driver: MutantRun.driver(.noOwnDeadline)).run(scenario)
        XCTAssertEqual(broken.status, .failed)
        XCTAssertFalse(broken.infeasible, Self.failures(broken))
        let message = broken.firstFailure?.message ?? ""
        XCTAssertTrue(message.contains("past its client's timeout of 3.0 s") && message.contains("defect 6"), message)
        XCTAssertFalse(message.contains("waits for what only a later step provides"), message)
        let shipping = await ScenarioRunner().run(scenario)
        XCTAssertEqual(shipping.status, .passed, Self.failures(shipping))
    }

    func testAnAwaitNothingLaterCanFreeStillFailsWithAppActionsPending() async throws {
        let noRelease = Self.awaitBeforeReleaseWithApp.replacingOccurrences(of: #"{"release": "init-held"},"#, with: "")
        XCTAssertNotEqual(noRelease, Self.awaitBeforeReleaseWithApp)
        let r = await ScenarioRunner().run(try Self.scenario(noRelease))
        XCTAssertFalse(r.infeasible, Self.failures(r))
        XCTAssertEqual(r.status, .failed)
        XCTAssertTrue(Self.failures(r).contains("can never"), Self.failures(r))
    }

    /// A fault moved after the step that sends the request it would hold: the wait for the held
    /// request is infeasible (the request came before the fault existed). A wait for a fault
    /// that no earlier request matched still fails: an SDK that never sends it is caught.
    func testAFaultAddedAfterItsRequestMakesTheWaitInfeasibleOtherwiseItFails() async throws {
        let moved = #"""
        {"format": "experimently-scenario/1", "name": "moved", "description": "d", "steps": [
         {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true},
         {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "h"},
         {"wait_for": {"held": "h", "count": 1}},
         {"release": "h"},
         {"await": "a"}], "checks": ["single_flight"]}
        """#
        let r = await ScenarioRunner().run(try Self.scenario(moved))
        XCTAssertTrue(r.infeasible, Self.failures(r))
        XCTAssertTrue(Self.failures(r).contains("was received before the fault was added (step 1)"), Self.failures(r))
        // The fault matches user-2's request only; none was sent: nothing to blame on the order.
        let never = moved.replacingOccurrences(of: #""match": {"path": "/api/v1/tracking/assign"}"#,
                                               with: #""match": {"path": "/api/v1/tracking/assign", "body": {"user_id": "user-2"}}"#)
        let n = await ScenarioRunner().run(try Self.scenario(never))
        XCTAssertFalse(n.infeasible, Self.failures(n))
        XCTAssertEqual(n.status, .failed)
        XCTAssertTrue(Self.failures(n).contains("can never"), Self.failures(n))
    }

    /// The shrinker keeps a candidate only when it fails for the original kind of reason: a step
    /// that can never finish is not the SDK failure being shrunk.
    func testStructuralFailuresAreToldApartForTheShrinker() {
        XCTAssertTrue(Explorer.structural("operation 'a' can never finish: it waits on parked requests"))
        XCTAssertTrue(Explorer.structural("x waits for what only a later step provides (step 3 release h)"))
        XCTAssertFalse(Explorer.structural("op3: expected variant_name control, got treatment"))
        XCTAssertFalse(Explorer.structural(nil))
    }

    // MARK: 7. an invalid explore section is an error in every command

    func testAnInvalidExploreSectionIsMalformedInAPlainRun() throws {
        let base = #"""
        {"format": "experimently-scenario/1", "name": "x", "description": "d", "steps": [
         {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1"},
         {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2"}], "checks": ["single_flight"], "explore": EXPLORE}
        """#
        for (explore, path) in [(#"{"steps": [0, 9]}"#, "$.explore.steps[1]"), (#"{"steps": [1, 1]}"#, "$.explore.steps[1]"),
                                (#"{"steps": [0, 1], "exhaustiv": true}"#, "$.explore")] {
            XCTAssertThrowsError(try Self.scenario(base.replacingOccurrences(of: "EXPLORE", with: explore))) { error in
                XCTAssertTrue("\(error)".contains(path), "\(explore): \(error)")
            }
        }
        XCTAssertNoThrow(try Self.scenario(base.replacingOccurrences(of: "EXPLORE", with: #"{"steps": [0, 1]}"#)))
    }

    // MARK: 8. exhaustive means every order

    func testExhaustiveFiveStepsRunsAll120OrdersUnlessABoundIsGiven() throws {
        func settings(_ explore: String) throws -> Explorer.Settings {
            let root = try JSONValue.parse(Data(#"{"steps": [{}, {}, {}, {}, {}, {}], "explore": \#(explore)}"#.utf8), file: "x")
            return try XCTUnwrap(try Explorer.settings(of: root, file: "x"))
        }
        let every = try settings(#"{"steps": [1, 2, 3, 4, 5], "exhaustive": true}"#)
        let all = Explorer.schedules(of: every.steps, max: every.bound, exhaustive: every.exhaustive, seed: 0)
        XCTAssertEqual(all.orders.count, 120)
        XCTAssertEqual(Set(all.orders).count, 120)
        XCTAssertTrue(all.complete)
        // An explicit bound is honoured, and the exploration says it is incomplete.
        let bounded = try settings(#"{"steps": [1, 2, 3, 4, 5], "exhaustive": true, "max_schedules": 100}"#)
        let first = Explorer.schedules(of: bounded.steps, max: bounded.bound, exhaustive: bounded.exhaustive, seed: 0)
        XCTAssertEqual(first.orders.count, 100)
        XCTAssertFalse(first.complete)
        // Without exhaustive the default of 100 samples 100 of the 120 orders.
        let sampled = try settings(#"{"steps": [1, 2, 3, 4, 5]}"#)
        XCTAssertEqual(sampled.bound, 100)
    }
}
