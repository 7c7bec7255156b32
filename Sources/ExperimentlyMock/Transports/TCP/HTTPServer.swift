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
/// started at most once. Each accepted connection gets one thread that reads, parses
/// (`MockHTTPRequestParser`), calls the async handler in a `Task` and writes, so handler calls
/// never block the cooperative pool and there is one thread per connection, not per request.
/// Pipelined requests are answered in order. Keep-alive follows RFC 9112 section 9.3 (HTTP/1.1
/// persistent unless `Connection: close`; HTTP/1.0 always closes). `MockOutcome` maps to the
/// wire as documented on `MockOutcome`. Protocol errors (400, 408, 413, 431, 501, 505) are
/// answered with `Connection: close` and a `{"detail": "..."}` body, then that connection is
/// closed; the server keeps serving others. `SIGPIPE` is never raised (`MSG_NOSIGNAL` on
/// Linux, `SO_NOSIGPIPE` on Apple platforms).
public final class MockHTTPServer: @unchecked Sendable { // mutable state guarded by `condition`
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
        /// Seconds one blocking write may take before the connection is dropped.
        public var writeTimeout: Double
        /// Seconds `shutdown()` waits for in-flight responses before closing connections by force.
        public var shutdownGracePeriod: Double
        /// Header and body size limits (431 and 413).
        public var limits: MockHTTPParserLimits
        /// The listen(2) backlog.
        public var backlog: Int32

        /// Creates a configuration; see each property for units and defaults.
        public init(
            host: String = "127.0.0.1", port: UInt16 = 0, readTimeout: Double = 10, idleTimeout: Double = 60,
            writeTimeout: Double = 10, shutdownGracePeriod: Double = 5,
            limits: MockHTTPParserLimits = MockHTTPParserLimits(), backlog: Int32 = 128
        ) {
            self.host = host
            self.port = port
            self.readTimeout = readTimeout
            self.idleTimeout = idleTimeout
            self.writeTimeout = writeTimeout
            self.shutdownGracePeriod = shutdownGracePeriod
            self.limits = limits
            self.backlog = backlog
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
    }

    private enum LifeState { case idle, running, shuttingDown, stopped }

    /// The settings this server was created with.
    public let configuration: Configuration
    private let handler: any MockRequestHandler
    private let condition = NSCondition()
    // Everything below is guarded by `condition`.
    private var state: LifeState = .idle
    private var listenFD: Int32 = -1
    private var wakeRead: Int32 = -1
    private var wakeWrite: Int32 = -1
    private var boundPort: UInt16?
    private var acceptLoopRunning = false
    private var connections: [Int: Connection] = [:]
    private var nextConnectionID = 0
    private var stats = Statistics()

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

