import Glibc
import TextFormats

/// A bump allocator over one buffer allocated when the parser is created. Text the parser derives
/// from a packet (unfolded values, unescaped user parts, unquoted display names, NUL-terminated
/// copies for libosip2) lives here until the next parse, so the common path never touches the
/// Swift heap.
struct Arena {
    let base: UnsafeMutableRawPointer
    let capacity: Int
    var used = 0

    init(capacity: Int) {
        self.capacity = capacity
        base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
    }

    func deallocate() { base.deallocate() }

    mutating func reset() { used = 0 }

    mutating func allocate(_ count: Int) -> UnsafeMutableRawPointer? {
        guard count >= 0, capacity - used >= count else { return nil }
        let p = base + used
        used += count
        return p
    }

    /// A copy with every CR and LF removed: unfolding `value CRLF WSP more` leaves `value WSP more`
    /// (RFC 3261 §7.3.1 says folded LWS is equivalent to a single SP).
    mutating func unfolded(_ text: SIPText) -> SIPText {
        guard text.containsLineBreak, let out = allocate(text.count) else { return text }
        var n = 0
        for b in text where b != ASCII.cr && b != ASCII.lf {
            out.storeBytes(of: b, toByteOffset: n, as: UInt8.self)
            n += 1
        }
        return SIPText(baseAddress: out, count: n)
    }

    /// %-decoding that keeps NUL bytes (RFC 4475 §3.1.1.4) and leaves a `%` that is not followed
    /// by two hex digits as it is.
    mutating func percentDecoded(_ text: SIPText) -> SIPText {
        guard let p = text.baseAddress, firstOf(ASCII.percent, ASCII.percent, in: p, from: 0, to: text.count) < text.count,
              let out = allocate(text.count) else { return text }
        var n = 0, i = 0
        while i < text.count {
            var b = text[i]
            if b == ASCII.percent, i + 2 < text.count, let h = TextInput.hexValue(text[i + 1]), let l = TextInput.hexValue(text[i + 2]) {
                b = h << 4 | l
                i += 3
            } else {
                i += 1
            }
            out.storeBytes(of: b, toByteOffset: n, as: UInt8.self)
            n += 1
        }
        return SIPText(baseAddress: out, count: n)
    }

    /// The content of a quoted-string (without its quotes) with quoted-pairs resolved.
    mutating func unquoted(_ inner: SIPText) -> SIPText {
        guard inner.firstIndex(of: ASCII.backslash) != nil, let out = allocate(inner.count) else { return inner }
        var n = 0, i = 0
        while i < inner.count {
            var b = inner[i]
            if b == ASCII.backslash, i + 1 < inner.count {
                b = inner[i + 1]
                i += 2
            } else {
                i += 1
            }
            out.storeBytes(of: b, toByteOffset: n, as: UInt8.self)
            n += 1
        }
        return SIPText(baseAddress: out, count: n)
    }

    /// A NUL-terminated copy for C APIs; the caller rewinds `used` afterwards. libosip2 works
    /// on C strings, so a NUL inside the text (legal only as a quoted-pair, which the scanner has
    /// checked) becomes a space instead of cutting the value short.
    mutating func cString(_ text: SIPText) -> UnsafeMutablePointer<CChar>? {
        guard let out = allocate(text.count + 1) else { return nil }
        if let src = text.baseAddress {
            out.copyMemory(from: src, byteCount: text.count)
            var i = 0
            while i < text.count, let hit = memchr(out + i, 0, text.count - i) {
                let offset = UnsafeMutableRawPointer(hit) - out
                out.storeBytes(of: ASCII.space, toByteOffset: offset, as: UInt8.self)
                i = offset + 1
            }
        }
        out.storeBytes(of: 0, toByteOffset: text.count, as: UInt8.self)
        return out.assumingMemoryBound(to: CChar.self)
    }
}
