import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import ExperimentlyMock

/// The mock compares identity data by Unicode scalars (issue 11 section 1): canonically
/// equivalent spellings are different users, keys, API keys and fault matches.
final class ExactIdentityMockTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)
    static let pairs: [(String, String, String)] = [
        ("\u{E9}", "e\u{301}", "NFC/NFD e-acute"),
        ("\u{C5}", "\u{212B}", "A-ring / ANGSTROM SIGN"),
        ("\u{D55C}", "\u{1112}\u{1161}\u{11AB}", "Hangul syllable / jamo"),
    ]

    static func scalars(_ v: JSONValue?) -> [UInt32] { v?.stringValue?.unicodeScalars.map(\.value) ?? [] }

    func testStickinessIsPerExactUser() {
        for (a, b, what) in Self.pairs {
            for (first, second) in [(a, b), (b, a)] {
                var model = BackendModel()
                let r1 = bodyJSON(model.respond(to: Req.assign(first), now: t0))
                let r2 = bodyJSON(model.respond(to: Req.assign(second), now: t0))
                // Enrolled users get reason `assigned`, new or sticky (CONTRACT.md section 2): a new
                // user shows as a second sticky assignment.
                XCTAssertEqual(r1["reason"], .string("assigned"), what)
                XCTAssertEqual(r2["reason"], .string("assigned"), what)
                XCTAssertEqual(model.state.assignments.count, 2, "\(what): the other spelling is a new user, not sticky")
                XCTAssertEqual(Self.scalars(r2["user_id"]), second.unicodeScalars.map(\.value), what)
                let bucket = Int(MockBucketing.experimentBucket(userID: second, experimentKey: "sdk_contract_ab"))
                XCTAssertEqual(r2["variant_name"], .string(bucket < 50 ? "control" : "treatment"), what)
                XCTAssertEqual(model.state.assignments.count, 2, what)
                let again = bodyJSON(model.respond(to: Req.assign(second), now: t0))
                XCTAssertEqual(again["reason"], .string("assigned"), what)
                XCTAssertEqual(model.state.assignments.count, 2, "\(what): the same spelling again is sticky")
                XCTAssertEqual(again["variant_name"], r2["variant_name"], what)
                XCTAssertNotNil(model.state.assignment(experimentKey: "sdk_contract_ab", userID: second))
                XCTAssertTrue(model.state.assignment(experimentKey: "sdk_contract_ab", userID: second)!.userID.unicodeScalars
                    .elementsEqual(second.unicodeScalars), what)
            }
        }
    }

    /// A context whose attribute names differ only as canonically equivalent spellings
    /// (`"k\u0301"` and `"\u1e31"`) has two attributes, as the backend's Python dict does: a rule
    /// on either spelling reads its own value, in every route that reads a context (evaluate GET
    /// and POST, user flags, assign, assign batch). Before, the two merged and the rule on the
    /// second spelling read nothing (a fifty-third outside tester, D).
    func testContextAttributesWithEquivalentNamesAreTwoAttributes() {
        let context = #"{"k\u0301":"no","\u1e31":"yes"}"#
        for (name, wanted) in [("\u{1e31}", true), ("k\u{301}", false)] {
            let rule = Condition(attribute: name, op: .eq, value: .string("yes"))
            let fixtures = Fixtures(apiKeys: [APIKey(key: Fixtures.sdkContractAPIKey, scopes: [APIKey.sdkRulesetScope])], experiments: [
                Experiment(key: "targeted", variants: [Variant(id: "c", name: "control", allocation: 0, isControl: true),
                                                       Variant(id: "t", name: "treatment", allocation: 100)], targeting: [rule]),
            ], flags: [Flag(key: "f", rolloutPercentage: 0, rules: [TargetingRule(conditions: [rule])])])
            var model = BackendModel(fixtures: fixtures)
            let query = context.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let get = bodyJSON(model.respond(to: Req.get("/api/v1/feature-flags/evaluate/f?user_id=u&context=\(query)"), now: t0))
            XCTAssertEqual(get["enabled"], .bool(wanted), "GET, rule on \(name.unicodeScalars.map(\.value))")
            let post = bodyJSON(model.respond(to: Req.post("/api/v1/feature-flags/evaluate/f", #"{"user_id":"u","context":"# + context + "}"), now: t0))
            XCTAssertEqual(post["enabled"], .bool(wanted), "POST")
            let user = bodyJSON(model.respond(to: Req.get("/api/v1/feature-flags/user/u?context=\(query)"), now: t0))
            XCTAssertEqual(user["f"], .bool(wanted), "user flags")
            let assigned = bodyJSON(model.respond(to: Req.assign("u", "targeted", context: context), now: t0))
            XCTAssertEqual(assigned["assigned"], .bool(wanted), "assign")
            let batch = bodyJSON(model.respond(to: Req.post("/api/v1/tracking/assign/batch",
                                                            #"{"experiment_key":"targeted","users":[{"user_id":"v","context":"# + context + "}]}"), now: t0))
            XCTAssertEqual(batch["assignments"]?.arrayValue?.first?["assigned"], .bool(wanted), "assign batch: \(batch)")
        }
    }

    /// Inside an attribute's value too: an object with the names `"k\u0301"` and `"\u1e31"`
    /// never equals a rule value (which cannot hold both), at any depth and in arrays, for
    /// `eq`, `ne`, `in` and `contains`, as Python's `==` on dicts decides. Before, the value's
    /// names merged and `{"k\u0301":1,"\u1e31":2}` equalled `{"k\u0301":2}` (a fifty-fourth
    /// outside tester, G).
    func testEquivalentNamesInsideAValueNeverEqualARuleValue() {
        let merged = JSONValue.object(["k\u{301}": .number(2)])
        let rows: [(String, Condition.Operator, JSONValue, Bool)] = [
            (#"{"a":{"k\u0301":1,"\u1e31":2}}"#, .eq, merged, false),
            (#"{"a":{"k\u0301":1,"\u1e31":2}}"#, .ne, merged, true),
            (#"{"a":{"k\u0301":1,"\u1e31":2}}"#, .in, .array([merged]), false),
            (#"{"a":[{"k\u0301":1,"\u1e31":2}]}"#, .contains, merged, false),
            (#"{"a":[{"k\u0301":1,"\u1e31":2}]}"#, .eq, .array([merged]), false),
            (#"{"a":{"b":{"k\u0301":1,"\u1e31":2}}}"#, .eq, .object(["b": merged]), false),
            (#"{"a":{"k\u0301":2},"x":{"k\u0301":1,"\u1e31":2}}"#, .eq, merged, true),
            (#"{"a":[true],"x":{"k\u0301":1,"\u1e31":2}}"#, .eq, .array([.number(1)]), true),
        ]
        for (context, op, value, wanted) in rows {
            let fixtures = Fixtures(apiKeys: [APIKey(key: Fixtures.sdkContractAPIKey)],
                                    flags: [Flag(key: "f", rolloutPercentage: 0, rules: [TargetingRule(conditions: [Condition(attribute: "a", op: op, value: value)])])])
            var model = BackendModel(fixtures: fixtures)
            let post = bodyJSON(model.respond(to: Req.post("/api/v1/feature-flags/evaluate/f", #"{"user_id":"u","context":"# + context + "}"), now: t0))
            XCTAssertEqual(post["enabled"], .bool(wanted), "\(context) \(op) \(value)")
        }
    }

    /// The backend's type leniency for `eq`, `ne` and `in` (upstream `_values_equal`): a string
    /// against a number is read with Python's `float()`, against a boolean as a word; two strings
    /// or two typed values are never coerced; Python's `True == 1` holds.
    func testEqualityReadsAStringAsTheOtherSidesType() {
        let rows: [(JSONValue, JSONValue, Bool)] = [
            (.number(5), .string("5"), true), (.string("5.0"), .number(5), true), (.string(" 5\n"), .number(5), true),
            (.string("1_000"), .number(1000), true), (.string("1__0"), .number(10), false), (.string("0x5"), .number(5), false),
            (.string("\u{0665}"), .number(5), true), (.string("5e0"), .number(5), true), (.string("abc"), .number(5), false),
            (.string("TRUE"), .bool(true), true), (.string(" yes "), .bool(true), true), (.string("0"), .bool(false), true),
            (.string("on"), .bool(true), false), (.bool(true), .number(1), true), (.bool(false), .number(0), true),
            (.string("5"), .string("5.0"), false), (.number(1), .string("true"), false), (.string("nan"), .number(.nan), false),
        ]
        for (actual, expected, wanted) in rows {
            XCTAssertEqual(Condition.valuesEqual(ExactJSON(actual), expected), wanted, "\(actual) eq \(expected)")
            XCTAssertEqual(Condition(attribute: "a", op: .ne, value: expected).matches(userID: "u", context: ["a": actual]), !wanted, "\(actual) ne \(expected)")
        }
    }

    /// `gt` and `lt` read both sides as the backend's `float()` does: numeric strings are their
    /// numbers ("10" > 9, "10" > "9"), booleans 1 and 0, anything else never matches (before,
    /// strings compared by code points, so "10" was less than "9").
    func testOrderingReadsBothSidesAsNumbers() {
        let rows: [(JSONValue, Condition.Operator, JSONValue, Bool)] = [
            (.string("10"), .gt, .number(9), true), (.string("10"), .gt, .string("9"), true), (.string("abc"), .gt, .string("abb"), false),
            (.bool(true), .gt, .number(0.5), true), (.number(5), .lt, .string(" 5.5 "), true), (.null, .lt, .number(1), false),
            (.string("nan"), .lt, .number(1), false), (.array([.number(1)]), .gt, .number(0), false), (.string("-inf"), .lt, .number(-1e308), true),
        ]
        for (actual, op, value, wanted) in rows {
            XCTAssertEqual(Condition(attribute: "a", op: op, value: value).matches(userID: "u", context: ["a": actual]), wanted, "\(actual) \(op) \(value)")
        }
    }

    /// `PythonText.float` agrees with Python's `float()` on generated strings (when python3 is
    /// installed): signs, digits of two scripts, underscores, dots, exponents, words, spaces.
    func testFloatReadingAgreesWithPython() throws {
        let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }
        try XCTSkipIf(python == nil, "python3 not installed")
        let alphabet = ["0", "1", "5", "9", "_", ".", "e", "E", "+", "-", " ", "\u{0665}", "x", "inf", "nan", "Infinity", "\t", "a",
                        "\u{1C}", "\u{1F}", "\u{A0}", "\u{2003}", "\u{85}", "\u{0B}"]
        var rng = SplitMix64(state: 20261203)
        var inputs: [String] = []
        for _ in 0..<5000 {
            let n = Int(rng.next() % 6) + 1
            inputs.append((0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }.joined())
        }
        let script = "import json,sys\nout=[]\nfor s in json.load(sys.stdin):\n    try:\n        v=float(s); out.append(None if v!=v else repr(v))\n    except ValueError:\n        out.append('error')\nprint(json.dumps(out))"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python!)
        p.arguments = ["-c", script]
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        try p.run()
        input.fileHandleForWriting.write(JSONValue.array(inputs.map(JSONValue.string)).serialized())
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let answers = try XCTUnwrap(try JSONValue.parse(data).value.arrayValue)
        XCTAssertEqual(answers.count, inputs.count)
        var disagreements: [String] = []
        for (s, answer) in zip(inputs, answers) {
            let mine = PythonText.float(s)
            switch answer {
            case .string("error"): if mine != nil { disagreements.append("\(s.debugDescription): python error, mine \(mine!)") }
            case .null: if !(mine?.isNaN ?? false) { disagreements.append("\(s.debugDescription): python nan, mine \(String(describing: mine))") }
            case .string(let r): if mine.map({ Double(r.replacingOccurrences(of: "inf", with: "infinity")) == $0 }) != true {
                disagreements.append("\(s.debugDescription): python \(r), mine \(String(describing: mine))") }
            default: disagreements.append("\(s.debugDescription): \(answer)")
            }
        }
        XCTAssertEqual(disagreements.prefix(10), [], "\(disagreements.count) of \(inputs.count) differ")
    }

    func testUserIdTargetingHoldoutAndExperimentKeysAreExact() {
        for (a, b, what) in Self.pairs {
            let fixtures = Fixtures(apiKeys: [APIKey(key: Fixtures.sdkContractAPIKey)], experiments: [
                Experiment(key: "listed", variants: [Variant(id: "c", name: "control", allocation: 0, isControl: true),
                                                     Variant(id: "t", name: "treatment", allocation: 100)],
                           targeting: [Condition(attribute: "user_id", op: .in, value: .array([.string(a)]))]),
                Experiment(key: "held", variants: [Variant(id: "c", name: "control", allocation: 0, isControl: true),
                                                   Variant(id: "t", name: "treatment", allocation: 100)],
                           holdoutUserIDs: [a]),
                Experiment(key: "k" + a, variants: [Variant(id: "c", name: "control", allocation: 100, isControl: true)]),
            ])
            var model = BackendModel(fixtures: fixtures)
            XCTAssertEqual(bodyJSON(model.respond(to: Req.assign(a, "listed"), now: t0))["reason"], .string("assigned"), what)
            XCTAssertEqual(bodyJSON(model.respond(to: Req.assign(b, "listed"), now: t0))["reason"], .string("targeting"), what)
            XCTAssertEqual(bodyJSON(model.respond(to: Req.assign(a, "held"), now: t0))["reason"], .string("holdout"), what)
            XCTAssertEqual(bodyJSON(model.respond(to: Req.assign(b, "held"), now: t0))["reason"], .string("assigned"), what)
            XCTAssertEqual(model.respond(to: Req.assign("u", "k" + a), now: t0).status, 200, what)
            XCTAssertEqual(model.respond(to: Req.assign("u", "k" + b), now: t0).status, 404, "\(what): an equivalent experiment key names nothing")
            // eq and contains conditions compare exactly too.
            XCTAssertTrue(Condition(attribute: "user_id", op: .eq, value: .string(a)).matches(userID: a, context: [:]))
            XCTAssertFalse(Condition(attribute: "user_id", op: .eq, value: .string(a)).matches(userID: b, context: [:]), what)
            XCTAssertTrue(Condition(attribute: "user_id", op: .ne, value: .string(a)).matches(userID: b, context: [:]), what)
            XCTAssertFalse(Condition(attribute: "name", op: .contains, value: .string(a)).matches(userID: "u", context: ["name": .string("x" + b + "y")]), what)
        }
    }

    /// API keys compare exactly; the rate bucket is the client address's and the exact path's, not
    /// the key's (CONTRACT.md section 2: per client IP and exact path; an outside audit, A-2).
    func testAPIKeysAreExactAndTheRateBucketIsTheClientAddresss() {
        for (a, b, what) in Self.pairs {
            var fixtures = Fixtures(apiKeys: [APIKey(key: "key-" + a)], experiments: Fixtures.sdkContract.experiments, flags: Fixtures.sdkContract.flags)
            // The rate limit counts every request, before auth (as upstream's middleware does).
            fixtures.rateLimit = RateLimit(limit: 3, windowSeconds: 60)
            var model = BackendModel(fixtures: fixtures)
            XCTAssertEqual(model.respond(to: Req.flag("u").withKey("key-" + a), now: t0).status, 200, what)
            XCTAssertEqual(model.respond(to: Req.flag("u").withKey("key-" + b), now: t0).status, 401, "\(what): an equivalent API key is invalid")
            fixtures.apiKeys.append(APIKey(key: "key-" + b))
            model.fixtures = fixtures
            XCTAssertEqual(model.respond(to: Req.flag("u").withKey("key-" + b), now: t0).status, 200, what)
            XCTAssertEqual(model.respond(to: Req.flag("u").withKey("key-" + a), now: t0).status, 429, "\(what): both keys on one device share its bucket")
            var elsewhere = Req.flag("u").withKey("key-" + a)
            elsewhere.peer = "10.0.0.2:40000"
            XCTAssertEqual(model.respond(to: elsewhere, now: t0).status, 200, "\(what): another client address has its own bucket")
            XCTAssertEqual(model.respond(to: Req.get("/api/v1/feature-flags/evaluate/k\(a)?user_id=u").withKey("key-" + a), now: t0).header("X-RateLimit-Remaining"), "2",
                           "\(what): another path (the flag key's spelling) has its own bucket, and its 404 carries the headers")
        }
    }

    func testJSONValueEqualityIsExactAndFaultBodyMatchersToo() {
        for (a, b, what) in Self.pairs {
            XCTAssertNotEqual(JSONValue.string(a), .string(b), what)
            XCTAssertNotEqual(JSONValue.object([a: .null]), .object([b: .null]), what)
            XCTAssertEqual(JSONValue.array([.string(a)]), .array([.string(a)]), what)
            var script = FaultScript(epoch: t0)
            script.add(FaultRule(match: FaultMatch(body: ["user_id": .string(a)]), action: .delay(seconds: 1)))
            XCTAssertNotNil(script.decide(for: Req.assign(a), now: t0), what)
            XCTAssertNil(script.decide(for: Req.assign(b), now: t0), "\(what): a rule for one spelling never fires for the other")
            var q = FaultScript(epoch: t0)
            XCTAssertNil(q.decide(for: Req.get("/x"), now: t0))
            q.add(FaultRule(match: FaultMatch(query: ["user_id": a]), action: .delay(seconds: 1)))
            XCTAssertNil(q.decide(for: Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=" + b.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!), now: t0), what)
        }
        // Messages write non-NFC spellings escaped, so two never read alike.
        XCTAssertEqual("e\u{301}".unambiguous, "e\\u{301}")
        XCTAssertEqual("\u{E9}".unambiguous, "\u{E9}")
        XCTAssertEqual("\u{212B}".unambiguous, "\\u{212B}")
        XCTAssertEqual(JSONValue.string("e\u{301}").unambiguousJSONText, #""e\u0301""#)
        XCTAssertEqual(JSONValue.string("\u{E9}").unambiguousJSONText, "\"\u{E9}\"")
    }

    func testOverTCPAssignNFDThenNFCGetsItsOwnBucketing() async throws {
        let backend = MockBackend(fixtures: .sdkContract)
        let server = MockHTTPServer(handler: backend, configuration: .init(port: 0, readTimeout: 2, shutdownGracePeriod: 1))
        let port = try server.start()
        let session = URLSession(configuration: .ephemeral)
        defer { RetiredSessions.keep(session); backend.shutdown(); server.shutdown() }
        let served = ServedBackend(backend: backend, server: server, port: port)
        var answers: [JSONValue] = []
        for user in ["e\u{301}", "\u{E9}", "\u{E9}"] {
            let result = try await fetch(session, served.assign(user))
            XCTAssertEqual(result.status, 200)
            answers.append(try JSONValue.parse(result.body).value)
        }
        XCTAssertEqual(answers.map { $0["reason"] }, [.string("assigned"), .string("assigned"), .string("assigned")])
        XCTAssertEqual(answers[0]["variant_name"], .string("treatment"), "NFD e-acute is bucket 74")
        XCTAssertEqual(answers[1]["variant_name"], .string("control"), "NFC e-acute is bucket 1: a new user, not NFD's sticky treatment")
        XCTAssertEqual(Self.scalars(answers[1]["user_id"]), [0xE9])
        XCTAssertEqual(answers[2]["variant_name"], .string("control"))
        XCTAssertEqual(backend.state.assignments.count, 2, "two users, one sticky assignment each")
    }
}

private extension MockRequest {
    func withKey(_ key: String) -> MockRequest {
        MockRequest(method: method, target: target, headers: [("X-Api-Key", key)], body: body)
    }
}
