import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import ExperimentlyMock

/// The in-process mock round trip, measured against the floor of a bare echo `URLProtocol`
/// (NOTES-linux-foundation.md item 4): both go URLSession -> URLProtocol -> URLSession in the
/// same run, so the difference is the mock's own cost (routing, history, fault script, model).
enum MockInProcessBench {
    /// A protocol that answers every request with a fixed 200 JSON body, synchronously.
    final class EchoURLProtocol: URLProtocol {
        static let body = Data(#"{"config":null,"enabled":true,"key":"sdk_contract_flag","reason":"rollout"}"#.utf8)
        override class func canInit(with request: URLRequest) -> Bool { true }
        override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
        override func startLoading() {
            let response = HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1",
                                           headerFields: ["Content-Type": "application/json", "Content-Length": String(Self.body.count)])!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocol(self, didLoad: Self.body)
            client?.urlProtocolDidFinishLoading(self)
        }
        override func stopLoading() {}
    }

    /// A protocol that answers every request with the bytes the mock gave one flag GET (status,
    /// every header, body), synchronously: the floor for delivering the mock's very answer, so
    /// that the difference to the mock is its own work and not the loading system's cost of the
    /// headers the contract asks for (CONTRACT.md section 2: the `X-RateLimit-*` trio).
    final class ReplayURLProtocol: URLProtocol {
        /// The answer replayed, set once before the measurement; behind an `NSLock`.
        static let answer = ReplayAnswer()
        override class func canInit(with request: URLRequest) -> Bool { true }
        override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
        override func startLoading() {
            let (status, headers, body) = Self.answer.value
            let response = HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
            client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            client?.urlProtocol(self, didLoad: body)
            client?.urlProtocolDidFinishLoading(self)
        }
        override func stopLoading() {}
    }

