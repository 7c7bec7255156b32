import XCTest
import Foundation
import ExperimentlyMock
import ExperimentlyMutants
@testable import ContractHarness

/// The harness's speed-ups (issue 15 section 3) change nothing reported: a schedule sent as the
/// explored file plus its order runs exactly as the fixed file did, a job line with its scenario
/// text encoded once decodes to the same job, and the mutant matrix stopped at each variant's first
/// catch catches the same variants as the full matrix, naming the variant's known catcher when it
/// catches, else the full matrix's first catch.
final class SpeedPathTests: XCTestCase {
    static let benchmark = Repository.root.appendingPathComponent("Benchmarks/explore-three-holds-and-logout.json").path

    func testAScheduleJobRunsLikeItsFixedFile() async throws {
        let root = try JSONValue.parse(Data(contentsOf: URL(fileURLWithPath: Self.benchmark)), file: Self.benchmark)
        let settings = try XCTUnwrap(try Explorer.settings(of: root, file: Self.benchmark))
        let (orders, _) = Explorer.schedules(of: settings.steps, max: 720, exhaustive: true, seed: 0)
        let text = String(decoding: root.serialized(), as: UTF8.self)
        // The first, the last and a few in between: different steps move.
        for order in [orders[0], orders[1], orders[119], orders[400], orders[719]] {
            let fixed = Explorer.fixed(root, settings: settings, order: order, suffix: "", note: "")
            let asFile = WorkerJob(id: 0, file: Self.benchmark, scenario: String(decoding: fixed.serialized(), as: UTF8.self), seed: 0,
                                   mutant: nil, stepTimeoutCap: 1500, keepsHistory: true, explore: nil)
            var asSchedule = asFile
            asSchedule.scenario = text
            asSchedule.schedule = WorkerJob.ScheduleJob(steps: settings.steps, order: order)
            let a = await WorkerCommand.run(asFile), b = await WorkerCommand.run(asSchedule)
            XCTAssertEqual(a.status, .passed, "\(order): \(a.checks.filter { !$0.passed })")
            XCTAssertEqual(b.status, a.status, "\(order)")
            XCTAssertEqual(b.name, a.name)
            XCTAssertEqual(b.checks.map(\.name), a.checks.map(\.name), "\(order)")
            XCTAssertEqual(b.history.map(\.kind), a.history.map(\.kind), "\(order)")
            XCTAssertFalse(a.historyDigest.isEmpty)
            XCTAssertEqual(b.historyDigest, a.historyDigest, "\(order)")
        }
        // An order that is not well-formed is an error naming the order, not a crash.
        var bad = WorkerJob(id: 0, file: Self.benchmark, scenario: text, seed: 0, mutant: nil, stepTimeoutCap: 1500, keepsHistory: false, explore: nil)
        bad.schedule = WorkerJob.ScheduleJob(steps: [3, 4], order: [14, 3])
        let r = await WorkerCommand.run(bad)
        XCTAssertEqual(r.status, .error)
        XCTAssertTrue(r.reason?.contains("order [14, 3]") == true, r.reason ?? "")
    }

    func testAJobLineDecodesToTheSameJob() throws {
        let tricky = #"{"name": "a \"quoted\" \\ path/with/slashes", "scenario": "", "é": "e\u0301", "tab": "\t"}"#
        let jobs = [
            WorkerJob(id: 7, file: #"dir/"scenario":"".json"#, scenario: tricky, seed: UInt64.max, mutant: "none",
                      stepTimeoutCap: 1500, keepsHistory: false, explore: nil, schedule: .init(steps: [1, 2], order: [2, 1])),
            WorkerJob(id: 8, file: "f.json", scenario: tricky, seed: 0, mutant: nil, stepTimeoutCap: nil, keepsHistory: true,
                      explore: .init(maxSchedules: 3, exhaustive: true)),
            WorkerJob(id: 9, file: "f.json", scenario: "", seed: 1, mutant: nil, stepTimeoutCap: nil, keepsHistory: true, explore: nil),
            WorkerJob(id: 10, file: "caf\u{e9}/e\u{301}.json", scenario: "\u{1}\u{1f}\u{7f} \u{2028}", seed: 9_007_199_254_740_991,
                      mutant: "stale-write-after-clear", stepTimeoutCap: 1, keepsHistory: false, explore: .init(maxSchedules: nil, exhaustive: false),
                      schedule: .init(steps: [], order: []), sameScenario: true, slimPassed: true),
        ]
        for job in jobs {
            let line = WorkerProtocol.jobLine(job)
            XCTAssertEqual(line.last, 0x0A)
            XCTAssertEqual(try WorkerProtocol.kind(of: line.dropLast()), "job")
            XCTAssertEqual(try WorkerProtocol.payload(WorkerJob.self, from: line.dropLast()), job)
            XCTAssertEqual(line, WorkerProtocol.line("job", job), "the same bytes as the record written whole")
            // The worker's reader: every job but the one whose seed no double holds reads back whole.
            if job.seed == UInt64.max {
                XCTAssertNil(WorkerProtocol.job(from: line.dropLast()))
            } else {
                XCTAssertEqual(WorkerProtocol.job(from: line.dropLast()), job)
                XCTAssertEqual(WorkerProtocol.jobRecord(job), WorkerProtocol.line("job", job), "JSONValue writes what JSONEncoder writes")
            }
        }
    }

