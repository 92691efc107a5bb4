import Identity

/// The outcome of reading a caller identity as a telephone number.
public enum NormalizedNumber: Equatable, Sendable {
    /// A valid number in E.164 form (libphonenumber's IsValidNumber).
    case number(PhoneNumber)
    /// A number of a possible length for its country but in no range of its plan: it cannot
    /// exist (`+1 200 555 0143`). The reason names the plan.
    case notInPlan(PhoneNumber, InvalidNumber)
    /// The caller withheld its identity (`anonymous`, `restricted`, ...).
    case anonymous
    /// Not a telephone number: letters, an internal extension, a wrong length, garbage.
    case invalid(InvalidNumber)

    /// The E.164 form, valid or not in its plan.
    public var number: PhoneNumber? {
        switch self {
        case .number(let n), .notInPlan(let n, _): return n
        case .anonymous, .invalid: return nil
        }
    }

    /// The E.164 form of a valid number only.
    public var validNumber: PhoneNumber? {
        if case .number(let n) = self { return n }
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

/// A country's plan as a reason names it: its region (or `+800` for a non-geographic
/// code), calling code and the lengths its national numbers have. No heap storage, so a
/// `Decision` carrying it stays free to make.
public struct NumberingRegion: Equatable, Sendable, CustomStringConvertible {
    /// Up to three ASCII letters or digits (`CN`, `001`), packed.
    let code: UInt32
    public let countryCode: UInt16
    let lengths: UInt32

    init(_ t: Territory, lengths: LengthSet? = nil) {
        var packed: UInt32 = 0
        for (i, b) in t.id.utf8.prefix(3).enumerated() { packed |= UInt32(b) << (8 * UInt32(i)) }
        code = packed
        countryCode = UInt16(t.countryCode)
        self.lengths = (lengths ?? t.possibleLengths).bits
    }

    /// `CN`, or `+800` for a non-geographic calling code.
    public var region: String {
        var bytes: [UInt8] = []
        var c = code
        while c != 0 { bytes.append(UInt8(c & 0xFF)); c >>= 8 }
        let id = String(decoding: bytes, as: UTF8.self)
        return id == "001" ? "+\(countryCode)" : id
    }

    var lengthText: String { LengthSet(bits: lengths).text }

    public var description: String { region == "+\(countryCode)" ? region : "\(region) (+\(countryCode))" }
}

/// Why a text is not a telephone number (or not one that can exist), worded for an
/// operator's error message.
public enum InvalidNumber: Error, Equatable, Sendable, CustomStringConvertible {
    case letters
    case badCharacter(Character)
    case misplacedPlus
    case badEscape
    case noDigits
    case withheld
    /// An empty caller identity: nothing where the number belongs.
    case empty
    /// Only zeros (`0000000000`), a placeholder some trunks send.
    case allZeros
    /// Fewer digits after the country code (and trunk prefix) than the country's numbers have.
    case tooShort(digits: Int, NumberingRegion)
    /// More digits than the country's numbers have.
    case tooLong(digits: Int, NumberingRegion)
    /// A length between the country's lengths that none of its numbers has.
    case invalidLength(digits: Int, NumberingRegion)
    /// A local number, dialled without its area code inside its area.
    case localOnly(digits: Int, NumberingRegion)
    /// More than 15 digits with the country code.
    case notE164(digits: Int)
    /// `+` or the international prefix followed by no country's calling code.
    case unknownCountryCode(String)
    /// `+` or the international prefix followed by two digits or fewer.
    case tooShortAfterPrefix(digits: Int)
    /// A possible length, but no range of the country's plan holds it: it cannot exist.
    case notInPlan(NumberingRegion)
    /// More than lookupd reads as one number.
    case tooManyDigits(Int)
    /// A national prefix pattern (`000*`) whose number starts with 0 after the trunk prefix.
    case zeroAfterTrunkPrefix(NumberingRegion)

    public var description: String {
        switch self {
        case .letters: return "contains letters"
        case .badCharacter(let c):
            let printable = c.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F && !($0.value >= 0x80 && $0.value < 0xA0) }
            return printable ? "contains '\(c)'" : "contains the control character U+\(String(c.unicodeScalars.first!.value, radix: 16, uppercase: true))"
        case .misplacedPlus: return "'+' is only allowed at the start"
        case .badEscape: return "bad %-escape"
        case .noDigits: return "no digits"
        case .withheld: return "a withheld identity, not a number"
        case .empty: return "empty caller number"
        case .allZeros: return "all zeros"
        case .tooShort(let n, let r):
            return "\(n) digit\(n == 1 ? "" : "s") is too short for a number of \(r), which has \(r.lengthText) digits after the country code (an internal extension or service code?)"
        case .tooLong(let n, let r):
            return "\(n) digits is too long for a number of \(r), which has \(r.lengthText) digits after the country code"
        case .invalidLength(let n, let r):
            return "no number of \(r) has \(n) digits after the country code (its numbers have \(r.lengthText))"
        case .localOnly(let n, let r):
            return "\(n) digits is a local number of \(r) without its area code (full numbers have \(r.lengthText) digits)"
        case .notE164(let n): return "\(n) digits is too long for an E.164 number (at most 15 with the country code)"
        case .unknownCountryCode(let digits):
            return digits.hasPrefix("0") ? "a country code cannot start with 0" : "no country has calling code +\(digits)"
        case .tooShortAfterPrefix(let n):
            return "only \(n) digit\(n == 1 ? "" : "s") after '+' or the international prefix"
        case .notInPlan(let r):
            return "no such number range in the numbering plan of \(r) (libphonenumber): the number cannot exist"
        case .tooManyDigits(let n): return "\(n) digits is too many for a telephone number"
        case .zeroAfterTrunkPrefix(let r): return "numbers of \(r) do not start with 0 after the trunk prefix"
        }
    }
}

/// Reads caller numbers (`+8613800138000`, `013800138000`, `(202) 555-0143`, `011 44 20
/// 7946 0958`) as E.164 numbers under a numbering plan, the way libphonenumber's Parse does
/// (docs/NUMBERING.md lists where lookupd differs on purpose), and judges them the way its
/// IsValidNumber and IsPossibleNumber do, from tables derived once (`NumberingData`).
///
/// It reads number texts only: URIs are the SIP layer's (`CallerIdentity`), which hands
/// over the user part already decoded. Allocation-free.
public struct NumberNormalizer: Sendable {
    public let plan: NumberingPlan
    // The plan's data, kept as plain references: the hot path reads them without counting
    // references. They live as long as the process (`NumberingData.installed` and the
    // calling codes it built are never released).
    private unowned(unsafe) let data: NumberingData
    private let home: TerritoryFacts
    /// The short way to read a home number already in E.164 form; nil when the plan has
    /// an operator's override that the general reading must apply.
    let canonical: CanonicalHomeReader?

