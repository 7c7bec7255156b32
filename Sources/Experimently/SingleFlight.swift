import Foundation

/// One shared in-flight request for a (user, key) pair and the callers waiting for it
/// (CONTRACT.md section 4, single flight; section 5.2 and 5.3).
///
/// Not synchronized on its own: every mutable field is read and written only while the owning
/// client's `Locked` state is held.
final class Flight<Value: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: fields are guarded by the client's state lock (see above).
    var waiters: [UInt64: CheckedContinuation<Value, Error>?] = [:]
    var preCancelled: Set<UInt64> = []
    var result: Result<Value, Error>?
    var task: Task<Void, Never>?
    /// Set by `close()`: the request must be cancelled as soon as its task exists.
    var closed = false
    /// The client's epoch when the request started; a different epoch at completion means a
    /// clear or close happened meanwhile, so the answer must not be written (section 5.1).
    let epoch: UInt64

    init(epoch: UInt64) { self.epoch = epoch }
}
