import Foundation
import XCTest
@testable import ExperimentlyMock

/// `JSONDuplicateKey`: the mock's own check for keys written twice in one JSON object.
final class JSONDuplicateKeyTests: XCTestCase {
    private func first(_ text: String) -> JSONDuplicateKey? { JSONDuplicateKey.first(in: Data(text.utf8)) }

    func testFindsTheFirstDuplicateWithItsPath() {
        XCTAssertNil(first(#"{"a": 1, "b": {"a": 2}, "c": [{"a": 1}, {"a": 2}]}"#), "equal keys in different objects are fine")
        XCTAssertEqual(first(#"{"a": 1, "a": 2}"#)?.path, "$.a")
        XCTAssertEqual(first(#"[{"x": 1}, {"match": {"path": "/a", "path": "/b"}}]"#)?.path, "$[1].match.path")
        XCTAssertEqual(first(#"{"s": "}{\"", "a": [1, {"k y": 1, "k y": 2}]}"#)?.path, #"$.a[1]["k y"]"#)
        XCTAssertEqual(first(#"{"a\u0062": 1, "ab": 2}"#)?.key, "ab", "escapes are decoded before comparing")
        XCTAssertEqual(first(#"{"a": 1, "a": 2}"#)?.description, #"duplicate key "a" at $.a"#)
    }

    func testCanonicallyEquivalentKeysAreDuplicatesNamedAsSuch() {
        let d = first("{\"caf\u{E9}\": 1, \"cafe\u{301}\": 2}")
        XCTAssertEqual(d?.equivalentOnly, true)
        XCTAssertTrue(d?.description.contains("canonically equivalent") ?? false)
    }

    func testInvalidJSONIsLeftToTheParser() {
        XCTAssertNil(first(#"{"a": 1, "a": "#))
        XCTAssertNil(first(""))
    }
}
