// contract-smoke: the Swift SDK's live contract smoke (CONTRACT.md section 7), documented in
// Documentation/CrossSDK.md.
//
// As section 7 says: against EXPERIMENTLY_API_URL (default http://localhost:8000), with
// EXPERIMENTLY_API_KEY required. `contract-smoke --embedded` runs it against an embedded
// in-process mock backend with the reference fixtures instead (its key is the fixture key unless
// EXPERIMENTLY_API_KEY is set). Prints one JSON line on standard output; on failure prints a line
// to standard error and exits 1. (Before, without EXPERIMENTLY_API_URL it smoked its own embedded
// mock and passed with no backend at all: an outside audit, A-11.)
import Experimently
import ExperimentlyMock
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A smoke failure: the line for standard error.
struct SmokeFailure: Error { let message: String }

/// The settings read from the environment.
struct SmokeSettings {
    var url: String?
    var apiKey: String
    var experiment: String
    var flag: String
    var user: String

    /// The contract's default backend (CONTRACT.md section 7).
    static let defaultURL = "http://localhost:8000"

    /// Reads the section 7 variables; `embedded`: the embedded mock is asked for (`url` is nil).
    ///
    /// - Throws: ``SmokeFailure`` when `EXPERIMENTLY_API_KEY` is missing for a real backend.
    static func fromEnvironment(_ env: [String: String], embedded: Bool) throws -> SmokeSettings {
        func value(_ name: String) -> String? {
            guard let v = env[name], !v.isEmpty else { return nil }
            return v
        }
        let url = embedded ? nil : value("EXPERIMENTLY_API_URL") ?? defaultURL
        let key = value("EXPERIMENTLY_API_KEY")
        if url != nil && key == nil {
            throw SmokeFailure(message: "EXPERIMENTLY_API_KEY is required (the backend is \(url!); `contract-smoke --embedded` runs against an embedded mock)")
        }
        return SmokeSettings(url: url, apiKey: key ?? Fixtures.sdkContractAPIKey,
                             experiment: value("CONTRACT_EXPERIMENT_KEY") ?? "sdk_contract_ab",
                             flag: value("CONTRACT_FLAG_KEY") ?? "sdk_contract_flag",
                             user: value("CONTRACT_USER_ID") ?? "smoke-\(UUID().uuidString.lowercased())")
    }
}

/// Runs the steps and returns the smoke line's object; throws on an SDK error or a failed step.
func smoke(_ s: SmokeSettings, baseURL: String, makeSession: () -> URLSession, embedded: MockBackend?) async throws -> [String: JSONValue] {
    func client() -> ExperimentationClient {
        ExperimentationClient(config: SdkConfig(baseURL: baseURL, apiKey: s.apiKey, enableOfflineFallback: false),
                              session: makeSession(), offlineStore: nil)
    }
    let user = User(id: s.user)
    let first = client(), second = client()
    defer { first.close(); second.close() }

    let a1: Assignment, a2: Assignment
    do {
        a1 = try await first.getAssignment(s.experiment, user: user)
        a2 = try await second.getAssignment(s.experiment, user: user)
    } catch {
        throw SmokeFailure(message: "getAssignment(\(s.experiment), \(s.user)) failed: \(error.localizedDescription)")
    }
    let sticky = a1.variantName == a2.variantName && a1.variantId == a2.variantId
    let flag: EvalResult
    do { flag = try await first.evaluateFlag(s.flag, user: user) } catch {
        throw SmokeFailure(message: "evaluateFlag(\(s.flag), \(s.user)) failed: \(error.localizedDescription)")
    }
    let purchase = await first.trackWithStatus(TrackEvent(userId: s.user, eventName: "purchase", experimentKey: s.experiment, value: 9.99))

    // Unkeyed: fans out to one /batch of 2 (the cached assignment and the cached flag).
    let fanOutTargets = first.getAssignments(for: s.user).count + first.getEvaluatedFlags(for: s.user).count
    let batchesBefore = embedded.map(batchSizes) ?? []
    let pageView = await first.trackWithStatus(TrackEvent(userId: s.user, eventName: "page_view", properties: ["page": "/smoke"]))
    var fanOutOK = pageView && fanOutTargets == 2
    if let embedded { fanOutOK = fanOutOK && Array(batchSizes(embedded).dropFirst(batchesBefore.count)) == [2] }

    let batch = await first.trackBatch([
        TrackEvent(userId: s.user, eventName: "add_to_cart", experimentKey: s.experiment, value: 1),
        TrackEvent(userId: s.user, eventName: "checkout", featureFlagKey: s.flag),
    ])

    return [
        "sdk": .string("ios"),
        "assign": .object(["variant_name": .string(a1.variantName), "is_control": .bool(a1.isControl), "sticky": .bool(sticky)]),
        "flag": .object(["enabled": .bool(flag.enabled)]),
        "track": .object(["ok": .bool(purchase && batch)]),
        "fanout": .object(["ok": .bool(fanOutOK)]),
    ]
}

