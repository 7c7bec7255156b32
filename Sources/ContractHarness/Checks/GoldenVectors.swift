/// The cross-SDK golden hash vectors of CONTRACT.md section 6 (the nine published inputs and values).
public enum GoldenVectors {
    /// One vector: inputs, the MD5 of `"{user}:{key}"` in hex, and the expected hash in [0, 1).
    public struct Vector: Sendable, Equatable {
        /// The user id.
        public let user: String
        /// The flag or experiment key.
        public let key: String
        /// MD5 of `"{user}:{key}"`, lowercase hex.
        public let md5: String
        /// The expected hash in [0, 1).
        public let hash: Double
    }

    /// The nine hash vectors every SDK must reproduce within 1e-10.
    public static let hash: [Vector] = [
        Vector(user: "user-123", key: "my-flag", md5: "43bc57b1e81dec71c5242122ac05170f", hash: 0.6927449859213084),
        Vector(user: "alice", key: "dark-mode", md5: "f2150f094734044dddc127979b83d1b7", hash: 0.0353864398784935),
        Vector(user: "bob", key: "new-checkout", md5: "e56f7625d1ccdac011abaca72825985f", hash: 0.1463384565431625),
        Vector(user: "user-789", key: "beta-feature", md5: "646b3c5041958294b798761b39d85ab0", hash: 0.3134219283238053),
        Vector(user: "test-user", key: "flag-key", md5: "06f409feb98b04ab76e23da04b2627ff", hash: 0.9923393740318716),
        Vector(user: "", key: "empty-user", md5: "0f85b75b4a0156aab6f5ce3bdf517dbf", hash: 0.3582690393086523),
        Vector(user: "a", key: "b", md5: "d8160c9b3dc20d4e931aeb4f45262155", hash: 0.6056532170623541),
        Vector(user: "user-001", key: "exp-abc", md5: "3e2fc3c61a5407cf720f2b690a60af19", hash: 0.7764157797209918),
        Vector(user: "user-002", key: "exp-abc", md5: "08d36a2426879a6777c21cc69cf320b2", hash: 0.1422550100833178),
    ]
}
