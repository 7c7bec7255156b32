import XCTest
import Foundation
@testable import ContractHarness
@testable import ExperimentlyMock
import ExperimentlyMutants

/// The checks see times and queries as the SDK and the backend do (a sixth outside tester).
final class TimeAndQueryFidelityTests: XCTestCase {
    static func fixture(_ name: String) throws -> Scenario {
        let file = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/sixth-tester/\(name).json").path
        return try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
    }

    /// The cache model read history times rounded to the millisecond: an entry stored at 0.0004 s
    /// with a TTL of 1 s was expired at 1.0003 s there (fresh for the SDK), and one with a TTL of
    /// 0.0004 s still fresh at its expiry. `fan_out` and `no_stale_write` failed every correct SDK
    /// and passed `fan-out-to-expired`. Now the model reads the microsecond.
    func testSubMillisecondCacheEdgesPassCorrectSDKsAndFailTheVariantThatFansOutExpiredEntries() async throws {
        for name in ["t-ttl-submillisecond-fresh", "t-ttl-submillisecond-expired", "t-ttl-submillisecond-expired-checks-only"] {
            let scenario = try Self.fixture(name)
            for (driver, what) in [(SwiftSDKDriver(), "shipping SDK"), (MutantRun.driver(nil), "faithful variant")] {
                let result = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(result.status, .passed, "\(name) on the \(what): \(result.firstFailure?.message ?? result.reason ?? "")")
            }
        }
        let broken = await ScenarioRunner(driver: MutantRun.driver(.fanOutToExpired)).run(try Self.fixture("t-ttl-submillisecond-expired-checks-only"))
        XCTAssertEqual(broken.status, .failed)
        XCTAssertEqual(broken.firstFailure?.name, "fan_out", broken.firstFailure?.message ?? "")
    }

    /// The model adds times in whole microseconds (in doubles 0.1 + 0.2 was later than 0.3, and an
    /// entry stored at 0.1 s with a TTL of 0.2 s was fresh at 0.3 s), and an entry expiring exactly
    /// at a lookup or event may be there or not: the SDK's `Date` arithmetic decides at a tie (two
    /// advances of 0.05 s left the shipping SDK one unit in the last place before the expiry of a
    /// TTL of 0.1 s). A seventh outside tester: every correct SDK failed the first file.
    func testCacheExpiryIsModelledInWholeMicrosecondsAndTiesGoEitherWay() async throws {
        for name in ["t-ttl-0.1-plus-0.2", "t-ttl-0.1-two-advances"] {
            let scenario = try Self.fixture(name)
            for (driver, what) in [(SwiftSDKDriver(), "shipping SDK"), (MutantRun.driver(nil), "faithful variant")] {
                let result = await ScenarioRunner(driver: driver).run(scenario)
                XCTAssertEqual(result.status, .passed, "\(name) on the \(what): \(result.firstFailure?.message ?? "")")
            }
        }
        XCTAssertEqual(Checks.CacheModel.micros(0.1) + Checks.CacheModel.micros(0.2), Checks.CacheModel.micros(0.3))
    }

    /// A `drop_mid_body` answer is a failure for the client (the head and part of the body, then
    /// the connection closes): the model cached it, failing every correct SDK and passing
    /// `caches-failure`. And one that would cut nothing (`body_bytes` past the body) is a whole
    /// answer on both transports (in process it was a failure, over TCP a success). A seventh
    /// outside tester.
    func testAnAnswerCutOffMidBodyIsNoSuccessForTheModel() async throws {
        for name in ["d-drop-mid-body-fanout", "d-drop-mid-body-fanout-checks-only", "d-drop-mid-body-huge"] {
            let result = await ScenarioRunner().run(try Self.fixture(name))
            XCTAssertEqual(result.status, .passed, "\(name): \(result.firstFailure?.message ?? "")")
        }
        let broken = await ScenarioRunner(driver: MutantRun.driver(.cachesFailure)).run(try Self.fixture("d-drop-mid-body-fanout-checks-only"))
        XCTAssertEqual(broken.status, .failed)
    }

