import Foundation
import ExperimentlyMock

/// A `UserDefaults` that keeps its values in memory, behind an `NSLock`: the offline stores of
/// explorer and mutant runs, which start thousands of scenarios and need no disk (`UserDefaults`
/// on Linux writes a property list on every change). `run` uses real suites.
///
/// Implements the calls `OfflineStore` makes: `set(_:forKey:)`, `object(forKey:)`,
/// `data(forKey:)`, `removeObject(forKey:)`, `dictionaryRepresentation()`.
final class MemoryDefaults: UserDefaults {
    // Thread-safe: `values` is only touched inside `lock`. Keys compare exactly (Unicode
    // scalars), as a real suite's do: entries for NFC and NFD spellings of an id stay apart.
    private let lock = NSLock()
    private var values: [ExactKey: Any] = [:]

    init() {
        super.init(suiteName: nil)!
    }

    override func set(_ value: Any?, forKey defaultName: String) {
        lock.withLock { values[ExactKey(defaultName)] = value }
    }

    override func object(forKey defaultName: String) -> Any? {
        lock.withLock { values[ExactKey(defaultName)] }
    }

    override func data(forKey defaultName: String) -> Data? {
        lock.withLock { values[ExactKey(defaultName)] as? Data }
    }

    override func removeObject(forKey defaultName: String) {
        _ = lock.withLock { values.removeValue(forKey: ExactKey(defaultName)) }
    }

    override func dictionaryRepresentation() -> [String: Any] {
        lock.withLock { Dictionary(values.map { ($0.key.text, $0.value) }, uniquingKeysWith: { a, _ in a }) }
    }
}

/// A `UserDefaults` handed across tasks: real suites and `MemoryDefaults` are thread-safe, but
/// the class is not marked `Sendable` on Linux.
public struct SharedDefaults: @unchecked Sendable {
    // @unchecked Sendable: `UserDefaults` is documented thread-safe, and `MemoryDefaults` locks.
    public let defaults: UserDefaults
}
