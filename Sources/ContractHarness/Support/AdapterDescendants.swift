#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// What a driver adapter leaves behind outside its process group: a child that called `setsid`
/// (or `setpgid`) escapes `kill(-group, SIGKILL)`, and one that outlives the adapter is re-parented
/// away from it. On Linux each adapter is started with a token in its environment
/// (`EXPERIMENTLY_HARNESS_ADAPTER=<token>`, inherited by everything it starts), this process is
/// made a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphans of its descendants become
/// its children, not init's), and when the adapter is stopped every live process carrying the
/// token is killed with SIGKILL and, once it is this process's child, reaped. A descendant that
/// clears its environment is not found (documented in DriverProtocol.md). Elsewhere: nothing.
///
/// Stateless apart from the one-time `prctl` (guarded by `lock`).
enum AdapterDescendants {
    /// The environment variable that marks an adapter's processes.
    static let variable = "EXPERIMENTLY_HARNESS_ADAPTER"

    private static let lock = NSLock()
    // nonisolated(unsafe): only touched inside `lock`.
    nonisolated(unsafe) private static var subreaper = false

    /// A fresh token for one adapter: this process's id and a random part.
    static func newToken() -> String { "\(getpid())-\(UUID().uuidString.lowercased())" }

    /// The environment to start an adapter with: this process's, plus the token.
    ///
    /// The adapter's local time zone is `adapterTimeZone` (`TZ`), so that an SDK writing a local
    /// time where the contract asks for UTC (an event `timestamp` with a `Z`: CONTRACT.md section 1)
    /// shows it on a machine whose zone is UTC, as CI machines' often is (a sixty-fifth outside
    /// tester: such an SDK passed here and failed only under `TZ=Asia/Tokyo`).
    /// `EXPERIMENTLY_ADAPTER_TZ` in the harness's environment names another zone; set empty, the
    /// adapter keeps the harness's own.
    static func environment(token: String) -> [String: String] {
        var e = ProcessInfo.processInfo.environment
        e[variable] = token
        switch e[timeZoneOverride] {
        case nil: e["TZ"] = adapterTimeZone
        case ""?: break
        case let zone?: e["TZ"] = zone
        }
        return e
    }

    /// The adapter's time zone unless `EXPERIMENTLY_ADAPTER_TZ` says otherwise: UTC+05:45 all year
    /// (no daylight saving time), whose offset is no whole number of hours, so a local time cannot
    /// pass for UTC or for another whole-hour zone.
    static let adapterTimeZone = "Asia/Kathmandu"

    /// The environment variable that overrides `adapterTimeZone`.
    static let timeZoneOverride = "EXPERIMENTLY_ADAPTER_TZ"

    /// Makes this process a child subreaper (Linux, once); returns whether it is one.
    /// `prctl` is variadic in C and not callable from Swift, so it is looked up with `dlsym`.
    @discardableResult
    static func becomeSubreaper() -> Bool {
        #if os(Linux)
        return lock.withLock {
            if subreaper { return true }
            typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
            guard let symbol = dlsym(nil, "prctl") else { return false }
            let prctl = unsafeBitCast(symbol, to: Prctl.self)
            let PR_SET_CHILD_SUBREAPER: Int32 = 36
            subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            return subreaper
        }
        #else
        return false
        #endif
    }

    /// The live processes whose environment holds `token` (Linux; empty elsewhere). A zombie's
    /// environment is empty, so only processes still running are listed.
    static func carrying(_ token: String) -> [pid_t] {
        #if os(Linux)
        let needle = Array("\(variable)=\(token)".utf8)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        let me = getpid()
        return names.compactMap { name -> pid_t? in
            guard let pid = pid_t(name), pid != me,
                  let environ = FileManager.default.contents(atPath: "/proc/\(name)/environ") else { return nil }
            return environ.split(separator: 0, omittingEmptySubsequences: true).contains { $0.elementsEqual(needle) } ? pid : nil
        }
        #else
        return []
        #endif
    }

    /// Kills every process carrying `token` with SIGKILL and reaps those that are (or become,
    /// as orphans of a subreaper) this process's children; waits at most `seconds` for them.
    /// Returns how many processes it killed.
    @discardableResult
    static func killAndReap(token: String, seconds: Double = 2) -> Int {
        #if os(Linux)
        var killed = Set<pid_t>()
        // Again until none is left: a process may start another while the first are killed.
        for _ in 0..<5 {
            let found = carrying(token).filter { !killed.contains($0) }
            if found.isEmpty { break }
            for pid in found { kill(pid, SIGKILL); killed.insert(pid) }
        }
        var waiting = killed
        let deadline = DispatchTime.now() + .milliseconds(Int(seconds * 1000))
        while !waiting.isEmpty {
            for pid in waiting {
                var status: Int32 = 0
                let r = waitpid(pid, &status, WNOHANG)
                if r == pid { waiting.remove(pid); continue }
                // Not (or no longer) this process's child: gone, or re-parented elsewhere (no subreaper).
                if r < 0, !FileManager.default.fileExists(atPath: "/proc/\(pid)") || parent(of: pid) != getpid() && !subreaperSet {
                    waiting.remove(pid)
                }
            }
            if waiting.isEmpty || DispatchTime.now() >= deadline { break }
            usleep(2000)   // cleanup of killed processes, not an ordering device
        }
        return killed.count
        #else
        return 0
        #endif
    }

    private static var subreaperSet: Bool { lock.withLock { subreaper } }

    /// The parent process id of `pid` from `/proc/PID/stat`, or `nil`.
    static func parent(of pid: pid_t) -> pid_t? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/stat"),
              let text = String(data: data, encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        // After "pid (comm)": state, then the parent id.
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? pid_t(fields[1]) : nil
    }
}
