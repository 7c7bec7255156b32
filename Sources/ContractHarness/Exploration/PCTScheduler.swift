import Foundation
import ExperimentlyMock

/// Picks which ready task runs next on a `ControlledExecutor`. Called under the executor's lock,
/// one call at a time, so implementations keep plain mutable state (they are classes used by one
/// run only).
protocol InterleavingStrategy: AnyObject, Sendable {
    /// A task was seen for the first time (created).
    func created(_ task: InterleavingTask)
    /// The position in `ready` (oldest task first, never empty) of the task to run at `step`
    /// (the number of jobs run so far).
    func choose(_ ready: [InterleavingTask], step: Int) -> Int
    /// `task` ran as job number `step` (1-based).
    func ran(_ task: InterleavingTask, step: Int)
}

/// How an interleaved run picks its tasks: the value a runner carries; each run builds a fresh
/// strategy from it.
public enum InterleavingPlan: Sendable, Equatable {
    /// Replays recorded choices by task name, one per choice point; a name not ready there, and
    /// every point past the end, takes the oldest ready task.
    case replay([String])
    /// Probabilistic concurrency testing (Burckhardt, Kothari, Musuvathi, Nagarakatte, "A
    /// Randomized Scheduler with Probabilistic Guarantees of Finding Bugs", ASPLOS 2010): random
    /// task priorities and `depth - 1` priority change points among the first `steps` jobs.
    case pct(seed: UInt64, depth: Int, steps: Int)
    /// Depth-first enumeration: the given position at each choice point, then the oldest task.
    case prefix([Int])

    func makeStrategy() -> any InterleavingStrategy {
        switch self {
        case .replay(let names): return ReplayStrategy(names)
        case .pct(let seed, let depth, let steps): return PCTStrategy(seed: seed, depth: depth, steps: steps)
        case .prefix(let indices): return PrefixStrategy(indices)
        }
    }
}

/// Replays choices by name (identity compared by Unicode scalars).
final class ReplayStrategy: InterleavingStrategy, @unchecked Sendable {
    // @unchecked Sendable: `point` is only touched by the executor, under its lock.
    private let names: [String]
    private var point = 0

    init(_ names: [String]) { self.names = names }

    func created(_ task: InterleavingTask) {}

    func choose(_ ready: [InterleavingTask], step: Int) -> Int {
        guard ready.count > 1 else { return 0 }
        defer { point += 1 }
        guard point < names.count else { return 0 }
        let wanted = names[point]
        return ready.firstIndex { $0.name.unicodeScalars.elementsEqual(wanted.unicodeScalars) } ?? 0
    }

    func ran(_ task: InterleavingTask, step: Int) {}
}

/// Forced positions at the first choice points, then the oldest task: one path of a depth-first
/// enumeration of every interleaving.
final class PrefixStrategy: InterleavingStrategy, @unchecked Sendable {
    // @unchecked Sendable: `point` is only touched by the executor, under its lock.
    private let indices: [Int]
    private var point = 0

    init(_ indices: [Int]) { self.indices = indices }

    func created(_ task: InterleavingTask) {}

    func choose(_ ready: [InterleavingTask], step: Int) -> Int {
        guard ready.count > 1 else { return 0 }
        defer { point += 1 }
        return point < indices.count ? min(indices[point], ready.count - 1) : 0
    }

    func ran(_ task: InterleavingTask, step: Int) {}
}

/// PCT: each task gets a random priority when created (inserted at a random place in the priority
/// order, as AWS Shuttle's `PctScheduler` does); the highest-priority ready task runs; after the
/// job numbered by each of `depth - 1` change points (distinct, uniform in 1...steps), the task
/// that ran drops below every other. A bug of depth d among n tasks and k jobs is found by one run
/// with probability at least 1 / (n k^(d-1)) (the paper's Theorem).
final class PCTStrategy: InterleavingStrategy, @unchecked Sendable {
    // @unchecked Sendable: all state is only touched by the executor, under its lock.
    private var rng: SplitMix64
    /// Task serials, highest priority first.
    private var order: [Int] = []
    private let changePoints: Set<Int>

    init(seed: UInt64, depth: Int, steps: Int) {
        var rng = SplitMix64(state: seed)
        var points = Set<Int>()
        let k = max(1, steps)
        let wanted = min(max(0, depth - 1), k)
        while points.count < wanted { points.insert(Int.random(in: 1...k, using: &rng)) }
        changePoints = points
        self.rng = rng
    }

    func created(_ task: InterleavingTask) {
        order.insert(task.serial, at: Int.random(in: 0...order.count, using: &rng))
    }

    func choose(_ ready: [InterleavingTask], step: Int) -> Int {
        guard ready.count > 1 else { return 0 }
        var best = 0, bestRank = Int.max
        for (i, t) in ready.enumerated() {
            let rank = order.firstIndex(of: t.serial) ?? Int.max
            if rank < bestRank { best = i; bestRank = rank }
        }
        return best
    }

    func ran(_ task: InterleavingTask, step: Int) {
        guard changePoints.contains(step), let i = order.firstIndex(of: task.serial) else { return }
        order.remove(at: i)
        order.append(task.serial)
    }
}
