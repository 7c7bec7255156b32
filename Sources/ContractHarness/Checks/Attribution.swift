import Foundation
import ExperimentlyMock

/// Exact attribution of requests to the concurrent operations that may have sent them (issue 11
/// section 3): when several operations of one client run at once, a request sent while they ran
/// cannot be given to all of them. A check passes when SOME assignment of the requests to the
/// operations satisfies every operation, and fails only when none does.
///
/// The search is a deterministic backtracking over the requests in arrival order: each request
/// goes to one operation that was running when it arrived (same client), whose next expected
/// request it matches (by its entries: user id, event name, experiment/flag key, or only by its
/// size), or, when it arrived inside an absorbing window (a reference-app event, whose requests no
/// model predicts), to nobody. Failed states (position, progress of every operation) are
/// memoized, so the search visits each state once; it stops after `budget` states and then says
/// it could not decide. Identity data is compared by Unicode scalars (UTF-8 bytes), never by
/// Swift `String` equality.
enum Attribution {
    /// One entry of a tracking request: whose event, which name, which key; compared by bytes.
    struct Entry: Hashable, Sendable, CustomStringConvertible {
        /// UTF-8 bytes of the user id.
        let user: [UInt8]
        /// UTF-8 bytes of the event name.
        let name: [UInt8]
        /// UTF-8 bytes of the experiment key, when the entry carries one.
        let experiment: [UInt8]?
        /// UTF-8 bytes of the flag key, when the entry carries one.
        let flag: [UInt8]?

        init(user: String, name: String, experiment: String?, flag: String?) {
            self.user = Array(user.utf8)
            self.name = Array(name.utf8)
            self.experiment = experiment.map { Array($0.utf8) }
            self.flag = flag.map { Array($0.utf8) }
        }

        /// The entry of a request's event object (`user_id`, `event_name`, `experiment_key`,
        /// `feature_flag_key`); `nil` when it has no user id or name.
        init?(wire event: JSONValue) {
            guard case .string(let user)? = event["user_id"] else { return nil }
            let name: String
            if case .string(let n)? = event["event_name"] { name = n }
            else if case .string(let t)? = event["event_type"] { name = t }
            else { return nil }
            var experiment: String?, flag: String?
            if case .string(let e)? = event["experiment_key"] { experiment = e }
            if case .string(let f)? = event["feature_flag_key"] { flag = f }
            self.init(user: user, name: name, experiment: experiment, flag: flag)
        }

        /// `name experiment=E` / `name flag=F` for user U, non-ASCII shown as `\u{...}` escapes so two
        /// canonically equivalent spellings never look alike.
        var description: String {
            var s = Attribution.show(name)
            if let experiment { s += " experiment=\(Attribution.show(experiment))" }
            if let flag { s += " flag=\(Attribution.show(flag))" }
            return s + " user=\(Attribution.show(user))"
        }
    }

    /// Where an expected entry may stand: entries of one `group` (one event's cached assignments,
    /// or its cached flags) were written into the cache in an order the history fixes only where
    /// one write window (`lo`...`hi`, history indices) ends before the other begins.
    struct Rank: Equatable, Sendable {
        let group: Int
        let lo: Int
        let hi: Int
        /// Whether an entry of rank `self` surely comes before one of rank `other`.
        func surelyBefore(_ other: Rank) -> Bool { group < other.group || (group == other.group && hi < other.lo) }
    }

    /// An operation whose requests are searched for.
    struct Operation: Sendable {
        /// The operation's label (for messages).
        let label: String
        /// The operation's name (`track`, `trackWithStatus`, `trackBatch`).
        let name: String
        /// The client it ran on.
        let client: String?
        /// History index of its invocation.
        let from: Int
        /// History index of its completion, `Int.max` when it never completed.
        let to: Int
        /// The requests it must send, in order, each as its list of entries.
        let expected: [[Entry]]
        /// For each expected entry, its rank (`nil`: the order of `expected` is exact).
        var ranks: [[Rank]]? = nil

        /// Whether the operation finished, so every expected request must have been found.
        var completed: Bool { to != Int.max }
    }

    /// A request the operations may have sent.
    struct Request: Sendable {
        /// The mock's sequence number.
        let seq: Int
        /// History index of its receipt.
        let index: Int
        /// The client that sent it.
        let client: String?
        /// Its entries, in order.
        let entries: [Entry]
    }

