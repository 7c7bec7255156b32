#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Runs one shell command with bytes on its standard input, collecting standard output and error
/// under a deadline; used by `contract-harness vectors --sdk-command`.
///
/// The command runs as `/bin/sh -c CMD` in its own process group (`posix_spawn` with
/// `POSIX_SPAWN_SETPGROUP`), so that on timeout the whole group (the shell and anything it
/// started) is killed with `SIGKILL`; nothing is left running and the caller never hangs. Its
/// environment carries a driver adapter's token and time zone (`AdapterDescendants`), so a
/// process it started in a session of its own is killed when it ends, too (Linux).
/// Standard input is written while the outputs are read (one `poll(2)` loop), so a program that
/// answers before it has read everything cannot deadlock the harness.
enum VectorsSubprocess {
    /// How the program ended.
    enum Termination: Equatable, Sendable {
        /// It exited with this status.
        case exited(Int32)
        /// A signal ended it (e.g. 11 for a segmentation fault).
        case signaled(Int32)
        /// The deadline passed first; the process group was killed.
        case timedOut
        /// It printed more than the output limit; the process group was killed.
        case outputTooLarge
    }

    /// What the program did.
    struct Result: Sendable {
        var termination: Termination
        var stdout: Data
        var stderr: Data
        /// Seconds from spawn to the end.
        var seconds: Double
    }

    /// Spawning failed (no `/bin/sh`, no file descriptors): an internal fault, not the SDK's.
    struct SpawnError: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs `command` through `/bin/sh -c`, writes `input` to its standard input and closes it.
    ///
    /// - Parameters:
    ///   - timeout: seconds until the process group is killed.
    ///   - outputLimit: bytes of standard output plus error accepted before the group is killed.
    ///   - onSpawn: called with the program's pid (which is also its process group id) as soon as
    ///     it runs, so that an interrupted caller can kill the group (`kill(-pid, SIGKILL)`).
    /// - Throws: ``SpawnError`` when the pipes or the process cannot be created.
    static func run(_ command: String, input: Data, timeout: Double, outputLimit: Int = 64 << 20,
                    onSpawn: ((pid_t) -> Void)? = nil) throws -> Result {
        let started = DispatchTime.now()
        // Marked as a driver adapter is (`AdapterDescendants`): what the program started outside
        // its process group (`setsid`) is found and killed when it ends, and it runs in the
        // adapters' time zone. Before, a detached helper outlived `vectors` (a sixty-sixth
        // outside tester, F7).
        let token = AdapterDescendants.newToken()
        AdapterDescendants.becomeSubreaper()
        defer { AdapterDescendants.killAndReap(token: token) }
        let child = try spawn(program: "/bin/sh", arguments: ["/bin/sh", "-c", command],
                              environment: AdapterDescendants.environment(token: token))
        let pid = child.pid
        let inPipe = [-1, child.stdin], outPipe = [child.stdout, -1], errPipe = [child.stderr, -1]
        onSpawn?(pid)
        // Writing to a program that closed its standard input must give EPIPE, not kill us.
        signal(SIGPIPE, SIG_IGN)
        for fd in [inPipe[1], outPipe[0], errPipe[0]] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }

