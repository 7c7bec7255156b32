import XCTest
import Foundation
@testable import ContractHarness
import ExperimentlyMock

/// Findings of the fortieth outside tester (`/work/attack42/FINDINGS.md`): what the judge reads from
/// a sloppy or hostile out-of-process adapter. The tester's adapter
/// (`Fixtures/fortieth-tester/hostile-proxy.py`) runs the correct Python example and rewrites its
/// replies by `HOSTILE_MODE`, so every failure here is the wire answer's, never the SDK's.
///
/// - 1: an adapter that died was `crashed` in some runs and `failed` in others (a write meeting
///   the broken pipe before the reader saw the end), its later steps blamed as a deadlock.
/// - 2-4: a member stated twice, a fractional or textual `status`/`code`, a result with both
///   `value` and `error`, a non-boolean `found`, a wrong `seeded` count and a capability that is
///   no text were read silently; each is now a named protocol problem.
final class FortiethTesterFindingsTests: XCTestCase {
    private static let proxy = Repository.root.appendingPathComponent("Tests/ContractHarnessTests/Fixtures/fortieth-tester/hostile-proxy.py").path
    private static func scenario(_ name: String) -> String { Repository.root.appendingPathComponent("scenarios/\(name).json").path }
    private static let files = ["s4-5xx-without-persisted-throws", "field-request-never-answers-times-out", "field-offline-store-from-earlier-sdk-version"].map(scenario)

    private func run(_ mode: String, _ files: [String], _ extra: [String] = [], in dir: URL) throws -> (status: Int32, out: String, verdict: JSONValue) {
        let (status, out) = try HarnessProcess.run(["run"] + files + extra + ["--sdk-command", "HOSTILE_MODE=\(mode) python3 '\(Self.proxy)'", "--verdict", "v.json"], in: dir)
        let verdict = try JSONValue.parse(Data(contentsOf: dir.appendingPathComponent("v.json"))).value
        return (status, out, verdict)
    }

    /// The same dead adapter gives `crashed` on every run and for every scenario, with the crash
    /// as the reason (never "the scenario deadlocks").
    func testADeadAdapterIsCrashedEveryRun() throws {
        let dir = try scratchDirectory("fortieth-dead")
        for mode in ["reply-then-exit", "partial-line"] {
            for _ in 0..<3 {
                let (status, out, verdict) = try run(mode, Self.files, ["--jobs", "1", "--step-timeout-ms", "1000"], in: dir)
                XCTAssertEqual(status, 1, out)
                let scenarios = verdict["scenarios"]?.arrayValue ?? []
                XCTAssertEqual(scenarios.count, 3, out)
                for s in scenarios {
                    XCTAssertEqual(s["status"], .string("crashed"), "\(mode): \(s["name"]?.stringValue ?? "?"): \(s["reason"]?.stringValue ?? "")")
                    let reason = s["reason"]?.stringValue ?? ""
                    XCTAssertTrue(reason.hasPrefix("crashed: "), reason)
                    XCTAssertFalse(reason.contains("deadlocks"), reason)
                }
            }
        }
    }

    /// Each ambiguous or mistyped answer fails by a message naming what is wrong.
    func testAmbiguousAnswersAreNamed() throws {
        let dir = try scratchDirectory("fortieth-answers")
        let cases: [(mode: String, file: String, says: String)] = [
            ("dup-key-variant", "field-offline-store-from-earlier-sdk-version", "states a member twice: duplicate key \"variant_name\" at $.result.value.variant_name"),
            ("code-frac", "field-request-never-answers-times-out", "code at $.result.code is -1001.9, not a whole number"),
            ("status-frac", "s4-5xx-without-persisted-throws", "status at $.result.status is 503.9, not a whole number"),
            ("status-string", "s4-5xx-without-persisted-throws", "status at $.result.status is \"503\", not a whole number"),
            ("value-and-error", "field-offline-store-from-earlier-sdk-version", "has both \"value\" and \"error\""),
            ("persisted-found-string", "field-offline-store-from-earlier-sdk-version", "\"found\" is \"false\", not a boolean"),
            ("seeded-wrong", "field-offline-store-from-earlier-sdk-version", "answered seed_store with {\"seeded\":0}"),
            ("hello-nonstring-cap", "s4-5xx-without-persisted-throws", "is 5, not a text"),
        ]
        for c in cases {
            let (status, out, _) = try run(c.mode, [Self.scenario(c.file)], in: dir)
            XCTAssertEqual(status, 1, "\(c.mode): \(out)")
            XCTAssertTrue(out.contains(c.says), "\(c.mode): \(out)")
        }
        // The correct adapter underneath passes them all (the proxy without a mode changes nothing).
        let (status, out, _) = try run("", Self.files, in: dir)
        XCTAssertEqual(status, 0, out)
    }
}