    /// A window of a client in which requests need not belong to any operation.
    struct Window: Sendable {
        let client: String?
        let from: Int
        let to: Int
        // Client names are identity data: compared by Unicode scalars.
        func contains(_ r: Request) -> Bool { client.isExactly(r.client) && from < r.index && r.index < to }
    }

    /// How a request is compared with an expected one.
    enum Mode: Sendable {
        /// Same entries in the same order.
        case entries
        /// Same number of entries (`batch_chunking`).
        case sizes
    }

    /// The search's answer.
    enum Outcome: Equatable, Sendable {
        /// Every operation is satisfied: request seq -> operation label (absent: absorbed).
        case attributed([Int: String])
        /// No assignment satisfies every operation; the reasons, each with the history indices
        /// that show it.
        case unattributable([Reason])
        /// The search visited `budget` states without an answer.
        case undecided(states: Int)
    }

    /// Why no attribution exists, in terms of the operations and requests.
    struct Reason: Equatable, Sendable {
        let message: String
        let indices: [Int]
    }

    static func running(_ o: Operation, _ r: Request) -> Bool {
        o.client.isExactly(r.client) && o.from < r.index && r.index < o.to
    }

    static func matches(_ r: Request, _ want: [Entry], _ mode: Mode, ranks: [Rank]? = nil) -> Bool {
        if mode == .sizes { return r.entries.count == want.count }
        guard let ranks, ranks.count == want.count else { return r.entries == want }
        guard r.entries.count == want.count else { return false }
        // Each sent entry takes an equal expected one that no unused expected entry surely precedes.
        var used = [Bool](repeating: false, count: want.count)
        for got in r.entries {
            let free = want.indices.filter { i in
                !used[i] && want[i] == got && !want.indices.contains { k in !used[k] && k != i && ranks[k].surelyBefore(ranks[i]) }
            }
            guard let pick = free.min(by: { (ranks[$0].group, ranks[$0].lo) < (ranks[$1].group, ranks[$1].lo) }) else { return false }
            used[pick] = true
        }
        return true
    }

    static func matches(_ r: Request, _ o: Operation, chunk k: Int, _ mode: Mode) -> Bool {
        matches(r, o.expected[k], mode, ranks: o.ranks?[k])
    }

    /// Finds an assignment of `requests` to `operations` satisfying every completed operation
    /// (all its expected requests found, in order, each while it ran), every request given to one
    /// operation or absorbed by one of `absorbers`.
    ///
    /// - Parameter budget: the most search states visited before answering `.undecided`.
    static func solve(operations: [Operation], requests: [Request], absorbers: [Window] = [], mode: Mode,
                      budget: Int = 200_000) -> Outcome {
        let ops = operations.sorted { $0.from < $1.from }
        let reqs = requests.sorted { $0.index < $1.index }
        var progress = [Int](repeating: 0, count: ops.count)
        var choice = [Int](repeating: -1, count: reqs.count)   // op index, -1 absorbed
        var failed = Set<[Int]>()
        var states = 0
        var exhausted = false
        // Operations that expect the same requests (same client, entries and ranks) are
        // interchangeable: of those with equal progress that may take a request, the one that
        // completes first takes it, and no other is tried. If any attribution exists, one does
        // that takes it so: in one that gives it to another, give each of the two its j-th
        // remaining request as the earlier (to the one completing first) and the later of the
        // two j-th requests; both stay in order, match the same chunks and arrive before their
        // completions. Without it, 30 concurrent identical `trackBatch` calls visited every
        // permutation and `fan_out` ran past the scenario's hard deadline (a thirtieth outside
        // tester: a correct SDK was reported crashed).
        let kind: [Int] = ops.indices.map { i in
            ops.indices.first { j in
                j <= i && ops[j].client.isExactly(ops[i].client) && ops[j].expected == ops[i].expected && ops[j].ranks == ops[i].ranks
            } ?? i
        }

        func search(_ p: Int) -> Bool {
            if exhausted { return false }
            // A completed operation that finished before this request still missing a request: dead.
            let now = p < reqs.count ? reqs[p].index : Int.max
            for (i, o) in ops.enumerated() where o.completed && o.to < now && progress[i] < o.expected.count { return false }
            if p == reqs.count { return true }
            let key = [p] + progress
            if failed.contains(key) { return false }
            states += 1
            if states > budget { exhausted = true; return false }
            let r = reqs[p]
            var takers: [Int] = []
            for (i, o) in ops.enumerated() where progress[i] < o.expected.count && running(o, r) && matches(r, o, chunk: progress[i], mode) {
                if let t = takers.firstIndex(where: { kind[$0] == kind[i] && progress[$0] == progress[i] }) {
                    if o.to < ops[takers[t]].to { takers[t] = i }
                } else {
                    takers.append(i)
                }
            }
            for i in takers {
                progress[i] += 1
                choice[p] = i
                if search(p + 1) { return true }
                progress[i] -= 1
            }
            if absorbers.contains(where: { $0.contains(r) }) {
                choice[p] = -1
                if search(p + 1) { return true }
            }
            failed.insert(key)
            return false
        }

        if search(0) {
            var out: [Int: String] = [:]
            for (p, i) in choice.enumerated() where i >= 0 { out[reqs[p].seq] = ops[i].label }
            return .attributed(out)
        }
        if exhausted { return .undecided(states: states) }
        return .unattributable(diagnose(ops, reqs, absorbers, mode))
    }

