#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Runs scenario jobs in worker processes (`contract-harness __worker`, the same binary
/// re-executed) so that a crash of the SDK under test (a `fatalError`, a signal, an exit) or a
/// hang past a hard deadline costs only the scenario that caused it (issue 10 section 1).
///
/// `slots` workers run at once, each given up to `perWorker` jobs at a time (the wire is
/// `WorkerProtocol`). When a worker dies with one job in flight, that job's outcome is
/// `.crashed`; a worker whose scenario may have left SDK work running asks to be replaced (`WorkerResult.retire`),
/// so SDK work left running by a timed-out step never reaches the next scenario (it gets no new
/// job, and finishes the ones it has on a thread of its own while its slot goes on with a fresh
/// worker); with several in
/// flight, they are run again one at a time in fresh workers, so the
/// one that crashes alone is the one reported. A job past its deadline gets the worker's whole
/// process group killed (SIGKILL) and is reported `.crashed` with the deadline; the other jobs it
/// shared the worker with run again. Outcomes are returned by job position, so what is reported
/// does not depend on which worker finished first. Each worker runs in its own process group
/// (`posix_spawn` with `POSIX_SPAWN_SETPGROUP`, as `VectorsSubprocess`).
///
/// Mutable state lives behind `lock` (an `NSLock`).
final class WorkerPool: @unchecked Sendable {
    // @unchecked Sendable: `queue`, `suspects`, `limit`, `outcomes`, `groups`, `running` and
    // `interrupted` are only touched inside `lock`; the rest is `let`.

    /// What became of one job.
    enum Outcome: Sendable {
        /// The worker reported a result.
        case result(ScenarioResult)
        /// The worker died or passed the deadline while it ran the job; wall time, milliseconds.
        case crashed(CrashReport, Double)
        /// Never dispatched (`stop(after:)`).
        case notRun
    }

    let executable: String
    let slots: Int
    let perWorker: Int
    private let jobs: [WorkerJob]
    private let deadlines: [Int]
    private let onOutcome: @Sendable (Int, Outcome) -> Void
    private let lock = NSLock()
    private var queue: [Int]
    private var suspects: [Int] = []
    private var limit = Int.max
    /// Asked (inside `lock`) before each job is dispatched: `true` leaves it `.notRun`.
    private var skip: (@Sendable (Int) -> Bool)?
    private var outcomes: [Outcome?]
    private var groups: Set<pid_t> = []
    private var running = 0
    /// Retiring workers still finishing their jobs on threads of their own (`drain`): while any
    /// is, no slot ends, as a job of theirs may yet be run again.
    private var drainers = 0
    private var interrupted = false

