import Foundation

extension HarnessCommand {
    /// Refuses, before any schedule runs, an `explore` (or `explore --interleave`) whose outputs
    /// would overwrite each other or the scenario being explored: the schedule file (`--out`, or
    /// its default `<scenario name><suffix>.json`) and the verdict (`--verdict`, when given) must
    /// be distinct files, and neither may be `file` itself. Paths are compared after resolving
    /// `.`/`..` and symbolic links, as `run`'s `checkDistinct` does.
    ///
    /// - Parameters:
    ///   - file: the scenario file explored.
    ///   - name: the scenario's name (the default schedule file is named after it); `nil` when
    ///     the file has none (then only a given `--out` is compared).
    ///   - suffix: `-schedule` for `explore`, `-interleaving` for `explore --interleave`.
    ///   - out: `--out`, when given; `verdict`: `--verdict`, when given.
    /// - Throws: `UsageError` naming both options (or "the scenario file") and the path (exit 64).
    static func checkExploreOutputs(file: String, name: String?, suffix: String, out: String?, verdict: String?) throws {
        let schedule = out ?? name.map { defaultOutput($0, suffix: suffix) }
        try checkDistinct([("the scenario file", file), (out == nil ? "the default schedule file" : "--out", schedule),
                           ("--verdict", verdict)])
        // A verdict never replaces a scenario file: said before any work (a seventh outside
        // tester: the write was refused silently at the end, with exit 0).
        if let verdict { try checkWritable(verdict, option: "--verdict") }
        // Nor is a schedule file that cannot be written found only after the exploration (a
        // twenty-seventh outside tester: hours of work, then exit 70 and no failing order named).
        if let out { try checkWritable(out, option: "--out", mayReplaceScenario: true) }
    }

    /// The default schedule file of an exploration of the scenario `name`: `<name><suffix>.json` in
    /// the working folder, the name's characters other than letters, digits, `.`, `_` and `-`
    /// replaced by `_` (a name is data: `../x` wrote outside the folder, and a NUL or U+202E made
    /// the printed replay command name a file that does not exist).
    ///
    /// A name whose file name would pass 200 bytes of UTF-8 (file systems allow 255) is cut at a
    /// character to fit, with 16 hex digits of the whole name's FNV-1a hash after it, so two long
    /// names sharing a beginning still name two files (an eighty-seventh outside tester: a
    /// 300-character name failed with "File name too long" once the exploration was done).
    static func defaultOutput(_ name: String, suffix: String) -> String {
        let safe = String(String.UnicodeScalarView(name.unicodeScalars.map { c in
            (c.properties.isAlphabetic || c.properties.numericType != nil) && !c.properties.isBidiControl || "._-".unicodeScalars.contains(c) ? c : "_"
        }))
        var base = String(safe.drop { $0 == "." })
        if base.isEmpty { base = "scenario" }
        let tail = "\(suffix).json"
        if base.utf8.count + tail.utf8.count > 200 {
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
            let mark = "-" + String(hash, radix: 16).leftPadded(to: 16)
            var cut = "", bytes = 0
            for c in base.unicodeScalars {
                bytes += String(c).utf8.count
                if bytes > 200 - tail.utf8.count - mark.utf8.count { break }
                cut.unicodeScalars.append(c)
            }
            base = cut + mark
        }
        return base + tail
    }
}

private extension String {
    /// The string with `0`s before it up to `width` characters.
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
