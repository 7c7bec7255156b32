import Foundation

/// How Python reads text as a boolean word or a float, for the rules engine's type leniency
/// (`Condition.valuesEqual`).
enum PythonText {
    /// The code points `str.strip()` treats as whitespace (CPython's `Py_UNICODE_ISSPACE`).
    static func isSpace(_ u: Unicode.Scalar) -> Bool {
        switch u.value {
        case 9...13, 28...32, 133, 160, 5760, 8192...8202, 8232, 8233, 8239, 8287, 12288: return true
        default: return false
        }
    }

    /// The code points `float()` strips: ASCII whitespace (`Py_ISSPACE`) and the non-ASCII ones of
    /// `isSpace` (CPython turns those into spaces first), but not U+001C-U+001F, which
    /// `str.strip()` strips and `float()` refuses (a fifty-fifth outside tester, A).
    static func isFloatSpace(_ u: Unicode.Scalar) -> Bool { isSpace(u) && !(28...31).contains(u.value) }

    /// `text` without leading and trailing Python whitespace (`isSpace`, or `space` if given).
    static func stripped(_ text: String, space: (Unicode.Scalar) -> Bool = isSpace) -> String {
        var scalars = Array(text.unicodeScalars)
        while let first = scalars.first, space(first) { scalars.removeFirst() }
        while let last = scalars.last, space(last) { scalars.removeLast() }
        var out = String.UnicodeScalarView()
        out.append(contentsOf: scalars)
        return String(out)
    }

    /// The boolean the rules engine reads `text` as (`true`, `1`, `yes` / `false`, `0`, `no`,
    /// stripped and lower-cased), or `nil` for any other word.
    static func bool(_ text: String) -> Bool? {
        switch stripped(text).lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default: return nil
        }
    }

    /// Python's `float(text)`, or `nil` where it raises `ValueError`: surrounding whitespace,
    /// a sign, decimal digits of any script, `_` only between two digits, an optional fraction
    /// and exponent, or `inf`, `infinity`, `nan` in any case. Hexadecimal and the other forms
    /// Foundation would read are refused, as Python refuses them.
    static func float(_ text: String) -> Double? {
        var ascii = ""
        for u in stripped(text, space: isFloatSpace).unicodeScalars {
            if !u.isASCII, u.properties.numericType == .decimal, let v = u.properties.numericValue {
                ascii += String(Int(v))
            } else {
                ascii.unicodeScalars.append(u)
            }
        }
        let chars = Array(ascii.utf8)
        func isDigit(_ i: Int) -> Bool { chars.indices.contains(i) && chars[i] >= 0x30 && chars[i] <= 0x39 }
        for (i, c) in chars.enumerated() where c == UInt8(ascii: "_") {
            guard isDigit(i - 1), isDigit(i + 1) else { return nil }
        }
        let plain = String(decoding: chars.filter { $0 != UInt8(ascii: "_") }, as: UTF8.self)
        var body = Substring(plain)
        var negative = false
        if let sign = body.first, sign == "+" || sign == "-" { negative = sign == "-"; body = body.dropFirst() }
        switch body.lowercased() {
        case "inf", "infinity": return negative ? -.infinity : .infinity
        case "nan": return .nan
        default: break
        }
        // digits [. digits] or . digits, then [e [sign] digits], nothing else.
        let b = Array(body.utf8)
        var i = 0
        func digits() -> Int {
            let start = i
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 { i += 1 }
            return i - start
        }
        let whole = digits()
        var fraction = 0
        if i < b.count, b[i] == UInt8(ascii: ".") { i += 1; fraction = digits() }
        guard whole + fraction > 0 else { return nil }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { return nil }
        }
        guard i == b.count, let value = Double(String(body)) else { return nil }
        return negative ? -value : value
    }
}
