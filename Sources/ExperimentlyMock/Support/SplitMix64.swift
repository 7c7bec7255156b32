/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014): a
/// small seeded generator giving the same sequence on every platform, for the explorer's seeded
/// orders, PCT, the workload generator and tests' generated inputs. Not for secrets.
package struct SplitMix64: RandomNumberGenerator, Sendable {
    /// The generator's whole state: the seed, advanced by each `next()`.
    package var state: UInt64

    /// A generator whose first `next()` follows `state`.
    package init(state: UInt64) { self.state = state }

    /// The next 64 random bits.
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
