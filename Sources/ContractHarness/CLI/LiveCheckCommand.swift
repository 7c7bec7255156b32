#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import ExperimentlyMock

/// `contract-harness live-check`: the upstream live runner's ruleset row and SDK row
/// (``LiveContractCheck``) against a running backend, usually `contract-harness serve`.
///
/// Prints one line per row (`PASS`, `FAIL` or `SKIP`, the row, the detail) and exits 0 when no
/// row failed, 1 when one did, 64 on bad usage. Documented in `Documentation/CrossSDK.md`.
enum LiveCheckCommand {
    static let usage = """
    usage: contract-harness live-check [--url URL] [--api-key KEY] [--local-api-key KEY] [--flag KEY]
                                       [--sdk-command CMD --sdk-name NAME] [--timeout SECONDS]

    The upstream live runner's published rules, against a running backend (e.g. contract-harness serve):
      ruleset row  GET /api/v1/sdk/ruleset: 403 for --api-key, 200 and a well-formed ruleset (schema 1,
                   md5-mod100-v1, ETag = version, the flag local at 100%) for --local-api-key, 304 on the ETag
      sdk row      CMD runs through /bin/sh -c with EXPERIMENTLY_API_URL, EXPERIMENTLY_API_KEY,
                   CONTRACT_EXPERIMENT_KEY and CONTRACT_FLAG_KEY set; its last stdout line must be the smoke
                   line (sdk = NAME, variant control|treatment, boolean is_control, sticky, flag enabled,
                   track ok, fanout ok)
      --url, --api-key, --local-api-key default to EXPERIMENTLY_API_URL, EXPERIMENTLY_API_KEY and
      EXPERIMENTLY_LOCAL_API_KEY (the lines serve prints); the ruleset row is skipped without a local key.
      --flag KEY        the contract flag (default sdk_contract_flag); --timeout: seconds for CMD (default 120)
    exit status: 0 no row failed, 1 a row failed, 64 bad usage
    """

    struct Options {
        var url: String?
        var apiKey: String?
        var localKey: String?
        var flag = "sdk_contract_flag"
        var command: String?
        var sdkName: String?
        var timeout = 120.0
    }

    static func parse(_ arguments: [String], environment: [String: String]) throws -> Options {
        var o = Options()
        var cursor = HarnessCommand.ArgumentCursor(arguments)
        func value(_ flag: String) throws -> String {
            let v = try cursor.value(for: flag)
            guard !v.isEmpty else { throw HarnessCommand.UsageError("\(flag) needs a non-empty value") }
            return v
        }
        while let a = cursor.next() {
            switch a {
            case "--url": o.url = try value(a)
            case "--api-key": o.apiKey = try value(a)
            case "--local-api-key": o.localKey = try value(a)
            case "--flag": o.flag = try value(a)
            case "--sdk-command": o.command = try value(a)
            case "--sdk-name": o.sdkName = try value(a)
            case "--timeout":
                let v = try value(a)
                guard let t = Double(v), t > 0 else { throw HarnessCommand.UsageError("--timeout takes seconds > 0, not '\(v)'") }
                o.timeout = t
            case "--help", "-h": throw HarnessCommand.UsageError("")
            default: throw HarnessCommand.UsageError(a.hasPrefix("-") ? "live-check: unknown option '\(a)'" : "live-check: unexpected argument '\(a)'")
            }
        }
        o.url = o.url ?? environment["EXPERIMENTLY_API_URL"]
        o.apiKey = o.apiKey ?? environment["EXPERIMENTLY_API_KEY"]
        o.localKey = o.localKey ?? environment["EXPERIMENTLY_LOCAL_API_KEY"].flatMap { $0.isEmpty ? nil : $0 }
        guard let url = o.url, !url.isEmpty else { throw HarnessCommand.UsageError("live-check needs --url or EXPERIMENTLY_API_URL") }
        guard URL(string: url)?.scheme != nil else { throw HarnessCommand.UsageError("--url '\(url)' is not a URL such as http://127.0.0.1:8000") }
        guard o.apiKey?.isEmpty == false else { throw HarnessCommand.UsageError("live-check needs --api-key or EXPERIMENTLY_API_KEY") }
        if (o.command == nil) != (o.sdkName == nil) { throw HarnessCommand.UsageError("--sdk-command and --sdk-name go together") }
        return o
    }

