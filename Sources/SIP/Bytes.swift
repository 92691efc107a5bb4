import Glibc

// Byte constants and character classes shared by the scanner, the parsers and the writer.
// Everything here works on raw bytes because SIP is an octet protocol (RFC 3261 §7.3.1): headers
// may legitimately carry UTF-8, quoted NULs and other octets that a String would mangle.

enum ASCII {
    static let nul: UInt8 = 0x00
    static let tab: UInt8 = 0x09
    static let lf: UInt8 = 0x0A
    static let cr: UInt8 = 0x0D
    static let space: UInt8 = 0x20
    static let quote: UInt8 = 0x22
    static let percent: UInt8 = 0x25
    static let comma: UInt8 = 0x2C
    static let slash: UInt8 = 0x2F
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let lessThan: UInt8 = 0x3C
    static let equals: UInt8 = 0x3D
    static let greaterThan: UInt8 = 0x3E
    static let question: UInt8 = 0x3F
    static let at: UInt8 = 0x40
    static let leftBracket: UInt8 = 0x5B
    static let backslash: UInt8 = 0x5C
    static let rightBracket: UInt8 = 0x5D
    static let del: UInt8 = 0x7F
}

/// RFC 3261 `token` characters: alphanum / "-" / "." / "!" / "%" / "*" / "_" / "+" / "`" / "'" / "~",
/// as two 64-bit masks (bytes 0-63 and 64-127) so the check needs no table and no lazy global.
private let tokenMaskLow: UInt64 = 0x03ff_6ca2_0000_0000
private let tokenMaskHigh: UInt64 = 0x47ff_ffff_87ff_fffe

@inline(__always) func isTokenByte(_ b: UInt8) -> Bool {
    if b < 64 { return (tokenMaskLow >> UInt64(b)) & 1 != 0 }
    if b < 128 { return (tokenMaskHigh >> UInt64(b &- 64)) & 1 != 0 }
    return false
}
@inline(__always) func isDigit(_ b: UInt8) -> Bool { b &- 0x30 < 10 }
@inline(__always) func isAlpha(_ b: UInt8) -> Bool { (b | 0x20) &- 0x61 < 26 }
@inline(__always) func isWSP(_ b: UInt8) -> Bool { b == ASCII.space || b == ASCII.tab }
/// Linear white space as it appears in an unfolded-or-not header value.
@inline(__always) func isLWS(_ b: UInt8) -> Bool { b == ASCII.space || b == ASCII.tab || b == ASCII.cr || b == ASCII.lf }
@inline(__always) func isControl(_ b: UInt8) -> Bool { b < 0x20 || b == ASCII.del }
@inline(__always) func lowerASCII(_ b: UInt8) -> UInt8 { isAlpha(b) ? b | 0x20 : b }

@inline(__always)
func hexValue(_ b: UInt8) -> UInt8? {
    if isDigit(b) { return b &- 0x30 }
    let l = b | 0x20
    if l >= 0x61 && l <= 0x66 { return l &- 0x61 &+ 10 }
    return nil
}

func memcmpEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    if a.count == 0 { return true }
    return memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0
}

func asciiCaseInsensitiveEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    for i in 0..<a.count where lowerASCII(a[i]) != lowerASCII(b[i]) { return false }
    return true
}

extension SIPText {
    /// Trims SP, HTAB, CR and LF on both sides (a folded value keeps its inner CR LF).
    func trimmingLWS() -> SIPText {
        guard let base = baseAddress else { return self }
        var lo = 0, hi = count
        while lo < hi, isLWS(base.load(fromByteOffset: lo, as: UInt8.self)) { lo += 1 }
        while hi > lo, isLWS(base.load(fromByteOffset: hi - 1, as: UInt8.self)) { hi -= 1 }
        return slice(lo, hi)
    }

    /// Case-insensitive comparison against an ASCII literal (header names, scheme names).
    func equalsLiteral(_ literal: StaticString) -> Bool {
        guard literal.utf8CodeUnitCount == count else { return false }
        // Most candidates differ in the first byte; skip the loop for them.
        if count > 0, lowerASCII(self[0]) != lowerASCII(literal.utf8Start[0]) { return false }
        return asciiCaseInsensitiveEqual(bytes, UnsafeRawBufferPointer(start: literal.utf8Start, count: count))
    }

    func exactlyEqualsLiteral(_ literal: StaticString) -> Bool {
        guard literal.utf8CodeUnitCount == count else { return false }
        return memcmpEqual(bytes, UnsafeRawBufferPointer(start: literal.utf8Start, count: count))
    }

    func firstIndex(of byte: UInt8, from start: Int = 0) -> Int? {
        guard let base = baseAddress, start < count else { return nil }
        guard let hit = memchr(base + start, Int32(byte), count - start) else { return nil }
        return UnsafeRawPointer(hit) - base
    }

    /// True when every byte is a token character (and there is at least one).
    var isToken: Bool {
        guard count > 0 else { return false }
        for b in self where !isTokenByte(b) { return false }
        return true
    }

    var containsLineBreak: Bool { firstIndex(of: ASCII.lf) != nil || firstIndex(of: ASCII.cr) != nil }

    /// Parses 1*DIGIT (leading zeros allowed) into a value no larger than `limit`.
    func parseDecimal(limit: UInt64) -> UInt64? {
        guard count > 0 else { return nil }
        var value: UInt64 = 0
        for b in self {
            guard isDigit(b) else { return nil }
            value = value &* 10 &+ UInt64(b &- 0x30)
            if value > limit { return nil }
        }
        return value
    }
}

/// Scans `;`- or `,`-separated items while honouring quoted strings (and, optionally, `<...>`),
/// because a separator inside `"Doe, John"` or `<sip:a;b@c>` does not end the item.
func nextSeparator(in text: SIPText, from start: Int, separator: UInt8, respectAngles: Bool) -> Int {
    var i = start
    var inQuotes = false
    var angleDepth = 0
    while i < text.count {
        let b = text[i]
        if inQuotes {
            if b == ASCII.backslash { i += 2; continue }
            if b == ASCII.quote { inQuotes = false }
        } else if b == ASCII.quote {
            inQuotes = true
        } else if respectAngles && b == ASCII.lessThan {
            angleDepth += 1
        } else if respectAngles && b == ASCII.greaterThan {
            if angleDepth > 0 { angleDepth -= 1 }
        } else if b == separator && angleDepth == 0 {
            return i
        }
        i += 1
    }
    return text.count
}
