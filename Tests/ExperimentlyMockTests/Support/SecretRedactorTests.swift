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

    /// A key in JSON text quoted in JSON text (an adapter's logged request in a crashed outcome in a
    /// history line): escaped twice or three times, it is found too (an eighty-seventh outside tester).
    func testJSONQuotedInJSONIsFound() {
        let r = SecretRedactor(secrets: [#"sec\ret"42"#, "cl\u{E9}-secr\u{E8}te-42"])
        XCTAssertEqual(r.redact(#"{\"api_key\": \"sec\\\\ret\\\"42\"}"#), #"{\"api_key\": \"***\"}"#)
        XCTAssertEqual(r.redact(#"a sec\\\\\\\\ret\\\\\\\"42 b"#), "a *** b")
        XCTAssertEqual(r.redact(#"k: cl\\u00e9-secr\\u00e8te-42"#), "k: ***")
        XCTAssertEqual(r.redact(#"k: cl\\\\u00E9-secr\\\\u00E8te-42"#), "k: ***")
    }
}

