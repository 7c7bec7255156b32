import XCTest
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ContractHarness
import ExperimentlyMock

/// The served ruleset states the backend's flag rules: for every flag of a fixture set that uses
/// every operator, rule order, rule percentages, an inactive flag and a remote flag, and for
/// users x contexts, a local evaluation over the ruleset fetched from `serve`'s handler through
/// TCP gives exactly the `enabled`/`reason` the evaluate route answers. A ruleset that misstates
/// a rule is caught.
final class RulesetEvaluatorTests: XCTestCase {
    static let fixtures: Fixtures = {
        var f = Fixtures.sdkContract
        f.rateLimit = RateLimit(limit: 1_000_000, otherLimit: 1_000_000)
        f.flags += [
            Flag(key: "pro-or-team", rolloutPercentage: 10, rules: [
                TargetingRule(conditions: [Condition(attribute: "plan", op: .in, value: .array([.string("pro"), .string("team")]))], percentage: 80),
            ]),
            Flag(key: "ordered", rolloutPercentage: 50, rules: [
                TargetingRule(conditions: [Condition(attribute: "country", op: .eq, value: .string("US")), Condition(attribute: "age", op: .gt, value: .number(17))], percentage: 100),
                TargetingRule(conditions: [Condition(attribute: "country", op: .ne, value: .string("DE"))], percentage: 0),
            ]),
            Flag(key: "minors", rolloutPercentage: 0, rules: [TargetingRule(conditions: [Condition(attribute: "age", op: .lt, value: .number(18))], percentage: 100)]),
            Flag(key: "mail", rolloutPercentage: 25, rules: [TargetingRule(conditions: [Condition(attribute: "email", op: .contains, value: .string("@example."))], percentage: 60)]),
            Flag(key: "vip-by-id", rolloutPercentage: 5, rules: [TargetingRule(conditions: [Condition(attribute: "user_id", op: .in, value: .array([.string("user-3")]))])]),
            Flag(key: "off", status: .inactive, rolloutPercentage: 100),
            Flag(key: "drapeau-\u{E9}t\u{E9}", rolloutPercentage: 50),
        ]
        return f
    }()

    static let contexts: [[String: JSONValue]] = [
        [:], ["plan": .string("pro")], ["plan": .string("free")], ["country": .string("US"), "age": .number(30)],
        ["country": .string("US"), "age": .number(12)], ["country": .string("FR")], ["country": .string("DE"), "age": .number(40)],
        ["email": .string("a@example.com"), "plan": .string("team")], ["age": .string("30")],
    ]

