import Foundation

/// Runs the built `contract-harness` binary as a user would, for tests through the binary.
enum HarnessProcess {
    /// Runs `contract-harness ARGUMENTS` in `directory`, standard error discarded; returns the exit
    /// status (a death by signal N as 128 + N, as a shell reports it) and standard output.
    ///
    /// - Throws: when the process cannot be started.
    static func run(_ arguments: [String], in directory: URL) throws -> (status: Int32, out: String) {
        let p = Process()
        p.executableURL = HarnessCLITests.binary
        p.arguments = arguments
        p.currentDirectoryURL = directory
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let status = p.terminationReason == .uncaughtSignal ? 128 + p.terminationStatus : p.terminationStatus
        return (status, String(decoding: o, as: UTF8.self))
    }
}
