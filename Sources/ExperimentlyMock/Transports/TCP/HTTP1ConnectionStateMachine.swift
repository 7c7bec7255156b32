import Foundation

/// The life of one HTTP/1.1 server connection as a value: events in, actions out, no I/O.
///
/// `MockHTTPServer`'s event loop owns the socket and feeds this machine what happened (bytes
/// received, the peer closed, the handler answered, a deadline passed, shutdown began); the
/// machine answers with what to do (write bytes, hand a request to the handler, cancel it,
/// close). Times are monotonic seconds passed in by the caller, so every path is testable
/// without sockets or clocks.
///
/// Rules: requests on one connection are answered one at a time and in order (pipelined
/// requests wait in the parser's buffer, RFC 9112 section 9.3.2); keep-alive per RFC 9112
/// section 9.3; protocol errors are answered with `Connection: close` and a lingering close
/// (RFC 9112 section 9.6); a request that is not complete within `readTimeout` seconds of its
/// first byte (or a new connection silent that long) gets 408; an idle keep-alive connection is
/// closed silently after `idleTimeout` seconds. A peer that leaves while its request is still
/// with the handler cancels that request (`cancelRequest`): a reset at once, an end of stream
/// once a `100 Continue` probe shows that the peer closed rather than half-closed (a half-closed
/// peer is answered, see ``peerClosed(now:reset:)``). After `shutdown`, idle connections
/// close at once and requests already received completely are still answered, the last one with
/// `Connection: close`; when the request in flight ends without an answer after shutdown began
/// (a hold dropped by the backend's shutdown, a timeout), the complete requests pipelined behind
/// it are handed over as `dispatchUnanswerable` before the close, so that none is lost from the
/// journal (``drainBufferedRequests()`` does the same at the forced close).
struct HTTP1ConnectionStateMachine: Sendable {
    /// What the owner of the socket must do, in order.
    enum Action: Sendable, Equatable {
        /// Queue these bytes for sending.
        case write([UInt8])
        /// Hand this request to the handler; its outcome comes back as `answered`.
        case dispatch(MockHTTPParsedRequest)
        /// Hand this request to the handler only so that it is journaled: it arrived before
        /// shutdown, pipelined behind a request the shutdown left unanswered (dropped, or a
        /// timeout), so its answer can never be sent (HTTP/1.1 answers in order); the outcome
        /// is discarded.
        case dispatchUnanswerable(MockHTTPParsedRequest)
        /// The peer left while a request was with the handler: cancel it (the backend marks the
        /// request cancelled); its outcome, if it ever comes, is dropped.
        case cancelRequest
        /// Close the socket once everything queued has been sent.
        case closeAfterWriting
        /// Once everything queued is sent, half-close, discard input for at most `seconds`
        /// (and 1 MiB), then close (RFC 9112 section 9.6).
        case lingerAfterWriting(seconds: Double)
        /// Close the socket now, dropping anything queued.
        case closeNow
        /// Stop reading from the socket (the parser holds enough unanswered input).
        case pauseReading
        /// Read from the socket again.
        case resumeReading
        /// A protocol error status (400, 408, 413, 431, 501, 505) is being answered.
        case countProtocolError
    }

    private enum Phase: Sendable, Equatable {
        /// Reading requests and answering them.
        case open
        /// A `.timeout` outcome: say nothing, discard input, until the peer closes or shutdown.
        case silent
        /// Waiting for queued output to be sent before a close; input is ignored.
        case closing
        /// Half-closed after an error or closing response: discarding input until `until`.
        case lingering(until: Double, drained: Int)
        /// Done: the socket is (being) closed.
        case closed
    }

    /// Seconds to receive one request (and a new connection's first request); over it, 408.
    let readTimeout: Double
    /// Seconds an idle keep-alive connection is kept.
    let idleTimeout: Double
    /// Most unanswered bytes buffered before reading pauses.
    let maxBufferedBytes: Int
    /// `false`: the connection closes after its first response (`Connection: close`).
    let keepAlive: Bool

