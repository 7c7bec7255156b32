// contract-harness: runs scenario files against an SDK and the mock backend. See Documentation/CLI.md.
import ContractHarness
import Foundation

exit(await HarnessCommand.main(Array(CommandLine.arguments.dropFirst())))
