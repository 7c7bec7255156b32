import XCTest
@testable import ExperimentlyMock

/// The mock's SHA-256 against the FIPS 180-4 / NIST CSRC example vectors, the padding boundaries
/// (55, 56, 63, 64 bytes) checked against Python's hashlib, and the derived UUID shape.
final class MockSHA256Tests: XCTestCase {
    func testNISTVectors() {
        XCTAssertEqual(MockSHA256.hex(Array("".utf8)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(MockSHA256.hex(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(MockSHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        XCTAssertEqual(MockSHA256.hex(Array("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu".utf8)),
                       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1")
        XCTAssertEqual(MockSHA256.hex([UInt8](repeating: 0x61, count: 1_000_000)), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    func testPaddingBoundariesAgainstHashlib() throws {
        let lengths = [1, 55, 56, 57, 63, 64, 65, 119, 120, 128]
        let expected = try runPython("import hashlib\nfor n in \(lengths): print(hashlib.sha256(bytes((i * 7 + 3) % 256 for i in range(n))).hexdigest())")
        let ours = lengths.map { n in MockSHA256.hex((0..<n).map { UInt8(($0 * 7 + 3) % 256) }) }.joined(separator: "\n") + "\n"
        XCTAssertEqual(ours, expected)
    }

    func testDerivedUUIDs() {
        let a = MockUUID.derive("variant", ["sdk_contract_ab", "sdk_contract_ab-control"])
        XCTAssertEqual(a, "0bc79baa-1746-8506-9ac6-475aa6a09ec9", "pinned: ids are stable across runs and machines")
        XCTAssertTrue(MockUUID.isUUID(a))
        XCTAssertNotEqual(a, MockUUID.derive("variant", ["sdk_contract_ab", "sdk_contract_ab-treatment"]))
        // NFC and NFD spellings are different ids (exact bytes).
        XCTAssertNotEqual(MockUUID.derive("experiment", ["\u{E9}"]), MockUUID.derive("experiment", ["e\u{301}"]))
        XCTAssertFalse(MockUUID.isUUID("sdk_contract_ab-control"))
        XCTAssertEqual(Variant(id: "7b0a1a2e-4c3d-4f5e-8a9b-0c1d2e3f4a5b", name: "c", allocation: 100).wireID(experimentKey: "e"),
                       "7b0a1a2e-4c3d-4f5e-8a9b-0c1d2e3f4a5b", "a fixture id that is already a UUID is kept")
    }

    /// The byte-built derivation and shape test agree with the formulas as first written (text
    /// joined as a String, hex by `String(radix:)`, scalars checked one by one) on generated
    /// inputs, ASCII and not.
    func testDerivationAndShapeAgreeWithTheFormulasAsFirstWritten() {
        func derivedFirst(_ kind: String, _ parts: [String]) -> String {
            let text = "experimently-mock:" + kind + ":" + parts.joined(separator: "\u{0}")
            var b = Array(MockSHA256.digest(Array(text.utf8)).prefix(16))
            b[6] = (b[6] & 0x0f) | 0x80
            b[8] = (b[8] & 0x3f) | 0x80
            let c = Array(b.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
            return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
        }
        func shapeFirst(_ text: String) -> Bool {
            let scalars = Array(text.unicodeScalars)
            guard scalars.count == 36 else { return false }
            for (i, s) in scalars.enumerated() {
                if [8, 13, 18, 23].contains(i) { if s != "-" { return false }; continue }
                guard s.isASCII, s.properties.isASCIIHexDigit else { return false }
            }
            return true
        }
        var rng = SplitMix64(state: 15)
        let alphabet: [String] = ["a", "Z", "0", "-", ":", "\u{0}", "\u{E9}", "e\u{301}", "\u{1F600}", "g", "F", " "]
        for _ in 0..<2_000 {
            let parts = (0..<Int(rng.next() % 3 + 1)).map { _ in (0..<Int(rng.next() % 12)).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }.joined() }
            let kind = ["variant", "experiment", "\u{E9}vent", ""][Int(rng.next() % 4)]
            let derived = MockUUID.derive(kind, parts)
            XCTAssertEqual(derived, derivedFirst(kind, parts), "\(kind) \(parts)")
            // Shapes: the derived id, and it with one position replaced by a generated character.
            var scalars = Array(derived.unicodeScalars)
            let at = Int(rng.next() % 36)
            scalars[at] = (alphabet[Int(rng.next() % UInt64(alphabet.count))].unicodeScalars.first!)
            for text in [derived, String(String.UnicodeScalarView(scalars)), derived.uppercased(), String(derived.dropLast()), derived + "0"] {
                XCTAssertEqual(MockUUID.isUUID(text), shapeFirst(text), text)
            }
        }
    }

    /// The ASCII byte path of the Content-Type rule decides as the Character path does, on
    /// generated values near the rule's edges (case, spaces and tabs, parameters, `+json`).
    func testContentTypeBytePathAgreesWithTheCharacterPath() {
        var rng = SplitMix64(state: 7)
        let pieces = ["application/", "Application/", "APPLICATION/", "text/", "json", "JSON", "+json", "+JSON", "vnd.x", ";", " ", "\t",
                      "charset=utf-8", "\r\n", "/", "+", "jso", "n", ""]
        var agreed = 0
        for _ in 0..<20_000 {
            let value = (0..<Int(rng.next() % 6 + 1)).map { _ in pieces[Int(rng.next() % UInt64(pieces.count))] }.joined()
            guard !value.isEmpty else { continue }
            XCTAssertEqual(Validate.jsonContentType(value), Validate.jsonContentTypeByCharacters(value), "'\(value)'")
            agreed += 1
        }
        XCTAssertGreaterThan(agreed, 19_000)
        for accepted in ["application/json", " application/JSON ; charset=utf-8", "application/vnd.api+json", "\tapplication/json\t"] {
            XCTAssertTrue(Validate.jsonContentType(accepted), accepted)
        }
        for refused in ["text/json", "application/jsonx", "application/ json", "application/json\r\n", "application/+jso"] {
            XCTAssertEqual(Validate.jsonContentType(refused), Validate.jsonContentTypeByCharacters(refused), refused)
        }
    }
}
