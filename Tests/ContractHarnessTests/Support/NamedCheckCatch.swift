import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMutants

/// A named check proven both ways in process: the correct SDKs (the shipping one and the faithful
/// variant) pass a scenario, and a broken variant fails it in that check.
enum NamedCheckCatch {
    /// Asserts that the correct SDKs pass `scenario` and that `defect` fails the check named
    /// `check` with a message holding `text`.
    static func assertCaught(_ scenario: Scenario, by defect: Defect, check: String, saying text: String,
                             file: StaticString = #filePath, line: UInt = #line) async {
        for driver in [SwiftSDKDriver(), MutantRun.driver(nil)] {
            let r = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(r.status, .passed, "\(driver.sdkName): \(r.checks.filter { !$0.passed })", file: file, line: line)
        }
        let broken = await ScenarioRunner(driver: MutantRun.driver(defect)).run(scenario)
        let messages = broken.checks.filter { !$0.passed && $0.name == check }.compactMap(\.message)
        XCTAssertTrue(messages.contains { $0.contains(text) }, "\(defect.rawValue): \(broken.checks.filter { !$0.passed })", file: file, line: line)
    }
}
