import CPhoneNumbers
import XCTest
@testable import Directory

/// Table-driven tests of `NumberNormalizer.normalize`: the written forms a PBX sees, under
/// the plans the issue names (China, the US with `country = US` alone, Italy without a trunk
/// prefix, the UK's 7-digit and Norway's 5-digit numbers), each checked against the
/// libphonenumber Debian installed as well as against the expected answer.
final class NormalizationTests: XCTestCase {
    enum Expected: Equatable, CustomStringConvertible {
        /// Valid in its plan.
        case valid(String)
        /// A possible length, but no range of its plan holds it.
        case notInPlan(String)
        case anonymous
        /// Not a number; the reason's kind (`tooShort(3)`, `letters`, ...).
        case invalid(String)

        var description: String {
            switch self {
            case .valid(let s): return s
            case .notInPlan(let s): return "notInPlan(\(s))"
            case .anonymous: return "anonymous"
            case .invalid(let kind): return "invalid(\(kind))"
            }
        }
    }

    struct Case {
        var input: String
        var region: String
        var expected: Expected
        var line: UInt

        init(_ input: String, _ region: String, _ expected: Expected, line: UInt = #line) {
            self.input = input
            self.region = region
            self.expected = expected
            self.line = line
        }

        init(_ input: String, _ expected: Expected, line: UInt = #line) {
            self.init(input, "CN", expected, line: line)
        }
    }

