// experimently-bench: release-mode benchmarks. Usage: experimently-bench sdk | mock-inprocess [mock|echo|replay] [--block N] | mock-model [N [flag|assign]] | mock-handle [N] | mock-serve [--port N] | session-floor [SESSIONS [REQUESTS [CONCURRENCY]]] | sdk-floor [SCHEDULES [CONCURRENCY]] [--no-store]
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "sdk": await SDKBench.run(arguments: Array(arguments.dropFirst()))
case "mock-inprocess":
    // `mock-inprocess [mock|echo|replay] [--block N]`: one kind alone; N requests of a kind in a row.
    let rest = Array(arguments.dropFirst())
    let block = rest.firstIndex(of: "--block").flatMap { rest.indices.contains($0 + 1) ? Int(rest[$0 + 1]) : nil } ?? 1
    let only = rest.first.flatMap { ["mock", "echo", "replay"].contains($0) ? $0 : nil }
    await MockInProcessBench.run(only: only, block: max(1, block))
case "mock-model": MockInProcessBench.modelOnly(arguments: Array(arguments.dropFirst()))
case "mock-handle": await MockInProcessBench.handleOnly(arguments: Array(arguments.dropFirst()))
case "mock-serve": await MockBench.serve(arguments: Array(arguments.dropFirst()))
case "session-floor": await SessionFloorBench.run(arguments: Array(arguments.dropFirst()))
case "sdk-floor": await SDKFloorBench.run(arguments: Array(arguments.dropFirst()))
default:
    FileHandle.standardError.write(Data("usage: experimently-bench sdk | mock-inprocess [mock|echo|replay] [--block N] | mock-model [N [flag|assign]] | mock-handle [N] | mock-serve [--port N] | session-floor [SESSIONS [REQUESTS [CONCURRENCY]]] | sdk-floor [SCHEDULES [CONCURRENCY]] [--no-store]\n".utf8))
    exit(64)
}
