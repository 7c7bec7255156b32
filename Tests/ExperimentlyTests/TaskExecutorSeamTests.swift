import Foundation
import XCTest
@testable import Experimently

/// The task executor seam (issue 15): every task the client creates prefers the executor it was
/// given; without one (the default) the client works as before.
final class TaskExecutorSeamTests: SDKTestCase {
    /// A serial executor that counts the jobs it ran. The count lives behind an `NSLock`.
    final class CountingExecutor: TaskExecutor, @unchecked Sendable {
        // @unchecked Sendable: `jobs` is guarded by `lock`; `queue` is `let`.
        private let queue = DispatchQueue(label: "seam-test")
        private let lock = NSLock()
        private var jobs = 0
        var count: Int { lock.withLock { jobs } }

        func enqueue(_ job: consuming ExecutorJob) {
            let unowned = UnownedJob(job)
            lock.withLock { jobs += 1 }
            queue.async { unowned.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }

    func client(_ stub: Stub, executor: CountingExecutor?) -> ExperimentationClient {
        let config = SdkConfig(baseURL: stub.baseURL, apiKey: "test-key")
        return ExperimentationClient(config: config, session: stub.session(), offlineStore: nil, clock: ManualClock(),
                                     taskExecutor: executor)
    }

    func testTheClientsOwnTasksPreferTheGivenExecutor() async throws {
        let stub = Stub { _, _ in .respond(200, Body.flag("f")) }
        let executor = CountingExecutor()
        let seamed = client(stub, executor: executor)
        // The caller runs elsewhere (a plain task): only the tasks the SDK creates can land on the executor.
        let result = try await Task { try await seamed.evaluateFlag("f", user: User(id: "u")) }.value
        XCTAssertTrue(result.enabled)
        // The single-flight task and the request deadline task: at least one job each (an SDK that
        // created them with a plain `Task {}` would leave the count at 0).
        XCTAssertGreaterThanOrEqual(executor.count, 2)

        // `nil` and the initializer without the parameter work as before.
        let plain = client(stub, executor: nil)
        _ = try await Task { try await plain.evaluateFlag("f", user: User(id: "v")) }.value
        let defaulted = ExperimentationClient(config: SdkConfig(baseURL: stub.baseURL, apiKey: "test-key"), session: stub.session(),
                                              offlineStore: nil, clock: ManualClock())
        _ = try await Task { try await defaulted.evaluateFlag("f", user: User(id: "w")) }.value
        XCTAssertEqual(stub.requestCount, 3)
    }
}
