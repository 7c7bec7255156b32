import Foundation

extension HarnessCommand {
    /// Capabilities worth naming on the console when an SDK lacks them (each skips scenarios).
    static let importantCapabilities = ["virtual_clock", "cancel", "offline_store", "app", "settle"]

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
            return .success(driver)
        } catch let e as DriverProtocolError {
            return .failure(e)
        } catch {
            return .failure(DriverProtocolError("\(error)"))
        }
    }
}
