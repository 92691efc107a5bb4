import Foundation
import Loading
import XCTest
@testable import Configuration
@testable import Directory
@testable import Screening

/// A directory's journal laid over its file: precedence, labels, the
/// journal record a decision names, and agreement with compaction.
final class OverlayTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder("lookupd-overlay") }
    override func tearDown() { folder.cleanup() }

    func summary(_ set: ScreeningSet, _ identity: String) -> String {
        let d = set.decide(identity: identity)
        return [d.verdict.rawValue, d.label.map { set.label($0) } ?? "-", d.match?.description ?? "-",
                d.journalRecord.map { "#\($0)" } ?? "-"].joined(separator: " | ")
    }

    func testJournalOverFilePrecedence() throws {
        try compileDirectory("""
        number,action,label
        +8613800138000,block,Fraud
        +8613800138001,identify,Bank
        +86170*,block,Range
        +861705*,identify,Carrier
        """, named: "main.lkd", in: folder)
        let path = folder.file("main.lkd")
        let add = { (text: String, blocked: Bool, label: String?) in
            _ = try DirectoryUpdates.add(pattern(text), blocked: blocked, label: label.map { Array($0.utf8) }, directory: path)
        }
        try add("+8613800138001", true, "Bank?")         // 1: replaces the file's entry
        _ = try DirectoryUpdates.remove(pattern("+8613800138000"), directory: path)   // 2: hides an exact entry
        _ = try DirectoryUpdates.remove(pattern("+861705*"), directory: path)         // 3: hides a prefix rule
        try add("+8617012*", false, "Journal Range")     // 4: a longer prefix than the file's
        try add("+8613900000000", true, nil)             // 5: new
        try add("+86171*", true, "New Range")            // 6: a new prefix length in use
        let set = try loadDirectory(path)

        XCTAssertEqual(summary(set, "+8613800138001"), "blocked | Bank? | +8613800138001 | #1")
        XCTAssertEqual(summary(set, "+8613800138000"), "unknown | - | - | -")
        XCTAssertEqual(summary(set, "+8617055551234"), "blocked | Range | +86170* | -", "the removed +861705* falls back to +86170*")
        XCTAssertEqual(summary(set, "+8617012345678"), "identified | Journal Range | +8617012* | #4")
        XCTAssertEqual(summary(set, "+8617099999999"), "blocked | Range | +86170* | -")
        XCTAssertEqual(summary(set, "+8613900000000"), "blocked | - | +8613900000000 | #5")
        XCTAssertEqual(summary(set, "+8617112345678"), "blocked | New Range | +86171* | #6")
        XCTAssertEqual(set.directories[0].overlay.count, 6)
        XCTAssertEqual(set.directories[0].overlay.lastSequence, 6)

        // A removal of an exact entry under a journal prefix rule: the rule decides.
        _ = try DirectoryUpdates.remove(pattern("+8617012*"), directory: path)
        try add("+8617012000000", false, "Exact")
        let later = try loadDirectory(path)
        XCTAssertEqual(summary(later, "+8617012000000"), "identified | Exact | +8617012000000 | #8")
        XCTAssertEqual(summary(later, "+8617012345678"), "blocked | Range | +86170* | -")
    }

    /// Whatever the journal holds, the overlay decides exactly as the
    /// compacted file does.
    func testOverlayAgreesWithCompactionOnRandomChanges() throws {
        var rng = SeededRandom(seed: 42)
        var lines = ["number,action,label"]
        for i in 0..<60 { lines.append("+86138000\(String(format: "%05d", i * 5)),\(i % 4 == 0 ? "identify" : "block"),L\(i % 3)") }
        lines += ["+86170*,block,Range", "+861380000*,identify,Wide", "+8613800001*,block,"]
        try compileDirectory(lines.joined(separator: "\n") + "\n", named: "r.lkd", in: folder)
        let path = folder.file("r.lkd")
        let patterns = (0..<400).map { "+86138000\(String(format: "%05d", $0))" }
            + ["+86170*", "+861380000*", "+8613800001*", "+861380002*", "+86138*", "+8617012*"]
        for _ in 0..<150 {
            let text = patterns.randomElement(using: &rng)!
            if Int.random(in: 0..<3, using: &rng) == 0 {
                _ = try? DirectoryUpdates.remove(pattern(text), directory: path)
            } else {
                let label: [UInt8]? = Bool.random(using: &rng) ? Array("J\(Int.random(in: 0..<5, using: &rng))".utf8) : nil
                _ = try DirectoryUpdates.add(pattern(text), blocked: label == nil || Bool.random(using: &rng), label: label, directory: path)
            }
        }
        let probes = (0..<400).map { "+86138000\(String(format: "%05d", $0))" } + ["+8617012345678", "+8617099999999", "+8613822222222"]
        func answers(_ set: ScreeningSet) -> [String] {
            probes.map { p in
                let d = set.decide(identity: p)
                return [d.verdict.rawValue, d.label.map { set.label($0) } ?? "-", d.match?.description ?? "-"].joined(separator: " | ")
            }
        }
        let overlaid = answers(try loadDirectory(path))
        XCTAssertGreaterThan(try loadDirectory(path).directories[0].overlay.count, 50)
        _ = try DirectoryUpdates.compact(directory: path)
        let compacted = try loadDirectory(path)
        XCTAssertTrue(compacted.directories[0].overlay.isEmpty)
        XCTAssertEqual(answers(compacted), overlaid)
    }

    func testTornJournalIsAWarningForQuery() throws {
        try compileDirectory("number,action,label\n+8613800138000,block,Fraud\n", named: "t.lkd", in: folder)
        let path = folder.file("t.lkd")
        _ = try DirectoryUpdates.add(pattern("+8613900000001"), blocked: true, label: nil, directory: path)
        let journal = JournalFormat.path(forDirectory: path)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: journal))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([36, 0, 0, 0, 1, 1]))
        try handle.close()
        var config = LookupdConfig()
        config.directories = [DirectoryConfig(path: path, name: "t")]
        let loaded = try ScreeningLoader.load(config, verify: true)
        XCTAssertEqual(loaded.warnings.count, 1)
        XCTAssertTrue(loaded.warnings[0].description.hasPrefix("\(journal): torn last record ignored: 6 bytes at offset 88"), "\(loaded.warnings)")
        XCTAssertEqual(loaded.set.decide(identity: "+8613900000001").verdict, .blocked)
    }
}

extension OverlayTests {
    /// A journal begun after the old one was moved aside (issue 23) applies whole through
    /// the loader `lookupd query` and the daemon use: the directory's merged-through marker
    /// belongs to the old journal's id.
    func testANewJournalAfterTheOldOneWasMovedAsideApplies() throws {
        try compileDirectory("number,action,label\n+8613800138000,block,Fraud\n", named: "m.lkd", in: folder)
        let path = folder.file("m.lkd")
        for i in 1...3 { _ = try DirectoryUpdates.add(pattern("+861390000000\(i)"), blocked: true, label: nil, directory: path) }
        _ = try DirectoryUpdates.compact(directory: path)
        let journal = JournalFormat.path(forDirectory: path)
        XCTAssertEqual(rename(journal, journal + ".old"), 0)
        _ = try DirectoryUpdates.add(pattern("+8613900000009"), blocked: false, label: Array("After".utf8), directory: path)
        let set = try loadDirectory(path)
        XCTAssertEqual(summary(set, "+8613900000009"), "identified | After | +8613900000009 | #1")
        XCTAssertEqual(summary(set, "+8613900000002"), "blocked | - | +8613900000002 | -")
    }
}
