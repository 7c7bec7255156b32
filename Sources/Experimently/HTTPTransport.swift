import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Builds and sends the SDK's requests (CONTRACT.md section 1) with the SDK's own deadline
/// (section 5.6) and cancellation that reaches the network task (section 5.3).
struct HTTPTransport: Sendable {
    let origin: String?
    let apiKey: String
    let timeout: TimeInterval
    let session: URLSession
    let clock: any ExperimentationClock
    /// Where the deadline task runs (the client's task executor seam).
    let tasks: SDKTaskSpawner

    init(config: SdkConfig, session: URLSession, clock: any ExperimentationClock, tasks: SDKTaskSpawner = SDKTaskSpawner(executor: nil)) {
        self.tasks = tasks
        var base = config.baseURL.trimmingCharacters(in: .whitespaces)
        while base.hasSuffix("/") { base.removeLast() }
        if let url = URL(string: base), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
           url.host != nil, url.query == nil {
            origin = base
        } else {
            origin = nil
        }
        self.apiKey = config.apiKey
        self.timeout = config.timeout
        self.session = session
        self.clock = clock
        self.baseURL = config.baseURL
    }

    private let baseURL: String

    /// Percent-encodes `text` so only RFC 3986 unreserved characters (`A-Z a-z 0-9 - . _ ~`) stay literal.
    static func encodeComponent(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count)
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(b)
            default:
                out.append(UInt8(ascii: "%")); out.append(hex[Int(b >> 4)]); out.append(hex[Int(b & 15)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// One path segment: ``encodeComponent(_:)``, except that a segment of only dots (`.` or
    /// `..`) has its dots written `%2E`. A literal dot segment is removed on the way (RFC 3986
    /// section 5.2.4; libcurl and proxies do), so a flag keyed `.` was asked as
    /// `/evaluate/` and `..` as `/feature-flags/`; `%2E` is the same character to the server
    /// (section 6.2.2.2) and is never removed.
    static func encodePathSegment(_ text: String) -> String {
        let encoded = encodeComponent(text)
        guard encoded == "." || encoded == ".." else { return encoded }
        return String(repeating: "%2E", count: encoded.utf8.count)
    }

    /// The request URL: origin + `path` (already encoded) + query pairs encoded and sorted by name.
    func url(path: String, query: [(String, String)]) throws(ExperimentationError) -> URL {
        guard let origin else {
            throw .invalidConfig("baseURL '\(baseURL)' is not an http(s) origin")
        }
        var text = origin + path
        if !query.isEmpty {
            text += "?" + query.sorted { $0.0 < $1.0 }
                .map { Self.encodeComponent($0.0) + "=" + Self.encodeComponent($0.1) }
                .joined(separator: "&")
        }
        guard let url = URL(string: text) else { throw .invalidConfig("cannot form a URL from '\(text)'") }
        return url
    }

    /// The loading system's own timeout, seconds, when the SDK runs on a clock other than
    /// `SystemClock`: a day, longer than any test waits.
    static let nonSystemClockWallTimeout: TimeInterval = 86_400

    /// Sends one request and returns the status and body of any HTTP answer (2xx or not).
    ///
    /// - Throws: `.networkError` for transport failures and for the SDK's own deadline
    ///   (`URLError(.timedOut)` after `timeout` seconds of `clock` time); `.cancelled` when the
    ///   calling task is cancelled (the network task is cancelled too); `.invalidConfig`.
    func send(method: String, path: String, query: [(String, String)] = [], body: Data? = nil)
        async throws(ExperimentationError) -> (status: Int, body: Data) {
        var request = URLRequest(url: try url(path: path, query: query))
        request.httpMethod = method
        request.httpBody = body
        // The deadline follows `clock` (CONTRACT.md section 5, defect 6: the SDK enforces its own
        // deadline). With the wall clock the loading system's timeout is the same number, a second
        // line of defence; with any other clock (a test's virtual clock) it must never fire first,
        // or a held request would end on the wall clock at a virtual instant before its deadline.
        request.timeoutInterval = clock is SystemClock ? timeout : Self.nonSystemClockWallTimeout
        request.setValue(apiKey, forHTTPHeaderField: "X-API-Key")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")

        let exchange = Exchange()
        let result: Result<(Int, Data), ExperimentationError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<(Int, Data), ExperimentationError>, Never>) in
                let session = self.session, request = request
                // Made by the exchange only when the call has not ended yet: a call cancelled
                // before it could start creates no network task (one made and never resumed
                // stayed in the session's registry for the session's life).
                let makeTask = { () -> URLSessionDataTask in
                    session.dataTask(with: request) { data, response, error in
                        if let error {
                            exchange.finish(.failure(.networkError(error)))
                        } else if let http = response as? HTTPURLResponse {
                            exchange.finish(.success((http.statusCode, data ?? Data())))
                        } else {
                            exchange.finish(.failure(.networkError(URLError(.badServerResponse))))
                        }
                    }
                }
                // The deadline is an instant fixed now: a timer task that runs late (a loaded
                // machine, a virtual clock moved before it ran) still fires `timeout` seconds
                // after the send, not after it started (CI saw a late timer sleep 10 s past an
                // advance that had already passed the deadline).
                let clock = self.clock, due = clock.now().addingTimeInterval(timeout)
                let deadline = tasks.spawn {
                    do { try await clock.sleep(until: due) } catch { return }
                    exchange.finish(.failure(.networkError(URLError(.timedOut))))
                }
                exchange.start(continuation: continuation, makeTask: makeTask, deadline: deadline, delegateQueue: session.delegateQueue)
            }
        } onCancel: {
            exchange.finish(.failure(.cancelled))
        }
        return try result.get()
    }
}

