#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import XCTest
@testable import ContractHarness
import ExperimentlyMock

/// `contract-harness serve` loses nothing and stays bounded (issue 10 section 2), and its
/// `--host` rules (section 3).
final class ServeBoundedTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path), "contract-harness not built at \(HarnessCLITests.binary.path)")
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("serve-bounded-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    private static func post(_ session: URLSession, _ url: String, key: String, body: Data) async throws -> Int {
        var request = URLRequest(url: URL(string: url + "/api/v1/tracking/track")!, timeoutInterval: 30)
        request.httpMethod = "POST"
        request.setValue(key, forHTTPHeaderField: "X-API-Key")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let (_, response) = try await session.upload(for: request, from: body)
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    func testOutOfRangeNumberAnd300LargeBodiesGiveACompleteJournalInBoundedMemory() async throws {
        let journal = dir.appendingPathComponent("journal.json")
        let serve = try ServeProcess(["--journal", journal.path], directory: dir)
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let infinite = Data(#"{"event_type":"purchase","user_id":"u","experiment_key":"sdk_contract_ab","value":1e999}"#.utf8)
        let status = try await Self.post(session, serve.url, key: serve.key, body: infinite)
        XCTAssertEqual(status, 200, "accepted, as FastAPI/pydantic v2 accept it (float('inf'))")
        // 300 bodies just under the 1 MiB limit: valid events with a large metadata string, and junk.
        let near = 1_048_000
        let prefix = Data(#"{"event_type":"big","user_id":"u","experiment_key":"sdk_contract_ab","metadata":{"pad":""#.utf8)
        let valid = prefix + Data(repeating: UInt8(ascii: "x"), count: near - prefix.count - 3) + Data(#""}}"#.utf8)
        let junk = Data(repeating: UInt8(ascii: "{"), count: near)
        let url = serve.url, key = serve.key
        let statuses = try await withThrowingTaskGroup(of: [Int].self) { group in
            for worker in 0..<3 {
                group.addTask {
                    var s: [Int] = []
                    for i in stride(from: worker, to: 300, by: 3) { s.append(try await Self.post(session, url, key: key, body: i % 2 == 0 ? valid : junk)) }
                    return s
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        XCTAssertEqual(statuses.filter { $0 == 200 }.count, 150)
        XCTAssertEqual(statuses.filter { $0 == 422 }.count, 150)
        XCTAssertEqual(serve.stop(SIGTERM), 0, serve.stderrText)
        XCTAssertTrue(serve.stderrText.contains("stopped on SIGTERM after 301 requests"), serve.stderrText)

        let data = try Data(contentsOf: journal)
        let j = try JSONValue.parse(data).value
        let history = try XCTUnwrap(j["history"]?.arrayValue)
        XCTAssertEqual(Set(history.compactMap { $0["seq"]?.numberValue.map(Int.init) }), Set(1...301), "every request named once")
        XCTAssertEqual(history.count, 301)
        XCTAssertTrue(String(decoding: data, as: UTF8.self).contains(#""value":1e999"#), "the number's own text")
        XCTAssertEqual(history.filter { $0["body_size"] == .number(Double(near)) }.count, 300, "large bodies as size + digest + prefix")
        XCTAssertLessThan(data.count, 20 << 20, "the journal does not copy 300 MB of bodies")
        XCTAssertEqual(j["state"]?["events_total"], .number(151))

        #if os(Linux)
        let peak = try XCTUnwrap(serve.stderrText.firstMatch(of: /peak resident memory (\d+) MB/).flatMap { Int($0.1) }, serve.stderrText)
        XCTAssertLessThan(peak, 256, "resident memory stays under 256 MB (VmHWM)")
        #endif
    }

    func testSIGTERMWithBusyKeepAliveConnectionsAnswersAndJournalsEverything() async throws {
        let journal = dir.appendingPathComponent("journal.json")
        let faults = dir.appendingPathComponent("faults.json")
        // Every assign is delayed 300 ms: in flight when SIGTERM arrives.
        try Data(#"[{"match": {"path": "/api/v1/tracking/assign"}, "action": {"delay": {"seconds": 0.3}}}]"#.utf8).write(to: faults)
        let serve = try ServeProcess(["--journal", journal.path, "--faults", faults.path], directory: dir)
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let url = serve.url, key = serve.key
        // Warm 20 keep-alive connections, then put one delayed request on each and signal.
        let results = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<20 {
                group.addTask {
                    var r = URLRequest(url: URL(string: url + "/api/v1/tracking/assign")!, timeoutInterval: 20)
                    r.httpMethod = "POST"
                    r.setValue(key, forHTTPHeaderField: "X-API-Key")
                    r.setValue("application/json", forHTTPHeaderField: "Content-Type")
                    r.httpBody = Data(#"{"experiment_key":"sdk_contract_ab","user_id":"user-\#(i)"}"#.utf8)
                    let (_, response) = try await session.data(for: r)
                    return (response as? HTTPURLResponse)?.statusCode ?? 0
                }
            }
            // The signal goes once all 20 are inside the mock (journal-visible count via stderr is
            // not available; the delay is long enough that requests are still parked).
            try await Task.sleep(nanoseconds: 100_000_000)
            kill(serve.process.processIdentifier, SIGTERM)
            return try await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(results.filter { $0 == 200 }.count, 20, "every request that arrived is answered: \(results)")
        XCTAssertEqual(serve.stop(SIGTERM), 0, serve.stderrText)
        let j = try JSONValue.parse(Data(contentsOf: journal)).value
        let history = try XCTUnwrap(j["history"]?.arrayValue)
        XCTAssertEqual(history.count, 20)
        XCTAssertTrue(history.allSatisfy { $0["outcome"] == .string("respond") && $0["response"]?["status"] == .number(200) })
    }

    func testHostRules() throws {
        func run(_ host: String) throws -> BoundedRun {
            try BoundedRun.run(HarnessCLITests.binary, ["serve", "--port", "0", "--host", host], directory: dir, timeout: 30)
        }
        for (host, reason) in [("255.255.255.255", "broadcast address"), ("0177.0.0.1", "leading zero"), ("224.0.0.1", "multicast"),
                               ("256.1.1.1", "not an IPv4 address part"), ("localhost", "takes an IPv4 address"), ("::1", "takes an IPv4 address"),
                               ("192.0.2.1", "not an address of this machine")] {
            let r = try run(host)
            XCTAssertEqual(r.status, 64, "\(host): \(r.err)")
            XCTAssertTrue(r.err.contains(reason), "\(host): \(r.err)")
        }
        let open = try ServeProcess(["--host", "0.0.0.0"], directory: dir)
        XCTAssertTrue(open.stderrText.contains("warning: --host 0.0.0.0 listens on every network interface: the mock backend is reachable from the network"), open.stderrText)
        XCTAssertEqual(open.stop(), 0)
        let loop = try ServeProcess(["--host", "127.0.0.2"], directory: dir)
        XCTAssertFalse(loop.stderrText.contains("warning"), loop.stderrText)
        XCTAssertEqual(loop.stop(), 0)
    }
}
