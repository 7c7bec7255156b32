import Foundation
import ExperimentlyMock

/// A scenario file, parsed and validated (format `experimently-scenario/1`, documented in
/// `Documentation/ScenarioFormat.md`).
public struct Scenario: Sendable {
    /// The format tag every scenario file must carry.
    public static let format = "experimently-scenario/1"

    /// Where it was read from.
    public var file: String
    /// A unique name (file-name style).
    public var name: String
    /// What it proves.
    public var description: String
    /// Tags for `--filter` (e.g. `race`, `smoke`, `section-5`).
    public var tags: [String]
    /// The field report or contract section it comes from.
    public var source: String?
    /// Backend fixtures as JSON: `nil` means the built-in reference `sdk-contract` set.
    public var fixtures: JSONValue?
    /// The SDK configuration every client starts from.
    public var settings: ClientSettings
    /// The clients by name, each with its offline store name (`nil`: none).
    public var clients: [(name: String, store: String?, settings: ClientSettings)]
    /// Clients whose SDK instance is created at the first step that uses it (`"launch":
    /// "at_first_use"`), not before the first step: a relaunch over a store earlier clients wrote.
    public var launchedAtFirstUse: [String] = []
    /// The reference app (CONTRACT.md section 8), when the scenario uses one.
    public var app: AppSettings?
    /// The steps, in order.
    public var steps: [Step]
    /// Named checks over the whole history.
    public var checks: [String]
    /// Real-time limit of one step, milliseconds.
    public var stepTimeoutMilliseconds: Int
    /// What the driver must be able to do; otherwise the scenario is skipped with the reason.
    public var requires: [String]
    /// Exploration settings (issue 5), kept as written.
    public var explore: JSONValue?
    /// Interleaving settings and the choices to replay (issue 15, `Interleaving.swift`).
    public var interleaving: ScenarioInterleaving? = nil

    /// The names of the named checks a scenario may list.
    public static let knownChecks = ["stickiness", "fan_out", "exposure_after_display", "no_stale_after_logout",
                                     "single_flight", "no_fallback_on_404", "batch_chunking", "golden_vectors",
                                     "no_stale_write", "offline_fallback", "contract_smoke", "event_payload"]
}

/// Settings of the reference app of CONTRACT.md section 8.
public struct AppSettings: Sendable, Equatable {
    /// The client the app uses.
    public var client: String
    /// The flag that gates the experiment (unset/disabled/failed -> fallback).
    public var flag: String
    /// The experiment whose variant is displayed.
    public var experiment: String
    /// Variant names the app recognizes; any other is shown as the fallback.
    public var variants: [String]
    /// The first identity (a logged-in user id, or an anonymous id).
    public var initialUser: String
}

/// A request pattern over the history, as scenarios write it.
public struct RequestMatch: Sendable, Equatable {
    /// The method (case-insensitive).
    public var method: String?
    /// The decoded path, without the query, exactly.
    public var path: String?
    /// A prefix of the decoded path.
    public var pathPrefix: String?
    /// The client that sent it.
    public var client: String?
    /// A user id of the query, the body or any batch event.
    public var user: String?
    /// A JSON subset the parsed body must contain.
    public var body: JSONValue?
    /// Only requests answered with this status.
    public var status: Int?
    /// The raw request target (percent-encoded path and query) exactly.
    public var target: String?
    /// Headers that must be present with these values (names case-insensitive).
    public var headers: [String: String]?
    /// The parsed body must equal this exactly (`null`: no body).
    public var bodyEquals: JSONValue?
    /// Only requests the client cancelled (`true`) or did not (`false`).
    public var cancelled: Bool?
    /// Headers the answer must carry with these values (names case-insensitive).
    public var responseHeaders: [String: String]? = nil
    /// Which API key the request sent, told by its place in the fixtures (the key itself is
    /// redacted everywhere it is shown).
    public var apiKey: APIKey? = nil

    /// An `api_key` matcher.
    public enum APIKey: Sendable, Equatable {
        /// The key at this index of the fixtures' `api_keys`.
        case fixture(index: Int)
        /// No key of the fixtures: none sent, or one the fixtures lack.
        case noneOfTheFixtures
    }
}

/// What an operation's outcome must be.
public enum OutcomeExpectation: Sendable, Equatable {
    /// The value must contain this JSON (objects: subset; others: equal).
    case value(JSONValue)
    /// An error of this kind (and status / code when given).
    case error(kind: String, status: Int?, code: Int?)
    /// Either/or: the outcome meets at least one of these (`{"any_of": [EXPECT, ...]}`).
    indirect case anyOf([OutcomeExpectation])
}

