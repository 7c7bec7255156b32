import Foundation

/// How a driver's clients reach the scenario's mock backend.
public enum DriverTransport: Sendable, Equatable {
    /// In the harness's process, through `DriverContext.makeSession` (URLProtocol, no sockets).
    case inProcess
    /// Real HTTP/1.1 over loopback TCP to `DriverContext.baseURL(client)`: one listener port per
    /// client, which is how the mock attributes requests (out-of-process drivers).
    case loopbackTCP
}

/// What a driver reports about one scenario once it is over (`SDKDriver.scenarioDidEnd`).
public struct DriverScenarioReport: Sendable, Equatable {
    /// Set when the SDK's process died during the scenario: how (exit status or signal) and the
    /// last lines of its standard error. The scenario's status is then `error` with reason
    /// `crashed: ...` (the `crashed` status where the runner has one).
    public var crash: String?
    /// Protocol violations seen during the scenario (a line that is not the protocol, a refused
    /// request), each quoting what was received; each fails the scenario.
    public var problems: [String] = []
    /// The adapter's standard error written while the scenario ran (at most 40 lines), quoted in
    /// the verdict of a scenario that did not pass.
    public var stderr: [String] = []

    /// Creates a report; the default says nothing happened.
    public init(crash: String? = nil, problems: [String] = [], stderr: [String] = []) {
        self.crash = crash
        self.problems = problems
        self.stderr = stderr
    }
}

extension SDKDriver {
    /// In-process by default.
    public var transport: DriverTransport { .inProcess }

    /// Nothing to do in process: the clients read the scenario's clock themselves.
    public func clockDidAdvance(_ clock: VirtualClock, clients: [any DriverClient], deadlineMilliseconds: Int) async -> String? { nil }

    /// None in process: the SDK's timers sleep on the scenario's clock.
    public func nextTimer(of clock: VirtualClock) -> Date? { nil }

    /// Nothing to report in process.
    public func scenarioDidEnd(clients: [any DriverClient]) async -> DriverScenarioReport { DriverScenarioReport() }
}
