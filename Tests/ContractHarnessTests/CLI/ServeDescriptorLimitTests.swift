#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import XCTest
@testable import ContractHarness

/// `serve` out of file descriptors: run under `ulimit -n 40` (setrlimit in the subprocess's shell,
/// never in the test process), it answers every connection (the ones it cannot keep get 503 and
/// are closed: `accept` fails with EMFILE and the reserved descriptor takes them), does not spin
/// while the table is full, and gives every descriptor back when the clients leave.
final class ServeDescriptorLimitTests: XCTestCase {
    private func descriptors(_ pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// CPU time the process used so far, in clock ticks (utime + stime of /proc/PID/stat).
    private func cpuTicks(_ pid: Int32) -> Int {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return -1 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }

    func testOutOfDescriptorsEveryConnectionIsAnsweredNothingSpinsNothingLeaks() throws {
        try XCTSkipUnless(FileManager.default.fileExists(atPath: "/proc/self/fd"), "needs procfs")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        // setrlimit(RLIMIT_NOFILE) in the child shell, then exec: the test process keeps its limit.
        process.arguments = ["-c", "ulimit -n 40 && exec \"$0\" serve --port 0 --host 127.0.0.1", HarnessCLITests.binary.path]
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let pid = process.processIdentifier
        defer { if process.isRunning { kill(pid, SIGKILL) } }
        var printed = ""
        while !printed.contains("EXPERIMENTLY_API_KEY=") {
            let data = stdout.fileHandleForReading.availableData
            if data.isEmpty { break }
            printed += String(decoding: data, as: UTF8.self)
        }
        let urlLine = try XCTUnwrap(printed.split(separator: "\n").first { $0.hasPrefix("EXPERIMENTLY_API_URL=") }, printed)
        let port = try XCTUnwrap(UInt16(urlLine.split(separator: ":").last ?? ""))
        // Warm up first: the first answered request makes the runtime open what it opens lazily
        // (the concurrency pool's and Dispatch's own descriptors), which is not a leak.
        do {
            let warm = try XCTUnwrap(LoopbackClient(port: port))
            warm.send("GET /health HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            XCTAssertTrue(warm.readResponse().hasPrefix("HTTP/1.1 200 "))
        }
        // The baseline is the count once it holds still (the warm-up connection closed).
        var baseline = descriptors(pid)
        for _ in 0..<100 { usleep(50_000); let now = descriptors(pid); if now == baseline { break }; baseline = now }

        // Connect one at a time until the server's table is full; each connection is either kept
        // (the server holds one more descriptor) or refused (503, then closed).
        var kept: [LoopbackClient] = [], refused: [LoopbackClient] = []
        while refused.count < 10 {
            let before = descriptors(pid)
            let c = try XCTUnwrap(LoopbackClient(port: port))
            var settled = false
            for _ in 0..<2500 where !settled {
                if c.readable { refused.append(c); settled = true } else if descriptors(pid) > before { kept.append(c); settled = true } else { usleep(2000) }
            }
            XCTAssertTrue(settled, "connection \(kept.count + refused.count) neither kept nor refused")
            if !settled { return }
            XCTAssertLessThan(kept.count, 40, "the limit of 40 descriptors never bit")
            if kept.count >= 40 { return }
        }
        XCTAssertGreaterThan(kept.count, 5)
        for c in refused {
            let text = c.readAll()
            XCTAssertTrue(text.hasPrefix("HTTP/1.1 503 "), text)
            XCTAssertTrue(text.contains("Connection: close"), text)
        }

        // Full table, clients connected and silent: the loop sleeps (a spin would burn the window).
        let ticks = cpuTicks(pid)
        var p = pollfd(fd: kept[0].fd, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&p, 1, 500), 0, "a kept connection stays quiet")
        XCTAssertLessThan(cpuTicks(pid) - ticks, 15, "the server spun while out of descriptors (clock ticks in 0.5 s)")

        // Every kept connection is served; once all leave, every descriptor is given back.
        for c in kept {
            c.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
            XCTAssertTrue(c.readResponse().hasPrefix("HTTP/1.1 200 "))
        }
        kept.removeAll()
        refused.removeAll()
        var back = false
        for _ in 0..<2500 where !back { if descriptors(pid) == baseline { back = true } else { usleep(2000) } }
        XCTAssertTrue(back, "descriptors leaked: \(descriptors(pid)) open, \(baseline) at start")
        let after = try XCTUnwrap(LoopbackClient(port: port))
        after.send("GET /health HTTP/1.1\r\nHost: h\r\n\r\n")
        XCTAssertTrue(after.readResponse().hasPrefix("HTTP/1.1 200 "), "serves again")

        kill(pid, SIGTERM)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
    }
}

/// A plain blocking loopback client (connect, send, read with a deadline).
final class LoopbackClient {
    let fd: Int32
    init?(port: UInt16) {
        #if canImport(Darwin)
        fd = socket(AF_INET, SOCK_STREAM, 0)
        #else
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if rc != 0 { close(fd); return nil }
    }
    deinit { close(fd) }

    /// Whether bytes (or end of stream) are waiting, without blocking.
    var readable: Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) == 1
    }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Everything until the server closes or `timeout` seconds pass.
    func readAll(timeout: Double = 5) -> String {
        var out: [UInt8] = []
        let end = Date(timeIntervalSinceNow: timeout)
        while end.timeIntervalSinceNow > 0 {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(end.timeIntervalSinceNow * 1000)) == 1 else { break }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// One response's head and `Content-Length` body.
    func readResponse(timeout: Double = 5) -> String {
        var out: [UInt8] = []
        let end = Date(timeIntervalSinceNow: timeout)
        while end.timeIntervalSinceNow > 0 {
            let text = String(decoding: out, as: UTF8.self)
            if let head = text.range(of: "\r\n\r\n") {
                let length = text[..<head.lowerBound].split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                if text.utf8.count - text.utf8.distance(from: text.startIndex, to: head.upperBound) >= length { return text }
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(end.timeIntervalSinceNow * 1000)) == 1 else { break }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
