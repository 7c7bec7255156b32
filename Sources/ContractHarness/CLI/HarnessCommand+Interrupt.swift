import Foundation
import ExperimentlyMock

extension HarnessCommand {
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

/// The one place SIGINT and SIGTERM are handled for `run`, `explore` and `mutants`: two dispatch
/// signal sources, installed once and never cancelled (measured here: with a second source for the
/// same signal, the handler of the later one never ran), and the handler of the command now
/// running (`HarnessCommand.onInterrupt`).
///
/// On a signal: every process group the command started is killed (`ChildProcessGroups`), the
/// current handler runs (it writes the verdict), and the process exits 130 (SIGINT) or 143
/// (SIGTERM). With no handler registered (the `--sdk-command` adapter starts before the scenarios
/// are read; a command that has finished) the same happens without the handler: nothing started
/// keeps running, and the verdict `run` marked in progress at its start stays. State lives behind
/// an `NSLock`.
enum InterruptSignals {
    private static let lock = NSLock()
    // nonisolated(unsafe): only touched inside `lock`.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []
    nonisolated(unsafe) private static var handlers: [(id: Int, run: @Sendable (Int32) -> Void)] = []
    nonisolated(unsafe) private static var nextID = 0

    /// One handler's place; `cancel()` removes it (the signals stay handled).
    final class Registration: Sendable {
        let id: Int
        init(id: Int) { self.id = id }
        /// Removes the handler.
        func cancel() { InterruptSignals.remove(id) }
    }

    /// Installs the sources (once).
    static func install() {
        lock.withLock {
            guard sources.isEmpty else { return }
            sources = [(SIGINT, Int32(130)), (SIGTERM, Int32(143))].map { sig, status in
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                source.setEventHandler {
                    ChildProcessGroups.killAll()
                    if let handler = lock.withLock({ handlers.last?.run }) {
                        handler(sig)
                    } else {
                        StandardStream.error(Data("contract-harness: interrupted by signal \(sig); the processes it started were killed\n".utf8))
                    }
                    exit(status)
                }
                source.resume()
                return source
            }
        }
    }

    /// Installs the sources if needed and makes `handler` the one that runs on a signal (the
    /// latest registered wins) until its registration is cancelled.
    static func register(_ handler: @escaping @Sendable (Int32) -> Void) -> Registration {
        install()
        return lock.withLock {
            nextID += 1
            handlers.append((nextID, handler))
            return Registration(id: nextID)
        }
    }

    private static func remove(_ id: Int) {
        lock.withLock { handlers.removeAll { $0.id == id } }
    }
}
