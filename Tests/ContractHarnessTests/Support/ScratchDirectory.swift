import XCTest
import Foundation

extension XCTestCase {
    /// A fresh, empty directory under the temporary directory, named `prefix-UUID`, removed when
    /// the test ends (a teardown block).
    ///
    /// - Throws: when the directory cannot be created.
    func scratchDirectory(_ prefix: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: url) }
        return url
    }
}