    static func main(_ arguments: [String]) async -> Int32 {
        let options: Options
        do { options = try parse(arguments, environment: ProcessInfo.processInfo.environment) } catch let e as HarnessCommand.UsageError {
            if e.message.isEmpty { print(usage); return HarnessCommand.Exit.ok.rawValue }
            StandardStream.error(Data("contract-harness: \(e.message)\n\n\(usage)\n".utf8))
            return HarnessCommand.Exit.usage.rawValue
        } catch { return HarnessCommand.Exit.internalFault.rawValue }
        let url = options.url!, key = options.apiKey!
        var failed = false

        if let local = options.localKey {
            let row = await LiveContractCheck.rulesetRow(baseURL: url, plainKey: key, scopedKey: local, flagKey: options.flag)
            if row.problems.isEmpty { HarnessCommand.say("PASS ruleset: \(row.summary)") } else {
                failed = true
                HarnessCommand.say("FAIL ruleset: \(row.problems.joined(separator: "; "))")
            }
        } else {
            HarnessCommand.say("SKIP ruleset: no sdk:ruleset key (--local-api-key or EXPERIMENTLY_LOCAL_API_KEY)")
        }

        if let command = options.command, let name = options.sdkName {
            // The smoke reads its settings from the environment, as upstream's runner sets them.
            setenv("EXPERIMENTLY_API_URL", url, 1)
            setenv("EXPERIMENTLY_API_KEY", key, 1)
            if getenv("CONTRACT_EXPERIMENT_KEY") == nil { setenv("CONTRACT_EXPERIMENT_KEY", "sdk_contract_ab", 1) }
            if getenv("CONTRACT_FLAG_KEY") == nil { setenv("CONTRACT_FLAG_KEY", options.flag, 1) }
            do {
                let result = try VectorsSubprocess.run(command, input: Data(), timeout: options.timeout)
                let stdout = String(decoding: result.stdout, as: UTF8.self)
                let stderr = String(decoding: result.stderr, as: UTF8.self)
                switch result.termination {
                case .exited(0):
                    let problems = LiveContractCheck.smokeProblems(sdk: name, stdout: stdout)
                    if problems.isEmpty {
                        let line = stdout.split(whereSeparator: \.isNewline).last.map(String.init) ?? ""
                        let variant = (try? JSONValue.parse(Data(line.utf8)).value["assign"]?["variant_name"]?.stringValue) ?? nil
                        HarnessCommand.say("PASS sdk \(name): \(variant ?? "?") in \(String(format: "%.1f", result.seconds))s")
                    } else {
                        failed = true
                        HarnessCommand.say("FAIL sdk \(name): \(problems.joined(separator: "; "))")
                    }
                default:
                    failed = true
                    let tail = stderr.split(whereSeparator: \.isNewline).last.map(String.init)
                        ?? stdout.split(whereSeparator: \.isNewline).last.map(String.init) ?? "(no output)"
                    HarnessCommand.say("FAIL sdk \(name): \(describe(result.termination, timeout: options.timeout)): \(String(tail.prefix(300)))")
                }
            } catch {
                StandardStream.error(Data("contract-harness live-check: \(error)\n".utf8))
                return HarnessCommand.Exit.internalFault.rawValue
            }
        }
        return failed ? HarnessCommand.Exit.failed.rawValue : HarnessCommand.Exit.ok.rawValue
    }

    static func describe(_ t: VectorsSubprocess.Termination, timeout: Double) -> String {
        switch t {
        case .exited(let s): return "exit \(s)"
        case .signaled(let s): return "killed by signal \(s)"
        case .timedOut: return "timed out after \(timeout) s"
        case .outputTooLarge: return "printed more than 64 MiB"
        }
    }
}
