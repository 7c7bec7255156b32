#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import ExperimentlyMock

/// `contract-harness serve`: runs the mock backend over loopback TCP for other processes (another
/// SDK's contract smoke, its integration tests), until SIGINT or SIGTERM.
///
/// Prints `EXPERIMENTLY_API_URL=http://HOST:PORT`, `EXPERIMENTLY_ADMIN_URL=.../__admin`,
/// `EXPERIMENTLY_LOCAL_API_KEY=KEY` (when a key has the `sdk:ruleset` scope) and, last,
/// `EXPERIMENTLY_API_KEY=KEY` (one line each, flushed) once it accepts connections. Requests under
/// `/__admin/` go to the control API (``MockAdmin``). On SIGINT/SIGTERM it stops accepting, lets in-flight
/// responses finish, writes the journal (`--journal`) and exits 0. Exit 64 on bad usage or a
/// malformed fixtures/faults file, 70 when it cannot listen or write the journal.
/// Documented in `Documentation/CrossSDK.md`.
enum ServeCommand {
    /// The journal's format tag.
    static let journalFormat = "experimently-journal/1"

    static let usage = """
    usage: contract-harness serve [--port N] [--host ADDR] [--fixtures FILE] [--api-key KEY[:SCOPE,...]]... [--faults FILE] [--journal FILE] [--admin-token TOKEN]

    Runs the mock backend over loopback TCP until SIGINT or SIGTERM, then writes the journal and exits 0.
      --port N              TCP port (default 8000; 0 picks a free port, printed in the URL line)
      --host ADDR           IPv4 address to bind (default 127.0.0.1; any non-loopback address needs --admin-token)
      --fixtures FILE       backend fixtures as JSON (default: the reference sdk-contract set)
      --api-key KEY[:SCOPES] accept this API key too (repeatable); after the first ':' a comma-separated
                            scope list, e.g. --api-key srv-key:sdk:ruleset (the key itself cannot contain ':')
      --faults FILE         a JSON array of fault rules, applied in order
      --journal FILE        write the history (every request and response) as JSON here on exit
      --admin-token TOKEN   require 'X-Admin-Token: TOKEN' on the control API under /__admin/
    Prints EXPERIMENTLY_API_URL=..., EXPERIMENTLY_ADMIN_URL=..., EXPERIMENTLY_LOCAL_API_KEY=... (a key
    with the sdk:ruleset scope, when there is one) and EXPERIMENTLY_API_KEY=... (a key without it) once listening.
    """

    struct Options {
        var port: UInt16 = 8000
        var host = "127.0.0.1"
        var fixtures: String?
        /// `--api-key` values in order: the key and its scopes.
        var apiKeys: [APIKey] = []
        var faults: String?
        var journal: String?
        var adminToken: String?
    }

