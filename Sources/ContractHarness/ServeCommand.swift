import Foundation

/// `contract-harness serve`: the mock backend over loopback TCP for other processes. Arrives with
/// issue 7.
enum ServeCommand {
    static func main(_ arguments: [String]) async -> Int32 {
        FileHandle.standardError.write(Data("contract-harness serve: not implemented yet\n".utf8))
        return HarnessCommand.Exit.internalFault.rawValue
    }
}
