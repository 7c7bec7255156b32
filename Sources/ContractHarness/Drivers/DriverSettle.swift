import Foundation
import ExperimentlyMock

/// Exact quiescence out of process: asks an adapter that declares `settle` whether every running
/// `perform` of one scope has reached its wait (joined a shared request, or sent its own and waits
/// for the answer), and remembers the answer for the state it was asked in
/// (Documentation/DriverProtocol.md, "settle").
///
/// In process the runner sees the SDK's tasks (the operations' executor is idle) and its
/// URLSession tasks. Out of process it sees only the requests parked at the mock, and a second
/// caller of a single-flight lookup would count as settled as soon as the first caller's request is
/// parked, before it joined it (a `cancel` of the first caller then cancels the only real waiter).
/// With `settle` the runner counts the adapter settled only when the adapter said so after the
/// last `perform`, `cancel` or `clock` it was sent (the `epoch`) and with the mock as it is now
/// (the `mock` stamp: requests seen, the parked ones): anything newer asks again.
///
/// One gate per scope (a scenario run), shared by its clients; state is in a `HarnessLocked`.
final class DriverSettleGate: Sendable {
    /// The state an answer is valid for.
    struct Stamp: Equatable, Sendable {
        /// Requests, cancels and clock moves sent to the scope so far.
        var epoch: Int
        /// The mock's state: requests seen, then the sequence numbers of the parked ones.
        var mock: [Int]
    }
    private struct State {
        var epoch = 0
        /// The stamp of the `settle` on its way, if any (one at a time).
        var asking: Stamp?
        /// The stamp of the last `settle` the adapter answered with `settled: true`.
        var confirmed: Stamp?
        /// `settle` requests sent (for tests and `describe`).
        var asked = 0
        /// Answers `settled: false` so far (the adapter's own bounded wait ended first).
        var unsettledAnswers = 0
        /// The adapter refused a `settle` or died: asking again would only repeat that (the
        /// problem is reported; the waiting step meets its deadline).
        var failed = false
    }
    private let state = HarnessLocked(State())
    /// The scope's id on the adapter (`s<N>`).
    let scope: String
    private let connection: DriverConnection

    init(scope: String, connection: DriverConnection) {
        self.scope = scope
        self.connection = connection
    }

    /// Something was sent to the scope that can wake or start an operation (`perform`, `cancel`,
    /// `clock`): earlier answers no longer hold. Called after the request is written.
    func sent() {
        state.withLock { $0.epoch += 1 }
    }

    /// `settle` requests sent so far.
    var asked: Int { state.withLock { $0.asked } }

    /// Why the gate does not count the scope settled now, for a step's timeout message (`nil`
    /// when it has nothing to add): a `settle` still unanswered, a last answer `settled: false`,
    /// or an adapter that refused `settle` or died.
    var describe: String? {
        state.withLock { s in
            if s.failed { return "the adapter refused `settle`, answered it outside the protocol (see the driver protocol check) or died (scope \(scope))" }
            if s.unsettledAnswers > 0 {
                return "the adapter answered `settle` with `settled: false` \(s.unsettledAnswers) of \(s.asked) time(s) (scope \(scope))"
                    + (s.asking != nil ? ", and the last one asked is unanswered" : "")
            }
            if s.asking != nil { return "still waiting for the adapter's reply to `settle` (scope \(scope), asked \(s.asked) time(s))" }
            return nil
        }
    }

    /// `true` when the adapter said it was settled in exactly the present state (`mock` is the
    /// mock's stamp now); otherwise asks it (one `settle` at a time) and returns `false`; `poke`
    /// is called when the answer arrives, so the caller's condition is checked again.
    func settled(mock: [Int], poke: @escaping @Sendable () -> Void) -> Bool {
        let ask: Stamp? = state.withLock { s in
            let now = Stamp(epoch: s.epoch, mock: mock)
            if s.confirmed == now || s.asking != nil || s.failed { return nil }
            s.asking = now
            s.asked += 1
            return now
        }
        guard let ask else { return state.withLock { $0.confirmed == Stamp(epoch: $0.epoch, mock: mock) } }
        if connection.death != nil {
            state.withLock { $0.failed = true; $0.asking = nil }
            return false
        }
        var request = DriverRequest(id: 0, type: .settle)
        request.scope = scope
        let slot = connection.send(request, scope: scope)
        Task { [state, connection] in
            let result = await slot.value()
            var malformed: JSONValue?
            // `settled: false` (the adapter's bounded wait ended first) is asked again at the next
            // check (the recorder re-checks every 20 ms while it waits), without a poke: no busy loop.
            let answered = state.withLock { s -> Bool in
                s.asking = nil
                switch result {
                case .success(let json):
                    switch json["settled"] {
                    case .bool(true)?:
                        s.confirmed = ask
                        return true
                    case .bool(false)?:
                        s.unsettledAnswers += 1
                        return false
                    default:
                        // Not the protocol: a failure quoting it, never a wait blamed on the SDK.
                        s.failed = true
                        malformed = json
                        return false
                    }
                case .failure:
                    s.failed = true
                    return false
                }
            }
            if let malformed {
                connection.noteProblem("reply to settle (request \(slot.id)): expected {\"settled\": true or false}, found \(malformed.jsonText)")
            }
            if answered { poke() }
        }
        return false
    }
}

/// Marks the `perform` calls the reference app makes (task-local), so that out-of-process
/// quiescence can match the runner's own pending operations with the `perform` requests sent.
enum DriverCallOrigin {
    /// `true` inside a call the reference app makes on its client.
    @TaskLocal static var app = false
}
