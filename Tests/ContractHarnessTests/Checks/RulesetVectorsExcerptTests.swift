import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// The published upstream cases that are in this repository (`golden-vectors/ruleset-vectors-excerpt.json`,
/// 69 of the 2,181 cases of upstream `tests/sdk-contract/ruleset-vectors.json`, MIT, provenance in
/// the file's `about`), evaluated over the file's ruleset by `RulesetEvaluator` with upstream's
/// rule: every case is either deferred to the server or answered with exactly `expected`; every
/// `must_local` case is answered locally with exactly `expected`.
final class RulesetVectorsExcerptTests: XCTestCase {
    func testPublishedCasesAreAnsweredOrDeferred() throws {
        let url = Repository.root.appendingPathComponent("golden-vectors/ruleset-vectors-excerpt.json")
        let file = try JSONValue.parse(Data(contentsOf: url)).value
        let ruleset = try XCTUnwrap(file["ruleset"])
        let cases = try XCTUnwrap(file["cases"]?.arrayValue)
        XCTAssertEqual(cases.count, 69)
        var local = 0, deferred = 0
        for c in cases {
            let id = c["id"]?.stringValue ?? "?"
            let outcome = RulesetEvaluator.evaluate(ruleset, flagKey: c["flag"]?.stringValue ?? "", userID: c["user_id"]?.stringValue ?? "",
                                                    context: c["context"]?.objectValue ?? [:])
            let expected = RulesetEvaluator.Outcome.local(enabled: c["expected"]?["enabled"] == .bool(true), reason: c["expected"]?["reason"]?.stringValue ?? "")
            switch outcome {
            case .local:
                local += 1
                XCTAssertEqual(outcome, expected, id)
            case .deferred, .remote:
                deferred += 1
                XCTAssertEqual(c["must_local"], .bool(false), "\(id) must be answered locally, got \(outcome)")
            default:
                XCTFail("\(id): \(outcome)")
            }
        }
        XCTAssertEqual(local, 57, "every must_local case, and no other, is answered locally")
        XCTAssertEqual(deferred, 12)
    }

    /// The server those deferred cases go to, the mock, answers every published case with exactly
    /// `expected`, over the evaluate route (GET with `?context=`, and POST): the excerpt's flags
    /// served as fixtures (one `and` group of `eq` conditions each). Before, `eq-str-2#20`
    /// (`{"a": 5}` against `eq "5"`) was answered `rollout`, not `targeting_rule`: the mock
    /// compared types strictly where the backend reads the string as a number (a fifty-fourth
    /// outside tester, K).
    func testTheMockAnswersEveryPublishedCaseAsTheBackend() throws {
        let url = Repository.root.appendingPathComponent("golden-vectors/ruleset-vectors-excerpt.json")
        let file = try JSONValue.parse(Data(contentsOf: url)).value
        var flags: [Flag] = []
        for f in try XCTUnwrap(file["ruleset"]?["flags"]?.arrayValue) {
            let rules = try (f["rules"]?.arrayValue ?? []).map { rule -> TargetingRule in
                let groups = rule["match"]?["groups"]?.arrayValue ?? []
                XCTAssertEqual(groups.count, 1)
                let conditions = try (groups.first?["conditions"]?.arrayValue ?? []).map { c in
                    Condition(attribute: try XCTUnwrap(c["attribute"]?.stringValue),
                              op: try XCTUnwrap(Condition.Operator(rawValue: c["operator"]?.stringValue ?? "")), value: try XCTUnwrap(c["value"]))
                }
                return TargetingRule(conditions: conditions, percentage: Int(rule["rollout_percentage"]?.numberValue ?? -1))
            }
            flags.append(Flag(key: try XCTUnwrap(f["key"]?.stringValue), rolloutPercentage: Int(f["rollout_percentage"]?.numberValue ?? -1), rules: rules))
        }
        var model = BackendModel(fixtures: Fixtures(apiKeys: [APIKey(key: Fixtures.sdkContractAPIKey)], flags: flags))
        let key = Fixtures.sdkContractAPIKey
        for c in try XCTUnwrap(file["cases"]?.arrayValue) {
            let id = c["id"]?.stringValue ?? "?", flag = c["flag"]?.stringValue ?? "", user = c["user_id"]?.stringValue ?? ""
            let context = c["context"] ?? .object([:])
            let query = context.jsonText.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let get = MockRequest(method: "GET", target: "/api/v1/feature-flags/evaluate/\(flag)?user_id=\(user)&context=\(query)", headers: [("X-Api-Key", key)])
            let post = MockRequest(method: "POST", target: "/api/v1/feature-flags/evaluate/\(flag)", headers: [("X-Api-Key", key), ("Content-Type", "application/json")],
                                   body: JSONValue.object(["user_id": .string(user), "context": context]).serialized())
            for (how, request) in [("GET", get), ("POST", post)] {
                let answer = try JSONValue.parse(model.respond(to: request, now: Date(timeIntervalSince1970: 0)).body).value
                XCTAssertEqual(answer["enabled"], c["expected"]?["enabled"], "\(id) \(how): \(answer)")
                XCTAssertEqual(answer["reason"], c["expected"]?["reason"], "\(id) \(how): \(answer)")
            }
        }
    }
}
