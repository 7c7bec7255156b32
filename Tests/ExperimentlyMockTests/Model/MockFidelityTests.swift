import XCTest
@testable import ExperimentlyMock

/// Where a mock fidelity tester found the mock answering otherwise than the upstream backend
/// (FastAPI), each now as upstream answers.
final class MockFidelityTests: XCTestCase {
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    /// An empty `context=` on GET evaluate is no context (upstream reads `""` as absent): 200, not 422.
    func testAnEmptyContextQueryIsNoContext() {
        var model = BackendModel(fixtures: .sdkContract)
        let empty = model.respond(to: Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u&context="), now: t0)
        XCTAssertEqual(empty.status, 200, text(empty))
        XCTAssertEqual(bodyJSON(empty)["enabled"], .bool(true))
        // A context that is there and bad is still 422.
        XCTAssertEqual(model.respond(to: Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u&context=%7Bbad"), now: t0).status, 422)
        XCTAssertEqual(model.respond(to: Req.get("/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=u&context=%5B%5D"), now: t0).status, 422)
    }

    /// A JSON body is read as JSON only without a Content-Type or with `application/json` or
    /// `application/*+json` (FastAPI); any other type is a 422 naming the body, never echoing it.
    func testABodyOfAnotherContentTypeIsNoModel() {
        var model = BackendModel(fixtures: .sdkContract)
        let body = Data(#"{"experiment_key":"sdk_contract_ab","user_id":"user-1"}"#.utf8)
        func assign(_ contentType: String?) -> MockResponse {
            var headers = [("X-Api-Key", Req.key)]
            if let contentType { headers.append(("Content-Type", contentType)) }
            return model.respond(to: MockRequest(method: "POST", target: "/api/v1/tracking/assign", headers: headers, body: body), now: t0)
        }
        for ok in [nil, "", "application/json", "Application/JSON; charset=utf-8", "application/vnd.api+json"] as [String?] {
            XCTAssertEqual(assign(ok).status, 200, "\(ok ?? "none")")
        }
        for bad in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", " "] {
            let r = assign(bad)
            XCTAssertEqual(r.status, 422, "\(bad): \(text(r))")
            XCTAssertEqual(bodyJSON(r)["detail"]?.arrayValue?.first?["type"], .string("model_attributes_type"), text(r))
            XCTAssertFalse(text(r).contains("user-1"), "validation errors never echo input: \(text(r))")
        }
        // Tracking and batches alike.
        let event = Data(#"{"event_type":"e","user_id":"u","experiment_key":"sdk_contract_ab"}"#.utf8)
        let track = model.respond(to: MockRequest(method: "POST", target: "/api/v1/tracking/track",
                                                  headers: [("X-Api-Key", Req.key), ("Content-Type", "text/plain")], body: event), now: t0)
        XCTAssertEqual(track.status, 422, text(track))
    }
}
