import XCTest
@testable import Directory

/// Table-driven tests of `NumberNormalizer.normalize`: every written form a
/// PBX sees, under the China plan (the default) and a NANP plan.
final class NormalizationTests: XCTestCase {
    enum Plan: String { case china, us, uk }

    enum Expected: Equatable, CustomStringConvertible {
        case e164(String)
        case anonymous
        case invalid(InvalidNumber)

        var description: String {
            switch self {
            case .e164(let s): return s
            case .anonymous: return "anonymous"
            case .invalid(let reason): return "invalid(\(reason))"
            }
        }
    }

    struct Case {
        var input: String
        var plan: Plan
        var expected: Expected
        var line: UInt

        init(_ input: String, _ plan: Plan, _ expected: Expected, line: UInt = #line) {
            self.input = input
            self.plan = plan
            self.expected = expected
            self.line = line
        }

        init(_ input: String, _ expected: Expected, line: UInt = #line) {
            self.init(input, .china, expected, line: line)
        }
    }

    static let usPlan = try! NumberingPlan(countryCode: 1, nationalPrefix: "1", internationalPrefix: "011")
    static let ukPlan = try! NumberingPlan(countryCode: 44, nationalPrefix: "0", internationalPrefix: "00")

    static let cases: [Case] = [
        // The five ways a Chinese mobile number arrives.
        Case("+8613800138000", .e164("+8613800138000")),
        Case("008613800138000", .e164("+8613800138000")),
        Case("013800138000", .e164("+8613800138000")),
        Case("13800138000", .e164("+8613800138000")),
        Case("8613800138000", .e164("+8613800138000")),
        // Visual separators.
        Case("+86 138 0013 8000", .e164("+8613800138000")),
        Case("+86-138-0013-8000", .e164("+8613800138000")),
        Case("+86.138.0013.8000", .e164("+8613800138000")),
        Case("+86 (138) 0013 8000", .e164("+8613800138000")),
        Case("(+86) 138 0013 8000", .e164("+8613800138000")),
        Case("+86\t138\t0013\t8000", .e164("+8613800138000")),
        Case("  +8613800138000  ", .e164("+8613800138000")),
        Case("138-0013-8000", .e164("+8613800138000")),
        Case("0086 138 0013 8000", .e164("+8613800138000")),
        // Landlines: trunk prefix and area code.
        Case("01059000000", .e164("+861059000000")),
        Case("010-59000000", .e164("+861059000000")),
        Case("(010) 5900 0000", .e164("+861059000000")),
        Case("010/59000000", .e164("+861059000000")),
        Case("1059000000", .e164("+861059000000")),
        Case("86 10 5900 0000", .e164("+861059000000")),
        Case("0755-8888-9999", .e164("+8675588889999")),
        // The "(0)" trunk-prefix marker of international notation.
        Case("+44 (0) 20 7946 0000", .e164("+442079460000")),
        Case("+44(0)2079460000", .e164("+442079460000")),
        Case("+49 (0)30 1234567", .e164("+49301234567")),
        Case("0049 (0)30 1234567", .e164("+49301234567")),
        // Other countries.
        Case("+39 06 1234 5678", .e164("+390612345678")),
        Case("0049 30 1234567", .e164("+49301234567")),
        Case("+1 212 555 0100", .e164("+12125550100")),
        Case("0012125550100", .e164("+12125550100")),
        Case("+33 1 23 45 67 89", .e164("+33123456789")),
        // tel: URIs (RFC 3966).
        Case("tel:+86-138-0013-8000", .e164("+8613800138000")),
        Case("TEL:+8613800138000", .e164("+8613800138000")),
        Case("tel:+8613800138000;ext=123", .e164("+8613800138000")),
        Case("tel:59000000;phone-context=+86-10", .e164("+861059000000")),
        Case("tel:13800138000;phone-context=+86", .e164("+8613800138000")),
        Case("tel:013800138000;phone-context=+86", .e164("+8613800138000")),
        Case("tel:2125550100;phone-context=+1", .e164("+12125550100")),
        Case("tel:+8613800138000;phone-context=+1", .e164("+8613800138000")),
        Case("tel:7042;phone-context=example.com", .invalid(.tooShort(digits: 4))),
        Case("tel:13800138000;phone-context=example.com", .e164("+8613800138000")),
        Case("<tel:+8613800138000>", .e164("+8613800138000")),
        // sip: and sips: URIs.
        Case("sip:+8613800138000@10.0.0.1;user=phone", .e164("+8613800138000")),
        Case("sip:+8613800138000@10.0.0.1", .e164("+8613800138000")),
        Case("sip:13800138000@pbx.example.com", .e164("+8613800138000")),
        Case("sip:013800138000@pbx.example.com;user=phone", .e164("+8613800138000")),
        Case("sip:008613800138000@pbx.example.com", .e164("+8613800138000")),
        Case("sips:+8613800138000@example.com", .e164("+8613800138000")),
        Case("sips:+8613800138000@example.com:5061;transport=tls", .e164("+8613800138000")),
        Case("SIP:+8613800138000@example.com", .e164("+8613800138000")),
        Case("sip:+8613800138000", .e164("+8613800138000")),
        Case("sip:+8613800138000@10.0.0.1?Subject=hello", .e164("+8613800138000")),
        Case("sip:+8613800138000;cpc=ordinary@10.0.0.1;user=phone", .e164("+8613800138000")),
        Case("sip:+8613800138000;cpc=payphone;rn=+8613900000000@10.0.0.1", .e164("+8613800138000")),
        Case("sip:59000000;phone-context=+86-10@example.com;user=phone", .e164("+861059000000")),
        Case("+8613800138000;cpc=ordinary", .e164("+8613800138000")),
        // name-addr with and without a display name.
        Case("<sip:+8613800138000@10.0.0.1;user=phone>;tag=abc", .e164("+8613800138000")),
        Case("\"Alice\" <sip:+8613800138000@example.com>;tag=1234", .e164("+8613800138000")),
        Case("Alice <sips:013800138000@example.com:5061;transport=tls>", .e164("+8613800138000")),
        Case("\"Foo <Bar>\" <sip:+8613800138000@example.com>", .e164("+8613800138000")),
        Case("\"13900000000\" <sip:+8613800138000@example.com>", .e164("+8613800138000")),
        // %-escapes.
        Case("%2B8613800138000", .e164("+8613800138000")),
        Case("sip:%2B8613800138000@host", .e164("+8613800138000")),
        Case("sip:%2b8613800138000@host", .e164("+8613800138000")),
        Case("sip:%2B86%20138%200013%208000@host", .e164("+8613800138000")),
        Case("sip:%2G8613800138000@host", .invalid(.badEscape)),
        Case("138%", .invalid(.badEscape)),
        Case("138%2", .invalid(.badEscape)),
        Case("%zz13800138000", .invalid(.badEscape)),
        Case("%41bc", .invalid(.letters)),
        Case("%00138", .invalid(.badCharacter("\u{0}"))),
        Case("%2B%2B8613800138000", .invalid(.misplacedPlus)),
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
        Case("", .anonymous),
        Case("   ", .anonymous),
        Case("sip:anonymous@anonymous.invalid", .anonymous),
        Case("\"Anonymous\" <sip:anonymous@anonymous.invalid>;tag=1", .anonymous),
        Case("sip:Anonymous@10.0.0.1", .anonymous),
        Case("sips:restricted@example.com", .anonymous),
        Case("sip:anonymous.invalid", .anonymous),
        Case("sip:@host", .anonymous),
        Case("<sip:unavailable@unknown.invalid>", .anonymous),
        Case("tel:", .anonymous),
        Case("%61nonymous", .anonymous),
        // Letters.
        Case("abc", .invalid(.letters)),
        Case("1-800-FLOWERS", .invalid(.letters)),
        Case("sip:alice@example.com", .invalid(.letters)),
        Case("138OO138OOO", .invalid(.letters)),
        // Internal extensions and service codes.
        Case("101", .invalid(.tooShort(digits: 3))),
        Case("1001", .invalid(.tooShort(digits: 4))),
        Case("10086", .invalid(.tooShort(digits: 5))),
        Case("95588", .invalid(.tooShort(digits: 5))),
        Case("sip:1001@pbx.example.com", .invalid(.tooShort(digits: 4))),
        Case("59000000", .invalid(.tooShort(digits: 8))),
        Case("+86", .invalid(.tooShort(digits: 2))),
        Case("+861234", .invalid(.tooShort(digits: 6))),
        // Too long.
        Case("+8613800138000123", .invalid(.tooLong(digits: 16))),
        Case("+861380013800012", .e164("+861380013800012")),
        Case("0086138001380001234", .invalid(.tooLong(digits: 17))),
        Case("1234567890123456789012345", .invalid(.tooLong(digits: 25))),
        Case("138001380001", .invalid(.tooLong(digits: 12))),
        // Leading zero after '+', misplaced '+'.
        Case("+0861380013800", .invalid(.leadingZero)),
        Case("00086138001380", .invalid(.leadingZero)),
        Case("86+13800138000", .invalid(.misplacedPlus)),
        Case("++8613800138000", .invalid(.misplacedPlus)),
        Case("+86+13800138000", .invalid(.misplacedPlus)),
        // '*' and '#': feature codes, not numbers.
        Case("*86", .invalid(.badCharacter("*"))),
        Case("#31#13800138000", .invalid(.badCharacter("#"))),
        Case("13800138000#", .invalid(.badCharacter("#"))),
        Case("+86170*", .invalid(.badCharacter("*"))),
        // Nothing numeric at all.
        Case("+", .invalid(.noDigits)),
        Case("-", .invalid(.noDigits)),
        Case("()", .invalid(.noDigits)),
        // NANP plan: country 1, national prefix 1, international prefix 011.
        Case("2125550100", .us, .e164("+12125550100")),
        Case("12125550100", .us, .e164("+12125550100")),
        Case("1-212-555-0100", .us, .e164("+12125550100")),
        Case("(212) 555-0100", .us, .e164("+12125550100")),
        Case("+1 (212) 555-0100", .us, .e164("+12125550100")),
        Case("011 44 20 7946 0000", .us, .e164("+442079460000")),
        Case("011 86 138 0013 8000", .us, .e164("+8613800138000")),
        Case("+8613800138000", .us, .e164("+8613800138000")),
        Case("sip:2125550100@pbx.example.com;user=phone", .us, .e164("+12125550100")),
        Case("5550100", .us, .invalid(.tooShort(digits: 7))),
        Case("911", .us, .invalid(.tooShort(digits: 3))),
        Case("212555010099", .us, .invalid(.tooLong(digits: 12))),
        // UK plan.
        Case("020 7946 0000", .uk, .e164("+442079460000")),
        Case("07700 900123", .uk, .e164("+447700900123")),
        Case("00 86 138 0013 8000", .uk, .e164("+8613800138000")),
        Case("999", .uk, .invalid(.tooShort(digits: 3))),
    ]

