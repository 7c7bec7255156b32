import Foundation

// One copy of a `times` group is awaited or cancelled by its own label, `label#k` (attack finding
// 14; Documentation/ScenarioFormat.md, Steps).
extension StepContext {
    /// Reads `as` like `label(_:)` and, for a step with `"times": N` (N > 1), also makes its
    /// copies' labels `as#1`..`as#N` known, so `await` and `cancel` may name one copy.
    ///
    /// - Throws: `ScenarioError` at `<step>.as` when the label, or one of its copies' labels, was
    ///   used before (compared by Unicode scalars: `"x#1"` named by an earlier step and a later
    ///   `"as": "x", "times": 2` would be two operations with one label).
    mutating func label(_ r: inout ObjectReader, copies count: Int) throws -> String? {
        guard let base = try label(&r) else { return nil }
        guard count > 1 else { return base }
        let names = Self.copyLabels(base, count: count)
        if let taken = names.first(where: { labels.contains(ExactKey($0)) }) {
            throw r.error("as", expected: "a label whose copies (\(base)#1..\(base)#\(count)) are not used before: '\(taken)' is",
                          found: .string(base))
        }
        names.forEach { labels.insert(ExactKey($0)) }
        copies[ExactKey(base)] = count
        return base
    }

    /// The labels of the copies of a `times` group, as the runner names them.
    static func copyLabels(_ base: String, count: Int) -> [String] {
        count == 1 ? [base] : (1...count).map { "\(base)#\($0)" }
    }

    /// What an `await` or `cancel` may name, for its error message: the labels started so far
    /// (a `times` group once, as `a (copies a#1..a#3)`).
    var startedLabelsText: String {
        let copyNames = Set(copies.flatMap { base, n in Self.copyLabels(base.text, count: n).map { ExactKey($0) } })
        let named = labels.subtracting(copyNames).sorted().map { key in
            copies[key].map { "\(key.text) (copies \(key.text)#1..\(key.text)#\($0))" } ?? key.text
        }
        return "the label of an operation started earlier, or label#k for copy k of a \"times\" group (started: \(named))"
    }
}
