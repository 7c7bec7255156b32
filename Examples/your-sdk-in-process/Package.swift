// swift-tools-version:6.0
// Another Swift SDK under the contract harness, in process (Documentation/YourSDK.md).
// `Experimently` here stands for your SDK (the upstream iOS SDK's module has that name too); the
// harness's own `Experimently` is renamed for this product with `moduleAliases`.
import PackageDescription

let package = Package(
    name: "YourSDKContract",
    platforms: [.macOS(.v13), .iOS(.v16)],
    dependencies: [
        // The contract harness checked out (or linked) next to this package. SwiftPM names a
        // package by the last component of its path or URL: `package:` below must match it.
        // From git: .package(url: "https://.../experimently-contract.git", branch: "main")
        .package(path: "../experimently-contract"),
    ],
    targets: [
        // Your SDK (in your repository this is usually a dependency, not a local target).
        .target(name: "Experimently"),
        .executableTarget(
            name: "your-sdk-harness",
            dependencies: [
                "Experimently",
                .product(name: "ContractHarness", package: "experimently-contract",
                         moduleAliases: ["Experimently": "ContractExperimently"]),
                // JSONValue (operation outcomes) comes from the mock's module.
                .product(name: "ExperimentlyMock", package: "experimently-contract"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
