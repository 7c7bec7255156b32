import Foundation
import ExperimentlyMock
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A user as a scenario names it: an id and optional attributes (a JSON object).
public struct UserSpec: Sendable, Equatable, Codable {
    /// The user id.
    public var id: String
    /// The attributes (a JSON object), sent as the assignment context; `nil` when absent.
    public var attributes: JSONValue?

    /// Creates a user.
    public init(id: String, attributes: JSONValue? = nil) {
        self.id = id
        self.attributes = attributes
    }
}

/// An event as a scenario names it (CONTRACT.md section 1, event object).
public struct EventSpec: Sendable, Equatable, Codable {
    /// The user (`user_id`).
    public var userId: String
    /// The event name (`event_name`).
    public var eventName: String
    /// The event type; the name when `nil`.
    public var eventType: String?
    /// The experiment the event is attributed to.
    public var experimentKey: String?
    /// The flag the event is attributed to.
    public var featureFlagKey: String?
    /// A numeric value.
    public var value: Double?
    /// Properties (a JSON object), sent as `metadata`.
    public var properties: JSONValue?
    /// Seconds since 1970, sent as an ISO-8601 timestamp.
    public var timestamp: Double?

    /// Creates an event.
    public init(userId: String, eventName: String, eventType: String? = nil, experimentKey: String? = nil,
                featureFlagKey: String? = nil, value: Double? = nil, properties: JSONValue? = nil, timestamp: Double? = nil) {
        self.userId = userId
        self.eventName = eventName
        self.eventType = eventType
        self.experimentKey = experimentKey
        self.featureFlagKey = featureFlagKey
        self.value = value
        self.properties = properties
        self.timestamp = timestamp
    }

    /// `true` when the event names an experiment or a flag.
    public var hasKey: Bool { experimentKey != nil || featureFlagKey != nil }
}

/// One SDK call a scenario can make (CONTRACT.md section 3).
public enum SDKOperation: Sendable, Equatable {
    case evaluateFlag(flag: String, user: UserSpec)
    case getAssignment(experiment: String, user: UserSpec)
    case track(EventSpec)
    case trackWithStatus(EventSpec)
    case trackBatch([EventSpec])
    case clearCache
    case clearOfflineCache
    case close
    case getAssignments(user: String)
    case getEvaluatedFlags(user: String)
    case hashUser(user: String, key: String)

    /// The operation's name as written in scenario files (`"evaluateFlag"`, ...).
    public var name: String {
        switch self {
        case .evaluateFlag: return "evaluateFlag"
        case .getAssignment: return "getAssignment"
        case .track: return "track"
        case .trackWithStatus: return "trackWithStatus"
        case .trackBatch: return "trackBatch"
        case .clearCache: return "clearCache"
        case .clearOfflineCache: return "clearOfflineCache"
        case .close: return "close"
        case .getAssignments: return "getAssignments"
        case .getEvaluatedFlags: return "getEvaluatedFlags"
        case .hashUser: return "hashUser"
        }
    }

    /// Every operation name a scenario may use, for error messages.
    public static let allNames = ["evaluateFlag", "getAssignment", "track", "trackWithStatus", "trackBatch",
                                  "clearCache", "clearOfflineCache", "close", "getAssignments",
                                  "getEvaluatedFlags", "hashUser"]

    /// The (user id, key) pair the operation caches under, when it has one.
    public var cacheKey: (user: String, key: String, kind: String)? {
        switch self {
        case .evaluateFlag(let flag, let user): return (user.id, flag, "flag")
        case .getAssignment(let experiment, let user): return (user.id, experiment, "experiment")
        default: return nil
        }
    }
}

/// The result of one SDK operation, as the history records it.
///
/// Error kinds are the `ExperimentationError` case names (`flagNotFound`, `serverError`, ...);
/// `status` carries the HTTP status of `serverError`, `code` the `URLError` code of `networkError`
/// (-1001 for a timeout).
public enum OperationOutcome: Sendable, Equatable, Codable {
    case value(JSONValue)
    case error(kind: String, status: Int?, code: Int?, message: String)

