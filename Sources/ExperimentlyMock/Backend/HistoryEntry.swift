import Foundation

/// Identifies one parked (held) request.
public struct HoldID: Hashable, Codable, Sendable, CustomStringConvertible {
    /// The sequential number, from 1, in the order requests were held.
    public let rawValue: Int
    /// Creates an id.
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// Encodes as the bare integer.
    public func encode(to encoder: Encoder) throws { var c = encoder.singleValueContainer(); try c.encode(rawValue) }
    /// Decodes from a bare integer.
    public init(from decoder: Decoder) throws { rawValue = try decoder.singleValueContainer().decode(Int.self) }
    /// "hold#N".
    public var description: String { "hold#\(rawValue)" }
}

/// The fault a request met, as recorded in history.
public struct AppliedFault: Codable, Sendable, Equatable {
    /// The rule id.
    public var id: FaultID
    /// The rule's name, if any.
    public var name: String?
    /// The action kind (`respond`, `hold`, `timeout`, ...).
    public var action: String
    /// Which match of the rule this request was (1-based).
    public var occurrence: Int
}

/// A response as recorded in history.
public struct RecordedResponse: Codable, Sendable, Equatable {
    /// Status code.
    public var status: Int
    /// Header fields in send order.
    public var headers: [HeaderField]
    /// Body bytes (as sent; for `drop_mid_body`, the full body that was cut); only the first
    /// bytes when `bodySize` is set.
    public var body: Data
    /// The whole body's size in bytes when `body` holds only a prefix (streamed history keeps
    /// large bodies as size + MD5 + prefix); nil when `body` is whole.
    public var bodySize: Int?
    /// The lowercase hex MD5 of the whole body when `body` holds only a prefix.
    public var bodyMD5: String?

    /// Creates a record of `response`.
    public init(_ response: MockResponse) {
        status = response.status
        headers = response.headers.map { HeaderField(name: $0.name, value: $0.value) }
        body = response.body
    }

    enum CodingKeys: String, CodingKey { case status, headers, body, bodySize = "body_size", bodyMD5 = "body_md5" }

    /// The body as UTF-8 text (invalid bytes replaced).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// One request the backend saw and what it did with it (the mock's side of the Jepsen-style history).
public struct HistoryEntry: Codable, Sendable, Equatable {
    /// Sequence number, from 1, in arrival order.
    public var seq: Int
    /// Arrival time on the backend's clock.
    public var receivedAt: Date
    /// When the outcome was returned (nil while in flight).
    public var answeredAt: Date?
    /// Request method.
    public var method: String
    /// Raw (percent-encoded) path.
    public var path: String
    /// Raw query after `?`, nil when absent.
    public var query: String?
    /// Request headers as received, `X-API-Key` redacted to `***`, routing headers removed (and,
    /// in a backend created with a ``SecretRedactor``, every configured key masked everywhere).
    public var headers: [HeaderField]
    /// Request body bytes; only the first bytes when `bodySize` is set.
    public var body: Data
    /// The body parsed as JSON, nil when empty, invalid, or kept only as a prefix.
    public var json: JSONValue?
    /// The route that handled it (`POST /api/v1/tracking/assign`), nil when none did.
    public var route: String?
    /// Why no route matched: the nearest route and what differed.
    public var note: String?
    /// The fault applied, if any.
    public var fault: AppliedFault?
    /// The hold it sat in, if any.
    public var hold: HoldID?
    /// The response given (nil for timeouts, drops before the response, and while in flight).
    public var response: RecordedResponse?
    /// `respond`, `drop_before_response`, `drop_mid_body`, `timeout`; nil while in flight.
    public var outcome: String?
    /// True when the client cancelled the load (URLProtocol `stopLoading`, or the TCP client
    /// closed or reset its connection while the request was parked) before it finished.
    public var cancelled: Bool
    /// The whole request body's size in bytes when `body` holds only a prefix (streamed history
    /// keeps large bodies as size + MD5 + prefix); nil when `body` is whole.
    public var bodySize: Int? = nil
    /// The lowercase hex MD5 of the whole request body when `body` holds only a prefix.
    public var bodyMD5: String? = nil
    /// The client's `address:port` over TCP (``MockRequest/peer``), nil in process.
    public var peer: String? = nil
    /// Set when this entry is a transport's silent retry of request `transportRetryOf` (the
    /// same request attempt resent on another connection after the mock dropped it on a reused
    /// keep-alive connection, as curl does): it got the same drop, was not processed and did
    /// not count for any fault rule. Nil for every other request.
    public var transportRetryOf: Int? = nil
    /// Which key of the fixtures' `api_keys` the request's `X-API-Key` is (its index there, the
    /// key compared by Unicode scalars, revoked or not), `-1` for a key the fixtures lack, nil when
    /// it sent no `X-API-Key`: which key a request carried, told without the key (a redacted entry
    /// shows every key as `***`).
    public var apiKeyIndex: Int? = nil

