import TextRules

/// Byte-level helpers shared by every reader: BOM handling, UTF-8
/// validation and turning byte offsets into line/column positions.
///
/// All members are pure functions over caller-owned memory.
public enum TextInput {
    /// The UTF-8 byte order mark some Windows editors put at the start.
    public static let utf8BOM: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// `buffer` without a leading UTF-8 BOM.
    public static func strippingBOM(_ buffer: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        if buffer.count >= 3, buffer[0] == 0xEF, buffer[1] == 0xBB, buffer[2] == 0xBF {
            return UnsafeRawBufferPointer(rebasing: buffer[3...])
        }
        return buffer
    }

    /// A UTF-16 text (marked by its byte order mark, as Windows programs
    /// write "Unicode" text: Outlook, Excel, older Google Contacts exports)
    /// converted to UTF-8, with a UTF-8 BOM in front so that readers strip
    /// it as usual; nil when `buffer` does not start with a UTF-16 BOM.
    /// Unpaired surrogates become U+FFFD.
    public static func utf8FromUTF16(_ buffer: UnsafeRawBufferPointer) -> [UInt8]? {
        guard buffer.count >= 2 else { return nil }
        let littleEndian: Bool
        switch (buffer[0], buffer[1]) {
        case (0xFF, 0xFE): littleEndian = true
        case (0xFE, 0xFF): littleEndian = false
        default: return nil
        }
        var units = [UInt16]()
        units.reserveCapacity(buffer.count / 2)
        var i = 2
        while i + 1 < buffer.count {
            let a = UInt16(buffer[i]), b = UInt16(buffer[i + 1])
            units.append(littleEndian ? a | b << 8 : a << 8 | b)
            i += 2
        }
        var out = utf8BOM
        out.reserveCapacity(units.count + 3)
        for scalar in String(decoding: units, as: UTF16.self).utf8 { out.append(scalar) }
        return out
    }

    /// Offset of the first byte that does not start a valid UTF-8 sequence
    /// (overlongs, surrogates and values above U+10FFFF are invalid), or nil.
    public static func firstInvalidUTF8Offset(in buffer: UnsafeRawBufferPointer) -> Int? {
        guard let base = buffer.baseAddress else { return nil }
        return invalidUTF8Offset(base.assumingMemoryBound(to: UInt8.self), from: 0, to: buffer.count)
    }

    /// The value of a hexadecimal digit (`0`-`9`, `a`-`f`, `A`-`F`), nil for any other byte.
    @inlinable
    public static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c &- 0x30
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c &- 0x61 &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c &- 0x41 &+ 10
        default: return nil
        }
    }
}

// MARK: - Internal machinery

/// Owns or borrows the input so readers can accept both `[UInt8]` and
/// caller-owned memory (e.g. an mmap'd file) without copying.
enum InputStorage {
    case array([UInt8])
    case raw(UnsafeRawBufferPointer)

    /// Calls `body` with the input minus any BOM, as a non-nil pointer
    /// (a dummy one for empty input) so scanners need no optional checks.
    func withContent<R>(_ body: (UnsafePointer<UInt8>, Int) throws -> R) rethrows -> R {
        switch self {
        case .array(let bytes):
            return try bytes.withUnsafeBytes { try InputStorage.call(body, $0) }
        case .raw(let buffer):
            return try InputStorage.call(body, buffer)
        }
    }

    /// `withContent` without stripping a BOM: for pieces of a longer input.
    func withRawContent<R>(_ body: (UnsafePointer<UInt8>, Int) throws -> R) rethrows -> R {
        switch self {
        case .array(let bytes):
            return try bytes.withUnsafeBytes { try InputStorage.call(body, $0, strippingBOM: false) }
        case .raw(let buffer):
            return try InputStorage.call(body, buffer, strippingBOM: false)
        }
    }

    static func call<R>(_ body: (UnsafePointer<UInt8>, Int) throws -> R,
                        _ buffer: UnsafeRawBufferPointer, strippingBOM: Bool = true) rethrows -> R {
        let content = strippingBOM ? TextInput.strippingBOM(buffer) : buffer
        if let base = content.baseAddress, content.count > 0 {
            return try body(base.assumingMemoryBound(to: UInt8.self), content.count)
        }
        var dummy: UInt8 = 0
        return try withUnsafePointer(to: &dummy) { try body($0, 0) }
    }
}

