import Foundation
import ExperimentlyMock

/// The scenario's mock backend over loopback TCP for out-of-process drivers: one `MockHTTPServer`
/// per client on an ephemeral port of 127.0.0.1, all serving the same `MockBackend` (same fault
/// script, holds, releases and clock). The port a request arrives on names its client: its
/// `Host` header is rewritten to the client's in-process origin before the backend sees it, so
/// attribution, history and checks are the same as in process.
final class LoopbackListeners: Sendable {
    private let servers: [String: MockHTTPServer]
    /// Relaunched clients and the client whose listener each uses (`Scenario.originOwners`).
    private let origins: [ExactKey: String]
    /// Requests the listeners handed to the backend that it has recorded, and what to call
    /// then (`onRecorded`: the recorder's poke, so quiescence is checked again).
    private let recorded = HarnessLocked<(count: Int, then: (@Sendable () -> Void)?)>((0, nil))

    /// The request size limits of an adapter's listeners: far above `serve`'s (16 KiB of head,
    /// 1 MiB of body), so that what a scenario can ask of an SDK reaches the backend model as
    /// in process (a user id of 1,500 emoji is 18 KiB of query: the model answers 422 as
    /// CONTRACT.md section 2 says, where the default head limit answered 431 before the model
    /// saw it and history had no request; a sixth outside tester). 4 MiB of head, 64 MiB of body.
    static let limits = MockHTTPParserLimits(maxHeaderBytes: 4 << 20, maxBodyBytes: 64 << 20)

    /// Starts one listener per client in `clients`.
    ///
    /// - Parameters:
    ///   - origins: relaunched clients (not in `clients`) and the client whose listener each
    ///     uses: a relaunch talks to the origin its first launch did.
    ///   - canonicalHost: the `Host` value (`host:port`) the in-process transport would send for
    ///     a client.
    ///   - keepAlive: whether a connection carries more than one request
    ///     (`MockHTTPServer.Configuration.keepAlive`).
    /// - Throws: `MockHTTPServerError` when a socket cannot be bound (those started are shut down).
    init(backend: MockBackend, clients: [String], origins: [ExactKey: String] = [:], keepAlive: Bool = true,
         canonicalHost: (String) -> String) throws {
        var servers: [String: MockHTTPServer] = [:]
        let recorded = self.recorded
        let counted: @Sendable () -> Void = {
            let then = recorded.withLock { r -> (@Sendable () -> Void)? in r.count += 1; return r.then }
            then?()
        }
        do {
            for client in clients {
                let handler = HostRewriter(backend: backend, host: canonicalHost(client), recorded: counted)
                let server = MockHTTPServer(handler: handler, configuration: .init(shutdownGracePeriod: 1, limits: Self.limits, keepAlive: keepAlive))
                try server.start()
                servers[client] = server
            }
        } catch {
            servers.values.forEach { $0.shutdown() }
            throw error
        }
        self.servers = servers
        self.origins = origins
    }

    /// A scenario that could not start still frees its ports.
    deinit {
        for server in servers.values { server.shutdown() }
    }

    /// The origin (`http://127.0.0.1:PORT`) of `client`'s listener.
    func baseURL(client: String) -> String? {
        servers[origins[ExactKey(client)] ?? client]?.baseURL?.absoluteString
    }

    /// The clients whose listener refused a request at the HTTP level (a malformed or oversized
    /// head or body: 400, 413, 431), which never reached the backend or its history.
    var refusedAtTransport: [String] {
        servers.filter { $0.value.statistics.protocolErrors > 0 }.map(\.key)
    }

    /// Calls `poke` whenever a request the listeners received is recorded.
    func onRecorded(_ poke: @escaping @Sendable () -> Void) {
        recorded.withLock { $0.then = poke }
    }

    /// Whether every request an adapter has written to the listeners is in the backend's
    /// history: no listener holds bytes it has not read or a connection not accepted
    /// (`MockHTTPServer.transportIdle`), and each request they handed on was recorded. Out of
    /// process, quiescence needs it: an adapter answers `settle` once its SDK wrote a request,
    /// which the mock may not have read yet (a seventeenth outside tester: an SDK that sends its
    /// own request after `clearOfflineCache` was taken to have joined an older one, 4 of 10 runs).
    var transportIdle: Bool {
        let handed = servers.values.reduce(0) { $0 + $1.statistics.handledRequests }
        guard servers.values.allSatisfy(\.transportIdle) else { return false }
        return recorded.withLock { $0.count } >= handed
    }

    /// Stops every listener (in-flight answers get the server's grace period).
    func shutdown() async {
        for server in servers.values { await server.shutdown() }
    }

    private struct HostRewriter: MockRequestHandler {
        let backend: MockBackend
        let host: String
        let recorded: @Sendable () -> Void

        func handle(_ request: MockRequest) async -> MockOutcome {
            var request = request
            request.headers = request.headers.filter { $0.name.caseInsensitiveCompare("Host") != .orderedSame }
            request.headers.insert((name: "Host", value: host), at: 0)
            return await backend.handle(request, recorded: recorded)
        }
    }
}
