/// What a label may contain. Labels end up in SIP headers (display names,
/// `X-Caller-Label`), so the rules are checked when a directory is compiled,
/// when it is verified, and again by the SIP layer when it writes them.
public enum LabelRules {
    /// The reason `bytes` is not an acceptable label, or nil when it is: valid
    /// UTF-8, 1...255 bytes, no control characters (C0, DEL, C1), no line or
    /// paragraph separators.
    public static func problem(_ bytes: UnsafeRawBufferPointer) -> String? {
        if bytes.isEmpty { return "empty label" }
        if bytes.count > DirectoryFormat.maxLabelBytes {
            return "label is \(bytes.count) bytes, longer than \(DirectoryFormat.maxLabelBytes)"
        }
        // Most labels are printable ASCII: settle those without decoding.
        var ascii = true
        for c in bytes where c < 0x20 || c >= 0x7F { ascii = false; break }
        if ascii { return nil }
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar):
                let v = scalar.value
                if v < 0x20 || v == 0x7F || (v >= 0x80 && v < 0xA0) {
                    return "label contains the control character U+\(hex4(v))"
                }
                if v == 0x2028 || v == 0x2029 {
                    return "label contains the line separator U+\(hex4(v))"
                }
            case .emptyInput:
                return nil
            case .error:
                return "label is not valid UTF-8"
            }
        }
    }

    public static func problem(_ text: String) -> String? {
        var text = text
        return text.withUTF8 { problem(UnsafeRawBufferPointer($0)) }
    }

    private static func hex4(_ v: UInt32) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }
}
