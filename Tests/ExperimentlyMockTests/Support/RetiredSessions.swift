import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Keeps the tests' real-TCP `URLSession`s alive instead of invalidating them.
///
/// On Linux, FoundationNetworking's session teardown (`invalidateAndCancel`,
/// `finishTasksAndInvalidate`) races its libcurl socket `DispatchSource`s: a known crash family
/// (swift-corelibs-foundation #4791, #5469) that took a whole test process down with SIGSEGV once
/// under load. A test hands its session here when it is done; the handful kept per run cost a few
/// idle descriptors. Guarded by `lock`.
enum RetiredSessions {
    nonisolated(unsafe) private static var kept: [URLSession] = []
    private static let lock = NSLock()

    /// Cancels the session's remaining tasks and keeps the session (never invalidated).
    static func keep(_ session: URLSession) {
        session.getAllTasks { tasks in tasks.forEach { $0.cancel() } }
        lock.lock(); kept.append(session); lock.unlock()
    }
}
