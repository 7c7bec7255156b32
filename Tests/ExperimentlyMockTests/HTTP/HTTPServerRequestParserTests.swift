import Foundation
import XCTest
@testable import ExperimentlyMock

/// The request parser state machine, driven with bytes only (no sockets).
final class HTTPServerRequestParserTests: XCTestCase {
    typealias Action = MockHTTPRequestParser.Action

    /// Feeds `text` whole and collects actions until `.needMore` or an error.
    private func parse(_ text: String, limits: MockHTTPParserLimits = MockHTTPParserLimits()) -> [Action] {
        var parser = MockHTTPRequestParser(limits: limits)
        parser.feed(Array(text.utf8))
        return drain(&parser)
    }

    private func drain(_ parser: inout MockHTTPRequestParser) -> [Action] {
        var actions: [Action] = []
        while true {
            let action = parser.next()
            actions.append(action)
            switch action {
            case .needMore, .error: return actions
            case .request, .sendContinue: continue
            }
        }
    }

    private func requests(_ actions: [Action]) -> [MockHTTPParsedRequest] {
        actions.compactMap { if case .request(let r) = $0 { return r } else { return nil } }
    }

    private func errorStatus(_ actions: [Action]) -> Int? {
        if case .error(let e) = actions.last { return e.status }
        return nil
    }

    func testSimpleGetKeepsTargetAndHeaderSpellingAndOrder() {
        let actions = parse("GET /api/v1/feature-flags/evaluate/new%20ui%2Fv2?user_id=user%20a%26b HTTP/1.1\r\nHost: x\r\nX-API-Key: k1\r\nx-api-key:  k2 \r\n\r\n")
        XCTAssertEqual(actions.count, 2)
        let r = requests(actions)[0]
        XCTAssertEqual(r.request.method, "GET")
        XCTAssertEqual(r.request.target, "/api/v1/feature-flags/evaluate/new%20ui%2Fv2?user_id=user%20a%26b")
        XCTAssertEqual(r.request.headers.map(\.name), ["Host", "X-API-Key", "x-api-key"])
        XCTAssertEqual(r.request.headers.map(\.value), ["x", "k1", "k2"])
        XCTAssertEqual(r.request.body, Data())
        XCTAssertEqual(r.minorVersion, 1)
        XCTAssertTrue(r.keepAlive)
        XCTAssertEqual(actions.last, .needMore)
    }

    func testContentLengthBodyByteByByte() {
        var parser = MockHTTPRequestParser()
        let wire = Array("POST /t HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello".utf8)
        var got: [MockHTTPParsedRequest] = []
        for (i, byte) in wire.enumerated() {
            parser.feed([byte])
            let actions = drain(&parser)
            got += requests(actions)
            if i < wire.count - 1 { XCTAssertEqual(actions, [.needMore], "after byte \(i)") }
        }
        XCTAssertEqual(got.count, 1)
        XCTAssertEqual(got.first?.request.body, Data("hello".utf8))
        XCTAssertTrue(parser.isIdle)
    }

