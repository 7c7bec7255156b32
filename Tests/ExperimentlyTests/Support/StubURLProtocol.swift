import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import Experimently

/// A request as the stub protocol saw it.
struct RecordedRequest: Sendable {
    let method: String
    let url: URL
    /// Header fields as they reached the protocol (Linux normalizes names; look up with `header(_:)`).
    let headers: [String: String]
    let body: Data?

    /// The value of header `name`, compared case-insensitively.
    func header(_ name: String) -> String? {
        headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// Path plus `?query` exactly as encoded on the wire.
    var pathAndQuery: String {
        let c = URLComponents(url: url, resolvingAgainstBaseURL: false)
        let path = c?.percentEncodedPath ?? url.path
        return c?.percentEncodedQuery.map { path + "?" + $0 } ?? path
    }

    /// The body parsed as a JSON object.
    func jsonBody(file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
        guard let body, let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            XCTFail("body is not a JSON object: \(body.map { String(decoding: $0, as: UTF8.self) } ?? "nil")", file: file, line: line)
            return [:]
        }
        return object
    }
}

/// What the stub answers to one request.
enum StubReply: Sendable {
    /// An HTTP answer.
    case respond(Int, String)
    /// A transport failure.
    case fail(URLError.Code)
    /// Answer nothing until `Stub.release(_:with:)` is called for this request's index.
    case hold
    /// Never answer (only cancellation or the SDK's deadline ends it).
    case never
}

/// One test's fake server, reached through `StubURLProtocol` at a unique host, so tests never see
/// each other's traffic. Records requests and `stopLoading` calls; held requests wait for `release`.
final class Stub: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is read and written only inside `lock`.
    private let lock = NSLock()
    private var requests: [RecordedRequest] = []
    private var stops = 0
    private var held: [Int: StubURLProtocol] = [:]
    private var stopped: Set<Int> = []
    private var watchers: [(predicate: (Int, Int) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
    private var responder: @Sendable (Int, RecordedRequest) -> StubReply

    let host: String
    var baseURL: String { "http://\(host)" }

    nonisolated(unsafe) private static var registry: [String: Stub] = [:]
    private static let registryLock = NSLock()

    /// Creates and registers a stub; `responder` gets the request's 0-based index and the request.
    init(_ responder: @escaping @Sendable (Int, RecordedRequest) -> StubReply = { _, _ in .respond(200, "{}") }) {
        self.host = "stub-" + UUID().uuidString.lowercased() + ".test"
        self.responder = responder
        Stub.registryLock.withLock { Stub.registry[host] = self }
    }

    deinit { Stub.registryLock.withLock { Stub.registry[host] = nil } }

    static func lookup(_ host: String?) -> Stub? {
        guard let host else { return nil }
        return registryLock.withLock { registry[host] }
    }

    /// Replaces the responder for later requests.
    func respond(_ responder: @escaping @Sendable (Int, RecordedRequest) -> StubReply) {
        lock.withLock { self.responder = responder }
    }

    /// A session whose only protocol is the stub protocol.
    func session() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [StubURLProtocol.self]
        return URLSession(configuration: configuration)
    }

    var recorded: [RecordedRequest] { lock.withLock { requests } }
    var requestCount: Int { lock.withLock { requests.count } }
    var stopCount: Int { lock.withLock { stops } }

    fileprivate func begin(_ request: RecordedRequest, protocol p: StubURLProtocol) -> (Int, StubReply) {
        let (index, reply, ready) = lock.withLock { () -> (Int, StubReply, [CheckedContinuation<Void, Never>]) in
            requests.append(request)
            let index = requests.count - 1
            let reply = responder(index, request)
            if case .hold = reply { held[index] = p }
            return (index, reply, takeReadyWatchers())
        }
        ready.forEach { $0.resume() }
        return (index, reply)
    }

    fileprivate func stop(_ index: Int) {
        let ready = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            stops += 1
            stopped.insert(index)
            held[index] = nil
            return takeReadyWatchers()
        }
        ready.forEach { $0.resume() }
    }

    /// Answers held request `index` (0-based) now; a stopped request gets nothing.
    func release(_ index: Int, with reply: StubReply) {
        let p = lock.withLock { held.removeValue(forKey: index) }
        p?.deliverLate(reply)
    }

    private func takeReadyWatchers() -> [CheckedContinuation<Void, Never>] {
        var ready: [CheckedContinuation<Void, Never>] = []
        watchers.removeAll { w in
            guard w.predicate(requests.count, stops) else { return false }
            ready.append(w.continuation)
            return true
        }
        return ready
    }

    /// Suspends until `predicate(requestCount, stopCount)` holds (a gate, no polling).
    /// A bounded real-time safety net turns a hang into a test failure.
    func wait(_ what: String, timeout: TimeInterval = 10, file: StaticString = #filePath, line: UInt = #line,
              until predicate: @escaping @Sendable (_ requests: Int, _ stops: Int) -> Bool) async {
        let met = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let now = self.lock.withLock { () -> Bool in
                        if predicate(self.requests.count, self.stops) { return true }
                        self.watchers.append((predicate, c))
                        return false
                    }
                    if now { c.resume() }
                }
                return true
            }
            group.addTask {
                try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9))
                return false
            }
            let first = await group.next()!
            if !first {
                // Free the watcher so the group can finish.
                let pending = self.lock.withLock { () -> [CheckedContinuation<Void, Never>] in
                    defer { self.watchers.removeAll() }
                    return self.watchers.map(\.continuation)
                }
                pending.forEach { $0.resume() }
            }
            group.cancelAll()
            return first
        }
        if !met { XCTFail("timed out waiting for \(what) (requests \(requestCount), stops \(stopCount))", file: file, line: line) }
    }

    /// Suspends until at least `n` requests arrived.
    func waitForRequests(_ n: Int, file: StaticString = #filePath, line: UInt = #line) async {
        await wait("\(n) request(s)", file: file, line: line) { r, _ in r >= n }
    }

    /// Suspends until `stopLoading` was called at least `n` times.
    func waitForStops(_ n: Int, file: StaticString = #filePath, line: UInt = #line) async {
        await wait("\(n) stopLoading call(s)", file: file, line: line) { _, s in s >= n }
    }
}