    static let cases: [Case] = [
        // The five ways a Chinese mobile number arrives.
        Case("+8613800138000", .valid("+8613800138000")),
        Case("008613800138000", .valid("+8613800138000")),
        Case("013800138000", .valid("+8613800138000")),
        Case("13800138000", .valid("+8613800138000")),
        Case("8613800138000", .valid("+8613800138000")),
        // Visual separators.
        Case("+86 138 0013 8000", .valid("+8613800138000")),
        Case("+86-138-0013-8000", .valid("+8613800138000")),
        Case("+86.138.0013.8000", .valid("+8613800138000")),
        Case("+86 (138) 0013 8000", .valid("+8613800138000")),
        Case("(+86) 138 0013 8000", .valid("+8613800138000")),
        Case("+86\t138\t0013\t8000", .valid("+8613800138000")),  // a tab: libphonenumber refuses it
        Case("  +8613800138000  ", .valid("+8613800138000")),
        Case("138-0013-8000", .valid("+8613800138000")),
        Case("0086 138 0013 8000", .valid("+8613800138000")),
        // Landlines: trunk prefix and area code.
        Case("01059000000", .valid("+861059000000")),
        Case("010-59000000", .valid("+861059000000")),
        Case("(010) 5900 0000", .valid("+861059000000")),
        Case("010/59000000", .valid("+861059000000")),
        Case("1059000000", .valid("+861059000000")),
        Case("86 10 5900 0000", .valid("+861059000000")),
        Case("0755-8888-9999", .valid("+8675588889999")),
        Case("+86 010 5900 0000", .valid("+861059000000")),
        // A carrier selection code before the trunk prefix (CN's IP dialling: 17951).
        Case("17951 13800138000", .valid("+8613800138000")),
        // A Beijing number dialled without its area code: 8 digits is a possible length of
        // a whole CN number, so libphonenumber reads it as one (that cannot exist).
        Case("59000000", .notInPlan("+8659000000")),
        // Shorter ones are local numbers only.
        Case("590000", .invalid("localOnly(6)")),
        // The "(0)" trunk-prefix marker is the trunk prefix, stripped where the plan has one.
        Case("+44 (0) 20 7946 0000", .valid("+442079460000")),
        Case("+44(0)2079460000", .valid("+442079460000")),
        Case("+49 (0)30 1234567", .valid("+49301234567")),
        Case("0049 (0)30 1234567", .valid("+49301234567")),
        // Other countries, each under its own plan.
        Case("+39 06 1234 5678", .valid("+390612345678")),
        Case("0049 30 1234567", .valid("+49301234567")),
        Case("+1 212 555 0100", .valid("+12125550100")),
        Case("0012125550100", .valid("+12125550100")),
        Case("+33 1 23 45 67 89", .valid("+33123456789")),
        // Numbers that cannot exist: a possible length in no range of the plan.
        Case("+1 200 555 0143", .notInPlan("+12005550143")),
        Case("+8615412345678", .notInPlan("+8615412345678")),
        // Withheld identities.
        Case("anonymous", .anonymous),
        Case("Anonymous", .anonymous),
        Case("ANONYMOUS", .anonymous),
        Case("unavailable", .anonymous),
        Case("restricted", .anonymous),
        Case("private", .anonymous),
        Case("Private", .anonymous),
        Case("unknown", .anonymous),
        Case("withheld", .anonymous),
        Case("anonymous.invalid", .anonymous),
        // Nothing where the number belongs.
        Case("", .invalid("empty")),
        Case("   ", .invalid("empty")),
        // Letters.
        Case("abc", .invalid("letters")),
        Case("1-800-FLOWERS", .invalid("letters")),
        Case("138OO138OOO", .invalid("letters")),
        Case("sip:alice@example.com", .invalid("badCharacter(:)")),
        // Internal extensions and service codes: too short, with the length as written.
        Case("101", .invalid("tooShort(3)")),
        Case("1001", .invalid("tooShort(4)")),
        Case("10086", .invalid("localOnly(5)")),
        Case("95588", .invalid("localOnly(5)")),
        Case("+86", .invalid("tooShortAfterPrefix(2)")),
        Case("+861234", .invalid("tooShort(4)")),
        // Too long.
        Case("+8613800138000123", .invalid("notE164(16)")),
        Case("0086138001380001234", .invalid("notE164(17)")),
        Case("1234567890123456789012345", .invalid("tooLong(20)")),  // after the carrier code 12345
        Case("138001380001", .notInPlan("+86138001380001")),
        // A country code cannot start with 0; '+' only at the start.
        Case("+0861380013800", .invalid("unknownCountryCode")),
        Case("+999 1234 5678", .invalid("unknownCountryCode")),
        Case("86+13800138000", .invalid("misplacedPlus")),
        Case("++8613800138000", .invalid("misplacedPlus")),
        Case("+86+13800138000", .invalid("misplacedPlus")),
        // '*', '#' and '%': feature codes and escapes are not numbers (URIs are the SIP
        // layer's: it hands over user parts already decoded).
        Case("*86", .invalid("badCharacter(*)")),
        Case("#31#13800138000", .invalid("badCharacter(#)")),
        Case("13800138000#", .invalid("badCharacter(#)")),
        Case("+86170*", .invalid("badCharacter(*)")),
        Case("%2B8613800138000", .invalid("badCharacter(%)")),
        Case("\u{0}138", .invalid("badCharacter(\u{0})")),
        // Nothing numeric at all.
        Case("+", .invalid("noDigits")),
        Case("-", .invalid("noDigits")),
        Case("()", .invalid("noDigits")),
        Case("0000000000", .invalid("allZeros")),
        // The US with `country = US` alone: trunk prefix 1, exit prefix 011.
        Case("(202) 555-0143", "US", .valid("+12025550143")),
        Case("1-202-555-0143", "US", .valid("+12025550143")),
        Case("202 555 0143", "US", .valid("+12025550143")),
        Case("+1 (202) 555-0143", "US", .valid("+12025550143")),
        Case("011 44 20 7946 0958", "US", .valid("+442079460958")),
        Case("011 86 138 0013 8000", "US", .valid("+8613800138000")),
        Case("+8613800138000", "US", .valid("+8613800138000")),
        Case("+1 200 555 0143", "US", .notInPlan("+12005550143")),
        Case("(200) 555-0143", "US", .notInPlan("+12005550143")),
        Case("5550143", "US", .invalid("localOnly(7)")),
        Case("911", "US", .invalid("tooShort(3)")),
        Case("212555010099", "US", .invalid("tooLong(12)")),
        // Italy keeps its leading 0: no trunk prefix.
        Case("02 1234 5678", "IT", .valid("+390212345678")),
        Case("0212345678", "IT", .valid("+390212345678")),
        Case("+39 02 1234 5678", "IT", .valid("+390212345678")),
        Case("+390212345678", "IT", .valid("+390212345678")),
        Case("00 39 02 1234 5678", "IT", .valid("+390212345678")),
        Case("06 1234 5678", "IT", .valid("+390612345678")),
        Case("+390212345678", .valid("+390212345678")),
        // San Marino and the Vatican, also without a trunk prefix.
        Case("0549 886377", "SM", .valid("+3780549886377")),
        Case("886377", "SM", .valid("+3780549886377")),
        Case("+39 06 698 12345", "VA", .valid("+390669812345")),
        // The UK: 7-digit national numbers exist (0800 1111 is ChildLine).
        Case("0800 1111", "GB", .valid("+448001111")),
        Case("020 7946 0000", "GB", .valid("+442079460000")),
        Case("07400 123456", "GB", .valid("+447400123456")),
        Case("07700 900123", "GB", .notInPlan("+447700900123")),  // Ofcom's range for drama
        Case("+44 20 7946 00", "GB", .invalid("localOnly(8)")),
        Case("+47 123456", "NO", .invalid("invalidLength(6)")),
        Case("00 86 138 0013 8000", "GB", .valid("+8613800138000")),
        Case("999", "GB", .invalid("tooShort(3)")),
        // Norway: 5-digit numbers, no trunk prefix.
        Case("02800", "NO", .valid("+4702800")),
        Case("22 12 34 56", "NO", .valid("+4722123456")),
        // Exit prefixes that are not 00.
        Case("0011 44 20 7946 0000", "AU", .valid("+442079460000")),
        Case("010 44 20 7946 0000", "JP", .valid("+442079460000")),
        Case("8 10 44 20 7946 0000", "RU", .valid("+442079460000")),
        Case("8~10 44 20 7946 0000", "RU", .valid("+442079460000")),
        // A NANP territory's 7-digit local number gets its area code (BM: 441).
        Case("295 1234", "BM", .valid("+14412951234")),
        // Full-width digits, plus and hyphens, ideographic spaces (Chinese address books).
        Case("＋８６ １３８００１３８０００", .valid("+8613800138000")),
        Case("１３８－００１３－８０００", .valid("+8613800138000")),
        Case("138\u{3000}0013\u{3000}8000", .valid("+8613800138000")),
        Case("1380013800✓", .invalid("badCharacter(✓)")),
    ]

