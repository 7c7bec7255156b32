import Foundation

/// The scriptable in-process mock backend: the ``BackendModel`` plus a ``FaultScript``, a
/// history of every request, holds and an observer, all behind one lock; transports (the
/// in-process ``MockURLProtocol``, the loopback TCP server) call ``handle(_:)``.
///
/// Lifecycle is strict: ``shutdown()`` reports holds never released and one-shot faults never
/// used, and fails the remaining holds with a dropped connection. Requests after shutdown get 503.
public final class MockBackend: MockRequestHandler, Sendable {
    /// The clock every time-dependent behaviour reads (rate limits, windows, delays, timeouts).
    public let clock: any MockClock
    /// The token that routes in-process requests to this instance (see ``baseURL``).
    public let routeToken: String
    /// The origin that routes to this backend through sessions from ``makeURLSession()``:
    /// `http://<token>.mock.invalid` (no trailing slash). Built once: callers read it per request.
    public let baseURL: URL
    /// Hides the configured API keys in every history entry as it is recorded (journal
    /// redaction, issue 10 section 3); empty unless given at creation. The model still sees the
    /// request as sent.
    public let redactor: SecretRedactor

    /// How the request reached the backend; decides how a timeout fault behaves.
    enum Transport: Sendable {
        /// Park silently (a ``HeldRequest`` with action `timeout`) until the client gives up
        /// (the calling task is cancelled) or shutdown, then return `.timeout`.
        case tcp
        /// Wait the request's timeout on the mock clock, then return `.timeout` (the URLProtocol fails the load).
        case inProcess(timeoutSeconds: TimeInterval)
    }

    enum HoldResolution: Sendable { case natural, override(MockResponse), drop(processed: Bool), shutdown, clientGone }

    struct Hold {
        var info: HeldRequest
        var continuation: CheckedContinuation<HoldResolution, Never>?
        /// The parked request, answered by ``MockBackend/release(_:with:)`` itself.
        var ticket: Ticket? = nil
    }

    struct State {
        var model: BackendModel
        var script: FaultScript
        var history: [HistoryEntry] = []
        /// Entries dropped from the front of `history` by the retention window.
        var historyBase = 0
        /// Entries past the window that were still in flight (held, delayed), by seq.
        var detached: [Int: HistoryEntry] = [:]
        /// Set while history is streamed (`streamHistory`).
        var stream: HistoryStream?
        var seen: [IncomingRequest] = []
        var holds: [Hold] = []
        var nextHold = 1
        var inFlight = 0
        var isShutDown = false
        var observer: (@Sendable (MockEvent) -> Void)?
        /// The next observer event's place in line (see `ObserverLine`), taken with the event.
        var nextEventTicket: UInt64 = 0
        /// Suspended ``MockBackend/waitForHolds(_:)`` callers, resumed when enough holds are parked.
        var holdWaiters: [HoldWaiter] = []
        var nextHoldWaiter = 0
        var droppedExposures = 0
        /// Requests dropped before any answer on a reused keep-alive connection, for a short
        /// while: a transport's silent resend of one of them is the same attempt (``TransportRetryTrap``).
        var retryTraps: [TransportRetryTrap] = []
        /// Delayed requests waiting out their delay, by seq; `answer` set once computed (see
        /// ``MockBackend/delayedAnswer(_:deadline:)``).
        var delayed: [Int: DelayedRequest] = [:]

        /// Changes the history entry `seq` wherever it lives; returns what `change` returned, or
        /// nil when unknown. (It returns no copy of the entry unless asked: an entry is a few
        /// hundred bytes with a dozen references, copied for nothing on every answer before.)
        @discardableResult
        mutating func updateEntry<R>(_ seq: Int, _ change: (inout HistoryEntry) -> R) -> R? {
            let i = seq - 1 - historyBase
            if i >= 0 && i < history.count {
                return change(&history[i])
            }
            guard var e = detached[seq] else { return nil }
            let result = change(&e)
            detached[seq] = e
            return result
        }

        /// Keeps at most `window` entries in `history`; in-flight ones move to `detached`.
        mutating func trimHistory(window: Int) {
            let excess = history.count - max(1, window)
            guard excess > max(16, window / 4) else { return }
            for e in history[0..<excess] where e.outcome == nil { detached[e.seq] = e }
            history.removeFirst(excess)
            historyBase += excess
        }

        /// Keeps at most about `window` stored events and exposures (at least one event, so ids go on).
        mutating func trimState(window: Int) {
            let keep = max(1, window)
            if model.state.events.count > keep + 8 { model.state.events.removeFirst(model.state.events.count - keep) }
            if model.state.exposures.count > keep * 2 {
                let drop = model.state.exposures.count - keep
                model.state.exposures.removeFirst(drop)
                droppedExposures += drop
            }
        }
    }

    struct HoldWaiter {
        let id: Int
        let count: Int
        let continuation: CheckedContinuation<Void, Never>
    }

    /// A request registered in history, ready to be answered.
    /// A request waiting out a `delay` fault, and its answer once computed.
    struct DelayedRequest: Sendable {
        let ticket: Ticket
        let deadline: Date
        var answer: MockResponse? = nil

