import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// The published upstream cases that are in this repository (`golden-vectors/ruleset-vectors-excerpt.json`,
/// 69 of the 2,181 cases of upstream `tests/sdk-contract/ruleset-vectors.json`, MIT, provenance in
/// the file's `about`), evaluated over the file's ruleset by `RulesetEvaluator` with upstream's
/// rule: every case is either deferred to the server or answered with exactly `expected`; every
/// `must_local` case is answered locally with exactly `expected`.
final class RulesetVectorsExcerptTests: XCTestCase {
    func testPublishedCasesAreAnsweredOrDeferred() throws {
        let url = Repository.root.appendingPathComponent("golden-vectors/ruleset-vectors-excerpt.json")
        let file = try JSONValue.parse(Data(contentsOf: url)).value
        let ruleset = try XCTUnwrap(file["ruleset"])
        let cases = try XCTUnwrap(file["cases"]?.arrayValue)
        XCTAssertEqual(cases.count, 69)
        var local = 0, deferred = 0
        for c in cases {
            let id = c["id"]?.stringValue ?? "?"
            let outcome = RulesetEvaluator.evaluate(ruleset, flagKey: c["flag"]?.stringValue ?? "", userID: c["user_id"]?.stringValue ?? "",
                                                    context: c["context"]?.objectValue ?? [:])
            let expected = RulesetEvaluator.Outcome.local(enabled: c["expected"]?["enabled"] == .bool(true), reason: c["expected"]?["reason"]?.stringValue ?? "")
            switch outcome {
            case .local:
                local += 1
                XCTAssertEqual(outcome, expected, id)
            case .deferred, .remote:
                deferred += 1
                XCTAssertEqual(c["must_local"], .bool(false), "\(id) must be answered locally, got \(outcome)")
            default:
                XCTFail("\(id): \(outcome)")
            }
        }
        XCTAssertEqual(local, 57, "every must_local case, and no other, is answered locally")
        XCTAssertEqual(deferred, 12)
    }
}
