import Foundation
import ExperimentlyMock

/// The JSON Schema (draft 2020-12 subset) of the scenario format, written by
/// `contract-harness schema` to `Documentation/scenario.schema.json` for editors and linters.
///
/// The lists come from the parser's own definitions (``Scenario/format``, ``ScenarioParser/verbs``,
/// ``SDKOperation/allNames``, ``Scenario/knownChecks``, ``Scenario/knownCapabilities``, the error
/// kinds and app actions it accepts); the shapes are declared here beside them, and
/// `ScenarioSchemaTests` keeps both in step: the committed file equals this one, every shipped
/// scenario validates, and a key the schema does not list is refused by both the schema and the
/// parser. The parser stays stricter than the schema in what one key implies of another (e.g.
/// which fields each operation needs, labels and fault ids used before they are defined).
public enum ScenarioSchema {
    /// The error kinds an `expect.error` names (as `ScenarioParser` accepts them).
    static let errorKinds = ["invalidConfig", "networkError", "decodingError", "flagNotFound", "experimentNotFound", "serverError", "cancelled"]
    /// The reference app's actions (`"app": ACTION` steps).
    static let appActions = ["login", "logout", "refresh", "display", "event", "report_state"]

    static func object(_ properties: [String: JSONValue], required: [String] = [], description: String? = nil) -> JSONValue {
        var o: [String: JSONValue] = ["type": .string("object"), "properties": .object(properties), "additionalProperties": .bool(false)]
        if !required.isEmpty { o["required"] = .array(required.map(JSONValue.string)) }
        if let description { o["description"] = .string(description) }
        return .object(o)
    }
    static func type(_ t: String, _ extra: [String: JSONValue] = [:]) -> JSONValue { .object(extra.merging(["type": .string(t)]) { a, _ in a }) }
    static let string = type("string")
    static let boolean = type("boolean")
    static let number = type("number")
    static let any: JSONValue = .object([:])
    static func integer(_ min: Int, _ max: Int) -> JSONValue { type("integer", ["minimum": .number(Double(min)), "maximum": .number(Double(max))]) }
    static func array(_ items: JSONValue, minItems: Int? = nil) -> JSONValue {
        var o: [String: JSONValue] = ["type": .string("array"), "items": items]
        if let minItems { o["minItems"] = .number(Double(minItems)) }
        return .object(o)
    }
    static func ref(_ name: String) -> JSONValue { .object(["$ref": .string("#/$defs/\(name)")]) }
    static func oneOf(_ options: [JSONValue]) -> JSONValue { .object(["oneOf": .array(options)]) }
    static func enumeration(_ values: [String]) -> JSONValue { .object(["type": .string("string"), "enum": .array(values.map(JSONValue.string))]) }
    static func const(_ value: String) -> JSONValue { .object(["const": .string(value)]) }

    /// Verbs of ``ScenarioParser/verbs`` the schema has no shape for (empty when in step).
    static var missingVerbs: [String] { ScenarioParser.verbs.filter { shapedVerbs.contains($0) == false } }
    static let shapedVerbs: Set<String> = ["do", "app", "await", "cancel", "fault", "remove_fault", "release", "wait_for", "advance",
                                           "fixtures", "assert", "seed_store"]

