import Foundation
import ExperimentlyMock

extension Step {
    /// A one-line description of the step for the HTML report, where a step that records no
    /// history event of its own (a fault definition, a `wait_for`, an assertion) would otherwise
    /// be invisible: `fault slow-assign added: {"match":...}`, `wait_for 1 request held by fault
    /// slow-assign`, `assert`. At most 160 characters; `Documentation/Report.md`.
    var summary: String {
        let text: String
        switch self {
        case .sdk(let client, _, let label, _, _, _): text = "SDK operation on client \(client)" + (label.map { " as \($0)" } ?? "")
        case .app(let action, let label, _, _, let client, _): text = "app \(action) on client \(client)" + (label.map { " as \($0)" } ?? "")
        case .await(let label, _): text = "await \(label)"
        case .cancel(let label): text = "cancel \(label)"
        case .addFault(let id, let rule): text = "fault \(id) added: \(rule.jsonText)"
        case .removeFault(let id): text = "fault \(id) removed"
        case .release(let fault, let count, let all, _): text = "release \(all ? "all" : "\(count ?? 1)") held by fault \(fault)"
        case .waitFor(let condition):
            switch condition {
            case .held(let fault, let count): text = "wait_for \(count) request\(count == 1 ? "" : "s") held by fault \(fault)"
            case .requests(_, let count): text = "wait_for \(count) matching request\(count == 1 ? "" : "s")"
            case .quiescence: text = "wait_for quiescence"
            }
        case .advance(let seconds): text = "advance the clock \(seconds) s"
        case .fixtures: text = "fixtures changed"
        case .seedStore(let client, let kind, let user, let key, _): text = "seed_store \(kind) \(key) of \(user) on client \(client)"
        case .expect: text = "assert"
        }
        return text.count > 160 ? String(text.prefix(159)) + "…" : text
    }
}