    /// Past `cache_size` an unkeyed event's batches are not predicted, but they hold only live
    /// entries of its user (a seventh outside tester: any batch passed there, and
    /// `fan-out-to-other-users` and `fan-out-to-expired` with it).
    func testPastTheCacheSizeFanOutStillHoldsOnlyLiveEntriesOfTheUser() async throws {
        let scenario = try Self.fixture("c-overflow-then-fanout")
        for (driver, what) in [(SwiftSDKDriver(), "shipping SDK"), (MutantRun.driver(nil), "faithful variant")] {
            let result = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(result.status, .passed, "\(what): \(result.firstFailure?.message ?? "")")
        }
        for defect in [Defect.fanOutToOtherUsers, .fanOutToExpired] {
            let broken = await ScenarioRunner(driver: MutantRun.driver(defect)).run(scenario)
            XCTAssertEqual(broken.firstFailure?.name, "fan_out", "\(defect)")
        }
    }

    /// `event_payload` compares a request with the calls of its client running when it arrived:
    /// an SDK repeating the first call's fields for a later call of the same user and name is
    /// caught, and the reference app's event is not judged against a runner call (a seventh
    /// outside tester).
    func testEventPayloadComparesEachRequestWithTheCallsRunningThen() async throws {
        for name in ["ep-two-calls-same-user-name", "ep-app-event-and-runner-same-name"] {
            let result = await ScenarioRunner().run(try Self.fixture(name))
            XCTAssertEqual(result.status, .passed, "\(name): \(result.firstFailure?.message ?? "")")
        }
        let given: [JSONValue] = [.object(["user": .string("u"), "name": .string("p"), "value": .number(1)]), .object(["user": .string("u"), "name": .string("p"), "value": .number(2)])]
        XCTAssertEqual(Checks.payloadDifferences(sent: .object(["event_type": .string("p"), "value": .number(1)]), given: given[1]).count, 1)
    }

    /// An entry the model takes as optional (a late answer nobody waited for; an answer object
    /// without the contract's fields) is no longer demanded by `fan_out`, and an answer that is
    /// no object (a released `[]`) is never modelled as cached: `fan_out` failed a correct SDK in 3
    /// of 22 runs with one history digest, `no_stale_write` every run (a seventh outside tester).
    func testOptionalEntriesAreNotDemandedAndNonObjectsAreNotCached() async throws {
        let late = try Self.fixture("d-delay-past-deadline")
        for _ in 0..<10 {
            let result = await ScenarioRunner().run(late)
            XCTAssertEqual(result.status, .passed, result.firstFailure?.message ?? "")
        }
        let released = await ScenarioRunner().run(try Self.fixture("d-release-200-array"))
        XCTAssertEqual(released.status, .passed, released.firstFailure?.message ?? "")
    }

