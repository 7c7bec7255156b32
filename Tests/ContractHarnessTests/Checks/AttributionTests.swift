import XCTest
import Foundation
import ExperimentlyMock
import ExperimentlyMutants
@testable import ContractHarness

/// The attribution search (issue 11 section 3) fed histories directly: it finds an assignment of
/// requests to concurrent operations when one exists, and says why when none does.
final class AttributionTests: XCTestCase {
    typealias E = Attribution.Entry

    func op(_ label: String, _ from: Int, _ to: Int, _ expected: [[E]], client: String = "main") -> Attribution.Operation {
        Attribution.Operation(label: label, name: "trackWithStatus", client: client, from: from, to: to, expected: expected)
    }

    func req(_ seq: Int, _ index: Int, _ entries: [E], client: String = "main") -> Attribution.Request {
        Attribution.Request(seq: seq, index: index, client: client, entries: entries)
    }

    let a1 = E(user: "user-1", name: "click", experiment: "exp_a", flag: nil)
    let b1 = E(user: "user-2", name: "click", experiment: "exp_a", flag: nil)

    /// The found input: two concurrent unkeyed tracks, one batch of one entry each.
    func testTwoConcurrentTracksEachGetTheirOwnBatch() {
        let ops = [op("a", 0, 10, [[a1]]), op("b", 1, 9, [[b1]])]
        // The batches arrive in the other order than the operations started.
        let outcome = Attribution.solve(operations: ops, requests: [req(1, 3, [b1]), req(2, 4, [a1])], mode: .entries)
        XCTAssertEqual(outcome, .attributed([1: "b", 2: "a"]))
        // By size only, either assignment will do, and one is found.
        if case .attributed(let m) = Attribution.solve(operations: ops, requests: [req(1, 3, [b1]), req(2, 4, [a1])], mode: .sizes) {
            XCTAssertEqual(Set(m.values), ["a", "b"])
        } else { XCTFail("sizes: no attribution") }
    }

    /// The found input: a trackBatch of 4 concurrent with an unkeyed track that fans out 2.
    func testTrackBatchOfFourBesideAFanOutOfTwo() {
        let four = (0..<4).map { E(user: "u\($0)", name: "buy", experiment: "exp_a", flag: nil) }
        let two = [E(user: "user-1", name: "view", experiment: "exp_a", flag: nil), E(user: "user-1", name: "view", experiment: nil, flag: "f")]
        let ops = [op("batch", 0, 20, [four]), op("view", 1, 19, [two])]
        XCTAssertEqual(Attribution.solve(operations: ops, requests: [req(1, 5, two), req(2, 6, four)], mode: .sizes),
                       .attributed([1: "view", 2: "batch"]))
    }

    /// Backtracking: the first choice (greedy by start order) is wrong; the search undoes it.
    func testBacktracksOverAWrongFirstChoice() {
        // Both want a batch of one entry by size; "late" ends before the second batch arrives,
        // so the first batch must go to "late" although "early" started first.
        let ops = [op("early", 0, 30, [[a1]]), op("late", 1, 5, [[b1]])]
        XCTAssertEqual(Attribution.solve(operations: ops, requests: [req(1, 3, [a1]), req(2, 10, [b1])], mode: .sizes),
                       .attributed([1: "late", 2: "early"]))
    }

    /// Chunks of one operation are found in order, interleaved with another's.
    func testChunksInOrderInterleaved() {
        let big = (0..<150).map { E(user: "u\($0)", name: "e", experiment: "x", flag: nil) }
        let ops = [op("big", 0, 50, [Array(big[0..<100]), Array(big[100...])]), op("one", 1, 40, [[a1]])]
        let reqs = [req(1, 3, Array(big[0..<100])), req(2, 4, [a1]), req(3, 8, Array(big[100...]))]
        XCTAssertEqual(Attribution.solve(operations: ops, requests: reqs, mode: .entries), .attributed([1: "big", 2: "one", 3: "big"]))
    }

