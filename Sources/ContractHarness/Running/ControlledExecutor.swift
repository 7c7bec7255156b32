import Foundation
import ExperimentlyMock

/// Something the recorder tells when the runner starts and stops waiting, so an executor can run
/// jobs only while the runner waits (and its condition is unmet), and report a run that can no
/// longer make progress. Part of interleaving (`Documentation/Explore.md`, Interleaving).
protocol WaitHook: AnyObject, Sendable {
    /// The runner waits until `condition` holds.
    func waitBegins(_ condition: @escaping @Sendable () -> Bool)
    /// The runner stopped waiting; returns once no job is running, so the runner's next action
    /// never overlaps a job.
    func waitEnds() async
    /// Something changed (a recorder poke).
    func poked()
    /// `true` when the runner waits, its condition is unmet, no job is ready or running and no
    /// request is outstanding: nothing but the runner can change anything, so the wait is a hang.
    var stuck: Bool { get }
}

/// One task on the controlled executor, named deterministically: an operation's task by its
/// label (`late`, `many#2`), a task created by a job of task `P` as `P/1`, `P/2`, ... in creation
/// order, anything else `external-N`. `serial` numbers tasks in creation order.
public struct InterleavingTask: Sendable, Equatable {
    /// The task's name.
    public let name: String
    /// Creation order within the run (0-based).
    public let serial: Int
}

/// The task executor of an interleaved run: it buffers the jobs of the scenario's operations and
/// of every task the SDK creates through its task executor seam, and runs one job at a time, only
/// when the runner waits, the runner's condition is unmet and nothing is in transit (every request
/// the SDK sessions created is answered and delivered, or parked in the mock). At each such point
/// the `strategy` picks which ready task runs next: a *choice* when more than one is ready.
///
/// Jobs run on one serial dispatch queue. State lives behind an `NSLock`; the strategy is only
/// called under it; callbacks (`settled`, the runner's condition, `onChange`) are called outside it.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, *)
final class ControlledExecutor: TaskExecutor, IdleReporting, WaitHook, @unchecked Sendable {
    // @unchecked Sendable: every `var` is inside `state`, guarded by `lock`; the rest is `let`.
    private struct Ready {
        let task: InterleavingTask
        let job: UnownedJob
    }

    private struct State {
        var ready: [Ready] = []
        var names: [UInt64: InterleavingTask] = [:]
        var children: [String: Int] = [:]
        var serial = 0
        var external = 0
        var running: InterleavingTask?
        var launching: String?
        var condition: (@Sendable () -> Bool)?
        var draining = false
        var stuck = false
        var steps = 0
        /// Jobs run to the end (``jobsRun``).
        var finished = 0
        /// Bumped whenever a job is picked: a kick that saw the gate open before may not pick after.
        var generation: UInt64 = 0
        var trace = InterleavingTrace()
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
        var afterJob: [@Sendable () -> Void] = []
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let lock = NSLock()
    private var state = State()
    private let queue = DispatchQueue(label: "contract-harness.interleaving")
    private let onQueue = DispatchSpecificKey<Bool>()
    private let strategy: any InterleavingStrategy
    private let settled: @Sendable () -> Bool
    private let quiet: @Sendable () -> Bool
    private let onChange: @Sendable () -> Void

    /// - Parameters:
    ///   - strategy: picks the next task at each point (PCT, depth-first, replay).
    ///   - settled: `true` when nothing is in transit between the SDK and the mock.
    ///   - quiet: `true` when no request of the SDK is outstanding at all (not even parked): only
    ///     then is "no job ready" a hang (a URLSession cancellation in progress is invisible to
    ///     `settled`, and ends with a completion).
    ///   - onChange: called (outside the lock) after each job, so waiters re-check.
    init(strategy: any InterleavingStrategy, settled: @escaping @Sendable () -> Bool, quiet: @escaping @Sendable () -> Bool,
         onChange: @escaping @Sendable () -> Void) {
        self.strategy = strategy
        self.settled = settled
        self.quiet = quiet
        self.onChange = onChange
        queue.setSpecific(key: onQueue, value: true)
    }

    /// `true` when no job is ready or running.
    var isIdle: Bool { lock.withLock { state.ready.isEmpty && state.running == nil } }

    /// The choices made so far and the steps run.
    var trace: InterleavingTrace { lock.withLock { state.trace } }

    var stuck: Bool { lock.withLock { state.stuck } }

    /// How many jobs have run to the end: the stuck probe's proof that no task of the SDK ran
    /// over a stretch of time, as in plain runs (`ScenarioExecution.stuckProbe`). A hang on a
    /// parked request no step releases is no deadlock of the executor (something is in the mock),
    /// so without it such a hang read "could not be shown stuck" in an interleaved run alone (a
    /// forty-seventh outside tester, D).
    var jobsRun: Int? { lock.withLock { state.finished } }

    /// Creates a task whose first job is named `name` (an operation's label).
    func launch(_ name: String, _ make: () -> Task<Void, Never>) -> Task<Void, Never> {
        lock.withLock { state.launching = name }
        defer { lock.withLock { state.launching = nil } }
        return make()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let id = Self.taskID(job.description)
        let unowned = UnownedJob(job)
        let fromJob = DispatchQueue.getSpecific(key: onQueue) == true
        lock.withLock {
            let task: InterleavingTask
            if let id, let known = state.names[id] {
                task = known
            } else {
                let name: String
                if fromJob, let parent = state.running {
                    let n = (state.children[parent.name] ?? 0) + 1
                    state.children[parent.name] = n
                    name = "\(parent.name)/\(n)"
                } else if let launching = state.launching {
                    name = launching
                    state.launching = nil
                } else {
                    state.external += 1
                    name = "external-\(state.external)"
                }
                task = InterleavingTask(name: name, serial: state.serial)
                state.serial += 1
                if let id { state.names[id] = task }
                strategy.created(task)
            }
            state.ready.append(Ready(task: task, job: unowned))
            state.stuck = false
        }
        kick()
    }

