import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock
import ExperimentlyMutants

/// Findings of the fifty-ninth outside tester (`/work/attack59/REPORT.md`: other flag SDKs' field
/// bugs written as scenarios), each proven both ways (the correct SDKs pass, a broken variant
/// fails the named check):
///
/// - F1 to F3: a lookup that threw without any request (a remembered 404 or 500, a client stuck
///   offline) was never judged: `offline_fallback` judged only lookups with a settled request.
/// - F4, F5: a lookup that ended `cancelled` was never judged, so an SDK whose deadline cancelled
///   (the persisted value lost) or whose cancel of one waiter ended every waiter passed.
/// - F6: a `cancel` step's history line did not name the operation.
/// - The fifty-seventh tester's D for batches: two identical `trackBatch` calls, one refused.
final class FiftyNinthTesterFindingsTests: XCTestCase {
    /// The sixty-third tester: `view#9` written as a label of its own beside a `times` group
    /// `view` is no copy of it either, so cancelling the group does not excuse it.
    func testALabelOfItsOwnIsNoCopyOfATimesGroup() async throws {
        await assertCaught(try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "gate"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "as": "view#9", "async": true},
            {"wait_for": {"held": "gate", "count": 1}},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "as": "view", "times": 2, "async": true},
            {"cancel": "view"}, {"release": "gate"}, {"await": "view"}, {"await": "view#9"}
            """), by: .cancelEndsEveryWaiter, saying: "view#9 (getAssignment of 'sdk_contract_ab' for 'user-2') ended cancelled, but nothing cancelled it")
    }

    /// The sixty-third tester: a variant a `seed_store` step wrote (an older version's entry),
    /// served as the fallback on a 503, is not the backend's assignment: the backend's later
    /// `control` is no change of variant (the correct SDKs pass `stickiness`).
    func testASeededVariantServedAsTheFallbackIsNoAssignment() async throws {
        let scenario = try Self.scenario("""
            {"seed_store": {"user": "user-1", "experiment": "sdk_contract_ab",
                            "json": {"experiment_key": "sdk_contract_ab", "user_id": "user-1", "variant_name": "treatment", "is_control": true}}},
            {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"respond": {"status": 503, "json": {"detail": "down"}}}}, "id": "down"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"value": {"variant_name": "treatment"}}},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"value": {"variant_name": "control"}}}
            """, checks: #"["stickiness", "offline_fallback"]"#)
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })")
        }
    }

    /// The sixty-second tester, F1: `view#2` beside an operation `view` is no copy of a `times`
    /// group, so cancelling `view` does not excuse it ending `cancelled`.
    func testALabelEndingInHashDigitsIsNoCopyBesideItsBase() async throws {
        await assertCaught(try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "gate"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "as": "view#2", "async": true},
            {"wait_for": {"held": "gate", "count": 1}},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "as": "view", "async": true},
            {"cancel": "view"}, {"release": "gate"}, {"await": "view#2"}
            """), by: .cancelEndsEveryWaiter, saying: "view#2 (getAssignment of 'sdk_contract_ab' for 'user-2') ended cancelled, but nothing cancelled it")
    }

    private static func shipped(_ name: String) throws -> Scenario {
        try ScenarioParser.load(path: Repository.root.appendingPathComponent("scenarios/\(name).json").path)
    }

    private static func scenario(_ steps: String, checks: String = #"["offline_fallback"]"#, config: String = "") throws -> Scenario {
        try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "t", "description": "d", "checks": \(checks), \(config)
         "steps": [\(steps)]}
        """.utf8), file: "t.json")
    }

    /// The correct SDKs pass `scenario`; `defect` fails its check `check` with a message holding `text`.
    private func assertCaught(_ scenario: Scenario, by defect: Defect, check: String = "offline_fallback", saying text: String,
                              file: StaticString = #filePath, line: UInt = #line) async {
        await NamedCheckCatch.assertCaught(scenario, by: defect, check: check, saying: text, file: file, line: line)
    }

    /// F1 to F3: a 404, a 500 and a dropped connection, each remembered and thrown again without a
    /// request once the backend is well.
    func testAFailureThrownWithoutARequestFails() async throws {
        await assertCaught(try Self.shipped("field-failures-are-never-remembered"), by: .remembersFailure,
                           saying: "threw experimentNotFound, but no request for its user and key was sent or in flight while it ran")
        // One at a time, each kind of failure.
        let kinds = [
            #"{"respond": {"status": 500, "json": {"detail": "x"}}}"#: "threw serverError",
            #"{"drop_before_response": {}}"#: "threw networkError",
        ]
        for (action, text) in kinds {
            await assertCaught(try Self.scenario("""
                {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag"}, "when": {"first": 1}, "action": \(action)}, "id": "f"},
                {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1"},
                {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1"}
                """), by: .remembersFailure, saying: text)
        }
    }

    /// A lookup joining a request already in flight takes its failure: the request was in flight
    /// while it ran, so its error needs no request of its own (the correct SDKs pass, and so does
    /// the remembering variant, which sends the same requests here).
    func testAFailureOfAJoinedRequestNeedsNoRequestOfItsOwn() async throws {
        let scenario = try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "h"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "first", "async": true},
            {"wait_for": {"held": "h", "count": 1}},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "joined", "async": true},
            {"release": "h", "response": {"status": 503, "json": {"detail": "x"}}},
            {"await": "first", "expect": {"error": "serverError"}}, {"await": "joined", "expect": {"error": "serverError"}}
            """, checks: #"["offline_fallback", "single_flight"]"#)
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil), MutantRun.driver(.remembersFailure)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })")
        }
    }

    /// A client whose `base_url` no request can reach throws `networkError` with no request at
    /// the mock: not judged (an origin elsewhere sends nothing the mock sees).
    func testAClientThatCannotReachTheMockIsNotJudgedForItsSilence() async throws {
        let scenario = try ScenarioParser.parse(Data("""
            {"format": "experimently-scenario/1", "name": "t", "description": "d", "checks": ["offline_fallback"],
             "clients": {"main": {}, "away": {"config": {"base_url": "http://127.0.0.1:9"}}},
             "steps": [{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "client": "away", "expect": {"error": "networkError"}},
                       {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1"}]}
            """.utf8), file: "t.json")
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })")
        }
    }

    /// F4: the SDK's own deadline is a timeout (the persisted value), never `cancelled`.
    func testADeadlineReportedAsCancelledFails() async throws {
        await assertCaught(try Self.shipped("field-own-deadline-is-a-timeout-not-a-cancel"), by: .deadlineReportsCancelled,
                           saying: "fallback (getAssignment of 'sdk_contract_ab' for 'user-2') ended cancelled, but nothing cancelled it")
    }

    /// F5: cancelling one waiter of a shared request leaves the others their answer.
    func testCancellingOneWaiterEndsNoOther() async throws {
        await assertCaught(try Self.shipped("field-cancelling-one-view-never-cancels-the-others"), by: .cancelEndsEveryWaiter,
                           saying: "ended cancelled, but nothing cancelled it")
    }

    /// A lookup cancelled by a `cancel` step of its `times` group, or by a `close()` of its client,
    /// may end `cancelled`: the correct SDKs pass.
    func testACancelStepOrACloseMayEndALookupCancelled() async throws {
        let scenario = try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "action": {"hold": {}}}, "id": "h"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "a", "async": true, "times": 2},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "as": "b", "async": true},
            {"wait_for": {"held": "h", "count": 2}},
            {"cancel": "a"}, {"await": "a", "expect": {"error": "cancelled"}},
            {"do": "close"}, {"await": "b", "expect": {"error": "cancelled"}},
            {"wait_for": {"requests": {"path": "/api/v1/tracking/assign", "cancelled": true}, "count": 2}}, {"release": "h", "count": 2}
            """)
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })")
        }
    }

    /// F6: the history line of a `cancel` step names what it cancelled.
    func testACancelLineNamesItsOperation() async throws {
        let r = await ScenarioRunner().run(try Self.shipped("field-cancelling-one-view-never-cancels-the-others"))
        let lines = r.events.map(\.line)
        XCTAssertTrue(lines.contains { $0.hasSuffix("t=0.0 cancel quitter ") }, "\(lines)")
    }
}

extension FiftyNinthTesterFindingsTests {
    /// The tracking sibling of F1 to F3: after one failed `/track`, a keyed status call that reports
    /// `false` without sending fails `fan_out`; a keyed call that sent and got 500 passes.
    func testAKeyedStatusCallThatReportsFalseUnsentFails() async throws {
        await assertCaught(try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/track"}, "when": {"first": 1}, "action": {"respond": {"status": 500, "json": {"detail": "x"}}}}, "id": "f"},
            {"do": "trackWithStatus", "event": {"user": "user-1", "name": "purchase", "experiment": "sdk_contract_ab"}, "expect": {"value": false}},
            {"do": "trackWithStatus", "event": {"user": "user-1", "name": "purchase", "experiment": "sdk_contract_ab"}, "as": "second"}
            """, checks: #"["fan_out"]"#), by: .remembersFailure, check: "fan_out",
            saying: "second")
        // And a keyed batch after a failed one.
        await assertCaught(try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/batch"}, "when": {"first": 1}, "action": {"respond": {"status": 500, "json": {"detail": "x"}}}}, "id": "f"},
            {"do": "trackBatch", "events": [{"user": "user-1", "name": "purchase", "experiment": "sdk_contract_ab"}], "expect": {"value": false}},
            {"do": "trackBatch", "events": [{"user": "user-1", "name": "purchase", "experiment": "sdk_contract_ab"}], "as": "again"}
            """, checks: #"["fan_out"]"#), by: .remembersFailure, check: "fan_out",
            saying: "trackBatch 'again' returned false without sending any tracking request while it ran")
    }

    /// Sixty-second tester, F2: identical keyed status calls merged into fewer requests, all
    /// reporting `false`: each needs a `/track` of its own. Shown on one history both ways: as the
    /// shipping SDK ran three calls against 503s (passes), and with two of its three `/track`
    /// requests taken away (as an SDK that merged them sends).
    func testIdenticalKeyedStatusCallsThatReportFalseNeedATrackEach() async throws {
        let scenario = try FiftyNinthTesterFindingsTests.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/track"}, "action": {"respond": {"status": 503, "json": {"detail": "x"}}}}, "id": "f"},
            {"do": "trackWithStatus", "event": {"user": "user-1", "name": "purchase", "experiment": "sdk_contract_ab"}, "as": "buy", "times": 3, "expect": {"value": false}}
            """, checks: #"["fan_out"]"#)
        let run = await ScenarioRunner().run(scenario)
        XCTAssertEqual(run.status, .passed, "\(run.checks.filter { !$0.passed })")
        let port = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "x", clients: ["main"])
        func problems(_ h: [HistoryEvent]) -> [String] {
            let context = CheckContext(scenario: scenario, history: h, clients: [:], port: port, driver: SwiftSDKDriver(), app: nil)
            return Checks.keyedTracksSent(context, appEvents: AppEventFanOut(context)).map(\.0)
        }
        XCTAssertEqual(problems(run.events), [])
        var merged = run.events
        let seqs = merged.filter { $0.kind == .request && $0.request?.path == "/api/v1/tracking/track" }.compactMap(\.request?.seq)
        XCTAssertEqual(seqs.count, 3)
        for i in merged.indices where merged[i].request.map({ seqs.dropFirst().contains($0.seq) }) ?? false {
            merged[i].request?.client = "elsewhere"
            merged[i].client = "elsewhere"
        }
        XCTAssertFalse(problems(merged).isEmpty, "two of three calls had no /track of their own")
    }
}