    /// None exists: an extra batch, a missing one, a batch of another client, a wrong entry.
    func testFailsWhenNoAttributionExists() {
        let ops = [op("a", 0, 10, [[a1]]), op("b", 1, 9, [[b1]])]
        // Three batches for two operations that send one each.
        guard case .unattributable(let r1) = Attribution.solve(operations: ops, requests: [req(1, 3, [a1]), req(2, 4, [b1]), req(3, 5, [b1])], mode: .entries) else {
            return XCTFail("an extra batch must fail")
        }
        XCTAssertFalse(r1.isEmpty)
        // A batch is missing.
        guard case .unattributable(let r2) = Attribution.solve(operations: ops, requests: [req(1, 3, [a1])], mode: .entries) else {
            return XCTFail("a missing batch must fail")
        }
        XCTAssertTrue(r2.contains { $0.message.hasPrefix("b (trackWithStatus)") && $0.message.contains("user=user-2") }, "\(r2)")
        // The other client's batch cannot be theirs.
        guard case .unattributable = Attribution.solve(operations: ops, requests: [req(1, 3, [a1]), req(2, 4, [b1], client: "other")], mode: .entries) else {
            return XCTFail("another client's batch must not count")
        }
        // Fan-out to the other user's entry (both carry user-1's event): no assignment works.
        guard case .unattributable(let r4) = Attribution.solve(operations: ops, requests: [req(1, 3, [a1]), req(2, 4, [a1])], mode: .entries) else {
            return XCTFail("a wrong entry must fail")
        }
        XCTAssertTrue(r4.contains { $0.message.hasPrefix("b (trackWithStatus)") }, "\(r4)")
        // A batch sent while nothing ran.
        guard case .unattributable(let r5) = Attribution.solve(operations: ops, requests: [req(1, 3, [a1]), req(2, 4, [b1]), req(3, 12, [a1])], mode: .entries) else {
            return XCTFail("a batch nobody asked for must fail")
        }
        XCTAssertTrue(r5.contains { $0.message.contains("no tracking operation") }, "\(r5)")
    }

    /// Requests inside an absorbing window (an app event) need no operation.
    func testAbsorbers() {
        let ops = [op("a", 0, 10, [[a1]])]
        let reqs = [req(1, 3, [a1]), req(2, 4, [b1])]
        guard case .unattributable = Attribution.solve(operations: ops, requests: reqs, mode: .entries) else { return XCTFail() }
        XCTAssertEqual(Attribution.solve(operations: ops, requests: reqs, absorbers: [Attribution.Window(client: "main", from: 2, to: 6)], mode: .entries),
                       .attributed([1: "a"]))
    }

    /// Identity is exact: NFC and NFD é are two users, and messages tell them apart.
    func testCanonicallyEquivalentUsersAreDistinct() {
        let nfc = E(user: "\u{E9}", name: "click", experiment: "exp_a", flag: nil)
        let nfd = E(user: "e\u{301}", name: "click", experiment: "exp_a", flag: nil)
        XCTAssertNotEqual(nfc, nfd)
        let ops = [op("nfc", 0, 10, [[nfc]])]
        guard case .unattributable(let reasons) = Attribution.solve(operations: ops, requests: [req(1, 3, [nfd])], mode: .entries) else {
            return XCTFail("an NFD entry is not the NFC user's")
        }
        XCTAssertTrue(reasons.contains { $0.message.contains("e\\u{301}") }, "\(reasons)")
        XCTAssertEqual(Attribution.show("\u{E9}"), "\u{E9}")
        XCTAssertEqual(Attribution.show("e\u{301}"), "e\\u{301}")
    }

