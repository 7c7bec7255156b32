import XCTest
import Foundation
@testable import ContractHarness

/// An eighty-second outside tester wrote 58 variants of the Python example after other flag SDKs'
/// bugs; 8 realistic ones passed the whole suite, and one legal design failed 7 files:
///
/// - F1, F2: `cache_ttl`, `cache_size` and `timeout` kept process-wide (the last client's): no file
///   gave two clients different values. Files `field-cache-ttl-is-each-clients-own`,
///   `field-cache-size-is-each-clients-own`, `field-timeout-is-each-clients-own`.
/// - F3, F4: a TTL or timeout above 2^31 - 1 ms firing at once (Node's setTimeout), and its
///   sibling, kept in an unsigned 32-bit count of milliseconds (it wraps). Files
///   `field-cache-ttl-beyond-what-32-bit-millisecond-timers-hold`,
///   `field-timeouts-beyond-what-32-bit-millisecond-timers-hold`.
/// - F5: a flag whose key is also a cached experiment's left out of the fan-out.
/// - F6: flag keys case-folded in the cache. F7: hashUser trimming the id.
/// - F8: an SDK that reads its offline store once when it is made failed 7 files that wrote a
///   relaunch as two clients launched at the start (two instances running at once), or seeded a
///   store after its only client launched. Those files now launch the later client at its first
///   use; a `seed_store` before any client of its store launched writes through an instance made
///   for it (`ScenarioExecution.seeder(for:)`); an app may run on a client launched at first use.
///   Python example freedom `store-snapshot`.
/// - F9: `Content-Type: application/json; charset=utf-8` (OkHttp, .NET) failed a header matcher.
final class EightySecondTesterFindingsTests: XCTestCase {
    static let python = TesterFixtures.python

    static func scenario(_ name: String) -> String {
        Repository.root.appendingPathComponent("scenarios/\(name).json").path
    }

    static let relaunches = ["field-app-offline-relaunch-shows-persisted-assignment", "field-app-seeded-store-offline-event",
                             "field-network-failure-never-serves-other-users-cache", "field-offline-store-from-earlier-sdk-version",
                             "field-persisted-fallback-never-served-to-other-user-after-relaunch", "field-revoked-api-key-401",
                             "field-two-users-in-flight-persist-under-their-own-ids"]

    /// F1 to F7: each bug fails its file (and only the correct SDKs pass them all).
    func testEachBugFailsItsFile() throws {
        let dir = try scratchDirectory("eighty-second")
        let cases: [(defect: String, file: String, says: String)] = [
            ("cache-ttl-static", "field-cache-ttl-is-each-clients-own", "expected 2 request(s)"),
            ("cache-size-static", "field-cache-size-is-each-clients-own", "step 4 assert"),
            ("timeout-static", "field-timeout-is-each-clients-own", "step 8 await p"),
            ("timer-int32-ms", "field-cache-ttl-beyond-what-32-bit-millisecond-timers-hold", "step 7 assert"),
            ("timer-int32-ms", "field-timeouts-beyond-what-32-bit-millisecond-timers-hold", "step 6 await m"),
            ("timer-uint32-ms", "field-cache-ttl-beyond-what-32-bit-millisecond-timers-hold", "step 14 assert"),
            ("timer-uint32-ms", "field-timeouts-beyond-what-32-bit-millisecond-timers-hold", "step 11 await s"),
            ("fanout-one-entry-per-key", "field-fan-out-keeps-a-flag-and-an-experiment-of-one-key-apart", "step 3 assert"),
            ("flag-key-casefold", "field-keys-differing-only-in-letter-case-are-two-keys", "step 1"),
            ("hash-strips-id", "field-hash-user-keeps-surrounding-whitespace", "step 0"),
        ]
        for c in cases {
            try TesterFixtures.assertFails(Self.scenario(c.file), on: ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=\(c.defect) \(Self.python)"],
                                           saying: [c.says], in: dir)
        }
        let files = Set(cases.map(\.file)).sorted().map(Self.scenario)
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", Self.python]] {
            let (status, out) = try HarnessProcess.run(["run"] + files + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            XCTAssertTrue(out.contains("\(files.count) passed, 0 failed"), "\(sdk): \(out)")
        }
    }

