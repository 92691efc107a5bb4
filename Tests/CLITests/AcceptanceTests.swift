import Foundation
import XCTest

/// The acceptance check: a 1,000,000-line CSV compiled with
/// `lookupd compile`, then 1,000 of its numbers and 1,000 absent ones
/// screened with `lookupd query - --json`, every answer checked.
final class AcceptanceTests: CLITestCase {
    static let lineCount = 1_000_000
    static let labels = ["Fraud Risk", "Telemarketing", "Scam Likely", "Debt Collector", "Delivery", "Bank",
                         "Pizza Palace, Haidian", "北京市医院", "Insurance Sales", "Survey", "Taxi", "Hospital",
                         "Real Estate", "Loan Offer", "\"Free\" Gifts", "School", "Courier"]

    /// Member i's number: an affine permutation modulo the prime 1,000,003
    /// keeps them distinct and scattered; the spacing of 97 leaves gaps for
    /// absent numbers right next to members.
    static func member(_ i: Int) -> UInt64 {
        8_613_000_000_000 + UInt64((i &* 7919) % 1_000_003) * 97
    }

    /// 0: block without label, 1: identify, 2: block with a label.
    static func kind(_ i: Int) -> Int { (i / 3 + i) % 3 }
    static func label(_ i: Int) -> String { labels[i % labels.count] }

    func testMillionLineCompileAndQuery() throws {
        try skipUnderSanitizer("a million-line compile; the compiler runs sanitized in the smaller compile tests")
        let started = Date()
        // Deterministic source, numbers written in several forms.
        var csv = "number,action,label\n"
        csv.reserveCapacity(40 * Self.lineCount)
        for i in 0..<Self.lineCount {
            let national = Self.member(i) - 8_600_000_000_000
            switch i % 4 {
            case 0: csv += "+86\(national)"
            case 1: csv += "0\(national)"
            case 2: csv += "\(national)"
            default: csv += "0086\(national)"
            }
            let label = Self.label(i)
            let quoted = label.contains(",") || label.contains("\"") ? "\"" + label.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : label
            switch Self.kind(i) {
            case 0: csv += ",block,\n"
            case 1: csv += ",identify,\(quoted)\n"
            default: csv += ",block,\(quoted)\n"
            }
        }
        let source = write("million.csv", csv)
        csv = ""
        let output = file("million.lkd")
        let generated = Date()

        let compile = try lookupd(["compile", "--config", planConfig, source, "-o", output])
        XCTAssertEqual(compile.status, 0, compile.stderr)
        XCTAssertTrue(compile.stdout.hasPrefix("wrote \(output): 1000000 numbers and 0 prefix rules from 1000000 lines"), compile.stdout)
        let compiled = Date()

        // 1,000 members spread over the file, 1,000 numbers next to members.
        var queries: [(input: String, expected: [String])] = []
        for j in 0..<1_000 {
            let i = (j &* 999_331) % Self.lineCount
            let n = Self.member(i)
            let input = j % 3 == 0 ? "sip:+\(n)@10.0.0.1;user=phone" : (j % 3 == 1 ? "0\(n - 8_600_000_000_000)" : "+\(n)")
            let expected: [String]
            switch Self.kind(i) {
            case 0: expected = ["+\(n)", "blocked", "null", "million.lkd", "+\(n)"]
            case 1: expected = ["+\(n)", "identified", Self.label(i), "million.lkd", "+\(n)"]
            default: expected = ["+\(n)", "blocked", Self.label(i), "million.lkd", "+\(n)"]
            }
            queries.append((input, expected))
            let absent = n + UInt64(1 + j % 96)
            queries.append(("+\(absent)", ["+\(absent)", "unknown", "null", "null", "null"]))
        }
        let stdin = queries.map(\.input).joined(separator: "\n") + "\n"
        let query = try lookupd(["query", "--config", planConfig, "--directory", output, "--json", "-"], stdin: Data(stdin.utf8))
        XCTAssertEqual(query.status, 0, query.stderr)
        XCTAssertEqual(query.stderr, "")
        let answers = jsonLines(query.stdout)
        XCTAssertEqual(answers.count, 2_000)
        var wrong = 0
        for (answer, q) in zip(answers, queries) {
            let got = ["number", "verdict", "label", "source", "match"].map { field(answer, $0) }
            if field(answer, "input") != q.input || got != q.expected {
                wrong += 1
                if wrong <= 10 { XCTFail("\(q.input): got \(got), want \(q.expected)") }
            }
        }
        XCTAssertEqual(wrong, 0)

        let check = try lookupd(["check", output])
        XCTAssertEqual(check.status, 0, check.stderr)
        XCTAssertTrue(check.stdout.contains("ok (1000000 numbers, 0 prefix rules, \(Self.labels.count) labels"), check.stdout)
        let finished = Date()
        print(String(format: "acceptance: generate %.1f s, compile %.1f s, query+check %.1f s",
                     generated.timeIntervalSince(started), compiled.timeIntervalSince(generated), finished.timeIntervalSince(compiled)))
    }
}