    private var parser: MockHTTPRequestParser
    private var phase = Phase.open
    private var inFlight: MockHTTPParsedRequest?
    private var servedAny = false
    private var idleSince: Double
    private var requestStart: Double?
    private var shuttingDown = false
    private var readingPaused = false
    /// The peer ended its sending side while a request was in flight (end of stream, no reset):
    /// requests already buffered are still answered, the last one closing the connection.
    private var peerDoneSending = false

    /// When the half-close probe was last written (monotonic seconds), while the request it
    /// probes for is in flight; `nil` otherwise.
    private var probedAt: Double?

    /// The interim response written when the peer's stream ends while its request is in flight
    /// (see ``peerClosed(now:reset:)``), and again every ``probeInterval`` seconds while it is:
    /// a half-closed peer that closes later sends nothing, so only a write shows that it left (a
    /// sixty-seventh outside tester: such a request was journaled answered, not cancelled).
    static let probeBytes = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// Seconds between two half-close probes of one request in flight.
    static let probeInterval = 0.5

    /// A machine for a connection accepted at `now` (monotonic seconds).
    init(limits: MockHTTPParserLimits, readTimeout: Double, idleTimeout: Double, now: Double, keepAlive: Bool = true) {
        parser = MockHTTPRequestParser(limits: limits)
        self.keepAlive = keepAlive
        self.readTimeout = readTimeout
        self.idleTimeout = idleTimeout
        maxBufferedBytes = limits.maxHeaderBytes + limits.maxBodyBytes + 64 * 1024
        idleSince = now
    }

    /// True once the machine decided the connection is over.
    var isClosed: Bool { phase == .closed }

    /// True while a request is with the handler.
    var hasRequestInFlight: Bool { inFlight != nil }

    /// The request whose head arrived while its body has not (yet) completely, when nothing is
    /// in flight; nil otherwise.
    var requestHeadAwaitingBody: MockRequest? {
        guard phase == .open, inFlight == nil else { return nil }
        return parser.headAwaitingBody
    }

    /// Dispatches `request` in place of the one whose head arrived (``requestHeadAwaitingBody``):
    /// a transport's silent resend of a request the server already had whole, whose body the
    /// transport does not send again (see `MockHTTPServer`, transport retries). The connection
    /// closes after the answer; later input is ignored.
    mutating func dispatchResend(_ request: MockRequest) -> [Action] {
        guard phase == .open, inFlight == nil else { return [] }
        let parsed = MockHTTPParsedRequest(request: request, minorVersion: 1, keepAlive: false)
        inFlight = parsed
        return [.dispatch(parsed)]
    }

    /// The body bytes to reserve for the request whose head arrived (see
    /// `MockHTTPRequestParser.bodyBytesToReserve`), when nothing is in flight; nil otherwise.
    var bodyBytesToReserve: Int? {
        guard phase == .open, inFlight == nil else { return nil }
        return parser.bodyBytesToReserve
    }

    /// Restarts the read-timeout clock of the request being received at `now` (monotonic
    /// seconds): the server calls it when a connection paused for the body budget may read
    /// again, so that the time spent waiting for the budget does not count as a slow client.
    mutating func restartRequestClock(now: Double) {
        if requestStart != nil { requestStart = now }
    }

    /// True when the connection holds no request at all (nothing in flight, nothing buffered).
    var isIdle: Bool { inFlight == nil && parser.isIdle && phase == .open }

    /// The monotonic time at which `deadlinePassed` must be delivered, or nil for none.
    var deadline: Double? {
        switch phase {
        case .open:
            if inFlight != nil { return probedAt.map { $0 + Self.probeInterval } }
            if let requestStart { return requestStart + readTimeout }
            return servedAny ? idleSince + idleTimeout : idleSince + readTimeout
        case .lingering(let until, _): return until
        case .silent, .closing, .closed: return nil
        }
    }

    // MARK: Events

    /// Bytes arrived from the peer at `now`.
    mutating func received<Bytes: Collection>(_ bytes: Bytes, now: Double) -> [Action] where Bytes.Element == UInt8 {
        switch phase {
        case .closed, .closing, .silent:
            return []
        case .lingering(let until, let drained):
            let total = drained + bytes.count
            if total >= 1 << 20 { phase = .closed; return [.closeNow] }
            phase = .lingering(until: until, drained: total)
            return []
        case .open:
            parser.feed(bytes)
            if requestStart == nil && inFlight == nil && !parser.isIdle { requestStart = now }
            var actions = inFlight == nil ? pump(now: now) : []
            if phase == .open && !readingPaused && parser.bufferedByteCount > maxBufferedBytes {
                readingPaused = true
                actions.append(.pauseReading)
            }
            return actions
        }
    }

