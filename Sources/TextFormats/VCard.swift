/// One property parameter, e.g. `TYPE=cell,voice`.
///
/// `name` is upper-cased. vCard 2.1 bare parameters are normalised: `CELL`
/// becomes `TYPE=CELL` and `QUOTED-PRINTABLE` becomes
/// `ENCODING=QUOTED-PRINTABLE`. Values are unquoted and split on commas;
/// their case is kept.
public struct VCardParameter: Sendable, Equatable {
    public var name: String
    public var values: [String]

    public init(name: String, values: [String]) {
        self.name = name
        self.values = values
    }
}

/// A `TEL` property.
public struct VCardTelephone: Sendable, Equatable {
    /// Physical line where the property starts.
    public var line: Int
    /// The value as written (decoded and trimmed), e.g. `+86 138 0013 8000`
    /// or, for vCard 4.0 `VALUE=uri`, `tel:+1-555-555-0100`.
    public var value: String
    /// Property group, e.g. `item1` in `item1.TEL`.
    public var group: String?
    /// `TYPE` values, lower-cased, in order (`cell`, `voice`, `pref`, ...).
    public var types: [String]
    /// The `VALUE` parameter lower-cased (`uri`, `text`), if given.
    public var valueType: String?
    /// All parameters, as written.
    public var parameters: [VCardParameter]
    /// Apple's custom label (`item1.X-ABLabel`) for the same group, with the
    /// `_$!<...>!$_` wrapper of built-in labels removed.
    public var label: String?

    public init(line: Int, value: String, group: String? = nil, types: [String] = [],
                valueType: String? = nil, parameters: [VCardParameter] = [], label: String? = nil) {
        self.line = line
        self.value = value
        self.group = group
        self.types = types
        self.valueType = valueType
        self.parameters = parameters
        self.label = label
    }

    /// Marked preferred by `TYPE=pref` (2.1/3.0) or a `PREF` parameter (4.0).
    public var isPreferred: Bool {
        types.contains("pref") || parameters.contains { $0.name == "PREF" }
    }

    /// `value` with a `tel:` scheme and URI parameters (`;ext=...`) removed, or the user
    /// part of a `sip:`/`sips:` URI (some address books export those); any other value
    /// unchanged. Number normalisation is the caller's job.
    public var number: String { VCardTelephone.strippingSIPScheme(VCardTelephone.strippingTelScheme(value)) }

    /// `sip:+8613800000001@pbx` becomes `+8613800000001`; other text is unchanged.
    static func strippingSIPScheme(_ value: String) -> String {
        let lower = value.prefix(5).lowercased()
        let rest: Substring
        if lower.hasPrefix("sips:") { rest = value.dropFirst(5) } else if lower.hasPrefix("sip:") { rest = value.dropFirst(4) } else {
            return value
        }
        guard let at = rest.lastIndex(of: "@") else { return value }
        return String(rest[..<at].prefix(while: { $0 != ";" && $0 != ":" }))
    }

    /// `tel:+1-555-555-0100;ext=12` becomes `+1-555-555-0100`; text without
    /// a `tel:` prefix is returned unchanged.
    public static func strippingTelScheme(_ value: String) -> String {
        let scalars = value.unicodeScalars
        guard scalars.count >= 4, String(String.UnicodeScalarView(scalars.prefix(4))).lowercased() == "tel:" else {
            return value
        }
        let rest = scalars.dropFirst(4).prefix(while: { $0 != ";" })
        return String(String.UnicodeScalarView(rest))
    }
}

/// The structured name (`N`) of a card; components are unescaped, with
/// multiple values in one component joined by spaces.
public struct VCardName: Sendable, Equatable {
    public var familyName: String
    public var givenName: String
    public var additionalNames: String
    public var prefixes: String
    public var suffixes: String

    public init(familyName: String = "", givenName: String = "", additionalNames: String = "",
                prefixes: String = "", suffixes: String = "") {
        self.familyName = familyName
        self.givenName = givenName
        self.additionalNames = additionalNames
        self.prefixes = prefixes
        self.suffixes = suffixes
    }

