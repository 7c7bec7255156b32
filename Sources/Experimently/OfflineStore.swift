import Foundation

/// The persisted offline fallback: every success is written here (no TTL) and served when a later
/// request for the same user and key fails for any reason but 404 (CONTRACT.md section 4).
///
/// Backed by `UserDefaults` (thread-safe). Two stores with the same suite name and key prefix see
/// the same entries, which is how a relaunch or a second client is modelled. Keys are
/// `{prefix}flag:{utf8 length of user}:{user}:{key}` (and `assignment:`) when the user id and the
/// key are ASCII, so no two (user, key) pairs share one. Otherwise they are
/// `{prefix}flag~x:{user}:{key}` with each part written as its Unicode scalars in hex, joined by
/// `.` (`e\u{301}` is `65.301`): `UserDefaults` compares and enumerates its keys as Swift strings,
/// which merges canonically equivalent spellings (NFC and NFD é, the Angstrom sign and Å), while
/// ids are exact strings (issue 11 section 1). Entries an earlier version wrote for non-ASCII ids,
/// under the first form, are not read (they could belong to an equivalent spelling).
public final class OfflineStore: @unchecked Sendable {
    // @unchecked Sendable: `UserDefaults` is documented thread-safe; the other properties are `let`.

    /// The prefix of every key this store writes.
    public let keyPrefix: String
    private let defaults: UserDefaults

    /// Creates a store over a `UserDefaults` instance of the caller's (an App Group's, or a test
    /// double that keeps values in memory).
    ///
    /// - Parameters:
    ///   - defaults: where values are kept; must be safe to use from any thread.
    ///   - keyPrefix: prefix of every key; default `"ep_sdk_"`.
    public init(defaults: UserDefaults, keyPrefix: String = "ep_sdk_") {
        self.keyPrefix = keyPrefix
        self.defaults = defaults
    }

    /// Creates a store in a `UserDefaults` suite (CONTRACT.md section 3).
    ///
    /// - Parameters:
    ///   - suiteName: the `UserDefaults` suite; `nil` uses `UserDefaults.standard`.
    ///   - keyPrefix: prefix of every key; default `"ep_sdk_"`.
    public init(suiteName: String? = nil, keyPrefix: String = "ep_sdk_") {
        self.keyPrefix = keyPrefix
        self.defaults = suiteName.flatMap { UserDefaults(suiteName: $0) } ?? .standard
    }

    /// The `UserDefaults` key of (kind, user, key), kind `"flag"` or `"assignment"` (the forms are
    /// in the type's documentation); ASCII only whenever the prefix is.
    public func storageKey(kind: String, userId: String, key: String) -> String {
        func ascii(_ s: String) -> Bool { s.unicodeScalars.allSatisfy(\.isASCII) }
        if ascii(userId) && ascii(key) { return "\(keyPrefix)\(kind):\(userId.utf8.count):\(userId):\(key)" }
        func hex(_ s: String) -> String { s.unicodeScalars.map { String($0.value, radix: 16) }.joined(separator: ".") }
        return "\(keyPrefix)\(kind)~x:\(hex(userId)):\(hex(key))"
    }

    private func storageKey(_ kind: String, userId: String, key: String) -> String {
        storageKey(kind: kind, userId: userId, key: key)
    }

    private func save<T: Encodable>(_ value: T, _ kind: String, userId: String, key: String) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        guard let data = try? encoder.encode(value) else { return }
        defaults.set(data, forKey: storageKey(kind, userId: userId, key: key))
    }

    private func load<T: Decodable>(_ type: T.Type, _ kind: String, userId: String, key: String) -> T? {
        guard let data = defaults.data(forKey: storageKey(kind, userId: userId, key: key)) else { return nil }
        return try? JSONDecoder().decode(type, from: data)
    }

    /// Persists a flag evaluation for `userId` under `result.key`.
    public func saveEvaluation(_ result: EvalResult, userId: String) {
        saveEvaluation(result, userId: userId, flagKey: result.key)
    }

    func saveEvaluation(_ result: EvalResult, userId: String, flagKey: String) {
        save(result, "flag", userId: userId, key: flagKey)
    }

    /// The persisted evaluation of `flagKey` for `userId`, or `nil`.
    public func loadEvaluation(flagKey: String, userId: String) -> EvalResult? {
        load(EvalResult.self, "flag", userId: userId, key: flagKey)
    }

    /// Deletes the persisted evaluation of `flagKey` for `userId` only.
    public func removeEvaluation(flagKey: String, userId: String) {
        defaults.removeObject(forKey: storageKey("flag", userId: userId, key: flagKey))
    }

    /// Persists an assignment for `userId` under `assignment.experimentKey`.
    public func saveAssignment(_ assignment: Assignment, userId: String) {
        saveAssignment(assignment, userId: userId, experimentKey: assignment.experimentKey)
    }

    func saveAssignment(_ assignment: Assignment, userId: String, experimentKey: String) {
        save(assignment, "assignment", userId: userId, key: experimentKey)
    }

    /// The persisted assignment to `experimentKey` for `userId`, or `nil`.
    public func loadAssignment(experimentKey: String, userId: String) -> Assignment? {
        load(Assignment.self, "assignment", userId: userId, key: experimentKey)
    }

    /// Deletes the persisted assignment to `experimentKey` for `userId` only.
    public func removeAssignment(experimentKey: String, userId: String) {
        defaults.removeObject(forKey: storageKey("assignment", userId: userId, key: experimentKey))
    }

    /// Deletes every entry of this store: the keys that are `keyPrefix` (its exact bytes) followed
    /// by one of this store's forms (`flag:`, `flag~x:`, `assignment:`, `assignment~x:`) or the
    /// forms an upstream SDK version wrote (`flags.`, `assignments.`, `_users`). Another store's
    /// keys stay, also when its prefix extends this one's (`ep_sdk_staging_` beside `ep_sdk_`:
    /// every `ep_sdk_*` key was deleted: an outside audit, A-10).
    public func clearAll() {
        let prefix = Array(keyPrefix.utf8)
        let forms = ["flag:", "flag~x:", "assignment:", "assignment~x:", "flags.", "assignments.", "_users"].map { Array($0.utf8) }
        for key in defaults.dictionaryRepresentation().keys {
            let bytes = Array(key.utf8)
            guard bytes.starts(with: prefix) else { continue }
            let rest = bytes.dropFirst(prefix.count)
            if forms.contains(where: { rest.starts(with: $0) }) { defaults.removeObject(forKey: key) }
        }
    }
}
