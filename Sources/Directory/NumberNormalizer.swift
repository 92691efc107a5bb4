import TextFormats

/// The outcome of reading a caller identity as a telephone number.
public enum NormalizedNumber: Equatable, Sendable {
    /// A number in E.164 form.
    case number(PhoneNumber)
    /// The caller withheld its identity (`anonymous`, `restricted`, an empty user, ...).
    case anonymous
    /// Not a telephone number: letters, an internal extension, garbage.
    case invalid(InvalidNumber)

    public var number: PhoneNumber? {
        if case .number(let number) = self { return number }
        return nil
    }
}

/// Digits as dialled or sent, leading zeros kept (by the count).
public struct DialledDigits: Hashable, Sendable, CustomStringConvertible {
    public var plus: Bool
    public var value: UInt64
    public var count: Int

    public init(plus: Bool, value: UInt64, count: Int) {
        self.plus = plus
        self.value = value
        self.count = count
    }

    /// Whether these digits start with `prefix`'s (and agree on the `+`).
    public func hasPrefix(_ prefix: DialledDigits) -> Bool {
        guard plus == prefix.plus, count >= prefix.count else { return false }
        var v = value
        for _ in 0..<(count - prefix.count) { v /= 10 }
        return v == prefix.value
    }

    public var description: String {
        let digits = String(value)
        return (plus ? "+" : "") + String(repeating: "0", count: max(0, count - digits.count)) + digits
    }
}

/// Why a text is not a telephone number, worded for an operator's error message.
public enum InvalidNumber: Error, Equatable, Sendable, CustomStringConvertible {
    case letters
    case badCharacter(Character)
    case tooShort(digits: Int)
    case tooLong(digits: Int)
    case leadingZero
    case misplacedPlus
    case badEscape
    case noDigits
    case withheld
    /// An empty caller identity: nothing where the number belongs.
    case empty
    /// Only zeros (`0000000000`), a placeholder some trunks send.
    case allZeros

    public var description: String {
        switch self {
        case .letters: return "contains letters"
        case .badCharacter(let c):
            let printable = c.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F && !($0.value >= 0x80 && $0.value < 0xA0) }
            return printable ? "contains '\(c)'" : "contains the control character U+\(String(c.unicodeScalars.first!.value, radix: 16, uppercase: true))"
        case .tooShort(let n): return "\(n) digits is too short for a telephone number (an internal extension or service code?)"
        case .tooLong(let n): return "\(n) digits is too long for an E.164 number (at most 15)"
        case .leadingZero: return "a country code cannot start with 0"
        case .misplacedPlus: return "'+' is only allowed at the start"
        case .badEscape: return "bad %-escape"
        case .noDigits: return "no digits"
        case .withheld: return "a withheld identity, not a number"
        case .empty: return "empty caller number"
        case .allZeros: return "all zeros"
        }
    }
}

/// Reads caller identities (`+8613800138000`, `013800138000`, `tel:` and
/// `sip:` URIs, ...) as E.164 numbers under a numbering plan.
///
/// Pure and allocation-free on the byte path: the SIP hot path hands it the
/// URI user part straight from the parser.
public struct NumberNormalizer: Sendable {
    public let plan: NumberingPlan

    public init(plan: NumberingPlan = .china) { self.plan = plan }