/// One step of a scenario.
public enum Step: Sendable {
    /// An SDK operation on a client; `label` names it for `await`; `count` > 1 starts that many at once.
    case sdk(client: String, operation: SDKOperation, label: String?, async: Bool, count: Int, expect: OutcomeExpectation?)
    /// An action of the reference app of `client` (each client has its own app instance, created
    /// on first use; the `app` section's client by default); `count` > 1 starts that many copies
    /// at once, labelled `label#1`...`label#N`, as `times` does for an SDK operation.
    case app(action: AppAction, label: String?, async: Bool, expect: OutcomeExpectation?, client: String, count: Int)
    /// Wait for a started operation (or group) and check its outcome.
    case await(label: String, expect: OutcomeExpectation?)
    /// Cancel a started operation's task.
    case cancel(label: String)
    /// Add a fault rule (JSON of the mock's fault format) under an id.
    case addFault(id: String, rule: JSONValue)
    /// Remove a fault rule.
    case removeFault(id: String)
    /// Release held requests of a fault (oldest first), with the natural response or an override.
    case release(fault: String, count: Int?, all: Bool, override: JSONValue?)
    /// Wait until a condition holds.
    case waitFor(WaitCondition)
    /// Advance the virtual clock, seconds.
    case advance(seconds: Double)
    /// Change the backend fixtures mid-run.
    case fixtures(FixtureChange)
    /// Writes an entry into a client's offline store as given (e.g. one an earlier SDK version
    /// wrote), kind `"flag"` or `"experiment"`, `json` the stored value.
    case seedStore(client: String, kind: String, user: String, key: String, json: JSONValue)
    /// Expect something of the caches, the persisted store, the app or the history.
    case expect(Expectation)
}

/// An action of the reference app (CONTRACT.md section 8).
public enum AppAction: Sendable, Equatable {
    case login(user: String)
    case logout
    case refresh
    case display
    case event(name: String)
    case reportState
}

/// A condition `wait_for` waits on.
public enum WaitCondition: Sendable, Equatable {
    /// At least `count` requests were ever held by fault `fault`.
    case held(fault: String, count: Int)
    /// At least `count` requests matching were received.
    case requests(RequestMatch, count: Int)
    /// Every started operation finished or parked.
    case quiescence

    /// `true` when the condition counts requests the client cancelled (`cancelled: true`).
    var awaitsCancellation: Bool {
        if case .requests(let match, _) = self { return match.cancelled == true }
        return false
    }
}

/// A fixture change.
public enum FixtureChange: Sendable, Equatable {
    case experimentStatus(key: String, status: String)
    case flagStatus(key: String, status: String)
    case flagRollout(key: String, percentage: Double)
    /// New allocations (percent per variant name) for an experiment's variants.
    case experimentAllocations(key: String, allocations: [String: Int])
    /// A new run of the experiment: ACTIVE, sticky assignments forgotten.
    case experimentRestart(key: String)
}

/// What an `expect` step checks.
public enum Expectation: Sendable, Equatable {
    /// The client's cached assignments / flags for a user, in order (`nil`: not checked).
    case cache(client: String, user: String, assignments: [String]?, flags: [String]?)
    /// Whether a persisted value exists for (user, key) in a client's store.
    case persisted(client: String, kind: String, user: String, key: String, present: Bool, value: JSONValue?)
    /// The number of requests matching (and optionally the batch sizes, in order).
    case requests(RequestMatch, count: Int?, batchSizes: [Int]?)
    /// What the app of `client` (`nil`: the `app` section's client) shows and as whom.
    case app(shown: String?, identity: String?, source: String?, client: String?)
    /// Whether the client's memory cache holds (user, key), kind `"flag"` or `"experiment"`, and
    /// for an assignment what it contains (`cached`).
    case cached(client: String, kind: String, user: String, key: String, present: Bool, value: JSONValue?)
    /// The app's reported state: the variant marked active (`nil`: none) for `experiment` (`nil`:
    /// the app's), of the app on `client` (`nil`: the `app` section's client).
    case reported(experiment: String?, variant: String?, client: String?)
    /// How many exposures the mock recorded that match (user, experiment, variant id; `nil`: any).
    case exposures(user: String?, experiment: String?, variantID: String?, count: Int)
}
