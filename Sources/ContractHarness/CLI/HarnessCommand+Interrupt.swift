import Foundation
import ExperimentlyMock

extension Verdict {
    /// This finished command's verdict as rewritten for a signal taken after it was written,
    /// before the process exited: `"interrupted": true`, `"ok": false` (the exit status is 130
    /// or 143) and an `error` saying the results are complete.
    func interruptedAfterFinishing(_ sig: Int32) -> Verdict {
        var v = self
        v.extra["interrupted"] = .bool(true)
        v.extra["ok"] = .bool(false)
        let note = "interrupted by \(sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "signal \(sig)") as it finished: the results are complete"
        v.extra["error"] = .string(v.extra["error"]?.stringValue.map { $0 + "; " + note } ?? note)
        return v
    }
}

extension HarnessCommand {
    /// Writes `verdict`, a command's final one, to `path` through ``InterruptSignals/finalWrite(_:rewrite:)``:
    /// `nil` when written, else the exit status to return (`internalFault` when it cannot be
    /// written, said on standard error; `failed` when a signal came first and its handler writes).
    static func writeFinal(_ verdict: Verdict, to path: String, secrets: [String]) -> Int32? {
        var failure: Error?
        let wrote = InterruptSignals.finalWrite({
            do { try verdict.write(to: path, redacting: secrets) } catch { failure = error }
        }, rewrite: { sig in
            do {
                try verdict.interruptedAfterFinishing(sig).write(to: path, redacting: secrets)
                say("interrupted as it finished; verdict written to \(path)")
            } catch {
                StandardStream.error(Data("contract-harness: interrupted as it finished; cannot write the verdict to \(path): \(error.localizedDescription)\n".utf8))
            }
        })
        if !wrote { return Exit.failed.rawValue }
        if let failure {
            StandardStream.error(Data("contract-harness: cannot write the verdict \(path): \(failure)\n".utf8))
            return Exit.internalFault.rawValue
        }
        return nil
    }

    /// Writes the verdict of a command stopped by SIGINT or SIGTERM before it finished: no
    /// scenario results, `"interrupted": true`, `"ok": false`, `"error"` saying so, plus `extra`
    /// (what was done so far); keys in `secrets` are redacted. Issue 10: a verdict survives anything.
    static func writeInterrupted(_ message: String, to path: String, driver: any SDKDriver, seed: UInt64,
                                 extra: [String: JSONValue] = [:], secrets: [String] = []) {
        var verdict = Verdict(harnessVersion: version, sdkName: driver.sdkName, sdkVersion: driver.sdkVersion, seed: seed,
                              startedAt: Date(), durationMilliseconds: 0, results: [], invalid: [])
        for (key, value) in extra { verdict.extra[key] = value }
        verdict.extra["interrupted"] = .bool(true)
        verdict.extra["ok"] = .bool(false)
        verdict.extra["error"] = .string(message)
        try? verdict.write(to: path, redacting: secrets)
    }
}

/// The one place SIGINT and SIGTERM are handled for `run`, `explore`, `mutants` and `generate`:
/// plain signal handlers installed synchronously by `install()` (the first thing
/// `HarnessCommand.main` does for those commands, so no signal after that is lost or dies by its raw
/// disposition: a dispatch signal source registers asynchronously and, measured, missed early
/// signals under load) that write the signal number to a self-pipe, one thread that reads it, and
/// the handler of the command now running (`HarnessCommand.onInterrupt`).
///
/// On a signal: in-progress verdict writes stop (`unlessInterrupted`), every process group the
/// command started is killed (`ChildProcessGroups`), the current handler runs (it writes the
/// verdict marked interrupted), and the process exits 130 (SIGINT) or 143 (SIGTERM). With no
/// handler registered (a command that has finished) the same happens without the handler. State
/// lives behind `NSLock`s.
enum InterruptSignals {
    private static let lock = NSLock()
    // nonisolated(unsafe): only touched inside `lock`.
    nonisolated(unsafe) private static var installed = false
    nonisolated(unsafe) private static var handlers: [(id: Int, run: @Sendable (Int32) -> Void)] = []
    nonisolated(unsafe) private static var nextID = 0
    /// Held while an in-progress verdict is written and when a signal is taken, so that the
    /// interrupted verdict is always the last one written.
    private static let writes = NSLock()
    // nonisolated(unsafe): only touched inside `writes`.
    nonisolated(unsafe) private static var fired = false
    /// Set by `finalWrite` once the command's final verdict is written: rewrites it marked
    /// interrupted. Only touched inside `writes`.
    nonisolated(unsafe) private static var rewriteFinal: (@Sendable (Int32) -> Void)?
    /// The command returned and its exit status is decided (`closeForExit`): a signal from now on
    /// changes nothing. Only touched inside `writes`.
    nonisolated(unsafe) private static var exiting = false

    /// One handler's place; `cancel()` removes it (the signals stay handled).
    final class Registration: Sendable {
        let id: Int
        init(id: Int) { self.id = id }
        /// Removes the handler.
        func cancel() { InterruptSignals.remove(id) }
    }

