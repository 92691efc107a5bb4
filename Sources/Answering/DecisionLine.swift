import Configuration
import Directory
import Screening
import TextFormats
import TextRules

/// Builds one decision-log line in the configured format: ` key=value`
/// pairs (values quoted and escaped as `LogBuffer.field` does) or a JSON
/// object. Values come from the caller's SIP message and are escaped so that
/// no display name or Call-ID can end a line or forge a field.
///
/// Threading: one per worker (its scratch buffer is reused call after call).
public struct DecisionLine {
    /// Written in place: `[UInt8].append(contentsOf:)` cost some 80 instructions and a call
    /// to memcpy per piece, and a logged line has about 26 pieces.
    private var out = LineBuffer()
    /// JSON values are escaped by `JSONWriter` into this, then copied into `out`.
    private var json: [UInt8] = []
    private var format: LogFormat = .text
    private var fields = 0
    private var clock = WallClockText()

    init() {}

    /// The line so far, valid until the next `begin`.
    var bytes: UnsafeRawBufferPointer { out.bytes }

    mutating func begin(_ format: LogFormat, at now: WallTime) {
        self.format = format
        out.removeAll()
        fields = 0
        if format == .json {
            append("{\"event\":\"call\"")
        } else {
            append("call")
        }
        clock.append(now, to: out, json: format == .json)
    }

    mutating func field(_ key: StaticString, _ value: UnsafeRawBufferPointer) {
        if format == .json {
            out.append(",\"")
            out.append(key)
            out.append("\":\"")
            json.removeAll(keepingCapacity: true)
            DecisionLine.appendJSONEscaped(value, to: &json)
            json.withUnsafeBytes { out.append($0) }
            out.append(0x22)
        } else {
            out.append(0x20)
            out.append(key)
            out.append(UInt8(ascii: "="))
            var sink = out
            DecisionLine.appendTextValue(value, into: &sink)
        }
    }

    mutating func field(_ key: StaticString, _ value: String) {
        var value = value
        value.withUTF8 { field(key, UnsafeRawBufferPointer($0)) }
    }

    /// A number field: unquoted in JSON.
    mutating func number(_ key: StaticString, _ value: Int) {
        if format == .json {
            out.append(",\"")
            out.append(key)
            out.append("\":")
            appendDecimal(value)
        } else {
            // Digits and a minus sign are plain text: no quoting to decide.
            out.append(0x20)
            out.append(key)
            out.append(UInt8(ascii: "="))
            appendDecimal(value)
        }
    }

    /// A field whose value is plain printable ASCII by construction (digits, `+`, `*`, hex, an
    /// address): written in place, quoted in JSON, as `field` would write it, with no String.
    private func plainField(_ key: StaticString, _ write: (LineBuffer) -> Void) {
        if format == .json {
            out.append(",\"")
            out.append(key)
            out.append("\":\"")
            write(out)
            out.append(0x22)
        } else {
            out.append(0x20)
            out.append(key)
            out.append(UInt8(ascii: "="))
            write(out)
        }
    }

    /// `+` and the digits (`PhoneNumber.description`), with `*` for a prefix (`NumberPrefix`'s).
    mutating func e164(_ key: StaticString, _ digits: UInt64, prefix: Bool = false) {
        plainField(key) { bytes in
            bytes.append(UInt8(ascii: "+"))
            DecisionLine.appendDigits(digits, to: bytes)
            if prefix { bytes.append(UInt8(ascii: "*")) }
        }
    }

    /// A directory match as `NumberPattern.description` writes it.
    mutating func pattern(_ key: StaticString, _ pattern: NumberPattern) {
        switch pattern {
        case .exact(let number): e164(key, number.value)
        case .prefix(let p): e164(key, p.digits, prefix: true)
        }
    }

    /// 32 lowercase hex digits, high word first (`DecisionID.hex`).
    mutating func hex(_ key: StaticString, _ high: UInt64, _ low: UInt64) {
        plainField(key) { bytes in
            let table = DecisionLine.hexDigits.utf8Start
            var digits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            withUnsafeMutableBytes(of: &digits) { d in
                for i in 0..<16 {
                    d[i] = table[Int((high >> UInt64(60 - 4 * i)) & 0xF)]
                    d[16 + i] = table[Int((low >> UInt64(60 - 4 * i)) & 0xF)]
                }
                bytes.append(UnsafeRawBufferPointer(d))
            }
        }
    }

