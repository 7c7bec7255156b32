import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import Experimently

/// Shared set-up for SDK tests: a fresh stub server, a virtual clock and a private offline store
/// suite per test, removed again afterwards.
class SDKTestCase: XCTestCase {
    /// A unique `UserDefaults` suite name, deleted in tear-down.
    func makeSuite() -> String {
        let suite = "experimently-tests-" + UUID().uuidString
        addTeardownBlock { UserDefaults().removePersistentDomain(forName: suite) }
        return suite
    }

    /// A client talking to `stub` with `clock`, persisting into `suite`.
    func makeClient(_ stub: Stub, clock: ManualClock = ManualClock(), suite: String? = nil,
                    baseURL: String? = nil, timeout: TimeInterval = 10, cacheTTL: TimeInterval = 300,
                    cacheSize: Int = 1000, offline: Bool = true, apiKey: String = "test-key") -> ExperimentationClient {
        let config = SdkConfig(baseURL: baseURL ?? stub.baseURL, apiKey: apiKey, timeout: timeout,
                               cacheSize: cacheSize, cacheTTL: cacheTTL, enableOfflineFallback: offline)
        let suite = suite ?? makeSuite()
        return ExperimentationClient(config: config, session: stub.session(),
                                     offlineStore: OfflineStore(suiteName: suite), clock: clock)
    }

    /// Waits until `client` has `count` callers registered on the in-flight request for (user, key).
    /// In-process probe (no sockets): yields between reads, bounded so a bug fails instead of hanging.
    func waitForWaiters(_ client: ExperimentationClient, user: String, key: String, count: Int,
                        file: StaticString = #filePath, line: UInt = #line) async {
        let deadline = Date().addingTimeInterval(10)
        while client.inFlightWaiters(userId: user, key: key) < count {
            if Date() > deadline {
                XCTFail("timed out waiting for \(count) waiters on (\(user), \(key)): \(client.inFlightWaiters(userId: user, key: key))", file: file, line: line)
                return
            }
            await Task.yield()
        }
    }

    /// Asserts that `operation` throws an `ExperimentationError` accepted by `matches`.
    func assertThrows<T>(_ operation: () async throws -> T, _ description: String,
                         file: StaticString = #filePath, line: UInt = #line,
                         matches: (ExperimentationError) -> Bool) async {
        do {
            let value = try await operation()
            XCTFail("expected \(description), got \(value)", file: file, line: line)
        } catch let error as ExperimentationError {
            XCTAssertTrue(matches(error), "expected \(description), got \(error)", file: file, line: line)
        } catch {
            XCTFail("expected \(description), got non-SDK error \(error)", file: file, line: line)
        }
    }
}

/// Wire bodies the fake server answers with.
enum Body {
    static func flag(_ key: String, enabled: Bool = true, config: String = "null") -> String {
        #"{"key":"\#(key)","enabled":\#(enabled),"config":\#(config),"reason":"rollout"}"#
    }

    static func assignment(_ experiment: String, user: String, variant: String = "treatment", id: String = "v-1",
                           control: Bool = false, configuration: String = #"{"color":"green"}"#,
                           assigned: Bool? = true) -> String {
        let a = assigned.map { #","assigned":\#($0)"# } ?? ""
        return #"{"experiment_key":"\#(experiment)","user_id":"\#(user)","variant_id":"\#(id)","variant_name":"\#(variant)","is_control":\#(control),"configuration":\#(configuration)\#(a),"reason":"assigned"}"#
    }
}

extension ExperimentationError {
    /// `true` for `.networkError` wrapping `URLError(code)`.
    func isNetwork(_ code: URLError.Code) -> Bool {
        if case .networkError(let e) = self {
            if let u = e as? URLError { return u.code == code }
            let n = e as NSError
            return n.domain == NSURLErrorDomain && n.code == code.rawValue
        }
        return false
    }

    var isCancelled: Bool { if case .cancelled = self { return true }; return false }
}

extension Task where Failure == Error {
    /// The task's value; the task is cancelled when it has not finished within `seconds` of real
    /// time. A safety net, not an ordering tool: a lost continuation or a missing deadline in the
    /// SDK then fails the test (with `.cancelled` or a hang report) instead of hanging the suite.
    func value(within seconds: Double = 10) async throws -> Success {
        let watchdog = Task<Void, Never> {
            try? await Task<Never, Never>.sleep(nanoseconds: UInt64(seconds * 1e9))
            if !Task<Never, Never>.isCancelled { self.cancel() }
        }
        defer { watchdog.cancel() }
        return try await value
    }
}