    /// The peer closed its side (end of stream) or, when `reset`, reset the connection.
    ///
    /// With a request in flight, a reset cancels it; an end of stream writes the half-close
    /// probe (``probeBytes``) and keeps the request: a peer that only half-closed gets its answer
    /// (then the connection closes), while one that closed answers the probe with a reset, which
    /// the owner reports as a hangup and turns into the cancel.
    mutating func peerClosed(now: Double, reset: Bool = false) -> [Action] {
        switch phase {
        case .closed:
            return []
        case .closing:
            return []
        case .silent, .lingering:
            phase = .closed
            return [.closeNow]
        case .open:
            if inFlight != nil {
                // A reset is a peer that left. An end of stream may be a half-close (a client that
                // sent its whole request and then shut its sending side, as `nc -N` or Go's
                // `CloseWrite` do) or a close, and TCP does not say which: the probe tells them
                // apart. An interim `100 Continue`, which every HTTP/1.1 client must accept before
                // the final response (RFC 9110 section 15.2), reaches a half-closed client
                // harmlessly; a closed or shut-down socket answers it with a reset, which the
                // owner sees as a hangup (or a failed send) and cancels the request then.
                if reset {
                    inFlight = nil
                    phase = .closed
                    return [.cancelRequest, .closeNow]
                }
                guard !peerDoneSending else { return [] }
                peerDoneSending = true
                // No 1xx to an HTTP/1.0 client (RFC 9110 section 15.2): its request is answered
                // whether it half-closed or left (a 1.0 client is a hand-typed one, `nc`).
                if inFlight?.minorVersion == 0 { return [] }
                probedAt = now
                return [.write(Self.probeBytes)]
            }
            phase = .closed
            if case .error(let error) = parser.finish() {
                return [.countProtocolError, .write(Self.errorBytes(error.status, error.reason)), .closeAfterWriting]
            }
            return [.closeNow]
        }
    }

    /// The handler answered the request in flight with `outcome`.
    mutating func answered(_ outcome: MockOutcome, now: Double) -> [Action] {
        guard let request = inFlight else { return [] }
        inFlight = nil
        probedAt = nil
        guard phase == .open else { return [] }
        switch outcome {
        case .respond(let response):
            let (valid, wantsClose) = MockHTTPServer.validate(response)
            let closing = !keepAlive || !request.keepAlive || wantsClose || ((shuttingDown || peerDoneSending) && !hasBufferedRequest())
            let bytes = MockHTTPServer.serialize(valid, closing: closing, headOnly: request.request.method == "HEAD")
            if closing {
                phase = .closing
                return [.write(bytes), .lingerAfterWriting(seconds: 2)]
            }
            servedAny = true
            idleSince = now
            requestStart = parser.isIdle ? nil : now
            var actions: [Action] = [.write(bytes)]
            if readingPaused && parser.bufferedByteCount <= maxBufferedBytes {
                readingPaused = false
                actions.append(.resumeReading)
            }
            return actions + pump(now: now)
        case .dropBeforeResponse:
            let behind = shuttingDown ? drainBufferedRequests() : []
            phase = .closed
            return behind + [.closeNow]
        case .dropMidBody(let response, let bodyBytes):
            let (valid, _) = MockHTTPServer.validate(response)
            var head = MockHTTPServer.serialize(valid, closing: true, headOnly: true)
            head += valid.body.prefix(max(0, min(bodyBytes, valid.body.count)))
            let behind = shuttingDown ? drainBufferedRequests() : []
            phase = .closing
            return behind + [.write(head), .closeAfterWriting]
        case .timeout:
            if peerDoneSending && !shuttingDown {
                // Silence until the peer gives up: it already ended its side, so nothing more can
                // come from it, and its close after a half-close sends nothing the loop would see.
                phase = .open
                let behind = drainBufferedRequests()
                phase = .closed
                return behind + [.closeNow]
            }
            phase = .silent
            var actions: [Action] = []
            if readingPaused { readingPaused = false; actions.append(.resumeReading) }
            if shuttingDown {
                phase = .open
                let behind = drainBufferedRequests()
                phase = .closed
                return behind + [.closeNow]
            }
            return actions
        }
    }