    /// `ip:port`, an IPv6 address in brackets. `ip` is an address's text (hex digits, `.`,
    /// `:`), plain in both formats; anything else goes through `field`'s escaping.
    mutating func address(_ key: StaticString, ip: String, port: UInt16) {
        var ip = ip
        let plain = ip.withUTF8 { $0.allSatisfy { DecisionLine.isAddressByte($0) } }
        guard plain, !ip.isEmpty else {
            field(key, ip.utf8.contains(UInt8(ascii: ":")) ? "[\(ip)]:\(port)" : "\(ip):\(port)")
            return
        }
        plainField(key) { bytes in
            ip.withUTF8 { text in
                let v6 = text.contains(UInt8(ascii: ":"))
                if v6 { bytes.append(UInt8(ascii: "[")) }
                bytes.append(UnsafeRawBufferPointer(text))
                if v6 { bytes.append(UInt8(ascii: "]")) }
            }
            bytes.append(UInt8(ascii: ":"))
            DecisionLine.appendDigits(UInt64(port), to: bytes)
        }
    }

    private static func isAddressByte(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || (b | 0x20 >= UInt8(ascii: "a") && b | 0x20 <= UInt8(ascii: "f"))
            || b == UInt8(ascii: ".") || b == UInt8(ascii: ":")
    }

    private static let hexDigits: StaticString = "0123456789abcdef"

    private static func appendDigits(_ value: UInt64, to bytes: LineBuffer) {
        var magnitude = value
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: UInt64.max has 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[23 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude != 0
            bytes.append(UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }

    // Every logged call writes these; Array(String.utf8) and String(Int) allocated each time.
    private func append(_ text: StaticString) { out.append(text) }

    private func appendDecimal(_ value: Int) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        DecisionLine.appendDigits(UInt64(value.magnitude), to: out)
    }

    mutating func end() {
        if format == .json { out.append(UInt8(ascii: "}")) }
    }

    /// A text-format value: as it is when it is plain, else quoted with `"` and `\` escaped,
    /// control bytes as `\xNN`, bytes that are not UTF-8 as `\xNN`, and the characters that
    /// could reorder or break what a terminal shows (C1 controls, line separators,
    /// bidirectional controls and marks) as `\u{XXXX}`. Untrusted text cannot end the line,
    /// forge a field or turn what follows it around.
    public static func appendTextValue(_ value: UnsafeRawBufferPointer, to bytes: inout [UInt8]) {
        appendTextValue(value, into: &bytes)
    }

    /// `appendTextValue` into any sink: one escaping for the decision line's `LineBuffer` and
    /// `LogLines`' arrays.
    static func appendTextValue<Sink: ByteSink>(_ value: UnsafeRawBufferPointer, into bytes: inout Sink) {
        if isPlain(value) { bytes.append(value); return }
        bytes.append(0x22)
        var i = 0
        while i < value.count {
            let c = value[i]
            switch c {
            case 0x22, 0x5C: bytes.append(0x5C); bytes.append(c)
            case 0..<0x20, 0x7F: appendHex(c, to: &bytes)
            case 0x80...:
                let n = UTF8Rules.sequenceLength(value, at: i)
                if n == 0 { appendHex(c, to: &bytes); break }
                let scalar = UTF8Rules.scalar(value, at: i, length: n)
                if isUnsafe(scalar) {
                    bytes.append(0x5C)
                    bytes.append(UInt8(ascii: "u"))
                    bytes.append(UInt8(ascii: "{"))
                    var digits = String(scalar, radix: 16, uppercase: true)
                    digits.withUTF8 { bytes.append(UnsafeRawBufferPointer($0)) }
                    bytes.append(UInt8(ascii: "}"))
                } else {
                    bytes.append(UnsafeRawBufferPointer(rebasing: value[i..<(i + n)]))
                }
                i += n
                continue
            default: bytes.append(c)
            }
            i += 1
        }
        bytes.append(0x22)
    }

    /// Printable ASCII without `"`, `\`, `=` or a space, or valid UTF-8 without a character
    /// that needs escaping.
    private static func isPlain(_ value: UnsafeRawBufferPointer) -> Bool {
        guard let p = value.baseAddress, !value.isEmpty else { return false }
        var i = 0
        // Eight bytes at a time while every one is printable ASCII other than `"`, `\` and
        // `=`, the common value; from a word that holds anything else, byte by byte below.
        // With `ones` = 0x01 in every byte: `(x - 0x21·ones) & ~x` sets a byte's high bit when
        // it is below 0x21, `(x + ones) | x` when it is 0x7F or above, `(y - ones) & ~y` for
        // `y = x ^ c·ones` when it is `c`; a borrow or carry crosses into the next byte only
        // from a byte that is flagged itself, so no such word passes.
        let ones: UInt64 = 0x0101_0101_0101_0101
        @inline(__always) func zeroByte(_ y: UInt64) -> UInt64 { (y &- ones) & ~y }
        while i + 8 <= value.count {
            let x = p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            let flagged = ((x &- ones &* 0x21) & ~x) | (x &+ ones) | x | zeroByte(x ^ (ones &* 0x22))
                | zeroByte(x ^ (ones &* 0x5C)) | zeroByte(x ^ (ones &* 0x3D))
            if flagged & 0x8080_8080_8080_8080 != 0 { break }
            i += 8
        }
        while i < value.count {
            let c = value[i]
            if c <= 0x20 || c == 0x22 || c == 0x5C || c == 0x3D || c == 0x7F { return false }
            if c < 0x80 { i += 1; continue }
            let n = UTF8Rules.sequenceLength(value, at: i)
            if n == 0 || isUnsafe(UTF8Rules.scalar(value, at: i, length: n)) { return false }
            i += n
        }
        return true
    }

    private static func isUnsafe(_ scalar: UInt32) -> Bool {
        UnsafeCharacters.isControl(scalar) || UnsafeCharacters.isSeparator(scalar) || UnsafeCharacters.isBidiControl(scalar)
            || UnsafeCharacters.isBidiMark(scalar)
    }

    public static func appendJSONEscaped(_ value: UnsafeRawBufferPointer, to bytes: inout [UInt8]) {
        JSONWriter.appendEscaped(value, to: &bytes, escapingMarkup: false)
    }

    /// `\xNN`.
    private static func appendHex<Sink: ByteSink>(_ c: UInt8, to bytes: inout Sink) {
        let hex: StaticString = "0123456789abcdef"
        bytes.append(0x5C)
        bytes.append(UInt8(ascii: "x"))
        bytes.append(hex.utf8Start[Int(c >> 4)])
        bytes.append(hex.utf8Start[Int(c & 15)])
    }
}

/// `time=2026-11-29T23:20:01.123Z`: the date and time of a second are formatted once, the
/// milliseconds per line.
///
/// Threading: part of its `DecisionLine`.
struct WallClockText {
    private var second: Int64 = -1
    private var text: [UInt8] = []