    /// The executable to start workers from: this process's own binary when it is the
    /// `contract-harness` command (the only one with a worker mode), else `nil` (run in-process).
    /// `CONTRACT_HARNESS_WORKER` names another binary.
    static var selfExecutable: String? {
        if let path = ProcessInfo.processInfo.environment["CONTRACT_HARNESS_WORKER"], !path.isEmpty { return path }
        let argv0 = CommandLine.arguments.first ?? ""
        guard (argv0 as NSString).lastPathComponent == "contract-harness" else { return nil }
        #if os(Linux)
        if let resolved = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return resolved }
        #endif
        return URL(fileURLWithPath: argv0).standardizedFileURL.path
    }

    /// Creates a pool for `jobs` (their `id`s must be their positions), each with its hard
    /// deadline in milliseconds; `onOutcome` is called (from a pool thread) as each job ends.
    init(executable: String, jobs: [WorkerJob], deadlines: [Int], slots: Int, perWorker: Int = 1,
         onOutcome: @escaping @Sendable (Int, Outcome) -> Void = { _, _ in }) {
        precondition(jobs.enumerated().allSatisfy { $0.offset == $0.element.id } && deadlines.count == jobs.count)
        self.executable = executable
        self.jobs = jobs
        self.deadlines = deadlines
        self.slots = max(1, min(slots, max(1, jobs.count)))
        self.perWorker = max(1, perWorker)
        self.onOutcome = onOutcome
        queue = Array(jobs.indices)
        outcomes = Array(repeating: nil, count: jobs.count)
    }

    /// No job after `id` is dispatched from now on (`--fail-fast`); those not yet dispatched end `.notRun`.
    func stop(after id: Int) {
        lock.withLock { limit = min(limit, id) }
    }

    /// From now on each job is dispatched only when `predicate(id)` is `false`; the others end
    /// `.notRun` (the mutant matrix stops a variant at its first catch). `predicate` is called
    /// with the pool's lock held: it must not call back into the pool.
    func skipping(_ predicate: @escaping @Sendable (Int) -> Bool) {
        lock.withLock { skip = predicate }
    }

    /// Kills every worker's process group (the run was interrupted); outcomes after that are not
    /// reported (the workers did not crash).
    func killAll() {
        for group in lock.withLock({ () -> Set<pid_t> in interrupted = true; return groups }) { kill(-group, SIGKILL) }
    }

    /// Whether `killAll()` was called.
    var isInterrupted: Bool { lock.withLock { interrupted } || ChildProcessGroups.isInterrupted }

    /// Runs every job; returns the outcomes by job position.
    func run() async -> [Outcome] {
        signal(SIGPIPE, SIG_IGN)
        if jobs.isEmpty { return [] }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            lock.withLock { running = slots }
            for _ in 0..<slots {
                let thread = Thread { [self] in
                    slotLoop()
                    let last = lock.withLock { running -= 1; return running == 0 }
                    if last { continuation.resume() }
                }
                thread.stackSize = 1 << 20
                thread.start()
            }
        }
        // Interrupted: the command's handler writes the verdict and exits; the killed workers'
        // outcomes must not flow on as crashes.
        await ChildProcessGroups.parkIfInterrupted()
        return lock.withLock { outcomes.map { $0 ?? .notRun } }
    }

    // MARK: One slot

    private enum Take { case job(Int, alone: Bool), wait, done }

    private func take(inFlight: Int) -> Take {
        lock.withLock {
            if let i = suspects.first {
                guard inFlight == 0 else { return .wait }
                suspects.removeFirst()
                return .job(i, alone: true)
            }
            while let i = queue.first {
                queue.removeFirst()
                if i > limit || skip?(i) == true { outcomes[i] = .notRun; continue }
                return .job(i, alone: false)
            }
            return inFlight == 0 && suspects.isEmpty && drainers == 0 ? .done : .wait
        }
    }

    private func finish(_ id: Int, _ outcome: Outcome) {
        // After an interrupt (this pool's `killAll()` or the command's, `ChildProcessGroups`) the
        // workers were killed, not crashed: nothing more is reported.
        let report = lock.withLock { () -> Bool in outcomes[id] = outcome; return !interrupted } && !ChildProcessGroups.isInterrupted
        if report { onOutcome(id, outcome) }
    }

    private func slotLoop() {
        var worker: WorkerProcess?
        var inFlight: [Int: UInt64] = [:]   // job id -> dispatch time (uptime nanoseconds)
        var alone = false
        var draining = false   // the worker asked to be replaced: no more jobs for it
        func retire(_ w: WorkerProcess) {
            lock.withLock { _ = groups.remove(w.pid) }
            w.close()
        }
        while true {
            // Fill the worker up to `perWorker` jobs (a suspect runs alone).
            while inFlight.count < perWorker && !alone && !draining {
                switch take(inFlight: inFlight.count) {
                case .done:
                    if let w = worker { retire(w) }
                    return
                case .wait:
                    break
                case .job(let id, let isAlone):
                    if worker == nil {
                        do {
                            let w = try WorkerProcess(executable: executable)
                            lock.withLock { _ = groups.insert(w.pid) }
                            worker = w
                        } catch {
                            finish(id, .crashed(CrashReport(stderrTail: [], problem: "cannot start a worker: \(error)"), 0))
                            continue
                        }
                    }
                    worker!.send(WorkerProtocol.jobLine(WorkerProtocol.slimmed(jobs[id], previous: worker!.lastScenario)))
                    worker!.lastScenario = jobs[id].scenario
                    inFlight[id] = DispatchTime.now().uptimeNanoseconds
                    alone = isAlone
                    continue
                }
                break
            }
            guard let w = worker, !inFlight.isEmpty else {
                // Nothing dispatched and nothing to do yet (suspects wait for other slots' jobs).
                usleep(2000)
                continue
            }
            switch wait(on: w, &inFlight) {
            case .idle:
                continue
            case .over:
                retire(w)
                worker = nil
                alone = false
                draining = false
            case .result(let r):
                if r.retire == true { draining = true }
                if inFlight.isEmpty {
                    alone = false
                    if draining {
                        retire(w)
                        worker = nil
                        draining = false
                    }
                } else if draining && !alone {
                    // The worker gets no new job; it finishes the ones it has on a thread of
                    // its own while this slot goes on with a fresh worker (a job that waits
                    // out a step limit held the slot idle: the mutant matrix's stall).
                    let left = inFlight
                    lock.withLock { drainers += 1 }
                    let thread = Thread { [self] in drain(w, left) }
                    thread.stackSize = 1 << 20
                    thread.start()
                    worker = nil
                    inFlight.removeAll()
                    draining = false
                }
            }
        }
    }

    /// What ``wait(on:_:)`` saw.
    private enum Waited {
        /// Nothing within a second (or a line that is no result).
        case idle
        /// A job's result, already taken out of the jobs in flight and reported.
        case result(WorkerResult)
        /// The worker is gone (killed past a deadline, dead, or speaking nonsense); every job it
        /// had is accounted for and none is in flight.
        case over
    }

    /// Waits up to a second for the worker `w`, whose jobs in flight are `inFlight` (id ->
    /// dispatch time, uptime nanoseconds): a result is reported and taken out; past a job's hard
    /// deadline the worker's process group is killed, that job is `.crashed` and the others are
    /// queued again first; a worker that dies or writes nonsense (as good as dead) leaves its
    /// jobs to `handleDeath`.
    private func wait(on w: WorkerProcess, _ inFlight: inout [Int: UInt64]) -> Waited {
        let now = DispatchTime.now().uptimeNanoseconds
        let (late, due) = inFlight.map { id, start in (id, start + UInt64(deadlines[id]) * 1_000_000) }.min { $0.1 < $1.1 }!
        if now >= due {
            w.killGroup()
            finish(late, .crashed(CrashReport(signal: SIGKILL, deadlineMilliseconds: deadlines[late], stderrTail: w.stderrTail),
                                  Double(now - inFlight[late]!) / 1e6))
            inFlight[late] = nil
            lock.withLock { queue.insert(contentsOf: inFlight.keys.sorted(), at: 0) }
            inFlight.removeAll()
            return .over
        }
        switch w.next(timeoutMilliseconds: Int32(min((due - now) / 1_000_000 + 1, 1000))) {
        case .idle:
            return .idle
        case .line(let data):
            do {
                guard let r = try Self.result(from: data), inFlight.removeValue(forKey: r.id) != nil else { return .idle }
                finish(r.id, .result(r.result))
                return .result(r)
            } catch {
                w.killGroup()
                let report = w.reap()
                handleDeath(CrashReport(signal: report.signal, exitStatus: report.exitStatus, stderrTail: w.stderrTail,
                                        problem: "\(error)"), inFlight: &inFlight)
                return .over
            }
        case .ended:
            let report = w.reap()
            handleDeath(CrashReport(signal: report.signal, exitStatus: report.exitStatus, stderrTail: w.stderrTail), inFlight: &inFlight)
            return .over
        }
    }

    /// The result a worker's output line reports; `nil` for a line that is no result record.
    ///
    /// - Throws: `WorkerProtocol.BadRecord` (or a decoding error) when the line is malformed.
    private static func result(from data: Data) throws -> WorkerResult? {
        // The common case in one decode; anything else is examined for its error.
        if let passed = WorkerProtocol.passedResult(from: data) { return WorkerResult(id: passed.id, result: passed.result, retire: nil) }
        if let decoded = WorkerProtocol.record(WorkerResult.self, kind: "result", from: data) { return decoded }
        guard try WorkerProtocol.kind(of: data) == "result" else { return nil }
        return try WorkerProtocol.payload(WorkerResult.self, from: data)
    }

    /// Waits for the jobs `jobsLeft` (id -> dispatch time) of the retiring worker `w`, which gets
    /// no new one, reporting each as the slot would (a result; past its deadline the worker's
    /// group is killed, that job `.crashed` and the others queued again; a death makes them
    /// suspects), then retires it. Runs on a thread of its own, counted in `drainers`.
    private func drain(_ w: WorkerProcess, _ jobsLeft: [Int: UInt64]) {
        var inFlight = jobsLeft
        defer {
            lock.withLock { _ = groups.remove(w.pid) }
            w.close()
            lock.withLock { drainers -= 1 }
        }
        while !inFlight.isEmpty {
            if case .over = wait(on: w, &inFlight) { return }
        }
    }

    private func handleDeath(_ report: CrashReport, inFlight: inout [Int: UInt64]) {
        if inFlight.count == 1, let (id, start) = inFlight.first {
            finish(id, .crashed(report, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6))
        } else {
            lock.withLock { suspects.append(contentsOf: inFlight.keys.sorted()) }
        }
        inFlight.removeAll()
    }
}