    /// A display form: "Prefix Given Additional Family Suffix", or, when the
    /// name is written in CJK script, family then given name without spaces
    /// (王 + 小明 is 王小明). Nil when every component is empty.
    public var displayName: String? {
        let all = [familyName, givenName, additionalNames, prefixes, suffixes]
        if all.allSatisfy({ $0.isEmpty }) { return nil }
        if all.contains(where: VCardName.isCJK) {
            return [prefixes, familyName, givenName, additionalNames, suffixes].filter { !$0.isEmpty }.joined()
        }
        return [prefixes, givenName, additionalNames, familyName, suffixes].filter { !$0.isEmpty }
            .joined(separator: " ")
    }

    static func isCJK(_ s: String) -> Bool {
        s.unicodeScalars.contains { scalar in
            switch scalar.value {
            case 0x3040...0x30FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xAC00...0xD7AF, 0xF900...0xFAFF,
                 0x20000...0x2FA1F:
                return true
            default:
                return false
            }
        }
    }
}

/// One contact card from a vCard 2.1, 3.0 or 4.0 file (RFC 2426, RFC 6350),
/// reduced to what caller ID needs. Sendable value type.
///
/// Text values (`FN`, `N`, `ORG`) are unescaped (`\,` `\;` `\\` `\n`), so
/// they may contain line breaks: sanitise before putting them in a SIP
/// header.
public struct VCard: Sendable, Equatable {
    /// Line of `BEGIN:VCARD`.
    public var line: Int
    /// Line of `END:VCARD`.
    public var endLine: Int
    /// The `VERSION` value, if present.
    public var version: String?
    /// `FN`, unescaped and trimmed; nil when absent or empty.
    public var formattedName: String?
    /// `N`, if present.
    public var name: VCardName?
    /// `ORG` components joined by ", ", if present and non-empty.
    public var organization: String?
    /// Every `TEL`, in file order.
    public var telephones: [VCardTelephone]

    public init(line: Int, endLine: Int, version: String? = nil, formattedName: String? = nil,
                name: VCardName? = nil, organization: String? = nil, telephones: [VCardTelephone] = []) {
        self.line = line
        self.endLine = endLine
        self.version = version
        self.formattedName = formattedName
        self.name = name
        self.organization = organization
        self.telephones = telephones
    }

    /// The best name to show: `FN`, else one built from `N`, else `ORG`.
    public var displayName: String? {
        formattedName ?? name?.displayName ?? organization
    }

    /// Parses every card in a file. Unknown properties are ignored, and only
    /// the properties read here must be valid in their character set.
    public static func parse(_ bytes: [UInt8]) throws -> [VCard] {
        try bytes.withUnsafeBytes { try parse($0) }
    }

    public static func parse(_ bytes: UnsafeRawBufferPointer) throws -> [VCard] {
        try InputStorage.raw(bytes).withContent { p, end in
            var parser = VCardParser(p: p, end: end)
            return try parser.run()
        }
    }

    public static func parse(_ text: String) throws -> [VCard] {
        try parse(Array(text.utf8))
    }
}

// MARK: - Parser

struct VCardProperty {
    var group: String?
    /// Upper-cased.
    var name: String
    var parameters: [VCardParameter]
    var valueStart: Int

    func values(of parameter: String) -> [String] {
        parameters.filter { $0.name == parameter }.flatMap(\.values)
    }

    func has(_ parameter: String, oneOf candidates: Set<String>) -> Bool {
        values(of: parameter).contains { candidates.contains($0.uppercased()) }
    }

    var isQuotedPrintable: Bool { has("ENCODING", oneOf: ["QUOTED-PRINTABLE"]) }
    var isBase64: Bool { has("ENCODING", oneOf: ["BASE64", "B"]) }
}

struct VCardParser {
    let p: UnsafePointer<UInt8>
    let end: Int
    var i = 0
    var lineNumber = 1

    struct PhysicalLine {
        var start: Int
        var end: Int
        var line: Int
        var isBlank: Bool
    }

    mutating func nextPhysicalLine() -> PhysicalLine? {
        guard i < end else { return nil }
        let start = i
        var blank = true
        while i < end, p[i] != ASCII.lf, p[i] != ASCII.cr {
            if !isBlank(p[i]) { blank = false }
            i += 1
        }
        let result = PhysicalLine(start: start, end: i, line: lineNumber, isBlank: blank)
        if i < end {
            if p[i] == ASCII.cr, i + 1 < end, p[i + 1] == ASCII.lf { i += 1 }
            i += 1
        }
        lineNumber += 1
        return result
    }