    static func kind(_ reason: InvalidNumber) -> String {
        switch reason {
        case .letters: return "letters"
        case .badCharacter(let c): return "badCharacter(\(c))"
        case .misplacedPlus: return "misplacedPlus"
        case .badEscape: return "badEscape"
        case .noDigits: return "noDigits"
        case .withheld: return "withheld"
        case .empty: return "empty"
        case .allZeros: return "allZeros"
        case .tooShort(let n, _): return "tooShort(\(n))"
        case .tooLong(let n, _): return "tooLong(\(n))"
        case .invalidLength(let n, _): return "invalidLength(\(n))"
        case .localOnly(let n, _): return "localOnly(\(n))"
        case .notE164(let n): return "notE164(\(n))"
        case .unknownCountryCode: return "unknownCountryCode"
        case .tooShortAfterPrefix(let n): return "tooShortAfterPrefix(\(n))"
        case .notInPlan: return "notInPlan"
        case .tooManyDigits(let n): return "tooManyDigits(\(n))"
        case .zeroAfterTrunkPrefix: return "zeroAfterTrunkPrefix"
        }
    }

    static func actual(_ result: NormalizedNumber) -> Expected {
        switch result {
        case .number(let number): return .valid(number.description)
        case .notInPlan(let number, _): return .notInPlan(number.description)
        case .anonymous: return .anonymous
        case .invalid(let reason): return .invalid(kind(reason))
        }
    }

