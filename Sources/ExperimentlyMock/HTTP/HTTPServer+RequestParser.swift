import Foundation

/// Size limits the HTTP/1.1 request parser enforces.
///
/// Units are bytes. `maxHeaderBytes` bounds the request line plus the header section (and,
/// separately, a chunked body's trailer section); over it the parser answers 431 (RFC 6585
/// section 5). `maxBodyBytes` bounds the decoded body; over it the parser answers 413
/// (RFC 9110 section 15.5.14). `maxChunkLineBytes` bounds one chunk-size line with its
/// extensions; over it the parser answers 400.
public struct MockHTTPParserLimits: Sendable, Equatable {
    /// Most bytes allowed for the request line plus header section (default 16 KiB).
    public var maxHeaderBytes: Int
    /// Most decoded body bytes allowed (default 1 MiB).
    public var maxBodyBytes: Int
    /// Most bytes allowed for one chunk-size line including extensions (default 4 KiB).
    public var maxChunkLineBytes: Int

    /// Creates limits; every value is in bytes and must be positive.
    public init(maxHeaderBytes: Int = 16 * 1024, maxBodyBytes: Int = 1 << 20, maxChunkLineBytes: Int = 4 * 1024) {
        self.maxHeaderBytes = max(1, maxHeaderBytes)
        self.maxBodyBytes = max(0, maxBodyBytes)
        self.maxChunkLineBytes = max(8, maxChunkLineBytes)
    }
}

/// A protocol error found while parsing a request: the status to answer and why.
///
/// After an error the connection must be closed (RFC 9112 section 9.6): the framing of
/// anything that follows can no longer be trusted.
public struct MockHTTPParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The status to answer: 400, 408, 413, 431, 501 or 505.
    public var status: Int
    /// A short human-readable reason naming what was wrong and where.
    public var reason: String

    /// Creates an error with a status and a reason.
    public init(status: Int, reason: String) {
        self.status = status
        self.reason = reason
    }

    /// `"<status>: <reason>"`, for logs and test failures.
    public var description: String { "\(status): \(reason)" }
}

/// One complete request as parsed from the wire, with the framing facts the server needs.
public struct MockHTTPParsedRequest: Sendable, Equatable {
    /// The request as the handler sees it (raw target, headers in wire order and spelling,
    /// decoded body).
    public var request: MockRequest
    /// The minor HTTP version: 1 for HTTP/1.1, 0 for HTTP/1.0.
    public var minorVersion: Int
    /// Whether the connection may stay open after the response (RFC 9112 section 9.3):
    /// HTTP/1.1 without `Connection: close`; HTTP/1.0 never (this server does not do 1.0 keep-alive).
    public var keepAlive: Bool
}

/// The incremental HTTP/1.1 request parser: a value-type state machine, bytes in, actions out.
///
/// Feed bytes with `feed(_:)`, then call `next()` until it returns `.needMore`; call
/// `finish()` when the peer closed its sending side. No I/O happens here, so every framing path
/// is testable without sockets. Rules follow RFC 9112 (message syntax and framing) and
/// RFC 9110 (semantics): request-line and header syntax (400), `Host` required once in
/// HTTP/1.1 (400), `Content-Length` digits only and consistent (400), `Transfer-Encoding`
/// with `Content-Length` or in HTTP/1.0 (400), any coding but `chunked` (501), versions other
/// than 1.0 and 1.1 (505), body over the limit (413), header section over the limit (431),
/// a method it does not recognize, compared case-sensitively (`get` is not `GET`), 501
/// (RFC 9110 section 9.1). An absolute-form target (`http://host/path`, RFC 9112 section 3.2.2)
/// reaches the handler in origin form (`/path`).
/// Leading empty lines before a request line are ignored (RFC 9112 section 2.2); a bare LF is
/// accepted as a line terminator, a bare CR is not.
public struct MockHTTPRequestParser: Sendable {
    /// What the caller must do next.
    public enum Action: Sendable, Equatable {
        /// No complete request is buffered: read more bytes and `feed` them.
        case needMore
        /// The request head asked for `Expect: 100-continue`: write `HTTP/1.1 100 Continue`
        /// and call `next()` again (RFC 9110 section 10.1.1). Returned at most once per request.
        case sendContinue
        /// A whole request was parsed; call `next()` again for pipelined ones.
        case request(MockHTTPParsedRequest)
        /// The input is invalid: answer `status`, then close the connection. Terminal.
        case error(MockHTTPParseError)
    }

    private enum State: Sendable {
        case requestLine
        case headers
        case body(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkDataEnd
        case trailers
        case failed(MockHTTPParseError)
    }

