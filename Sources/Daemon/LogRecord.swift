import Answering
import TextFormats

// Reading decision-log lines back (`lookupd log`, the status page's
// recent calls): the inverse of `DecisionLine`, for both log formats.

/// One decision-log line's fields in their order, values unescaped.
public struct LogRecord: Sendable {
    public var fields: [(key: String, value: String?)] = []

    public init() {}

    public subscript(_ key: String) -> String? { fields.first { $0.key == key }?.value ?? nil }

    /// A `call key=value ...` line (an optional `<N>` priority prefix is
    /// skipped) or a `{"event":"call",...}` line; nil for anything else.
    public static func parse(_ line: Substring) -> LogRecord? {
        var text = line
        if text.first == "<", let close = text.firstIndex(of: ">"), text.distance(from: text.startIndex, to: close) <= 2 {
            text = text[text.index(after: close)...]
        }
        if text.hasPrefix("{") { return parseJSON(Array(text.utf8)) }
        guard text.hasPrefix("call ") else { return nil }
        return parseText(Array(text.utf8).dropFirst(5))
    }

    private static func parseText(_ bytes: ArraySlice<UInt8>) -> LogRecord? {
        var record = LogRecord()
        var i = bytes.startIndex
        while i < bytes.endIndex {
            while i < bytes.endIndex, bytes[i] == 0x20 { i += 1 }
            if i == bytes.endIndex { break }
            let keyStart = i
            while i < bytes.endIndex, bytes[i] != UInt8(ascii: "="), bytes[i] != 0x20 { i += 1 }
            guard i < bytes.endIndex, bytes[i] == UInt8(ascii: "=") else { return nil }
            let key = String(decoding: bytes[keyStart..<i], as: UTF8.self)
            i += 1
            var value: [UInt8] = []
            if i < bytes.endIndex, bytes[i] == 0x22 {
                i += 1
                var closed = false
                while i < bytes.endIndex {
                    let c = bytes[i]
                    if c == 0x22 { closed = true; i += 1; break }
                    if c == 0x5C, i + 1 < bytes.endIndex {
                        let next = bytes[i + 1]
                        if next == UInt8(ascii: "x"), i + 3 < bytes.endIndex, let hi = TextInput.hexValue(bytes[i + 2]), let lo = TextInput.hexValue(bytes[i + 3]) {
                            value.append(hi << 4 | lo)
                            i += 4
                        } else if next == UInt8(ascii: "u"), i + 2 < bytes.endIndex, bytes[i + 2] == UInt8(ascii: "{"),
                                  let close = bytes[(i + 3)...].prefix(9).firstIndex(of: UInt8(ascii: "}")),
                                  let v = UInt32(String(decoding: bytes[(i + 3)..<close], as: UTF8.self), radix: 16),
                                  let scalar = Unicode.Scalar(v) {
                            // A character the daemon escaped (a bidi control, a C1 control).
                            value.append(contentsOf: Array(String(Character(scalar)).utf8))
                            i = close + 1
                        } else {
                            value.append(next)
                            i += 2
                        }
                        continue
                    }
                    value.append(c)
                    i += 1
                }
                guard closed else { return nil }
            } else {
                while i < bytes.endIndex, bytes[i] != 0x20 { value.append(bytes[i]); i += 1 }
            }
            record.fields.append((key, String(decoding: value, as: UTF8.self)))
        }
        return record.fields.isEmpty ? nil : record
    }

    /// A flat JSON object of strings, numbers and nulls (what the daemon writes).
    private static func parseJSON(_ bytes: [UInt8]) -> LogRecord? {
        var record = LogRecord()
        var i = 0
        func skipSpace() { while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0D { i += 1 } }
        func string() -> String? {
            guard i < bytes.count, bytes[i] == 0x22 else { return nil }
            i += 1
            var out: [UInt8] = []
            while i < bytes.count {
                let c = bytes[i]
                if c == 0x22 { i += 1; return String(decoding: out, as: UTF8.self) }
                if c == 0x5C {
                    guard i + 1 < bytes.count else { return nil }
                    let e = bytes[i + 1]
                    i += 2
                    switch e {
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "u"):
                        guard i + 4 <= bytes.count else { return nil }
                        var scalar: UInt32 = 0
                        for k in 0..<4 {
                            guard let h = TextInput.hexValue(bytes[i + k]) else { return nil }
                            scalar = scalar << 4 | UInt32(h)
                        }
                        i += 4
                        out.append(contentsOf: Array(String(Unicode.Scalar(scalar).map(Character.init) ?? "\u{FFFD}").utf8))
                    default: out.append(e)
                    }
                    continue
                }
                out.append(c)
                i += 1
            }
            return nil
        }
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { return nil }
        i += 1
        while true {
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { break }
            guard let key = string() else { return nil }
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
            i += 1
            skipSpace()
            let value: String?
            if i < bytes.count, bytes[i] == 0x22 {
                guard let s = string() else { return nil }
                value = s
            } else {
                let start = i
                while i < bytes.count, bytes[i] != UInt8(ascii: ","), bytes[i] != UInt8(ascii: "}") { i += 1 }
                let word = String(decoding: bytes[start..<i].filter { $0 != 0x20 && $0 != 0x09 }, as: UTF8.self)
                value = word == "null" ? nil : word
            }
            record.fields.append((key, value))
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            guard i < bytes.count, bytes[i] == UInt8(ascii: "}") else { return nil }
            break
        }
        guard record["event"] == "call" else { return nil }
        record.fields.removeAll { $0.key == "event" }
        return record
    }
}
