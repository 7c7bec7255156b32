#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation

/// A loopback HTTP/1.1 server on the platform's sockets that serves any `MockRequestHandler`.
///
/// Lifecycle: `init` -> `start()` (binds, listens, returns the port) -> `shutdown()`; a server is
/// started at most once. One event-loop thread owns every socket (`epoll` on Linux, `poll`
/// elsewhere): it accepts, reads, parses with one `HTTP1ConnectionStateMachine` per connection
/// and writes without blocking. The async handler runs in a `Task` on Swift's cooperative pool
/// (a small pool, one thread per core); a delayed or held request is a parked record, not a
/// thread, and its answer is written when it arrives. Pipelined requests are answered in order.
/// Keep-alive follows RFC 9112 section 9.3 (HTTP/1.1 persistent unless `Connection: close`;
/// HTTP/1.0 always closes). `MockOutcome` maps to the wire as documented on `MockOutcome`.
/// Protocol errors (400, 408, 413, 431, 501, 505) are answered with `Connection: close` and a
/// `{"detail": "..."}` body, then that connection is closed; the server keeps serving others.
/// `SIGPIPE` is never raised (`MSG_NOSIGNAL` on Linux, `SO_NOSIGPIPE` on Apple platforms).
/// A client that closes or resets its connection while its request is with the handler cancels
/// that request's `Task` (`MockBackend` marks the request `cancelled` in history; a request a
/// `timeout` fault keeps silent then ends). A client that only half-closes (shuts its sending
/// side after a whole request) is answered, then closed: at the end of its stream the server
/// writes an interim `100 Continue` (RFC 9110 section 15.2), which a closed socket answers with
/// a reset (a hangup here, and the cancel), and a half-closed one accepts. Each request reaches the handler with its
/// ``MockConnectionInfo`` (listener, connection, place on it). A request dropped before any
/// answer on a reused keep-alive connection arms a short trap: the complete head of the same
/// request on another connection is a client transport's silent resend (libcurl resends the head
/// of a POST without its body) and is dispatched whole with the original body, so `MockBackend`
/// can give it the same drop and journal it as the same attempt. Every
/// accepted socket is answered or closed: over `maxConnections`, or when descriptors run out,
/// the newcomer gets a 503 and is closed.
public final class MockHTTPServer: @unchecked Sendable { // mutable state guarded by `condition`; loop state owned by the loop thread
    /// Settings for a server; times are in seconds, sizes in bytes.
    public struct Configuration: Sendable {
        /// The IPv4 address to bind (default `127.0.0.1`, loopback only).
        public var host: String
        /// The TCP port to bind; 0 (the default) picks an ephemeral port.
        public var port: UInt16
        /// Seconds allowed to receive one whole request (head and body) from its first byte,
        /// and for a new connection to send its first request; over it the server answers 408.
        public var readTimeout: Double
        /// Seconds an idle keep-alive connection (after a response) is kept before it is closed
        /// silently.
        public var idleTimeout: Double
        /// Seconds queued response bytes may wait for the peer to read them before the
        /// connection is dropped.
        public var writeTimeout: Double
        /// Seconds `shutdown()` waits for in-flight responses before closing connections by force.
        public var shutdownGracePeriod: Double
        /// Header and body size limits (431 and 413).
        public var limits: MockHTTPParserLimits
        /// The listen(2) backlog (default 4096; the kernel caps it at `somaxconn`).
        public var backlog: Int32
        /// Most connections open at once; a connection accepted over it is answered 503 and closed.
        public var maxConnections: Int
        /// Whether a connection carries more than one request (HTTP/1.1 keep-alive, the default).
        /// `false`: every response carries `Connection: close` and its connection closes after
        /// it, so each request arrives on a fresh connection, and a request dropped before any
        /// answer is never one a client's transport resends on its own (libcurl, Go's `net/http`
        /// and urllib3 resend only on a reused connection; Documentation/CrossSDK.md).
        public var keepAlive: Bool
        /// Most request-body bytes held in memory at once across all connections (default
        /// ``MockHTTPServer/defaultBodyBudgetBytes``, 96 MiB). When a request's head is complete its
        /// body is reserved against this budget (its `Content-Length`, or `limits.maxBodyBytes`
        /// when chunked, lowered to the decoded size once the body is complete) and released when
        /// the handler has answered (or the connection closes);
        /// a connection whose reservation does not fit stops being read (TCP flow control holds
        /// the client back) until it does, in arrival order. Raised to at least
        /// `limits.maxBodyBytes`, so that one request always fits (Documentation/CrossSDK.md).
        public var bodyBudgetBytes: Int

        /// Creates a configuration; see each property for units and defaults.
        public init(
            host: String = "127.0.0.1", port: UInt16 = 0, readTimeout: Double = 10, idleTimeout: Double = 60,
            writeTimeout: Double = 10, shutdownGracePeriod: Double = 5,
            limits: MockHTTPParserLimits = MockHTTPParserLimits(), backlog: Int32 = 4096, maxConnections: Int = 100_000,
            bodyBudgetBytes: Int = MockHTTPServer.defaultBodyBudgetBytes, keepAlive: Bool = true
        ) {
            self.keepAlive = keepAlive
            self.bodyBudgetBytes = bodyBudgetBytes
            self.host = host
            self.port = port
            self.readTimeout = readTimeout
            self.idleTimeout = idleTimeout
            self.writeTimeout = writeTimeout
            self.shutdownGracePeriod = shutdownGracePeriod
            self.limits = limits
            self.backlog = backlog
            self.maxConnections = maxConnections
        }
    }

