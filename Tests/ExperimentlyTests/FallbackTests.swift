import Foundation
import XCTest
@testable import Experimently

/// The offline fallback and 404 handling of CONTRACT.md section 4, and the SDK's own deadline
/// (section 5.6).
final class FallbackTests: SDKTestCase {
    /// The failures that must fall back to the persisted value, with the error thrown when none exists.
    private let failures: [(String, StubReply, (ExperimentationError) -> Bool)] = [
        ("transport error", .fail(.notConnectedToInternet), { $0.isNetwork(.notConnectedToInternet) }),
        ("401", .respond(401, #"{"detail":"Invalid API Key"}"#), { if case .serverError(401, #"{"detail":"Invalid API Key"}"#) = $0 { return true }; return false }),
        ("422", .respond(422, #"{"detail":[]}"#), { if case .serverError(422, _) = $0 { return true }; return false }),
        ("429", .respond(429, #"{"detail":"Too Many Requests"}"#), { if case .serverError(429, #"{"detail":"Too Many Requests"}"#) = $0 { return true }; return false }),
        ("500", .respond(500, "oops"), { if case .serverError(500, "oops") = $0 { return true }; return false }),
        ("503", .respond(503, ""), { if case .serverError(503, "") = $0 { return true }; return false }),
        ("undecodable", .respond(200, "not json"), { if case .decodingError = $0 { return true }; return false }),
        ("wrong shape", .respond(200, "[1,2]"), { if case .decodingError = $0 { return true }; return false }),
    ]

    func testFlagFallbackOnEveryNon404Failure() async throws {
        for (name, reply, matches) in failures {
            let stub = Stub { i, _ in i == 0 ? .respond(200, Body.flag("f", enabled: true, config: #"{"v":1}"#)) : reply }
            let clock = ManualClock()
            let client = makeClient(stub, clock: clock)
            _ = try await client.evaluateFlag("f", user: User(id: "u"))
            clock.advance(by: 301)  // memory entry expired, persisted one stays
            let fallback = try await client.evaluateFlag("f", user: User(id: "u"))
            XCTAssertTrue(fallback.enabled, name)
            XCTAssertEqual(fallback.config as NSDictionary?, ["v": 1] as NSDictionary, name)
            XCTAssertEqual(stub.requestCount, 2, name)
            // Never across users: another user has nothing persisted and gets the error.
            await assertThrows({ try await client.evaluateFlag("f", user: User(id: "u2")) }, "\(name) error for u2", matches: matches)
            XCTAssertEqual(stub.requestCount, 3, name)
        }
    }

    func testAssignmentFallbackOnEveryNon404Failure() async throws {
        for (name, reply, matches) in failures {
            let stub = Stub { i, _ in i == 0 ? .respond(200, Body.assignment("e", user: "u", variant: "treatment", id: "v7")) : reply }
            let clock = ManualClock()
            let client = makeClient(stub, clock: clock)
            _ = try await client.getAssignment("e", user: User(id: "u"))
            client.clearCache()
            let fallback = try await client.getAssignment("e", user: User(id: "u"))
            XCTAssertEqual(fallback.variantName, "treatment", name)
            XCTAssertEqual(fallback.variantId, "v7", name)
            await assertThrows({ try await client.getAssignment("e", user: User(id: "u2")) }, "\(name) error for u2", matches: matches)
            await assertThrows({ try await client.getAssignment("other", user: User(id: "u")) }, "\(name) error for other key", matches: matches)
        }
    }

    func testFallbackIsNotCachedInMemory() async throws {
        let stub = Stub { i, _ in i == 0 ? .respond(200, Body.flag("f")) : .respond(500, "down") }
        let clock = ManualClock()
        let client = makeClient(stub, clock: clock)
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        clock.advance(by: 301)
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        XCTAssertEqual(stub.requestCount, 3, "a failure is never cached, even when a fallback answered it")
    }

    func testNotFoundRemovesPersistedEntryAndIsNeverStale() async throws {
        let suite = makeSuite()
        let stub = Stub { _, _ in .respond(200, Body.flag("f")) }
        let clock = ManualClock()
        let client = makeClient(stub, clock: clock, suite: suite)
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        _ = try await client.evaluateFlag("f", user: User(id: "other"))  // a different user's entry stays
        XCTAssertNotNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "u"))
        clock.advance(by: 301)
        stub.respond { i, r in
            if r.url.query?.contains("other") == true { return .respond(503, "") }
            return i == 2 ? .respond(404, #"{"detail":"Flag not found"}"#) : .respond(503, "")
        }
        await assertThrows({ try await client.evaluateFlag("f", user: User(id: "u")) }, "flagNotFound(f)") {
            if case .flagNotFound("f") = $0 { return true }
            return false
        }
        XCTAssertNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "u"))
        XCTAssertNotNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "other"))
        // The next call requests again, and a failure now has nothing stale to serve.
        await assertThrows({ try await client.evaluateFlag("f", user: User(id: "u")) }, "serverError(503)") {
            if case .serverError(503, _) = $0 { return true }
            return false
        }
        XCTAssertEqual(stub.requestCount, 4)
        let other = try await client.evaluateFlag("f", user: User(id: "other"))
        XCTAssertTrue(other.enabled)
    }

    func testExperimentNotFoundRemovesPersistedAssignment() async throws {
        let suite = makeSuite()
        let stub = Stub { i, _ in i == 0 ? .respond(200, Body.assignment("e", user: "u")) : .respond(404, #"{"detail":"Experiment not found"}"#) }
        let client = makeClient(stub, suite: suite)
        _ = try await client.getAssignment("e", user: User(id: "u"))
        client.clearCache()
        await assertThrows({ try await client.getAssignment("e", user: User(id: "u")) }, "experimentNotFound(e)") {
            if case .experimentNotFound("e") = $0 { return true }
            return false
        }
        XCTAssertNil(OfflineStore(suiteName: suite).loadAssignment(experimentKey: "e", userId: "u"))
        await assertThrows({ try await client.getAssignment("e", user: User(id: "u")) }, "experimentNotFound again") {
            if case .experimentNotFound = $0 { return true }
            return false
        }
        XCTAssertEqual(stub.requestCount, 3, "404 is not cached")
    }

    func testNotFoundAfterClearCacheStillRemovesPersistedEntry() async throws {
        // A 404 that raced a clearCache() must still delete the persisted value: serving it later
        // would be a stale answer for a flag that no longer exists.
        let suite = makeSuite()
        let stub = Stub { i, _ in i == 0 ? .respond(200, Body.flag("f")) : i == 1 ? .hold : .respond(503, "") }
        let client = makeClient(stub, suite: suite)
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        client.clearCache()
        let pending = Task { try await client.evaluateFlag("f", user: User(id: "u")) }
        await stub.waitForRequests(2)
        client.clearCache()
        stub.release(1, with: .respond(404, "{}"))
        await assertThrows({ try await pending.value(within: 10) }, "flagNotFound") {
            if case .flagNotFound = $0 { return true }
            return false
        }
        XCTAssertNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "u"))
        await assertThrows({ try await client.evaluateFlag("f", user: User(id: "u")) }, "serverError(503), not a stale value") {
            if case .serverError(503, _) = $0 { return true }
            return false
        }
    }

    func testPersistedFallbackSurvivesRelaunchButNotAcrossUsers() async throws {
        let suite = makeSuite()
        let up = Stub { _, r in .respond(200, Body.assignment("e", user: "u", variant: "treatment")) }
        let first = makeClient(up, suite: suite)
        _ = try await first.getAssignment("e", user: User(id: "u"))
        first.close()

        let down = Stub { _, _ in .fail(.cannotConnectToHost) }
        let relaunched = makeClient(down, suite: suite)
        let restored = try await relaunched.getAssignment("e", user: User(id: "u"))
        XCTAssertEqual(restored.variantName, "treatment")
        await assertThrows({ try await relaunched.getAssignment("e", user: User(id: "someone-else")) }, "networkError") {
            $0.isNetwork(.cannotConnectToHost)
        }
        XCTAssertEqual(down.requestCount, 2)
    }

    func testFallbackDisabledPersistsNothing() async throws {
        let suite = makeSuite()
        let stub = Stub { i, _ in i == 0 ? .respond(200, Body.flag("f")) : .respond(500, "x") }
        let client = makeClient(stub, suite: suite, offline: false)
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        XCTAssertNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "u"))
        client.clearCache()
        await assertThrows({ try await client.evaluateFlag("f", user: User(id: "u")) }, "serverError(500)") {
            if case .serverError(500, "x") = $0 { return true }
            return false
        }
    }

    func testOwnDeadlineFiresOnSilentTransport() async throws {
        let clock = ManualClock()
        let stub = Stub { _, _ in .never }
        let client = makeClient(stub, clock: clock, timeout: 7)
        let pending = Task { try await client.evaluateFlag("f", user: User(id: "u")) }
        await stub.waitForRequests(1)
        await clock.waitForSleepers(1)
        clock.advance(by: 6.999)
        XCTAssertEqual(clock.sleeperCount, 1, "not yet due")
        clock.advance(by: 0.001)
        await assertThrows({ try await pending.value(within: 10) }, "networkError(timedOut)") { $0.isNetwork(.timedOut) }
        await stub.waitForStops(1)  // the network task was cancelled
        XCTAssertEqual(clock.sleeperCount, 0)
    }

    func testTimeoutFallsBackToPersistedValue() async throws {
        let clock = ManualClock()
        let stub = Stub { i, _ in i == 0 ? .respond(200, Body.assignment("e", user: "u", variant: "control", control: true)) : .never }
        let client = makeClient(stub, clock: clock, timeout: 10)
        _ = try await client.getAssignment("e", user: User(id: "u"))
        client.clearCache()
        let pending = Task { try await client.getAssignment("e", user: User(id: "u")) }
        await stub.waitForRequests(2)
        await clock.waitForSleepers(1)
        clock.advance(by: 10)
        let value = try await pending.value(within: 10)
        XCTAssertEqual(value.variantName, "control")
        XCTAssertTrue(value.isControl)
    }

    func testAnsweredRequestCancelsItsDeadlineTimer() async throws {
        let clock = ManualClock()
        let stub = Stub { _, _ in .respond(200, Body.flag("f")) }
        let client = makeClient(stub, clock: clock)
        for user in ["a", "b", "c"] { _ = try await client.evaluateFlag("f", user: User(id: user)) }
        // Every deadline timer is cancelled (synchronously) before its answer is handed over, so
        // none is left parked: a leak here would keep one task per request alive for `timeout`.
        XCTAssertEqual(clock.sleeperCount, 0)
    }
}