/// One worker process: its pipes, its process group, and the tail of its standard error.
final class WorkerProcess: @unchecked Sendable {
    // @unchecked Sendable: used by one thread at a time (a pool slot's, then a drainer's).
    let pid: pid_t
    private var stdinFD: Int32
    private var stdoutFD: Int32
    private var stderrFD: Int32
    private var pending = LineBuffer()
    private var errBuffer = Data()
    private var reaped: (signal: Int32?, exitStatus: Int32?)?
    /// The scenario text of the last job sent (`WorkerProtocol.slimmed`).
    var lastScenario: String?

    struct SpawnError: Error, CustomStringConvertible { let description: String }

    /// Starts `executable __worker` in its own process group.
    ///
    /// - Throws: `SpawnError` when pipes or the process cannot be created.
    init(executable: String) throws {
        // Swift's backtracer takes about 0.4 s per crash and fills the stderr tail with frames:
        // off in workers unless asked for, so the tail ends with the fatal error's own line.
        var variables = ProcessInfo.processInfo.environment
        if variables["SWIFT_BACKTRACE"] == nil { variables["SWIFT_BACKTRACE"] = "enable=no" }
        let child: VectorsSubprocess.Spawned
        do {
            child = try VectorsSubprocess.spawn(program: executable, arguments: [executable, "__worker"], environment: variables)
        } catch {
            throw SpawnError(description: "\(error)")
        }
        self.pid = child.pid
        stdinFD = child.stdin
        stdoutFD = child.stdout
        stderrFD = child.stderr
        for fd in [stdoutFD, stderrFD] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
    }