    /// Counters since `start()`, read with `statistics`.
    public struct Statistics: Sendable, Equatable {
        /// Connections accepted.
        public var acceptedConnections = 0
        /// Connections currently open.
        public var openConnections = 0
        /// Requests passed to the handler.
        public var handledRequests = 0
        /// Requests answered with a protocol error status (400, 408, 413, 431, 501, 505).
        public var protocolErrors = 0
        /// Requests the client abandoned (closed or reset) while they were with the handler.
        public var cancelledRequests = 0
        /// Connections refused with 503 because `maxConnections` or the descriptor limit was reached.
        public var refusedConnections = 0
        /// Times a connection stopped being read because its body did not fit the body budget.
        public var budgetPauses = 0
        /// Connections currently paused for the body budget.
        public var pausedForBudget = 0
        /// Request-body bytes currently reserved against the body budget.
        public var reservedBodyBytes = 0
        /// The most request-body bytes reserved at once since `start()`.
        public var peakReservedBodyBytes = 0
    }

    /// The default ``Configuration/bodyBudgetBytes``: 96 MiB of request bodies in memory at once.
    public static let defaultBodyBudgetBytes = 96 << 20

    private enum LifeState { case idle, running, shuttingDown, stopped }

    /// The settings this server was created with.
    public let configuration: Configuration
    /// This server's number in the process, passed to the handler in each request's
    /// ``MockRequest/connection`` (``MockConnectionInfo/listener``).
    let serial = MockHTTPServer.serials.withLock { n -> Int in n += 1; return n }
    private static let serials = MockLocked(0)
    private let handler: any MockRequestHandler
    private let condition = NSCondition()
    // Guarded by `condition`.
    private var state: LifeState = .idle
    private var boundPort: UInt16?
    private var loopRunning = false
    private var loopShuttingDown = false
    private var stats = Statistics()
    // What `transportIdle` reads (guarded by `condition`): the listening socket while the loop
    // runs, the open connections' sockets, and the loop's busy state and pass count.
    private var probeListenFD: Int32 = -1
    private var probeFDs: Set<Int32> = []
    private var loopBusy = false
    private var loopPasses = 0
    /// Test seam (guarded by `condition`; set before `start()`): the event loop uses the
    /// `poll(2)` fallback even where epoll exists, so both readiness paths are tested on Linux.
    var forcesPoll = false
    /// Outcomes delivered by handler tasks, and the shutdown request, for the loop thread.
    private let inbox = MockLocked(Inbox())

    /// Creates a stopped server for `handler`; call `start()` to listen.
    public init(handler: any MockRequestHandler, configuration: Configuration = Configuration()) {
        self.handler = handler
        self.configuration = configuration
    }

    /// The bound TCP port while running (also after `shutdown()`), or `nil` before `start()`.
    public var port: UInt16? {
        condition.lock()
        defer { condition.unlock() }
        return boundPort
    }

    /// The origin URL `http://host:port` while running, or `nil` before `start()`.
    public var baseURL: URL? {
        guard let port else { return nil }
        return URL(string: "http://\(configuration.host):\(port)")
    }

    /// A snapshot of the counters.
    public var statistics: Statistics {
        condition.lock()
        defer { condition.unlock() }
        return stats
    }

