import XCTest
import Foundation
@testable import ContractHarness

/// The answers one `release` or `advance` step freed are one canonical run right after its
/// marker, whatever a request the SDK sent in reaction to one of them did to their recorded order
/// (attack finding 6, the rest of the class).
final class FreedAnswersOrderTests: XCTestCase {
    func request(_ seq: Int, client: String, path: String, answered: Bool) -> RequestRecord {
        var r = RequestRecord.placeholder(seq: seq)
        r.client = client
        r.method = "POST"
        r.path = path
        r.target = path
        r.status = answered ? 200 : nil
        r.answered = answered
        return r
    }

    func event(_ kind: HistoryEvent.Kind, _ r: RequestRecord? = nil, name: String? = nil, time: Double = 0) -> HistoryEvent {
        HistoryEvent(index: 0, step: 0, time: time, kind: kind, client: r?.client, label: nil, name: name,
                     detail: nil, outcome: nil, request: r)
    }

    func testAReactionRequestAmongFreedAnswersDoesNotChangeTheCanonicalHistory() {
        for marker in ["release", "advance"] {
            let a = request(1, client: "a", path: "/api/v1/tracking/assign", answered: true)
            let b = request(2, client: "b", path: "/api/v1/tracking/assign", answered: true)
            let c = request(3, client: "a", path: "/api/v1/tracking/batch", answered: true)
            let prefix = [event(.request, a), event(.request, b), event(.marker, name: marker)]
            let (ra, rb, qc, rc) = (event(.response, a, time: 5), event(.response, b, time: 5), event(.request, c, time: 5), event(.response, c, time: 5))
            let orders: [[HistoryEvent]] = [[ra, rb, qc, rc], [ra, qc, rb, rc], [rb, ra, qc, rc], [ra, qc, rc, rb], [rb, qc, ra, rc]]
            let digests = Set(orders.map { ScenarioExecution.digest(ScenarioExecution.canonical(prefix + $0)) })
            XCTAssertEqual(digests.count, 1, marker)
            // The freed answers come first; the reaction's request and answer keep their order.
            let canonical = ScenarioExecution.canonical(prefix + [rb, qc, ra, rc])
            XCTAssertEqual(canonical.suffix(4).map(\.kind), [.response, .response, .request, .response], marker)
            // A request that arrived during the step is not moved ahead of its own arrival.
            let late = ScenarioExecution.freedAnswersFirst(prefix + [qc, rc, ra, rb])
            XCTAssertEqual(late.suffix(4).map { $0.request?.seq }, [1, 2, 3, 3])
        }
        // Outside a release or advance step nothing moves.
        let a = request(1, client: "a", path: "/x", answered: true)
        let c = request(3, client: "a", path: "/y", answered: true)
        let plain = [event(.request, a), event(.marker, name: "cancel"), event(.request, c), event(.response, a)]
        XCTAssertEqual(ScenarioExecution.freedAnswersFirst(plain), plain)
    }
}
