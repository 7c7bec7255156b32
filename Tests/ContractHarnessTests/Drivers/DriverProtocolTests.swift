import XCTest
@testable import ContractHarness
import ExperimentlyMock

/// The driver protocol `experimently-driver/1`: the wire types against a recorded transcript, and
/// `ProcessSDKDriver` against adapters that break the protocol, crash, or are correct (the Python
/// example client).
final class DriverProtocolTests: XCTestCase {
    /// Lines recorded from a run of `experimently-driver` (harness -> adapter, then adapter -> harness).
    static let requests = [
        #"{"id":1,"protocol":"experimently-driver/1","type":"hello"}"#,
        #"{"client":"s1.main","id":2,"now":1700000000,"scope":"s1","settings":{"api_key":"sdk-contract-key","base_url":"http://127.0.0.1:40000","cache_size":1000,"cache_ttl":300,"offline_fallback":true,"timeout":10},"store":"s1.main","type":"create_client"}"#,
        #"{"client":"s1.main","id":3,"operation":{"experiment":"sdk_contract_ab","name":"getAssignment","user":{"attributes":{"plan":"pro"},"id":"user-1"}},"type":"perform"}"#,
        #"{"id":4,"now":1700000300,"scope":"s1","type":"clock"}"#,
        #"{"id":5,"target":3,"type":"cancel"}"#,
        #"{"client":"s1.main","id":6,"key":"sdk_contract_ab","kind":"experiment","type":"persisted","user":"user-1"}"#,
    ]
    static let replies = [
        #"{"id":1,"result":{"capabilities":["app","cancel"],"protocol":"experimently-driver/1","sdk":{"name":"ios","version":"1.0.0"}}}"#,
        #"{"id":3,"result":{"error":"serverError","message":"HTTP 500","status":500}}"#,
        #"{"error":"no client 's9.main' (create_client first)","id":7}"#,
    ]

    func testRecordedTranscriptDecodesAndEncodesBackByteForByte() throws {
        let decoder = DriverMessageDecoder(), encoder = DriverMessageEncoder()
        for line in Self.requests {
            let request = try decoder.request(Data(line.utf8))
            XCTAssertEqual(String(decoding: try encoder.line(request), as: UTF8.self), line + "\n")
        }
        for line in Self.replies {
            let reply = try decoder.reply(Data(line.utf8))
            XCTAssertEqual(String(decoding: try encoder.line(reply), as: UTF8.self), line + "\n")
        }
        let perform = try decoder.request(Data(Self.requests[2].utf8))
        XCTAssertEqual(try DriverOperation.operation(perform.operation!),
                       .getAssignment(experiment: "sdk_contract_ab", user: UserSpec(id: "user-1", attributes: .object(["plan": .string("pro")]))))
        let outcome = try DriverOperation.outcome(try decoder.reply(Data(Self.replies[1].utf8)).result!)
        XCTAssertEqual(outcome, .error(kind: "serverError", status: 500, code: nil, message: "HTTP 500"))
        let hello = try DriverHello(json: try decoder.reply(Data(Self.replies[0].utf8)).result!)
        XCTAssertEqual(hello.sdkName, "ios")
        XCTAssertEqual(hello.capabilities, ["app", "cancel"])
    }

    func testEveryOperationRoundTrips() throws {
        let event = EventSpec(userId: "u", eventName: "e", eventType: "t", experimentKey: "x", featureFlagKey: nil, value: 2.5,
                              properties: .object(["a": .bool(true)]), timestamp: 1_700_000_000.5)
        let operations: [SDKOperation] = [
            .evaluateFlag(flag: "f", user: UserSpec(id: "u")), .getAssignment(experiment: "x", user: UserSpec(id: "u")),
            .track(event), .trackWithStatus(event), .trackBatch([event, event]), .clearCache, .clearOfflineCache, .close,
            .getAssignments(user: "u"), .getEvaluatedFlags(user: "u"), .hashUser(user: "u", key: "k"),
        ]
        XCTAssertEqual(operations.map(\.name), SDKOperation.allNames)
        for op in operations { XCTAssertEqual(try DriverOperation.operation(DriverOperation.json(op)), op) }
        XCTAssertThrowsError(try DriverOperation.operation(.object(["name": .string("evaluateFlag")]))) { error in
            XCTAssertTrue("\(error)".contains("\"flag\""), "\(error)")
        }
    }

