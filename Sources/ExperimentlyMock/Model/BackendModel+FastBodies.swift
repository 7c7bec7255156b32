import Foundation

// Fixed-shape answers written straight into their final buffer (issue 15 section 3: the flag
// evaluation is the request an SDK sends most). Each gives exactly the bytes and headers of the
// general path it stands in for (`JSONValue.serializedObject`, headers appended one array at a
// time); FastPathTests compares them.

extension BackendModel {
    /// The 200 body of a flag evaluation, `{"config":null,"enabled":B,"key":K,"reason":R}` (keys
    /// sorted, compact: CONTRACT.md section 2), the same bytes as
    /// `JSONValue.serializedObject([("key", .string(key)), ("enabled", .bool(enabled)),
    /// ("config", .null), ("reason", .string(reason))])`.
    ///
    /// Written into one `Data` of the exact size when `key` and `reason` need no JSON escape (no
    /// `"`, `\` or control character: every fixture key); otherwise the general serializer.
    static func flagEvaluationBody(key: String, enabled: Bool, reason: String) -> Data {
        let general = {
            JSONValue.serializedObject([("key", .string(key)), ("enabled", .bool(enabled)), ("config", .null), ("reason", .string(reason))])
        }
        let head: StaticString = enabled ? #"{"config":null,"enabled":true,"key":""# : #"{"config":null,"enabled":false,"key":""#
        let middle: StaticString = #"","reason":""#
        let end: StaticString = #""}"#
        let written = key.utf8.withContiguousStorageIfAvailable { k -> Data? in
            reason.utf8.withContiguousStorageIfAvailable { r -> Data? in
                guard Self.needsNoEscape(k), Self.needsNoEscape(r) else { return nil }
                let total = head.utf8CodeUnitCount + k.count + middle.utf8CodeUnitCount + r.count + end.utf8CodeUnitCount
                var data = Data(count: total)
                data.withUnsafeMutableBytes { out in
                    var at = 0
                    func put(_ bytes: UnsafeRawBufferPointer) {
                        guard !bytes.isEmpty else { return }
                        UnsafeMutableRawBufferPointer(rebasing: out[at..<at + bytes.count]).copyMemory(from: bytes)
                        at += bytes.count
                    }
                    head.withUTF8Buffer { put(UnsafeRawBufferPointer($0)) }
                    put(UnsafeRawBufferPointer(k))
                    middle.withUTF8Buffer { put(UnsafeRawBufferPointer($0)) }
                    put(UnsafeRawBufferPointer(r))
                    end.withUTF8Buffer { put(UnsafeRawBufferPointer($0)) }
                }
                return data
            } ?? nil
        } ?? nil
        return written ?? general()
    }

    /// True when the UTF-8 bytes go into a JSON string as they are (RFC 8259 section 7: no
    /// quotation mark, reverse solidus or control character).
    static func needsNoEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for b in bytes where b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { return false }
        return true
    }

    /// `response` with the three `X-RateLimit-*` headers after its own (CONTRACT.md section 2:
    /// every answer within the limit carries them), built as one array of the final size.
    static func withRateLimitHeaders(_ response: MockResponse, limit: Int, remaining: Int, windowSeconds: Int) -> MockResponse {
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(response.headers.count + 3)
        headers.append(contentsOf: response.headers)
        headers.append(("X-RateLimit-Limit", String(limit)))
        headers.append(("X-RateLimit-Remaining", String(remaining)))
        headers.append(("X-RateLimit-Window", String(windowSeconds)))
        return MockResponse(status: response.status, headers: headers, body: response.body)
    }
}