    /// F8: an SDK that reads its store once when it is made passes the relaunches, as written now.
    func testAnSDKReadingItsStoreOnceAtLaunchPassesTheRelaunches() throws {
        let dir = try scratchDirectory("eighty-second")
        let files = Self.relaunches.map(Self.scenario)
        for freedom in ["store-snapshot", ""] {
            let (status, out) = try HarnessProcess.run(["run"] + files + ["--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=\(freedom) \(Self.python)",
                                                                           "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(freedom): \(out)")
            XCTAssertTrue(out.contains("\(files.count) passed, 0 failed"), "\(freedom): \(out)")
        }
    }

    /// F8: a `seed_store` before any client of its store launched writes through an instance made
    /// for it, and the client launched later reads it; in process and through both adapters. The
    /// seeder is no scenario client: the history names the seeded client.
    func testASeedBeforeAnyLaunchIsReadByTheClientLaunchedLater() throws {
        let text = #"""
        {"format": "experimently-scenario/1", "name": "seed-before-launch", "description": "d",
         "clients": {"later": {"store": "s", "launch": "at_first_use"}},
         "steps": [
          {"seed_store": {"client": "later", "user": "user-2", "experiment": "sdk_contract_ab",
            "json": {"experiment_key": "sdk_contract_ab", "user_id": "user-2", "variant_id": "t", "variant_name": "treatment", "is_control": false}}},
          {"fault": {"action": {"respond": {"status": 503, "json": {"detail": "down"}}}}, "id": "down"},
          {"do": "getAssignment", "client": "later", "experiment": "sdk_contract_ab", "user": "user-2", "expect": {"value": {"variant_name": "treatment"}}}
         ]}
        """#
        let dir = try scratchDirectory("eighty-second")
        let file = dir.appendingPathComponent("seed-before-launch.json")
        try Data(text.utf8).write(to: file)
        XCTAssertNoThrow(try ScenarioParser.parse(Data(text.utf8), file: file.path))
        let driver = Repository.root.appendingPathComponent(".build/debug/experimently-driver").path
        var sdks: [[String]] = [[], ["--sdk-command", Self.python], ["--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=store-snapshot \(Self.python)"]]
        if FileManager.default.isExecutableFile(atPath: driver) { sdks.append(["--sdk-command", driver]) }
        for sdk in sdks {
            let (status, out) = try HarnessProcess.run(["run", file.path] + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            let verdict = try String(contentsOf: dir.appendingPathComponent("v.json"), encoding: .utf8)
            XCTAssertFalse(verdict.contains("seed_store of s"), "the seeder is no scenario client: \(sdk)")
        }
    }

    /// F9: `Content-Type` compares as a media type with at most `charset=utf-8`; every other header exactly.
    func testContentTypeComparesAsAMediaType() {
        let yes = ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8", "application/json; charset=\"utf-8\"",
                   "application/json; charset=utf-8;", "application/json; charset=utf8"]
        let no = ["application/json; charset=latin-1", "text/json", "application/json; v=2", "application/jsonx", "application/json, text/plain"]
        for sent in yes { XCTAssertTrue(RequestRecord.headerValue(sent, matches: "application/json", name: "Content-Type"), sent) }
        for sent in no { XCTAssertFalse(RequestRecord.headerValue(sent, matches: "application/json", name: "content-type"), sent) }
        XCTAssertFalse(RequestRecord.headerValue("application/json; charset=utf-8", matches: "application/json", name: "Accept"))
        XCTAssertFalse(RequestRecord.headerValue("application/json", matches: "application/json; charset=utf-8", name: "Content-Type"))
    }
}

/// An eighty-third outside tester wrote a clean-room JavaScript SDK (238 of 238, no flake) and
/// found explore failing an SDK that lets requests finish on `close()`:
///
/// - F6: after a close the runner never judged a pending operation inert (`cancelRequested`), so an
///   await placed between the close and the release waited out the step limit, and explore failed
///   every such order because the Swift SDK, which cancels on close, passes it. A close now marks
///   `closedWhilePending` (judged as after an app action), and the order is infeasible by the SDK's
///   choice (`ScenarioResult.infeasibleByChoice`), whatever the reference does with it.
/// - F7: a shrunk failure said "passes on ios" where ios failed another check.
/// - F8: a sample of 40 of 5,040 orders, every one infeasible, judged nothing of a file `run`
///   passes: a sample now begins with the order as written.
final class EightyThirdTesterFindingsTests: XCTestCase {
    func testASampleBeginsWithTheOrderAsWritten() {
        for seed: UInt64 in [0, 42, 43] {
            let (orders, complete) = Explorer.schedules(of: [3, 4, 5, 6, 7, 8, 9], max: 40, exhaustive: false, seed: seed)
            XCTAssertFalse(complete)
            XCTAssertEqual(orders.first, [3, 4, 5, 6, 7, 8, 9])
            XCTAssertEqual(Set(orders).count, 40)
        }
    }

    static let file = TesterFixtures.folder("eighty-third-tester").appendingPathComponent("close-then-await-explored.json").path

    func testExploreJudgesClosingWithOrWithoutCancellationAlike() throws {
        let dir = try scratchDirectory("eighty-second")
        for sdk in [[], ["--sdk-command", TesterFixtures.python],
                    ["--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=close-lets-finish \(TesterFixtures.python)"]] {
            let (status, out) = try HarnessProcess.run(["explore", Self.file, "--out", "s.json"] + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            XCTAssertTrue(out.contains("6 schedules (every order (6)), 0 failed"), "\(sdk): \(out)")
        }
    }
}

/// An eighty-fourth outside tester tried this stop's changes:
///
/// - F1: a `seed_store` while a client of the store runs was counted in that client's own view of
///   the store, so an SDK that reads its store once failed `offline_fallback` (out of process the
///   seed names a store, never the running instance). A seed now goes to the store only.
/// - F3: a snapshot SDK that deletes (404) or clears only its own copy passed every file. Files
///   `field-offline-cache-cleared-at-sign-out-stays-cleared-after-a-relaunch` and
///   `field-a-404-delete-stays-deleted-after-a-relaunch`; defects `snapshot-clear-not-written` and
///   `snapshot-delete-not-written` (with freedom `store-snapshot`).
/// - F2: `hash-strips-key` and `flight-key-casefold` passed; the hash file now trims no key, and
///   `field-keys-differing-only-in-letter-case-share-no-request` looks keys up at once.
/// - F4: a copy made at the client's first use of its store (freedom `store-snapshot-lazy`) failed
///   two instances over one store: a view floats until the client's first use of its store.
/// - F5: `run` failed an SDK that lets a call finish on close where the file awaits it before the
///   release: such a run is now an error of the file.
final class EightyFourthTesterFindingsTests: XCTestCase {
    static func fixture(_ name: String) -> String {
        TesterFixtures.folder("eighty-fourth-tester").appendingPathComponent("\(name).json").path
    }

    func testAnSDKReadingItsStoreOnceOrLazilyPassesSeedsAndTwoInstances() throws {
        let dir = try scratchDirectory("eighty-fourth")
        let files = [Self.fixture("seed-while-running"), Self.fixture("two-instances-one-store")]
        for sdk in [[], ["--sdk-command", TesterFixtures.python],
                    ["--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=store-snapshot \(TesterFixtures.python)"],
                    ["--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=store-snapshot-lazy \(TesterFixtures.python)"]] {
            let (status, out) = try HarnessProcess.run(["run"] + files + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            XCTAssertTrue(out.contains("2 passed, 0 failed"), "\(sdk): \(out)")
        }
    }

    func testEachBugFailsItsFile() throws {
        let dir = try scratchDirectory("eighty-fourth-bugs")
        let cases: [(sdk: String, file: String, says: String)] = [
            ("EXPERIMENTLY_EXAMPLE_FREEDOM=store-snapshot EXPERIMENTLY_EXAMPLE_DEFECT=snapshot-clear-not-written",
             "field-offline-cache-cleared-at-sign-out-stays-cleared-after-a-relaunch", "step 4 do getAssignment expect: op4: expected error serverError, got value"),
            ("EXPERIMENTLY_EXAMPLE_FREEDOM=store-snapshot EXPERIMENTLY_EXAMPLE_DEFECT=snapshot-delete-not-written",
             "field-a-404-delete-stays-deleted-after-a-relaunch", "step 6 do getAssignment expect: op5: expected error serverError, got value"),
            ("EXPERIMENTLY_EXAMPLE_DEFECT=hash-strips-key", "field-hash-user-keeps-surrounding-whitespace", "step 6 do hashUser expect"),
            // Caught by the step limit: the second caller waits on the first key's held request.
            ("EXPERIMENTLY_EXAMPLE_DEFECT=flight-key-casefold", "field-keys-differing-only-in-letter-case-share-no-request", "step 2 do evaluateFlag as f2: not quiescent"),
        ]
        for c in cases {
            try TesterFixtures.assertFails(EightySecondTesterFindingsTests.scenario(c.file), on: ["--sdk-command", "\(c.sdk) \(TesterFixtures.python)"],
                                           saying: [c.says], in: dir)
        }
    }

    func testAnAwaitTheSDKsCloseDidNotEndIsAnErrorOfTheFile() throws {
        let dir = try scratchDirectory("eighty-fourth-close")
        let file = Self.fixture("await-after-close-before-release")
        let (passes, out) = try HarnessProcess.run(["run", file, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(passes, 0, out)
        let (status, text) = try HarnessProcess.run(["run", file, "--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=close-lets-finish \(TesterFixtures.python)",
                                                     "--verdict", "v.json"], in: dir)
        XCTAssertNotEqual(status, 0, text)
        XCTAssertTrue(text.contains("ERROR") && text.contains("a choice the contract leaves to the SDK"), text)
        XCTAssertFalse(text.contains("FAIL "), text)
    }
}
