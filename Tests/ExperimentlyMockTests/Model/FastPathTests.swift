import Foundation
import XCTest
@testable import ExperimentlyMock

/// The mock's fast paths (issue 15 section 3) decide exactly what the slow paths they replace
/// decided: `FaultMatch.matches` agrees with `mismatches(...).isEmpty`, the rate windows stay
/// keyed by exact bytes, and `unambiguous` still tells canonically equivalent spellings apart.
final class FastPathTests: XCTestCase {
    func request(_ method: String, _ target: String, body: String = "") -> IncomingRequest {
        IncomingRequest(MockRequest(method: method, target: target, headers: [("X-API-Key", "k")], body: Data(body.utf8)))
    }

    func testMatchesAgreesWithMismatchesOnEveryPairOfRuleAndRequest() {
        let nfc = "caf\u{E9}", nfd = "cafe\u{301}"
        let rules: [FaultMatch] = [
            FaultMatch(),
            FaultMatch(method: "get"),
            FaultMatch(method: "POST", path: "/api/v1/tracking/assign"),
            FaultMatch(path: "/api/v1/feature-flags/evaluate/\(nfc)"),
            FaultMatch(pathPrefix: "/api/v1/"),
            FaultMatch(pathPrefix: "/api/v2/"),
            FaultMatch(query: ["user_id": "user-1"]),
            FaultMatch(query: ["user_id": nfc]),
            FaultMatch(query: ["user_id": "user-1", "attr": "x"]),
            FaultMatch(body: ["user_id": .string("user-1")]),
            FaultMatch(body: ["user_id": .string(nfd)]),
            FaultMatch(body: ["user_id": .string("user-1"), "experiment_key": .string("e")]),
            FaultMatch(method: "POST", body: ["n": .number(1)]),
        ]
        let requests = [
            request("GET", "/api/v1/feature-flags/evaluate/f?user_id=user-1"),
            request("GET", "/api/v1/feature-flags/evaluate/\(nfc)?user_id=\(nfc)"),
            request("GET", "/api/v1/feature-flags/evaluate/\(nfd)?user_id=\(nfd)"),
            request("GET", "/api/v1/feature-flags/evaluate/f?user_id=user-1&attr=x"),
            request("GET", "/api/v1/feature-flags/evaluate/f?user_id=%ZZ"),
            request("GET", "/api/v1/feature-flags/evaluate/f"),
            request("POST", "/api/v1/tracking/assign", body: #"{"user_id":"user-1","experiment_key":"e"}"#),
            request("POST", "/api/v1/tracking/assign", body: #"{"user_id":"cafe\u0301"}"#),
            request("POST", "/api/v1/tracking/assign", body: #"{"n":1}"#),
            request("POST", "/api/v1/tracking/assign", body: "not json"),
            request("post", "/api/v2/other?user_id=user-1"),
        ]
        var matched = 0
        for rule in rules {
            for r in requests {
                XCTAssertEqual(rule.matches(r), rule.mismatches(r).isEmpty, "\(rule) against \(r.raw.method) \(r.raw.target): \(rule.mismatches(r))")
                if rule.matches(r) { matched += 1 }
            }
        }
        // Both outcomes occur, so the comparison above means something.
        XCTAssertGreaterThan(matched, 10)
        XCTAssertLessThan(matched, rules.count * requests.count - 10)
    }

    func testRateWindowsAreKeyedByExactBytes() {
        XCTAssertEqual(RateWindowKey(client: "k", path: "/a"), RateWindowKey(client: "k", path: "/a"))
        XCTAssertNotEqual(RateWindowKey(client: "caf\u{E9}", path: "/a"), RateWindowKey(client: "cafe\u{301}", path: "/a"))
        XCTAssertNotEqual(RateWindowKey(client: "k/", path: "a"), RateWindowKey(client: "k", path: "/a"))
        var fixtures = Fixtures.sdkContract
        fixtures.rateLimit = RateLimit(limit: 2, windowSeconds: 60)
        var model = BackendModel(fixtures: fixtures)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        func status(_ target: String) -> Int {
            model.respond(to: MockRequest(method: "GET", target: target, headers: [("X-API-Key", Fixtures.sdkContractAPIKey)]), now: t0).status
        }
        XCTAssertEqual(status("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u"), 200)
        XCTAssertEqual(status("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=v"), 200)
        XCTAssertEqual(status("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=w"), 429, "the third request on one path is refused")
        XCTAssertEqual(status("/api/v1/feature-flags/evaluate/other_flag?user_id=u"), 404, "another path has its own window (an unknown flag)")
    }

    /// The target parsing before the one-pass byte scan, kept as the reference.
    static func reference(_ target: String) -> (rawPath: String, segments: [String], query: [(String, String?)]) {
        let mark = target.utf8.firstIndex(of: UInt8(ascii: "?"))
        let path = mark.map { String(target[..<$0]) } ?? target
        var parts = IncomingRequest.split(path[...], on: UInt8(ascii: "/"), omittingEmpty: false)
        if parts.first?.isEmpty == true { parts.removeFirst() }
        let segments = parts.map { part -> String in
            guard part.utf8.contains(UInt8(ascii: "%")) else { return String(part) }
            guard let bytes = PercentDecoding.decode(part, plusAsSpace: false) else { return String(part) }
            return String(validating: bytes, as: UTF8.self) ?? String(decoding: bytes, as: UTF8.self)
        }
        var pairs: [(String, String?)] = []
        if let q = mark, case let query = target[target.index(after: q)...], !query.isEmpty {
            for item in IncomingRequest.split(query, on: UInt8(ascii: "&"), omittingEmpty: true) {
                let eq = item.utf8.firstIndex(of: UInt8(ascii: "="))
                let rawName = eq.map { item[..<$0] } ?? item
                let rawValue = eq.map { item[item.index(after: $0)...] } ?? Substring("")
                func plain(_ s: Substring) -> Bool { !s.utf8.contains { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") } }
                let name = plain(rawName) ? String(rawName)
                    : PercentDecoding.decode(rawName, plusAsSpace: true).flatMap { String(validating: $0, as: UTF8.self) } ?? String(rawName)
                let value = plain(rawValue) ? String(rawValue)
                    : PercentDecoding.decode(rawValue, plusAsSpace: true).flatMap { String(validating: $0, as: UTF8.self) }
                pairs.append((name, value))
            }
        }
        return (path, segments, pairs)
    }

    func testTheOnePassTargetParseMatchesTheReference() {
        let targets = [
            "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=user-1",
            "/api/v1/feature-flags/evaluate/caf%C3%A9?user_id=cafe%CC%81&x=1",
            "/api/v1/feature-flags/evaluate/caf\u{E9}?user_id=\u{E9}",
            "/", "", "?", "?&&", "/a//b/", "//", "/a/%ZZ/%C3", "/a/%FF%FE?n=%FF&m=%41",
            "/api/v1/tracking/assign", "/x?a=1&&b=&c&=d&e==f", "/x?a+b=c+d&%2B=%2b", "/x?user_id=a%26b%3Dc",
            "/x?q=\u{1F600}&r=\u{1100}\u{1161}", "no-slash", "/a?b?c=d",
        ]
        for target in targets {
            let r = IncomingRequest(MockRequest(method: "GET", target: target))
            let expected = Self.reference(target)
            XCTAssertTrue(r.rawPath.utf8.elementsEqual(expected.rawPath.utf8), "\(target): rawPath \(r.rawPath)")
            XCTAssertEqual(r.segments.map { Array($0.utf8) }, expected.segments.map { Array($0.utf8) }, target)
            XCTAssertEqual(r.queryPairs.map { Array($0.name.utf8) }, expected.query.map { Array($0.0.utf8) }, target)
            XCTAssertEqual(r.queryPairs.map { $0.value.map { Array($0.utf8) } }, expected.query.map { $0.1.map { Array($0.utf8) } }, target)
        }
    }

    func testUnambiguousStillShowsNFDAndLeavesASCIIAlone() {
        XCTAssertEqual("user-1".unambiguous, "user-1")
        XCTAssertEqual("caf\u{E9}".unambiguous, "caf\u{E9}")
        XCTAssertEqual("cafe\u{301}".unambiguous, "cafe\\u{301}")
        XCTAssertEqual("\u{212B}".unambiguous, "\\u{212B}")
    }
}
