import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import ExperimentlyMock

// Support for HTTPServerBackendFaultTests: the real MockBackend behind the real loopback server,
// driven by URLSession, /usr/bin/curl and RawClient (HTTPServerTests.swift).

/// A backend served over loopback TCP for one test.
struct ServedBackend {
    let backend: MockBackend
    let server: MockHTTPServer
    let port: UInt16

    /// `http://127.0.0.1:<port><pathAndQuery>`.
    func url(_ pathAndQuery: String) -> URL { URL(string: "http://127.0.0.1:\(port)\(pathAndQuery)")! }

    /// A request carrying the wire headers of CONTRACT.md section 1 (the key unless `key` is nil),
    /// with a bounded `timeoutInterval` so no test can hang on a silent server.
    func request(_ pathAndQuery: String, method: String = "GET", json: String? = nil,
                 key: String? = Fixtures.sdkContractAPIKey, timeout: TimeInterval = 5) -> URLRequest {
        var r = URLRequest(url: url(pathAndQuery))
        r.httpMethod = method
        r.timeoutInterval = timeout
        if let key { r.setValue(key, forHTTPHeaderField: "X-API-Key") }
        r.setValue("application/json", forHTTPHeaderField: "Accept")
        r.setValue("application/json", forHTTPHeaderField: "Content-Type")
        if let json { r.httpBody = Data(json.utf8) }
        return r
    }

    /// `GET /api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=<user>`.
    func flag(_ user: String, key: String? = Fixtures.sdkContractAPIKey, timeout: TimeInterval = 5) -> URLRequest {
        request("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=\(user)", key: key, timeout: timeout)
    }

    /// `POST /api/v1/tracking/assign` for `sdk_contract_ab`.
    func assign(_ user: String) -> URLRequest {
        request("/api/v1/tracking/assign", method: "POST", json: #"{"experiment_key":"sdk_contract_ab","user_id":"\#(user)"}"#)
    }
}

/// The natural answer to `GET .../evaluate/sdk_contract_flag` (rollout 100), as the backend sends it.
let naturalFlagBody = #"{"config":null,"enabled":true,"key":"sdk_contract_flag","reason":"rollout"}"#

/// A finished HTTP exchange, in a Sendable shape (status, headers by lower-cased name, body).
struct HTTPResult: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data
    var text: String { String(decoding: body, as: UTF8.self) }
    func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// Loads `request` on `session` and returns the response, or throws the URLSession error.
func fetch(_ session: URLSession, _ request: URLRequest) async throws -> HTTPResult {
    let (data, response) = try await session.data(for: request)
    guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
    var headers: [String: String] = [:]
    for (name, value) in http.allHeaderFields {
        if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
    }
    return HTTPResult(status: http.statusCode, headers: headers, body: data)
}

/// Loads `request` expecting a failure; returns the URLError code (nil, with a test failure,
/// when the load succeeded or failed with something that is not a URLError).
func fetchError(_ session: URLSession, _ request: URLRequest, file: StaticString = #filePath, line: UInt = #line) async -> URLError.Code? {
    do {
        let r = try await fetch(session, request)
        XCTFail("expected the load to fail, got \(r.status) \(r.text)", file: file, line: line)
        return nil
    } catch let error as URLError {
        return error.code
    } catch {
        XCTFail("expected a URLError, got \(error)", file: file, line: line)
        return nil
    }
}

/// Seconds on the monotonic clock (for measuring, never for ordering).
func monotonicNow() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

/// Records a backend's observer events; `wait` suspends until a matching event is recorded
/// (a gate) or `timeout` seconds pass (then returns nil so the test fails instead of hanging).
final class BoundedEventLog: @unchecked Sendable { // `events`, `waiters`, `nextWaiter` guarded by `lock`
    private struct Waiter {
        let id: Int
        let predicate: @Sendable (MockEvent) -> Bool
        let continuation: CheckedContinuation<MockEvent?, Never>
    }

    private let lock = NSLock()
    private var events: [MockEvent] = []
    private var waiters: [Waiter] = []
    private var nextWaiter = 0

    init(_ backend: MockBackend) {
        backend.setObserver { [weak self] event in self?.record(event) }
    }

    /// Every event so far, in the order the backend reported them.
    var all: [MockEvent] { lock.withLock { events } }

    private func record(_ event: MockEvent) {
        let ready = lock.withLock { () -> [Waiter] in
            events.append(event)
            let ready = waiters.filter { $0.predicate(event) }
            waiters.removeAll { $0.predicate(event) }
            return ready
        }
        for w in ready { w.continuation.resume(returning: event) }
    }

    /// The first event matching `predicate`, waiting at most `timeout` seconds for it.
    func wait(timeout: Double = 5, _ predicate: @escaping @Sendable (MockEvent) -> Bool) async -> MockEvent? {
        await withCheckedContinuation { (c: CheckedContinuation<MockEvent?, Never>) in
            let id: Int? = lock.withLock {
                if let e = events.first(where: predicate) { c.resume(returning: e); return nil }
                nextWaiter += 1
                waiters.append(Waiter(id: nextWaiter, predicate: predicate, continuation: c))
                return nextWaiter
            }
            guard let id else { return }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [self] in
                let expired = lock.withLock { () -> Waiter? in
                    guard let i = waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return waiters.remove(at: i)
                }
                expired?.continuation.resume(returning: nil)
            }
        }
    }

    /// Why request `seq` parked (nil when it did not park within `timeout` seconds).
    func parked(_ seq: Int, timeout: Double = 5) async -> MockEvent.Parked? {
        guard case .parked(_, let reason)? = await wait(timeout: timeout, { if case .parked(seq, _) = $0 { return true }; return false }) else { return nil }
        return reason
    }

    /// The hold request `seq` parked on (nil when it did not park on a hold within `timeout` seconds).
    func hold(_ seq: Int, timeout: Double = 5) async -> HoldID? {
        guard case .hold(let id)? = await parked(seq, timeout: timeout) else { return nil }
        return id
    }

    /// The outcome and status reported for request `seq` (nil when not answered within `timeout` seconds).
    func answered(_ seq: Int, timeout: Double = 5) async -> (outcome: String, status: Int?)? {
        guard case .answered(_, let outcome, let status)? = await wait(timeout: timeout, { if case .answered(seq, _, _) = $0 { return true }; return false }) else { return nil }
        return (outcome, status)
    }
}

/// The result of one /usr/bin/curl run.
struct CurlResult {
    var exitCode: Int32
    var stdout: String
}

/// Runs /usr/bin/curl with a 5 s cap (`--max-time 5`) and returns its exit code and standard output.
func curlRun(_ arguments: [String]) throws -> CurlResult {
    try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"), "curl is not installed (.ci/run installs it)")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = ["--max-time", "5", "-s"] + arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return CurlResult(exitCode: process.terminationStatus, stdout: String(decoding: data, as: UTF8.self))
}
