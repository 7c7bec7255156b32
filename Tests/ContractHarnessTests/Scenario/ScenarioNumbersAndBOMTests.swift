import XCTest
import Foundation
@testable import ContractHarness

/// Two input edges of scenario files (issue 11): a UTF-8 byte-order mark is ignored (RFC 8259
/// section 8.1 lets a parser ignore it), a UTF-16 one is refused clearly; an integer beyond
/// ±2^53 is refused naming its JSON path (the backend would keep it exactly, the harness could not).
final class ScenarioNumbersAndBOMTests: XCTestCase {
    static let text = #"""
    {"format": "experimently-scenario/1", "name": "n", "description": "d",
     "steps": [{"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-1", "expect": {"value": {"enabled": %V%}}}]}
    """#

    func error(_ data: Data) -> ScenarioError? {
        do { _ = try ScenarioParser.parse(data, file: "x.json"); return nil } catch { return error as? ScenarioError }
    }

    func testAUTF8ByteOrderMarkIsIgnored() async throws {
        let plain = Data(Self.text.replacingOccurrences(of: "%V%", with: "true").utf8)
        let scenario = try ScenarioParser.parse(Data([0xEF, 0xBB, 0xBF]) + plain, file: "bom.json")
        XCTAssertEqual(scenario.name, "n")
        let result = await ScenarioRunner(keepsHistory: false).run(scenario)
        XCTAssertEqual(result.status, .passed)
        // A mark anywhere else is still not JSON.
        XCTAssertEqual(error(plain.prefix(1) + Data([0xEF, 0xBB, 0xBF]) + plain.dropFirst())?.path, "$")
    }

    /// A lone surrogate escape is no character (read as U+FFFD, `\ud800` and `\udbff` would be one
    /// identity): refused at its path; a surrogate pair is one character and accepted.
    func testALoneSurrogateEscapeIsRefusedAtItsPath() throws {
        let lone = Self.text.replacingOccurrences(of: "%V%", with: "true").replacingOccurrences(of: #""user-1""#, with: #""user-\udbff""#)
        let e = error(Data(lone.utf8))
        XCTAssertEqual(e?.path, "$.steps[0].user")
        XCTAssertTrue(e?.found.contains("lone surrogate") == true, "\(String(describing: e))")
        let pair = Self.text.replacingOccurrences(of: "%V%", with: "true").replacingOccurrences(of: #""user-1""#, with: #""user-\ud83d\ude00""#)
        let scenario = try ScenarioParser.parse(Data(pair.utf8), file: "pair.json")
        guard case .sdk(_, .evaluateFlag(_, let user), _, _, _, _)? = scenario.steps.first else { return XCTFail("\(scenario.steps)") }
        XCTAssertTrue(user.id.unicodeScalars.elementsEqual("user-\u{1F600}".unicodeScalars))
    }

    func testAUTF16ByteOrderMarkIsRefusedSayingSo() {
        let utf16 = Data([0xFF, 0xFE]) + Self.text.data(using: .utf16LittleEndian)!
        let e = error(utf16)
        XCTAssertEqual(e?.path, "$")
        XCTAssertTrue(e?.found.contains("UTF-16 byte-order mark") == true, "\(String(describing: e))")
    }

    func testIntegersBeyond2To53AreRefusedAtTheirPath() {
        let fixtures = #"""
        {"format": "experimently-scenario/1", "name": "n", "description": "d",
         "fixtures": {"api_keys": [{"key": "sdk-contract-key"}], "flags": [],
                      "experiments": [{"key": "e", "status": "ACTIVE", "variants": [{"id": "v", "name": "control", "allocation": 100, "is_control": true, "configuration": {"ids": [1, %V%]}}]}]},
         "steps": [{"do": "getAssignment", "experiment": "e", "user": "u", "expect": {"value": {"variant_name": "control"}}}]}
        """#
        for big in ["9007199254740993", "-9007199254740993", "12345678901234567890"] {
            let e = error(Data(fixtures.replacingOccurrences(of: "%V%", with: big).utf8))
            XCTAssertEqual(e?.path, "$.fixtures.experiments[0].variants[0].configuration.ids[1]", big)
            XCTAssertEqual(e?.found, big)
        }
        // Within range, or not an integer literal (Python's json reads those as floats too): accepted.
        for fine in ["9007199254740992", "-9007199254740992", "1e300", "9007199254740993.0", "0"] {
            XCTAssertNil(error(Data(fixtures.replacingOccurrences(of: "%V%", with: fine).utf8)), fine)
        }
        // Anywhere in the file, e.g. an expected value.
        XCTAssertEqual(error(Data(Self.text.replacingOccurrences(of: "%V%", with: "[99999999999999999]").utf8))?.path, "$.steps[0].expect.value.enabled[0]")
    }

    func testTheLargeIntegerTest() {
        func big(_ s: String) -> Bool { DuplicateKeys.isLargeInteger(ArraySlice(Array(s.utf8))) }
        XCTAssertEqual(["9007199254740992", "9007199254740993", "-9007199254740993", "10000000000000000", "999999999999999", "true", "1.5"].map(big),
                       [false, true, true, true, false, false, false])
    }
}
