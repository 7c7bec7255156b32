import Foundation

/// Runs the built `contract-harness` binary as a user would, for tests through the binary.
enum HarnessProcess {
    /// Runs `contract-harness ARGUMENTS` in `directory`; returns the exit status (a death by
    /// signal N as 128 + N, as a shell reports it) and standard output (standard error discarded),
    /// or with `readingStandardError` standard error (standard output discarded).
    ///
    /// - Throws: when the process cannot be started.
    static func run(_ arguments: [String], in directory: URL, readingStandardError: Bool = false) throws -> (status: Int32, out: String) {
        let p = Process()
        p.executableURL = HarnessCLITests.binary
        p.arguments = arguments
        p.currentDirectoryURL = directory
        let out = Pipe()
        p.standardOutput = readingStandardError ? FileHandle.nullDevice : out
        p.standardError = readingStandardError ? out : FileHandle.nullDevice
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let status = p.terminationReason == .uncaughtSignal ? 128 + p.terminationStatus : p.terminationStatus
        return (status, String(decoding: o, as: UTF8.self))
    }
}

extension HarnessProcess {
    /// A `contract-harness` process started in the background: its output lines are gathered as
    /// they come, so a test can wait for a progress line (a gate, never a sleep) before it acts.
    /// State is behind an `NSLock`.
    final class Started: @unchecked Sendable {
        // @unchecked Sendable: `text` is only touched inside `lock`; the rest is `let`.
        let process = Process()
        private let lock = NSLock()
        private let arrived = NSCondition()
        private var text = ""
        private var ended = 0
        private let exited = DispatchSemaphore(value: 0)

        /// Starts `contract-harness ARGUMENTS` in `directory` (standard output and error both read).
        init(_ arguments: [String], in directory: URL) throws {
            process.executableURL = HarnessCLITests.binary
            process.arguments = arguments
            process.currentDirectoryURL = directory
            for (pipe, set) in [(Pipe(), { (p: Pipe) in self.process.standardOutput = p }), (Pipe(), { (p: Pipe) in self.process.standardError = p })] {
                set(pipe)
                let handle = pipe.fileHandleForReading
                Thread { [self] in
                    while true {
                        let data = handle.availableData
                        arrived.lock()
                        if data.isEmpty { ended += 1 } else { lock.withLock { text += String(decoding: data, as: UTF8.self) } }
                        arrived.broadcast()
                        arrived.unlock()
                        if data.isEmpty { return }
                    }
                }.start()
            }
            process.terminationHandler = { [exited] _ in exited.signal() }
            try process.run()
        }

        /// Everything printed so far (standard output and error interleaved as read).
        var output: String { lock.withLock { text } }

        /// Waits until the output contains `needle` (true) or both outputs ended or `seconds`
        /// passed (false).
        func waitFor(_ needle: String, seconds: Double = 60) -> Bool {
            let deadline = Date(timeIntervalSinceNow: seconds)
            arrived.lock()
            defer { arrived.unlock() }
            while !output.contains(needle) {
                if ended == 2 || !arrived.wait(until: deadline) { return output.contains(needle) }
            }
            return true
        }

        /// The pids of the process's children (from /proc: their parent is this process).
        var children: [Int32] {
            let all = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            return all.compactMap(Int32.init).filter { HarnessProcess.stat($0)?.parent == process.processIdentifier }
        }

        /// Sends `signal` and waits (at most 30 s, then SIGKILL) for the exit; the status as a
        /// shell reports it (-1 when even SIGKILL was not seen to end it within 30 s).
        func stop(_ signal: Int32) -> Int32 {
            kill(process.processIdentifier, signal)
            if exited.wait(timeout: .now() + 30) == .timedOut {
                kill(process.processIdentifier, SIGKILL)
                if exited.wait(timeout: .now() + 30) == .timedOut { return -1 }
            }
            return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        }
    }

    /// A process's state letter, parent and process group from /proc/PID/stat, or nil when gone.
    static func stat(_ pid: Int32) -> (state: Character, parent: Int32, group: Int32)? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.range(of: ") ", options: .backwards) else { return nil }
        let fields = stat[close.upperBound...].split(separator: " ")
        guard fields.count > 2, let state = fields[0].first, let parent = Int32(fields[1]), let group = Int32(fields[2]) else { return nil }
        return (state, parent, group)
    }

    /// Processes still running (not gone, not a zombie) in any of `groups`: looked for up to 10 s,
    /// as SIGKILL is delivered at once but the kernel tears processes down asynchronously.
    static func survivors(inGroups groups: Set<Int32>) -> [Int32] {
        let deadline = Date(timeIntervalSinceNow: 10)
        while true {
            let all = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            let running = all.compactMap(Int32.init).filter { pid in
                guard let s = stat(pid) else { return false }
                return groups.contains(s.group) && s.state != "Z" && s.state != "X"
            }
            if running.isEmpty || Date() > deadline { return running }
            usleep(10_000)
        }
    }
}
