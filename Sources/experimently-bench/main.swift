// experimently-bench: release-mode benchmarks. Usage: experimently-bench sdk | mock-inprocess | mock-model [N [flag|assign]] | mock-handle [N] | mock-serve [--port N]
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "sdk": await SDKBench.run(arguments: Array(arguments.dropFirst()))
case "mock-inprocess": await MockInProcessBench.run()
case "mock-model": MockInProcessBench.modelOnly(arguments: Array(arguments.dropFirst()))
case "mock-handle": await MockInProcessBench.handleOnly(arguments: Array(arguments.dropFirst()))
case "mock-serve": await MockBench.serve(arguments: Array(arguments.dropFirst()))
default:
    FileHandle.standardError.write(Data("usage: experimently-bench sdk | mock-inprocess | mock-model [N [flag|assign]] | mock-handle [N] | mock-serve [--port N]\n".utf8))
    exit(64)
}
