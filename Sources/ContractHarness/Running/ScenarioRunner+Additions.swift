import Foundation
import ExperimentlyMock

// Evaluation of the format additions of issue 11 section 6 (see ScenarioParser+Additions.swift).
extension ScenarioExecution {
    /// `nil` when `outcome` meets at least one alternative; otherwise what each one found.
    static func anyOfMismatch(_ outcome: OperationOutcome, _ alternatives: [OutcomeExpectation]) -> String? {
        var reasons: [String] = []
        for alternative in alternatives {
            guard let reason = mismatch(outcome, alternative) else { return nil }
            reasons.append(reason)
        }
        return "expected one of \(alternatives.count) outcomes, none met: " + reasons.joined(separator: " | ")
    }

    /// Counts the mock's exposures matching (user, experiment, variant id), each compared exactly.
    static func exposuresMismatch(_ port: any BackendPort, user: String?, experiment: String?, variantID: String?, count: Int) -> String? {
        guard let all = port.exposures() else { return "the backend does not report exposures" }
        let matching = all.filter { x in
            (user.map { x.userID.isExactly($0) } ?? true) && (experiment.map { x.experimentKey.isExactly($0) } ?? true)
                && (variantID.map { x.variantID.isExactly($0) } ?? true)
        }
        guard matching.count != count else { return nil }
        var what: [String] = []
        if let user { what.append("user \(user.unambiguous)") }
        if let experiment { what.append("experiment \(experiment.unambiguous)") }
        if let variantID { what.append("variant_id \(variantID.unambiguous)") }
        let listed = all.suffix(8).map { "\($0.userID.unambiguous)/\($0.experimentKey.unambiguous)/\($0.variantID.unambiguous)" }
        return "expected \(count) exposure(s)\(what.isEmpty ? "" : " of " + what.joined(separator: ", ")), the mock recorded \(matching.count) (all: \(listed.joined(separator: ", ")))"
    }
}

extension ScenarioExecution {
    /// Checks a `cached` assertion through `getAssignments` / `getEvaluatedFlags` of the client:
    /// the entry for exactly (user, key) is there or not, and an assignment contains `value`.
    static func cachedMismatch(_ c: any DriverClient, client: String, kind: String, user: String, key: String,
                               present: Bool, value: JSONValue?) async -> String? {
        let what = "\(kind) '\(key.unambiguous)' of user '\(user.unambiguous)' in \(client)'s memory cache"
        let entry: JSONValue?
        let unanswered = "\(what): the SDK gave no list (an error, or no answer within \(queryDeadlineMilliseconds) ms), so whether it holds the entry is unknown"
        if kind == "flag" {
            guard let got = await query(c, .getEvaluatedFlags(user: user)) else { return unanswered }
            let keys: [String] = { if case .array(let items) = got { return items.compactMap(\.stringValue) }; return [] }()
            entry = keys.containsExactly(key) ? .string(key) : nil
        } else {
            guard let got = await query(c, .getAssignments(user: user)) else { return unanswered }
            let items: [JSONValue] = { if case .array(let items) = got { return items }; return [] }()
            entry = items.last { $0["experiment_key"]?.stringValue.map { $0.isExactly(key) } ?? false }
        }
        if present && entry == nil { return "expected the \(what), found none" }
        if !present, let entry { return "expected no \(what), found \(entry)" }
        if let value, let entry, !entry.contains(value) { return "the \(what) is \(entry), expected it to contain \(value)" }
        return nil
    }
}
