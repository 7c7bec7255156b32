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
        counter.issued()
        // The completion keeps the session alive until the task delivered: FoundationNetworking
        // dereferences its session while delivering, and the runner never invalidates it.
        return super.dataTask(with: request) { [self] data, response, error in
            let answer = Answer(data: data, response: response, error: error)
            counter.deliver {
                completionHandler(answer.data, answer.response, answer.error)
                counter.completed()
            }
            withExtendedLifetime(self) {}
        }
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
    // @unchecked Sendable: `created` and `finished` are guarded by `lock`.
    private let lock = NSLock()
    private var created = 0
    private var finished = 0
    let onChange: @Sendable () -> Void
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

    func issued() { lock.withLock { created += 1 }; onChange() }
    func completed() { lock.withLock { finished += 1 }; onChange() }

    /// Requests created whose completion handler has not returned yet.
    var outstanding: Int { lock.withLock { created - finished } }
}
