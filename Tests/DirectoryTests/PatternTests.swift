import XCTest
@testable import Directory

/// Directory source number fields: exact numbers and `prefix*` rules.
final class PatternTests: XCTestCase {
    let china = NumberNormalizer()

    func assertPrefix(_ text: String, _ expected: String, _ n: NumberNormalizer? = nil, line: UInt = #line) {
        let result = (n ?? china).pattern(text)
        XCTAssertEqual(result, .success(.prefix(prefix(expected, line: line))), "pattern(\(text.debugDescription))", line: line)
    }

    func assertInvalid(_ text: String, _ reason: InvalidNumber, _ n: NumberNormalizer? = nil, line: UInt = #line) {
        XCTAssertEqual((n ?? china).pattern(text), .failure(reason), "pattern(\(text.debugDescription))", line: line)
    }

    func testChinaPlanPrefixesAllMeanTheSameRange() {
        assertPrefix("+86170*", "+86170*")
        assertPrefix("0170*", "+86170*")
        assertPrefix("170*", "+86170*")
        assertPrefix("0086170*", "+86170*")
        assertPrefix("+86 170*", "+86170*")
        assertPrefix("+86-170-*", "+86170*")
        assertPrefix("  +86170*  ", "+86170*")
        assertPrefix("010*", "+8610*")
        assertPrefix("+861705555*", "+861705555*")
        assertPrefix("13800138000*", "+8613800138000*")
        // Every national number, every number of a country.
        assertPrefix("0*", "+86*")
        assertPrefix("+44*", "+44*")
        assertPrefix("0044 20*", "+4420*")
        // A 15-digit prefix is the longest possible.
        assertPrefix("+123456789012345*", "+123456789012345*")
    }

    func testPrefixDescriptionAndDigits() {
        guard case .success(.prefix(let p)) = china.pattern("+86170*") else { return XCTFail("not a prefix") }
        XCTAssertEqual(p.digits, 86170)
        XCTAssertEqual(p.length, 5)
        XCTAssertEqual(p.description, "+86170*")
        XCTAssertEqual(NumberPattern.prefix(p).description, "+86170*")
    }

    func testUSPlanPrefixes() throws {
        let us = NumberNormalizer(plan: try NumberingPlan(region: "US"))
        assertPrefix("212*", "+1212*", us)
        assertPrefix("1212*", "+1212*", us)
        assertPrefix("1 (212) *", "+1212*", us)
        assertPrefix("01144*", "+44*", us)
        assertPrefix("+1900*", "+1900*", us)
    }

    func testItalyPlanKeepsTheLeadingZero() throws {
        let italy = NumberNormalizer(plan: try NumberingPlan(region: "IT"))
        assertPrefix("06*", "+3906*", italy)
        assertPrefix("+39 06*", "+3906*", italy)
        assertPrefix("3*", "+393*", italy)
    }

    func testInvalidPatterns() {
        assertInvalid("*", .noDigits)
        assertInvalid("+*", .noDigits)
        assertInvalid("00*", .noDigits)
        assertInvalid("+0*", .unknownCountryCode("0"))
        assertInvalid("+086*", .unknownCountryCode("0"))
        XCTAssertEqual(china.pattern("000*").failureDescription, "numbers of CN (+86) do not start with 0 after the trunk prefix")
        assertInvalid("+86*170*", .badCharacter("*"))
        assertInvalid("*86", .badCharacter("*"))
        assertInvalid("+86#*", .badCharacter("#"))
        assertInvalid("abc*", .letters)
        assertInvalid("+86ABC*", .letters)
        assertInvalid("+1234567890123456*", .notE164(digits: 16))
        // The home country code counts: 14 national digits + 86 is 16.
        assertInvalid("12345678901234*", .notE164(digits: 16))
        assertInvalid("8+6170*", .misplacedPlus)
        assertInvalid("", .noDigits)
        assertInvalid("   ", .noDigits)
        assertInvalid("anonymous", .withheld)
    }

    func testExactPatterns() {
        XCTAssertEqual(china.pattern("+8613800138000"), .success(.exact(number("+8613800138000"))))
        XCTAssertEqual(china.pattern("013800138000"), .success(.exact(number("+8613800138000"))))
        XCTAssertEqual(china.pattern("101").failureDescription?.hasPrefix("3 digits is too short for a number of CN (+86)"), true)
        // A number its plan holds no range for is still an entry (blocking those is often the point).
        XCTAssertEqual(NumberNormalizer(plan: try! NumberingPlan(region: "US")).pattern("+1 200 555 0143"),
                       .success(.exact(number("+12005550143"))))
    }

    func testNumberPrefixCovers() {
        let p = prefix("+86170*")
        XCTAssertTrue(p.covers(number("+8617012345678")))
        XCTAssertTrue(p.covers(number("+86170")))
        XCTAssertFalse(p.covers(number("+8617112345678")))
        XCTAssertFalse(p.covers(number("+8616")))
        XCTAssertFalse(p.covers(number("+1708612345")))
    }

    func testNumberPrefixAndPhoneNumberValidation() {
        XCTAssertNil(NumberPrefix(digits: 0, length: 1))
        XCTAssertNil(NumberPrefix(digits: 86, length: 3)) // would have a leading zero
        XCTAssertNil(NumberPrefix(digits: 86, length: 1))
        XCTAssertNil(NumberPrefix(digits: 1_000_000_000_000_000, length: 16))
        XCTAssertNotNil(NumberPrefix(digits: 999_999_999_999_999, length: 15))
        XCTAssertNil(PhoneNumber(value: 0))
        XCTAssertNil(PhoneNumber(value: 1_000_000_000_000_000))
        XCTAssertEqual(PhoneNumber(value: 999_999_999_999_999)?.digitCount, 15)
        XCTAssertEqual(PhoneNumber(value: 8613800138000)?.description, "+8613800138000")
        XCTAssertLessThan(prefix("+9*"), prefix("+10*"), "prefixes order by length first")
    }
}

extension Result where Failure == InvalidNumber {
    var failureDescription: String? {
        if case .failure(let reason) = self { return reason.description }
        return nil
    }
}
