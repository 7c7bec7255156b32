import XCTest
import Foundation

/// What `run` prints and what its history lines say: the header, and request lines that match
/// the failure slices, show the hold at receipt, and leave the answer to its own line.
final class ConsoleTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("harness-console-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path),
                          "contract-harness not built at \(HarnessCLITests.binary.path)")
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    func harness(_ arguments: [String]) throws -> (status: Int32, out: String) {
        try HarnessProcess.run(arguments, in: dir)
    }

    var race: String { Repository.root.appendingPathComponent("scenarios/defect-1-stale-write-after-clearcache.json").path }

    func testTheHeaderNamesTheSDKTheSeedTheFilesAndWhereOutputsGo() throws {
        let r = try harness(["run", race, "--seed", "42", "--verdict", "v.json", "--junit", "j.xml", "--html", "r.html", "--mutant", "stale-write-after-clear"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.out.split(separator: "\n").first,
                       "contract-harness 0.1.0: SDK ios-mutant-stale-write-after-clear 1.0.0 (variant stale-write-after-clear), seed 42, 1 file, 1 scenario; verdict -> v.json, JUnit -> j.xml, HTML -> r.html")
    }

    func testRequestLinesMatchTheSlicesShowTheHoldAndLeaveTheAnswerToItsOwnLine() throws {
        let r = try harness(["run", race, "--history", "--verdict", "v.json", "--mutant", "stale-write-after-clear"])
        XCTAssertEqual(r.status, 1)
        let verdict = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: dir.appendingPathComponent("v.json"))) as? [String: Any])
        let scenario = try XCTUnwrap((verdict["scenarios"] as? [[String: Any]])?.first)
        let history = try XCTUnwrap(scenario["history"] as? [String])
        let request = try XCTUnwrap(history.first { $0.contains(" request ") })
        XCTAssertEqual(request, #"[1] t=0.0 request #1 [main] POST /api/v1/tracking/assign {"experiment_key":"sdk_contract_ab","user_id":"user-2"} (fault held: hold at receipt)"#)
        XCTAssertEqual(history[4], #"[4] t=0.0 release {"count":1,"fault":"held"}"#)
        XCTAssertEqual(history[5], #"[5] t=0.0 response #1 [main] POST /api/v1/tracking/assign {"experiment_key":"sdk_contract_ab","user_id":"user-2"} -> 200 (fault held)"#)
        // Every slice line of every failing check is the --history line of its index.
        var cited = 0
        for check in scenario["checks"] as? [[String: Any]] ?? [] {
            for line in check["history"] as? [String] ?? [] {
                let index = try XCTUnwrap(Int(line.dropFirst().prefix { $0 != "]" }))
                XCTAssertEqual(history[index], line)
                cited += 1
            }
        }
        XCTAssertGreaterThan(cited, 4)
    }
}
