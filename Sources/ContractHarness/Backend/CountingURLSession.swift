import Foundation
import ExperimentlyMock
#if canImport(FoundationNetworking)
import FoundationNetworking

/// A `URLSession` that counts the data tasks an SDK creates and the completion handlers that have
/// returned, so the runner knows exactly how many requests are between the SDK and the mock (in
/// transit, parked, or on their way back): the basis of quiescence.
///
/// A pooled session (``InProcessSessions``, `counter` nil) holds nothing of any scenario: each
/// request is counted by the scenario whose backend its URL's host names, looked up when the task
/// is created, and that counter stays with the task to its completion. A dedicated session (a
/// client whose `base_url` is not its scenario's mock) counts every request in `counter`.
///
/// Linux only: swift-corelibs-foundation's `URLSession` is open for subclassing; on Apple
/// platforms the runner falls back to the mock's parked requests alone (`Documentation/ScenarioFormat.md`).
final class CountingURLSession: URLSession, @unchecked Sendable {
    // @unchecked Sendable: the only added state is `counter`, immutable and itself Sendable.
    /// The counter of every request (a dedicated session), or `nil`: by the request's host.
    let counter: TaskCounter?

    init(configuration: URLSessionConfiguration, counter: TaskCounter?) {
        self.counter = counter
        super.init(configuration: configuration, delegate: nil, delegateQueue: nil)
    }

    override func dataTask(with request: URLRequest,
                           completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void) -> URLSessionDataTask {
        // A request to no running scenario's backend (a finished scenario's late request) is
        // counted nowhere: it must never count in the scenario that holds the session now.
        guard let counter = counter ?? InProcessSessions.counter(host: request.url?.host) else {
            return super.dataTask(with: request, completionHandler: completionHandler)
        }
        // The task's identity, set once it exists (its completion cannot run before `resume()`,
        // which comes after this returns).
        let ticket = TaskCounter.Ticket()
        // The completion keeps the session alive until the task delivered: FoundationNetworking
        // dereferences its session while delivering, and the runner never invalidates it.
        let task = super.dataTask(with: request) { [self] data, response, error in
            let answer = Answer(data: data, response: response, error: error)
            counter.deliver {
                completionHandler(answer.data, answer.response, answer.error)
                counter.completed(ticket)
            }
            withExtendedLifetime(self) {}
        }
        counter.issued(task, ticket: ticket)
        return task
    }

    /// Does nothing on a pooled session: the pool owns it, and later scenarios take it (a task
    /// created on an invalidated session is a `fatalError` in FoundationNetworking). A dedicated
    /// session is invalidated as asked.
    override func finishTasksAndInvalidate() {
        if counter != nil { super.finishTasksAndInvalidate() }
    }

    /// Does nothing on a pooled session (see ``finishTasksAndInvalidate()``): its tasks are not
    /// cancelled either, since the session may already serve another scenario. A dedicated
    /// session is invalidated and its tasks cancelled as asked.
    override func invalidateAndCancel() {
        if counter != nil { super.invalidateAndCancel() }
    }
}
/// A completion's arguments, carried to where the delivery gate runs it.
private struct Answer: @unchecked Sendable {
    // @unchecked Sendable: immutable, handed from the session's queue to one delivery.
    let data: Data?
    let response: URLResponse?
    let error: (any Error)?
}
#endif

/// Counts requests created by SDK clients and those whose completion handler returned.
///
/// State behind an `NSLock`; `onChange` is called outside it.
final class TaskCounter: @unchecked Sendable {
    // @unchecked Sendable: `tasks` and `nextTicket` (`created` and `finished` on Apple platforms)
    // are guarded by `lock`.
    private let lock = NSLock()
    #if canImport(FoundationNetworking)
    /// The tasks created whose completion has not returned, weakly (by their ticket's number): a
    /// task an SDK created and never resumed (it dropped it, its caller being cancelled) is never
    /// between the SDK and the mock, and no completion of it ever comes.
    private var tasks: [Int: WeakTask] = [:]
    private var nextTicket = 0
    /// A weak reference to a created task.
    private struct WeakTask { weak var task: URLSessionTask? }
    #endif
    let onChange: @Sendable () -> Void

    /// One created task's identity, from its creation to its completion. Set once, under the
    /// counter's lock, before the task can complete.
    final class Ticket: @unchecked Sendable {
        // @unchecked Sendable: `number` is written once in `issued` (under the counter's lock,
        // before `resume()`), and read in `completed` under that lock.
        var number = -1
    }
    /// Interleaved runs: runs each completion once the controlled executor runs no job (guarded by `lock`).
    private var gate: (@Sendable (@escaping @Sendable () -> Void) -> Void)?

    init(onChange: @escaping @Sendable () -> Void) { self.onChange = onChange }

    /// Completions go through `gate` from now on (interleaved runs: so an answer never reaches the
    /// SDK while one of its jobs runs, and every answer resumes a suspended task as a job of its own).
    func setDeliveryGate(_ gate: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void) {
        lock.withLock { self.gate = gate }
    }

    /// Runs a completion now, or through the delivery gate.
    func deliver(_ completion: @escaping @Sendable () -> Void) {
        if let gate = lock.withLock({ gate }) { gate(completion) } else { completion() }
    }

    #if canImport(FoundationNetworking)
    /// A task was created (`ticket` names it until its completion).
    func issued(_ task: URLSessionTask, ticket: Ticket) {
        lock.withLock {
            nextTicket += 1
            ticket.number = nextTicket
            tasks[nextTicket] = WeakTask(task: task)
        }
        onChange()
    }

    /// The completion of the task `ticket` names returned.
    func completed(_ ticket: Ticket) {
        lock.withLock { tasks[ticket.number] = nil }
        onChange()
    }

    /// Requests created whose completion handler has not returned yet, but for tasks never
    /// resumed (still `suspended`, or gone): an SDK may create a task and drop it when its caller
    /// was cancelled meanwhile, and such a task counted forever, so quiescence never came again
    /// in process (a thirty-seventh outside tester, F5: a cancelled trackBatch's unsent second
    /// chunk failed every later held step of the scenario). The states are read outside the lock
    /// (a task's state is the loading system's, which may be delivering into `completed`).
    var outstanding: Int {
        let live = lock.withLock { tasks.values.map(\.task) }
        return live.filter { task in task.map { $0.state != .suspended } ?? false }.count
    }
    #else
    private var created = 0
    private var finished = 0

    func issued() { lock.withLock { created += 1 }; onChange() }
    func completed() { lock.withLock { finished += 1 }; onChange() }

    /// Requests created whose completion handler has not returned yet.
    var outstanding: Int { lock.withLock { created - finished } }
    #endif
}
