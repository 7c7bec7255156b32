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

    /// Runs `file` on the SDK `sdk` names (`["--mutant", NAME]`, `["--sdk-command", CMD]`) in
    /// `dir` and asserts that it fails (exit 1) and that its output says each of `says`.
    static func assertFails(_ file: String, on sdk: [String], saying says: [String], in dir: URL,
                            file source: StaticString = #filePath, line: UInt = #line) throws {
        let (status, out) = try HarnessProcess.run(["run", file] + sdk + ["--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, "\(sdk): \(out)", file: source, line: line)
        for text in says { XCTAssertTrue(out.contains(text), "\(sdk): no '\(text)' in: \(out)", file: source, line: line) }
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
