import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the eightieth outside tester (`/work/attack80/REPORT.md`: the day's features
/// against correct SDKs), kept as fixtures (`Fixtures/eightieth-tester`):
///
/// - F2: an answer with `"assigned": "true"` was modelled as surely cached; the shipping SDK
///   cannot decode it, and `no_stale_write` failed it.
/// - F3, F4: keys were taken out of the encoded verdict and JUnit text, so a key "1" broke both
///   files; a key with `"` showed in the verdict.
/// - F5: a key with a trailing space was accepted in process and a 401 over TCP.
/// - F7, F8: mistakes of a file (a `seed_store` before any client of its store launched, an app
///   step on a client launched at its first use, an `X-API-Key` header that no key can match) failed
///   the SDK or passed unseen instead of being refused.
final class EightiethTesterFindingsTests: XCTestCase {
    static func file(_ name: String) -> String { TesterFixtures.folder("eightieth-tester").appendingPathComponent(name).path }

    /// F3, F4: with the keys "1" and `SEC"RET-3` the verdict is JSON and the JUnit file XML, and
    /// neither shows a key in any spelling.
    func testOutputsStayWellFormedAndShowNoKey() throws {
        let dir = try scratchDirectory("eightieth-keys")
        for (name, key) in [("key-word-one.json", "1"), ("leak-quote.json", #"SEC"RET-3"#)] {
            _ = try HarnessProcess.run(["run", Self.file(name), "--verdict", "v.json", "--junit", "j.xml"], in: dir)
            let verdict = try Data(contentsOf: dir.appendingPathComponent("v.json"))
            let parsed = try JSONSerialization.jsonObject(with: verdict) as? [String: Any]
            XCTAssertNotNil(parsed?["scenarios"], name)
            let junit = try Data(contentsOf: dir.appendingPathComponent("j.xml"))
            // The markup is the harness's own (a whole-text pass once made `version="***.0"`).
            let xml = String(decoding: junit, as: UTF8.self)
            XCTAssertTrue(xml.hasPrefix(#"<?xml version="1.0" encoding="UTF-8"?>"#), "\(name): \(xml.prefix(80))")
            XCTAssertTrue(xml.contains(#"<testsuite name="contract-harness" tests="1" "#), "\(name): \(xml.prefix(200))")
            if key.count > 1 {
                let text = String(decoding: verdict, as: UTF8.self)
                XCTAssertFalse(text.contains(key) || text.contains(#"SEC\"RET-3"#), "\(name): the key shows")
            }
        }
    }

    /// F2: the correct SDKs pass an answer whose `assigned` is a string (it may be cached or not).
    func testAWrongTypedAssignedMayBeCachedOrNot() throws {
        let dir = try scratchDirectory("eightieth-assigned")
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", TesterFixtures.python]] {
            let (status, out) = try HarnessProcess.run(["run", Self.file("assigned-string-not-cached.json")] + sdk + ["--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 0, "\(sdk): \(out)")
        }
    }

    /// F5, F8: each mistake is refused at its path. (F7's `seed_store` before any launch of its
    /// store is no mistake since the eighty-second tester's F8: it writes through a seeder.)
    func testFileMistakesAreRefusedAtTheirPath() {
        let head = #""format": "experimently-scenario/1", "name": "n", "description": "d""#
        let cases: [(String, String)] = [
            (#""fixtures": {"api_keys": [{"key": "k "}]}, "steps": [{"do": "evaluateFlag", "flag": "f", "user": "u", "expect": {"value": {}}}]"#,
             "$.fixtures.api_keys[0].key"),
            (#""config": {"api_key": " k"}, "steps": [{"do": "evaluateFlag", "flag": "f", "user": "u", "expect": {"value": {}}}]"#, "$.config.api_key"),
            (#""steps": [{"do": "evaluateFlag", "flag": "f", "user": "u"}, {"assert": {"requests": {"headers": {"X-API-Key": "zzz"}}, "count": 0}}]"#,
             "$.steps[1].assert.requests.headers.X-API-Key"),
        ]
        for (body, path) in cases {
            XCTAssertThrowsError(try ScenarioParser.parse(Data("{\(head), \(body)}".utf8), file: "x.json"), path) { error in
                XCTAssertEqual((error as? ScenarioError)?.path, path, "\(error)")
                XCTAssertFalse("\(error)".contains("zzz") || "\(error)".contains("\"k \""), "\(error)")
            }
        }
    }
}