    func testOutputThatIsNotTheProtocolIsAnErrorQuotingTheLine() async {
        do {
            _ = try await ProcessSDKDriver.launch(command: "echo 'Loading SDK...'; echo oops >&2", timeoutSeconds: 5)
            XCTFail("an adapter that prints text launched")
        } catch {
            XCTAssertTrue("\(error)".contains("Loading SDK..."), "\(error)")
        }
    }

    func testAnAdapterThatCrashesMidScenarioMakesItCrashedWithItsStandardError() async throws {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("crashing-adapter-\(getpid()).py")
        try """
        import json, sys
        for line in sys.stdin:
            m = json.loads(line)
            if m["type"] == "hello":
                print(json.dumps({"id": m["id"], "result": {"protocol": "experimently-driver/1", "sdk": {"name": "crashy", "version": "0"}, "capabilities": ["evaluateFlag"]}}), flush=True)
            elif m["type"] == "create_client":
                print(json.dumps({"id": m["id"], "result": {}}), flush=True)
            elif m["type"] == "perform":
                sys.stderr.write("segfault in evaluate_flag\\n"); sys.stderr.flush(); sys.exit(3)
        """.write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        let driver = try await ProcessSDKDriver.launch(command: "python3 \(script.path)")
        let scenario = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "crash", "description": "an adapter crash", "steps": [
          {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "expect": {"value": {"enabled": true}}}]}
        """.utf8), file: "crash.json")
        let result = await ScenarioRunner(driver: driver).run(scenario)
        await driver.shutdown()
        XCTAssertEqual(result.status, .crashed)
        XCTAssertTrue(result.reason?.hasPrefix("crashed: the adapter exited with status 3") == true, result.reason ?? "")
        XCTAssertTrue(result.adapterStderr.contains("segfault in evaluate_flag"), "\(result.adapterStderr)")
    }

    /// Writes a Python adapter named `name` (declaring `evaluateFlag` only) that answers
    /// `hello`, `create_client`, `close_client` and `shutdown`, and runs `perform` (one line of
    /// Python, `m` the request) for each `perform`; returns its path in the temporary directory.
    static func evaluateFlagAdapter(name: String, perform: String) throws -> URL {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-adapter-\(getpid()).py")
        try """
        import json, sys
        for line in sys.stdin:
            m = json.loads(line)
            if m["type"] == "hello":
                print(json.dumps({"id": m["id"], "result": {"protocol": "experimently-driver/1", "sdk": {"name": "\(name)", "version": "0"}, "capabilities": ["evaluateFlag"]}}), flush=True)
            elif m["type"] in ("create_client", "close_client", "shutdown"):
                print(json.dumps({"id": m["id"], "result": {}}), flush=True)
                if m["type"] == "shutdown": sys.exit(0)
            elif m["type"] == "perform":
                \(perform)
        """.write(to: script, atomically: true, encoding: .utf8)
        return script
    }

    /// An outside tester: a reply nested deeper than the decoder goes (here 600 levels, in an
    /// ignorable field) was dropped, and the operation "did not finish" after the step limit,
    /// blamed on a contract rule. Now the reply's top-level `id` ends the request at once as a
    /// driver failure, naming no rule.
    func testAReplyTooDeepToDecodeFailsItsRequestAtOnceNamingTheDriver() async throws {
        let script = try Self.evaluateFlagAdapter(name: "deep", perform: #"""
        print('{"result": {"value": {"key": "f", "enabled": true}}, "junk": ' + "[" * 600 + "]" * 600 + ', "id": ' + str(m["id"]) + '}', flush=True)
        """#)
        defer { try? FileManager.default.removeItem(at: script) }
        let driver = try await ProcessSDKDriver.launch(command: "python3 \(script.path)")
        let scenario = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "deep", "description": "a reply nested too deep", "source": "CONTRACT.md section 3", "steps": [
          {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "expect": {"value": {"enabled": true}}}]}
        """.utf8), file: "deep.json")
        let result = await ScenarioRunner(driver: driver, stepTimeoutCap: 5000).run(scenario)
        await driver.shutdown()
        XCTAssertEqual(result.status, .failed)
        // The protocol problem comes first; the step's own failure names the driver too.
        XCTAssertEqual(result.firstFailure?.name, "driver protocol", "\(result.checks)")
        let message = result.checks.first { $0.name.hasPrefix("step") && !$0.passed }?.message ?? ""
        XCTAssertTrue(message.contains("is not a driver reply"), message)
        XCTAssertFalse(message.contains("did not finish"), message)
        XCTAssertFalse(message.contains("broken rule"), message)
        XCTAssertEqual(DriverMessageDecoder.topLevelID(in: Data(#"{"a": {"id": 3}, "b": "\"id\": 4", "id": 7}"#.utf8)), 7)
        XCTAssertNil(DriverMessageDecoder.topLevelID(in: Data(#"{"a": {"id": 3}}"#.utf8)))
        // A string of digits names its request too (a sixtieth outside tester); other strings do not.
        XCTAssertEqual(DriverMessageDecoder.topLevelID(in: Data(#"{"id": "1441", "result": {}}"#.utf8)), 1441)
        XCTAssertNil(DriverMessageDecoder.topLevelID(in: Data(#"{"id": "14x", "result": {}}"#.utf8)))
        XCTAssertNil(DriverMessageDecoder.topLevelID(in: Data(#"{"id": "", "result": {}}"#.utf8)))
    }

    /// A sixth outside tester: an adapter that closed its standard output and kept running was
    /// never seen (`/bin/sh -c` held the pipe while it waited for the adapter), so every later
    /// scenario waited out its step limit on the same silent adapter. Now a simple command runs
    /// as `exec command`: the closed output is the adapter's death at once, and the next
    /// scenario gets a new adapter.
    func testAnAdapterThatClosesItsStandardOutputIsACrashAtOnceAndIsReplaced() async throws {
        // The first adapter closes its output at its first `perform` and sleeps; the next answers.
        let script = try Self.evaluateFlagAdapter(name: "mute", perform: #"""
        exec("import os, time\nif not os.path.exists(sys.argv[1]):\n    open(sys.argv[1], 'w').close(); os.close(1); time.sleep(30)"); print(json.dumps({"id": m["id"], "result": {"value": {"key": "sdk_contract_flag", "enabled": True, "reason": "rollout"}}}), flush=True)
        """#)
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("mute-\(getpid()).done")
        defer { try? FileManager.default.removeItem(at: script); try? FileManager.default.removeItem(at: marker) }
        try? FileManager.default.removeItem(at: marker)
        let driver = try await ProcessSDKDriver.launch(command: "python3 \(script.path) \(marker.path)")
        let scenario = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "mute", "description": "an adapter that closes its output", "steps": [
          {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "expect": {"value": {"enabled": true}}}]}
        """.utf8), file: "mute.json")
        let first = await ScenarioRunner(driver: driver, stepTimeoutCap: 20_000).run(scenario)
        let second = await ScenarioRunner(driver: driver, stepTimeoutCap: 20_000).run(scenario)
        await driver.shutdown()
        XCTAssertEqual(first.status, .crashed, first.reason ?? "")
        XCTAssertTrue((first.reason ?? "").contains("closed its standard output"), first.reason ?? "")
        XCTAssertLessThan(first.durationMilliseconds, 10_000, "seen at once, not at the step limit")
        XCTAssertEqual(second.status, .passed, second.firstFailure?.message ?? second.reason ?? "")
        XCTAssertEqual(DriverConnection.execing("python3 driver.py --x 'a b'"), "exec python3 driver.py --x 'a b'")
        // Builtins with no program of that name run as written (`exec exit 3` is "exit: not found").
        for builtin in ["exit 3", "return 1", "read x", "wait", ": nothing", "shift"] { XCTAssertEqual(DriverConnection.execing(builtin), builtin) }
        XCTAssertEqual(DriverConnection.execing("cd x && ./adapter"), "cd x && ./adapter")
        XCTAssertEqual(DriverConnection.execing("FOO=1 ./adapter"), "FOO=1 ./adapter")
    }

    /// A sixth outside tester: an unreadable reply was reported as "the adapter refused", a reply
    /// to no pending request only in the driver protocol check (the step said "did not finish"),
    /// and a 64 MB value was quoted whole. Now the reply is "could not be read" and quoted, the
    /// waiting step names the stray reply, and messages keep 4,000 characters.
    func testAdapterOutputProblemsAreNamedWhereTheStepFails() async throws {
        let scenario = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "odd", "description": "odd replies", "source": "CONTRACT.md section 3", "steps": [
          {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u", "expect": {"value": {"enabled": true}}}]}
        """.utf8), file: "odd.json")
        let cases: [(String, String, String)] = [
            ("nan", #"print('{"id": %d, "result": {"value": NaN}}' % m["id"], flush=True)"#, "the adapter's reply could not be read"),
            ("stray", #"print(json.dumps({"id": m["id"] + 1000, "result": {"value": True}}), flush=True)"#, "a reply to no pending request"),
            // An eleventh outside tester: a second reply to an answered request was "a reply to no pending request".
            ("double", #"[print(json.dumps({"id": m["id"], "result": {"value": {"key": "f", "enabled": True}}}), flush=True) for _ in range(2)]"#, "a second reply to request"),
        ]
        for (name, perform, expected) in cases {
            let script = try Self.evaluateFlagAdapter(name: name, perform: perform)
            defer { try? FileManager.default.removeItem(at: script) }
            let driver = try await ProcessSDKDriver.launch(command: "python3 \(script.path)")
            let result = await ScenarioRunner(driver: driver, stepTimeoutCap: 400).run(scenario)
            await driver.shutdown()
            XCTAssertEqual(result.status, .failed, name)
            // Named where the step fails (or, a second reply to an answered request, in the protocol check alone).
            let step = result.checks.first { $0.name.hasPrefix("step") && !$0.passed }?.message
            let message = step ?? result.firstFailure?.message ?? ""
            XCTAssertTrue(message.contains(expected), "\(name): \(message)")
            // A protocol problem, when the adapter's output had one, is the headline and the reason.
            if result.checks.contains(where: { $0.name == "driver protocol" }) {
                XCTAssertEqual(result.firstFailure?.name, "driver protocol", name)
                XCTAssertTrue(result.reason?.hasPrefix("the adapter broke the driver protocol: ") == true, "\(name): \(result.reason ?? "")")
                if let step { XCTAssertTrue(step.contains("[may follow from the adapter's driver protocol problem: a reply the harness could not read]"), step) }
            }
            XCTAssertFalse(message.contains("refused"), "\(name): \(message)")
        }
        let long = CheckResult(name: "x", passed: false, message: String(repeating: "A", count: 10_000), history: [String(repeating: "B", count: 9_000)])
        XCTAssertEqual(long.message?.hasSuffix("… (6000 more characters)"), true)
        XCTAssertLessThan(long.history?.first?.count ?? 0, 4_100)
    }

    func testAnAdapterThatNeverAnswersMeetsTheStepDeadlineAndItsStderrIsQuoted() async throws {
        let script = try Self.evaluateFlagAdapter(name: "silent", perform: #"""
        sys.stderr.write("deadlock in evaluate_flag\n"); sys.stderr.flush()
        """#)
        defer { try? FileManager.default.removeItem(at: script) }
        let driver = try await ProcessSDKDriver.launch(command: "python3 \(script.path)")
        let scenario = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "hang", "description": "an adapter that never answers", "checks": ["single_flight"], "steps": [
          {"do": "evaluateFlag", "flag": "sdk_contract_flag", "user": "u"}]}
        """.utf8), file: "hang.json")
        let result = await ScenarioRunner(driver: driver, stepTimeoutCap: 300).run(scenario)
        await driver.shutdown()
        XCTAssertEqual(result.status, .failed)
        XCTAssertTrue(result.firstFailure?.message?.contains("did not finish within 300 ms") == true, "\(result.checks)")
        XCTAssertTrue(result.adapterStderr.contains("deadlock in evaluate_flag"), "\(result.adapterStderr)")
    }

    func testThePythonExamplePassesScenariosAndSkipsNaming() async throws {
        let driverPath = Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path
        let driver = try await ProcessSDKDriver.launch(command: "python3 '\(driverPath)'")
        XCTAssertEqual(driver.sdkName, "python-example")
        for name in ["contract-smoke", "s4-single-flight-50-concurrent-flag-calls", "defect-1-stale-write-after-clearcache"] {
            let file = Repository.root.appendingPathComponent("scenarios/\(name).json").path
            let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
            let result = await ScenarioRunner(driver: driver).run(scenario)
            XCTAssertEqual(result.status, .passed, "\(name): \(result.firstFailure?.message ?? result.reason ?? "")")
        }
        await driver.shutdown()
    }

    func testABrokenPythonClientIsCaughtOutOfProcess() async throws {
        let driverPath = Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path
        let driver = try await ProcessSDKDriver.launch(command: "EXPERIMENTLY_EXAMPLE_DEFECT=stale-write-after-clear python3 '\(driverPath)'")
        let file = Repository.root.appendingPathComponent("scenarios/defect-1-stale-write-after-clearcache.json").path
        let scenario = try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: file)), file: file)
        let result = await ScenarioRunner(driver: driver).run(scenario)
        await driver.shutdown()
        XCTAssertEqual(result.status, .failed, "the stale write went unnoticed")
    }

    func testMissingCapabilitiesSkipNamingThem() throws {
        let scenario = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "clock", "description": "clock and cancel", "checks": ["single_flight"], "steps": [
          {"do": "evaluateFlag", "flag": "f", "user": "u", "async": true, "as": "a"}, {"advance": 5}, {"cancel": "a"}]}
        """.utf8), file: "clock.json")
        XCTAssertEqual(ScenarioRequirements.missing(scenario, capabilities: ["evaluateFlag"]), ["virtual_clock", "cancel"])
        XCTAssertEqual(ScenarioRequirements.missing(scenario, capabilities: ["virtual_clock", "cancel"]), ["evaluateFlag"])
    }

    /// The memory cache is read through `getAssignments` / `getEvaluatedFlags`: a scenario asserting
    /// the cache, or judged by `no_stale_write`, needs them and is skipped naming them for an
    /// adapter without them (a seventy-third outside tester: it failed as the adapter's refusal).
    func testReadingTheCacheNeedsTheSDKsLists() throws {
        let scenario = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "c", "description": "d", "checks": [], "steps": [
          {"do": "evaluateFlag", "flag": "f", "user": "u"},
          {"assert": {"cached": {"user": "u", "flag": "f"}}}]}
        """.utf8), file: "c.json")
        XCTAssertEqual(ScenarioRequirements.missing(scenario, capabilities: ["evaluateFlag"]), ["getEvaluatedFlags"])
        let judged = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "j", "description": "d", "checks": ["no_stale_write"], "steps": [
          {"do": "getAssignment", "experiment": "e", "user": "u"}]}
        """.utf8), file: "j.json")
        XCTAssertEqual(ScenarioRequirements.missing(judged, capabilities: ["getAssignment"]), ["getAssignments", "getEvaluatedFlags"])
    }

    /// A short cache TTL is counted on the scenario's clock by the checks: an SDK on the wall
    /// clock lacks it (a seventy-fifth outside tester: such an SDK failed a correct run).
    func testAShortCacheTTLNeedsTheVirtualClock() throws {
        let scenario = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "t", "description": "d", "checks": ["single_flight"], "config": {"cache_ttl": 0.5}, "steps": [
          {"do": "evaluateFlag", "flag": "f", "user": "u"}]}
        """.utf8), file: "t.json")
        XCTAssertEqual(ScenarioRequirements.missing(scenario, capabilities: ["evaluateFlag"]), ["virtual_clock"])
        let plain = try ScenarioParser.parse(Data("""
        {"format": "experimently-scenario/1", "name": "p", "description": "d", "checks": ["single_flight"], "steps": [
          {"do": "evaluateFlag", "flag": "f", "user": "u"}]}
        """.utf8), file: "p.json")
        XCTAssertEqual(ScenarioRequirements.missing(plain, capabilities: ["evaluateFlag"]), [])
    }

    /// An `id` that is JSON but no `Int` is named so, not called invalid JSON (a sixty-sixth
    /// outside tester).
    func testAnIdThatIsNoIntIsNamed() {
        for (line, shown) in [(#"{"id":1.5,"result":{}}"#, "1.5"), (#"{"id":99999999999999999999999,"result":{}}"#, "1e+23")] {
            let why = DriverMessageDecoder.whyNotAReply(Data(line.utf8))
            XCTAssertTrue(why.hasPrefix("a value that is not Int at $.id: ") && why.contains(shown), why)
        }
    }

    /// A `hello` with an empty `sdk.name`, or an `sdk.version` that is no text, is refused naming
    /// the field; before, "sdk:  1" headed the report and a numeric version vanished (a
    /// sixty-sixth outside tester, F6). A missing or null version stays allowed.
    func testAHelloWithAnEmptyNameOrANumericVersionIsRefused() throws {
        func hello(_ sdk: String) throws -> DriverHello {
            let text = #"{"protocol":"experimently-driver/1","capabilities":[],"sdk":"# + sdk + "}"
            return try DriverHello(json: try JSONValue.parse(Data(text.utf8)).value)
        }
        for (sdk, named) in [(#"{"name":""}"#, #""sdk.name" is empty"#), (#"{"name":"go","version":1.2}"#, #""sdk.version" is 1.2, not a text"#)] {
            XCTAssertThrowsError(try hello(sdk)) { e in XCTAssertTrue("\(e)".contains(named), "\(e)") }
        }
        XCTAssertEqual(try hello(#"{"name":"go"}"#).sdkVersion, "")
        XCTAssertEqual(try hello(#"{"name":"go","version":null}"#).sdkVersion, "")
        XCTAssertEqual(try hello(#"{"name":"go","version":"1.2"}"#).sdkVersion, "1.2")
    }
}
