import Foundation

// The journal's redaction (issue 10 section 3): a backend created with secrets records every
// history entry with each secret replaced by `***`, wherever the client put it (the `X-API-Key`
// header, `Authorization: Bearer`, the query, the path, the body, and what the answer echoed).

extension JSONValue {
    /// This value with every string (member names included) redacted by `redactor`.
    func redacted(by redactor: SecretRedactor) -> JSONValue {
        switch self {
        case .string(let s): return .string(redactor.redact(s))
        case .array(let a): return .array(a.map { $0.redacted(by: redactor) })
        case .object(let o):
            var out: [String: JSONValue] = [:]
            for (k, v) in o { out[redactor.redact(k)] = v.redacted(by: redactor) }
            return .object(out)
        default: return self
        }
    }
}

extension RecordedResponse {
    /// This response with every secret in its header values and body replaced by `***`.
    public func redacted(by redactor: SecretRedactor) -> RecordedResponse {
        guard !redactor.isEmpty else { return self }
        var copy = self
        copy.headers = headers.map { HeaderField(name: $0.name, value: redactor.redact($0.value)) }
        copy.body = redactor.redact(body)
        return copy
    }
}

extension HistoryEntry {
    /// This entry with every secret replaced by `***` in the path, query, header values, body
    /// (raw bytes and parsed JSON), note and response.
    public func redacted(by redactor: SecretRedactor) -> HistoryEntry {
        guard !redactor.isEmpty else { return self }
        var copy = self
        copy.path = redactor.redact(path)
        copy.query = query.map { redactor.redact($0) }
        copy.headers = headers.map { HeaderField(name: $0.name, value: redactor.redact($0.value)) }
        copy.body = redactor.redact(body)
        copy.json = json?.redacted(by: redactor)
        copy.note = note.map { redactor.redact($0) }
        copy.response = response?.redacted(by: redactor)
        return copy
    }
}
