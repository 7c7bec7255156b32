import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import Experimently

/// Findings of an outside audit of the SDK against upstream and CONTRACT.md (audit 47): each test
/// fails on the code before the fix.
final class FortySeventhAuditTests: SDKTestCase {
    /// `clearOfflineCache()` clears the store it was given even when the fallback is off (item 2):
    /// an app that turns persistence off wipes what an earlier run stored (it was a no-op).
    func testClearOfflineCacheWithTheFallbackOffStillClearsTheStore() async throws {
        let stub = Stub { _, _ in .respond(200, Body.flag("f")) }
        let suite = makeSuite()
        let earlier = makeClient(stub, suite: suite)
        _ = try await earlier.evaluateFlag("f", user: User(id: "u"))
        XCTAssertNotNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "u"), "set-up: the first run persisted f")
        let optedOut = makeClient(stub, suite: suite, offline: false)
        optedOut.clearOfflineCache()
        XCTAssertNil(OfflineStore(suiteName: suite).loadEvaluation(flagKey: "f", userId: "u"),
                     "clearOfflineCache() on a client with the fallback off left the persisted entry")
    }

    /// `cacheSize` 0 (or less) is no limit, as upstream's `NSCache.countLimit` (item 8): it kept
    /// one entry, so an unkeyed event fanned out to the last experiment only.
    func testCacheSizeZeroIsNoLimit() async throws {
        let stub = Stub { _, r in
            if r.url.path == "/api/v1/tracking/batch" { return .respond(200, #"{"success_count":3,"failure_count":0,"errors":null}"#) }
            let key = r.jsonBody()["experiment_key"] as? String ?? "?"
            return .respond(200, Body.assignment(key, user: "u"))
        }
        for size in [0, -1] {
            let client = makeClient(stub, cacheSize: size)
            for key in ["e1", "e2", "e3"] { _ = try await client.getAssignment(key, user: User(id: "u")) }
            XCTAssertEqual(client.getAssignments(for: "u").map(\.experimentKey), ["e1", "e2", "e3"], "cacheSize \(size)")
        }
        let bounded = makeClient(stub, cacheSize: 2)
        for key in ["e1", "e2", "e3"] { _ = try await bounded.getAssignment(key, user: User(id: "u")) }
        XCTAssertEqual(bounded.getAssignments(for: "u").map(\.experimentKey), ["e2", "e3"], "a positive size still bounds")
    }

    /// Upstream's initializers, named unapplied, still resolve (item 10): the extra parameters
    /// (`clock:`, `assigned:`) are separate initializers, not defaults of upstream's.
    func testUpstreamInitializersResolveUnapplied() {
        let makeClient: (SdkConfig, URLSession, OfflineStore?) -> ExperimentationClient = ExperimentationClient.init(config:session:offlineStore:)
        let makeAssignment = Assignment.init(experimentKey:userId:variantId:variantName:isControl:configuration:)
        let client = makeClient(SdkConfig(apiKey: "k"), .shared, nil)
        XCTAssertTrue(client.getAssignments(for: "u").isEmpty)
        let a = makeAssignment("e", "u", "v-1", "treatment", false, ["color": "green"])
        XCTAssertTrue(a.assigned, "upstream's initializer makes an enrolled assignment")
        XCTAssertFalse(Assignment(experimentKey: "e", userId: "u", variantId: nil, variantName: "control", isControl: true,
                                  configuration: nil, assigned: false).assigned)
    }
}
