import Foundation
import XCTest
@testable import ExperimentlyMock

/// A corpus of malformed requests over raw sockets: each gets its status, its connection is
/// closed, and the server still answers a valid request right after.
final class HTTPServerMalformedTests: XCTestCase {
    private var server: MockHTTPServer!
    private var handler: TestHandler!
    private var port: UInt16 = 0

    override func setUpWithError() throws {
        handler = TestHandler()
        let limits = MockHTTPParserLimits(maxHeaderBytes: 16 * 1024, maxBodyBytes: 1 << 20)
        server = MockHTTPServer(handler: handler, configuration: .init(readTimeout: 0.3, shutdownGracePeriod: 1, limits: limits))
        port = try server.start()
    }

    override func tearDown() {
        server.shutdown()
        server = nil
    }

    /// Sends `wire` (then half-closes when `halfClose`), expects `status` with
    /// `Connection: close` and a detail naming the problem, then end of stream; then checks a
    /// valid request on a new connection.
    private func expect(_ status: Int, for wire: [UInt8], halfClose: Bool = false, detailContains: String? = nil,
                        file: StaticString = #filePath, line: UInt = #line) throws {
        let client = try RawClient(port: port)
        client.send(wire)
        if halfClose { client.shutdownWrite() }
        let response = try XCTUnwrap(client.readResponse(), "no response", file: file, line: line)
        XCTAssertEqual(response.status, status, response.text, file: file, line: line)
        XCTAssertEqual(response.header("Connection"), "close", file: file, line: line)
        XCTAssertEqual(response.header("Content-Type"), "application/json", file: file, line: line)
        if let detailContains {
            XCTAssertTrue(response.text.contains(detailContains), "\(response.text) lacks \(detailContains)", file: file, line: line)
        }
        XCTAssertEqual(client.readToEnd(), [], "connection closed after the error", file: file, line: line)
        try assertServerStillAnswers(file: file, line: line)
    }

    private func expect(_ status: Int, for wire: String, halfClose: Bool = false, detailContains: String? = nil,
                        file: StaticString = #filePath, line: UInt = #line) throws {
        try expect(status, for: Array(wire.utf8), halfClose: halfClose, detailContains: detailContains, file: file, line: line)
    }