    private struct Head: Sendable {
        var method = ""
        var target = ""
        var minorVersion = 1
        var headers: [(name: String, value: String)] = []
        var keepAlive = true
        var expectsContinue = false
    }

    /// The limits this parser enforces.
    public let limits: MockHTTPParserLimits
    private var buffer: [UInt8] = []
    private var start = 0
    private var scanFrom = 0
    private var state: State = .requestLine
    private var head = Head()
    private var body: [UInt8] = []
    private var headBytes = 0
    private var trailerBytes = 0
    private var leadingEmptyLines = 0

    /// Creates a parser in the idle state with the given limits.
    public init(limits: MockHTTPParserLimits = MockHTTPParserLimits()) {
        self.limits = limits
    }

    /// True when no byte of a next request has been received (the connection is idle).
    public var isIdle: Bool {
        if case .requestLine = state, start == buffer.count, headBytes == 0 { return true }
        return false
    }

    /// The number of received bytes not yet consumed by a parsed request.
    public var bufferedByteCount: Int { buffer.count - start }

    /// The request whose head is complete while its body is still arriving (method, target,
    /// headers, and the body bytes so far), or nil in any other state.
    public var headAwaitingBody: MockRequest? {
        switch state {
        case .body, .chunkSize, .chunkData, .chunkDataEnd, .trailers:
            return MockRequest(method: head.method, target: head.target, headers: head.headers, body: Data(body))
        default:
            return nil
        }
    }

    /// The body bytes the request being received may still hold in memory, once its head is
    /// complete: its `Content-Length` (the whole body, received or not), or `limits.maxBodyBytes`
    /// for a chunked body; nil before the head is complete and between requests. The server
    /// reserves this against its body budget (`MockHTTPServer.Configuration.bodyBudgetBytes`).
    public var bodyBytesToReserve: Int? {
        switch state {
        case .body(let remaining): return body.count + remaining
        case .chunkSize, .chunkData, .chunkDataEnd, .trailers: return limits.maxBodyBytes
        default: return nil
        }
    }

