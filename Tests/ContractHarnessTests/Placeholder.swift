import XCTest
final class ContractHarnessTestsPlaceholder: XCTestCase { func testBuilds() {} }