    /// Installs the handlers (once), synchronously: from its return on, SIGINT and SIGTERM are
    /// handled here, also when the process started with them ignored (a background job).
    static func install() {
        lock.withLock {
            guard !installed else { return }
            installed = true
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else { return }
            interruptSignalPipe = fds[1]
            let readFD = fds[0]
            let thread = Thread {
                var byte: UInt8 = 0
                while true {
                    let n = read(readFD, &byte, 1)
                    if n == 1 { take(Int32(byte)) }
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { return }
                }
            }
            thread.name = "contract-harness.interrupt"
            thread.start()
            // SIGHUP too (a closed terminal, a CI runner hanging up): it killed `run` outright and
            // left the verdict `in_progress` (an eighty-seventh outside tester, L11).
            for sig in [SIGINT, SIGTERM, SIGHUP] {
                signal(sig) { received in
                    interruptSignalReceived = received   // async-signal-safe (a plain store)
                    var byte = UInt8(truncatingIfNeeded: received)
                    _ = write(interruptSignalPipe, &byte, 1)   // async-signal-safe
                }
            }
        }
    }

    /// Runs `body` (an in-progress verdict write) unless a signal was taken; a signal arriving
    /// meanwhile is handled after it, so its interrupted verdict replaces what `body` wrote.
    static func unlessInterrupted(_ body: () -> Void) {
        writes.withLock { if !fired { body() } }
    }

    /// Runs `write` (a command's final verdict write, with its JUnit and report files) unless a
    /// signal was taken, and keeps `rewrite` for a signal taken after it, before the process
    /// exits: that signal runs `rewrite` (the same verdict marked interrupted: the exit status is
    /// 130 or 143, and the verdict must say why) instead of the command's handler, which would
    /// write what it saw of an unfinished run. Returns `false` when a signal came first (nothing
    /// written here: the handler writes, and the process exits).
    ///
    /// Before, a signal as a command finished left the plain final verdict beside exit 130/143,
    /// or an interrupted one that the final write then replaced (a fifty-third outside tester, C).
    @discardableResult
    static func finalWrite(_ write: () -> Void, rewrite: @escaping @Sendable (Int32) -> Void) -> Bool {
        writes.withLock {
            guard !fired else { return false }
            write()
            rewriteFinal = rewrite
            return true
        }
    }

    /// Decides the exit: when no signal was received, the command's status stands and a signal
    /// from now on is ignored (returns at once); otherwise waits, at most 30 s, for the interrupt
    /// thread to write the interrupted verdict and exit 130 or 143. Called as the process is about
    /// to exit with the command's status (a signal received while the command ended decides the
    /// exit: a thirty-fourth outside tester, F10, saw it swallowed).
    ///
    /// Before, a signal taken while the process was already exiting rewrote the verdict marked
    /// interrupted and the exit status stayed 0 (a fifty-fourth outside tester, J: 6 of 450 runs).
    static func closeForExit() {
        guard lock.withLock({ installed }) else { return }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let closed = writes.withLock { () -> Bool in
                guard interruptSignalReceived == 0, !fired else { return false }
                exiting = true
                return true
            }
            if closed { return }
            usleep(10_000)
        }
    }

    /// Handles the first signal; a later one finds the process exiting and waits.
    private static func take(_ sig: Int32) {
        // The handler is read with the flag, under `writes`: a command that stops its final
        // write for this signal (`finalWrite`, `unlessInterrupted`) and then cancels its handler
        // as it returns can no longer leave the signal without one (a fifty-third outside tester,
        // B: `vectors` saw its killed adapter end, returned, and no verdict was written).
        let (first, final, handler) = writes.withLock { () -> (Bool, (@Sendable (Int32) -> Void)?, (@Sendable (Int32) -> Void)?) in
            defer { fired = true }
            return (!fired && !exiting, rewriteFinal, lock.withLock { handlers.last?.run })
        }
        guard first else { return }
        ChildProcessGroups.killAll()
        if let final {
            final(sig)
        } else if let handler {
            handler(sig)
        } else {
            StandardStream.error(Data("contract-harness: interrupted by signal \(sig); the processes it started were killed\n".utf8))
        }
        exit(128 + sig)
    }

    /// Installs the handlers if needed and makes `handler` the one that runs on a signal (the
    /// latest registered wins) until its registration is cancelled.
    static func register(_ handler: @escaping @Sendable (Int32) -> Void) -> Registration {
        // The handler first, then the signals: no moment where a signal finds no handler.
        let registration = lock.withLock {
            nextID += 1
            handlers.append((nextID, handler))
            return Registration(id: nextID)
        }
        install()
        return registration
    }

    private static func remove(_ id: Int) {
        lock.withLock { handlers.removeAll { $0.id == id } }
    }
}

/// The write end of `InterruptSignals`' self-pipe (set once by `install()`, read by its signal handlers).
nonisolated(unsafe) private var interruptSignalPipe: Int32 = -1
/// The last signal the handlers received (0: none), stored by the handler itself, so a command
/// ending finds a signal whose byte the interrupt thread has not read yet.
nonisolated(unsafe) private var interruptSignalReceived: Int32 = 0