    func testChunkedBodyWithExtensionsAndTrailers() {
        let actions = parse("POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;name=v\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
        XCTAssertEqual(requests(actions).map(\.request.body), [Data("hello world".utf8)])
        XCTAssertEqual(actions.last, .needMore)
    }

    func testChunkedBodySplitAtEveryByte() {
        let wire = Array("POST /t HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n".utf8)
        var parser = MockHTTPRequestParser()
        var bodies: [Data] = []
        for byte in wire {
            parser.feed([byte])
            bodies += requests(drain(&parser)).map(\.request.body)
        }
        XCTAssertEqual(bodies, [Data("0123456789".utf8)])
    }

    func testPipelinedRequestsInOrder() {
        let actions = parse("GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhiGET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let rs = requests(actions)
        XCTAssertEqual(rs.map(\.request.target), ["/a", "/b", "/c"])
        XCTAssertEqual(rs.map(\.keepAlive), [true, true, false])
        XCTAssertEqual(rs[1].request.body, Data("hi".utf8))
    }

    func testHTTP10NeverKeepsAliveAndNeedsNoHost() {
        let rs = requests(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"))
        XCTAssertEqual(rs.count, 1)
        XCTAssertEqual(rs[0].minorVersion, 0)
        XCTAssertFalse(rs[0].keepAlive)
    }

    func testLeadingEmptyLinesIgnoredAndBareLFAccepted() {
        let rs = requests(parse("\r\n\nGET /x HTTP/1.1\nHost: y\n\n"))
        XCTAssertEqual(rs.map(\.request.target), ["/x"])
    }

    func testExpectContinueAskedOnceBeforeBody() {
        var parser = MockHTTPRequestParser()
        parser.feed(Array("PUT /u HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n".utf8))
        XCTAssertEqual(drain(&parser), [.sendContinue, .needMore])
        parser.feed(Array("abc".utf8))
        XCTAssertEqual(requests(drain(&parser)).map(\.request.body), [Data("abc".utf8)])
        // HTTP/1.0 clients do not understand 100 Continue: the expectation is ignored.
        var old = MockHTTPRequestParser()
        old.feed(Array("PUT /u HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n".utf8))
        XCTAssertEqual(drain(&old), [.needMore])
    }

    func testErrorStatuses() {
        let cases: [(String, String, Int)] = [
            ("bad request line", "GARBAGE\r\n\r\n", 400),
            ("two spaces", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            ("bad method char", "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400),
            ("bad version syntax", "GET / HTTX/1.1\r\nHost: x\r\n\r\n", 400),
            ("HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
            ("HTTP/1.2", "GET / HTTP/1.2\r\nHost: x\r\n\r\n", 505),
            ("header without colon", "GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400),
            ("space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
            ("obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n c\r\n\r\n", 400),
            ("bare CR", "GET / HTTP/1.1\r\nHost: x\rY: z\r\n\r\n", 400),
            ("NUL in value", "GET / HTTP/1.1\r\nHost: x\r\nA: b\u{0}c\r\n\r\n", 400),
            ("missing Host", "GET / HTTP/1.1\r\n\r\n", 400),
            ("two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            ("CL not a number", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 12a\r\n\r\n", 400),
            ("CL negative", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
            ("CL conflicting", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
            ("CL over limit", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1048577\r\n\r\n", 413),
            ("CL huge", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413),
            ("TE and CL", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            ("TE gzip", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
            ("TE chunked twice", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400),
            ("TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            ("chunk size not hex", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
            ("chunk size empty", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", 400),
            ("chunk data too long", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400),
            ("chunked over limit", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n100001\r\n", 413),
            ("chunk size overflow", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFFFFFF\r\n", 413),
        ]
        for (name, wire, status) in cases {
            let actions = parse(wire)
            XCTAssertEqual(errorStatus(actions), status, "\(name): \(actions)")
            XCTAssertTrue(requests(actions).isEmpty, name)
        }
    }

    func testErrorIsTerminalAndNamesTheProblem() {
        var parser = MockHTTPRequestParser()
        parser.feed(Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n".utf8))
        guard case .error(let e) = parser.next() else { return XCTFail("expected an error") }
        XCTAssertEqual(e.status, 400)
        XCTAssertTrue(e.reason.contains("Content-Length"), e.reason)
        parser.feed(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        XCTAssertEqual(parser.next(), .error(e))
    }

    func testHeaderSectionOverLimitIs431EvenWithoutLineEnd() {
        let limits = MockHTTPParserLimits(maxHeaderBytes: 64)
        XCTAssertEqual(errorStatus(parse("GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 80))", limits: limits)), 431)
        XCTAssertEqual(errorStatus(parse("GET /\(String(repeating: "a", count: 80))", limits: limits)), 431)
        let many = (0..<10).map { "H\($0): v\r\n" }.joined()
        XCTAssertEqual(errorStatus(parse("GET / HTTP/1.1\r\nHost: x\r\n\(many)\r\n", limits: limits)), 431)
        // Exactly at the limit is fine: 16 + 9 + 2 = 27 bytes.
        let exact = MockHTTPParserLimits(maxHeaderBytes: 27)
        XCTAssertEqual(requests(parse("GET / HTTP/1.1\r\nHost: x\r\n\r\n", limits: exact)).count, 1)
        XCTAssertEqual(errorStatus(parse("GET / HTTP/1.1\r\nHost: x\r\n\r\n", limits: MockHTTPParserLimits(maxHeaderBytes: 26))), 431)
    }

    func testDefaultLimitsAre16KiBAnd1MiB() {
        let limits = MockHTTPParserLimits()
        XCTAssertEqual(limits.maxHeaderBytes, 16_384)
        XCTAssertEqual(limits.maxBodyBytes, 1_048_576)
        XCTAssertEqual(requests(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n" + String(repeating: "b", count: 1_048_576))).first?.request.body.count, 1_048_576)
    }

    func testFinishReportsTruncation() {
        let truncated: [(String, String)] = [
            ("GET / HTT", "request line"),
            ("GET / HTTP/1.1\r\nHost: x\r\n", "header section"),
            ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc", "body"),
            ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "chunked body"),
            ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", "trailer"),
        ]
        for (wire, what) in truncated {
            var parser = MockHTTPRequestParser()
            parser.feed(Array(wire.utf8))
            XCTAssertEqual(drain(&parser).last, .needMore, what)
            guard case .error(let e) = parser.finish() else { XCTFail("\(what): expected 400"); continue }
            XCTAssertEqual(e.status, 400, what)
            XCTAssertTrue(e.reason.contains(what), "\(what) not in \(e.reason)")
        }
        var clean = MockHTTPRequestParser()
        XCTAssertEqual(clean.finish(), .needMore)
        clean.feed(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n\r\n".utf8))
        XCTAssertEqual(requests(drain(&clean)).count, 1)
        XCTAssertEqual(clean.finish(), .needMore)
    }

    func testIsIdleTracksPartialRequests() {
        var parser = MockHTTPRequestParser()
        XCTAssertTrue(parser.isIdle)
        parser.feed(Array("G".utf8))
        _ = parser.next()
        XCTAssertFalse(parser.isIdle)
        parser.feed(Array("ET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        XCTAssertEqual(requests(drain(&parser)).count, 1)
        XCTAssertTrue(parser.isIdle)
        XCTAssertEqual(parser.bufferedByteCount, 0)
    }
}