    /// Binds, listens and starts the event loop.
    ///
    /// Returns the bound port (the ephemeral one when `configuration.port` is 0).
    /// Throws `MockHTTPServerError` `.alreadyStarted` on a second call, `.alreadyShutDown` after
    /// `shutdown()`, `.invalidAddress` when `host` is not an IPv4 address, `.socket` when a
    /// socket call fails (for example the port is in use), naming the call and errno.
    @discardableResult
    public func start() throws -> UInt16 {
        condition.lock()
        defer { condition.unlock() }
        switch state {
        case .idle: break
        case .running: throw MockHTTPServerError(.alreadyStarted, "start() called on a running server")
        case .shuttingDown, .stopped: throw MockHTTPServerError(.alreadyShutDown, "start() called after shutdown(); create a new server")
        }
        var address = sockaddr_in()
        guard inet_pton(AF_INET, configuration.host, &address.sin_addr) == 1 else {
            throw MockHTTPServerError(.invalidAddress, "host \(configuration.host.debugDescription) is not an IPv4 address")
        }
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = configuration.port.bigEndian
        #if canImport(Darwin)
        address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif

        let fd = socket(AF_INET, socketStreamType, 0)
        guard fd >= 0 else { throw MockHTTPServerError.socket("socket", errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let e = errno
            close(fd)
            throw MockHTTPServerError.socket("bind to \(configuration.host):\(configuration.port)", e)
        }
        guard listen(fd, max(configuration.backlog, Int32(SOMAXCONN))) == 0 else {
            let e = errno
            close(fd)
            throw MockHTTPServerError.socket("listen", e)
        }
        setNonBlocking(fd)
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else {
            let e = errno
            close(fd)
            throw MockHTTPServerError.socket("pipe", e)
        }
        setNonBlocking(pipeFDs[0])
        setNonBlocking(pipeFDs[1])
        let poller: SocketPoller
        do { poller = try SocketPoller(usingPoll: forcesPoll) } catch {
            close(fd); close(pipeFDs[0]); close(pipeFDs[1])
            throw error
        }
        boundPort = UInt16(bigEndian: actual.sin_port)
        inbox.withLock { $0.wakeFD = pipeFDs[1] }
        let loop = EventLoop(server: self, poller: poller, listenFD: fd, wakeRead: pipeFDs[0], wakeWrite: pipeFDs[1])
        probeListenFD = fd   // under `condition`, held here
        state = .running
        loopRunning = true
        let thread = Thread { loop.run() }
        thread.name = "MockHTTPServer.loop"
        thread.start()
        return boundPort!
    }

    /// Stops the server: stops accepting, closes idle connections, answers the requests already
    /// received (the last response on each connection says `Connection: close`) within
    /// `shutdownGracePeriod` seconds, then closes the rest by force and returns. A complete
    /// request that can no longer be answered (pipelined behind one the shutdown leaves
    /// unanswered, or still buffered at the forced close) is handed to the handler marked
    /// ``MockConnectionInfo/unanswerable`` so that it is journaled; `shutdown()` waits for
    /// those (at most five more seconds: journaling them is quick, but a loaded machine can delay
    /// the handler tasks well past one second).
    ///
    /// Blocks the calling thread for at most the grace period plus a short bounded drain; from
    /// async code the `async` overload is chosen, which waits on a separate thread. Calling it
    /// on a server that was never started just marks it stopped; calling it again is a no-op.
    /// Handlers still running after the grace period are cancelled and their outcome ignored.
    public func shutdown() {
        condition.lock()
        switch state {
        case .idle:
            state = .stopped
            condition.unlock()
            return
        case .shuttingDown, .stopped:
            condition.unlock()
            return
        case .running:
            state = .shuttingDown
        }
        condition.unlock()
        wake { $0.shutdownRequested = true }
        condition.lock()
        let end = Date(timeIntervalSinceNow: configuration.shutdownGracePeriod + 7)
        while loopRunning {
            if !condition.wait(until: end) { break }
        }
        state = .stopped
        condition.broadcast()
        condition.unlock()
    }

    /// The async form of `shutdown()`: the same steps, waited for on a separate thread so that
    /// no cooperative-pool thread is blocked.
    public func shutdown() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread { [self] in
                self.shutdown()
                continuation.resume()
            }
            thread.name = "MockHTTPServer.shutdown"
            thread.start()
        }
    }

    // MARK: - Loop plumbing

    /// What other threads hand to the loop thread (guarded by `inbox`'s lock).
    fileprivate struct Inbox {
        var outcomes: [(connection: UInt64, outcome: MockOutcome)] = []
        /// Unanswerable requests (see `dispatchUnanswerable`) whose handler returned.
        var unanswerableDone = 0
        var shutdownRequested = false
        var wakeFD: Int32 = -1
        var wakePending = false
    }

    /// Changes the inbox and wakes the loop thread (one byte per batch).
    fileprivate func wake(_ change: (inout Inbox) -> Void) {
        // The byte is written under the lock so that it never reaches a descriptor the loop
        // already closed (and the kernel reused): `loopFinished` clears `wakeFD` under it first.
        inbox.withLock { box in
            change(&box)
            guard !box.wakePending, box.wakeFD >= 0 else { return }
            box.wakePending = true
            var byte: UInt8 = 1
            _ = write(box.wakeFD, &byte, 1)
        }
    }

    /// Takes everything delivered since the last call (loop thread).
    fileprivate func takeInbox() -> Inbox {
        inbox.withLock { box in
            let taken = box
            box.outcomes = []
            box.unanswerableDone = 0
            box.wakePending = false
            return taken
        }
    }

    /// Whether nothing sent to this server waits unread right now: no connection waits to be
    /// accepted, no open connection has bytes the server has not read, and the event loop is
    /// not in the middle of handling what it read. Every request that arrived complete before
    /// the call has then been handed to the handler (``Statistics/handledRequests`` counts it).
    /// Loopback TCP puts a write into the peer's receive queue within the `send` call, so once
    /// a client's write returned, its request is either counted or seen here as unread. Read
    /// from any thread (a probe of the kernel's queues: `poll` on the listening socket,
    /// `FIONREAD` on each connection).
    public var transportIdle: Bool {
        func snapshot() -> (busy: Bool, passes: Int, listen: Int32, fds: Set<Int32>) {
            condition.lock()
            defer { condition.unlock() }
            return (loopBusy, loopPasses, probeListenFD, probeFDs)
        }
        let before = snapshot()
        guard !before.busy else { return false }
        if before.listen >= 0 {
            var p = pollfd(fd: before.listen, events: Int16(POLLIN), revents: 0)
            if poll(&p, 1, 0) > 0 && (p.revents & Int16(POLLIN)) != 0 { return false }
        }
        for fd in before.fds {
            var unread: Int32 = 0
            if ioctl(fd, UInt(FIONREAD), &unread) == 0 && unread > 0 { return false }
            // A hangup not handled yet: the reset a closed client sends back to the half-close
            // probe, which cancels its request when the loop reads it (the loop closes the
            // connection then, so a handled one is no longer listed).
            var p = pollfd(fd: fd, events: 0, revents: 0)
            if poll(&p, 1, 0) > 0 && (p.revents & Int16(POLLHUP | POLLERR)) != 0 { return false }
        }
        // The loop did not start a pass meanwhile (what it read then may not be counted yet).
        let after = snapshot()
        return !after.busy && after.passes == before.passes
    }

    fileprivate func probe(_ change: (inout Int32, inout Set<Int32>, inout Bool, inout Int) -> Void) {
        condition.lock()
        change(&probeListenFD, &probeFDs, &loopBusy, &loopPasses)
        condition.unlock()
    }

    fileprivate func count(_ change: (inout Statistics) -> Void) {
        condition.lock()
        change(&stats)
        condition.unlock()
    }

    /// Whether the event loop has begun shutting down: it stopped accepting and every connection
    /// knows, so a request that ends now (a hold the backend drops) still has the requests
    /// pipelined behind it journaled. Wait for this before dropping held requests at shutdown.
    public var shutdownBegun: Bool {
        condition.lock()
        defer { condition.unlock() }
        return loopShuttingDown || state == .stopped
    }

    fileprivate func loopBeganShutdown() {
        condition.lock()
        loopShuttingDown = true
        condition.broadcast()
        condition.unlock()
    }

    fileprivate func loopFinished() {
        inbox.withLock { $0.wakeFD = -1 }
        condition.lock()
        loopRunning = false
        condition.broadcast()
        condition.unlock()
    }

    fileprivate var handlerForLoop: any MockRequestHandler { handler }

    // MARK: - Responses

    /// Replaces an unsendable handler response (status outside 200...999, header names that are
    /// not tokens, values with CR, LF or NUL) by a 500 naming the problem; also reports whether
    /// the handler asked for `Connection: close`.
    static func validate(_ response: MockResponse) -> (MockResponse, wantsClose: Bool) {
        guard (200...999).contains(response.status) else {
            return (errorResponse(status: 500, detail: "mock handler returned invalid final status \(response.status)"), false)
        }
        var wantsClose = false
        for (name, value) in response.headers {
            if let problem = HeaderField.problem(name: name, value: value) {
                return (errorResponse(status: 500, detail: "mock handler returned an invalid header field: \(problem)"), false)
            }
            if name.lowercased() == "connection" && value.lowercased().contains("close") { wantsClose = true }
        }
        return (response, wantsClose)
    }

    /// The wire bytes of a response: status line, the handler's headers (minus any
    /// `Content-Length`, `Transfer-Encoding` and `Connection`, which the server owns), a
    /// `Content-Length` of the whole body, `Connection: close` when closing, then the body
    /// unless `headOnly`. 204 and 304 carry neither Content-Length nor body (RFC 9110 8.6).
    static func serialize(_ response: MockResponse, closing: Bool, headOnly: Bool) -> [UInt8] {
        var head = "HTTP/1.1 \(response.status) \(reasonPhrase(response.status))\r\n"
        for (name, value) in response.headers {
            switch name.lowercased() {
            case "content-length", "transfer-encoding", "connection": continue
            default: head += "\(name): \(value)\r\n"
            }
        }
        let bodiless = response.status == 204 || response.status == 304
        if !bodiless { head += "Content-Length: \(response.body.count)\r\n" }
        if closing { head += "Connection: close\r\n" }
        head += "\r\n"
        var bytes = Array(head.utf8)
        if !headOnly && !bodiless { bytes += response.body }
        return bytes
    }

    /// A `{"detail": "..."}` JSON response with `status`, the shape of the backend's errors
    /// (CONTRACT.md section 2).
    static func errorResponse(status: Int, detail: String) -> MockResponse {
        let body = (try? JSONSerialization.data(withJSONObject: ["detail": detail], options: [.sortedKeys])) ?? Data("{}".utf8)
        return MockResponse(status: status, headers: [("Content-Type", "application/json")], body: body)
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }
}