    /// Fetches the ruleset with the scoped key from a MockAdmin-fronted backend over TCP.
    private func servedRuleset() async throws -> JSONValue {
        let backend = MockBackend(fixtures: Self.fixtures)
        let server = MockHTTPServer(handler: MockAdmin(backend: backend, fixtures: Self.fixtures, faults: [], token: nil),
                                    configuration: .init(port: 0, readTimeout: 2, shutdownGracePeriod: 1))
        let port = try server.start()
        defer { backend.shutdown(); server.shutdown() }
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/api/v1/sdk/ruleset")!, timeoutInterval: 10)
        request.setValue(Fixtures.sdkContractLocalAPIKey, forHTTPHeaderField: "X-API-Key")
        let session = URLSession(configuration: .ephemeral)
        defer { RetiredSessions.keep(session) }
        let (data, response) = try await session.data(for: request)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 200)
        return try JSONValue.parse(data).value
    }

    /// Every mismatch between local evaluation over `ruleset` and the evaluate route.
    private func mismatches(_ ruleset: JSONValue) -> (cases: Int, local: Int, deferred: Int, problems: [String]) {
        var model = BackendModel(fixtures: Self.fixtures)
        var problems: [String] = [], cases = 0, local = 0, deferred = 0
        for flag in Self.fixtures.flags {
            for u in 0..<40 {
                let user = "user-\(u)"
                for context in Self.contexts {
                    cases += 1
                    let query = JSONValue.object(context).jsonText.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
                    let path = flag.key.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? flag.key
                    let r = model.respond(to: MockRequest(method: "GET", target: "/api/v1/feature-flags/evaluate/\(path)?user_id=\(user)&context=\(query)",
                                                          headers: [("X-API-Key", Fixtures.sdkContractAPIKey)]), now: Date(timeIntervalSince1970: 0))
                    guard let server = try? JSONValue.parse(r.body).value else { problems.append("\(flag.key) \(user): no JSON"); continue }
                    let expected = RulesetEvaluator.Outcome.local(enabled: server["enabled"] == .bool(true), reason: server["reason"]?.stringValue ?? "")
                    let outcome = RulesetEvaluator.evaluate(ruleset, flagKey: flag.key, userID: user, context: context)
                    switch outcome {
                    case .remote: continue
                    case .deferred: deferred += 1
                    case .local: local += 1
                        if outcome != expected { problems.append("\(flag.key) \(user) \(JSONValue.object(context).jsonText): local \(outcome), server \(expected)") }
                    default: problems.append("\(flag.key): \(outcome)")
                    }
                }
            }
        }
        return (cases, local, deferred, problems)
    }

    func testLocalEvaluationOverTheServedRulesetMatchesTheEvaluateRoute() async throws {
        let ruleset = try await servedRuleset()
        let result = mismatches(ruleset)
        XCTAssertEqual(result.problems, [])
        XCTAssertEqual(result.cases, Self.fixtures.flags.count * 40 * Self.contexts.count)
        XCTAssertEqual(result.deferred, 2 * 40, "age \"30\" (a string) against gt/lt in 'ordered' and 'minors' is asked of the server")
        XCTAssertEqual(result.local, result.cases - 40 * Self.contexts.count - result.deferred,
                       "every other case but vip-by-id (user_id attribute: remote) is answered locally")
        XCTAssertEqual(RulesetEvaluator.evaluate(ruleset, flagKey: "vip-by-id", userID: "u", context: [:]), .remote)
        XCTAssertEqual(RulesetEvaluator.evaluate(ruleset, flagKey: "nope", userID: "u", context: [:]), .unknownFlag)
    }

    /// A condition on a dotted attribute is served remote: upstream resolves such paths against
    /// nested contexts and aliases, the mock's evaluate route by the flat key (an outside audit).
    func testADottedAttributeIsRemote() {
        let dotted = Flag(key: "dotted", rolloutPercentage: 50, rules: [
            TargetingRule(conditions: [Condition(attribute: "user.plan", op: .eq, value: .string("pro"))], percentage: 100),
        ])
        XCTAssertEqual(SDKRuleset.flagEntry(dotted)["evaluation"], .string("remote"))
        let flat = Flag(key: "flat", rolloutPercentage: 50, rules: [
            TargetingRule(conditions: [Condition(attribute: "plan", op: .eq, value: .string("pro"))], percentage: 100),
        ])
        XCTAssertEqual(SDKRuleset.flagEntry(flat)["evaluation"], .string("local"))
    }

    func testAMisstatedRulesetIsCaught() async throws {
        let ruleset = try await servedRuleset()
        guard case .object(var doc) = ruleset, var flags = doc["flags"]?.arrayValue else { return XCTFail("not a ruleset") }
        // Misstate one rule's percentage (80 -> 100) in pro-or-team.
        let i = try XCTUnwrap(flags.firstIndex { $0["key"] == .string("pro-or-team") })
        guard case .object(var flag) = flags[i], case .array(var rules)? = flag["rules"], case .object(var rule) = rules[0] else { return XCTFail("shape") }
        rule["rollout_percentage"] = .number(100)
        rules[0] = .object(rule)
        flag["rules"] = .array(rules)
        flags[i] = .object(flag)
        doc["flags"] = .array(flags)
        let result = mismatches(.object(doc))
        XCTAssertFalse(result.problems.isEmpty, "a wrong percentage must be caught")
        XCTAssertTrue(result.problems.allSatisfy { $0.hasPrefix("pro-or-team ") }, "\(result.problems.prefix(3))")
        // An unknown schema evaluates nothing locally.
        doc["schema"] = .number(2)
        XCTAssertEqual(RulesetEvaluator.evaluate(.object(doc), flagKey: "mail", userID: "u", context: [:]), .unsupported("schema 2"))
    }
}
