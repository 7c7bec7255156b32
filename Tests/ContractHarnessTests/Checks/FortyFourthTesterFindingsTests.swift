import XCTest
import Foundation
@testable import ContractHarness

/// Findings of the forty-fourth outside tester (`/work/attack48/FINDINGS.md`), who tried to make
/// correct SDKs fail `single_flight`'s retry rule (forty-second tester, F1), proven both ways.
///
/// - F1 (false failure): of two copies of a `times` step, the second may reach the SDK after the
///   first one's request failed at once (500, 404, a dropped connection); it finds nothing in
///   flight and nothing cached and sends its own request. The rule read the copies' invoke markers
///   as proof that both waited on the first request (6 in 100 runs; every run of a written
///   interleaving). A call counts as a waiter now only when it is the one lookup that can have
///   sent the failed request, or the runner saw it settle in an earlier step than the failure.
/// - F2 (false failure, out of process): an HTTP stack that follows a 3xx by itself (URLSession
///   does) sent the next request; a redirect is no failure now.
final class FortyFourthTesterFindingsTests: XCTestCase {
    /// Every correct SDK passes the files, three runs each (in process, the redirect and the
    /// dropped connections are skipped: the built-in drivers lack the TCP transport they need).
    func testCorrectSDKsPassTheFiles() throws {
        let dir = try scratchDirectory("forty-fourth-tester")
        for sdk in [[], ["--mutant", "none"], ["--sdk-command", TesterFixtures.python]] {
            for _ in 0..<3 {
                let (status, out) = try HarnessProcess.run(["run", TesterFixtures.folder("forty-fourth-tester").path] + sdk + ["--verdict", "v.json"], in: dir)
                XCTAssertEqual(status, 0, "\(sdk): \(out)")
                XCTAssertTrue(out.contains(" passed, 0 failed") && !out.contains("\n0 passed"), "\(sdk): \(out)")
            }
        }
    }

    /// The written interleaving in which the second copy starts after the first one's failure
    /// passes on the shipping SDK (it failed every run).
    func testTheWrittenInterleavingPasses() throws {
        let dir = try scratchDirectory("forty-fourth-interleaved")
        let (status, out) = try HarnessProcess.run(["run", TesterFixtures.folder("forty-fourth-tester-interleaved").path, "--verdict", "v.json"], in: dir)
        XCTAssertEqual(status, 0, out)
        XCTAssertTrue(out.contains("1 passed, 0 failed"), out)
    }
}