/// The `URLProtocol` behind `Stub`: records each request and answers as the stub's responder says.
final class StubURLProtocol: URLProtocol {
    // Touched from URLSession's queue and from tests releasing held requests: `index` and
    // `finished` are only read or written inside `lock`.
    private let lock = NSLock()
    private var index = -1
    private var finished = false
    /// The task's work queue, where a late answer must be delivered (set in `startLoading`).
    private var workQueue: DispatchQueue?

    override class func canInit(with request: URLRequest) -> Bool { Stub.lookup(request.url?.host) != nil }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        guard let stub = Stub.lookup(request.url?.host), let url = request.url else {
            client?.urlProtocol(self, didFailWithError: URLError(.cannotFindHost))
            return
        }
        let recorded = RecordedRequest(method: request.httpMethod ?? "GET", url: url,
                                       headers: request.allHTTPHeaderFields ?? [:], body: Self.body(of: request))
        let queue = Self.loadingQueue(of: task)
        lock.withLock { workQueue = queue }
        let (i, reply) = stub.begin(recorded, protocol: self)
        lock.withLock { index = i }
        switch reply {
        case .hold, .never: return
        default: deliver(reply)
        }
    }

    override func stopLoading() {
        let (i, wasFinished) = lock.withLock { () -> (Int, Bool) in
            defer { finished = true }
            return (index, finished)
        }
        // Only a stop before an answer is a cancellation worth counting.
        if !wasFinished, let stub = Stub.lookup(request.url?.host) { stub.stop(i) }
    }

    /// Answers the request. The client calls happen inside `lock`, which `stopLoading` also takes:
    /// on Linux, FoundationNetworking traps ("task not in the registry") when a protocol talks to
    /// its client while the task is being cancelled, so delivery and cancellation must not overlap.
    /// A task already cancelling gets nothing: its cancellation fails it (as `MockURLProtocol` does).
    fileprivate func deliver(_ reply: StubReply) {
        lock.lock()
        defer { lock.unlock() }
        if finished { return }
        finished = true
        if let task, task.state != .running { return }
        guard let url = request.url else { return }
        switch reply {
        case .respond(let status, let body):
            let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1",
                                           headerFields: ["Content-Type": "application/json"])!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocol(self, didLoad: Data(body.utf8))
            client?.urlProtocolDidFinishLoading(self)
        case .fail(let code):
            client?.urlProtocol(self, didFailWithError: URLError(code))
        case .hold, .never:
            break
        }
    }

    /// Answers a held request from a test's thread: on Linux through the task's work queue, since
    /// FoundationNetworking's task registry is not synchronized and a delivery from another thread
    /// can crash the process under load (NOTES-linux-foundation.md; as `MockURLProtocol` does).
    fileprivate func deliverLate(_ reply: StubReply) {
        guard let queue = lock.withLock({ workQueue }) else { return deliver(reply) }
        // @unchecked Sendable: `deliver` does all its work inside `lock`.
        struct Handle: @unchecked Sendable { let protocolObject: StubURLProtocol }
        let handle = Handle(protocolObject: self)
        queue.async { handle.protocolObject.deliver(reply) }
    }

    /// The loading system's queue for `task` (not public API: found by reflection), or `nil`.
    private static func loadingQueue(of task: URLSessionTask?) -> DispatchQueue? {
        #if canImport(FoundationNetworking)
        guard let task else { return nil }
        var mirror: Mirror? = Mirror(reflecting: task)
        while let current = mirror {
            if let queue = current.children.first(where: { $0.label == "workQueue" })?.value as? DispatchQueue { return queue }
            mirror = current.superclassMirror
        }
        #endif
        return nil
    }

    /// The body: `httpBody` on Linux, `httpBodyStream` on Apple platforms.
    private static func body(of request: URLRequest) -> Data? {
        if let body = request.httpBody { return body }
        guard let stream = request.httpBodyStream else { return nil }
        stream.open()
        defer { stream.close() }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while stream.hasBytesAvailable {
            let n = stream.read(&buffer, maxLength: buffer.count)
            if n <= 0 { break }
            data.append(buffer, count: n)
        }
        return data
    }
}
