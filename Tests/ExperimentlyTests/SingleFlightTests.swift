import Foundation
import XCTest
@testable import Experimently

/// Single flight, cancellation and writes after clear: CONTRACT.md section 4 and defects 5.1-5.3.
final class SingleFlightTests: SDKTestCase {
    func testFiftyConcurrentCallsShareOneRequest() async throws {
        let stub = Stub { _, _ in .hold }
        // TTL 0: a late caller could not be served from the cache, only by joining the flight.
        let client = makeClient(stub, cacheTTL: 0)
        let user = User(id: "u", attributes: ["plan": "pro"])
        let tasks = (0..<50).map { _ in Task { try await client.getAssignment("exp", user: user) } }
        await stub.waitForRequests(1)
        await waitForWaiters(client, user: "u", key: "exp", count: 50)
        stub.release(0, with: .respond(200, Body.assignment("exp", user: "u", variant: "treatment", id: "v2")))
        for task in tasks {
            let a = try await task.value(within: 10)
            XCTAssertEqual(a.variantName, "treatment")
            XCTAssertEqual(a.variantId, "v2")
        }
        XCTAssertEqual(stub.requestCount, 1)
        XCTAssertEqual(client.inFlightWaiters(userId: "u", key: "exp"), 0)
    }

    func testSharedFailureReachesEveryWaiterAndIsNotCached() async throws {
        let stub = Stub { i, _ in i == 0 ? .hold : .respond(200, Body.flag("f")) }
        let client = makeClient(stub, offline: false)
        let tasks = (0..<5).map { _ in Task { try await client.evaluateFlag("f", user: User(id: "u")) } }
        await stub.waitForRequests(1)
        await waitForWaiters(client, user: "u", key: "f", count: 5)
        stub.release(0, with: .respond(502, "bad gateway"))
        for task in tasks {
            await assertThrows({ try await task.value(within: 10) }, "serverError(502)") {
                if case .serverError(502, "bad gateway") = $0 { return true }
                return false
            }
        }
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        XCTAssertEqual(stub.requestCount, 2)
    }

    func testDifferentUsersDoNotShareAFlight() async throws {
        let stub = Stub { _, _ in .hold }
        let client = makeClient(stub)
        let a = Task { try await client.evaluateFlag("f", user: User(id: "a")) }
        let b = Task { try await client.evaluateFlag("f", user: User(id: "b")) }
        await stub.waitForRequests(2)
        stub.release(0, with: .respond(200, Body.flag("f", enabled: true)))
        stub.release(1, with: .respond(200, Body.flag("f", enabled: false)))
        let users = Set(stub.recorded.map { $0.url.query ?? "" })
        XCTAssertEqual(users, ["user_id=a", "user_id=b"])
        let ra = try await a.value(within: 10), rb = try await b.value(within: 10)
        XCTAssertNotEqual(ra.enabled, rb.enabled)
    }

    // MARK: Stale writes (section 5.1)

