import Foundation
import ExperimentlyMock

/// `contract-harness scenario --from-journal JOURNAL [--out FILE] [--name NAME] [--fixtures FILE]
/// [--clients peer|one]`: writes the scenario skeleton of a `serve` journal
/// (``JournalScenario``), checked with the strict parser, to FILE or standard output.
///
/// Exit status: 0 written; 64 bad usage, a journal that is not valid JSON, not
/// `experimently-journal/1`, or has a malformed entry (the message names the file and the JSON
/// path), or a fixtures file that is not fixtures (named with its JSON path); 70 the skeleton
/// cannot be written or
/// (a bug) does not parse.
enum ScenarioCommand {
    static func main(_ arguments: [String]) -> Int32 {
        var journal: String?
        var out: String?
        var name: String?
        var fixturesFile: String?
        var grouping = JournalScenario.ClientGrouping.peer
        var cursor = HarnessCommand.ArgumentCursor(arguments)
        do {
            while let a = cursor.next() {
                switch a {
                case "--from-journal": journal = try cursor.value(for: a)
                case "--out": out = try cursor.value(for: a)
                case "--name": name = try cursor.value(for: a)
                case "--fixtures": fixturesFile = try cursor.value(for: a)
                case "--clients":
                    let v = try cursor.value(for: a)
                    guard let g = JournalScenario.ClientGrouping(rawValue: v) else {
                        throw HarnessCommand.UsageError("--clients takes peer or one, not '\(v)'")
                    }
                    grouping = g
                case "--help", "-h": print(HarnessCommand.usage); return HarnessCommand.Exit.ok.rawValue
                default: throw HarnessCommand.UsageError("unknown argument '\(a)' for scenario")
                }
            }
            guard let j = journal, !j.isEmpty else { throw HarnessCommand.UsageError("scenario needs --from-journal JOURNAL") }
            if let out {
                try HarnessCommand.checkWritable(out, option: "--out", mayReplaceScenario: true)
                // Never over its own journal (a seventh outside tester: `--out J` replaced it).
                try HarnessCommand.checkDistinct([("--from-journal", j), ("--out", out)])
            }
        } catch let e as HarnessCommand.UsageError {
            return HarnessCommand.usageError(e.message)
        } catch {
            return HarnessCommand.usageError("\(error)")
        }
        let text: String
        do {
            guard let data = FileManager.default.contents(atPath: journal!) else {
                throw HarnessCommand.UsageError("cannot read the journal \(journal!)")
            }
            var fixtures: JSONValue?
            if let fixturesFile {
                guard let f = FileManager.default.contents(atPath: fixturesFile) else {
                    throw HarnessCommand.UsageError("cannot read the fixtures \(fixturesFile)")
                }
                let value = try JSONValue.parse(f, file: fixturesFile)
                guard case .object = value else {
                    throw ScenarioError(file: fixturesFile, path: "$", expected: "a fixtures object", found: ObjectReader.brief(value))
                }
                fixtures = value
            }
            text = try JournalScenario.skeleton(journal: data, file: journal!, name: name, grouping: grouping, fixtures: fixtures)
        } catch let e as HarnessCommand.UsageError {
            return HarnessCommand.usageError(e.message)
        } catch {
            HarnessCommand.complain("\(error)")
            return HarnessCommand.Exit.usage.rawValue
        }
        // The skeleton must be a scenario the harness runs: the strict parser is the judge.
        do { _ = try ScenarioParser.parse(Data(text.utf8), file: out ?? "<skeleton>") } catch let e as ScenarioError where fixturesFile != nil && e.path.hasPrefix("$.fixtures") {
            // The fixtures file, not the journal, is what is wrong: name it with its own path.
            var inner = e   // its wording kept (a stated rule too), renamed to the fixtures file
            inner.file = fixturesFile!
            inner.path = "$" + e.path.dropFirst("$.fixtures".count)
            HarnessCommand.complain("\(inner)")
            return HarnessCommand.Exit.usage.rawValue
        } catch {
            HarnessCommand.complain("internal fault: the skeleton does not parse: \(error)")
            return HarnessCommand.Exit.internalFault.rawValue
        }
        guard let out else {
            StandardStream.output(Data(text.utf8))
            return HarnessCommand.Exit.ok.rawValue
        }
        do { try Data(text.utf8).writeOutput(to: out, mayReplaceScenario: true) } catch {
            HarnessCommand.complain("cannot write the scenario to \(out): \(error.localizedDescription)")
            return HarnessCommand.Exit.internalFault.rawValue
        }
        HarnessCommand.say("scenario skeleton written to \(out)")
        return HarnessCommand.Exit.ok.rawValue
    }
}
