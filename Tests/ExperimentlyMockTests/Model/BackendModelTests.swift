import XCTest
@testable import ExperimentlyMock

/// Builds requests for the reference fixtures.
enum Req {
    static let key = Fixtures.sdkContractAPIKey
    static func get(_ target: String, key: String? = Req.key) -> MockRequest {
        MockRequest(method: "GET", target: target, headers: key.map { [("X-Api-Key", $0)] } ?? [])
    }
    static func post(_ target: String, _ body: String, key: String? = Req.key) -> MockRequest {
        MockRequest(method: "POST", target: target, headers: (key.map { [("X-Api-Key", $0)] } ?? []) + [("Content-Type", "application/json")], body: Data(body.utf8))
    }
    static func assign(_ user: String, _ exp: String = "sdk_contract_ab", context: String? = nil) -> MockRequest {
        post("/api/v1/tracking/assign", "{\"experiment_key\":\"\(exp)\",\"user_id\":\"\(user)\"" + (context.map { ",\"context\":\($0)" } ?? "") + "}")
    }
    static func flag(_ user: String, _ flag: String = "sdk_contract_flag") -> MockRequest {
        get("/api/v1/feature-flags/evaluate/\(flag)?user_id=\(user)")
    }
}

func bodyJSON(_ r: MockResponse, file: StaticString = #filePath, line: UInt = #line) -> JSONValue {
    do { return try JSONValue.parse(r.body).value } catch {
        XCTFail("body is not JSON: \(String(decoding: r.body, as: UTF8.self))", file: file, line: line)
        return .null
    }
}

func text(_ r: MockResponse) -> String { String(decoding: r.body, as: UTF8.self) }

