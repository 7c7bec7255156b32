#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Every process group this process started and has not reaped yet (worker processes, driver
/// adapters, vectors programs), so that an interrupted command kills them all (issue 10: a command
/// stopped by SIGINT/SIGTERM leaves nothing running).
///
/// `VectorsSubprocess.spawn` starts each child in a group of its own and registers it while it
/// holds the lock, so a spawn and `killAll()` never cross: a child is either registered before
/// `killAll()` (and killed) or never started (the spawn throws). Whoever reaps a child calls
/// `reaped(_:)`, so a group id is never killed after the kernel could reuse it. Once `killAll()`
/// ran the registry stays interrupted: nothing more is started, and `isInterrupted` tells the
/// code that sees its children die that it is not a crash (the command is exiting).
///
/// State lives behind an `NSLock`.
enum ChildProcessGroups {
    private static let lock = NSLock()
    // nonisolated(unsafe): only touched inside `lock`.
    nonisolated(unsafe) private static var groups: Set<pid_t> = []
    nonisolated(unsafe) private static var interrupted = false

    /// Thrown by `spawning` once `killAll()` ran.
    struct Interrupted: Error, CustomStringConvertible {
        var description: String { "the command was interrupted: no process is started any more" }
    }

    /// Runs `start` (which starts one process in a group of its own and returns its pid, the
    /// group id) under the lock and registers the group.
    ///
    /// - Throws: `Interrupted` once `killAll()` ran (then `start` is not called), or what `start` throws.
    static func spawning(_ start: () throws -> pid_t) throws -> pid_t {
        try lock.withLock {
            guard !interrupted else { throw Interrupted() }
            let pid = try start()
            groups.insert(pid)
            return pid
        }
    }

    /// The child `pid` was reaped (`waitpid`): its group is no longer killed by `killAll()`.
    static func reaped(_ pid: pid_t) {
        _ = lock.withLock { groups.remove(pid) }
    }

    /// Kills every registered process group with SIGKILL and refuses every later spawn; returns
    /// how many groups were signalled.
    @discardableResult
    static func killAll() -> Int {
        lock.withLock {
            interrupted = true
            for group in groups { kill(-group, SIGKILL) }
            return groups.count
        }
    }

    /// Whether `killAll()` ran: children dying from now on were killed by it, not crashed.
    static var isInterrupted: Bool { lock.withLock { interrupted } }

    /// Never returns once `killAll()` ran (the interrupt handler is writing the verdict and will
    /// exit the process): code that would report the killed children as crashes waits here instead.
    static func parkIfInterrupted() async {
        while isInterrupted { try? await Task.sleep(nanoseconds: 1_000_000_000) }
    }

    /// The blocking form of `parkIfInterrupted()`, for threads outside Swift concurrency.
    static func parkThreadIfInterrupted() {
        while isInterrupted { sleep(1) }
    }
}