    /// Binds, listens and starts accepting connections.
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
        guard listen(fd, configuration.backlog) == 0 else {
            let e = errno
            close(fd)
            throw MockHTTPServerError.socket("listen", e)
        }
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
        _ = fcntl(pipeFDs[1], F_SETFL, fcntl(pipeFDs[1], F_GETFL) | O_NONBLOCK)
        listenFD = fd
        wakeRead = pipeFDs[0]
        wakeWrite = pipeFDs[1]
        boundPort = UInt16(bigEndian: actual.sin_port)
        state = .running
        acceptLoopRunning = true
        let wakeFD = pipeFDs[0]
        let thread = Thread { [self] in self.acceptLoop(listenFD: fd, wakeFD: wakeFD) }
        thread.name = "MockHTTPServer.accept"
        thread.start()
        return boundPort!
    }

    /// Stops the server: stops accepting, closes idle connections, lets in-flight responses
    /// finish within `shutdownGracePeriod` seconds, then closes the rest by force and returns.
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
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1) // level-triggered: every poller sees it from now on
        let graceEnd = Date(timeIntervalSinceNow: configuration.shutdownGracePeriod)
        while !(connections.isEmpty && !acceptLoopRunning) {
            if !condition.wait(until: graceEnd) { break }
        }
        if !connections.isEmpty {
            for connection in connections.values { connection.forceClose() }
            let drainEnd = Date(timeIntervalSinceNow: 2)
            while !(connections.isEmpty && !acceptLoopRunning) {
                if !condition.wait(until: drainEnd) { break }
            }
        }
        if connections.isEmpty && !acceptLoopRunning {
            close(wakeRead)
            close(wakeWrite)
            wakeRead = -1
            wakeWrite = -1
        } // else a stuck thread still polls the pipe: leave it open rather than race a reused fd.
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

    // MARK: - Accepting

    private func acceptLoop(listenFD: Int32, wakeFD: Int32) {
        defer {
            condition.lock()
            close(listenFD)
            self.listenFD = -1
            acceptLoopRunning = false
            condition.broadcast()
            condition.unlock()
        }
        while true {
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[1].revents != 0 { return }
            guard fds[0].revents != 0 else { continue }
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                switch errno {
                case EINTR, EAGAIN, ECONNABORTED: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: back off briefly (woken early by shutdown).
                    var wake = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
                    _ = poll(&wake, 1, 50)
                    continue
                default: return
                }
            }
            configureAccepted(fd)
            condition.lock()
            guard state == .running else {
                condition.unlock()
                close(fd)
                return
            }
            let id = nextConnectionID
            nextConnectionID += 1
            let connection = Connection(id: id, fd: fd)
            connections[id] = connection
            stats.acceptedConnections += 1
            stats.openConnections += 1
            condition.unlock()
            let thread = Thread { [self] in self.serve(connection, wakeFD: wakeFD) }
            thread.name = "MockHTTPServer.connection.\(id)"
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    private func configureAccepted(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        #if canImport(Darwin)
        setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        let seconds = max(0.001, configuration.writeTimeout)
        var tv = timeval(tv_sec: .init(seconds.rounded(.down)), tv_usec: .init((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    private var isShuttingDown: Bool {
        condition.lock()
        defer { condition.unlock() }
        return state != .running
    }

    private func finished(_ connection: Connection) {
        condition.lock()
        connection.closeOwned()
        connections[connection.id] = nil
        stats.openConnections -= 1
        condition.broadcast()
        condition.unlock()
    }

    private func count(_ keyPath: WritableKeyPath<Statistics, Int>) {
        condition.lock()
        stats[keyPath: keyPath] += 1
        condition.unlock()
    }

    // MARK: - One connection

    private func serve(_ connection: Connection, wakeFD: Int32) {
        defer { finished(connection) }
        let io = SocketIO(fd: connection.fd, wakeFD: wakeFD)
        var parser = MockHTTPRequestParser(limits: configuration.limits)
        var servedAny = false
        var idleSince = monotonicSeconds()
        var requestStart: Double?
        while true {
            switch parser.next() {
            case .sendContinue:
                guard io.writeAll(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return }

            case .error(let error):
                count(\.protocolErrors)
                let response = Self.errorResponse(status: error.status, detail: error.reason)
                if io.writeAll(Self.serialize(response, closing: true, headOnly: false)) { io.lingeringClose(seconds: 2) }
                return

            case .request(let parsed):
                guard let outcome = runHandler(parsed.request, on: connection) else { return }
                switch outcome {
                case .respond(let response):
                    let (valid, wantsClose) = Self.validate(response)
                    let closing = !parsed.keepAlive || wantsClose || isShuttingDown
                    let bytes = Self.serialize(valid, closing: closing, headOnly: parsed.request.method == "HEAD")
                    guard io.writeAll(bytes) else { return }
                    if closing {
                        io.lingeringClose(seconds: 2)
                        return
                    }
                case .dropBeforeResponse:
                    return
                case .dropMidBody(let response, let bodyBytes):
                    let (valid, _) = Self.validate(response)
                    var head = Self.serialize(valid, closing: true, headOnly: true)
                    head += valid.body.prefix(max(0, min(bodyBytes, valid.body.count)))
                    _ = io.writeAll(head)
                    return
                case .timeout:
                    connection.setBusy(false)
                    io.silentUntilClosed()
                    return
                }
                connection.setBusy(false)
                servedAny = true
                idleSince = monotonicSeconds()
                requestStart = parser.isIdle ? nil : idleSince

            case .needMore:
                let deadline: Double
                let answers408: Bool
                if let requestStart {
                    deadline = requestStart + configuration.readTimeout
                    answers408 = true
                } else if !servedAny {
                    deadline = idleSince + configuration.readTimeout
                    answers408 = true
                } else {
                    deadline = idleSince + configuration.idleTimeout
                    answers408 = false
                }
                switch io.waitReadable(until: deadline) {
                case .shutdown, .failed:
                    return
                case .timedOut:
                    if answers408 {
                        count(\.protocolErrors)
                        let detail = requestStart == nil
                            ? "no request received within \(configuration.readTimeout) s"
                            : "request not received completely within \(configuration.readTimeout) s"
                        let response = Self.errorResponse(status: 408, detail: detail)
                        if io.writeAll(Self.serialize(response, closing: true, headOnly: false)) { io.lingeringClose(seconds: 1) }
                    }
                    return
                case .readable:
                    switch io.read() {
                    case .bytes(let chunk):
                        parser.feed(chunk)
                        if requestStart == nil && !parser.isIdle { requestStart = monotonicSeconds() }
                    case .endOfStream:
                        if case .error(let error) = parser.finish() {
                            count(\.protocolErrors)
                            let response = Self.errorResponse(status: error.status, detail: error.reason)
                            _ = io.writeAll(Self.serialize(response, closing: true, headOnly: false))
                        }
                        return
                    case .retry:
                        continue
                    case .failed:
                        return
                    }
                }
            }
        }
    }

    /// Runs the async handler in a Task and blocks this connection thread (not a pool thread)
    /// until it answers; returns `nil` when shutdown abandoned the request.
    private func runHandler(_ request: MockRequest, on connection: Connection) -> MockOutcome? {
        let slot = OutcomeSlot()
        count(\.handledRequests)
        let handler = self.handler
        let task = Task {
            let outcome = await handler.handle(request)
            slot.deliver(outcome)
        }
        guard connection.setBusy(true, slot: slot, task: task) else {
            task.cancel()
            return nil
        }
        return slot.wait()
    }

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
            let nameOK = !name.isEmpty && name.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && !"()<>@,;:\\\"/[]?={}".utf8.contains($0) }
            let valueOK = value.utf8.allSatisfy { $0 != 0x0D && $0 != 0x0A && $0 != 0 }
            guard nameOK && valueOK else {
                return (errorResponse(status: 500, detail: "mock handler returned an invalid header field \(name.debugDescription)"), false)
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

    init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    static func socket(_ call: String, _ err: Int32) -> MockHTTPServerError {
        MockHTTPServerError(.socket, "\(call) failed: errno \(err) (\(String(cString: strerror(err))))")
    }
}

// MARK: - Internals

#if canImport(Darwin)
private let socketStreamType = SOCK_STREAM
private let sendFlags: Int32 = 0
#else
private let socketStreamType = Int32(SOCK_STREAM.rawValue)
private let sendFlags = Int32(MSG_NOSIGNAL)
#endif

private func monotonicSeconds() -> Double {
    Double(DispatchTime.now().uptimeNanoseconds) / 1e9
}

/// One accepted connection as the server tracks it.
private final class Connection: @unchecked Sendable { // mutable state guarded by `lock`
    let id: Int
    let fd: Int32
    private let lock = NSLock()
    private var busy = false
    private var forced = false
    private var closed = false
    private var slot: OutcomeSlot?
    private var task: Task<Void, Never>?

    init(id: Int, fd: Int32) {
        self.id = id
        self.fd = fd
    }

    /// Marks a handler call in flight (or done); returns false when shutdown already forced
    /// this connection closed.
    @discardableResult
    func setBusy(_ value: Bool, slot: OutcomeSlot? = nil, task: Task<Void, Never>? = nil) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if forced { return false }
        busy = value
        self.slot = slot
        self.task = task
        return true
    }

    /// Called by shutdown after the grace period: abandons the handler call and shuts the socket
    /// down so blocked reads, polls and writes return.
    func forceClose() {
        lock.lock()
        forced = true
        let slot = self.slot
        let task = self.task
        if !closed { _ = shutdownSocket(fd, Int32(SHUT_RDWR)) }
        lock.unlock()
        task?.cancel()
        slot?.abandon()
    }

    /// Closes the descriptor; only the connection's own thread calls this, once.
    func closeOwned() {
        lock.lock()
        closed = true
        close(fd)
        lock.unlock()
    }
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

/// Hands a handler's outcome from its Task to the blocked connection thread.
private final class OutcomeSlot: @unchecked Sendable { // `outcome` and `abandoned` guarded by `lock`
    private let lock = NSLock()
    private let semaphore = DispatchSemaphore(value: 0)
    private var outcome: MockOutcome?
    private var abandoned = false

    func deliver(_ value: MockOutcome) {
        lock.lock()
        outcome = value
        lock.unlock()
        semaphore.signal()
    }

    func abandon() {
        lock.lock()
        abandoned = true
        lock.unlock()
        semaphore.signal()
    }

    func wait() -> MockOutcome? {
        semaphore.wait()
        lock.lock()
        defer { lock.unlock() }
        return abandoned ? nil : outcome
    }
}

/// Blocking socket reads and writes for one connection thread, with poll(2) deadlines and the
/// server's shutdown pipe.
private struct SocketIO {
    enum Wait { case readable, timedOut, shutdown, failed }
    enum Read { case bytes(ArraySlice<UInt8>), endOfStream, retry, failed }

    let fd: Int32
    let wakeFD: Int32
    private let buffer = ReadBuffer()

    init(fd: Int32, wakeFD: Int32) {
        self.fd = fd
        self.wakeFD = wakeFD
    }

    /// Waits until the socket is readable, the monotonic `deadline` (seconds) passes, or shutdown.
    func waitReadable(until deadline: Double?) -> Wait {
        while true {
            var timeout: Int32 = -1
            if let deadline {
                let remaining = deadline - monotonicSeconds()
                if remaining <= 0 { return .timedOut }
                timeout = Int32(min(remaining * 1000, Double(Int32.max)).rounded(.up))
            }
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                return .failed
            }
            if fds[1].revents != 0 { return .shutdown }
            if fds[0].revents != 0 { return .readable }
            if ready == 0, let deadline, monotonicSeconds() >= deadline { return .timedOut }
        }
    }

    func read() -> Read {
        let n = buffer.bytes.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 { return .bytes(buffer.bytes[0..<n]) }
        if n == 0 { return .endOfStream }
        if errno == EINTR || errno == EAGAIN { return .retry }
        return .failed
    }

    /// Writes every byte (blocking, bounded by SO_SNDTIMEO); false when the peer is gone.
    func writeAll(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, sendFlags) }
            if n > 0 {
                offset += n
            } else if n < 0 && errno == EINTR {
                continue
            } else {
                return false
            }
        }
        return true
    }

    /// Half-closes our side and drains what the client still sends (at most `seconds` and
    /// 1 MiB) so the response is not destroyed by a reset (RFC 9112 section 9.6).
    func lingeringClose(seconds: Double) {
        _ = shutdownSocket(fd, Int32(SHUT_WR))
        let deadline = monotonicSeconds() + seconds
        var drained = 0
        while drained < 1 << 20 {
            guard case .readable = waitReadable(until: deadline) else { return }
            guard case .bytes(let chunk) = read() else { return }
            drained += chunk.count
        }
    }

    /// The `.timeout` outcome: say nothing, discard input, until the client closes or shutdown.
    func silentUntilClosed() {
        while true {
            guard case .readable = waitReadable(until: nil) else { return }
            switch read() {
            case .bytes, .retry: continue
            case .endOfStream, .failed: return
            }
        }
    }
}

/// A reusable receive buffer (64 KiB) owned by one connection thread.
private final class ReadBuffer {
    var bytes = [UInt8](repeating: 0, count: 64 * 1024)
}