    /// The runtime's task id in a job's description (`ExecutorJob(id: 12)`).
    static func taskID(_ description: String) -> UInt64? {
        guard let open = description.range(of: "id: ") else { return nil }
        return UInt64(description[open.upperBound...].prefix { $0.isNumber })
    }

    func waitBegins(_ condition: @escaping @Sendable () -> Bool) {
        lock.withLock { state.condition = condition; state.stuck = false }
        kick()
    }

    func waitEnds() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                state.condition = nil
                if state.running == nil { return true }
                state.idleWaiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    func poked() { kick() }

    /// Draining only: returns once no job is ready or running.
    func idle() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if state.ready.isEmpty && state.running == nil { return true }
                state.drainWaiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    /// Runs `body` now when no job runs, else right after the running job (on the executor's
    /// queue, before the next pick): network completions go through here, so an answer resumes a
    /// task only once the job that sent the request has suspended (never inside it).
    func afterCurrentJob(_ body: @escaping @Sendable () -> Void) {
        let now: Bool = lock.withLock {
            if state.running == nil { return true }
            state.afterJob.append(body)
            return false
        }
        if now { body() }
    }

    /// From now on jobs run as they come, oldest task first, with no gate (the scenario's steps
    /// are over; what is left is cancellation and shutdown).
    func drain() {
        lock.withLock { state.draining = true }
        kick()
    }

    /// Runs the next job when the gate is open and a job is ready; notes a hang.
    private func kick() {
        let gate: (draining: Bool, condition: (@Sendable () -> Bool)?, generation: UInt64)? = lock.withLock {
            guard state.running == nil else { return nil }
            if state.draining { return state.ready.isEmpty ? nil : (true, nil, state.generation) }
            guard let condition = state.condition else { return nil }
            return (false, condition, state.generation)
        }
        guard let gate else { return }
        var hangPossible = false
        if !gate.draining {
            guard let condition = gate.condition, !condition(), settled() else { return }
            hangPossible = quiet()
        }
        var becameStuck = false
        let picked: Ready? = lock.withLock {
            // Another kick ran a job since this one looked: what it saw (settled, the runner's
            // condition) may no longer hold.
            guard state.running == nil, state.generation == gate.generation else { return nil }
            if !gate.draining {
                // The runner may have stopped waiting meanwhile.
                guard state.condition != nil else { return nil }
                if state.ready.isEmpty {
                    if hangPossible {
                        becameStuck = !state.stuck
                        state.stuck = true
                    }
                    return nil
                }
            }
            guard !state.ready.isEmpty else { return nil }
            state.ready.sort { $0.task.serial < $1.task.serial }
            var index = 0
            if !gate.draining {
                index = strategy.choose(state.ready.map(\.task), step: state.steps)
                if !state.ready.indices.contains(index) { index = 0 }
                if state.ready.count > 1 {
                    state.trace.points.append(.init(chosen: state.ready[index].task.name, index: index, options: state.ready.count))
                }
                state.steps += 1
                state.trace.steps = state.steps
                strategy.ran(state.ready[index].task, step: state.steps)
            }
            let r = state.ready.remove(at: index)
            state.running = r.task
            state.generation &+= 1
            return r
        }
        guard let picked else {
            // Wake the runner once, so its wait ends as a hang at once instead of at its limit.
            if becameStuck { onChange() }
            return
        }
        queue.async { [self] in
            picked.job.runSynchronously(on: asUnownedTaskExecutor())
            let (waiters, deliveries): ([CheckedContinuation<Void, Never>], [@Sendable () -> Void]) = lock.withLock {
                state.running = nil
                state.finished += 1
                defer { state.idleWaiters.removeAll(); state.afterJob.removeAll() }
                return (state.idleWaiters, state.afterJob)
            }
            deliveries.forEach { $0() }
            waiters.forEach { $0.resume() }
            onChange()
            kick()
            let drained: [CheckedContinuation<Void, Never>] = lock.withLock {
                guard state.draining, state.ready.isEmpty, state.running == nil else { return [] }
                defer { state.drainWaiters.removeAll() }
                return state.drainWaiters
            }
            drained.forEach { $0.resume() }
        }
    }
}

/// The choices of one interleaved run: at each point where more than one task was ready, which
/// one ran (its name), at which position among the ready tasks (in creation order), out of how many.
public struct InterleavingTrace: Sendable, Equatable, Codable {
    /// One choice point.
    public struct Point: Sendable, Equatable, Codable {
        /// The name of the task that ran.
        public let chosen: String
        /// Its position among the ready tasks, oldest first.
        public let index: Int
        /// How many tasks were ready.
        public let options: Int
    }
    /// The choice points in order.
    public var points: [Point] = []
    /// Jobs run (every scheduling step, choice or not).
    public var steps = 0

    /// The chosen names, with the trailing choices of the default (the oldest ready task) dropped:
    /// replaying takes the default past the end anyway.
    public var choices: [String] {
        var p = points
        while let last = p.last, last.index == 0 { p.removeLast() }
        return p.map(\.chosen)
    }
}
