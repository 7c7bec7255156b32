import XCTest
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ExperimentlyMock
@testable import ContractHarness
import ExperimentlyMutants

/// Check-level findings of the tenth to thirteenth outside testers of stop 22. The tenth changed
/// a Python SDK in ways CONTRACT.md allows (`/work/attack11`, FINDINGS.md): lower-case or needless
/// percent-escapes, a `clearOfflineCache()` that detaches requests in flight, a `close()` that lets
/// them finish; each failed a correct SDK. The extensions below add the twelfth's (exact labels,
/// defect 6 on a later chunk) and the thirteenth's (how the report draws identities and times).
final class TenthTesterFindingsTests: XCTestCase {
    /// RFC 3986 section 6.2.2: the hex case of an escape and an escaped unreserved character do
    /// not make another URI; an escaped reserved character does.
    func testATargetIsNormalizedAsRFC3986SaysAndNoFurther() {
        XCTAssertEqual(PercentDecoding.normalizedTarget("/a/new%20ui%2fv2?user_id=a%3ab"), "/a/new%20ui%2Fv2?user_id=a%3Ab")
        XCTAssertEqual(PercentDecoding.normalizedTarget("/evaluate/sdk%5Fcontract%5Fflag?user%5Fid=user%2D1%7e%2E%41z"), "/evaluate/sdk_contract_flag?user_id=user-1~.Az")
        XCTAssertEqual(PercentDecoding.normalizedTarget("/a%2Fb"), "/a%2Fb")
        XCTAssertEqual(PercentDecoding.normalizedTarget("/bad%zz%4"), "/bad%zz%4", "a malformed escape stays as written")
        XCTAssertEqual(PercentDecoding.normalizedTarget("/caf%C3%A9"), "/caf%C3%A9", "non-ASCII bytes stay escaped")
        XCTAssertTrue(FaultMatch.samePath("/api/v1/feature-flags/evaluate/sdk_contract_flag", "/api/v1/feature-flags/evaluate/sdk%5Fcontract%5fflag"))
        XCTAssertTrue(FaultMatch.samePath("/e/new%20ui%2Fv2", "/e/new%20ui%2fv2"))
        XCTAssertFalse(FaultMatch.samePath("/e/a/b", "/e/a%2Fb"), "a reserved character escaped is another path")
        XCTAssertFalse(FaultMatch.samePath("/e/caf\u{E9}", "/e/cafe\u{301}"), "NFC and NFD stay two paths")
        XCTAssertTrue(FaultMatch.startsWith("/api%2Dv1/x", "/api-v1/"))
    }

    /// A fault rule for `sdk_contract_flag` fires for an SDK that escapes `_` and writes
    /// lower-case escapes: in process, through the mock itself.
    func testAFaultRuleMeetsAnEquivalentlyEscapedRequest() async throws {
        let backend = MockBackend(fixtures: Fixtures.sdkContract)
        defer { _ = backend.shutdown() }
        _ = backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/feature-flags/evaluate/sdk_contract_flag"), action: .respond(status: 503, headers: [], body: Data("down".utf8))))
        var request = URLRequest(url: URL(string: backend.baseURL.absoluteString + "/api/v1/feature-flags/evaluate/sdk%5Fcontract%5Fflag?user_id=a%3ab")!)
        request.setValue(Fixtures.sdkContractAPIKey, forHTTPHeaderField: "X-API-Key")
        let (_, response) = try await backend.makeURLSession().data(for: request)
        XCTAssertEqual((response as? HTTPURLResponse)?.statusCode, 503)
    }