/// An error from `MockHTTPServer`'s lifecycle or socket setup.
///
/// `code` tells the kind; `description` names the call or misuse and, for socket failures, the
/// errno and its text.
public struct MockHTTPServerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kinds of server errors.
    public enum Code: Sendable, Equatable {
        /// `start()` was called on a running server.
        case alreadyStarted
        /// `start()` was called after `shutdown()`.
        case alreadyShutDown
        /// The configured host is not an IPv4 address.
        case invalidAddress
        /// A socket call failed (bind, listen, ...).
        case socket
    }

    /// The kind of error.
    public let code: Code
    /// What went wrong, naming the call and errno where there is one.
    public let description: String
    /// The errno of a failed socket call (`.socket`), else nil.
    public let errorNumber: Int32?

    init(_ code: Code, _ description: String, errorNumber: Int32? = nil) {
        self.code = code
        self.description = description
        self.errorNumber = errorNumber
    }

    static func socket(_ call: String, _ err: Int32) -> MockHTTPServerError {
        MockHTTPServerError(.socket, "\(call) failed: errno \(err) (\(String(cString: strerror(err))))", errorNumber: err)
    }
}

// MARK: - The event loop

/// The loop thread's world: the listening socket, every connection, the deadline heap.
/// Owned by the loop thread alone (created in `start()`, then only touched by `run()`).
private final class EventLoop: @unchecked Sendable { // all state confined to the loop thread
    private static let wakeID: UInt64 = 0
    private static let listenID: UInt64 = 1

    private let server: MockHTTPServer
    private let configuration: MockHTTPServer.Configuration
    private let handler: any MockRequestHandler
    private let poller: SocketPoller
    private var listenFD: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private var reserveFD: Int32
    private var connections: [UInt64: LoopConnection] = [:]
    private var nextID: UInt64 = 2
    private var deadlines = DeadlineHeap()
    private var shuttingDown = false
    private var graceEnd = Double.infinity
    /// Unanswerable requests still with the handler (the loop waits for them at shutdown, so
    /// that they are journaled before `shutdown()` returns).
    private var unanswerable = 0
    /// Set once the grace period ended and the remaining connections were closed by force;
    /// then the loop waits at most until `drainEnd` for unanswerable requests.
    private var forcedClose = false
    private var drainEnd = Double.infinity
    /// Requests dropped before any answer on a reused keep-alive connection, for
    /// `MockBackend.TransportRetryTrap.window` seconds: a complete head of the same request on
    /// another connection is the transport's silent resend (libcurl resends the head of a POST
    /// but not its body, so it never completes), dispatched whole with the original body.
    private var retryTraps: [(request: MockRequest, connection: UInt64, at: Double)] = []
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    /// Most bytes one `recv` takes from a connection that holds no body reservation (its head is
    /// still arriving), so that unreserved input stays small per connection.
    private static let unreservedReadBytes = 16 * 1024
    /// The body budget in bytes (`Configuration.bodyBudgetBytes`, at least one maximal body).
    private let bodyBudget: Int
    /// Bytes reserved now against `bodyBudget` (sum of the connections' `reserved`).
    private var bodyReserved = 0
    /// The most reserved since the last `malloc_trim`.
    private var reservedSinceTrim = 0
    /// Connections paused for the budget, in arrival order (closed ones are skipped lazily).
    private var budgetQueue: [UInt64] = []
    private var budgetQueueHead = 0

