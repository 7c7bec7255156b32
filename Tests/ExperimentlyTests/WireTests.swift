import Foundation
import XCTest
@testable import Experimently

/// The wire protocol of CONTRACT.md section 1: URLs, headers, bodies and response mapping.
final class WireTests: SDKTestCase {
    func testFlagURLIsPercentEncodedExactly() async throws {
        let stub = Stub { _, _ in .respond(200, Body.flag("new ui/v2")) }
        let client = makeClient(stub)
        let result = try await client.evaluateFlag("new ui/v2", user: User(id: "user a&b"))
        XCTAssertEqual(result.key, "new ui/v2")
        XCTAssertTrue(result.enabled)
        let r = try XCTUnwrap(stub.recorded.first)
        XCTAssertEqual(r.method, "GET")
        XCTAssertEqual(r.pathAndQuery, "/api/v1/feature-flags/evaluate/new%20ui%2Fv2?user_id=user%20a%26b")
        XCTAssertTrue(r.body?.isEmpty ?? true, "a GET has no body")
    }

    func testUnreservedStayLiteralAndUTF8IsEncoded() async throws {
        let stub = Stub { _, _ in .respond(200, Body.flag("k")) }
        let client = makeClient(stub, baseURL: stub.baseURL + "/")  // trailing slash tolerated
        _ = try await client.evaluateFlag("Az09-._~+?#é", user: User(id: "=%/ü"))
        XCTAssertEqual(stub.recorded.first?.pathAndQuery,
                       "/api/v1/feature-flags/evaluate/Az09-._~%2B%3F%23%C3%A9?user_id=%3D%25%2F%C3%BC")
    }

    /// A flag key that is a dot segment goes as `%2E`: a literal `.` or `..` segment is removed
    /// on the way (RFC 3986 section 5.2.4; libcurl does, so the out-of-process SDK asked
    /// `/evaluate/` for key `.`). Dots inside a longer key stay literal (unreserved).
    func testADotSegmentKeyIsEscaped() async throws {
        XCTAssertEqual(HTTPTransport.encodePathSegment("."), "%2E")
        XCTAssertEqual(HTTPTransport.encodePathSegment(".."), "%2E%2E")
        XCTAssertEqual(HTTPTransport.encodePathSegment("..."), "...")
        XCTAssertEqual(HTTPTransport.encodePathSegment("a.b"), "a.b")
        XCTAssertEqual(HTTPTransport.encodePathSegment("./"), ".%2F")
        let stub = Stub { _, _ in .respond(200, Body.flag("..")) }
        let client = makeClient(stub)
        _ = try await client.evaluateFlag("..", user: User(id: "u"))
        XCTAssertEqual(stub.recorded.first?.pathAndQuery, "/api/v1/feature-flags/evaluate/%2E%2E?user_id=u")
    }

