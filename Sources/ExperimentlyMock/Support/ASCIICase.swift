import Foundation

extension String {
    /// Whether `self` and `other` are equal when ASCII letters are compared without case: the rule
    /// for HTTP field names (RFC 9110 section 5.1; names are ASCII tokens). Bytes outside ASCII
    /// letters must match exactly. A byte loop: Foundation's `caseInsensitiveCompare` goes through
    /// NSString and was the largest single cost of the in-process round trip.
    package func equalsIgnoringASCIICase(_ other: String) -> Bool {
        var a = utf8.makeIterator(), b = other.utf8.makeIterator()
        while true {
            switch (a.next(), b.next()) {
            case (nil, nil): return true
            case (let x?, let y?):
                if x == y { continue }
                let lx = x &- 0x41 < 26 ? x | 0x20 : x
                let ly = y &- 0x41 < 26 ? y | 0x20 : y
                if lx != ly { return false }
            default: return false
            }
        }
    }
}