    func testResponseAfterClearCacheIsNotWritten() async throws {
        let suite = makeSuite()
        let stub = Stub { i, _ in i == 0 ? .hold : .respond(200, Body.flag("f", enabled: false)) }
        let client = makeClient(stub, suite: suite)
        let pending = Task { try await client.evaluateFlag("f", user: User(id: "u")) }
        await stub.waitForRequests(1)
        client.clearCache()
        stub.release(0, with: .respond(200, Body.flag("f", enabled: true)))
        let answer = try await pending.value(within: 10)
        XCTAssertTrue(answer.enabled, "its own caller still gets the answer")
        XCTAssertEqual(client.getEvaluatedFlags(for: "u"), [], "not written to memory")
        XCTAssertNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "u"), "not persisted")
        let next = try await client.evaluateFlag("f", user: User(id: "u"))
        XCTAssertFalse(next.enabled)
        XCTAssertEqual(stub.requestCount, 2)
    }

    func testResponseAfterClearOfflineCacheIsNotWritten() async throws {
        let suite = makeSuite()
        let stub = Stub { i, _ in i == 0 ? .hold : .respond(200, Body.assignment("e", user: "u", variant: "control")) }
        let client = makeClient(stub, suite: suite)
        let pending = Task { try await client.getAssignment("e", user: User(id: "u")) }
        await stub.waitForRequests(1)
        client.clearOfflineCache()
        stub.release(0, with: .respond(200, Body.assignment("e", user: "u", variant: "treatment")))
        let answer = try await pending.value(within: 10)
        XCTAssertEqual(answer.variantName, "treatment")
        XCTAssertNil(OfflineStore(suiteName: suite).loadAssignment(experimentKey: "e", userId: "u"), "not persisted")
        XCTAssertEqual(client.getAssignments(for: "u").count, 0, "not written to memory")
    }

    func testCloseCancelsInFlightAndWritesNothing() async throws {
        let suite = makeSuite()
        let stub = Stub { i, _ in i == 0 ? .hold : .respond(200, Body.flag("f", enabled: false)) }
        let client = makeClient(stub, suite: suite)
        let pending = Task { try await client.evaluateFlag("f", user: User(id: "u")) }
        await stub.waitForRequests(1)
        await waitForWaiters(client, user: "u", key: "f", count: 1)
        client.close()
        await stub.waitForStops(1)
        stub.release(0, with: .respond(200, Body.flag("f", enabled: true)))  // too late: stopped
        await assertThrows({ try await pending.value(within: 10) }, "cancelled") { $0.isCancelled }
        XCTAssertEqual(client.getEvaluatedFlags(for: "u"), [])
        XCTAssertNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "u"))
        // The client stays usable.
        let next = try await client.evaluateFlag("f", user: User(id: "u"))
        XCTAssertFalse(next.enabled)
    }

    func testCloseRacingAnAnswerNeverWritesIt() async throws {
        // The answer and close() race; whichever wins, nothing started before close() is written.
        for _ in 0..<20 {
            let suite = makeSuite()
            let stub = Stub { _, _ in .hold }
            let client = makeClient(stub, suite: suite)
            let pending = Task { try await client.evaluateFlag("f", user: User(id: "u")) }
            await stub.waitForRequests(1)
            async let release: Void = stub.release(0, with: .respond(200, Body.flag("f")))
            client.close()
            _ = await release
            let answered = (try? await pending.value(within: 10)) != nil
            XCTAssertEqual(client.getEvaluatedFlags(for: "u"), [], "memory is empty after close() either way")
            if !answered {
                // Cancelled by close(): the answer must not have been persisted. (An answer that
                // finished before close() was legitimately persisted; close() keeps the store.)
                XCTAssertNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "u"))
            }
        }
    }

    // MARK: In-flight bookkeeping (section 5.2)

    func testFinishingAnOldRequestNeverRemovesANewerOne() async throws {
        let stub = Stub { _, _ in .hold }
        let client = makeClient(stub)
        let a = Task { try await client.getAssignment("e", user: User(id: "u")) }
        await stub.waitForRequests(1)
        client.clearCache()
        let b = Task { try await client.getAssignment("e", user: User(id: "u")) }
        await stub.waitForRequests(2)
        stub.release(0, with: .respond(200, Body.assignment("e", user: "u", variant: "A")))
        let resultA = try await a.value(within: 10)
        XCTAssertEqual(resultA.variantName, "A")
        let c = Task { try await client.getAssignment("e", user: User(id: "u")) }
        await waitForWaiters(client, user: "u", key: "e", count: 2)  // C joined B
        XCTAssertEqual(stub.requestCount, 2)
        stub.release(1, with: .respond(200, Body.assignment("e", user: "u", variant: "B")))
        let resultB = try await b.value(within: 10), resultC = try await c.value(within: 10)
        XCTAssertEqual(resultB.variantName, "B")
        XCTAssertEqual(resultC.variantName, "B")
        XCTAssertEqual(stub.requestCount, 2)
        XCTAssertEqual(client.getAssignments(for: "u").map(\.variantName), ["B"], "B, not the stale A, is cached")
    }

    // MARK: Cancellation (section 5.3)

    func testCancellingEveryWaiterCancelsTheNetworkTask() async throws {
        let stub = Stub { i, _ in i == 0 ? .hold : .respond(200, Body.flag("f")) }
        let client = makeClient(stub)
        let a = Task { try await client.evaluateFlag("f", user: User(id: "u")) }
        let b = Task { try await client.evaluateFlag("f", user: User(id: "u")) }
        await stub.waitForRequests(1)
        await waitForWaiters(client, user: "u", key: "f", count: 2)
        a.cancel()
        b.cancel()
        await stub.waitForStops(1)
        for task in [a, b] {
            await assertThrows({ try await task.value(within: 10) }, "cancelled") { $0.isCancelled }
        }
        XCTAssertEqual(stub.stopCount, 1)
        XCTAssertEqual(client.inFlightWaiters(userId: "u", key: "f"), 0)
        // A later call starts afresh instead of joining the abandoned request.
        let again = try await client.evaluateFlag("f", user: User(id: "u"))
        XCTAssertTrue(again.enabled)
        XCTAssertEqual(stub.requestCount, 2)
    }

    func testCancellationIsNotAFailureToFallBackFrom() async throws {
        // A persisted value exists, but a cancelled caller (or close()) gets `.cancelled`, not it.
        let stub = Stub { i, _ in i == 0 ? .respond(200, Body.flag("f")) : .hold }
        let client = makeClient(stub)
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        client.clearCache()
        let cancelled = Task { try await client.evaluateFlag("f", user: User(id: "u")) }
        await stub.waitForRequests(2)
        await waitForWaiters(client, user: "u", key: "f", count: 1)
        cancelled.cancel()
        await assertThrows({ try await cancelled.value(within: 10) }, "cancelled") { $0.isCancelled }
        let closed = Task { try await client.evaluateFlag("f", user: User(id: "u")) }
        await stub.waitForRequests(3)
        await waitForWaiters(client, user: "u", key: "f", count: 1)
        client.close()
        await assertThrows({ try await closed.value(within: 10) }, "cancelled by close()") { $0.isCancelled }
        await stub.waitForStops(2)  // URLSession calls stopLoading asynchronously after cancel()
        XCTAssertEqual(stub.stopCount, 2)
    }

    func testCancellingOneOfTwoWaitersKeepsTheSharedRequest() async throws {
        let stub = Stub { _, _ in .hold }
        let client = makeClient(stub)
        let a = Task { try await client.getAssignment("e", user: User(id: "u")) }
        let b = Task { try await client.getAssignment("e", user: User(id: "u")) }
        await stub.waitForRequests(1)
        await waitForWaiters(client, user: "u", key: "e", count: 2)
        a.cancel()
        await assertThrows({ try await a.value(within: 10) }, "cancelled") { $0.isCancelled }
        XCTAssertEqual(client.inFlightWaiters(userId: "u", key: "e"), 1)
        stub.release(0, with: .respond(200, Body.assignment("e", user: "u", variant: "treatment")))
        let value = try await b.value(within: 10)
        XCTAssertEqual(value.variantName, "treatment")
        XCTAssertEqual(stub.stopCount, 0, "the shared request was not cancelled")
        XCTAssertEqual(stub.requestCount, 1)
        XCTAssertEqual(client.getAssignments(for: "u").map(\.variantName), ["treatment"])
    }

    func testCallerCancelledBeforeItStartsGetsCancelledAndNothingLeaks() async throws {
        let stub = Stub { _, _ in .respond(200, Body.flag("f")) }
        let client = makeClient(stub)
        let gate = AsyncGate()
        let task = Task {
            await gate.wait()
            return try await client.evaluateFlag("f", user: User(id: "u"))
        }
        task.cancel()
        gate.open()
        do {
            let value = try await task.value(within: 10)
            // The request may have completed before cancellation was observed; then it is a value.
            XCTAssertEqual(value.key, "f")
        } catch let error as ExperimentationError {
            XCTAssertTrue(error.isCancelled, "\(error)")
        }
        XCTAssertEqual(client.inFlightWaiters(userId: "u", key: "f"), 0)
    }

    func testCancellationRacesNeverHangOrDoubleResume() async throws {
        // Many waiters, half cancelled at arbitrary points while the answer arrives: every task
        // must end (no lost continuation) and none may crash (no double resume).
        for round in 0..<30 {
            let stub = Stub { _, _ in .hold }
            let client = makeClient(stub, offline: false)
            let tasks = (0..<8).map { _ in Task { try await client.evaluateFlag("f", user: User(id: "u")) } }
            await stub.waitForRequests(1)
            async let cancels: Void = { for (i, t) in tasks.enumerated() where i % 2 == 0 { t.cancel() } }()
            stub.release(0, with: .respond(200, Body.flag("f")))
            _ = await cancels
            var values = 0
            for t in tasks {
                do { _ = try await t.value(within: 10); values += 1 } catch let e as ExperimentationError {
                    XCTAssertTrue(e.isCancelled, "round \(round): \(e)")
                }
            }
            XCTAssertGreaterThanOrEqual(values, 4, "round \(round): uncancelled waiters get the value")
            XCTAssertEqual(client.inFlightWaiters(userId: "u", key: "f"), 0)
        }
    }
}

/// A one-shot gate: `wait()` suspends until `open()` (or returns at once after it).
final class AsyncGate: @unchecked Sendable {
    // @unchecked Sendable: `opened` and `waiters` are only touched inside `lock`.
    private let lock = NSLock()
    private var opened = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = lock.withLock { () -> Bool in
                if opened { return true }
                waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    func open() {
        let w = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            opened = true
            defer { waiters.removeAll() }
            return waiters
        }
        w.forEach { $0.resume() }
    }
}