enum ASCII {
    static let tab: UInt8 = 0x09
    static let lf: UInt8 = 0x0A
    static let cr: UInt8 = 0x0D
    static let space: UInt8 = 0x20
    static let quote: UInt8 = 0x22
    static let hash: UInt8 = 0x23
    static let comma: UInt8 = 0x2C
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let equals: UInt8 = 0x3D
    static let backslash: UInt8 = 0x5C
}

@inline(__always)
func isBlank(_ b: UInt8) -> Bool { b == ASCII.space || b == ASCII.tab }

/// See `TextInput.firstInvalidUTF8Offset`. Reports the lead byte of a bad
/// sequence so the column points at the character the operator sees.
func invalidUTF8Offset(_ p: UnsafePointer<UInt8>, from start: Int, to end: Int) -> Int? {
    var i = start
    while i < end {
        // Eight ASCII bytes at a time: almost all operator data is ASCII.
        while i + 8 <= end {
            let word = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
            if word & 0x8080_8080_8080_8080 != 0 { break }
            i += 8
        }
        guard i < end else { return nil }
        if p[i] < 0x80 { i += 1; continue }
        let length = utf8SequenceLength(p, at: i, end: end)
        if length == 0 { return i }
        i += length
    }
    return nil
}

/// The length of the well-formed UTF-8 sequence starting at `i`, 0 when the bytes there are
/// not one: TextRules' strict decoder, the one every check of text uses.
@inline(__always)
func utf8SequenceLength(_ p: UnsafePointer<UInt8>, at i: Int, end: Int) -> Int {
    UTF8Rules.sequenceLength(UnsafeRawBufferPointer(start: p, count: end), at: i)
}

/// Walks from a known line start to `target`, counting CR, LF and CRLF as one
/// line end each. Only called on error paths, so it can afford a rescan.
func locate(_ p: UnsafePointer<UInt8>, end: Int, lineStart start: Int, line startLine: Int,
            target: Int) -> (line: Int, column: Int) {
    var line = startLine
    var lineStart = start
    var i = start
    while i < target {
        let b = p[i]
        if b == ASCII.lf {
            line += 1
            lineStart = i + 1
        } else if b == ASCII.cr {
            if i + 1 < end, p[i + 1] == ASCII.lf, i + 1 < target { i += 1 }
            line += 1
            lineStart = i + 1
        }
        i += 1
    }
    return (line, column(p, lineStart: lineStart, target: target))
}

/// 1-based column in Unicode scalars: what an editor's status bar shows.
func column(_ p: UnsafePointer<UInt8>, lineStart: Int, target: Int) -> Int {
    var col = 1
    var i = lineStart
    while i < target {
        if p[i] & 0xC0 != 0x80 { col += 1 }
        i += 1
    }
    return col
}

/// The error every reader reports for bytes that are not UTF-8.
func invalidUTF8Error(_ p: UnsafePointer<UInt8>, at offset: Int, line: Int, column: Int) -> TextFormatError {
    let hex = String(p[offset], radix: 16, uppercase: true)
    return TextFormatError(
        line: line, column: column,
        message: "invalid UTF-8 (byte 0x\(hex.count == 1 ? "0" + hex : hex)); the file must be saved as UTF-8 (a Windows program may have written its code page: iconv -f WINDOWS-1252 -t UTF-8 converts it)")
}

/// Names the character at `offset` for an error message: `'x'`, `U+0007`,
/// `'é'` or `byte 0xFF`.
func describeCharacter(_ p: UnsafePointer<UInt8>, at offset: Int, end: Int) -> String {
    let b = p[offset]
    if b >= 0x21, b < 0x7F { return "'\(Character(Unicode.Scalar(b)))'" }
    if b < 0x80 { return hexScalar(UInt32(b)) }
    let length = utf8SequenceLength(p, at: offset, end: end)
    if length > 0 {
        let text = String(decoding: UnsafeBufferPointer(start: p + offset, count: length), as: UTF8.self)
        if let scalar = text.unicodeScalars.first {
            return "'\(text)' (\(hexScalar(scalar.value)))"
        }
    }
    let hex = String(b, radix: 16, uppercase: true)
    return "byte 0x\(hex)"
}

func hexScalar(_ value: UInt32) -> String {
    let hex = String(value, radix: 16, uppercase: true)
    return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
}
