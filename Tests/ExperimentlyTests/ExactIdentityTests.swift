import Foundation
import XCTest
@testable import Experimently

/// Ids and keys are exact strings (issue 11 section 1, CONTRACT.md sections 3 and 4): canonically
/// equivalent spellings are different users with their own bucketing, cache entries and requests.
final class ExactIdentityTests: SDKTestCase {
    /// (first spelling, second spelling, what they are): each pair is `==` as Swift `String`s.
    static let pairs: [(String, String, String)] = [
        ("\u{E9}", "e\u{301}", "NFC/NFD e-acute"),
        ("\u{C5}", "\u{212B}", "A-ring U+00C5 / ANGSTROM SIGN U+212B"),
        ("\u{D55C}", "\u{1112}\u{1161}\u{11AB}", "Hangul syllable / conjoining jamo"),
    ]

    /// The variant the reference backend buckets `user` into in `sdk_contract_ab` (50/50).
    static func variant(_ user: String) -> String {
        Int(FeatureFlagEvaluator.hashUser(user, flagKey: "sdk_contract_ab") * 100) < 50 ? "control" : "treatment"
    }

    /// A stub backend that answers each assign for the exact `user_id` it was sent.
    func bucketingStub(hold: Bool = false) -> Stub {
        Stub { _, request in
            if hold { return .hold }
            let user = (try? JSONSerialization.jsonObject(with: request.body ?? Data()) as? [String: Any])?["user_id"] as? String ?? "?"
            return .respond(200, Body.assignment("sdk_contract_ab", user: user, variant: Self.variant(user)))
        }
    }

    func sentUsers(_ stub: Stub) -> [[UInt32]] {
        stub.recorded.map { r in
            let user = (try? JSONSerialization.jsonObject(with: r.body ?? Data()) as? [String: Any])?["user_id"] as? String ?? ""
            return user.unicodeScalars.map(\.value)
        }
    }

    func testThePairsAreCanonicallyEqualButHashApart() {
        for (a, b, what) in Self.pairs {
            XCTAssertEqual(a, b, "\(what): Swift String == is canonical equivalence")
            XCTAssertNotEqual(FeatureFlagEvaluator.hashUser(a, flagKey: "sdk_contract_ab"),
                              FeatureFlagEvaluator.hashUser(b, flagKey: "sdk_contract_ab"), what)
            XCTAssertNotEqual(CacheKey(userId: a, key: "k"), CacheKey(userId: b, key: "k"), what)
            XCTAssertNotEqual(CacheKey(userId: "u", key: a), CacheKey(userId: "u", key: b), what)
            XCTAssertEqual(Set([CacheKey(userId: a, key: "k"), CacheKey(userId: b, key: "k")]).count, 2, what)
        }
        // The golden buckets: NFC é is bucket 1 (control), NFD é bucket 74 (treatment).
        XCTAssertEqual(Int(FeatureFlagEvaluator.hashUser("\u{E9}", flagKey: "sdk_contract_ab") * 100), 1)
        XCTAssertEqual(Int(FeatureFlagEvaluator.hashUser("e\u{301}", flagKey: "sdk_contract_ab") * 100), 74)
    }

    func testSequentialAssignmentsOfEquivalentSpellingsSendTwoRequestsAndKeepTheirVariants() async throws {
        for (a, b, what) in Self.pairs {
            let stub = bucketingStub()
            let client = makeClient(stub)
            let first = try await client.getAssignment("sdk_contract_ab", user: User(id: a))
            let second = try await client.getAssignment("sdk_contract_ab", user: User(id: b))
            XCTAssertEqual(stub.requestCount, 2, "\(what): the second spelling is another user, not a cache hit")
            XCTAssertEqual(sentUsers(stub), [a.unicodeScalars.map(\.value), b.unicodeScalars.map(\.value)], what)
            XCTAssertEqual(first.variantName, Self.variant(a), what)
            XCTAssertEqual(second.variantName, Self.variant(b), what)
            XCTAssertTrue(second.userId.unicodeScalars.elementsEqual(b.unicodeScalars), what)
            // Each is now cached for itself: no third request.
            _ = try await client.getAssignment("sdk_contract_ab", user: User(id: b))
            XCTAssertEqual(stub.requestCount, 2, what)
        }
        // NFC é control, NFD é treatment: one user's variant is never served to the other.
        let stub = bucketingStub()
        let client = makeClient(stub)
        let nfc = try await client.getAssignment("sdk_contract_ab", user: User(id: "\u{E9}"))
        let nfd = try await client.getAssignment("sdk_contract_ab", user: User(id: "e\u{301}"))
        XCTAssertEqual([nfc.variantName, nfd.variantName], ["control", "treatment"])
    }