    func normalizer(_ plan: Plan) -> NumberNormalizer {
        switch plan {
        case .china: return NumberNormalizer()
        case .us: return NumberNormalizer(plan: Self.usPlan)
        case .uk: return NumberNormalizer(plan: Self.ukPlan)
        }
    }

    func actual(_ result: NormalizedNumber) -> Expected {
        switch result {
        case .number(let number): return .e164(number.description)
        case .anonymous: return .anonymous
        case .invalid(let reason): return .invalid(reason)
        }
    }

    func testTableHasAtLeastEightyCases() {
        XCTAssertGreaterThanOrEqual(Self.cases.count, 80)
        // The table must not contradict itself.
        var seen: [String: Expected] = [:]
        for c in Self.cases {
            let key = c.plan.rawValue + "|" + c.input
            if let earlier = seen[key] { XCTAssertEqual(earlier, c.expected, "duplicate case \(c.input)", line: c.line) }
            seen[key] = c.expected
        }
    }

    func testNormalizationTable() {
        for c in Self.cases {
            let result = actual(normalizer(c.plan).normalize(c.input))
            XCTAssertEqual(result, c.expected, "normalize(\(c.input.debugDescription)) under the \(c.plan) plan", line: c.line)
        }
    }

    /// The byte entry point (used by the SIP hot path) agrees with the String one.
    func testByteEntryPointAgrees() {
        for c in Self.cases {
            let n = normalizer(c.plan)
            let bytes = Array(c.input.utf8)
            let viaBytes = bytes.withUnsafeBytes { n.normalize(bytes: $0) }
            XCTAssertEqual(viaBytes, n.normalize(c.input), "bytes vs text for \(c.input.debugDescription)", line: c.line)
        }
    }

