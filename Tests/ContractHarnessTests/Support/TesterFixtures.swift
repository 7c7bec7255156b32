import XCTest
import Foundation

/// The shipped outside testers' fixture folders (`Tests/ContractHarnessTests/Fixtures/<name>`),
/// run on the correct SDKs: in process, the faithful variant and the Python example.
enum TesterFixtures {
    /// The Python example's adapter command.
    static let python = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"

    /// The fixture folder `name`.
    static func folder(_ name: String) -> URL {
        Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/\(name)")
    }

    /// Runs the folder `name` `runs` times on each correct SDK in `dir` and asserts that all
    /// `count` files pass every time.
    static func assertCorrectSDKsPass(_ name: String, count: Int, runs: Int = 1, in dir: URL,
                                      file: StaticString = #filePath, line: UInt = #line) throws {
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", python]] {
            for _ in 0..<runs {
                let (status, out) = try HarnessProcess.run(["run", folder(name).path] + sdk + ["--verdict", "v.json"], in: dir)
                XCTAssertEqual(status, 0, "\(sdk): \(out)", file: file, line: line)
                XCTAssertTrue(out.contains("\(count) passed, 0 failed"), "\(sdk): \(out)", file: file, line: line)
            }
        }
    }
}
