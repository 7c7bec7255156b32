// swift-tools-version:6.0
// The Experimently contract test harness: the Swift SDK, the mock backend and the scenario runner.
import PackageDescription

let package = Package(
    name: "ExperimentlyContract",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "Experimently", targets: ["Experimently"]),
        .library(name: "ExperimentlyMock", targets: ["ExperimentlyMock"]),
        .library(name: "ContractHarness", targets: ["ContractHarness"]),
        .executable(name: "contract-harness", targets: ["contract-harness"]),
        .executable(name: "contract-smoke", targets: ["contract-smoke"]),
        .executable(name: "experimently-bench", targets: ["experimently-bench"]),
        .executable(name: "experimently-driver", targets: ["experimently-driver"]),
    ],
    targets: [
        .target(name: "Experimently"),
        .target(name: "ExperimentlyMock"),
        .target(name: "ExperimentlyMutants", dependencies: ["Experimently"]),
        .target(name: "ContractHarness", dependencies: ["Experimently", "ExperimentlyMock", "ExperimentlyMutants"]),
        .executableTarget(name: "contract-harness", dependencies: ["ContractHarness"]),
        .executableTarget(name: "contract-smoke", dependencies: ["Experimently", "ExperimentlyMock"]),
        .executableTarget(name: "experimently-bench", dependencies: ["Experimently", "ExperimentlyMock"]),
        .executableTarget(name: "experimently-driver", dependencies: ["ContractHarness"]),
        .testTarget(name: "ExperimentlyTests", dependencies: ["Experimently"]),
        .testTarget(name: "ExperimentlyMockTests", dependencies: ["ExperimentlyMock"]),
        .testTarget(name: "ContractHarnessTests", dependencies: ["ContractHarness", "Experimently", "ExperimentlyMock"],
                    exclude: ["Fixtures"]),
    ],
    swiftLanguageModes: [.v6]
)
