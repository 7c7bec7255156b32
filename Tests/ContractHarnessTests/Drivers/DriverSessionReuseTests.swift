import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// `experimently-driver` never invalidates a client's `URLSession` at `close_client`: an SDK
/// operation still running may create another data task on it, and on an invalidated session that
/// is a `fatalError` in FoundationNetworking (../shared/NOTES-linux-foundation.md), which would
/// turn a correct SDK's run into a crash. Here a `trackBatch` of 150 events (two batches, sent one
/// after the other) has its first batch held by the mock, the client is closed, then the batch is
/// released: the SDK sends its second batch after `close_client`, and the driver must answer.
final class DriverSessionReuseTests: XCTestCase {
    func testAnOperationThatSendsAfterCloseClientDoesNotCrashTheDriver() async throws {
        let driverPath = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: driverPath), "experimently-driver not built at \(driverPath)")
        signal(SIGPIPE, SIG_IGN)   // a dead driver's standard input fails the write, not this process
        let backend = MockBackend()
        backend.addFault(FaultRule(match: FaultMatch(path: "/api/v1/tracking/batch"), when: .first(1), action: .hold(label: "first-batch")))
        let server = MockHTTPServer(handler: backend, configuration: .init(port: 0, readTimeout: 5, shutdownGracePeriod: 1))
        let port = try server.start()
        defer { server.shutdown() }

        let child = try VectorsSubprocess.spawn(program: driverPath, arguments: [driverPath])
        let reader = ReplyReader(fd: child.stdout)
        defer {
            kill(-child.pid, SIGKILL)
            var status: Int32 = 0
            waitpid(child.pid, &status, 0)
            for fd in [child.stdin, child.stdout, child.stderr] { close(fd) }
        }
        func send(_ line: String) {
            let data = Array((line + "\n").utf8)
            data.withUnsafeBytes { _ = write(child.stdin, $0.baseAddress, $0.count) }
        }
        let events = (0..<150).map { #"{"user_id":"user-1","event_name":"e\#($0)","experiment_key":"sdk_contract_ab"}"# }
        send(#"{"id":1,"protocol":"experimently-driver/1","type":"hello"}"#)
        send(#"{"client":"s1.main","id":2,"now":1700000000,"scope":"s1","settings":{"api_key":"sdk-contract-key","base_url":"http://127.0.0.1:\#(port)","cache_size":10,"cache_ttl":300,"offline_fallback":false,"timeout":10},"store":null,"type":"create_client"}"#)
        XCTAssertNotNil(try reader.reply(2)?.result)
        send(#"{"client":"s1.main","id":3,"operation":{"name":"trackBatch","events":[\#(events.joined(separator: ","))]},"type":"perform"}"#)
        await backend.waitForHolds(1)
        send(#"{"client":"s1.main","id":4,"type":"close_client"}"#)
        XCTAssertNotNil(try reader.reply(4)?.result, "close_client answered")
        let held = try XCTUnwrap(backend.heldRequests.first)
        XCTAssertTrue(backend.release(held.id))
        // The SDK now sends its second batch on the closed client's session, then the operation ends.
        let outcome = try reader.reply(3)
        XCTAssertNotNil(outcome, "the driver died after close_client: \(String(decoding: drain(child.stderr), as: UTF8.self).split(separator: "\n").filter { $0.contains("rror") }.prefix(3))")
        XCTAssertEqual(backend.history.filter { $0.path == "/api/v1/tracking/batch" }.count, 2, "both batches reached the mock")
        // The session goes back to the driver: a new client works as before.
        send(#"{"client":"s2.main","id":5,"now":1700000000,"scope":"s2","settings":{"api_key":"sdk-contract-key","base_url":"http://127.0.0.1:\#(port)","cache_size":10,"cache_ttl":300,"offline_fallback":false,"timeout":10},"store":null,"type":"create_client"}"#)
        XCTAssertNotNil(try reader.reply(5)?.result)
        send(#"{"client":"s2.main","id":6,"operation":{"flag":"sdk_contract_flag","name":"evaluateFlag","user":{"id":"user-1"}},"type":"perform"}"#)
        XCTAssertNotNil(try reader.reply(6)?.result)
        send(#"{"id":7,"type":"shutdown"}"#)
    }

    private func drain(_ fd: Int32) -> Data {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var out = Data(), buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { return out }
            out.append(contentsOf: buffer[0..<n])
        }
    }
}

/// Reads the driver's replies from its standard output (a pipe), one line each; `reply(id)`
/// returns the reply with that id, `nil` when the output ended first (the driver died). A reply
/// that does not come within 60 s fails the read (a hang is a failure, not a wait forever).
private final class ReplyReader {
    private let fd: Int32
    private var lines = LineBuffer()
    private var replies: [Int: DriverReply] = [:]
    private var ended = false

    init(fd: Int32) { self.fd = fd }

    struct Timeout: Error {}

    func reply(_ id: Int) throws -> DriverReply? {
        let deadline = DispatchTime.now() + .seconds(60)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while replies[id] == nil && !ended {
            guard DispatchTime.now() < deadline else { throw Timeout() }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 1000) > 0 else { continue }
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { ended = true; break }
            lines.append(buffer[0..<n])
            while let line = lines.nextLine() {
                if let r = try? DriverMessageDecoder().reply(line) { replies[r.id] = r }
            }
        }
        return replies[id]
    }
}