        /// By deadline, then content (Host header, method, target, body bytes), then arrival.
        static func canonicalOrder(_ a: DelayedRequest, _ b: DelayedRequest) -> Bool {
            if a.deadline != b.deadline { return a.deadline < b.deadline }
            func key(_ d: DelayedRequest) -> [UInt8] {
                let raw = d.ticket.incoming.raw
                let host = raw.headers.first { $0.name.equalsIgnoringASCIICase("Host") }?.value ?? ""
                return Array("\(host)\u{0}\(raw.method)\u{0}\(raw.target)\u{0}".utf8) + Array(raw.body)
            }
            let (ka, kb) = (key(a), key(b))
            if ka != kb { return ka.lexicographicallyPrecedes(kb) }
            return a.ticket.seq < b.ticket.seq
        }
    }

    struct Ticket: Sendable {
        let seq: Int
        let incoming: IncomingRequest
        let decision: FaultDecision?
        let refused: MockResponse?
        let receivedAt: Date
        /// Set when the request is a transport's silent retry of this earlier request.
        var transportRetryOf: Int? = nil
    }

    /// A request the backend dropped before any answer on a reused keep-alive connection.
    ///
    /// HTTP clients built on libcurl (FoundationNetworking's URLSession on Linux among them)
    /// resend such a request at once, on another connection, without telling the caller
    /// (libcurl `Curl_retry_request`: nothing received on a reused connection means "it died
    /// while idle"); the caller would then never see the drop the scenario scripted. The resend
    /// is recognised by all of: the same listener, another connection, the identical request
    /// (method, target, every header in order, body), at most ``window`` seconds of real
    /// (monotonic) time after the drop, and each trap catches one resend. At most ``limit``
    /// traps are kept, for requests with bodies up to ``maxBodyBytes``. A client that sends
    /// its requests on fresh connections (or gets its answers) never meets a trap.
    struct TransportRetryTrap: Sendable {
        /// Real seconds a trap waits for the resend (curl resends within milliseconds).
        static let window = 2.0
        /// Most traps kept at once (the oldest go first).
        static let limit = 16
        /// Requests with a larger body set no trap (memory stays bounded under `serve`).
        static let maxBodyBytes = 64 * 1024
        let request: MockRequest
        let connection: MockConnectionInfo
        let original: Int
        let fault: AppliedFault?
        let at: Double

        func catches(_ retry: MockRequest, now: Double) -> Bool {
            guard let c = retry.connection, c.listener == connection.listener, c.connection != connection.connection,
                  now - at <= Self.window else { return false }
            return retry == request
        }
    }

    /// Decides whether a request that matches a ``TransportRetryTrap`` may still be the transport's
    /// silent resend of the dropped request (its `seq` given); `nil` (the default): always.
    /// Behind its own lock, called outside the backend's (it may read ``history``).
    private let resendPossible = MockLocked<(@Sendable (Int) -> Bool)?>(nil)

    /// Lets a harness that knows which SDK operations are still running tell a transport's
    /// silent resend from a new request: a transport resends inside the operation that sent the
    /// request, before its caller hears of the drop, so once `predicate(droppedSeq)` is `false`
    /// (no operation that could be waiting on it is still running) a matching request is the
    /// SDK's own new request and is handled as one. A keep-alive client that reports the drop and
    /// sends the same request again (Node's HTTP agent) had that request dropped too.
    public func setResendPossible(_ predicate: (@Sendable (Int) -> Bool)?) {
        resendPossible.withLock { $0 = predicate }
    }

    /// Real (monotonic) seconds, for the transport-retry window only; never the mock clock.
    static func monotonicSeconds() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    private let box: MockLocked<State>
    /// Delivers observer events in the order their tickets were taken (see `setObserver`).
    private let observerLine = ObserverLine()

    /// Creates a backend over `fixtures`, reading `clock`; outage windows count from `clock.now()`.
    /// With `redactor`, every history entry is recorded with the secrets masked (``redactor``).
    public init(fixtures: Fixtures = .sdkContract, clock: any MockClock = MockSystemClock(),
                redactor: SecretRedactor = SecretRedactor(secrets: [])) {
        self.clock = clock
        self.redactor = redactor
        self.routeToken = MockRouting.newToken()
        self.baseURL = URL(string: "http://\(routeToken)\(MockRouting.hostSuffix)")!
        self.box = MockLocked(State(model: BackendModel(fixtures: fixtures), script: FaultScript(epoch: clock.now())))
        MockRouting.register(self)
    }

    deinit { MockRouting.unregister(routeToken) }

    // MARK: Handling

    /// Answers one request as a TCP transport needs it: applies the fault script, may suspend
    /// for a delay or hold, records history, and returns what to send.
    ///
    /// A `timeout` fault parks the request silently: it is listed in ``heldRequests`` (action
    /// `timeout`, not releasable), reported to the observer as ``MockEvent/Parked/silent(_:)``,
    /// and ends when the client gives up (the calling task is cancelled) or at ``shutdown()``;
    /// then it returns ``MockOutcome/timeout`` (the transport sends nothing) and history records
    /// outcome `timeout`. With `processed: true` the backend handled it on arrival, as in process
    /// (Documentation/ScenarioFormat.md, "Faults").
    ///
    /// When the calling `Task` is cancelled (the TCP server cancels it when the client closes or
    /// resets the connection while the request is parked), the request is marked `cancelled` in
    /// history, as ``MockURLProtocol`` does on `stopLoading`; it keeps running in the backend
    /// (a hold stays releasable, a delay runs its course), except a silent timeout, which ends.
    public func handle(_ request: MockRequest) async -> MockOutcome {
        await handle(request, recorded: nil)
    }

