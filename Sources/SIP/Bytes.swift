import CSIPLexer
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
/// looked up in CSIPLexer's byte-class table (one load, no lazy global; PlainSyntaxTests checks it).
@inline(__always) func isTokenByte(_ b: UInt8) -> Bool {
    lookupd_sip_class(b) & UInt8(LOOKUPD_SIP_TOKEN) != 0
}
@inline(__always) func isDigit(_ b: UInt8) -> Bool { b &- 0x30 < 10 }
@inline(__always) func isAlpha(_ b: UInt8) -> Bool { (b | 0x20) &- 0x61 < 26 }
@inline(__always) func isWSP(_ b: UInt8) -> Bool { b == ASCII.space || b == ASCII.tab }
/// Linear white space as it appears in an unfolded-or-not header value.
@inline(__always) func isLWS(_ b: UInt8) -> Bool { b == ASCII.space || b == ASCII.tab || b == ASCII.cr || b == ASCII.lf }
@inline(__always) func isControl(_ b: UInt8) -> Bool { b < 0x20 || b == ASCII.del }
@inline(__always) func lowerASCII(_ b: UInt8) -> UInt8 { isAlpha(b) ? b | 0x20 : b }

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
    @inline(__always)
    func equalsLiteral(_ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard n == count else { return false }
        guard n > 0, let p = baseAddress else { return true }
        let l = literal.utf8Start
        // Most candidates differ in the first byte; the loop stops there.
        for i in 0..<n where lowerASCII(p.load(fromByteOffset: i, as: UInt8.self)) != lowerASCII(l[i]) { return false }
        return true
    }

    func exactlyEqualsLiteral(_ literal: StaticString) -> Bool {
        guard literal.utf8CodeUnitCount == count else { return false }
        return memcmpEqual(bytes, UnsafeRawBufferPointer(start: literal.utf8Start, count: count))
    }

    @inline(__always)
    func firstIndex(of byte: UInt8, from start: Int = 0) -> Int? {
        guard let base = baseAddress, start < count else { return nil }
        // Short spans (most header pieces) are cheaper to walk than to hand to memchr.
        if count - start <= 16 {
            var i = start
            while i < count {
                if base.load(fromByteOffset: i, as: UInt8.self) == byte { return i }
                i += 1
            }
            return nil
        }
        guard let hit = memchr(base + start, Int32(byte), count - start) else { return nil }
        return UnsafeRawPointer(hit) - base
    }

    /// True when every byte is a token character (and there is at least one).
    var isToken: Bool {
        guard count > 0, let p = baseAddress else { return false }
        for i in 0..<count where !isTokenByte(p.load(fromByteOffset: i, as: UInt8.self)) { return false }
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

/// The offset of the first byte equal to `a` or `b` in `p[from..<to]`, or `to`. Eight bytes
/// at a time (the classic "has zero byte" test on the XOR with each byte repeated); it never
/// reads outside `p[from..<to]`.
@inline(__always)
func firstOf(_ a: UInt8, _ b: UInt8, in p: UnsafeRawPointer, from: Int, to: Int) -> Int {
    let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
    let ma = ones &* UInt64(a), mb = ones &* UInt64(b)
    var i = from
    while i + 8 <= to {
        let x = p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
        let xa = x ^ ma, xb = x ^ mb
        // The lowest set high bit marks the first matching byte exactly (little-endian).
        let hit = ((xa &- ones) & ~xa | (xb &- ones) & ~xb) & highs
        if hit != 0 { return i + hit.trailingZeroBitCount >> 3 }
        i += 8
    }
    while i < to {
        let c = p.load(fromByteOffset: i, as: UInt8.self)
        if c == a || c == b { return i }
        i += 1
    }
    return to
}

/// Walks `p[0..<n]` eight bytes at a time while `test` leaves every byte's high bit clear:
/// `nil` at the first word where it sets one, otherwise the offset of the last `n % 8` bytes,
/// which the caller checks one by one.
@inline(__always)
func wordsWithout(_ p: UnsafeRawPointer, _ n: Int, _ test: (UInt64) -> UInt64) -> Int? {
    var i = 0
    while i + 8 <= n {
        if test(p.loadUnaligned(fromByteOffset: i, as: UInt64.self)) & 0x8080_8080_8080_8080 != 0 { return nil }
        i += 8
    }
    return i
}

/// Whether `text` holds a control character (`isControl`: below 0x20, or DEL), eight bytes at a
/// time: with `ones` = 0x01 in every byte, `(x - 0x20·ones) & ~x` has a high bit set exactly
/// when some byte is below 0x20, and `(y - ones) & ~y` for `y = x ^ 0x7F·ones` when some byte is
/// DEL (no borrow crosses bytes unless such a byte is there). `ParsingTests` compares it with
/// `contains(where: isControl)`.
func containsControl(_ text: SIPText) -> Bool {
    guard let p = text.baseAddress else { return false }
    let n = text.count
    let ones: UInt64 = 0x0101_0101_0101_0101
    guard var i = wordsWithout(p, n, { x in
        let y = x ^ (ones &* 0x7F)
        return ((x &- ones &* 0x20) & ~x) | ((y &- ones) & ~y)
    }) else { return true }
    while i < n {
        if isControl(p.load(fromByteOffset: i, as: UInt8.self)) { return true }
        i += 1
    }
    return false
}

/// Scans `;`- or `,`-separated items while honouring quoted strings (and, optionally, `<...>`),
/// because a separator inside `"Doe, John"` or `<sip:a;b@c>` does not end the item.
func nextSeparator(in text: SIPText, from start: Int, separator: UInt8, respectAngles: Bool) -> Int {
    guard let p = text.baseAddress else { return text.count }
    if !respectAngles {
        // Jump from quote to separator; walk only inside quoted strings.
        var i = start
        while true {
            i = firstOf(separator, ASCII.quote, in: p, from: i, to: text.count)
            if i >= text.count { return text.count }
            if p.load(fromByteOffset: i, as: UInt8.self) == separator { return i }
            i += 1
            while i < text.count {
                let b = p.load(fromByteOffset: i, as: UInt8.self)
                if b == ASCII.backslash { i += 2; continue }
                i += 1
                if b == ASCII.quote { break }
            }
            if i >= text.count { return text.count }
        }
    }
    var i = start
    var inQuotes = false
    var angleDepth = 0
    while i < text.count {
        let b = p.load(fromByteOffset: i, as: UInt8.self)
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
