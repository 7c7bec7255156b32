import XCTest
import Foundation

/// Documentation/YourSDK.md keeps working: `Examples/your-sdk-in-process` (another Swift SDK whose
/// module is also named `Experimently`, a driver conforming to `SDKDriver`, `HarnessCommand.main`)
/// builds against this repository with `moduleAliases`, and its harness runs and passes its scenario.
///
/// Builds a whole package from scratch (about 2 minutes on 2 cores), so it runs only when
/// `EXPERIMENTLY_BUILD_EXAMPLES=1` (set by `.ci/run`); skipped otherwise or without `swift`.
final class YourSDKPackageTests: XCTestCase {
    func testTheInProcessExamplePackageBuildsAndRuns() throws {
        guard ProcessInfo.processInfo.environment["EXPERIMENTLY_BUILD_EXAMPLES"] == "1" else {
            throw XCTSkip("set EXPERIMENTLY_BUILD_EXAMPLES=1 to build Examples/your-sdk-in-process (about 2 minutes)")
        }
        let swift = ["/opt/swift/usr/bin/swift", "/usr/bin/swift"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let swift else { throw XCTSkip("no swift toolchain found") }
        let fm = FileManager.default
        let temp = fm.temporaryDirectory.appendingPathComponent("your-sdk-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try fm.createDirectory(at: temp, withIntermediateDirectories: true)
        defer { try? fm.removeItem(at: temp) }
        // The package expects the harness next to it, named as SwiftPM will identify it.
        try fm.createSymbolicLink(at: temp.appendingPathComponent("experimently-contract"), withDestinationURL: Repository.root)
        let package = temp.appendingPathComponent("your-sdk")
        try fm.copyItem(at: Repository.root.appendingPathComponent("Examples/your-sdk-in-process"), to: package)
        try? fm.removeItem(at: package.appendingPathComponent(".build"))

        let build = try run(swift, ["build", "--package-path", package.path], in: package)
        XCTAssertEqual(build.status, 0, "swift build failed:\n\(build.output.suffix(4000))")
        guard build.status == 0 else { return }
        let bin = try run(swift, ["build", "--package-path", package.path, "--show-bin-path"], in: package).output
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let harness = try run(bin + "/your-sdk-harness", ["run", "scenarios", "--verdict", temp.appendingPathComponent("v.json").path], in: package)
        XCTAssertEqual(harness.status, 0, harness.output)
        XCTAssertTrue(harness.output.contains("PASS  your-sdk-evaluates-a-flag"), harness.output)
        // A scenario needing what the example SDK lacks is skipped, naming it.
        let skipped = try run(bin + "/your-sdk-harness", ["run", Repository.root.appendingPathComponent("scenarios/s4-cache-is-per-user.json").path,
                                                          "--verdict", temp.appendingPathComponent("v2.json").path], in: package)
        XCTAssertTrue(skipped.output.contains("SKIP  s4-cache-is-per-user: the driver lacks"), skipped.output)
    }

    private func run(_ executable: String, _ arguments: [String], in folder: URL) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = folder
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