    /// ``handle(_:)``, calling `recorded` once the request is in history (before its fault
    /// runs): a transport that must know when what it received is recorded counts there.
    public func handle(_ request: MockRequest, recorded: (@Sendable () -> Void)?) async -> MockOutcome {
        let ticket = begin(request)
        recorded?()
        if let outcome = completeImmediately(ticket) { return outcome }
        return await withTaskCancellationHandler {
            // A separate task: the connection's cancellation must not cut a delay short.
            await Task { await self.complete(ticket, transport: .tcp) }.value
        } onCancel: {
            self.markCancelled(seq: ticket.seq)
            self.endSilentTimeout(seq: ticket.seq)
        }
    }

    /// Ends the silent timeout park of request `seq` (its client gave up); no-op otherwise.
    private func endSilentTimeout(seq: Int) {
        let continuation = box.withLock { s -> CheckedContinuation<HoldResolution, Never>? in
            guard let i = s.holds.firstIndex(where: { $0.info.seq == seq && $0.info.isSilentTimeout }) else { return nil }
            return s.holds.remove(at: i).continuation
        }
        continuation?.resume(returning: .clientGone)
    }

    /// Registers `request` in history and decides its fault, synchronously.
    func begin(_ request: MockRequest) -> Ticket {
        let now = clock.now()
        let incoming = IncomingRequest(request)
        let mono = request.connection == nil ? 0 : Self.monotonicSeconds()
        // Traps this request matches whose drop no running operation can still be waiting on are
        // dismissed first, outside the backend's lock (see ``setResendPossible(_:)``).
        if request.connection != nil, let possible = resendPossible.withLock({ $0 }) {
            let matched = box.withLock { s in s.retryTraps.filter { $0.catches(request, now: mono) }.map(\.original) }
            let dismissed = matched.filter { !possible($0) }
            if !dismissed.isEmpty { box.withLock { s in s.retryTraps.removeAll { dismissed.contains($0.original) } } }
        }
        let (ticket, observer) = box.withLock { s -> (Ticket, State.LinedObserver?) in
            let seq = s.historyBase + s.history.count + 1
            s.inFlight += 1
            var decision: FaultDecision?
            var refused: MockResponse?
            var trap: TransportRetryTrap?
            if request.connection.map({ !$0.unanswerable }) ?? false, !s.retryTraps.isEmpty {
                s.retryTraps.removeAll { mono - $0.at > TransportRetryTrap.window }
                if let i = s.retryTraps.firstIndex(where: { $0.catches(request, now: mono) }) { trap = s.retryTraps.remove(at: i) }
            }
            if s.isShutDown || request.connection?.unanswerable == true {
                // After shutdown, and for a request the transport can no longer answer (see
                // MockConnectionInfo.unanswerable): journaled, never processed.
                refused = BackendModel.detail(503, "mock backend shut down")
            } else if trap == nil {
                decision = s.script.decide(incoming, now: now)
            }
            let kept = s.stream.map { HistoryStream.keep(request.body, prefix: $0.retention.bodyPrefixBytes) }
            var entry = HistoryEntry(
                seq: seq, receivedAt: now, answeredAt: nil, method: incoming.method, path: incoming.rawPath, query: request.rawQuery,
                headers: MockBackend.recordedHeaders(request.headers), body: kept?.body ?? request.body,
                json: kept?.size == nil ? incoming.json : nil,
                route: nil, note: nil,
                fault: trap?.fault ?? decision.map { AppliedFault(id: $0.id, name: $0.name, action: $0.action.kind, occurrence: $0.occurrence) },
                hold: nil, response: nil, outcome: nil, cancelled: false, bodySize: kept?.size, bodyMD5: kept?.md5,
                peer: request.peer, transportRetryOf: trap?.original,
                apiKeyIndex: request.header("X-API-Key").map { sent in s.model.fixtures.apiKeys.firstIndex { $0.key.isExactly(sent) } ?? -1 })
            // Redaction only when there are secrets (it copies the entry).
            if !redactor.isEmpty { entry = entry.redacted(by: redactor) }
            s.history.append(entry)
            if let trap {
                // The same attempt: answered with the same drop, not seen by the fault script,
                // no observer events (it is not a request of its own).
                return (Ticket(seq: seq, incoming: incoming, decision: nil, refused: refused, receivedAt: now, transportRetryOf: trap.original), nil)
            }
            if let kept, kept.size != nil {
                // Streaming: a large body is remembered for fault reports by its prefix only.
                s.seen.append(IncomingRequest(MockRequest(method: request.method, target: request.target, headers: request.headers, body: kept.body)))
            } else {
                s.seen.append(incoming)
            }
            if s.stream != nil && s.seen.count > 512 { s.seen.removeFirst(256) }
            return (Ticket(seq: seq, incoming: incoming, decision: decision, refused: refused, receivedAt: now), s.takeObserver())
        }
        if let observer { observerLine.deliver(observer.ticket) { observer.call(.received(seq: ticket.seq)) } }
        return ticket
    }

    /// Produces the outcome for a registered request (may suspend) and records it.
    func complete(_ ticket: Ticket, transport: Transport) async -> MockOutcome {
        var outcome = await decideOutcome(ticket, transport: transport)
        if ticket.decision != nil { outcome = Self.sendable(outcome) }   // the model's own answers always are
        record(ticket, outcome)
        return outcome
    }