    /// The JSON form used in histories and verdicts.
    public var json: JSONValue {
        switch self {
        case .value(let v): return .object(["value": v])
        case .error(let kind, let status, let code, let message):
            var o: [String: JSONValue] = ["error": .string(kind), "message": .string(message)]
            if let status { o["status"] = .number(Double(status)) }
            if let code { o["code"] = .number(Double(code)) }
            return .object(o)
        }
    }
}

/// The knobs of `SdkConfig` a scenario sets (CONTRACT.md section 3); seconds.
public struct ClientSettings: Sendable, Equatable {
    /// The API origin; `nil` uses the scenario's mock backend. `{{mock}}` (`mockOrigin`) is the
    /// mock's origin and `{{mock}}/` the same with a trailing slash (CONTRACT.md section 1: a
    /// trailing `/` is tolerated); the parser refuses any other `{{` (`mockForms`).
    public var baseURL: String?
    /// The API key (default: the reference fixtures' key).
    public var apiKey = "sdk-contract-key"
    /// Per-request deadline, seconds.
    public var timeout: Double = 10
    /// Entries per in-memory cache.
    public var cacheSize = 1000
    /// Cache lifetime, seconds.
    public var cacheTTL: Double = 300
    /// Whether successes are persisted and served on failure.
    public var offlineFallback = true

    /// The defaults of `SdkConfig`, with the mock's origin and the reference API key.
    public init() {}

    /// The placeholder for the scenario's mock backend's origin in a `base_url` (`mockForms`), as
    /// the driver reaches it (`http://backend-N.mock.invalid` in process, a loopback port out of process).
    public static let mockOrigin = "{{mock}}"

    /// The `base_url` values written from `{{mock}}` that a scenario may give: the mock's origin,
    /// and with a trailing slash (CONTRACT.md section 1: an origin, a trailing `/` tolerated).
    public static let mockForms = ["{{mock}}", "{{mock}}/"]

    /// Whether this client's requests go to the scenario's mock: no `base_url`, or one written
    /// from `{{mock}}` (compared by bytes).
    public var reachesMock: Bool { baseURL.map { $0.utf8.starts(with: Self.mockOrigin.utf8) } ?? true }

    /// Whether this client was given a `base_url` other than the mock's (`reachesMock` is false):
    /// it gets a session of its own that counts everything it sends (ScenarioFormat.md).
    public var elsewhere: Bool { !reachesMock }

    /// The base URL the SDK is given: `mock` (the mock's origin for this client) without a
    /// `base_url`, `mock` followed by the rest of a `base_url` written from `{{mock}}`, else the
    /// `base_url` as written.
    public func resolvedBaseURL(mock: String) -> String {
        guard let baseURL else { return mock }
        guard reachesMock else { return baseURL }
        return mock + String(decoding: baseURL.utf8.dropFirst(Self.mockOrigin.utf8.count), as: UTF8.self)
    }
}

/// What a driver gets to build clients: the transport to the mock, the shared clock, and where
/// a named offline store lives.
public struct DriverContext: Sendable {
    /// Returns a `URLSession` routed to the scenario's mock backend that tags its requests with
    /// the client's name (so the history can attribute them).
    public let makeSession: @Sendable (_ client: String) -> URLSession
    /// The scenario's virtual clock.
    public let clock: VirtualClock
    /// The `UserDefaults` suite for a store name (exclusively this run's).
    public let storeSuite: @Sendable (_ store: String) -> String
    /// When set, the in-memory defaults to use for a store name instead of a suite (explorer and
    /// mutant runs); the same name gives the same instance within a run.
    public let memoryStore: (@Sendable (_ store: String) -> SharedDefaults)?
    /// The mock backend's origin for a client (its requests are attributed to it by the origin's
    /// port), for clients whose settings name none.
    public let baseURL: @Sendable (_ client: String) -> String
    /// The task executor the SDK's own tasks must prefer (always an `any TaskExecutor`, typed
    /// loosely to stay usable before macOS 15; `nil` there): in interleaved runs the controlled
    /// executor, otherwise the operations' executor, whose idleness is part of quiescence (an SDK
    /// deadline timer is asleep on the clock before an `advance`). A driver that passes it to its
    /// SDK declares the `interleaving` capability.
    public var taskExecutor: (any Sendable)? = nil
}

