// experimently-driver: the shipping Swift SDK (`Experimently`) out of process, speaking the driver
// protocol `experimently-driver/1` (Documentation/DriverProtocol.md) on standard input and output,
// with every capability. Use: contract-harness run --sdk-command "$(swift build --show-bin-path)/experimently-driver"
// With EXPERIMENTLY_DRIVER_MUTANT=<defect> (a name `contract-harness mutants --help` lists, e.g.
// cancel-keeps-request) it serves that broken variant instead, to show a defect caught out of process.
import Foundation
import ContractHarness

let driver: any SDKDriver
if let name = ProcessInfo.processInfo.environment["EXPERIMENTLY_DRIVER_MUTANT"], !name.isEmpty {
    do { driver = try MutantRun.driver(named: name) } catch {
        FileHandle.standardError.write(Data("experimently-driver: EXPERIMENTLY_DRIVER_MUTANT: \(error)\n".utf8))
        exit(64)
    }
} else {
    driver = SwiftSDKDriver()
}
exit(await DriverServer(driver: driver).serve())