    /// Appends received bytes; call `next()` afterwards.
    public mutating func feed<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        if case .failed = state { return }
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            scanFrom -= start
            start = 0
        } else if start > 4096 && start * 2 > buffer.count {
            buffer.removeSubrange(0..<start)
            scanFrom -= start
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Tells the parser the peer closed its side: returns `.error(400)` when a request was
    /// partly received (truncated head or body), else `.needMore` (a clean end between requests).
    public mutating func finish() -> Action {
        if case .failed(let e) = state { return .error(e) }
        if isIdle { return .needMore }
        // Leading empty lines only: still a clean end.
        if case .requestLine = state, buffer[start...].allSatisfy({ $0 == 0x0D || $0 == 0x0A }), head.method.isEmpty {
            return .needMore
        }
        let what: String
        switch state {
        case .requestLine: what = "request line"
        case .headers: what = "header section"
        case .body(let remaining): what = "body (\(remaining) of Content-Length bytes missing)"
        case .chunkSize, .chunkData, .chunkDataEnd: what = "chunked body"
        case .trailers: what = "chunked trailer section"
        case .failed: what = "request"
        }
        return fail(400, "connection closed in the middle of the \(what)")
    }

    /// Advances the state machine over the buffered bytes and says what to do next.
    public mutating func next() -> Action {
        while true {
            switch state {
            case .failed(let e):
                return .error(e)

            case .requestLine:
                guard let line = nextLine(limit: limits.maxHeaderBytes - headBytes) else {
                    return lineShortage(status: 431, what: "request line and header section exceed \(limits.maxHeaderBytes) bytes")
                }
                if case .failed(let e) = state { return .error(e) }
                guard let line else { return .needMore }
                if line.isEmpty {
                    // RFC 9112 section 2.2: ignore at least one empty line before a request line.
                    leadingEmptyLines += 1
                    guard leadingEmptyLines <= 8 else { return fail(400, "more than 8 empty lines before the request line") }
                    headBytes = 0
                    continue
                }
                if let e = parseRequestLine(line) { return fail(e) }
                state = .headers

            case .headers:
                guard let line = nextLine(limit: limits.maxHeaderBytes - headBytes) else {
                    return lineShortage(status: 431, what: "header section exceeds \(limits.maxHeaderBytes) bytes")
                }
                if case .failed(let e) = state { return .error(e) }
                guard let line else { return .needMore }
                if line.isEmpty {
                    if let action = finishHead() { return action }
                    continue
                }
                if let e = parseHeaderLine(line) { return fail(e) }

            case .body(let remaining):
                let available = buffer.count - start
                if available == 0 && remaining > 0 { return .needMore }
                let take = min(available, remaining)
                body.append(contentsOf: buffer[start..<(start + take)])
                start += take
                scanFrom = start
                if remaining - take > 0 {
                    state = .body(remaining: remaining - take)
                    return .needMore
                }
                return complete()

            case .chunkSize:
                guard let line = nextLine(limit: limits.maxChunkLineBytes) else {
                    return fail(400, "chunk-size line exceeds \(limits.maxChunkLineBytes) bytes")
                }
                if case .failed(let e) = state { return .error(e) }
                guard let line else { return .needMore }
                headBytes = 0
                var digits = line[...]
                if let semi = digits.firstIndex(of: UInt8(ascii: ";")) { digits = digits[..<semi] }
                while let last = digits.last, last == 0x20 || last == 0x09 { digits = digits.dropLast() }
                guard !digits.isEmpty else { return fail(400, "empty chunk size") }
                var size = 0
                for byte in digits {
                    guard let v = hexValue(byte) else {
                        return fail(400, "chunk size is not hexadecimal: \(printable(Array(digits)))")
                    }
                    if size > (limits.maxBodyBytes - body.count) {
                        return fail(413, "chunked body exceeds \(limits.maxBodyBytes) bytes")
                    }
                    size = size * 16 + v
                }
                if size > limits.maxBodyBytes - body.count {
                    return fail(413, "chunked body exceeds \(limits.maxBodyBytes) bytes")
                }
                if size == 0 {
                    trailerBytes = 0
                    state = .trailers
                } else {
                    state = .chunkData(remaining: size)
                }

            case .chunkData(let remaining):
                let available = buffer.count - start
                if available == 0 { return .needMore }
                let take = min(available, remaining)
                body.append(contentsOf: buffer[start..<(start + take)])
                start += take
                scanFrom = start
                state = remaining - take > 0 ? .chunkData(remaining: remaining - take) : .chunkDataEnd

            case .chunkDataEnd:
                let available = buffer.count - start
                if available == 0 { return .needMore }
                if buffer[start] == 0x0A {
                    start += 1
                } else if buffer[start] == 0x0D {
                    if available < 2 { return .needMore }
                    guard buffer[start + 1] == 0x0A else { return fail(400, "chunk data not followed by CRLF") }
                    start += 2
                } else {
                    return fail(400, "chunk data longer than its chunk size (no CRLF after the data)")
                }
                scanFrom = start
                state = .chunkSize

            case .trailers:
                guard let line = nextLine(limit: limits.maxHeaderBytes - trailerBytes) else {
                    return lineShortage(status: 431, what: "trailer section exceeds \(limits.maxHeaderBytes) bytes")
                }
                if case .failed(let e) = state { return .error(e) }
                guard let line else { return .needMore }
                if line.isEmpty { return complete() }
                // Trailer fields are checked for syntax and otherwise discarded (RFC 9110 section 6.5).
                guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0,
                      line[..<colon].allSatisfy(isTokenChar)
                else { return fail(400, "malformed trailer field: \(printable(line))") }
            }
        }
    }

    // MARK: - Steps

    /// Returns the next line without its terminator, `.some(nil)` when no full line is buffered
    /// yet, or `nil` when the pending line is already longer than `limit` bytes. Sets the
    /// failed state on a bare CR.
    private mutating func nextLine(limit: Int) -> [UInt8]?? {
        var i = max(scanFrom, start)
        let end = buffer.count
        while i < end {
            if buffer[i] == 0x0A {
                var lineEnd = i
                if lineEnd > start && buffer[lineEnd - 1] == 0x0D { lineEnd -= 1 }
                let length = i + 1 - start
                if length > limit { return nil }
                let line = Array(buffer[start..<lineEnd])
                if line.contains(0x0D) {
                    state = .failed(MockHTTPParseError(status: 400, reason: "bare CR inside a line: \(printable(line))"))
                    return .some(nil)
                }
                headBytes += length
                trailerBytes += length
                start = i + 1
                scanFrom = start
                return .some(line)
            }
            i += 1
        }
        scanFrom = end
        if end - start > limit { return nil }
        return .some(nil)
    }

    private mutating func lineShortage(status: Int, what: String) -> Action {
        fail(status, what)
    }

    private mutating func parseRequestLine(_ line: [UInt8]) -> MockHTTPParseError? {
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
            return MockHTTPParseError(status: 400, reason: "malformed request line (want `METHOD SP target SP HTTP/1.1`): \(printable(line))")
        }
        guard parts[0].allSatisfy(isTokenChar) else {
            return MockHTTPParseError(status: 400, reason: "invalid method in request line: \(printable(Array(parts[0])))")
        }
        guard parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return MockHTTPParseError(status: 400, reason: "invalid character in request target: \(printable(Array(parts[1])))")
        }
        let version = Array(parts[2])
        // HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 section 2.3)
        guard version.count == 8, Array(version[0..<5]) == Array("HTTP/".utf8),
              isDigit(version[5]), version[6] == UInt8(ascii: "."), isDigit(version[7])
        else {
            return MockHTTPParseError(status: 400, reason: "malformed HTTP version in request line: \(printable(version))")
        }
        let major = Int(version[5] - 0x30), minor = Int(version[7] - 0x30)
        guard major == 1, minor == 0 || minor == 1 else {
            return MockHTTPParseError(status: 505, reason: "HTTP version \(major).\(minor) is not supported (only 1.0 and 1.1)")
        }
        let method = String(decoding: parts[0], as: UTF8.self)
        guard Self.knownMethods.contains(method) else {
            // RFC 9110 section 9.1: the method token is case-sensitive; an unrecognized method is 501.
            let hint = Self.knownMethods.contains(method.uppercased()) ? " (methods are case-sensitive: did you mean \(method.uppercased())?)" : ""
            return MockHTTPParseError(status: 501, reason: "method \(printable(Array(parts[0]))) is not implemented\(hint)")
        }
        head.method = method
        switch Self.originForm(String(decoding: parts[1], as: UTF8.self)) {
        case .success(let target): head.target = target
        case .failure(let error): return error
        }
        head.minorVersion = minor
        return nil
    }

    /// The methods this server recognizes (RFC 9110 section 9.3, PATCH from RFC 5789), exact case.
    static let knownMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]

    /// The request target in origin form: an absolute-form target (`http://host:port/path?q`,
    /// RFC 9112 section 3.2.2) becomes `/path?q` (`/` when the path is empty); origin-form and
    /// other forms pass unchanged. An `http`/`https` target without an authority is a 400.
    static func originForm(_ target: String) -> Result<String, MockHTTPParseError> {
        guard let schemeEnd = target.range(of: "://") else { return .success(target) }
        let scheme = target[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else {
            if target.hasPrefix("/") { return .success(target) }
            return .failure(MockHTTPParseError(status: 400, reason: "absolute-form request target with scheme \(scheme.debugDescription): only http and https are served"))
        }
        let rest = target[schemeEnd.upperBound...]
        let pathStart = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        guard pathStart > rest.startIndex else {
            return .failure(MockHTTPParseError(status: 400, reason: "absolute-form request target without a host: \(target.debugDescription)"))
        }
        let path = rest[pathStart...]
        if path.isEmpty { return .success("/") }
        return .success(path.hasPrefix("?") ? "/" + path : String(path))
    }

    private mutating func parseHeaderLine(_ line: [UInt8]) -> MockHTTPParseError? {
        if line.first == 0x20 || line.first == 0x09 {
            return MockHTTPParseError(status: 400, reason: "obsolete line folding in header section: \(printable(line))")
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else {
            return MockHTTPParseError(status: 400, reason: "header line without a colon: \(printable(line))")
        }
        let name = line[..<colon]
        guard !name.isEmpty, name.allSatisfy(isTokenChar) else {
            return MockHTTPParseError(status: 400, reason: "invalid header field name: \(printable(Array(name)))")
        }
        var value = line[(colon + 1)...]
        while let f = value.first, f == 0x20 || f == 0x09 { value = value.dropFirst() }
        while let l = value.last, l == 0x20 || l == 0x09 { value = value.dropLast() }
        guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
            return MockHTTPParseError(status: 400, reason: "control character in the value of header \(printable(Array(name)))")
        }
        // obs-text (0x80-0xFF) that is not UTF-8 is kept as ISO-8859-1 (RFC 9110 section 5.5).
        let valueString = String(bytes: value, encoding: .utf8) ?? String(value.map { Character(Unicode.Scalar($0)) })
        head.headers.append((name: String(decoding: name, as: UTF8.self), value: valueString))
        return nil
    }

    /// Decides the body framing once the empty line after the headers arrived.
    private mutating func finishHead() -> Action? {
        var contentLength: Int?
        var transferCodings: [String] = []
        var sawTransferEncoding = false
        var hostCount = 0
        var connectionTokens: [String] = []
        for (name, value) in head.headers {
            switch name.lowercased() {
            case "content-length":
                for item in value.split(separator: ",", omittingEmptySubsequences: false) {
                    let digits = item.trimmingCharacters(in: .whitespaces)
                    guard !digits.isEmpty, digits.utf8.allSatisfy(isDigit) else {
                        return fail(400, "Content-Length is not a decimal number: \(value.debugDescription)")
                    }
                    // Too many digits to fit means far over any body limit.
                    let n = digits.count > 18 ? Int.max : Int(digits)!
                    if let existing = contentLength, existing != n {
                        return fail(400, "conflicting Content-Length values: \(existing) and \(digits)")
                    }
                    contentLength = n
                }
            case "transfer-encoding":
                sawTransferEncoding = true
                for item in value.split(separator: ",") {
                    let coding = item.trimmingCharacters(in: .whitespaces).lowercased()
                    if !coding.isEmpty { transferCodings.append(coding) }
                }
            case "host":
                hostCount += 1
            case "connection":
                connectionTokens += value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            case "expect":
                // RFC 9110 section 10.1.1: ignore the expectation in an HTTP/1.0 request.
                if head.minorVersion == 1 && value.trimmingCharacters(in: .whitespaces).lowercased() == "100-continue" {
                    head.expectsContinue = true
                }
            default:
                break
            }
        }
        if head.minorVersion == 1 && hostCount != 1 {
            return fail(400, hostCount == 0 ? "HTTP/1.1 request without a Host header" : "more than one Host header")
        }
        head.keepAlive = head.minorVersion == 1 && !connectionTokens.contains("close")
        if sawTransferEncoding {
            if head.minorVersion == 0 {
                return fail(400, "Transfer-Encoding in an HTTP/1.0 request")
            }
            if contentLength != nil {
                return fail(400, "both Transfer-Encoding and Content-Length present")
            }
            if let unsupported = transferCodings.first(where: { $0 != "chunked" }) {
                return fail(501, "unsupported transfer coding \(unsupported.debugDescription) (only chunked)")
            }
            guard transferCodings.count == 1 else {
                return fail(400, transferCodings.isEmpty ? "empty Transfer-Encoding" : "chunked applied more than once")
            }
            headBytes = 0
            state = .chunkSize
            return head.expectsContinue ? .sendContinue : nil
        }
        let length = contentLength ?? 0
        if length > limits.maxBodyBytes {
            return fail(413, "Content-Length \(length == Int.max ? "(over 18 digits)" : String(length)) exceeds the body limit of \(limits.maxBodyBytes) bytes")
        }
        if length == 0 { return complete() }
        body.reserveCapacity(length) // one allocation of the declared size, not doublings
        state = .body(remaining: length)
        return head.expectsContinue ? .sendContinue : nil
    }

    private mutating func complete() -> Action {
        let parsed = MockHTTPParsedRequest(
            request: MockRequest(method: head.method, target: head.target, headers: head.headers, body: Data(body)),
            minorVersion: head.minorVersion,
            keepAlive: head.keepAlive)
        head = Head()
        body = []
        headBytes = 0
        trailerBytes = 0
        leadingEmptyLines = 0
        state = .requestLine
        return .request(parsed)
    }

    private mutating func fail(_ status: Int, _ reason: String) -> Action {
        fail(MockHTTPParseError(status: status, reason: reason))
    }

    private mutating func fail(_ error: MockHTTPParseError) -> Action {
        state = .failed(error)
        return .error(error)
    }
}

// MARK: - Byte classes (RFC 9110 section 5.6.2)

private func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

private func isTokenChar(_ b: UInt8) -> Bool {
    switch b {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), 0x30...0x39: return true
    default: return "!#$%&'*+-.^_`|~".utf8.contains(b)
    }
}

private func hexValue(_ b: UInt8) -> Int? {
    switch b {
    case 0x30...0x39: return Int(b - 0x30)
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(b - UInt8(ascii: "a") + 10)
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(b - UInt8(ascii: "A") + 10)
    default: return nil
    }
}

/// A short, escaped rendering of wire bytes for error messages (at most 80 bytes shown).
private func printable(_ bytes: [UInt8]) -> String {
    var s = ""
    for b in bytes.prefix(80) {
        if b >= 0x20 && b < 0x7F && b != UInt8(ascii: "\\") { s.unicodeScalars.append(Unicode.Scalar(b)) }
        else { s += String(format: "\\x%02X", b) }
    }
    if bytes.count > 80 { s += "…" }
    return "\"" + s + "\""
}
