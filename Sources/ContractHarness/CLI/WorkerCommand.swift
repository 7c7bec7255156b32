#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import ExperimentlyMock
import ExperimentlyMutants

/// `contract-harness __worker`: the hidden worker mode the supervisor (`WorkerPool`) starts. Reads
/// `job` records on standard input, runs each scenario (several at once when the supervisor sends
/// several), writes a `result` record per job on standard output, and exits 0 when standard input
/// ends. Anything else printed goes to standard error (standard output is kept for records).
enum WorkerCommand {
    /// Records to the supervisor, one `write(2)` each (an `NSLock` keeps lines whole).
    final class Output: @unchecked Sendable {
        // @unchecked Sendable: `fd` is only written to inside `lock`.
        private let lock = NSLock()
        private let fd: Int32
        init(fd: Int32) { self.fd = fd }
        func send(_ data: Data) {
            lock.withLock {
                data.withUnsafeBytes { raw in
                    var written = 0
                    while written < raw.count {
                        let n = write(fd, raw.baseAddress! + written, raw.count - written)
                        if n > 0 { written += n } else if n < 0 && errno == EINTR { continue } else { return }
                    }
                }
            }
        }
    }

    static func main() async -> Int32 {
        // Records go to the original standard output; stray prints go to standard error.
        let recordFD = dup(1)
        dup2(2, 1)
        let output = Output(fd: recordFD)
        output.send(WorkerProtocol.line("hello", WorkerHello(pid: getpid())))
        let lines = AsyncStream<Data> { continuation in
            let thread = Thread {
                var pending = LineBuffer()
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let n = read(0, &buffer, buffer.count)
                    if n < 0 && errno == EINTR { continue }
                    if n <= 0 { break }
                    pending.append(buffer[0..<n])
                    while let line = pending.nextLine() { continuation.yield(line) }
                }
                continuation.finish()
            }
            thread.start()
        }
        await withTaskGroup(of: Void.self) { group in
            var previous: String?   // the last job's scenario text (`WorkerJob.sameScenario`)
            for await line in lines {
                guard var job = WorkerProtocol.job(from: line) ?? WorkerProtocol.record(WorkerJob.self, kind: "job", from: line) else {
                    StandardStream.error(Data("contract-harness __worker: ignoring a line that is not a job record\n".utf8))
                    continue
                }
                if job.sameScenario == true {
                    guard let previous else {
                        // Answered, so the supervisor does not wait for it: an error result naming the fault.
                        let result = ScenarioResult(name: (job.file as NSString).lastPathComponent, file: job.file, tags: [], source: nil,
                                                    status: .error, durationMilliseconds: 0, checks: [],
                                                    reason: "worker protocol: a job said its scenario is the previous job's, and there was none",
                                                    smoke: nil, history: [], historyDigest: "")
                        output.send(WorkerProtocol.line("result", WorkerResult(id: job.id, result: result, retire: true)))
                        continue
                    }
                    job.scenario = previous
                    job.sameScenario = nil
                }
                previous = job.scenario
                group.addTask {
                    let result = await run(job)
                    let retire = leavesWork(result) ? true : nil
                    let sent = job.schedule != nil ? Explorer.lean(slimmed(result)) : job.slimPassed == true ? slimmed(result) : result
                    output.send(WorkerProtocol.passedLine(id: job.id, sent, retire: retire)
                                ?? WorkerProtocol.line("result", WorkerResult(id: job.id, result: sent, retire: retire)))
                }
            }
        }
        return 0
    }

    /// A passing schedule's result as the explorer reads it: its status, name and digest, without
    /// its checks and step lines (the explorer counts passing schedules and reports only failing
    /// ones; encoding and decoding the rest was a tenth of an exploration's CPU time).
    static func slimmed(_ result: ScenarioResult) -> ScenarioResult {
        guard result.status == .passed, !result.infeasible else { return result }
        var slim = result
        slim.checks = []
        slim.stepSummaries = []
        slim.history = []
        slim.events = []
        slim.tags = []
        slim.source = nil
        return slim
    }

    /// Whether SDK work may still be running after `result`: a step stopped the scenario (a
    /// timeout, a hang), operations never finished, the mock's shutdown failed holds, or it errored.
    /// Such a worker is replaced before the next scenario.
    static func leavesWork(_ result: ScenarioResult) -> Bool {
        result.status == .error || result.status == .crashed || (result.status == .failed && result.reason != nil)
            || result.checks.contains { !$0.passed && ($0.name == "operations finish" || $0.name == "lifecycle") }
    }

    /// The last few scenario texts this worker parsed, with their parse, newest last: an explored
    /// file's schedule jobs and the mutant matrix's (variant, scenario) pairs bring one text many
    /// times (parsing was a tenth of the matrix's CPU time). Behind a `HarnessLocked` (jobs run
    /// concurrently).
    private static let recentlyParsed = HarnessLocked<[(text: String, file: String, scenario: Scenario)]>([])

    /// How many parsed texts `recentlyParsed` keeps: a few more than the scenarios a worker runs at
    /// once (`MutantRun.scenariosPerWorker`).
    static let parsedTextsKept = 8

    /// `text` parsed as the scenario file `file`, reusing an earlier parse when the text and file
    /// are the same bytes (the parser is a pure function of both).
    ///
    /// - Throws: the parser's `ScenarioError` when `text` is not a valid scenario.
    static func parsedOnce(_ text: String, file: String) throws -> Scenario {
        let known = recentlyParsed.withLock { recent in
            recent.last { $0.text.utf8.elementsEqual(text.utf8) && $0.file.utf8.elementsEqual(file.utf8) }?.scenario
        }
        if let known { return known }
        let scenario = try ScenarioParser.parse(Data(text.utf8), file: file)
        recentlyParsed.withLock { recent in
            recent.append((text, file, scenario))
            if recent.count > parsedTextsKept { recent.removeFirst(recent.count - parsedTextsKept) }
        }
        return scenario
    }

    /// Runs one job in this process.
    static func run(_ job: WorkerJob) async -> ScenarioResult {
        let driver: SwiftSDKDriver = job.mutant.map { MutantRun.driver(Defect(rawValue: $0)) } ?? SwiftSDKDriver()
        let runner = ScenarioRunner(driver: driver, seed: job.seed, stepTimeoutCap: job.stepTimeoutCap, keepsHistory: job.keepsHistory)
        var scenario: Scenario
        do {
            if let schedule = job.schedule {
                scenario = try parsedOnce(job.scenario, file: job.file)
                let settings = Explorer.Settings(steps: schedule.steps, maxSchedules: 1, exhaustive: false)
                guard let permuted = Explorer.permuted(scenario, settings: settings, order: schedule.order) else {
                    throw ScenarioError(file: job.file, path: "$.steps", expected: "an order of the movable steps that is well-formed",
                                        found: "order \(schedule.order) of steps \(schedule.steps)")
                }
                scenario = permuted
            } else {
                scenario = try parsedOnce(job.scenario, file: job.file)
            }
        } catch {
            return ScenarioResult(name: (job.file as NSString).lastPathComponent, file: job.file, tags: [], source: nil, status: .error,
                                  durationMilliseconds: 0, checks: [], reason: "\(error)", smoke: nil, history: [], historyDigest: "")
        }
        if let explore = job.explore, let root = try? JSONValue.parse(Data(job.scenario.utf8), file: job.file),
           let settings = try? Explorer.settings(of: root, file: job.file) {
            var options = HarnessCommand.RunOptions()
            options.seed = job.seed
            options.maxSchedules = explore.maxSchedules
            options.exhaustive = explore.exhaustive
            return await HarnessCommand.exploreAsResult(scenario, root: root, settings: settings, options: options, runner: runner)
        }
        return await runner.run(scenario)
    }
}
