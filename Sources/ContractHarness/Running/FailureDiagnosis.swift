import Foundation
import ExperimentlyMock

extension ScenarioExecution {
    /// What the SDK did wrong when a step cannot finish, in the contract's terms, or `nil` when
    /// the hang has no known cause (the caller then describes what is pending).
    ///
    /// Recognized: an operation started after its client's `clearCache()`/`close()` that sent no
    /// request of its own and waits on a request for the same (user, key) sent before the clear:
    /// the SDK kept its in-flight table across the clear (CONTRACT.md section 5, defects 1-2: a
    /// clear detaches the requests in flight; issue 11 section 9). Identity is compared by
    /// Unicode scalars.
    func diagnoseHang() -> String? {
        let requests = port.requests()
        for op in pending() where op.barrier > 0 {
            guard let user = op.user, let key = op.key else { continue }
            let same = requests.filter { r in
                r.client.isExactly(op.client) && r.users.contains { $0.unicodeScalars.elementsEqual(user.unicodeScalars) }
                    && r.key?.kind == key.kind && (r.key?.key.unicodeScalars.elementsEqual(key.key.unicodeScalars) ?? false)
            }
            guard !same.contains(where: { $0.seq > op.barrier }),
                  let old = same.last(where: { $0.seq <= op.barrier && !$0.answered }) else { continue }
            let clear = recorder.snapshot.last { $0.kind == .invoke && $0.client.isExactly(op.client) && ["clearCache", "close"].contains($0.name ?? "") }
            return "\(op.label) (\(op.name) of user '\(Attribution.show(user))', \(key.kind) '\(Attribution.show(key.key))') started after "
                + "\(clear?.name ?? "clearCache")() on client '\(op.client)' but sent no request of its own: it waits on request #\(old.seq), "
                + "sent before the clear (\(old.summary)). CONTRACT.md section 5 (defects 1 and 2): a clear detaches the requests in flight, "
                + "so the next call sends its own request; this SDK kept its in-flight table across the clear"
        }
        return nil
    }
}

extension ScenarioExecution {
    /// A step's failure `message` with the contract rule the scenario is about appended (its
    /// `source`, e.g. "CONTRACT.md section 5, defect 2 (...)"), unless the message already names
    /// one: every failure says which rule was broken (issue 11 section 9).
    static func naming(_ message: String, source: String?) -> String {
        guard let source, source.contains("CONTRACT.md"), !message.contains("CONTRACT.md") else { return message }
        return message + " [broken rule: \(source)]"
    }
}
