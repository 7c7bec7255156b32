import XCTest
@testable import ExperimentlyMock

final class SecretRedactorTests: XCTestCase {
    func testRawHeaderQueryBodyAndBearer() {
        let r = SecretRedactor(secrets: ["sdk-contract-key", "k/é y"])
        XCTAssertEqual(r.redact("X-API-Key: sdk-contract-key"), "X-API-Key: ***")
        XCTAssertEqual(r.redact("Authorization: Bearer sdk-contract-key\r\n"), "Authorization: Bearer ***\r\n")
        XCTAssertEqual(r.redact("/health?api_key=k%2F%C3%A9%20y&x=1"), "/health?api_key=***&x=1")
        XCTAssertEqual(r.redact("/health?api_key=k%2f%c3%a9+y"), "/health?api_key=***")
        XCTAssertEqual(r.redact(#"{"key":"k\/\u00e9 y"}"#), #"{"key":"***"}"#)
        XCTAssertEqual(r.redact(#"{"key":"k/\u00E9 y","again":"k/é y"}"#), #"{"key":"***","again":"***"}"#)
        XCTAssertEqual(r.redact(Data("a sdk-contract-key b sdk-contract-key".utf8)), Data("a *** b ***".utf8))
        // Escapes no encoder would choose, mixed case, are found too (a review found %2D for '-').
        XCTAssertEqual(r.redact("/x?k=sdk%2Dcontract%2dkey&y=1"), "/x?k=***&y=1")
        XCTAssertEqual(r.redact("/x?k=%73dk-contract-key"), "/x?k=***")
        XCTAssertTrue(r.contains(secretIn: "q=sdk%2Dcontract-key"))
        XCTAssertEqual(r.redact("100% sure + done"), "100% sure + done")
    }

    func testExactScalarsAndLongestFirst() {
        // NFD é is a different key from NFC é: only the configured spelling is redacted.
        let r = SecretRedactor(secrets: ["caf\u{E9}", "key", "key-long"])
        XCTAssertEqual(r.redact("cafe\u{301} caf\u{E9}"), "cafe\u{301} ***")
        XCTAssertEqual(r.redact("key-long key"), "*** ***")
        XCTAssertTrue(r.contains(secretIn: "x key"))
        XCTAssertFalse(r.contains(secretIn: "x kez"))
        XCTAssertTrue(SecretRedactor(secrets: ["", ""]).isEmpty)
        XCTAssertEqual(SecretRedactor(secrets: []).redact("key"), "key")
    }
}