    /// Normalizes a caller identity given as text: a bare number in any common
    /// written form, or a `tel:`, `sip:` or `sips:` URI (optionally in `<>`).
    public func normalize(_ text: String) -> NormalizedNumber {
        var text = text
        return text.withUTF8 { normalize(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Byte-level form of `normalize(_:)`.
    public func normalize(bytes: UnsafeRawBufferPointer) -> NormalizedNumber {
        let identity = IdentityText(bytes)
        guard let user = identity.user else { return .anonymous }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: NumberNormalizer.scratchSize) { scratch in
            switch Self.unescape(user, into: scratch) {
            case .failure(let reason): return .invalid(reason)
            case .success(let count):
                let text = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(scratch)[0..<count])
                if Self.isWithheld(text) { return .anonymous }
                let context = identity.phoneContext.map { Self.contextDigits($0) } ?? nil
                switch digits(of: text) {
                case .failure(let reason): return .invalid(reason)
                case .success(let parsed):
                    if parsed.count >= 3, parsed.count <= DigitBuffer.capacity,
                       (0..<parsed.count).allSatisfy({ parsed.bytes[$0] == 0 }) {
                        return .invalid(.allZeros)
                    }
                    return classify(parsed, phoneContext: context)
                }
            }
        }
    }

    /// The digits of an identity as the caller sent them (`110`, `1001`,
    /// `+8613800138000`), separators removed: what a bypass list matches,
    /// since emergency and internal numbers are not E.164 numbers. nil when
    /// the identity has letters or other characters, or more than 18 digits.
    public func dialledDigits(bytes: UnsafeRawBufferPointer) -> DialledDigits? {
        let identity = IdentityText(bytes)
        guard let user = identity.user else { return nil }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: NumberNormalizer.scratchSize) { scratch in
            guard case .success(let count) = Self.unescape(user, into: scratch) else { return nil }
            let text = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(scratch)[0..<count])
            guard case .success(let parsed) = digits(of: text), parsed.count <= 18 else { return nil }
            return DialledDigits(plus: parsed.plus, value: value(parsed, from: 0), count: parsed.count)
        }
    }

    /// Reads a directory source's number field: a number as `normalize` reads
    /// it, or a prefix pattern ending in `*` (`+86170*`, `0170*`).
    public func pattern(_ text: String) -> Result<NumberPattern, InvalidNumber> {
        var text = text
        return text.withUTF8 { pattern(bytes: UnsafeRawBufferPointer($0)) }
    }

    public func pattern(bytes: UnsafeRawBufferPointer) -> Result<NumberPattern, InvalidNumber> {
        let trimmed = trimSpaces(bytes)
        if let last = trimmed.last, last == UInt8(ascii: "*") {
            let body = UnsafeRawBufferPointer(rebasing: trimmed.dropLast())
            switch digits(of: body) {
            case .failure(let reason): return .failure(reason)
            case .success(let parsed):
                switch prefixDigits(parsed) {
                case .failure(let reason): return .failure(reason)
                case .success(let prefix): return .success(.prefix(prefix))
                }
            }
        }
        switch normalize(bytes: trimmed) {
        case .number(let number): return .success(.exact(number))
        case .anonymous: return .failure(trimmed.isEmpty ? .noDigits : .withheld)
        case .invalid(let reason): return .failure(reason)
        }
    }

    // MARK: - Digits

    /// Longest identity text looked at; anything longer is not a number.
    static let scratchSize = 96

    /// Digits of a number with its written form stripped: whether it began
    /// with `+`, and the digits themselves (at most 20 kept).
    struct Digits {
        var plus = false
        var count = 0
        var bytes = DigitBuffer()
    }

    struct DigitBuffer {
        // 24 digits is more than any number we accept; longer inputs are refused.
        var d: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        static let capacity = 24

        subscript(i: Int) -> UInt8 {
            get { withUnsafeBytes(of: d) { $0[i] } }
            set { withUnsafeMutableBytes(of: &d) { $0[i] = newValue } }
        }
    }

    /// Strips visual separators (space, `-`, `.`, `(`, `)`, `/`) and a `(0)`
    /// trunk-prefix marker after an international number's country code.
    func digits(of text: UnsafeRawBufferPointer) -> Result<Digits, InvalidNumber> {
        var out = Digits()
        var i = 0
        let n = text.count
        var sawLetter = false
        while i < n {
            let c = text[i]
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if out.count < DigitBuffer.capacity { out.bytes[out.count] = c - 0x30 }
                out.count += 1
            case UInt8(ascii: "+"):
                guard out.count == 0, !out.plus else { return .failure(.misplacedPlus) }
                out.plus = true
            case UInt8(ascii: "("):
                // "+44 (0) 20 ..." (or "0044 (0) 20 ...") writes the trunk
                // prefix that callers from abroad must leave out: skip it.
                let international = out.plus || (out.count > plan.internationalPrefix.count && hasPrefix(out, plan.internationalPrefix))
                if international, i + 2 < n, text[i + 1] == UInt8(ascii: "0"), text[i + 2] == UInt8(ascii: ")"), out.count > 0 {
                    i += 3
                    continue
                }
            case UInt8(ascii: ")"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: " "),
                 UInt8(ascii: "/"), 0x09:
                break
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                sawLetter = true
            case 0xEF where i + 2 < n && text[i + 1] == 0xBC && (0x90...0x99).contains(text[i + 2]):
                // Full-width digits U+FF10...U+FF19, as Chinese spreadsheets and
                // address books often hold them.
                if out.count < DigitBuffer.capacity { out.bytes[out.count] = text[i + 2] - 0x90 }
                out.count += 1
                i += 3
                continue
            case 0xEF where i + 2 < n && text[i + 1] == 0xBC && text[i + 2] == 0x8B:
                // Full-width plus U+FF0B.
                guard out.count == 0, !out.plus else { return .failure(.misplacedPlus) }
                out.plus = true
                i += 3
                continue
            case 0xEF where i + 2 < n && text[i + 1] == 0xBC && (text[i + 2] == 0x8D || text[i + 2] == 0x88 || text[i + 2] == 0x89):
                // Full-width hyphen and parentheses: separators.
                i += 3
                continue
            case 0xE3 where i + 2 < n && text[i + 1] == 0x80 && text[i + 2] == 0x80:
                // Ideographic space U+3000.
                i += 3
                continue
            default:
                return .failure(.badCharacter(Self.character(at: i, in: text)))
            }
            i += 1
        }
        if sawLetter { return .failure(.letters) }
        if out.count == 0 { return .failure(.noDigits) }
        if out.count > 20 { return .failure(.tooLong(digits: out.count)) }
        return .success(out)
    }

    private func value(_ d: Digits, from start: Int, count: Int) -> UInt64 {
        var v: UInt64 = 0
        for i in start..<min(d.count, start + count) { v = v * 10 + UInt64(d.bytes[i]) }
        return v
    }

    private func value(_ d: Digits, from start: Int) -> UInt64 {
        var v: UInt64 = 0
        for i in start..<d.count { v = v * 10 + UInt64(d.bytes[i]) }
        return v
    }

    private func hasPrefix(_ d: Digits, _ prefix: [UInt8], at start: Int = 0) -> Bool {
        guard !prefix.isEmpty, d.count - start >= prefix.count else { return false }
        for (k, p) in prefix.enumerated() where d.bytes[start + k] != p - 0x30 { return false }
        return true
    }

    /// The whole character starting at byte `i` (for error messages).
    static func character(at i: Int, in text: UnsafeRawBufferPointer) -> Character {
        var end = i + 1
        while end < text.count, end - i < 4, text[end] & 0xC0 == 0x80 { end += 1 }
        let decoded = String(decoding: UnsafeRawBufferPointer(rebasing: text[i..<end]), as: UTF8.self)
        return decoded.first ?? "?"
    }

    private func international(_ d: Digits, from start: Int) -> NormalizedNumber {
        // "+86 010 ..." keeps the trunk prefix that only national dialling
        // uses; in the home country (whose plan has one) no number continues
        // the country code with it, so it is a writing habit, not a digit.
        let cc = plan.countryCodeDigits
        if !plan.nationalPrefix.isEmpty, d.count - start > cc + plan.nationalPrefix.count,
           value(d, from: start, count: cc) == plan.countryCode, hasPrefix(d, plan.nationalPrefix, at: start + cc) {
            var stripped = d
            for i in (start + cc)..<(d.count - plan.nationalPrefix.count) {
                stripped.bytes[i] = d.bytes[i + plan.nationalPrefix.count]
            }
            stripped.count -= plan.nationalPrefix.count
            return checkedInternational(stripped, from: start)
        }
        return checkedInternational(d, from: start)
    }

    private func checkedInternational(_ d: Digits, from start: Int) -> NormalizedNumber {
        let count = d.count - start
        if count > PhoneNumber.maxDigits { return .invalid(.tooLong(digits: count)) }
        if count < 7 { return .invalid(.tooShort(digits: count)) }
        if d.bytes[start] == 0 { return .invalid(.leadingZero) }
        return .number(PhoneNumber(unchecked: value(d, from: start)))
    }

    private func national(_ d: Digits, from start: Int, countryCode: UInt64, lengths: ClosedRange<Int>) -> NormalizedNumber {
        let count = d.count - start
        if count < lengths.lowerBound { return .invalid(.tooShort(digits: count)) }
        if count > lengths.upperBound { return .invalid(.tooLong(digits: count)) }
        // Where the home plan has no trunk prefix (Italy: 06 1234 5678 is
        // +39 06 1234 5678), a leading 0 belongs to the national number.
        let zeroIsPartOfNumber = countryCode == plan.countryCode && plan.nationalPrefix.isEmpty
        if d.bytes[start] == 0, !zeroIsPartOfNumber { return .invalid(.leadingZero) }
        let ccDigits = PhoneNumber.digitCount(of: countryCode)
        if count + ccDigits > PhoneNumber.maxDigits { return .invalid(.tooLong(digits: count + ccDigits)) }
        return .number(PhoneNumber(unchecked: countryCode * powersOfTen[count] + value(d, from: start)))
    }

    func classify(_ d: Digits, phoneContext: Digits?) -> NormalizedNumber {
        if d.plus { return international(d, from: 0) }
        if hasPrefix(d, plan.internationalPrefix) { return international(d, from: plan.internationalPrefix.count) }
        if let context = phoneContext {
            // RFC 3966 local number: the context names the country (and
            // perhaps an area); the local digits follow it, minus a trunk prefix
            // when the context is a bare country code.
            // A context longer than any number prefixes none (and its value
            // would overflow UInt64).
            if context.count > PhoneNumber.maxDigits { return .invalid(.tooLong(digits: context.count + d.count)) }
            let contextValue = value(context, from: 0)
            if context.count <= 3 {
                let start = hasPrefix(d, plan.nationalPrefix) ? plan.nationalPrefix.count : 0
                let lengths = contextValue == plan.countryCode
                    ? plan.nationalNumberLength
                    : NumberingPlan.typicalNationalLength(countryCode: contextValue)
                return national(d, from: start, countryCode: contextValue, lengths: lengths)
            }
            let total = context.count + d.count
            if total > PhoneNumber.maxDigits { return .invalid(.tooLong(digits: total)) }
            if total < 7 { return .invalid(.tooShort(digits: total)) }
            return .number(PhoneNumber(unchecked: contextValue * powersOfTen[d.count] + value(d, from: 0)))
        }
        if hasPrefix(d, plan.nationalPrefix) {
            return national(d, from: plan.nationalPrefix.count, countryCode: plan.countryCode, lengths: plan.nationalNumberLength)
        }
        if plan.nationalNumberLength.contains(d.count) {
            return national(d, from: 0, countryCode: plan.countryCode, lengths: plan.nationalNumberLength)
        }
        // Some trunks send the country code without '+' (8613800138000).
        let ccDigits = plan.countryCodeDigits
        // Only the leading digits: the whole run may be up to 24 digits, past UInt64.
        if d.count > ccDigits, value(d, from: 0, count: ccDigits) == plan.countryCode,
           plan.nationalNumberLength.contains(d.count - ccDigits) {
            return international(d, from: 0)
        }
        if d.count < plan.nationalNumberLength.lowerBound { return .invalid(.tooShort(digits: d.count)) }
        return .invalid(.tooLong(digits: d.count))
    }

    private func prefixDigits(_ d: Digits) -> Result<NumberPrefix, InvalidNumber> {
        var start = 0
        var countryCode: UInt64? = nil
        if d.plus {
            start = 0
        } else if hasPrefix(d, plan.internationalPrefix) {
            start = plan.internationalPrefix.count
        } else if hasPrefix(d, plan.nationalPrefix) {
            start = plan.nationalPrefix.count
            countryCode = plan.countryCode
        } else {
            countryCode = plan.countryCode
        }
        let count = d.count - start
        guard count >= 1 || countryCode != nil else { return .failure(.noDigits) }
        if count > 0, d.bytes[start] == 0, countryCode == nil || !plan.nationalPrefix.isEmpty { return .failure(.leadingZero) }
        // The length first: a longer run would overflow UInt64 and powersOfTen.
        let length = count + (countryCode.map { PhoneNumber.digitCount(of: $0) } ?? 0)
        guard length <= PhoneNumber.maxDigits else { return .failure(.tooLong(digits: length)) }
        var digits = value(d, from: start)
        if let cc = countryCode { digits = cc * powersOfTen[count] + digits }
        guard let prefix = NumberPrefix(digits: digits, length: length) else { return .failure(.noDigits) }
        return .success(prefix)
    }

    static func contextDigits(_ context: UnsafeRawBufferPointer) -> Digits? {
        // Only a global-number context ("+86", "+1-212") fixes the country;
        // a domain-name context means "as dialled here", i.e. the home plan.
        guard context.first == UInt8(ascii: "+") else { return nil }
        let normalizer = NumberNormalizer()
        guard case .success(let digits) = normalizer.digits(of: context),
              digits.count >= 1, digits.count <= 14, digits.bytes[0] != 0 else { return nil }
        var d = digits
        d.plus = false
        return d
    }

    // MARK: - Text helpers

    static let withheldWords: [[UInt8]] = [
        "anonymous", "unavailable", "restricted", "private", "unknown", "withheld",
        "anonymous.invalid", "unavailable.invalid", "restricted.invalid", "private.invalid",
    ].map { Array($0.utf8) }

    static func isWithheld(_ text: UnsafeRawBufferPointer) -> Bool {
        let trimmed = trimSpaces(text)
        if trimmed.isEmpty { return true }
        outer: for word in withheldWords where word.count == trimmed.count {
            for (i, c) in word.enumerated() where lowercase(trimmed[i]) != c { continue outer }
            return true
        }
        return false
    }

    /// %-decodes into `scratch`, returning the decoded length.
    static func unescape(_ text: UnsafeRawBufferPointer, into scratch: UnsafeMutableBufferPointer<UInt8>) -> Result<Int, InvalidNumber> {
        var count = 0
        var i = 0
        while i < text.count {
            guard count < scratch.count else { return .failure(.tooLong(digits: text.count)) }
            var c = text[i]
            if c == UInt8(ascii: "%") {
                guard i + 2 < text.count,
                      let hi = TextInput.hexValue(text[i + 1]), let lo = TextInput.hexValue(text[i + 2]) else { return .failure(.badEscape) }
                c = hi << 4 | lo
                i += 2
            }
            scratch[count] = c
            count += 1
            i += 1
        }
        return .success(count)
    }
}

