/// SDK benchmarks (hashUser throughput, cached evaluateFlag latency).
enum SDKBench {
    static func run(arguments: [String]) async { print("sdk bench: not yet implemented") }
}
