import Experimently
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The SDK's own floor under one explored schedule: a fresh `ExperimentationClient` doing what a
/// schedule of `Benchmarks/explore-three-holds-and-logout.json` asks of it, against a protocol that
/// answers every request at once, with no mock, runner, recording, quiescence or checks.
///
/// Per schedule: a client over a pooled session (as the explorer's `InProcessSessions`), three
/// lookups started together (a flag, an assignment, another flag of user-1), `clearCache()`, a flag
/// of user-2, then the three awaited: four requests. `store` on: each client has an in-memory offline
/// store (as the explorer's clients do), so every success is also persisted. The explorer's CPU per
/// schedule can be read against this (issue 15 section 3: 2,000 schedules/s on two cores is at
/// most 1 ms of CPU per schedule). Prints CPU per schedule (user + system, microseconds, from
/// `getrusage`) and schedules per second of wall time.
enum SDKFloorBench {
    /// `sdk-floor [SCHEDULES [CONCURRENCY]] [--no-store]`: defaults 720 schedules, 8 at once.
    static func run(arguments: [String]) async {
        let numbers = arguments.compactMap { Int($0) }
        let schedules = max(1, numbers.first ?? 720)
        let concurrency = max(1, numbers.dropFirst().first ?? 8)
        let withStore = !arguments.contains("--no-store")
        let sessions = (0..<concurrency).map { _ -> URLSession in
            let configuration = URLSessionConfiguration.ephemeral
            configuration.protocolClasses = [ContractEchoProtocol.self]
            configuration.urlCache = nil
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            return URLSession(configuration: configuration)
        }
        let startedCPU = SessionFloorBench.cpuSeconds()
        let started = DispatchTime.now().uptimeNanoseconds
        let failures = Counter()
        await withTaskGroup(of: Void.self) { group in
            var next = 0
            func launch(slot: Int) {
                guard next < schedules else { return }
                next += 1
                group.addTask {
                    if await !schedule(session: sessions[slot], withStore: withStore) { failures.increment() }
                }
            }
            for slot in 0..<concurrency { launch(slot: slot) }
            var slot = 0
            while await group.next() != nil {
                // A finished schedule frees some slot; the sessions are interchangeable.
                launch(slot: slot % concurrency)
                slot += 1
            }
        }
        let wall = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let cpu = SessionFloorBench.cpuSeconds() - startedCPU
        print(String(format: "sdk-floor: %d schedules x 4 requests (%d at once, offline store %@): %.0f us CPU per schedule, %.0f schedules/s (wall %.2f s, CPU %.2f s, %d failed)",
                     schedules, concurrency, withStore ? "in memory" : "off", cpu / Double(schedules) * 1e6, Double(schedules) / wall,
                     wall, cpu, failures.value))
    }

    /// One schedule's SDK work; `false` when a call failed.
    static func schedule(session: URLSession, withStore: Bool) async -> Bool {
        let store = withStore ? OfflineStore(defaults: InMemoryDefaults()) : nil
        let client = ExperimentationClient(config: SdkConfig(baseURL: "http://floor.invalid", apiKey: "sdk-contract-key"),
                                           session: session, offlineStore: store)
        let user1 = User(id: "user-1")
        async let f1 = client.evaluateFlag("sdk_contract_flag", user: user1)
        async let a1 = client.getAssignment("sdk_contract_ab", user: user1)
        async let f2 = client.evaluateFlag("report_layout", user: user1)
        client.clearCache()
        let other = try? await client.evaluateFlag("sdk_contract_flag", user: User(id: "user-2"))
        let results = ((try? await f1) != nil, (try? await a1) != nil, (try? await f2) != nil)
        client.close()
        return other != nil && results.0 && results.1 && results.2
    }
}

/// Answers a flag GET with an enabled flag and an assignment POST with a control assignment, at
/// once (the bodies the mock gives for the contract fixtures, CONTRACT.md section 2).
private final class ContractEchoProtocol: URLProtocol {
    static let flag = Data(#"{"key":"sdk_contract_flag","enabled":true,"config":null,"reason":"rollout"}"#.utf8)
    static let assignment = Data(#"{"experiment_key":"sdk_contract_ab","user_id":"user-1","variant_id":"c","variant_name":"control","is_control":true,"configuration":{"color":"blue"},"assigned":true,"reason":"assigned"}"#.utf8)

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let body = request.httpMethod == "POST" ? Self.assignment : Self.flag
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1",
                                       headerFields: ["Content-Type": "application/json", "Content-Length": String(body.count)])!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: body)
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}

/// A `UserDefaults` holding its values in memory, behind an `NSLock` (Linux's writes a property
/// list on every change); implements the calls `OfflineStore` makes.
private final class InMemoryDefaults: UserDefaults {
    // Thread-safe: `values` is only touched inside `lock`.
    private let lock = NSLock()
    private var values: [String: Any] = [:]

    init() { super.init(suiteName: nil)! }

    override func set(_ value: Any?, forKey defaultName: String) { lock.withLock { values[defaultName] = value } }
    override func object(forKey defaultName: String) -> Any? { lock.withLock { values[defaultName] } }
    override func data(forKey defaultName: String) -> Data? { lock.withLock { values[defaultName] as? Data } }
    override func removeObject(forKey defaultName: String) { _ = lock.withLock { values.removeValue(forKey: defaultName) } }
    override func dictionaryRepresentation() -> [String: Any] { lock.withLock { values } }
}