@inline(__always)
func lowercase(_ c: UInt8) -> UInt8 {
    (c >= 0x41 && c <= 0x5A) ? c | 0x20 : c
}

func trimSpaces(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
    var start = 0
    var end = bytes.count
    while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 || bytes[start] == 0x0D || bytes[start] == 0x0A { start += 1 }
    while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 || bytes[end - 1] == 0x0D || bytes[end - 1] == 0x0A { end -= 1 }
    return UnsafeRawBufferPointer(rebasing: bytes[start..<end])
}

/// The number-bearing part of an identity: a bare number, or the user part of
/// a `sip:`/`sips:` URI, or the number of a `tel:` URI, with URI parameters
/// (`;user=phone`, `;cpc=ordinary`, `;phone-context=`) set aside.
struct IdentityText {
    /// The user/number text, still %-escaped; nil when the URI has no user part.
    var user: UnsafeRawBufferPointer?
    /// The `phone-context` parameter value, if any.
    var phoneContext: UnsafeRawBufferPointer?

    init(_ raw: UnsafeRawBufferPointer) {
        var text = trimSpaces(raw)
        // name-addr form: take what is inside the angle brackets (the first
        // '<' outside a quoted display name such as "Foo <Bar>").
        if let open = IdentityText.angleOpen(text) {
            let rest = text[(open + 1)...]
            let close = rest.firstIndex(of: UInt8(ascii: ">")) ?? text.endIndex
            text = trimSpaces(UnsafeRawBufferPointer(rebasing: text[(open + 1)..<close]))
        }
        var scheme = Scheme.none
        if IdentityText.hasSchemePrefix(text, "sips:") {
            scheme = .sip; text = UnsafeRawBufferPointer(rebasing: text[5...])
        } else if IdentityText.hasSchemePrefix(text, "sip:") {
            scheme = .sip; text = UnsafeRawBufferPointer(rebasing: text[4...])
        } else if IdentityText.hasSchemePrefix(text, "tel:") {
            scheme = .tel; text = UnsafeRawBufferPointer(rebasing: text[4...])
        }
        // Headers (`?...`) never belong to the number.
        if let q = text.firstIndex(of: UInt8(ascii: "?")) {
            text = UnsafeRawBufferPointer(rebasing: text[..<q])
        }
        var userPart: UnsafeRawBufferPointer
        switch scheme {
        case .sip:
            if let at = text.lastIndex(of: UInt8(ascii: "@")) {
                userPart = UnsafeRawBufferPointer(rebasing: text[..<at])
            } else {
                // `sip:anonymous.invalid` has no user part; a bare number
                // where the host should be is still taken as the number.
                let host = IdentityText.beforeSemicolon(text)
                userPart = IdentityText.looksNumeric(host) ? text : UnsafeRawBufferPointer(rebasing: text[0..<0])
            }
        case .tel:
            userPart = text
        case .none:
            if let at = text.lastIndex(of: UInt8(ascii: "@")) {
                userPart = UnsafeRawBufferPointer(rebasing: text[..<at])
            } else {
                userPart = text
            }
        }
        // Parameters inside the user part (`+86138...;cpc=ordinary`) or
        // after a tel: number.
        let number = IdentityText.beforeSemicolon(userPart)
        var context: UnsafeRawBufferPointer? = nil
        if number.count < userPart.count {
            var params = UnsafeRawBufferPointer(rebasing: userPart[(number.count + 1)...])
            while !params.isEmpty {
                let param = IdentityText.beforeSemicolon(params)
                if IdentityText.hasSchemePrefix(param, "phone-context=") {
                    context = UnsafeRawBufferPointer(rebasing: param[14...])
                }
                params = param.count < params.count ? UnsafeRawBufferPointer(rebasing: params[(param.count + 1)...]) : UnsafeRawBufferPointer(rebasing: params[params.count...])
            }
        }
        let trimmed = trimSpaces(number)
        self.user = trimmed.isEmpty ? nil : trimmed
        self.phoneContext = context
    }

