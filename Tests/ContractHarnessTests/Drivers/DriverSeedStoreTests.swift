import XCTest
@testable import ContractHarness
import ExperimentlyMock

/// `seed_store` in `experimently-driver/1` (Documentation/DriverProtocol.md): the wire message,
/// malformed shapes refused naming the JSON path (harness side, `experimently-driver` and the
/// Python example), and `scenarios/field-offline-store-from-earlier-sdk-version.json` out of
/// process: passing through both drivers, failing a client that ignores the earlier entries.
final class DriverSeedStoreTests: XCTestCase {
    static let line = #"{"entries":[{"key":"sdk_contract_ab","kind":"experiment","user":"user-2","value":{"experiment_key":"sdk_contract_ab","is_control":false,"user_id":"user-2","variant_name":"treatment"}}],"id":7,"store":"s1.main","type":"seed_store"}"#

    static let scenarioFile = Repository.root.appendingPathComponent("scenarios/field-offline-store-from-earlier-sdk-version.json").path

    func testTheMessageRoundTripsAndItsEntriesDecode() throws {
        let request = try DriverMessageDecoder().request(Data(Self.line.utf8))
        XCTAssertEqual(request.type, .seedStore)
        XCTAssertEqual(String(decoding: try DriverMessageEncoder().line(request), as: UTF8.self), Self.line + "\n")
        let (store, entries) = try DriverSeedEntry.request(request)
        XCTAssertEqual(store, "s1.main")
        XCTAssertEqual(entries.count, 1)
        XCTAssertEqual(entries[0].kind, "experiment")
        XCTAssertEqual(entries[0].user, "user-2")
        XCTAssertEqual(entries[0].key, "sdk_contract_ab")
        XCTAssertNil(entries[0].value["assigned"], "the entry is kept exactly as given")
        XCTAssertEqual(entries[0].json, request.entries?.arrayValue?.first)
        XCTAssertTrue(DriverWire.capabilityNames.contains("seed_store"))
    }

