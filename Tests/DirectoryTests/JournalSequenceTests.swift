import Foundation
import XCTest
@testable import Directory

/// Journals whose records are well formed but do not belong where they stand (issue 23):
/// a record of an earlier sequence appended again, one that skips ahead, and a new journal
/// begun after the old one was moved aside.
extension JournalTests {
    var journalBytes: [UInt8] { folder.read("main.lkd.journal") }

    /// A record of sequence 1 appended again after the removal of sequence 2 (a stale
    /// backup's tail, an append replayed): the reader stops at it, so the number stays
    /// removed, and the next append gets sequence 3, not a number already used.
    func testAnOldRecordAppendedAgainIsNotApplied() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: Array("Spam".utf8), directory: path)
        let recordOne = Array(journalBytes[JournalFormat.headerSize...])
        _ = try DirectoryUpdates.remove(p("+8613900000001"), directory: path)
        let good = journalBytes
        folder.write("main.lkd.journal", good + recordOne)

        let read = try XCTUnwrap(try JournalFollower.read(path: journalPath(path)))
        XCTAssertEqual(read.state.lastSequence, 2)
        XCTAssertEqual(read.tail?.reason, "sequence 1 where one above 2 was due")
        XCTAssertEqual(read.tail?.offset, good.count)
        XCTAssertEqual(try stored("+8613900000001", in: path), "-", "the removal stands")

        let change = try DirectoryUpdates.add(p("+8613900000002"), blocked: true, label: nil, directory: path)
        XCTAssertEqual(change.record?.sequence, 3, "sequence numbers are never reused")
        XCTAssertEqual(change.discardedTail?.offset, good.count, "the stale record is cut off under the lock")
        XCTAssertEqual(try stored("+8613900000001", in: path), "-")
        XCTAssertEqual(try stored("+8613900000002", in: path), "block #3")
        let after = try XCTUnwrap(try JournalFollower.read(path: journalPath(path)))
        XCTAssertNil(after.tail)
        XCTAssertEqual(after.state.lastSequence, 3)

        // With more behind it, it is damage: reported, never skipped over.
        folder.write("main.lkd.journal", good + recordOne + recordOne)
        XCTAssertThrowsError(try JournalFollower.read(path: journalPath(path))) { error in
            guard case .damaged(_, good.count, 2 * recordOne.count, "sequence 1 where one above 2 was due")? = error as? JournalError else {
                return XCTFail("\(error)")
            }
        }
    }

    /// Sequence numbers only rise: a record repeating the last one's number (with a valid
    /// checksum) is not read as a new change. (Since journal format 2 a number may be skipped:
    /// the journal outlives rebuilds of its directory.)
    func testARecordThatDoesNotRiseIsNotApplied() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: nil, directory: path)
        _ = try DirectoryUpdates.add(p("+8613900000002"), blocked: true, label: nil, directory: path)
        let good = journalBytes
        let id = try JournalFormat.decodeHeader(good[...], path: journalPath(path)).journalID
        let repeated = JournalFormat.encode(JournalRecord(sequence: 2, key: JournalRecord.key(p("+8613900000003")),
                                                          operation: .add(blocked: true, label: nil)), journalID: id)
        folder.write("main.lkd.journal", good + repeated)
        let read = try XCTUnwrap(try JournalFollower.read(path: journalPath(path)))
        XCTAssertEqual(read.state.lastSequence, 2)
        XCTAssertEqual(read.tail?.reason, "sequence 2 where one above 2 was due")
        XCTAssertEqual(try stored("+8613900000003", in: path), "-")
        XCTAssertEqual(try DirectoryUpdates.add(p("+8613900000004"), blocked: true, label: nil, directory: path).record?.sequence, 3)
    }

    /// What the damaged-journal message tells the operator to do: move the journal aside.
    /// The directory still says it merged the old journal through sequence 4; a new journal
    /// starts at 1 under a new id, and that marker names the old id, so the new journal's
    /// records 1 to 3 all apply (none is taken as merged) and the next compaction keeps them.
    func testANewJournalAfterTheOldOneWasMovedAside() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        for i in 1...4 { _ = try DirectoryUpdates.add(p("+861390000000\(i)"), blocked: true, label: nil, directory: path) }
        XCTAssertEqual(try DirectoryUpdates.compact(directory: path).throughSequence, 4)
        let header = try DirectoryFile(path: path).header
        XCTAssertEqual(header.journalSequence, 4)
        _ = try DirectoryUpdates.add(p("+8613900000005"), blocked: true, label: nil, directory: path)
        _ = try DirectoryUpdates.add(p("+8613900000006"), blocked: true, label: nil, directory: path)
        var damaged = journalBytes
        damaged[JournalFormat.headerSize + 20] ^= 0xFF
        folder.write("main.lkd.journal", damaged)
        XCTAssertThrowsError(try DirectoryUpdates.add(p("+8613900000007"), blocked: true, label: nil, directory: path)) { error in
            XCTAssertTrue("\(error)".contains("move the file aside"), "\(error)")
        }

        XCTAssertEqual(rename(journalPath(path), journalPath(path) + ".damaged"), 0)
        for (i, number) in ["+8613900000011", "+8613900000012", "+8613900000013"].enumerated() {
            XCTAssertEqual(try DirectoryUpdates.add(p(number), blocked: true, label: Array("New \(i + 1)".utf8), directory: path).record?.sequence,
                           UInt64(i + 1))
        }
        let state = try XCTUnwrap(try JournalFollower.read(path: journalPath(path))).state
        XCTAssertNotEqual(state.journalID, header.journalID)
        XCTAssertEqual(state.mergedThrough(header), 0, "the marker belongs to the old journal")
        XCTAssertEqual(state.pending(over: header, at: 0).map(\.sequence), [1, 2, 3])
        XCTAssertEqual(try stored("+8613900000011", in: path), "block New 1 #1")
        XCTAssertEqual(try stored("+8613900000013", in: path), "block New 3 #3")
        XCTAssertEqual(try stored("+8613900000004", in: path), "block", "what was merged stays")
        XCTAssertEqual(try stored("+8613900000005", in: path), "-", "what was only in the old journal went with it")

        let summary = try DirectoryUpdates.compact(directory: path)
        XCTAssertEqual(summary.mergedEntries, 3)
        for number in ["+8613900000011", "+8613900000012", "+8613900000013"] {
            XCTAssertTrue(try stored(number, in: path).hasPrefix("block New"), number)
        }
    }
}

extension JournalTests {
    /// After a compaction, the records it merged are the file's, not the journal's (which
    /// keeps them): `lookupd query` must not name the last one as journal record #2, nor the
    /// call log as record=2.
    func testTheLastMergedRecordBelongsToTheFile() throws {
        let path = try directory(["+8613800138000,block,Fraud"])
        _ = try DirectoryUpdates.remove(p("+8613800138000"), directory: path)
        _ = try DirectoryUpdates.add(p("+8613900000001"), blocked: true, label: Array("Spam".utf8), directory: path)
        XCTAssertEqual(try DirectoryUpdates.compact(directory: path).throughSequence, 2)
        XCTAssertEqual(try JournalFollower.read(path: journalPath(path))?.state.lastSequence, 2, "the journal keeps its records")
        XCTAssertEqual(try stored("+8613900000001", in: path), "block Spam", "merged: no journal record number")
        XCTAssertEqual(try stored("+8613800138000", in: path), "-")
    }
}
