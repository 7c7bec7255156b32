#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// The `serve` journal (format `experimently-journal/1`), written to its file as requests
/// happen so that memory stays bounded and nothing the mock accepted is lost.
///
/// Shape (one JSON object; see `Documentation/CrossSDK.md`, "The journal"):
/// `{"format", "url", "history": [entry, ...], "stopped_by", "state", "shutdown"}`. `open`
/// writes the head and the opening of `history`; ``append(_:)`` adds one entry (thread-safe,
/// buffered up to 64 KiB before a write); ``finish(stoppedBy:pending:state:totals:shutdown:)``
/// adds the requests still in flight, closes `history`, writes the rest and flushes, so the file
/// is complete and valid JSON. Entries appear in the order their outcome was recorded (without
/// holds or delays, arrival order); `seq` is the arrival order.
///
/// Numbers: an entry's `json` is the request body's own text, copied verbatim when the body is
/// JSON and kept whole, so a number beyond Double's range (`1e999`) keeps its original spelling;
/// stored events in `state` write an out-of-range number as `1e999` / `-1e999` (never `null`,
/// never an unencodable value); a stored event over 4 KiB of JSON is written as `event_size` +
/// `event_md5`. Every configured API key is redacted (``SecretRedactor``) in
/// everything written, body bytes included (before their base64 encoding).
public final class MockJournal: @unchecked Sendable { // `buffer`, `fd`, `entries` guarded by `lock`
    private let lock = NSLock()
    private var fd: Int32
    private var buffer: [UInt8] = []
    private var entries = 0
    /// The `errno` of the first write that failed; from then on nothing more is written.
    private var failedWrite: Int32?
    /// Told once, at the first failed write (`onWriteFailure(_:)`).
    private var failureObserver: (@Sendable (String) -> Void)?
    private let redactor: SecretRedactor
    /// Where the journal is written.
    public let path: String

