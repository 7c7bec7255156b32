import Foundation
import ExperimentlyMock

// Exact quiescence for reference-app operations (issue 11 section 3, issue 10 section 4): an app
// action waits on the SDK calls it makes, not on any parked request of its client.
extension ScenarioExecution {
    /// Whether `r` can be the request of an operation of `client` (for `user` and the cached
    /// (kind, key) `key`, when known) that began when the mock had received `after` requests: the
    /// one matching of requests to SDK operations that quiescence and `inert` use.
    static func owns(_ r: RequestRecord, client: String, user: String?, key: (kind: String, key: String)?, after: Int) -> Bool {
        r.client.isExactly(client) && r.seq > after && (user == nil || r.users.containsExactly(user!))
            && (key == nil || (r.key?.kind == key!.kind && r.key.map { $0.key.isExactly(key!.key) } ?? false))
    }

    /// The (kind, key) an SDK operation caches under, as `Op.key` holds it.
    static func cachedKey(of op: SDKOperation) -> (kind: String, key: String)? {
        op.cacheKey.map { (kind: $0.kind == "flag" ? "flag" : "experiment", key: $0.key) }
    }

    /// Whether the reference apps of the clients of the waiting app operations in `waiting` are
    /// settled, given the mock's `parked` requests (parked, neither answered nor cancelled):
    /// `nil` when one is not, else, for each tracking call an app is inside, the indices into
    /// `trackingRequests` it may own (each needs one of its own, matched with the runner's
    /// tracking operations by ``everyOneHasItsOwn(_:)``).
    ///
    /// The rule, per app (one per client): an app operation (`login`, `logout`, `display`,
    /// `event`, `refresh`) is settled when it finished, or when every SDK call its app is inside
    /// now (`ReferenceApp.callsInFlight`: the `call` ... `returned` calls and the app's own
    /// `clearCache` and cache queries) is settled, and the operations' executor is idle (checked
    /// by the caller). A call is settled when
    /// - it is a lookup (`evaluateFlag`, `getAssignment`) and a request of its own is parked:
    ///   same client, the call's user and key, received after the call began; or it is joined
    ///   (single flight) to a parked request of its client, user and key received before it
    ///   began and after the client's latest clear (`clearBarrier`), which another waiting call
    ///   owns (a runner operation's, or another app call begun before that request was
    ///   received), or which no `cancel` step can have left without a caller before the call began;
    /// - it is a tracking call (`track`, `trackWithStatus`, `trackBatch`) with a parked tracking
    ///   request of its own (its client and user, received after it began), distinct from every
    ///   other tracking operation's;
    /// - never, for a call that sends no request (`clearCache`, a cache query): it is settled
    ///   only once it returned.
    /// An app operation inside no SDK call (waiting for an earlier logout of its app, or for the
    /// fetch before its own) waits only on its app's other calls, or runs on the executor (the
    /// app's fetch tasks prefer the operations' executor), so "every call of its app settled and
    /// the executor idle" settles it exactly when what it waits for is settled. Before, any parked
    /// request of the client that arrived after the action began would do, so the next step could
    /// begin before the app's own request was sent.
    func appsSettled(_ waiting: [Op], parked: [RequestRecord], trackingRequests: [RequestRecord]) -> [[Int]]? {
        let tracking: Set<String> = ["track", "trackWithStatus", "trackBatch"]
        var clients: [String] = []
        for op in waiting where op.name.hasPrefix("app.") && !clients.contains(where: { $0.isExactly(op.client) }) {
            clients.append(op.client)
        }
        var trackerNeeds: [[Int]] = []
        for client in clients {
            guard let app = withAppsLocked({ $0[ExactKey(client)] }) else { continue }
            let calls = app.callsInFlight
            for (i, call) in calls.enumerated() {
                let op = call.operation
                let user = Self.user(of: op)
                if tracking.contains(op.name) {
                    trackerNeeds.append(trackingRequests.indices.filter {
                        Self.owns(trackingRequests[$0], client: client, user: user, key: nil, after: call.since)
                    })
                    continue
                }
                guard let key = Self.cachedKey(of: op) else { return nil }
                let own = parked.contains { Self.owns($0, client: client, user: user, key: key, after: call.since) }
                if own { continue }
                // Single flight: an earlier parked request another waiting call owns. The clear
                // barrier is the one when the call began: a clear after it detaches the request
                // the call waits on, it does not move the call (before, the latest clear was
                // used, and calls joined before a logout were never settled).
                let cleared = clearBarrier(of: client, atOrdinal: call.ordinal)
                let joined = parked.contains { r in
                    guard Self.owns(r, client: client, user: user, key: key, after: cleared), r.seq <= call.since else { return false }
                    let runnerOwns = waiting.contains { w in
                        !w.name.hasPrefix("app.") && w.user != nil && w.key != nil && Self.owns(r, client: w.client, user: w.user, key: w.key, after: w.barrier)
                    }
                    let appOwns = calls.indices.contains { j in
                        j != i && Self.owns(r, client: client, user: Self.user(of: calls[j].operation),
                                            key: Self.cachedKey(of: calls[j].operation) ?? ("", ""), after: calls[j].since)
                    }
                    // No `cancel` between the request's arrival and the call's start: whoever
                    // started it was still waiting when the call began, so the call joined it,
                    // and a later cancel of the starter keeps the request for it (CONTRACT.md
                    // section 5.3; a third outside tester's strict-mode race failed "not
                    // quiescent" every run, in process too, when an owner was required).
                    // And somebody waited on it when the call began: a request whose every
                    // caller had finished (its own deadline) was let go by the SDK.
                    return runnerOwns || appOwns
                        || (!cancelled(after: r.seq, before: call.startEvent) && callerWaited(on: r, atEvent: call.startEvent, except: nil))
                }
                if !joined { return nil }
            }
        }
        return trackerNeeds
    }

