import Foundation

/// `{{seed}}` in a scenario file, replaced by the run's seed (decimal) before the file is parsed
/// (Documentation/ScenarioFormat.md).
enum SeedSubstitution {
    /// The placeholder, as written in files.
    static let placeholder = "{{seed}}"

    /// `data` with every `{{seed}}` replaced by `seed`; unchanged when it holds none or is no UTF-8.
    static func apply(_ data: Data, seed: UInt64) -> Data {
        guard let text = String(data: data, encoding: .utf8), text.contains(placeholder) else { return data }
        return Data(apply(text, seed: seed).utf8)
    }

    /// `text` with every `{{seed}}` replaced by `seed`.
    static func apply(_ text: String, seed: UInt64) -> String {
        text.contains(placeholder) ? text.replacingOccurrences(of: placeholder, with: String(seed)) : text
    }

    /// Runs `body` on `data` with `{{seed}}` replaced; a "not valid JSON ... at line L, column C"
    /// error then names the column in the file as written, not in the replaced text (an
    /// eighty-seventh outside tester, M8: with seed 0 every `{{seed}}` earlier on the line moved the
    /// column 7 to the left, on a one-line file a place that does not hold the error).
    ///
    /// - Throws: what `body` throws, a `ScenarioError` with its position mapped back.
    static func parsing<T>(_ data: Data, seed: UInt64, _ body: (Data) throws -> T) throws -> T {
        let replaced = apply(data, seed: seed)
        guard replaced != data else { return try body(data) }
        do {
            return try body(replaced)
        } catch var error as ScenarioError {
            if let statement = error.statement { error.statement = remap(statement, original: data, seedText: String(seed)) }
            throw error
        }
    }

    /// `message` with its `at line L, column C` (bytes, 1-based) given as the position in
    /// `original`: the placeholders before that column on line L counted at their written length.
    static func remap(_ message: String, original: Data, seedText: String) -> String {
        guard let range = message.range(of: #"at line (\d+), column (\d+)"#, options: .regularExpression) else { return message }
        let numbers = message[range].split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        guard numbers.count == 2 else { return message }
        let (line, column) = (numbers[0], numbers[1])
        let lines = original.split(separator: 10, omittingEmptySubsequences: false)
        guard line >= 1, line <= lines.count else { return message }
        let bytes = Array(lines[line - 1]), mark = Array(placeholder.utf8), width = seedText.utf8.count
        var written = 0, replaced = 0
        while replaced < column - 1, written < bytes.count {
            if bytes[written...].starts(with: mark) {
                if replaced + width > column - 1 { break }
                replaced += width
                written += mark.count
            } else {
                replaced += 1
                written += 1
            }
        }
        return message.replacingCharacters(in: range, with: "at line \(line), column \(written + 1)")
    }
}
