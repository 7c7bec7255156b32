import Foundation
import XCTest
@testable import Experimently

/// The per-user TTL cache of CONTRACT.md section 4.
final class CacheTests: SDKTestCase {
    func testHitSendsNothing() async throws {
        let stub = Stub { i, _ in .respond(200, Body.flag("f", enabled: i == 0)) }
        let client = makeClient(stub)
        let first = try await client.evaluateFlag("f", user: User(id: "u"))
        let second = try await client.evaluateFlag("f", user: User(id: "u"))
        XCTAssertTrue(first.enabled)
        XCTAssertTrue(second.enabled, "the cached answer, not a second request's")
        XCTAssertEqual(stub.requestCount, 1)
    }

    func testCacheIsPerUserAndKeysDoNotCollide() async throws {
        let stub = Stub { i, r in
            .respond(200, Body.assignment("e", user: "x", variant: "v\(i)"))
        }
        let client = makeClient(stub)
        let a = try await client.getAssignment("c", user: User(id: "a:b"))
        let b = try await client.getAssignment("b:c", user: User(id: "a"))
        let c = try await client.getAssignment("c", user: User(id: "a:b"))
        let d = try await client.getAssignment("b:c", user: User(id: "a"))
        XCTAssertEqual([a, b, c, d].map(\.variantName), ["v0", "v1", "v0", "v1"])
        XCTAssertEqual(stub.requestCount, 2)
        // Another user never sees the first user's entry.
        let other = try await client.getAssignment("c", user: User(id: "z"))
        XCTAssertEqual(other.variantName, "v2")
        XCTAssertEqual(stub.requestCount, 3)
    }

    func testFlagsAndAssignmentsAreSeparateCaches() async throws {
        let stub = Stub { _, r in
            r.url.path.hasSuffix("/assign") ? .respond(200, Body.assignment("k", user: "u")) : .respond(200, Body.flag("k"))
        }
        let client = makeClient(stub)
        _ = try await client.evaluateFlag("k", user: User(id: "u"))
        _ = try await client.getAssignment("k", user: User(id: "u"))
        XCTAssertEqual(stub.requestCount, 2)
    }

    func testTTLExpiryInVirtualTime() async throws {
        let clock = ManualClock()
        let stub = Stub { i, _ in .respond(200, Body.flag("f", enabled: i % 2 == 0)) }
        let client = makeClient(stub, clock: clock, cacheTTL: 300)
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        clock.advance(by: 299.999)
        let cached = try await client.evaluateFlag("f", user: User(id: "u"))
        XCTAssertTrue(cached.enabled)
        XCTAssertEqual(stub.requestCount, 1)
        XCTAssertEqual(client.getEvaluatedFlags(for: "u"), ["f"])
        clock.advance(by: 0.001)  // exactly cacheTTL: expired
        XCTAssertEqual(client.getEvaluatedFlags(for: "u"), [])
        let fresh = try await client.evaluateFlag("f", user: User(id: "u"))
        XCTAssertFalse(fresh.enabled)
        XCTAssertEqual(stub.requestCount, 2)
    }

    func testFailuresAreNeverCached() async throws {
        let stub = Stub { i, _ in i == 0 ? .respond(500, "boom") : .respond(200, Body.flag("f")) }
        let client = makeClient(stub, offline: false)
        await assertThrows({ try await client.evaluateFlag("f", user: User(id: "u")) }, "serverError(500)") {
            if case .serverError(500, "boom") = $0 { return true }
            return false
        }
        let ok = try await client.evaluateFlag("f", user: User(id: "u"))
        XCTAssertTrue(ok.enabled)
        XCTAssertEqual(stub.requestCount, 2)
    }

    func testGetAssignmentsAndFlagsInInsertionOrderPerUnexpired() async throws {
        let clock = ManualClock()
        let stub = Stub { _, r in
            if r.url.path.hasSuffix("/assign") {
                let b = r.jsonBody()
                let key = b["experiment_key"] as! String
                return .respond(200, Body.assignment(key, user: b["user_id"] as! String, assigned: key != "ineligible"))
            }
            return .respond(200, Body.flag(r.url.lastPathComponent))
        }
        let client = makeClient(stub, clock: clock, cacheTTL: 100)
        _ = try await client.getAssignment("old", user: User(id: "u"))
        _ = try await client.evaluateFlag("old-flag", user: User(id: "u"))
        clock.advance(by: 50)
        for key in ["zeta", "alpha", "ineligible", "mid"] { _ = try await client.getAssignment(key, user: User(id: "u")) }
        for key in ["f2", "f1"] { _ = try await client.evaluateFlag(key, user: User(id: "u")) }
        _ = try await client.getAssignment("other-user", user: User(id: "v"))
        XCTAssertEqual(client.getAssignments(for: "u").map(\.experimentKey), ["old", "zeta", "alpha", "ineligible", "mid"])
        XCTAssertEqual(client.getEvaluatedFlags(for: "u"), ["old-flag", "f2", "f1"])
        clock.advance(by: 50)  // "old" entries reach their TTL
        XCTAssertEqual(client.getAssignments(for: "u").map(\.experimentKey), ["zeta", "alpha", "ineligible", "mid"])
        XCTAssertEqual(client.getEvaluatedFlags(for: "u"), ["f2", "f1"])
        XCTAssertEqual(client.getAssignments(for: "v").map(\.experimentKey), ["other-user"])
        XCTAssertEqual(client.getAssignments(for: "nobody").count, 0)
    }

    func testCountLimitEvictsOldest() async throws {
        let stub = Stub { _, r in .respond(200, Body.flag(r.url.lastPathComponent)) }
        let client = makeClient(stub, cacheSize: 2)
        for key in ["a", "b", "c"] { _ = try await client.evaluateFlag(key, user: User(id: "u")) }
        XCTAssertEqual(client.getEvaluatedFlags(for: "u"), ["b", "c"])
        _ = try await client.evaluateFlag("c", user: User(id: "u"))
        XCTAssertEqual(stub.requestCount, 3)
    }

    func testClearCacheDropsMemoryButKeepsPersisted() async throws {
        let suite = makeSuite()
        let stub = Stub { _, _ in .respond(200, Body.flag("f")) }
        let client = makeClient(stub, suite: suite)
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        client.clearCache()
        XCTAssertEqual(client.getEvaluatedFlags(for: "u"), [])
        XCTAssertNotNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "u"))
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        XCTAssertEqual(stub.requestCount, 2)
        client.clearOfflineCache()
        XCTAssertNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "u"))
    }
}
