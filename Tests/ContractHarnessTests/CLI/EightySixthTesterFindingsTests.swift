import XCTest
import Foundation
@testable import ContractHarness

/// An eighty-sixth outside tester wrote about 110 variants of the Python example after other flag
/// SDKs' bugs; 14 realistic ones passed the whole suite. The named checks caught each once its
/// situation occurred, and no shipped file made it occur. Each now fails a new `field-` file, which
/// the shipping SDK, the faithful mutant and the Python example (with every freedom) pass:
///
/// - what an event or an assign body carries, sent exactly: names and types with edge whitespace,
///   an id of digits sent as a number, a fanned-out entry's own type, properties past 20, attribute
///   names lower-cased or merged across calls;
/// - the backend's limits applied by the backend, counted in code points: an SDK cutting a type to
///   100, or refusing an id by its UTF-16 length;
/// - the offline store with no TTL and no bound, and a value served from it no cached entry for the
///   fan-out;
/// - a batch holding an event the backend refuses, sent whole and reported false; chunks of 100
///   events whatever their bytes.
///
/// And one legal design that failed 7 files out of process (B1): an SDK keeping its offline store
/// under its base URL (as GrowthBook) found nothing after a relaunch, which had an origin of its own.
/// A relaunch now talks to its first launch's origin (`Scenario.originOwners`); Python example
/// freedom `store-by-base-url`.
final class EightySixthTesterFindingsTests: XCTestCase {
    static let cases: [(defect: String, file: String, says: String)] = [
        ("event-name-strip", "field-event-names-types-and-digit-user-ids-are-sent-exactly", "step 12 assert"),
        ("numeric-user-id", "field-event-names-types-and-digit-user-ids-are-sent-exactly", "step 0 do getAssignment expect"),
        ("fanout-event-type-name", "field-event-names-types-and-digit-user-ids-are-sent-exactly", "where the call gave \"view_type\""),
        ("truncate-event-type", "field-length-limits-are-the-backends-counted-in-code-points", "step 6 do trackWithStatus expect"),
        ("reject-long-user", "field-length-limits-are-the-backends-counted-in-code-points", "got error invalidConfig"),
        ("props-limit-20", "field-event-properties-and-assign-attributes-are-sent-whole", "event_payload: request #5"),
        ("context-lowercase-keys", "field-event-properties-and-assign-attributes-are-sent-whole", "step 1 assert"),
        ("merge-traits", "field-event-properties-and-assign-attributes-are-sent-whole", "sends the context"),
        ("store-ttl-7d", "field-offline-store-serves-entries-of-any-age", "step 4 do getAssignment expect"),
        ("store-bounded", "field-offline-store-keeps-more-entries-than-the-cache-holds", "step 122 do evaluateFlag expect"),
        ("fanout-includes-fallback", "field-fan-out-never-reaches-values-served-from-the-offline-store", "step 9 assert"),
        ("batch-drop-invalid", "field-batch-with-an-invalid-event-is-sent-whole-and-reports-false", "step 0 do trackBatch expect"),
        ("batch-4xx-true", "field-batch-with-an-invalid-event-is-sent-whole-and-reports-false", "step 0 do trackBatch expect"),
        ("chunk-by-bytes", "field-batch-chunks-are-100-events-whatever-their-bytes", "step 1 assert"),
    ]

    func testEachBugFailsItsFile() throws {
        let dir = try scratchDirectory("eighty-sixth-bugs")
        for c in Self.cases {
            try TesterFixtures.assertFails(EightySecondTesterFindingsTests.scenario(c.file),
                                           on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=\(c.defect) \(TesterFixtures.python)"],
                                           saying: [c.says], in: dir)
        }
    }

    func testTheCorrectSDKsPassTheNewFiles() throws {
        let dir = try scratchDirectory("eighty-sixth-correct")
        let files = Set(Self.cases.map(\.file)).sorted().map(EightySecondTesterFindingsTests.scenario)
        XCTAssertEqual(files.count, 8)
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", TesterFixtures.python],
                    ["--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=store-snapshot \(TesterFixtures.python)"]] {
            let (status, out) = try HarnessProcess.run(["run"] + files + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            XCTAssertTrue(out.contains("\(files.count) passed, 0 failed"), "\(sdk): \(out)")
        }
    }

