import CPhoneNumbers
import Foundation
import XCTest
@testable import Directory

/// lookupd's reading and judging of numbers against libphonenumber's own, over the
/// library's example numbers of every region and type (docs/NUMBERING.md reports the
/// figures and lists every disagreement). The answer agrees when lookupd gives the E.164
/// number libphonenumber's Parse gives and the same judgement: valid (IsValidNumber),
/// possible only, or not a number (a parse error or an impossible length).
final class LibraryComparisonTests: XCTestCase {
    struct Tally {
        var total = 0
        var agreed = 0
        var disagreements: [String] = []
        var percent: Double { total == 0 ? 100 : Double(agreed) * 100 / Double(total) }
    }

    static func agrees(_ ours: NormalizedNumber, _ reference: Reference.Answer) -> Bool {
        switch ours {
        case .number(let n): return reference.e164 == n.description && reference.valid
        case .notInPlan(let n, _): return reference.e164 == n.description && !reference.valid && reference.possible
        case .invalid: return reference.e164 == nil || !reference.possible
        case .anonymous: return false
        }
    }

    /// The exit prefix as dialled from a region, when the metadata gives one in digits.
    static func dialledExitPrefix(_ t: Territory) -> String? {
        guard let text = t.internationalPrefixForDisplay else { return nil }
        let digits = String(text.filter { $0 != "~" })
        return !digits.isEmpty && digits.allSatisfy(\.isNumber) ? digits : nil
    }

    func testExampleNumbersOfEveryRegionAndType() throws {
        let data = NumberingData.installed
        let regions = data.regions
        var tallies: [String: Tally] = [:]
        func record(_ form: String, _ region: String, _ text: String, _ normalizer: NumberNormalizer) {
            let reference = Reference.parse(text, region: region)
            let ours = normalizer.normalize(text)
            var tally = tallies[form] ?? Tally()
            tally.total += 1
            if Self.agrees(ours, reference) {
                tally.agreed += 1
            } else {
                tally.disagreements.append("\(region) \(form) \(text.debugDescription): libphonenumber \(reference), lookupd \(ours)")
            }
            tallies[form] = tally
        }
        for (index, region) in regions.enumerated() {
            let normalizer = NumberNormalizer(plan: try NumberingPlan(region: region))
            let territory = try XCTUnwrap(data.territory(region: region))
            // Numbers of another region, as dialled from this one (its exit prefix, or the
            // national form within a shared calling code).
            let foreign = try XCTUnwrap(data.territory(region: regions[(index + 7) % regions.count]))
            for desc in 1..<Int(LOOKUPD_PN_DESC_COUNT) {
                guard let example = territory.descriptions[desc].example else { continue }
                let e164 = "+\(territory.countryCode)\(example)"
                guard let canonical = Reference.parse(e164, region: region).e164 else { continue }
                record("E.164", region, canonical, normalizer)
                if let international = Reference.format(canonical, Int32(LOOKUPD_PN_FORMAT_INTERNATIONAL)) {
                    record("international", region, international, normalizer)
                }
                if let national = Reference.format(canonical, Int32(LOOKUPD_PN_FORMAT_NATIONAL)) {
                    record("national", region, national, normalizer)
                }
                if let exit = Self.dialledExitPrefix(territory) {
                    record("international from the region", region, exit + " " + canonical.dropFirst(), normalizer)
                }
                if let foreignExample = foreign.descriptions[desc].example,
                   let dialled = Reference.format("+\(foreign.countryCode)\(foreignExample)", Int32(LOOKUPD_PN_FORMAT_OUT_OF_COUNTRY), region: region) {
                    record("dialled from the region", region, dialled, normalizer)
                }
            }
        }
        var report = "agreement with libphonenumber \(NumberingData.installed.versionDescription):\n"
        for (form, tally) in tallies.sorted(by: { $0.key < $1.key }) {
            report += String(format: "  %-30@ %5d of %5d  %6.2f%%\n", form as NSString, tally.agreed, tally.total, tally.percent)
        }
        let disagreements = tallies.values.flatMap(\.disagreements).sorted()
        report += disagreements.isEmpty ? "  no disagreements\n" : disagreements.map { "  " + $0 }.joined(separator: "\n") + "\n"
        print(report)
        XCTAssertEqual(tallies.count, 5, "every form was tried")
        for (form, tally) in tallies {
            XCTAssertGreaterThan(tally.total, 700, form)
            XCTAssertGreaterThanOrEqual(tally.percent, 99, "\(form): \(tally.disagreements.prefix(20).joined(separator: "\n"))")
        }
    }

