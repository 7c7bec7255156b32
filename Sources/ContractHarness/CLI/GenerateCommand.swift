import Foundation
import ExperimentlyMock
import ExperimentlyMutants

/// `contract-harness generate`: random concurrent workloads (`WorkloadGenerator`) run in-process
/// against the shipping SDK and the faithful variant; any named-check failure is printed with its
/// scenario written to a file for `run` to replay (Documentation/CLI.md).
enum GenerateCommand {
    static let usage = """
    usage: contract-harness generate [--seed S] [--count N] [--from I] [--sdk shipping|faithful|both] [--out DIR] [--write] [--ids equivalent|plain]
      --seed S     the generator's seed (default 1); scenario i depends only on S and i
      --count N    how many scenarios (default 100)
      --from I     the first index (default 0)
      --sdk WHICH  shipping (the Experimently SDK), faithful (ExperimentlyMutants, no defect), both (default),
                   or a broken variant's name (how many workloads catch it)
      --out DIR    where failing scenarios are written (default generated/); with --write every scenario
      --ids WHICH  equivalent (default): users include NFC and NFD \u{E9}; plain: five ASCII ids
      --write      write every generated scenario file, run or not (with --count, --seed, --from)
    exit status: 0 every scenario passed on every SDK, 1 some failed, 64 bad usage
    """

    /// What one run found.
    struct Summary: Sendable {
        var passed = 0
        var failed: [(index: Int, sdk: String, message: String)] = []
    }

    static func main(_ arguments: [String]) async -> Int32 {
        var seed: UInt64 = 1, count = 100, from = 0, sdk = "both", out = "generated", writeAll = false, equivalent = true
        var cursor = HarnessCommand.ArgumentCursor(arguments)
        do {
            while let a = cursor.next() {
                switch a {
                case "--seed":
                    let v = try cursor.value(for: a)
                    guard let n = UInt64(v) else { throw HarnessCommand.UsageError("--seed takes a whole number, not '\(v)'") }
                    seed = n
                case "--count", "--from":
                    let v = try cursor.value(for: a)
                    guard let n = Int(v), n >= (a == "--count" ? 1 : 0) else { throw HarnessCommand.UsageError("\(a) takes a whole number, not '\(v)'") }
                    if a == "--count" { count = n } else { from = n }
                case "--sdk":
                    let v = try cursor.value(for: a)
                    guard ["shipping", "faithful", "both"].contains(v) || Defect(rawValue: v) != nil else {
                        throw HarnessCommand.UsageError("--sdk takes shipping, faithful, both or a broken variant (\(Defect.allCases.map(\.rawValue).joined(separator: ", "))), not '\(v)'")
                    }
                    sdk = v
                case "--ids":
                    let v = try cursor.value(for: a)
                    guard ["equivalent", "plain"].contains(v) else { throw HarnessCommand.UsageError("--ids takes equivalent or plain, not '\(v)'") }
                    equivalent = v == "equivalent"
                case "--out": out = try cursor.value(for: a)
                case "--write": writeAll = true
                case "--help", "-h":
                    print(usage)
                    return HarnessCommand.Exit.ok.rawValue
                default: throw HarnessCommand.UsageError("unknown option '\(a)'")
                }
            }
        } catch let e as HarnessCommand.UsageError {
            StandardStream.error(Data("contract-harness generate: \(e.message)\n\(usage)\n".utf8))
            return HarnessCommand.Exit.usage.rawValue
        } catch {
            return HarnessCommand.Exit.internalFault.rawValue
        }
        let generator = WorkloadGenerator(seed: seed, equivalentIds: equivalent)
        if writeAll {
            try? FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
            for i in from..<(from + count) {
                let path = (out as NSString).appendingPathComponent(generator.fileName(index: i) + ".json")
                _ = FileManager.default.createFile(atPath: path, contents: Data((generator.scenarioJSON(index: i).jsonText + "\n").utf8))
            }
            HarnessCommand.say("wrote \(count) scenarios to \(out)/")
            return HarnessCommand.Exit.ok.rawValue
        }
        let started = DispatchTime.now()
        var drivers: [(String, any SDKDriver)] = []
        if let defect = Defect(rawValue: sdk) {
            drivers.append((defect.rawValue, MutantRun.driver(defect)))
        } else {
            if sdk != "faithful" { drivers.append(("shipping", SwiftSDKDriver())) }
            if sdk != "shipping" { drivers.append(("faithful", MutantRun.driver(nil))) }
        }
        var lines: [String] = []
        var failures = 0
        // SIGINT/SIGTERM (also when they arrived ignored, as in a background job): the summary so
        // far, marked interrupted, then exit 130/143 (InterruptSignals).
        let tally = Tally()
        let heading = "\(count) scenarios, seed \(seed), from \(from)"
        let registration = InterruptSignals.register { sig in
            HarnessCommand.say("interrupted by signal \(sig): generate stopped early (\(heading) asked): "
                               + tally.summary + " in \(String(format: "%.1f", ScenarioRunner.elapsed(since: started) / 1000)) s")
        }
        defer { registration.cancel() }
        for (name, driver) in drivers {
            tally.start(name)
            let summary = await run(generator, indices: Array(from..<(from + count)), driver: driver, sdkName: name,
                                    ran: { tally.record(passed: $0) }) { index, message in
                HarnessCommand.say("FAIL  \(generator.fileName(index: index)) on \(name): \(message)")
                try? FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
                let path = (out as NSString).appendingPathComponent(generator.fileName(index: index) + ".json")
                _ = FileManager.default.createFile(atPath: path, contents: Data((generator.scenarioJSON(index: index).jsonText + "\n").utf8))
            }
            failures += summary.failed.count
            lines.append("\(name): \(summary.passed) passed, \(summary.failed.count) failed")
        }
        let seconds = ScenarioRunner.elapsed(since: started) / 1000
        HarnessCommand.say("generated \(count) scenarios (seed \(seed), from \(from)): " + lines.joined(separator: "; ")
                           + " in \(String(format: "%.1f", seconds)) s")
        return failures == 0 ? HarnessCommand.Exit.ok.rawValue : HarnessCommand.Exit.failed.rawValue
    }

