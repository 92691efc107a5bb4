import Foundation
import Glibc
import XCTest

/// `lookupd add`, `remove` and `compact` through the real binary, and the
/// crash tests: commands killed with SIGKILL at random points never lose a
/// change they reported, a torn journal is read up to its last good record
/// and repaired by the next change, and an interrupted compaction leaves
/// the old file and journal in force.
final class JournalCommandTests: CLITestCase {
    var config = ""
    var directory = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = try compileCSV("""
        number,action,label
        +8613800138000,block,Fraud Risk
        +8618600000000,identify,China Unicom
        +86170*,block,Virtual Range
        """, to: "main.lkd")
        config = write("lookupd.conf", "directory = main.lkd name=main\n")
    }

    var journal: String { directory + ".journal" }

    /// number -> "verdict|label|match|record" from `lookupd query --json`.
    func screen(_ numbers: [String], file: StaticString = #filePath, line: UInt = #line) throws -> [String: String] {
        let r = try lookupd(["query", "--json", "--config", config, "-"], stdin: Data(numbers.joined(separator: "\n").utf8), file: file, line: line)
        XCTAssertEqual(r.status, 0, r.stderr, file: file, line: line)
        var answers: [String: String] = [:]
        for object in jsonLines(r.stdout, file: file, line: line) {
            answers[field(object, "input")] = [field(object, "verdict"), field(object, "label"), field(object, "match"), field(object, "record")].joined(separator: "|")
        }
        return answers
    }

    // MARK: - The commands

    /// The one JSON object a --json command prints, with exactly `keys`.
    func object(_ r: RunResult, keys: Set<String>, file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
        let objects = jsonLines(r.stdout, file: file, line: line)
        XCTAssertEqual(objects.count, 1, r.stdout, file: file, line: line)
        let o = objects.first ?? [:]
        XCTAssertEqual(Set(o.keys), keys, "the documented shape (lookupd(8), JSON OUTPUT)", file: file, line: line)
        return o
    }

    func testJSONOfAddRemoveCompactCheckAndCompile() throws {
        let changeKeys: Set<String> = ["number", "outcome", "action", "label", "expires", "expires_at", "record", "previous"]
        var r = try lookupd(["add", "+8613900000001", "--block", "--label", "Spam", "--expires", "2h", "--json", "--config", config])
        XCTAssertEqual(r.status, 0, r.stderr)
        var o = object(r, keys: ["directory", "path", "written", "unchanged", "changes"])
        XCTAssertEqual(o["directory"] as? String, "main")
        XCTAssertEqual(o["written"] as? Int, 1)
        var change = try XCTUnwrap((o["changes"] as? [[String: Any]])?.first)
        XCTAssertEqual(Set(change.keys), changeKeys)
        XCTAssertEqual(change["outcome"] as? String, "added")
        XCTAssertEqual(change["action"] as? String, "block")
        XCTAssertEqual(change["label"] as? String, "Spam")
        XCTAssertEqual(change["record"] as? Int, 1)
        let expires = try XCTUnwrap(change["expires"] as? Int)
        XCTAssertEqual(Double(expires), Date().timeIntervalSince1970 + 7200, accuracy: 60)
        XCTAssertTrue((change["expires_at"] as? String)?.hasSuffix("Z") ?? false, "\(change)")
        XCTAssertTrue(change["previous"] is NSNull)

        r = try lookupd(["remove", "+8613800138000", "--json", "--config", config])
        o = object(r, keys: ["directory", "path", "written", "unchanged", "changes"])
        change = try XCTUnwrap((o["changes"] as? [[String: Any]])?.first)
        XCTAssertEqual(change["outcome"] as? String, "removed")
        let previous = try XCTUnwrap(change["previous"] as? [String: Any])
        XCTAssertEqual(previous["label"] as? String, "Fraud Risk")
        XCTAssertTrue(previous["record"] is NSNull, "it came from the directory file")

        r = try lookupd(["compact", "--json", "--config", config])
        XCTAssertEqual(r.status, 0, r.stderr)
        o = object(r, keys: ["directory", "path", "rewrote_directory", "merged", "through_record", "numbers", "prefix_rules", "changes",
                             "expiring", "rewrote_journal", "dropped_records", "expired_records"])
        XCTAssertEqual(o["merged"] as? Int, 1, "the removal; the expiring block stays in the journal")
        XCTAssertEqual(o["expiring"] as? Int, 1)

        r = try lookupd(["check", "--json", directory])
        o = object(r, keys: ["file", "ok", "problem", "format_version", "numbers", "prefix_rules", "labels", "checksum", "blocks", "block_size"])
        XCTAssertEqual(o["ok"] as? Bool, true)
        XCTAssertEqual(o["numbers"] as? Int, 1)

        let source = write("more.csv", "number,action,label\n+8613900000007,block,\nabc,block,\n")
        r = try lookupd(["compile", "--json", source, "-o", file("more.lkd")])
        XCTAssertEqual(r.status, 1)
        o = object(r, keys: ["output", "written", "error_count", "errors"])
        XCTAssertEqual(o["written"] as? Bool, false)
        XCTAssertEqual((o["errors"] as? [[String: Any]])?.first?["line"] as? Int, 3)
        r = try lookupd(["compile", "--json", "--skip-invalid", source, "-o", file("more.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        o = object(r, keys: ["output", "written", "numbers", "prefix_rules", "lines", "blocking", "identified", "labels", "seconds", "sort_runs",
                             "temporary_bytes", "shapes", "skipped_lines", "rows_without_number", "duplicates_merged", "extensions_dropped", "vanity_numbers",
                             "warning_count", "warnings", "journal_changes", "numbering_plan", "not_in_plan"])
        XCTAssertEqual(o["numbers"] as? Int, 1)
        XCTAssertEqual(o["warning_count"] as? Int, 1)
    }

    func testExpiresAndFromFile() throws {
        // An expiry in the past, or not a time at all, is a usage error.
        for when in ["yesterday", "2001-01-01T00:00:00Z", "0", "1h30"] {
            let r = try lookupd(["add", "+8613900000001", "--block", "--expires", when, "--config", config])
            XCTAssertEqual(r.status, 2, "\(when): \(r.stderr)")
        }
        var r = try lookupd(["add", "+8613900000001", "--block", "--expires", "2099-01-01T08:00:00+08:00", "--config", config])
        XCTAssertEqual(r.stdout, "added +8613900000001 to main (block until 2099-01-01T00:00:00Z): journal record 1\n")
        XCTAssertEqual(try screen(["+8613900000001"])["+8613900000001"], "blocked|null|+8613900000001|1")
        // Two seconds: in force now, gone once it ends.
        r = try lookupd(["add", "+8613900000002", "--block", "--expires", "2", "--config", config])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try screen(["+8613900000002"])["+8613900000002"]?.hasPrefix("blocked|"), true)
        sleep(3)
        XCTAssertEqual(try screen(["+8613900000002"])["+8613900000002"]?.hasPrefix("unknown|"), true)
        r = try lookupd(["inspect", directory])
        XCTAssertTrue(r.stdout.contains(", 1 expiring, 1 ended (lookupd compact drops it)"), r.stdout)

        // --from-file: every line checked, then one append; a bad line writes nothing.
        let before = read(journal)
        let bad = write("bad.txt", "+8613900000003\nnot a number\n+8613900000004\n")
        r = try lookupd(["add", "--from-file", bad, "--config", config])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("\(bad):2: invalid number 'not a number'"), r.stderr)
        XCTAssertEqual(read(journal), before, "nothing written")
        let good = write("good.txt", "+8613900000003\n013900000004\n+8613900000005\n")
        r = try lookupd(["add", "--from-file", good, "--expires", "1d", "--config", config])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "added or changed 3 numbers in main (journal records 3–5, one write)\n")
        XCTAssertEqual(read(journal).count, before.count + 3 * 48)
        let blocked = try screen(["+8613900000003", "+8613900000004", "+8613900000005"]).values.filter { $0.hasPrefix("blocked|") }
        XCTAssertEqual(blocked.count, 3)
        // Removing: all of them, or none when one is not there.
        let some = write("some.txt", "+8613900000003\n+8613900000099\n")
        r = try lookupd(["remove", "--from-file", some, "--config", config])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("+8613900000099 is not in main"), r.stderr)
        XCTAssertTrue(r.stderr.hasSuffix("; nothing removed\n"), r.stderr)
        r = try lookupd(["remove", "--from-file", "-", "--config", config], stdin: Data("+8613900000003\n+8613900000004\n".utf8))
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "removed 2 numbers in main (journal records 6–7, one write)\n")
    }


    func testAddRemoveAndQuery() throws {
        var r = try lookupd(["add", "13900000001", "--block", "--label", "Spam Caller", "--config", config])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "added +8613900000001 to main (block, label 'Spam Caller'): journal record 1\n")
        r = try lookupd(["add", "+8613900000001", "--block", "--label", "Spam Caller", "--config", config])
        XCTAssertEqual(r.stdout, "+8613900000001 is already in main (block, label 'Spam Caller', journal record 1); nothing written\n")
        r = try lookupd(["add", "+8618600000000", "--block", "--to", "main", "--config", config])
        XCTAssertEqual(r.stdout, "changed +8618600000000 in main from label 'China Unicom' to block: journal record 2\n")
        r = try lookupd(["remove", "013800138000", "--from", directory, "--config", config])
        XCTAssertEqual(r.stdout, "removed +8613800138000 from main (was block, label 'Fraud Risk', directory file): journal record 3\n")
        r = try lookupd(["add", "+8617055*", "--label", "Carrier", "--to", "main.lkd", "--config", config])
        XCTAssertEqual(r.stdout, "added +8617055* to main (label 'Carrier'): journal record 4\n")

        // Removing what is not there: an error, with a hint when a rule covers the number.
        r = try lookupd(["remove", "+8613800138000", "--config", config])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: +8613800138000 is not in main (\(directory)) or its journal\n")
        r = try lookupd(["remove", "+8617012345678", "--config", config])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("it is covered by the prefix rule +86170* (lookupd remove '+86170*' --from main removes the whole rule)"), r.stderr)

        // query: every answer says where it came from, journal records included.
        r = try lookupd(["query", "--config", config, "+8613900000001", "+8618600000000", "+8613800138000", "+8617055123456", "+8617012345678"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdoutLines, [
            "+8613900000001\t+8613900000001\tblocked\tSpam Caller\tmain\texact, journal record 1",
            "+8618600000000\t+8618600000000\tblocked\t-\tmain\texact, journal record 2",
            "+8613800138000\t+8613800138000\tunknown\t-\t-\t-",
            "+8617055123456\t+8617055123456\tidentified\tCarrier\tmain\tprefix +8617055*, journal record 4",
            "+8617012345678\t+8617012345678\tblocked\tVirtual Range\tmain\tprefix +86170*",
        ])
        let json = jsonLines(try lookupd(["query", "--json", "--config", config, "+8613900000001", "+8617012345678"]).stdout)
        XCTAssertEqual(field(json[0], "record"), "1")
        XCTAssertEqual(field(json[0], "match"), "+8613900000001")
        XCTAssertEqual(field(json[1], "record"), "null")

        // One step from a false positive to its removal: MATCH and SOURCE as query gave them.
        r = try lookupd(["remove", field(json[0], "match"), "--from", field(json[0], "source"), "--config", config])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try screen(["+8613900000001"])["+8613900000001"], "unknown|null|null|null")
    }

    func testUsageErrors() throws {
        for (args, message) in [
            (["add", "+8613900000001"], "say what to do: --block, --allow or --label TEXT"),
            (["add", "+8613900000001", "--label", "bad\u{1}label"], "--label: label contains the control character U+0001"),
            (["remove"], "give one NUMBER"),
            (["compact", "a", "b"], "give at most one DIRECTORY"),
        ] {
            let r = try lookupd(args + ["--config", config])
            XCTAssertEqual(r.status, 2, "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains(message), "\(args): \(r.stderr)")
        }
        let r = try lookupd(["add", "+8613900000001", "--block", "--to", "nowhere.lkd", "--config", config])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: nowhere.lkd: no such directory file or configured directory name (configured: main)\n")
        for command in ["add", "remove", "compact"] {
            let help = try lookupd([command, "--help"])
            XCTAssertTrue(help.stdout.hasPrefix("Usage: lookupd \(command)"), help.stdout)
        }
        // An invalid number is a failed command, as in compile, not a usage error.
        let bad = try lookupd(["add", "abc", "--block", "--config", config])
        XCTAssertEqual(bad.status, 1, bad.stderr)
        XCTAssertEqual(bad.stderr, "lookupd: error: invalid number 'abc': contains letters; nothing written\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: journal), "nothing written")
    }

    func testCompactMergesAndKeepsTheChanges() throws {
        _ = try lookupd(["add", "+8613900000001", "--block", "--config", config])
        _ = try lookupd(["remove", "+86170*", "--config", config])
        _ = try lookupd(["add", "+8618600000000", "--label", "Unicom (new)", "--config", config])
        let before = try screen(["+8613900000001", "+8617012345678", "+8618600000000", "+8613800138000"])
        let journalBefore = read(journal)
        var r = try lookupd(["compact", "--config", config])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "compacted \(directory): 3 numbers and prefix rules merged (through journal record 3); 3 numbers, 0 prefix rules; the journal keeps its 3 changes for the next rebuild\n")
        XCTAssertEqual(read(journal), journalBefore, "no superseded record: the journal is left as it was")
        let after = try screen(["+8613900000001", "+8617012345678", "+8618600000000", "+8613800138000"])
        XCTAssertEqual(after.mapValues { $0.split(separator: "|").dropLast().joined(separator: "|") },
                       before.mapValues { $0.split(separator: "|").dropLast().joined(separator: "|") })
        XCTAssertEqual(try lookupd(["check", directory]).status, 0)
        r = try lookupd(["inspect", directory])
        XCTAssertTrue(r.stdoutLines.contains { $0.hasPrefix("journal merged:     records through 3 of journal ") }, r.stdout)
        r = try lookupd(["add", "+8613900000002", "--block", "--config", config])
        XCTAssertEqual(r.stdout, "added +8613900000002 to main (block): journal record 4\n", "numbering continues")
        r = try lookupd(["compact", "main", "--config", config])
        XCTAssertTrue(r.stdout.hasPrefix("compacted \(directory): 1 number"), r.stdout)
        r = try lookupd(["compact", directory])
        XCTAssertEqual(r.stdout, "\(directory) already holds every lasting journal change (through record 4); the journal keeps its 4 changes for the next rebuild\n")
        // Changing a number again supersedes its record: compaction drops the old one.
        _ = try lookupd(["add", "+8613900000001", "--label", "Relabelled", "--config", config])
        r = try lookupd(["compact", directory])
        XCTAssertEqual(r.stdout, "compacted \(directory): 1 numbers and prefix rules merged (through journal record 5); 4 numbers, 0 prefix rules; the journal keeps its 4 changes for the next rebuild (1 superseded record dropped)\n")
    }

    // MARK: - Crash safety

    /// Streams of concurrent `lookupd add`, each killed with SIGKILL at a
    /// random moment or left to finish, with compactions (also killed at
    /// random) in between: every addition that reported success is there
    /// at the end, and the journal is readable throughout.
    func testKilledAddsNeverLoseAnAcknowledgedRecord() throws {
        try skipUnderSanitizer("crash consistency under SIGKILL, hundreds of launches")
        var rng = SystemRandomNumberGenerator()
        var acknowledged: [String] = []
        var attempted: [String] = []
        var killed = 0
        // LOOKUPD_CRASH_ROUNDS raises the count for a longer soak.
        let rounds = Int(ProcessInfo.processInfo.environment["LOOKUPD_CRASH_ROUNDS"] ?? "") ?? 24, perRound = 6
        for round in 0..<rounds {
            var running: [(number: String, process: Spawned, killAfter: Double?)] = []
            for k in 0..<perRound {
                let number = "+86139\(String(format: "%03d", round))\(String(format: "%05d", k))"
                attempted.append(number)
                let process = try Spawned(LookupdBinary.path!, ["add", number, "--block", "--label", "Round \(round)", "--config", config], folder: folder.path)
                let killAfter: Double? = Int.random(in: 0..<3, using: &rng) < 2 ? Double.random(in: 0...0.06, using: &rng) : nil
                running.append((number, process, killAfter))
            }
            var compaction: Spawned? = nil
            if round % 4 == 3 {
                compaction = try Spawned(LookupdBinary.path!, ["compact", "--config", config], folder: folder.path)
            }
            let started = monotonicSeconds()
            for entry in running.sorted(by: { ($0.killAfter ?? 9) < ($1.killAfter ?? 9) }) {
                guard let delay = entry.killAfter else { continue }
                let wait = started + delay - monotonicSeconds()
                if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
                entry.process.kill()
            }
            if let compaction, Bool.random(using: &rng) { usleep(UInt32.random(in: 0...30_000, using: &rng)); compaction.kill() }
            for entry in running {
                let result = entry.process.wait()
                if result.killed {
                    killed += 1
                } else {
                    XCTAssertEqual(result.status, 0, "\(entry.number): \(result.stderr)")
                    if result.status == 0 && result.stdout.hasPrefix("added \(entry.number)") { acknowledged.append(entry.number) }
                }
            }
            if let result = compaction?.wait(), !result.killed {
                XCTAssertEqual(result.status, 0, result.stderr)
            }
            // Readable after every round (a torn record is only a warning).
            let r = try lookupd(["query", "--config", config, "+8613800138000"])
            XCTAssertEqual(r.status, 0, "round \(round): \(r.stderr)")
        }
        let final = try screen(attempted)
        let killedButWritten = attempted.filter { !acknowledged.contains($0) && (final[$0] ?? "").hasPrefix("blocked|") }.count
        print("killed adds: \(killed) of \(attempted.count), of which \(killedButWritten) had written their record; \(acknowledged.count) acknowledged")
        XCTAssertGreaterThan(killed, 0, "some commands must have been killed")
        XCTAssertGreaterThan(acknowledged.count, 10, "some commands must have finished")
        var lost: [String] = []
        for number in acknowledged where !(final[number] ?? "").hasPrefix("blocked|Round ") { lost.append(number) }
        XCTAssertEqual(lost, [], "acknowledged additions missing: \(lost.map { "\($0): \(final[$0] ?? "no answer")" })")
        // And the journal takes new records after all that.
        let r = try lookupd(["add", "+8613999999999", "--block", "--config", config])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(try screen(["+8613999999999"])["+8613999999999"]!.hasPrefix("blocked|"))
        XCTAssertEqual(try lookupd(["compact", "--config", config]).status, 0)
        let compacted = try screen(attempted)
        for number in acknowledged { XCTAssertTrue(compacted[number]!.hasPrefix("blocked|Round "), number) }
        XCTAssertEqual(try lookupd(["check", directory]).status, 0)
    }

    /// Every cut of the last record: `query` reads the records before it and
    /// warns once, and the next `add` cuts the torn bytes off (under the
    /// journal lock) before appending, so its own record is read cleanly.
    func testTornLastRecordIsReadUpToTheLastGoodOneAndRepaired() throws {
        try skipUnderSanitizer("DirectoryTests.JournalTests reads a torn record at every length in-process")
        for (i, label) in ["One", "Two", "Three"].enumerated() {
            XCTAssertEqual(try lookupd(["add", "+861390000000\(i + 1)", "--label", label, "--config", config]).status, 0)
        }
        let good = read(journal)
        let recordLength = 48 + "Three".utf8.count
        let lastStart = good.count - recordLength
        for cut in [1, 4, 7, 8, 16, 24, 31, 32, 33, 39, 40, 41, recordLength - 1] {
            write("main.lkd.journal", good.prefix(lastStart + cut))
            var r = try lookupd(["query", "--config", config, "+8613900000001", "+8613900000002", "+8613900000003"])
            XCTAssertEqual(r.status, 0)
            XCTAssertEqual(r.stdoutLines.map { $0.split(separator: "\t")[2] }, ["identified", "identified", "unknown"], "cut \(cut)")
            XCTAssertEqual(r.stderr.components(separatedBy: "torn last record ignored").count - 1, 1, "reported once: \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("\(cut) byte\(cut == 1 ? "" : "s") at offset \(lastStart)"), r.stderr)

            r = try lookupd(["add", "+8613900000004", "--block", "--config", config])
            XCTAssertEqual(r.status, 0, r.stderr)
            XCTAssertEqual(r.stdout, "added +8613900000004 to main (block): journal record 3\n", "cut \(cut)")
            XCTAssertTrue(r.stderr.contains("cut off a torn record an interrupted command left: \(cut) byte"), r.stderr)

            r = try lookupd(["query", "--config", config, "+8613900000002", "+8613900000003", "+8613900000004"])
            XCTAssertEqual(r.stderr, "", "repaired")
            XCTAssertEqual(r.stdoutLines, [
                "+8613900000002\t+8613900000002\tidentified\tTwo\tmain\texact, journal record 2",
                "+8613900000003\t+8613900000003\tunknown\t-\t-\t-",
                "+8613900000004\t+8613900000004\tblocked\t-\tmain\texact, journal record 3",
            ])
        }
        // Damage beyond a torn record is refused, not repaired silently.
        var damaged = good
        damaged[40 + 20] ^= 0xFF
        write("main.lkd.journal", damaged)
        let r = try lookupd(["add", "+8613900000005", "--block", "--config", config])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("damaged journal: record checksum mismatch"), r.stderr)
        XCTAssertEqual(read(journal), damaged)
    }

    /// A compaction killed at each of its steps: before anything is written,
    /// right after the new directory file is renamed in, and after the
    /// journal is replaced. Each leaves a consistent directory: the same
    /// answers, a sound file, and a journal that takes the next record.
    func testCompactionKilledAtEachStep() throws {
        let probes = ["+8613900000001", "+8613900000002", "+8618600000000", "+8613800138000", "+8617012345678", "+8617055000000"]
        for phase in ["merged", "directory-written", "journal-rewritten"] {
            directory = try compileCSV("""
            number,action,label
            +8613800138000,block,Fraud Risk
            +8618600000000,identify,China Unicom
            +86170*,block,Virtual Range
            """, to: "main.lkd")
            try? FileManager.default.removeItem(atPath: journal)
            _ = try lookupd(["add", "+8613900000001", "--label", "Before", "--config", config])
            _ = try lookupd(["add", "+8613900000001", "--block", "--config", config])
            _ = try lookupd(["add", "+8617055*", "--label", "Carrier", "--config", config])
            _ = try lookupd(["remove", "+8613800138000", "--config", config])
            _ = try lookupd(["add", "+8618600000000", "--block", "--label", "Now Blocked", "--config", config])
            let expected = try screen(probes).mapValues { $0.split(separator: "|").prefix(3).joined(separator: "|") }
            let oldBase = read(directory), oldJournal = read(journal)

            let crash = try Spawned(LookupdBinary.path!, ["compact", "--config", config], folder: folder.path, environment: ["LOOKUPD_CRASH_AT": phase])
            let result = crash.wait()
            XCTAssertTrue(result.killed, "\(phase): the compaction should have been killed: \(result.stdout) \(result.stderr)")
            switch phase {
            case "merged":
                XCTAssertEqual(read(directory), oldBase, "nothing written yet")
                XCTAssertEqual(read(journal), oldJournal)
            case "directory-written":
                XCTAssertNotEqual(read(directory), oldBase, "the new file is in place")
                XCTAssertEqual(read(journal), oldJournal, "the journal still holds the merged records")
            default:
                XCTAssertEqual(read(journal).count, oldJournal.count - (48 + "Before".utf8.count), "the superseded record dropped")
            }
            XCTAssertEqual(try lookupd(["check", directory]).status, 0, phase)
            XCTAssertEqual(try screen(probes).mapValues { $0.split(separator: "|").prefix(3).joined(separator: "|") }, expected, phase)

            // Work goes on: a new record, numbered after the old ones, then a complete compaction.
            let r = try lookupd(["add", "+8613900000002", "--block", "--config", config])
            XCTAssertEqual(r.stdout, "added +8613900000002 to main (block): journal record 6\n", phase)
            XCTAssertEqual(try lookupd(["compact", "--config", config]).status, 0)
            var after = expected
            after["+8613900000002"] = "blocked|null|+8613900000002"
            XCTAssertEqual(try screen(probes).mapValues { $0.split(separator: "|").prefix(3).joined(separator: "|") }, after, phase)
        }
    }

    /// Compactions of a directory large enough to take a while, killed with
    /// SIGKILL at random moments: every time, the directory is sound and
    /// answers as before (whether the old or the new file is in force).
    func testCompactionKilledAtRandomMoments() throws {
        try skipUnderSanitizer("crash consistency under SIGKILL, hundreds of launches")
        var csv = "number,action,label\n"
        for i in 0..<150_000 { csv += "+86135\(String(format: "%08d", i * 3)),\(i % 5 == 0 ? "identify" : "block"),Label \(i % 97)\n" }
        directory = try compileCSV(csv, to: "main.lkd")
        var probes: [String] = []
        for i in 0..<12 {
            let number = "+86139\(String(format: "%08d", i))"
            probes.append(number)
            XCTAssertEqual(try lookupd(["add", number, "--block", "--label", "Journal \(i)", "--config", config]).status, 0)
        }
        XCTAssertEqual(try lookupd(["remove", "+8613500000003", "--config", config]).status, 0)
        XCTAssertEqual(try lookupd(["add", "+8613500000006", "--label", "Relabelled", "--config", config]).status, 0)
        probes += ["+8613500000000", "+8613500000003", "+8613500000006", "+8613500449997", "+8613599999999"]
        let expected = try screen(probes).mapValues { $0.split(separator: "|").prefix(3).joined(separator: "|") }
        let oldBase = read(directory), oldJournal = read(journal)

        let timing = monotonicSeconds()
        XCTAssertEqual(try lookupd(["compact", "--config", config]).status, 0)
        let duration = monotonicSeconds() - timing
        var rng = SystemRandomNumberGenerator()
        var outcomes: [String: Int] = [:]
        for attempt in 0..<(Int(ProcessInfo.processInfo.environment["LOOKUPD_CRASH_ROUNDS"] ?? "").map { max(10, $0 / 2) } ?? 10) {
            write("main.lkd", oldBase)
            write("main.lkd.journal", oldJournal)
            let compaction = try Spawned(LookupdBinary.path!, ["compact", "--config", config], folder: folder.path)
            usleep(UInt32(Double.random(in: 0...(duration * 1.1), using: &rng) * 1_000_000))
            compaction.kill()
            let result = compaction.wait()
            let state = read(directory) == oldBase ? "old file" : (read(journal).count == 40 ? "done" : "new file, old journal")
            outcomes[result.killed ? "killed, \(state)" : "finished, \(state)", default: 0] += 1
            XCTAssertEqual(try lookupd(["check", directory]).status, 0, "attempt \(attempt)")
            XCTAssertEqual(try screen(probes).mapValues { $0.split(separator: "|").prefix(3).joined(separator: "|") }, expected, "attempt \(attempt): \(state)")
        }
        print("compaction kills (\(String(format: "%.2f", duration)) s each): \(outcomes)")
    }
}

