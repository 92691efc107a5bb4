@testable import Feeds
import FeedRecords
import Foundation
import SystemCalls
import XCTest

/// Feed state records and the update's file steps on a failing disk (faults injected into the
/// system-call layer): the record or list in force stays as it was, no temporary is left, and
/// the error names the step.
final class FeedFileFailureTests: XCTestCase {
    var folder = ""

    override func setUp() {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("lkd-feedfail-\(UUID().uuidString.prefix(8))").path
        try! FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    override func tearDown() {
        SystemCallFaults.clear()
        try? FileManager.default.removeItem(atPath: folder)
    }

    func names() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted() }

    func testAFailedRecordWriteKeepsTheOldRecord() throws {
        let store = FeedRecordStore(folder: folder)
        var record = FeedRecord(feed: "spamco")
        record.entries = 42
        try store.write(record)
        record.entries = 50
        for rule in [SystemCallFaults.Rule(.write, .noSpace), .init(.fsync, .ioError, pathContains: ".lookupd-tmp."), .init(.rename, .ioError)] {
            SystemCallFaults.inject([rule])
            XCTAssertThrowsError(try store.write(record), "\(rule)") { error in
                XCTAssertEqual((error as? FeedRecordError)?.errno, rule.errno.rawValue, "\(error)")
            }
            XCTAssertEqual(SystemCallFaults.fired, [1])
            SystemCallFaults.clear()
            XCTAssertEqual(store.read("spamco")?.entries, 42, "\(rule): the old record is in force")
            XCTAssertEqual(names(), ["spamco.state"], "\(rule): no temporary left")
        }
    }

    /// The folder's fsync after the rename was ignored before: a record could be lost to a
    /// power cut with nobody told.
    func testAFailedFolderSyncOfARecordIsReported() {
        let store = FeedRecordStore(folder: folder)
        SystemCallFaults.inject([.init(.fsync, .ioError, pathContains: folder, skip: 1)])
        XCTAssertThrowsError(try store.write(FeedRecord(feed: "spamco"))) { error in
            XCTAssertTrue("\(error)".contains("fsync the folder"), "\(error)")
        }
    }

    /// A state file replaced by a FIFO or a link is not read (nor waited on).
    func testARecordThatIsNotARegularFileIsIgnored() throws {
        XCTAssertEqual(mkfifo(folder + "/fifo.state", 0o600), 0)
        XCTAssertNil(FeedRecordStore(folder: folder).read("fifo"))
        let store = FeedRecordStore(folder: folder)
        try store.write(FeedRecord(feed: "real"))
        XCTAssertEqual(symlink(folder + "/real.state", folder + "/link.state"), 0)
        XCTAssertNil(store.read("link"))
    }

    /// `NAME.data.previous` is a hard link, or on file systems without them a copy: either
    /// way a failure leaves the previous copy as it was.
    func testPreservingAListKeepsThePreviousOneOnFailure() throws {
        let data = folder + "/spamco.data", previous = folder + "/spamco.data.previous"
        FileManager.default.createFile(atPath: data, contents: Data("new list".utf8))
        FileManager.default.createFile(atPath: previous, contents: Data("old list".utf8))
        // No hard links (EXDEV), then the copy's write fails.
        SystemCallFaults.inject([.init(.link, .crossDevice), .init(.write, .noSpace)])
        XCTAssertThrowsError(try FileOperations.preserve(data, as: previous)) { error in
            XCTAssertTrue("\(error)".contains(Errno.noSpace.description), "\(error)")
        }
        XCTAssertEqual(SystemCallFaults.fired, [1, 1])
        XCTAssertEqual(FileManager.default.contents(atPath: previous), Data("old list".utf8))
        XCTAssertEqual(names(), ["spamco.data", "spamco.data.previous"])
        // The copy works when the disk does.
        SystemCallFaults.inject([.init(.link, .crossDevice)])
        try FileOperations.preserve(data, as: previous)
        XCTAssertEqual(FileManager.default.contents(atPath: previous), Data("new list".utf8))
        XCTAssertEqual(names(), ["spamco.data", "spamco.data.previous"])
    }
}
