import Foundation
import ExperimentlyMock
import Experimently
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The built-in driver: the Swift `Experimently` client in-process, over the mock's URLProtocol
/// transport and the scenario's virtual clock.
public struct SwiftSDKDriver: SDKDriver {
    /// `"ios"` (the name the upstream contract smoke uses for the Swift SDK) unless given.
    public let sdkName: String
    /// The SDK's version.
    public let sdkVersion: String
    /// Every operation, the reference app, the virtual clock, cancellation, offline-store inspection
    /// and hashing, `settle` (in process quiescence sees the SDK's tasks: exact); `interleaving`
    /// when the factory passes the task executor on.
    public let capabilities: Set<String>
    private let factory: @Sendable (SdkConfig, URLSession, OfflineStore?, any ExperimentationClock, (any Sendable)?) -> any SwiftClientSurface

    private static let baseCapabilities = Set(SDKOperation.allNames + ["app", "virtual_clock", "cancel", "offline_store", "hash", "seed_store", "settle"])

    /// Creates the driver for the shipping `ExperimentationClient` (with the `interleaving`
    /// capability where task executors exist: its task executor seam gets `DriverContext.taskExecutor`).
    public init() {
        sdkName = "ios"
        sdkVersion = ExperimentlySDKInfo.version
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *) {
            capabilities = Self.baseCapabilities.union(["interleaving"])
        } else {
            capabilities = Self.baseCapabilities
        }
        factory = { config, session, store, clock, executor in
            if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, *) {
                return ExperimentationClient(config: config, session: session, offlineStore: store, clock: clock,
                                             taskExecutor: executor as? any TaskExecutor)
            }
            return ExperimentationClient(config: config, session: session, offlineStore: store, clock: clock)
        }
    }

    /// Creates a driver for another Swift implementation of the client surface whose own tasks
    /// prefer the given task executor (`DriverContext.taskExecutor`, an `any TaskExecutor` or
    /// `nil`): it has the `interleaving` capability.
    public init(name: String, version: String,
                interleavingFactory: @escaping @Sendable (SdkConfig, URLSession, OfflineStore?, any ExperimentationClock, (any Sendable)?) -> any SwiftClientSurface) {
        self.sdkName = name
        self.sdkVersion = version
        self.capabilities = Self.baseCapabilities.union(["interleaving"])
        self.factory = interleavingFactory
    }

    /// Creates a driver for another Swift implementation of the client surface (used to prove the
    /// harness catches broken SDKs).
    public init(name: String, version: String,
                factory: @escaping @Sendable (SdkConfig, URLSession, OfflineStore?, any ExperimentationClock) -> any SwiftClientSurface) {
        self.sdkName = name
        self.sdkVersion = version
        self.capabilities = Self.baseCapabilities
        self.factory = { config, session, store, clock, _ in factory(config, session, store, clock) }
    }

    /// Creates an `ExperimentationClient` (or the factory's client) with the scenario's settings, the mock session, the virtual clock and the named offline store.
    public func makeClient(name: String, settings: ClientSettings, store: String?, context: DriverContext) throws -> any DriverClient {
        let config = SdkConfig(baseURL: settings.resolvedBaseURL(mock: context.baseURL(name)), apiKey: settings.apiKey, timeout: settings.timeout,
                               cacheSize: settings.cacheSize, cacheTTL: settings.cacheTTL,
                               enableOfflineFallback: settings.offlineFallback)
        let defaults = store.map { name in
            context.memoryStore.map { $0(name) } ?? SharedDefaults(defaults: UserDefaults(suiteName: context.storeSuite(name)) ?? .standard)
        }
        let offline = defaults.map { OfflineStore(defaults: $0.defaults) }
        let client = factory(config, context.makeSession(name), offline, context.clock, context.taskExecutor)
        return SwiftDriverClient(client: client, store: offline, defaults: defaults)
    }
}

/// The calls the Swift driver makes: `ExperimentationClient`'s public surface.
public protocol SwiftClientSurface: Sendable {
    func evaluateFlag(_ flagKey: String, user: User) async throws -> EvalResult
    func getAssignment(_ experimentKey: String, user: User) async throws -> Assignment
    func track(_ event: TrackEvent) async throws
    func trackWithStatus(_ event: TrackEvent) async -> Bool
    func trackBatch(_ events: [TrackEvent]) async -> Bool
    func getAssignments(for userId: String) -> [Assignment]
    func getEvaluatedFlags(for userId: String) -> [String]
    func clearCache()
    func clearOfflineCache()
    func close()
    func hashUser(_ userId: String, flagKey: String) -> Double
}

extension ExperimentationClient: SwiftClientSurface {
    /// The SDK's hash is a static utility; the surface exposes it per client.
    public func hashUser(_ userId: String, flagKey: String) -> Double {
        FeatureFlagEvaluator.hashUser(userId, flagKey: flagKey)
    }
}

private struct SwiftDriverClient: DriverClient {
    let client: any SwiftClientSurface
    let store: OfflineStore?
    /// The store's `UserDefaults`, for `seed_store`.
    let defaults: SharedDefaults?