    /// Scenario times are whole microseconds: a finer TTL, timeout, advance or delay is refused
    /// naming its path (the model could not agree with an SDK's `Date` arithmetic there).
    func testTimesFinerThanAMicrosecondAreRefusedNamingThePath() throws {
        func parse(_ body: String) throws -> Scenario {
            try ScenarioParser.parse(Data("""
            {"format": "experimently-scenario/1", "name": "t", "description": "d", "source": "CONTRACT.md section 4", "checks": ["single_flight"], \(body)}
            """.utf8), file: "t.json")
        }
        let cases: [(String, String)] = [
            (#""config": {"cache_ttl": 0.0000004}, "steps": [{"advance": 1}]"#, "$.config.cache_ttl"),
            (#""config": {"timeout": 2.0000001}, "steps": [{"advance": 1}]"#, "$.config.timeout"),
            (#""steps": [{"advance": 0.0000004}]"#, "$.steps[0].advance"),
            (#""steps": [{"fault": {"match": {"path": "/api/v1/tracking/track"}, "action": {"delay": {"seconds": 1.0000005}}}, "id": "d"}]"#,
             "$.steps[0].fault.action.delay.seconds"),
        ]
        for (body, path) in cases {
            XCTAssertThrowsError(try parse(body), body) { error in
                XCTAssertEqual((error as? ScenarioError)?.path, path, "\(error)")
                XCTAssertTrue("\(error)".contains("whole microseconds"), "\(error)")
            }
        }
        // Whole microseconds and milliseconds are read as before.
        XCTAssertNoThrow(try parse(#""config": {"cache_ttl": 0.0004, "timeout": 2.5}, "steps": [{"advance": 0.000001}, {"advance": 59.9}]"#))
        XCTAssertTrue(ScenarioParser.wholeMicroseconds(315_360_000))
        XCTAssertTrue(ScenarioParser.wholeMicroseconds(0.0004))
        XCTAssertFalse(ScenarioParser.wholeMicroseconds(1.0000005))
    }

    /// A literal `+` in a query is a space for the backend (Starlette's `parse_qsl`), so
    /// `user_id=a+b` is user "a b": the harness read it as "a+b", so its matchers and checks
    /// attributed to "a+b" what the mock served to "a b", and `no-percent-encoding` passed a file
    /// aimed at it. Now the harness reads the query with the mock's decoder; and a repeated name
    /// is read as the backend does, the last value (FastAPI reads a scalar parameter with
    /// `QueryParams.get`).
    func testTheHarnessReadsAQueryAsTheBackendDoes() async throws {
        let plus = try Self.fixture("f-plus-in-user-id")
        let shipping = await ScenarioRunner().run(plus)
        XCTAssertEqual(shipping.status, .passed, shipping.firstFailure?.message ?? "")
        let broken = await ScenarioRunner(driver: MutantRun.driver(.noPercentEncoding)).run(plus)
        XCTAssertEqual(broken.status, .failed)
        XCTAssertTrue((broken.firstFailure?.message ?? "").contains("user=a+b, saw 0"), broken.firstFailure?.message ?? "")
        // Nothing matched: the message shows the near misses (the same path), here user "a b".
        XCTAssertTrue((broken.firstFailure?.message ?? "").contains("near misses (same path): #1"), broken.firstFailure?.message ?? "")
        let view = await ScenarioRunner().run(try Self.fixture("f-plus-in-user-id-mockview"))
        XCTAssertEqual(view.status, .passed, view.firstFailure?.message ?? "")

        XCTAssertEqual(PercentDecoding.queryComponent("a+b%2Bc"), "a b+c")
        XCTAssertNil(PercentDecoding.queryComponent("a%2"))
        var model = BackendModel(fixtures: Fixtures.sdkContract)
        let repeated = model.respond(to: MockRequest(method: "GET", target: "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=a&user_id=b",
                                                     headers: [("X-Api-Key", Fixtures.sdkContractAPIKey)]), now: Date())
        let single = model.respond(to: MockRequest(method: "GET", target: "/api/v1/feature-flags/evaluate/sdk_contract_flag?user_id=b",
                                                   headers: [("X-Api-Key", Fixtures.sdkContractAPIKey)]), now: Date())
        XCTAssertEqual(repeated.status, 200)
        XCTAssertEqual(repeated.body, single.body, "the last user_id is the user")
        // The variant that leaves ids unencoded sends `user_id=a&user_id=b+c` for the id
        // "a&user_id=b+c": the backend serves user "b c", and so the harness's matchers see it.
        let repeatedFile = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "repeated", "description": "a repeated user_id", "source": "CONTRACT.md section 1", "steps": [
          {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "a&user_id=b+c"},
          {"assert": {"requests": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "user": "b c"}, "count": 1}}]}
        """.utf8), file: "repeated.json")
        let unencoded = await ScenarioRunner(driver: MutantRun.driver(.noPercentEncoding)).run(repeatedFile)
        XCTAssertEqual(unencoded.status, .passed, unencoded.firstFailure?.message ?? "")
        let encoded = await ScenarioRunner().run(repeatedFile)
        XCTAssertEqual(encoded.status, .failed, "the shipping SDK sends the id whole: no request for user 'b c'")
    }

    /// Fifteen unkeyed tracks whose batches are held and released together: the answers of equal
    /// content differ in `X-RateLimit-Remaining`, and the canonical history ordered such ties by
    /// the thread that recorded them (3 digests in 14 runs). Now the answer's headers are part of
    /// the order.
    func testIdenticalAnswersReleasedTogetherGiveOneDigest() async throws {
        let scenario = try Self.fixture("f-concurrent-unkeyed-tracks-held")
        var digests: [String: Int] = [:]
        for _ in 0..<12 {
            let result = await ScenarioRunner().run(scenario)
            XCTAssertEqual(result.status, .passed, result.firstFailure?.message ?? result.reason ?? "")
            digests[result.historyDigest, default: 0] += 1
        }
        XCTAssertEqual(digests.count, 1, "\(digests)")
    }

    /// `event_payload`: events carry what the call gave (CONTRACT.md section 1). The shipped file
    /// passes the shipping SDK and the faithful variant and fails `timestamp-whole-seconds`
    /// naming the instant; the timestamp reader takes years of four digits or more, and before 1970.
    func testEventPayloadJudgesTimestampsAndFields() async throws {
        let file = Repository.root.appendingPathComponent("scenarios/field-event-payload-timestamps-and-fields.json").path
        let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
        for (driver, what) in [(SwiftSDKDriver(), "shipping SDK"), (MutantRun.driver(nil), "faithful variant")] {
            let result = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(result.status, .passed, "\(what): \(result.firstFailure?.message ?? "")")
        }
        let broken = await ScenarioRunner(driver: MutantRun.driver(.timestampWholeSeconds)).run(scenario)
        XCTAssertEqual(broken.firstFailure?.name, "event_payload")
        XCTAssertTrue((broken.firstFailure?.message ?? "").contains("2023-11-14T22:13:20.999Z to the millisecond"), broken.firstFailure?.message ?? "")

        XCTAssertEqual(Checks.isoMillisSeconds(.string("2023-11-14T22:13:20.999Z")), 1_700_000_000.999)
        XCTAssertEqual(Checks.isoMillisSeconds(.string("1969-12-31T23:59:59.500Z")), -0.5)
        XCTAssertEqual(Checks.isoMillisSeconds(.string("9999-12-31T23:59:59.123Z")), 253_402_300_799.123)
        XCTAssertNil(Checks.isoMillisSeconds(.string("10000-01-01T00:00:00.000Z")), "years 0000-9999")
        for bad in ["2023-11-14T22:13:20Z", "2023-11-14T22:13:20.99Z", "2023-11-14 22:13:20.999Z", "2023-13-14T22:13:20.999Z", "2023-11-14T22:13:20.999+00:00"] {
            XCTAssertNil(Checks.isoMillisSeconds(.string(bad)), bad)
        }
        let given: JSONValue = .object(["user": .string("u"), "name": .string("buy"), "value": .number(2), "timestamp": .number(10.0005)])
        XCTAssertEqual(Checks.payloadDifferences(sent: .object(["event_type": .string("buy"), "value": .number(2), "timestamp": .string("1970-01-01T00:00:10.000Z")]), given: given), [])
        XCTAssertEqual(Checks.payloadDifferences(sent: .object(["event_type": .string("buy"), "value": .number(2), "timestamp": .string("1970-01-01T00:00:10.001Z")]), given: given), [])
        XCTAssertEqual(Checks.payloadDifferences(sent: .object(["event_type": .string("buy"), "timestamp": .string("1970-01-01T00:00:10.000Z")]), given: given).count, 1)
    }
}
