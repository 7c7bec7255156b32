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

    /// The TTL boundary to the microsecond over the whole range of the harness's virtual clock
    /// (80 years from 2023): 1 us before stored + cacheTTL fresh, at it expired, for generated
    /// stored instants and TTLs on the clock's microsecond grid. Rounding the difference of the
    /// two instants expired entries 1 us early past 2069 (a forty-seventh outside tester, C: 385
    /// of 3,000 such cases in a model of the old formula).
    func testTheTTLBoundaryHoldsToTheMicrosecondForEightyYears() {
        let origin = t0.timeIntervalSinceReferenceDate
        func onGrid(_ micros: Double) -> Date { Date(timeIntervalSinceReferenceDate: origin + micros / 1e6) }
        var state: UInt64 = 47
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        var wrong: [String] = []
        for i in 0..<4000 {
            let elapsed = Double(next() % 2_524_608_000_000_000)   // microseconds, up to 80 years
            let ttlMicros = Double(1 + next() % 600_000_000)        // up to 10 minutes
            let ttl = [ttlMicros / 1e6, 0.1, 0.000003, 300][i % 4]
            let micros = [ttlMicros, 100_000, 3, 300_000_000][i % 4]
            var cache = UserKeyCache<Int>(ttl: ttl, countLimit: 10)
            let key = CacheKey(userId: "u", key: "k")
            cache.set(1, for: key, now: onGrid(elapsed))
            if cache.value(for: key, now: onGrid(elapsed + micros - 1)) != 1 { wrong.append("expired 1 us early: elapsed \(elapsed) us, ttl \(ttl) s") }
            if cache.value(for: key, now: onGrid(elapsed + micros)) != nil { wrong.append("fresh at its expiry: elapsed \(elapsed) us, ttl \(ttl) s") }
        }
        XCTAssertEqual(wrong.count, 0, wrong.prefix(5).joined(separator: "; "))
    }
}
