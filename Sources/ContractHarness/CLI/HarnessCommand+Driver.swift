import Foundation

extension HarnessCommand {
    /// Capabilities worth naming on the console when an SDK lacks them (each skips scenarios).
    static let importantCapabilities = ["virtual_clock", "cancel", "offline_store", "app", "settle", "seed_store"]

    /// The capabilities an adapter declared that the harness does not know, each with the known
    /// one it most likely meant (same letters once case, `_` and `-` are ignored), for a warning:
    /// an unknown name is ignored, so a typo silently skips scenarios (an eleventh outside tester
    /// declared `virtualClock`).
    static func unknownCapabilities(_ declared: Set<String>) -> [String] {
        func folded(_ s: String) -> String { String(s.lowercased().unicodeScalars.filter { $0 != "_" && $0 != "-" }) }
        return declared.filter { name in !Scenario.knownCapabilities.contains { $0.unicodeScalars.elementsEqual(name.unicodeScalars) } }.sorted().map { name in
            if let meant = Scenario.knownCapabilities.first(where: { folded($0) == folded(name) }) { return "'\(name)' (did you mean '\(meant)'?)" }
            return "'\(name)'"
        }
    }

    /// Starts the adapter of `--sdk-command` and prints the first console lines: the SDK, its
    /// version and the important capabilities it lacks.
    ///
    /// - Returns: the driver, or the message saying why the adapter cannot be used.
    static func launchDriver(_ command: String) async -> Result<ProcessSDKDriver, DriverProtocolError> {
        // Before the command registers its own SIGINT/SIGTERM handler, a signal still kills the adapter.
        InterruptSignals.install()
        do {
            let driver = try await ProcessSDKDriver.launch(command: command)
            say("sdk: \(driver.sdkName) \(driver.sdkVersion) via \(DriverWire.version) (\(command))")
            let lacking = importantCapabilities.filter { !driver.capabilities.contains($0) }
                + SDKOperation.allNames.filter { !driver.capabilities.contains($0) }
            if !lacking.isEmpty { say("sdk lacks: \(lacking.joined(separator: ", ")) (scenarios needing them are skipped)") }
            let unknown = unknownCapabilities(driver.capabilities)
            if !unknown.isEmpty {
                say("sdk declares capabilities the harness does not know, ignored: \(unknown.joined(separator: ", ")) (Documentation/DriverProtocol.md lists the names)")
            }
            return .success(driver)
        } catch let e as DriverProtocolError {
            return .failure(e)
        } catch {
            return .failure(DriverProtocolError("\(error)"))
        }
    }
}
