import Foundation

/// ISO-8601 UTC timestamps with milliseconds and `Z` (`2023-11-14T22:13:20.000Z`), the wire form of
/// `timestamp` (CONTRACT.md section 1). Pure arithmetic: no formatter, no locale, no lock.
enum ISO8601Millis {
    /// `date` in that form; an instant outside the years 0000-9999 (which ISO-8601 writes only in
    /// an expanded form) or not finite is clamped to that range, never a trap.
    static func format(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        let clamped = seconds.isNaN ? 0 : min(max(seconds, -62_167_219_200), 253_402_300_799.999)
        let totalMillis = Int64((clamped * 1000).rounded(.down))
        var days = totalMillis / 86_400_000
        var millisOfDay = totalMillis % 86_400_000
        if millisOfDay < 0 { millisOfDay += 86_400_000; days -= 1 }
        let (y, m, d) = civil(fromDays: days)
        let h = millisOfDay / 3_600_000, mi = millisOfDay / 60_000 % 60
        let s = millisOfDay / 1000 % 60, ms = millisOfDay % 1000
        return pad(y, 4) + "-" + pad(m, 2) + "-" + pad(d, 2) + "T" + pad(h, 2) + ":" + pad(mi, 2) + ":"
            + pad(s, 2) + "." + pad(ms, 3) + "Z"
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fff...]Z`; `nil` for anything else.
    static func parse(_ text: String) -> Date? {
        let u = Array(text.utf8)
        guard u.count >= 20, u[4] == 45, u[7] == 45, u[10] == 84, u[13] == 58, u[16] == 58, u.last == 90 else { return nil }
        func num(_ r: Range<Int>) -> Int64? {
            var v: Int64 = 0
            for i in r { guard (48...57).contains(u[i]) else { return nil }; v = v * 10 + Int64(u[i] - 48) }
            return v
        }
        guard let y = num(0..<4), let mo = num(5..<7), let d = num(8..<10), let h = num(11..<13),
              let mi = num(14..<16), let s = num(17..<19), (1...12).contains(mo), (1...31).contains(d) else { return nil }
        var fraction = 0.0
        if u[19] == 46 {
            guard u.count > 21, let f = num(20..<(u.count - 1)) else { return nil }
            fraction = Double(f) / pow(10, Double(u.count - 21))
        } else if u.count != 20 { return nil }
        let days = daysFromCivil(y, mo, d)
        return Date(timeIntervalSince1970: Double(days * 86400 + h * 3600 + mi * 60 + s) + fraction)
    }

    private static func pad(_ v: Int64, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    // Civil-calendar conversions after H. Hinnant's public-domain algorithms (proleptic Gregorian).
    private static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    private static func daysFromCivil(_ y0: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