/// One request's rendezvous: the first of answer, deadline and cancellation wins; the loser paths
/// cancel the network task and the deadline timer.
private final class Exchange: @unchecked Sendable {
    // @unchecked Sendable: every field is read and written only inside `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Result<(Int, Data), ExperimentationError>, Never>?
    private var task: URLSessionDataTask?
    private var deadline: Task<Void, Never>?
    private var delegateQueue: OperationQueue?
    private var early: Result<(Int, Data), ExperimentationError>?
    private var done = false

    /// Starts the exchange: `makeTask` is called (inside the lock, so no `finish` can slip
    /// between the check and the task's registration) only when the call has not already ended.
    func start(continuation: CheckedContinuation<Result<(Int, Data), ExperimentationError>, Never>,
               makeTask: () -> URLSessionDataTask, deadline: Task<Void, Never>, delegateQueue: OperationQueue) {
        lock.lock()
        if let early {
            // Cancelled before the task could start: no network task is made.
            lock.unlock()
            deadline.cancel()
            continuation.resume(returning: early)
            return
        }
        let task = makeTask()
        self.continuation = continuation
        self.task = task
        self.deadline = deadline
        self.delegateQueue = delegateQueue
        lock.unlock()
        task.resume()
    }

    func finish(_ result: Result<(Int, Data), ExperimentationError>) {
        lock.lock()
        guard !done else { lock.unlock(); return }
        done = true
        guard let continuation else {
            early = result
            lock.unlock()
            return
        }
        self.continuation = nil
        let task = self.task, deadline = self.deadline, delegateQueue = self.delegateQueue
        lock.unlock()
        deadline?.cancel()
        if case .failure = result, let task { Self.cancel(task, from: delegateQueue) }
        continuation.resume(returning: result)
    }

    /// Cancels the network task. On Linux the cancellation is sent from the session's delegate
    /// queue, where completion handlers run: FoundationNetworking's `cancel()` marks a running
    /// task cancelling and fails it later on the session's work queue, while a completion already
    /// on its way (an answer delivered just before) removes the task from the session's registry
    /// once its handler returned; when that removal overtakes the cancellation's failure, the
    /// process traps ("Trying to access a behaviour for a task that in not in the registry",
    /// TaskRegistry.swift:118, seen in SingleFlightTests under load). On the serial delegate queue
    /// the cancel either comes after the completion (the task is completed: nothing to do) or
    /// queues its failure before the completion can queue the removal. Elsewhere: at once.
    private static func cancel(_ task: URLSessionDataTask, from delegateQueue: OperationQueue?) {
        #if canImport(FoundationNetworking)
        if let delegateQueue {
            // @unchecked Sendable: URLSessionTask is thread-safe; `cancel()` may be called from any thread.
            struct Handle: @unchecked Sendable { let task: URLSessionDataTask }
            let handle = Handle(task: task)
            delegateQueue.addOperation { handle.task.cancel() }
            return
        }
        #endif
        task.cancel()
    }
}