/// A `lookupd` process run in the background, to be killed or waited for.
final class Spawned {
    let child: ChildProcess

    init(_ executable: String, _ arguments: [String], folder: String, environment: [String: String] = [:]) throws {
        child = try ChildProcess(executable: executable, arguments: arguments, folder: folder, name: "spawned", environment: environment)
    }

    /// SIGKILL, by PID, if it is still running.
    func kill() { child.signal(SIGKILL) }

    /// Waits for it (two minutes at most: past that it is killed and the test fails).
    func wait(file: StaticString = #filePath, line: UInt = #line) -> (status: Int32, killed: Bool, stdout: String, stderr: String) {
        if !child.wait(timeout: 120) {
            XCTFail("\(child.name) did not finish within 120 s; killed", file: file, line: line)
            child.stop(grace: 1)
        }
        let result = (child.status, child.killedBySignal, child.stdout, child.stderr)
        try? FileManager.default.removeItem(atPath: child.stdoutPath)
        try? FileManager.default.removeItem(atPath: child.stderrPath)
        return result
    }
}

/// `lookupd search`: by the start of a number in any written form and by a word of a label,
/// over the directory with its journal changes, as text and JSON.
final class SearchCommandTests: CLITestCase {
    func testFindsByNumberPrefixAndLabelWithTheJournalInForce() throws {
        let main = try compileCSV("""
        number,action,label
        +8613800138000,block,Fraud Risk
        +8613800138001,identify,Fake BANK Hotline
        +8613900000000,block,
        +86170*,block,Virtual Operator Range

        """, to: "main.lkd")
        let other = try compileCSV("number,action,label\n+12025550143,identify,Bank of Somewhere\n", to: "other.lkd")
        let config = write("search.conf", "country = CN\ndirectory = main.lkd name=main\ndirectory = other.lkd name=other\n")
        XCTAssertEqual(try lookupd(["add", "+8613800138002", "--block", "--label", "Journal Bank", "--to", "main", "--config", config]).status, 0)
        XCTAssertEqual(try lookupd(["remove", "+8613800138000", "--from", "main", "--config", config]).status, 0)

        var r = try lookupd(["search", "+86 138", "--config", config])
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.stdoutLines, ["main\t+8613800138001\tidentify\tFake BANK Hotline", "main\t+8613800138002\tblock\tJournal Bank"],
                       "the removed number is gone, the added one is there")
        r = try lookupd(["search", "bank", "--config", config])
        XCTAssertEqual(r.stdoutLines, ["main\t+8613800138001\tidentify\tFake BANK Hotline", "main\t+8613800138002\tblock\tJournal Bank",
                                       "other\t+12025550143\tidentify\tBank of Somewhere"])
        r = try lookupd(["search", "86170", "--json", "--directory", main])
        let matches = jsonLines(r.stdout)
        XCTAssertEqual(matches.count, 1, r.stdout)
        XCTAssertEqual(matches.first?["number"] as? String, "+86170*")
        XCTAssertEqual(matches.first?["action"] as? String, "block")
        XCTAssertEqual(matches.first?["directory"] as? String, main)
        XCTAssertEqual(matches.first?["label"] as? String, "Virtual Operator Range")
        r = try lookupd(["search", "nothing like it", "--directory", other])
        XCTAssertEqual(r.status, 0)
        XCTAssertEqual(r.stdout, "")
        XCTAssertEqual(r.stderr, "lookupd: note: no entry matches 'nothing like it'\n")
        r = try lookupd(["search", "0202 555", "--directory", other])
        XCTAssertEqual(r.stdout, "", "a national form is not the start of an E.164 number")
        XCTAssertTrue(r.stderr.contains("by the start of their E.164 digits, country code first"), r.stderr)
        r = try lookupd(["search", "bank", "--limit", "1", "--config", config])
        XCTAssertEqual(r.stdoutLines.count, 2, r.stdout)
        r = try lookupd(["search", "x", "--directory", file("missing.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: \(file("missing.lkd")): cannot open: No such file or directory\n", "the path said once")
        XCTAssertEqual(try lookupd(["search"]).status, 2)
    }
}