final class BackendModelTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func testStatusPathsTable() {
        let long101 = String(repeating: "k", count: 101)
        let long256 = String(repeating: "u", count: 256)
        let rows: [(String, MockRequest, Int, String)] = [
            ("health", Req.get("/health", key: nil), 200, #"{"status":"healthy"}"#),
            ("no key", Req.flag("u"), 200, #"{"config":null,"enabled":true,"key":"sdk_contract_flag","reason":"rollout"}"#),
            ("missing key", Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u", key: nil), 401, #"{"detail":"API key missing"}"#),
            ("empty key", Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u", key: ""), 401, #"{"detail":"API key missing"}"#),
            ("wrong key", Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u", key: "nope"), 401, #"{"detail":"Invalid API Key"}"#),
            ("unknown flag", Req.flag("u", "nope"), 404, #"{"detail":"Feature flag with key 'nope' not found"}"#),
            ("flag no user", Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag"), 422, #"{"detail":[{"loc":["query","user_id"],"msg":"Field required","type":"missing"}]}"#),
            ("flag bad context", Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u&context=%5B1%5D"), 422, #"{"detail":[{"loc":["query","context"],"msg":"Input should be a JSON object","type":"dict_type"}]}"#),
            ("flag POST", Req.post("/api/v1/feature-flags/evaluate/sdk_contract_flag", #"{"user_id":"u"}"#), 200, #"{"config":null,"enabled":true,"key":"sdk_contract_flag","reason":"rollout"}"#),
            ("unknown route", Req.get("/api/v1/nope"), 404, #"{"detail":"Not Found"}"#),
            ("wrong method", Req.get("/api/v1/tracking/assign"), 405, #"{"detail":"Method Not Allowed"}"#),
            ("assign control", Req.assign("user-1"), 200, #"{"assigned":true,"configuration":{"color":"blue"},"experiment_key":"sdk_contract_ab","is_control":true,"reason":"assigned","user_id":"user-1","variant_id":"0bc79baa-1746-8506-9ac6-475aa6a09ec9","variant_name":"control"}"#),
            ("assign unknown", Req.assign("u", "nope"), 404, #"{"detail":"Active experiment with key 'nope' not found"}"#),
            ("assign long key", Req.assign("u", long101), 422, #"{"detail":[{"loc":["body","experiment_key"],"msg":"String should have at most 100 characters","type":"string_too_long"}]}"#),
            ("assign long user", Req.assign(long256), 422, #"{"detail":[{"loc":["body","user_id"],"msg":"String should have at most 255 characters","type":"string_too_long"}]}"#),
            ("assign empty user", Req.assign(""), 422, #"{"detail":[{"loc":["body","user_id"],"msg":"String should have at least 1 character","type":"string_too_short"}]}"#),
            ("assign NUL", Req.assign(#"a\u0000b"#), 422, #"{"detail":[{"loc":["body","user_id"],"msg":"Value error, must not contain NUL characters","type":"value_error"}]}"#),
            ("assign lone surrogate", Req.assign(#"a\ud800b"#), 422, #"{"detail":[{"loc":["body","user_id"],"msg":"Value error, must not contain lone surrogates","type":"value_error"}]}"#),
            ("assign lone low surrogate", Req.assign(#"\udc00"#), 422, #"{"detail":[{"loc":["body","user_id"],"msg":"Value error, must not contain lone surrogates","type":"value_error"}]}"#),
            ("assign bad JSON", Req.post("/api/v1/tracking/assign", "{\"user_id\":"), 422, #"{"detail":[{"loc":["body",11],"msg":"JSON decode error: unexpected end of JSON","type":"json_invalid"}]}"#),
            // Validation errors never echo input (CONTRACT.md section 2): not even the byte found.
            ("assign stray byte", Req.post("/api/v1/tracking/assign", "{\"user_id\":Secret}"), 422, #"{"detail":[{"loc":["body",11],"msg":"JSON decode error: unexpected character","type":"json_invalid"}]}"#),
            ("flag context stray byte", Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u&context=%7B%22a%22%3AS%7D"), 422, #"{"detail":[{"loc":["query","context"],"msg":"Invalid JSON: unexpected character at byte 5","type":"json_invalid"}]}"#),
            ("assign no body", Req.post("/api/v1/tracking/assign", ""), 422, #"{"detail":[{"loc":["body"],"msg":"Field required","type":"missing"}]}"#),
            ("track ok", Req.post("/api/v1/tracking/track", #"{"event_type":"purchase","event_name":"purchase","user_id":"u","experiment_key":"sdk_contract_ab","value":9.5}"#), 200, #"{"created_at":"2023-11-14T22:13:20.000Z","event_name":"purchase","event_type":"purchase","experiment_id":"9d147538-c611-8d61-b6f0-8006c0d15e6a","feature_flag_id":null,"id":"39cac221-a31a-85b0-b5a7-196686b17664","metadata":null,"properties":null,"session_id":null,"timestamp":"2023-11-14T22:13:20.000Z","updated_at":"2023-11-14T22:13:20.000Z","user_id":"u","value":9.5,"variant_id":null}"#),
            ("track no key", Req.post("/api/v1/tracking/track", #"{"event_type":"x","user_id":"u"}"#), 422, #"{"detail":[{"loc":["body"],"msg":"Value error, Either experiment_key or feature_flag_key must be provided","type":"value_error"}]}"#),
            ("track unknown key", Req.post("/api/v1/tracking/track", #"{"event_type":"x","user_id":"u","feature_flag_key":"nope"}"#), 404, #"{"detail":"Neither experiment key 'None' nor feature flag key 'nope' found"}"#),
            ("track flag key names only an experiment", Req.post("/api/v1/tracking/track", #"{"event_type":"x","user_id":"u","feature_flag_key":"sdk_contract_ab"}"#), 404, #"{"detail":"Neither experiment key 'None' nor feature flag key 'sdk_contract_ab' found"}"#),
            ("track long type", Req.post("/api/v1/tracking/track", "{\"event_type\":\"\(long101)\",\"user_id\":\"u\",\"experiment_key\":\"sdk_contract_ab\"}"), 422, #"{"detail":[{"loc":["body","event_type"],"msg":"String should have at most 100 characters","type":"string_too_long"}]}"#),
            ("batch mixed", Req.post("/api/v1/tracking/batch", #"{"events":[{"event_type":"a","user_id":"u","experiment_key":"sdk_contract_ab"},{"event_type":"b","user_id":"u","experiment_key":"gone"}]}"#), 200, #"{"errors":[{"error":"Neither experiment key 'gone' nor feature flag key 'None' found","event_type":"b","index":1,"user_id":"u"}],"failure_count":1,"success_count":1}"#),
            ("batch ok", Req.post("/api/v1/tracking/batch", #"{"events":[{"event_type":"a","user_id":"u","feature_flag_key":"sdk_contract_flag"}]}"#), 200, #"{"errors":null,"failure_count":0,"success_count":1}"#),
            ("batch empty", Req.post("/api/v1/tracking/batch", #"{"events":[]}"#), 422, #"{"detail":[{"loc":["body","events"],"msg":"List should have at least 1 item after validation, not 0","type":"too_short"}]}"#),
            ("batch one invalid", Req.post("/api/v1/tracking/batch", #"{"events":[{"event_type":"a","user_id":"u","experiment_key":"sdk_contract_ab"},{"user_id":"u","experiment_key":"sdk_contract_ab"}]}"#), 422, #"{"detail":[{"loc":["body","events",1,"event_type"],"msg":"Field required","type":"missing"}]}"#),
        ]
        var model = BackendModel()
        for (name, request, status, body) in rows {
            let r = model.respond(to: request, now: t0)
            XCTAssertEqual(r.status, status, name)
            XCTAssertEqual(text(r), body, name)
            XCTAssertEqual(r.header("content-type"), "application/json", name)
            if status == 401 { XCTAssertEqual(r.header("WWW-Authenticate"), "APIKey", name) }
        }
        // Stored: track ok, batch mixed (1), batch ok (1); the invalid batch and the 404s stored nothing.
        XCTAssertEqual(model.state.events.map(\.id), [1, 2, 3])
        XCTAssertEqual(model.state.events.map(\.source), ["track", "batch", "batch"])
    }

    func testBatchOver100Rejected() {
        var model = BackendModel()
        let event = #"{"event_type":"a","user_id":"u","experiment_key":"sdk_contract_ab"}"#
        let r = model.respond(to: Req.post("/api/v1/tracking/batch", "{\"events\":[" + Array(repeating: event, count: 101).joined(separator: ",") + "]}"), now: t0)
        XCTAssertEqual(r.status, 422)
        XCTAssertEqual(text(r), #"{"detail":[{"loc":["body","events"],"msg":"List should have at most 100 items after validation, not 101","type":"too_long"}]}"#)
        let ok = model.respond(to: Req.post("/api/v1/tracking/batch", "{\"events\":[" + Array(repeating: event, count: 100).joined(separator: ",") + "]}"), now: t0)
        XCTAssertEqual(text(ok), #"{"errors":null,"failure_count":0,"success_count":100}"#)
    }

    func testContractAssignmentsAndStickiness() {
        var model = BackendModel()
        let expected = [("user-1", "control"), ("user-2", "treatment"), ("bob", "control"), ("user-123", "treatment")]
        for (user, variant) in expected {
            let r = bodyJSON(model.respond(to: Req.assign(user), now: t0))
            XCTAssertEqual(r["variant_name"], .string(variant), user)
            XCTAssertEqual(r["is_control"], .bool(variant == "control"), user)
        }
        // Sticky even after allocations change.
        model.fixtures.experiments[0].variants[0].allocation = 0
        model.fixtures.experiments[0].variants[1].allocation = 100
        let again = bodyJSON(model.respond(to: Req.assign("user-1"), now: t0))
        XCTAssertEqual(again["variant_name"], .string("control"))
        XCTAssertEqual(again["reason"], .string("assigned"), "the backend says assigned for sticky users too")
        XCTAssertEqual(model.state.assignments.count, 4)
        XCTAssertEqual(model.state.exposures.count, 5)
        // New user now bucketed into treatment (allocations 0/100).
        XCTAssertEqual(bodyJSON(model.respond(to: Req.assign("bob2"), now: t0))["variant_name"], .string("treatment"))
    }

    func testAllocationsBelow100LastVariantTakesRest() {
        var f = Fixtures.sdkContract
        f.experiments[0].variants[0].allocation = 5   // user-1 bucket 8 is past 5
        f.experiments[0].variants[1].allocation = 1   // and past 6: last variant takes the rest
        var model = BackendModel(fixtures: f)
        XCTAssertEqual(bodyJSON(model.respond(to: Req.assign("user-1"), now: t0))["variant_name"], .string("treatment"))
    }

    func testIneligibleUsers() {
        var f = Fixtures.sdkContract
        f.experiments[0].targeting = [Condition(attribute: "country", op: .eq, value: "US")]
        f.experiments[0].holdoutUserIDs = ["held"]
        f.experiments.append(Experiment(key: "other", variants: [Variant(id: "o", name: "only", allocation: 100, isControl: true)],
                                        mutuallyExclusiveWith: ["sdk_contract_ab"]))
        var model = BackendModel(fixtures: f)
        let targeted = bodyJSON(model.respond(to: Req.assign("user-2", context: #"{"country":"FR"}"#), now: t0))
        XCTAssertEqual(targeted["assigned"], .bool(false))
        XCTAssertEqual(targeted["reason"], .string("targeting"))
        XCTAssertEqual(targeted["variant_name"], .string("control"))
        XCTAssertEqual(bodyJSON(model.respond(to: Req.assign("held", context: #"{"country":"US"}"#), now: t0))["reason"], .string("holdout"))
        XCTAssertEqual(model.state.exposures.count, 0)
        XCTAssertEqual(model.state.assignments.count, 0)
        // Eligible now: gets treatment (bucket 73) and sticks; then 'other' excludes it.
        XCTAssertEqual(bodyJSON(model.respond(to: Req.assign("user-2", context: #"{"country":"US"}"#), now: t0))["variant_name"], .string("treatment"))
        XCTAssertEqual(bodyJSON(model.respond(to: Req.assign("user-2", "other"), now: t0))["reason"], .string("mutual_exclusion"))
        XCTAssertEqual(model.state.exposures.count, 1)
    }

    func testFlagRulesRolloutAndInactive() {
        var f = Fixtures.sdkContract
        f.flags.append(Flag(key: "my-flag", rolloutPercentage: 79, rules: [
            TargetingRule(conditions: [Condition(attribute: "plan", op: .in, value: ["pro", "team"])], percentage: 0),
            TargetingRule(conditions: [Condition(attribute: "user_id", op: .in, value: ["vip"])]),
        ]))
        f.flags.append(Flag(key: "off", status: .inactive, rolloutPercentage: 100))
        var model = BackendModel(fixtures: f)
        func eval(_ target: String) -> JSONValue { bodyJSON(model.respond(to: Req.get(target), now: t0)) }
        // md5-mod100("user-123","my-flag") = 79: not < 79, enabled at 80.
        XCTAssertEqual(eval("/api/v1/feature-flags/evaluate/my-flag?user_id=user-123")["enabled"], .bool(false))
        model.fixtures.flags[1].rolloutPercentage = 80
        XCTAssertEqual(eval("/api/v1/feature-flags/evaluate/my-flag?user_id=user-123")["enabled"], .bool(true))
        let ctx = "%7B%22plan%22%3A%22pro%22%7D" // {"plan":"pro"}
        let ruled = eval("/api/v1/feature-flags/evaluate/my-flag?user_id=user-123&context=\(ctx)")
        XCTAssertEqual(ruled["enabled"], .bool(false))
        XCTAssertEqual(ruled["reason"], .string("targeting_rule"))
        XCTAssertEqual(eval("/api/v1/feature-flags/evaluate/my-flag?user_id=vip")["reason"], .string("targeting_rule"))
        XCTAssertEqual(eval("/api/v1/feature-flags/evaluate/off?user_id=u"), .object(["key": "off", "enabled": false, "config": .null, "reason": "inactive"]))
    }

    /// `GET /feature-flags/user/{id}` keeps flags whose keys are NFC and NFD spellings of one name
    /// apart, each with its own decision (an outside audit, A-3: one member, the last flag's value).
    func testUserFlagsKeepCanonicallyEquivalentKeysApart() {
        var f = Fixtures.sdkContract
        f.flags.append(Flag(key: "caf\u{E9}", rolloutPercentage: 100))
        f.flags.append(Flag(key: "cafe\u{301}", rolloutPercentage: 0))
        var model = BackendModel(fixtures: f)
        let body = text(model.respond(to: Req.get("/api/v1/feature-flags/user/u1"), now: t0))
        XCTAssertTrue(body.contains("\"caf\u{E9}\":true"), body)
        XCTAssertTrue(body.contains("\"cafe\u{301}\":false"), body)
        XCTAssertTrue(body.contains("\"sdk_contract_flag\":true"), body)
    }

    func testConditionOperators() {
        let ctx: [String: JSONValue] = ["age": 30, "name": "alice", "tags": ["a", "b"]]
        let rows: [(Condition, Bool)] = [
            (Condition(attribute: "age", op: .eq, value: 30), true),
            (Condition(attribute: "age", op: .ne, value: 30), false),
            (Condition(attribute: "age", op: .gt, value: 29), true),
            (Condition(attribute: "age", op: .lt, value: 29), false),
            (Condition(attribute: "name", op: .contains, value: "lic"), true),
            (Condition(attribute: "tags", op: .contains, value: "b"), true),
            (Condition(attribute: "name", op: .in, value: ["bob", "alice"]), true),
            (Condition(attribute: "user_id", op: .eq, value: "u1"), true),
            (Condition(attribute: "missing", op: .ne, value: 1), false),
        ]
        for (c, expected) in rows { XCTAssertEqual(c.matches(userID: "u1", context: ctx), expected, "\(c)") }
    }

    func testPercentEncodedPathAndQuery() {
        var f = Fixtures.sdkContract
        f.flags.append(Flag(key: "new ui/v2", rolloutPercentage: 100))
        var model = BackendModel(fixtures: f)
        let r = model.respond(to: Req.get("/api/v1/feature-flags/evaluate/new%20ui%2Fv2?user_id=user%20a%26b"), now: t0)
        XCTAssertEqual(bodyJSON(r)["key"], .string("new ui/v2"))
        // A percent-encoded lone surrogate / invalid UTF-8 in the query is a 422.
        let bad = model.respond(to: Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=%ED%A0%80"), now: t0)
        XCTAssertEqual(bad.status, 422)
        XCTAssertEqual(model.respond(to: Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=a%00b"), now: t0).status, 422)
    }

    func testRateLimitWindow() {
        var f = Fixtures.sdkContract
        f.rateLimit = RateLimit(limit: 2, windowSeconds: 60)
        var model = BackendModel(fixtures: f)
        XCTAssertEqual(model.respond(to: Req.flag("a"), now: t0).status, 200)
        XCTAssertEqual(model.respond(to: Req.flag("a"), now: t0.addingTimeInterval(10)).status, 200)
        let limited = model.respond(to: Req.flag("a"), now: t0.addingTimeInterval(20.5))
        XCTAssertEqual(limited.status, 429)
        XCTAssertEqual(limited.header("Retry-After"), "60", "the backend always sends the window, not the time left")
        XCTAssertEqual(limited.header("X-RateLimit-Limit"), "2")
        XCTAssertEqual(limited.header("X-RateLimit-Remaining"), "0")
        XCTAssertEqual(limited.header("X-RateLimit-Window"), "60")
        XCTAssertEqual(text(limited), #"{"detail":"Too Many Requests. Please slow down and retry after a moment."}"#)
        // Another exact path has its own counter; the same path recovers after the window.
        XCTAssertEqual(model.respond(to: Req.assign("u"), now: t0.addingTimeInterval(21)).status, 200)
        XCTAssertEqual(model.respond(to: Req.flag("b"), now: t0.addingTimeInterval(21)).status, 429, "query is not part of the path key")
        XCTAssertEqual(model.respond(to: Req.flag("a"), now: t0.addingTimeInterval(60)).status, 200)
    }

    /// The counter is keyed by the path the server routes (upstream: the decoded path), so the
    /// spellings of one path share a budget; NFC and NFD spellings stay two paths (bytes).
    func testRateLimitCountsThePathAsServed() {
        var f = Fixtures.sdkContract
        f.rateLimit = RateLimit(limit: 2, windowSeconds: 60)
        f.flags.append(Flag(key: "f_x", rolloutPercentage: 100))
        var model = BackendModel(fixtures: f)
        XCTAssertEqual(model.respond(to: Req.get("/api/v1/feature-flags/evaluate/f_x?user_id=u"), now: t0).status, 200)
        XCTAssertEqual(model.respond(to: Req.get("/api/v1/feature-flags/evaluate/f%5Fx?user_id=u"), now: t0).status, 200)
        let third = model.respond(to: Req.get("/api/v1/feature-flags/evaluate/f%5fx?user_id=u"), now: t0)
        XCTAssertEqual(third.status, 429, "three spellings of one path are three requests to it")
        XCTAssertEqual(PercentDecoding.servedPath("/a%2Fb%zz%e9"), "/a/b%zz\u{FFFD}")
        XCTAssertEqual(PercentDecoding.servedPath("/caf%C3%A9"), "/caf\u{E9}")
        XCTAssertFalse(PercentDecoding.servedPath("/caf%C3%A9").unicodeScalars.elementsEqual(PercentDecoding.servedPath("/cafe%CC%81").unicodeScalars))
    }

    /// `/health` counts under the budget of other paths and carries the headers (upstream's
    /// middleware runs before every route); a CORS preflight is not counted.
    func testHealthIsCountedAndAPreflightIsNot() {
        var f = Fixtures.sdkContract
        f.rateLimit = RateLimit(limit: 6000, windowSeconds: 60, otherLimit: 1)
        var model = BackendModel(fixtures: f)
        let preflight = MockRequest(method: "OPTIONS", target: "/health", headers: [("Access-Control-Request-Method", "GET")])
        XCTAssertNil(model.respond(to: preflight, now: t0).header("X-RateLimit-Limit"))
        let first = model.respond(to: Req.get("/health", key: nil), now: t0)
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.header("X-RateLimit-Limit"), "1")
        XCTAssertEqual(first.header("X-RateLimit-Remaining"), "0")
        XCTAssertEqual(model.respond(to: Req.get("/health", key: nil), now: t0).status, 429)
    }

    func testRevokedKey() {
        var f = Fixtures.sdkContract
        f.apiKeys.append(APIKey(key: "old", revoked: true))
        var model = BackendModel(fixtures: f)
        XCTAssertEqual(text(model.respond(to: Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u", key: "old"), now: t0)), #"{"detail":"Invalid API Key"}"#)
    }

    func testNearestRouteNote() {
        var model = BackendModel()
        let a = model.answer(IncomingRequest(Req.post("/api/v1/tracking/asign", "{}")), now: t0)
        XCTAssertEqual(a.response.status, 404)
        XCTAssertEqual(a.note, "no route for POST /api/v1/tracking/asign; nearest is POST /api/v1/tracking/assign: segment 4 is 'asign', expected 'assign'")
        let b = model.answer(IncomingRequest(Req.post("/api/v1/tracking/track/", "{}")), now: t0)
        XCTAssertEqual(b.note, "no route for POST /api/v1/tracking/track/; nearest is POST /api/v1/tracking/track: path has 5 segments, expected 4 (trailing '/')")
    }

    func testFixturesCodableRoundTripAndStrictKeys() throws {
        let data = try JSONEncoder().encode(Fixtures.sdkContract)
        XCTAssertEqual(try JSONDecoder().decode(Fixtures.self, from: data), Fixtures.sdkContract)
        let bad = #"{"api_keys":[{"key":"k"}],"flags":[{"key":"f","status":"ACTIVE","rollout_percentage":5,"rollout":3}]}"#
        XCTAssertThrowsError(try JSONDecoder().decode(Fixtures.self, from: Data(bad.utf8))) { error in
            guard case DecodingError.dataCorrupted(let c) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(c.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }, ["flags", "0", "rollout"])
            XCTAssertTrue(c.debugDescription.hasPrefix("unknown key 'rollout'; expected one of: "), c.debugDescription)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
}