    func testConcurrentCallsForEquivalentSpellingsDoNotShareARequest() async throws {
        for (a, b, what) in Self.pairs {
            let stub = bucketingStub(hold: true)
            let client = makeClient(stub)
            let ta = Task { try await client.getAssignment("sdk_contract_ab", user: User(id: a)) }
            let tb = Task { try await client.getAssignment("sdk_contract_ab", user: User(id: b)) }
            await stub.waitForRequests(2)
            XCTAssertEqual(client.inFlightWaiters(userId: a, key: "sdk_contract_ab"), 1, what)
            XCTAssertEqual(client.inFlightWaiters(userId: b, key: "sdk_contract_ab"), 1, what)
            for (i, user) in sentUsers(stub).enumerated() {
                let id = String(String.UnicodeScalarView(user.compactMap(Unicode.Scalar.init)))
                stub.release(i, with: .respond(200, Body.assignment("sdk_contract_ab", user: id, variant: Self.variant(id))))
            }
            let ra = try await ta.value(within: 10), rb = try await tb.value(within: 10)
            XCTAssertEqual(ra.variantName, Self.variant(a), what)
            XCTAssertEqual(rb.variantName, Self.variant(b), what)
            XCTAssertTrue(ra.userId.unicodeScalars.elementsEqual(a.unicodeScalars), what)
            XCTAssertTrue(rb.userId.unicodeScalars.elementsEqual(b.unicodeScalars), what)
            XCTAssertEqual(stub.requestCount, 2, what)
        }
    }

    func testGetAssignmentsListsOnlyTheExactUser() async throws {
        for (a, b, what) in Self.pairs {
            let client = makeClient(bucketingStub())
            _ = try await client.getAssignment("sdk_contract_ab", user: User(id: a))
            XCTAssertEqual(client.getAssignments(for: a).count, 1, what)
            XCTAssertEqual(client.getAssignments(for: b).count, 0, "\(what): the other spelling has nothing cached")
            _ = try await client.getAssignment("sdk_contract_ab", user: User(id: b))
            let mine = client.getAssignments(for: b)
            XCTAssertEqual(mine.count, 1, what)
            XCTAssertTrue(mine[0].userId.unicodeScalars.elementsEqual(b.unicodeScalars), what)
            XCTAssertEqual(mine[0].variantName, Self.variant(b), what)
        }
    }

    func testEquivalentFlagKeysAreTwoFlags() async throws {
        for (a, b, what) in Self.pairs {
            let stub = Stub { i, _ in .respond(200, Body.flag("k", enabled: i == 0)) }
            let client = makeClient(stub)
            let fa = try await client.evaluateFlag(a, user: User(id: "u"))
            let fb = try await client.evaluateFlag(b, user: User(id: "u"))
            XCTAssertEqual(stub.requestCount, 2, what)
            XCTAssertNotEqual(fa.enabled, fb.enabled, what)
            XCTAssertEqual(client.getEvaluatedFlags(for: "u").count, 2, what)
        }
    }
}

