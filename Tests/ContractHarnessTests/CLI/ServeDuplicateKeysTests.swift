import Foundation
import XCTest
@testable import ContractHarness

/// `serve --faults` (and `--fixtures`) refuse a key written twice in one JSON object: exit 64
/// naming the file and the JSON path, instead of keeping one of the two silently.
final class ServeDuplicateKeysTests: XCTestCase {
    func testDuplicateKeysInFaultsOrFixturesExit64NamingFileAndPath() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("serve-dup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let faults = dir.appendingPathComponent("faults.json")
        try Data(#"[{"match": {"path": "/health"}, "when": {"first": 1}, "action": {"respond": {"status": 503}}}, {"match": {"path": "/a"}, "when": {"first": 1, "first": 2}, "action": {"hold": {}}}]"#.utf8).write(to: faults)
        let f = try BoundedRun.run(HarnessCLITests.binary, ["serve", "--port", "0", "--faults", faults.path], directory: dir, timeout: 30)
        XCTAssertEqual(f.status, 64, f.err)
        XCTAssertTrue(f.err.contains(#"malformed faults file \#(faults.path): duplicate key "first" at $[1].when.first"#), f.err)
        XCTAssertFalse(f.out.contains("EXPERIMENTLY_API_URL"), "never started")

        let fixtures = dir.appendingPathComponent("fixtures.json")
        try Data(#"{"api_keys": [{"key": "k", "key": "j"}]}"#.utf8).write(to: fixtures)
        let x = try BoundedRun.run(HarnessCLITests.binary, ["serve", "--port", "0", "--fixtures", fixtures.path], directory: dir, timeout: 30)
        XCTAssertEqual(x.status, 64, x.err)
        XCTAssertTrue(x.err.contains(#"malformed fixtures file \#(fixtures.path): duplicate key "key" at $.api_keys[0].key"#), x.err)
    }
}
