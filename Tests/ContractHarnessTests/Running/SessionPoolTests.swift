import XCTest
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ContractHarness

/// In-process scenarios take their URLSessions from a process-wide pool and give them back:
/// the descriptors a long in-process run holds stay bounded (issue 15 section 3), and a session
/// handed to the next scenario never carries a finished scenario's late requests into it.
final class SessionPoolTests: XCTestCase {
    /// The entries of /proc/self/fd now (Linux); `nil` elsewhere.
    static func openDescriptors() -> Int? {
        #if os(Linux)
        return (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count
        #else
        return nil
        #endif
    }

    static let cheap = #"""
    {"format": "experimently-scenario/1", "name": "cheap", "description": "one assignment on each of two clients", "checks": ["single_flight"],
     "clients": {"a": {}, "b": {}},
     "steps": [{"do": "getAssignment", "client": "a", "experiment": "sdk_contract_ab", "user": "u1", "as": "x"},
               {"do": "getAssignment", "client": "b", "experiment": "sdk_contract_ab", "user": "u2", "as": "y"}]}
    """#

    func testThreeHundredInProcessScenariosKeepTheDescriptorCountBounded() async throws {
        let scenario = try ScenarioParser.parse(Data(Self.cheap.utf8), file: "cheap.json")
        let runner = ScenarioRunner(keepsHistory: false)
        // A first run fills the pool (and Foundation's own lazily opened descriptors).
        let first = await runner.run(scenario)
        XCTAssertEqual(first.status, .passed, "\(first.checks.filter { !$0.passed })")
        guard let before = Self.openDescriptors() else { throw XCTSkip("/proc/self/fd is Linux only") }
        let registered = InProcessSessions.registeredCount
        let runs = 300
        for i in 0..<runs {
            let result = await runner.run(scenario)
            if result.status != .passed { return XCTFail("run \(i): \(result.checks.filter { !$0.passed })") }
        }
        let after = try XCTUnwrap(Self.openDescriptors())
        // Two clients a scenario, each with a session: a session per client per scenario would
        // leave about 4 descriptors a run (a libcurl socket pair each), 1,200 here.
        XCTAssertLessThan(after - before, 40, "open descriptors went from \(before) to \(after) over \(runs) scenarios")
        XCTAssertEqual(InProcessSessions.registeredCount, registered, "every scenario's counter was unregistered")
        print("SessionPoolTests: open descriptors \(before) -> \(after) over \(runs) in-process scenarios")
    }

    #if canImport(FoundationNetworking)
    /// Sends `url` through `session` and returns what `inHandler` read inside the completion
    /// handler (before the counter, if any, counts the request completed) and the status.
    static func send(_ url: String, through session: URLSession, inHandler: @escaping @Sendable () -> [Int?]) async -> (status: Int?, seen: [Int?]) {
        await withCheckedContinuation { (done: CheckedContinuation<(status: Int?, seen: [Int?]), Never>) in
            session.dataTask(with: URLRequest(url: URL(string: url)!)) { _, response, _ in
                done.resume(returning: ((response as? HTTPURLResponse)?.statusCode, inHandler()))
            }.resume()
        }
    }

    func testALateRequestOfAFinishedScenarioIsNeverCountedInOrRoutedToTheNextScenarioOnItsSession() async throws {
        let a = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "a.json", clients: ["main"])
        let session = a.session(client: "main")
        _ = await a.shutdown()
        let b = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "b.json", clients: ["main"])
        let taken = b.session(client: "main")
        XCTAssertIdentical(taken, session, "the next scenario takes the session the finished one gave back")
        let pokes = HarnessLocked(0), gated = HarnessLocked(0)
        b.setObserver { _, _ in pokes.withLock { $0 += 1 } }
        b.counter.setDeliveryGate { deliver in gated.withLock { $0 += 1 }; deliver() }

        // The finished scenario's client sends late, through the session b now holds.
        let (status, seen) = await Self.send(a.baseURL(client: "main") + "/api/v1/flags/new_checkout?user_id=u",
                                             through: session) { [b] in [b.outstandingTasks] }
        XCTAssertEqual(seen, [0], "counted in the scenario that holds the session now")
        XCTAssertEqual(b.outstandingTasks, 0)
        XCTAssertEqual(pokes.withLock { $0 }, 0, "the next scenario's quiescence was poked")
        XCTAssertEqual(gated.withLock { $0 }, 0, "delivered through the next scenario's delivery gate")
        XCTAssertEqual(b.requestCount, 0, "routed to the next scenario's backend")
        XCTAssertEqual(a.requestCount, 1, "its own (shut down) backend answers it")
        XCTAssertEqual(status, 503, "a shut-down backend answers 503")
        _ = await b.shutdown()
    }

    func testARequestInFlightWhenItsScenarioEndedCompletesInItsOwnScenarioOnly() async throws {
        let a = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "a.json", clients: ["main"])
        try a.addFault(id: "h", rule: .object(["match": .object(["path": .string("/api/v1/flags/new_checkout")]),
                                                "action": .object(["hold": .object([:])])]), file: "a.json", path: "$.steps[0]")
        // a's answers wait in a box until the test lets them through.
        let stashed = HarnessLocked<[@Sendable () -> Void]>([])
        let arrived = HarnessLocked<CheckedContinuation<Void, Never>?>(nil)
        a.counter.setDeliveryGate { deliver in
            stashed.withLock { $0.append(deliver) }
            arrived.withLock { c in c?.resume(); c = nil }
        }
        let session = a.session(client: "main")
        let b = HarnessLocked<MockBackendPort?>(nil)
        let url = a.baseURL(client: "main") + "/api/v1/flags/new_checkout?user_id=u"
        let read: @Sendable () -> [Int?] = { [a.outstandingTasks, b.withLock { $0 }?.outstandingTasks] }
        async let answer = Self.send(url, through: session, inHandler: read)
        await a.backend.waitForHolds(1)
        XCTAssertEqual(a.outstandingTasks, 1)
        // The scenario ends with the request held: shutdown drops it, and its answer reaches the gate.
        let ended = HarnessLocked<Task<Void, Never>?>(nil)
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            ended.withLock { $0 = Task {
                arrived.withLock { $0 = c }
                _ = await a.shutdown()
            } }
        }
        // Shutdown gives the session back only once it returns (the answer waits in the gate).
        await ended.withLock { $0 }?.value
        let next = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "b.json", clients: ["main"])
        b.withLock { $0 = next }
        XCTAssertIdentical(next.session(client: "main"), session, "the next scenario took the session first")
        // Now the answer reaches the SDK: it is a's request, still outstanding there, never b's.
        stashed.withLock { $0 }.forEach { $0() }
        let (_, seen) = await answer
        XCTAssertEqual(seen, [1, 0])
        XCTAssertEqual(a.outstandingTasks, 0)
        XCTAssertEqual(next.outstandingTasks, 0)
        XCTAssertEqual(next.requestCount, 0)
        _ = await next.shutdown()
    }

    func testAClientWhoseBaseURLIsElsewhereGetsADedicatedSessionThatCountsEveryRequest() async throws {
        let port = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "c.json", clients: ["main"])
        let dedicated = port.session(client: "main", dedicated: true)
        let pooled = port.session(client: "main")
        XCTAssertNotIdentical(dedicated, pooled)
        let elsewhere = "http://elsewhere.invalid/api/v1/flags/new_checkout"
        // The counter counts a task out once its completion handler returned, on the session's
        // queue after `send` resumed: wait for that, or the next request saw it still counted
        // (failed once in a parallel `swift test`).
        let (completions, returned) = AsyncStream<Void>.makeStream()
        port.counter.setDeliveryGate { deliver in deliver(); returned.yield() }
        let (_, viaDedicated) = await Self.send(elsewhere, through: dedicated) { [port] in [port.outstandingTasks] }
        XCTAssertEqual(viaDedicated, [1], "a dedicated session counts a request to any host")
        var waiting = completions.makeAsyncIterator()
        _ = await waiting.next()
        XCTAssertEqual(port.outstandingTasks, 0)
        let (_, viaPooled) = await Self.send(elsewhere, through: pooled) { [port] in [port.outstandingTasks] }
        XCTAssertEqual(viaPooled, [0], "a pooled session counts by host only")
        _ = await port.shutdown()
        XCTAssertFalse(InProcessSessions.counts.idle == 0, "the pooled session went back")
    }

    func testAnSDKThatInvalidatesItsSessionAtCloseLeavesThePooledSessionUsable() async throws {
        let a = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "a.json", clients: ["main"])
        let session = a.session(client: "main")
        // What an SDK's close() may do; on an invalidated session the next data task is a fatalError.
        session.invalidateAndCancel()
        session.finishTasksAndInvalidate()
        _ = await a.shutdown()
        let b = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "b.json", clients: ["main"])
        XCTAssertIdentical(b.session(client: "main"), session)
        let (status, seen) = await Self.send(b.baseURL(client: "main") + "/api/v1/flags/new_checkout?user_id=u", through: session) { [b] in [b.outstandingTasks] }
        XCTAssertEqual(seen, [1])
        XCTAssertNotNil(status, "b's backend answered (the route is unknown to it: 404)")
        XCTAssertEqual(b.requestCount, 1)
        _ = await b.shutdown()
    }
    #endif
}