    /// `outcome`, or a 500 naming the problem when its response could not be sent as it is (a
    /// status outside 200...999, a header field no HTTP/1.1 message may carry: see
    /// ``HeaderField/problem(name:value:)``); a 204 or 304 without its body. Decided before history records it, so every
    /// transport sends what history says (a fault built in code can hold such a field; the
    /// fault rules' parser refuses one). Before, the TCP server swapped in its own 500 while
    /// history recorded the scripted status, and the in-process transport delivered the field.
    static func sendable(_ outcome: MockOutcome) -> MockOutcome {
        let response: MockResponse
        switch outcome {
        case .respond(let r), .dropMidBody(let r, _): response = r
        default: return outcome
        }
        let problem = (200...999).contains(response.status) ? response.headers.lazy.compactMap { HeaderField.problem(name: $0.name, value: $0.value) }.first
            : "status \(response.status) is no final status"
        guard let problem else {
            // 204 and 304 carry no content (RFC 9110 sections 15.3.5, 15.4.5): the body is dropped
            // here, so history records what every transport sends (a release override in `serve`
            // journaled a body the client never got).
            if case .respond(var r) = outcome, [204, 304].contains(r.status), !r.body.isEmpty {
                r.body = Data()
                r.headers.removeAll { HeaderField.isFraming($0.name) }
                return .respond(r)
            }
            // Framing fields are the transport's: history records the answer without them.
            if case .respond(var r) = outcome, r.headers.contains(where: { HeaderField.isFraming($0.name) }) {
                r.headers.removeAll { HeaderField.isFraming($0.name) }
                return .respond(r)
            }
            return outcome
        }
        return .respond(BackendModel.detail(500, "mock fault produced a response no transport can send: \(problem)"))
    }

    /// The outcome, recorded, when it needs no suspension (no delay, hold or in-process
    /// timeout); nil otherwise (then call ``complete(_:transport:)``). The in-process transport
    /// uses it to answer inside `startLoading` without a task hop.
    func completeImmediately(_ ticket: Ticket) -> MockOutcome? {
        guard var outcome = immediateOutcome(ticket) else { return nil }
        if ticket.decision != nil { outcome = Self.sendable(outcome) }   // the model's own answers always are
        record(ticket, outcome)
        return outcome
    }

    private func record(_ ticket: Ticket, _ outcome: MockOutcome) {
        let answeredAt = clock.now()
        // A drop before any answer on a reused keep-alive connection: a retrying transport
        // resends it (see TransportRetryTrap).
        let reused = ticket.incoming.raw.connection.flatMap { $0.index > 0 ? $0 : nil }
        let mono = outcome == .dropBeforeResponse && reused != nil ? Self.monotonicSeconds() : 0
        let (observer, streamed) = box.withLock { s -> (State.LinedObserver?, (HistoryStream, HistoryEntry)?) in
            s.inFlight -= 1
            let prefix = s.stream?.retention.bodyPrefixBytes
            // The entry is copied out only when a stream or a retry trap needs it.
            let keep = s.stream != nil || (outcome == .dropBeforeResponse && reused != nil)
            let entry = s.updateEntry(ticket.seq) { e -> HistoryEntry? in
                e.answeredAt = answeredAt
                func recorded(_ r: MockResponse) -> RecordedResponse {
                    var rec = RecordedResponse(r)
                    if !redactor.isEmpty { rec = rec.redacted(by: redactor) }
                    if let prefix {
                        let kept = HistoryStream.keep(r.body, prefix: prefix)
                        rec.body = kept.body
                        rec.bodySize = kept.size
                        rec.bodyMD5 = kept.md5
                    }
                    return rec
                }
                switch outcome {
                case .respond(let r): e.response = recorded(r); e.outcome = "respond"
                case .dropBeforeResponse: e.outcome = "drop_before_response"
                case .dropMidBody(let r, _): e.response = recorded(r); e.outcome = "drop_mid_body"
                case .timeout: e.outcome = "timeout"
                }
                return keep ? e : nil
            } ?? nil
            if outcome == .dropBeforeResponse, let reused, !s.isShutDown, ticket.incoming.raw.body.count <= TransportRetryTrap.maxBodyBytes {
                s.retryTraps.append(TransportRetryTrap(request: ticket.incoming.raw, connection: reused,
                                                       original: ticket.transportRetryOf ?? ticket.seq, fault: entry?.fault, at: mono))
                if s.retryTraps.count > TransportRetryTrap.limit { s.retryTraps.removeFirst() }
            }
            var streamed: (HistoryStream, HistoryEntry)?
            if let stream = s.stream, let entry {
                s.detached[ticket.seq] = nil
                stream.group.enter()
                streamed = (stream, entry)
                s.trimHistory(window: stream.retention.window)
                s.trimState(window: stream.retention.stateWindow)
            }
            return (ticket.transportRetryOf == nil ? s.takeObserver() : nil, streamed)
        }
        if let (stream, entry) = streamed {
            stream.sink(entry)
            stream.group.leave()
        }
        let status: Int?
        switch outcome {
        case .respond(let r), .dropMidBody(let r, _): status = r.status
        default: status = nil
        }
        if let observer {
            observerLine.deliver(observer.ticket) { observer.call(.answered(seq: ticket.seq, outcome: MockBackend.outcomeName(outcome), status: status)) }
        }
    }

    static func outcomeName(_ outcome: MockOutcome) -> String {
        switch outcome {
        case .respond: return "respond"
        case .dropBeforeResponse: return "drop_before_response"
        case .dropMidBody: return "drop_mid_body"
        case .timeout: return "timeout"
        }
    }