    /// Answers written in overlapping windows may be cached (and fanned out) in either order;
    /// an order the history rules out still fails.
    func testOrderAmbiguityOnlyWhereTheHistoryAllowsIt() {
        typealias CE = Checks.CacheModel.Entry
        let a = CE(key: "exp_a", value: .null, expires: 300, order: 1, lo: 10, hi: 20)
        let b = CE(key: "exp_b", value: .null, expires: 300, order: 2, lo: 11, hi: 21)
        let late = CE(key: "exp_c", value: .null, expires: 300, order: 3, lo: 30, hi: 31)
        XCTAssertTrue(Checks.CacheModel.consistent(["exp_a", "exp_b", "exp_c"], [a, b, late]))
        XCTAssertTrue(Checks.CacheModel.consistent(["exp_b", "exp_a", "exp_c"], [a, b, late]), "released together: either order")
        XCTAssertFalse(Checks.CacheModel.consistent(["exp_c", "exp_a", "exp_b"], [a, b, late]), "exp_c was answered after both were written")
        XCTAssertFalse(Checks.CacheModel.consistent(["exp_a", "exp_b"], [a, b, late]), "an entry lost")
        XCTAssertFalse(Checks.CacheModel.consistent(["exp_a", "exp_b", "exp_b"], [a, b, late]))

        let ea = E(user: "u", name: "click", experiment: "exp_a", flag: nil)
        let eb = E(user: "u", name: "click", experiment: "exp_b", flag: nil)
        let ef = E(user: "u", name: "click", experiment: nil, flag: "f")
        let overlapping = [Attribution.Rank(group: 1, lo: 10, hi: 20), Attribution.Rank(group: 1, lo: 11, hi: 21), Attribution.Rank(group: 2, lo: 12, hi: 22)]
        let ordered = [Attribution.Rank(group: 1, lo: 10, hi: 11), Attribution.Rank(group: 1, lo: 15, hi: 16), Attribution.Rank(group: 2, lo: 12, hi: 22)]
        XCTAssertTrue(Attribution.matches(req(1, 30, [eb, ea, ef]), [ea, eb, ef], .entries, ranks: overlapping))
        XCTAssertFalse(Attribution.matches(req(1, 30, [eb, ea, ef]), [ea, eb, ef], .entries, ranks: ordered))
        XCTAssertFalse(Attribution.matches(req(1, 30, [ef, ea, eb]), [ea, eb, ef], .entries, ranks: overlapping), "flags come after assignments")
        XCTAssertFalse(Attribution.matches(req(1, 30, [eb, ea, ef]), [ea, eb, ef], .entries), "without ranks the order is exact")
    }

    /// Bounded: a search that exceeds its budget says so instead of running on.
    func testBudget() {
        // Twelve operations expecting different entries (one each: any request fits by size).
        let ops = (0..<12).map { op("o\($0)", $0, 100, [[E(user: "u", name: "n\($0)", experiment: "x", flag: nil)]]) }
        let reqs = (0..<13).map { req($0, 20 + $0, [a1]) }   // one too many: every assignment fails
        XCTAssertEqual(Attribution.solve(operations: ops, requests: reqs, mode: .sizes, budget: 50), .undecided(states: 51))
        guard case .unattributable = Attribution.solve(operations: ops, requests: reqs, mode: .sizes) else { return XCTFail() }
    }

    /// Operations that expect the same requests are interchangeable: the search tries one of
    /// them per request (the one that completes first), so twelve alike are decided in a few
    /// states where every permutation was tried (a thirtieth outside tester: 30 concurrent
    /// identical `trackBatch` calls ran past the scenario's hard deadline).
    func testAlikeOperationsAreDecidedWithoutTryingEveryPermutation() {
        let alike = (0..<12).map { op("o\($0)", $0, 100 + $0 % 3, [[a1], [a1]]) }
        let tooMany = (0..<25).map { req($0, 20 + $0, [a1]) }
        guard case .unattributable = Attribution.solve(operations: alike, requests: tooMany, mode: .entries, budget: 200) else { return XCTFail() }
        guard case .attributed(let given) = Attribution.solve(operations: alike, requests: Array(tooMany.prefix(24)), mode: .entries, budget: 200) else {
            return XCTFail()
        }
        XCTAssertEqual(Dictionary(grouping: given.values, by: { $0 }).mapValues(\.count).values.sorted(), Array(repeating: 2, count: 12))
    }

