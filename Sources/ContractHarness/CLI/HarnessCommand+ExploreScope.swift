import Foundation

extension HarnessCommand {
    /// Why `explore` (and `run --explore`) cannot judge `scenario` through `driver`, or `nil` when
    /// it can: moving reference-app steps (CONTRACT.md section 8) out of process needs an adapter
    /// that answers `settle`. Without it, an order in which an app action waits on what only a
    /// later step provides is not decided infeasible at once but waits out the step limit, and
    /// failed a correct SDK (an outside tester's report: 7 of 24 schedules of
    /// `app-explore-login-racing-held-init-every-order` through experimently-driver). With
    /// `settle` such orders are decided as in process, and an app action that outlives its
    /// schedule never reaches the adapter (`DriverConnection.closeScope`): the same file gives the
    /// same counts in and out of process. A plain `run` of the file out of process is not affected.
    static func outOfProcessExploreLimit(_ scenario: Scenario, driver: any SDKDriver) -> Scenario.Requirement? {
        guard driver is ProcessSDKDriver, !driver.capabilities.contains("settle") else { return nil }
        for (i, step) in scenario.steps.enumerated() {
            if case .app = step {
                return Scenario.Requirement(capability: "settle",
                                            reason: "app at $.steps[\(i)]: explore moves reference-app steps out of process only with an adapter that answers settle")
            }
        }
        return nil
    }
}
