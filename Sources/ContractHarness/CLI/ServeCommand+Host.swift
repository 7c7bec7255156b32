import Foundation

extension ServeCommand {
    /// Checks a `--host` value: an IPv4 address in dotted-decimal form that can be bound for
    /// serving, and says whether binding it exposes the mock beyond this machine.
    ///
    /// Accepted: four decimal numbers 0...255 without leading zeros (`127.0.0.1`, `0.0.0.0`,
    /// an interface address). Refused with a `UsageError` (exit 64) naming the reason: anything
    /// else (names, IPv6, fewer parts), a part with a leading zero (`0177.0.0.1` is octal
    /// 127.0.0.1 to `inet_aton` but 177 to others: ambiguous), the limited broadcast address
    /// `255.255.255.255` and multicast addresses `224.0.0.0/4` (RFC 919, RFC 5771: not an
    /// address a TCP server can listen on). Returns the host and, for any address outside
    /// loopback `127.0.0.0/8`, the warning to print on stderr.
    static func checkHost(_ value: String) throws -> (host: String, warning: String?) {
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }) else {
            throw HarnessCommand.UsageError("--host takes an IPv4 address such as 127.0.0.1, not '\(value)'")
        }
        if let part = parts.first(where: { $0.count > 1 && $0.hasPrefix("0") }) {
            throw HarnessCommand.UsageError("--host '\(value)': the part '\(part)' has a leading zero, which some tools read as octal; write the address in plain decimal (e.g. 127.0.0.1)")
        }
        if let long = parts.first(where: { $0.count > 3 }) {
            throw HarnessCommand.UsageError("--host '\(value)': \(long) is not an IPv4 address part (0 to 255)")
        }
        let octets = parts.map { Int($0)! }
        if let big = octets.first(where: { $0 > 255 }) {
            throw HarnessCommand.UsageError("--host '\(value)': \(big) is not an IPv4 address part (0 to 255)")
        }
        if octets == [255, 255, 255, 255] {
            throw HarnessCommand.UsageError("--host 255.255.255.255 is the broadcast address, which a server cannot listen on; use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)")
        }
        if (224...239).contains(octets[0]) {
            throw HarnessCommand.UsageError("--host '\(value)' is a multicast address, which a TCP server cannot listen on; use 127.0.0.1 or an address of this machine")
        }
        if octets[0] == 127 { return (value, nil) }
        let scope = octets == [0, 0, 0, 0] ? "every network interface" : "the network interface with address \(value)"
        return (value, "warning: --host \(value) listens on \(scope): the mock backend is reachable from the network, answers anyone who has a fixture API key, and journals what they send; use 127.0.0.1 unless other machines must reach it")
    }
}
