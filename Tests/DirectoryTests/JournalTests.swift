import Foundation
import XCTest
@testable import Directory
import Screening

/// The journal beside a directory file: its bytes, additions and removals,
/// torn records, damage, following, and compaction.
final class JournalTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder("lookupd-journal") }
    override func tearDown() { folder.cleanup() }

    func n(_ text: String) -> PhoneNumber {
        guard case .number(let number) = NumberNormalizer().normalize(text) else { fatalError("bad test number \(text)") }
        return number
    }

    func p(_ text: String) -> NumberPattern {
        guard case .success(let pattern) = NumberNormalizer().pattern(text) else { fatalError("bad test pattern \(text)") }
        return pattern
    }

    /// A directory file from CSV lines (without the header line).
    @discardableResult
    func directory(_ lines: [String], named name: String = "main.lkd") throws -> String {
        let compiler = DirectoryCompiler()
        compiler.add(bytes: Array(("number,action,label\n" + lines.joined(separator: "\n") + "\n").utf8), name: name, format: .csv)
        guard case .success(let content) = compiler.finish() else { throw TestError("does not compile") }
        let path = folder.file(name)
        try DirectoryWriter.write(content, to: path)
        return path
    }

    func journalPath(_ directory: String) -> String { JournalFormat.path(forDirectory: directory) }

    /// What the directory and its journal say about `pattern`, as text.
    func stored(_ pattern: String, in path: String) throws -> String {
        let base = try DirectoryFile(path: path)
        let state = try JournalFollower.read(path: journalPath(path))?.state ?? JournalState()
        guard let entry = try DirectoryUpdates.stored(p(pattern), base: base, state: state) else { return "-" }
        let label = entry.label.map { String(decoding: $0, as: UTF8.self) } ?? ""
        return (entry.blocked ? "block" : "identify") + (label.isEmpty ? "" : " " + label) + (entry.record.map { " #\($0)" } ?? "")
    }

    // MARK: - Bytes

    func testRecordLayout() throws {
        let path = try directory(["+8613800138000,block,Fraud", "+86170*,block,Range"])
        let now = UInt64(time(nil))
        let ends = Int64(now) + 86400
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: Array("Spam".utf8), expires: ends, directory: path)
        _ = try DirectoryUpdates.remove(p("+86170*"), directory: path)
        let bytes = Array(FileManager.default.contents(atPath: journalPath(path))!)
        XCTAssertEqual(bytes.count, 40 + (48 + 4) + 48)
        func u32(_ o: Int) -> UInt32 { bytes[o..<(o + 4)].reversed().reduce(0) { $0 << 8 | UInt32($1) } }
        func u64(_ o: Int) -> UInt64 { bytes[o..<(o + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) } }
        // Header.
        XCTAssertEqual(Array(bytes[0..<8]), [0x89, 0x4C, 0x4B, 0x4A, 0x0D, 0x0A, 0x1A, 0x0A])
        XCTAssertEqual(u32(8), 3)
        XCTAssertEqual(u32(12), 40)
        let id = u64(16)
        XCTAssertNotEqual(id, 0)
        XCTAssertEqual(u64(24), 0, "base sequence of a new journal")
        XCTAssertEqual(u64(32), XXH64.hash(Array(bytes[0..<32])))
        // Record 1: add, block, label "Spam", ending in a day.
        XCTAssertEqual(u32(40), 52)
        XCTAssertEqual(bytes[44], 1)
        XCTAssertEqual(bytes[45], 1, "blocks; not continued")
        XCTAssertEqual(UInt16(bytes[46]) | UInt16(bytes[47]) << 8, 4)
        XCTAssertEqual(u64(48), 1)
        XCTAssertEqual(u64(56), 8613900000001)
        XCTAssertLessThanOrEqual(u64(64), now + 1, "the time of the change")
        XCTAssertGreaterThan(u64(64), now - 60)
        XCTAssertEqual(u64(72), UInt64(ends), "the moment it ends")
        XCTAssertEqual(Array(bytes[80..<84]), Array("Spam".utf8))
        XCTAssertEqual(u64(84), XXH64.hash(Array(bytes[40..<84]), seed: id))
        // Record 2: remove the prefix rule +86170* (5 digits); never expires.
        XCTAssertEqual(u32(92), 48)
        XCTAssertEqual(bytes[96], 2)
        XCTAssertEqual(bytes[97], 0)
        XCTAssertEqual(u64(100), 2)
        XCTAssertEqual(u64(108), 5 << 56 | 86170)
        XCTAssertEqual(u64(124), 0)
        XCTAssertEqual(u64(132), XXH64.hash(Array(bytes[92..<132]), seed: id))
    }

    func testHeaderCarriesTheMergedJournal() throws {
        var content = DirectoryContent()
        content.exactKeys = [8613800138000]
        content.exactValues = [1]
        content.journalID = 0x1122_3344_5566_7788
        content.journalSequence = 42
        let path = folder.file("merged.lkd")
        try DirectoryWriter.write(content, to: path)
        let bytes = Array(FileManager.default.contents(atPath: path)!)
        XCTAssertEqual(Array(bytes[136..<144]), [0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11])
        XCTAssertEqual(Array(bytes[144..<152]), [42, 0, 0, 0, 0, 0, 0, 0])
        XCTAssertEqual(Array(bytes[152..<168]), [UInt8](repeating: 0, count: 16), "the numbering plan's bytes")
        XCTAssertEqual(Array(bytes[216..<248]), [UInt8](repeating: 0, count: 32), "the rest stays reserved")
        let file = try DirectoryFile(path: path)
        XCTAssertEqual(file.header.journalID, 0x1122_3344_5566_7788)
        XCTAssertEqual(file.header.journalSequence, 42)
        try file.verify()
        XCTAssertEqual(try DirectoryFile.readHeader(path: path), file.header)
    }

    // MARK: - Adding and removing

    func testAddChangeRemove() throws {
        let path = try directory(["+8613800138000,block,Fraud", "+8618600000000,identify,Unicom", "+86170*,block,Range"])
        var change = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, directory: path)
        XCTAssertEqual(change.record?.sequence, 1)
        XCTAssertNil(change.previous)
        XCTAssertEqual(try stored("+8613900000001", in: path), "block #1")

        // The same again: nothing written.
        change = try DirectoryUpdates.add(p("013900000001"), blocked: true, label: nil, directory: path)
        XCTAssertNil(change.record)
        XCTAssertEqual(change.previous?.record, 1)
        // The file's own entry, identical: written all the same, so that
        // it outlives a rebuild of the file without it.
        change = try DirectoryUpdates.add(p("+8618600000000"), blocked: false, label: Array("Unicom".utf8), directory: path)
        XCTAssertEqual(change.record?.sequence, 2)
        XCTAssertEqual(change.previous, DirectoryUpdates.StoredEntry(blocked: false, label: Array("Unicom".utf8), record: nil))

        // Changing the file's entry.
        change = try DirectoryUpdates.add(p("+8618600000000"), blocked: true, label: Array("Unicom?".utf8), directory: path)
        XCTAssertEqual(change.record?.sequence, 3)
        XCTAssertEqual(try stored("+8618600000000", in: path), "block Unicom? #3")

        // Removing a file entry, a journal entry, a prefix rule.
        XCTAssertEqual(try DirectoryUpdates.remove(p("+8613800138000"), directory: path).record?.sequence, 4)
        XCTAssertEqual(try DirectoryUpdates.remove(p("+8613900000001"), directory: path).record?.sequence, 5)
        XCTAssertEqual(try DirectoryUpdates.remove(p("+86170*"), directory: path).record?.sequence, 6)
        for gone in ["+8613800138000", "+8613900000001", "+86170*"] { XCTAssertEqual(try stored(gone, in: path), "-", gone) }

        // Removing what is not there (any more): unexpectedIncrementalRemoval.
        for absent in ["+8613800138000", "+8613000000000", "+86171*", "+8617012345678"] {
            XCTAssertThrowsError(try DirectoryUpdates.remove(p(absent), directory: path), absent) { error in
                XCTAssertEqual(error as? JournalError, .notPresent(directory: path, pattern: p(absent)))
            }
        }
        // Adding it back after a removal.
        XCTAssertEqual(try DirectoryUpdates.add(p("+8613800138000"), blocked: false, label: Array("Cleared".utf8), directory: path).record?.sequence, 7)
        XCTAssertEqual(try stored("+8613800138000", in: path), "identify Cleared #7")

        let journal = try XCTUnwrap(try JournalFollower.read(path: journalPath(path)))
        XCTAssertNil(journal.tail)
        XCTAssertEqual(journal.state.lastSequence, 7)
        XCTAssertEqual(journal.state.recordCount, 7)
        XCTAssertEqual(journal.state.latest.count, 4)
    }

    func testRefusesBadLabelsAndMissingDirectories() throws {
        let path = try directory(["+8613800138000,block,"])
        XCTAssertThrowsError(try DirectoryUpdates.add(p("+8613900000001"), blocked: false, label: Array("bad\nlabel".utf8), directory: path))
        XCTAssertThrowsError(try DirectoryUpdates.add(p("+8613900000001"), blocked: false, label: nil, directory: path))
        XCTAssertThrowsError(try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, directory: folder.file("none.lkd"))) { error in
            guard case .directory(.system(_, "open", ENOENT))? = error as? JournalError else { return XCTFail("\(error)") }
        }
    }

    // MARK: - Expiring additions and batches

    /// What holds at `now`, as `stored` says it.
    func stored(_ pattern: String, in path: String, at now: Int64) throws -> String {
        let base = try DirectoryFile(path: path)
        let state = try JournalFollower.read(path: journalPath(path))?.state ?? JournalState()
        guard let entry = try DirectoryUpdates.stored(p(pattern), base: base, state: state, at: now) else { return "-" }
        let label = entry.label.map { String(decoding: $0, as: UTF8.self) } ?? ""
        return (entry.blocked ? "block" : "identify") + (label.isEmpty ? "" : " " + label)
    }

    /// A controlled clock: every moment is given, none read.
    func testExpiringAdditionEndsAndWhatWasBeneathHoldsAgain() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        let t: Int64 = 1_800_000_000
        // Over nothing, over a lasting journal change, over the file's own entry.
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, expires: t + 10, directory: path, now: t)
        _ = try DirectoryUpdates.add(p("+8613900000002"), blocked: false, label: Array("Courier".utf8), directory: path, now: t)
        _ = try DirectoryUpdates.add(p("+8613900000002"), blocked: true, label: nil, expires: t + 20, directory: path, now: t)
        _ = try DirectoryUpdates.add(p("+8613800138000"), blocked: false, label: Array("Maybe".utf8), expires: t + 30, directory: path, now: t)
        XCTAssertEqual(try stored("+8613900000001", in: path, at: t + 9), "block")
        XCTAssertEqual(try stored("+8613900000001", in: path, at: t + 10), "-", "the expiry is the first second it is not in force")
        XCTAssertEqual(try stored("+8613900000002", in: path, at: t + 19), "block")
        XCTAssertEqual(try stored("+8613900000002", in: path, at: t + 20), "identify Courier", "the lasting change beneath holds again")
        XCTAssertEqual(try stored("+8613800138000", in: path, at: t + 29), "identify Maybe")
        XCTAssertEqual(try stored("+8613800138000", in: path, at: t + 30), "block Fraud", "the file's entry holds again")

        // The overlay readers build says when it must be built anew.
        let base = try DirectoryFile(path: path)
        let state = try XCTUnwrap(try JournalFollower.read(path: journalPath(path))).state
        var overlay = DirectoryOverlay(journal: state, base: base.header, now: t)
        XCTAssertEqual(overlay.nextExpiry, t + 10)
        XCTAssertFalse(overlay.hasExpired(at: t + 9))
        XCTAssertTrue(overlay.hasExpired(at: t + 10))
        overlay = DirectoryOverlay(journal: state, base: base.header, now: t + 25)
        XCTAssertEqual(overlay.nextExpiry, t + 30)
        XCTAssertEqual(overlay.count, 2, "+8613900000002 (Courier, lasting) and +8613800138000 (Maybe, until t + 30)")
        overlay = DirectoryOverlay(journal: state, base: base.header, now: t + 30)
        XCTAssertNil(overlay.nextExpiry)
        XCTAssertEqual(overlay.count, 1)

        // A removal never expires; an expiry must lie ahead.
        XCTAssertThrowsError(try DirectoryUpdates.apply([.add(p("+8613900000003"), blocked: true, label: nil, expires: t)], directory: path, now: t))
        XCTAssertThrowsError(try DirectoryUpdates.apply([DirectoryUpdates.Request(pattern: p("+8613900000001"), addition: nil, expires: t + 5)],
                                                        directory: path, now: t))
    }

    func testCompactionKeepsExpiringRecordsOutOfTheFileAndDropsEndedOnes() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        let t: Int64 = 1_800_000_000
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, expires: t + 10, directory: path, now: t)
        _ = try DirectoryUpdates.add(p("+8613900000002"), blocked: true, label: Array("Spam".utf8), directory: path, now: t)
        _ = try DirectoryUpdates.add(p("+8613900000003"), blocked: true, label: nil, expires: t + 100, directory: path, now: t)
        var summary = try DirectoryUpdates.compact(directory: path, now: t + 5)
        XCTAssertEqual(summary.mergedEntries, 1, "only the lasting change goes into the file")
        XCTAssertEqual(summary.expiring, 2)
        XCTAssertEqual(summary.expiredRecords, 0)
        XCTAssertNil(try DirectoryFile(path: path).storedEntry(p("+8613900000001")), "never merged into the file")
        XCTAssertEqual(try stored("+8613900000001", in: path, at: t + 5), "block")
        XCTAssertEqual(try stored("+8613900000001", in: path, at: t + 10), "-", "it still ends after the compaction")

        summary = try DirectoryUpdates.compact(directory: path, now: t + 50)
        XCTAssertEqual(summary.expiredRecords, 1, "+8613900000001 has ended")
        XCTAssertEqual(summary.expiring, 1)
        let state = try XCTUnwrap(try JournalFollower.read(path: journalPath(path))).state
        XCTAssertNil(state.latest[JournalRecord.key(p("+8613900000001"))], "the ended record is gone")
        XCTAssertEqual(try stored("+8613900000003", in: path, at: t + 50), "block")
        XCTAssertEqual(try stored("+8613900000002", in: path, at: t + 50), "block Spam")
        // The newest record stays even once ended: numbering goes on from it.
        summary = try DirectoryUpdates.compact(directory: path, now: t + 200)
        let after = try XCTUnwrap(try JournalFollower.read(path: journalPath(path))).state
        XCTAssertEqual(after.lastSequence, 3)
        XCTAssertEqual(try stored("+8613900000003", in: path, at: t + 200), "-")
        let next = try DirectoryUpdates.add(p("+8613900000004"), blocked: true, label: nil, directory: path, now: t + 200)
        XCTAssertEqual(next.record?.sequence, 4)
    }

    func testAVersion2JournalIsReadAndRewrittenAsVersion3() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        // A version-2 journal as lookupd wrote it before expiring entries: header, then one 40 + 4 byte record.
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: Array("Spam".utf8), directory: path)
        let v3 = Array(FileManager.default.contents(atPath: journalPath(path))!)
        func load64(_ b: [UInt8], _ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(b[at + $1]) << UInt64(8 * $1) } }
        func put64(_ b: inout [UInt8], _ v: UInt64, _ at: Int) { for i in 0..<8 { b[at + i] = UInt8(truncatingIfNeeded: v >> UInt64(8 * i)) } }
        var v2 = Array(v3[0..<40])
        v2[8] = 2
        put64(&v2, XXH64.hash(Array(v2[0..<32])), 32)
        let id = load64(v3, 16)
        var record = Array(v3[40..<72]) + Array("Spam".utf8) + [UInt8](repeating: 0, count: 8)
        record[0] = 44
        put64(&record, XXH64.hash(Array(record[0..<36]), seed: id), 36)
        v2 += record
        XCTAssertTrue(FileManager.default.createFile(atPath: journalPath(path), contents: Data(v2)))
        let read = try XCTUnwrap(try JournalFollower.read(path: journalPath(path)))
        XCTAssertEqual(read.state.version, 2)
        XCTAssertNil(read.tail)
        XCTAssertEqual(try stored("+8613900000001", in: path), "block Spam #1")
        _ = try DirectoryUpdates.add(p("+8613900000002"), blocked: true, label: nil, expires: Int64(time(nil)) + 3600, directory: path)
        let upgraded = Array(FileManager.default.contents(atPath: journalPath(path))!)
        XCTAssertEqual(upgraded[8], 3, "rewritten as version 3 before the append")
        XCTAssertEqual(load64(upgraded, 16), id, "same journal id")
        XCTAssertEqual(try stored("+8613900000001", in: path), "block Spam #1")
        XCTAssertEqual(try stored("+8613900000002", in: path), "block #2")
    }

    /// A batch is in force whole or not at all: cut anywhere before its
    /// last byte, none of it applies, and the next writer cuts it off.
    func testBatchCutShortAppliesNothing() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, directory: path)
        let before = Array(FileManager.default.contents(atPath: journalPath(path))!)
        let changes = try DirectoryUpdates.apply([
            .add(p("+8613900000002"), blocked: true, label: nil),
            .add(p("+8613900000003"), blocked: false, label: Array("Courier".utf8)),
            .remove(p("+8613800138000")),
        ], directory: path)
        XCTAssertEqual(changes.compactMap(\.record?.sequence), [2, 3, 4])
        let whole = Array(FileManager.default.contents(atPath: journalPath(path))!)
        XCTAssertEqual(whole.count, before.count + 48 + (48 + 7) + 48, "one append")
        XCTAssertEqual(try stored("+8613800138000", in: path), "-")
        for cut in stride(from: before.count + 1, to: whole.count, by: 7) {
            XCTAssertTrue(FileManager.default.createFile(atPath: journalPath(path), contents: Data(whole[0..<cut])))
            let read = try XCTUnwrap(try JournalFollower.read(path: journalPath(path)))
            XCTAssertEqual(read.state.lastSequence, 1, "cut at \(cut)")
            XCTAssertEqual(read.tail?.offset, before.count, "cut at \(cut)")
            XCTAssertEqual(read.tail?.isTorn, true, "cut at \(cut)")
            XCTAssertEqual(try stored("+8613900000002", in: path), "-", "cut at \(cut)")
            XCTAssertEqual(try stored("+8613800138000", in: path), "block Fraud", "cut at \(cut)")
        }
        let change = try DirectoryUpdates.add(p("+8613900000009"), blocked: true, label: nil, directory: path)
        XCTAssertEqual(change.record?.sequence, 2, "the cut batch never existed")
        XCTAssertEqual(change.discardedTail?.offset, before.count)
        // A refused change refuses the whole batch, and nothing is written.
        let now = Array(FileManager.default.contents(atPath: journalPath(path))!)
        XCTAssertThrowsError(try DirectoryUpdates.apply([.add(p("+8613900000005"), blocked: true, label: nil), .remove(p("+8613900000006"))],
                                                        directory: path)) { error in
            XCTAssertEqual((error as? DirectoryUpdates.Refusal)?.index, 1)
        }
        XCTAssertEqual(Array(FileManager.default.contents(atPath: journalPath(path))!), now)
    }

    // MARK: - Torn and damaged journals

    /// Every way the last append can be cut short: the reader keeps every
    /// record before it, reports the tail once, and the next append cuts
    /// it off under the lock and is read normally.
    func testTornLastRecordAtEveryLength() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        for i in 1...3 {
            _ = try DirectoryUpdates.add(p("+861390000000\(i)"), blocked: true, label: Array("Spam \(i)".utf8), directory: path)
        }
        let good = Array(FileManager.default.contents(atPath: journalPath(path))!)
        let lastStart = good.count - (48 + "Spam 3".utf8.count)
        for cut in (lastStart + 1)..<good.count {
            XCTAssertTrue(FileManager.default.createFile(atPath: journalPath(path), contents: Data(good[0..<cut])))
            let follower = JournalFollower(path: journalPath(path))
            let first = try follower.poll()
            XCTAssertEqual(follower.state.lastSequence, 2, "cut at \(cut)")
            XCTAssertEqual(first.newTail, JournalTail(offset: lastStart, length: cut - lastStart, reason: first.newTail?.reason ?? "", isTorn: true))
            XCTAssertEqual(try follower.poll().newTail, nil, "reported once")
            XCTAssertEqual(try stored("+8613900000003", in: path), "-")

            let change = try DirectoryUpdates.add(p("+8613900000009"), blocked: true, label: nil, directory: path)
            XCTAssertEqual(change.record?.sequence, 3, "the torn record's number is reused: it never existed")
            XCTAssertEqual(change.discardedTail?.offset, lastStart)
            let update = try follower.poll()
            XCTAssertTrue(update.changed)
            XCTAssertFalse(update.reset)
            XCTAssertNil(follower.tail)
            XCTAssertEqual(follower.state.lastSequence, 3)
            XCTAssertEqual(try stored("+8613900000009", in: path), "block #3")
            XCTAssertEqual(try stored("+8613900000002", in: path), "block Spam 2 #2")
        }
    }

    func testFlippedByteInTheLastRecordIsATornRecord() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, directory: path)
        _ = try DirectoryUpdates.add(p("+8613900000002"), blocked: true, label: nil, directory: path)
        var bytes = Array(FileManager.default.contents(atPath: journalPath(path))!)
        bytes[bytes.count - 12] ^= 0x01
        XCTAssertTrue(FileManager.default.createFile(atPath: journalPath(path), contents: Data(bytes)))
        let read = try XCTUnwrap(try JournalFollower.read(path: journalPath(path)))
        XCTAssertEqual(read.state.lastSequence, 1)
        XCTAssertEqual(read.tail?.reason, "record checksum mismatch")
    }

    func testDamageBeyondOneRecordIsNotRepairedSilently() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        for i in 1...4 { _ = try DirectoryUpdates.add(p("+861390000000\(i)"), blocked: true, label: nil, directory: path) }
        var bytes = Array(FileManager.default.contents(atPath: journalPath(path))!)
        bytes[40 + 20] ^= 0xFF  // inside record 1: records 2...4 follow it
        XCTAssertTrue(FileManager.default.createFile(atPath: journalPath(path), contents: Data(bytes)))
        XCTAssertThrowsError(try JournalFollower.read(path: journalPath(path))) { error in
            guard case .damaged(_, 40, 192, _)? = error as? JournalError else { return XCTFail("\(error)") }
        }
        XCTAssertThrowsError(try DirectoryUpdates.add(p("+8613900000009"), blocked: true, label: nil, directory: path))
        XCTAssertEqual(Array(FileManager.default.contents(atPath: journalPath(path))!), bytes, "left as it was for the operator")
    }

    func testNotAJournal() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        folder.write("main.lkd.journal", "number,action\n+8613900000001,block\n")
        XCTAssertThrowsError(try JournalFollower.read(path: journalPath(path))) { error in
            XCTAssertEqual(error as? JournalError, .notAJournal(path: journalPath(path)))
        }
        XCTAssertThrowsError(try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, directory: path))
    }

    func testShortFileIsStartedAfresh() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        // A crash while the header of a new journal was being written.
        folder.write("main.lkd.journal", Array(JournalFormat.magic.prefix(5)))
        // Readers see a journal being created as no journal, not as an error.
        XCTAssertNil(try JournalFollower.read(path: journalPath(path)))
        folder.write("main.lkd.journal", [])
        XCTAssertNil(try JournalFollower.read(path: journalPath(path)))
        folder.write("main.lkd.journal", Array("garbage".utf8))
        XCTAssertThrowsError(try JournalFollower.read(path: journalPath(path)))
        folder.write("main.lkd.journal", Array(JournalFormat.magic.prefix(5)))
        XCTAssertEqual(try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, directory: path).record?.sequence, 1)
        XCTAssertEqual(try stored("+8613900000001", in: path), "block #1")
    }

    // MARK: - Following

    func testFollowerReadsOnlyWhatWasAdded() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        let follower = JournalFollower(path: journalPath(path))
        XCTAssertFalse(try follower.poll().changed, "no journal yet")
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, directory: path)
        var update = try follower.poll()
        XCTAssertTrue(update.changed && update.reset)
        XCTAssertFalse(try follower.poll().changed)
        _ = try DirectoryUpdates.add(p("+8613900000002"), blocked: true, label: nil, directory: path)
        _ = try DirectoryUpdates.remove(p("+8613900000001"), directory: path)
        update = try follower.poll()
        XCTAssertTrue(update.changed)
        XCTAssertFalse(update.reset, "read on, not from the start")
        XCTAssertEqual(follower.state.lastSequence, 3)
        XCTAssertEqual(follower.state.latest[8613900000001]?.operation, .remove)

        // Compaction rewrites the journal without the superseded record 1:
        // read from the start, same journal id, records 2 and 3 kept.
        let id = follower.state.journalID
        let summary = try DirectoryUpdates.compact(directory: path)
        XCTAssertEqual(summary.throughSequence, 3)
        XCTAssertEqual(summary.droppedRecords, 1)
        update = try follower.poll()
        XCTAssertTrue(update.reset)
        XCTAssertEqual(follower.state.journalID, id)
        XCTAssertEqual(follower.state.recordCount, 2)
        XCTAssertEqual(follower.state.baseSequence, 0)
        XCTAssertEqual(follower.state.latest.values.map(\.sequence).sorted(), [2, 3])
        _ = try DirectoryUpdates.add(p("+8613900000003"), blocked: true, label: nil, directory: path)
        update = try follower.poll()
        XCTAssertEqual(follower.state.lastSequence, 4, "numbering goes on after a compaction")

        // Removed journal: nothing on top any more.
        try FileManager.default.removeItem(atPath: journalPath(path))
        update = try follower.poll()
        XCTAssertTrue(update.changed && update.reset)
        XCTAssertEqual(follower.state.journalID, 0)
    }

    // MARK: - Compaction

    func testCompactionMergesAndRecordsWhatItMerged() throws {
        let path = try directory(["+8613800138000,block,Fraud", "+8618600000000,identify,Unicom", "+86170*,block,Range",
                                  "+8613500000000,identify,Courier"])
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: Array("Spam".utf8), directory: path)
        _ = try DirectoryUpdates.add(p("+8618600000000"), blocked: true, label: nil, directory: path)
        _ = try DirectoryUpdates.remove(p("+8613800138000"), directory: path)
        _ = try DirectoryUpdates.remove(p("+86170*"), directory: path)
        _ = try DirectoryUpdates.add(p("+8617055*"), blocked: false, label: Array("Carrier".utf8), directory: path)
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: Array("Spam".utf8), directory: path)  // no-op
        let before = try ["+8613900000001", "+8618600000000", "+8613800138000", "+86170*", "+8617055*", "+8613500000000"]
            .map { try stored($0, in: path).split(separator: "#")[0].trimmingCharacters(in: .whitespaces) }

        let summary = try DirectoryUpdates.compact(directory: path)
        XCTAssertTrue(summary.rewroteDirectory)
        XCTAssertEqual(summary.mergedEntries, 5)
        XCTAssertEqual(summary.changes, 5)
        XCTAssertEqual(summary.droppedRecords, 0)
        XCTAssertFalse(summary.rewroteJournal, "no superseded record to drop")
        XCTAssertEqual(summary.throughSequence, 5)
        XCTAssertEqual(summary.exactEntries, 3)
        XCTAssertEqual(summary.prefixRules, 1)

        let file = try DirectoryFile(path: path)
        try file.verify()
        XCTAssertEqual(file.header.journalSequence, 5)
        XCTAssertNotEqual(file.header.journalID, 0)
        let after = try ["+8613900000001", "+8618600000000", "+8613800138000", "+86170*", "+8617055*", "+8613500000000"]
            .map { try stored($0, in: path) }
        XCTAssertEqual(after, before)
        XCTAssertEqual((0..<Int(file.labelTableCount)).map { file.label(UInt32($0)) }, ["Carrier", "Courier", "Spam"], "only labels in use, in order")
        let journal = try XCTUnwrap(try JournalFollower.read(path: journalPath(path)))
        XCTAssertEqual(journal.state.journalID, file.header.journalID)
        XCTAssertEqual(journal.state.baseSequence, 0)
        XCTAssertEqual(journal.state.recordCount, 5, "the journal keeps every change for the next rebuild")
        XCTAssertTrue(journal.state.pending(over: file.header, at: 0).isEmpty)

        // Nothing more to do, and the directory file is not rewritten.
        let again = try DirectoryUpdates.compact(directory: path)
        XCTAssertFalse(again.rewroteDirectory)
        XCTAssertFalse(again.rewroteJournal)
        XCTAssertEqual(again.changes, 5)
    }

    /// The crash between renaming the new directory file in and emptying the
    /// journal: readers skip what the file already holds, and the next
    /// compaction only empties the journal.
    func testCrashAfterTheNewFileIsInPlace() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, directory: path)
        _ = try DirectoryUpdates.remove(p("+8613800138000"), directory: path)
        let journalBefore = FileManager.default.contents(atPath: journalPath(path))!
        _ = try DirectoryUpdates.compact(directory: path)
        // Put the old journal back: the state right after the rename.
        XCTAssertTrue(FileManager.default.createFile(atPath: journalPath(path), contents: journalBefore))
        let base = try DirectoryFile(path: path)
        let state = try XCTUnwrap(try JournalFollower.read(path: journalPath(path))).state
        XCTAssertEqual(state.mergedThrough(base.header), 2)
        XCTAssertTrue(state.pending(over: base.header, at: 0).isEmpty, "nothing is applied twice")
        XCTAssertEqual(try stored("+8613900000001", in: path), "block")
        XCTAssertEqual(try stored("+8613800138000", in: path), "-")
        // An add in this state continues the numbering, and is applied.
        XCTAssertEqual(try DirectoryUpdates.add(p("+8613900000002"), blocked: true, label: nil, directory: path).record?.sequence, 3)
        XCTAssertEqual(try stored("+8613900000002", in: path), "block #3")
        let summary = try DirectoryUpdates.compact(directory: path)
        XCTAssertEqual(summary.throughSequence, 3)
        XCTAssertEqual(try stored("+8613900000002", in: path), "block")
    }

    /// A directory recompiled from its sources carries no journal id: the
    /// whole journal applies to it again.
    func testRecompiledDirectoryTakesTheWholeJournal() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, directory: path)
        try directory(["+8613800138000,block,Fraud", "+8613000000000,block,"])
        XCTAssertEqual(try stored("+8613900000001", in: path), "block #1")
        XCTAssertEqual(try stored("+8613000000000", in: path), "block")
    }

    /// Random changes: after compaction the file says exactly what file and
    /// journal said together, for every key ever touched.
    func testCompactionAgreesWithTheJournalOnRandomChanges() throws {
        var rng = SeededRandom(seed: 0x6A6F_7572)
        for round in 0..<6 {
            var lines: [String] = []
            for i in 0..<40 { lines.append("+86138000\(String(format: "%05d", i * 7)),\(i % 3 == 0 ? "identify" : "block"),L\(i % 5)") }
            lines.append("+86170*,block,Range")
            lines.append("+861380000*,identify,Wide")
            let path = try directory(lines, named: "r\(round).lkd")
            var keys = Set<String>()
            for _ in 0..<60 {
                let number = Bool.random(using: &rng)
                    ? "+86138000\(String(format: "%05d", Int.random(in: 0..<300, using: &rng)))"
                    : ["+86170*", "+861380000*", "+8617055*", "+86138*"].randomElement(using: &rng)!
                keys.insert(number)
                if Int.random(in: 0..<3, using: &rng) == 0 {
                    _ = try? DirectoryUpdates.remove(p(number), directory: path)
                } else {
                    let label: [UInt8]? = Bool.random(using: &rng) ? Array("J\(Int.random(in: 0..<4, using: &rng))".utf8) : nil
                    _ = try DirectoryUpdates.add(p(number), blocked: label == nil || Bool.random(using: &rng), label: label, directory: path)
                }
                if Int.random(in: 0..<25, using: &rng) == 0 { _ = try DirectoryUpdates.compact(directory: path) }
            }
            let expected = try keys.sorted().map { try stored($0, in: path).split(separator: "#")[0].trimmingCharacters(in: .whitespaces) }
            _ = try DirectoryUpdates.compact(directory: path)
            let file = try DirectoryFile(path: path)
            try file.verify()
            XCTAssertEqual(try keys.sorted().map { try stored($0, in: path) }, expected, "round \(round)")
        }
    }

    /// Appends from many threads (each its own lock holder, as separate
    /// processes are) never interleave or lose a record.
    func testConcurrentAppendsAreSerialized() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        let failures = FailureCount()
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for i in 0..<25 {
                do {
                    let number = PhoneNumber(value: UInt64("86139\(t)00000\(String(format: "%02d", i))")!)!
                    _ = try DirectoryUpdates.add(.exact(number), blocked: true, label: nil, directory: path)
                    if i == 12 && t == 3 { _ = try DirectoryUpdates.compact(directory: path) }
                } catch {
                    failures.add()
                }
            }
        }
        XCTAssertEqual(failures.value, 0)
        for t in 0..<8 {
            for i in 0..<25 {
                XCTAssertTrue(try stored("+86139\(t)00000\(String(format: "%02d", i))", in: path).hasPrefix("block"), "\(t) \(i)")
            }
        }
        let journal = try XCTUnwrap(try JournalFollower.read(path: journalPath(path)))
        XCTAssertNil(journal.tail)
        XCTAssertEqual(journal.state.lastSequence, 200)
    }
}

final class FailureCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