    static func normalizer(_ region: String) -> NumberNormalizer {
        NumberNormalizer(plan: try! NumberingPlan(region: region))
    }

    func testNormalizationTable() {
        XCTAssertGreaterThanOrEqual(Self.cases.count, 100)
        var seen: [String: Expected] = [:]
        for c in Self.cases {
            let key = c.region + "|" + c.input
            if let earlier = seen[key] { XCTAssertEqual(earlier, c.expected, "duplicate case \(c.input)", line: c.line) }
            seen[key] = c.expected
            let result = Self.actual(Self.normalizer(c.region).normalize(c.input))
            XCTAssertEqual(result, c.expected, "normalize(\(c.input.debugDescription)) under \(c.region)", line: c.line)
        }
    }

    /// Every table case whose text libphonenumber also reads: the same E.164 number and the
    /// same judgement (valid, possible only, impossible). Where lookupd is stricter on
    /// purpose (letters, `*`, `#`, withheld words) libphonenumber is not asked.
    func testTableAgreesWithLibphonenumber() {
        for c in Self.cases where !c.input.isEmpty {
            if case .anonymous = c.expected { continue }
            if case .invalid(let kind) = c.expected, kind.hasPrefix("letters") || kind.hasPrefix("badCharacter")
                || kind == "misplacedPlus" || kind == "allZeros" || kind == "empty" { continue }
            // lookupd takes a tab as a separator; libphonenumber does not.
            if c.input.contains("\t") { continue }
            let reference = Reference.parse(c.input, region: c.region)
            let agrees: Bool
            switch c.expected {
            case .valid(let e164): agrees = reference.e164 == e164 && reference.valid
            case .notInPlan(let e164): agrees = reference.e164 == e164 && !reference.valid && reference.possible
            case .invalid: agrees = reference.e164 == nil || !reference.possible
            case .anonymous: agrees = true
            }
            XCTAssertTrue(agrees, "\(c.input.debugDescription) under \(c.region): libphonenumber says \(reference)", line: c.line)
        }
    }

    /// The byte entry point (used by the SIP hot path) agrees with the String one.
    func testByteEntryPointAgrees() {
        for c in Self.cases {
            let n = Self.normalizer(c.region)
            let viaBytes = Array(c.input.utf8).withUnsafeBytes { n.normalize(bytes: $0) }
            XCTAssertEqual(viaBytes, n.normalize(c.input), "bytes vs text for \(c.input.debugDescription)", line: c.line)
        }
    }

    /// A directory source's number field reads exact numbers exactly as normalize does.
    func testPatternReadsExactNumbersLikeNormalize() {
        for c in Self.cases where !c.input.hasSuffix("*") {
            let n = Self.normalizer(c.region)
            let pattern = n.pattern(c.input)
            switch c.expected {
            case .valid(let text), .notInPlan(let text):
                XCTAssertEqual(try? pattern.get(), .exact(number(text)), "pattern(\(c.input.debugDescription))", line: c.line)
            case .invalid(let kind):
                guard case .failure(let reason) = pattern else { XCTFail("pattern(\(c.input.debugDescription)) read", line: c.line); continue }
                XCTAssertEqual(Self.kind(reason), kind == "empty" ? "noDigits" : kind, "pattern(\(c.input.debugDescription))", line: c.line)
            case .anonymous:
                XCTAssertEqual(pattern, .failure(.withheld), "pattern(\(c.input.debugDescription))", line: c.line)
            }
        }
    }

