/// What a label may contain. Labels end up in SIP headers (display names, `X-Caller-Label`),
/// so the same rules are checked when a directory is compiled, when it is verified, when a
/// contact list or a journal record is read, and by the SIP layer when it writes them:
/// valid UTF-8, 1...255 bytes, no control characters (C0, DEL, C1), no line or paragraph
/// separators, no bidirectional embeddings, overrides or isolates.
public enum LabelRules {
    public static let maxBytes = 255

    /// Why a label is refused.
    public enum Problem: Hashable, Sendable, CustomStringConvertible {
        case empty
        case tooLong(bytes: Int, limit: Int)
        case controlCharacter(UInt32)
        case lineSeparator(UInt32)
        case bidiControl(UInt32)
        case invalidUTF8

        public var description: String {
            switch self {
            case .empty: return "empty label"
            case .tooLong(let n, let limit): return "label is \(n) bytes, longer than \(limit)"
            case .controlCharacter(let v): return "label contains the control character U+\(hex4(v))"
            case .lineSeparator(let v): return "label contains the line separator U+\(hex4(v))"
            case .bidiControl(let v):
                return "label contains the bidirectional control U+\(hex4(v)) (it reorders what is displayed after it)"
            case .invalidUTF8: return "label is not valid UTF-8"
            }
        }
    }

    public static func check(_ bytes: UnsafeRawBufferPointer, maxBytes: Int = LabelRules.maxBytes) -> Problem? {
        if bytes.isEmpty { return .empty }
        if bytes.count > maxBytes { return .tooLong(bytes: bytes.count, limit: maxBytes) }
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b >= 0x20 && b < 0x7F { i += 1; continue }
            let n = UTF8Rules.sequenceLength(bytes, at: i)
            if n == 0 { return .invalidUTF8 }
            let v = UTF8Rules.scalar(bytes, at: i, length: n)
            if UnsafeCharacters.isControl(v) { return .controlCharacter(v) }
            if UnsafeCharacters.isSeparator(v) { return .lineSeparator(v) }
            if UnsafeCharacters.isBidiControl(v) { return .bidiControl(v) }
            i += n
        }
        return nil
    }

    /// The reason `bytes` is not an acceptable label, or nil when it is.
    public static func problem(_ bytes: UnsafeRawBufferPointer) -> String? { check(bytes)?.description }

    public static func problem(_ text: String) -> String? {
        var text = text
        return text.withUTF8 { problem(UnsafeRawBufferPointer($0)) }
    }

    /// Labels holding a backslash are written escaped (`\\`) in SIP quoted-strings, which some
    /// phones mishandle (twinkle 1.10 drops every INVITE whose display name holds one): the
    /// first few such labels of `labels` and how many there are, for a compile-time warning.
    public static func backslashWarning(_ labels: [[UInt8]]) -> String? {
        let found = labels.filter { $0.contains(0x5C) }
        guard !found.isEmpty else { return nil }
        let shown = found.prefix(3).map { "\"" + String(decoding: $0, as: UTF8.self) + "\"" }.joined(separator: ", ")
        return "\(found.count) label\(found.count == 1 ? " holds" : "s hold") a backslash (\(shown)\(found.count > 3 ? ", ..." : "")), "
            + "which SIP writes escaped as \\\\; some phones (twinkle 1.10) drop calls whose display name holds one: "
            + "set label-escapes = replace in lookupd.conf to write it as /"
    }

    static func hex4(_ v: UInt32) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }
}
