import Foundation

/// A request decoded once for routing, validation, fault matching and history.
///
/// A class (immutable, so Sendable): it travels from the transport through the fault script,
/// the model, the ticket and `seen`, and a reference is passed instead of a 200-byte copy.
final class IncomingRequest: Sendable {
    /// The request as received.
    let raw: MockRequest
    /// Upper-cased method.
    let method: String
    /// Percent-decoded path segments after the leading `/` (a trailing `/` gives an empty last segment).
    let segments: [String]
    /// Query pairs, percent-decoded (`+` is a space); a value is nil when its bytes are not UTF-8.
    let queryPairs: [(name: String, value: String?)]
    /// The raw (still percent-encoded) path, computed once (`raw.rawPath`).
    let rawPath: String
    /// The body parsed as JSON: nil when empty, else the value or the parse error.
    let body: Result<ParsedJSON, JSONParseError>?
    /// JSON paths (relative to the body) of strings that held lone surrogate escapes.
    let loneSurrogates: Set<[JSONPathComponent]>

    init(_ request: MockRequest) {
        raw = request
        // Fast paths (the common request has an upper-case method and no escapes): no copies.
        method = request.method.utf8.contains { $0 &- 0x61 < 26 } ? request.method.uppercased() : request.method
        // One pass over the target's UTF-8 bytes: the `?`, the path segments and the query
        // pairs (Substring slicing and index checks were a third of BackendModel.respond).
        // Every separator is an ASCII byte, never inside a multi-byte scalar, so each piece
        // is whole UTF-8; pieces with escapes go through PercentDecoding as before.
        var target = request.target
        var path = ""
        var parts: [String] = []
        var pairs: [(name: String, value: String?)] = []
        // Room for the contract's routes (at most 6 segments) and a few query pairs: no regrowth.
        parts.reserveCapacity(8)
        target.withUTF8 { bytes in
            let end = bytes.count
            var mark = end
            for i in 0..<end where bytes[i] == UInt8(ascii: "?") { mark = i; break }
            func text(_ from: Int, _ to: Int) -> String { String(decoding: UnsafeBufferPointer(rebasing: bytes[from..<to]), as: UTF8.self) }
            func has(_ from: Int, _ to: Int, _ byte: UInt8, or other: UInt8? = nil) -> Bool {
                for i in from..<to where bytes[i] == byte || bytes[i] == other { return true }
                return false
            }
            path = mark == end ? request.target : text(0, mark)
            // Segments: split at every "/" keeping empty pieces, then drop a leading empty one.
            var start = 0
            var first = true
            func segment(_ from: Int, _ to: Int) {
                defer { first = false }
                if first && from == to { return }
                let raw = text(from, to)
                guard has(from, to, UInt8(ascii: "%")) else { parts.append(raw); return }
                guard let decoded = PercentDecoding.decode(raw[...], plusAsSpace: false) else { parts.append(raw); return }
                parts.append(String(validating: decoded, as: UTF8.self) ?? String(decoding: decoded, as: UTF8.self))
            }
            for i in 0..<mark where bytes[i] == UInt8(ascii: "/") { segment(start, i); start = i + 1 }
            segment(start, mark)
            // Query pairs: split at "&" omitting empty pieces; name and value at the first "=".
            guard mark < end else { return }
            pairs.reserveCapacity(4)
            func pair(_ from: Int, _ to: Int) {
                guard from < to else { return }
                var eq = to
                for i in from..<to where bytes[i] == UInt8(ascii: "=") { eq = i; break }
                let valueStart = eq < to ? eq + 1 : to
                let name = has(from, eq, UInt8(ascii: "%"), or: UInt8(ascii: "+"))
                    ? { let raw = text(from, eq); return PercentDecoding.decode(raw[...], plusAsSpace: true).flatMap { String(validating: $0, as: UTF8.self) } ?? raw }()
                    : text(from, eq)
                let value = has(valueStart, to, UInt8(ascii: "%"), or: UInt8(ascii: "+"))
                    ? PercentDecoding.decode(text(valueStart, to)[...], plusAsSpace: true).flatMap { String(validating: $0, as: UTF8.self) }
                    : text(valueStart, to)
                pairs.append((name, value))
            }
            var itemStart = mark + 1
            for i in (mark + 1)..<end where bytes[i] == UInt8(ascii: "&") { pair(itemStart, i); itemStart = i + 1 }
            pair(itemStart, end)
        }
        rawPath = path
        segments = parts
        queryPairs = pairs
        if request.body.isEmpty {
            body = nil
            loneSurrogates = []
        } else {
            do {
                let parsed = try JSONValue.parse(request.body)
                body = .success(parsed)
                loneSurrogates = Set(parsed.loneSurrogatePaths)
            } catch let error as JSONParseError {
                body = .failure(error)
                loneSurrogates = []
            } catch {
                body = .failure(JSONParseError(offset: 0, message: "\(error)"))
                loneSurrogates = []
            }
        }
    }

