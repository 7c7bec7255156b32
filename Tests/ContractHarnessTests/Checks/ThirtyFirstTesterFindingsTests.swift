import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the thirty-first outside tester (`/work/attack32/FINDINGS.md`: this stop's check
/// changes): the new `fan_out` grouping keyed alike requests by `String`, merging NFC and NFD
/// bodies (all six correct SDKs failed, a broken one passed); a newer success still excused a
/// transport error or timeout; an answer whose configuration is no object was taken as surely
/// stored; an answer for another experiment or flag stored under the asked key was failed.
final class ThirtyFirstTesterFindingsTests: XCTestCase {
    private static let python = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
    private static let nfcNFD = ["field-fan-out-keyed-track-nfc-nfd-users", "field-fan-out-keyed-track-nfc-nfd-properties",
                                 "field-fan-out-batch-nfc-nfd-properties"].map { Repository.root.appendingPathComponent("scenarios/\($0).json").path }
    private static let fixtures = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/thirty-first-tester").path

    /// Correct SDKs pass the three identity files and the fixtures; the Python example's
    /// `nfd-properties` fails the two whose properties are canonically equivalent, and
    /// `no-fallback-transport` fails the transport-error fixture.
    func testAlikeRequestsAreGroupedByTheirBytesAndOnlyAFailureExplainsAnError() throws {
        let dir = try scratchDirectory("thirty-first")
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", Self.python]] {
            let (status, out) = try HarnessProcess.run(["run"] + Self.nfcNFD + [Self.fixtures] + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
            XCTAssertTrue(out.contains("8 passed, 0 failed"), "\(sdk): \(out)")
        }
        let nfd = try HarnessProcess.run(["run"] + Self.nfcNFD + ["--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=nfd-properties \(Self.python)",
                                                                 "--verdict", "v.json"], in: dir)
        XCTAssertTrue(nfd.out.contains("1 passed, 2 failed") && nfd.out.contains("fan_out"), nfd.out)
        let transport = Self.fixtures + "/transport-error-on-old-request-while-newer-one-succeeds.json"
        let (status, out) = try HarnessProcess.run(["run", transport, "--sdk-command", "EXPERIMENTLY_EXAMPLE_DEFECT=no-fallback-transport \(Self.python)",
                                                    "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("offline_fallback"), out)
    }
}