    private func decideOutcome(_ ticket: Ticket, transport: Transport) async -> MockOutcome {
        if let outcome = immediateOutcome(ticket) { return outcome }
        guard let decision = ticket.decision else { return .respond(natural(ticket)) }
        switch decision.action {
        case .delay(let seconds):
            let deadline = clock.now().addingTimeInterval(seconds)
            box.withLock { $0.delayed[ticket.seq] = DelayedRequest(ticket: ticket, deadline: deadline) }
            emit(.parked(seq: ticket.seq, .delay(seconds: seconds)))
            try? await clock.sleep(until: deadline)
            return .respond(delayedAnswer(ticket, deadline: deadline))
        case .hold(let label):
            switch await park(ticket, label: label, fault: decision.id) {
            case .natural: return .respond(natural(ticket))
            case .override(let r): return .respond(r)
            case .drop(let processed):
                if processed { _ = natural(ticket) }
                return .dropBeforeResponse
            case .shutdown, .clientGone: return .dropBeforeResponse
            }
        case .delayThenDrop(let seconds, let processed):
            let deadline = clock.now().addingTimeInterval(seconds)
            if processed { box.withLock { $0.delayed[ticket.seq] = DelayedRequest(ticket: ticket, deadline: deadline) } }
            emit(.parked(seq: ticket.seq, .delay(seconds: seconds)))
            try? await clock.sleep(until: deadline)
            if processed { _ = delayedAnswer(ticket, deadline: deadline) }
            return .dropBeforeResponse
        case .timeout(let processed):
            if processed { _ = natural(ticket) }
            switch transport {
            case .inProcess(let seconds):
                // The request's timeout counts from its arrival (URLRequest.timeoutInterval).
                let deadline = ticket.receivedAt.addingTimeInterval(seconds)
                emit(.parked(seq: ticket.seq, .timeout(seconds: seconds)))
                try? await clock.sleep(until: deadline)
            case .tcp:
                // The mock cannot know the client's deadline: parked until the client gives up.
                _ = await park(ticket, label: nil, fault: decision.id, silent: true)
            }
            return .timeout
        default:
            return .respond(natural(ticket))
        }
    }

    /// The outcome of every fault that needs no waiting; nil for delay, hold and timeout.
    private func immediateOutcome(_ ticket: Ticket) -> MockOutcome? {
        if let refused = ticket.refused { return .respond(refused) }
        if ticket.transportRetryOf != nil { return .dropBeforeResponse }
        guard let decision = ticket.decision else { return .respond(natural(ticket)) }
        switch decision.action {
        case .delay, .hold, .timeout, .delayThenDrop:
            return nil
        case .respond(let status, let headers, let body):
            return .respond(MockResponse(status: status, headers: headers.map { ($0.name, $0.value) }, body: body))
        case .rateLimited(let retry):
            return .respond(rateLimitedResponse(retry))
        case .dropBeforeResponse(let processed):
            if processed { _ = natural(ticket) }
            return .dropBeforeResponse
        case .dropMidBody(let bytes):
            let r = natural(ticket)
            // Nothing left to cut: the whole answer goes, as over TCP (the connection closes
            // after a complete response), and history says it was answered (a sixth outside
            // tester: in process the client got a failure, over TCP the whole body).
            if bytes >= r.body.count { return .respond(r) }
            return .dropMidBody(r, bodyBytes: bytes)
        case .malformedJSON(let body):
            var r = natural(ticket)
            r.body = Data((body ?? "{\"detail\": ").utf8)
            return .respond(r)
        case .truncatedJSON(let bytes):
            var r = natural(ticket)
            r.body = r.body.prefix(max(0, min(bytes ?? r.body.count / 2, r.body.count)))
            return .respond(r)
        case .wrongContentType(let contentType, let body):
            var r = natural(ticket)
            r.headers.removeAll { $0.name.equalsIgnoringASCIICase("Content-Type") }
            r.headers.insert(("Content-Type", contentType), at: 0)
            if let body { r.body = Data(body.utf8) }
            return .respond(r)
        }
    }

    /// The answer to a delayed request whose delay is over. Every delayed request due by now (one
    /// clock advance may end several delays at once) is answered here, in a canonical order (by
    /// deadline, then by content: Host, method, target, body; then arrival), by whichever of their
    /// tasks runs first: the model's state and rate-limit counters then do not depend on which
    /// woken task the scheduler ran first.
    private func delayedAnswer(_ ticket: Ticket, deadline: Date) -> MockResponse {
        let now = clock.now()
        return box.withLock { s in
            if let answer = s.delayed[ticket.seq]?.answer {
                s.delayed[ticket.seq] = nil
                return answer
            }
            let due = s.delayed.values.filter { $0.answer == nil && ($0.deadline <= now || $0.ticket.seq == ticket.seq) }
                .sorted(by: DelayedRequest.canonicalOrder)
            var mine: MockResponse?
            for d in due {
                let answer = s.model.answer(d.ticket.incoming, now: now)
                s.updateEntry(d.ticket.seq) { e in
                    e.route = answer.route
                    e.note = answer.note.map { redactor.redact($0) }
                }
                if d.ticket.seq == ticket.seq { mine = answer.response; s.delayed[d.ticket.seq] = nil }
                else { s.delayed[d.ticket.seq]?.answer = answer.response }
            }
            // Not registered (cannot happen): answered alone.
            return mine ?? s.model.answer(ticket.incoming, now: now).response
        }
    }