    /// B1: an SDK keeping its store under its base URL passes every file, the relaunches among
    /// them, in process (the harness's attribution) and out of process (the example).
    func testAnSDKKeepingItsStoreUnderItsBaseURLPassesTheRelaunches() throws {
        let dir = try scratchDirectory("eighty-sixth-origins")
        let relaunches = ["field-relaunch-keeps-the-assignment-fallback", "field-relaunch-reads-the-store-only-as-a-fallback",
                          "field-persisted-fallback-never-served-to-other-user-after-relaunch", "field-network-failure-never-serves-other-users-cache",
                          "field-revoked-api-key-401", "field-two-users-in-flight-persist-under-their-own-ids",
                          "field-app-offline-relaunch-shows-persisted-assignment", "field-offline-store-serves-entries-of-any-age"]
        let files = relaunches.map(EightySecondTesterFindingsTests.scenario)
        for sdk in [[], ["--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=store-by-base-url \(TesterFixtures.python)"]] {
            let (status, out) = try HarnessProcess.run(["run"] + files + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            XCTAssertTrue(out.contains("\(files.count) passed, 0 failed"), "\(sdk): \(out)")
        }
    }

    /// Which clients are relaunches: an earlier client of the store that sends nothing from the
    /// later one's first use on (closed or not; a `persisted` assertion may follow); not one still
    /// called after, nor one whose asynchronous call is awaited only after; a chain shares its
    /// first launch's origin.
    func testARelaunchTakesTheOriginOfAnEarlierClientThatSendsNoMore() throws {
        func owners(_ clients: String, _ steps: String) throws -> [String: String] {
            let text = #"{"format": "experimently-scenario/1", "name": "n", "description": "d", "clients": "# + clients + #", "steps": "# + steps + #"}"#
            let scenario = try ScenarioParser.parse(Data(text.utf8), file: "relaunch.json")
            return Dictionary(uniqueKeysWithValues: scenario.originOwners.map { ($0.key.text, $0.value) })
        }
        let flag = #""do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "expect": {"value": {"enabled": true}}"#
        let three = #"{"a": {"store": "s"}, "b": {"store": "s", "launch": "at_first_use"}, "c": {"store": "s", "launch": "at_first_use"}}"#
        XCTAssertEqual(try owners(three, "[{\(flag), \"client\": \"a\"}, {\"do\": \"close\", \"client\": \"a\"}, {\(flag), \"client\": \"b\"}, {\(flag), \"client\": \"c\"}]"),
                       ["b": "a", "c": "a"])
        XCTAssertEqual(try owners(three, "[{\(flag), \"client\": \"a\"}, {\(flag), \"client\": \"b\"}, {\"assert\": {\"persisted\": {\"client\": \"a\", \"user\": \"u\", \"flag\": \"sdk_contract_flag\"}}}]"),
                       ["b": "a"])
        XCTAssertEqual(try owners(three, "[{\(flag), \"client\": \"a\"}, {\(flag), \"client\": \"b\"}, {\(flag), \"client\": \"a\"}]"), [:])
        XCTAssertEqual(try owners(three, "[{\(flag), \"client\": \"a\", \"as\": \"x\", \"async\": true}, {\(flag), \"client\": \"b\"}, {\"await\": \"x\"}]"), [:])
        XCTAssertEqual(try owners(three, "[{\(flag), \"client\": \"a\", \"as\": \"x\", \"async\": true}, {\"await\": \"x\"}, {\(flag), \"client\": \"b\"}]"), ["b": "a"])
        let otherStore = #"{"a": {"store": "s"}, "b": {"store": "t", "launch": "at_first_use"}}"#
        XCTAssertEqual(try owners(otherStore, "[{\(flag), \"client\": \"a\"}, {\(flag), \"client\": \"b\"}]"), [:])
    }

    /// An eighty-eighth outside tester: an earlier client with a copy of a `times` group still
    /// running (`await t#1` awaits copy 1 alone) is no relaunch's origin; a `close` of it after the
    /// relaunch, or a `seed_store` naming the later client before it, leaves the relaunch one.
    func testARunningCopyCloseAfterAndSeedsDecideTheRelaunchRight() throws {
        func owners(_ clients: String, _ steps: String) throws -> [String: String] {
            let text = #"{"format": "experimently-scenario/1", "name": "n", "description": "d", "clients": "# + clients + #", "steps": "# + steps + #"}"#
            return Dictionary(uniqueKeysWithValues: try ScenarioParser.parse(Data(text.utf8), file: "r.json").originOwners.map { ($0.key.text, $0.value) })
        }
        let flag = #""do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "expect": {"value": {"enabled": true}}"#
        let two = #"{"a": {"store": "s"}, "b": {"store": "s", "launch": "at_first_use"}}"#
        XCTAssertEqual(try owners(two, "[{\(flag), \"client\": \"a\", \"as\": \"t\", \"async\": true, \"times\": 2}, {\"await\": \"t#1\"}, {\(flag), \"client\": \"b\"}]"), [:])
        XCTAssertEqual(try owners(two, "[{\(flag), \"client\": \"a\", \"as\": \"t\", \"async\": true, \"times\": 2}, {\"await\": \"t\"}, {\(flag), \"client\": \"b\"}]"), ["b": "a"])
        XCTAssertEqual(try owners(two, "[{\(flag), \"client\": \"a\"}, {\(flag), \"client\": \"b\"}, {\"do\": \"close\", \"client\": \"a\"}]"), ["b": "a"])
        let seed = #"{"seed_store": {"client": "b", "user": "u", "flag": "sdk_contract_flag", "json": {"key": "sdk_contract_flag", "enabled": true, "config": null}}}"#
        XCTAssertEqual(try owners(two, "[\(seed), {\(flag), \"client\": \"a\"}, {\"do\": \"close\", \"client\": \"a\"}, {\(flag), \"client\": \"b\"}]"), ["b": "a"])
    }
}

