import Foundation

/// The fault chosen for one request: which rule fired and what it does.
public struct FaultDecision: Sendable, Equatable {
    /// The rule that fired.
    public var id: FaultID
    /// The rule's name, if any.
    public var name: String?
    /// The action to apply.
    public var action: FaultAction
    /// Which match of the rule this request was (1-based).
    public var occurrence: Int
}

/// A one-shot rule (`nth`/`first`) not used up, or a hold rule that never parked a request,
/// with the nearest request it saw.
public struct UnusedFault: Codable, Sendable, Equatable {
    /// The rule id.
    public var id: FaultID
    /// The rule's name, if any.
    public var name: String?
    /// How many requests matched the rule's pattern.
    public var matched: Int
    /// How many it needed (`n` of `nth`/`first`).
    public var needed: Int
    /// The request that came closest and what differed, or why none did.
    public var nearest: String

    enum CodingKeys: String, CodingKey { case id, name, matched, needed, nearest }
}

/// The ordered list of fault rules and their counters, as a value: decides the fault for each
/// request without I/O (the first rule, in the order added, that fires wins).
public struct FaultScript: Sendable {
    struct Entry: Sendable {
        var id: FaultID
        var rule: FaultRule
        var matched = 0
        var fired = 0
    }

    /// Time zero of `window` occurrences (usually the backend's creation time on its clock).
    public var epoch: Date
    private(set) var entries: [Entry] = []
    private var nextID = 1

    /// Creates an empty script whose outage windows count from `epoch`; its first rule gets the
    /// id `firstID` (a reset script goes on from the last one's: an id is never reused).
    public init(epoch: Date, firstID: Int = 1) {
        self.epoch = epoch
        nextID = max(1, firstID)
    }

    /// The id the next rule added gets.
    public var nextRuleID: Int { nextID }

    /// The active rules in the order they apply.
    public var rules: [(id: FaultID, rule: FaultRule)] { entries.map { ($0.id, $0.rule) } }

    /// Adds `rule` after the existing ones and returns its id.
    @discardableResult
    public mutating func add(_ rule: FaultRule) -> FaultID {
        let id = FaultID(rawValue: nextID)
        nextID += 1
        entries.append(Entry(id: id, rule: rule))
        return id
    }

    /// Removes the rule `id`; returns false when there is no such rule.
    @discardableResult
    public mutating func remove(_ id: FaultID) -> Bool {
        guard let i = entries.firstIndex(where: { $0.id == id }) else { return false }
        entries.remove(at: i)
        return true
    }

    /// Decides the fault for `request` arriving at `now` and advances the rules' counters.
    public mutating func decide(for request: MockRequest, now: Date) -> FaultDecision? {
        decide(IncomingRequest(request), now: now)
    }

    mutating func decide(_ request: IncomingRequest, now: Date) -> FaultDecision? {
        var decision: FaultDecision?
        for i in entries.indices where entries[i].rule.match.matches(request) {
            entries[i].matched += 1
            let n = entries[i].matched
            let fires: Bool
            switch entries[i].rule.when {
            case .every: fires = true
            case .nth(let k): fires = n == k
            case .first(let k): fires = n <= k
            case .window(let from, let until):
                // In whole microseconds (the scenario format's grid): in doubles a request at
                // exactly `until_seconds` 0.3 s was still inside (a thirty-sixth outside tester, W1).
                let t = (now.timeIntervalSince(epoch) * 1e6).rounded()
                fires = t >= (from * 1e6).rounded() && t < (until * 1e6).rounded()
            }
            if fires && decision == nil {
                entries[i].fired += 1
                decision = FaultDecision(id: entries[i].id, name: entries[i].rule.name, action: entries[i].rule.action, occurrence: n)
            }
        }
        return decision
    }

    /// One-shot rules not used up, each with the request among `seen` that differed least.
    func unusedOneShots(seen: [IncomingRequest]) -> [UnusedFault] {
        entries.compactMap { entry in
            let isHold: Bool
            if case .hold = entry.rule.action { isHold = true } else { isHold = false }
            // One-shot rules must be used up; a hold rule of any kind must have parked something.
            guard let needed = entry.rule.when.requiredMatches ?? (isHold ? 1 : nil),
                  entry.matched < needed || (isHold && entry.fired == 0) else { return nil }
            var nearest = "no request arrived"
            if isHold && entry.matched >= needed {
                nearest = "\(entry.matched) requests matched but none fired (outside its window)"
            } else if entry.matched > 0 {
                nearest = "only \(entry.matched) of \(needed) matching requests arrived"
            } else {
                var best: (count: Int, text: String)?
                for (i, r) in seen.enumerated() {
                    let diffs = entry.rule.match.mismatches(r)
                    if best == nil || diffs.count < best!.count {
                        best = (diffs.count, "nearest request #\(i + 1) \(r.method) \(r.raw.target): " + diffs.joined(separator: "; "))
                    }
                }
                if let best { nearest = best.text }
            }
            return UnusedFault(id: entry.id, name: entry.rule.name, matched: entry.matched, needed: needed, nearest: nearest)
        }
    }
}
