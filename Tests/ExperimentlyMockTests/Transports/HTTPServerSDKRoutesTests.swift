import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import ExperimentlyMock

/// Every backend route, field by field against CONTRACT.md section 2 (the upstream backend's
/// facts), through the real loopback TCP server: `MockAdmin` over `MockBackend` behind
/// `MockHTTPServer`, driven by URLSession. One test per route.
final class HTTPServerSDKRoutesTests: XCTestCase {
    static let local = Fixtures.sdkContractLocalAPIKey

    private func serve(_ fixtures: Fixtures = .sdkContract) throws -> (ServedBackend, URLSession) {
        let backend = MockBackend(fixtures: fixtures)
        let admin = MockAdmin(backend: backend, fixtures: fixtures, faults: [], token: nil)
        let server = MockHTTPServer(handler: admin, configuration: .init(port: 0, readTimeout: 2, shutdownGracePeriod: 1))
        let port = try server.start()
        let session = URLSession(configuration: .ephemeral)
        addTeardownBlock {
            RetiredSessions.keep(session)
            backend.shutdown()
            server.shutdown()
        }
        return (ServedBackend(backend: backend, server: server, port: port), session)
    }

    private func object(_ r: HTTPResult, file: StaticString = #filePath, line: UInt = #line) -> JSONValue {
        do { return try JSONValue.parse(r.body).value } catch {
            XCTFail("not JSON: \(r.text)", file: file, line: line)
            return .null
        }
    }

    private func isUUID(_ v: JSONValue?) -> Bool { v?.stringValue.map(MockUUID.isUUID) ?? false }

    /// Rich fixtures: a targeted flag, an inactive flag, a second (paused) experiment.
    private var richFixtures: Fixtures {
        var f = Fixtures.sdkContract
        f.flags.append(Flag(key: "pro-only", rolloutPercentage: 0, rules: [TargetingRule(conditions: [Condition(attribute: "plan", op: .eq, value: "pro")])]))
        f.flags.append(Flag(key: "off", status: .inactive, rolloutPercentage: 100))
        f.experiments.append(Experiment(key: "paused_exp", status: .active, variants: [Variant(id: "p-c", name: "control", allocation: 100, isControl: true)]))
        return f
    }

    // MARK: GET /api/v1/feature-flags/evaluate/{key}