    /// Creates (or truncates) the journal file at `path` and writes its head.
    ///
    /// `url` is the server's origin; `secrets` the API keys to redact. Throws
    /// `CocoaError(.fileWriteUnknown)` naming the path and errno when the file cannot be opened.
    public init(path: String, url: String, secrets: [String]) throws {
        self.path = path
        redactor = SecretRedactor(secrets: secrets)
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "cannot open \(path): \(String(cString: strerror(errno)))"])
        }
        var head = "{\"format\": \"experimently-journal/1\",\n \"url\": "
        head += JSONValue.string(url).jsonText
        head += ",\n \"history\": ["
        buffer = Array(head.utf8)
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Calls `observer` once, with what went wrong, when a write of the journal first fails (a
    /// full disk): `serve` says so while it runs rather than only at its exit (an eighty-seventh
    /// outside tester, M6: 150 requests went unjournaled in silence).
    public func onWriteFailure(_ observer: @escaping @Sendable (String) -> Void) {
        lock.withLock { failureObserver = observer }
    }

    /// Number of history entries written so far.
    public var entryCount: Int { lock.withLock { entries } }

    /// Adds one history entry (thread-safe). Ignored after `finish`.
    public func append(_ entry: HistoryEntry) {
        let text = Self.entryJSON(entry, redactor: redactor)
        lock.withLock {
            guard fd >= 0 else { return }
            buffer += Array((entries == 0 ? "\n  " : ",\n  ").utf8)
            buffer += Array(text.utf8)
            entries += 1
            if buffer.count >= 64 * 1024 { flushLocked() }
        }
    }

    /// Notes a failed write (the first one tells the observer); called with `lock` held.
    private func noteFailureLocked(_ code: Int32) {
        guard failedWrite == nil else { return }
        failedWrite = code
        failureObserver?("cannot write the journal \(path): \(String(cString: strerror(code))); requests are no longer journaled, and the file is removed at exit")
    }

    /// Writes the requests never answered (`pending`), closes `history`, writes `stopped_by`,
    /// `state` (with `events_total` and `exposures_total`, counts since the start even when the
    /// backend kept only a window) and `shutdown`, then flushes and closes the file.
    ///
    /// Throws `CocoaError(.fileWriteUnknown)` when a write fails (disk full, ...).
    public func finish(stoppedBy: String, pending: [HistoryEntry], state: BackendStateSnapshot,
                       totals: (events: Int, exposures: Int), shutdown: ShutdownReport) throws {
        for entry in pending { append(entry) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(MockJournal.iso(date))
        }
        var tail = "\n ],\n \"stopped_by\": " + JSONValue.string(stoppedBy).jsonText
        tail += ",\n \"state\": {\"assignments\": " + String(decoding: try encoder.encode(state.assignments), as: UTF8.self)
        tail += ",\n  \"exposures\": " + String(decoding: try encoder.encode(state.exposures), as: UTF8.self)
        tail += ",\n  \"events\": ["
        for (i, event) in state.events.enumerated() {
            tail += i == 0 ? "" : ","
            tail += "{\"id\":\(event.id),\"source\":" + JSONValue.string(event.source).jsonText
            let text = event.exact.map { $0.text(leaf: Self.valueText) } ?? Self.valueText(event.event)
            if text.utf8.count > 4096 {
                // Large events as size + MD5 of their compact JSON (the request is in `history`).
                tail += ",\"event_size\":\(text.utf8.count),\"event_md5\":\"" + MockMD5.digest(Array(text.utf8)).map { String(format: "%02x", $0) }.joined() + "\""
            } else {
                tail += ",\"event\":" + text
            }
            tail += ",\"received_at\":\"" + Self.iso(event.receivedAt) + "\"}"
        }
        tail += "],\n  \"events_total\": \(totals.events), \"exposures_total\": \(totals.exposures)}"
        tail += ",\n \"shutdown\": " + String(decoding: try encoder.encode(shutdown), as: UTF8.self) + "}\n"
        let redactedTail = redactor.redact(tail)
        try lock.withLock {
            guard fd >= 0 else { return }
            buffer += Array(redactedTail.utf8)
            _ = flushLocked()
            close(fd)
            fd = -1
            if let e = failedWrite {
                // A journal with a hole is no journal: removed, so no cut-off JSON stays in place.
                unlink(path)
                throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "cannot write \(path): \(String(cString: strerror(e))) (the incomplete journal was removed)"])
            }
        }
    }

    /// Writes the buffer; false when a write failed (the buffer is then dropped).
    @discardableResult
    private func flushLocked() -> Bool {
        var offset = 0
        var ok = failedWrite == nil
        while ok && offset < buffer.count {
            let n = buffer.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 { offset += n } else if n < 0 && errno == EINTR { continue } else { ok = false; noteFailureLocked(n == 0 ? EIO : errno) }
        }
        buffer.removeAll(keepingCapacity: buffer.count <= 256 * 1024)
        return ok
    }

    // MARK: Encoding

    /// One history entry as compact JSON text, API keys redacted.
    static func entryJSON(_ e: HistoryEntry, redactor: SecretRedactor) -> String {
        var o = "{\"seq\":\(e.seq),\"received_at\":\"\(iso(e.receivedAt))\""
        if let a = e.answeredAt { o += ",\"answered_at\":\"\(iso(a))\"" }
        if let p = e.peer { o += ",\"peer\":" + JSONValue.string(p).jsonText }
        o += ",\"method\":" + JSONValue.string(e.method).jsonText
        o += ",\"path\":" + JSONValue.string(e.path).jsonText
        if let q = e.query { o += ",\"query\":" + JSONValue.string(q).jsonText }
        o += ",\"headers\":" + headersText(e.headers)
        let body = redactor.redact(e.body)
        o += ",\"body\":\"" + body.base64EncodedString() + "\""
        if let size = e.bodySize { o += ",\"body_size\":\(size)" }
        if let md5 = e.bodyMD5 { o += ",\"body_md5\":\"\(md5)\"" }
        if let json = e.json {
            o += ",\"json\":" + jsonText(body: body, parsed: json, redactor: redactor)
        }
        if let r = e.route { o += ",\"route\":" + JSONValue.string(r).jsonText }
        if let n = e.note { o += ",\"note\":" + JSONValue.string(n).jsonText }
        if let f = e.fault {
            o += ",\"fault\":{\"id\":\(f.id.rawValue),\"action\":" + JSONValue.string(f.action).jsonText
            if let name = f.name { o += ",\"name\":" + JSONValue.string(name).jsonText }
            o += ",\"occurrence\":\(f.occurrence)}"
        }
        if let h = e.hold { o += ",\"hold\":\(h.rawValue)" }
        if let r = e.response {
            o += ",\"response\":{\"status\":\(r.status),\"headers\":" + headersText(r.headers)
            o += ",\"body\":\"" + redactor.redact(r.body).base64EncodedString() + "\""
            if let size = r.bodySize { o += ",\"body_size\":\(size)" }
            if let md5 = r.bodyMD5 { o += ",\"body_md5\":\"\(md5)\"" }
            o += "}"
        }
        if let outcome = e.outcome { o += ",\"outcome\":" + JSONValue.string(outcome).jsonText }
        if let original = e.transportRetryOf { o += ",\"transport_retry_of\":\(original)" }
        o += ",\"cancelled\":\(e.cancelled)}"
        return redactor.redact(o)
    }

    /// The request's JSON: its own text when that is valid JSON after redaction (so numbers
    /// keep their spelling), else the parsed value written with out-of-range numbers as `1e999`.
    static func jsonText(body: Data, parsed: JSONValue, redactor: SecretRedactor) -> String {
        if let text = String(data: body, encoding: .utf8), (try? JSONValue.parse(body)) != nil {
            return text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return redactor.redact(valueText(parsed))
    }

    private static func headersText(_ headers: [HeaderField]) -> String {
        "[" + headers.map { "{\"name\":" + JSONValue.string($0.name).jsonText + ",\"value\":" + JSONValue.string($0.value).jsonText + "}" }
            .joined(separator: ",") + "]"
    }

    /// Compact JSON of `value`, keys sorted; a non-finite number is written `1e999` or `-1e999`
    /// (it can only come from such a literal: JSON has no NaN).
    static func valueText(_ value: JSONValue) -> String {
        switch value {
        case .number(let n) where n.isInfinite: return n < 0 ? "-1e999" : "1e999"
        case .number(let n) where n.isNaN: return "null"
        case .array(let a): return "[" + a.map(valueText).joined(separator: ",") + "]"
        case .object(let o):
            return "{" + o.keys.sorted().map { JSONValue.string($0).jsonText + ":" + valueText(o[$0]!) }.joined(separator: ",") + "}"
        default: return value.jsonText
        }
    }

    /// RFC 3339 UTC with milliseconds, e.g. `2026-11-30T09:21:01.123Z` (no formatter: thread-safe and fast).
    static func iso(_ date: Date) -> String {
        let t = date.timeIntervalSince1970
        var seconds = time_t(t.rounded(.down))
        var millis = Int(((t - t.rounded(.down)) * 1000).rounded(.down))
        if millis >= 1000 { millis = 999 }
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04ld-%02ld-%02ldT%02ld:%02ld:%02ld.%03ldZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                      Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), millis)
    }
}
