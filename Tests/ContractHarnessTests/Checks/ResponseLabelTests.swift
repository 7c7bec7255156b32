import XCTest
import ExperimentlyMock
@testable import ContractHarness

/// `MockBackendPort.labelsOtherwise` (whether an answer's head says its body is something else
/// than plain JSON) reads ASCII headers as bytes: it must agree with the Unicode reading on every
/// header, generated from the pieces that matter (case, blanks, `;`, `+json`, non-ASCII).
final class ResponseLabelTests: XCTestCase {
    func testTheByteReadingAgreesWithTheCharacterReading() {
        let names = ["Content-Type", "content-type", "CONTENT-ENCODING", "Content-Encoding", "X-Other", "content-typé", "Content-Type ",
                     "C\u{212A}ontent-Type", "content_type", "Content-Length"]
        let pieces = ["application/json", "APPLICATION/JSON", "application/problem+json", "+JSON", "text/plain", "gzip", "identity",
                      "IDENTITY", " ", "\t", ";", "; charset=utf-8", "\u{00A0}", "\r\n", "\n", "\u{0B}", "é", "\u{2003}", "json", "+", ""]
        var rng = SplitMix64(state: 46)
        var compared = 0
        for _ in 0..<20_000 {
            var value = ""
            for _ in 0..<Int(rng.next() % 5) { value += pieces[Int(rng.next() % UInt64(pieces.count))] }
            let h = HeaderField(name: names[Int(rng.next() % UInt64(names.count))], value: value)
            XCTAssertEqual(MockBackendPort.labelsOtherwise(h), MockBackendPort.labelsOtherwiseByCharacters(h), "\(h.name): \(h.value.debugDescription)")
            compared += 1
        }
        XCTAssertEqual(compared, 20_000)
    }

    /// The media type is the text before the first `;` (RFC 9110 section 8.3.1): none there is
    /// not JSON. Before, "; application/json" read as JSON (the first non-empty piece).
    func testAnEmptyMediaTypeIsNotJSON() {
        XCTAssertTrue(MockBackendPort.labelledOtherwise([HeaderField(name: "Content-Type", value: "; application/json")]))
        XCTAssertFalse(MockBackendPort.labelledOtherwise([HeaderField(name: "Content-Type", value: " Application/JSON ; charset=utf-8")]))
        XCTAssertFalse(MockBackendPort.labelledOtherwise([HeaderField(name: "content-type", value: "application/vnd.x+json")]))
        XCTAssertTrue(MockBackendPort.labelledOtherwise([HeaderField(name: "Content-Encoding", value: "gzip")]))
        XCTAssertFalse(MockBackendPort.labelledOtherwise([HeaderField(name: "Content-Encoding", value: " identity ")]))
        XCTAssertFalse(MockBackendPort.labelledOtherwise([HeaderField(name: "Content-Encoding", value: "  ")]))
    }
}
