import XCTest
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import ExperimentlyMutants
import ExperimentlyMock
@testable import ContractHarness

/// The mutant matrix caps each step's real-time limit so known hangs fail fast; a catch that came
/// from running out of that cap is re-run with the file's own limits before it counts, so a loaded
/// machine can never add a catch (once seen: `fan-out-to-expired` "caught" by a field-timeout
/// scenario under load). The load is injected deterministically: a cap of 0 ms, which no step
/// that waits for an SDK round trip can meet, on scenarios that pass with their own limits.
final class CapConfirmationTests: XCTestCase {
    /// Twelve lookups one after another, each its own round trip: passes with its own limit
    /// against every variant that gets a plain assignment right; fails under a 0 ms cap.
    static let lookups: Scenario = {
        let steps = (0..<12).map { #"{"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-\#($0)", "expect": {"value": {"experiment_key": "sdk_contract_ab"}}}"# }
        return try! ScenarioParser.parse(Data(#"""
        {"format": "experimently-scenario/1", "name": "sequential-lookups", "description": "round trips only",
         "steps": [\#(steps.joined(separator: ", "))]}
        """#.utf8), file: "sequential-lookups.json")
    }()

    /// A held request and a clock advance past the SDK's deadline: an SDK without its own
    /// deadline (`no-own-deadline`) never ends the lookup, with any limits (a real hang). The
    /// file's own step limit is what the confirmation runs with, so it leaves room for a loaded
    /// machine (at 1,500 ms, `fan-out-to-expired` once ran past it under `swift test --parallel`
    /// beside two other heavy jobs, and its catch was confirmed).
    static let deadline = try! ScenarioParser.parse(Data(#"""
    {"format": "experimently-scenario/1", "name": "deadline-ends-a-held-lookup", "description": "the SDK's own deadline",
     "config": {"timeout": 5}, "step_timeout_ms": 4000,
     "steps": [
       {"fault": {"match": {}, "action": {"hold": {}}}, "id": "h"},
       {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true},
       {"wait_for": {"held": "h", "count": 1}},
       {"advance": 5.1},
       {"await": "a", "expect": {"error": "networkError", "code": -1001}},
       {"release": "h"}]}
    """#.utf8), file: "deadline-ends-a-held-lookup.json")

    /// What the cap does on its own: the lookups fail under it, by running out of the step limit.
    func testTheZeroCapAloneFailsTheLookups() async {
        let capped = await ScenarioRunner(driver: MutantRun.driver(.fanOutToExpired), stepTimeoutCap: 0, keepsHistory: false).run(Self.lookups)
        XCTAssertEqual(capped.status, .failed)
        XCTAssertTrue(capped.stepLimitReached)
        XCTAssertTrue(MutantRun.capMayHaveCaused(capped, Self.lookups, cap: 0))
        let own = await ScenarioRunner(driver: MutantRun.driver(.fanOutToExpired), keepsHistory: false).run(Self.lookups)
        XCTAssertEqual(own.status, .passed, own.firstFailure?.message ?? own.reason ?? "")
        XCTAssertFalse(own.stepLimitReached)
        XCTAssertFalse(MutantRun.capMayHaveCaused(capped, Self.lookups, cap: 5000), "a cap that lowers nothing causes nothing")
    }

    func testACapCausedCatchIsDiscardedAndARealHangStillCounts() async {
        for full in [true, false] {
            let report = await MutantRun.run([Self.lookups, Self.deadline], defects: [.fanOutToExpired, .noOwnDeadline],
                                             stepTimeoutCap: 0, executable: nil, full: full)
            XCTAssertEqual(report.baselineFailures, [], "full \(full): baseline failures are re-confirmed")
            let expired = report.rows.first { $0.defect == .fanOutToExpired }
            XCTAssertEqual(expired?.caughtBy, [], "full \(full): the cap alone caught fan-out-to-expired")
            let hang = report.rows.first { $0.defect == .noOwnDeadline }
            XCTAssertEqual(hang?.caughtBy, ["deadline-ends-a-held-lookup"], "full \(full): the real hang must still count")
            XCTAssertTrue(report.unconfirmedCatches.contains("fan-out-to-expired: sequential-lookups"), "full \(full): \(report.unconfirmedCatches)")
            XCTAssertTrue(report.unconfirmedCatches.contains("no-own-deadline: sequential-lookups"), "full \(full): \(report.unconfirmedCatches)")
            XCTAssertFalse(report.unconfirmedCatches.contains("no-own-deadline: deadline-ends-a-held-lookup"))
        }
    }
    /// A variant's deadlock is shown stuck at the cap: the step ran out of its limit while no SDK
    /// job ran, every request in flight sat parked and the mock saw nothing new, so the catch
    /// needs no confirmation with the file's own limits (it would only wait them out).
    /// The three shipped catches that are hangs (before: each waited out its file's 5 s limit in
    /// the matrix's confirmation phase, most of the matrix's time).
    func testARealHangIsShownStuckAtTheCap() async throws {
        let hangs: [(Defect, String)] = [(.clearKeepsInFlight, "defect-2-inflight-bookkeeping-after-clear"),
                                         (.cancelKeepsRequest, "defect-3-cancel-every-waiter-cancels-request"),
                                         (.canonicalIdentity, "field-canonically-equivalent-user-ids-are-distinct-users")]
        for (defect, name) in hangs {
            let file = Repository.root.appendingPathComponent("scenarios/\(name).json").path
            let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
            let capped = await ScenarioRunner(driver: MutantRun.driver(defect), stepTimeoutCap: 300, keepsHistory: false).run(scenario)
            XCTAssertEqual(capped.status, .failed, "\(defect.rawValue)")
            XCTAssertTrue(capped.stepLimitReached, "\(defect.rawValue): \(capped.firstFailure?.message ?? "")")
            XCTAssertFalse(capped.stepLimitUnproven, "\(defect.rawValue): \(capped.firstFailure?.message ?? "")")
            XCTAssertFalse(MutantRun.capMayHaveCaused(capped, scenario, cap: 300), defect.rawValue)
        }
    }

    /// An SDK still working when the cap runs out is never shown stuck: its tasks keep running on
    /// the operations' executor (here a lookup that first works for 600 ms of real time, in 5 ms
    /// slices, as a loaded machine would stretch it), so the counters move inside every window.
    func testAnSDKStillWorkingAtTheCapIsNotShownStuck() async {
        let capped = await ScenarioRunner(driver: SlowStartDriver(), stepTimeoutCap: 300, keepsHistory: false).run(Self.lookups)
        XCTAssertEqual(capped.status, .failed)
        XCTAssertTrue(capped.stepLimitReached)
        XCTAssertTrue(capped.stepLimitUnproven, "a working SDK was shown stuck")
        XCTAssertTrue(MutantRun.capMayHaveCaused(capped, Self.lookups, cap: 300))
    }
}

/// An advance is a step with a time limit of its own making: the walk over the clock's instants
/// and an adapter's acknowledgement of each move. Running out of it is a time-limit failure like
/// a wait's, so the mutant matrix confirms it with the file's own limits. Before, neither said so:
/// `fan-out-to-expired` (a tracking-only variant) was caught by `deadline-ends-a-held-lookup` when,
/// under load, its advance alone outlasted a 0 ms cap (3 of 12 runs with three busy loops).
final class AdvanceTimeLimitTests: XCTestCase {
    /// Two answers delayed to 1 s and 2 s of virtual time: the walk of `advance 3` has two
    /// instants, and the adapter takes 150 ms of real time per move.
    static let twoInstants = try! ScenarioParser.parse(Data(#"""
    {"format": "experimently-scenario/1", "name": "two-instants", "description": "an advance over two delayed answers",
     "config": {"timeout": 30}, "step_timeout_ms": 4000,
     "steps": [
       {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag"}, "when": {"first": 1}, "action": {"delay": {"seconds": 1}}}, "id": "d1"},
       {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "as": "a", "async": true},
       {"wait_for": {"requests": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag"}, "count": 1}},
       {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag"}, "when": {"first": 1}, "action": {"delay": {"seconds": 2}}}, "id": "d2"},
       {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-2", "as": "b", "async": true},
       {"wait_for": {"requests": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag"}, "count": 2}},
       {"advance": 3},
       {"await": "a", "expect": {"value": {"enabled": true}}},
       {"await": "b", "expect": {"value": {"enabled": true}}}]}
    """#.utf8), file: "two-instants.json")

    func testAWalkThatOutlastsTheCapIsATimeLimitFailure() async {
        let own = await ScenarioRunner(driver: SlowClockDriver(moveMilliseconds: 150, fails: false), keepsHistory: false).run(Self.twoInstants)
        XCTAssertEqual(own.status, .passed, own.firstFailure?.message ?? own.reason ?? "")
        let capped = await ScenarioRunner(driver: SlowClockDriver(moveMilliseconds: 150, fails: false), stepTimeoutCap: 100, keepsHistory: false).run(Self.twoInstants)
        XCTAssertEqual(capped.status, .failed)
        XCTAssertTrue(capped.firstFailure?.message?.contains("did not finish within the step limit of 100 ms") == true, capped.firstFailure?.message ?? "")
        XCTAssertTrue(capped.stepLimitReached)
        XCTAssertTrue(capped.stepLimitUnproven)
        XCTAssertTrue(MutantRun.capMayHaveCaused(capped, Self.twoInstants, cap: 100))
    }

    func testAnAcknowledgementThatTookTheWholeLimitIsATimeLimitFailure() async {
        let capped = await ScenarioRunner(driver: SlowClockDriver(moveMilliseconds: nil, fails: true), stepTimeoutCap: 100, keepsHistory: false).run(Self.twoInstants)
        XCTAssertEqual(capped.status, .failed)
        XCTAssertTrue(capped.firstFailure?.message?.contains("timed out") == true, capped.firstFailure?.message ?? "")
        XCTAssertTrue(capped.stepLimitReached)
        XCTAssertTrue(capped.stepLimitUnproven)
        XCTAssertTrue(MutantRun.capMayHaveCaused(capped, Self.twoInstants, cap: 100))
    }
}

/// The shipping SDK behind an adapter that takes `moveMilliseconds` of real time to acknowledge
/// each clock move, or (`fails`) waits out the move's whole deadline and reports it timed out
/// (what `ProcessSDKDriver` says of an adapter that never acknowledges).
private struct SlowClockDriver: SDKDriver {
    let inner = SwiftSDKDriver()
    let moveMilliseconds: Int?
    let fails: Bool
    var sdkName: String { "slow-clock" }
    var sdkVersion: String { inner.sdkVersion }
    var capabilities: Set<String> { inner.capabilities }
    func makeClient(name: String, settings: ClientSettings, store: String?, context: DriverContext) throws -> any DriverClient {
        try inner.makeClient(name: name, settings: settings, store: store, context: context)
    }
    func clockDidAdvance(_ clock: VirtualClock, clients: [any DriverClient], deadlineMilliseconds: Int) async -> String? {
        let ms = fails ? deadlineMilliseconds : (moveMilliseconds ?? 0)
        let until = DispatchTime.now() + .milliseconds(ms)
        while DispatchTime.now() < until { try? await Task.sleep(for: .milliseconds(5)) }
        return fails ? "the adapter did not take the clock move: timed out after \(deadlineMilliseconds) ms" : nil
    }
}

/// The shipping SDK, each of whose operations first works for 600 ms of real time in 5 ms
/// slices on the executor the runner gives it (what a loaded machine does to a correct SDK).
private struct SlowStartDriver: SDKDriver {
    let inner = SwiftSDKDriver()
    var sdkName: String { "slow-start" }
    var sdkVersion: String { inner.sdkVersion }
    var capabilities: Set<String> { inner.capabilities }
    func makeClient(name: String, settings: ClientSettings, store: String?, context: DriverContext) throws -> any DriverClient {
        SlowStartClient(inner: try inner.makeClient(name: name, settings: settings, store: store, context: context))
    }
}

private struct SlowStartClient: DriverClient {
    let inner: any DriverClient
    func perform(_ operation: SDKOperation) async -> OperationOutcome {
        let until = DispatchTime.now() + .milliseconds(600)
        while DispatchTime.now() < until { try? await Task.sleep(for: .milliseconds(5)) }
        return await inner.perform(operation)
    }
    func persisted(kind: String, user: String, key: String) async -> JSONValue? {
        await inner.persisted(kind: kind, user: user, key: key)
    }
}

/// The stuck proof at a wait's limit (`Recorder.ranOutOfTimeUnproven`): a proof under way at the
/// limit is completed, a moving run is never called stuck.
final class StuckProofTests: XCTestCase {
    /// A 0 ms limit: the probe's first read is at the limit, so the proof can only be completed
    /// past it (what a starved process sees). Before, such a deadlock was called unproven.
    func testAProofUnderWayAtTheLimitIsCompleted() async {
        let recorder = Recorder(clock: nil)
        recorder.setStuckProbe { [7, 7, 7] }
        let met = await recorder.wait(milliseconds: 0) { false }
        XCTAssertFalse(met)
        XCTAssertTrue(recorder.ranOutOfTime)
        XCTAssertFalse(recorder.ranOutOfTimeUnproven, "the same stamp for the whole window is a deadlock")
    }

    /// A stamp that changes (the run still moves) or no stamp (something can move) ends the wait
    /// at once, unproven: no grace for a working SDK.
    func testAMovingRunIsNeverProvenStuck() async {
        let counter = HarnessLocked(0)
        let moving = Recorder(clock: nil)
        moving.setStuckProbe { [counter.withLock { $0 += 1; return $0 }] }
        _ = await moving.wait(milliseconds: 0) { false }
        XCTAssertTrue(moving.ranOutOfTimeUnproven)
        let free = Recorder(clock: nil)
        free.setStuckProbe { nil }
        _ = await free.wait(milliseconds: 0) { false }
        XCTAssertTrue(free.ranOutOfTimeUnproven)
        XCTAssertLessThanOrEqual(counter.withLock { $0 }, 2, "a moving run was probed on past the stamp that changed")
    }

    /// A hang on a parked request no step releases is shown stuck in an interleaved run as in a
    /// plain one: the controlled executor counts the jobs it ran, so the probe proves it. Before,
    /// only the plain run had a probe, and the interleaved one read "could not be shown stuck"
    /// (a forty-seventh outside tester, D).
    func testAHangOnAParkedRequestIsProvenInAnInterleavedRunToo() async throws {
        let text = """
        {"format": "experimently-scenario/1", "name": "hang-on-a-held-request", "description": "a call after a clear joins the held request from before it",
         "source": "CONTRACT.md section 5", "checks": ["single_flight"], "steps": [
          {"id": "ha", "fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}},
          {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true},
          {"do": "clearCache"},
          {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a2", "async": true}]%@}
        """
        for section in ["", #", "interleaving": {"choices": [], "depth": 3}"#] {
            let scenario = try ScenarioParser.parse(Data(text.replacingOccurrences(of: "%@", with: section).utf8), file: "hang.json")
            XCTAssertEqual(scenario.interleaving != nil, !section.isEmpty)
            let r = await ScenarioRunner(driver: MutantRun.driver(.clearKeepsInFlight), stepTimeoutCap: 300).run(scenario)
            XCTAssertEqual(r.status, .failed, section)
            XCTAssertFalse(r.stepLimitUnproven, "\(section): \(r.checks.filter { !$0.passed })")
            XCTAssertFalse(r.checks.contains { ($0.message ?? "").contains("could not be shown stuck") }, section)
        }
    }
}

/// The in-process stuck probe (`ScenarioExecution.stuckProbe`) reads no stamp while something can
/// move without a step.
final class StuckProbeTests: XCTestCase {
    private struct Idle: IdleReporting {
        var isIdle: Bool { true }
        var jobsRun: Int? { 3 }
    }

    /// A port with nothing in flight, whose SDK may have begun cancelling request 1.
    private final class QuietPort: BackendPort, @unchecked Sendable {
        // @unchecked Sendable: `cancelling` is set before the probe reads it, on one task.
        var cancelling: [Int] = []
        var queuesIdle = true
        var delegateQueuesIdle: Bool { queuesIdle }
        func baseURL(client: String) -> String { "http://unused.invalid" }
        func session(client: String) -> URLSession { URLSession.shared }
        func addFault(id: String, rule: JSONValue, file: String, path: String) throws {}
        func removeFault(id: String) {}
        func heldCount(fault id: String) -> Int { 0 }
        func release(fault id: String, count: Int?, override: JSONValue?) throws -> Int { 0 }
        func updateFixtures(_ change: FixtureChange) throws {}
        func requests() -> [RequestRecord] { [] }
        func parkedRequests() -> [RequestRecord] { [] }
        var requestCount: Int { 1 }
        func exposures() -> [Exposure]? { [] }
        var unsettledRequests: Int { 0 }
        func setObserver(_ observer: @escaping @Sendable (_ seq: Int?, _ answered: Bool) -> Void) {}
        func shutdown() async -> [String] { [] }
        var outstandingTasks: Int? { 0 }
        func cancellationsOnTheirWay() -> [Int] { cancelling }
    }

    func testACancellationOnItsWayIsNoStamp() {
        let port = QuietPort()
        let recorder = Recorder(clock: nil)   // the probe holds it weakly
        let probe = ScenarioExecution.stuckProbe(executor: Idle(), port: port, clock: VirtualClock(), recorder: recorder)
        XCTAssertNotNil(probe(), "nothing in flight, nothing on its way: a stamp")
        port.queuesIdle = false
        XCTAssertNil(probe(), "work waits on a session's delegate queue (the shipping SDK's cancel() on Linux): the run can still move")
        port.queuesIdle = true
        port.cancelling = [1]
        XCTAssertNil(probe(), "the SDK began cancelling request 1 and the mock has not seen it: the run can still move")
        withExtendedLifetime(recorder) {}
    }
}
