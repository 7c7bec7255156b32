import Foundation

/// The identity of a cached entry: a (user id, flag or experiment key) pair. Two separate strings,
/// so `("a:b","c")` and `("a","b:c")` never collide (CONTRACT.md section 4).
///
/// Compared and hashed by Unicode scalars, not by `String`'s canonical equivalence: NFC
/// `"\u{E9}"` and NFD `"e\u{301}"` are two users with their own bucketing (the hash is over the
/// UTF-8 bytes, CONTRACT.md section 3), so they never share a cache entry or a single-flight request.
struct CacheKey: Hashable, Sendable {
    let userId: String
    let key: String

    static func == (lhs: CacheKey, rhs: CacheKey) -> Bool {
        lhs.userId.isExactly(rhs.userId) && lhs.key.isExactly(rhs.key)
    }

    func hash(into hasher: inout Hasher) {
        for scalar in userId.unicodeScalars { hasher.combine(scalar.value) }
        hasher.combine(UInt32.max) // separator: scalars are at most 0x10FFFF
        for scalar in key.unicodeScalars { hasher.combine(scalar.value) }
    }
}

extension String {
    /// `true` when both strings have the same Unicode scalars in the same order (identity data:
    /// user ids and keys are exact strings, never canonically equivalent ones).
    func isExactly(_ other: String) -> Bool {
        unicodeScalars.elementsEqual(other.unicodeScalars)
    }
}

/// An in-memory TTL cache with a count limit and insertion order, not thread-safe on its own:
/// the client keeps it inside its `Locked` state.
struct UserKeyCache<Value> {
    private struct Entry {
        let value: Value
        /// When it expires: stored + cacheTTL in whole microseconds since 2001 (``microseconds(_:)``).
        let expiresAt: Double
        let sequence: UInt64

        /// Fresh while `now` is before its expiry, to the microsecond (CONTRACT.md section 4: at
        /// exactly stored + cacheTTL it has expired). Both sides are whole microseconds, the
        /// stored instant and the TTL each rounded on their own: `Date` arithmetic leaves
        /// `stored + ttl` a unit in the last place either side of that instant, so a plain
        /// `expiresAt > now` kept an entry fresh at exactly its expiry; and rounding their
        /// difference instead expired an entry 1 us early once a `Date`'s spacing passed 0.47 us
        /// (after 2069: a forty-seventh outside tester, C, at 45 years of virtual time).
        func isFresh(at now: Date) -> Bool { microseconds(now) < expiresAt }
    }

    private var entries: [CacheKey: Entry] = [:]
    /// Insertion log for eviction, oldest first; stale pairs (re-set or removed keys) are skipped.
    private var log: [(key: CacheKey, sequence: UInt64)] = []
    private var logHead = 0
    private var nextSequence: UInt64 = 0
    let ttl: TimeInterval
    let countLimit: Int

    /// A cache of at most `countLimit` entries over all users; `countLimit` 0 or less is no limit,
    /// as upstream's `NSCache.countLimit` (it kept one entry, so an unkeyed event fanned out to
    /// the last experiment only: an outside audit, 47 item 8).
    init(ttl: TimeInterval, countLimit: Int) {
        self.ttl = ttl
        self.countLimit = countLimit > 0 ? countLimit : Int.max
    }

    /// The unexpired value for `key` at `now`; an expired entry is removed.
    mutating func value(for key: CacheKey, now: Date) -> Value? {
        guard let entry = entries[key] else { return nil }
        if entry.isFresh(at: now) { return entry.value }
        entries[key] = nil
        return nil
    }

    /// Stores `value` until `now + ttl`, as the newest entry; evicts the oldest beyond the limit.
    mutating func set(_ value: Value, for key: CacheKey, now: Date) {
        nextSequence += 1
        entries[key] = Entry(value: value, expiresAt: microseconds(now) + (ttl * 1e6).rounded(), sequence: nextSequence)
        log.append((key, nextSequence))
        while entries.count > countLimit, logHead < log.count {
            let oldest = log[logHead]
            logHead += 1
            if entries[oldest.key]?.sequence == oldest.sequence { entries[oldest.key] = nil }
        }
        if logHead > 64, logHead * 2 > log.count {
            log.removeFirst(logHead)
            logHead = 0
        }
        // Re-setting live keys (a refresh after each TTL) adds log pairs without evicting, so the
        // head never moves: drop the stale pairs once they outnumber the live ones.
        if log.count - logHead > 2 * max(entries.count, 32) {
            log = log[logHead...].filter { entries[$0.key]?.sequence == $0.sequence }
            logHead = 0
        }
    }

    /// Pairs in the insertion log (live and stale); bounded by about twice the entry count.
    var logLength: Int { log.count - logHead }

    mutating func remove(_ key: CacheKey) { entries[key] = nil }

    /// The unexpired entries of exactly `userId` (Unicode scalars) at `now`, oldest insertion first.
    func entries(forUser userId: String, now: Date) -> [(key: String, value: Value)] {
        entries.lazy
            .filter { $0.key.userId.isExactly(userId) && $0.value.isFresh(at: now) }
            .sorted { $0.value.sequence < $1.value.sequence }
            .map { ($0.key.key, $0.value.value) }
    }

    mutating func removeAll() {
        entries.removeAll()
        log.removeAll()
        logHead = 0
    }
}

/// `date` in whole microseconds since 2001, as a `Double` (exact: below 2^53 until the year
/// 2286); the cache's and the faithful variant's clock of freshness (CONTRACT.md section 4). The whole seconds and the fraction are scaled apart, so the only error rounding must
/// undo is the `Date`'s own: under half a microsecond for a clock on the microsecond grid until
/// 2106 (scaling the whole value by 1e6 added up to a quarter more, and a virtual clock 45 years
/// on read a microsecond off).
package func microseconds(_ date: Date) -> Double {
    let t = date.timeIntervalSinceReferenceDate
    let whole = t.rounded(.down)
    return whole * 1e6 + ((t - whole) * 1e6).rounded()
}