    /// Beyond the examples: random numbers of every region's possible lengths, starting like
    /// its examples (so they fall in and around its ranges), judged by both: the same
    /// validity, region and type (IsValidNumber, GetRegionCodeForNumber, GetNumberType).
    func testRandomNumbersAreJudgedAsTheLibraryJudgesThem() throws {
        let data = NumberingData.installed
        var rng = SeededRandom(seed: 0x1_B9A0)
        var total = 0, agreed = 0
        var disagreements: [String] = []
        for region in data.regions {
            let territory = try XCTUnwrap(data.territory(region: region))
            let examples = (1..<Int(LOOKUPD_PN_DESC_COUNT)).compactMap { territory.descriptions[$0].example }
            let lengths = territory.possibleLengths.values
            guard !examples.isEmpty, !lengths.isEmpty else { continue }
            for _ in 0..<24 {
                let example = Array(examples[Int.random(in: 0..<examples.count, using: &rng)])
                let length = lengths[Int.random(in: 0..<lengths.count, using: &rng)]
                let keep = Int.random(in: 0...min(example.count, length), using: &rng)
                var nsn = String(example.prefix(keep))
                while nsn.count < length { nsn.append(Character(String(Int.random(in: 0...9, using: &rng)))) }
                // The number libphonenumber reads it as (a trunk prefix after the code is
                // stripped), judged by both.
                let reference = Reference.parse("+\(territory.countryCode)\(nsn)", region: "ZZ")
                guard let e164 = reference.e164, let number = PhoneNumber(value: UInt64(String(e164.dropFirst())) ?? 0),
                      e164.count <= 16 else { continue }
                total += 1
                let (_, answer) = try XCTUnwrap(data.judge(number))
                let referenceRegion = Reference.region(e164)
                let referenceType = NumberType(rawValue: UInt8(lookupd_pn_reference_type(e164))) ?? .unknown
                let code = try XCTUnwrap(data.callingCode(territory.countryCode))
                let ourRegion = answer.region == ValidityAnswer.none ? "ZZ" : data.territories[code.territory(Int(answer.region))].id
                if answer.isValid == reference.valid, ourRegion == referenceRegion, answer.type == referenceType {
                    agreed += 1
                } else {
                    disagreements.append("\(e164): libphonenumber valid=\(reference.valid) \(referenceRegion) \(referenceType), lookupd valid=\(answer.isValid) \(ourRegion) \(answer.type)")
                }
            }
        }
        print("random numbers judged alike: \(agreed) of \(total)")
        XCTAssertGreaterThan(total, 5000)
        XCTAssertEqual(disagreements, [])
    }

    /// lookupd orders the regions of a calling code itself (asking the library would build
    /// PhoneNumberUtil in every process); the main country decides which region a number of a
    /// shared code is read for, so the lists must be the library's, in its order, for every code.
    func testRegionsOfEveryCallingCodeAreTheLibrarysInItsOrder() {
        let data = NumberingData.installed
        var codes = 0, shared = 0
        for cc in 0..<1000 {
            var buffer = [Int32](repeating: 0, count: 256)
            let n = Int(lookupd_pn_reference_regions_for_code(Int32(cc), &buffer, 256))
            XCTAssertLessThanOrEqual(n, buffer.count, "+\(cc)")
            let library = buffer.prefix(n).map { data.territories[Int($0)].id }
            let ours = data.territories(ofCountryCode: cc).map { data.territories[$0].id }
            XCTAssertEqual(ours, library, "+\(cc)")
            if !library.isEmpty { codes += 1 }
            if library.count > 1 { shared += 1 }
        }
        // The comparison saw the codes, and enough shared ones for the order to matter.
        XCTAssertGreaterThan(codes, 200)
        XCTAssertGreaterThan(shared, 5)
        XCTAssertEqual(data.territories(ofCountryCode: 1).first.map { data.territories[$0].id }, "US")
    }
}

extension Reference {
    static func region(_ e164: String) -> String {
        var buffer = [CChar](repeating: 0, count: 8)
        _ = lookupd_pn_reference_region(e164, &buffer, 8)
        return Self.text(buffer)
    }
}