    /// A directory source's number field reads exact numbers exactly as normalize does.
    func testPatternReadsExactNumbersLikeNormalize() {
        for c in Self.cases where !c.input.hasSuffix("*") {
            let n = normalizer(c.plan)
            let pattern = n.pattern(c.input)
            switch c.expected {
            case .e164(let text):
                XCTAssertEqual(try? pattern.get(), .exact(number(text)), "pattern(\(c.input.debugDescription))", line: c.line)
            case .invalid(let reason):
                XCTAssertEqual(pattern, .failure(reason), "pattern(\(c.input.debugDescription))", line: c.line)
            case .anonymous:
                let trimmedEmpty = c.input.allSatisfy { $0 == " " }
                XCTAssertEqual(pattern, .failure(trimmedEmpty ? .noDigits : .withheld), "pattern(\(c.input.debugDescription))", line: c.line)
            }
        }
    }

    func testInvalidReasonsReadWell() {
        XCTAssertEqual(InvalidNumber.tooShort(digits: 4).description,
                       "4 digits is too short for a telephone number (an internal extension or service code?)")
        XCTAssertEqual(InvalidNumber.tooLong(digits: 16).description, "16 digits is too long for an E.164 number (at most 15)")
        XCTAssertEqual(InvalidNumber.badCharacter("*").description, "contains '*'")
        XCTAssertEqual(InvalidNumber.badCharacter("\u{0}").description, "contains the control character U+0")
        XCTAssertEqual(InvalidNumber.badCharacter("✓").description, "contains '✓'")
        XCTAssertEqual(InvalidNumber.letters.description, "contains letters")
        XCTAssertEqual(InvalidNumber.misplacedPlus.description, "'+' is only allowed at the start")
        XCTAssertEqual(InvalidNumber.leadingZero.description, "a country code cannot start with 0")
    }

