import XCTest
import Foundation
@testable import ExperimentlyMock
@testable import ContractHarness

/// Findings of the twenty-ninth outside tester (`/work/attack30/FINDINGS.md`: field races and
/// other SDKs' bug reports written as scenarios, run on six SDKs): `offline_fallback` modelled one
/// stored state where the contract allows several (a late 404 from before a clear, a 404 on a
/// fallback-off client sharing the store), stored 2xx bodies that are no answer, and deleted on a
/// 404 no client read; `event_payload` compared values within 1e-9.
final class TwentyNinthTesterFindingsTests: XCTestCase {
    private static let files: [String] = {
        let fixtures = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/twenty-ninth-tester")
        let shipped = ["field-late-404-from-before-clear-after-fresh-answer", "field-undecodable-200-never-becomes-the-fallback",
                       "field-404-after-client-gave-up-keeps-fallback", "field-404-on-fallback-off-instance-shared-store"]
            .map { Repository.root.appendingPathComponent("scenarios/\($0).json").path }
        return [fixtures.path] + shipped
    }()

    /// F1-F4: every correct SDK passes (each failed `offline_fallback` before: the shipping SDK,
    /// the faithful variant, the Python example, and the tester's Go and Node SDKs alike).
    func testOfflineFallbackAcceptsEveryStateTheContractAllows() throws {
        let dir = try scratchDirectory("twenty-ninth-offline")
        let python = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", python]] {
            let (status, out) = try HarnessProcess.run(["run"] + Self.files + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            XCTAssertTrue(out.contains("9 passed, 0 failed"), "\(sdk): \(out)")
        }
    }

    /// The new files still fail broken variants (as `mutants --full` found): a persisted value
    /// served on a 404, a fallback value cached, no deadline of the SDK's own.
    func testTheBrokenVariantsStillFailTheNewFiles() throws {
        let dir = try scratchDirectory("twenty-ninth-variants")
        for (variant, file) in [("persisted-value-on-404", "field-late-404-from-before-clear-after-fresh-answer"),
                                ("caches-fallback-value", "field-undecodable-200-never-becomes-the-fallback"),
                                ("no-own-deadline", "field-404-after-client-gave-up-keeps-fallback"),
                                ("caches-failure", "field-404-on-fallback-off-instance-shared-store")] {
            let path = Repository.root.appendingPathComponent("scenarios/\(file).json").path
            let (status, out) = try HarnessProcess.run(["run", path, "--mutant", variant, "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, "\(variant) on \(file): \(out)")
        }
    }

    /// F5: an event's value is the double the call gave, exactly; the new shipped file fails an
    /// SDK that sends 32-bit floats or cuts values to 10 digits (each passed the whole suite).
    func testAnEventValueIsComparedExactly() throws {
        let given: JSONValue = .object(["name": .string("revenue"), "value": .number(1234567.891234)])
        XCTAssertEqual(Checks.payloadDifferences(sent: .object(["event_type": .string("revenue"), "value": .number(1234567.891234)]), given: given), [])
        XCTAssertEqual(Checks.payloadDifferences(sent: .object(["event_type": .string("revenue"), "value": .number(1234567.891)]), given: given).count, 1)
        XCTAssertEqual(Checks.payloadDifferences(sent: .object(["event_type": .string("revenue"), "value": .number(1e-11 + 5e-11)]),
                                                 given: .object(["name": .string("revenue"), "value": .number(1e-11)])).count, 1)
        let dir = try scratchDirectory("twenty-ninth-values")
        let file = Repository.root.appendingPathComponent("scenarios/field-event-values-are-sent-as-the-same-double.json").path
        let python = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
        XCTAssertEqual(try HarnessProcess.run(["run", file, "--sdk-command", python, "--verdict", "v.json"], in: dir).status, 0)
        for defect in ["value-10-digits", "value-float32"] {
            let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=\(defect) \(python)",
                                                        "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, "\(defect): \(out)")
        }
    }
}