    init(server: MockHTTPServer, poller: SocketPoller, listenFD: Int32, wakeRead: Int32, wakeWrite: Int32) {
        self.server = server
        configuration = server.configuration
        handler = server.handlerForLoop
        bodyBudget = max(server.configuration.bodyBudgetBytes, server.configuration.limits.maxBodyBytes)
        self.poller = poller
        self.listenFD = listenFD
        self.wakeRead = wakeRead
        self.wakeWrite = wakeWrite
        reserveFD = open("/dev/null", O_RDONLY)
        poller.set(wakeRead, id: Self.wakeID, read: true, write: false, adding: true)
        poller.set(listenFD, id: Self.listenID, read: true, write: false, adding: true)
    }

    func run() {
        while true {
            let now = monotonicSeconds()
            var timeout: Int32 = -1
            var next = deadlines.peek ?? .infinity
            if shuttingDown { next = min(next, forcedClose ? drainEnd : graceEnd) }
            if next.isFinite { timeout = Int32(min(max(0, (next - now) * 1000), 60_000).rounded(.up)) }
            let ready = poller.wait(timeoutMilliseconds: timeout)
            server.probe { _, _, busy, passes in busy = true; passes += 1 }
            defer { server.probe { _, _, busy, _ in busy = false } }
            for event in ready {
                switch event.id {
                case Self.wakeID: drainWake()
                case Self.listenID: acceptAll()
                default:
                    guard let c = connections[event.id] else { continue }
                    if event.writable { flush(c) }
                    if c.isOpen && (event.readable || event.hangup) { readAvailable(c, hangup: event.hangup) }
                }
            }
            processInbox()
            fireDeadlines()
            if shuttingDown {
                if connections.isEmpty && unanswerable == 0 { break }
                let now = monotonicSeconds()
                if now >= graceEnd && !forcedClose {
                    forcedClose = true
                    drainEnd = now + 5
                    for c in Array(connections.values) {
                        // What arrived complete is still journaled, though never answered.
                        if c.isOpen { apply(c.machine.drainBufferedRequests(force: true), to: c) }
                        if c.task != nil { c.task?.cancel(); c.task = nil }
                        closeConnection(c)
                    }
                }
                if forcedClose && (unanswerable == 0 || now >= drainEnd) { break }
            }
        }
        server.probe { listen, fds, _, _ in listen = -1; fds = [] }
        if listenFD >= 0 { poller.remove(listenFD); close(listenFD) }
        if reserveFD >= 0 { close(reserveFD) }
        server.loopFinished()
        close(wakeRead)
        close(wakeWrite)
    }

    // MARK: Inbox and shutdown

    private func drainWake() {
        var bytes = [UInt8](repeating: 0, count: 256)
        while read(wakeRead, &bytes, bytes.count) > 0 {}
    }

    private func processInbox() {
        let inbox = server.takeInbox()
        let now = monotonicSeconds()
        // Shutdown first: an outcome taken in the same batch (a hold dropped at shutdown) must
        // find the connections shutting down, so the requests pipelined behind it are journaled.
        if inbox.shutdownRequested && !shuttingDown { beginShutdown(now: now) }
        for (id, outcome) in inbox.outcomes {
            guard let c = connections[id], c.task != nil else { continue }
            c.task = nil
            if outcome == .dropBeforeResponse, let request = c.inFlightRequest, let info = request.connection, info.index > 0, !shuttingDown,
               request.body.count <= MockBackend.TransportRetryTrap.maxBodyBytes {
                retryTraps.removeAll { now - $0.at > MockBackend.TransportRetryTrap.window }
                retryTraps.append((request, c.id, now))
                if retryTraps.count > MockBackend.TransportRetryTrap.limit { retryTraps.removeFirst() }
            }
            c.inFlightRequest = nil
            releaseBody(c)
            apply(c.machine.answered(outcome, now: now), to: c)
            admit(c)
        }
        unanswerable -= inbox.unanswerableDone
    }

    private func beginShutdown(now: Double) {
        shuttingDown = true
        defer { server.loopBeganShutdown() }
        graceEnd = now + configuration.shutdownGracePeriod
        poller.remove(listenFD)
        server.probe { listen, _, _, _ in listen = -1 }
        close(listenFD)
        listenFD = -1
        for c in Array(connections.values) {
            // Take what already arrived in the socket buffer, so it is answered too.
            if c.isOpen && !c.readPaused { readAvailable(c, hangup: false) }
            if c.isOpen { apply(c.machine.shutdown(now: now), to: c) }
        }
    }

    // MARK: Accepting

