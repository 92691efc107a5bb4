import Glibc

/// FNV-1a over length-separated fields, finished with the splitmix64 mixer so every output bit
/// depends on every input bit.
struct FNV1a {
    var state: UInt64

    init(key: UInt64) { state = 0xcbf2_9ce4_8422_2325 ^ key }

    mutating func add(_ text: SIPText) {
        for b in text {
            state ^= UInt64(b)
            state = state &* 0x0000_0100_0000_01b3
        }
        state ^= UInt64(text.count) &+ 0xff
        state = state &* 0x0000_0100_0000_01b3
    }

    func finish() -> UInt64 {
        var z = state &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}

/// Bounded appends into the caller's buffer; remembers overflow instead of failing each append.
struct ByteWriter {
    let base: UnsafeMutableRawPointer?
    let capacity: Int
    var count = 0
    var overflowed = false

    init(_ buffer: UnsafeMutableRawBufferPointer) {
        base = buffer.baseAddress
        capacity = buffer.count
    }

    @inline(__always)
    mutating func append(_ p: UnsafeRawPointer?, _ n: Int) {
        guard n > 0, let p else { return }
        guard !overflowed, let base, capacity - count >= n else { overflowed = true; return }
        let d = base + count
        // Most pieces are short literals and header values: copy them with two (possibly
        // overlapping) word moves instead of a call to memcpy. Source and target never overlap.
        if n >= 8 && n <= 16 {
            d.storeBytes(of: p.loadUnaligned(as: UInt64.self), as: UInt64.self)
            d.storeBytes(of: p.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self), toByteOffset: n - 8, as: UInt64.self)
        } else if n >= 4 && n < 8 {
            d.storeBytes(of: p.loadUnaligned(as: UInt32.self), as: UInt32.self)
            d.storeBytes(of: p.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self), toByteOffset: n - 4, as: UInt32.self)
        } else if n < 4 {
            for i in 0..<n { d.storeBytes(of: p.load(fromByteOffset: i, as: UInt8.self), toByteOffset: i, as: UInt8.self) }
        } else {
            d.copyMemory(from: p, byteCount: n)
        }
        count += n
    }

    @inline(__always) mutating func append(_ s: StaticString) { append(s.utf8Start, s.utf8CodeUnitCount) }
    @inline(__always) mutating func append(_ t: SIPText) { append(t.baseAddress, t.count) }
    /// Named differently from `append(_: StaticString)` so that literals pick the cheaper one.
    mutating func appendString(_ s: String) {
        var s = s
        s.withUTF8 { append($0.baseAddress, $0.count) }
    }

    mutating func appendByte(_ b: UInt8) {
        guard !overflowed, let base, count < capacity else { overflowed = true; return }
        base.storeBytes(of: b, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    mutating func appendDecimal(_ value: Int) {
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var v = UInt64(max(0, value))
        var n = 0
        withUnsafeMutableBytes(of: &digits) { d in
            repeat {
                d[19 - n] = UInt8(v % 10) + 0x30
                v /= 10
                n += 1
            } while v > 0
            append(d.baseAddress! + 20 - n, n)
        }
    }

    mutating func appendHex(_ value: UInt64) {
        let hex: StaticString = "0123456789abcdef"
        var digits: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &digits) { d in
            for i in 0..<16 { d[i] = hex.utf8Start[Int((value >> UInt64(60 - 4 * i)) & 0xf)] }
            append(d.baseAddress, 16)
        }
    }

    /// A quoted-string with `"` and `\` escaped (RFC 3261 §25.1). The content is validated
    /// beforehand (`validateLabel`).
    /// A quoted-string: `"` and `\` escaped, or with `plain` written as `'` and `/` (no escape
    /// at all, for phones that mishandle them).
    mutating func appendQuoted(_ bytes: UnsafeRawBufferPointer, plain: Bool = false) {
        appendByte(ASCII.quote)
        if let p = bytes.baseAddress, memchr(p, Int32(ASCII.quote), bytes.count) == nil,
           memchr(p, Int32(ASCII.backslash), bytes.count) == nil {
            append(p, bytes.count)
        } else {
            for b in bytes {
                if plain {
                    appendByte(b == ASCII.quote ? UInt8(ascii: "'") : b == ASCII.backslash ? UInt8(ascii: "/") : b)
                    continue
                }
                if b == ASCII.quote || b == ASCII.backslash { appendByte(ASCII.backslash) }
                appendByte(b)
            }
        }
        appendByte(ASCII.quote)
    }
}
