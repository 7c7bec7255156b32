import Foundation

/// Splits a byte stream into lines (`\n`-terminated, the `\n` dropped) in linear time.
///
/// Each byte is looked at once: the search for the next newline resumes where the last one
/// stopped (a 50 MB line read in 64 KiB chunks is scanned once, not once per chunk), and consumed
/// lines are dropped from the front in bulk. Used for every line protocol the harness reads:
/// worker records, driver-protocol lines, job lines. A value type; not shared between threads.
struct LineBuffer {
    private var bytes: [UInt8] = []
    /// Where the next line starts.
    private var start = 0
    /// Bytes from `start` up to here hold no newline.
    private var scanned = 0

    /// Appends bytes read from the stream.
    mutating func append<C: Collection>(_ chunk: C) where C.Element == UInt8 {
        bytes.append(contentsOf: chunk)
    }

    /// The next complete line, without its `\n`; `nil` until one has arrived.
    mutating func nextLine() -> Data? {
        let found: Int? = bytes.withUnsafeBufferPointer { buffer in
            guard scanned < buffer.count, let base = buffer.baseAddress else { return nil }
            guard let hit = memchr(base + scanned, 0x0A, buffer.count - scanned) else { return nil }
            return base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
        }
        guard let newline = found else {
            scanned = bytes.count
            compact()
            return nil
        }
        let line = Data(bytes[start..<newline])
        start = newline + 1
        scanned = start
        compact()
        return line
    }

    /// Bytes received after the last complete line (a line still arriving).
    var unterminatedCount: Int { bytes.count - start }

    /// What is left after the last newline (a final line without one), emptied.
    mutating func takeRest() -> Data? {
        defer { bytes = []; start = 0; scanned = 0 }
        return start < bytes.count ? Data(bytes[start...]) : nil
    }

    /// Drops consumed bytes once they are at least half the buffer (amortized linear).
    private mutating func compact() {
        guard start > 0, start * 2 >= bytes.count else { return }
        bytes.removeFirst(start)
        scanned -= start
        start = 0
    }
}
