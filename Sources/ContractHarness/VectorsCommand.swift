import Foundation

/// `contract-harness vectors`: checks golden hash vectors against the built-in SDK or an SDK
/// program speaking the upstream adapter protocol (CONTRACT.md section 6). Arrives with issue 7.
enum VectorsCommand {
    static func main(_ arguments: [String]) async -> Int32 {
        FileHandle.standardError.write(Data("contract-harness vectors: not implemented yet\n".utf8))
        return HarnessCommand.Exit.internalFault.rawValue
    }
}
