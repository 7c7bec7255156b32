// The contract harness's command line, driving your SDK in process:
//   swift run your-sdk-harness run scenarios
import Foundation
import ContractHarness
import ExperimentlyMock   // JSONValue
import Experimently   // your SDK; the harness's own module is `ContractExperimently` here
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Drives your SDK's client for the harness: one `DriverClient` per scenario client.
struct YourSDKDriver: SDKDriver {
    let sdkName = "your-sdk"
    let sdkVersion = "0.0.1"
    /// What your SDK can do: scenarios needing anything else are skipped, naming it.
    let capabilities: Set<String> = ["evaluateFlag"]

    func makeClient(name: String, settings: ClientSettings, store: String?, context: DriverContext) throws -> any DriverClient {
        YourClient(client: ExperimentationClient(baseURL: settings.baseURL ?? context.baseURL(name), apiKey: settings.apiKey,
                                                 session: context.makeSession(name)))
    }
}

struct YourClient: DriverClient {
    let client: ExperimentationClient

    func perform(_ operation: SDKOperation) async -> OperationOutcome {
        guard case .evaluateFlag(let flag, let user) = operation else {
            return .error(kind: "unsupported", status: nil, code: nil, message: "\(operation.name) is not implemented")
        }
        do {
            let e = try await client.evaluateFlag(flag, user: user.id)
            return .value(.object(["key": .string(e.key), "enabled": .bool(e.enabled)]))
        } catch let error as URLError {
            return .error(kind: "networkError", status: nil, code: error.code.rawValue, message: "\(error)")
        } catch {
            return .error(kind: "networkError", status: nil, code: nil, message: "\(error)")
        }
    }

    func persisted(kind: String, user: String, key: String) async -> JSONValue? { nil }
}

exit(await HarnessCommand.main(Array(CommandLine.arguments.dropFirst()), driver: YourSDKDriver()))
