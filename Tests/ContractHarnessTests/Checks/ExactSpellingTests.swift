import XCTest
@testable import ContractHarness

/// `Checks.exact` is the identity spelling of the checks (Unicode scalars, CONTRACT.md section 4):
/// the byte-level writer must give exactly the text of the plain formula it replaced.
final class ExactSpellingTests: XCTestCase {
    private func formula(_ text: String) -> String {
        text.unicodeScalars.map { String($0.value, radix: 16) }.joined(separator: ".")
    }

    func testSameTextAsTheFormulaOnAwkwardIdentities() {
        let samples = ["", "a", "user-1", "caf\u{E9}", "cafe\u{301}", "\u{0}", "\u{10FFFF}", "\u{FFFF}\u{10000}",
                       "🇫🇷👩‍👩‍👧", "\u{1}\u{F}\u{10}\u{FF}\u{100}\u{FFF}\u{1000}", String(repeating: "x\u{2028}", count: 40)]
        for s in samples { XCTAssertEqual(Checks.exact(s), formula(s), "\(Array(s.unicodeScalars))") }
        // Every scalar width, and values at each hex-digit boundary.
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let scalars = (0..<Int.random(in: 0...6, using: &rng)).compactMap { _ in
                Unicode.Scalar(UInt32.random(in: 0...0x10FFFF, using: &rng))
            }
            var s = ""
            s.unicodeScalars.append(contentsOf: scalars)
            XCTAssertEqual(Checks.exact(s), formula(s))
        }
    }

    func testCanonicallyEquivalentSpellingsStayApart() {
        XCTAssertNotEqual(Checks.exact("caf\u{E9}"), Checks.exact("cafe\u{301}"))
        XCTAssertEqual("caf\u{E9}", "cafe\u{301}")   // what Swift's String equality would have merged
    }
}
