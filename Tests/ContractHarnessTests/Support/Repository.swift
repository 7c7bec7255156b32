import Foundation

/// The package's root folder (the nearest ancestor of this file holding `Package.swift`), so tests
/// find `scenarios/`, `golden-vectors/` and `../shared/` wherever the test file sits in the tree.
enum Repository {
    static let root: URL = {
        var folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while folder.path != "/" {
            if FileManager.default.fileExists(atPath: folder.appendingPathComponent("Package.swift").path) { return folder }
            folder.deleteLastPathComponent()
        }
        fatalError("no Package.swift above \(#filePath)")
    }()
}