    private func acceptAll() {
        for _ in 0..<512 {
            guard listenFD >= 0 else { return }
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                switch errno {
                case EINTR, ECONNABORTED: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    refuseWithReserve()
                    return
                default: return // EAGAIN: nothing more waiting
                }
            }
            setNonBlocking(fd)
            configureAccepted(fd)
            if connections.count >= configuration.maxConnections || shuttingDown {
                refuse(fd)
                continue
            }
            let id = nextID
            nextID += 1
            let now = monotonicSeconds()
            let c = LoopConnection(id: id, fd: fd, machine: HTTP1ConnectionStateMachine(
                limits: configuration.limits, readTimeout: configuration.readTimeout, idleTimeout: configuration.idleTimeout, now: now,
                keepAlive: configuration.keepAlive))
            c.peer = Self.peerName(fd)
            connections[id] = c
            server.probe { _, fds, _, _ in fds.insert(fd) }
            poller.set(fd, id: id, read: true, write: false, adding: true)
            server.count { $0.acceptedConnections += 1; $0.openConnections += 1 }
            reschedule(c)
        }
    }

    /// Out of descriptors: frees the reserve, accepts the waiting connection, answers it 503
    /// and closes it, then takes the reserve back, so the backlog never spins the loop.
    private func refuseWithReserve() {
        guard reserveFD >= 0 else { return }
        close(reserveFD)
        reserveFD = -1
        let fd = accept(listenFD, nil, nil)
        if fd >= 0 { refuse(fd) }
        reserveFD = open("/dev/null", O_RDONLY)
    }

    private func refuse(_ fd: Int32) {
        let bytes = MockHTTPServer.serialize(MockHTTPServer.errorResponse(status: 503, detail: "mock server at its connection limit"),
                                             closing: true, headOnly: false)
        server.count { $0.refusedConnections += 1 } // before the close the client may observe
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, sendFlags | dontWait) }
        close(fd)
    }

    /// The IPv4 address and port of the connection's other end (`127.0.0.1:54321`), nil when
    /// `getpeername` fails or the address is not IPv4 (the server listens on IPv4 only).
    private static func peerName(_ fd: Int32) -> String? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard ok == 0, Int32(address.sin_family) == AF_INET else { return nil }
        let host = UInt32(bigEndian: address.sin_addr.s_addr)
        let port = UInt16(bigEndian: address.sin_port)
        return "\(host >> 24).\((host >> 16) & 255).\((host >> 8) & 255).\(host & 255):\(port)"
    }

    private func configureAccepted(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
        setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
    }

    // MARK: Reading and writing

    private func readAvailable(_ c: LoopConnection, hangup: Bool) {
        var budget = 4
        while c.isOpen && budget > 0 && !c.readPaused && !c.readEOF && !c.budgetWaiting {
            budget -= 1
            let limit = c.reserved > 0 ? readBuffer.count : Self.unreservedReadBytes
            let n = readBuffer.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, limit, dontWait) }
            if n > 0 {
                let now = monotonicSeconds()
                apply(c.machine.received(readBuffer[0..<n], now: now), to: c)
                if !retryTraps.isEmpty && c.isOpen { catchResend(c, now: now) }
                admit(c)
                if n < limit { break }
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            if n < 0 && errno == EINTR { continue }
            // End of stream (the peer closed or half-closed) or an error (a reset: it is gone).
            c.readEOF = true
            let now = monotonicSeconds()
            apply(c.machine.peerClosed(now: now, reset: n < 0), to: c)
            if c.isOpen { updateInterest(c) }
            return
        }
        if c.isOpen && hangup && (c.readPaused || c.readEOF || c.budgetWaiting) {
            // Both directions are gone: nothing more can be read or written.
            if c.task != nil { c.task?.cancel(); c.task = nil; server.count { $0.cancelledRequests += 1 } }
            closeConnection(c)
        }
    }

    /// When `c` holds the complete head of a request dropped on another (reused) connection
    /// moments ago, with no more body than that request had, it is the transport's silent
    /// resend: dispatched with the original body (the handler, `MockBackend`, journals it as the
    /// same attempt and drops it again).
    private func catchResend(_ c: LoopConnection, now: Double) {
        guard let head = c.machine.requestHeadAwaitingBody else { return }
        retryTraps.removeAll { now - $0.at > MockBackend.TransportRetryTrap.window }
        guard let i = retryTraps.firstIndex(where: { t in
            t.connection != c.id && t.request.method == head.method && t.request.target == head.target
                && t.request.headers.map(\.name) == head.headers.map(\.name) && t.request.headers.map(\.value) == head.headers.map(\.value)
                && t.request.body.starts(with: head.body)
        }) else { return }
        var resend = retryTraps.remove(at: i).request
        resend.connection = MockConnectionInfo(listener: server.serial, connection: c.id, index: c.dispatched)
        apply(c.machine.dispatchResend(resend), to: c)
    }

    private func apply(_ actions: [HTTP1ConnectionStateMachine.Action], to c: LoopConnection) {
        for action in actions {
            guard c.isOpen else { return }
            switch action {
            case .write(let bytes):
                if c.output.isEmpty { c.output = bytes; c.outputOffset = 0 } else { c.output += bytes }
            case .dispatch(let parsed):
                server.count { $0.handledRequests += 1 }
                let id = c.id
                let handler = self.handler
                let server = self.server
                var request = parsed.request
                request.peer = c.peer
                request.connection = MockConnectionInfo(listener: server.serial, connection: id, index: c.dispatched)
                c.dispatched += 1
                c.inFlightRequest = request
                // A body that arrived whole with its head (at most one unreserved read) is
                // charged too, over the budget if need be, so later bodies wait for it.
                if c.reserved == 0 && !request.body.isEmpty {
                    reserve(request.body.count, for: c)
                } else if c.reserved > request.body.count {
                    // A chunked body was reserved at the body limit while it arrived; now that it
                    // is whole only its size stays reserved, so that a request parked at the
                    // handler (a hold) keeps no other connection waiting for room it does not use.
                    shrinkReservation(of: c, to: request.body.count)
                }
                // A complete resend consumes its trap here (MockBackend recognises it).
                if !retryTraps.isEmpty { retryTraps.removeAll { $0.connection != id && $0.request == request } }
                c.task = Task {
                    let outcome = await handler.handle(request)
                    server.wake { $0.outcomes.append((id, outcome)) }
                }
            case .dispatchUnanswerable(let parsed):
                server.count { $0.handledRequests += 1 }
                let handler = self.handler
                let server = self.server
                var request = parsed.request
                request.connection = MockConnectionInfo(listener: server.serial, connection: c.id, index: c.dispatched, unanswerable: true)
                c.dispatched += 1
                unanswerable += 1
                Task {
                    _ = await handler.handle(request)
                    server.wake { $0.unanswerableDone += 1 }
                }
            case .cancelRequest:
                c.task?.cancel()
                c.task = nil
                server.count { $0.cancelledRequests += 1 }
            case .closeAfterWriting:
                c.afterFlush = .close
            case .lingerAfterWriting(let seconds):
                c.afterFlush = .linger(seconds)
            case .closeNow:
                closeConnection(c)
                return
            case .pauseReading:
                c.readPaused = true
                updateInterest(c)
            case .resumeReading:
                c.readPaused = false
                updateInterest(c)
            case .countProtocolError:
                server.count { $0.protocolErrors += 1 }
            }
        }
        if c.isOpen { flush(c) }
        if c.isOpen { reschedule(c) }
    }

    private func flush(_ c: LoopConnection) {
        while c.outputOffset < c.output.count {
            let n = c.output.withUnsafeBytes { send(c.fd, $0.baseAddress! + c.outputOffset, $0.count - c.outputOffset, sendFlags | dontWait) }
            if n > 0 {
                c.outputOffset += n
                continue
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                if c.writeDeadline == nil { c.writeDeadline = monotonicSeconds() + configuration.writeTimeout }
                if !c.wantsWrite { c.wantsWrite = true; updateInterest(c) }
                reschedule(c)
                return
            }
            // The peer is gone.
            if c.task != nil { c.task?.cancel(); c.task = nil; server.count { $0.cancelledRequests += 1 } }
            closeConnection(c)
            return
        }
        c.output = []
        c.outputOffset = 0
        c.writeDeadline = nil
        if c.wantsWrite { c.wantsWrite = false; updateInterest(c) }
        switch c.afterFlush {
        case .none: break
        case .close:
            closeConnection(c)
            return
        case .linger(let seconds):
            c.afterFlush = .none
            _ = shutdownSocket(c.fd, Int32(SHUT_WR))
            c.machine.lingerStarted(seconds: seconds, now: monotonicSeconds())
            if c.readEOF { closeConnection(c); return }
        }
        reschedule(c)
    }

    private func updateInterest(_ c: LoopConnection) {
        poller.set(c.fd, id: c.id, read: !c.readPaused && !c.readEOF && !c.budgetWaiting, write: c.wantsWrite, adding: false)
    }

    // MARK: Body budget

    /// Reserves the body of the request whose head `c` just completed, or pauses reading `c`
    /// (out of the poll read set) behind the connections already waiting when it does not fit.
    private func admit(_ c: LoopConnection) {
        guard c.isOpen, c.reserved == 0, !c.budgetWaiting, let need = c.machine.bodyBytesToReserve else { return }
        if budgetQueueHead == budgetQueue.count && bodyReserved + need <= bodyBudget {
            reserve(need, for: c)
            return
        }
        c.budgetWaiting = true
        c.budgetNeed = need
        budgetQueue.append(c.id)
        updateInterest(c)
        server.count { $0.budgetPauses += 1; $0.pausedForBudget += 1 }
    }

    private func reserve(_ bytes: Int, for c: LoopConnection) {
        c.reserved = bytes
        bodyReserved += bytes
        reservedSinceTrim = max(reservedSinceTrim, bodyReserved)
        let total = bodyReserved
        server.count { $0.reservedBodyBytes = total; $0.peakReservedBodyBytes = max($0.peakReservedBodyBytes, total) }
    }

    /// Gives `c`'s reservation back (its request was answered, or it closed) and resumes the
    /// waiting connections, first come first served, while their bodies fit.
    private func releaseBody(_ c: LoopConnection) {
        if c.budgetWaiting {
            c.budgetWaiting = false
            server.count { $0.pausedForBudget -= 1 }
        }
        shrinkReservation(of: c, to: 0)
    }

    /// Lowers `c`'s reservation to `bytes` (0: gives it all back) and resumes the waiting
    /// connections, first come first served, while their bodies fit.
    private func shrinkReservation(of c: LoopConnection, to bytes: Int) {
        guard c.reserved > bytes else { return }
        bodyReserved -= c.reserved - bytes
        c.reserved = bytes
        let total = bodyReserved
        server.count { $0.reservedBodyBytes = total }
        let now = monotonicSeconds()
        while budgetQueueHead < budgetQueue.count {
            guard let w = connections[budgetQueue[budgetQueueHead]], w.isOpen, w.budgetWaiting else {
                budgetQueueHead += 1
                continue
            }
            guard bodyReserved + w.budgetNeed <= bodyBudget else { break }
            budgetQueueHead += 1
            w.budgetWaiting = false
            server.count { $0.pausedForBudget -= 1 }
            reserve(w.budgetNeed, for: w)
            w.machine.restartRequestClock(now: now)
            updateInterest(w)
            reschedule(w)
        }
        if budgetQueueHead == budgetQueue.count {
            budgetQueue.removeAll(keepingCapacity: true)
            budgetQueueHead = 0
        } else if budgetQueueHead > 1024 && budgetQueueHead * 2 > budgetQueue.count {
            budgetQueue.removeFirst(budgetQueueHead)
            budgetQueueHead = 0
        }
        if bodyReserved == 0 && reservedSinceTrim >= 16 << 20 {
            // A burst of large bodies is over: give the freed heap back to the kernel (glibc
            // keeps it otherwise, and resident memory would stay at the burst's peak).
            reservedSinceTrim = 0
            if let trim = mallocTrim { _ = trim(0) }
        }
    }

    private func closeConnection(_ c: LoopConnection) {
        guard c.isOpen else { return }
        c.isOpen = false
        releaseBody(c)
        poller.remove(c.fd)
        server.probe { _, fds, _, _ in fds.remove(c.fd) }
        close(c.fd)
        connections[c.id] = nil
        server.count { $0.openConnections -= 1 }
    }

    // MARK: Deadlines

    private func reschedule(_ c: LoopConnection) {
        var next = c.machine.deadline
        if let w = c.writeDeadline { next = min(next ?? w, w) }
        guard next != c.scheduled else { return }
        c.scheduled = next
        c.version += 1
        if let next { deadlines.push(DeadlineHeap.Entry(at: next, id: c.id, version: c.version)) }
        // Stale entries (older versions) wait until their time; rebuild when they pile up, so
        // the heap stays proportional to the open connections whatever the request rate.
        if deadlines.count > 4 * connections.count + 1024 {
            deadlines = DeadlineHeap()
            for other in connections.values {
                if let at = other.scheduled { deadlines.push(DeadlineHeap.Entry(at: at, id: other.id, version: other.version)) }
            }
        }
    }

    private func fireDeadlines() {
        let now = monotonicSeconds()
        while let top = deadlines.peek, top <= now {
            let entry = deadlines.pop()
            guard let c = connections[entry.id], c.version == entry.version else { continue }
            c.scheduled = nil
            // Waiting for the budget is not a slow client: the clock restarts when it resumes.
            if c.budgetWaiting { continue }
            if let w = c.writeDeadline, now >= w {
                // The peer stopped reading our response.
                if c.task != nil { c.task?.cancel(); c.task = nil }
                closeConnection(c)
                continue
            }
            apply(c.machine.deadlinePassed(now: now), to: c)
            if c.isOpen { reschedule(c) }
        }
    }
}

