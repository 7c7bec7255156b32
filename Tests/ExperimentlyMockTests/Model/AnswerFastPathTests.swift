import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ExperimentlyMock

/// The in-process answer's fast paths (issue 15 section 3) give exactly what the general code
/// they stand in for gives: the flag body's bytes, the digest and buckets, exact-key compares,
/// the routing of a host, the `MockRequest` built from a `URLRequest`, and the history an
/// in-process load records (the same entry as `MockBackend.handle`, the general path).
final class AnswerFastPathTests: XCTestCase {
    // MARK: Flag body

    func testFlagEvaluationBodyIsTheGeneralSerializersBytes() {
        let keys = ["sdk_contract_flag", "", "caf\u{E9}", "cafe\u{301}", "a\"b", "back\\slash", "tab\tkey", "nl\nkey", "\u{1}\u{1F}", "emoji\u{1F600}", "slash/key"]
        var fast = 0
        for key in keys {
            for enabled in [true, false] {
                for reason in ["rollout", "targeting_rule", "inactive", "quote\"reason"] {
                    let general = JSONValue.serializedObject([("key", .string(key)), ("enabled", .bool(enabled)), ("config", .null), ("reason", .string(reason))])
                    let body = BackendModel.flagEvaluationBody(key: key, enabled: enabled, reason: reason)
                    XCTAssertEqual(Array(body), Array(general), "key \(key.debugDescription) enabled \(enabled) reason \(reason)")
                    if key.utf8.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) && !reason.contains("\"") { fast += 1 }
                }
            }
        }
        // Both the written-in-place path and the fallback ran.
        XCTAssertGreaterThan(fast, 20)
        XCTAssertLessThan(fast, keys.count * 8)
    }

    func testEveryAnswerWithinTheLimitCarriesTheRateHeadersAfterItsOwn() {
        var fixtures = Fixtures.sdkContract
        fixtures.rateLimit = RateLimit(limit: 3, windowSeconds: 60)
        var model = BackendModel(fixtures: fixtures)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let target = "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u"
        func names(_ r: MockResponse) -> [String] { r.headers.map(\.name) }
        let ok = model.respond(to: MockRequest(method: "GET", target: target, headers: [("X-API-Key", Fixtures.sdkContractAPIKey)]), now: t0)
        XCTAssertEqual(names(ok), ["Content-Type", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Window"])
        XCTAssertEqual(ok.headers.map(\.value), ["application/json", "3", "2", "60"])
        let denied = model.respond(to: MockRequest(method: "GET", target: target, headers: [("X-API-Key", "wrong")]), now: t0)
        XCTAssertEqual(names(denied), ["Content-Type", "WWW-Authenticate", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Window"])
        XCTAssertEqual(denied.header("X-RateLimit-Remaining"), "1", "another key on the same device shares its window (per client address)")
        var elsewhere = MockRequest(method: "GET", target: target, headers: [("X-API-Key", Fixtures.sdkContractAPIKey)])
        elsewhere.peer = "10.0.0.2:40000"
        XCTAssertEqual(model.respond(to: elsewhere, now: t0).header("X-RateLimit-Remaining"), "2", "another client address has its own window")
        for remaining in ["0"] {
            let r = model.respond(to: MockRequest(method: "GET", target: target, headers: [("X-API-Key", Fixtures.sdkContractAPIKey)]), now: t0)
            XCTAssertEqual(r.header("X-RateLimit-Remaining"), remaining)
        }
        let limited = model.respond(to: MockRequest(method: "GET", target: target, headers: [("X-API-Key", Fixtures.sdkContractAPIKey)]), now: t0)
        XCTAssertEqual(limited.status, 429)
        XCTAssertEqual(names(limited), ["Content-Type", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Window"])
        XCTAssertEqual(limited.header("X-RateLimit-Remaining"), "0")
    }

    // MARK: MD5 and buckets

    /// RFC 1321 step by step over a byte array (the digest before it hashed in place): the reference.
    static func referenceDigest(_ message: [UInt8]) -> [UInt8] {
        let s: [UInt32] = [7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
                           4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21]
        let k: [UInt32] = (0..<64).map { UInt32(truncatingIfNeeded: Int64(abs(sin(Double($0 + 1))) * 4_294_967_296.0)) }
        var bytes = message
        bytes.append(0x80)
        while bytes.count % 64 != 56 { bytes.append(0) }
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: (UInt64(message.count) &* 8) >> (8 * UInt64(i)))) }
        var h: [UInt32] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476]
        for block in stride(from: 0, to: bytes.count, by: 64) {
            let m = (0..<16).map { i in (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[block + 4 * i + $1]) << (8 * UInt32($1)) } }
            var (a, b, c, d) = (h[0], h[1], h[2], h[3])
            for i in 0..<64 {
                let (f, g): (UInt32, Int) = i < 16 ? ((b & c) | (~b & d), i) : i < 32 ? ((d & b) | (~d & c), (5 * i + 1) % 16)
                    : i < 48 ? (b ^ c ^ d, (3 * i + 5) % 16) : (c ^ (b | ~d), (7 * i) % 16)
                let sum = f &+ a &+ k[i] &+ m[g]
                (a, d, c) = (d, c, b)
                b = b &+ (sum << s[i] | sum >> (32 - s[i]))
            }
            h = [h[0] &+ a, h[1] &+ b, h[2] &+ c, h[3] &+ d]
        }
        return h.flatMap { w in (0..<4).map { UInt8(truncatingIfNeeded: w >> (8 * UInt32($0))) } }
    }

    func testInPlaceDigestMatchesTheReferenceAcrossBlockBoundaries() {
        for length in Array(0...200) + [255, 256, 1023, 1024, 1025, 4097] {
            let message = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            XCTAssertEqual(MockMD5.digest(message), Self.referenceDigest(message), "length \(length)")
            // A collection without contiguous storage takes the copying path.
            XCTAssertEqual(MockMD5.digest(message.lazy.map { $0 }), Self.referenceDigest(message), "lazy, length \(length)")
        }
    }

    func testBucketsFromTheBufferWordsMatchTheDigestBytes() {
        let users = ["user-1", "user-123", "", "caf\u{E9}", "cafe\u{301}", "\u{1F600}", String(repeating: "u", count: 60), String(repeating: "v", count: 1500)]
        let keys = ["my-flag", "sdk_contract_flag", "sdk_contract_ab", "", "\u{212B}"]
        for user in users {
            for key in keys {
                let digest = Self.referenceDigest(Array("\(user):\(key)".utf8))
                // md5-mod100: the 128-bit digest read big-endian, mod 100 (Horner's rule).
                let horner = digest.reduce(0) { ($0 * 256 + Int($1)) % 100 }
                XCTAssertEqual(MockBucketing.flagBucket(userID: user, flagKey: key), horner, "\(user.debugDescription) / \(key.debugDescription)")
                let word = UInt32(digest[0]) | UInt32(digest[1]) << 8 | UInt32(digest[2]) << 16 | UInt32(digest[3]) << 24
                XCTAssertEqual(MockBucketing.hash(userID: user, key: key), Double(word) / 4_294_967_296.0)
            }
        }
    }

    // MARK: Exact keys

    func testIsExactlyComparesScalarsNotEquivalence() {
        XCTAssertTrue("sdk-contract-key".isExactly("sdk-contract-key"))
        XCTAssertTrue("".isExactly(""))
        XCTAssertFalse("caf\u{E9}".isExactly("cafe\u{301}"))
        XCTAssertFalse("\u{212B}".isExactly("\u{C5}"))
        XCTAssertFalse("key".isExactly("key "))
        XCTAssertFalse("a".isExactly("b"))
        // A string from Foundation and a Substring-made one compare by content.
        XCTAssertTrue(String(NSString(string: "caf\u{E9}")).isExactly("caf\u{E9}"))
        XCTAssertTrue(String("xx-key-yy".dropFirst(3).dropLast(3)).isExactly("key"))
        for (a, b) in [("user-1", "user-1"), ("caf\u{E9}", "caf\u{E9}"), ("cafe\u{301}", "caf\u{E9}"), ("x", "xy")] {
            XCTAssertEqual(a.isExactly(b), a.unicodeScalars.elementsEqual(b.unicodeScalars), "\(a.debugDescription) vs \(b.debugDescription)")
        }
    }

    // MARK: Routing and the in-process request

    func testHostRoutingByBytesAgreesWithTheGeneralRule() {
        let backend = MockBackend(clock: ManualClock())
        let token = backend.routeToken
        /// The rule before the byte path: lower-case the host, strip the suffix, look the token up.
        func general(_ host: String?) -> MockBackend? {
            guard let host = host?.lowercased(), host.hasSuffix(MockRouting.hostSuffix) else { return nil }
            return MockRouting.backend(token: String(host.dropLast(MockRouting.hostSuffix.count)))
        }
        let hosts: [String?] = [backend.baseURL.host, "\(token).mock.invalid", "\(token.uppercased()).MOCK.INVALID", "\(token).mock.invalid.",
                                ".mock.invalid", "mock.invalid", "x\(token).mock.invalid", "\(token).mock.invalidx", "localhost", "", nil,
                                "\(token)\u{E9}.mock.invalid", "backend-999999.mock.invalid"]
        var found = 0
        for host in hosts {
            let fast = MockRouting.backend(fields: [:], host: host)
            XCTAssertTrue(fast === general(host), "host \(host.debugDescription)")
            if fast != nil { found += 1 }
        }
        XCTAssertEqual(found, 3, "the base URL's host, its spelling and its upper-case spelling route")
        // The private header still wins, matched without ASCII case.
        let other = MockBackend(clock: ManualClock())
        XCTAssertTrue(MockRouting.backend(fields: ["x-experimently-mock-route": other.routeToken], host: backend.baseURL.host) === other)
    }

    /// The dictionary-based construction before the one-array build: the reference.
    static func referenceMockRequest(_ request: URLRequest) -> MockRequest {
        let target = request.url.map { MockURLProtocol.requestTarget(of: $0) } ?? "/"
        var fields = request.allHTTPHeaderFields ?? [:]
        if !fields.keys.contains(where: { $0.equalsIgnoringASCIICase("Host") }), let host = request.url?.host {
            fields["Host"] = host + (request.url?.port.map { ":\($0)" } ?? "")
        }
        let headers = fields
            .filter { !$0.key.equalsIgnoringASCIICase(MockBackend.routingHeader) }
            .map { (lower: $0.key.lowercased(), name: $0.key, value: $0.value) }
            .sorted { $0.lower < $1.lower }
            .map { (name: $0.name, value: $0.value) }
        return MockRequest(method: request.httpMethod ?? "GET", target: target, headers: headers, body: request.httpBody ?? Data())
    }

    func testMockRequestFromAURLRequestMatchesTheReference() {
        let backend = MockBackend(clock: ManualClock())
        var requests: [URLRequest] = []
        var r = URLRequest(url: URL(string: backend.baseURL.absoluteString + "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u%20v")!)
        r.setValue(Fixtures.sdkContractAPIKey, forHTTPHeaderField: "X-API-Key")
        r.setValue("application/json", forHTTPHeaderField: "Accept")
        requests.append(r)
        r.setValue(backend.routeToken, forHTTPHeaderField: MockBackend.routingHeader)
        r.setValue("custom.example:81", forHTTPHeaderField: "host")
        r.setValue("z", forHTTPHeaderField: "Z-Last")
        r.setValue("a", forHTTPHeaderField: "a-first")
        requests.append(r)
        var post = URLRequest(url: URL(string: "http://Example.COM:8443/api/v1/tracking/assign#frag")!)
        post.httpMethod = "POST"
        post.httpBody = Data(#"{"experiment_key":"sdk_contract_ab","user_id":"u"}"#.utf8)
        post.setValue("application/json", forHTTPHeaderField: "Content-Type")
        requests.append(post)
        requests.append(URLRequest(url: URL(string: "http://h.mock.invalid")!))
        for request in requests {
            let fast = MockURLProtocol.mockRequest(from: request)
            let reference = Self.referenceMockRequest(request)
            XCTAssertEqual(fast, reference, request.url?.absoluteString ?? "")
            XCTAssertEqual(fast.headers.map(\.name), reference.headers.map(\.name))
        }
    }

    /// An in-process load (URLSession -> MockURLProtocol -> the synchronous answer) records the
    /// same history entry and gives the same response as `MockBackend.handle` (the general path
    /// every transport shares) on a twin backend, request by request, on one virtual clock.
    func testInProcessLoadsRecordWhatTheGeneralPathRecords() async throws {
        let clock = ManualClock()
        let inProcess = MockBackend(clock: clock)
        let twin = MockBackend(clock: clock)
        let session = inProcess.makeURLSession()
        let targets: [(String, String, String?, String?)] = [
            ("GET", "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=user-1", nil, Fixtures.sdkContractAPIKey),
            ("GET", "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=caf%C3%A9", nil, Fixtures.sdkContractAPIKey),
            ("GET", "/api/v1/feature-flags/evaluate/no_such_flag?user_id=u", nil, Fixtures.sdkContractAPIKey),
            ("GET", "/api/v1/feature-flags/evaluate/sdk_contract_flag", nil, Fixtures.sdkContractAPIKey),
            ("GET", "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u", nil, nil),
            ("POST", "/api/v1/tracking/assign", #"{"experiment_key":"sdk_contract_ab","user_id":"user-2"}"#, Fixtures.sdkContractAPIKey),
            ("POST", "/api/v1/tracking/assign", #"{"experiment_key":"sdk_contract_ab","user_id":"user-2"}"#, Fixtures.sdkContractAPIKey),
            ("GET", "/api/v1/nope", nil, Fixtures.sdkContractAPIKey),
            ("GET", "/health", nil, nil),
        ]
        for (method, target, body, key) in targets {
            let urlRequest = request(inProcess, target, method: method, body: body, key: key)
            let got = reply(await send(session, urlRequest))
            // The twin sees the very request the protocol built, with its own host.
            var twinRequest = urlRequest
            twinRequest.url = URL(string: twin.baseURL.absoluteString + target)
            let outcome = await twin.handle(MockURLProtocol.mockRequest(from: twinRequest))
            guard case .respond(let expected) = outcome else { return XCTFail("\(target): \(outcome)") }
            XCTAssertEqual(got.status, expected.status, target)
            XCTAssertEqual(got.body, expected.body, target)
            for h in expected.headers { XCTAssertEqual(got.headers[h.name], h.value, "\(target): \(h.name)") }
            XCTAssertEqual(got.headers["Content-Length"], String(expected.body.count), target)
            clock.advance(1)
        }
        let a = inProcess.history, b = twin.history
        XCTAssertEqual(a.count, targets.count)
        XCTAssertEqual(a.count, b.count)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        for (x, y) in zip(a, b) {
            // The Host header names each backend's own host; everything else is byte for byte.
            func hostless(_ e: HistoryEntry) -> HistoryEntry {
                var e = e
                e.headers = e.headers.filter { !$0.name.equalsIgnoringASCIICase("Host") }
                return e
            }
            XCTAssertEqual(try encoder.encode(hostless(x)), try encoder.encode(hostless(y)), "seq \(x.seq)")
            XCTAssertEqual(x.headers.map(\.name), y.headers.map(\.name), "seq \(x.seq)")
        }
        XCTAssertEqual(inProcess.state, twin.state)
        RetiredSessions.keep(session)
    }
}