    /// `single_flight`: after `clearOfflineCache()` a new lookup may send a request of its own
    /// (a response from before it is written nowhere, CONTRACT.md section 5.1, as after a
    /// clearCache); without any clear between them the second request still fails, and the
    /// evidence shows the first request, however long the span between the two.
    func testASecondRequestAfterClearOfflineCacheIsNoSingleFlightFailure() async throws {
        let text = #"""
        {"format": "experimently-scenario/1", "name": "two-flights-across-a-clear", "description": "two requests for one key across a clear",
         "steps": [
           {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "h"},
           {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "as": "a", "async": true},
           {"wait_for": {"held": "h", "count": 1}},
           {"do": "clearCache"},
           {"do": "getEvaluatedFlags", "user": "user-9"}, {"do": "getEvaluatedFlags", "user": "user-9"}, {"do": "getEvaluatedFlags", "user": "user-9"},
           {"do": "getEvaluatedFlags", "user": "user-9"}, {"do": "getEvaluatedFlags", "user": "user-9"}, {"do": "getEvaluatedFlags", "user": "user-9"},
           {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "as": "b"},
           {"release": "h"},
           {"await": "a"}
         ],
         "checks": ["single_flight"]}
        """#
        let scenario = try ScenarioParser.parse(Data(text.utf8), file: "two-flights.json")
        let result = await ScenarioRunner().run(scenario)
        XCTAssertEqual(result.status, .passed, AppStepsTests.failures(result))
        func renamed(_ name: String) -> [HistoryEvent] {
            result.events.map { e in
                guard e.kind == .invoke, e.name == "clearCache" else { return e }
                var e = e
                e.name = name
                return e
            }
        }
        let port = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "x", clients: ["main"])
        func problems(_ h: [HistoryEvent]) -> [(String, [String])] {
            Checks.singleFlight(CheckContext(scenario: scenario, history: h, clients: [:], port: port, driver: SwiftSDKDriver(), app: nil))
        }
        XCTAssertEqual(problems(renamed("clearOfflineCache")).map(\.0), [])
        let failing = problems(renamed("getAssignments"))
        XCTAssertEqual(failing.count, 1, "\(failing.map(\.0))")
        let evidence = failing.first?.1 ?? []
        XCTAssertLessThanOrEqual(evidence.count, 12)
        XCTAssertTrue(evidence.first?.contains("request #1") ?? false, "\(evidence)")
        XCTAssertTrue(evidence.contains { $0.contains("request #2") }, "\(evidence)")
        XCTAssertTrue(evidence.contains { $0.hasPrefix("... (") }, "\(evidence)")
    }
}

extension TenthTesterFindingsTests {
    /// Labels are identity data in the named checks too: two operations labelled NFC "é" and
    /// NFD "e\u{301}" (one failing, one answered) are judged each by its own invocation in
    /// `offline_fallback` and `stickiness` (their tables of invocations and completions were keyed
    /// by Swift `String`, which merges the two).
    func testCanonicallyEquivalentLabelsAreTwoOperationsInTheNamedChecks() async throws {
        let text = """
        {"format": "experimently-scenario/1", "name": "labels-nfc-nfd", "description": "two labels, canonically equivalent",
         "steps": [
           {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"respond": {"status": 503, "body": "{}"}}}, "id": "f"},
           {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "\u{E9}", "expect": {"error": "serverError", "status": 503}},
           {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "as": "e\u{301}", "expect": {"value": {"assigned": true}}}
         ],
         "checks": ["offline_fallback", "no_stale_write", "single_flight", "stickiness"]}
        """
        let scenario = try ScenarioParser.parse(Data(text.utf8), file: "labels.json")
        for driver in [SwiftSDKDriver() as any SDKDriver, MutantRun.driver(nil)] {
            let result = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(result.status, .passed, AppStepsTests.failures(result))
            XCTAssertEqual(result.checks.filter { !$0.passed }.count, 0)
        }
    }
}

extension TenthTesterFindingsTests {
    /// An async step's expectation is kept by its exact label: with NFC "é" and NFD "e\u{301}"
    /// both started async, the second no longer replaces the first's expectation (which was then
    /// never evaluated: a wrong expectation passed).
    func testAsyncExpectationsOfEquivalentLabelsAreEachEvaluated() async throws {
        func scenario(firstExpects: String) throws -> Scenario {
            let text = """
            {"format": "experimently-scenario/1", "name": "async-labels-nfc-nfd", "description": "two async labels, canonically equivalent",
             "steps": [
               {"fault": {"match": {"path": "/api/v1/tracking/assign", "body": {"user_id": "user-1"}}, "action": {"respond": {"status": 503, "body": "{}"}}}, "id": "f"},
               {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "\u{E9}", "async": true, "expect": \(firstExpects)},
               {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "as": "e\u{301}", "async": true, "expect": {"value": {"assigned": true}}},
               {"await": "\u{E9}"},
               {"await": "e\u{301}"}
             ]}
            """
            return try ScenarioParser.parse(Data(text.utf8), file: "async-labels.json")
        }
        let right = await ScenarioRunner().run(try scenario(firstExpects: #"{"error": "serverError", "status": 503}"#))
        XCTAssertEqual(right.status, .passed, AppStepsTests.failures(right))
        XCTAssertEqual(right.checks.filter { $0.name.hasSuffix("expect") }.count, 2, "\(right.checks.map(\.name))")
        let wrong = await ScenarioRunner().run(try scenario(firstExpects: #"{"value": {"assigned": true}}"#))
        XCTAssertEqual(wrong.status, .failed, "the first operation's wrong expectation is evaluated")
        XCTAssertTrue(wrong.checks.contains { !$0.passed && $0.name == "step 1 do getAssignment as \u{E9} expect" }, "\(wrong.checks.map { "\($0.name): \($0.passed)" })")
    }
}

extension TenthTesterFindingsTests {
    /// A twelfth outside tester: an SDK without its own deadline on a batch's later chunk (the
    /// first answered) was told the scenario deadlocks; defect 6 is named now. The shipping SDK
    /// passes the file every time (its tracking task ran outside the runner's executor: 3 of 60
    /// runs failed before it went through the SDK's task spawner).
    func testNoDeadlineOnALaterChunkIsNamedDefectSix() async throws {
        let url = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/twelfth-tester/later-chunk-past-deadline.json")
        let scenario = try ScenarioParser.parse(Data(contentsOf: url), file: url.path)
        let broken = await ScenarioRunner(driver: MutantRun.driver(.noOwnDeadline), stepTimeoutCap: 1500).run(scenario)
        XCTAssertEqual(broken.status, .failed)
        let message = broken.firstFailure?.message ?? ""
        XCTAssertTrue(message.contains("its other requests were answered") && message.contains("defect 6"), message)
        XCTAssertFalse(message.contains("deadlocks"), message)
        for _ in 0..<20 {
            let correct = await ScenarioRunner().run(scenario)
            XCTAssertEqual(correct.status, .passed, AppStepsTests.failures(correct))
        }
    }
}

extension TenthTesterFindingsTests {
    /// A thirteenth outside tester: the report drew NFC and NFD ids, and ids with invisible
    /// scalars, the same. `visible` (used for every identity in the report's lanes) tells them apart.
    func testTheReportDrawsDifferentIdentitiesDifferently() {
        XCTAssertEqual("\u{E9}".visible, "\u{E9}")
        XCTAssertEqual("e\u{301}".visible, "e\\u{301}")
        XCTAssertEqual("\u{212B}".visible, "\\u{212B}")
        XCTAssertEqual("bob\u{200B}".visible, "bob\\u{200B}")
        XCTAssertEqual("bob\u{AD}".visible, "bob\\u{AD}")
        XCTAssertEqual("bob ".visible, "bob\\u{20}")
        XCTAssertEqual("a b".visible, "a b")
        XCTAssertEqual("\u{202E}user".visible, "\\u{202E}user")
        XCTAssertEqual("\\u{202E}user".visible, "\\\\u{202E}user")
        XCTAssertEqual("user-1".visible, "user-1")
        let ids = ["bob", "bob\u{200B}", "bob\u{2060}", "bob\u{FEFF}", "bob\u{AD}", "bob ", "\u{E9}", "e\u{301}", "\u{212B}", "\u{C5}"]
        XCTAssertEqual(Set(ids.map(\.visible)).count, ids.count)
    }
}

extension TenthTesterFindingsTests {
    /// A thirteenth outside tester: the lanes labelled 29.999 s and 30 s both `t=30 s`.
    func testTheReportsClockKeepsEveryDigit() {
        XCTAssertEqual(HTMLReport.seconds(29.999), "29.999 s")
        XCTAssertEqual(HTMLReport.seconds(30), "30 s")
        XCTAssertEqual(HTMLReport.seconds(300.5), "300.5 s")
        XCTAssertEqual(HTMLReport.seconds(0.000001), "0.000001 s")
    }
}