    /// `text` split at every ASCII byte `separator`, by UTF-8 bytes (an ASCII byte never occurs
    /// inside a multi-byte scalar, so the pieces are whole strings). `String.split` walks
    /// Characters (grapheme breaking) and was a fifth of `BackendModel.respond`.
    static func split(_ text: Substring, on separator: UInt8, omittingEmpty: Bool) -> [Substring] {
        var pieces: [Substring] = []
        let utf8 = text.utf8
        var start = utf8.startIndex
        var i = start
        while i != utf8.endIndex {
            if utf8[i] == separator {
                if !(omittingEmpty && start == i) { pieces.append(text[start..<i]) }
                start = utf8.index(after: i)
            }
            i = utf8.index(after: i)
        }
        if !(omittingEmpty && start == utf8.endIndex) { pieces.append(text[start..<utf8.endIndex]) }
        return pieces
    }

    /// The query value named `name` as the backend reads it: the last one when the name repeats
    /// (FastAPI reads a scalar query parameter with Starlette's `QueryParams.get`, whose
    /// dictionary keeps the last pair: `user_id=a&user_id=b` is user "b"); nil when absent,
    /// `.some(nil)` when present but not UTF-8.
    func query(_ name: String) -> String?? {
        guard let pair = queryPairs.last(where: { $0.name.isExactly(name) }) else { return nil }
        return .some(pair.value)
    }

    /// The parsed JSON body value, when the body is valid JSON.
    var json: JSONValue? { if case .success(let p)? = body { return p.value }; return nil }
}

