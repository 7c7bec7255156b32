import Foundation
import XCTest
@testable import Experimently

/// The in-memory cache on its own: TTL boundary, eviction order and bounded bookkeeping.
final class UserKeyCacheTests: XCTestCase {
    private let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func testRefreshingLiveKeysKeepsTheLogBounded() {
        var cache = UserKeyCache<Int>(ttl: 300, countLimit: 1000)
        for i in 0..<10_000 { cache.set(i, for: CacheKey(userId: "u", key: "k\(i % 3)"), now: t0) }
        XCTAssertLessThanOrEqual(cache.logLength, 64, "log of 3 live keys must not grow with every refresh")
        // Insertion order of the latest sets: 9997 -> k1, 9998 -> k2, 9999 -> k0.
        XCTAssertEqual(cache.entries(forUser: "u", now: t0).map(\.key), ["k1", "k2", "k0"])
        XCTAssertEqual(cache.value(for: CacheKey(userId: "u", key: "k0"), now: t0), 9999)
    }

    func testEvictionAfterCompactionStillRemovesTheOldest() {
        var cache = UserKeyCache<Int>(ttl: 300, countLimit: 3)
        for i in 0..<500 { cache.set(i, for: CacheKey(userId: "u", key: "hot"), now: t0) }
        cache.set(1, for: CacheKey(userId: "u", key: "a"), now: t0)
        cache.set(2, for: CacheKey(userId: "u", key: "b"), now: t0)
        cache.set(3, for: CacheKey(userId: "u", key: "c"), now: t0)  // evicts "hot", the oldest
        XCTAssertEqual(cache.entries(forUser: "u", now: t0).map(\.key), ["a", "b", "c"])
    }

    func testExpiryBoundaryAndPerUserEntries() {
        var cache = UserKeyCache<Int>(ttl: 10, countLimit: 10)
        cache.set(1, for: CacheKey(userId: "a:b", key: "c"), now: t0)
        cache.set(2, for: CacheKey(userId: "a", key: "b:c"), now: t0)
        XCTAssertEqual(cache.value(for: CacheKey(userId: "a:b", key: "c"), now: t0.addingTimeInterval(9.999)), 1)
        XCTAssertEqual(cache.value(for: CacheKey(userId: "a", key: "b:c"), now: t0), 2)
        XCTAssertNil(cache.value(for: CacheKey(userId: "a:b", key: "c"), now: t0.addingTimeInterval(10)))
        XCTAssertEqual(cache.entries(forUser: "a", now: t0).map(\.key), ["b:c"])
    }
}