    /// The schema as a JSON value.
    public static var json: JSONValue {
        let label = string
        var steps: [String: JSONValue] = [
            "do": object(["do": enumeration(SDKOperation.allNames), "client": string, "flag": string, "experiment": string,
                          "user": ref("user"), "key": string, "event": ref("event"), "events": array(ref("event")),
                          "async": boolean, "times": integer(1, 1000), "as": label, "expect": ref("expect")],
                         required: ["do"], description: "An SDK operation on a client."),
            "app": object(["app": enumeration(appActions), "client": string, "user": string, "name": string, "async": boolean,
                           "times": integer(1, 1000), "as": label, "expect": ref("expect")],
                          required: ["app"], description: "An action of the reference app on a client (each client has its own app)."),
            "await": object(["await": label, "expect": ref("expect")], required: ["await"], description: "Waits for an operation started with async."),
            "cancel": object(["cancel": label], required: ["cancel"], description: "Cancels the task of an operation."),
            "fault": object(["fault": type("object"), "id": string], required: ["fault", "id"], description: "Adds a mock fault rule (Documentation/ScenarioFormat.md, Faults)."),
            "remove_fault": object(["remove_fault": string], required: ["remove_fault"]),
            "release": object(["release": string, "count": integer(1, 10_000), "all": boolean,
                               "response": object(["status": integer(100, 599), "json": any, "body": string], required: ["status"]),
                               "transport_error": oneOf([boolean, object(["processed": boolean])])],
                              required: ["release"], description: "Releases requests a hold fault parked."),
            "wait_for": object(["wait_for": oneOf([const("quiescence"),
                                                  object(["held": string, "count": integer(0, 100_000)], required: ["held"]),
                                                  object(["requests": ref("match"), "count": integer(0, 100_000)], required: ["requests"])])],
                               required: ["wait_for"]),
            "advance": object(["advance": type("number", ["minimum": .number(0), "maximum": .number(315_360_000)])], required: ["advance"], description: "Advances the virtual clock, seconds."),
            "fixtures": object(["fixtures": oneOf([
                object(["experiment_status": object(["key": string, "status": string], required: ["key", "status"])], required: ["experiment_status"]),
                object(["flag_status": object(["key": string, "status": string], required: ["key", "status"])], required: ["flag_status"]),
                object(["flag_rollout": object(["key": string, "percentage": type("number", ["minimum": .number(0), "maximum": .number(100)])],
                                               required: ["key", "percentage"])], required: ["flag_rollout"]),
                object(["experiment_allocations": object(["key": string, "allocations": type("object", ["additionalProperties": integer(0, 100)])],
                                                         required: ["key", "allocations"])], required: ["experiment_allocations"]),
                object(["experiment_restart": object(["key": string], required: ["key"])], required: ["experiment_restart"]),
            ])], required: ["fixtures"]),
            "assert": object(["assert": oneOf([
                object(["cache": object(["client": string, "user": string, "assignments": array(string), "flags": array(string)], required: ["user"])], required: ["cache"]),
                object(["persisted": object(["client": string, "user": string, "flag": string, "experiment": string, "present": boolean, "value": any],
                                            required: ["user"])], required: ["persisted"]),
                object(["requests": ref("match"), "count": integer(0, 1_000_000), "batch_sizes": array(type("integer"))], required: ["requests"]),
                object(["app": object(["client": string, "shown": string, "identity": string, "source": string])], required: ["app"]),
                object(["cached": object(["client": string, "user": string, "flag": string, "experiment": string, "present": boolean, "value": any],
                                         required: ["user"])], required: ["cached"]),
                object(["reported": object(["client": string, "experiment": string, "variant": type("string_or_null")], required: ["variant"])], required: ["reported"]),
                object(["exposures": object(["user": string, "experiment": string, "variant_id": string]), "count": integer(0, 1_000_000)],
                       required: ["exposures", "count"]),
            ])], required: ["assert"]),
            "seed_store": object(["seed_store": object(["client": string, "user": string, "flag": string, "experiment": string, "json": type("object")],
                                                       required: ["user", "json"])],
                                 required: ["seed_store"], description: "Writes an entry into a client's offline store exactly as given."),
        ]
        // Every verb the parser knows has a shape here, and nothing else (ScenarioSchemaTests checks
        // `missingVerbs` is empty; a verb without a shape gets an open one rather than a crash).
        for verb in ScenarioParser.verbs where steps[verb] == nil { steps[verb] = object([verb: any], required: [verb]) }
        steps = steps.filter { ScenarioParser.verbs.contains($0.key) }
        let defs: [String: JSONValue] = [
            "settings": object(["timeout": type("number", ["exclusiveMinimum": .number(0)]), "cache_ttl": type("number", ["minimum": .number(0)]),
                                "cache_size": integer(1, 1_000_000), "offline_fallback": boolean, "base_url": string, "api_key": string],
                               description: "Client configuration; times in seconds."),
            "user": oneOf([string, object(["id": string, "attributes": type("object")], required: ["id"])]),
            "event": object(["user": string, "name": string, "type": string, "experiment": string, "flag": string, "value": number,
                             "properties": any, "timestamp": number], required: ["user", "name"]),
            "expect": oneOf([object(["value": any], required: ["value"]),
                             object(["error": enumeration(errorKinds), "status": type("integer"), "code": type("integer")], required: ["error"]),
                             object(["any_of": array(ref("expect_one"), minItems: 1)], required: ["any_of"])]),
            "expect_one": oneOf([object(["value": any], required: ["value"]),
                                 object(["error": enumeration(errorKinds), "status": type("integer"), "code": type("integer")], required: ["error"])]),
            "match": object(["method": string, "path": string, "path_prefix": string, "client": string, "user": string, "body": any,
                             "status": type("integer"), "target": string, "headers": type("object", ["additionalProperties": string]),
                             "body_equals": any, "cancelled": boolean, "response_headers": type("object", ["additionalProperties": string]),
                             "api_key": .object(["type": .array([.string("string"), .string("null")])])]),
            "step": oneOf(ScenarioParser.verbs.map { ref("step_\($0)") }),
        ].merging(steps.map { ("step_\($0.key)", $0.value) }) { a, _ in a }
        var root = object([
            "format": const(Scenario.format),
            "name": string, "description": string, "tags": array(string), "source": string,
            "fixtures": oneOf([const("sdk-contract"), type("object")]),
            "config": ref("settings"),
            "clients": type("object", ["minProperties": .number(1),
                                       "additionalProperties": object(["store": type("string_or_null"), "config": ref("settings"),
                                                                        "launch": enumeration(["at_start", "at_first_use"])])]),
            "app": object(["client": string, "flag": string, "experiment": string, "variants": array(string), "user": string],
                          required: ["flag", "experiment"]),
            "steps": array(ref("step"), minItems: 1),
            "checks": array(enumeration(Scenario.knownChecks)),
            "step_timeout_ms": integer(1, 600_000),
            "requires": array(enumeration(Scenario.knownCapabilities)),
            "explore": object(["steps": array(type("integer", ["minimum": .number(0)]), minItems: 2), "exhaustive": boolean,
                               "max_schedules": integer(1, 1_000_000)], required: ["steps"]),
            "explored": type("object", ["description": .string("What contract-harness explore found when it wrote this file (a record; not run).")]),
            "interleaving": object(["seed": type("integer"), "depth": integer(1, 100), "max_schedules": integer(1, 1_000_000), "choices": array(string)]),
        ], required: ["format", "name", "description", "steps"], description: "A contract-harness scenario (Documentation/ScenarioFormat.md).")
        if case .object(var o) = root {
            o["$schema"] = .string("https://json-schema.org/draft/2020-12/schema")
            o["$id"] = .string("https://experimently.dev/schemas/experimently-scenario-1.json")
            o["title"] = .string(Scenario.format)
            o["$defs"] = .object(defs)
            root = .object(o)
        }
        return fixNullable(root)
    }

    /// `"type": "string_or_null"` (a shorthand above) as JSON Schema's `["string", "null"]`.
    static func fixNullable(_ v: JSONValue) -> JSONValue {
        switch v {
        case .object(let o):
            var out = o.mapValues(fixNullable)
            if o["type"] == .string("string_or_null") { out["type"] = .array([.string("string"), .string("null")]) }
            return .object(out)
        case .array(let a): return .array(a.map(fixNullable))
        default: return v
        }
    }

    /// The schema as the committed file holds it: pretty JSON, sorted keys, a final line feed.
    public static var text: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(json)) ?? Data(), as: UTF8.self) + "\n"
    }
}
