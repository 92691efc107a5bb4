import Foundation
import SystemCalls
import XCTest
@testable import Directory

/// The directory writer and the journal replacement of `lookupd compact` on a failing disk:
/// each failure injected into the system-call layer (ENOSPC, EIO) leaves the file in force
/// as it was, readable, with no temporary beside it, and comes back as an error naming the
/// step.
final class WriterFailureTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder() }

    override func tearDown() {
        SystemCallFaults.clear()
        folder.cleanup()
    }

    func content(_ n: Int) -> DirectoryContent {
        var c = DirectoryContent()
        c.labels = [Array("Fraud".utf8)]
        for i in 0..<n {
            c.exactKeys.append(8613800000000 + UInt64(i) * 7)
            c.exactValues.append(DirectoryFormat.encodeValue(blocked: true, label: 0))
        }
        return c
    }

    func names() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted() }

    func testDirectoryWriterLeavesTheOldFileOnEveryFailure() throws {
        let path = folder.file("main.lkd")
        try DirectoryWriter.write(content(10), to: path)
        let rules: [(SystemCallFaults.Rule, String)] = [
            (.init(.fallocate, .noSpace), "allocate"),
            // The entries go out with pwrite as they come: the first write, and one in the middle.
            (.init(.write, .noSpace), "write"),
            (.init(.write, .ioError, skip: 3), "write"),
            (.init(.fsync, .ioError, pathContains: ".lookupd-tmp."), "fsync"),
            (.init(.rename, .ioError), "rename"),
        ]
        for (rule, step) in rules {
            SystemCallFaults.inject([rule])
            XCTAssertThrowsError(try DirectoryWriter.write(content(20), to: path), "\(rule)") { error in
                guard case .system(_, let operation, let code) = error as? DirectoryError else { return XCTFail("\(error)") }
                XCTAssertTrue(operation.hasPrefix(step), "\(operation) for \(rule)")
                XCTAssertEqual(code, rule.errno.rawValue)
            }
            XCTAssertEqual(SystemCallFaults.fired, [1], "\(rule) was hit")
            SystemCallFaults.clear()
            let file = try DirectoryFile(path: path)
            try file.verify()
            XCTAssertEqual(file.count, 10, "\(rule): the old file is in force")
            XCTAssertEqual(names(), ["main.lkd"], "\(rule): no temporary left")
        }
        try DirectoryWriter.write(content(20), to: path)
        XCTAssertEqual(try DirectoryFile(path: path).count, 20)
    }

    /// Compaction writes the directory, then rewrites the journal without its superseded
    /// records. A rewrite that fails keeps the old journal (it says the same), and
    /// compaction says so.
    func testJournalRewriteLeavesTheOldJournal() throws {
        let path = folder.file("main.lkd")
        try DirectoryWriter.write(content(3), to: path)
        for i in 0..<3 { _ = try DirectoryUpdates.add(.exact(PhoneNumber(value: 8613900000000 + UInt64(i))!), blocked: true, label: nil, directory: path) }
        let journalPath = JournalFormat.path(forDirectory: path)
        let before = try XCTUnwrap(FileManager.default.contents(atPath: journalPath))
        for rule in [SystemCallFaults.Rule(.write, .noSpace, skip: 0), .init(.fsync, .ioError, pathContains: ".journal.lookupd-tmp."),
                     .init(.rename, .ioError, pathContains: ".journal")] {
            guard let journal = try LockedJournal.open(path: journalPath, create: false) else { return XCTFail("no journal") }
            SystemCallFaults.inject([rule])
            XCTAssertThrowsError(try journal.rewrite(), "\(rule)") { error in
                guard case .system(_, _, let code) = error as? JournalError else { return XCTFail("\(error)") }
                XCTAssertEqual(code, rule.errno.rawValue)
            }
            XCTAssertEqual(SystemCallFaults.fired, [1], "\(rule) was hit")
            SystemCallFaults.clear()
            XCTAssertEqual(FileManager.default.contents(atPath: journalPath), before, "\(rule): the old journal is in force")
            XCTAssertEqual(names(), ["main.lkd", "main.lkd.journal"], "\(rule): no temporary left")
            XCTAssertEqual(try JournalFollower.read(path: journalPath)?.state.recordCount, 3)
        }
        // A record superseded: the compaction rewrites the journal, keeping the three changes.
        _ = try DirectoryUpdates.add(.exact(PhoneNumber(value: 8613900000000)!), blocked: true, label: Array("Again".utf8), directory: path)
        let summary = try DirectoryUpdates.compact(directory: path)
        XCTAssertTrue(summary.rewroteJournal)
        XCTAssertEqual(summary.droppedRecords, 1)
        XCTAssertEqual(try DirectoryFile(path: path).count, 6)
        XCTAssertEqual(try JournalFollower.read(path: journalPath)?.state.recordCount, 3)
    }

    /// A compaction killed (SIGKILL) while writing leaves a full-size temporary; the next
    /// compaction of the same directory removes it.
    func testTheNextCompactionRemovesAKilledOnesTemporary() throws {
        let path = folder.file("main.lkd")
        try DirectoryWriter.write(content(3), to: path)
        _ = try DirectoryUpdates.add(.exact(PhoneNumber(value: 8613900000000)!), blocked: true, label: nil, directory: path)
        let stale = ".main.lkd.lookupd-tmp.\(try deadProcessID()).beef"
        folder.write(stale, [UInt8](repeating: 0, count: 4096))
        _ = try DirectoryUpdates.compact(directory: path)
        XCTAssertEqual(names(), ["main.lkd", "main.lkd.journal"])
    }
}