    /// The matching behind `fan_out`'s fields: a maximum matching whatever the first pass chose
    /// (an augmenting path reroutes it), and a thousand alike calls without an exponential search.
    func testTheMatchingIsMaximumAndFastForAlikeCalls() {
        // Left 0 may take 0 or 1, left 1 only 0: the first pass gives 0 to left 0, the path reroutes.
        XCTAssertEqual(Checks.unmatched([[0, 1], [0]], right: 2), [])
        XCTAssertEqual(Checks.unmatched([[0], [0]], right: 1), [1])
        let n = 1_000
        let slices = (0..<n).map { _ in [(group: 0, from: 0, to: n)] }
        XCTAssertEqual(Checks.unmatched(groups: [Array(0..<n)], slices: slices, right: n, order: Array(0..<n)), [])
        let fewer = (0..<n).map { _ in [(group: 0, from: 0, to: n - 10)] }
        XCTAssertEqual(Checks.unmatched(groups: [Array(0..<n)], slices: fewer, right: n, order: Array(0..<n)).count, 10)
    }
}

/// Generated concurrent workloads (issue 11 section 3): deterministic, and no named check fails
/// against the shipping SDK or the faithful variant (the 1,000-scenario run is
/// `contract-harness generate --count 1000`, Documentation/CLI.md).
final class WorkloadGeneratorTests: XCTestCase {
    func testDeterministic() {
        let g = WorkloadGenerator(seed: 7)
        XCTAssertEqual(g.scenarioJSON(index: 3), g.scenarioJSON(index: 3))
        XCTAssertNotEqual(g.scenarioJSON(index: 3), g.scenarioJSON(index: 4))
        XCTAssertNotEqual(g.scenarioJSON(index: 3), WorkloadGenerator(seed: 8).scenarioJSON(index: 3))
        // Uses the canonically equivalent pair somewhere in the first scenarios.
        let text = (0..<20).map { g.scenarioJSON(index: $0).jsonText }.joined()
        XCTAssertTrue(text.unicodeScalars.contains("\u{301}"))
    }

    func testHundredGeneratedWorkloadsPassOnBothSDKs() async throws {
        let generator = WorkloadGenerator(seed: 11, equivalentIds: false)
        for (name, driver) in [("shipping", SwiftSDKDriver() as any SDKDriver), ("faithful", MutantRun.driver(nil))] {
            let summary = await GenerateCommand.run(generator, indices: Array(0..<100), driver: driver, sdkName: name)
            XCTAssertEqual(summary.passed, 100, "\(name): \(summary.failed.map { "\($0.index): \($0.message)" })")
        }
    }

    /// With NFC and NFD é among the users (CONTRACT.md section 4: two users). The faithful variant
    /// keeps them apart; the shipping SDK joins this test once its caches and flights compare
    /// user ids by Unicode scalars (issue 11 section 1).
    func testHundredWorkloadsWithCanonicallyEquivalentIdsPassOnTheFaithfulVariant() async throws {
        let generator = WorkloadGenerator(seed: 12, equivalentIds: true)
        let summary = await GenerateCommand.run(generator, indices: Array(0..<100), driver: MutantRun.driver(nil), sdkName: "faithful")
        XCTAssertEqual(summary.passed, 100, "\(summary.failed.map { "\($0.index): \($0.message)" })")
    }

    /// The generated workloads are not vacuous: the broken variants they can see fail them.
    func testGeneratedWorkloadsCatchBrokenVariants() async throws {
        let generator = WorkloadGenerator(seed: 11, equivalentIds: false)
        for defect in [Defect.noSingleFlight, .fanOutToOtherUsers, .staleWriteAfterClear, .wrongBatchChunks, .batchFailuresReportTrue, .statusIgnoresTrackAnswer] {
            let summary = await GenerateCommand.run(generator, indices: Array(0..<50), driver: MutantRun.driver(defect), sdkName: defect.rawValue)
            XCTAssertFalse(summary.failed.isEmpty, "\(defect.rawValue) passed 50 generated workloads")
        }
    }
}
