import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the twenty-eighth outside tester (`/work/attack29/FINDINGS.md`: this stop's
/// changes to `mutants`, the worker pool and keep-alive).
final class TwentyEighthTesterFindingsTests: XCTestCase {
    /// The `mutants` verdict's `ok` says what its exit status says: a variant missed is not ok.
    func testAMatrixThatMissesAVariantIsNotOk() throws {
        let dir = try scratchDirectory("twenty-eighth-mutants-ok")
        let file = Repository.root.appendingPathComponent("scenarios/contract-smoke.json").path
        let (status, out) = try HarnessProcess.run(["mutants", file, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        let verdict = try JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("v.json"))) as? [String: Any]
        XCTAssertEqual(verdict?["ok"] as? Bool, false, "\(verdict ?? [:])")
    }
}
