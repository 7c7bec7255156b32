import XCTest
import Foundation
@testable import ExperimentlyMock
@testable import ContractHarness

/// Findings of the twenty-fifth outside tester (`/work/attack26/FINDINGS.md`: an SDK written in
/// Node from CONTRACT.md alone, run against the whole suite): two false failures, each now passing
/// a correct SDK that makes the other choice the contract leaves open.
final class TwentyFifthTesterFindingsTests: XCTestCase {
    /// An answer whose `config` (or `configuration`) is there and no object may come back as null or
    /// fail the call with decodingError ("undecodable body", CONTRACT.md section 4): the example with
    /// its `non-object-config-undecodable` freedom passes the file that maps such answers, and the
    /// cache checks, which no longer demand such an answer cached.
    func testANonObjectConfigMayFailTheCallAsUndecodable() throws {
        let dir = try scratchDirectory("twenty-fifth-config")
        let driver = "python3 '\(Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path)'"
        let file = Repository.root.appendingPathComponent("scenarios/s4-response-mapping-config-non-object-is-null.json").path
        for freedom in ["", "non-object-config-undecodable"] {
            let (status, out) = try HarnessProcess.run(["run", file, "--sdk-command", "EXPERIMENTLY_EXAMPLE_FREEDOM=\(freedom) " + driver,
                                                        "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "freedom '\(freedom)': \(out)")
        }
    }
}
