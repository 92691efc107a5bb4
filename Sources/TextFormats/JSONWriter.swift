import TextRules

/// JSON text (RFC 8259) built front to back, commas placed by the writer:
/// every JSON document lookupd writes (the status document, `/lookup.json`,
/// the write API, `lookupd ... --json`) comes out of here.
///
/// Strings are escaped so that untrusted text (a caller's display name, a
/// feed's label) stays inert: control characters as `\n`, `\t`, `\uXXXX`,
/// bytes that are not UTF-8 as U+FFFD (JSON must be UTF-8), and `<`, `>`
/// and `&` as `\u` escapes, so that even a client that mistakes the document
/// for HTML finds no markup in it.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    /// Per open object or array: whether a member was written yet.
    private var started: [Bool] = []
    /// After `key`, the next value belongs to it and takes no comma.
    private var valuePending = false

    public init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    /// Starts a new document, keeping the buffer.
    public mutating func reset() {
        bytes.removeAll(keepingCapacity: true)
        started.removeAll(keepingCapacity: true)
        valuePending = false
    }

    private mutating func separate() {
        guard let last = started.last else { return }
        if last { bytes.append(UInt8(ascii: ",")) }
        started[started.count - 1] = true
    }

    private mutating func beforeValue() {
        if valuePending { valuePending = false } else { separate() }
    }

    private mutating func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }

    public mutating func key(_ name: String) {
        separate()
        quoted(name)
        bytes.append(UInt8(ascii: ":"))
        valuePending = true
    }

    public mutating func beginObject() { beforeValue(); bytes.append(UInt8(ascii: "{")); started.append(false) }
    public mutating func endObject() { started.removeLast(); bytes.append(UInt8(ascii: "}")) }
    public mutating func beginArray() { beforeValue(); bytes.append(UInt8(ascii: "[")); started.append(false) }
    public mutating func endArray() { started.removeLast(); bytes.append(UInt8(ascii: "]")) }

    public mutating func string(_ text: String) { beforeValue(); quoted(text) }
    public mutating func string(_ raw: UnsafeRawBufferPointer) { beforeValue(); quoted(raw) }
    public mutating func string(_ text: String?) { if let text { string(text) } else { null() } }
    public mutating func string(bytes: [UInt8]?) {
        guard let bytes else { return null() }
        bytes.withUnsafeBytes { string($0) }
    }

    public mutating func number<N: BinaryInteger>(_ n: N) { beforeValue(); raw(String(n)) }
    public mutating func number<N: BinaryInteger>(_ n: N?) { if let n { number(n) } else { null() } }
    public mutating func number(_ d: Double) { beforeValue(); raw(d.isFinite ? String(d) : "null") }
    public mutating func bool(_ b: Bool) { beforeValue(); raw(b ? "true" : "false") }
    public mutating func null() { beforeValue(); raw("null") }

    public mutating func field(_ name: String, _ value: String?) { key(name); string(value) }
    public mutating func field<N: BinaryInteger>(_ name: String, _ value: N) { key(name); number(value) }
    public mutating func field<N: BinaryInteger>(_ name: String, _ value: N?) { key(name); number(value) }
    public mutating func field(_ name: String, _ value: Double) { key(name); number(value) }
    public mutating func field(_ name: String, _ value: Bool) { key(name); bool(value) }
    public mutating func field(_ name: String, bytes value: [UInt8]?) { key(name); string(bytes: value) }
    public mutating func field(_ name: String, strings: [String]) {
        key(name)
        beginArray()
        for s in strings { string(s) }
        endArray()
    }

    /// The document and a line feed, as a command prints it.
    public var line: [UInt8] { bytes + [0x0A] }

    private mutating func quoted(_ text: String) {
        var text = text
        text.withUTF8 { quoted(UnsafeRawBufferPointer($0)) }
    }

    private mutating func quoted(_ raw: UnsafeRawBufferPointer) {
        bytes.append(0x22)
        JSONWriter.appendEscaped(raw, to: &bytes)
        bytes.append(0x22)
    }

    /// `value` as the inside of a JSON string: invalid UTF-8 as U+FFFD
    /// (SIP headers may carry anything); control characters, line and
    /// paragraph separators and bidirectional controls as \u escapes (no
    /// display name can reorder or break what a reader sees); and with
    /// `escapingMarkup` `<`, `>` and `&` too, so the text stays inert even in
    /// a client that mistakes the document for HTML (the decision log leaves
    /// them as they are: its lines are read as text).
    public static func appendEscaped(_ value: UnsafeRawBufferPointer, to bytes: inout [UInt8], escapingMarkup: Bool = true) {
        let hex: StaticString = "0123456789abcdef"
        func escape(_ scalar: UInt32) {
            bytes.append(contentsOf: [0x5C, UInt8(ascii: "u")])
            for shift in stride(from: 12, through: 0, by: -4) { bytes.append(hex.utf8Start[Int(scalar >> UInt32(shift) & 15)]) }
        }
        var i = 0
        while i < value.count {
            let c = value[i]
            switch c {
            case 0x22, 0x5C: bytes.append(0x5C); bytes.append(c)
            case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20, 0x7F: escape(UInt32(c))
            case 0x3C, 0x3E, 0x26 where escapingMarkup: escape(UInt32(c))
            case 0x80...:
                let length = UTF8Rules.sequenceLength(value, at: i)
                if length == 0 {
                    bytes.append(contentsOf: [0xEF, 0xBF, 0xBD])
                } else {
                    let scalar = UTF8Rules.scalar(value, at: i, length: length)
                    if isUnsafe(scalar) {
                        // Every one of these is in the Basic Multilingual Plane: one \uXXXX.
                        escape(scalar)
                    } else {
                        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: value[i..<(i + length)]))
                    }
                    i += length
                    continue
                }
            default: bytes.append(c)
            }
            i += 1
        }
    }

    private static func isUnsafe(_ scalar: UInt32) -> Bool {
        UnsafeCharacters.isControl(scalar) || UnsafeCharacters.isSeparator(scalar) || UnsafeCharacters.isBidiControl(scalar)
            || UnsafeCharacters.isBidiMark(scalar)
    }
}
