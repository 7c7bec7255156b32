import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The registry that routes in-process loads to the right ``MockBackend`` when several live in
/// one process.
///
/// On Linux, headers from `URLSessionConfiguration.httpAdditionalHeaders` do not reach
/// `URLProtocol.startLoading` (measured with Swift 6.3.1), so the route is carried by the host:
/// each backend answers at `http://<token>.mock.invalid` (``MockBackend/baseURL``; `.invalid` is
/// reserved by RFC 2606, so nothing real is ever reached). The session also sends the private
/// header `X-Experimently-Mock-Route: <token>`, used when present (Apple platforms); it is
/// stripped from history.
enum MockRouting {
    private struct WeakBackend: @unchecked Sendable {
        // @unchecked Sendable: only stored in and read from `table`, inside its lock.
        weak var backend: MockBackend?
    }

    private static let table = MockLocked<(next: Int, backends: [String: WeakBackend])>((1, [:]))

    static let hostSuffix = ".mock.invalid"

    static func newToken() -> String {
        table.withLock { t in
            defer { t.next += 1 }
            return "backend-\(t.next)"
        }
    }

    static func register(_ backend: MockBackend) {
        table.withLock { $0.backends[backend.routeToken] = WeakBackend(backend: backend) }
    }

    static func unregister(_ token: String) {
        _ = table.withLock { $0.backends.removeValue(forKey: token) }
    }

    static func backend(token: String) -> MockBackend? {
        table.withLock { $0.backends[token]?.backend }
    }

    /// The backend a request is routed to: by the private header, else by the host; nil when none.
    static func backend(for request: URLRequest) -> MockBackend? {
        backend(fields: request.allHTTPHeaderFields ?? [:], host: request.url?.host)
    }

    /// ``backend(for:)`` with the request's header fields and URL host already read
    /// (`startLoading` reads them once for routing and for the ``MockRequest``).
    static func backend(fields: [String: String], host: String?) -> MockBackend? {
        // The header's name is matched without ASCII case, as `value(forHTTPHeaderField:)` does.
        if let token = fields.first(where: { $0.key.equalsIgnoringASCIICase(MockBackend.routingHeader) })?.value,
           let b = backend(token: token) { return b }
        guard let host else { return nil }
        // The usual host (ASCII, no upper-case letter: as baseURL spells it) is matched by its
        // bytes, without a lower-cased copy; any other goes the general way.
        let bytes = host.utf8
        if !bytes.contains(where: { $0 >= 0x80 || $0 &- 0x41 < 26 }) {
            guard bytes.count > hostSuffixBytes.count, bytes.suffix(hostSuffixBytes.count).elementsEqual(hostSuffixBytes) else { return nil }
            return backend(token: String(decoding: host.utf8.dropLast(hostSuffixBytes.count), as: UTF8.self))
        }
        let lowered = host.lowercased()
        if lowered.hasSuffix(hostSuffix) {
            return backend(token: String(lowered.dropLast(hostSuffix.count)))
        }
        return nil
    }

    private static let hostSuffixBytes = Array(hostSuffix.utf8)
}

extension MockBackend {
    /// A session configuration whose only protocol is ``MockURLProtocol``: no sockets, nothing
    /// leaves the process. Requests must go to ``baseURL`` (see ``MockURLProtocol`` for routing).
    public func makeURLSessionConfiguration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [MockURLProtocol.self]
        configuration.httpAdditionalHeaders = [MockBackend.routingHeader: routeToken]
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        return configuration
    }

    /// A ready `URLSession` routed in-process to this backend (requests to ``baseURL``).
    public func makeURLSession() -> URLSession { URLSession(configuration: makeURLSessionConfiguration()) }
}

