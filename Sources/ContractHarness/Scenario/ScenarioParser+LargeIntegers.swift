import Foundation
import ExperimentlyMock

// Integers beyond 2^53 in scenario files (issue 11, found last time): refused by JSON path.

extension ScenarioParser {
    /// Refuses an integer literal beyond ±2^53 anywhere in a scenario file (fixtures, expected
    /// values, matchers), naming its JSON path.
    ///
    /// The backend (FastAPI/pydantic over Python's `json`) keeps such an integer exactly, e.g. in
    /// a variant's `configuration`; the harness and the mock hold numbers as doubles, exact only
    /// up to 2^53, so `9007199254740993` would silently become `9007199254740992` and the
    /// scenario would test another number. Written as a string it stays exact.
    ///
    /// - Throws: `ScenarioError` at the integer's JSON path.
    static func refuseLargeIntegers(_ data: Data, file: String) throws {
        guard let big = DuplicateKeys.firstLargeInteger(in: [UInt8](JSONValue.withoutByteOrderMark(data))) else { return }
        throw ScenarioError(file: file, path: big.path,
                            expected: "an integer within ±2^53 (9007199254740992): the backend would keep a larger one exactly, but the harness and the mock hold numbers as doubles (write it as a string)",
                            found: big.text)
    }
}
