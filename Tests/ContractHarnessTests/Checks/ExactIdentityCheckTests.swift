import XCTest
import Foundation
import ExperimentlyMock
import ExperimentlyMutants
@testable import ContractHarness

/// The harness's matchers, expectations and named checks compare identity data by Unicode
/// scalars (issue 11 section 1): they pass a correct SDK and fail one that merges canonically
/// equivalent spellings.
final class ExactIdentityCheckTests: XCTestCase {
    static let pairs: [(String, String, String)] = [
        ("\u{E9}", "e\u{301}", "NFC/NFD e-acute"),
        ("\u{C5}", "\u{212B}", "A-ring / ANGSTROM SIGN"),
        ("\u{D55C}", "\u{1112}\u{1161}\u{11AB}", "Hangul syllable / jamo"),
    ]

    static func assignRecord(_ user: String, client: String = "main") -> RequestRecord {
        RequestRecord(seq: 1, client: client, method: "POST", path: "/api/v1/tracking/assign", target: "/api/v1/tracking/assign",
                      query: [:], headers: [:], body: .object(["experiment_key": .string("sdk_contract_ab"), "user_id": .string(user)]),
                      status: 200, response: nil, fault: nil, parked: false, cancelled: false, answered: true)
    }

    func testRequestMatchersAreExact() {
        for (a, b, what) in Self.pairs {
            let record = Self.assignRecord(a, client: a)
            XCTAssertTrue(record.matches(RequestMatch(user: a)), what)
            XCTAssertFalse(record.matches(RequestMatch(user: b)), "\(what): user")
            XCTAssertTrue(record.matches(RequestMatch(body: .object(["user_id": .string(a)]))), what)
            XCTAssertFalse(record.matches(RequestMatch(body: .object(["user_id": .string(b)]))), "\(what): body")
            let exact: JSONValue = .object(["experiment_key": .string("sdk_contract_ab"), "user_id": .string(a)])
            XCTAssertTrue(record.matches(RequestMatch(bodyEquals: exact)), what)
            XCTAssertFalse(record.matches(RequestMatch(bodyEquals: .object(["experiment_key": .string("sdk_contract_ab"), "user_id": .string(b)]))),
                           "\(what): body_equals is documented as exact")
            XCTAssertFalse(record.matches(RequestMatch(client: b)), "\(what): client")
            // Outcome expectations use the same exact JSON containment.
            XCTAssertTrue(JSONValue.object(["user_id": .string(a)]).contains(.object(["user_id": .string(a)])))
            XCTAssertFalse(JSONValue.object(["user_id": .string(a)]).contains(.object(["user_id": .string(b)])), "\(what): expect")
            // Keys and sets of identity data.
            XCTAssertEqual(Set([ExactKey(a), ExactKey(b)]).count, 2, what)
            XCTAssertEqual(Set([a, b]).count, 1, "\(what): Swift's own Set merges them")
        }
    }

    func testMessagesTellEquivalentSpellingsApart() {
        XCTAssertEqual("\u{E9}".unambiguous, "\u{E9}")
        XCTAssertEqual("e\u{301}".unambiguous, "e\\u{301}")
        XCTAssertEqual("\u{212B}".unambiguous, "\\u{212B}")
        XCTAssertEqual("\u{1112}\u{1161}\u{11AB}".unambiguous, "\\u{1112}\\u{1161}\\u{11AB}")
        XCTAssertEqual("\(JSONValue.string("e\u{301}"))", #""e\u0301""#)
        XCTAssertNotEqual(Self.assignRecord("e\u{301}").summary, Self.assignRecord("\u{E9}").summary)
    }

    func testLabelsAndFaultIdsAreExact() async throws {
        let text = """
        {"format": "experimently-scenario/1", "name": "labels", "description": "two labels that are canonically equivalent",
         "steps": [
           {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "g\\u00e9"},
           {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "\\u00e9", "as": "\\u00e9", "async": true},
           {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "e\\u0301", "as": "e\\u0301", "async": true},
           {"wait_for": {"held": "g\\u00e9", "count": 1}},
           {"await": "e\\u0301", "expect": {"value": {"variant_name": "treatment", "user_id": "e\\u0301"}}},
           {"release": "g\\u00e9"},
           {"await": "\\u00e9", "expect": {"value": {"variant_name": "control", "user_id": "\\u00e9"}}}
         ]}
        """
        let scenario = try ScenarioParser.parse(Data(text.utf8), file: "labels.json")
        // A fault id spelled the other way is not the one added.
        let wrongFault = text.replacingOccurrences(of: #"{"release": "g\u00e9"}"#, with: #"{"release": "ge\u0301"}"#)
        XCTAssertThrowsError(try ScenarioParser.parse(Data(wrongFault.utf8), file: "labels.json"))
        let result = await ScenarioRunner().run(scenario)
        XCTAssertEqual(result.status, .passed, "\(result.checks.filter { !$0.passed }.map { "\($0.name): \($0.message ?? "")" })")
    }

    func testNamedChecksPassCorrectSDKsAndFailOneThatMergesSpellings() async throws {
        for name in ["field-canonically-equivalent-users-named-checks", "field-canonically-equivalent-user-ids-are-distinct-users"] {
            let url = ExplorerTests.repository.appendingPathComponent("scenarios/\(name).json")
            let scenario = try ScenarioParser.parse(try Data(contentsOf: url), file: url.path)
            for (driver, what) in [(SwiftSDKDriver(), "shipping SDK"), (MutantRun.driver(nil), "faithful variant")] {
                let result = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(result.status, .passed, "\(name) on the \(what): \(result.checks.filter { !$0.passed }.map { "\($0.name): \($0.message ?? "")" })")
            }
        }
        let url = ExplorerTests.repository.appendingPathComponent("scenarios/field-canonically-equivalent-users-named-checks.json")
        let scenario = try ScenarioParser.parse(try Data(contentsOf: url), file: url.path)
        let broken = await ScenarioRunner(driver: MutantRun.driver(.canonicalIdentity), stepTimeoutCap: 1500).run(scenario)
        XCTAssertEqual(broken.status, .failed)
        let failed = Dictionary(broken.checks.filter { !$0.passed }.map { ($0.name, $0.message ?? "") }, uniquingKeysWith: { a, _ in a })
        // `offline_fallback` too: the merged twin's entry is served as a cache hit of a user
        // whose own answer never came (the sixty-fifth tester's rule: a value from nowhere).
        XCTAssertEqual(Set(failed.keys), ["stickiness", "no_stale_write", "offline_fallback"], "\(failed)")
        XCTAssertTrue(failed["offline_fallback"]?.contains("another user's or key's entry") ?? false, failed["offline_fallback"] ?? "")
        XCTAssertTrue(failed["stickiness"]?.contains("user 'e\\u{301}' got variant 'treatment' then 'control'") ?? false, failed["stickiness"] ?? "")
        XCTAssertTrue(failed["no_stale_write"]?.contains("for user 'e\\u{301}'") ?? false, failed["no_stale_write"] ?? "")
    }
}