    public init(plan: NumberingPlan = .china) {
        self.plan = plan
        data = plan.data
        home = plan.data.facts(plan.territory)
        // The home calling code's tables now (about 2 ms, once per process), so that the
        // first call, nearly always a home number, does not wait for them.
        let cc = Int(plan.countryCode)
        let tables = data.callingCode(cc)
        // `parse` takes the shortest prefix that is a calling code: the home code must be it.
        let ccDigits = String(cc).count
        var shorterIsCode = false
        var prefix = cc
        for _ in 1..<ccDigits {
            prefix /= 10
            if data.isCountryCode(prefix) { shorterIsCode = true }
        }
        if let tables, !shorterIsCode, data.mainIndex(cc) == home.index, plan.nationalPrefixOverride == nil,
           plan.nationalNumberLength == nil {
            canonical = CanonicalHomeReader(countryCode: UInt64(cc), countryCodeDigits: ccDigits, tables: tables,
                                            nationalPrefix: home.nationalPrefixForParsing)
        } else {
            canonical = nil
        }
    }

    /// Normalizes a number written in any common form (not a URI).
    public func normalize(_ text: String) -> NormalizedNumber {
        var text = text
        return text.withUTF8 { normalize(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Byte-level form of `normalize(_:)`.
    public func normalize(bytes: UnsafeRawBufferPointer) -> NormalizedNumber {
        read(bytes, phoneContext: nil)
    }

    /// The caller of an identity the SIP layer extracted: its number text under its
    /// `phone-context`. An identity without a number (`sip:anonymous.invalid`) is withheld.
    public func normalize(_ identity: CallerIdentity) -> NormalizedNumber {
        guard let number = identity.number else { return .anonymous }
        if identity.malformedEscape { return .invalid(.badEscape) }
        return read(number, phoneContext: identity.phoneContext)
    }

    func read(_ bytes: UnsafeRawBufferPointer, phoneContext: UnsafeRawBufferPointer?) -> NormalizedNumber {
        // Most callers are home numbers in E.164 form: the short way gives what the general
        // reading gives (a '+' first, so no phone-context applies) for a tenth of the work.
        // A number the plan refuses (a spoofed caller, often) is judged there too: what
        // `classify` makes of the judgement is the same for it as for the general reading.
        if let canonical, let read = canonical.readJudged(bytes) {
            if read.answer.isValid { return .number(read.number) }
            return judged(read.number, countryCode: home.countryCode, code: canonical.tables, mainIndex: home.index,
                          answer: read.answer, nsnCount: read.nsnCount)
        }
        return readGenerally(bytes, phoneContext: phoneContext)
    }

    /// `read` without the short way.
    func readGenerally(_ bytes: UnsafeRawBufferPointer, phoneContext: UnsafeRawBufferPointer?) -> NormalizedNumber {
        let text = trimSpaces(bytes)
        if text.isEmpty { return .invalid(.empty) }
        if Self.isWithheld(text) { return .anonymous }
        var digits: Digits
        switch Self.digits(of: text) {
        case .failure(let reason): return .invalid(reason)
        case .success(let d): digits = d
        }
        if digits.count >= 3, digits.allZeros { return .invalid(.allZeros) }
        // RFC 3966 §5.1.5: a local number with a global context is the context's digits
        // followed by the number's (libphonenumber reads it so too); a domain context means
        // "as dialled here", the home plan.
        if !digits.plus, let context = phoneContext.map(trimSpaces), context.first == UInt8(ascii: "+"),
           case .success(let c) = Self.digits(of: context), c.count >= 1 {
            guard c.count + digits.count <= Digits.capacity else { return .invalid(.tooManyDigits(c.count + digits.count)) }
            var joined = c
            for i in 0..<digits.count { joined.append(digits[i]) }
            digits = joined
        }
        return parse(digits)
    }

    /// The digits of a number text as the caller sent them (`110`, `1001`,
    /// `+8613800138000`), separators removed: what a bypass list matches, since emergency
    /// and internal numbers are not E.164 numbers. nil when the text has letters or other
    /// characters, or more than 18 digits.
    public func dialledDigits(bytes: UnsafeRawBufferPointer) -> DialledDigits? {
        let text = trimSpaces(bytes)
        guard case .success(let d) = Self.digits(of: text), d.count <= 18 else { return nil }
        return DialledDigits(plus: d.plus, value: d.value(0, d.count), count: d.count)
    }

    /// As `dialledDigits(bytes:)`, for an identity's number.
    public func dialledDigits(_ identity: CallerIdentity) -> DialledDigits? {
        guard let number = identity.number, !identity.malformedEscape else { return nil }
        return dialledDigits(bytes: number)
    }

    /// Reads a directory source's number field: a number as `normalize` reads it (valid or
    /// only possible in its plan), or a prefix pattern ending in `*` (`+86170*`, `0170*`).
    public func pattern(_ text: String) -> Result<NumberPattern, InvalidNumber> {
        var text = text
        return text.withUTF8 { pattern(bytes: UnsafeRawBufferPointer($0)) }
    }

    public func pattern(bytes: UnsafeRawBufferPointer) -> Result<NumberPattern, InvalidNumber> {
        patternAndValidity(bytes: bytes).pattern
    }

    /// As `pattern(bytes:)`, saying whether an exact number is one its plan cannot hold.
    func patternAndValidity(bytes: UnsafeRawBufferPointer) -> (pattern: Result<NumberPattern, InvalidNumber>, notInPlan: Bool) {
        if let number = canonical?.read(bytes) { return (.success(.exact(number)), false) }
        let trimmed = trimSpaces(bytes)
        if let last = trimmed.last, last == UInt8(ascii: "*") {
            let body = UnsafeRawBufferPointer(rebasing: trimmed.dropLast())
            switch Self.digits(of: body) {
            case .failure(let reason): return (.failure(reason), false)
            case .success(let parsed): return (prefix(parsed).map { .prefix($0) }, false)
            }
        }
        switch readGenerally(trimmed, phoneContext: nil) {
        case .number(let number): return (.success(.exact(number)), false)
        case .notInPlan(let number, _): return (.success(.exact(number)), true)
        case .anonymous: return (.failure(.withheld), false)
        case .invalid(.empty): return (.failure(.noDigits), false)
        case .invalid(let reason): return (.failure(reason), false)
        }
    }

    // MARK: - Judging numbers already in E.164 form

    /// Whether an E.164 number is valid in its country's plan.
    public func isValid(_ number: PhoneNumber) -> Bool {
        data.judge(number)?.answer.isValid ?? false
    }

    /// Why an E.164 number (read from a directory or given as a value) cannot exist in its
    /// country's plan; nil when it is valid.
    public func notInPlanReason(_ number: PhoneNumber) -> InvalidNumber? {
        guard let (ccDigits, answer) = data.judge(number) else { return .unknownCountryCode(String(number.value).prefix(3).description) }
        if answer.isValid { return nil }
        let cc = Int(number.value / powersOfTen[number.digitCount - ccDigits])
        guard let code = data.callingCode(cc), let main = data.mainIndex(cc) else { return .unknownCountryCode(String(cc)) }
        let named = answer.region != ValidityAnswer.none ? code.territory(Int(answer.region)) : main
        return .notInPlan(region(named))
    }

    // MARK: - libphonenumber's Parse

    /// Parse, step by step as PhoneNumberUtil::ParseHelper takes it, on digits only.
    func parse(_ digits: Digits) -> NormalizedNumber {
        digits.withBuffer { all -> NormalizedNumber in
            var rest = all[...]
            var international = digits.plus
            if !international, let n = internationalPrefixLength(all) {
                rest = all[n...]
                international = true
            }
            var countryCode = 0
            var ccDigits = 0
            var nsn = Digits()
            var metadata = home
            if international {
                // MaybeExtractCountryCode after '+' or an exit prefix.
                guard rest.count > 2 else { return .invalid(.tooShortAfterPrefix(digits: rest.count)) }
                if rest.first == 0 { return .invalid(.unknownCountryCode("0")) }
                var v = 0
                for len in 1...3 where len <= rest.count {
                    v = v &* 10 &+ Int(all[rest.startIndex + len - 1])
                    if data.isCountryCode(v) { countryCode = v; ccDigits = len; break }
                }
                guard countryCode != 0 else {
                    var text = ""
                    for i in rest.startIndex..<min(rest.endIndex, rest.startIndex + 3) { text.append(Character(Unicode.Scalar(all[i] + 0x30))) }
                    return .invalid(.unknownCountryCode(text))
                }
                nsn.append(UnsafeBufferPointer(rebasing: all[(rest.startIndex + ccDigits)...]))
                // The main region's metadata, unless that is the home region itself.
                if let main = data.mainIndex(countryCode), main != home.index { metadata = data.facts(main) }
            } else {
                // A number that starts with the home calling code, without '+'
                // (8613800138000): the code is stripped when the rest reads better.
                let cc = home.countryCode
                let len = cc < 10 ? 1 : cc < 100 ? 2 : 3
                var startsWithCode = rest.count > len
                if startsWithCode {
                    var v = 0
                    for i in 0..<len { v = v &* 10 &+ Int(all[i]) }
                    startsWithCode = v == cc
                }
                var stripped = false
                if startsWithCode {
                    var potential = Digits()
                    potential.append(UnsafeBufferPointer(rebasing: all[len...]))
                    if let stripped = strippedNationalPrefix(home, potential) { potential = stripped }
                    let viableWhole = isViable(home, all)
                    let viablePotential = potential.withBuffer { isViable(home, $0) }
                    if (!viableWhole && viablePotential) || home.testLength(all.count) == .tooLong {
                        countryCode = cc
                        ccDigits = len
                        nsn = potential
                        stripped = true
                        if let main = data.mainIndex(cc), main != home.index { metadata = data.facts(main) }
                    }
                }
                if !stripped {
                    countryCode = cc
                    ccDigits = len
                    nsn.append(all)
                }
            }
            if nsn.count < 2 { return .invalid(.tooShort(digits: nsn.count, region(metadata.index))) }
            if let candidate = strippedNationalPrefix(metadata, nsn) {
                // Keep the trunk prefix when what remains is too short to be a number:
                // `101` is a service code, not `01`.
                switch metadata.testLength(candidate.count) {
                case .tooShort, .localOnly, .invalidLength: break
                case .possible, .tooLong: nsn = candidate
                }
            }
            if nsn.count < 2 { return .invalid(.tooShort(digits: nsn.count, region(metadata.index))) }
            if nsn.count > CallingCode.maxLength {
                return .invalid(.tooLong(digits: nsn.count, region(data.mainIndex(countryCode) ?? metadata.index)))
            }
            let total = ccDigits + nsn.count
            if total > PhoneNumber.maxDigits { return .invalid(.notE164(digits: total)) }
            let number = PhoneNumber(unchecked: UInt64(countryCode) &* powersOfTen[nsn.count] &+ nsn.value(0, nsn.count))
            return nsn.withBuffer { classify(number, countryCode: countryCode, nsn: $0) }
        }
    }

    /// Valid, possible only, or impossible, as IsValidNumber and IsPossibleNumberWithReason say.
    private func classify(_ number: PhoneNumber, countryCode: Int, nsn: UnsafeBufferPointer<UInt8>) -> NormalizedNumber {
        guard let code = data.callingCode(countryCode), let mainIndex = data.mainIndex(countryCode) else {
            return .invalid(.unknownCountryCode(String(countryCode)))
        }
        return judged(number, countryCode: countryCode, code: code, mainIndex: mainIndex, answer: code.judge(nsn), nsnCount: nsn.count)
    }

    /// `classify` once the calling code's automaton has judged the national number.
    private func judged(_ number: PhoneNumber, countryCode: Int, code: CallingCodeTables, mainIndex: Int,
                        answer: ValidityAnswer, nsnCount: Int) -> NormalizedNumber {
        let overridden = countryCode == home.countryCode && plan.nationalNumberLength != nil
        let lengthTerritory = overridden ? home : data.facts(mainIndex)
        let check = testLength(nsnCount, lengthTerritory)
        if answer.isValid, !overridden || check == .possible { return .number(number) }
        let named = answer.region != ValidityAnswer.none ? code.territory(Int(answer.region)) : mainIndex
        switch check {
        case .possible: return .notInPlan(number, .notInPlan(region(named)))
        case .localOnly: return .invalid(.localOnly(digits: nsnCount, region(lengthTerritory.index)))
        case .tooShort: return .invalid(.tooShort(digits: nsnCount, region(lengthTerritory.index)))
        case .tooLong: return .invalid(.tooLong(digits: nsnCount, region(lengthTerritory.index)))
        case .invalidLength: return .invalid(.invalidLength(digits: nsnCount, region(lengthTerritory.index)))
        }
    }

    /// A reason's description of territory `t` (not on the path of a valid number).
    private func region(_ t: Int) -> NumberingRegion {
        NumberingRegion(data.territories[t], lengths: t == plan.territory ? plan.homeLengths : nil)
    }

    /// TestNumberLength, with the operator's `national-number-length` for the home region
    /// (which judges the number read; reading itself follows libphonenumber's lengths).
    @inline(__always)
    private func testLength(_ n: Int, _ t: TerritoryFacts) -> LengthCheck {
        if t.index == home.index, plan.nationalNumberLength != nil {
            return t.testLength(n, lengths: plan.homeLengths)
        }
        return t.testLength(n)
    }

    @inline(__always)
    private func isViable(_ t: TerritoryFacts, _ digits: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let code = data.callingCode(t.countryCode) else { return false }
        return code.isViable(digits, slot: t.slot)
    }

    /// The home exit prefix at the start, when a country code may follow (not a 0), as
    /// MaybeStripInternationalPrefixAndNormalize takes it.
    private func internationalPrefixLength(_ all: UnsafeBufferPointer<UInt8>) -> Int? {
        var length: Int? = nil
        if let literal = plan.internationalPrefixOverride {
            if all.count >= literal.count, zip(literal, all).allSatisfy({ $0 == $1 }) { length = literal.count }
        } else if let program = home.internationalPrefix, program.mayMatch(all) {
            var captures = CaptureSpans()
            if let end = program.consume(all, captures: &captures), end > 0 { length = end }
        }
        guard let n = length else { return nil }
        if n < all.count, all[n] == 0 { return nil }
        return n
    }

    /// MaybeStripNationalPrefixAndCarrierCode: the trunk prefix (and a carrier selection
    /// code) off a national number, or the region's transform (a NANP territory's 7-digit
    /// local number gets its area code), unless that leaves a number the region's general
    /// pattern refuses where the original fitted it.
    private func strippedNationalPrefix(_ t: TerritoryFacts, _ number: Digits) -> Digits? {
        guard number.count > 0 else { return nil }
        if t.index == home.index, let literal = plan.nationalPrefixOverride {
            guard !literal.isEmpty, number.count >= literal.count else { return nil }
            let matches = number.withBuffer { zip(literal, $0).allSatisfy { $0 == $1 } }
            guard matches else { return nil }
            var out = Digits()
            number.withBuffer { out.append(UnsafeBufferPointer(rebasing: $0[literal.count...])) }
            let viableBefore = number.withBuffer { isViable(t, $0) }
            if viableBefore, !out.withBuffer({ isViable(t, $0) }) { return nil }
            return out
        }
        guard let program = t.nationalPrefixForParsing, number.withBuffer({ program.mayMatch($0) }) else { return nil }
        var captures = CaptureSpans()
        guard let end = number.withBuffer({ program.consume($0, captures: &captures) }) else { return nil }
        let viableBefore = number.withBuffer { isViable(t, $0) }
        var out = Digits()
        var transformed = false
        if let rule = t.transformRule {
            let captured = program.captureCount >= 2 ? captures.group(2) : program.captureCount == 1 ? captures.group(1) : nil
            if let captured, !captured.isEmpty {
                number.withBuffer { all in
                    for i in 0..<rule.count {
                        let part = rule[i]
                        if part & TransformRule.groupFlag == 0 {
                            out.append(part)
                        } else if let span = captures.group(Int(part & 0x0F)) {
                            out.append(UnsafeBufferPointer(rebasing: all[span]))
                        }
                    }
                    out.append(UnsafeBufferPointer(rebasing: all[end...]))
                }
                transformed = true
            }
        }
        if !transformed {
            number.withBuffer { out.append(UnsafeBufferPointer(rebasing: $0[end...])) }
        }
        if out.overflowed { return nil }
        if viableBefore, !out.withBuffer({ isViable(t, $0) }) { return nil }
        return out
    }

    /// A prefix pattern's digits as an E.164 prefix: after `+` as written, after the exit
    /// prefix likewise, else a national prefix without its trunk prefix, under the home code.
    private func prefix(_ d: Digits) -> Result<NumberPrefix, InvalidNumber> {
        d.withBuffer { all -> Result<NumberPrefix, InvalidNumber> in
            var start = 0
            var countryCode: UInt64? = nil
            var trunk: [UInt8] = []
            if d.plus {
                start = 0
            } else if let n = internationalPrefixLength(all) {
                start = n
            } else {
                countryCode = plan.countryCode
                trunk = plan.nationalPrefix.map { Array($0.utf8).map { $0 - 0x30 } } ?? []
                if !trunk.isEmpty, all.count >= trunk.count, zip(trunk, all).allSatisfy({ $0 == $1 }) {
                    start = trunk.count
                }
            }
            let count = d.count - start
            guard count >= 1 || countryCode != nil else { return .failure(.noDigits) }
            if count > 0, all[start] == 0 {
                if countryCode == nil { return .failure(.unknownCountryCode("0")) }
                // A trunk prefix 0 followed by another 0 names no national number.
                if trunk.first == 0 { return .failure(.zeroAfterTrunkPrefix(region(plan.territory))) }
            }
            let length = count + (countryCode.map { PhoneNumber.digitCount(of: $0) } ?? 0)
            guard length <= PhoneNumber.maxDigits else { return .failure(.notE164(digits: length)) }
            var digits = d.value(start, count)
            if let cc = countryCode { digits = cc * powersOfTen[count] + digits }
            guard let prefix = NumberPrefix(digits: digits, length: length) else { return .failure(.noDigits) }
            return .success(prefix)
        }
    }

    // MARK: - Digits

    /// Digits of a number with its written form stripped: whether it began with `+`, and
    /// the digits themselves.
    struct Digits {
        static let capacity = 32
        var plus = false
        private(set) var count = 0
        /// More digits were appended than fit (the number is then refused).
        private(set) var overflowed = false
        private var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

        subscript(i: Int) -> UInt8 {
            withUnsafeBytes(of: storage) { $0[i] }
        }

        mutating func append(_ d: UInt8) {
            guard count < Digits.capacity else { overflowed = true; return }
            let i = count
            withUnsafeMutableBytes(of: &storage) { $0[i] = d }
            count += 1
        }

        mutating func append(_ digits: UnsafeBufferPointer<UInt8>) {
            for d in digits { append(d) }
        }

        /// Reads a number text into these digits (empty before); the reason when it is not
        /// a number. Written as one loop over the bytes, with every variable local to it:
        /// this runs for every caller.
        mutating func read(_ text: UnsafeRawBufferPointer) -> InvalidNumber? {
            let result: (count: Int, total: Int, plus: Bool, failure: InvalidNumber?) =
                withUnsafeMutableBytes(of: &storage) { raw in
                    let p = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
                    var count = 0
                    var total = 0
                    var plus = false
                    var sawLetter = false
                    var i = 0
                    let n = text.count
                    while i < n {
                        let c = text[i]
                        if c &- 0x30 < 10 {
                            if count < Digits.capacity { p[count] = c &- 0x30; count += 1 }
                            total += 1
                            i += 1
                            continue
                        }
                        if c < 0x80 {
                            switch c {
                            case UInt8(ascii: "+"):
                                guard total == 0, !plus else { return (count, total, plus, .misplacedPlus) }
                                plus = true
                            case UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: " "),
                                 UInt8(ascii: "/"), UInt8(ascii: "~"), UInt8(ascii: "["), UInt8(ascii: "]"), 0x09:
                                break
                            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                                sawLetter = true
                            default:
                                return (count, total, plus, .badCharacter(NumberNormalizer.character(at: i, in: text)))
                            }
                            i += 1
                            continue
                        }
                        // One UTF-8 scalar (a malformed sequence is a bad character).
                        var length = 0
                        var scalar: UInt32 = 0
                        if c & 0xE0 == 0xC0 { length = 2; scalar = UInt32(c & 0x1F) }
                        else if c & 0xF0 == 0xE0 { length = 3; scalar = UInt32(c & 0x0F) }
                        else if c & 0xF8 == 0xF0 { length = 4; scalar = UInt32(c & 0x07) }
                        var wellFormed = length > 0 && i + length <= n
                        if wellFormed {
                            for k in 1..<length {
                                let b = text[i + k]
                                if b & 0xC0 != 0x80 { wellFormed = false; break }
                                scalar = scalar << 6 | UInt32(b & 0x3F)
                            }
                        }
                        guard wellFormed else { return (count, total, plus, .badCharacter(NumberNormalizer.character(at: i, in: text))) }
                        switch scalar {
                        case 0xFF10...0xFF19, 0x0660...0x0669, 0x06F0...0x06F9:
                            // Full-width digits (Chinese spreadsheets and address books often
                            // hold them) and Arabic-Indic ones.
                            let zero: UInt32 = scalar >= 0xFF10 ? 0xFF10 : scalar >= 0x06F0 ? 0x06F0 : 0x0660
                            if count < Digits.capacity { p[count] = UInt8(scalar - zero); count += 1 }
                            total += 1
                        case 0xFF0B:
                            guard total == 0, !plus else { return (count, total, plus, .misplacedPlus) }
                            plus = true
                        case 0x00A0, 0x2010...0x2015, 0x2212, 0x30FC, 0x3000, 0xFF08, 0xFF09, 0xFF0D, 0xFF0E, 0xFF0F, 0xFF3B,
                             0xFF3D, 0xFF5E, 0x2053, 0x223C:
                            // No-break and ideographic spaces, dashes, full-width brackets, slash, tilde.
                            break
                        default:
                            return (count, total, plus, .badCharacter(NumberNormalizer.character(at: i, in: text)))
                        }
                        i += length
                    }
                    if sawLetter { return (count, total, plus, .letters) }
                    if total == 0 { return (count, total, plus, .noDigits) }
                    if total > count { return (count, total, plus, .tooManyDigits(total)) }
                    return (count, total, plus, nil)
                }
            count = result.count
            plus = result.plus
            overflowed = result.total > result.count
            return result.failure
        }

        func withBuffer<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
            try withUnsafeBytes(of: storage) { raw in
                try body(UnsafeBufferPointer(start: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count: count))
            }
        }

        var allZeros: Bool { withBuffer { $0.allSatisfy { $0 == 0 } } }

        func value(_ start: Int, _ n: Int) -> UInt64 {
            var v: UInt64 = 0
            for i in start..<min(count, start + n) { v = v &* 10 &+ UInt64(self[i]) }
            return v
        }

        mutating func setValue(_ v: UInt64) {
            count = 0
            let text = String(v)
            for c in text.utf8 { append(c - 0x30) }
        }
    }

    /// Strips visual separators (space, `-`, `.`, `(`, `)`, `/`, `~`, `[`, `]` and their
    /// Unicode forms, as libphonenumber does) and reads full-width and Arabic-Indic digits.
    static func digits(of text: UnsafeRawBufferPointer) -> Result<Digits, InvalidNumber> {
        var out = Digits()
        if let failure = out.read(text) { return .failure(failure) }
        return .success(out)
    }

    /// The whole character starting at byte `i` (for error messages).
    static func character(at i: Int, in text: UnsafeRawBufferPointer) -> Character {
        var end = i + 1
        while end < text.count, end - i < 4, text[end] & 0xC0 == 0x80 { end += 1 }
        let decoded = String(decoding: UnsafeRawBufferPointer(rebasing: text[i..<end]), as: UTF8.self)
        return decoded.first ?? "?"
    }

    // MARK: - Text helpers

    static let withheldWords: [[UInt8]] = [
        "anonymous", "unavailable", "restricted", "private", "unknown", "withheld",
        "anonymous.invalid", "unavailable.invalid", "restricted.invalid", "private.invalid",
    ].map { Array($0.utf8) }

    static func isWithheld(_ text: UnsafeRawBufferPointer) -> Bool {
        let trimmed = trimSpaces(text)
        guard let first = trimmed.first, lowercase(first) >= UInt8(ascii: "a"), lowercase(first) <= UInt8(ascii: "z") else { return false }
        outer: for word in withheldWords where word.count == trimmed.count {
            for (i, c) in word.enumerated() where lowercase(trimmed[i]) != c { continue outer }
            return true
        }
        return false
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

/// A home number already in E.164 form (`+8613800138000`) read by walking the home
/// calling code's validity automaton over its digits: `NumberNormalizer.parse` takes the
/// same steps for it (the country code, no trunk prefix to strip, the judgement) with
/// about ten times the instructions, and a directory source is millions of such lines.
/// Plain pointers only, so that a copy costs no reference counting.
struct CanonicalHomeReader: Sendable {
    let countryCode: UInt64
    let countryCodeDigits: Int
    let tables: CallingCodeTables
    /// The home region's trunk prefix program: a number it may match goes the long way.
    let nationalPrefix: DigitProgram?

    /// The number of a text that is `+` and the digits of a valid home number, as
    /// `parse` reads it; nil for anything else (read the long way, with its reasons).
    @inline(__always)
    func read(_ bytes: UnsafeRawBufferPointer) -> PhoneNumber? {
        guard let read = readJudged(bytes), read.answer.isValid else { return nil }
        return read.number
    }

    /// As `read`, also for a number of the home calling code that the plan refuses: its
    /// number, the automaton's judgement and the national number's length; nil for what
    /// `parse` reads in other steps (no `+`, another code, a possible trunk prefix).
    @inline(__always)
    func readJudged(_ bytes: UnsafeRawBufferPointer) -> (number: PhoneNumber, answer: ValidityAnswer, nsnCount: Int)? {
        let n = bytes.count - 1
        guard n >= countryCodeDigits + 2, n <= PhoneNumber.maxDigits, bytes[0] == UInt8(ascii: "+") else { return nil }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: PhoneNumber.maxDigits) { digits -> (PhoneNumber, ValidityAnswer, Int)? in
            var value: UInt64 = 0
            var code: UInt64 = 0
            for i in 0..<n {
                let d = bytes[i + 1] &- 0x30
                guard d < 10 else { return nil }
                digits[i] = d
                value = value &* 10 &+ UInt64(d)
                if i + 1 == countryCodeDigits { code = value }
            }
            guard code == countryCode else { return nil }
            let nsn = UnsafeBufferPointer(rebasing: digits[countryCodeDigits..<n])
            if let nationalPrefix, nationalPrefix.mayMatch(nsn) { return nil }
            return (PhoneNumber(unchecked: value), tables.judge(nsn), nsn.count)
        }
    }
}
