import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The toolchain's floor under one explored schedule: a fresh `URLSession` and a few requests
/// answered at once by a bare echo `URLProtocol`, with no SDK, mock, runner or checks.
///
/// Each schedule of `Benchmarks/explore-three-holds-and-logout.json` sends 4 requests through a
/// session its client takes from the runner's pool (`InProcessSessions`); this measures what a
/// session and those requests cost alone (`0` requests: the session's own share), so the
/// explorer's CPU time per schedule can be read against what the transport takes anyway (issue 15
/// section 3). Prints CPU time per session (user + system, microseconds, from
/// `getrusage`) and sessions per second of wall time.
enum SessionFloorBench {
    /// CPU time this process has used, seconds (user + system).
    static func cpuSeconds() -> Double {
        var usage = rusage()
        #if os(Linux)
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// `session-floor [SESSIONS [REQUESTS [CONCURRENCY]]]`: defaults 720 sessions of 4 requests,
    /// 16 sessions at once (the explorer's default `--jobs`).
    static func run(arguments: [String]) async {
        let numbers = arguments.compactMap { Int($0) }
        let sessions = max(1, numbers.first ?? 720)
        let requests = max(0, numbers.dropFirst().first ?? 4)
        let concurrency = max(1, numbers.dropFirst(2).first ?? 16)
        let startedCPU = cpuSeconds()
        let started = DispatchTime.now().uptimeNanoseconds
        await withTaskGroup(of: Void.self) { group in
            var next = 0
            func launch() {
                guard next < sessions else { return }
                next += 1
                group.addTask {
                    let configuration = URLSessionConfiguration.ephemeral
                    configuration.protocolClasses = [MockInProcessBench.EchoURLProtocol.self]
                    configuration.urlCache = nil
                    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
                    let session = URLSession(configuration: configuration)
                    for i in 0..<requests {
                        _ = try? await session.data(from: URL(string: "http://echo.invalid/api/v1/feature-flags/evaluate/f\(i)?user_id=u")!)
                    }
                    session.finishTasksAndInvalidate()
                }
            }
            for _ in 0..<concurrency { launch() }
            while await group.next() != nil { launch() }
        }
        let wall = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let cpu = cpuSeconds() - startedCPU
        print(String(format: "session-floor: %d sessions x %d echo requests (%d at once): %.0f us CPU per session, %.0f sessions/s (wall %.2f s, CPU %.2f s)",
                     sessions, requests, concurrency, cpu / Double(sessions) * 1e6, Double(sessions) / wall, wall, cpu))
    }
}
