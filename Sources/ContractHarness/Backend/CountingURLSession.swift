import Foundation
import ExperimentlyMock
#if canImport(FoundationNetworking)
import FoundationNetworking

/// A `URLSession` that counts the data tasks an SDK creates and the completion handlers that have
/// returned, so the runner knows exactly how many requests are between the SDK and the mock (in
/// transit, parked, or on their way back): the basis of quiescence.
///
/// Linux only: swift-corelibs-foundation's `URLSession` is open for subclassing; on Apple
/// platforms the runner falls back to the mock's parked requests alone (`Documentation/ScenarioFormat.md`).
final class CountingURLSession: URLSession, @unchecked Sendable {
    // @unchecked Sendable: the only added state is `counter`, itself Sendable.
    let counter: TaskCounter

    init(configuration: URLSessionConfiguration, counter: TaskCounter) {
        self.counter = counter
        super.init(configuration: configuration, delegate: nil, delegateQueue: nil)
    }

    override func dataTask(with request: URLRequest,
                           completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void) -> URLSessionDataTask {
        counter.issued()
        let counter = self.counter
        // The completion keeps the session alive until the task delivered: FoundationNetworking
        // dereferences its session while delivering, and the runner never invalidates it.
        return super.dataTask(with: request) { [self] data, response, error in
            completionHandler(data, response, error)
            counter.completed()
            withExtendedLifetime(self) {}
        }
    }
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

    init(onChange: @escaping @Sendable () -> Void) { self.onChange = onChange }

    func issued() { lock.withLock { created += 1 }; onChange() }
    func completed() { lock.withLock { finished += 1 }; onChange() }

    /// Requests created whose completion handler has not returned yet.
    var outstanding: Int { lock.withLock { created - finished } }
}
