import Dispatch
import ExperimentlyMock
import Foundation

/// Mock backend benchmarks (in-process round trip; loopback TCP server for wrk).
enum MockBench {

    /// The handler `mock-serve` serves: the real backend with the reference fixtures, its rate
    /// limit raised so a benchmark measures serving, not 429s. `--static` serves a fixed answer
    /// instead (the transport's own ceiling).
    static func makeHandler(static fixed: Bool) -> any MockRequestHandler {
        if fixed { return BenchFlagHandler() }
        var fixtures = Fixtures.sdkContract
        fixtures.rateLimit = RateLimit(limit: 1_000_000_000, windowSeconds: 60)
        return MockBackend(fixtures: fixtures)
    }

    /// Serves `makeHandler()` over loopback HTTP/1.1 until SIGINT or SIGTERM.
    ///
    /// Arguments: `--port N` (default 8080; 0 picks an ephemeral port), `--host A` (default
    /// 127.0.0.1). Prints `listening on http://HOST:PORT` once bound; exits 64 on bad arguments
    /// and 1 when the port cannot be bound.
    static func serve(arguments: [String]) async {
        var port: UInt16 = 8080
        var host = "127.0.0.1"
        var fixed = false
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            switch flag {
            case "--port":
                guard let value = rest.popFirst(), let parsed = UInt16(value) else { fail(64, "--port needs a number 0...65535") }
                port = parsed
            case "--static":
                fixed = true
            case "--host":
                guard let value = rest.popFirst() else { fail(64, "--host needs an IPv4 address") }
                host = value
            default:
                fail(64, "unknown argument \(flag.debugDescription); usage: experimently-bench mock-serve [--port N] [--host A] [--static]")
            }
        }
        let server = MockHTTPServer(handler: makeHandler(static: fixed), configuration: .init(host: host, port: port))
        let bound: UInt16
        do { bound = try server.start() } catch { fail(1, "mock-serve: \(error)") }
        print("listening on http://\(host):\(bound)")
        fflush(nil)

        let signal = await waitForTerminationSignal()
        print("mock-serve: \(signal), shutting down; \(server.statistics.handledRequests) requests on \(server.statistics.acceptedConnections) connections")
        await server.shutdown()
        fflush(nil)
    }

    /// Suspends until SIGINT or SIGTERM arrives and returns its name.
    private static func waitForTerminationSignal() async -> String {
        await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            let once = ResumeOnce(continuation)
            let queue = DispatchQueue(label: "mock-serve.signals")
            for (number, name) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
                Foundation.signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { once.resume(name) }
                source.resume()
                once.keep(source)
            }
        }
    }

    private static func fail(_ code: Int32, _ message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(code)
    }
}

/// Resumes a continuation at most once and keeps the signal sources alive.
private final class ResumeOnce: @unchecked Sendable { // all fields guarded by `lock`
    private let lock = NSLock()
    private var continuation: CheckedContinuation<String, Never>?
    private var sources: [any DispatchSourceSignal] = []

    init(_ continuation: CheckedContinuation<String, Never>) { self.continuation = continuation }

    func keep(_ source: any DispatchSourceSignal) { lock.withLock { sources.append(source) } }

    func resume(_ value: String) {
        let c: CheckedContinuation<String, Never>? = lock.withLock {
            defer { continuation = nil }
            return continuation
        }
        c?.resume(returning: value)
    }
}

/// A stand-in for the mock backend: answers the contract flag evaluation route only.
///
/// `GET /api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=...` -> 200
/// `{"key":"sdk_contract_flag","enabled":true,"config":null,"reason":"rollout"}` (the fixture flag
/// is ACTIVE with rollout 100, CONTRACT.md section 2); a missing `user_id` -> 422; any other path -> 404.
struct BenchFlagHandler: MockRequestHandler {
    private static let body = Data(#"{"key":"sdk_contract_flag","enabled":true,"config":null,"reason":"rollout"}"#.utf8)
    private static let json = [(name: "Content-Type", value: "application/json")]

    func handle(_ request: MockRequest) async -> MockOutcome {
        guard request.method == "GET", request.rawPath == "/api/v1/feature-flags/evaluate/sdk_contract_flag" else {
            return .respond(MockResponse(status: 404, headers: Self.json, body: Data(#"{"detail":"Not Found"}"#.utf8)))
        }
        let hasUser = (request.rawQuery ?? "").split(separator: "&").contains { $0.hasPrefix("user_id=") && $0.count > 8 }
        guard hasUser else {
            return .respond(MockResponse(status: 422, headers: Self.json,
                body: Data(#"{"detail":[{"type":"missing","loc":["query","user_id"],"msg":"Field required"}]}"#.utf8)))
        }
        return .respond(MockResponse(status: 200, headers: Self.json, body: Self.body))
    }
}