    private func assertServerStillAnswers(file: StaticString = #filePath, line: UInt = #line) throws {
        let client = try RawClient(port: port)
        client.send("GET /ok HTTP/1.1\r\nHost: h\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.text, "GET /ok 0", "server still answers", file: file, line: line)
    }

    func testBadRequestLines() throws {
        try expect(400, for: "NOT A VALID REQUEST LINE\r\n\r\n", detailContains: "request line")
        try expect(400, for: "GET /\r\nHost: h\r\n\r\n", detailContains: "request line")
        try expect(400, for: "GET / HTTP/x.y\r\nHost: h\r\n\r\n", detailContains: "HTTP version")
        try expect(400, for: [0x47, 0x45, 0x54, 0x20, 0x2F, 0x00, 0x20] + Array("HTTP/1.1\r\nHost: h\r\n\r\n".utf8), detailContains: "request target")
    }

    func testBadHeaders() throws {
        try expect(400, for: "GET / HTTP/1.1\r\nHost: h\r\nno colon here\r\n\r\n", detailContains: "colon")
        try expect(400, for: "GET / HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n", detailContains: "header field name")
        try expect(400, for: "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\n folded\r\n\r\n", detailContains: "folding")
        try expect(400, for: "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", detailContains: "Host")
    }

    func testBadContentLength() throws {
        try expect(400, for: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: abc\r\n\r\n", detailContains: "Content-Length")
        try expect(400, for: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", detailContains: "conflicting")
        try expect(400, for: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", detailContains: "both")
        try expect(400, for: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc", halfClose: true, detailContains: "body")
    }

    func testChunkedFraming() throws {
        try expect(400, for: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", detailContains: "hexadecimal")
        try expect(400, for: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n", detailContains: "chunk")
        try expect(400, for: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", halfClose: true, detailContains: "chunked body")
        try expect(501, for: "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", detailContains: "gzip")
    }

    func testUnsupportedVersion() throws {
        try expect(505, for: "GET / HTTP/2.0\r\nHost: h\r\n\r\n", detailContains: "2.0")
        try expect(505, for: "GET / HTTP/0.9\r\n\r\n")
    }

    func testOversizeHeaderSectionIs431() throws {
        let big = String(repeating: "a", count: 17 * 1024)
        try expect(431, for: "GET / HTTP/1.1\r\nHost: h\r\nX-Big: \(big)\r\n\r\n", detailContains: "16384")
        let many = (0..<2000).map { "X-\($0): v\r\n" }.joined()
        try expect(431, for: "GET / HTTP/1.1\r\nHost: h\r\n\(many)\r\n")
    }

    func testOversizeBodyIs413() throws {
        try expect(413, for: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1048577\r\n\r\n", detailContains: "1048576")
        // The body is already being sent when the server refuses it; lingering close keeps the
        // 413 from being destroyed by a reset.
        let chunk = String(repeating: "z", count: 0x10000)
        let chunked = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            + String(repeating: "10000\r\n\(chunk)\r\n", count: 17) + "0\r\n\r\n"
        try expect(413, for: chunked, detailContains: "chunked body")
    }

    func testSlowClientGets408() throws {
        let client = try RawClient(port: port)
        client.send("GET /slow HTTP/1.1\r\nHost: h\r\n") // never finishes the header section
        let response = try XCTUnwrap(client.readResponse(timeout: 5))
        XCTAssertEqual(response.status, 408)
        XCTAssertTrue(response.text.contains("not received completely within 0.3 s"), response.text)
        XCTAssertEqual(client.readToEnd(), [])
        try assertServerStillAnswers()
        XCTAssertTrue(handler.requests.allSatisfy { $0.target == "/ok" })
    }

    func testSlowBodyGets408() throws {
        let client = try RawClient(port: port)
        client.send("POST /slow HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc")
        XCTAssertEqual(client.readResponse(timeout: 5)?.status, 408)
        try assertServerStillAnswers()
    }

    func testSilentNewConnectionGets408() throws {
        let client = try RawClient(port: port)
        let response = try XCTUnwrap(client.readResponse(timeout: 5))
        XCTAssertEqual(response.status, 408)
        XCTAssertTrue(response.text.contains("no request received"), response.text)
        try assertServerStillAnswers()
    }

    func testIdleKeepAliveConnectionClosesSilently() throws {
        let handler = TestHandler()
        let server = MockHTTPServer(handler: handler, configuration: .init(readTimeout: 5, idleTimeout: 0.2))
        defer { server.shutdown() }
        let client = try RawClient(port: try server.start())
        client.send("GET /1 HTTP/1.1\r\nHost: h\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.status, 200)
        XCTAssertEqual(client.readToEnd(), [], "no 408 for an idle keep-alive connection, just a close")
    }

    func testErrorAfterAGoodPipelinedRequestStillAnswersTheGoodOne() throws {
        let client = try RawClient(port: port)
        client.send("GET /first HTTP/1.1\r\nHost: h\r\n\r\nBROKEN\r\n\r\n")
        XCTAssertEqual(client.readResponse()?.text, "GET /first 0")
        XCTAssertEqual(client.readResponse()?.status, 400)
        XCTAssertEqual(client.readToEnd(), [])
        XCTAssertEqual(server.statistics.protocolErrors, 1)
    }

    func testClientThatVanishesMidRequestDoesNotDisturbOthers() throws {
        let vanishing = try RawClient(port: port)
        vanishing.send("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\nabc")
        vanishing.reset()
        try assertServerStillAnswers()
        XCTAssertTrue(eventually { self.server.statistics.openConnections == 0 })
    }
}
