/// The cross-SDK consistent hash (CONTRACT.md section 6), kept so golden vectors can be checked;
/// nothing buckets on device.
public enum FeatureFlagEvaluator {
    /// Hashes a user and a key into [0, 1).
    ///
    /// `LE_uint32(first 4 bytes of MD5(UTF-8("{userId}:{flagKey}")))` / 2^32.
    /// Example: `hashUser("user-123", flagKey: "my-flag")` = 0.6927449859213084.
    public static func hashUser(_ userId: String, flagKey: String) -> Double {
        var md5 = MD5()
        md5.update(userId.utf8)
        md5.update(CollectionOfOne(UInt8(ascii: ":")))
        md5.update(flagKey.utf8)
        // The first digest word is the first 4 bytes read little-endian.
        return Double(md5.finalize().0) / 4_294_967_296.0
    }

    /// The MD5 digest of `UTF-8("{userId}:{flagKey}")` as 32 lowercase hex digits.
    public static func md5Hex(_ userId: String, flagKey: String) -> String {
        md5Hex(of: Array(userId.utf8) + [UInt8(ascii: ":")] + Array(flagKey.utf8))
    }

    /// The MD5 digest (RFC 1321) of `bytes` as 32 lowercase hex digits.
    public static func md5Hex(of bytes: [UInt8]) -> String {
        var md5 = MD5()
        md5.update(bytes)
        let hex = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(32)
        for byte in MD5.bytes(md5.finalize()) { out.append(hex[Int(byte >> 4)]); out.append(hex[Int(byte & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }
}
