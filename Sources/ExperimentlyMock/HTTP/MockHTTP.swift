import Foundation

/// One HTTP request as the mock backend sees it, independent of the transport that carried it.
///
/// Shapes: `target` is the raw request target as sent on the wire (path plus `?query`, still
/// percent-encoded); `headers` keep the wire order and spelling. Header lookup is
/// case-insensitive (RFC 9110 section 5.1).
public struct MockRequest: Sendable, Equatable {
    /// The request method, upper case (`GET`, `POST`).
    public var method: String
    /// The raw request target: percent-encoded path, then `?` and the raw query when present.
    public var target: String
    /// Header fields in the order received, names as spelled on the wire.
    public var headers: [(name: String, value: String)]
    /// The request body bytes (empty when there is none).
    public var body: Data
    /// The client's address and port (`127.0.0.1:54321`) when the request came over TCP, so a
    /// journal tells the connections (and so the clients) apart; `nil` in process. Not part of
    /// equality.
    public var peer: String? = nil
    /// Where the request arrived over TCP (set by `MockHTTPServer`); nil in process. Not part
    /// of equality: it describes the carrier, not the request.
    public var connection: MockConnectionInfo?

    /// Creates a request.
    public init(method: String, target: String, headers: [(name: String, value: String)] = [], body: Data = Data(),
                connection: MockConnectionInfo? = nil) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.connection = connection
    }

    /// The raw (still percent-encoded) path part of `target`.
    public var rawPath: String {
        if let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) { return String(target[..<q]) }
        return target
    }

    /// The raw (still percent-encoded) query after `?`, or `nil` when the target has none.
    public var rawQuery: String? {
        guard let q = target.utf8.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        return String(target[target.index(after: q)...])
    }

    /// The value of the first header named `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.equalsIgnoringASCIICase(name) }?.value
    }

    /// Equal method, target, body, and header names and values in order.
    public static func == (lhs: MockRequest, rhs: MockRequest) -> Bool {
        // Byte-exact (never Swift String ==, which is canonical equivalence): two requests whose
        // targets or headers differ only by NFC/NFD are different requests.
        lhs.method.utf8.elementsEqual(rhs.method.utf8) && lhs.target.utf8.elementsEqual(rhs.target.utf8) && lhs.body == rhs.body
            && lhs.headers.count == rhs.headers.count
            && zip(lhs.headers, rhs.headers).allSatisfy { $0.name.utf8.elementsEqual($1.name.utf8) && $0.value.utf8.elementsEqual($1.value.utf8) }
    }
}

/// Where a request arrived over loopback TCP: the listener, the connection and the request's
/// place on it. ``MockBackend`` uses it to recognise a transport's silent retry of a request it
/// dropped on a reused keep-alive connection (Documentation/CrossSDK.md, "Transport retries").
public struct MockConnectionInfo: Sendable, Equatable {
    /// The listening server, unique within the process.
    public var listener: Int
    /// The connection's number on that listener, increasing in accept order.
    public var connection: UInt64
    /// How many requests the connection carried before this one (0: a fresh connection).
    public var index: Int
    /// True when the transport can no longer answer the request: it arrived complete before
    /// the server's shutdown but is pipelined behind a request the shutdown left unanswered, or
    /// was still buffered at the forced close. The handler sees it only to journal it;
    /// ``MockBackend`` records it answered 503 `mock backend shut down` without processing it.
    public var unanswerable: Bool

    /// Creates the description of one request's connection.
    public init(listener: Int, connection: UInt64, index: Int, unanswerable: Bool = false) {
        self.listener = listener
        self.connection = connection
        self.index = index
        self.unanswerable = unanswerable
    }
}

/// One HTTP response produced by the mock backend.
public struct MockResponse: Sendable, Equatable {
    /// The status code (RFC 9110 section 15).
    public var status: Int
    /// Header fields in the order they are sent.
    public var headers: [(name: String, value: String)]
    /// The body bytes.
    public var body: Data

    /// Creates a response.
    public init(status: Int, headers: [(name: String, value: String)] = [], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of the first header named `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.equalsIgnoringASCIICase(name) }?.value
    }

    /// Equal status, body, and header names and values in order.
    public static func == (lhs: MockResponse, rhs: MockResponse) -> Bool {
        lhs.status == rhs.status && lhs.body == rhs.body
            && lhs.headers.map(\.name) == rhs.headers.map(\.name)
            && lhs.headers.map(\.value) == rhs.headers.map(\.value)
    }
}

/// What a transport must do with a request once the backend (and its fault script) decided.
public enum MockOutcome: Sendable, Equatable {
    /// Send this response whole.
    case respond(MockResponse)
    /// Close the connection (TCP) or fail the load with a connection-lost error (in-process)
    /// without sending anything.
    case dropBeforeResponse
    /// Send the status line, the headers (with the full `Content-Length`) and only the first
    /// `bodyBytes` bytes of the body, then close the connection / fail the load.
    case dropMidBody(MockResponse, bodyBytes: Int)
    /// Never answer: over TCP the connection stays silent until the client gives up or the
    /// server shuts down; in-process the load fails with a timed-out error (URLError -1001),
    /// because URLSession on Linux does not time out custom protocols.
    case timeout
}

/// Anything that can answer mock requests; transports (the in-process `URLProtocol`, the loopback
/// TCP server) are thin adapters over one of these.
public protocol MockRequestHandler: Sendable {
    /// Answers one request. May suspend (a delay or a hold fault) before returning.
    func handle(_ request: MockRequest) async -> MockOutcome
}