    /// Forms seen in Chinese address books and spreadsheets: full-width
    /// digits and plus, ideographic spaces, and the trunk 0 kept after +86.
    func testFullWidthAndTrunkZeroAfterCountryCode() {
        let n = NumberNormalizer(plan: .china)
        XCTAssertEqual(n.normalize("＋８６ １３８００１３８０００"), .number(PhoneNumber(value: 8613800138000)!))
        XCTAssertEqual(n.normalize("１３８－００１３－８０００"), .number(PhoneNumber(value: 8613800138000)!))
        XCTAssertEqual(n.normalize("138\u{3000}0013\u{3000}8000"), .number(PhoneNumber(value: 8613800138000)!))
        XCTAssertEqual(n.normalize("+86 010 5900 0000"), .number(PhoneNumber(value: 861059000000)!))
        XCTAssertEqual(n.normalize("0086 010 5900 0000"), .number(PhoneNumber(value: 861059000000)!))
        // Only the home country's trunk prefix is dropped: Italy keeps its 0.
        XCTAssertEqual(n.normalize("+39 06 1234 5678"), .number(PhoneNumber(value: 390612345678)!))
        XCTAssertEqual(n.normalize("1380013800✓"), .invalid(.badCharacter("✓")))
    }

    /// Random valid numbers written in every form come back as themselves.
    func testRandomNumbersInEveryForm() {
        var rng = SeededRandom(seed: 0x5EED_0001)
        let n = NumberNormalizer()
        for _ in 0..<2_000 {
            // Chinese mobile: 1[3-9]x xxxx xxxx.
            let national = UInt64.random(in: 13_000_000_000...19_999_999_999, using: &rng)
            let e164 = "+86\(national)"
            let forms = ["+86\(national)", "0086\(national)", "0\(national)", "\(national)", "86\(national)",
                         "tel:+86\(national)", "sip:+86\(national)@10.0.0.1;user=phone",
                         "<sip:0\(national)@pbx>;tag=x", "+86 \(String(national).prefix(3)) \(String(national).dropFirst(3))"]
            for form in forms {
                XCTAssertEqual(n.normalize(form).number?.description, e164, form)
            }
        }
    }

    func testNumberingPlanValidation() {
        XCTAssertThrowsError(try NumberingPlan(countryCode: 0))
        XCTAssertThrowsError(try NumberingPlan(countryCode: 1000))
        XCTAssertThrowsError(try NumberingPlan(countryCode: 86, nationalPrefix: "a"))
        XCTAssertThrowsError(try NumberingPlan(countryCode: 86, internationalPrefix: ""))
        XCTAssertThrowsError(try NumberingPlan(countryCode: 86, nationalPrefix: "00", internationalPrefix: "00")) { error in
            XCTAssertEqual(error as? NumberingPlanError, .ambiguousPrefixes("00", "00"))
        }
        XCTAssertThrowsError(try NumberingPlan(countryCode: 86, nationalNumberLength: 2...11))
        XCTAssertThrowsError(try NumberingPlan(countryCode: 86, nationalNumberLength: 10...14))
        XCTAssertNoThrow(try NumberingPlan(countryCode: 86, nationalPrefix: ""))
        XCTAssertEqual(NumberingPlan.china.countryCode, 86)
        XCTAssertEqual(NumberingPlan.china.nationalNumberLength, 10...11)
    }

    /// With no national prefix (e.g. Italy-style), numbers are read as they are.
    func testPlanWithoutNationalPrefix() throws {
        let italy = NumberNormalizer(plan: try NumberingPlan(countryCode: 39, nationalPrefix: "", internationalPrefix: "00"))
        XCTAssertEqual(italy.normalize("06 1234 5678").number?.description, "+390612345678")
        XCTAssertEqual(italy.normalize("0039 06 1234 5678").number?.description, "+390612345678")
    }
}