/// The in-process transport: a `URLProtocol` that hands each load to a ``MockBackend`` and
/// plays its ``MockOutcome`` back through the URL loading system.
///
/// It claims every request of a session it is installed in; a request that routes to no live
/// backend fails with `URLError(.cannotFindHost)` naming the expected host. Outcomes:
/// a response is delivered whole; `dropBeforeResponse` fails with `.networkConnectionLost`;
/// `dropMidBody` delivers the head and a prefix of the body, then fails with
/// `.networkConnectionLost`; `timeout` fails with `.timedOut` after the request's
/// `timeoutInterval` seconds of the backend's clock (URLSession on Linux never times out a
/// custom protocol itself). A cancelled load (`stopLoading`) is marked `cancelled` in history;
/// its request keeps running in the backend (a hold stays releasable), but nothing more is
/// delivered to the client.
public final class MockURLProtocol: URLProtocol {
    /// Per-load state shared between `startLoading`, the answering task and `stopLoading`.
    private final class Load: @unchecked Sendable {
        // @unchecked Sendable: `stopped` and `seq` are guarded by `mutex`; `protocolInstance` and
        // `client` are set once in startLoading before the task starts and only read afterwards.
        // Recursive: a delivery runs under the lock (see `finish`), and the loading system may
        // call back into `stopLoading` from inside a delivery. A plain recursive pthread mutex:
        // one per load, and Foundation's NSRecursiveLock costs several allocations to make.
        private let mutex: UnsafeMutablePointer<pthread_mutex_t>
        private var stopped = false
        var seq: Int?
        let protocolInstance: URLProtocol
        let client: (any URLProtocolClient)?

        init(_ p: URLProtocol) {
            protocolInstance = p
            client = p.client
            mutex = .allocate(capacity: 1)
            var attributes = pthread_mutexattr_t()
            pthread_mutexattr_init(&attributes)
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
            pthread_mutex_init(mutex, &attributes)
            pthread_mutexattr_destroy(&attributes)
        }

        deinit {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
        }

        /// Marks the load stopped; returns the seq to mark cancelled, or nil when already finished.
        func stop() -> Int? {
            pthread_mutex_lock(mutex); defer { pthread_mutex_unlock(mutex) }
            if stopped { return nil }
            stopped = true
            return seq
        }

        /// Runs `deliver` unless the load was stopped; marks it finished.
        ///
        /// The delivery runs while holding the lock `stopLoading` takes: on Linux, a task being
        /// cancelled calls `stopLoading` on the session's queue and then drops the task from the
        /// session's registry, and a client call racing with that crashes inside
        /// FoundationNetworking ("a task that is not in the registry"). Under the lock, either the
        /// delivery completes before the cancellation goes on, or `stopLoading` came first and
        /// nothing is delivered.
        func finish(_ deliver: () -> Void) {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            guard !stopped else { return }
            stopped = true
            if let task = protocolInstance.task, task.state != .running { return }
            deliver()
        }
    }

    private var load: Load?

    /// Claims every request: the protocol is only installed in mock sessions.
    public override class func canInit(with request: URLRequest) -> Bool { true }

    /// Returns the request unchanged.
    public override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    /// Hands the request to its backend and delivers the outcome asynchronously.
    public override func startLoading() {
        let load = Load(self)
        self.load = load
        let request = self.request
        // Read once: routing and the MockRequest both need them (each read copies the dictionary).
        let fields = request.allHTTPHeaderFields ?? [:]
        let requestURL = request.url
        let host = requestURL?.host
        guard let backend = MockRouting.backend(fields: fields, host: host) else {
            let host = host ?? "<none>"
            load.finish {
                load.client?.urlProtocol(load.protocolInstance, didFailWithError: URLError(.cannotFindHost, userInfo: [
                    NSLocalizedDescriptionKey: "no live MockBackend for host '\(host)'; send requests to backend.baseURL (http://<token>\(MockRouting.hostSuffix))",
                ]))
            }
            return
        }
        let mockRequest = MockURLProtocol.mockRequest(from: request, url: requestURL, host: host, fields: fields)
        let ticket = backend.begin(mockRequest)
        load.seq = ticket.seq
        let url = requestURL ?? backend.baseURL
        if let outcome = backend.completeImmediately(ticket) {
            load.finish { MockURLProtocol.deliver(outcome, url: url, load: load) }
            return
        }
        let timeout = request.timeoutInterval
        let queue = MockURLProtocol.loadingQueue(of: task)
        if let task { backend.noteClientLoad(seq: ticket.seq, probe: TaskCancellationProbe(task: task)) }
        Task {
            let outcome = await backend.complete(ticket, transport: .inProcess(timeoutSeconds: timeout))
            backend.forgetClientLoad(seq: ticket.seq)
            if let queue {
                queue.async { load.finish { MockURLProtocol.deliver(outcome, url: url, load: load) } }
            } else {
                load.finish { MockURLProtocol.deliver(outcome, url: url, load: load) }
            }
        }
    }