    /// Writes a record (a dead worker's EPIPE is noticed when its output ends).
    func send(_ data: Data) {
        guard stdinFD >= 0 else { return }
        data.withUnsafeBytes { raw in
            var written = 0
            while written < raw.count {
                let n = write(stdinFD, raw.baseAddress! + written, raw.count - written)
                if n > 0 { written += n } else if n < 0 && errno == EINTR { continue } else { return }
            }
        }
    }

    enum Event { case line(Data), idle, ended }

    /// The next line of standard output, reading standard error meanwhile; `.idle` after
    /// `timeoutMilliseconds` without a line, `.ended` when standard output closed (the worker died
    /// or exited).
    func next(timeoutMilliseconds: Int32) -> Event {
        if let line = takeLine() { return .line(line) }
        guard stdoutFD >= 0 else { return .ended }
        var fds = [pollfd(fd: stdoutFD, events: Int16(POLLIN), revents: 0)]
        if stderrFD >= 0 { fds.append(pollfd(fd: stderrFD, events: Int16(POLLIN), revents: 0)) }
        let ready = poll(&fds, nfds_t(fds.count), timeoutMilliseconds)
        if ready <= 0 { return .idle }
        var buffer = [UInt8](repeating: 0, count: 65536)
        if fds.count > 1, fds[1].revents != 0 { drainStderr(&buffer) }
        if fds[0].revents != 0 {
            let n = read(stdoutFD, &buffer, buffer.count)
            if n > 0 {
                pending.append(buffer[0..<n])
            } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                // Output ended: collect what is left of standard error, then report the end.
                closeFD(stdoutFD); stdoutFD = -1
                if let line = takeLine() { return .line(line) }
                return .ended
            }
        }
        if let line = takeLine() { return .line(line) }
        return .idle
    }

    private func takeLine() -> Data? {
        pending.nextLine()
    }

    private func drainStderr(_ buffer: inout [UInt8]) {
        guard stderrFD >= 0 else { return }
        while true {
            let n = read(stderrFD, &buffer, buffer.count)
            if n > 0 {
                errBuffer.append(contentsOf: buffer[0..<n])
                if errBuffer.count > 16384 { errBuffer.removeFirst(errBuffer.count - 16384) }
            } else {
                if n == 0 || (errno != EAGAIN && errno != EINTR) { closeFD(stderrFD); stderrFD = -1 }
                return
            }
        }
    }

    /// The last lines of the worker's standard error (at most 20), led by the runtime's
    /// `Fatal error: ...` line when the stack dump after it pushed it out of the tail.
    var stderrTail: [String] {
        var buffer = [UInt8](repeating: 0, count: 65536)
        drainStderr(&buffer)
        let lines = String(decoding: errBuffer, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        guard lines.count > 20 else { return lines }
        if let fatal = lines.dropLast(20).last(where: { $0.range(of: "fatal error", options: .caseInsensitive) != nil }) {
            return [fatal, "..."] + lines.suffix(18)
        }
        return Array(lines.suffix(20))
    }

    /// Kills the worker's process group.
    func killGroup() { kill(-pid, SIGKILL) }

    /// Waits for the worker to end (killing its group if it has not within 2 s) and says how.
    func reap() -> (signal: Int32?, exitStatus: Int32?) {
        if let reaped { return reaped }
        var status: Int32 = 0
        let deadline = DispatchTime.now().uptimeNanoseconds + 2_000_000_000
        while true {
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid { break }
            if r < 0 && errno != EINTR { reaped = (nil, nil); ChildProcessGroups.reaped(pid); return reaped! }
            if DispatchTime.now().uptimeNanoseconds > deadline { kill(-pid, SIGKILL) }
            usleep(1000)
        }
        let signal = status & 0x7f
        reaped = signal == 0 ? (nil, (status >> 8) & 0xff) : (signal, nil)
        // Anything else the group started goes with it.
        kill(-pid, SIGKILL)
        ChildProcessGroups.reaped(pid)
        return reaped!
    }

    /// Closes standard input (the worker exits when it sees the end), reaps it and closes the pipes.
    func close() {
        if stdinFD >= 0 { closeFD(stdinFD); stdinFD = -1 }
        _ = reap()
        var buffer = [UInt8](repeating: 0, count: 65536)
        drainStderr(&buffer)
        for fd in [stdoutFD, stderrFD] where fd >= 0 { closeFD(fd) }
        stdoutFD = -1; stderrFD = -1
    }
}

/// `close(2)`, reachable from types that have their own `close()`.
private func closeFD(_ fd: Int32) {
    _ = close(fd)
}
