import Foundation
import ExperimentlyMock

extension MockBackendPort {
    /// Sets the allocations (percent per variant name) of `experiment`; every variant must be
    /// named once, exactly, and the allocations must add up to 100. Returns the problem, or `nil`.
    static func reallocate(_ experiment: inout Experiment, _ allocations: [String: Int]) -> String? {
        let names = experiment.variants.map(\.name)
        let unknown = allocations.keys.filter { !names.containsExactly($0) }.sorted()
        if !unknown.isEmpty { return "experiment '\(experiment.key)' has no variant \(unknown.map { "'\($0.unambiguous)'" }.joined(separator: ", ")) (variants: \(names))" }
        let missing = names.filter { name in !allocations.keys.contains { $0.isExactly(name) } }
        if !missing.isEmpty { return "allocations of experiment '\(experiment.key)' leave out \(missing)" }
        let total = allocations.values.reduce(0, +)
        if total != 100 || allocations.values.contains(where: { $0 < 0 }) {
            return "allocations of experiment '\(experiment.key)' must be from 0 and add up to 100, got \(total)"
        }
        for i in experiment.variants.indices {
            experiment.variants[i].allocation = allocations.first { $0.key.isExactly(experiment.variants[i].name) }!.value
        }
        return nil
    }
}