    /// Runs the backend model for the request now, recording the route and note in history.
    private func natural(_ ticket: Ticket) -> MockResponse {
        let now = clock.now()
        return box.withLock { s in
            let answer = s.model.answer(ticket.incoming, now: now)
            s.updateEntry(ticket.seq) { e in
                e.route = answer.route
                e.note = answer.note.map { redactor.redact($0) }
            }
            return answer.response
        }
    }

    private func rateLimitedResponse(_ retry: RetryAfter) -> MockResponse {
        let (limit, window) = box.withLock { ($0.model.fixtures.rateLimit.limit, $0.model.fixtures.rateLimit.windowSeconds) }
        // The body is always the backend's words (CONTRACT.md section 2); only the scripted
        // Retry-After differs from a natural 429.
        let value: String
        let detail = BackendModel.tooManyRequestsDetail
        switch retry {
        case .seconds(let s): value = String(s)
        case .httpDate(let d): value = d
        case .httpDateIn(let s): value = MockHTTPDate.format(clock.now().addingTimeInterval(TimeInterval(s)))
        }
        return BackendModel.detail(429, detail, extra: [
            ("Retry-After", value), ("X-RateLimit-Limit", String(limit)), ("X-RateLimit-Remaining", "0"), ("X-RateLimit-Window", String(window)),
        ])
    }

    /// Parks the request on a hold (`silent`: on a timeout fault over TCP, until its client
    /// gives up) and suspends until it is resolved.
    private func park(_ ticket: Ticket, label: String?, fault: FaultID, silent: Bool = false) async -> HoldResolution {
        await withCheckedContinuation { (continuation: CheckedContinuation<HoldResolution, Never>) in
            let registered = box.withLock { s -> Parking in
                if s.isShutDown { return .early(.shutdown) }
                // The client may have given up before the park was registered (the cancellation
                // handler found nothing to end): a silent timeout ends at once.
                if silent, s.updateEntry(ticket.seq, { $0.cancelled }) == true { return .early(.clientGone) }
                let id = HoldID(rawValue: s.nextHold)
                s.nextHold += 1
                let userID = ticket.incoming.query("user_id").flatMap { $0 } ?? ticket.incoming.json?["user_id"]?.stringValue
                s.holds.append(Hold(info: HeldRequest(id: id, seq: ticket.seq, method: ticket.incoming.method, path: ticket.incoming.rawPath,
                                                      userID: userID, label: label, fault: fault, action: silent ? "timeout" : "hold"),
                                    continuation: continuation, ticket: ticket))
                s.updateEntry(ticket.seq) { $0.hold = id }
                return .parked(id)
            }
            switch registered {
            case .early(let resolution): continuation.resume(returning: resolution)
            case .parked(let id):
                resumeHoldWaiters()
                emit(.parked(seq: ticket.seq, silent ? .silent(id) : .hold(id)))
            }
        }
    }

    /// Whether a park registered, or was resolved before it could (shutdown, client gone).
    private enum Parking { case parked(HoldID), early(HoldResolution) }

    private func emit(_ event: MockEvent) {
        guard let observer = box.withLock({ $0.takeObserver() }) else { return }
        observerLine.deliver(observer.ticket) { observer.call(event) }
    }

    /// Resumes the ``waitForHolds(_:)`` callers whose count is now parked (or all, after shutdown).
    private func resumeHoldWaiters() {
        let ready = box.withLock { s -> [HoldWaiter] in
            let ready = s.holdWaiters.filter { s.isShutDown || $0.count <= s.holds.count }
            s.holdWaiters.removeAll { w in ready.contains { $0.id == w.id } }
            return ready
        }
        for w in ready { w.continuation.resume() }
    }

