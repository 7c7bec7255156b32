import XCTest
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import ExperimentlyMutants
@testable import ContractHarness

/// The JUnit file as CI viewers parse it: properties, every failing check with its slice,
/// grouped class names, timestamp, hostname, the history in `system-out`.
final class JUnitTests: XCTestCase {
    func document(_ v: Verdict, secrets: [String] = [], error: String? = nil) throws -> XMLElement {
        let doc = try XMLDocument(data: v.junit(redacting: secrets, error: error, hostname: "ci-runner-7"), options: [])
        return try XCTUnwrap(doc.rootElement())
    }

    func testFailingRaceCarriesPropertiesEveryFailingCheckAndTheHistory() async throws {
        var v = try await ReportTests.verdict(mutant: .staleWriteAfterClear,
                                              files: ["defect-1-stale-write-after-clearcache.json", "s4-cache-is-per-user.json"])
        v.extra["mutant"] = .string("stale-write-after-clear")
        let suite = try document(v)
        XCTAssertEqual(suite.name, "testsuite")
        XCTAssertEqual(suite.attribute(forName: "hostname")?.stringValue, "ci-runner-7")
        XCTAssertEqual(suite.attribute(forName: "timestamp")?.stringValue, "2023-11-14T22:13:20Z")
        XCTAssertEqual(suite.attribute(forName: "tests")?.stringValue, "2")
        XCTAssertEqual(suite.attribute(forName: "failures")?.stringValue, "1")
        let properties = try XCTUnwrap(suite.elements(forName: "properties").first).elements(forName: "property")
        let byName = Dictionary(uniqueKeysWithValues: properties.map { ($0.attribute(forName: "name")!.stringValue!, $0.attribute(forName: "value")!.stringValue!) })
        XCTAssertEqual(byName, ["seed": "7", "sdk.name": "ios-mutant-stale-write-after-clear", "sdk.version": v.sdkVersion,
                                "harness.version": "test", "mutant": "stale-write-after-clear"])
        let cases = suite.elements(forName: "testcase")
        XCTAssertEqual(cases.map { $0.attribute(forName: "classname")?.stringValue }, ["defect", "s4"])
        let failure = try XCTUnwrap(cases[0].elements(forName: "failure").first)
        let failing = v.results[0].checks.filter { !$0.passed }
        XCTAssertEqual(failing.count, 4)
        XCTAssertEqual(failure.attribute(forName: "message")?.stringValue, "\(failing[0].name): \(failing[0].message!)")
        let text = try XCTUnwrap(failure.stringValue)
        for (i, check) in failing.enumerated() {
            XCTAssertTrue(text.contains("✗\(i + 1) \(check.name): \(check.message!)"), "failure text lacks \(check.name)")
            for line in check.history ?? [] { XCTAssertTrue(text.contains("    " + line), "failure text lacks the slice line \(line)") }
        }
        let out = try XCTUnwrap(cases[0].elements(forName: "system-out").first?.stringValue)
        XCTAssertEqual(out, v.results[0].events.map(\.line).joined(separator: "\n"))
        XCTAssertTrue(out.contains("request #1 [main] POST /api/v1/tracking/assign"))
        XCTAssertTrue(cases[1].elements(forName: "failure").isEmpty)
    }

    func testPassingRunHasNoMutantPropertyAndGroupsByFirstTagWithoutAPrefix() async throws {
        var v = try await ReportTests.verdict(mutant: nil)
        v.results[0].file = "scenarios/smoke.json"
        let suite = try document(v)
        let names = suite.elements(forName: "properties").first?.elements(forName: "property").compactMap { $0.attribute(forName: "name")?.stringValue }
        XCTAssertEqual(names, ["seed", "sdk.name", "sdk.version", "harness.version"])
        XCTAssertEqual(suite.elements(forName: "testcase").first?.attribute(forName: "classname")?.stringValue, "section-5")
        XCTAssertEqual(suite.attribute(forName: "failures")?.stringValue, "0")
    }

    func testHostileTextStaysWellFormedAndRedacted() async throws {
        var v = try await ReportTests.verdict(mutant: .staleWriteAfterClear)
        v.results[0].name = "<a>&\"\u{1}sk-secret"
        v.results[0].checks[1].message = "leaks sk-secret ]]> <b>"
        let suite = try document(v, secrets: ["sk-secret"], error: "run <broken>")
        let cases = suite.elements(forName: "testcase")
        XCTAssertEqual(cases[0].attribute(forName: "name")?.stringValue, "<a>&\"?***")
        XCTAssertTrue(cases[0].elements(forName: "failure").first?.stringValue?.contains("leaks *** ]]> <b>") == true)
        XCTAssertEqual(cases.last?.elements(forName: "error").first?.attribute(forName: "message")?.stringValue, "run <broken>")
    }
}
