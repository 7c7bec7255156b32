import Foundation
import ExperimentlyMock

/// A local evaluation of one flag over a served ruleset (`GET /api/v1/sdk/ruleset`, schema 1),
/// as a server-side SDK would do it; the proof that the ruleset states the backend's flag rules
/// (CONTRACT.md section 2; upstream `backend/app/services/sdk_ruleset.py`).
///
/// Rules: a `schema` other than 1 or a `bucketing` other than `md5-mod100-v1` evaluates nothing
/// locally; a flag with `active: false` is `enabled: false, reason: "inactive"`; a flag with
/// `evaluation: "remote"` is deferred to the server; otherwise the first rule whose `match` group
/// holds decides with its own `rollout_percentage` (`targeting_rule`), else the flag's
/// `rollout_percentage` decides (`rollout`), both by md5-mod100 of `"{user_id}:{flag_key}"`.
/// Groups: `and` (all conditions and groups hold) and `or` (any does); conditions use the
/// operators the mock serves (`eq`, `neq`, `gt`, `lt`, `contains`, `in`) with the mock's
/// meaning, on attributes that are absent, null, or of the rule value's own JSON type (a string
/// for a string value or list of strings, a number for a number or list of numbers, a number for
/// `gt`/`lt`, a string for `contains`). Any other attribute type is deferred to the server, as
/// upstream's corpus allows (`must_local` is false exactly there: the server coerces types, e.g.
/// `5` equals `"5"`). Anything else (a `not` group, another operator, a `default_rule`) is
/// reported as unsupported rather than guessed.
public enum RulesetEvaluator {
    /// The result of a local evaluation.
    public enum Outcome: Equatable, Sendable, CustomStringConvertible {
        /// Answered locally.
        case local(enabled: Bool, reason: String)
        /// The ruleset says to ask the server (`evaluation: "remote"`).
        case remote
        /// The evaluator asks the server: an attribute's type differs from the rule value's.
        case deferred(String)
        /// The ruleset has no flag with this key (the server answers 404).
        case unknownFlag
        /// The ruleset holds something this evaluator does not evaluate; the text says what.
        case unsupported(String)

        public var description: String {
            switch self {
            case .local(let enabled, let reason): return "{enabled: \(enabled), reason: \(reason)}"
            case .remote: return "remote"
            case .deferred(let why): return "deferred: \(why)"
            case .unknownFlag: return "unknown flag"
            case .unsupported(let what): return "unsupported: \(what)"
            }
        }
    }

    /// Evaluates `flagKey` for `userID` and `context` over `ruleset` (the parsed document).
    public static func evaluate(_ ruleset: JSONValue, flagKey: String, userID: String, context: [String: JSONValue]) -> Outcome {
        guard ruleset["schema"] == .number(1) else { return .unsupported("schema \(ruleset["schema"]?.jsonText ?? "absent")") }
        guard ruleset["bucketing"] == .string("md5-mod100-v1") else { return .unsupported("bucketing \(ruleset["bucketing"]?.jsonText ?? "absent")") }
        let flags = ruleset["flags"]?.arrayValue ?? []
        guard let flag = flags.first(where: { $0["key"]?.stringValue.map { Array($0.unicodeScalars) == Array(flagKey.unicodeScalars) } ?? false }) else {
            return .unknownFlag
        }
        guard flag["active"] == .bool(true) else { return .local(enabled: false, reason: "inactive") }
        guard flag["evaluation"] == .string("local") else { return .remote }
        if let defaultRule = flag["default_rule"], defaultRule != .null { return .unsupported("default_rule \(defaultRule.jsonText)") }
        let bucket = MockBucketing.flagBucket(userID: userID, flagKey: flagKey)
        for rule in flag["rules"]?.arrayValue ?? [] {
            guard let match = rule["match"], let percentage = rule["rollout_percentage"]?.numberValue else {
                return .unsupported("rule \(rule.jsonText)")
            }
            switch holds(match, userID: userID, context: context) {
            case .failure(let e): return e.asksServer ? .deferred(e.what) : .unsupported(e.what)
            case .success(true): return .local(enabled: Double(bucket) < percentage, reason: "targeting_rule")
            case .success(false): continue
            }
        }
        guard let rollout = flag["rollout_percentage"]?.numberValue else { return .unsupported("flag without rollout_percentage") }
        return .local(enabled: Double(bucket) < rollout, reason: "rollout")
    }

    struct Unsupported: Error {
        let what: String
        /// True when the server should be asked (a type mismatch), false when the ruleset holds
        /// something this evaluator does not know.
        var asksServer = false
    }

    /// Nil when `actual` may be compared locally with `value` under `op`, else why not.
    private static func typeMismatch(_ op: Condition.Operator, value: JSONValue, actual: JSONValue?) -> String? {
        guard let actual, actual != .null else { return nil }
        func kind(_ v: JSONValue) -> String { v.typeName }
        switch op {
        case .gt, .lt: return actual.numberValue == nil ? "\(kind(actual)) compared with \(op.rawValue)" : nil
        case .contains: return actual.stringValue == nil ? "\(kind(actual)) with contains" : nil
        case .eq, .ne: return kind(actual) == kind(value) ? nil : "\(kind(actual)) compared with a \(kind(value))"
        case .in:
            guard let first = value.arrayValue?.first else { return nil }
            return kind(actual) == kind(first) ? nil : "\(kind(actual)) looked up in a list of \(kind(first))s"
        }
    }

    private static func holds(_ group: JSONValue, userID: String, context: [String: JSONValue]) -> Result<Bool, Unsupported> {
        var results: [Bool] = []
        for condition in group["conditions"]?.arrayValue ?? [] {
            guard let attribute = condition["attribute"]?.stringValue, let name = condition["operator"]?.stringValue else {
                return .failure(Unsupported(what: "condition \(condition.jsonText)"))
            }
            let ops: [String: Condition.Operator] = ["eq": .eq, "neq": .ne, "gt": .gt, "lt": .lt, "contains": .contains, "in": .in]
            guard let op = ops[name] else { return .failure(Unsupported(what: "operator \(name)")) }
            let value = condition["value"] ?? .null
            if let why = typeMismatch(op, value: value, actual: context.exactly(attribute)) {
                return .failure(Unsupported(what: "attribute \(attribute): \(why)", asksServer: true))
            }
            results.append(Condition(attribute: attribute, op: op, value: value).matches(userID: userID, context: context))
        }
        for child in group["groups"]?.arrayValue ?? [] {
            switch holds(child, userID: userID, context: context) {
            case .failure(let e): return .failure(e)
            case .success(let b): results.append(b)
            }
        }
        switch group["op"]?.stringValue {
        case "and": return .success(results.allSatisfy { $0 })
        case "or": return .success(results.contains(true))
        default: return .failure(Unsupported(what: "group op \(group["op"]?.jsonText ?? "absent")"))
        }
    }
}