    func bytes(_ l: PhysicalLine, droppingFirst drop: Int = 0) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: p + l.start + drop, count: l.end - l.start - drop)
    }

    func contains(_ l: PhysicalLine, _ byte: UInt8) -> Bool {
        bytes(l).contains(byte)
    }

    func isEndVCard(_ l: PhysicalLine) -> Bool {
        let text = String(decoding: bytes(l), as: UTF8.self)
        return text.trimmingBlanks().uppercased() == "END:VCARD"
    }

    mutating func run() throws -> [VCard] {
        var cards: [VCard] = []
        var card: VCard?
        var labels: [String: String] = [:]
        var current = nextPhysicalLine()
        while let first = current {
            current = nextPhysicalLine()
            if first.isBlank { continue }
            var content = Array(bytes(first))
            // Unfold: QP soft breaks first, since a QP continuation may itself
            // start with a space that belongs to the value.
            while let next = current {
                if content.last == ASCII.equals, !isEndVCard(next),
                   let property = parseHeader(content), property.isQuotedPrintable {
                    content.removeLast()
                    content.append(contentsOf: bytes(next))
                } else if next.end > next.start, isBlank(p[next.start]) {
                    content.append(contentsOf: bytes(next, droppingFirst: 1))
                } else if !next.isBlank, !contains(next, ASCII.colon),
                          let property = parseHeader(content), property.isBase64 {
                    // vCard 2.1 writers may leave base64 lines unindented.
                    content.append(contentsOf: bytes(next))
                } else {
                    break
                }
                current = nextPhysicalLine()
            }
            let line = first.line

            guard let property = parseHeader(content) else {
                if card == nil {
                    throw TextFormatError(line: line, message: "expected BEGIN:VCARD")
                }
                throw TextFormatError(line: line, message: "property line has no ':' (expected NAME:value)")
            }
            let rawValue = Array(content[property.valueStart...])
            switch property.name {
            case "BEGIN":
                let what = String(decoding: rawValue, as: UTF8.self).trimmingBlanks()
                if let open = card {
                    throw TextFormatError(
                        line: line,
                        message: "nested BEGIN:\(what) (the vCard that begins on line \(open.line) has no END:VCARD before it)")
                }
                guard what.uppercased() == "VCARD" else {
                    throw TextFormatError(line: line, message: "expected BEGIN:VCARD, found BEGIN:\(what)")
                }
                card = VCard(line: line, endLine: line)
                labels = [:]
            case "END":
                let what = String(decoding: rawValue, as: UTF8.self).trimmingBlanks()
                guard var finished = card else {
                    throw TextFormatError(line: line, message: "END:\(what) without matching BEGIN:VCARD")
                }
                guard what.uppercased() == "VCARD" else {
                    throw TextFormatError(
                        line: line, message: "END:\(what) does not match BEGIN:VCARD on line \(finished.line)")
                }
                finished.endLine = line
                for k in finished.telephones.indices {
                    if let group = finished.telephones[k].group?.uppercased(), let label = labels[group] {
                        finished.telephones[k].label = label
                    }
                }
                cards.append(finished)
                card = nil
            default:
                guard card != nil else {
                    throw TextFormatError(line: line, message: "expected BEGIN:VCARD, found \(property.name) outside a vCard")
                }
                try apply(property, rawValue, line: line, to: &card!, labels: &labels)
            }
        }
        if let open = card {
            throw TextFormatError(line: open.line, message: "BEGIN:VCARD without END:VCARD")
        }
        return cards
    }

    func apply(_ property: VCardProperty, _ raw: [UInt8], line: Int, to card: inout VCard,
               labels: inout [String: String]) throws {
        switch property.name {
        case "VERSION":
            if card.version == nil {
                card.version = try decodeText(raw, property, line: line).trimmingBlanks()
            }
        case "FN":
            if card.formattedName == nil {
                let name = unescapeText(try decodeText(raw, property, line: line)).trimmingBlanks()
                if !name.isEmpty { card.formattedName = name }
            }
        case "N":
            if card.name == nil {
                let parts = splitUnescaped(try decodeText(raw, property, line: line), on: ";").map { component in
                    splitUnescaped(component, on: ",").map { unescapeText($0).trimmingBlanks() }
                        .filter { !$0.isEmpty }.joined(separator: " ")
                }
                func part(_ k: Int) -> String { k < parts.count ? parts[k] : "" }
                card.name = VCardName(familyName: part(0), givenName: part(1), additionalNames: part(2),
                                      prefixes: part(3), suffixes: part(4))
            }
        case "ORG":
            if card.organization == nil {
                let org = splitUnescaped(try decodeText(raw, property, line: line), on: ";")
                    .map { unescapeText($0).trimmingBlanks() }.filter { !$0.isEmpty }.joined(separator: ", ")
                if !org.isEmpty { card.organization = org }
            }
        case "TEL":
            let value = try decodeText(raw, property, line: line).trimmingBlanks()
            card.telephones.append(VCardTelephone(
                line: line, value: value, group: property.group,
                types: property.values(of: "TYPE").map { $0.lowercased() },
                valueType: property.values(of: "VALUE").first?.lowercased(),
                parameters: property.parameters))
        case "X-ABLABEL":
            if let group = property.group {
                var label = unescapeText(try decodeText(raw, property, line: line)).trimmingBlanks()
                if label.hasPrefix("_$!<"), label.hasSuffix(">!$_"), label.count >= 8 {
                    label = String(label.dropFirst(4).dropLast(4))
                }
                labels[group.uppercased()] = label
            }
        default:
            break
        }
    }

    /// Splits `[group.]NAME *(;param) :` off a logical line; nil when there
    /// is no ':' outside double quotes.
    func parseHeader(_ content: [UInt8]) -> VCardProperty? {
        var k = 0
        while k < content.count, isBlank(content[k]) { k += 1 }
        let nameStart = k
        while k < content.count, content[k] != ASCII.semicolon, content[k] != ASCII.colon { k += 1 }
        guard k < content.count else { return nil }
        var fullName = String(decoding: content[nameStart..<k], as: UTF8.self).trimmingBlanks()
        var group: String?
        if let dot = fullName.lastIndex(of: ".") {
            group = String(fullName[..<dot])
            fullName = String(fullName[fullName.index(after: dot)...])
        }
        var parameters: [VCardParameter] = []
        while content[k] == ASCII.semicolon {
            k += 1
            let paramStart = k
            var inQuotes = false
            var equals = -1
            while k < content.count {
                let b = content[k]
                if b == ASCII.quote { inQuotes.toggle() }
                if !inQuotes {
                    if b == ASCII.semicolon || b == ASCII.colon { break }
                    if b == ASCII.equals, equals < 0 { equals = k }
                }
                k += 1
            }
            guard k < content.count else { return nil }
            if equals < 0 {
                let bare = String(decoding: content[paramStart..<k], as: UTF8.self).trimmingBlanks()
                if bare.isEmpty { continue }
                let encodings: Set<String> = ["QUOTED-PRINTABLE", "BASE64", "8BIT", "7BIT"]
                parameters.append(VCardParameter(name: encodings.contains(bare.uppercased()) ? "ENCODING" : "TYPE",
                                                 values: [bare]))
            } else {
                let name = String(decoding: content[paramStart..<equals], as: UTF8.self).trimmingBlanks().uppercased()
                let values = splitParameterValues(content[(equals + 1)..<k], splitInsideQuotes: name == "TYPE")
                parameters.append(VCardParameter(name: name, values: values))
            }
        }
        return VCardProperty(group: group, name: fullName.uppercased(), parameters: parameters, valueStart: k + 1)
    }

    /// Comma-separated values, unquoted. RFC 6350 writes `TYPE="work,voice"`
    /// for a list, so commas inside quotes split TYPE too.
    func splitParameterValues(_ bytes: ArraySlice<UInt8>, splitInsideQuotes: Bool) -> [String] {
        var values: [String] = []
        var currentValue: [UInt8] = []
        var inQuotes = false
        for b in bytes {
            if b == ASCII.quote {
                inQuotes.toggle()
            } else if b == ASCII.comma, !inQuotes || splitInsideQuotes {
                values.append(String(decoding: currentValue, as: UTF8.self).trimmingBlanks())
                currentValue.removeAll()
            } else {
                currentValue.append(b)
            }
        }
        values.append(String(decoding: currentValue, as: UTF8.self).trimmingBlanks())
        return values.filter { !$0.isEmpty }
    }

    /// Applies ENCODING=QUOTED-PRINTABLE and CHARSET, then insists on valid
    /// text: these values end up in SIP headers.
    func decodeText(_ raw: [UInt8], _ property: VCardProperty, line: Int) throws -> String {
        var bytes = raw
        if property.isQuotedPrintable { bytes = decodeQuotedPrintable(bytes) }
        let charset = property.values(of: "CHARSET").first?.uppercased() ?? "UTF-8"
        switch charset {
        case "UTF-8", "UTF8", "US-ASCII", "ASCII":
            if let bad = bytes.withUnsafeBufferPointer({ invalidUTF8Offset($0.baseAddress!, from: 0, to: $0.count) }) {
                let hex = String(bytes[bad], radix: 16, uppercase: true)
                throw TextFormatError(
                    line: line,
                    message: "invalid UTF-8 (byte 0x\(hex)) in \(property.name) value; save the file as UTF-8 or declare its CHARSET")
            }
            return String(decoding: bytes, as: UTF8.self)
        case "ISO-8859-1", "ISO8859-1", "LATIN1", "ISO_8859-1", "LATIN-1":
            return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
        case "WINDOWS-1252", "CP1252":
            return String(String.UnicodeScalarView(bytes.map { b -> Unicode.Scalar in
                if b >= 0x80, b <= 0x9F, let s = Unicode.Scalar(windows1252High[Int(b - 0x80)]) { return s }
                return Unicode.Scalar(b)
            }))
        default:
            if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
            throw TextFormatError(
                line: line,
                message: "unsupported CHARSET=\(charset) in \(property.name) value; convert the file to UTF-8")
        }
    }

    /// Soft line breaks were joined while unfolding; a malformed `=XX` is kept
    /// literally, as RFC 2045 recommends.
    func decodeQuotedPrintable(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var k = 0
        while k < bytes.count {
            let b = bytes[k]
            if b == ASCII.equals {
                if k + 2 < bytes.count, let hi = TextInput.hexValue(bytes[k + 1]), let lo = TextInput.hexValue(bytes[k + 2]) {
                    out.append(hi << 4 | lo)
                    k += 3
                    continue
                }
                if k == bytes.count - 1 {
                    // A dangling soft break before END:VCARD or end of file.
                    k += 1
                    continue
                }
            }
            out.append(b)
            k += 1
        }
        return out
    }

    /// Splits on `separator` not preceded by a backslash escape; the parts
    /// keep their escapes for `unescapeText`.
    func splitUnescaped(_ text: String, on separator: Character) -> [String] {
        var parts: [String] = []
        var currentPart = ""
        var escaped = false
        for c in text {
            if escaped {
                currentPart.append(c)
                escaped = false
            } else if c == "\\" {
                currentPart.append(c)
                escaped = true
            } else if c == separator {
                parts.append(currentPart)
                currentPart = ""
            } else {
                currentPart.append(c)
            }
        }
        parts.append(currentPart)
        return parts
    }

    /// `\n` `\N` `\,` `\;` `\:` `\\`; an unknown escape keeps its backslash.
    func unescapeText(_ text: String) -> String {
        guard text.contains("\\") else { return text }
        var out = String.UnicodeScalarView()
        var escaped = false
        for s in text.unicodeScalars {
            if escaped {
                switch s {
                case "n", "N": out.append("\n")
                case ",", ";", ":", "\\": out.append(s)
                default:
                    out.append("\\")
                    out.append(s)
                }
                escaped = false
            } else if s == "\\" {
                escaped = true
            } else {
                out.append(s)
            }
        }
        if escaped { out.append("\\") }
        return String(out)
    }
}

/// Windows-1252 0x80...0x9F; undefined slots map to the C1 control of the same value.
private let windows1252High: [UInt32] = [
    0x20AC, 0x81, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
    0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x8D, 0x017D, 0x8F,
    0x90, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
    0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x9D, 0x017E, 0x0178,
]

extension String {
    func trimmingBlanks() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
        let last = scalars.lastIndex(where: { $0 != " " && $0 != "\t" })!
        return String(scalars[first...last])
    }
}
