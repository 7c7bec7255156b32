import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
import Experimently  // not @testable: only the public API may be used here

/// Code written against the upstream SDK's documented API must compile unchanged (CONTRACT.md
/// section 3). This file is mostly a compile check; the test also runs it against a stub.
final class APICompatibilityTests: XCTestCase {
    func testUpstreamStyleCodeCompilesAndRuns() async throws {
        let stub = Stub { _, r in
            switch r.url.path {
            case "/api/v1/tracking/assign":
                let key = r.jsonBody()["experiment_key"] as? String
                return key == "missing" ? .respond(404, #"{"detail":"Experiment not found"}"#)
                    : .respond(200, Body.assignment("x", user: "u", variant: "treatment"))
            case "/api/v1/tracking/batch": return .respond(200, #"{"success_count":1,"failure_count":0,"errors":null}"#)
            case "/api/v1/tracking/track": return .respond(200, "{}")
            default: return .respond(200, Body.flag("dark-mode"))
            }
        }
        let suite = "experimently-compat-" + UUID().uuidString
        addTeardownBlock { UserDefaults().removePersistentDomain(forName: suite) }
        let client = ExperimentationClient(config: SdkConfig(baseURL: stub.baseURL, apiKey: "k"), session: stub.session(),
                                           offlineStore: OfflineStore(suiteName: suite))
        let app: UpstreamRunner = UpstreamApp()
        let log = try await app.run(client)
        XCTAssertEqual(log, ["variant=treatment", "flag=true", "missing", "assignments=1", "flags=[\"dark-mode\"]", "batch=true"])
    }

    /// `SdkConfig`'s defaults are the contract's (CONTRACT.md section 3): the scenario drivers
    /// always pass every setting, so only this test sees them (a twenty-second outside tester).
    func testSdkConfigDefaultsAreTheContracts() {
        let config = SdkConfig(apiKey: "k")
        XCTAssertEqual(config.baseURL, "http://localhost:8000")
        XCTAssertEqual(config.timeout, 10)
        XCTAssertEqual(config.cacheSize, 1000)
        XCTAssertEqual(config.cacheTTL, 300)
        XCTAssertTrue(config.enableOfflineFallback)
    }

    func testUpstreamInitializersCompile() {
        // Construction only; no request is made.
        let a = ExperimentationClient(config: SdkConfig(baseURL: "http://localhost:8000", apiKey: "k"))
        let b = ExperimentationClient(baseURL: "http://localhost:8000", apiKey: "k")
        let c: ExperimentationClientProtocol = ExperimentationClient(
            config: SdkConfig(apiKey: "k", timeout: 5, cacheSize: 10, cacheTTL: 60, enableOfflineFallback: false),
            session: .shared, offlineStore: nil)
        let store = OfflineStore(suiteName: nil, keyPrefix: "ep_sdk_")
        XCTAssertEqual(store.keyPrefix, "ep_sdk_")
        XCTAssertEqual(FeatureFlagEvaluator.hashUser("user-123", flagKey: "my-flag"), 0.6927449859213084, accuracy: 1e-10)
        let errors: [ExperimentationError] = [.invalidConfig("x"), .networkError(URLError(.timedOut)), .decodingError(URLError(.unknown)),
                                              .flagNotFound("f"), .experimentNotFound("e"), .serverError(500, "b"), .cancelled]
        XCTAssertEqual(errors.compactMap(\.errorDescription).count, 7, "every case is a LocalizedError with a description")
        XCTAssertEqual(ExperimentationError.serverError(503, "down").localizedDescription, "Server error 503: down")
        _ = (a, b, c)
    }
}

/// Runs code written the way the upstream README shows; the subclass holds the code.
private class UpstreamRunner {
    func run(_ client: ExperimentationClient) async throws -> [String] { [] }
}

/// An app written against the upstream API, including its deprecated names.
private final class UpstreamApp: UpstreamRunner {
    // Deprecated on purpose: it calls the deprecated upstream names (`variantKey`, `refreshFlags()`),
    // which must keep compiling; being deprecated itself silences those warnings.
    @available(*, deprecated, message: "exercises deprecated upstream API on purpose")
    override func run(_ client: ExperimentationClient) async throws -> [String] {
        var log: [String] = []
        let user = User(id: "u", attributes: ["plan": "pro"])
        let a = try await client.getAssignment("x", user: user)
        log.append("variant=\(a.variantKey)")
        let flag = try await client.evaluateFlag("dark-mode", user: User(id: "u"))
        log.append("flag=\(flag.enabled)")
        try? await client.track(TrackEvent(userId: "u", eventName: "purchase", properties: ["sku": "a"], experimentKey: "x", value: 9.99))
        let protocolClient: ExperimentationClientProtocol = client
        try await protocolClient.refreshFlags()
        do {
            _ = try await client.getAssignment("missing", user: user)
        } catch ExperimentationError.experimentNotFound {
            log.append("missing")
        }
        log.append("assignments=\(client.getAssignments(for: "u").count)")
        log.append("flags=\(client.getEvaluatedFlags(for: "u"))")
        let ok = await protocolClient.trackBatch([TrackEvent(userId: "u", eventName: "page_view")])
        log.append("batch=\(ok)")
        _ = a.variantName; _ = a.variantId; _ = a.isControl; _ = a.configuration; _ = a.experimentKey; _ = a.userId
        _ = flag.key; _ = flag.config
        let event = TrackEvent(userId: "u", eventName: "e", properties: nil, experimentKey: nil, featureFlagKey: "f",
                               value: nil, eventType: "custom", timestamp: Date())
        _ = (event.hasKey, event.attributed(experimentKey: "x", featureFlagKey: nil))
        client.clearCache()
        client.clearOfflineCache()
        client.close()
        return log
    }
}