    /// Whether an SDK call of the reference app on `r`'s client is in flight now for `r`'s user
    /// and key (it may wait on `r`, single flight).
    func appCallWaits(on r: RequestRecord) -> Bool {
        guard let client = r.client, let app = withAppsLocked({ $0[ExactKey(client)] }) else { return false }
        return app.callsInFlight.contains { call in
            guard let key = Self.cachedKey(of: call.operation) else { return false }
            return Self.owns(r, client: client, user: Self.user(of: call.operation), key: key, after: clearBarrier(of: client, atOrdinal: call.ordinal))
        }
    }

    /// Whether the reference app on `client` can only move when a step acts (`inert` for an app
    /// action; evaluated only when quiescent): it is inside at least one SDK call, and every call
    /// it is inside waits on parked requests, none answered or cancelled (an answered one may
    /// still be travelling through the SDK):
    /// - a lookup (`evaluateFlag`, `getAssignment`) has requests of its own (its client, user and
    ///   key, received after it began and before the next step began), all parked; or none, and
    ///   it is joined (single flight) to a parked request for its client, user and key received
    ///   before it began and after the clear barrier it began with;
    /// - a tracking call has tracking requests of its own (its client and user, received after it
    ///   began), all parked;
    /// - any other call (`clearCache`, a cache query) sends no request: never inert.
    /// An app action inside no call waits on its app's calls (an earlier logout, the fetch before
    /// its own), so every action of an app is inert exactly when the app's calls are. Before, an
    /// app action counted as its own every request of its client since it began, answered ones
    /// included, so it was never inert, and an `await` or `wait_for` that only a later step could
    /// satisfy waited out the step limit and failed instead of being decided infeasible.
    func appInert(client: String, requests: [RequestRecord], cancelling: Set<Int> = [], processed: Bool = false, answeredAt: [Int: Int] = [:]) -> Bool {
        guard let app = withAppsLocked({ $0[ExactKey(client)] }) else { return false }
        let calls = app.callsInFlight
        if calls.isEmpty { return false }
        let tracking: Set<String> = ["track", "trackWithStatus", "trackBatch"]
        let waiting: (RequestRecord) -> Bool = { $0.parked && !$0.answered && !$0.cancelled && !cancelling.contains($0.seq) }
        return calls.allSatisfy { call in
            let op = call.operation
            let user = Self.user(of: op)
            // Its own requests end where the next step began (`ownWindowEnd`): a later call's
            // request for the same user and key is not this call's.
            if tracking.contains(op.name) {
                let own = ownRequests(requests, client: client, since: call.since, ordinal: call.ordinal, startEvent: call.startEvent, answeredAt: answeredAt) {
                    ["/api/v1/tracking/track", "/api/v1/tracking/batch"].contains($0.path)
                        && Self.owns($0, client: client, user: user, key: nil, after: call.since)
                }
                return Self.waitsOnParked(own, cancelling: cancelling, processed: processed)
            }
            guard let key = Self.cachedKey(of: op) else { return false }
            let own = ownRequests(requests, client: client, since: call.since, ordinal: call.ordinal, startEvent: call.startEvent, answeredAt: answeredAt) {
                Self.owns($0, client: client, user: user, key: key, after: call.since)
            }
            if !own.isEmpty { return Self.waitsOnParked(own, cancelling: cancelling, processed: processed) }
            // Joined: the clear barrier is the one when the call began (a later clear detaches
            // the request the call waits on; it does not make the call move).
            let cleared = clearBarrier(of: client, atOrdinal: call.ordinal)
            return requests.contains { r in r.seq <= call.since && waiting(r) && Self.owns(r, client: client, user: user, key: key, after: cleared) }
        }
    }
}
