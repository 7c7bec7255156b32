import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Raises this process's soft limit on open descriptors to its hard limit, once, at start.
///
/// Every in-process scenario leaves its URLSessions alive (teardown must never invalidate a
/// session the SDK may still use: FoundationNetworking traps on a task created on an invalidated
/// session), and on Linux each keeps a libcurl socket pair: a long in-process run (`generate`, a
/// worker serving many jobs) holds thousands of descriptors. With the common soft limit of 1,024
/// that ended in a crash (`generate --count 600` under `ulimit -n 1024`); the hard limit is what
/// the administrator allows. Children started afterwards inherit the raised limit (POSIX
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
