import FuzzTargets
import Foundation
import XCTest

/// Every input a fuzzer ever crashed on (Tests/Fixtures/fuzz/regressions/TARGET/)
/// and every seed (Tests/Fixtures/fuzz/seeds/TARGET/), replayed through the
/// same entry points lookupd-fuzz drives. A regression that comes back
/// crashes this test process, which fails the run.
final class FuzzRegressionTests: XCTestCase {
    static let fuzzFixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/fuzz")

    func inputs(_ kind: String, _ target: FuzzTarget) throws -> [URL] {
        let folder = Self.fuzzFixtures.appendingPathComponent(kind).appendingPathComponent(target.rawValue)
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { !$0.lastPathComponent.hasPrefix(".") }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    func replay(_ target: FuzzTarget) throws {
        let seeds = try inputs("seeds", target)
        XCTAssertFalse(seeds.isEmpty, "no seed corpus for \(target.rawValue)")
        for url in try inputs("regressions", target) + seeds {
            target.run([UInt8](try Data(contentsOf: url)))
        }
    }

    func testRequestPath() throws { try replay(.requestPath) }
    func testDirectory() throws { try replay(.directory) }
    func testConfig() throws { try replay(.config) }
    func testCSV() throws { try replay(.csv) }
    func testJSON() throws { try replay(.json) }
    func testVCard() throws { try replay(.vcard) }
    func testJournal() throws { try replay(.journal) }

    /// libFuzzer reads the dictionary; a typo would make it refuse to start.
    func testDictionaryParses() throws {
        let text = try String(contentsOf: Self.fuzzFixtures.appendingPathComponent("sip.dict"), encoding: .utf8)
        var entries = 0
        for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.trimmingCharacters(in: .whitespaces).isEmpty {
            XCTAssertNotNil(line.range(of: #"^[A-Za-z0-9_]*="([^"\\]|\\\\|\\"|\\x[0-9A-Fa-f]{2})*"$"#, options: .regularExpression),
                            "bad dictionary line: \(line)")
            entries += 1
        }
        XCTAssertGreaterThan(entries, 50)
    }
}