    mutating func append(_ now: WallTime, to bytes: LineBuffer, json: Bool) {
        if now.seconds != second {
            second = now.seconds
            text = Array(UTCTime(seconds: now.seconds).text.utf8)
        }
        let ms = Int(now.nanoseconds / 1_000_000)
        // A StaticString's bytes: Array(String.utf8) allocated an array per line.
        let key: StaticString = json ? ",\"time\":\"" : " time="
        bytes.append(key)
        text.withUnsafeBytes { bytes.append($0) }
        bytes.append(UInt8(ascii: "."))
        bytes.append(UInt8(ascii: "0") + UInt8(ms / 100))
        bytes.append(UInt8(ascii: "0") + UInt8(ms / 10 % 10))
        bytes.append(UInt8(ascii: "0") + UInt8(ms % 10))
        bytes.append(UInt8(ascii: "Z"))
        if json { bytes.append(0x22) }
    }
}

/// Where the escaping writes: a `LineBuffer` or an array.
protocol ByteSink {
    mutating func append(_ byte: UInt8)
    mutating func append(_ bytes: UnsafeRawBufferPointer)
}

extension Array: ByteSink where Element == UInt8 {
    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) { append(contentsOf: bytes) }
}

/// A growable byte buffer written in place, with short pieces copied by word moves as
/// `ByteWriter` does (no call to memcpy).
///
/// Threading: belongs to its `DecisionLine`, so to one thread. Copies of a `DecisionLine`
/// share it, as copies of an `Answerer` share its parser.
final class LineBuffer: ByteSink {
    // One thread uses a buffer and no access overlaps another: no run-time exclusivity
    // checks (a `swift_beginAccess` pair per touch of a class property otherwise).
    @exclusivity(unchecked) private var base: UnsafeMutableRawPointer
    @exclusivity(unchecked) private var capacity: Int
    @exclusivity(unchecked) private(set) var count = 0

    init(capacity: Int = 1024) {
        self.capacity = capacity
        base = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit { base.deallocate() }

    /// Valid until the next append or `removeAll`.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    func removeAll() { count = 0 }

    @inline(__always)
    func append(_ byte: UInt8) {
        if count == capacity { grow(1) }
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    @inline(__always)
    func append(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inline(__always)
    func append(_ bytes: UnsafeRawBufferPointer) {
        let n = bytes.count
        guard n > 0, let p = bytes.baseAddress else { return }
        if capacity - count < n { grow(n) }
        let d = base + count
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

    @inline(never)
    private func grow(_ needed: Int) {
        let newCapacity = max(2 * capacity, count + needed)
        let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 8)
        newBase.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }
}