/// The offline store keeps canonically equivalent spellings apart, and `clearAll()` removes both.
final class ExactIdentityStoreTests: SDKTestCase {
    func testStoreKeepsEquivalentKeysApartAndClearsBoth() {
        for (a, b, what) in ExactIdentityTests.pairs {
            let store = OfflineStore(suiteName: makeSuite())
            store.saveEvaluation(EvalResult(key: a, enabled: true), userId: "u", flagKey: a)
            store.saveEvaluation(EvalResult(key: b, enabled: false), userId: "u", flagKey: b)
            store.saveAssignment(Assignment(experimentKey: "e", userId: a, variantId: "v1", variantName: "control", isControl: true), userId: a, experimentKey: "e")
            XCTAssertEqual(store.loadEvaluation(flagKey: a, userId: "u")?.enabled, true, what)
            XCTAssertEqual(store.loadEvaluation(flagKey: b, userId: "u")?.enabled, false, what)
            XCTAssertNil(store.loadAssignment(experimentKey: "e", userId: b), what)
            store.clearAll()
            XCTAssertNil(store.loadEvaluation(flagKey: a, userId: "u"), what)
            XCTAssertNil(store.loadEvaluation(flagKey: b, userId: "u"), "\(what): clearAll removes both spellings")
            XCTAssertNil(store.loadAssignment(experimentKey: "e", userId: a), what)
        }
    }

    /// `clearAll()` removes its own entries and an upstream version's, and leaves another store's
    /// whose prefix extends its own (an outside audit, A-10: `ep_sdk_` wiped `ep_sdk_staging_`) and
    /// the app's own keys.
    func testClearAllLeavesAnotherStoreWhosePrefixExtendsItsOwn() {
        let suite = makeSuite()
        let prod = OfflineStore(suiteName: suite), staging = OfflineStore(suiteName: suite, keyPrefix: "ep_sdk_staging_")
        prod.saveEvaluation(EvalResult(key: "f", enabled: false), userId: "u", flagKey: "f")
        prod.saveAssignment(Assignment(experimentKey: "e", userId: "\u{E9}", variantId: "v", variantName: "control", isControl: true), userId: "\u{E9}", experimentKey: "e")
        staging.saveEvaluation(EvalResult(key: "f", enabled: true), userId: "u", flagKey: "f")
        let defaults = try! XCTUnwrap(UserDefaults(suiteName: suite))
        defaults.set(Data("{}".utf8), forKey: "ep_sdk_flags.u")        // an upstream version's forms
        defaults.set(["u"], forKey: "ep_sdk__users")
        defaults.set("mine", forKey: "ep_sdk_settings")                // the app's own key
        prod.clearAll()
        XCTAssertNil(prod.loadEvaluation(flagKey: "f", userId: "u"))
        XCTAssertNil(prod.loadAssignment(experimentKey: "e", userId: "\u{E9}"))
        XCTAssertNil(defaults.object(forKey: "ep_sdk_flags.u"))
        XCTAssertNil(defaults.object(forKey: "ep_sdk__users"))
        XCTAssertEqual(staging.loadEvaluation(flagKey: "f", userId: "u")?.enabled, true, "the other store's entry stays")
        XCTAssertEqual(defaults.string(forKey: "ep_sdk_settings"), "mine")
    }

    func testStorageKeysKeepTheEarlierFormForASCIIAndAreASCIIOtherwise() {
        let store = OfflineStore(suiteName: makeSuite())
        XCTAssertEqual(store.storageKey(kind: "flag", userId: "a:b", key: "c"), "ep_sdk_flag:3:a:b:c", "unchanged for ASCII ids")
        XCTAssertEqual(store.storageKey(kind: "assignment", userId: "e\u{301}", key: "exp"), "ep_sdk_assignment~x:65.301:65.78.70")
        XCTAssertEqual(store.storageKey(kind: "assignment", userId: "\u{E9}", key: "exp"), "ep_sdk_assignment~x:e9:65.78.70")
        for (a, b, what) in ExactIdentityTests.pairs {
            let ka = store.storageKey(kind: "flag", userId: a, key: "k"), kb = store.storageKey(kind: "flag", userId: b, key: "k")
            XCTAssertFalse(ka.unicodeScalars.elementsEqual(kb.unicodeScalars), what)
            XCTAssertTrue(ka.unicodeScalars.allSatisfy(\.isASCII) && kb.unicodeScalars.allSatisfy(\.isASCII), what)
            XCTAssertNotEqual(ka, kb, "\(what): apart even as Swift strings")
        }
    }
}