/// One accepted connection as the loop tracks it (loop thread only).
private final class LoopConnection {
    enum AfterFlush { case none, close, linger(Double) }

    let id: UInt64
    let fd: Int32
    var machine: HTTP1ConnectionStateMachine
    var isOpen = true
    var output: [UInt8] = []
    var outputOffset = 0
    var afterFlush = AfterFlush.none
    var wantsWrite = false
    var readPaused = false
    var readEOF = false
    /// Request-body bytes reserved against the loop's body budget.
    var reserved = 0
    /// Paused until `budgetNeed` bytes fit the body budget (out of the poll read set).
    var budgetWaiting = false
    var budgetNeed = 0
    var writeDeadline: Double?
    /// Requests handed to the handler so far on this connection.
    var dispatched = 0
    /// The request with the handler, as handed over.
    var inFlightRequest: MockRequest?
    var task: Task<Void, Never>?
    var scheduled: Double?
    var version = 0
    /// The client's `address:port`, for the journal (`MockRequest.peer`).
    var peer: String?

    init(id: UInt64, fd: Int32, machine: HTTP1ConnectionStateMachine) {
        self.id = id
        self.fd = fd
        self.machine = machine
    }
}

/// A binary min-heap of connection deadlines with lazy deletion (stale entries carry an old
/// `version` and are skipped when popped).
private struct DeadlineHeap {
    struct Entry { var at: Double; var id: UInt64; var version: Int }
    private var items: [Entry] = []

