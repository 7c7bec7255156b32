import Dispatch
import Experimently
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// SDK benchmarks: `hashUser` throughput on one core and the latency of a cached `evaluateFlag`.
///
/// Usage: `experimently-bench sdk [--hash-calls N] [--batches N] [--batch-size N]`. Prints one line
/// per figure; targets (from the task note): >= 3 million `hashUser`/s, cache hit < 2 us.
enum SDKBench {
    static func run(arguments: [String]) async {
        func option(_ name: String, _ fallback: Int) -> Int {
            guard let i = arguments.firstIndex(of: name), i + 1 < arguments.count, let v = Int(arguments[i + 1]), v > 0 else { return fallback }
            return v
        }
        let hashCalls = option("--hash-calls", 5_000_000)
        let batches = option("--batches", 201)
        let batchSize = option("--batch-size", 1000)

        // hashUser: varied inputs (1024 users x 16 keys), a checksum so nothing is optimized away.
        let users = (0..<1024).map { "user-\($0 &* 7919)" }
        let keys = (0..<16).map { "flag-key-\($0)" }
        var checksum = 0.0
        for i in 0..<10_000 { checksum += FeatureFlagEvaluator.hashUser(users[i & 1023], flagKey: keys[i & 15]) }  // warm-up
        let start = DispatchTime.now().uptimeNanoseconds
        for i in 0..<hashCalls {
            checksum += FeatureFlagEvaluator.hashUser(users[i & 1023], flagKey: keys[(i >> 10) & 15])
        }
        let hashNanos = Double(DispatchTime.now().uptimeNanoseconds - start)
        let perSecond = Double(hashCalls) / (hashNanos / 1e9)
        print(String(format: "sdk hashUser: %d calls in %.3f s = %.2f million calls/s (%.1f ns/call) checksum %.6f target >= 3 million/s %@",
                     hashCalls, hashNanos / 1e9, perSecond / 1e6, hashNanos / Double(hashCalls), checksum,
                     perSecond >= 3e6 ? "PASS" : "MISS"))

        // Cached evaluateFlag: one real request through an in-process URLProtocol primes the cache,
        // then every call is a hit. Median of per-batch means.
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [FlagEchoProtocol.self]
        let client = ExperimentationClient(config: SdkConfig(baseURL: "http://bench.invalid", apiKey: "bench"),
                                           session: URLSession(configuration: configuration), offlineStore: nil)
        let user = User(id: "bench-user")
        do {
            _ = try await client.evaluateFlag("bench-flag", user: user)
        } catch {
            FileHandle.standardError.write(Data("sdk bench: priming request failed: \(error)\n".utf8))
            exit(1)
        }
        var enabledCount = 0
        var perCall: [Double] = []
        perCall.reserveCapacity(batches)
        for _ in 0..<batches {
            let t0 = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<batchSize {
                if (try? await client.evaluateFlag("bench-flag", user: user))?.enabled == true { enabledCount += 1 }
            }
            perCall.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / Double(batchSize))
        }
        perCall.sort()
        let median = perCall[perCall.count / 2]
        print(String(format: "sdk evaluateFlag cache hit: median %.0f ns/call (p10 %.0f, p90 %.0f; %d batches x %d; hits %d; requests %d) target < 2000 ns %@",
                     median, perCall[perCall.count / 10], perCall[perCall.count * 9 / 10], batches, batchSize,
                     enabledCount, FlagEchoProtocol.requests.value, median < 2000 ? "PASS" : "MISS"))
    }
}

/// Answers every request with an enabled flag; counts requests so the bench can show the hits
/// were hits.
private final class FlagEchoProtocol: URLProtocol {
    static let requests = Counter()

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        Self.requests.increment()
        let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: nil)!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: Data(#"{"key":"bench-flag","enabled":true,"config":null,"reason":"rollout"}"#.utf8))
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}

/// A thread-safe counter.
final class Counter: @unchecked Sendable {
    // @unchecked Sendable: `count` is only read or written inside `lock`.
    private let lock = NSLock()
    private var count = 0

    func increment() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}
