/// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. The one
/// decoder every check of untrusted text uses (labels, contact and display names, the decision
/// log), so they all agree on what a byte sequence is.
public enum UTF8Rules {
    /// The length of the valid sequence starting at `i` (1 for ASCII), 0 when none starts there.
    @inlinable
    public static func sequenceLength(_ bytes: UnsafeRawBufferPointer, at i: Int) -> Int {
        let b0 = bytes[i]
        if b0 < 0x80 { return 1 }
        let need: Int
        var lower: UInt8 = 0x80, upper: UInt8 = 0xBF
        switch b0 {
        case 0xC2...0xDF: need = 1
        case 0xE0: need = 2; lower = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: need = 2
        case 0xED: need = 2; upper = 0x9F
        case 0xF0: need = 3; lower = 0x90
        case 0xF1...0xF3: need = 3
        case 0xF4: need = 3; upper = 0x8F
        default: return 0
        }
        guard i + need < bytes.count else { return 0 }
        let b1 = bytes[i + 1]
        guard b1 >= lower && b1 <= upper else { return 0 }
        var k = 2
        while k <= need {
            let b = bytes[i + k]
            guard b >= 0x80 && b <= 0xBF else { return 0 }
            k += 1
        }
        return need + 1
    }

    /// The scalar of the valid sequence of `length` bytes at `i`.
    @inlinable
    public static func scalar(_ bytes: UnsafeRawBufferPointer, at i: Int, length: Int) -> UInt32 {
        switch length {
        case 1: return UInt32(bytes[i])
        case 2: return UInt32(bytes[i] & 0x1F) << 6 | UInt32(bytes[i + 1] & 0x3F)
        case 3: return UInt32(bytes[i] & 0x0F) << 12 | UInt32(bytes[i + 1] & 0x3F) << 6 | UInt32(bytes[i + 2] & 0x3F)
        default:
            return UInt32(bytes[i] & 0x07) << 18 | UInt32(bytes[i + 1] & 0x3F) << 12 | UInt32(bytes[i + 2] & 0x3F) << 6
                | UInt32(bytes[i + 3] & 0x3F)
        }
    }

    @inlinable
    public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        while i < bytes.count {
            if bytes[i] < 0x80 { i += 1; continue }
            let n = sequenceLength(bytes, at: i)
            if n == 0 { return false }
            i += n
        }
        return true
    }
}

/// Characters untrusted text must never carry into a header, a log line or a page as they are:
/// controls (C0, DEL, C1), line and paragraph separators, and the bidirectional formatting
/// characters, whose embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) make
/// what follows them display reversed or reordered until a terminator that an attacker leaves
/// out ("U+202E" turns "moc.knab" into "bank.com").
public enum UnsafeCharacters {
    @inlinable
    public static func isControl(_ v: UInt32) -> Bool { v < 0x20 || v == 0x7F || (v >= 0x80 && v < 0xA0) }

    @inlinable
    public static func isSeparator(_ v: UInt32) -> Bool { v == 0x2028 || v == 0x2029 }

    /// Embeddings, overrides and isolates: they open a state that must be closed.
    @inlinable
    public static func isBidiControl(_ v: UInt32) -> Bool { (v >= 0x202A && v <= 0x202E) || (v >= 0x2066 && v <= 0x2069) }

    /// The marks (LRM, RLM, ALM): harmless in a label written in a right-to-left script, but
    /// invisible, so escaped in logs.
    @inlinable
    public static func isBidiMark(_ v: UInt32) -> Bool { v == 0x200E || v == 0x200F || v == 0x061C }
}