    /// Every reason says what is wrong without contradicting itself (the count it names is
    /// the count it compares).
    func testInvalidReasonsReadWell() {
        let cn = Self.normalizer("CN"), us = Self.normalizer("US")
        func reason(_ n: NumberNormalizer, _ text: String) -> String {
            switch n.normalize(text) {
            case .invalid(let r), .notInPlan(_, let r): return r.description
            default: return "not invalid"
            }
        }
        XCTAssertEqual(reason(cn, "1001"), "4 digits is too short for a number of CN (+86), which has 7 to 12 digits after the country code (an internal extension or service code?)")
        XCTAssertEqual(reason(us, "101"), "3 digits is too short for a number of US (+1), which has 10 digits after the country code (an internal extension or service code?)")
        XCTAssertEqual(reason(cn, "+8613800138000123"), "16 digits is too long for an E.164 number (at most 15 with the country code)")
        XCTAssertEqual(reason(us, "+1 202 555 01433"), "11 digits is too long for a number of US (+1), which has 10 digits after the country code")
        XCTAssertEqual(reason(cn, "+0861380013800"), "a country code cannot start with 0")
        XCTAssertEqual(reason(cn, "+999 1234 5678"), "no country has calling code +999")
        XCTAssertEqual(reason(us, "5550143"), "7 digits is a local number of US (+1) without its area code (full numbers have 10 digits)")
        XCTAssertEqual(reason(us, "+1 200 555 0143"), "no such number range in the numbering plan of US (+1) (libphonenumber): the number cannot exist")
        XCTAssertEqual(reason(Self.normalizer("NO"), "+47 123456"), "no number of NO (+47) has 6 digits after the country code (its numbers have 5 or 8)")
        XCTAssertEqual(InvalidNumber.badCharacter("*").description, "contains '*'")
        XCTAssertEqual(InvalidNumber.badCharacter("\u{0}").description, "contains the control character U+0")
        XCTAssertEqual(InvalidNumber.letters.description, "contains letters")
        XCTAssertEqual(InvalidNumber.misplacedPlus.description, "'+' is only allowed at the start")
    }

    /// Random valid numbers written in every form come back as themselves.
    func testRandomNumbersInEveryForm() {
        var rng = SeededRandom(seed: 0x5EED_0001)
        let n = NumberNormalizer()
        for _ in 0..<2_000 {
            // Chinese mobile: 13x xxxx xxxx (every 13x block is allocated).
            let national = UInt64.random(in: 13_000_000_000...13_999_999_999, using: &rng)
            let e164 = "+86\(national)"
            let forms = ["+86\(national)", "0086\(national)", "0\(national)", "\(national)", "86\(national)",
                         "+86 \(String(national).prefix(3)) \(String(national).dropFirst(3))"]
            for form in forms {
                XCTAssertEqual(n.normalize(form), .number(number(e164)), form)
            }
        }
    }

    func testNumberingPlanValidation() {
        XCTAssertThrowsError(try NumberingPlan(countryCode: 0))
        XCTAssertThrowsError(try NumberingPlan(countryCode: 1000))
        XCTAssertThrowsError(try NumberingPlan(countryCode: 999)) { XCTAssertEqual($0 as? NumberingPlanError, .unknownCountryCode(999)) }
        XCTAssertThrowsError(try NumberingPlan(region: "XX")) { XCTAssertEqual($0 as? NumberingPlanError, .unknownRegion("XX")) }
        XCTAssertThrowsError(try NumberingPlan(region: "US", countryCode: 44))
        XCTAssertThrowsError(try NumberingPlan(countryCode: 86, nationalPrefix: "a"))
        XCTAssertThrowsError(try NumberingPlan(countryCode: 86, internationalPrefix: ""))
        XCTAssertThrowsError(try NumberingPlan(countryCode: 86, nationalPrefix: "00", internationalPrefix: "00")) { error in
            XCTAssertEqual(error as? NumberingPlanError, .ambiguousPrefixes("00", "00"))
        }
        XCTAssertThrowsError(try NumberingPlan(countryCode: 86, nationalNumberLength: 1...11))
        XCTAssertThrowsError(try NumberingPlan(countryCode: 86, nationalNumberLength: 10...14))
        XCTAssertNoThrow(try NumberingPlan(countryCode: 86, nationalPrefix: ""))
        XCTAssertEqual(NumberingPlan.china.countryCode, 86)
        XCTAssertTrue(NumberingPlan.china.isDefault)
        XCTAssertEqual(try NumberingPlan(countryCode: 1).region, "US", "a calling code alone names its main region")
        XCTAssertEqual(try NumberingPlan(region: "it").description, "IT (+39, no trunk prefix, international prefix 00)")
        XCTAssertEqual(try NumberingPlan(region: "US").description, "US (+1, trunk prefix 1, international prefix 011)")
    }

