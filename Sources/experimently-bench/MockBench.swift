/// Mock backend benchmarks (in-process round trip; loopback TCP server for wrk).
enum MockBench {
    static func runInProcess(arguments: [String]) async { print("mock in-process bench: not yet implemented") }
    static func serve(arguments: [String]) async { print("mock serve: not yet implemented") }
}
