import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Raises this process's soft limit on open descriptors to its hard limit, once, at start.
///
/// In-process scenarios used to leave their URLSessions alive (teardown must never invalidate a
/// session the SDK may still use: FoundationNetworking traps on a task created on an invalidated
/// session), each with a libcurl socket pair on Linux: a long in-process run (`generate`, a
/// worker serving many jobs) held thousands of descriptors, and under the common soft limit of
/// 1,024 that ended in a crash (`generate --count 600` under `ulimit -n 1024`). Sessions are now
/// pooled (`InProcessSessions`), so the count stays bounded; the raised limit stays as headroom
/// for what else a run opens (loopback listeners, driver processes, stores). The hard limit is
/// what the administrator allows. Children started afterwards inherit the raised limit (POSIX
/// `setrlimit`, RLIMIT_NOFILE).
enum OpenFileLimit {
    /// Sets the soft RLIMIT_NOFILE to the hard one (capped at 1,048,576 where the hard limit is
    /// unlimited); does nothing when that fails.
    static func raiseToHardLimit() {
        #if canImport(Glibc)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return }
        let target = limit.rlim_max == rlim_t.max ? rlim_t(1_048_576) : limit.rlim_max
        guard limit.rlim_cur < target else { return }
        limit.rlim_cur = target
        _ = setrlimit(resource, &limit)
    }
}
