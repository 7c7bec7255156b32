import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The in-process runner's URLSessions, shared by every scenario of the process, and the request
/// counters of the scenarios running now, by their mock backend's host.
///
/// On Linux every `URLSession` holds a libcurl multi handle and its socket pair (two descriptors)
/// for as long as it lives, and the runner never invalidates a session (FoundationNetworking's
/// teardown races its socket dispatch sources, swift-corelibs-foundation #4791 and #5469; a task
/// created on an invalidated session is a `fatalError`). A session per client per scenario made
/// descriptors grow with every scenario (about 1,500 in one `swift test`, where Foundation's own
/// `Process.run()` started to over-read /proc/self/fd). So sessions are pipes with no scenario in
/// them: a scenario takes one per client from this pool and gives them back when it ends, and
/// each request is counted by the scenario its URL names (every backend answers at its own host,
/// `backend-N.mock.invalid`, `MockRouting` in ExperimentlyMock, and hosts are never reused). A
/// client of a finished scenario that still sends through a session another scenario took
/// reaches its own backend (shut down: 503) and is counted nowhere: its host is unregistered.
///
/// State: `state` (a `HarnessLocked`) holds the idle sessions and the counters by host.
enum InProcessSessions {
    private struct State {
        #if canImport(FoundationNetworking)
        /// Sessions no running scenario holds, most recently given back last (taken first).
        var idle: [CountingURLSession] = []
        /// Every session the pool ever made (idle or taken).
        var made = 0
        #endif
        /// The counter of each running scenario by its backend's host (lower case).
        var counters: [String: TaskCounter] = [:]
    }
    private static let state = HarnessLocked(State())

    /// Registers `counter` for requests to `host` (a mock backend's host) until ``unregister(host:)``.
    static func register(_ counter: TaskCounter, host: String) {
        state.withLock { $0.counters[host.lowercased()] = counter }
    }

    /// Stops counting requests to `host`: later ones (a finished scenario's late requests) are counted nowhere.
    static func unregister(host: String) {
        _ = state.withLock { $0.counters.removeValue(forKey: host.lowercased()) }
    }

    /// The counter of the running scenario whose backend answers at `host`, or `nil`.
    static func counter(host: String?) -> TaskCounter? {
        guard let host else { return nil }
        let key = host.lowercased()
        return state.withLock { $0.counters[key] }
    }

    /// How many scenarios' counters are registered now (tests).
    static var registeredCount: Int { state.withLock { $0.counters.count } }

    #if canImport(FoundationNetworking)
    /// An idle session (the one given back last), or a new one when none is idle.
    static func take() -> CountingURLSession {
        if let session = state.withLock({ $0.idle.popLast() }) { return session }
        // Built outside the lock: a session's init starts a libcurl multi handle.
        let configuration = MockBackendPort.configurationTemplate.copy() as! URLSessionConfiguration
        let session = CountingURLSession(configuration: configuration, counter: nil)
        state.withLock { $0.made += 1 }
        return session
    }

    /// Makes `sessions` idle again (taken first by the next scenario). They are never invalidated.
    static func giveBack(_ sessions: [CountingURLSession]) {
        guard !sessions.isEmpty else { return }
        state.withLock { s in
            for session in sessions where !s.idle.contains(where: { $0 === session }) { s.idle.append(session) }
        }
    }

    /// Sessions made so far and how many of them are idle now (tests and diagnostics).
    static var counts: (made: Int, idle: Int) { state.withLock { ($0.made, $0.idle.count) } }
    #endif
}
