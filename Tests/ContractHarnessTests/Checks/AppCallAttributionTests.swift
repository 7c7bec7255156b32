import XCTest
import Foundation
import ExperimentlyMock
import ExperimentlyMutants
@testable import ContractHarness

/// The app checks attribute each request of an app's client to the app call that sent it
/// (`AppCalls`, issue 11 section 3): an async display or event racing a logout or login of the
/// same app is judged by the identity and revision it acted at, never by where its request falls
/// among the other action's markers; what an app or SDK shows, tracks or requests for a
/// logged-out identity after the logout still fails.
final class AppCallAttributionTests: XCTestCase {
    static let races = ["app-display-racing-logout-judged-by-its-own-call", "app-event-racing-logout-judged-by-its-own-call",
                        "app-display-racing-login-judged-by-its-own-call", "app-event-racing-login-judged-by-its-own-call"]

    func context(_ scenario: Scenario, _ history: [HistoryEvent]) throws -> CheckContext {
        let port = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "x", clients: ["main"])
        return CheckContext(scenario: scenario, history: history, clients: [:], port: port, driver: SwiftSDKDriver(), app: nil)
    }

    /// `history` with the event at `from` moved to just after the event at `after`, indices renumbered.
    static func move(_ history: [HistoryEvent], from: Int, after: Int) -> [HistoryEvent] {
        var events = history
        let moved = events.remove(at: from)
        events.insert(moved, at: after)   // `after` shifted down by one when it followed `from`
        for i in events.indices { events[i].index = i }
        return events
    }

    func testTheRaceScenariosPassOnBothSDKs() async throws {
        for name in Self.races {
            let scenario = try AppStepsTests.load(name)
            for driver in [SwiftSDKDriver() as any SDKDriver, MutantRun.driver(nil)] {
                let r = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(r.status, .passed, "\(name): \(AppStepsTests.failures(r))")
            }
        }
    }

    /// The display's exposure request placed after the logout marker (where it lands when the
    /// mock receives it late) is still the display's: both app checks pass. The same request with
    /// no app call in flight, or from a call made as user-1 after the logout, fails.
    func testARequestIsJudgedByTheCallThatSentItNotByItsPlace() async throws {
        let scenario = try AppStepsTests.load("app-display-racing-logout-judged-by-its-own-call")
        let r = await ScenarioRunner().run(scenario)
        XCTAssertEqual(r.status, .passed, AppStepsTests.failures(r))
        let h = r.events
        let assign = try XCTUnwrap(h.firstIndex { $0.kind == .request && $0.request?.path == "/api/v1/tracking/assign" && $0.request?.users == ["user-1"] })
        let logout = try XCTUnwrap(h.firstIndex { $0.kind == .marker && $0.name == "logout" })
        let late = assign < logout ? Self.move(h, from: assign, after: logout) : h
        let lateAssign = try XCTUnwrap(late.firstIndex { $0.kind == .request && $0.request?.path == "/api/v1/tracking/assign" })
        XCTAssertGreaterThan(lateAssign, try XCTUnwrap(late.firstIndex { $0.kind == .marker && $0.name == "logout" }))
        let c = try context(scenario, late)
        XCTAssertEqual(Checks.exposureAfterDisplay(c).map(\.0), [])
        let stale = await Checks.noStaleAfterLogout(c)
        XCTAssertEqual(stale.map(\.0), [])

        // No call of the app sent it (an SDK requesting for user-1 on its own after the logout).
        let orphan = late.filter { !($0.kind == .marker && ["call", "returned"].contains($0.name ?? "") && $0.detail?["call"] == .number(2)) }
            .enumerated().map { i, e -> HistoryEvent in var e = e; e.index = i; return e }
        let c2 = try context(scenario, orphan)
        XCTAssertTrue(Checks.exposureAfterDisplay(c2).contains { $0.0.contains("requested without a display of 'user-1'") }, "\(Checks.exposureAfterDisplay(c2).map(\.0))")
        let orphaned = await Checks.noStaleAfterLogout(c2).map(\.0)
        XCTAssertTrue(orphaned.contains { $0.contains("request for 'user-1' received after that identity logged out") }, "\(orphaned)")

        // The call made as user-1 at a revision after the logout (an operation begun after it).
        let logoutRevision = try XCTUnwrap(late.first { $0.kind == .marker && $0.name == "logout" }?.detail?["revision"])
        let lateCall = try XCTUnwrap(late.firstIndex { $0.kind == .marker && $0.name == "call" && $0.detail?["call"] == .number(2) })
        let lateLogout = try XCTUnwrap(late.firstIndex { $0.kind == .marker && $0.name == "logout" })
        let callAfterLogout = lateCall < lateLogout ? Self.move(late, from: lateCall, after: lateLogout) : late
        let stalecall = callAfterLogout.map { e -> HistoryEvent in
            guard e.kind == .marker, e.name == "call", e.detail?["call"] == .number(2), case .object(var o)? = e.detail else { return e }
            var e = e
            o["revision"] = logoutRevision
            e.detail = .object(o)
            return e
        }
        let staleProblems = await Checks.noStaleAfterLogout(try context(scenario, stalecall)).map(\.0)
        XCTAssertTrue(staleProblems.contains { $0.contains("SDK call (getAssignment by app.display) for 'user-1' after that identity logged out") }, "\(staleProblems)")
    }

    /// A completion shown after the logout (decided at a revision when the app was anon-2) fails.
    func testShowingAStaleCompletionStillFails() async throws {
        let scenario = try AppStepsTests.load("app-display-racing-logout-judged-by-its-own-call")
        let r = await ScenarioRunner().run(scenario)
        let logout = try XCTUnwrap(r.events.first { $0.kind == .marker && $0.name == "logout" })
        guard case .number(let rev)? = logout.detail?["revision"] else { return XCTFail("logout without a revision") }
        var h = r.events
        h.append(HistoryEvent(index: h.count, step: 99, time: 0, kind: .marker, client: "main", label: nil, name: "shown",
                              detail: .object(["identity": .string("user-1"), "revision": .number(1), "decided_at": .number(rev + 1),
                                               "variant": .string("control"), "layout_source": .string("assignment")]),
                              outcome: nil, request: nil))
        let problems = await Checks.noStaleAfterLogout(try context(scenario, h)).map(\.0)
        XCTAssertTrue(problems.contains { $0.contains("shown for 'user-1' after that identity logged out") }, "\(problems)")
    }

    /// An SDK that writes an answer to a request received before the app's clear (defect 1) is
    /// caught even though the app finds the stale entry and undoes it.
    func testAStaleWriteTheAppUndoesIsStillDefectOne() async throws {
        let r = await ScenarioRunner(driver: MutantRun.driver(.staleWriteAfterClear))
            .run(try AppStepsTests.load("app-two-devices-logout-on-one-keeps-other-display"))
        XCTAssertEqual(r.status, .failed)
        let failed = r.checks.first { !$0.passed && $0.name == "no_stale_write" }
        XCTAssertTrue(failed?.message?.contains("defect 1") ?? false, AppStepsTests.failures(r))
        let logout = r.checks.first { !$0.passed && $0.name == "no_stale_after_logout" }
        XCTAssertTrue(logout?.message?.contains("after logout the cache held 'user-2' until the app undid it") ?? false, AppStepsTests.failures(r))
    }

    /// The generator runs different actions of one app at once (a held action, others async
    /// meanwhile), and those workloads pass on both SDKs.
    func testGeneratedAppRacesPass() async throws {
        let generator = WorkloadGenerator(seed: 1)
        var raced: [Int] = []
        for i in 0..<400 where raced.count < 25 {
            guard case .array(let steps)? = generator.scenarioJSON(index: i)["steps"] else { continue }
            let held = steps.indices.filter { j in j > 0 && steps[j]["wait_for"] != nil && steps[j - 1]["app"] != nil }
            let others = held.contains { j in steps[(j + 1)...].prefix(6).contains { $0["app"] != nil && $0["async"] == .bool(true) } }
            if others { raced.append(i) }
        }
        XCTAssertGreaterThanOrEqual(raced.count, 10, "too few generated app races: \(raced)")
        for (name, driver) in [("shipping", SwiftSDKDriver() as any SDKDriver), ("faithful", MutantRun.driver(nil))] {
            let summary = await GenerateCommand.run(generator, indices: raced, driver: driver, sdkName: name)
            XCTAssertEqual(summary.failed.count, 0, "\(name): \(summary.failed.map { "\($0.index): \($0.message)" })")
        }
    }
}
