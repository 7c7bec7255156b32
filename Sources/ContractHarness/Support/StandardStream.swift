import Foundation
import ExperimentlyMock
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes to standard output and standard error without ever stopping the process: a closed or
/// broken pipe (`contract-harness run | head -1`, a CI log collector that went away) loses the
/// text, never the run or its verdict. `FileHandle.write(_:)` traps on EPIPE on Linux, and SIGPIPE
/// would end the process; ``ignoreBrokenPipes()`` turns the signal off once for the whole process.
public enum StandardStream {
    /// Ignores SIGPIPE for the process: a write to a closed pipe then fails with EPIPE, which the
    /// writers here drop.
    public static func ignoreBrokenPipes() { signal(SIGPIPE, SIG_IGN) }

    /// Writes `data` to standard output; errors (EPIPE, EBADF) are dropped.
    public static func output(_ data: Data) { write(data, to: 1) }

    /// Writes `data` to standard error; errors are dropped.
    public static func error(_ data: Data) { write(data, to: 2) }

    private static func write(_ data: Data, to fd: Int32) { _ = writeAll(data, to: fd) }

    /// Writes all of `data` to `fd` (retrying on EINTR and short writes): `nil` when everything was
    /// written, else the `errno` of the failed write (0 when a write wrote nothing).
    ///
    /// - Parameter whenBlocked: for a non-blocking `fd`, called when a write would block, with the
    ///   nanoseconds since the last byte went out (`DispatchTime`); it waits for the descriptor and
    ///   returns `true` to try again, `false` to give up (the result is then `EAGAIN`). `nil`: a
    ///   write that would block fails as any other.
    static func writeAll(_ data: Data, to fd: Int32, whenBlocked: ((UInt64) -> Bool)? = nil) -> Int32? {
        data.withUnsafeBytes { raw -> Int32? in
            guard var base = raw.baseAddress else { return nil }
            var left = raw.count
            var lastProgress = DispatchTime.now().uptimeNanoseconds
            while left > 0 {
                #if canImport(Glibc)
                let n = Glibc.write(fd, base, left)
                #else
                let n = Darwin.write(fd, base, left)
                #endif
                if n < 0 && errno == EINTR { continue }
                if n < 0, errno == EAGAIN || errno == EWOULDBLOCK, let whenBlocked {
                    if whenBlocked(DispatchTime.now().uptimeNanoseconds - lastProgress) { continue }
                    return EAGAIN
                }
                if n < 0 { return errno }
                if n == 0 { return 0 }
                base += n
                left -= n
                lastProgress = DispatchTime.now().uptimeNanoseconds
            }
            return nil
        }
    }
}

