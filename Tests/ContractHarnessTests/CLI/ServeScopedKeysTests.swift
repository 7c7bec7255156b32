import XCTest
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import ContractHarness
import ExperimentlyMock

/// `serve` with scoped keys, judged by our own check written from the upstream live runner's
/// published rules (`LiveContractCheck`, `contract-harness live-check`): both rows pass against
/// serve, and each fails when what it checks is broken. Also: the key options, the admin-token
/// rule for non-loopback hosts, and the control API's Python example from CrossSDK.md, run as
/// written.
final class ServeScopedKeysTests: XCTestCase {
    var dir: URL!

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: HarnessCLITests.binary.path), "contract-harness not built at \(HarnessCLITests.binary.path)")
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("serve-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: dir) }

    /// The `NAME=value` lines serve printed.
    private func printed(_ serve: ServeProcess) -> [String: String] {
        var out: [String: String] = [:]
        for line in serve.stdoutText.split(separator: "\n") {
            guard let eq = line.firstIndex(of: "=") else { continue }
            out[String(line[..<eq])] = String(line[line.index(after: eq)...])
        }
        return out
    }

    func testScopedKeysRulesetRowPassesAndFailsWhenBroken() async throws {
        let serve = try ServeProcess(["--api-key", "ci-key", "--api-key", "ci-server-key:sdk:ruleset"], directory: dir)
        defer { _ = serve.stop() }
        let lines = printed(serve)
        XCTAssertEqual(lines["EXPERIMENTLY_API_KEY"], "ci-key")
        XCTAssertEqual(lines["EXPERIMENTLY_LOCAL_API_KEY"], "ci-server-key")
        XCTAssertEqual(lines["EXPERIMENTLY_ADMIN_URL"], serve.url + "/__admin")
        XCTAssertTrue(serve.stdoutText.hasSuffix("EXPERIMENTLY_API_KEY=ci-key\n"), "the API key line comes last: \(serve.stdoutText)")

        let pass = await LiveContractCheck.rulesetRow(baseURL: serve.url, plainKey: "ci-key", scopedKey: "ci-server-key")
        XCTAssertEqual(pass.problems, [])
        XCTAssertEqual(pass.summary, "403 unscoped, 200 scoped (1 flags), 304 on ETag")
        // The check can fail: keys swapped (the plain key is not refused, the scoped one is).
        let swapped = await LiveContractCheck.rulesetRow(baseURL: serve.url, plainKey: "ci-server-key", scopedKey: "ci-key")
        XCTAssertEqual(swapped.problems, ["the unscoped key got 200 from /api/v1/sdk/ruleset, expected 403",
                                          "the sdk:ruleset key got 403 from /api/v1/sdk/ruleset, expected 200"])
        // ... and a ruleset without the contract flag.
        let missing = await LiveContractCheck.rulesetRow(baseURL: serve.url, plainKey: "ci-key", scopedKey: "ci-server-key", flagKey: "other_flag")
        XCTAssertEqual(missing.problems, ["flag 'other_flag' is absent, expected active, local, rollout 100"])
    }

    func testLiveCheckCommandBothRowsAgainstServe() throws {
        let smoke = ContractSmokeTests.smokeBinary
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: smoke.path), "contract-smoke not built")
        let serve = try ServeProcess([], directory: dir)
        defer { _ = serve.stop() }
        let lines = printed(serve)
        let base = ["live-check", "--url", serve.url, "--api-key", lines["EXPERIMENTLY_API_KEY"]!, "--local-api-key", lines["EXPERIMENTLY_LOCAL_API_KEY"]!]
        let ok = try BoundedRun.run(HarnessCLITests.binary, base + ["--sdk-command", "'\(smoke.path)'", "--sdk-name", "ios"], directory: dir, timeout: 120)
        XCTAssertEqual(ok.status, 0, ok.out + ok.err)
        XCTAssertTrue(ok.out.hasPrefix("PASS ruleset: 403 unscoped, 200 scoped (1 flags), 304 on ETag\nPASS sdk ios: "), ok.out)
        // A broken SDK: its smoke line is not sticky and has the wrong name.
        let broken = #"echo '{"sdk":"ios","assign":{"variant_name":"control","is_control":true,"sticky":false},"flag":{"enabled":true},"track":{"ok":true},"fanout":{"ok":true}}'"#
        let bad = try BoundedRun.run(HarnessCLITests.binary, base + ["--sdk-command", broken, "--sdk-name", "python"], directory: dir, timeout: 60)
        XCTAssertEqual(bad.status, 1, bad.out + bad.err)
        XCTAssertTrue(bad.out.contains(#"FAIL sdk python: sdk field is "ios", expected "python"; assignment was not sticky"#), bad.out)
        let crash = try BoundedRun.run(HarnessCLITests.binary, base + ["--sdk-command", "echo boom >&2; exit 3", "--sdk-name", "x"], directory: dir, timeout: 60)
        XCTAssertEqual(crash.status, 1)
        XCTAssertTrue(crash.out.contains("FAIL sdk x: exit 3: boom"), crash.out)
        let usage = try BoundedRun.run(HarnessCLITests.binary, ["live-check", "--url", serve.url, "--api-key", "k", "--sdk-command", "true"], directory: dir, timeout: 30)
        XCTAssertEqual(usage.status, 64)
        XCTAssertTrue(usage.err.contains("--sdk-command and --sdk-name go together"), usage.err)
    }

    /// `--api-key k:sdk:ruleset` alone: the printed plain key is still an unscoped one (the live
    /// runner's ruleset row needs a key that gets 403), the scoped key is the local one.
    func testAScopedKeyAloneLeavesAnUnscopedKeyToPrint() throws {
        let options = try ServeCommand.parse(["--api-key", "k:sdk:ruleset"])
        var fixtures = Fixtures.sdkContract
        fixtures.apiKeys += options.apiKeys
        let printed = try ServeCommand.printedKeys(options: options, fixtures: fixtures)
        XCTAssertEqual(printed.key, Fixtures.sdkContractAPIKey)
        XCTAssertEqual(printed.local, "k")
        let plain = try ServeCommand.printedKeys(options: try ServeCommand.parse(["--api-key", "ci-key", "--api-key", "srv:sdk:ruleset"]), fixtures: fixtures)
        XCTAssertEqual(plain.key, "ci-key")
        XCTAssertEqual(plain.local, "srv")
    }

    func testKeyOptionErrorsAndNonLoopbackHostNeedsAdminToken() throws {
        let noScope = try BoundedRun.run(HarnessCLITests.binary, ["serve", "--port", "0", "--api-key", "k:"], directory: dir, timeout: 30)
        XCTAssertEqual(noScope.status, 64)
        XCTAssertTrue(noScope.err.contains("--api-key 'k:': nothing after ':'"), noScope.err)
        let noKey = try BoundedRun.run(HarnessCLITests.binary, ["serve", "--port", "0", "--api-key", ":sdk:ruleset"], directory: dir, timeout: 30)
        XCTAssertEqual(noKey.status, 64)
        let open = try BoundedRun.run(HarnessCLITests.binary, ["serve", "--port", "0", "--host", "0.0.0.0"], directory: dir, timeout: 30)
        XCTAssertEqual(open.status, 64)
        XCTAssertTrue(open.err.contains("--host 0.0.0.0 is not loopback"), open.err)
        XCTAssertEqual(try ServeCommand.parseAPIKey("srv:sdk:ruleset, other ,"), APIKey(key: "srv", scopes: ["sdk:ruleset", "other"]))
    }

    func testAdminPythonExampleFromCrossSDKRunsAsWritten() throws {
        let python = ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let interpreter = try XCTUnwrap(python, "python3 is not installed (.ci/run installs it)")
        let doc = try String(contentsOf: Repository.root.appendingPathComponent("Documentation/CrossSDK.md"), encoding: .utf8)
        let marker = try XCTUnwrap(doc.range(of: "<!-- tested: admin-hold-release -->\n```python\n"), "CrossSDK.md lost the tested example's marker")
        let rest = doc[marker.upperBound...]
        let end = try XCTUnwrap(rest.range(of: "\n```\n"))
        let script = dir.appendingPathComponent("hold_release.py")
        try Data((String(rest[..<end.lowerBound]) + "\n").utf8).write(to: script)

        let serve = try ServeProcess([], directory: dir)
        defer { _ = serve.stop() }
        var environment = ProcessInfo.processInfo.environment
        for (name, value) in printed(serve) { environment[name] = value }
        let run = try BoundedRun.run(URL(fileURLWithPath: interpreter), [script.path], environment: environment, directory: dir, timeout: 60)
        XCTAssertEqual(run.status, 0, run.out + run.err)
        XCTAssertEqual(run.out, "[(1, 503), (2, 200)]\nreleased in reverse order: treatment then 503\n", run.err)
    }
}
