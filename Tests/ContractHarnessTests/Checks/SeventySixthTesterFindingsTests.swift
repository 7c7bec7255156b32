import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the seventy-sixth outside tester (`/work/attack76/REPORT.md`: field races of other
/// flag SDKs as scenarios), kept as fixtures (`Fixtures/seventy-sixth-tester`):
///
/// - F1: experimently-driver reuses a client's URLSession across scenarios, and its cookie store
///   kept a `Set-Cookie` of one scenario's mock for later scenarios: a verdict depended on the
///   run's order. Its sessions now keep no cookies and follow no redirects, as in process.
/// - F2: after any 3xx answer `single_flight` excused every later request of the client; now one
///   request to the `Location`, with the redirected request's body or none, per redirect.
/// - F3: a `/track` or `/assign` sent with no body (as FoundationNetworking re-sends a POST after
///   a 307) passed `event_payload`.
/// - F5: no matcher could say which API key a request sent (every key is recorded as `***`):
///   `api_key` names a key of the fixtures, matched by its place there.
final class SeventySixthTesterFindingsTests: XCTestCase {
    static let folder = TesterFixtures.folder("seventy-sixth-tester")

    /// F1: the cookie one scenario's backend set never reaches a later scenario (or another user)
    /// through experimently-driver, run in one process in file order.
    func testNoCookieOutlivesItsScenarioOutOfProcess() throws {
        let dir = try scratchDirectory("seventy-sixth-cookies")
        let driver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        let files = ["f1a-cookie-set-by-backend-for-client-a.json", "f1b-later-scenario-sends-no-earlier-cookie.json"].map { Self.folder.appendingPathComponent($0).path }
        for sdk in [[], ["--sdk-command", "'\(driver)'"], ["--sdk-command", TesterFixtures.python]] {
            let (status, out) = try HarnessProcess.run(["run"] + files + sdk + ["--jobs", "1", "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            XCTAssertTrue(out.contains("2 passed, 0 failed"), "\(sdk): \(out)")
        }
    }

    /// F2: a warm-up lookup after a redirect to `/assign` itself is still one no call asked for;
    /// the correct SDKs pass.
    func testAWarmUpAfterARedirectIsStillCaught() async throws {
        let scenario = try ScenarioParser.load(path: Self.folder.appendingPathComponent("f2-warm-up-after-a-redirect-still-caught.json").path)
        await NamedCheckCatch.assertCaught(scenario, by: .warmsUpKnownExperiments, check: "single_flight",
                                           saying: "sent request #4 for experiment 'exp_a' of user 'user-3', but no call of client 'main' had asked for it")
    }

    /// F2: where a redirect points, and only there, is a following request the stack's.
    func testARedirectTargetIsReadRelativeToItsRequest() {
        let a = Checks.redirectTarget("/api/v1/feature-flags/evaluate/f?user_id=a%2Bb&x=1", from: "/api/v1/feature-flags/evaluate/f?user_id=u")
        XCTAssertEqual(a?.path, "/api/v1/feature-flags/evaluate/f")
        XCTAssertEqual(a?.query, ["user_id": "a+b", "x": "1"])
        let b = Checks.redirectTarget("http://elsewhere:9/api/v1/tracking/assign", from: "/api/v1/tracking/assign")
        XCTAssertEqual(b?.path, "/api/v1/tracking/assign")
        XCTAssertEqual(b?.query, [:])
        XCTAssertEqual(Checks.redirectTarget("g", from: "/api/v1/feature-flags/evaluate/f")?.path, "/api/v1/feature-flags/evaluate/g")
    }

    /// F3: the Python example's `resent-without-body` fails `event_payload` naming the empty
    /// body; the correct example passes the same file.
    func testATrackingRequestWithNoBodyFails() throws {
        let dir = try scratchDirectory("seventy-sixth-no-body")
        let file = Self.folder.appendingPathComponent("f3-a-keyed-track-sent-with-no-body-fails-event-payload.json").path
        let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", TesterFixtures.python, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
        try TesterFixtures.assertFails(file, on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=resent-without-body \(TesterFixtures.python)"],
                                       saying: ["event_payload", "is POST /api/v1/tracking/track with no body, where the SDK sends an event object (CONTRACT.md section 1)"], in: dir)
    }

    /// F5: each client's requests carry its own key; the Python example's `api-key-static` (the
    /// last client's key for every client) fails, and no output shows a key.
    func testEachClientsAPIKeyIsMatchedWithoutShowingIt() async throws {
        let file = Repository.root.appendingPathComponent("scenarios/field-each-client-sends-its-own-api-key.json").path
        let scenario = try ScenarioParser.load(path: file)
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })")
        }
        let dir = try scratchDirectory("seventy-sixth-api-keys")
        let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", TesterFixtures.python, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
        try TesterFixtures.assertFails(file, on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=api-key-static \(TesterFixtures.python)"],
                                       saying: ["matching client=a api_key=api_keys[0], saw 0", "(sent api_keys[1])"], in: dir)
        let verdict = try String(contentsOf: dir.appendingPathComponent("v.json"), encoding: .utf8)
        XCTAssertFalse(verdict.contains("key-one") || verdict.contains("key-two"), "a key shown in the verdict")
    }

    /// F5: an `api_key` that no fixture key is could never match: refused at its path, without
    /// echoing it; an `X-API-Key` header naming a fixture key becomes that key's matcher.
    func testAnAPIKeyMatcherNamesAKeyOfTheFixtures() throws {
        let head = #""format": "experimently-scenario/1", "name": "n", "description": "d", "fixtures": {"api_keys": [{"key": "k1"}, {"key": "k2"}]}"#
        func parse(_ match: String) throws -> Scenario {
            try ScenarioParser.parse(Data("{\(head), \"steps\": [{\"assert\": {\"requests\": \(match), \"count\": 0}}]}".utf8), file: "x.json")
        }
        XCTAssertThrowsError(try parse(#"{"api_key": "secret-k9"}"#)) { error in
            XCTAssertEqual((error as? ScenarioError)?.path, "$.steps[0].assert.requests.api_key")
            XCTAssertFalse("\(error)".contains("secret-k9"), "\(error)")
        }
        guard case .expect(.requests(let m, _, _))? = try parse(#"{"headers": {"x-api-key": "k2"}}"#).steps.first else { return XCTFail("no assert") }
        XCTAssertEqual(m.apiKey, .fixture(index: 1))
        XCTAssertNil(m.headers)
        var record = RequestRecord(seq: 1, client: "a", method: "GET", path: "/health", target: "/health", query: [:], headers: [:], body: nil,
                                   status: 200, response: nil, fault: nil, parked: false, cancelled: false, answered: true)
        XCTAssertFalse(record.matches(m))
        record.apiKeyIndex = 1
        XCTAssertTrue(record.matches(m))
        XCTAssertFalse(record.matches(RequestMatch(apiKey: .noneOfTheFixtures)))
        record.apiKeyIndex = -1
        XCTAssertTrue(record.matches(RequestMatch(apiKey: .noneOfTheFixtures)))
    }
}
