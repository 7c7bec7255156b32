// experimently-driver: the shipping Swift SDK (`Experimently`) out of process, speaking the driver
// protocol `experimently-driver/1` (Documentation/DriverProtocol.md) on standard input and output,
// with every capability. Use: contract-harness run --sdk-command "$(swift build --show-bin-path)/experimently-driver"
import Foundation
import ContractHarness

exit(await DriverServer(driver: SwiftSDKDriver()).serve())