    /// A slimmed passing result travels as a `passed` record and comes back the same (name and
    /// file exactly, duration and digest); anything more than that goes as a whole `result` record.
    func testAPassingResultRoundTripsAsAPassedRecord() throws {
        var result = ScenarioResult(name: "caf\u{e9}-e\u{301} \"quoted\" \\ \u{1F600}", file: "/tmp/a b/\u{c5}.json", tags: [], source: nil,
                                    status: .passed, durationMilliseconds: 12.345678901234, checks: [], reason: nil, smoke: nil,
                                    history: [], historyDigest: "sha256:00ff")
        let line = try XCTUnwrap(WorkerProtocol.passedLine(id: 41, result, retire: nil))
        XCTAssertEqual(line.last, 0x0A)
        let back = try XCTUnwrap(WorkerProtocol.passedResult(from: line.dropLast()))
        XCTAssertEqual(back.id, 41)
        XCTAssertTrue(back.result.name.unicodeScalars.elementsEqual(result.name.unicodeScalars))
        XCTAssertTrue(back.result.file.unicodeScalars.elementsEqual(result.file.unicodeScalars))
        XCTAssertEqual(back.result.durationMilliseconds, result.durationMilliseconds)
        XCTAssertEqual(back.result.historyDigest, result.historyDigest)
        XCTAssertEqual(back.result.status, .passed)
        // Not a passed record: a whole result record, an unknown version, another kind.
        XCTAssertNil(WorkerProtocol.passedResult(from: WorkerProtocol.line("result", WorkerResult(id: 1, result: result, retire: nil))))
        XCTAssertNil(WorkerProtocol.passedResult(from: Data(#"{"kind":"passed","payload":{"duration_ms":1,"file":"f","history_digest":"d","id":1,"name":"n"},"version":2}"#.utf8)))
        // Anything more than the slim fields, a retiring worker, a failure: never a passed record.
        XCTAssertNil(WorkerProtocol.passedLine(id: 1, result, retire: true))
        var more = result
        more.stepLimitUnproven = true
        XCTAssertNil(WorkerProtocol.passedLine(id: 1, more, retire: nil))
        more = result
        more.adapterStderr = ["warning"]
        XCTAssertNil(WorkerProtocol.passedLine(id: 1, more, retire: nil))
        result.status = .failed
        XCTAssertNil(WorkerProtocol.passedLine(id: 1, result, retire: nil))
    }

    /// Schedules sent to one worker carry the explored file's text once: a job that says "the
    /// previous job's text" runs that text; one with no previous job is an error result, not a hang.
    func testAWorkerRunsASlimmedJobOnThePreviousJobsText() throws {
        let text = try String(contentsOfFile: Self.benchmark, encoding: .utf8)
        let root = try JSONValue.parse(Data(text.utf8), file: Self.benchmark)
        let settings = try XCTUnwrap(try Explorer.settings(of: root, file: Self.benchmark))
        let (orders, _) = Explorer.schedules(of: settings.steps, max: 720, exhaustive: true, seed: 0)
        func job(_ id: Int, _ order: [Int]) -> WorkerJob {
            WorkerJob(id: id, file: Self.benchmark, scenario: text, seed: 0, mutant: nil, stepTimeoutCap: 1500, keepsHistory: false,
                      explore: nil, schedule: .init(steps: settings.steps, order: order))
        }
        XCTAssertEqual(WorkerProtocol.slimmed(job(0, orders[0]), previous: nil), job(0, orders[0]))
        XCTAssertEqual(WorkerProtocol.slimmed(job(0, orders[0]), previous: text + " "), job(0, orders[0]))
        let slim = WorkerProtocol.slimmed(job(1, orders[5]), previous: text)
        XCTAssertEqual(slim.scenario, "")
        XCTAssertEqual(slim.sameScenario, true)

        func results(_ lines: [WorkerJob]) throws -> [Int: ScenarioResult] {
            let worker = try WorkerProcess(executable: HarnessCLITests.binary.path)
            defer { worker.close() }
            lines.forEach { worker.send(WorkerProtocol.jobLine($0)) }
            var out: [Int: ScenarioResult] = [:]
            while out.count < lines.count {
                switch worker.next(timeoutMilliseconds: 60_000) {
                case .line(let data):
                    if let r = WorkerProtocol.passedResult(from: data) { out[r.id] = r.result }
                    else if let r = WorkerProtocol.record(WorkerResult.self, kind: "result", from: data) { out[r.id] = r.result }
                case .idle: XCTFail("no result within 60 s"); return out
                case .ended: XCTFail("the worker ended"); return out
                }
            }
            return out
        }
        let whole = try results([job(0, orders[0]), job(1, orders[5])])
        let slimmed = try results([job(0, orders[0]), slim])
        XCTAssertEqual(whole[1]?.status, .passed)
        XCTAssertEqual(slimmed[1]?.status, whole[1]?.status)
        XCTAssertEqual(slimmed[1]?.historyDigest, whole[1]?.historyDigest)
        let orphan = try results([slim])
        XCTAssertEqual(orphan[1]?.status, .error)
        XCTAssertTrue(orphan[1]?.reason?.contains("previous job") == true, orphan[1]?.reason ?? "")
    }

    /// `passedLine`'s guard names every stored field of `ScenarioResult` but the four the record
    /// carries: a field added later without a line in that guard would be lost from a passing
    /// result sent back as a `passed` record.
    func testThePassedRecordGuardNamesEveryFieldOfAResult() {
        let r = ScenarioResult(name: "n", file: "f", tags: [], source: nil, status: .passed, durationMilliseconds: 1, checks: [],
                               reason: nil, smoke: nil, history: [], historyDigest: "d")
        let fields = Set(Mirror(reflecting: r).children.compactMap(\.label))
        let carried: Set = ["name", "file", "durationMilliseconds", "historyDigest"]
        let guarded: Set = ["status", "infeasible", "infeasibleByChoice", "checks", "history", "events", "stepSummaries", "tags", "source", "reason", "smoke",
                            "exploration", "crash", "adapterStderr", "interleaving", "stepLimitReached", "stepLimitUnproven"]
        XCTAssertEqual(fields, carried.union(guarded),
                       "a field of ScenarioResult not carried by a passed record must be in WorkerProtocol.passedLine's guard, and here")
    }

    func testStoppingAtTheFirstCatchNamesTheKnownCatcherOrTheFirstInOrder() async throws {
        let names = ["defect-4-unassigned-never-fanned-out", "field-canonically-equivalent-user-ids-are-distinct-users",
                     "field-canonically-equivalent-users-named-checks", "field-experiment-stops-mid-run", "s4-fanout-is-per-user",
                     "s4-fanout-skips-expired-and-unassigned"]
        let files = names.map { Repository.root.appendingPathComponent("scenarios/\($0).json").path }
        let (scenarios, invalid) = HarnessCommand.load(files, seed: 0)
        XCTAssertTrue(invalid.isEmpty, "\(invalid)")
        let defects: [Defect] = [.fanOutToExpired, .fanOutToIneligible, .fanOutToOtherUsers, .hashBigEndian, .canonicalIdentity]
        let full = await MutantRun.run(scenarios, defects: defects, stepTimeoutCap: 1500, full: true)
        let first = await MutantRun.run(scenarios, defects: defects, stepTimeoutCap: 1500, full: false)
        XCTAssertEqual(full.baselineFailures, [])
        XCTAssertEqual(first.baselineFailures, [])
        XCTAssertEqual(first.rows.map(\.caught), full.rows.map(\.caught))
        // Both outcomes occur, and one variant is caught by more than one scenario in full.
        XCTAssertEqual(full.rows.map(\.caught), [true, true, true, false, true])
        XCTAssertTrue(full.rows.contains { $0.caughtBy.count > 1 }, "\(full.rows.map(\.caughtBy))")
        for (f, e) in zip(full.rows, first.rows) {
            // The known catcher when it is among the files and catches; else the first in order.
            let known = MutantRun.knownCatcher(of: f.defect).flatMap { k in f.caughtBy.first { $0.unicodeScalars.elementsEqual(k.unicodeScalars) } }
            XCTAssertEqual(e.caughtBy, known.map { [$0] } ?? Array(f.caughtBy.prefix(1)), f.defect.rawValue)
        }
        // canonical-identity's known catcher is not its first catch in order (that one waits out a step limit).
        let canonical = try XCTUnwrap(first.rows.last)
        XCTAssertEqual(canonical.caughtBy, ["field-canonically-equivalent-users-named-checks"])
        XCTAssertEqual(full.rows.last?.caughtBy.first, "field-canonically-equivalent-user-ids-are-distinct-users")
    }
}
