import Foundation

extension MockBackend.State {
    /// The observer with the event's place in line.
    struct LinedObserver {
        let call: @Sendable (MockEvent) -> Void
        let ticket: UInt64
    }

    /// The observer, if any, with the next place in line; called under the backend's lock in the
    /// same critical section as the change the event reports, so tickets follow that order.
    /// Every ticket taken must be delivered (`ObserverLine.deliver`), or later events wait forever.
    mutating func takeObserver() -> LinedObserver? {
        guard let observer else { return nil }
        defer { nextEventTicket &+= 1 }
        return LinedObserver(call: observer, ticket: nextEventTicket)
    }
}

/// Delivers the backend's observer events one at a time, in the order of their tickets (taken
/// under the backend's lock), although each is delivered outside that lock by the thread that
/// caused it: a thread whose turn has not come waits until the earlier events are delivered.
/// The observer must not wait for another request to move (it records and pokes; the
/// harness's port observer does exactly that). State behind an `NSCondition`.
final class ObserverLine: @unchecked Sendable {
    // @unchecked Sendable: `next` is only read or written while `condition` is locked.
    private let condition = NSCondition()
    private var next: UInt64 = 0

    /// Runs `body` once every event with an earlier ticket has been delivered.
    func deliver(_ ticket: UInt64, _ body: () -> Void) {
        condition.lock()
        while next != ticket { condition.wait() }
        condition.unlock()
        body()
        condition.lock()
        next &+= 1
        condition.broadcast()
        condition.unlock()
    }
}