    /// Each malformed shape is refused with the JSON path of what is wrong.
    static let malformed: [(String, String)] = [
        (#"{"id":1,"type":"seed_store","entries":[]}"#, "at $.store:"),
        (#"{"id":1,"type":"seed_store","store":"","entries":[]}"#, "at $.store:"),
        (#"{"id":1,"type":"seed_store","store":"s1.main"}"#, "at $.entries:"),
        (#"{"id":1,"type":"seed_store","store":"s1.main","entries":{}}"#, "at $.entries:"),
        (#"{"id":1,"type":"seed_store","store":"s1.main","entries":[]}"#, "at $.entries:"),
        (#"{"id":1,"type":"seed_store","store":"s1.main","entries":[{"kind":"flag","user":"u","key":"f","value":{}},"x"]}"#, "at $.entries[1]:"),
        (#"{"id":1,"type":"seed_store","store":"s1.main","entries":[{"kind":"flags","user":"u","key":"f","value":{}}]}"#, "at $.entries[0].kind:"),
        (#"{"id":1,"type":"seed_store","store":"s1.main","entries":[{"kind":"flag","key":"f","value":{}}]}"#, "at $.entries[0].user:"),
        (#"{"id":1,"type":"seed_store","store":"s1.main","entries":[{"kind":"flag","user":"u","key":3,"value":{}}]}"#, "at $.entries[0].key:"),
        (#"{"id":1,"type":"seed_store","store":"s1.main","entries":[{"kind":"experiment","user":"u","key":"x","value":[1]}]}"#, "at $.entries[0].value:"),
        (#"{"id":1,"type":"seed_store","store":"s1.main","entries":[{"kind":"experiment","user":"u","key":"x"}]}"#, "at $.entries[0].value:"),
    ]

    func testMalformedShapesAreRefusedNamingTheJSONPath() throws {
        for (line, path) in Self.malformed {
            let request = try DriverMessageDecoder().request(Data(line.utf8))
            XCTAssertThrowsError(try DriverSeedEntry.request(request), line) { error in
                XCTAssertTrue("\(error)".contains(path), "\(line): \(error)")
                XCTAssertTrue("\(error)".hasPrefix("seed_store: "), "\(error)")
            }
        }
    }

    /// Both shipped adapters answer each malformed `seed_store` with an `error` reply naming the
    /// path (and a good one with `{"seeded": 1}`); a request that is not a request at all but has
    /// an id gets an error reply too, so the harness is never left waiting.
    func testTheShippedAdaptersRefuseMalformedSeedStoreNamingThePath() throws {
        let swiftDriver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: swiftDriver), "experimently-driver not built at \(swiftDriver)")
        let python = Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path
        let create = #"{"client":"s1.main","id":2,"now":1700000000,"scope":"s1","settings":{"api_key":"k","base_url":"http://127.0.0.1:9","cache_size":10,"cache_ttl":300,"offline_fallback":true,"timeout":10},"store":"s1.main","type":"create_client"}"#
        for command in [[swiftDriver], ["/usr/bin/env", "python3", python]] {
            var lines = [#"{"id":1,"protocol":"experimently-driver/1","type":"hello"}"#, create]
            for (i, (line, _)) in Self.malformed.enumerated() {
                lines.append(line.replacingOccurrences(of: #""id":1,"#, with: "\"id\":\(100 + i),"))
            }
            lines.append(Self.line)
            lines.append(#"{"id":300,"type":"no_such_request"}"#)
            lines.append(#"{"id":400,"type":"shutdown"}"#)
            let replies = try Self.converse(command, lines)
            let hello = try DriverHello(json: XCTUnwrap(replies[1]?.result))
            XCTAssertTrue(hello.capabilities.contains("seed_store"), "\(command): \(hello.capabilities)")
            for (i, (line, path)) in Self.malformed.enumerated() {
                let error = replies[100 + i]?.error ?? "no error reply"
                XCTAssertTrue(error.contains(path), "\(command) \(line): \(error)")
            }
            XCTAssertEqual(replies[7]?.result, .object(["seeded": .number(1)]), "\(command)")
            XCTAssertNotNil(replies[300]?.error, "\(command): an unknown request type gets an error reply")
            XCTAssertNotNil(replies[400]?.result, "\(command)")
        }
    }

    /// Writes `lines` to `command`'s standard input, reads its replies to the end; by id.
    static func converse(_ command: [String], _ lines: [String]) throws -> [Int: DriverReply] {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: command[0])
        p.arguments = Array(command.dropFirst())
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        p.standardError = FileHandle.nullDevice
        try p.run()
        input.fileHandleForWriting.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        var replies: [Int: DriverReply] = [:]
        for line in data.split(separator: 0x0A) {
            let reply = try DriverMessageDecoder().reply(Data(line))
            replies[reply.id] = reply
        }
        return replies
    }

    func scenario() throws -> Scenario {
        try ScenarioParser.parse(Data(contentsOf: URL(fileURLWithPath: Self.scenarioFile)), file: Self.scenarioFile)
    }

    /// The scenario through `experimently-driver` and through the Python example: passed.
    func testTheEarlierVersionScenarioPassesThroughBothDrivers() async throws {
        let swiftDriver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: swiftDriver), "experimently-driver not built at \(swiftDriver)")
        let python = Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path
        for command in ["'\(swiftDriver)'", "python3 '\(python)'"] {
            let driver = try await ProcessSDKDriver.launch(command: command)
            XCTAssertTrue(driver.capabilities.contains("seed_store"), command)
            let result = await ScenarioRunner(driver: driver).run(try scenario())
            await driver.shutdown()
            XCTAssertEqual(result.status, .passed, "\(command): \(result.firstFailure?.message ?? result.reason ?? "") \(result.adapterStderr)")
        }
    }

    /// The command line of the issue: `contract-harness run --sdk-command experimently-driver
    /// scenarios/field-offline-store-from-earlier-sdk-version.json` passes (exit 0, `PASS`).
    func testRunSDKCommandPassesTheScenarioThroughTheBinary() throws {
        let swiftDriver = HarnessCLITests.binary.deletingLastPathComponent().appendingPathComponent("experimently-driver").path
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path)
                          && FileManager.default.isExecutableFile(atPath: swiftDriver), "contract-harness or experimently-driver not built")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("seed-store-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try HarnessProcess.run(["run", "--sdk-command", swiftDriver, Self.scenarioFile, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(r.status, 0, r.out)
        XCTAssertTrue(r.out.contains("PASS  field-offline-store-from-earlier-sdk-version"), r.out)
        XCTAssertTrue(r.out.contains("1 passed, 0 failed"), r.out)
    }

    /// A client that ignores what an earlier version persisted (the Python example with
    /// `strict-offline-entries`) fails the scenario out of process; an adapter without the
    /// capability gets it skipped, naming `seed_store`.
    func testAClientIgnoringEarlierEntriesFailsAndOneWithoutTheCapabilitySkips() async throws {
        let python = Repository.root.appendingPathComponent("Examples/python-sdk/driver.py").path
        let broken = try await ProcessSDKDriver.launch(command: "EXPERIMENTLY_EXAMPLE_DEFECT=strict-offline-entries python3 '\(python)'")
        let failed = await ScenarioRunner(driver: broken).run(try scenario())
        await broken.shutdown()
        XCTAssertEqual(failed.status, .failed, "the lost offline store went unnoticed")

        let script = FileManager.default.temporaryDirectory.appendingPathComponent("no-seed-adapter-\(getpid()).sh")
        try """
        exec python3 -c '
        import json, sys
        sys.path.insert(0, "\((python as NSString).deletingLastPathComponent)")
        import driver
        driver.CAPABILITIES = [c for c in driver.CAPABILITIES if c != "seed_store"]
        sys.exit(driver.main())
        '
        """.write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        let lacking = try await ProcessSDKDriver.launch(command: "sh '\(script.path)'")
        XCTAssertFalse(lacking.capabilities.contains("seed_store"))
        XCTAssertEqual(ScenarioRequirements.missing(try scenario(), capabilities: lacking.capabilities), ["seed_store"])
        let skipped = await ScenarioRunner(driver: lacking).run(try scenario())
        await lacking.shutdown()
        XCTAssertEqual(skipped.status, .skipped)
        XCTAssertTrue(skipped.reason?.contains("seed_store") == true, skipped.reason ?? "")
    }

    /// Documentation/DriverProtocol.md against the wire types: every transcript line decodes as a
    /// request (`->`) or reply (`<-`) and encodes back byte for byte; the message table names
    /// exactly the request types `DriverRequest.Kind` has; the `seed_store` example decodes and its
    /// entries check.
    func testTheProtocolDocumentMatchesTheWireTypes() throws {
        let doc = try String(contentsOf: Repository.root.appendingPathComponent("Documentation/DriverProtocol.md"), encoding: .utf8)
        let lines = doc.components(separatedBy: "\n")
        let decoder = DriverMessageDecoder(), encoder = DriverMessageEncoder()
        var requests = 0, replies = 0
        for line in lines {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("-> ") {
                let text = String(trimmed.dropFirst(3))
                let request = try decoder.request(Data(text.utf8))
                XCTAssertEqual(String(decoding: try encoder.line(request), as: UTF8.self), text + "\n")
                if request.type == .seedStore { XCTAssertNoThrow(try DriverSeedEntry.request(request), text) }
                if request.type == .perform { XCTAssertNoThrow(try DriverOperation.operation(request.operation ?? .null), text) }
                requests += 1
            } else if trimmed.hasPrefix("<- ") {
                let text = String(trimmed.dropFirst(3))
                let reply = try decoder.reply(Data(text.utf8))
                XCTAssertEqual(String(decoding: try encoder.line(reply), as: UTF8.self), text + "\n")
                if reply.id == 1 { XCTAssertNoThrow(try DriverHello(json: reply.result ?? .null), text) }
                replies += 1
            }
        }
        XCTAssertGreaterThan(requests, 8)
        XCTAssertGreaterThan(replies, 8)
        // The message table: from its header row to the first line that is not a row.
        let header = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("| `type` |") })
        let rows = lines[(header + 2)...].prefix { $0.hasPrefix("| `") }
        let tableTypes = rows.map { row in String(row.dropFirst(3).prefix { $0 != "`" }) }
        XCTAssertEqual(Set(tableTypes), Set(DriverRequest.Kind.allCases.map(\.rawValue)), "the message table and DriverRequest.Kind differ")
        // The indented seed_store example (several lines) decodes and checks.
        let start = try XCTUnwrap(lines.firstIndex { $0.hasPrefix("    {\"id\": 7, \"type\": \"seed_store\"") })
        let example = lines[start...].prefix { $0.hasPrefix("    ") }.joined(separator: " ")
        XCTAssertNoThrow(try DriverSeedEntry.request(try decoder.request(Data(example.utf8))), example)
    }
}
