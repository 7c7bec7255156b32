import Foundation

/// A sticky assignment: once a user is bucketed into a variant, every later assign call for the
/// same experiment returns it (CONTRACT.md section 2, assign).
public struct StickyAssignment: Codable, Sendable, Equatable {
    /// The experiment key.
    public var experimentKey: String
    /// The user id.
    public var userID: String
    /// The assigned variant's id.
    public var variantID: String
    /// The assigned variant's name.
    public var variantName: String
    /// Whether the variant is the control.
    public var isControl: Bool
    /// When the assignment was first made (backend clock).
    public var assignedAt: Date

    enum CodingKeys: String, CodingKey {
        case experimentKey = "experiment_key", userID = "user_id", variantID = "variant_id", variantName = "variant_name"
        case isControl = "is_control", assignedAt = "assigned_at"
    }
}

/// One exposure: recorded for every eligible assign call, new or sticky (never for ineligible users).
public struct Exposure: Codable, Sendable, Equatable {
    /// The experiment key.
    public var experimentKey: String
    /// The user id.
    public var userID: String
    /// The variant id served.
    public var variantID: String
    /// When it was served (backend clock).
    public var at: Date

    enum CodingKeys: String, CodingKey { case experimentKey = "experiment_key", userID = "user_id", variantID = "variant_id", at }
}

/// One tracked event as stored by `/track` or `/batch`.
public struct StoredEvent: Codable, Sendable, Equatable {
    /// Sequential event id, from 1.
    public var id: Int
    /// `track` or `batch`.
    public var source: String
    /// The event object exactly as received (parsed JSON).
    public var event: JSONValue
    /// When it was stored (backend clock).
    public var receivedAt: Date
    /// The event with member names told apart scalar by scalar, when `event` merged two
    /// canonically equivalent names (`"k\u0301"` and `"\u1e31"` in `metadata`, both kept by the
    /// backend); else `nil`. The journal writes it instead of `event`.
    package var exact: ExactJSON? = nil

    enum CodingKeys: String, CodingKey { case id, source, event, receivedAt = "received_at" }

    /// An event as stored.
    public init(id: Int, source: String, event: JSONValue, receivedAt: Date) {
        self.id = id
        self.source = source
        self.event = event
        self.receivedAt = receivedAt
    }
}

/// The mutable state the backend built up: sticky assignments, exposures and stored events.
public struct BackendStateSnapshot: Codable, Sendable, Equatable {
    /// Sticky assignments in the order they were made.
    public var assignments: [StickyAssignment] = []
    /// Exposures in the order they were recorded.
    public var exposures: [Exposure] = []
    /// Stored events in the order they were accepted.
    public var events: [StoredEvent] = []

    /// Creates an empty state.
    public init() {}

    /// The sticky assignment of `userID` in `experimentKey` (both exact: Unicode scalars), if any.
    public func assignment(experimentKey: String, userID: String) -> StickyAssignment? {
        assignments.first { $0.experimentKey.isExactly(experimentKey) && $0.userID.isExactly(userID) }
    }
}