    enum Scheme { case none, sip, tel }

    /// The first `<` not inside a quoted string (RFC 3261 display names may
    /// contain `<`); with unbalanced quotes, simply the first `<`.
    static func angleOpen(_ text: UnsafeRawBufferPointer) -> Int? {
        var inQuotes = false
        var i = 0
        while i < text.count {
            let c = text[i]
            if inQuotes {
                if c == UInt8(ascii: "\\") { i += 2; continue }
                if c == UInt8(ascii: "\"") { inQuotes = false }
            } else if c == UInt8(ascii: "\"") {
                inQuotes = true
            } else if c == UInt8(ascii: "<") {
                return i
            }
            i += 1
        }
        return inQuotes ? text.firstIndex(of: UInt8(ascii: "<")) : nil
    }

    static func beforeSemicolon(_ text: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        if let semi = text.firstIndex(of: UInt8(ascii: ";")) {
            return UnsafeRawBufferPointer(rebasing: text[..<semi])
        }
        return text
    }

    static func looksNumeric(_ text: UnsafeRawBufferPointer) -> Bool {
        guard !text.isEmpty else { return false }
        var digits = 0
        for c in text {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digits += 1
            case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: " "): break
            default: return false
            }
        }
        return digits > 0
    }

    static func hasSchemePrefix(_ text: UnsafeRawBufferPointer, _ prefix: StaticString) -> Bool {
        let count = prefix.utf8CodeUnitCount
        guard text.count >= count else { return false }
        let p = prefix.utf8Start
        for i in 0..<count where lowercase(text[i]) != p[i] { return false }
        return true
    }
}
