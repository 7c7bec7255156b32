import Foundation
import ExperimentlyMock

/// `contract-harness schema [--out FILE]`: prints (or writes) the JSON Schema of the scenario
/// format, ``ScenarioSchema`` (committed as `Documentation/scenario.schema.json`).
///
/// Exit status: 0 written, 64 bad usage, 70 the file cannot be written.
enum SchemaCommand {
    static func main(_ arguments: [String]) -> Int32 {
        var out: String?
        var cursor = HarnessCommand.ArgumentCursor(arguments)
        do {
            while let a = cursor.next() {
                switch a {
                case "--out": out = try cursor.value(for: a)
                case "--help", "-h": print(HarnessCommand.usage); return HarnessCommand.Exit.ok.rawValue
                default: throw HarnessCommand.UsageError("unknown argument '\(a)' for schema")
                }
            }
            if let out { try HarnessCommand.checkWritable(out, option: "--out") }
        } catch let e as HarnessCommand.UsageError {
            return HarnessCommand.usageError(e.message)
        } catch {
            return HarnessCommand.usageError("\(error)")
        }
        guard let out else {
            StandardStream.output(Data(ScenarioSchema.text.utf8))
            return HarnessCommand.Exit.ok.rawValue
        }
        do { try Data(ScenarioSchema.text.utf8).writeOutput(to: out) } catch {
            HarnessCommand.complain("cannot write the schema to \(out): \(error.localizedDescription)")
            return HarnessCommand.Exit.internalFault.rawValue
        }
        HarnessCommand.say("schema written to \(out)")
        return HarnessCommand.Exit.ok.rawValue
    }
}