/// The event counts of the `/batch` requests the embedded backend answered, in order.
func batchSizes(_ backend: MockBackend) -> [Int] {
    backend.history.filter { $0.path == "/api/v1/tracking/batch" }.map { $0.json?["events"]?.arrayValue?.count ?? 0 }
}

/// The upstream runner's rules, applied to our own line before printing success.
func problems(_ line: [String: JSONValue]) -> [String] {
    var out: [String] = []
    let variant = line["assign"]?["variant_name"]?.stringValue ?? ""
    if !["control", "treatment"].contains(variant) { out.append("variant_name \(variant.debugDescription) is not control or treatment") }
    if line["assign"]?["sticky"] != .bool(true) { out.append("the assignment is not sticky across two clients") }
    if line["flag"]?["enabled"] != .bool(true) { out.append("the flag is not enabled") }
    if line["track"]?["ok"] != .bool(true) { out.append("tracking failed") }
    if line["fanout"]?["ok"] != .bool(true) { out.append("the unkeyed event did not fan out to one batch of 2") }
    return out
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("contract-smoke: FAIL: \(message)\n".utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
if let unknown = arguments.first(where: { $0 != "--embedded" }) {
    fail("unknown argument \(unknown) (usage: contract-smoke [--embedded]; settings come from the environment, CONTRACT.md section 7)")
}
let settings: SmokeSettings
do { settings = try SmokeSettings.fromEnvironment(ProcessInfo.processInfo.environment, embedded: arguments.contains("--embedded")) } catch let e as SmokeFailure {
    fail(e.message)
} catch { fail("\(error)") }

let line: [String: JSONValue]
do {
    if let url = settings.url {
        line = try await smoke(settings, baseURL: url, makeSession: { URLSession(configuration: .ephemeral) }, embedded: nil)
    } else {
        let backend = MockBackend(fixtures: .sdkContract)
        line = try await smoke(settings, baseURL: backend.baseURL.absoluteString, makeSession: { backend.makeURLSession() }, embedded: backend)
        backend.shutdown()
    }
} catch let e as SmokeFailure {
    fail(e.message)
} catch {
    fail("\(error)")
}

// Key order as CONTRACT.md section 7 prints it.
func members(_ value: JSONValue?, _ keys: [String]) -> String {
    "{" + keys.map { "\"\($0)\":\((value?[$0] ?? .null).jsonText)" }.joined(separator: ",") + "}"
}
let text = "{\"sdk\":\"ios\",\"assign\":\(members(line["assign"], ["variant_name", "is_control", "sticky"])),"
    + "\"flag\":\(members(line["flag"], ["enabled"])),\"track\":\(members(line["track"], ["ok"])),\"fanout\":\(members(line["fanout"], ["ok"]))}"
FileHandle.standardOutput.write(Data((text + "\n").utf8))
let found = problems(line)
if !found.isEmpty { fail(found.joined(separator: "; ")) }
exit(0)