    func testEvaluateAnswersAndTexts() async throws {
        let (s, session) = try serve()
        let ok = try await fetch(session, s.flag("u"))
        XCTAssertEqual(ok.status, 200)
        XCTAssertEqual(ok.text, naturalFlagBody)
        XCTAssertEqual(ok.header("X-RateLimit-Limit"), "6000")
        XCTAssertEqual(ok.header("X-RateLimit-Remaining"), "5999")
        XCTAssertEqual(ok.header("X-RateLimit-Window"), "60")
        let unknown = try await fetch(session, s.request("/api/v1/feature-flags/evaluate/nope?user_id=u"))
        XCTAssertEqual(unknown.status, 404)
        XCTAssertEqual(unknown.text, #"{"detail":"Feature flag with key 'nope' not found"}"#)
        XCTAssertNotNil(unknown.header("X-RateLimit-Remaining"), "every answer after the limiter carries the headers")
    }

    // MARK: GET /api/v1/feature-flags/user/{user_id}

    func testUserFlagsAllActiveFlagsWithContext() async throws {
        let (s, session) = try serve(richFixtures)
        let plain = try await fetch(session, s.request("/api/v1/feature-flags/user/u"))
        XCTAssertEqual(plain.status, 200)
        XCTAssertEqual(plain.text, #"{"pro-only":false,"sdk_contract_flag":true}"#, "ACTIVE flags only, {flag_key: bool}")
        let ctx = "%7B%22plan%22%3A%22pro%22%7D" // {"plan":"pro"}
        let pro = try await fetch(session, s.request("/api/v1/feature-flags/user/u?context=\(ctx)"))
        XCTAssertEqual(pro.text, #"{"pro-only":true,"sdk_contract_flag":true}"#)
        let bad = try await fetch(session, s.request("/api/v1/feature-flags/user/u?context=%5B1%5D"))
        XCTAssertEqual(bad.status, 422)
        XCTAssertEqual(bad.text, #"{"detail":[{"loc":["query","context"],"msg":"Input should be a JSON object","type":"dict_type"}]}"#)
        XCTAssertEqual(plain.header("X-RateLimit-Limit"), "6000", "an SDK prefix")
    }

    // MARK: POST /api/v1/tracking/assign

    func testAssignReasonAssignedForNewAndStickyAndUUIDVariantIDs() async throws {
        let (s, session) = try serve()
        let first = object(try await fetch(session, s.assign("user-1")))
        let again = object(try await fetch(session, s.assign("user-1")))
        XCTAssertEqual(first["reason"], "assigned")
        XCTAssertEqual(again["reason"], "assigned", "the backend says assigned for sticky users too")
        XCTAssertTrue(isUUID(first["variant_id"]), "\(first)")
        XCTAssertEqual(first["variant_id"], again["variant_id"])
        XCTAssertEqual(Set(first.objectValue!.keys), ["experiment_key", "user_id", "variant_id", "variant_name", "is_control", "configuration", "assigned", "reason"])
        let other = object(try await fetch(session, s.assign("user-2")))
        XCTAssertNotEqual(other["variant_id"], first["variant_id"], "treatment and control have distinct ids")
        XCTAssertEqual(s.backend.state.exposures.count, 3)
        let unknown = try await fetch(session, s.request("/api/v1/tracking/assign", method: "POST", json: #"{"experiment_key":"nope","user_id":"u"}"#))
        XCTAssertEqual(unknown.text, #"{"detail":"Active experiment with key 'nope' not found"}"#)
    }

    // MARK: GET /api/v1/tracking/assignments/{user_id}

    func testUserAssignmentsListAndActiveOnly() async throws {
        var f = richFixtures
        f.experiments[1].status = .active
        let (s, session) = try serve(f)
        let none = try await fetch(session, s.request("/api/v1/tracking/assignments/user-1"))
        XCTAssertEqual(none.status, 200)
        XCTAssertEqual(none.text, "[]")
        let assigned = object(try await fetch(session, s.assign("user-1")))
        _ = try await fetch(session, s.request("/api/v1/tracking/assign", method: "POST", json: #"{"experiment_key":"paused_exp","user_id":"user-1"}"#))
        s.backend.updateFixtures { $0.experiments[1].status = .paused }
        let list = object(try await fetch(session, s.request("/api/v1/tracking/assignments/user-1")))
        XCTAssertEqual(list.arrayValue?.count, 1, "active_only defaults to true: the paused experiment is left out")
        let item = list.arrayValue?.first
        XCTAssertEqual(Set(item?.objectValue?.keys ?? [:].keys), ["id", "user_id", "experiment_id", "experiment_name", "variant_id", "variant_name", "is_control", "created_at"])
        XCTAssertEqual(item?["variant_id"], assigned["variant_id"])
        XCTAssertEqual(item?["variant_name"], "control")
        XCTAssertEqual(item?["user_id"], "user-1")
        XCTAssertTrue(isUUID(item?["id"]) && isUUID(item?["experiment_id"]))
        let all = object(try await fetch(session, s.request("/api/v1/tracking/assignments/user-1?active_only=false")))
        XCTAssertEqual(all.arrayValue?.count, 2)
        let bad = try await fetch(session, s.request("/api/v1/tracking/assignments/user-1?active_only=maybe"))
        XCTAssertEqual(bad.status, 422)
        XCTAssertEqual(bad.text, #"{"detail":[{"loc":["query","active_only"],"msg":"Input should be a valid boolean, unable to interpret input","type":"bool_parsing"}]}"#)
    }

    // MARK: GET /api/v1/sdk/ruleset

    func testRulesetScopeShapeVersionAndETag() async throws {
        let (s, session) = try serve(richFixtures)
        let plain = try await fetch(session, s.request("/api/v1/sdk/ruleset"))
        XCTAssertEqual(plain.status, 403)
        XCTAssertEqual(plain.text, #"{"detail":"This API key does not have the 'sdk:ruleset' scope. Create a key with the 'sdk:ruleset' scope for server-side local evaluation."}"#)
        let r = try await fetch(session, s.request("/api/v1/sdk/ruleset", key: Self.local))
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.header("Cache-Control"), "private, no-cache")
        XCTAssertEqual(r.header("X-RateLimit-Limit"), "6000", "/api/v1/sdk/ is an SDK prefix upstream")
        let doc = object(r)
        XCTAssertEqual(doc["schema"], 1)
        XCTAssertEqual(doc["bucketing"], "md5-mod100-v1")
        let version = try XCTUnwrap(doc["version"]?.stringValue)
        XCTAssertEqual(r.header("ETag"), "\"\(version)\"")
        // The version is the sha256 of the canonical content without `version`, checked here with
        // Python's hashlib and json (independent of the mock's SHA-256 and serializer).
        let script = """
        import hashlib, json, sys
        doc = json.loads(sys.stdin.buffer.read())
        version = doc.pop("version")
        canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        print(hashlib.sha256(canonical.encode("ascii")).hexdigest() == version)
        """
        XCTAssertEqual(try runPython(script, stdin: r.body), "True\n")
        XCTAssertEqual(doc["flags"], .array([
            .object(["key": "off", "active": false]),
            .object(["key": "pro-only", "active": true, "evaluation": "local", "rollout_percentage": 0, "default_rule": .null,
                     "rules": [.object(["id": "rule-1", "rollout_percentage": 100,
                                        "match": .object(["op": "and", "groups": [], "conditions": [.object(["attribute": "plan", "operator": "eq", "value": "pro"])]])])]]),
            .object(["key": "sdk_contract_flag", "active": true, "evaluation": "local", "rollout_percentage": 100, "rules": [], "default_rule": .null]),
        ]))
        var conditional = s.request("/api/v1/sdk/ruleset", key: Self.local)
        conditional.setValue("W/\"\(version)\"", forHTTPHeaderField: "If-None-Match")
        let notModified = try await fetch(session, conditional)
        XCTAssertEqual(notModified.status, 304)
        XCTAssertTrue(notModified.body.isEmpty)
        XCTAssertEqual(notModified.header("ETag"), "\"\(version)\"")
        // A fixture change changes the version.
        s.backend.updateFixtures { $0.flags[0].rolloutPercentage = 50 }
        let changed = object(try await fetch(session, s.request("/api/v1/sdk/ruleset", key: Self.local)))
        XCTAssertNotEqual(changed["version"]?.stringValue, version)
    }

    // MARK: POST /api/v1/tracking/assign/batch

    func testAssignBatchScopeShapeStickinessAndLimits() async throws {
        var f = Fixtures.sdkContract
        f.experiments[0].targeting = [Condition(attribute: "country", op: .eq, value: "US")]
        let (s, session) = try serve(f)
        let body = #"{"experiment_key":"sdk_contract_ab","users":[{"user_id":"user-1","context":{"country":"US"}},{"user_id":"user-2","context":{"country":"US"}},{"user_id":"cust-3","context":{"country":"DE"}}]}"#
        let plain = try await fetch(session, s.request("/api/v1/tracking/assign/batch", method: "POST", json: body))
        XCTAssertEqual(plain.status, 403)
        let r = try await fetch(session, s.request("/api/v1/tracking/assign/batch", method: "POST", json: body, key: Self.local))
        XCTAssertEqual(r.status, 200, r.text)
        XCTAssertEqual(r.header("X-RateLimit-Limit"), "60", "the batch route has its own limit upstream")
        let doc = object(r)
        XCTAssertEqual(doc["counts"], .object(["assigned": 2, "holdout": 0, "mutual_exclusion": 0, "targeting": 1]))
        let items = try XCTUnwrap(doc["assignments"]?.arrayValue)
        XCTAssertEqual(items.map { $0["user_id"] }, ["user-1", "user-2", "cust-3"], "request order")
        XCTAssertEqual(items.map { $0["reason"] }, ["assigned", "assigned", "targeting"])
        XCTAssertEqual(Set(items[0].objectValue!.keys), ["user_id", "variant_id", "assigned", "reason"])
        let variants = try XCTUnwrap(doc["variants"]?.objectValue)
        XCTAssertEqual(variants[items[0]["variant_id"]!.stringValue!]?["name"], "control", "user-1 buckets to control")
        XCTAssertEqual(variants[items[1]["variant_id"]!.stringValue!]?["name"], "treatment", "user-2 buckets to treatment")
        XCTAssertEqual(variants[items[2]["variant_id"]!.stringValue!]?["is_control"], true, "ineligible users get the control")
        XCTAssertEqual(s.backend.state.assignments.count, 2)
        XCTAssertEqual(s.backend.state.exposures.count, 0, "the batch route records no view")
        // A later single assign is sticky to the batch's answer and records the view.
        let single = object(try await fetch(session, s.request("/api/v1/tracking/assign", method: "POST", json: #"{"experiment_key":"sdk_contract_ab","user_id":"user-2","context":{"country":"US"}}"#)))
        XCTAssertEqual(single["variant_id"], items[1]["variant_id"])
        XCTAssertEqual(s.backend.state.exposures.count, 1)
        // 422s assign nobody.
        let dup = try await fetch(session, s.request("/api/v1/tracking/assign/batch", method: "POST", json: #"{"experiment_key":"sdk_contract_ab","users":[{"user_id":"a"},{"user_id":"a"}]}"#, key: Self.local))
        XCTAssertEqual(dup.text, #"{"detail":[{"loc":["body","users",1,"user_id"],"msg":"duplicate user_id; each user may appear once per request (first seen at users[0])","type":"duplicate_user_id"}]}"#)
        let many = "{\"experiment_key\":\"sdk_contract_ab\",\"users\":[" + (0...1000).map { "{\"user_id\":\"u\($0)\"}" }.joined(separator: ",") + "]}"
        let tooMany = try await fetch(session, s.request("/api/v1/tracking/assign/batch", method: "POST", json: many, key: Self.local))
        XCTAssertEqual(tooMany.text, #"{"detail":[{"loc":["body","users"],"msg":"at most 1,000 users per request; split the list","type":"too_long"}]}"#)
        let extra = try await fetch(session, s.request("/api/v1/tracking/assign/batch", method: "POST", json: #"{"experiment_key":"sdk_contract_ab","users":[{"user_id":"a","contxt":{}}]}"#, key: Self.local))
        XCTAssertEqual(extra.text, #"{"detail":[{"loc":["body","users",0,"contxt"],"msg":"Extra inputs are not permitted","type":"extra_forbidden"}]}"#)
        XCTAssertEqual(s.backend.state.assignments.count, 2)
        let thousand = "{\"experiment_key\":\"sdk_contract_ab\",\"users\":[" + (0..<1000).map { "{\"user_id\":\"u\($0)\",\"context\":{\"country\":\"US\"}}" }.joined(separator: ",") + "]}"
        let full = object(try await fetch(session, s.request("/api/v1/tracking/assign/batch", method: "POST", json: thousand, key: Self.local)))
        XCTAssertEqual(full["counts"]?["assigned"], 1000)
    }

    // MARK: POST /api/v1/tracking/track

    func testTrackAnswersTheStoredEventRecord() async throws {
        let (s, session) = try serve()
        let assigned = object(try await fetch(session, s.assign("user-2")))
        let r = try await fetch(session, s.request("/api/v1/tracking/track", method: "POST",
                                                   json: #"{"event_type":"purchase","user_id":"user-2","experiment_key":"sdk_contract_ab","value":9.5,"metadata":{"sku":"a"},"timestamp":"2023-11-14T22:13:20.000Z"}"#))
        XCTAssertEqual(r.status, 200, r.text)
        let record = object(r)
        XCTAssertEqual(Set(record.objectValue!.keys), ["id", "event_type", "event_name", "user_id", "session_id", "experiment_id", "feature_flag_id",
                                                       "variant_id", "value", "properties", "metadata", "timestamp", "created_at", "updated_at"])
        XCTAssertTrue(isUUID(record["id"]) && isUUID(record["experiment_id"]))
        XCTAssertEqual(record["event_name"], "purchase", "event_name defaults to event_type")
        XCTAssertEqual(record["variant_id"], assigned["variant_id"], "the user's sticky variant")
        XCTAssertEqual(record["feature_flag_id"], .null)
        XCTAssertEqual(record["properties"], .object(["sku": "a"]))
        XCTAssertEqual(record["metadata"], .null)
        XCTAssertEqual(record["value"], .number(9.5))
        XCTAssertEqual(record["timestamp"], "2023-11-14T22:13:20.000Z")
        let flagOnly = object(try await fetch(session, s.request("/api/v1/tracking/track", method: "POST", json: #"{"event_type":"view","event_name":"home","user_id":"u","feature_flag_key":"sdk_contract_flag"}"#)))
        XCTAssertEqual(flagOnly["event_name"], "home")
        XCTAssertTrue(isUUID(flagOnly["feature_flag_id"]))
        XCTAssertEqual(flagOnly["experiment_id"], .null)
        XCTAssertNotEqual(flagOnly["id"], record["id"])
        let unknown = try await fetch(session, s.request("/api/v1/tracking/track", method: "POST", json: #"{"event_type":"x","user_id":"u","experiment_key":"gone"}"#))
        XCTAssertEqual(unknown.status, 404)
        XCTAssertEqual(unknown.text, #"{"detail":"Neither experiment key 'gone' nor feature flag key 'None' found"}"#)
        let invalid = try await fetch(session, s.request("/api/v1/tracking/track", method: "POST", json: #"{"event_type":"x","user_id":"u"}"#))
        XCTAssertEqual(invalid.text, #"{"detail":[{"loc":["body"],"msg":"Value error, Either experiment_key or feature_flag_key must be provided","type":"value_error"}]}"#)
    }

    // MARK: POST /api/v1/tracking/batch

    func testBatchPerEventErrors() async throws {
        let (s, session) = try serve()
        let r = try await fetch(session, s.request("/api/v1/tracking/batch", method: "POST",
                                                   json: #"{"events":[{"event_type":"a","user_id":"u","experiment_key":"sdk_contract_ab"},{"event_type":"b","user_id":"v","feature_flag_key":"gone"}]}"#))
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, #"{"errors":[{"error":"Neither experiment key 'None' nor feature flag key 'gone' found","event_type":"b","index":1,"user_id":"v"}],"failure_count":1,"success_count":1}"#)
    }

    // MARK: Rate limit

    func testNaturalRateLimitWindowRetryAfterAndPerPathBudgets() async throws {
        var f = Fixtures.sdkContract
        f.rateLimit = RateLimit(limit: 2, windowSeconds: 60, otherLimit: 1)
        let (s, session) = try serve(f)
        let a = try await fetch(session, s.flag("a"))
        let b = try await fetch(session, s.flag("a"))
        XCTAssertEqual([a.header("X-RateLimit-Remaining"), b.header("X-RateLimit-Remaining")], ["1", "0"])
        let limited = try await fetch(session, s.flag("a"))
        XCTAssertEqual(limited.status, 429)
        XCTAssertEqual(limited.header("Retry-After"), "60", "always the window")
        XCTAssertEqual(limited.text, #"{"detail":"Too Many Requests. Please slow down and retry after a moment."}"#)
        XCTAssertEqual([limited.header("X-RateLimit-Limit"), limited.header("X-RateLimit-Remaining"), limited.header("X-RateLimit-Window")], ["2", "0", "60"])
        // The ruleset path is an SDK prefix (limit 2); /health counts among the other paths (limit 1).
        let ruleset1 = try await fetch(session, s.request("/api/v1/sdk/ruleset", key: Self.local))
        XCTAssertEqual(ruleset1.header("X-RateLimit-Limit"), "2")
        let health = try await fetch(session, s.request("/health", key: nil))
        XCTAssertEqual([String(health.status), health.header("X-RateLimit-Limit"), health.header("X-RateLimit-Remaining")], ["200", "1", "0"])
        let healthLimited = try await fetch(session, s.request("/health", key: nil))
        XCTAssertEqual(healthLimited.status, 429)
    }

    // MARK: Unknown routes

    func testUnknownRouteAndMethod() async throws {
        let (s, session) = try serve()
        let notFound = try await fetch(session, s.request("/api/v1/nope"))
        XCTAssertEqual(notFound.status, 404)
        XCTAssertEqual(notFound.text, #"{"detail":"Not Found"}"#)
        let method = try await fetch(session, s.request("/api/v1/sdk/ruleset", method: "POST", json: "{}", key: Self.local))
        XCTAssertEqual(method.status, 405)
        XCTAssertEqual(method.header("Allow"), "GET")
    }
}

/// Runs `python3 -c script` with `stdin` and returns its standard output (skips without python3).
func runPython(_ script: String, stdin: Data = Data(), arguments: [String] = [], environment: [String: String]? = nil) throws -> String {
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }
    let path = try XCTUnwrap(python, "python3 is not installed (.ci/run installs it)")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = ["-c", script] + arguments
    if let environment { process.environment = environment }
    let input = Pipe(), output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try process.run()
    input.fileHandleForWriting.write(stdin)
    try input.fileHandleForWriting.close()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}
