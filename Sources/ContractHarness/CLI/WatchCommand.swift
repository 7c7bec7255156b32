import Foundation
import ExperimentlyMock

/// `contract-harness run ... --watch`: runs, then reruns whenever a scenario file under the
/// given paths changes (added, removed, or a new size or modification time), by polling every
/// half second (no file-system notification dependency), until SIGINT or SIGTERM (exit 130 or
/// 143). Documented in `Documentation/CLI.md`.
enum WatchCommand {
    /// How often the files are compared, seconds.
    static let interval = 0.5

    /// A file's identity for change detection: size and modification time.
    struct Stamp: Equatable { let size: UInt64; let modified: Date }

    /// The scenario files under `paths` and their stamps; a path that does not exist has none.
    static func snapshot(_ paths: [String]) -> [String: Stamp] {
        let files = (try? HarnessCommand.discover(paths.filter { FileManager.default.fileExists(atPath: $0) })) ?? []
        var out: [String: Stamp] = [:]
        for file in files {
            guard let a = try? FileManager.default.attributesOfItem(atPath: file) else { continue }
            out[file] = Stamp(size: (a[.size] as? NSNumber)?.uint64Value ?? 0, modified: a[.modificationDate] as? Date ?? .distantPast)
        }
        return out
    }

    static func main(_ arguments: [String], driver: any SDKDriver) async -> Int32 {
        let paths: [String]
        do {
            let options = try HarnessCommand.parseRun(arguments)
            paths = options.paths
        } catch let e as HarnessCommand.UsageError {
            return e.message.isEmpty ? HarnessCommand.Exit.ok.rawValue : HarnessCommand.usageError(e.message)
        } catch {
            return HarnessCommand.usageError("\(error)")
        }
        // Once a run found files, the watch goes on when they (or their folder) are removed: it
        // waits for them to come back (it ended at once before: an outside tester's leftover).
        var watched = false
        while true {
            let before = snapshot(paths)
            if watched && before.isEmpty {
                HarnessCommand.say("watch: no scenario file under \(paths.joined(separator: " ")) now; waiting for one")
            } else {
                let status = await HarnessCommand.run(arguments, driver: driver)
                if status == HarnessCommand.Exit.usage.rawValue && before.isEmpty && !watched {
                    return status   // nothing to watch: the paths are wrong
                }
                if !before.isEmpty { watched = true }
            }
            // Between runs nothing else handles the signals: the run's handlers are gone and left
            // them ignored, and a new dispatch signal source does not see them again on Linux, so
            // plain handlers end the process (nothing is half-written between runs). They are in
            // place before the line that says the watch waits.
            signal(SIGINT) { _ in _exit(130) }
            signal(SIGTERM) { _ in _exit(143) }
            if !before.isEmpty || !watched { HarnessCommand.say("watch: waiting for a change to \(before.count) scenario file(s) under \(paths.joined(separator: " ")) (Ctrl-C stops)") }
            var changed: [String] = []
            while changed.isEmpty {
                try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
                let now = snapshot(paths)
                changed = Set(now.keys).union(before.keys).filter { now[$0] != before[$0] }.sorted()
            }
            HarnessCommand.say("watch: changed: \(changed.map { ($0 as NSString).lastPathComponent }.joined(separator: ", ")); running again")
        }
    }
}