    /// The status, headers and body ``ReplayURLProtocol`` answers with (an `NSLock` guards them).
    final class ReplayAnswer: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: (Int, [String: String], Data) = (200, [:], Data())
        var value: (Int, [String: String], Data) {
            get { lock.withLock { stored } }
            set { lock.withLock { stored = newValue } }
        }
    }

    /// Median of `samples` (microseconds).
    static func median(_ samples: [Double]) -> Double {
        let s = samples.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    static func micros(_ body: () async throws -> Void) async rethrows -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try await body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1000
    }

    /// Runs the benchmark and prints one line per measurement plus the difference; `only`
    /// (`mock`, `echo` or `replay`) runs that round trip alone and prints its median, for
    /// `perf stat` of one kind (CPU time and context switches per request).
    static func run(only: String? = nil, block: Int = 1) async {
        let iterations = 5000, warmup = 500
        var fixtures = Fixtures.sdkContract
        fixtures.rateLimit = RateLimit(limit: 1_000_000, windowSeconds: 60)
        let backend = MockBackend(fixtures: fixtures)
        let mockSession = backend.makeURLSession()
        let echoConfiguration = URLSessionConfiguration.ephemeral
        echoConfiguration.protocolClasses = [EchoURLProtocol.self]
        // Same cache settings as the mock's session, so the floor differs only in the protocol.
        echoConfiguration.urlCache = nil
        echoConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let echoSession = URLSession(configuration: echoConfiguration)

        func flagRequest(_ base: URL, _ i: Int) -> URLRequest {
            var r = URLRequest(url: URL(string: base.absoluteString + "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=user-\(i)")!)
            r.setValue(Fixtures.sdkContractAPIKey, forHTTPHeaderField: "X-API-Key")
            r.setValue("application/json", forHTTPHeaderField: "Accept")
            return r
        }
        let echoBase = URL(string: "http://echo.invalid")!
        let replayConfiguration = URLSessionConfiguration.ephemeral
        replayConfiguration.protocolClasses = [ReplayURLProtocol.self]
        replayConfiguration.urlCache = nil
        replayConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let replaySession = URLSession(configuration: replayConfiguration)
        var mock: [Double] = [], echo: [Double] = [], replay: [Double] = []
        mock.reserveCapacity(iterations)
        echo.reserveCapacity(iterations)
        replay.reserveCapacity(iterations)
        do {
            // The mock's own answer to a flag GET, replayed by the third floor.
            let (body, first) = try await mockSession.data(for: flagRequest(backend.baseURL, -1))
            if let http = first as? HTTPURLResponse {
                var headers: [String: String] = [:]
                for (name, value) in http.allHeaderFields { if let n = name as? String, let v = value as? String { headers[n] = v } }
                ReplayURLProtocol.answer.value = (http.statusCode, headers, body)
            }
            // Interleave the three (rotating which goes first) so machine load affects all alike:
            // `block` requests of one kind, then of the next (1: every request alternates).
            for round in 0..<((warmup + iterations + block - 1) / block) {
                for k in 0..<3 {
                    let kind = (round + k) % 3
                    if let only, only != ["mock", "echo", "replay"][kind] { continue }
                    for i in (round * block)..<min((round + 1) * block, warmup + iterations) {
                        switch kind {
                        case 0:
                            let m = try await micros { _ = try await mockSession.data(for: flagRequest(backend.baseURL, i)) }
                            if i >= warmup { mock.append(m) }
                        case 1:
                            let e = try await micros { _ = try await echoSession.data(for: flagRequest(echoBase, i)) }
                            if i >= warmup { echo.append(e) }
                        default:
                            let r = try await micros { _ = try await replaySession.data(for: flagRequest(echoBase, i)) }
                            if i >= warmup { replay.append(r) }
                        }
                    }
                }
            }
        } catch {
            print("mock-inprocess: request failed: \(error)")
            return
        }
        // The model alone (no transport): BackendModel.respond on the same request.
        var model = BackendModel(fixtures: fixtures)
        var modelSamples: [Double] = []
        let t0 = Date()
        for i in 0..<iterations {
            let req = MockRequest(method: "GET", target: "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=user-\(i)",
                                  headers: [("X-Api-Key", Fixtures.sdkContractAPIKey)])
            let start = DispatchTime.now().uptimeNanoseconds
            _ = model.respond(to: req, now: t0)
            modelSamples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
        }
        if let only {
            let samples = only == "mock" ? mock : only == "echo" ? echo : replay
            print(String(format: "mock-inprocess %@ only: %d requests, median round trip %.1f us", only, iterations, median(samples)))
            _ = backend.shutdown()
            return
        }
        let m = median(mock), e = median(echo), mm = median(modelSamples)
        print(String(format: "mock-inprocess: %d requests (blocks of %d), median round trip  mock %.1f us, echo floor %.1f us, mock cost %.1f us, ratio %.2fx (target < 100 us)", iterations, block, m, e, m - e, m / max(e, 1e-9)))
        let r = median(replay)
        print(String(format: "mock-inprocess: the mock's own answer replayed (same status, headers, body): floor %.1f us, mock cost %.1f us, ratio %.2fx", r, m - r, m / max(r, 1e-9)))
        print(String(format: "mock-inprocess: BackendModel.respond alone median %.1f us; history entries %d", mm, backend.history.count))
        _ = backend.shutdown()
    }

    /// `MockBackend.handle` alone (history entry, fault script, model, record; no transport) in a
    /// tight loop of N flag GETs (default 100,000): the mock's own cost per request, for profiling.
    static func handleOnly(arguments: [String]) async {
        let n = arguments.first.flatMap(Int.init) ?? 100_000
        var fixtures = Fixtures.sdkContract
        fixtures.rateLimit = RateLimit(limit: 1_000_000_000, windowSeconds: 60)
        let backend = MockBackend(fixtures: fixtures)
        let requests = (0..<1000).map { i in
            MockRequest(method: "GET", target: "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=user-\(i)",
                        headers: [("Accept", "application/json"), ("X-Api-Key", Fixtures.sdkContractAPIKey)])
        }
        var samples: [Double] = []
        samples.reserveCapacity(n)
        for i in 0..<n {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = await backend.handle(requests[i % requests.count])
            samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
        }
        print(String(format: "mock-handle: %d x flag GET: median %.2f us per MockBackend.handle", n, median(samples)))
        _ = backend.shutdown()
    }

    /// `BackendModel.respond` alone in a tight loop (N requests, default 200,000), for profiling
    /// (`perf record experimently-bench mock-model`): prints the median per request for a flag GET
    /// and an assign POST.
    static func modelOnly(arguments: [String]) {
        let n = arguments.first.flatMap(Int.init) ?? 200_000
        var fixtures = Fixtures.sdkContract
        fixtures.rateLimit = RateLimit(limit: 1_000_000_000, windowSeconds: 60)
        var model = BackendModel(fixtures: fixtures)
        let t0 = Date()
        let flags = (0..<1000).map { i in
            MockRequest(method: "GET", target: "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=user-\(i)",
                        headers: [("Accept", "application/json"), ("X-Api-Key", Fixtures.sdkContractAPIKey)])
        }
        let assigns = (0..<1000).map { i in
            MockRequest(method: "POST", target: "/api/v1/tracking/assign",
                        headers: [("Content-Type", "application/json"), ("X-Api-Key", Fixtures.sdkContractAPIKey)],
                        body: Data(#"{"experiment_key":"sdk_contract_ab","user_id":"user-\#(i)"}"#.utf8))
        }
        // A second argument (`flag` or `assign`) measures that kind alone, for a profile of one.
        let only = arguments.dropFirst().first
        for (label, requests) in [("flag GET", flags), ("assign POST", assigns)] where only == nil || label.hasPrefix(only!) {
            var samples: [Double] = []
            samples.reserveCapacity(n)
            var bytes = 0
            for i in 0..<n {
                let start = DispatchTime.now().uptimeNanoseconds
                bytes &+= model.respond(to: requests[i % requests.count], now: t0).body.count
                samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000)
            }
            print(String(format: "mock-model: %d x %@: median %.2f us per BackendModel.respond (%d bytes)", n, label, median(samples), bytes))
        }
    }
}
