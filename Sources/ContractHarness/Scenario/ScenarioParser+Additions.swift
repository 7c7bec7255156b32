import Foundation
import ExperimentlyMock

// Format additions of issue 11 section 6, kept apart from the core parser: either/or outcome
// expectations and assertions on the mock's recorded exposures (Documentation/ScenarioFormat.md).
extension StepContext {
    /// Parses `any_of`: a non-empty array of outcome expectations (`{"value"}`, `{"error", ...}`),
    /// each as strict as a plain `expect`.
    ///
    /// - Throws: `ScenarioError` naming `path` (or `path[i]`) when it is not a non-empty array of
    ///   expectation objects.
    func parseAlternatives(_ value: JSONValue, path: String) throws -> [OutcomeExpectation] {
        guard case .array(let items) = value, !items.isEmpty else {
            throw ScenarioError(file: file, path: path, expected: "a non-empty array of expectations ({\"value\": ...} or {\"error\": ...})",
                                found: ObjectReader.brief(value))
        }
        return try items.enumerated().map { i, item in
            // Reuse the `expect` parser on a synthetic {"expect": item} so the rules stay one.
            var wrapper = try ObjectReader(.object(["expect": item]), file: file, path: path + "[\(i)]")
            guard let parsed = try parseOutcome(&wrapper) else {
                throw ScenarioError(file: file, path: path + "[\(i)]", expected: "an expectation", found: ObjectReader.brief(item))
            }
            return parsed
        }
    }

    /// Parses `{"exposures": {"user"?, "experiment"?, "variant_id"?}, "count": N}`.
    ///
    /// - Throws: `ScenarioError` when `count` is missing or not a whole number from 0, or the
    ///   object has other keys.
    func parseExposures(_ value: JSONValue, count: JSONValue?, path: String) throws -> Expectation {
        var er = try ObjectReader(value, file: file, path: path + ".exposures")
        let result = Expectation.exposures(user: try er.optionalString("user"), experiment: try er.optionalString("experiment"),
                                           variantID: try er.optionalString("variant_id"), count: 0)
        try er.finish()
        guard case .number(let d)? = count, let n = Int(exactly: d), n >= 0 else {
            throw ScenarioError(file: file, path: path + ".count", expected: "the number of matching exposures (a whole number from 0)",
                                found: count.map(ObjectReader.brief) ?? "nothing")
        }
        guard case .exposures(let u, let e, let v, _) = result else { return result }
        return .exposures(user: u, experiment: e, variantID: v, count: n)
    }
}

extension StepContext {
    /// Parses `{"cached": {"client"?, "user", "flag" | "experiment", "present"? (true), "value"?}}`:
    /// an entry of the client's memory cache and, for an assignment, what it contains (a flag's
    /// cached value is not readable through the SDK's API, so `value` needs `experiment`).
    ///
    /// - Throws: `ScenarioError` naming the path when neither or both of flag/experiment are
    ///   given, `value` comes with `flag` or with `"present": false`, or a key is unknown.
    func parseCached(_ value: JSONValue, path: String) throws -> Expectation {
        var r = try ObjectReader(value, file: file, path: path)
        let c = try client(&r)
        let user = try r.string("user")
        let flag = try r.optionalString("flag"), experiment = try r.optionalString("experiment")
        guard (flag == nil) != (experiment == nil) else {
            throw ScenarioError(file: file, path: path, expected: "exactly one of \"flag\" or \"experiment\"", found: "keys \(r.keys)")
        }
        let present = try r.optionalBool("present") ?? true
        let expected = r.value("value")
        if expected != nil, flag != nil {
            throw r.error("value", expected: "no value for a flag (the SDK reports only the keys of cached flags); use \"experiment\"", found: expected)
        }
        if expected != nil, !present { throw r.error("value", expected: "no value with \"present\": false", found: expected) }
        try r.finish()
        return .cached(client: c, kind: flag != nil ? "flag" : "experiment", user: user, key: flag ?? experiment!, present: present, value: expected)
    }
}