    /// Every region libphonenumber knows gives a plan whose own example numbers read back.
    func testEveryRegionHasAPlan() throws {
        let data = NumberingData.installed
        XCTAssertGreaterThanOrEqual(data.regions.count, 240)
        // Every rule of the installed metadata is within what lookupd's pattern compiler reads.
        data.prepareAll()
        XCTAssertEqual(data.buildProblems, [])
        for region in data.regions {
            let plan = try NumberingPlan(region: region)
            XCTAssertEqual(plan.region, region)
        }
    }

    /// The explicit keys win over the region's values.
    func testOverridesWin() throws {
        // A plan with national-number-length narrower than China's: 7-digit local numbers refused.
        let narrow = NumberNormalizer(plan: try NumberingPlan(region: "CN", nationalNumberLength: 10...11))
        XCTAssertEqual(Self.actual(narrow.normalize("010 5900 0000")), .valid("+861059000000"))
        XCTAssertEqual(Self.actual(narrow.normalize("0512 123456")), .invalid("tooShort(9)"))
        // An exit prefix of the operator's own (a PBX dialling 9 00 ...): "0" here.
        let exit = NumberNormalizer(plan: try NumberingPlan(region: "CN", nationalPrefix: "", internationalPrefix: "9"))
        XCTAssertEqual(Self.actual(exit.normalize("9 44 20 7946 0000")), .valid("+442079460000"))
        // No trunk prefix: the leading 0 stays part of the number (and such a number cannot exist in CN).
        XCTAssertEqual(Self.actual(exit.normalize("010 5900 0000")), .notInPlan("+8601059000000"))
    }
}

/// libphonenumber itself, called the slow way (tests only).
enum Reference {
    struct Answer: CustomStringConvertible {
        var e164: String?
        var valid: Bool
        /// IsPossibleNumberWithReason said IS_POSSIBLE.
        var possible: Bool
        var description: String { "\(e164 ?? "no number") valid=\(valid) possible=\(possible)" }
    }

    /// The C string the library wrote into `buffer`.
    static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func parse(_ text: String, region: String) -> Answer {
        var buffer = [CChar](repeating: 0, count: 64)
        var valid: Int32 = 0, possible: Int32 = 0
        let error = lookupd_pn_reference_parse(text, region, &buffer, 64, &valid, &possible)
        guard error == 0 else { return Answer(e164: nil, valid: false, possible: false) }
        return Answer(e164: Self.text(buffer), valid: valid != 0, possible: possible == 0)
    }

    /// Format 1 international, 2 national, 4 as dialled from `region`.
    static func format(_ e164: String, _ format: Int32, region: String = "ZZ") -> String? {
        var buffer = [CChar](repeating: 0, count: 128)
        let n = lookupd_pn_reference_format(e164, format, region, &buffer, 128)
        return n > 0 ? Self.text(buffer) : nil
    }

    static func description(_ e164: String, language: String) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        _ = lookupd_pn_reference_description(e164, language, &buffer, 256)
        return Self.text(buffer)
    }
}
