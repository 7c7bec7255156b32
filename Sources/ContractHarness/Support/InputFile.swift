import Foundation

/// Reads an input file (a scenario, a verdict) and says plainly why it cannot be read: a
/// directory, a FIFO or device, a symbolic link loop, a missing file, no permission. Foundation's
/// own errors named none of these (a FIFO or `/dev/zero` was "You don't have permission", a
/// symbolic link loop "no such file", a folder "NSCocoaErrorDomain error 256": a sixteenth
/// outside tester).
enum InputFile {
    /// Why `path` cannot be read as a file, or `nil` when it is a regular file (after links).
    static func problem(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            switch errno {
            case ELOOP: return "a symbolic link loop"
            case ENOENT: return "no such file"
            case EACCES: return "no permission to reach it"
            case ENOTDIR: return "a path through something that is not a directory"
            default: return String(cString: strerror(errno))
            }
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return "a directory, not a file"
        case S_IFIFO: return "a FIFO (named pipe), not a regular file"
        case S_IFCHR, S_IFBLK: return "a device, not a regular file"
        case S_IFSOCK: return "a socket, not a regular file"
        default: return "not a regular file"
        }
    }

    /// The bytes of the regular file at `path`.
    ///
    /// - Throws: `ScenarioError` at `$` naming why it cannot be read (see `problem(_:)`), or the
    ///   read's own failure.
    static func contents(of path: String) throws -> Data {
        if let problem = problem(path) {
            throw ScenarioError(file: path, path: "$", expected: "a readable file", found: problem)
        }
        guard access(path, R_OK) == 0 else {
            throw ScenarioError(file: path, path: "$", expected: "a readable file", found: "no permission to read it")
        }
        do { return try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw ScenarioError(file: path, path: "$", expected: "a readable file", found: "it could not be read (\(error.localizedDescription))")
        }
    }
}