extension StepContext {
    /// Parses the fixture changes of issue 11 section 6, or returns `nil` for another key:
    /// `{"experiment_allocations": {"key", "allocations": {"control": 0, "treatment": 100}}}` and
    /// `{"experiment_restart": {"key"}}` (ACTIVE again, sticky assignments forgotten).
    ///
    /// - Throws: `ScenarioError` naming the path for a missing key or a non-integer allocation
    ///   (whether the variants exist and add up to 100 is checked when the step runs).
    func parseFixtureChangeAddition(_ r: inout ObjectReader, path: String) throws -> FixtureChange? {
        if let v = r.value("experiment_allocations") {
            var vr = try ObjectReader(v, file: file, path: path + ".experiment_allocations")
            let key = try vr.string("key")
            guard case .object(let raw)? = vr.value("allocations"), !raw.isEmpty else {
                throw vr.error("allocations", expected: "an object of variant name -> percent", found: vr.value("allocations"))
            }
            var allocations: [String: Int] = [:]
            for (name, value) in raw.sorted(by: { $0.key < $1.key }) {
                guard case .number(let d) = value, let n = Int(exactly: d), (0...100).contains(n) else {
                    throw ScenarioError(file: file, path: path + ".experiment_allocations.allocations.\(name)", expected: "a whole number from 0 to 100",
                                        found: ObjectReader.brief(value))
                }
                allocations[name] = n
            }
            try vr.finish()
            return .experimentAllocations(key: key, allocations: allocations)
        }
        if let v = r.value("experiment_restart") {
            var vr = try ObjectReader(v, file: file, path: path + ".experiment_restart")
            let key = try vr.string("key")
            try vr.finish()
            return .experimentRestart(key: key)
        }
        return nil
    }
}

extension StepContext {
    /// Parses `{"seed_store": {"client"?, "user", "flag" | "experiment", "json": JSON}}`: an entry
    /// written into the client's offline store as given, e.g. one an earlier SDK version wrote
    /// (an assignment without `assigned`, a flag without `config`).
    ///
    /// - Throws: `ScenarioError` naming the path when neither or both of flag/experiment are
    ///   given, `json` is missing or not an object, or a key is unknown.
    mutating func parseSeedStore(_ r: inout ObjectReader, path: String) throws -> Step {
        var sr = try ObjectReader(try r.require("seed_store"), file: file, path: path)
        let c = try client(&sr)
        let user = try sr.string("user")
        let flag = try sr.optionalString("flag"), experiment = try sr.optionalString("experiment")
        guard (flag == nil) != (experiment == nil) else {
            throw ScenarioError(file: file, path: path, expected: "exactly one of \"flag\" or \"experiment\"", found: "keys \(sr.keys)")
        }
        guard case .object? = sr.value("json") else {
            throw sr.error("json", expected: "the stored value, a JSON object", found: sr.value("json"))
        }
        let json = sr.value("json")!
        try sr.finish()
        return .seedStore(client: c, kind: flag != nil ? "flag" : "experiment", user: user, key: flag ?? experiment!, json: json)
    }
}

extension StepContext {
    /// Parses `{"reported": {"client"?, "experiment"?, "variant": NAME | null}}`: the reference
    /// app's reported state (the active variant; `null`: none). `variant` is required; `client`
    /// names the app instance (default: the `app` section's client).
    ///
    /// - Throws: `ScenarioError` naming the path when `variant` is missing or not a string or null.
    func parseReported(_ value: JSONValue, path: String) throws -> Expectation {
        var r = try ObjectReader(value, file: file, path: path)
        let experiment = try r.optionalString("experiment")
        let client = try optionalAppClient(&r)
        let variant: String?
        switch r.value("variant") {
        case .string(let s)?: variant = s
        case .null?: variant = nil
        case let other: throw r.error("variant", expected: "the active variant's name, or null for none", found: other)
        }
        try r.finish()
        return .reported(experiment: experiment, variant: variant, client: client)
    }
}

extension StepContext {
    /// Parses a release's `"transport_error": {"processed"?: Bool}` (or `true`): the held requests
    /// fail with a dropped connection instead of an answer. Returns the override the backend port
    /// reads (`{"transport_error": {"processed": P}}`).
    ///
    /// - Throws: `ScenarioError` naming the path when it comes with `response`, or is neither
    ///   `true` nor an object with only `processed`.
    func parseTransportError(_ value: JSONValue, response: JSONValue?, path: String) throws -> JSONValue {
        if response != nil {
            throw ScenarioError(file: file, path: path, expected: "either \"response\" or \"transport_error\", not both", found: ObjectReader.brief(value))
        }
        var processed = false
        switch value {
        case .bool(true): break
        case .object:
            var r = try ObjectReader(value, file: file, path: path)
            processed = try r.optionalBool("processed") ?? false
            try r.finish()
        default:
            throw ScenarioError(file: file, path: path, expected: "true or {\"processed\"?: true|false}", found: ObjectReader.brief(value))
        }
        return .object(["transport_error": .object(["processed": .bool(processed)])])
    }
}
