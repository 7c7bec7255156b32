import Foundation

/// A minimal adapter for tests: it answers `hello` (SDK "tiny", the given capabilities),
/// `create_client`, `close_client` and `shutdown`, and never answers anything else.
enum TinyAdapter {
    /// Writes the adapter into `dir` and returns the `--sdk-command` that runs it.
    static func write(in dir: URL, name: String = "tiny", capabilities: [String]) throws -> String {
        let list = capabilities.map { "\"\($0)\"" }.joined(separator: ",")
        let file = dir.appendingPathComponent("\(name).py")
        try Data("""
        import json, sys
        for line in sys.stdin:
            m = json.loads(line)
            t = m.get("type")
            if t == "hello":
                r = {"protocol": "experimently-driver/1", "sdk": {"name": "\(name)", "version": "1"}, "capabilities": [\(list)]}
            elif t in ("create_client", "close_client", "shutdown"):
                r = {}
            else:
                continue
            sys.stdout.write(json.dumps({"id": m["id"], "result": r}) + "\\n"); sys.stdout.flush()
            if t == "shutdown": sys.exit(0)
        """.utf8).write(to: file)
        return "python3 '\(file.path)'"
    }
}