    var peek: Double? { items.first?.at }
    var count: Int { items.count }

    mutating func push(_ entry: Entry) {
        items.append(entry)
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard items[i].at < items[parent].at else { break }
            items.swapAt(i, parent)
            i = parent
        }
    }

    mutating func pop() -> Entry {
        let top = items[0]
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var smallest = i
                if l < items.count && items[l].at < items[smallest].at { smallest = l }
                if r < items.count && items[r].at < items[smallest].at { smallest = r }
                if smallest == i { break }
                items.swapAt(i, smallest)
                i = smallest
            }
        }
        return top
    }
}

// MARK: - Internals

#if canImport(Darwin)
private let socketStreamType = SOCK_STREAM
private let sendFlags: Int32 = 0
private let dontWait: Int32 = MSG_DONTWAIT
#else
private let socketStreamType = Int32(SOCK_STREAM.rawValue)
private let sendFlags = Int32(MSG_NOSIGNAL)
private let dontWait = Int32(MSG_DONTWAIT)
#endif

/// glibc's `malloc_trim(3)` (not exported by the toolchain's Glibc module), looked up with
/// `dlsym`; nil on other C libraries.
private let mallocTrim: (@convention(c) (Int) -> Int32)? = {
    #if os(Linux)
    guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "malloc_trim") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    #else
    return nil
    #endif
}()

private func monotonicSeconds() -> Double {
    Double(DispatchTime.now().uptimeNanoseconds) / 1e9
}

private func setNonBlocking(_ fd: Int32) {
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
}

private func shutdownSocket(_ fd: Int32, _ how: Int32) -> Int32 {
    #if canImport(Darwin)
    return Darwin.shutdown(fd, how)
    #elseif canImport(Musl)
    return Musl.shutdown(fd, how)
    #else
    return Glibc.shutdown(fd, how)
    #endif
}
