import Foundation

extension HarnessCommand {
    /// Why `explore` (and `run --explore`) cannot judge `scenario` through `driver`, or `nil` when
    /// it can: moving reference-app steps (CONTRACT.md section 8) is explored in process only.
    /// Out of process an app action of one schedule can outlive its schedule and reach a client
    /// the harness already closed, and an order in which an app action waits on what only a later
    /// step provides is not decided infeasible at once (in process it is, from the SDK's own
    /// tasks); both made `explore --sdk-command` fail a correct SDK (an outside tester's report).
    /// A plain `run` of the file out of process is not affected.
    static func outOfProcessExploreLimit(_ scenario: Scenario, driver: any SDKDriver) -> Scenario.Requirement? {
        guard driver is ProcessSDKDriver else { return nil }
        for (i, step) in scenario.steps.enumerated() {
            if case .app = step {
                return Scenario.Requirement(capability: "in-process exploration of app steps",
                                            reason: "app at $.steps[\(i)]: explore moves reference-app steps only with the built-in SDK")
            }
        }
        return nil
    }
}