    /// The reasons no attribution exists: requests no running operation can have sent, operations
    /// whose expected requests are not among those sent while they ran, else the conflict.
    static func diagnose(_ ops: [Operation], _ reqs: [Request], _ absorbers: [Window], _ mode: Mode) -> [Reason] {
        var reasons: [Reason] = []
        for r in reqs where !absorbers.contains(where: { $0.contains(r) }) {
            let runningOps = ops.filter { running($0, r) }
            if runningOps.isEmpty {
                reasons.append(Reason(message: "batch #\(r.seq) (\(r.entries.count) entries: \(r.entries)) was sent while no tracking operation of client '\(r.client ?? "?")' that sends batches ran "
                                      + "(an unkeyed event's fan-out, or a trackBatch; a keyed track or trackWithStatus sends one /track: CONTRACT.md section 4)",
                                      indices: [r.index]))
            } else if !runningOps.contains(where: { o in o.expected.indices.contains { matches(r, o, chunk: $0, mode) } }) {
                let what = mode == .sizes ? "\(r.entries.count) entries" : "\(r.entries)"
                reasons.append(Reason(message: "batch #\(r.seq) (\(what)) is no batch that \(runningOps.map(\.label).joined(separator: ", ")) should send (CONTRACT.md section 4)",
                                      indices: [r.index]))
            }
        }
        for o in ops where o.completed {
            let window = reqs.filter { running(o, $0) }
            // Greedy in order is exact for one operation alone: take the first match of each expected request.
            var k = 0
            for r in window where k < o.expected.count && matches(r, o, chunk: k, mode) { k += 1 }
            if k == o.expected.count { continue }
            let want = o.expected.map(\.count)
            let sent = window.map(\.entries.count)
            let indices = [o.from] + window.map(\.index) + [o.to]
            if mode == .entries, sent == want {
                reasons.append(Reason(message: "\(o.label) (\(o.name)) fanned out to \(window.flatMap(\.entries)), expected \(o.expected.flatMap { $0 }) (CONTRACT.md section 4)",
                                      indices: indices))
            } else {
                reasons.append(Reason(message: "\(o.label) (\(o.name)) should send batches of \(want) for \(want.reduce(0, +)) entries; the batches sent while it ran were \(sent)\(window.isEmpty ? "" : " (#" + window.map { String($0.seq) }.joined(separator: ", #") + ")") (CONTRACT.md section 4)",
                                      indices: indices))
            }
        }
        if reasons.isEmpty {
            let completed = ops.filter(\.completed)
            reasons.append(Reason(message: "no attribution of batches #\(reqs.map { String($0.seq) }.joined(separator: ", #")) to \(completed.map(\.label).joined(separator: ", ")) gives every operation exactly its batches in order (CONTRACT.md section 4)",
                                  indices: completed.flatMap { [$0.from, $0.to] } + reqs.map(\.index)))
        }
        return reasons
    }

    /// The UTF-8 `bytes` as messages print identity data, so canonically equivalent spellings
    /// (NFC "\u{E9}", NFD "e\u{301}") are told apart (``Swift/String/unambiguous``).
    static func show(_ bytes: [UInt8]) -> String { show(String(decoding: bytes, as: UTF8.self)) }

    /// `text` as messages print identity data: unambiguous (``Swift/String/unambiguous``).
    static func show(_ text: String) -> String { text.unambiguous }
}
