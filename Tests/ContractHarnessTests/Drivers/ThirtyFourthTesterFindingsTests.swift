import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the thirty-fourth outside tester (`/work/attack35/FINDINGS.md`: the judge as a
/// program): an adapter's standard error was kept whole (100 MB took a run past its hard deadline).
final class ThirtyFourthTesterFindingsTests: XCTestCase {
    /// Standard error is read a line at a time, each cut to 4,096 bytes with a count of the rest;
    /// a last line without a newline is kept too.
    func testStandardErrorLinesAreCutAndCounted() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        let writer = Thread {
            let text = "short\n" + String(repeating: "x", count: 100_000) + "\nend"
            _ = text.utf8CString.withUnsafeBufferPointer { write(writeEnd, $0.baseAddress, $0.count - 1) }
            close(writeEnd)
        }
        writer.start()
        var lines: [String] = []
        DriverConnection.readCappedLines(readEnd) { lines.append($0) }
        close(readEnd)
        XCTAssertEqual(lines.count, 3)
        XCTAssertEqual(lines.first, "short")
        XCTAssertEqual(lines[1], String(repeating: "x", count: 4096) + " … (95904 more bytes)")
        XCTAssertEqual(lines.last, "end")
    }

    /// An adapter that exits while a process it forked still holds its standard output is seen
    /// dead (its exit is watched, not only its output's end): the scenario is `crashed` with the
    /// exit status, whether the child stayed in the adapter's process group or left it
    /// (`setsid`). Before, every step waited out its limit and failed as the SDK's fault, and the
    /// dead adapter was never replaced (F2).
    func testAnAdapterThatExitsWhileAChildHoldsItsOutputIsCrashed() throws {
        let dir = try scratchDirectory("thirty-fourth-fork-exit")
        let wrapper = try Self.wrapExampleDriver(in: dir, named: "fork-exit.py", handle: """
        def handle(message):
            if message.get("type") == "perform":
                if os.fork() == 0:
                    if os.environ.get("LEAVE_GROUP") == "1":
                        os.setsid()
                    time.sleep(120)
                    os._exit(0)
                os._exit(5)
            return original(message)
        """)
        let scenario = Repository.root.appendingPathComponent("scenarios/contract-smoke.json").path
        for leave in ["0", "1"] {
            let (status, out) = try HarnessProcess.run(["run", scenario, "--sdk-command", "LEAVE_GROUP=\(leave) python3 \(wrapper.path)",
                                                        "--step-timeout-ms", "20000", "--verdict", "v.json"], in: dir)
            XCTAssertEqual(status, 1, out)
            let verdict = try String(contentsOf: dir.appendingPathComponent("v.json"), encoding: .utf8)
            XCTAssertTrue(verdict.contains("\"crashed\""), "setsid \(leave): \(out)")
            XCTAssertTrue(verdict.contains("exited with status 5"), "setsid \(leave): \(verdict.prefix(3000))")
            XCTAssertFalse(out.contains("did not finish"), "setsid \(leave): \(out)")
        }
    }

    /// An adapter started again after a crash must answer `hello` (10 s) as the first one did:
    /// one that never answers, or declares other capabilities, makes every later scenario an
    /// `error` naming why, not a failure of the SDK's steps, nor a run under another program (F5).
    func testARestartedAdapterMustSayHelloAsTheFirstDid() throws {
        let dir = try scratchDirectory("thirty-fourth-second-hello")
        let wrapper = try Self.wrapExampleDriver(in: dir, named: "second-hello.py", handle: Self.againOnRestart + """
        def handle(message):
            if not again and message.get("type") == "perform":
                os._exit(3)
            if again and message.get("type") == "hello":
                if os.environ.get("SUB") == "hang":
                    time.sleep(120)
                d.CAPABILITIES = [c for c in d.CAPABILITIES if c != "cancel"]
            return original(message)
        """)
        let scenarios = ["contract-smoke", "s4-404-throws-and-removes-persisted", "s4-429-without-persisted-throws"]
            .map { Repository.root.appendingPathComponent("scenarios/\($0).json").path }
        for sub in ["hang", "lesscaps"] {
            try? FileManager.default.removeItem(at: dir.appendingPathComponent("started-once"))
            let (status, out) = try HarnessProcess.run(["run"] + scenarios + ["--sdk-command", "SUB=\(sub) python3 \(wrapper.path)",
                                                                          "--step-timeout-ms", "30000", "--verdict", "v.json"], in: dir)
            XCTAssertNotEqual(status, 0, out)
            XCTAssertFalse(out.contains("did not finish") || out.contains("PASS"), "\(sub): \(out)")
            let verdict = try String(contentsOf: dir.appendingPathComponent("v.json"), encoding: .utf8)
            XCTAssertTrue(verdict.contains("the adapter was started again after the adapter exited with status 3"), "\(sub): \(verdict.prefix(4000))")
            XCTAssertTrue(verdict.contains(sub == "hang" ? "had no reply within 10 s" : "differs from the first adapter's (it must be the same program): without the capabilities cancel"), "\(sub): \(verdict.prefix(4000))")
        }
    }

    /// A sixty-sixth outside tester, F3: an adapter that hangs (alive, reading and writing
    /// nothing) is given up at the end of its scenario, once it answered no `close_client` within
    /// 2 s and no `ping` within 5 s: that scenario is `crashed` saying so, and the next one runs
    /// on a fresh adapter. Before, every later scenario waited out its step limits.
    func testAHungAdapterIsGivenUpAndTheNextScenarioGetsAFreshOne() throws {
        let dir = try scratchDirectory("sixty-sixth-hung-adapter")
        let wrapper = try Self.wrapExampleDriver(in: dir, named: "hangs.py", handle: Self.againOnRestart + """
        def handle(message):
            if not again and message.get("type") == "perform":
                time.sleep(120)
            return original(message)
        """)
        let scenarios = ["contract-smoke", "s4-404-throws-and-removes-persisted", "s4-429-without-persisted-throws"]
            .map { Repository.root.appendingPathComponent("scenarios/\($0).json").path }
        let (status, out) = try HarnessProcess.run(["run"] + scenarios + ["--sdk-command", "python3 \(wrapper.path)", "--jobs", "1",
                                                                      "--step-timeout-ms", "1000", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("2 passed, 1 failed"), out)
        let verdict = try String(contentsOf: dir.appendingPathComponent("v.json"), encoding: .utf8)
        XCTAssertTrue(verdict.contains("the adapter hangs: it answered no close_client within 2 s and no ping within 5 s"), String(verdict.prefix(4000)))
    }

    /// A sixty-eighth outside tester: a healthy adapter slow to close its clients (2.5 s) that
    /// refuses `ping` as a type it does not know (as the Python example does) passes; and a cache
    /// query it never answers is no empty cache: `assert cache: []` fails saying so (before, an SDK
    /// keeping its cache past `close()` whose queries hung passed).
    func testASlowCloseWithARefusedPingPassesAndAnUnansweredQueryIsNoEmptyCache() throws {
        let dir = try scratchDirectory("sixty-eighth-ping-and-queries")
        let wrapper = try Self.wrapExampleDriver(in: dir, named: "slow.py", handle: """
        import threading
        def handle(message):
            if message.get("type") == "close_client":
                threading.Timer(2.5, lambda: original(message)).start()
                return None
            operation = (message.get("operation") or {}).get("name")
            if os.environ.get("QUERIES") == "never" and operation in ("getAssignments", "getEvaluatedFlags"):
                return None
            return original(message)
        """)
        let file = dir.appendingPathComponent("q.json")
        try """
        {"format": "experimently-scenario/1", "name": "q", "description": "d", "checks": [], "steps": [
         {"do": "getAssignment", "experiment": "sdk_contract_ab", "user": "user-1"},
         {"do": "close"},
         {"assert": {"cache": {"user": "user-1", "assignments": [], "flags": []}}}]}
        """.write(to: file, atomically: true, encoding: .utf8)
        var (status, out) = try HarnessProcess.run(["run", file.path, "--sdk-command", "python3 \(wrapper.path)", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
        (status, out) = try HarnessProcess.run(["run", file.path, "--sdk-command", "QUERIES=never python3 \(wrapper.path)", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 1, out)
        XCTAssertTrue(out.contains("cached assignments of user-1 on main: the SDK gave no list (an error, or no answer within 5000 ms)"), out)
    }

    /// A sixty-ninth outside tester: a move to the adapter's `next` half a microsecond past the
    /// grid, then a move to that same grid instant, sent a `now` a hair earlier; an adapter that
    /// turns moves into durations (tokio's `advance`) crashed on the negative one, a correct SDK
    /// reported `crashed`. `now` never goes back within a scope now: this adapter exits at once if
    /// it does.
    func testTheAdaptersClockNeverGoesBack() throws {
        let dir = try scratchDirectory("sixty-ninth-clock-never-back")
        let wrapper = try Self.wrapExampleDriver(in: dir, named: "monotonic.py", handle: """
        latest = {}
        def handle(message):
            if message.get("type") in ("clock", "create_client"):
                scope, now = message["scope"], message["now"]
                if now < latest.get(scope, now):
                    sys.stderr.write("clock went back from %r to %r\\n" % (latest[scope], now))
                    os._exit(7)
                latest[scope] = now
            return original(message)
        """)
        let file = dir.appendingPathComponent("tie.json")
        try """
        {"format": "experimently-scenario/1", "name": "tie", "description": "an advance ending at the SDK's deadline", "config": {"timeout": 0.9},
         "checks": ["offline_fallback"], "steps": [
         {"advance": 0.2},
         {"fault": {"match": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag"}, "when": {"first": 1}, "action": {"hold": {}}}, "id": "slow"},
         {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "user-2", "as": "c", "async": true},
         {"wait_for": {"held": "slow", "count": 1}},
         {"advance": 0.9},
         {"wait_for": {"requests": {"path": "/api/v1/feature-flags/evaluate/sdk_contract_flag", "cancelled": true}, "count": 1}},
         {"release": "slow"},
         {"await": "c", "expect": {"error": "networkError", "code": -1001}}]}
        """.write(to: file, atomically: true, encoding: .utf8)
        let (status, out) = try HarnessProcess.run(["run", file.path, "--sdk-command", "python3 \(wrapper.path)", "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
        XCTAssertTrue(out.contains("1 passed, 0 failed"), out)
    }

    /// Python text setting `again`: `False` in the first adapter started in the working
    /// directory, `True` in every one started after it (a marker file).
    static let againOnRestart = """
        marker = os.path.join(os.getcwd(), "started-once")
        again = os.path.exists(marker)
        open(marker, "a").close()

        """

    /// Writes a Python adapter `named` in `dir` that wraps the example SDK's driver: `handle`
    /// (Python text defining `handle(message)`, which may call `original(message)`) replaces the
    /// driver's. `os`, `sys` and `time` are imported.
    static func wrapExampleDriver(in dir: URL, named name: String, handle: String) throws -> URL {
        let example = Repository.root.appendingPathComponent("Examples/python-sdk").path
        let wrapper = dir.appendingPathComponent(name)
        try """
        import os, sys, time
        sys.path.insert(0, \(String(reflecting: example)))
        import driver as d
        original = d.handle
        \(handle)
        d.handle = handle
        sys.exit(d.main())
        """.write(to: wrapper, atomically: true, encoding: .utf8)
        return wrapper
    }
}
