#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Process-wide C heap settings that keep a long-running mock's resident memory bounded.
///
/// glibc raises its mmap threshold each time a large block is freed (up to 32 MiB on 64-bit), so
/// after the first 1 MiB request body every later one is carved from the heap arenas, which
/// fragment and are never given back: 600 concurrent 1 MB POSTs left `serve` at 607 MB resident
/// although at most 96 MiB of bodies were ever held (the body budget, Documentation/CrossSDK.md).
/// Fixing the threshold at 128 KiB (`mallopt(M_MMAP_THRESHOLD)`, which also turns the dynamic
/// adjustment off) maps every large block on its own and unmaps it when freed (153 MB measured
/// with `Benchmarks/serve-memory.sh`). The symbols are looked up with `dlsym` (the toolchain's
/// Glibc module does not export them); on other C libraries this does nothing.
public enum MockHeapTuning {
    /// Blocks of at least this many bytes are mapped on their own (glibc's default threshold).
    public static let mmapThresholdBytes = 128 * 1024

    /// Fixes glibc's mmap threshold at ``mmapThresholdBytes``; returns true when it was set,
    /// false where glibc's `mallopt` is absent or refuses. Call once at process start (`serve`
    /// does); it affects the whole process.
    @discardableResult
    public static func mapLargeAllocationsSeparately() -> Bool {
        #if os(Linux)
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "mallopt") else { return false }
        let mallopt = unsafeBitCast(symbol, to: Mallopt.self)
        let mmapThreshold: Int32 = -3 // M_MMAP_THRESHOLD in <malloc.h>
        return mallopt(mmapThreshold, Int32(mmapThresholdBytes)) == 1
        #else
        return false
        #endif
    }
}
