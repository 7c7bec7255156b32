import Foundation
import ExperimentlyMock

/// The `UserDefaults` suites scenario runs use for their offline stores, reused across runs.
///
/// A fresh suite per run would do, but FoundationEssentials keeps every suite it ever opened in
/// one preferences cache and synchronizes all of them whenever one is removed, so runs would get
/// slower the more ran before (the explorer runs thousands). Reused suites keep that cache small:
/// a run takes an empty suite, and gives it back emptied (`removePersistentDomain`). The pool
/// lives behind an `NSLock`.
enum StoreSuitePool {
    private static let lock = NSLock()
    // nonisolated(unsafe): only touched inside `lock`.
    nonisolated(unsafe) private static var free: [String] = []
    nonisolated(unsafe) private static var created = 0
    private static let prefix = "experimently-harness-\(ProcessInfo.processInfo.processIdentifier)"

    /// An empty suite name, exclusively the caller's until `release`.
    static func acquire() -> String {
        lock.withLock {
            if let name = free.popLast() { return name }
            created += 1
            return "\(prefix)-\(created)"
        }
    }

    /// Empties the suite and never hands it out again (code under test may still write to it).
    static func retire(_ name: String) {
        UserDefaults().removePersistentDomain(forName: name)
    }

    /// Empties the suite and makes it available again.
    static func release(_ name: String) {
        UserDefaults().removePersistentDomain(forName: name)
        lock.withLock { free.append(name) }
    }
}