extension Data {
    /// Writes the data to `path` as an output of the harness (verdict, JUnit, report, schedule):
    /// atomically (a temporary file renamed over it) when `path` is a regular file or does not exist
    /// yet, so a reader never sees half a file; written through otherwise, so `--verdict /dev/null`,
    /// a FIFO or a symlink gets the bytes and is never replaced by a regular file.
    ///
    /// Unless `mayReplaceScenario` (the commands that write scenario files), it never writes over
    /// a scenario file (`isScenarioFile`: `"format": "experimently-scenario/1"` in its head): a
    /// `--verdict` or `--html` naming a scenario by mistake would delete it (a sixth outside
    /// tester lost one that way).
    ///
    /// - Throws: the underlying write error (e.g. ENOSPC on `/dev/full`, EACCES), so the caller can
    ///   exit 70 instead of claiming the output was written; `OutputOverScenarioError` for a
    ///   scenario file.
    func writeOutput(to path: String, mayReplaceScenario: Bool = false) throws {
        if !mayReplaceScenario, Self.isScenarioFile(path) { throw OutputOverScenarioError(path: path) }
        var info = stat()
        // A FIFO (also through a symlink) is opened without blocking: with no reader the open
        // fails at once (ENXIO) instead of waiting forever; then written blocking, to the end.
        if isFIFO(path) {
            try writeToFIFO(self, path)
            return
        }
        if lstat(path, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG {
            try write(to: URL(fileURLWithPath: path), options: [])
        } else {
            try write(to: URL(fileURLWithPath: path), options: .atomic)
        }
    }
}

extension Data {
    /// Whether `path` is a regular file (after symbolic links) that is a scenario file: its
    /// top-level `"format"` is `"experimently-scenario/1"`.
    static func isScenarioFile(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        // A whole file of up to 64 MiB is parsed: its top-level `format` decides, however it is
        // spelled (an eighth outside tester: `"experimently-scenario\/1"`, or after 64 KiB of
        // description, was replaced). One that is no JSON is read by its text, so a scenario
        // being edited is kept too.
        let data = (try? handle.read(upToCount: 64 << 20)) ?? Data()
        if let parsed = try? JSONValue.parse(JSONValue.withoutByteOrderMark(data)).value {
            return parsed["format"] == .string("experimently-scenario/1")
        }
        let text = String(decoding: data, as: UTF8.self)
        return text.range(of: #""format"\s*:\s*"experimently-scenario\\?/1""#, options: .regularExpression) != nil
    }
}

/// An output the harness refused to write because its path holds a scenario file.
struct OutputOverScenarioError: LocalizedError, CustomStringConvertible {
    /// The scenario file's path.
    let path: String
    var description: String { "\(path) is a scenario file: an output never replaces one (name another file)" }
    var errorDescription: String? { description }
}

/// Why an output of the harness could not be written to a FIFO (`Data.writeOutput(to:)`).
struct OutputFIFOError: LocalizedError, CustomStringConvertible {
    /// The FIFO's path.
    let path: String
    /// What went wrong, e.g. `no reader on the FIFO`.
    let reason: String
    var description: String { "\(reason) \(path)" }
    var errorDescription: String? { description }
}

/// Whether `path` names a FIFO, following symlinks: its reader takes one whole output per open,
/// so an in-progress verdict (which only guards against a stale regular file) is not sent there.
func isFIFO(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFIFO
}

/// Writes `data` to the FIFO at `path`: opened with `O_NONBLOCK` (ENXIO, no process has it open
/// for reading, throws ``OutputFIFOError`` "no reader on the FIFO" at once), then switched to
/// blocking and written to the end (a reader that goes away gives EPIPE, thrown).
private func writeToFIFO(_ data: Data, _ path: String) throws {
    let fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else {
        let code = errno
        if code == ENXIO { throw OutputFIFOError(path: path, reason: "no reader on the FIFO") }
        throw OutputFIFOError(path: path, reason: "cannot open the FIFO (\(String(cString: strerror(code))))")
    }
    defer { close(fd) }
    // Written without blocking, waiting for the reader while it takes data: a reader that holds
    // the FIFO open and takes nothing for `fifoStallSeconds` ends the write with an error, never a
    // harness blocked for good (an eighty-seventh outside tester: a verdict past the pipe's 64 KiB
    // to such a reader hung the run, and SIGTERM's own verdict write hung behind it).
    let failed = StandardStream.writeAll(data, to: fd) { idle in
        guard idle <= UInt64(fifoStallSeconds * 1e9) else { return false }
        var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        _ = poll(&ready, 1, 200)
        return true
    }
    if failed == EAGAIN {
        throw OutputFIFOError(path: path, reason: "the FIFO's reader took nothing for \(Int(fifoStallSeconds)) s; gave up writing to")
    }
    if let code = failed {
        throw OutputFIFOError(path: path, reason: "cannot write to the FIFO (\(String(cString: strerror(code == 0 ? EIO : code))))")
    }
}

/// How long a FIFO's reader may take no data before an output to it is given up, seconds.
let fifoStallSeconds: Double = 30
