import Foundation

// One reference app per client (issue 11 section 6): app steps and app assertions name a client,
// each client's app is created on first use (Documentation/ScenarioFormat.md, The reference app).
extension ScenarioExecution {
    /// The reference app running over `client` (`nil`: the `app` section's client), created on
    /// first use with the `app` section's settings; `nil` when the scenario has no `app` section
    /// or no such client. Apps live in `apps`, guarded by `lock`.
    func appInstance(on client: String?) -> ReferenceApp? {
        guard let name = client ?? scenario.app?.client, let settings = scenario.appSettings(client: name),
              let driverClient = clients[name] else { return nil }
        return withAppsLocked { apps in
            if let existing = apps[ExactKey(name)] { return existing }
            let made = ReferenceApp(settings: settings, client: driverClient, recorder: recorder, taskExecutor: appTaskExecutor,
                                    marksClient: !name.isExactly(scenario.app?.client ?? name),
                                    requestCount: { [port] in port.requestCount })
            apps[ExactKey(name)] = made
            return made
        }
    }

    /// `"app on 'b': "` for an app on a client other than the `app` section's, else empty: what
    /// an assertion message starts with, so two apps' failures never read alike.
    func appPrefix(_ client: String?) -> String {
        guard let client, let main = scenario.app?.client, !client.isExactly(main) else { return "" }
        return "app on '\(client.unambiguous)': "
    }
}
