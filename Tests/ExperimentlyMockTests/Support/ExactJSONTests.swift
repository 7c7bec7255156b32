import Foundation
import XCTest
@testable import ExperimentlyMock

/// `ExactJSON` reads objects as Python's `json.loads` does: names told apart scalar by scalar, a
/// name written twice keeps its first position and its last value.
final class ExactJSONTests: XCTestCase {
    func testNamesAreToldApartByScalarsAndARepeatKeepsItsLastValue() throws {
        let text = #"{"b":[{"\u212b":1,"\u00c5":2}],"k\u0301":1,"\u1e31":2,"k\u0301":3,"a":null}"#
        let exact = try XCTUnwrap(ExactJSON.parse(Data(text.utf8)))
        XCTAssertTrue(exact.hasEquivalentNames)
        XCTAssertEqual(exact["k\u{301}"], .value(.number(3)))
        XCTAssertEqual(exact["\u{1e31}"], .value(.number(2)))
        XCTAssertNil(exact["missing"])
        XCTAssertEqual(exact["b"]?[0]?["\u{212b}"], .value(.number(1)), "the Angstrom sign and A-ring are two names")
        XCTAssertTrue(try XCTUnwrap(exact["b"]).hasEquivalentNames)
        XCTAssertEqual(exact.text(), "{\"a\":null,\"b\":[{\"\u{c5}\":2,\"\u{212b}\":1}],\"k\u{301}\":3,\"\u{1e31}\":2}")
        // Without equivalent names the text is JSONValue's.
        let plain = #"{"z":[1,2.5,"x"],"a":{"b":true}}"#
        let read = try XCTUnwrap(ExactJSON.parse(Data(plain.utf8)))
        XCTAssertFalse(read.hasEquivalentNames)
        XCTAssertEqual(read.text(), try JSONValue.parse(Data(plain.utf8)).value.jsonText)
        XCTAssertNil(ExactJSON.parse(Data(#"{"a":"#.utf8)), "not JSON")
    }

    func testTheCheapTestFindsEveryNameThatCouldNeedIt() {
        XCTAssertFalse(ExactJSON.mayHaveEquivalentNames(Data(#"{"a":"b\\u"}"#.utf8)), "an escaped backslash before u")
        XCTAssertTrue(ExactJSON.mayHaveEquivalentNames(Data(#"{"\u212a":1}"#.utf8)))
        XCTAssertTrue(ExactJSON.mayHaveEquivalentNames(Data("{\"\u{e9}\":1}".utf8)))
        XCTAssertFalse(ExactJSON.mayHaveEquivalentNames(Data(#"{"user_id":"u-1","metadata":{"k":1}}"#.utf8)))
    }
}
