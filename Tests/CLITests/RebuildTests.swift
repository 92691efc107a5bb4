import Foundation
import XCTest
@testable import Directory

/// The nightly rebuild and its neighbours: changes made with `lookupd add`
/// and `remove` survive compaction and a recompile of the directory from
/// its sources, `export` and `inspect` show what is pending, and a
/// damaged file is refused by every command that reads it.
final class RebuildTests: CLITestCase {
    var config = ""
    var directory = ""
    let master = """
    number,action,label
    +8613800138000,block,Fraud Risk
    +8618600000000,identify,China Unicom
    +86170*,block,Virtual Range
    """

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = try compileCSV(master, to: "main.lkd")
        config = write("lookupd.conf", "directory = main.lkd name=main\n")
    }

    /// "verdict label" of each number.
    func screen(_ numbers: [String]) throws -> [String] {
        let r = try lookupd(["query", "--config", config] + numbers)
        XCTAssertEqual(r.status, 0, r.stderr)
        return r.stdoutLines.map { $0.split(separator: "\t")[2...3].joined(separator: " ") }
    }

    let probes = ["+8613900000001", "+8618600000000", "+8613800138000", "+8617055000000", "+8617012345678"]

    func testAddCompactRecompileKeepsEveryChange() throws {
        XCTAssertEqual(try lookupd(["add", "+8613900000001", "--block", "--label", "Spam", "--config", config]).status, 0)
        XCTAssertEqual(try lookupd(["add", "+8618600000000", "--block", "--config", config]).status, 0)
        XCTAssertEqual(try lookupd(["remove", "+8613800138000", "--config", config]).status, 0)
        XCTAssertEqual(try lookupd(["add", "+8617055*", "--label", "Carrier", "--config", config]).status, 0)
        let changed = try screen(probes)
        XCTAssertEqual(changed, ["blocked Spam", "blocked -", "unknown -", "identified Carrier", "blocked Virtual Range"])

        XCTAssertEqual(try lookupd(["compact", "--config", config]).status, 0)
        XCTAssertEqual(try screen(probes), changed)

        // The nightly rebuild from the master list, over the served file.
        let source = write("master.csv", master)
        let r = try lookupd(["compile", "--config", planConfig, source, "-o", directory])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("\(directory).journal: its 4 changes made with lookupd add and remove stay in force over the new file"), r.stdout)
        XCTAssertEqual(try screen(probes), changed, "every change survives the recompile")
        var inspect = try lookupd(["inspect", directory])
        XCTAssertTrue(inspect.stdoutLines.contains("journal:            \(directory).journal (format 3): 4 changes, 0 merged into the file, 4 pending"), inspect.stdout)

        // And the next compaction merges them again, still keeping them.
        XCTAssertEqual(try lookupd(["compact", "--config", config]).status, 0)
        inspect = try lookupd(["inspect", directory])
        XCTAssertTrue(inspect.stdoutLines.contains("journal:            \(directory).journal (format 3): 4 changes, 4 merged into the file, 0 pending"), inspect.stdout)
        XCTAssertEqual(try screen(probes), changed)
        // A changed master: the file's new entries apply where no change was made.
        let next = write("master2.csv", master + "\n+8613000000009,block,New In Master\n")
        XCTAssertEqual(try lookupd(["compile", "--config", planConfig, next, "-o", directory]).status, 0)
        XCTAssertEqual(try screen(probes + ["+8613000000009"]), changed + ["blocked New In Master"])
    }

    func testExportIncludesPendingChanges() throws {
        XCTAssertEqual(try lookupd(["add", "+8613900000001", "--block", "--label", "Spam", "--config", config]).status, 0)
        XCTAssertEqual(try lookupd(["remove", "+86170*", "--config", config]).status, 0)
        var r = try lookupd(["export", directory])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, """
        number,action,label
        +8613800138000,block,Fraud Risk
        +8613900000001,block,Spam
        +8618600000000,identify,China Unicom

        """)
        XCTAssertEqual(r.stderr, "lookupd: note: 2 journal changes not yet compacted into \(directory) included (--base-only leaves them out)\n")
        r = try lookupd(["export", "--base-only", directory])
        XCTAssertEqual(r.stdout, master + "\n")
        XCTAssertEqual(r.stderr, "")
        // What export wrote compiles into the directory compaction writes.
        let out = file("exported.csv")
        XCTAssertEqual(try lookupd(["export", "-o", out, directory]).status, 0)
        XCTAssertEqual(try lookupd(["compile", "--config", planConfig, "-q", out, "-o", file("again.lkd")]).status, 0)
        XCTAssertEqual(try lookupd(["compact", "--config", config]).status, 0)
        XCTAssertEqual(try lookupd(["export", "--base-only", file("again.lkd")]).stdout, try lookupd(["export", "--base-only", directory]).stdout)
    }

    func testInspectShowsPendingRecordsAndTheirAge() throws {
        XCTAssertEqual(try lookupd(["add", "+8613900000001", "--block", "--label", "Spam", "--config", config]).status, 0)
        XCTAssertEqual(try lookupd(["remove", "+86170*", "--config", config]).status, 0)
        var r = try lookupd(["inspect", directory])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdoutLines.contains("journal:            \(directory).journal (format 3): 2 changes, 0 merged into the file, 2 pending"), r.stdout)
        XCTAssertTrue(r.stdoutLines.contains { $0.hasPrefix("  pending record 1: +8613900000001 block, label 'Spam', ") && $0.hasSuffix(" s ago") }, r.stdout)
        XCTAssertTrue(r.stdoutLines.contains { $0.hasPrefix("  pending record 2: +86170* removed, ") && $0.hasSuffix(" s ago") }, r.stdout)
        r = try lookupd(["inspect", "--json", directory])
        let info = try XCTUnwrap(jsonLines(r.stdout).first)
        let journal = try XCTUnwrap(info["journal"] as? [String: Any])
        XCTAssertEqual(journal["changes"] as? Int, 2)
        XCTAssertEqual(journal["pending"] as? Int, 2)
        let pending = try XCTUnwrap(journal["pending_records"] as? [[String: Any]])
        XCTAssertEqual(pending.map { $0["match"] as? String }, ["+8613900000001", "+86170*"])
        XCTAssertEqual(pending.map { $0["action"] as? String }, ["block", "remove"])
        XCTAssertEqual(pending[0]["label"] as? String, "Spam")
        let age = try XCTUnwrap(pending[0]["age_seconds"] as? Int)
        XCTAssertTrue((0...120).contains(age), "\(age)")
        XCTAssertEqual(try lookupd(["compact", "--config", config]).status, 0)
        r = try lookupd(["inspect", directory])
        XCTAssertTrue(r.stdoutLines.contains("journal:            \(directory).journal (format 3): 2 changes, 2 merged into the file, 0 pending"), r.stdout)
        XCTAssertFalse(r.stdout.contains("pending record"))
    }

    /// One flipped byte: every reader refuses, naming the file, exit 1.
    func testDamagedFileIsRefusedByEveryReader() throws {
        XCTAssertEqual(try lookupd(["add", "+8613900000001", "--block", "--config", config]).status, 0)
        var bytes = [UInt8](read(directory))
        bytes[256 + 8] ^= 0x01  // the keys' first slot
        write("main.lkd", Data(bytes))
        let damage = "\(directory): damaged: bytes 256..."
        let query = try lookupd(["query", "--config", config, "+8618600000000"])
        XCTAssertEqual(query.status, 1)
        XCTAssertEqual(query.stdout, "", "no answer from damaged bytes")
        XCTAssertTrue(query.stderr.hasPrefix("lookupd: error: \(damage)"), query.stderr)
        XCTAssertTrue(query.stderr.contains("'+8618600000000' not screened"), query.stderr)
        let export = try lookupd(["export", "-o", file("out.csv"), directory])
        XCTAssertEqual(export.status, 1)
        XCTAssertTrue(export.stderr.hasPrefix("lookupd: error: \(damage)"), export.stderr)
        XCTAssertFalse(exists(file("out.csv")))
        let toStdout = try lookupd(["export", directory])
        XCTAssertEqual(toStdout.status, 1)
        XCTAssertEqual(toStdout.stdout, "")
        let inspect = try lookupd(["inspect", directory])
        XCTAssertEqual(inspect.status, 1)
        XCTAssertTrue(inspect.stdoutLines.contains { $0.hasPrefix("problem:            \(damage)") }, inspect.stdout)
        for command in [["add", "+8618600000000", "--block"], ["remove", "+8618600000000"], ["compact"]] {
            let r = try lookupd(command + ["--config", config])
            XCTAssertEqual(r.status, 1, "\(command)")
            XCTAssertTrue(r.stderr.hasPrefix("lookupd: error: \(damage)"), "\(command): \(r.stderr)")
        }
        XCTAssertEqual(try lookupd(["check", directory]).status, 1)
    }

    /// A file compacted by lookupd 0.1, whose journal was emptied: the file
    /// alone holds those changes, and compiling over it is refused.
    func testCompilingOverChangesOnlyTheFileHoldsIsRefused() throws {
        XCTAssertEqual(try lookupd(["add", "+8613900000001", "--block", "--config", config]).status, 0)
        XCTAssertEqual(try lookupd(["add", "+8613900000002", "--block", "--config", config]).status, 0)
        XCTAssertEqual(try lookupd(["compact", "--config", config]).status, 0)
        // What the old compaction left: the journal emptied, its numbering after the merged records.
        let header = try DirectoryFile(path: directory).header
        XCTAssertEqual(header.journalSequence, 2)
        write("main.lkd.journal", Data(JournalFormat.encodeHeader(journalID: header.journalID, baseSequence: 2, version: 1)))
        XCTAssertEqual(try screen(["+8613900000001"]), ["blocked -"], "the file holds the change")

        let source = write("master.csv", master)
        var r = try lookupd(["compile", "--config", planConfig, source, "-o", directory])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: \(directory) holds changes made with lookupd add/remove (records 1 to 2 of its journal) that a compaction by an older lookupd merged into it and removed from \(directory).journal; a new file in its place would lose them; \(directory) not written. Keep them: lookupd export \(directory) > kept.csv and compile that file along with the sources (or add them again with lookupd add); or pass --discard-changes to drop them\n")
        XCTAssertEqual(try screen(["+8613900000001"]), ["blocked -"], "nothing replaced")
        r = try lookupd(["compile", "--config", planConfig, "--discard-changes", source, "-o", directory])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try screen(["+8613900000001"]), ["unknown -"])
        // A version-1 journal takes new records: it is upgraded first.
        XCTAssertEqual(try lookupd(["add", "+8613900000003", "--block", "--config", config]).status, 0)
        XCTAssertEqual(try screen(["+8613900000003"]), ["blocked -"])
        XCTAssertEqual(read(directory + ".journal")[8], 3)
    }
}
