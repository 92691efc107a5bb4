import Foundation
import SystemCalls
import XCTest
@testable import Directory

/// The compile's short ways (issue 19's speed target): a home number already
/// in E.164 form read by the validity automaton alone (`CanonicalHomeReader`),
/// the label table's one-miss lookup, the CSV scan eight bytes at a time.
/// None may change a byte of the file or a word of a diagnostic: each is
/// checked against the general reading, here and in the compiled file.
final class CompileShortWayTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder("lookupd-shortway") }
    override func tearDown() { folder.cleanup() }

    /// A fixed sequence, so that a failure names a number that fails again.
    struct Digits: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state ^ (state >> 29)
        }
    }

    /// For `+`, the home calling code and 2 to 13 random digits (mostly
    /// numbers the plan refuses, a trunk prefix, a wrong length; some valid),
    /// the short way either declines or gives what the general reading gives.
    func testShortWayAgreesWithTheGeneralReading() throws {
        var rng = Digits(state: 19)
        for region in ["CN", "US", "GB", "DE", "FR", "IN", "JP", "BR", "RU", "IT", "AU", "NL"] {
            let normalizer = NumberNormalizer(plan: try NumberingPlan(region: region))
            let reader = try XCTUnwrap(normalizer.canonical, "\(region) has no override: the short way applies")
            let cc = String(normalizer.plan.countryCode)
            var valid = 0, taken = 0
            for length in 2...(PhoneNumber.maxDigits - cc.count) {
                for _ in 0..<1500 {
                    // Half the time a first digit of 1-9, so that valid numbers are common.
                    var text = "+" + cc
                    for k in 0..<length { text += String(k == 0 && rng.next() & 1 == 0 ? 1 + rng.next() % 9 : rng.next() % 10) }
                    var utf8 = text
                    let (general, short, pattern) = utf8.withUTF8 { raw -> (NormalizedNumber, PhoneNumber?, Result<NumberPattern, InvalidNumber>) in
                        let bytes = UnsafeRawBufferPointer(raw)
                        return (normalizer.readGenerally(bytes, phoneContext: nil), reader.read(bytes), normalizer.pattern(bytes: bytes))
                    }
                    // The callers' reading takes the short way first, with or without a phone-context.
                    let withContext = utf8.withUTF8 { raw in
                        "+1".utf8.withContiguousStorageIfAvailable { context in
                            (normalizer.read(UnsafeRawBufferPointer(raw), phoneContext: UnsafeRawBufferPointer(context)),
                             normalizer.readGenerally(UnsafeRawBufferPointer(raw), phoneContext: UnsafeRawBufferPointer(context)))
                        }!
                    }
                    XCTAssertEqual(withContext.0, withContext.1, "\(region) \(text)")
                    XCTAssertEqual(utf8.withUTF8 { normalizer.read(UnsafeRawBufferPointer($0), phoneContext: nil) }, general, "\(region) \(text)")
                    if case .number(let n) = general {
                        valid += 1
                        XCTAssertEqual(pattern, .success(.exact(n)), text)
                    }
                    guard let short else { continue }
                    taken += 1
                    XCTAssertEqual(general, .number(short), "\(region) \(text)")
                }
            }
            XCTAssertGreaterThan(valid, 100, "\(region): the sample must hold valid numbers")
            XCTAssertGreaterThan(taken, valid / 2, "\(region): the short way takes most valid home numbers")
        }
    }

    func testShortWayDeclinesWhatItCannotJudge() throws {
        let reader = try XCTUnwrap(NumberNormalizer(plan: .china).canonical)
        for text in ["+8613800138000", "+86 13800138000", "8613800138000", "+86138001380000000", "+861", "+8613800138x00",
                     "+4420794609580", "+86013800138000", "+8613800138000*", " +8613800138000"] {
            var s = text
            let read = s.withUTF8 { reader.read(UnsafeRawBufferPointer($0)) }
            XCTAssertEqual(read, text == "+8613800138000" ? PhoneNumber(value: 8_613_800_138_000) : nil, text)
        }
        // An operator's trunk prefix or length applies to every number: no short way.
        XCTAssertNil(NumberNormalizer(plan: try NumberingPlan(region: "CN", nationalPrefix: "9")).canonical)
        XCTAssertNil(NumberNormalizer(plan: try NumberingPlan(region: "CN", nationalNumberLength: 10...11)).canonical)
    }

    /// Lines of numbers, each written `+86…` (the short way) or `+86 …` (the
    /// general reading: a space is not canonical), with 2,070 labels (the
    /// label table grows several times), duplicates that agree, and prefix rules.
    func source(_ n: Int, spaced: Bool, errors: Bool) -> String {
        var text = "number,action,label\n"
        for i in 0..<n {
            let j = (i &* 7919) % n
            let national = "1\(3 + j % 7)\(String(format: "%09d", j * 37))"
            let number = spaced ? "+86 " + national : "+86" + national
            // Some labels in quotes with doubled quotes: the CSV reader unescapes
            // them into a scratch buffer that lives only while the line is read.
            let label = j % 11 == 0 ? "\"Quoted \"\"\(j % 50)\"\"\"" : "Caller \(j % 3000)"
            let line = j % 3 == 0 ? "\(number),block,\n" : "\(number),identify,\(label)\n"
            text += line
            if i % 500 == 0 { text += line }
            if errors, i % 997 == 0 {
                // Another label for the same number: a conflict naming both lines.
                text += "\(number),identify,Other \(j)\n"
                // Too short, too long, a label too long: their messages.
                text += (spaced ? "+86 138,block,\n" : "+86138,block,\n") + "\(number)999999,identify,\n"
                    + "\(number),identify,\(String(repeating: "x", count: 300))\n"
            }
        }
        for k in 0..<20 { text += "+86170\(10 + k)*,block,Range \(k)\n" }
        return text
    }

    func compile(_ path: String, budget: Int?, to output: String) throws -> Result<DirectoryCompiler.Written, CompileFailure> {
        var options = DirectoryCompiler.Options()
        if let budget {
            options.memoryBudget = budget
            options.temporaryFolder = folder.path
        }
        let compiler = DirectoryCompiler(options: options)
        try compiler.add(path: path)
        return try compiler.write(to: output)
    }

    /// The same entries through the short way and through the general
    /// reading, in memory and in runs on disk: one file, byte for byte.
    func testShortWayGivesTheFileOfTheGeneralReading() throws {
        let n = 20_000
        let canonical = folder.write("canonical.csv", source(n, spaced: false, errors: false))
        let spaced = folder.write("spaced.csv", source(n, spaced: true, errors: false))
        var files: [[UInt8]] = []
        for budget in [nil, StreamingCompileTests.smallBudget, StreamingCompileTests.tinyBudget] {
            for (name, path) in [("canonical", canonical), ("spaced", spaced)] {
                let output = folder.file("\(name)-\(budget ?? 0).lkd")
                guard case .success(let w) = try compile(path, budget: budget, to: output) else { return XCTFail("\(name) must compile") }
                XCTAssertEqual(w.exactEntries, n, name)
                XCTAssertEqual(w.labels, 2000 + 50 + 20, name)
                if budget == StreamingCompileTests.tinyBudget { XCTAssertGreaterThan(w.runs, 10, "the tiny budget spills") }
                files.append(readBytes(output))
            }
        }
        for (k, file) in files.enumerated() { XCTAssertEqual(file, files[0], "file \(k) differs") }
        let file = try DirectoryFile(path: folder.file("canonical-0.lkd"))
        try file.verify()
        let entry = try XCTUnwrap(try file.lookup(PhoneNumber(value: UInt64("86" + "14" + String(format: "%09d", 1 * 37))!)!))
        XCTAssertEqual(entry.label.map { file.label($0) }, "Caller 1")
        let quoted = try XCTUnwrap(try file.lookup(PhoneNumber(value: UInt64("86" + "17" + String(format: "%09d", 11 * 37))!)!))
        XCTAssertEqual(quoted.label.map { file.label($0) }, "Quoted \"11\"")
    }

    /// Conflicts, bad numbers and bad labels: the same diagnostics (the
    /// number's own text aside) whichever way the number was read, at any budget.
    func testShortWayGivesTheDiagnosticsOfTheGeneralReading() throws {
        let canonical = folder.write("canonical.csv", source(5000, spaced: false, errors: true))
        let spaced = folder.write("spaced.csv", source(5000, spaced: true, errors: true))
        var seen: [[String]] = []
        for budget in [nil, StreamingCompileTests.tinyBudget] {
            for path in [canonical, spaced] {
                guard case .failure(let failure) = try compile(path, budget: budget, to: folder.file("out.lkd")) else {
                    return XCTFail("errors must fail the compile")
                }
                // The file's name and the number as written are the only differences.
                seen.append(failure.diagnostics.map {
                    $0.description.replacingOccurrences(of: path, with: "SOURCE").replacingOccurrences(of: "+86 ", with: "+86")
                })
            }
        }
        XCTAssertEqual(seen[0].count, 6 * 4, "six lines with errors, four diagnostics each")
        XCTAssertTrue(seen[0].contains { $0.contains("conflicts with SOURCE:") }, "\(seen[0])")
        XCTAssertTrue(seen[0].contains { $0.contains("invalid number '+86138': ") }, "\(seen[0])")
        for (k, diagnostics) in seen.enumerated() { XCTAssertEqual(diagnostics, seen[0], "compile \(k)") }
    }
}