/// Percent-decoding of URL components (RFC 3986 section 2.1).
public enum PercentDecoding {
    /// A query name or value as the backend reads it: `%XX` escapes decoded and `+` read as a
    /// space (HTML form encoding, as Starlette's `parse_qsl`), so `user_id=a+b` is user "a b";
    /// `nil` when an escape is malformed or the bytes are not UTF-8. The harness reads queries
    /// with it too, so its checks and matchers see the user the backend served.
    public static func queryComponent(_ s: String) -> String? {
        guard s.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) else { return s }
        return decode(s[...], plusAsSpace: true).flatMap { String(validating: $0, as: UTF8.self) }
    }

    /// `raw` (a request target, a path) in the normal form of RFC 3986 section 6.2.2: the hex
    /// digits of every `%XX` escape upper-cased (section 6.2.2.1) and the escapes of unreserved
    /// characters (letters, digits, `-`, `.`, `_`, `~`) decoded (section 6.2.2.2). Two targets
    /// with the same normal form are the same URI, so a fault rule's `match.path` and a `target`
    /// matcher compare these: `%2f` and `%2F`, or `sdk%5Fflag` and `sdk_flag`, are one path (a
    /// tenth outside tester: an SDK writing lower-case escapes failed two scenarios, one escaping
    /// `_` every fault rule). Reserved characters stay escaped (`%2F` is not `/`) and a malformed
    /// escape stays as written.
    public static func normalizedTarget(_ raw: String) -> String {
        rewritingEscapes(raw) { value, high, low, out in
            let unreserved = (0x41...0x5A).contains(value) || (0x61...0x7A).contains(value) || (0x30...0x39).contains(value)
                || value == UInt8(ascii: "-") || value == UInt8(ascii: ".") || value == UInt8(ascii: "_") || value == UInt8(ascii: "~")
            if unreserved { out.append(value) } else { out += [UInt8(ascii: "%"), hexDigits[Int(high)], hexDigits[Int(low)]] }
        }
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// `raw` with each well-formed `%XX` escape replaced by what `write` appends for it (the
    /// byte it names, and its two digits' values); every other byte, a malformed escape's
    /// included, copied as it is. Without `%` it is `raw`.
    private static func rewritingEscapes(_ raw: String, _ write: (_ value: UInt8, _ high: UInt8, _ low: UInt8, _ out: inout [UInt8]) -> Void) -> String {
        guard raw.utf8.contains(UInt8(ascii: "%")) else { return raw }
        let bytes = Array(raw.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let h = hexValue(bytes[i + 1]), let l = hexValue(bytes[i + 2]) {
                write(h << 4 | l, h, l, &out)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The path as the server routes and rate-limits it (ASGI's `path`, Python's
    /// `urllib.parse.unquote`): every well-formed `%XX` escape decoded (`%2F` too), a malformed
    /// one kept as written, and bytes that are not UTF-8 read with U+FFFD. Without `%` it is `raw`.
    public static func servedPath(_ raw: String) -> String {
        rewritingEscapes(raw) { value, _, _, out in out.append(value) }
    }

    /// The value of one hexadecimal digit (either case), or `nil`.
    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x41...0x46: return b - 0x41 + 10
        case 0x61...0x66: return b - 0x61 + 10
        default: return nil
        }
    }

    /// Decodes `%XX` escapes (and `+` as space when `plusAsSpace`); nil on a malformed escape.
    static func decode(_ s: Substring, plusAsSpace: Bool) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        var it = s.utf8.makeIterator()
        while let b = it.next() {
            if b == UInt8(ascii: "%") {
                guard let h = it.next(), let l = it.next(), let hv = hexValue(h), let lv = hexValue(l) else { return nil }
                out.append(hv << 4 | lv)
            } else if plusAsSpace && b == UInt8(ascii: "+") {
                out.append(0x20)
            } else {
                out.append(b)
            }
        }
        return out
    }
}

/// The routes of the backend (CONTRACT.md section 1 table and section 2 "Also served").
enum Route: Sendable {
    case evaluateGET, evaluatePOST, assign, track, batch
    case userFlags, userAssignments, ruleset, assignBatch

    /// "METHOD /template".
    var name: String {
        switch self {
        case .evaluateGET: return "GET /api/v1/feature-flags/evaluate/{key}"
        case .evaluatePOST: return "POST /api/v1/feature-flags/evaluate/{key}"
        case .assign: return "POST /api/v1/tracking/assign"
        case .track: return "POST /api/v1/tracking/track"
        case .batch: return "POST /api/v1/tracking/batch"
        case .userFlags: return "GET /api/v1/feature-flags/user/{user_id}"
        case .userAssignments: return "GET /api/v1/tracking/assignments/{user_id}"
        case .ruleset: return "GET /api/v1/sdk/ruleset"
        case .assignBatch: return "POST /api/v1/tracking/assign/batch"
        }
    }

    enum Match { case found(Route, pathKey: String?), methodNotAllowed([String], template: String), notFound }

    private static let templates: [(template: [String], routes: [(String, Route?)])] = [
        (["api", "v1", "feature-flags", "evaluate", "{key}"], [("GET", .evaluateGET), ("POST", .evaluatePOST)]),
        (["api", "v1", "tracking", "assign"], [("POST", .assign)]),
        (["api", "v1", "tracking", "track"], [("POST", .track)]),
        (["api", "v1", "tracking", "batch"], [("POST", .batch)]),
        (["api", "v1", "feature-flags", "user", "{key}"], [("GET", .userFlags)]),
        (["api", "v1", "tracking", "assignments", "{key}"], [("GET", .userAssignments)]),
        (["api", "v1", "sdk", "ruleset"], [("GET", .ruleset)]),
        (["api", "v1", "tracking", "assign", "batch"], [("POST", .assignBatch)]),
        (["health"], [("GET", nil)]),
    ]

    static func match(method: String, segments: [String]) -> Match {
        for (template, routes) in templates where template.count == segments.count {
            var key: String?
            var ok = true
            for (t, s) in zip(template, segments) {
                if t == "{key}" { if s.isEmpty { ok = false; break }; key = s } else if t != s { ok = false; break }
            }
            guard ok else { continue }
            if let route = routes.first(where: { $0.0 == method })?.1 { return .found(route, pathKey: key) }
            return .methodNotAllowed(routes.map(\.0), template: "/" + template.joined(separator: "/"))
        }
        return .notFound
    }

    /// Names the nearest route to an unmatched path and the first thing that differed.
    static func nearest(method: String, rawPath: String, segments: [String]) -> String {
        var best: (score: Int, text: String)?
        for (template, routes) in templates {
            var score = abs(template.count - segments.count)
            var firstDiff: String?
            for i in 0..<min(template.count, segments.count) where template[i] != "{key}" && template[i] != segments[i] {
                score += 2
                if firstDiff == nil { firstDiff = "segment \(i + 1) is '\(segments[i])', expected '\(template[i])'" }
            }
            if firstDiff == nil, template.count != segments.count {
                firstDiff = "path has \(segments.count) segments, expected \(template.count)"
                    + (segments.last == "" ? " (trailing '/')" : "")
            }
            let methods = routes.map(\.0)
            if !methods.contains(method) { score += 1 }
            let text = "no route for \(method) \(rawPath); nearest is \(methods.joined(separator: "|")) /\(template.joined(separator: "/")): \(firstDiff ?? "method differs")"
            if best == nil || score < best!.score { best = (score, text) }
        }
        return best!.text
    }
}

/// One FastAPI-style validation problem (`{type, loc, msg}`), never carrying the input.
struct ValidationIssue: Sendable, Equatable {
    var type: String
    var loc: [JSONPathComponent]
    var msg: String

    var json: JSONValue { .object(["type": .string(type), "loc": .array(loc.map(\.jsonValue)), "msg": .string(msg)]) }
}

extension JSONPathComponent: ExpressibleByStringLiteral {
    /// A `.key` from a string literal.
    public init(stringLiteral value: String) { self = .key(value) }
}

/// Field validation rules (CONTRACT.md section 2: lengths, NUL and lone surrogates -> 422).
enum Validate {
    static func checkString(_ s: String, loc: [JSONPathComponent], min: Int, max: Int, loneSurrogate: Bool, issues: inout [ValidationIssue]) -> String? {
        if loneSurrogate {
            issues.append(ValidationIssue(type: "value_error", loc: loc, msg: "Value error, must not contain lone surrogates"))
            return nil
        }
        if s.unicodeScalars.contains("\u{0}") {
            issues.append(ValidationIssue(type: "value_error", loc: loc, msg: "Value error, must not contain NUL characters"))
            return nil
        }
        let count = s.unicodeScalars.count
        if count < min {
            issues.append(ValidationIssue(type: "string_too_short", loc: loc, msg: "String should have at least \(min) character\(min == 1 ? "" : "s")"))
            return nil
        }
        if count > max {
            issues.append(ValidationIssue(type: "string_too_long", loc: loc, msg: "String should have at most \(max) characters"))
            return nil
        }
        return s
    }

    static func queryString(_ v: String??, loc: [JSONPathComponent], min: Int, max: Int, issues: inout [ValidationIssue]) -> String? {
        guard let present = v else {
            issues.append(ValidationIssue(type: "missing", loc: loc, msg: "Field required"))
            return nil
        }
        guard let s = present else {
            // Bytes that are not UTF-8 (e.g. a percent-encoded lone surrogate %ED%A0%80).
            issues.append(ValidationIssue(type: "value_error", loc: loc, msg: "Value error, must be valid UTF-8 without lone surrogates"))
            return nil
        }
        return checkString(s, loc: loc, min: min, max: max, loneSurrogate: false, issues: &issues)
    }

    static func string(_ object: [String: JSONValue], _ name: String, loc: [JSONPathComponent], min: Int, max: Int, required: Bool,
                       surrogates: Set<[JSONPathComponent]>, issues: inout [ValidationIssue]) -> String? {
        let fieldLoc = loc + [.key(name)]
        guard let value = object[name], value != .null else {
            if required { issues.append(ValidationIssue(type: "missing", loc: fieldLoc, msg: "Field required")) }
            return nil
        }
        guard let s = value.stringValue else {
            issues.append(ValidationIssue(type: "string_type", loc: fieldLoc, msg: "Input should be a valid string"))
            return nil
        }
        return checkString(s, loc: fieldLoc, min: min, max: max, loneSurrogate: surrogates.contains(Array(fieldLoc.dropFirst())), issues: &issues)
    }

    static func optionalObject(_ object: [String: JSONValue], _ name: String, loc: [JSONPathComponent], issues: inout [ValidationIssue]) -> [String: JSONValue]? {
        guard let value = object[name], value != .null else { return nil }
        guard let o = value.objectValue else {
            issues.append(ValidationIssue(type: "dict_type", loc: loc + [.key(name)], msg: "Input should be a valid dictionary"))
            return nil
        }
        return o
    }

    static func bodyObject(_ request: IncomingRequest, issues: inout [ValidationIssue]) -> [String: JSONValue]? {
        switch request.body {
        case nil:
            issues.append(ValidationIssue(type: "missing", loc: ["body"], msg: "Field required"))
            return nil
        case _? where !jsonContentType(request.raw.header("Content-Type")):
            // FastAPI reads a body as JSON only without a Content-Type or with application/json
            // (or application/*+json); any other type leaves it bytes, which no model accepts (a
            // mock fidelity tester: the mock read a text/plain body as JSON and answered 200).
            issues.append(ValidationIssue(type: "model_attributes_type", loc: ["body"], msg: "Input should be a valid dictionary or object to extract fields from"))
            return nil
        case .failure(let error)?:
            issues.append(ValidationIssue(type: "json_invalid", loc: ["body", .index(error.offset)], msg: "JSON decode error: \(error.message)"))
            return nil
        case .success(let parsed)?:
            guard let o = parsed.value.objectValue else {
                issues.append(ValidationIssue(type: "model_attributes_type", loc: ["body"], msg: "Input should be a valid dictionary or object to extract fields from"))
                return nil
            }
            return o
        }
    }

    /// Whether a request's Content-Type lets FastAPI read its body as JSON: absent, or
    /// `application/json` or `application/<anything>+json`, parameters ignored, without ASCII case;
    /// an empty value counts as absent (FastAPI tests the header's truth).
    static func jsonContentType(_ value: String?) -> Bool {
        guard let value, !value.isEmpty else { return true }
        // ASCII (every real header): the same rule on bytes, without Foundation's trimming (14% of
        // an assignment's answer on Linux). Anything else takes the Unicode path below, where
        // canonical equivalence can matter (U+037E is ";" as a Character).
        if value.utf8.allSatisfy({ $0 < 0x80 }) {
            var type = Substring(value).utf8
            if let semicolon = type.firstIndex(of: UInt8(ascii: ";")) { type = type[..<semicolon] }
            // `CharacterSet.whitespaces` among ASCII: space and tab.
            while let first = type.first, first == 0x20 || first == 0x09 { type = type.dropFirst() }
            while let last = type.last, last == 0x20 || last == 0x09 { type = type.dropLast() }
            let lower = type.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }
            let prefix = Array("application/".utf8)
            guard lower.count >= prefix.count, lower.prefix(prefix.count).elementsEqual(prefix) else { return false }
            let subtype = lower.dropFirst(prefix.count)
            return subtype.elementsEqual("json".utf8) || (subtype.count >= 5 && subtype.suffix(5).elementsEqual("+json".utf8))
        }
        return jsonContentTypeByCharacters(value)
    }

    /// `jsonContentType` by Characters (the rule as first written; the path for non-ASCII values).
    static func jsonContentTypeByCharacters(_ value: String) -> Bool {
        let type = value.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        let trimmed = type.trimmingCharacters(in: .whitespaces).lowercased()
        guard trimmed.hasPrefix("application/") else { return false }
        let subtype = trimmed.dropFirst("application/".count)
        return subtype == "json" || subtype.hasSuffix("+json")
    }

    /// Validates one event object (track body or batch entry) at `loc`.
    static func event(_ e: [String: JSONValue], loc: [JSONPathComponent], surrogates: Set<[JSONPathComponent]>, issues: inout [ValidationIssue]) {
        let before = issues.count
        _ = string(e, "event_type", loc: loc, min: 1, max: 100, required: true, surrogates: surrogates, issues: &issues)
        _ = string(e, "user_id", loc: loc, min: 1, max: 255, required: true, surrogates: surrogates, issues: &issues)
        _ = string(e, "event_name", loc: loc, min: 0, max: 255, required: false, surrogates: surrogates, issues: &issues)
        let exp = string(e, "experiment_key", loc: loc, min: 1, max: 100, required: false, surrogates: surrogates, issues: &issues)
        let flag = string(e, "feature_flag_key", loc: loc, min: 1, max: 100, required: false, surrogates: surrogates, issues: &issues)
        if let v = e["value"], v != .null, v.numberValue == nil {
            issues.append(ValidationIssue(type: "float_type", loc: loc + ["value"], msg: "Input should be a valid number"))
        }
        _ = optionalObject(e, "metadata", loc: loc, issues: &issues)
        _ = string(e, "timestamp", loc: loc, min: 1, max: 64, required: false, surrogates: surrogates, issues: &issues)
        if issues.count == before, exp == nil, flag == nil {
            issues.append(ValidationIssue(type: "value_error", loc: loc, msg: "Value error, Either experiment_key or feature_flag_key must be provided"))
        }
    }
}