    /// The queue the loading system runs this task's work on (where it called `startLoading`).
    ///
    /// On Linux, FoundationNetworking's protocol client reads and writes the session's task
    /// registry without a lock, on the assumption that it is only called from the session's work
    /// queue (as its own protocols are). A delivery from any other thread races with tasks being
    /// created and completed and crashes the process, so late answers (after a hold, a delay, a
    /// timeout) are sent back through that queue. It is not public API, so it is found by
    /// reflection; `nil` (deliver from the answering task) where there is no such property.
    static func loadingQueue(of task: URLSessionTask?) -> DispatchQueue? {
        #if canImport(FoundationNetworking)
        guard let task else { return nil }
        let type = ObjectIdentifier(Swift.type(of: task))
        // Where the property sits (superclass depth, child offset) is found once per task class
        // and then read directly: walking every child's label and value was most of the cost.
        if let place = workQueuePlaces.withLock({ $0[type] }) {
            guard let place else { return nil }
            var mirror: Mirror? = Mirror(reflecting: task)
            for _ in 0..<place.depth { mirror = mirror?.superclassMirror }
            if let children = mirror?.children, place.offset < children.count {
                let child = children[children.index(children.startIndex, offsetBy: place.offset)]
                if child.label == "workQueue", let queue = child.value as? DispatchQueue { return queue }
            }
        }
        var mirror: Mirror? = Mirror(reflecting: task)
        var depth = 0
        while let current = mirror {
            if let offset = current.children.firstIndex(where: { $0.label == "workQueue" }).map({ current.children.distance(from: current.children.startIndex, to: $0) }),
               let queue = current.children[current.children.index(current.children.startIndex, offsetBy: offset)].value as? DispatchQueue {
                workQueuePlaces.withLock { $0[type] = (depth, offset) }
                return queue
            }
            mirror = current.superclassMirror
            depth += 1
        }
        workQueuePlaces.withLock { $0[type] = .some(nil) }
        #endif
        return nil
    }

    /// Per task class: where `loadingQueue(of:)` found `workQueue` (superclass depth, child
    /// offset), or `nil` when the class has none. Behind a `MockLocked` (tasks start on many queues).
    private static let workQueuePlaces = MockLocked<[ObjectIdentifier: (depth: Int, offset: Int)?]>([:])

    /// Marks the load cancelled in history; the backend keeps the request (a hold stays releasable).
    public override func stopLoading() {
        guard let load, let seq = load.stop(), let backend = MockRouting.backend(for: request) else { return }
        backend.markCancelled(seq: seq)
        backend.forgetClientLoad(seq: seq)
    }

    /// Builds the transport-independent request: raw target, headers sorted by name (the
    /// loading system keeps them in a dictionary), body from `httpBody` or `httpBodyStream`.
    /// `value` without leading and trailing optional whitespace (SP, HTAB; RFC 9110 section 5.6.3),
    /// as a header field value travels (the TCP server trims the same bytes).
    public static func withoutOWS(_ value: String) -> String {
        let ows: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = value.unicodeScalars.first, let last = value.unicodeScalars.last, ows(first) || ows(last) else { return value }
        let scalars = value.unicodeScalars.drop(while: ows).reversed().drop(while: ows).reversed()
        var out = String.UnicodeScalarView()
        out.append(contentsOf: scalars)
        return String(out)
    }

    static func mockRequest(from request: URLRequest) -> MockRequest {
        mockRequest(from: request, url: request.url, host: request.url?.host, fields: request.allHTTPHeaderFields ?? [:])
    }

