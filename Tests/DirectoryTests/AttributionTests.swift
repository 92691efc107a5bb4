import Foundation
import XCTest
@testable import Directory

/// Attribution (region and carrier) against the libraries it follows: the region part
/// against libphonenumber's offline geocoder, the carrier part against python3-phonenumbers'
/// carrier.name_for_number, on the example numbers of every region and on random Chinese
/// mobile numbers.
final class AttributionTests: XCTestCase {
    /// Valid example numbers of every region, and 300 random 13x-19x Chinese mobiles.
    static func sample() -> [PhoneNumber] {
        let data = NumberingData.installed
        var numbers: [PhoneNumber] = []
        for region in data.regions {
            guard let t = data.territory(region: region) else { continue }
            for d in 1..<t.descriptions.count {
                // As libphonenumber reads the example (MX's mobile examples lose their 1).
                guard let example = t.descriptions[d].example,
                      let canonical = Reference.parse("+\(t.countryCode)\(example)", region: "ZZ").e164,
                      let n = PhoneNumber(value: UInt64(canonical.dropFirst()) ?? 0), data.judge(n)?.answer.isValid == true else { continue }
                numbers.append(n)
            }
        }
        var rng = SeededRandom(seed: 0xA77)
        while numbers.count < 2_000 {
            let n = PhoneNumber(value: 86 * 100_000_000_000 + UInt64.random(in: 13_000_000_000...19_999_999_999, using: &rng))!
            if data.judge(n)?.answer.isValid == true { numbers.append(n) }
        }
        return numbers
    }

    func testTheExamplesOfTheIssue() throws {
        let zh = try Attribution(language: "zh")
        let en = try Attribution(language: "en")
        XCTAssertEqual(zh.describe(number("+8613800138000")), "北京市 中国移动")
        XCTAssertEqual(en.describe(number("+8613800138000")), "Beijing China Mobile")
        XCTAssertEqual(en.describe(number("+12025550143")), "Washington D.C.")
        XCTAssertEqual(en.describe(number("+14155550100")), "San Francisco, CA")
        XCTAssertEqual(zh.describe(number("+12025550143")), "美国", "no Chinese name for the area: the country")
        XCTAssertEqual(en.describe(number("+390212345678")), "Milan")
        XCTAssertNil(en.describe(number("+12005550143")), "a number that cannot exist is not attributed")
        XCTAssertThrowsError(try Attribution(language: "Chinese"))
    }

    func testRegionsAgreeWithTheGeocoder() throws {
        let numbers = Self.sample()
        for language in ["zh", "en", "de"] {
            let attribution = try Attribution(language: language, carrierFolder: nil)
            var disagreements: [String] = []
            for n in numbers {
                let expected = Reference.description(n.description, language: language)
                let ours = attribution.regionDescription(n)
                if ours != expected { disagreements.append("\(n) \(language): geocoder '\(expected)', lookupd '\(ours)'") }
            }
            XCTAssertEqual(disagreements, [], language)
        }
    }

    func testCarriersAgreeWithPythonPhonenumbers() throws {
        let python = "/usr/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: python),
              FileManager.default.fileExists(atPath: Attribution.defaultCarrierFolder) else {
            return XCTFail("python3-phonenumbers is not installed (scripts/install-deps installs it)")
        }
        let numbers = Self.sample()
        for language in ["zh", "en"] {
            let attribution = try Attribution(language: language, carrierFolderRequired: true)
            XCTAssertNotNil(attribution.carrierSource)
            let script = """
            import sys, phonenumbers
            from phonenumbers import carrier
            for line in sys.stdin:
                n = phonenumbers.parse(line.strip(), None)
                print(carrier.name_for_number(n, "\(language)"))
            """
            let process = Process()
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments = ["-c", script]
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            let text = numbers.map(\.description).joined(separator: "\n") + "\n"
            // Written from another thread: the child's output pipe must be drained meanwhile.
            let writer = Thread {
                input.fileHandleForWriting.write(Data(text.utf8))
                try? input.fileHandleForWriting.close()
            }
            writer.start()
            let answer = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 0)
            let expected = answer.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            XCTAssertGreaterThanOrEqual(expected.count, numbers.count)
            var disagreements: [String] = []
            for (i, n) in numbers.enumerated() where i < expected.count {
                let ours = attribution.carrierName(n)
                if ours != expected[i] { disagreements.append("\(n) \(language): python '\(expected[i])', lookupd '\(ours)'") }
            }
            XCTAssertEqual(disagreements, [], language)
            XCTAssertGreaterThan(numbers.filter { !attribution.carrierName($0).isEmpty }.count, 300, "carriers found at all")
        }
    }

    /// The carrier files are read strictly: anything unexpected names its file and line.
    func testCarrierDataErrorsNameFileAndLine() throws {
        let folder = NSTemporaryDirectory() + "carriers-\(getpid())-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func carriers(_ text: String) -> String {
            _ = FileManager.default.createFile(atPath: folder + "/data0.py", contents: Data(text.utf8))
            do {
                let data = try CarrierData(folder: folder, language: "zh")
                return data.withName(number("+8613800138000")) { String(decoding: $0, as: UTF8.self) }
            } catch {
                return "\(error)"
            }
        }
        let good = "\"\"\"doc\"\"\"\ndata = {\n '86138':{'en': 'China Mobile', 'zh': u('\\u4e2d\\u56fd\\u79fb\\u52a8')},\n '861380013':{'en': 'Test'},\n}\n"
        XCTAssertEqual(carriers(good), "", "the longest prefix has no Chinese name: none (no English fallback for zh)")
        XCTAssertEqual(carriers(good.replacingOccurrences(of: " '861380013':{'en': 'Test'},\n", with: "")), "中国移动")
        XCTAssertEqual(carriers("data = {\n '86138':{'en': 'X'\n}\n"), "\(folder)/data0.py:2: carrier data not in the expected form: expected a string")
        XCTAssertEqual(carriers("data = {\n 'x86':{'en': 'X'},\n}\n"), "\(folder)/data0.py:2: carrier data not in the expected form: a prefix must be digits")
        XCTAssertEqual(carriers("data = {\n '86':{'en': u('\\u0007')},\n}\n"), "\(folder)/data0.py:2: carrier data not in the expected form: escape names a control character")
        XCTAssertEqual(carriers("data = {\n '86':{'en': 'X'},\n"), "\(folder)/data0.py:2: carrier data not in the expected form: no complete 'data = { ... }' literal")
        XCTAssertEqual(carriers("nothing here\n"), "\(folder)/data0.py:1: carrier data not in the expected form: no complete 'data = { ... }' literal")
        try FileManager.default.removeItem(atPath: folder + "/data0.py")
        XCTAssertEqual(carriers2(folder), "\(folder): no carrier data files (data*.py) in it")
        XCTAssertTrue("\(String(describing: try? CarrierData(folder: folder + "/missing", language: "en")))" == "nil")
    }

    private func carriers2(_ folder: String) -> String {
        do { _ = try CarrierData(folder: folder, language: "zh"); return "read" } catch { return "\(error)" }
    }
}
