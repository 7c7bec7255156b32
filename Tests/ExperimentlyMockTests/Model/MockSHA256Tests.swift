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
}
