import Foundation

/// The local-evaluation ruleset `GET /api/v1/sdk/ruleset` serves, built from the fixtures' flags
/// (CONTRACT.md section 2; shape from upstream `backend/app/services/sdk_ruleset.py` and
/// `tests/sdk-contract/ruleset-vectors.json`, schema 1, beta).
///
/// Shape: `{"schema": 1, "version": "<sha256 hex>", "bucketing": "md5-mod100-v1", "flags": [...]}`,
/// flags sorted by key (Unicode scalar order). A flag that is not ACTIVE is `{"key", "active": false}`.
/// An ACTIVE flag whose rules the mock can state portably is
/// `{"key", "active": true, "evaluation": "local", "rollout_percentage", "rules": [{"id",
/// "rollout_percentage", "match": {"op": "and", "conditions": [{"attribute", "operator",
/// "value"}], "groups": []}}], "default_rule": null}`; otherwise (a condition on the mock's
/// special `user_id` attribute, or a value outside its operator's portable domain) it is
/// `{"key", "active": true, "evaluation": "remote"}` and an SDK asks the evaluate route.
/// Operators: the mock's `eq`, `ne`, `gt`, `lt`, `contains`, `in` are written as the engine's
/// `eq`, `neq`, `gt`, `lt`, `contains`, `in`. `version` is the SHA-256 of the canonical JSON of
/// the document without `version` (sorted keys, no whitespace, ASCII only), and the body is
/// that same canonical serialization with `version` added.
public enum SDKRuleset {
    /// The document format (`schema`).
    public static let schema = 1
    /// The flag bucketing function's name: `int(md5(user_id + ":" + flag_key), 16) % 100 < percentage`.
    public static let bucketing = "md5-mod100-v1"
    /// The largest integer both Python and JavaScript represent exactly (upstream `MAX_SAFE_INTEGER`).
    public static let maxSafeInteger: Double = 9_007_199_254_740_991

    /// The whole document: its JSON value, its canonical body bytes and its version.
    public static func document(_ fixtures: Fixtures) -> (json: JSONValue, body: Data, version: String) {
        let flags = fixtures.flags
            .sorted { $0.key.unicodeScalars.map(\.value).lexicographicallyPrecedes($1.key.unicodeScalars.map(\.value)) }
            .map(flagEntry)
        let content: [String: JSONValue] = [
            "schema": .number(Double(schema)), "bucketing": .string(bucketing), "flags": .array(flags),
        ]
        let version = MockSHA256.hex(Array(canonicalJSON(.object(content)).utf8))
        var whole = content
        whole["version"] = .string(version)
        let json = JSONValue.object(whole)
        return (json, Data(canonicalJSON(json).utf8), version)
    }

    /// The ruleset entry of one flag (see the type's documentation).
    public static func flagEntry(_ flag: Flag) -> JSONValue {
        guard flag.status == .active else { return .object(["key": .string(flag.key), "active": .bool(false)]) }
        let remote = JSONValue.object(["key": .string(flag.key), "active": .bool(true), "evaluation": .string("remote")])
        var rules: [JSONValue] = []
        for (i, rule) in flag.rules.enumerated() {
            var conditions: [JSONValue] = []
            for condition in rule.conditions {
                guard isLocal(condition) else { return remote }
                conditions.append(.object([
                    "attribute": .string(condition.attribute), "operator": .string(operatorName(condition.op)), "value": condition.value,
                ]))
            }
            rules.append(.object([
                "id": .string("rule-\(i + 1)"), "rollout_percentage": .number(Double(rule.percentage)),
                "match": .object(["op": .string("and"), "conditions": .array(conditions), "groups": .array([])]),
            ]))
        }
        return .object([
            "key": .string(flag.key), "active": .bool(true), "evaluation": .string("local"),
            "rollout_percentage": .number(Double(flag.rolloutPercentage)), "rules": .array(rules), "default_rule": .null,
        ])
    }

    /// The engine's name of a mock operator.
    public static func operatorName(_ op: Condition.Operator) -> String {
        switch op {
        case .eq: return "eq"
        case .ne: return "neq"
        case .gt: return "gt"
        case .lt: return "lt"
        case .contains: return "contains"
        case .in: return "in"
        }
    }

    private static func isPortableNumber(_ v: JSONValue) -> Bool {
        guard case .number(let n) = v else { return false }
        return n.isFinite && abs(n) <= maxSafeInteger
    }

    /// Whether an SDK may evaluate `condition` itself (upstream `condition_is_local`, plus: the
    /// mock's `user_id` attribute, which means the request's user id, is always remote; and an
    /// attribute with a `.` is remote: upstream resolves dotted paths against nested contexts and
    /// aliases (its ruleset vectors have `nested`, `alias-user` and `deep` flags), while the
    /// mock's evaluate route matches the flat key, so a local evaluator following upstream would
    /// disagree with the mock's own answers (an outside audit)).
    public static func isLocal(_ condition: Condition) -> Bool {
        if Array(condition.attribute.unicodeScalars) == Array("user_id".unicodeScalars) { return false }
        if condition.attribute.utf8.contains(UInt8(ascii: ".")) { return false }
        let value = condition.value
        switch condition.op {
        case .contains: return value.stringValue != nil
        case .eq, .ne: return value.stringValue != nil || isPortableNumber(value)
        case .gt, .lt: return isPortableNumber(value)
        case .in:
            guard let items = value.arrayValue, !items.isEmpty else { return false }
            return items.allSatisfy { $0.stringValue != nil } || items.allSatisfy(isPortableNumber)
        }
    }

    /// The canonical serialization the version is computed over: sorted keys (by Unicode
    /// scalars), no whitespace, ASCII only (`\uXXXX` escapes, surrogate pairs above U+FFFF), as
    /// Python's `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=True)`, except for
    /// numbers: integral numbers below 2^53 are written without a fraction (`5.0` as `5`, `-0.0` as
    /// `0`; Python keeps `5.0` and `-0.0`, which a `JSONValue` cannot tell apart), so the
    /// `version` of a ruleset with such a value differs from upstream's. SDKs treat it as opaque.
    public static func canonicalJSON(_ value: JSONValue) -> String {
        var out = ""
        write(value, into: &out)
        return out
    }

    private static func write(_ value: JSONValue, into out: inout String) {
        switch value {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n):
            if !n.isFinite { out += "null" }
            else if n == n.rounded(), abs(n) < 9_007_199_254_740_992 { out += String(Int64(n)) }
            else { out += "\(n)" }
        case .string(let s): writeString(s, into: &out)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                write(item, into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            let keys = members.keys.sorted { $0.unicodeScalars.map(\.value).lexicographicallyPrecedes($1.unicodeScalars.map(\.value)) }
            for (i, key) in keys.enumerated() {
                if i > 0 { out += "," }
                writeString(key, into: &out)
                out += ":"
                write(members[key]!, into: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, into out: inout String) {
        func hex4(_ v: UInt32) -> String {
            let h = String(v, radix: 16)
            return "\\u" + String(repeating: "0", count: max(0, 4 - h.count)) + h
        }
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                let v = scalar.value
                if v < 0x20 || (v > 0x7e && v < 0x10000) {
                    out += hex4(v)
                } else if v >= 0x10000 {
                    let u = v - 0x10000
                    out += hex4(0xD800 + (u >> 10)) + hex4(0xDC00 + (u & 0x3FF))
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}
