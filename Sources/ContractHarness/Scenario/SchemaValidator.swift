import Foundation
import ExperimentlyMock

/// Validates JSON against the JSON Schema subset ``ScenarioSchema`` emits: `type` (one or a
/// list), `const`, `enum`, `properties`, `required`, `additionalProperties` (`false` or a
/// schema), `minProperties`, `items`, `minItems`, `minimum`, `maximum`, `exclusiveMinimum`,
/// `oneOf`, and `$ref` to `#/$defs/NAME`. Other keywords (`description`, `$schema`, `$id`,
/// `title`) are annotations.
struct SchemaValidator {
    let root: JSONValue

    /// The problems of `value` at JSON path `path`, each `PATH: what is wrong`; empty when valid.
    func problems(_ value: JSONValue, _ schema: JSONValue, path: String = "$") -> [String] {
        guard case .object(let s) = schema else { return [] }
        if let ref = s["$ref"]?.stringValue {
            let name = ref.replacingOccurrences(of: "#/$defs/", with: "")
            guard let target = root["$defs"]?[name] else { return ["\(path): the schema has no \(ref)"] }
            return problems(value, target, path: path)
        }
        var out: [String] = []
        if let t = s["type"] {
            let allowed = t.arrayValue?.compactMap(\.stringValue) ?? [t.stringValue ?? ""]
            if !allowed.contains(where: { Self.has(value, type: $0) }) {
                return ["\(path): expected \(allowed.joined(separator: " or ")), found \(ObjectReader.brief(value))"]
            }
        }
        if let c = s["const"], c != value { out.append("\(path): expected \(c.jsonText), found \(ObjectReader.brief(value))") }
        if let e = s["enum"]?.arrayValue, !e.contains(value) {
            out.append("\(path): expected one of \(e.map(\.jsonText).joined(separator: ", ")), found \(ObjectReader.brief(value))")
        }
        if case .number(let d) = value {
            if case .number(let m)? = s["minimum"], d < m { out.append("\(path): expected at least \(m), found \(d)") }
            if case .number(let m)? = s["maximum"], d > m { out.append("\(path): expected at most \(m), found \(d)") }
            if case .number(let m)? = s["exclusiveMinimum"], d <= m { out.append("\(path): expected more than \(m), found \(d)") }
        }
        if case .array(let items) = value {
            if case .number(let m)? = s["minItems"], Double(items.count) < m { out.append("\(path): expected at least \(Int(m)) item(s), found \(items.count)") }
            if let itemSchema = s["items"] {
                for (i, item) in items.enumerated() { out += problems(item, itemSchema, path: "\(path)[\(i)]") }
            }
        }
        if case .object(let members) = value {
            let properties = s["properties"]?.objectValue ?? [:]
            for key in s["required"]?.arrayValue?.compactMap(\.stringValue) ?? [] where members[key] == nil {
                out.append("\(path): expected the key \"\(key)\", found none")
            }
            if case .number(let m)? = s["minProperties"], Double(members.count) < m { out.append("\(path): expected at least \(Int(m)) key(s)") }
            for (key, member) in members.sorted(by: { $0.key < $1.key }) {
                if let p = properties[key] {
                    out += problems(member, p, path: "\(path).\(key)")
                } else if let extra = s["additionalProperties"] {
                    if extra == .bool(false) { out.append("\(path): unknown key \"\(key)\"") }
                    else { out += problems(member, extra, path: "\(path).\(key)") }
                }
            }
        }
        if let options = s["oneOf"]?.arrayValue {
            let results = options.map { problems(value, $0, path: path) }
            let matching = results.filter(\.isEmpty).count
            if matching == 0 {
                // The closest option's problems say the most.
                out += results.min { $0.count < $1.count } ?? ["\(path): matches none of the options"]
            } else if matching > 1 {
                out.append("\(path): matches \(matching) options where exactly one must")
            }
        }
        return out
    }

    static func has(_ v: JSONValue, type: String) -> Bool {
        switch (type, v) {
        case ("object", .object), ("array", .array), ("string", .string), ("boolean", .bool), ("null", .null), ("number", .number): return true
        case ("integer", .number(let d)): return d == d.rounded(.towardZero) && d.isFinite
        default: return false
        }
    }
}
