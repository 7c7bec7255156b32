import Foundation

// `client` and `times` on app steps, and `client` on app assertions (issue 11 section 6):
// each client may run its own reference app (Documentation/ScenarioFormat.md, The reference app).
extension StepContext {
    /// Reads an app step's `client` (default: the `app` section's client) and `times` (default 1).
    ///
    /// - Throws: `ScenarioError` at `<step>.client` when the name is not one of the scenario's
    ///   clients (compared by Unicode scalars), and at `<step>.times` when it is not a whole
    ///   number from 1 to 1000 (`null` included: a stated `times` must say how many).
    func appClientAndTimes(_ r: inout ObjectReader) throws -> (client: String, count: Int) {
        let client = try optionalAppClient(&r) ?? appClient ?? clients[0]
        var count = 1
        if r.has("times") {
            let raw = r.value("times")
            guard case .number(let d)? = raw, d.rounded() == d, let n = Int(exactly: d), (1...1000).contains(n) else {
                throw r.error("times", expected: "a whole number from 1 to 1000 (how many copies of the action start at once)", found: raw)
            }
            count = n
        }
        return (client, count)
    }

    /// Reads an optional `client` naming an app instance; `nil` when absent.
    ///
    /// - Throws: `ScenarioError` at `<path>.client` when it is not a string naming one of the
    ///   scenario's clients (compared by Unicode scalars).
    func optionalAppClient(_ r: inout ObjectReader) throws -> String? {
        guard r.has("client") else { return nil }
        let raw = r.value("client")
        guard case .string(let name)? = raw, clients.containsExactly(name) else {
            throw r.error("client", expected: "one of the scenario's clients \(clients) (each runs its own reference app)", found: raw)
        }
        return name
    }
}

extension Scenario {
    /// The clients that run a reference app, in order: the `app` section's client, then each
    /// other client an app step or an `app` / `reported` assertion names, in order of first use.
    /// Empty without an `app` section. Names are compared by Unicode scalars.
    public var appClients: [String] {
        guard let app else { return [] }
        var out = [app.client]
        func add(_ name: String?) { if let name, !out.containsExactly(name) { out.append(name) } }
        for step in steps {
            switch step {
            case .app(_, _, _, _, let client, _): add(client)
            case .expect(.app(_, _, _, let client)), .expect(.reported(_, _, let client)): add(client)
            default: break
            }
        }
        return out
    }

    /// The settings of the app instance on `client`: the `app` section's, run over that client
    /// (`nil` without an `app` section).
    public func appSettings(client: String) -> AppSettings? {
        guard var settings = app else { return nil }
        settings.client = client
        return settings
    }
}