    /// Runs the generated scenarios `indices` against `driver`, one at a time (each from a fresh
    /// state); `failed` is called with each failing index and its first failure.
    static func run(_ generator: WorkloadGenerator, indices: [Int], driver: any SDKDriver, sdkName: String,
                    ran: (Bool) -> Void = { _ in }, failed: (Int, String) -> Void = { _, _ in }) async -> Summary {
        let runner = ScenarioRunner(driver: driver, keepsHistory: false)
        var summary = Summary()
        for i in indices {
            let message: String
            do {
                let r = await runner.run(try generator.scenario(index: i))
                if r.status == .passed { summary.passed += 1; ran(true); continue }
                message = r.firstFailure.map { "\($0.name): \($0.message ?? "")" } ?? r.reason ?? r.status.rawValue
            } catch {
                message = "malformed: \(error)"
            }
            summary.failed.append((i, sdkName, message))
            ran(false)
            failed(i, message)
        }
        return summary
    }
}

extension GenerateCommand {
    /// What `generate` has run so far, per SDK in order, for the summary of an interrupted run.
    /// State lives behind an `NSLock` (the interrupt handler reads it from its own thread).
    final class Tally: @unchecked Sendable {
        // @unchecked Sendable: `rows` is only touched inside `lock`.
        private let lock = NSLock()
        private var rows: [(sdk: String, passed: Int, failed: Int)] = []
        /// Starts counting for `sdk`.
        func start(_ sdk: String) { lock.withLock { rows.append((sdk, 0, 0)) } }
        /// Counts one scenario of the current SDK.
        func record(passed: Bool) {
            lock.withLock {
                guard !rows.isEmpty else { return }
                if passed { rows[rows.count - 1].passed += 1 } else { rows[rows.count - 1].failed += 1 }
            }
        }
        /// `shipping: 3 passed, 0 failed; faithful: ...`, or `nothing run yet`.
        var summary: String {
            let r = lock.withLock { rows }
            return r.isEmpty ? "nothing run yet" : r.map { "\($0.sdk): \($0.passed) passed, \($0.failed) failed" }.joined(separator: "; ")
        }
    }
}
