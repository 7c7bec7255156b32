import Foundation
import ExperimentlyMock

/// The task executor every scenario operation runs on: one serial queue that counts the jobs
/// enqueued and not yet finished, so the runner can tell "every operation is suspended" (idle)
/// from "some operation is still running or about to run" (busy). Part of quiescence.
///
/// Jobs of the operations' structured child tasks run here too; unstructured tasks the SDK
/// creates run on the global executor. The count lives behind an `NSLock`.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, *)
final class OperationExecutor: TaskExecutor, IdleReporting, @unchecked Sendable {
    // @unchecked Sendable: `pending` and `finished` are guarded by `lock`; `queue` and `onIdle` are `let`.
    private let queue = DispatchQueue(label: "contract-harness.operations")
    private let lock = NSLock()
    private var pending = 0
    private var finished = 0
    private let onIdle: @Sendable () -> Void

    /// - Parameter onIdle: called (outside the lock) each time the last pending job finishes.
    init(onIdle: @escaping @Sendable () -> Void) { self.onIdle = onIdle }

    /// `true` when no operation job is queued or running.
    var isIdle: Bool { lock.withLock { pending == 0 } }

    /// Jobs run to the end so far.
    var jobsRun: Int? { lock.withLock { finished } }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        lock.withLock { pending += 1 }
        queue.async { [self] in
            unowned.runSynchronously(on: asUnownedTaskExecutor())
            let idle = lock.withLock { () -> Bool in pending -= 1; finished += 1; return pending == 0 }
            if idle { onIdle() }
        }
    }
}

/// Something that knows whether the operations' jobs are all done for now.
protocol IdleReporting: Sendable {
    /// `true` when no operation job is queued or running.
    var isIdle: Bool { get }
    /// How many jobs have run to the end so far, when the executor counts them (`nil` otherwise):
    /// an unchanged count over a stretch of time shows no operation ran meanwhile.
    var jobsRun: Int? { get }
}

extension IdleReporting {
    var jobsRun: Int? { nil }
}

/// Where task executors are not available (before macOS 15 / iOS 18): always "idle", so
/// quiescence rests on the other conditions.
struct NoExecutorTracking: IdleReporting {
    var isIdle: Bool { true }
}