    enum CodingKeys: String, CodingKey {
        case seq, receivedAt = "received_at", answeredAt = "answered_at", method, path, query, headers, body, json, route, note, fault, hold, response, outcome, cancelled
        case bodySize = "body_size", bodyMD5 = "body_md5", peer, transportRetryOf = "transport_retry_of", apiKeyIndex = "api_key_index"
    }
}

/// A request currently parked on a hold fault, or silent on a timeout fault over TCP (``action``).
public struct HeldRequest: Codable, Sendable, Equatable {
    /// The hold id to pass to ``MockBackend/release(_:with:)``.
    public var id: HoldID
    /// The history sequence number of the request.
    public var seq: Int
    /// Request method.
    public var method: String
    /// Raw path.
    public var path: String
    /// The `user_id` from the query or the JSON body, if any.
    public var userID: String?
    /// The hold label from the fault rule, if any.
    public var label: String?
    /// The fault rule that parked it.
    public var fault: FaultID
    /// The fault action that parked it: `hold` (until released), or `timeout` (a timeout fault
    /// over TCP: the connection stays silent until the client gives up or the server shuts
    /// down; it cannot be released). Missing in JSON written before it existed: `hold`.
    public var action: String = "hold"

    enum CodingKeys: String, CodingKey { case id, seq, method, path, userID = "user_id", label, fault, action }

    /// True for a request parked by a timeout fault over TCP (``action`` `timeout`).
    public var isSilentTimeout: Bool { action == "timeout" }
}

extension HeldRequest {
    /// Decodes a held request; `action` defaults to `hold` when absent (older journals).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(HoldID.self, forKey: .id)
        seq = try c.decode(Int.self, forKey: .seq)
        method = try c.decode(String.self, forKey: .method)
        path = try c.decode(String.self, forKey: .path)
        userID = try c.decodeIfPresent(String.self, forKey: .userID)
        label = try c.decodeIfPresent(String.self, forKey: .label)
        fault = try c.decode(FaultID.self, forKey: .fault)
        action = try c.decodeIfPresent(String.self, forKey: .action) ?? "hold"
    }
}

/// What the mock reports to an observer, synchronously, as requests move through it.
public enum MockEvent: Sendable, Equatable {
    /// Why a request is parked.
    public enum Parked: Sendable, Equatable {
        /// On a hold until released.
        case hold(HoldID)
        /// In a delay of this many seconds of the mock clock.
        case delay(seconds: TimeInterval)
        /// In an in-process timeout of this many seconds of the mock clock.
        case timeout(seconds: TimeInterval)
        /// A timeout fault over TCP: silent (no byte is sent) until the client gives up (closes
        /// or resets the connection, then `cancelled` and `answered` with outcome `timeout`
        /// follow) or the backend shuts down; listed in ``MockBackend/heldRequests`` under this
        /// id with action `timeout`, and not releasable.
        case silent(HoldID)
    }
    /// A request arrived and got sequence number `seq`.
    case received(seq: Int)
    /// The request is parked and will not progress on its own (hold) or only with the clock.
    case parked(seq: Int, Parked)
    /// The outcome was returned to the transport (`outcome` as in ``HistoryEntry/outcome``).
    case answered(seq: Int, outcome: String, status: Int?)
    /// The client cancelled the load (URLProtocol `stopLoading`) before its outcome was
    /// delivered; the request stays in the backend (a hold stays releasable).
    case cancelled(seq: Int)
}

/// The strict lifecycle report of ``MockBackend/shutdown()``.
public struct ShutdownReport: Codable, Sendable, Equatable {
    /// Holds never released (they were failed with a dropped connection by the shutdown).
    public var unreleasedHolds: [HeldRequest]
    /// One-shot fault rules never used up.
    public var unusedFaults: [UnusedFault]
    /// Requests still inside the backend when it shut down (including the unreleased holds).
    public var inFlight: Int

    /// True when nothing was left over.
    public var isClean: Bool { unreleasedHolds.isEmpty && unusedFaults.isEmpty }

    enum CodingKeys: String, CodingKey { case unreleasedHolds = "unreleased_holds", unusedFaults = "unused_faults", inFlight = "in_flight" }
}

/// How much history a streaming ``MockBackend`` keeps in memory (``MockBackend/streamHistory(_:to:)``).
///
/// Counts are entries; sizes are bytes. The defaults keep memory bounded (well under 256 MB)
/// whatever the load, with 1 MiB request bodies.
public struct HistoryRetention: Sendable, Equatable {
    /// Most finished history entries kept in memory (requests still in flight are always kept).
    public var window: Int
    /// Bodies longer than this are kept as size + MD5 + their first `bodyPrefixBytes` bytes.
    public var bodyPrefixBytes: Int
    /// Most stored events and exposures kept in the backend state (sticky assignments are all kept).
    public var stateWindow: Int

    /// Creates a retention policy; see each property for units.
    public init(window: Int = 256, bodyPrefixBytes: Int = 4096, stateWindow: Int = 16) {
        self.window = max(1, window)
        self.bodyPrefixBytes = max(0, bodyPrefixBytes)
        self.stateWindow = max(1, stateWindow)
    }
}

/// The sink and policy of a streaming backend, with a group that counts sink calls in progress.
struct HistoryStream: Sendable {
    let retention: HistoryRetention
    let sink: @Sendable (HistoryEntry) -> Void
    let group = DispatchGroup()

    /// `body` as kept in memory: whole when short, else its prefix with the whole size and MD5.
    static func keep(_ body: Data, prefix: Int) -> (body: Data, size: Int?, md5: String?) {
        guard body.count > prefix else { return (body, nil, nil) }
        let md5 = MockMD5.digest(body).map { String(format: "%02x", $0) }.joined()
        return (Data(body.prefix(prefix)), body.count, md5)
    }
}
