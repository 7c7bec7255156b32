import Foundation

/// The identity of a cached entry: a (user id, flag or experiment key) pair. Two separate strings,
/// so `("a:b","c")` and `("a","b:c")` never collide (CONTRACT.md section 4).
struct CacheKey: Hashable, Sendable {
    let userId: String
    let key: String
}

/// An in-memory TTL cache with a count limit and insertion order, not thread-safe on its own:
/// the client keeps it inside its `Locked` state.
struct UserKeyCache<Value> {
    private struct Entry {
        let value: Value
        let expiresAt: Date
        let sequence: UInt64
    }

    private var entries: [CacheKey: Entry] = [:]
    /// Insertion log for eviction, oldest first; stale pairs (re-set or removed keys) are skipped.
    private var log: [(key: CacheKey, sequence: UInt64)] = []
    private var logHead = 0
    private var nextSequence: UInt64 = 0
    let ttl: TimeInterval
    let countLimit: Int

    init(ttl: TimeInterval, countLimit: Int) {
        self.ttl = ttl
        self.countLimit = max(1, countLimit)
    }

    /// The unexpired value for `key` at `now`; an expired entry is removed.
    mutating func value(for key: CacheKey, now: Date) -> Value? {
        guard let entry = entries[key] else { return nil }
        if entry.expiresAt > now { return entry.value }
        entries[key] = nil
        return nil
    }

    /// Stores `value` until `now + ttl`, as the newest entry; evicts the oldest beyond the limit.
    mutating func set(_ value: Value, for key: CacheKey, now: Date) {
        nextSequence += 1
        entries[key] = Entry(value: value, expiresAt: now.addingTimeInterval(ttl), sequence: nextSequence)
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

    /// The user's unexpired entries at `now`, oldest insertion first.
    func entries(forUser userId: String, now: Date) -> [(key: String, value: Value)] {
        entries.lazy
            .filter { $0.key.userId == userId && $0.value.expiresAt > now }
            .sorted { $0.value.sequence < $1.value.sequence }
            .map { ($0.key.key, $0.value.value) }
    }

    mutating func removeAll() {
        entries.removeAll()
        log.removeAll()
        logHead = 0
    }
}