/// One SDK client under test, as the runner drives it.
public protocol DriverClient: Sendable {
    /// Performs `operation` and returns its outcome; never throws (errors are outcomes).
    func perform(_ operation: SDKOperation) async -> OperationOutcome
    /// The persisted offline-fallback value for (user, key), kind `"flag"` or `"experiment"`,
    /// or `nil` when none is stored. Asynchronous: an out-of-process driver asks its adapter.
    func persisted(kind: String, user: String, key: String) async -> JSONValue?
    /// Writes `json` as the persisted value for (user, key) into the client's offline store,
    /// exactly as given (the `seed_store` step); returns what went wrong, or `nil`. Asynchronous:
    /// an out-of-process driver sends `seed_store` to its adapter and waits for the answer.
    func seedPersisted(kind: String, user: String, key: String, json: JSONValue) async -> String?
}

public extension DriverClient {
    /// Default: a driver that cannot reach its SDK's store says so. (Asynchronous like the
    /// requirement, so that no synchronous overload shadows a client's own implementation.)
    func seedPersisted(kind: String, user: String, key: String, json: JSONValue) async -> String? {
        "this driver cannot write into an offline store (seed_store)"
    }
}

/// How the runner reaches an SDK: the built-in driver runs the Swift `Experimently` client
/// in-process; another driver may run another SDK out of process.
public protocol SDKDriver: Sendable {
    /// The SDK's name as the verdict reports it (e.g. `"ios"`).
    var sdkName: String { get }
    /// The SDK's version.
    var sdkVersion: String { get }
    /// What the driver can do: operation names, plus `"app"` (the reference integration of
    /// CONTRACT.md section 8), `"virtual_clock"`, `"cancel"`, `"offline_store"`, `"hash"`
    /// (`Scenario.knownCapabilities`). A scenario needing one the driver lacks, listed in
    /// `requires` or inferred from what it uses (`Scenario.requirements`), is skipped with the
    /// reason; declare only what the driver really does.
    var capabilities: Set<String> { get }
    /// Creates a client named `name` with `settings`, persisting into store `store` (`nil`: none).
    ///
    /// - Throws: when the client cannot be created; the scenario then errors.
    func makeClient(name: String, settings: ClientSettings, store: String?, context: DriverContext) throws -> any DriverClient
    /// How the clients reach the scenario's mock (default `.inProcess`; see `DriverTransport`).
    var transport: DriverTransport { get }
    /// The scenario's clock moved forward (an `advance` step); returns once the SDK has seen it,
    /// or a problem (the step then fails). Default: nothing to do (in-process clients read the clock).
    func clockDidAdvance(_ clock: VirtualClock, clients: [any DriverClient], deadlineMilliseconds: Int) async -> String?
    /// When the SDK's earliest timer on its own copy of `clock` is due, as its last reply to a
    /// clock move said (`nil`: none, or unknown). Default: `nil` (in process the SDK's timers
    /// sleep on `clock` itself).
    func nextTimer(of clock: VirtualClock) -> Date?
    /// The scenario is over (checks done, mock shut down): release its clients and report what
    /// the driver saw (a crash, protocol errors, the adapter's standard error). Default: nothing.
    func scenarioDidEnd(clients: [any DriverClient]) async -> DriverScenarioReport
}
