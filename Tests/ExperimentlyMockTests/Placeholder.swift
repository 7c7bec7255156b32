import XCTest
final class ExperimentlyMockTestsPlaceholder: XCTestCase { func testBuilds() {} }