    /// The lingering half-close started (queued output was sent) at `now`.
    mutating func lingerStarted(seconds: Double, now: Double) {
        if phase != .closed { phase = .lingering(until: now + seconds, drained: 0) }
    }

    /// `now` is at or past `deadline`.
    mutating func deadlinePassed(now: Double) -> [Action] {
        guard let deadline, now >= deadline else { return [] }
        if phase == .open, inFlight != nil, probedAt != nil {
            probedAt = now
            return [.write(Self.probeBytes)]
        }
        switch phase {
        case .lingering:
            phase = .closed
            return [.closeNow]
        case .open:
            if requestStart != nil || !servedAny {
                let detail = requestStart == nil
                    ? "no request received within \(readTimeout) s"
                    : "request not received completely within \(readTimeout) s"
                phase = .closing
                return [.countProtocolError, .write(Self.errorBytes(408, detail)), .lingerAfterWriting(seconds: 1)]
            }
            phase = .closed
            return [.closeNow]
        default:
            return []
        }
    }

    /// The server began shutting down: idle and silent connections close now; requests already
    /// received are still answered.
    mutating func shutdown(now: Double) -> [Action] {
        shuttingDown = true
        switch phase {
        case .silent:
            phase = .closed
            return [.closeNow]
        case .open where inFlight == nil && parser.isIdle:
            phase = .closed
            return [.closeNow]
        default:
            return []
        }
    }

    /// Takes every complete request still buffered (stopping at the first incomplete or
    /// malformed one) as `dispatchUnanswerable` actions: used at shutdown when the connection
    /// closes before they can be answered, so that each is still journaled. Nothing while a
    /// request is in flight (those behind it wait for its answer) unless `force`, nor once the
    /// connection is closing.
    mutating func drainBufferedRequests(force: Bool = false) -> [Action] {
        // `force` (the forced close at the end of the grace period): also behind a request in flight.
        guard phase == .open, force || inFlight == nil else { return [] }
        var actions: [Action] = []
        while true {
            switch parser.next() {
            case .request(let parsed): actions.append(.dispatchUnanswerable(parsed))
            case .sendContinue: continue
            case .needMore, .error: return actions
            }
        }
    }

    // MARK: Steps

    /// Parses the next buffered request, if any, and says what to do with it.
    private mutating func pump(now: Double) -> [Action] {
        var actions: [Action] = []
        while phase == .open && inFlight == nil {
            switch parser.next() {
            case .needMore:
                if shuttingDown && parser.isIdle {
                    phase = .closed
                    actions.append(.closeNow)
                }
                return actions
            case .sendContinue:
                actions.append(.write(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)))
            case .error(let error):
                phase = .closing
                actions += [.countProtocolError, .write(Self.errorBytes(error.status, error.reason)), .lingerAfterWriting(seconds: 2)]
                return actions
            case .request(let parsed):
                inFlight = parsed
                actions.append(.dispatch(parsed))
                // A request pipelined before the peer half-closed is probed as the first one was
                // (a sixty-eighth outside tester: a client closing during its hold was journaled
                // answered).
                if peerDoneSending && parsed.minorVersion != 0 {
                    probedAt = now
                    actions.append(.write(Self.probeBytes))
                }
                return actions
            }
        }
        return actions
    }

    /// Whether another whole request is already buffered (checked on a copy of the parser).
    private func hasBufferedRequest() -> Bool {
        var probe = parser
        while true {
            switch probe.next() {
            case .request: return true
            case .sendContinue: continue
            case .needMore, .error: return false
            }
        }
    }

    static func errorBytes(_ status: Int, _ detail: String) -> [UInt8] {
        MockHTTPServer.serialize(MockHTTPServer.errorResponse(status: status, detail: detail), closing: true, headOnly: false)
    }
}