    /// ``mockRequest(from:)`` with the request's URL, its host and its header fields already read.
    static func mockRequest(from request: URLRequest, url: URL?, host: String?, fields: [String: String]) -> MockRequest {
        let target = url.map { requestTarget(of: $0) } ?? "/"
        // One array of the final size (the dictionary is not copied to add Host), then sorted in place.
        var rows: [(lower: String, name: String, value: String)] = []
        rows.reserveCapacity(fields.count + 1)
        var hasHost = false
        for (name, value) in fields {
            if name.equalsIgnoringASCIICase("Host") { hasHost = true }
            // Lower-cased once per field, not once per comparison.
            // The field value without leading and trailing SP and HTAB, as HTTP/1.1 carries it (RFC
            // 9110 section 5.5) and the TCP server reads it: an API key " k" was a 401 over TCP and
            // accepted in process (an eightieth outside tester, F5).
            if !name.equalsIgnoringASCIICase(MockBackend.routingHeader) { rows.append((name.lowercased(), name, Self.withoutOWS(value))) }
        }
        // An HTTP/1.1 client always sends Host (RFC 9112 section 3.2); the loading system does not
        // pass it to custom protocols, so it is rebuilt from the URL as a socket client would send it.
        if !hasHost, let host {
            rows.append(("host", "Host", host + (url?.port.map { ":\($0)" } ?? "")))
        }
        rows.sort { $0.lower < $1.lower }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(rows.count)
        for row in rows { headers.append((row.name, row.value)) }
        var body = request.httpBody ?? Data()
        if body.isEmpty, let stream = request.httpBodyStream {
            stream.open()
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let n = stream.read(&buffer, maxLength: buffer.count)
                if n <= 0 { break }
                body.append(contentsOf: buffer[0..<n])
            }
            stream.close()
        }
        return MockRequest(method: request.httpMethod ?? "GET", target: target, headers: headers, body: body)
    }

    /// The origin-form request target of `url` (RFC 9112 section 3.2.1): the percent-encoded
    /// path (`/` when empty) and `?query` when present, the fragment dropped. Read from the URL's
    /// text directly (URLComponents costs several microseconds per request); URLComponents is the
    /// fallback for anything but `scheme://authority...`.
    static func requestTarget(of url: URL) -> String {
        let string = url.absoluteString
        let text = string.utf8
        if let colon = text.firstIndex(of: UInt8(ascii: ":")),
           text[colon...].starts(with: "://".utf8) {
            let authority = text.index(colon, offsetBy: 3)
            let end = text[authority...].firstIndex { $0 == UInt8(ascii: "#") } ?? text.endIndex
            let start = text[authority..<end].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? end
            let rest = String(Substring(text[start..<end]))
            if rest.isEmpty { return "/" }
            return rest.utf8.first == UInt8(ascii: "?") ? "/" + rest : rest
        }
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "/" }
        var target = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let q = components.percentEncodedQuery { target += "?" + q }
        return target
    }

    private static func httpResponse(_ r: MockResponse, url: URL) -> HTTPURLResponse? {
        // Sized once; one hash lookup per header (a repeated name is joined with ", ").
        var fields: [String: String] = Dictionary(minimumCapacity: r.headers.count + 1)
        for h in r.headers {
            if let i = fields.index(forKey: h.name) { fields.values[i] += ", " + h.value } else { fields[h.name] = h.value }
        }
        fields["Content-Length"] = String(r.body.count)
        return HTTPURLResponse(url: url, statusCode: r.status, httpVersion: "HTTP/1.1", headerFields: fields)
    }

    private static func deliver(_ outcome: MockOutcome, url: URL, load: Load) {
        let p = load.protocolInstance
        guard let client = load.client else { return }
        switch outcome {
        case .respond(let r):
            guard let response = httpResponse(r, url: url) else { client.urlProtocol(p, didFailWithError: URLError(.badServerResponse)); return }
            client.urlProtocol(p, didReceive: response, cacheStoragePolicy: .notAllowed)
            if !r.body.isEmpty { client.urlProtocol(p, didLoad: r.body) }
            client.urlProtocolDidFinishLoading(p)
        case .dropBeforeResponse:
            client.urlProtocol(p, didFailWithError: URLError(.networkConnectionLost))
        case .dropMidBody(let r, let bytes):
            if let response = httpResponse(r, url: url) {
                client.urlProtocol(p, didReceive: response, cacheStoragePolicy: .notAllowed)
                if bytes > 0 { client.urlProtocol(p, didLoad: r.body.prefix(bytes)) }
            }
            client.urlProtocol(p, didFailWithError: URLError(.networkConnectionLost))
        case .timeout:
            client.urlProtocol(p, didFailWithError: URLError(.timedOut))
        }
    }
}

/// Reads whether a load's `URLSessionTask` is being cancelled (`state == .canceling`): the task
/// sets that state inside `cancel()`, before the loading system calls `stopLoading` on its queue.
private final class TaskCancellationProbe: ClientCancellationProbe, @unchecked Sendable {
    // @unchecked Sendable: `task` is weak and only read; `URLSessionTask.state` is thread-safe.
    weak var task: URLSessionTask?
    init(task: URLSessionTask) { self.task = task }
    var clientIsCancelling: Bool { task?.state == .canceling }
}