    /// Writes the JSON bytes under the store's key for (user, key) (`OfflineStore.storageKey`).
    func seedPersisted(kind: String, user: String, key: String, json: JSONValue) -> String? {
        guard let store, let defaults else { return "the client has no offline store (give it a \"store\")" }
        let name = store.storageKey(kind: kind == "flag" ? "flag" : "assignment", userId: user, key: key)
        defaults.defaults.set(json.serialized(), forKey: name)
        return nil
    }

    func perform(_ operation: SDKOperation) async -> OperationOutcome {
        do {
            switch operation {
            case .evaluateFlag(let flag, let user):
                return .value(Self.json(try await client.evaluateFlag(flag, user: Self.user(user))))
            case .getAssignment(let experiment, let user):
                return .value(Self.json(try await client.getAssignment(experiment, user: Self.user(user))))
            case .track(let event):
                try await client.track(Self.event(event))
                return .value(.null)
            case .trackWithStatus(let event):
                return .value(.bool(await client.trackWithStatus(Self.event(event))))
            case .trackBatch(let events):
                return .value(.bool(await client.trackBatch(events.map(Self.event))))
            case .clearCache:
                client.clearCache(); return .value(.null)
            case .clearOfflineCache:
                client.clearOfflineCache(); return .value(.null)
            case .close:
                client.close(); return .value(.null)
            case .getAssignments(let user):
                return .value(.array(client.getAssignments(for: user).map(Self.json)))
            case .getEvaluatedFlags(let user):
                return .value(.array(client.getEvaluatedFlags(for: user).map(JSONValue.string)))
            case .hashUser(let user, let key):
                return .value(.number(client.hashUser(user, flagKey: key)))
            }
        } catch let error as ExperimentationError {
            return Self.outcome(error)
        } catch is CancellationError {
            return .error(kind: "cancelled", status: nil, code: nil, message: "CancellationError")
        } catch {
            return .error(kind: "unexpected", status: nil, code: nil, message: "\(type(of: error)): \(error)")
        }
    }

    func persisted(kind: String, user: String, key: String) -> JSONValue? {
        guard let store else { return nil }
        if kind == "flag" { return store.loadEvaluation(flagKey: key, userId: user).map(Self.json) }
        return store.loadAssignment(experimentKey: key, userId: user).map(Self.json)
    }

    static func outcome(_ error: ExperimentationError) -> OperationOutcome {
        let message = error.errorDescription ?? "\(error)"
        switch error {
        case .invalidConfig: return .error(kind: "invalidConfig", status: nil, code: nil, message: message)
        case .networkError(let e):
            let code = (e as? URLError)?.code.rawValue ?? (e as NSError).code
            return .error(kind: "networkError", status: nil, code: code, message: message)
        case .decodingError: return .error(kind: "decodingError", status: nil, code: nil, message: message)
        case .flagNotFound: return .error(kind: "flagNotFound", status: 404, code: nil, message: message)
        case .experimentNotFound: return .error(kind: "experimentNotFound", status: 404, code: nil, message: message)
        case .serverError(let status, _): return .error(kind: "serverError", status: status, code: nil, message: message)
        case .cancelled: return .error(kind: "cancelled", status: nil, code: nil, message: message)
        }
    }

    static func user(_ spec: UserSpec) -> User {
        User(id: spec.id, attributes: spec.attributes.flatMap { foundation($0) as? [String: Any] })
    }

    static func event(_ spec: EventSpec) -> TrackEvent {
        TrackEvent(userId: spec.userId, eventName: spec.eventName,
                   properties: spec.properties.flatMap { foundation($0) as? [String: Any] },
                   experimentKey: spec.experimentKey, featureFlagKey: spec.featureFlagKey, value: spec.value,
                   eventType: spec.eventType, timestamp: spec.timestamp.map { Date(timeIntervalSince1970: $0) })
    }

    /// `value` as an app decoding it with `JSONSerialization` holds it: numbers and booleans are
    /// `NSNumber`s (a boolean one for `true`/`false`), so a scenario's attributes and properties
    /// reach the SDK in the form that showed an SDK sending `1` as `true` (an outside audit, A-7:
    /// with native `Int`s no scenario could).
    static func foundation(_ value: JSONValue) -> Any {
        switch value {
        case .null: return NSNull()
        case .bool(let b): return NSNumber(value: b)
        case .number(let d): return d.rounded() == d && abs(d) < 1e15 ? NSNumber(value: Int(d)) : NSNumber(value: d)
        case .string(let s): return s
        case .array(let a): return a.map(foundation)
        case .object(let o): return o.mapValues(foundation)
        }
    }

    static func json(_ r: EvalResult) -> JSONValue {
        .object(["key": .string(r.key), "enabled": .bool(r.enabled), "config": JSONValue(any: r.config)])
    }

    static func json(_ a: Assignment) -> JSONValue {
        .object(["experiment_key": .string(a.experimentKey), "user_id": .string(a.userId),
                 "variant_id": a.variantId.map(JSONValue.string) ?? .null, "variant_name": .string(a.variantName),
                 "is_control": .bool(a.isControl), "configuration": JSONValue(any: a.configuration),
                 "assigned": .bool(a.assigned)])
    }
}