    /// Parses `KEY[:SCOPE[,SCOPE...]]`: the key is everything before the first `:`; scopes are
    /// split on `,`, trimmed, empty ones dropped (as upstream parses a key's scopes).
    static func parseAPIKey(_ text: String) throws -> APIKey {
        let key: Substring
        var scopes: [String] = []
        if let colon = text.firstIndex(of: ":") {
            key = text[..<colon]
            scopes = text[text.index(after: colon)...].split(separator: ",", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard !scopes.isEmpty else { throw HarnessCommand.UsageError("--api-key '\(text)': nothing after ':'; write KEY or KEY:SCOPE[,SCOPE...] (e.g. KEY:sdk:ruleset)") }
        } else {
            key = Substring(text)
        }
        guard !key.isEmpty else { throw HarnessCommand.UsageError("--api-key needs a non-empty key before ':' (KEY[:SCOPE,...])") }
        return APIKey(key: String(key), scopes: scopes)
    }

    struct Failure: Error {
        let exit: Int32
        let message: String
        init(status: HarnessCommand.Exit, message: String) { exit = status.rawValue; self.message = message }
    }

    static func parse(_ arguments: [String]) throws -> Options {
        var o = Options()
        var cursor = HarnessCommand.ArgumentCursor(arguments)
        func value(_ flag: String) throws -> String { try cursor.value(for: flag) }
        while let a = cursor.next() {
            switch a {
            case "--port":
                let v = try value(a)
                guard let p = UInt16(v) else { throw HarnessCommand.UsageError("--port takes a whole number from 0 to 65535, not '\(v)'") }
                o.port = p
            case "--host":
                let v = try value(a)
                // IPv4 dotted quad: the server binds IPv4 loopback-style addresses only.
                let parts = v.split(separator: ".", omittingEmptySubsequences: false)
                guard parts.count == 4, parts.allSatisfy({ UInt8($0) != nil }) else {
                    throw HarnessCommand.UsageError("--host takes an IPv4 address such as 127.0.0.1, not '\(v)'")
                }
                o.host = v
            case "--fixtures": o.fixtures = try value(a)
            case "--api-key":
                let v = try value(a)
                guard !v.isEmpty else { throw HarnessCommand.UsageError("--api-key needs a non-empty key") }
                o.apiKeys.append(try parseAPIKey(v))
            case "--admin-token":
                let v = try value(a)
                guard !v.isEmpty else { throw HarnessCommand.UsageError("--admin-token needs a non-empty token") }
                o.adminToken = v
            case "--faults": o.faults = try value(a)
            case "--journal": o.journal = try value(a)
            case "--help", "-h": throw HarnessCommand.UsageError("")
            default: throw HarnessCommand.UsageError(a.hasPrefix("-") ? "serve: unknown option '\(a)'" : "serve: unexpected argument '\(a)'")
            }
        }
        if !o.host.hasPrefix("127."), o.adminToken == nil {
            throw HarnessCommand.UsageError("--host \(o.host) is not loopback: the control API under /__admin/ would be reachable from other machines; pass --admin-token TOKEN too")
        }
        return o
    }

    /// Decodes a JSON file strictly, naming the file and the JSON path of the first problem.
    static func decode<T: Decodable>(_ type: T.Type, from path: String, what: String) throws -> T {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw Failure(status: .usage, message: "\(what) file \(path) cannot be read (\(error.localizedDescription))")
        }
        do { return try JSONDecoder().decode(T.self, from: data) } catch let error as DecodingError {
            throw Failure(status: .usage, message: "malformed \(what) file \(path): \(describe(error))")
        } catch {
            throw Failure(status: .usage, message: "malformed \(what) file \(path): \(error)")
        }
    }

    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [CodingKey]) -> String {
            "$" + keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
        }
        switch error {
        case .typeMismatch(let type, let c): return "at \(path(c.codingPath)): expected \(type): \(c.debugDescription)"
        case .valueNotFound(let type, let c): return "at \(path(c.codingPath)): expected \(type), found null"
        case .keyNotFound(let key, let c): return "at \(path(c.codingPath)): missing member \"\(key.stringValue)\""
        case .dataCorrupted(let c): return "at \(path(c.codingPath)): \(c.debugDescription)"
        @unknown default: return "\(error)"
        }
    }

    /// Waits for the first of SIGINT and SIGTERM through dispatch signal sources.
    final class SignalWaiter: @unchecked Sendable { // `fired` and `continuation` are guarded by `lock`
        private let lock = NSLock()
        private var fired: Int32?
        private var continuation: CheckedContinuation<Int32, Never>?
        private var sources: [any DispatchSourceSignal] = []

        init(_ signals: [Int32]) {
            let queue = DispatchQueue(label: "contract-harness.serve.signals")
            for s in signals {
                signal(s, SIG_IGN) // the dispatch source sees it; the default action (terminate) must not run
                let source = DispatchSource.makeSignalSource(signal: s, queue: queue)
                source.setEventHandler { [weak self] in self?.fire(s) }
                source.resume()
                sources.append(source)
            }
        }

        private func fire(_ s: Int32) {
            lock.lock()
            if fired == nil { fired = s }
            let c = continuation
            continuation = nil
            lock.unlock()
            c?.resume(returning: s)
        }

        /// The signal that arrived first (returns at once if one already did).
        func wait() async -> Int32 {
            await withCheckedContinuation { (c: CheckedContinuation<Int32, Never>) in
                lock.lock()
                if let s = fired { lock.unlock(); c.resume(returning: s); return }
                continuation = c
                lock.unlock()
            }
        }

        func cancel() { for s in sources { s.cancel() } }
    }

    static func main(_ arguments: [String]) async -> Int32 {
        let options: Options
        do { options = try parse(arguments) } catch let e as HarnessCommand.UsageError {
            if e.message.isEmpty { print(usage); return HarnessCommand.Exit.ok.rawValue }
            FileHandle.standardError.write(Data("contract-harness: \(e.message)\n\n\(usage)\n".utf8))
            return HarnessCommand.Exit.usage.rawValue
        } catch { return HarnessCommand.Exit.internalFault.rawValue }
        do {
            return try await serve(options)
        } catch let f as Failure {
            FileHandle.standardError.write(Data("contract-harness serve: \(f.message)\n".utf8))
            return f.exit
        } catch {
            FileHandle.standardError.write(Data("contract-harness serve: \(error)\n".utf8))
            return HarnessCommand.Exit.internalFault.rawValue
        }
    }

    static func serve(_ options: Options) async throws -> Int32 {
        var fixtures = Fixtures.sdkContract
        if let path = options.fixtures { fixtures = try decode(Fixtures.self, from: path, what: "fixtures") }
        for given in options.apiKeys {
            // Exact scalars: a key that is canonically equivalent but not identical is another key.
            if let i = fixtures.apiKeys.firstIndex(where: { Array($0.key.unicodeScalars) == Array(given.key.unicodeScalars) }) {
                fixtures.apiKeys[i].revoked = false
                fixtures.apiKeys[i].scopes = given.scopes
            } else {
                fixtures.apiKeys.append(given)
            }
        }
        let (key, localKey) = try printedKeys(options: options, fixtures: fixtures)
        let faults = try options.faults.map { try decode([FaultRule].self, from: $0, what: "faults") } ?? []

        // The journal hides every configured key (the fixtures' and --api-key) wherever a client
        // put it: the backend records each history entry redacted.
        let backend = MockBackend(fixtures: fixtures, redactor: SecretRedactor(secrets: fixtures.apiKeys.map(\.key)))
        for rule in faults { backend.addFault(rule) }
        let admin = MockAdmin(backend: backend, fixtures: fixtures, faults: faults, token: options.adminToken)
        if let path = options.journal {
            // Fail now, not after a whole session.
            do { try HarnessCommand.checkWritable(path, option: "--journal") } catch let e as HarnessCommand.UsageError {
                throw Failure(status: .usage, message: e.message)
            }
        }
        let server = MockHTTPServer(handler: admin, configuration: .init(host: options.host, port: options.port))
        let signals = SignalWaiter([SIGINT, SIGTERM])
        defer { signals.cancel() }
        let port: UInt16
        do { port = try server.start() } catch {
            throw Failure(status: .internalFault, message: "cannot listen on \(options.host):\(options.port): \(error)")
        }
        let url = "http://\(options.host):\(port)"
        HarnessCommand.say("EXPERIMENTLY_API_URL=\(url)")
        HarnessCommand.say("EXPERIMENTLY_ADMIN_URL=\(url)/__admin")
        if let localKey { HarnessCommand.say("EXPERIMENTLY_LOCAL_API_KEY=\(localKey)") }
        HarnessCommand.say("EXPERIMENTLY_API_KEY=\(key)")
        FileHandle.standardError.write(Data("contract-harness serve: mock backend at \(url) (\(fixtures.experiments.count) experiments, \(fixtures.flags.count) flags, \(faults.count) fault rules); SIGINT or SIGTERM stops it\n".utf8))

        let received = await signals.wait()
        await server.shutdown()
        let report = backend.shutdown()
        let name = received == SIGINT ? "SIGINT" : "SIGTERM"
        if let path = options.journal {
            do { try journal(backend: backend, report: report, url: url, signal: name).write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
                throw Failure(status: .internalFault, message: "cannot write the journal to \(path): \(error.localizedDescription)")
            }
        }
        let history = backend.history.count
        FileHandle.standardError.write(Data("contract-harness serve: stopped on \(name) after \(history) requests\(options.journal.map { "; journal written to \($0)" } ?? "")\n".utf8))
        return HarnessCommand.Exit.ok.rawValue
    }

    /// The keys to print: `EXPERIMENTLY_API_KEY` is the first `--api-key` without the
    /// `sdk:ruleset` scope, else the first `--api-key`, else the first valid fixture key without
    /// the scope, else any valid one; `EXPERIMENTLY_LOCAL_API_KEY` is the first `--api-key`, else
    /// fixture key, with the scope (nil when none). Throws when no key is valid.
    static func printedKeys(options: Options, fixtures: Fixtures) throws -> (key: String, local: String?) {
        let scope = APIKey.sdkRulesetScope
        let valid = fixtures.apiKeys.filter { !$0.revoked }
        guard let key = options.apiKeys.first(where: { !$0.hasScope(scope) })?.key ?? options.apiKeys.first?.key
                ?? valid.first(where: { !$0.hasScope(scope) })?.key ?? valid.first?.key else {
            throw Failure(status: .usage, message: "the fixtures have no API key that is not revoked; add one or pass --api-key KEY")
        }
        let local = options.apiKeys.first(where: { $0.hasScope(scope) })?.key ?? valid.first(where: { $0.hasScope(scope) })?.key
        return (key, local)
    }

    /// The journal: `{format, url, stopped_by, history: [request...], state: {assignments, exposures, events}, shutdown}`.
    static func journal(backend: MockBackend, report: ShutdownReport, url: String, signal: String) throws -> Data {
        struct Journal: Encodable {
            let format: String
            let url: String
            let stoppedBy: String
            let history: [HistoryEntry]
            let state: BackendStateSnapshot
            let shutdown: ShutdownReport
            enum CodingKeys: String, CodingKey { case format, url, stoppedBy = "stopped_by", history, state, shutdown }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(Verdict.iso(date))
        }
        // Entries are redacted as recorded; the state (stored events) and the shutdown report are
        // redacted here, on the encoded text.
        return backend.redactor.redact(try encoder.encode(Journal(format: journalFormat, url: url, stoppedBy: signal, history: backend.history,
                                                                  state: backend.state, shutdown: report)) + Data("\n".utf8))
    }
}