        let bytes = [UInt8](input)
        var written = 0
        var stdinFD = inPipe[1]
        if bytes.isEmpty { close(stdinFD); stdinFD = -1 }
        var outFD = outPipe[0], errFD = errPipe[0]
        var out = Data(), err = Data()
        var status: Int32 = 0
        var reaped = false
        var termination: Termination?
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, timeout) * 1e9)
        var buffer = [UInt8](repeating: 0, count: 65536)

        var reapedAt: UInt64 = 0
        while termination == nil {
            if !reaped, waitpid(pid, &status, WNOHANG) == pid {
                reaped = true
                reapedAt = DispatchTime.now().uptimeNanoseconds
                ChildProcessGroups.reaped(pid)
                // What it left running in its group goes with it, so a background helper no
                // longer holds its output open (a thirty-fourth outside tester, F4: a correct
                // program that left `sleep 30 &` behind "did not finish").
                kill(-pid, SIGKILL)
            }
            if reaped && outFD < 0 && errFD < 0 { break }
            // One that left the group (`setsid`) may hold the pipes for ever: the program's
            // output is what arrived within 300 ms of its exit.
            if reaped && DispatchTime.now().uptimeNanoseconds - reapedAt > 300_000_000 { break }
            let now = DispatchTime.now().uptimeNanoseconds
            if now >= deadline { termination = .timedOut; break }
            var fds: [pollfd] = []
            if stdinFD >= 0 { fds.append(pollfd(fd: stdinFD, events: Int16(POLLOUT), revents: 0)) }
            if outFD >= 0 { fds.append(pollfd(fd: outFD, events: Int16(POLLIN), revents: 0)) }
            if errFD >= 0 { fds.append(pollfd(fd: errFD, events: Int16(POLLIN), revents: 0)) }
            // With every pipe closed only the exit is left to notice: look again shortly.
            // At most 50 ms: the exit is looked for between polls (a helper holding the pipes
            // kept a finished program waiting a whole second: a thirty-sixth outside tester, V1).
            let wait = fds.isEmpty ? 5 : Int32(min((deadline - now) / 1_000_000 + 1, 50))
            if fds.isEmpty { usleep(UInt32(wait) * 1000); continue }
            let ready = poll(&fds, nfds_t(fds.count), wait)
            if ready < 0 && errno != EINTR { termination = .timedOut; break }
            for p in fds where p.revents != 0 {
                if p.fd == stdinFD {
                    let n = bytes.withUnsafeBytes { raw in write(stdinFD, raw.baseAddress! + written, min(bytes.count - written, 65536)) }
                    if n > 0 { written += n }
                    if (n < 0 && errno != EAGAIN && errno != EINTR) || written == bytes.count || p.revents & Int16(POLLERR | POLLHUP) != 0 && n <= 0 {
                        close(stdinFD); stdinFD = -1
                    }
                } else {
                    let n = read(p.fd, &buffer, buffer.count)
                    if n > 0 {
                        if p.fd == outFD { out.append(contentsOf: buffer[0..<n]) } else { err.append(contentsOf: buffer[0..<n]) }
                        if out.count + err.count > outputLimit { termination = .outputTooLarge }
                    } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                        close(p.fd)
                        if p.fd == outFD { outFD = -1 } else { errFD = -1 }
                    }
                }
            }
        }
        for fd in [stdinFD, outFD, errFD] where fd >= 0 { close(fd) }
        if termination != nil {
            kill(-pid, SIGKILL)
            if !reaped { while waitpid(pid, &status, 0) < 0 && errno == EINTR {}; ChildProcessGroups.reaped(pid) }
        } else {
            let signal = status & 0x7f
            termination = signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        return Result(termination: termination!, stdout: out, stderr: err, seconds: seconds)
    }

    /// A started child: its process id (also its process group id) and the harness's ends of its
    /// standard input, output and error pipes (close-on-exec, blocking).
    struct Spawned: Sendable {
        let pid: pid_t
        let stdin: Int32
        let stdout: Int32
        let stderr: Int32
    }

    /// Starts `/bin/sh -c command` in a process group of its own, with the default disposition
    /// of SIGPIPE, SIGINT, SIGTERM and SIGHUP and no blocked signals, wired to three new pipes.
    ///
    /// - Throws: ``SpawnError`` when the pipes or the process cannot be created.
    static func spawn(_ command: String) throws -> Spawned {
        try spawn(program: "/bin/sh", arguments: ["/bin/sh", "-c", command])
    }

    /// Starts `program` with `arguments` (`argv`, its own name first) in a process group of its
    /// own, with default signal handling and no blocked signals, its standard input, output and
    /// error on pipes; `environment` replaces this process's environment when given. The worker
    /// pool and the driver adapters start their processes through it.
    ///
    /// - Throws: ``SpawnError`` when the pipes or the process cannot be created.
    static func spawn(program: String, arguments: [String], environment variables: [String: String]? = nil) throws -> Spawned {
        var inPipe: [Int32] = [-1, -1], outPipe: [Int32] = [-1, -1], errPipe: [Int32] = [-1, -1]
        func closeAll() { for fd in inPipe + outPipe + errPipe where fd >= 0 { close(fd) } }
        guard makePipe(&inPipe), makePipe(&outPipe), makePipe(&errPipe) else {
            let e = errno
            closeAll()
            throw SpawnError(description: "cannot create pipes: \(String(cString: strerror(e)))")
        }

        #if canImport(Darwin)
        var actions: posix_spawn_file_actions_t? = nil
        var attributes: posix_spawnattr_t? = nil
        #else
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        posix_spawnattr_init(&attributes)
        defer {
            posix_spawn_file_actions_destroy(&actions)
            posix_spawnattr_destroy(&attributes)
        }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGINT, SIGTERM, SIGHUP] { sigaddset(&defaults, s) }
        var noMask = sigset_t()
        sigemptyset(&noMask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &noMask)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { word in strdup(word) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let given: [UnsafeMutablePointer<CChar>?]? = variables.map { v in v.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for p in given ?? [] { free(p) } }
        #if canImport(Darwin)
        let inherited = _NSGetEnviron()!.pointee
        #else
        let inherited = environ
        #endif
        var spawned: Int32 = 0
        // Registered under ChildProcessGroups' lock: an interrupted command kills it, or never starts it.
        do {
            _ = try ChildProcessGroups.spawning {
                if let given {
                    spawned = given.withUnsafeBufferPointer { env in posix_spawn(&pid, program, &actions, &attributes, argv, UnsafeMutablePointer(mutating: env.baseAddress)) }
                } else {
                    spawned = posix_spawn(&pid, program, &actions, &attributes, argv, inherited)
                }
                guard spawned == 0 else { throw SpawnError(description: "cannot start \(program): \(String(cString: strerror(spawned)))") }
                return pid
            }
        } catch {
            closeAll()
            throw SpawnError(description: "\(error)")
        }
        close(inPipe[0]); inPipe[0] = -1
        close(outPipe[1]); outPipe[1] = -1
        close(errPipe[1]); errPipe[1] = -1
        return Spawned(pid: pid, stdin: inPipe[1], stdout: outPipe[0], stderr: errPipe[0])
    }

    /// A pipe whose both ends close on `exec` (the child gets its copies through `dup2`).
    private static func makePipe(_ fds: inout [Int32]) -> Bool {
        guard pipe(&fds) == 0 else { return false }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return true
    }
}
