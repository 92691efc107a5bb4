/// A parsed JSON value (RFC 8259).
///
/// Numbers keep their exact lexeme: `+8613800138000` written as the JSON
/// number `8613800138000` must not lose digits through `Double`. Objects keep
/// member order and duplicate keys; the key lookups return the *last*
/// duplicate, as JavaScript's `JSON.parse` does. Sendable value type.
public enum JSONValue: Sendable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    /// The number exactly as written, e.g. `"-1.50e3"`; grammar-checked.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    /// Nesting limit used when none is given: deep enough for any real
    /// directory file, shallow enough that hostile input cannot exhaust the
    /// stack.
    public static let defaultMaxDepth = 64

    /// Member `key` of an object (the last one if duplicated); nil for a
    /// missing key or a non-object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.key == key })?.value
    }

    /// Element `index` of an array; nil when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The number's lexeme as written.
    public var numberLexeme: String? {
        if case .number(let n) = self { return n }
        return nil
    }

    /// The number as an `Int64` when it is written as an integer in range.
    public var int64Value: Int64? {
        if case .number(let n) = self { return Int64(n) }
        return nil
    }

    /// The number as the nearest `Double` (may lose precision).
    public var doubleValue: Double? {
        if case .number(let n) = self { return Double(n) }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var objectMembers: [(key: String, value: JSONValue)]? {
        if case .object(let o) = self { return o }
        return nil
    }

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    /// Compact JSON text for this value.
    public var description: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += n
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .array(let elements):
            out += "["
            for (i, e) in elements.enumerated() {
                if i > 0 { out += "," }
                e.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, m) in members.enumerated() {
                if i > 0 { out += "," }
                JSONValue.writeString(m.key, to: &out)
                out += ":"
                m.value.write(to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// How a JSON directory file is laid out, judged by its first non-blank byte.
public enum JSONLayout: Sendable, Equatable {
    /// A single top-level array (`[`): read it element by element.
    case array
    /// One value per line (JSON Lines), which also covers a single object
    /// spread over several lines.
    case jsonLines
}

extension JSONValue {
    /// Parses a complete JSON document. A BOM is ignored; anything but
    /// whitespace after the value is an error.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws -> JSONValue {
        try bytes.withUnsafeBytes { try parse($0, maxDepth: maxDepth) }
    }

    public static func parse(_ bytes: UnsafeRawBufferPointer, maxDepth: Int = defaultMaxDepth) throws -> JSONValue {
        try InputStorage.raw(bytes).withContent { p, end in
            var parser = JSONParser(p, end: end, maxDepth: maxDepth)
            parser.skipWhitespace()
            if parser.i == end {
                throw parser.error("empty input, expected a JSON value", at: end)
            }
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            if parser.i < end {
                throw parser.error("unexpected \(describeCharacter(p, at: parser.i, end: end)) after the JSON value",
                                   at: parser.i)
            }
            return value
        }
    }

    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws -> JSONValue {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }

    /// Layout of `bytes` by its first non-whitespace byte (after any BOM):
    /// `[` is `.array`, anything else `.jsonLines`; nil when there is nothing
    /// but whitespace.
    public static func detectLayout(_ bytes: UnsafeRawBufferPointer) -> JSONLayout? {
        InputStorage.raw(bytes).withContent { p, end in
            var parser = JSONParser(p, end: end, maxDepth: 1)
            parser.skipWhitespace()
            guard parser.i < end else { return nil }
            return p[parser.i] == UInt8(ascii: "[") ? .array : .jsonLines
        }
    }

    public static func detectLayout(_ bytes: [UInt8]) -> JSONLayout? {
        bytes.withUnsafeBytes { detectLayout($0) }
    }

    /// Streams the elements of a top-level array, each with the line it
    /// starts on, without building the whole array. Elements before a syntax
    /// error have already been delivered when the error is thrown. Errors
    /// thrown by `body` propagate unchanged.
    public static func forEachElement(ofTopLevelArrayIn bytes: UnsafeRawBufferPointer,
                                      maxDepth: Int = defaultMaxDepth,
                                      _ body: (_ line: Int, _ element: JSONValue) throws -> Void) throws {
        try InputStorage.raw(bytes).withContent { p, end in
            var parser = JSONParser(p, end: end, maxDepth: maxDepth)
            parser.skipWhitespace()
            guard parser.i < end else {
                throw parser.error("empty input, expected a JSON array", at: end)
            }
            guard p[parser.i] == UInt8(ascii: "[") else {
                throw parser.error("expected a top-level JSON array ('['), found \(describeCharacter(p, at: parser.i, end: end))",
                                   at: parser.i)
            }
            guard maxDepth >= 1 else { throw parser.depthError() }
            parser.i += 1
            parser.skipWhitespace()
            if parser.i < end, p[parser.i] == UInt8(ascii: "]") {
                parser.i += 1
            } else {
                while true {
                    parser.skipWhitespace()
                    if parser.i < end, p[parser.i] == UInt8(ascii: "]") {
                        throw parser.error("trailing comma before ']'", at: parser.i)
                    }
                    let line = parser.line
                    let element = try parser.parseValue(depth: 1)
                    try body(line, element)
                    parser.skipWhitespace()
                    if parser.i < end, p[parser.i] == UInt8(ascii: ",") {
                        parser.i += 1
                        continue
                    }
                    if parser.i < end, p[parser.i] == UInt8(ascii: "]") {
                        parser.i += 1
                        break
                    }
                    throw parser.expectation("expected ',' or ']' after array element")
                }
            }
            parser.skipWhitespace()
            if parser.i < end {
                throw parser.error("unexpected \(describeCharacter(p, at: parser.i, end: end)) after the top-level array",
                                   at: parser.i)
            }
        }
    }

    public static func forEachElement(ofTopLevelArrayIn bytes: [UInt8], maxDepth: Int = defaultMaxDepth,
                                      _ body: (_ line: Int, _ element: JSONValue) throws -> Void) throws {
        try bytes.withUnsafeBytes { try forEachElement(ofTopLevelArrayIn: $0, maxDepth: maxDepth, body) }
    }

    /// Streams JSON Lines: whitespace-separated values, each reported with
    /// the line it starts on. Blank lines are skipped. A value may span lines
    /// (so one pretty-printed object also works); when an error lies on a
    /// later line than the value's start, the message names the start line.
    public static func forEachValue(inJSONLines bytes: UnsafeRawBufferPointer,
                                    maxDepth: Int = defaultMaxDepth,
                                    _ body: (_ line: Int, _ value: JSONValue) throws -> Void) throws {
        try InputStorage.raw(bytes).withContent { p, end in
            var parser = JSONParser(p, end: end, maxDepth: maxDepth)
            while true {
                parser.skipWhitespace()
                if parser.i == end { break }
                let line = parser.line
                let value: JSONValue
                do {
                    value = try parser.parseValue(depth: 0)
                } catch var error as TextFormatError {
                    if error.line != line { error.message += " (in the value starting on line \(line))" }
                    throw error
                }
                try body(line, value)
            }
        }
    }

    public static func forEachValue(inJSONLines bytes: [UInt8], maxDepth: Int = defaultMaxDepth,
                                    _ body: (_ line: Int, _ value: JSONValue) throws -> Void) throws {
        try bytes.withUnsafeBytes { try forEachValue(inJSONLines: $0, maxDepth: maxDepth, body) }
    }

    /// Streams the records of a JSON file in either layout (see
    /// `detectLayout`): the elements of a top-level array, or each value of
    /// JSON Lines. Empty input yields nothing.
    public static func forEachRecord(in bytes: UnsafeRawBufferPointer, maxDepth: Int = defaultMaxDepth,
                                     _ body: (_ line: Int, _ value: JSONValue) throws -> Void) throws {
        switch detectLayout(bytes) {
        case nil: return
        case .array?: try forEachElement(ofTopLevelArrayIn: bytes, maxDepth: maxDepth, body)
        case .jsonLines?: try forEachValue(inJSONLines: bytes, maxDepth: maxDepth, body)
        }
    }

    public static func forEachRecord(in bytes: [UInt8], maxDepth: Int = defaultMaxDepth,
                                     _ body: (_ line: Int, _ value: JSONValue) throws -> Void) throws {
        try bytes.withUnsafeBytes { try forEachRecord(in: $0, maxDepth: maxDepth, body) }
    }
}

/// Recursive-descent parser. Line tracking happens only in
/// `skipWhitespace`, because raw line breaks are legal nowhere else.
struct JSONParser {
    let p: UnsafePointer<UInt8>
    let end: Int
    let maxDepth: Int
    var i = 0
    var line = 1
    var lineStart = 0
    var scratch: [UInt8] = []

    init(_ p: UnsafePointer<UInt8>, end: Int, maxDepth: Int) {
        self.p = p
        self.end = end
        self.maxDepth = maxDepth
    }

    func error(_ message: String, at offset: Int) -> TextFormatError {
        TextFormatError(line: line, column: column(p, lineStart: lineStart, target: offset), message: message)
    }

    /// An error for a missing token at `i`, worded for truncated files too.
    func expectation(_ message: String) -> TextFormatError {
        if i == end { return error("unexpected end of input: " + message, at: i) }
        return error(message, at: i)
    }

    func depthError() -> TextFormatError {
        error("nesting deeper than \(maxDepth) levels", at: i)
    }

    mutating func skipWhitespace() {
        while i < end {
            switch p[i] {
            case ASCII.space, ASCII.tab:
                i += 1
            case ASCII.lf:
                i += 1
                line += 1
                lineStart = i
            case ASCII.cr:
                i += 1
                if i < end, p[i] == ASCII.lf { i += 1 }
                line += 1
                lineStart = i
            default:
                return
            }
        }
    }

    /// `depth` is the number of enclosing containers.
    mutating func parseValue(depth: Int) throws -> JSONValue {
        guard i < end else { throw expectation("expected a value") }
        switch p[i] {
        case UInt8(ascii: "{"):
            guard depth < maxDepth else { throw depthError() }
            return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["):
            guard depth < maxDepth else { throw depthError() }
            return try parseArray(depth: depth + 1)
        case ASCII.quote:
            return .string(try parseString())
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try parseNumber())
        case UInt8(ascii: "t"):
            try parseLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try parseLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try parseLiteral("null")
            return .null
        case UInt8(ascii: "'"):
            throw error("strings must be in double quotes, not single quotes", at: i)
        case UInt8(ascii: "+"):
            throw error("numbers cannot start with '+'; write the value as a string, e.g. \"+8613800138000\"", at: i)
        default:
            throw error("unexpected \(describeCharacter(p, at: i, end: end)), expected a value", at: i)
        }
    }

    mutating func parseArray(depth: Int) throws -> JSONValue {
        i += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if i < end, p[i] == UInt8(ascii: "]") {
            i += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            if i < end, p[i] == UInt8(ascii: "]") { throw error("trailing comma before ']'", at: i) }
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            if i < end, p[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if i < end, p[i] == UInt8(ascii: "]") {
                i += 1
                return .array(elements)
            }
            throw expectation("expected ',' or ']' after array element")
        }
    }

    mutating func parseObject(depth: Int) throws -> JSONValue {
        i += 1
        var members: [(key: String, value: JSONValue)] = []
        skipWhitespace()
        if i < end, p[i] == UInt8(ascii: "}") {
            i += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard i < end, p[i] == ASCII.quote else {
                if i < end, p[i] == UInt8(ascii: "}") { throw error("trailing comma before '}'", at: i) }
                if i < end, p[i] != UInt8(ascii: "'"), p[i] < 0x80 {
                    throw expectation("expected a double-quoted string as object key")
                }
                throw expectation("object keys must be double-quoted strings")
            }
            let key = try parseString()
            skipWhitespace()
            guard i < end, p[i] == ASCII.colon else { throw expectation("expected ':' after object key") }
            i += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            members.append((key: key, value: value))
            skipWhitespace()
            if i < end, p[i] == UInt8(ascii: ",") {
                i += 1
                continue
            }
            if i < end, p[i] == UInt8(ascii: "}") {
                i += 1
                return .object(members)
            }
            throw expectation("expected ',' or '}' after object member")
        }
    }

    mutating func parseLiteral(_ word: StaticString) throws {
        let start = i
        let n = word.utf8CodeUnitCount
        let w = word.utf8Start
        var k = 0
        while k < n, i + k < end, p[i + k] == w[k] { k += 1 }
        guard k == n else {
            throw error("invalid literal (expected true, false or null)", at: start)
        }
        i += n
    }

    mutating func parseNumber() throws -> String {
        let start = i
        if p[i] == UInt8(ascii: "-") { i += 1 }
        guard i < end, isDigit(p[i]) else {
            throw expectation("expected a digit after '-'")
        }
        if p[i] == UInt8(ascii: "0") {
            i += 1
            if i < end, isDigit(p[i]) {
                throw error("leading zeros are not allowed in numbers (write phone numbers as strings)", at: start)
            }
        } else {
            while i < end, isDigit(p[i]) { i += 1 }
        }
        if i < end, p[i] == UInt8(ascii: ".") {
            i += 1
            guard i < end, isDigit(p[i]) else { throw expectation("expected a digit after the decimal point") }
            while i < end, isDigit(p[i]) { i += 1 }
        }
        if i < end, p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E") {
            i += 1
            if i < end, p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-") { i += 1 }
            guard i < end, isDigit(p[i]) else { throw expectation("expected a digit in the exponent") }
            while i < end, isDigit(p[i]) { i += 1 }
        }
        return String(decoding: UnsafeBufferPointer(start: p + start, count: i - start), as: UTF8.self)
    }

    @inline(__always)
    func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    mutating func parseString() throws -> String {
        let open = i
        i += 1
        let contentStart = i
        var high: UInt8 = 0
        while i < end {
            let b = p[i]
            if b == ASCII.quote {
                if high & 0x80 != 0 { try validateUTF8(contentStart, i) }
                let s = String(decoding: UnsafeBufferPointer(start: p + contentStart, count: i - contentStart),
                               as: UTF8.self)
                i += 1
                return s
            }
            if b == ASCII.backslash || b < 0x20 { break }
            high |= b
            i += 1
        }
        // Slow path: escapes present (or an error ahead).
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(start: p + contentStart, count: i - contentStart))
        while true {
            guard i < end else {
                throw error("unterminated string (opened at column \(column(p, lineStart: lineStart, target: open)))",
                            at: i)
            }
            let b = p[i]
            if b == ASCII.quote {
                if high & 0x80 != 0 { try validateUTF8(contentStart, i) }
                i += 1
                return String(decoding: scratch, as: UTF8.self)
            }
            if b == ASCII.lf || b == ASCII.cr {
                throw error("unterminated string (a line break cannot appear inside a string; write it as \\n)", at: open)
            }
            if b < 0x20 {
                throw error("control character \(hexScalar(UInt32(b))) must be escaped in a string", at: i)
            }
            if b != ASCII.backslash {
                high |= b
                scratch.append(b)
                i += 1
                continue
            }
            let escapeStart = i
            i += 1
            guard i < end else { throw expectation("unterminated escape sequence") }
            let e = p[i]
            i += 1
            switch e {
            case ASCII.quote: scratch.append(ASCII.quote)
            case ASCII.backslash: scratch.append(ASCII.backslash)
            case UInt8(ascii: "/"): scratch.append(UInt8(ascii: "/"))
            case UInt8(ascii: "b"): scratch.append(0x08)
            case UInt8(ascii: "f"): scratch.append(0x0C)
            case UInt8(ascii: "n"): scratch.append(ASCII.lf)
            case UInt8(ascii: "r"): scratch.append(ASCII.cr)
            case UInt8(ascii: "t"): scratch.append(ASCII.tab)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4(escapeStart)
                if scalar >= 0xD800, scalar <= 0xDBFF {
                    guard i + 1 < end, p[i] == ASCII.backslash, p[i + 1] == UInt8(ascii: "u") else {
                        throw error("lone high surrogate \\u\(hex4(scalar)) (must be followed by a low surrogate \\uDC00-\\uDFFF)",
                                    at: escapeStart)
                    }
                    let lowStart = i
                    i += 2
                    let low = try parseHex4(lowStart)
                    guard low >= 0xDC00, low <= 0xDFFF else {
                        throw error("lone high surrogate \\u\(hex4(scalar)) (must be followed by a low surrogate \\uDC00-\\uDFFF)",
                                    at: escapeStart)
                    }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00, scalar <= 0xDFFF {
                    throw error("lone low surrogate \\u\(hex4(scalar)) (not preceded by a high surrogate)", at: escapeStart)
                }
                scratch.append(contentsOf: Unicode.UTF8.encode(Unicode.Scalar(scalar)!)!)
            default:
                throw error("invalid escape sequence '\\\(describeEscape(e))' in string (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)",
                            at: escapeStart)
            }
        }
    }

    private func describeEscape(_ b: UInt8) -> String {
        b >= 0x21 && b < 0x7F ? String(Character(Unicode.Scalar(b))) : hexScalar(UInt32(b))
    }

    private func hex4(_ v: UInt32) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }

    /// Reads the four hex digits after `\u`.
    mutating func parseHex4(_ escapeStart: Int) throws -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard i < end else { throw expectation("incomplete \\u escape: expected 4 hex digits") }
            guard let d = TextInput.hexValue(p[i]) else { throw error("invalid \\u escape: expected 4 hex digits", at: escapeStart) }
            v = v << 4 | UInt32(d)
            i += 1
        }
        return v
    }

    func validateUTF8(_ from: Int, _ to: Int) throws {
        if let bad = invalidUTF8Offset(p, from: from, to: to) {
            throw invalidUTF8Error(p, at: bad, line: line, column: column(p, lineStart: lineStart, target: bad))
        }
    }
}
