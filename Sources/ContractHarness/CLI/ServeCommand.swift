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
    static let usage = """
    usage: contract-harness serve [--port N] [--host ADDR] [--fixtures FILE] [--api-key KEY[:SCOPE,...]]... [--faults FILE] [--journal FILE] [--journal-body-bytes N] [--admin-token TOKEN]

    Runs the mock backend over loopback TCP until SIGINT or SIGTERM, then writes the journal and exits 0.
      --port N              TCP port (default 8000; 0 picks a free port, printed in the URL line)
      --host ADDR           IPv4 address to bind (default 127.0.0.1; any non-loopback address needs --admin-token)
      --fixtures FILE       backend fixtures as JSON (default: the reference sdk-contract set)
      --api-key KEY[:SCOPES] accept this API key too (repeatable); after the first ':' a comma-separated
                            scope list, e.g. --api-key srv-key:sdk:ruleset (the key itself cannot contain ':')
      --faults FILE         a JSON array of fault rules, applied in order
      --journal FILE        write the history (every request and response) as JSON here on exit
      --journal-body-bytes N  journal bodies longer than N bytes as their first N bytes, size and MD5
                            (default 65536; up to 1048576, the body limit: then every body is whole)
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
        /// Bodies longer than this many bytes are journaled as their first bytes, size and MD5
        /// (`--journal-body-bytes`; default 65,536: a whole batch of 100 events fits).
        var journalBodyBytes = ServeCommand.defaultJournalBodyBytes
        var adminToken: String?
    }

    /// The default of `--journal-body-bytes`: 64 KiB. A request body kept only in part cannot be
    /// turned into a scenario step (`scenario --from-journal` names it), and at 4 KiB a full batch
    /// chunk or a large configuration was (an outside tester: a 130-event batch replayed as 30).
    static let defaultJournalBodyBytes = 65_536

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
                o.host = try checkHost(value(a)).host
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
            case "--journal-body-bytes":
                let v = try value(a)
                guard let n = Int(v), (0...(1 << 20)).contains(n) else {
                    throw HarnessCommand.UsageError("--journal-body-bytes takes a whole number of bytes from 0 to 1048576 (the body limit), not '\(v)'")
                }
                o.journalBodyBytes = n
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
        // JSONDecoder keeps one of two equal keys silently: refused, naming the path.
        if let duplicate = JSONDuplicateKey.first(in: data) {
            throw Failure(status: .usage, message: "malformed \(what) file \(path): \(duplicate); each key may appear once per object")
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

    /// Waits for the first of SIGINT and SIGTERM.
    ///
    /// A plain signal handler (installed synchronously by `init`, so a signal that arrives right
    /// after the URL lines is never lost: a dispatch signal source registers asynchronously and
    /// missed such early signals under load) writes the signal number to a self-pipe; one
    /// thread reads it and resumes the waiter.
    final class SignalWaiter: @unchecked Sendable { // `fired` and `continuation` are guarded by `lock`
        private let lock = NSLock()
        private var fired: Int32?
        private var continuation: CheckedContinuation<Int32, Never>?

        init(_ signals: [Int32]) {
            var fds: [Int32] = [-1, -1]
            if pipe(&fds) == 0 {
                serveSignalPipe = fds[1]
                let readFD = fds[0]
                let thread = Thread { [weak self] in
                    var byte: UInt8 = 0
                    while true {
                        let n = read(readFD, &byte, 1)
                        if n == 1 { self?.fire(Int32(byte)); return }
                        if n < 0 && errno == EINTR { continue }
                        return
                    }
                }
                thread.name = "contract-harness.serve.signals"
                thread.start()
            }
            for s in signals {
                signal(s) { received in
                    var byte = UInt8(truncatingIfNeeded: received)
                    _ = write(serveSignalPipe, &byte, 1) // async-signal-safe
                }
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

        /// Kept for the callers' `defer`: the handlers stay (a second signal only writes to the pipe).
        func cancel() {}
    }

    static func main(_ arguments: [String]) async -> Int32 {
        let options: Options
        do { options = try parse(arguments) } catch let e as HarnessCommand.UsageError {
            if e.message.isEmpty { print(usage); return HarnessCommand.Exit.ok.rawValue }
            StandardStream.error(Data("contract-harness: \(e.message)\n\n\(usage)\n".utf8))
            return HarnessCommand.Exit.usage.rawValue
        } catch { return HarnessCommand.Exit.internalFault.rawValue }
        do {
            return try await serve(options)
        } catch let f as Failure {
            StandardStream.error(Data("contract-harness serve: \(f.message)\n".utf8))
            return f.exit
        } catch {
            StandardStream.error(Data("contract-harness serve: \(error)\n".utf8))
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
        if let warning = try? checkHost(options.host).warning {
            StandardStream.error(Data("contract-harness serve: \(warning)\n".utf8))
        }
        MockHeapTuning.mapLargeAllocationsSeparately() // large bodies are unmapped when freed (bounded RSS)
        let server = MockHTTPServer(handler: admin, configuration: .init(host: options.host, port: options.port))
        let signals = SignalWaiter([SIGINT, SIGTERM])
        defer { signals.cancel() }
        let port: UInt16
        do { port = try server.start() } catch let error as MockHTTPServerError where error.errorNumber == EADDRNOTAVAIL {
            throw Failure(status: .usage, message: "--host \(options.host) is not an address of this machine (\(error)); use 127.0.0.1, 0.0.0.0 or one of its interface addresses")
        } catch {
            throw Failure(status: .internalFault, message: "cannot listen on \(options.host):\(options.port): \(error)")
        }
        let url = "http://\(options.host):\(port)"
        // The journal is streamed as requests happen; memory keeps only a window (HistoryRetention).
        let journal: MockJournal?
        if let path = options.journal {
            do { journal = try MockJournal(path: path, url: url, secrets: fixtures.apiKeys.map(\.key)) } catch {
                await server.shutdown()
                throw Failure(status: .internalFault, message: "cannot write the journal to \(path): \(error.localizedDescription)")
            }
        } else {
            journal = nil
        }
        journal?.onWriteFailure { StandardStream.error(Data("contract-harness serve: \($0)\n".utf8)) }
        // Always streamed, so memory stays bounded also without --journal (then nothing is kept).
        backend.streamHistory(HistoryRetention(bodyPrefixBytes: options.journalBodyBytes), to: { journal?.append($0) })
        HarnessCommand.say("EXPERIMENTLY_API_URL=\(url)")
        HarnessCommand.say("EXPERIMENTLY_ADMIN_URL=\(url)/__admin")
        if let localKey { HarnessCommand.say("EXPERIMENTLY_LOCAL_API_KEY=\(localKey)") }
        HarnessCommand.say("EXPERIMENTLY_API_KEY=\(key)")
        StandardStream.error(Data("contract-harness serve: mock backend at \(url) (\(fixtures.experiments.count) experiments, \(fixtures.flags.count) flags, \(faults.count) fault rules); SIGINT or SIGTERM stops it\n".utf8))

        let received = await signals.wait()
        // Stop accepting, answer what already arrived (within the grace period), then fail the
        // holds nobody released; their outcomes reach the journal before it is closed.
        let report = await stop(server, backend)
        await waitForInFlight(backend, seconds: 2)
        let name = received == SIGINT ? "SIGINT" : "SIGTERM"
        if let journal, let path = options.journal {
            let pending = backend.finishHistoryStream()
            do {
                try journal.finish(stoppedBy: name, pending: pending, state: backend.state, totals: backend.stateTotals, shutdown: report)
            } catch {
                throw Failure(status: .internalFault, message: "cannot write the journal to \(path): \(error.localizedDescription)")
            }
        }
        let history = backend.requestCount
        let peak = peakResidentMegabytes().map { "; peak resident memory \($0) MB" } ?? ""
        StandardStream.error(Data("contract-harness serve: stopped on \(name) after \(history) requests\(options.journal.map { "; journal written to \($0)" } ?? "")\(peak)\n".utf8))
        return HarnessCommand.Exit.ok.rawValue
    }

    /// The keys to print: `EXPERIMENTLY_API_KEY` is the first `--api-key` without the
    /// `sdk:ruleset` scope, else the first valid fixture key without the scope, else the first
    /// `--api-key`, else any valid one; `EXPERIMENTLY_LOCAL_API_KEY` is the first `--api-key`, else
    /// fixture key, with the scope (nil when none). Throws when no key is valid.
    static func printedKeys(options: Options, fixtures: Fixtures) throws -> (key: String, local: String?) {
        let scope = APIKey.sdkRulesetScope
        let valid = fixtures.apiKeys.filter { !$0.revoked }
        // An unscoped key first (the upstream live runner expects EXPERIMENTLY_API_KEY to get 403
        // on the ruleset): given with --api-key, else from the fixtures; a scoped one only when
        // there is no other.
        guard let key = options.apiKeys.first(where: { !$0.hasScope(scope) })?.key ?? valid.first(where: { !$0.hasScope(scope) })?.key
                ?? options.apiKeys.first?.key ?? valid.first?.key else {
            throw Failure(status: .usage, message: "the fixtures have no API key that is not revoked; add one or pass --api-key KEY")
        }
        let local = options.apiKeys.first(where: { $0.hasScope(scope) })?.key ?? valid.first(where: { $0.hasScope(scope) })?.key
        return (key, local)
    }

    /// The process's peak resident set size in MB (`VmHWM` of `/proc/self/status`), or nil where
    /// there is no procfs.
    static func peakResidentMegabytes() -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kB = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return nil }
        return (kB + 1023) / 1024
    }

    /// Stops serving: the server stops accepting and answers every request that already
    /// arrived; once only held requests remain in the backend (nobody can release them any
    /// more), the backend shuts down, which drops them. Returns the backend's shutdown report.
    static func stop(_ server: MockHTTPServer, _ backend: MockBackend) async -> ShutdownReport {
        let stopped = StopFlag()
        Task {
            await server.shutdown()
            stopped.set()
        }
        var report: ShutdownReport?
        while !stopped.isSet {
            let inFlight = backend.inFlightCount
            // Only once the server's loop has begun shutting down: a hold dropped before that
            // would close its connection as in normal service, losing what is pipelined behind it.
            if report == nil && server.shutdownBegun && inFlight > 0 && inFlight == backend.heldRequests.count { report = backend.shutdown() }
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        return report ?? backend.shutdown()
    }

    /// A flag set once, read from any thread (guarded by `lock`).
    final class StopFlag: @unchecked Sendable {
        private let lock = NSLock()
        private var value = false
        func set() { lock.withLock { value = true } }
        var isSet: Bool { lock.withLock { value } }
    }

    /// Waits (at most `seconds`) until no request is inside the backend: after `shutdown()` the
    /// failed holds record their outcome on the cooperative pool.
    static func waitForInFlight(_ backend: MockBackend, seconds: Double) async {
        let end = Date(timeIntervalSinceNow: seconds)
        while backend.inFlightCount > 0 && Date() < end {
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
    }
}

/// The write end of `ServeCommand.SignalWaiter`'s self-pipe; set once before the signal handlers
/// are installed, then only read (by the handlers).
nonisolated(unsafe) private var serveSignalPipe: Int32 = -1