    /// Suspends until at least `count` requests are parked on holds (returns at once when they
    /// already are), the backend shuts down, or the calling task is cancelled. No thread waits:
    /// the caller is a continuation resumed when a request parks. Used by the `serve` admin API
    /// (`GET /__admin/holds?count=N`), which bounds it with a timeout.
    public func waitForHolds(_ count: Int) async {
        let id = box.withLock { s -> Int in s.nextHoldWaiter += 1; return s.nextHoldWaiter }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let ready = box.withLock { s -> Bool in
                    if s.holds.count >= count || s.isShutDown || Task.isCancelled { return true }
                    s.holdWaiters.append(HoldWaiter(id: id, count: count, continuation: c))
                    return false
                }
                if ready { c.resume() }
            }
        } onCancel: {
            let waiter = box.withLock { s -> HoldWaiter? in
                guard let i = s.holdWaiters.firstIndex(where: { $0.id == id }) else { return nil }
                return s.holdWaiters.remove(at: i)
            }
            waiter?.continuation.resume()
        }
    }

    /// Puts the backend back to its start: a fresh model over `fixtures` (no sticky assignments,
    /// exposures, events or rate counters), an empty history (sequence numbers restart at 1) and
    /// exactly `faults`, their counters at zero and outage windows counting from now.
    ///
    /// Refused (returns the number of requests still inside, nothing changed) while any request
    /// is in flight, held or delayed: their history entries would otherwise point into the new
    /// history. Returns 0 when reset; after ``shutdown()`` it is refused with -1.
    @discardableResult
    public func reset(fixtures: Fixtures, faults: [FaultRule]) -> Int {
        let now = clock.now()
        return box.withLock { s -> Int in
            if s.isShutDown { return -1 }
            guard s.inFlight == 0 else { return s.inFlight }
            s.model = BackendModel(fixtures: fixtures)
            // Fault ids go on, as sequence numbers do: a client holding an id from before the
            // reset never deletes a rule added after it (a seventy-third outside tester).
            s.script = FaultScript(epoch: now, firstID: s.script.nextRuleID)
            for rule in faults { s.script.add(rule) }
            // Sequence numbers go on (a streamed journal never repeats one); the history restarts.
            s.historyBase += s.history.count
            s.history = []
            s.detached = [:]
            s.seen = []
            return 0
        }
    }

    /// In process: the client's loads still running in the backend (a hold, a delay, a
    /// timeout), by sequence number, each able to tell whether its client has begun cancelling
    /// it (behind a `MockLocked`; registered by ``MockURLProtocol``).
    private let clientLoads = MockLocked<[Int: any ClientCancellationProbe]>([:])

    /// Registers `probe` for the in-process load of request `seq`, until ``forgetClientLoad(seq:)``.
    func noteClientLoad(seq: Int, probe: any ClientCancellationProbe) {
        clientLoads.withLock { $0[seq] = probe }
    }

    /// Drops the probe of request `seq` (its load finished or stopped).
    func forgetClientLoad(seq: Int) {
        _ = clientLoads.withLock { $0.removeValue(forKey: seq) }
    }

    /// In process: the requests whose client has begun cancelling them (`URLSessionTask.cancel()`
    /// ran, its state is `canceling`) while the backend has not yet heard of it (the loading
    /// system calls `stopLoading` later, on its own queue), in ascending order. Empty for
    /// requests over TCP, where a cancellation is only seen when the connection closes.
    public func cancellationsOnTheirWay() -> [Int] {
        let probes = clientLoads.withLock { $0 }
        return probes.filter { $0.value.clientIsCancelling }.map(\.key).sorted()
    }

    /// Marks the history entry `seq` as cancelled by the client (URLProtocol `stopLoading`).
    func markCancelled(seq: Int) {
        let marked = box.withLock { s -> Bool in
            s.updateEntry(seq) { $0.cancelled = true } != nil
        }
        if marked { emit(.cancelled(seq: seq)) }
    }

    static let routingHeader = "X-Experimently-Mock-Route"

    static func recordedHeaders(_ headers: [(name: String, value: String)]) -> [HeaderField] {
        headers.compactMap { h in
            if h.name.equalsIgnoringASCIICase(routingHeader) { return nil }
            if h.name.equalsIgnoringASCIICase("X-API-Key") { return HeaderField(name: h.name, value: "***") }
            return HeaderField(name: h.name, value: h.value)
        }
    }

    // MARK: Control surface

    /// Adds a fault rule after the existing ones (first firing rule wins); returns its id.
    @discardableResult
    public func addFault(_ rule: FaultRule) -> FaultID { box.withLock { $0.script.add(rule) } }

    /// Removes a fault rule; unknown ids are ignored (returns false).
    @discardableResult
    public func removeFault(_ id: FaultID) -> Bool { box.withLock { $0.script.remove(id) } }

    /// The fault rules in the order they apply.
    public var faults: [(id: FaultID, rule: FaultRule)] { box.withLock { $0.script.rules } }

    /// Requests currently parked on holds, in the order they were parked; requests silent on a
    /// timeout fault over TCP are among them with action `timeout`.
    public var heldRequests: [HeldRequest] { box.withLock { $0.holds.map(\.info) } }

    /// Whether ``shutdown()`` has begun: parked requests were failed and new ones get 503.
    public var isShutDown: Bool { box.withLock { $0.isShutDown } }

    /// Releases a held request: the backend answers it now (natural response) unless `override`
    /// is given. Holds may be released in any order. Returns false when `hold` is not parked
    /// (never was, already released, or shut down) or is a silent timeout (action `timeout`:
    /// only its client giving up or shutdown ends it).
    @discardableResult
    ///
    /// The backend answers it on the calling thread, before this returns: holds released one
    /// after another are answered (model state, rate-limit counters) in that order, whatever
    /// order their tasks then resume in.
    public func release(_ hold: HoldID, with override: MockResponse? = nil) -> Bool {
        let taken = box.withLock { s -> Hold? in
            guard let i = s.holds.firstIndex(where: { $0.info.id == hold && !$0.info.isSilentTimeout }) else { return nil }
            return s.holds.remove(at: i)
        }
        guard let taken, let continuation = taken.continuation else { return false }
        let answer = override ?? taken.ticket.map { natural($0) }
        continuation.resume(returning: answer.map { .override($0) } ?? .natural)
        return true
    }

    /// Releases a held request with a transport failure: the connection closes (TCP) / the load
    /// fails with URLError(.networkConnectionLost) (in-process) before any response byte;
    /// `processed` says whether the backend still handled it (state changes). Returns false when
    /// `hold` is not parked or is a silent timeout.
    @discardableResult
    public func releaseFailing(_ hold: HoldID, processed: Bool = false) -> Bool {
        let taken = box.withLock { s -> Hold? in
            guard let i = s.holds.firstIndex(where: { $0.info.id == hold && !$0.info.isSilentTimeout }) else { return nil }
            return s.holds.remove(at: i)
        }
        guard let taken, let continuation = taken.continuation else { return false }
        // Processed now, on the releasing thread, as ``release(_:with:)`` answers.
        if processed, let ticket = taken.ticket { _ = natural(ticket) }
        continuation.resume(returning: .drop(processed: processed && taken.ticket == nil))
        return true
    }

    /// Changes the fixtures in place (e.g. an experiment stops mid-run); later requests see the change.
    public func updateFixtures(_ change: (inout Fixtures) -> Void) {
        box.withLock { change(&$0.model.fixtures) }
    }

    /// The current fixtures.
    public var fixtures: Fixtures { box.withLock { $0.model.fixtures } }

    /// Restarts an experiment: ACTIVE again, its sticky assignments forgotten (see
    /// ``BackendModel/restartExperiment(_:)``). Returns false when there is no such experiment.
    @discardableResult
    public func restartExperiment(_ key: String) -> Bool { box.withLock { $0.model.restartExperiment(key) } }

    /// Every request so far, in arrival order (in-flight ones without response yet); while
    /// history is streamed (``streamHistory(_:to:)``), only the retention window and the requests
    /// still in flight.
    public var history: [HistoryEntry] {
        box.withLock { s in
            s.detached.isEmpty ? s.history : s.detached.values.sorted { $0.seq < $1.seq } + s.history
        }
    }

    /// Requests received so far (also those only in the streamed journal).
    public var requestCount: Int { box.withLock { $0.historyBase + $0.history.count } }

    /// Streams history: from now on every request is handed to `sink` once its outcome is
    /// recorded (in the order outcomes are recorded, each with its `seq`), and memory keeps only
    /// the last `retention.window` finished entries, the requests still in flight, bodies over
    /// `retention.bodyPrefixBytes` as size + MD5 + prefix (``HistoryEntry/bodySize``), and the
    /// last `retention.stateWindow` stored events and exposures. Call it before the first
    /// request. `sink` is called outside the backend's lock, possibly from several threads at
    /// once; it must be thread-safe. End with ``finishHistoryStream()``.
    public func streamHistory(_ retention: HistoryRetention, to sink: @escaping @Sendable (HistoryEntry) -> Void) {
        box.withLock { $0.stream = HistoryStream(retention: retention, sink: sink) }
    }

    /// Stops streaming: waits for `sink` calls in progress, then returns the requests never
    /// streamed (still in flight, without outcome), in arrival order. Later outcomes are no
    /// longer streamed.
    public func finishHistoryStream() -> [HistoryEntry] {
        let (stream, pending) = box.withLock { s -> (HistoryStream?, [HistoryEntry]) in
            let stream = s.stream
            s.stream = nil
            let pending = (s.detached.values.map { $0 } + s.history.filter { $0.outcome == nil }).sorted { $0.seq < $1.seq }
            return (stream, pending)
        }
        stream?.group.wait()
        return pending
    }

    /// Totals of the backend state including what the retention window dropped: events stored
    /// and exposures recorded since the start.
    public var stateTotals: (events: Int, exposures: Int) {
        box.withLock { s in (s.model.state.events.last?.id ?? 0, s.droppedExposures + s.model.state.exposures.count) }
    }

    /// Assignments (sticky), exposures and stored events.
    public var state: BackendStateSnapshot { box.withLock { $0.model.state } }

    /// Requests inside the backend right now (held, delayed, waiting out an in-process timeout).
    public var inFlightCount: Int { box.withLock { $0.inFlight } }

    /// Sets (or clears) the observer; it is called synchronously, outside the lock, on the
    /// thread that moved the request (`received`, `parked`, `answered`, `cancelled`), one event at
    /// a time and in the order the events happened under the lock (`ObserverLine`): a history
    /// built from them lists requests in the order the mock received them (before, two threads
    /// could call it in either order, and a held first request could be recorded after a second
    /// one's answer, hiding a single-flight violation).
    public func setObserver(_ observer: (@Sendable (MockEvent) -> Void)?) {
        box.withLock { $0.observer = observer }
    }

    /// The fault rules not used up so far, as ``shutdown()`` would report them (a one-shot rule
    /// short of its matches, a hold rule that never parked a request), each with the nearest
    /// request and what differed; the backend keeps running.
    public var unusedFaults: [UnusedFault] { box.withLock { $0.script.unusedOneShots(seen: $0.seen) } }

    /// Shuts the backend down: reports holds never released and one-shot faults never used up
    /// (with the nearest request and what differed), then fails those holds with a dropped
    /// connection and ends silent timeouts (outcome `timeout`). Later requests get 503. Calling it twice reports nothing new.
    @discardableResult
    public func shutdown() -> ShutdownReport {
        let (report, continuations) = box.withLock { s -> (ShutdownReport, [CheckedContinuation<HoldResolution, Never>]) in
            // A silent timeout is not a hold anyone forgot: its client never gave up.
            let report = ShutdownReport(unreleasedHolds: s.holds.map(\.info).filter { !$0.isSilentTimeout },
                                        unusedFaults: s.isShutDown ? [] : s.script.unusedOneShots(seen: s.seen),
                                        inFlight: s.inFlight)
            s.isShutDown = true
            let continuations = s.holds.compactMap(\.continuation)
            s.holds.removeAll()
            return (report, continuations)
        }
        for c in continuations { c.resume(returning: .shutdown) }
        resumeHoldWaiters()
        return report
    }
}

/// IMF-fixdate formatting for `Retry-After` dates (RFC 9110 section 5.6.7).
public enum MockHTTPDate {
    /// Formats `date` as e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
    public static func format(_ date: Date) -> String {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return f.string(from: date)
    }
}

/// Tells whether the client of an in-process load has begun cancelling it.
protocol ClientCancellationProbe: Sendable {
    /// `true` once the client called `cancel()` on the load's task.
    var clientIsCancelling: Bool { get }
}