/// Findings of the sixtieth outside tester (`/work/attack60/REPORT.md`: the harness as another
/// language's SDK maintainer uses it) and the sixty-first (`/work/attack61/REPORT.md`: the new
/// rules above against correct SDKs out of process).
final class SixtiethTesterFindingsTests: XCTestCase {
    /// An assignment without its variant is no stable variant: `stickiness` fails it (the Python
    /// example with `assignment-without-variant-name`), and passes the correct example.
    func testAnAssignmentThatNamesNoVariantFailsStickiness() throws {
        let dir = try scratchDirectory("sixtieth-stickiness")
        let file = Repository.root.appendingPathComponent("scenarios/field-stickiness-variant-names-compared-exactly.json").path
        try TesterFixtures.assertFails(file, on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=assignment-without-variant-name \(TesterFixtures.python)"],
                                       saying: ["stickiness", "that names no variant"], in: dir)
        let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", TesterFixtures.python, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
    }

    /// A vectors file with no vectors checks nothing and is refused (exit 64), and one whose
    /// `expected_hash` contradicts its own `md5_hex` is refused naming the vector.
    func testAVectorsFileThatChecksNothingOrContradictsItselfIsRefused() throws {
        let dir = try scratchDirectory("sixtieth-vectors")
        let empty = dir.appendingPathComponent("empty.json")
        try Data(#"{"hash_vectors": [], "rollout_vectors": []}"#.utf8).write(to: empty)
        var (status, out) = try HarnessProcess.run(["vectors", "--vectors", empty.path, "--verdict", "v.json"], in: dir, readingStandardError: true)
        XCTAssertEqual(status, 64, out)
        XCTAssertTrue(out.contains("holds no vectors at all"), out)
        let wrong = dir.appendingPathComponent("wrong.json")
        try Data(#"{"hash_vectors": [{"user_id": "user-123", "flag_key": "my-flag", "md5_hex": "43bc57b1e81dec71c5242122ac05170f", "expected_hash": 0.5}]}"#.utf8).write(to: wrong)
        (status, out) = try HarnessProcess.run(["vectors", "--vectors", wrong.path, "--verdict", "v.json"], in: dir, readingStandardError: true)
        XCTAssertEqual(status, 64, out)
        XCTAssertTrue(out.contains("at $.hash_vectors[0]: expected_hash 0.5 disagrees with its md5_hex"), out)
        let rollout = dir.appendingPathComponent("rollout.json")
        try Data(#"{"hash_vectors": [], "rollout_vectors": [{"user_id": "user-123", "flag_key": "my-flag", "expected_hash": 0.6927449859213084, "rollout_50_percent": true}]}"#.utf8).write(to: rollout)
        (status, out) = try HarnessProcess.run(["vectors", "--vectors", rollout.path, "--verdict", "v.json"], in: dir, readingStandardError: true)
        XCTAssertEqual(status, 64, out)
        XCTAssertTrue(out.contains("rollout_50_percent true disagrees with expected_hash"), out)
        // Sixty-third: values that are not of the vector's own input.
        let foreign = dir.appendingPathComponent("foreign.json")
        try Data(#"{"hash_vectors": [{"user_id": "alice", "flag_key": "my-flag", "md5_hex": "43bc57b1e81dec71c5242122ac05170f", "expected_hash": 0.6927449859213084}]}"#.utf8).write(to: foreign)
        (status, out) = try HarnessProcess.run(["vectors", "--vectors", foreign.path, "--verdict", "v.json"], in: dir, readingStandardError: true)
        XCTAssertEqual(status, 64, out)
        XCTAssertTrue(out.contains("is not the MD5 of its own"), out)
        let noDigest = dir.appendingPathComponent("no-digest.json")
        try Data(#"{"hash_vectors": [], "rollout_vectors": [{"user_id": "alice", "flag_key": "my-flag", "expected_hash": 0.6927449859213084, "rollout_50_percent": false}]}"#.utf8).write(to: noDigest)
        (status, out) = try HarnessProcess.run(["vectors", "--vectors", noDigest.path, "--verdict", "v.json"], in: dir, readingStandardError: true)
        XCTAssertEqual(status, 64, out)
        XCTAssertTrue(out.contains("is not the hash of its own user id and key"), out)
    }

    /// Sixty-first: a request the SDK's HTTP stack may refuse to send, or the listener refused at
    /// the HTTP level, is in no history: the rules that need a request are not held against it.
    func testARequestThatMayFailBeforeTheMockIsNotRequired() throws {
        let scenario = try ScenarioParser.parse(Data(#"""
            {"format": "experimently-scenario/1", "name": "t", "description": "d", "checks": ["offline_fallback"],
             "config": {"api_key": "sdk\u0000key"}, "steps": [{"advance": 1}]}
            """#.utf8), file: "t.json")
        let port = try MockBackendPort(fixtures: nil, clock: VirtualClock(), file: "x", clients: ["main"])
        XCTAssertTrue(CheckContext(scenario: scenario, history: [], clients: [:], port: port, driver: SwiftSDKDriver(), app: nil).mayFailBeforeTheMock(client: "main"))
        let plain = try ScenarioParser.parse(Data(#"{"format": "experimently-scenario/1", "name": "t", "description": "d", "checks": ["offline_fallback"], "steps": [{"advance": 1}]}"#.utf8), file: "t.json")
        var c = CheckContext(scenario: plain, history: [], clients: [:], port: port, driver: SwiftSDKDriver(), app: nil)
        XCTAssertFalse(c.mayFailBeforeTheMock(client: "main", user: "user-1", key: "sdk_contract_flag"))
        XCTAssertTrue(c.mayFailBeforeTheMock(client: "main", user: String(repeating: "é", count: 1400), key: "k"))
        c.refusedAtTransport = [ExactKey("main")]
        XCTAssertTrue(c.mayFailBeforeTheMock(client: "main"))
    }
}

extension SixtiethTesterFindingsTests {
    /// The sixty-third tester: `mutants --list` names every variant (number, name, defect) and
    /// runs nothing; with another option it is refused.
    func testMutantsListNamesEveryVariant() throws {
        let dir = try scratchDirectory("sixty-third-mutants-list")
        var (status, out) = try HarnessProcess.run(["mutants", "--list"], in: dir)
        XCTAssertEqual(status, 0, out)
        let lines = out.split(separator: "\n")
        XCTAssertEqual(lines.count, Defect.allCases.count, out)
        XCTAssertTrue(lines.first?.hasPrefix(" 1 stale-write-after-clear: ") ?? false, out)
        XCTAssertTrue(out.contains("\(Defect.allCases.count) \(Defect.allCases.last!.rawValue): \(Defect.allCases.last!.summary)"), out)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.appendingPathComponent("mutants-verdict.json").path))
        (status, out) = try HarnessProcess.run(["mutants", "--list", "--full"], in: dir, readingStandardError: true)
        XCTAssertEqual(status, 64, out)
        XCTAssertTrue(out.contains("mutants --list takes no other option"), out)
    }
}

// MARK: - The sixty-fifth outside tester (`/work/attack65/REPORT.md`)

/// Findings 1 to 3: a call nothing gave up that ended with a failure (an error, the persisted
/// value, `false`) while its request was still unanswered or had been ended by the SDK itself
/// passed every named check: an SDK whose request belonged to the caller that started it, whose
/// `close()` ended every client's requests, or whose `clearCache()` ended the requests in flight.
extension FiftyNinthTesterFindingsTests {
    /// Finding 1: cancelling the caller that started a shared request leaves the joiner its answer.
    func testCancellingTheStarterLeavesTheJoinerItsAnswer() async throws {
        await assertCaught(try Self.shipped("field-cancelling-the-first-view-leaves-the-second-its-answer"), by: .cancelStarterEndsRequest,
                           saying: "joiner (getAssignment of 'sdk_contract_ab' for 'user-2') gave {\"value\"")
        await assertCaught(try Self.shipped("field-cancelling-the-first-view-leaves-the-second-its-answer"), by: .cancelStarterEndsRequest,
                           saying: "second (getAssignment of 'sdk_contract_ab' for 'user-1') gave {\"code\":-999,\"error\":\"networkError\"")
    }

    /// Finding 3: a clear leaves the calls in flight their answers: the lookup its value, the
    /// keyed status call `true`.
    func testAClearLeavesTheCallsInFlightTheirAnswers() async throws {
        let scenario = try Self.shipped("field-clear-leaves-a-call-in-flight-its-answer")
        // Whether the mock has the SDK's cancel yet when the call returns is thread timing: the
        // cause reads "after the SDK itself ended request #2" or "while request #2 ... was still
        // unanswered"; the verdict and its subject are the same.
        await assertCaught(scenario, by: .clearEndsRequests,
                           saying: "assignment (getAssignment of 'sdk_contract_ab' for 'user-1') gave {\"code\":-999,\"error\":\"networkError\"")
        await assertCaught(scenario, by: .clearEndsRequests, saying: "but nothing ended it for this call: no cancel step of its label")
        await assertCaught(scenario, by: .clearEndsRequests, check: "fan_out",
                           saying: "trackWithStatus 'buy' returned false though no tracking request of its client failed while it ran (#4")
    }

    /// The exemptions, on the correct SDKs: a lookup whose own deadline passed (the clock moved
    /// past its `timeout`) may give the persisted value or an error, and a status call whose
    /// deadline passed may report `false`, though the SDK ended their requests itself.
    func testAnOwnDeadlineMayEndACallWithAFailure() async throws {
        let scenario = try Self.scenario("""
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2"},
            {"advance": 11},
            {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "action": {"hold": {}}}, "id": "a"},
            {"fault": {"match": {"path": "/api/v1/tracking/track"}, "action": {"hold": {}}}, "id": "t"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "as": "persisted", "async": true},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "as": "none", "async": true},
            {"do": "trackWithStatus", "event": {"user": "user-1", "name": "buy", "experiment": "sdk_contract_ab"}, "as": "buy", "async": true},
            {"wait_for": {"held": "a", "count": 2}}, {"wait_for": {"held": "t", "count": 1}},
            {"advance": 3},
            {"await": "persisted", "expect": {"value": {"variant_name": "treatment"}}},
            {"await": "none", "expect": {"error": "networkError"}},
            {"await": "buy", "expect": {"value": false}},
            {"release": "a", "count": 2}, {"release": "t"}
            """, checks: #"["offline_fallback", "fan_out"]"#, config: #""config": {"cache_ttl": 10, "timeout": 2},"#)
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed }) \(r.reason ?? "")")
        }
    }
}

extension FiftyNinthTesterFindingsTests {
    /// The sixty-fifth tester's finding 5: one file named twice (twice on the command line, or a
    /// folder beside its own subfolder) runs once, not as a second scenario of the same name.
    func testOneFileNamedTwiceRunsOnce() throws {
        let dir = try scratchDirectory("sixty-fifth-same-file-twice")
        let sub = dir.appendingPathComponent("more/deeper")
        try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: true)
        let source = Repository.root.appendingPathComponent("scenarios/field-cancelling-the-first-view-leaves-the-second-its-answer.json")
        try FileManager.default.copyItem(at: source, to: sub.appendingPathComponent("s.json"))
        for arguments in [["run", "more/deeper/s.json", "more/deeper/s.json"], ["run", "more", "more/deeper"]] {
            let (status, out) = try HarnessProcess.run(arguments + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(arguments): \(out)")
            XCTAssertTrue(out.contains("1 passed, 0 failed"), out)
        }
        // Two files whose names differ only in normalization (NFC and NFD) are two files: both run.
        let text = try String(contentsOf: source, encoding: .utf8)
        let other = dir.appendingPathComponent("twins")
        try FileManager.default.createDirectory(at: other, withIntermediateDirectories: true)
        for (file, name) in [("\u{E9}.json", "twin-one"), ("e\u{301}.json", "twin-two")] {
            try text.replacingOccurrences(of: "field-cancelling-the-first-view-leaves-the-second-its-answer", with: name)
                .write(toFile: other.path + "/" + file, atomically: false, encoding: .utf8)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: other.path).count, 2)
        let (status, out) = try HarnessProcess.run(["run", "twins", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
        XCTAssertTrue(out.contains("2 passed, 0 failed"), out)
    }

    /// The sixty-fifth tester's finding 4: an adapter runs in a zone that is not UTC, so an SDK
    /// writing local time as UTC shows it here too; the harness's environment may pick another.
    func testAnAdapterRunsOutsideUTC() {
        let environment = AdapterDescendants.environment(token: "t")
        if ProcessInfo.processInfo.environment[AdapterDescendants.timeZoneOverride] == nil {
            XCTAssertEqual(environment["TZ"], "Asia/Kathmandu")
        }
        XCTAssertEqual(environment[AdapterDescendants.variable], "t")
    }
}

extension FiftyNinthTesterFindingsTests {
    /// The sixty-seventh tester (F1, F3, F5): what the new rule must leave to a correct SDK. A
    /// joiner of an app's held request, or of a chain of joiners whose first was cancelled, meets
    /// that request's deadline (counted from its receipt, not from the joiner's start); an answer
    /// naming another key may be cached under that key and served from there.
    func testJoinersMeetTheirRequestsDeadlineAndAnAnswerMayBeCachedUnderTheKeyItNames() async throws {
        let scenarios = [
            try Self.scenario("""
            {"app": "login", "user": "user-2"},
            {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "h"},
            {"app": "display", "as": "view", "async": true},
            {"wait_for": {"held": "h", "count": 1}},
            {"advance": 6},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-2", "as": "bg", "async": true},
            {"advance": 5},
            {"await": "bg", "expect": {"error": "networkError"}},
            {"await": "view", "expect": {"value": {"shown": "fallback"}}},
            {"wait_for": {"requests": {"path": "/api/v1/tracking/assign", "cancelled": true}, "count": 1}},
            {"release": "h"}
            """, checks: #"["offline_fallback", "single_flight"]"#, config: #""app": {"flag": "sdk_contract_flag", "experiment": "sdk_contract_ab"},"#),
            try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "h"},
            {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "as": "A", "async": true},
            {"wait_for": {"held": "h", "count": 1}},
            {"advance": 3},
            {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "as": "B", "async": true},
            {"advance": 1},
            {"cancel": "A"},
            {"await": "A", "expect": {"error": "cancelled"}},
            {"advance": 2},
            {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "as": "C", "async": true},
            {"advance": 4},
            {"await": "B", "expect": {"error": "networkError", "code": -1001}},
            {"await": "C", "expect": {"error": "networkError", "code": -1001}},
            {"wait_for": {"requests": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "cancelled": true}, "count": 1}},
            {"release": "h"},
            {"assert": {"requests": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag"}, "count": 1}}
            """, checks: #"["offline_fallback", "single_flight", "no_stale_write"]"#),
            try Self.scenario("""
            {"fault": {"match": {"path": "/api/v1/tracking/assign"}, "when": {"first": 1}, "action": {"respond": {"status": 200, "json": {"experiment_key": "sdk_other", "user_id": "user-1", "variant_id": "sdk_contract_ab-control", "variant_name": "control", "is_control": true, "configuration": {"color": "blue"}, "assigned": true}}}}, "id": "mis"},
            {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1", "expect": {"value": {"variant_name": "control"}}},
            {"do": "getAssignment", "experiment": "sdk_other", "user": "user-1", "expect": {"any_of": [{"value": {"variant_name": "control"}}, {"error": "experimentNotFound"}]}}
            """, checks: #"["offline_fallback", "no_stale_write", "single_flight"]"#),
        ]
        for scenario in scenarios {
            for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
                let r = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed }) \(r.reason ?? "")")
            }
        }
    }
}

extension FiftyNinthTesterFindingsTests {
    /// The sixty-sixth tester's F2: an entry kept past `close()` is named as such, and only for a
    /// client that was closed (a merged twin keeps its own explanation).
    func testAnEntryKeptPastCloseIsNamed() {
        XCTAssertTrue(Checks.cacheRule(want: [], got: ["x"], closed: true).contains("close() empties the memory cache"))
        XCTAssertFalse(Checks.cacheRule(want: [], got: ["x"]).contains("close()"))
        XCTAssertFalse(Checks.cacheRule(want: [], got: ["x"], twins: ["e\u{301}"], closed: true).contains("close() empties"))
        XCTAssertFalse(Checks.cacheRule(want: ["x"], got: ["x"], closed: true).contains("close()"), "nothing extra: a success lost")
    }
}