    func testEveryRequestCarriesTheThreeHeaders() async throws {
        let stub = Stub { _, r in
            r.url.path.hasSuffix("/assign") ? .respond(200, Body.assignment("e", user: "u"))
                : r.url.path.hasSuffix("/batch") ? .respond(200, #"{"success_count":1,"failure_count":0,"errors":null}"#)
                : .respond(200, Body.flag("f"))
        }
        let client = makeClient(stub, apiKey: "sk_live_123")
        _ = try await client.evaluateFlag("f", user: User(id: "u"))
        _ = try await client.getAssignment("e", user: User(id: "u"))
        let tracked = await client.trackWithStatus(TrackEvent(userId: "u", eventName: "buy", experimentKey: "e"))
        let batched = await client.trackBatch([TrackEvent(userId: "u", eventName: "buy", featureFlagKey: "f")])
        XCTAssertTrue(tracked)
        XCTAssertTrue(batched)
        XCTAssertEqual(stub.recorded.map(\.method), ["GET", "POST", "POST", "POST"])
        XCTAssertEqual(stub.recorded.map(\.url.path),
                       ["/api/v1/feature-flags/evaluate/f", "/api/v1/tracking/assign", "/api/v1/tracking/track", "/api/v1/tracking/batch"])
        for r in stub.recorded {
            XCTAssertEqual(r.header("x-api-key"), "sk_live_123", r.url.path)
            XCTAssertEqual(r.header("ACCEPT"), "application/json", r.url.path)
            XCTAssertEqual(r.header("content-type"), "application/json", r.url.path)
        }
    }

    /// Numbers keep their kind on the wire (an outside audit, A-7): an `NSNumber` 1 or 0 (as
    /// `JSONSerialization` gives an app) is a number, a boolean `NSNumber` a boolean, and every
    /// Swift integer width, `Float` and `Decimal` a number; before, 1 went out as `true` and an
    /// `Int64` threw a bare `EncodingError`.
    func testNumbersKeepTheirKindInTheContextAndTheMetadata() async throws {
        let stub = Stub { _, r in
            r.url.path.hasSuffix("/assign") ? .respond(200, Body.assignment("exp", user: "u1")) : .respond(200, "{}")
        }
        let client = makeClient(stub)
        let parsed = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(#"{"tier":1,"off":0,"beta":true,"no":false,"ratio":1.5,"list":[1,true]}"#.utf8)) as? [String: Any])
        var attributes = parsed
        attributes["i64"] = Int64(5)
        attributes["u"] = UInt(7)
        attributes["i32"] = Int32(-3)
        attributes["u64"] = UInt64.max
        attributes["f"] = Float(0.5)
        attributes["dec"] = Decimal(string: "2.25")!
        attributes["i8"] = NSNumber(value: Int8(1))
        _ = try await client.getAssignment("exp", user: User(id: "u1", attributes: attributes))
        let tracked = await client.trackWithStatus(TrackEvent(userId: "u1", eventName: "buy", properties: attributes, experimentKey: "exp"))
        XCTAssertTrue(tracked, "an event with such properties is sent")
        let context = #""beta":true,"dec":2.25,"f":0.5,"i32":-3,"i64":5,"i8":1,"list":[1,true],"no":false,"off":0,"ratio":1.5,"tier":1,"u":7,"u64":18446744073709551615}"#
        let bodies = stub.recorded.map { String(decoding: $0.body ?? Data(), as: UTF8.self) }
        XCTAssertEqual(bodies.count, 2)
        XCTAssertTrue(bodies.first?.contains(#""context":{"# + context) ?? false, bodies.first ?? "")
        XCTAssertTrue(bodies.last?.contains(#""metadata":{"# + context) ?? false, bodies.last ?? "")
    }

    /// An attribute that is not a JSON value is the app's bug: `getAssignment` throws
    /// `.invalidConfig` naming the user and sends nothing (it threw a bare `EncodingError`).
    func testAnAttributeThatIsNoJSONValueThrowsInvalidConfig() async throws {
        let stub = Stub { _, _ in .respond(200, Body.assignment("exp", user: "u1")) }
        let client = makeClient(stub)
        do {
            _ = try await client.getAssignment("exp", user: User(id: "u1", attributes: ["when": Date()]))
            XCTFail("an attribute that is no JSON value must throw")
        } catch ExperimentationError.invalidConfig(let message) {
            XCTAssertTrue(message.contains("u1"), message)
        }
        XCTAssertTrue(stub.recorded.isEmpty, "nothing is sent")
    }

    func testAssignBodyWithAttributes() async throws {
        let stub = Stub { _, _ in .respond(200, Body.assignment("exp", user: "u1")) }
        let client = makeClient(stub)
        _ = try await client.getAssignment("exp", user: User(id: "u1", attributes: ["plan": "pro", "seats": 3, "beta": true]))
        let body = try XCTUnwrap(stub.recorded.first).jsonBody()
        XCTAssertEqual(body as NSDictionary, [
            "experiment_key": "exp", "user_id": "u1", "context": ["plan": "pro", "seats": 3, "beta": true],
        ] as NSDictionary)
        XCTAssertTrue(body["context"].map { ($0 as? [String: Any])?["beta"] is Bool } ?? false, "a Bool stays a JSON boolean")
    }

    func testAssignBodyOmitsContextWhenNilAndSendsEmptyObjectWhenEmpty() async throws {
        let stub = Stub { _, r in .respond(200, Body.assignment("exp", user: "u")) }
        let client = makeClient(stub)
        _ = try await client.getAssignment("exp", user: User(id: "nil-attrs"))
        _ = try await client.getAssignment("exp", user: User(id: "empty-attrs", attributes: [:]))
        let bodies = stub.recorded.map { $0.jsonBody() }
        XCTAssertEqual(bodies.count, 2)
        XCTAssertEqual(bodies[0] as NSDictionary, ["experiment_key": "exp", "user_id": "nil-attrs"] as NSDictionary)
        XCTAssertNil(bodies[0]["context"])
        XCTAssertEqual(bodies[1] as NSDictionary, ["experiment_key": "exp", "user_id": "empty-attrs", "context": [String: Any]()] as NSDictionary)
        XCTAssertEqual(String(decoding: stub.recorded[1].body ?? Data(), as: UTF8.self).contains(#""context":{}"#), true)
    }

    func testFlagResponseMapping() async throws {
        let bodies = [
            "null": Body.flag("a", enabled: true, config: "null"),
            "string": Body.flag("b", enabled: false, config: #""text""#),
            "array": Body.flag("c", enabled: true, config: "[1,2]"),
            "object": Body.flag("d", enabled: true, config: #"{"n":1,"s":"x"}"#),
            "absent": #"{"key":"e","enabled":true}"#,
        ]
        let stub = Stub { _, r in .respond(200, bodies[r.url.lastPathComponent]!) }
        let client = makeClient(stub)
        let null = try await client.evaluateFlag("null", user: User(id: "u"))
        XCTAssertEqual(null.key, "a"); XCTAssertTrue(null.enabled); XCTAssertNil(null.config)
        let string = try await client.evaluateFlag("string", user: User(id: "u"))
        XCTAssertFalse(string.enabled); XCTAssertNil(string.config)
        let array = try await client.evaluateFlag("array", user: User(id: "u"))
        XCTAssertNil(array.config)
        let object = try await client.evaluateFlag("object", user: User(id: "u"))
        XCTAssertEqual(object.config as NSDictionary?, ["n": 1, "s": "x"] as NSDictionary)
        let absent = try await client.evaluateFlag("absent", user: User(id: "u"))
        XCTAssertNil(absent.config)
    }

    func testAssignmentResponseMapping() async throws {
        let bodies = [
            "full": Body.assignment("full", user: "u", variant: "treatment", id: "v9", control: false,
                                    configuration: #"{"color":"green"}"#, assigned: nil),
            "nullcfg": Body.assignment("nullcfg", user: "u", variant: "control", id: "v1", control: true,
                                       configuration: "null", assigned: false),
            "listcfg": Body.assignment("listcfg", user: "u", configuration: "[1]"),
            "noid": #"{"experiment_key":"noid","user_id":"u","variant_name":"control","is_control":true}"#,
            "texted": #"{"experiment_key":"texted","user_id":"u","variant_name":"control","is_control":true,"assigned":"false"}"#,
        ]
        let stub = Stub { _, r in .respond(200, bodies[(r.jsonBody()["experiment_key"] as? String) ?? ""] ?? "{}") }
        let client = makeClient(stub)
        let full = try await client.getAssignment("full", user: User(id: "u"))
        XCTAssertEqual(full.experimentKey, "full"); XCTAssertEqual(full.userId, "u"); XCTAssertEqual(full.variantId, "v9")
        XCTAssertEqual(full.variantName, "treatment"); XCTAssertFalse(full.isControl)
        XCTAssertEqual(full.configuration as NSDictionary?, ["color": "green"] as NSDictionary)
        XCTAssertTrue(full.assigned, "assigned defaults to true when absent")
        let nullcfg = try await client.getAssignment("nullcfg", user: User(id: "u"))
        XCTAssertNil(nullcfg.configuration); XCTAssertTrue(nullcfg.isControl); XCTAssertFalse(nullcfg.assigned)
        let listcfg = try await client.getAssignment("listcfg", user: User(id: "u"))
        XCTAssertNil(listcfg.configuration)
        let noid = try await client.getAssignment("noid", user: User(id: "u"))
        XCTAssertNil(noid.variantId); XCTAssertTrue(noid.assigned)
        // `assigned` that is not a boolean is an unreadable answer, not an enrolment: nothing is
        // cached, so an unkeyed event fans out to nothing (CONTRACT.md section 5, defect 4).
        do {
            let texted = try await client.getAssignment("texted", user: User(id: "u"))
            XCTFail("an assignment with \"assigned\": \"false\" was read as \(texted.assigned)")
        } catch let error as ExperimentationError {
            guard case .decodingError = error else { return XCTFail("\(error)") }
        }
        XCTAssertFalse(client.getAssignments(for: "u").contains { $0.experimentKey == "texted" })
    }

    func testKeyedTrackEventBody() async throws {
        let stub = Stub { _, _ in .respond(200, "{}") }
        let client = makeClient(stub)
        let stamp = Date(timeIntervalSince1970: 1_700_000_000)
        let first = await client.trackWithStatus(TrackEvent(userId: "u", eventName: "purchase", properties: ["sku": "a1"],
                                                            experimentKey: "exp", value: 9.5, timestamp: stamp))
        let second = await client.trackWithStatus(TrackEvent(userId: "u", eventName: "click", featureFlagKey: "f", eventType: "ui"))
        XCTAssertTrue(first)
        XCTAssertTrue(second)
        let bodies = stub.recorded.map { $0.jsonBody() }
        XCTAssertEqual(bodies.first as NSDictionary?, [
            "event_type": "purchase", "event_name": "purchase", "user_id": "u", "experiment_key": "exp",
            "value": 9.5, "metadata": ["sku": "a1"], "timestamp": "2023-11-14T22:13:20.000Z",
        ] as NSDictionary)
        XCTAssertEqual(bodies.last as NSDictionary?, [
            "event_type": "ui", "event_name": "click", "user_id": "u", "feature_flag_key": "f",
        ] as NSDictionary)
    }

    func testInvalidBaseURLIsNeverHiddenBehindAPersistedValue() async throws {
        let suite = makeSuite()
        OfflineStore(suiteName: suite).saveEvaluation(EvalResult(key: "f", enabled: true), userId: "u")
        let client = makeClient(Stub(), suite: suite, baseURL: "not a url")
        await assertThrows({ try await client.evaluateFlag("f", user: User(id: "u")) }, "invalidConfig, not the persisted value") {
            if case .invalidConfig = $0 { return true }
            return false
        }
    }

    func testInvalidBaseURLIsInvalidConfigAndSendsNothing() async throws {
        for base in ["localhost:8000", "ftp://example.com", "not a url", "http://", "http://h/?q=1"] {
            let stub = Stub()
            let client = makeClient(stub, baseURL: base)
            await assertThrows({ try await client.evaluateFlag("f", user: User(id: "u")) }, "invalidConfig for \(base)") {
                if case .invalidConfig(let m) = $0 { return m.contains(base) }
                return false
            }
            await assertThrows({ try await client.getAssignment("e", user: User(id: "u")) }, "invalidConfig for \(base)") {
                if case .invalidConfig = $0 { return true }
                return false
            }
            let tracked = await client.trackWithStatus(TrackEvent(userId: "u", eventName: "x", experimentKey: "e"))
            XCTAssertFalse(tracked, base)
            XCTAssertEqual(stub.requestCount, 0, base)
        }
    }
}

#if canImport(FoundationNetworking)
import FoundationNetworking

/// A session that counts the data tasks made on it (swift-corelibs-foundation's `URLSession` is
/// open for subclassing). The count is behind an `NSLock`.
private final class TaskCountingSession: URLSession, @unchecked Sendable {
    // @unchecked Sendable: `made` is read and written only inside `lock`.
    private let lock = NSLock()
    private var made = 0
    var tasksMade: Int { lock.withLock { made } }

    override func dataTask(with request: URLRequest,
                           completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void) -> URLSessionDataTask {
        lock.withLock { made += 1 }
        return super.dataTask(with: request, completionHandler: completionHandler)
    }
}

final class TransportCancellationTests: XCTestCase {
    /// A call whose task is cancelled before it sends makes no network task: one made and never
    /// resumed stayed in the session's registry for the session's life (a leak per cancelled call).
    func testACallCancelledBeforeItStartsMakesNoNetworkTask() async throws {
        let stub = Stub { _, _ in .respond(200, Body.flag("f")) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [StubURLProtocol.self]
        let session = TaskCountingSession(configuration: configuration, delegate: nil, delegateQueue: nil)
        let transport = HTTPTransport(config: SdkConfig(baseURL: stub.baseURL, apiKey: "k"), session: session, clock: ManualClock())
        let call = Task { () -> Result<Int, ExperimentationError> in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(ExperimentationError) { return .success(try await transport.send(method: "GET", path: "/api/v1/feature-flags/evaluate/f").status) }
            catch { return .failure(error) }
        }
        let result = await call.value
        guard case .failure(let error) = result else { return XCTFail("a cancelled call answered: \(result)") }
        XCTAssertTrue(error.isCancelled, "\(error)")
        XCTAssertEqual(session.tasksMade, 0, "a network task was made for a call cancelled before it started")
        XCTAssertEqual(stub.requestCount, 0)
        // And an uncancelled call on the same transport still sends (one task, one request).
        let status = try await transport.send(method: "GET", path: "/api/v1/feature-flags/evaluate/f").status
        XCTAssertEqual(status, 200)
        XCTAssertEqual(session.tasksMade, 1)
    }
}
#endif
