import Foundation
import Glibc
import SystemCalls
import TestSupport
import XCTest

/// The system-call layer on real files: readRegularFile's refusals (FIFO, device, too large,
/// growing), writeFileAtomically's failure at every step (injected ENOSPC, EIO) leaving the
/// old file and no temporary, EINTR retried, and stale temporaries of killed writers removed.
final class SystemCallsTests: XCTestCase {
    var folder = ""

    override func setUp() {
        folder = NSTemporaryDirectory() + "lookupd-syscalls-\(getpid())-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    override func tearDown() {
        SystemCallFaults.clear()
        try? FileManager.default.removeItem(atPath: folder)
    }

    func write(_ name: String, _ text: String) -> String {
        let path = folder + "/" + name
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        return path
    }

    func contents(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    func entries() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: folder))?.sorted() ?? [] }

    // MARK: - readRegularFile

    func testReadsARegularFileWhole() throws {
        let path = write("a.conf", "listen = udp:127.0.0.1:5060\n")
        XCTAssertEqual(String(decoding: try readRegularFile(path, maxBytes: 1024), as: UTF8.self), "listen = udp:127.0.0.1:5060\n")
        XCTAssertEqual(try readRegularFile(write("empty", ""), maxBytes: 0), [])
    }

    func testRefusesAFIFOWithoutWaitingForAWriter() throws {
        let path = folder + "/fifo"
        XCTAssertEqual(mkfifo(path, 0o600), 0)
        let started = Date()
        XCTAssertThrowsError(try readRegularFile(path, maxBytes: 1 << 20)) { error in
            XCTAssertEqual((error as? SystemCallError)?.reason, .notRegularFile(.fifo))
            XCTAssertEqual("\(error)", "\(path): not a regular file (a FIFO)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 1, "the open must not wait for a writer")
    }

    func testRefusesDevicesAndFolders() {
        XCTAssertThrowsError(try readRegularFile("/dev/zero", maxBytes: 1 << 20)) { error in
            XCTAssertEqual((error as? SystemCallError)?.reason, .notRegularFile(.characterDevice))
        }
        XCTAssertThrowsError(try readRegularFile(folder, maxBytes: 1 << 20)) { error in
            XCTAssertEqual((error as? SystemCallError)?.reason, .notRegularFile(.directory))
        }
    }

    func testRefusesAHugeSparseFileBeforeReadingIt() throws {
        let path = folder + "/sparse"
        let fd = open(path, O_WRONLY | O_CREAT, 0o600)
        XCTAssertEqual(ftruncate(fd, 2 << 30), 0)
        close(fd)
        let started = Date()
        XCTAssertThrowsError(try readRegularFile(path, maxBytes: 64 << 20)) { error in
            XCTAssertEqual((error as? SystemCallError)?.reason, .tooLarge(size: 2 << 30, limit: 64 << 20))
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)
    }

    func testASymlinkIsRefusedOnlyWhenAsked() throws {
        let target = write("target", "x")
        let link = folder + "/link"
        XCTAssertEqual(symlink(target, link), 0)
        XCTAssertEqual(try readRegularFile(link, maxBytes: 10), [UInt8(ascii: "x")])
        XCTAssertThrowsError(try readRegularFile(link, maxBytes: 10, followSymlinks: false)) { error in
            XCTAssertEqual((error as? SystemCallError)?.reason, .errno(.tooManyLinks))
        }
    }

    /// A file that holds more than fstat said (one growing while it is read; /proc files say
    /// 0 bytes) is read past fstat's size up to the bound, and refused at the bound.
    func testAFileHoldingMoreThanFstatSaidIsBoundedWhileRead() throws {
        let path = "/proc/self/status"
        XCTAssertEqual(try FileSystem.status(path).size, 0)
        let whole = try readRegularFile(path, maxBytes: 1 << 20)
        XCTAssertTrue(String(decoding: whole, as: UTF8.self).hasPrefix("Name:"))
        XCTAssertGreaterThan(whole.count, 100)
        XCTAssertThrowsError(try readRegularFile(path, maxBytes: 100)) { error in
            XCTAssertEqual((error as? SystemCallError)?.reason, .tooLarge(size: 101, limit: 100))
        }
    }

    // MARK: - EINTR and faults

    func testEINTRIsRetriedInOnePlace() throws {
        let path = folder + "/retried"
        SystemCallFaults.inject([.init(.write, .interrupted, times: 3), .init(.fsync, .interrupted, times: 2),
                                 .init(.rename, .interrupted, times: 1)])
        try writeFileAtomically(path, contents: Array("hello".utf8))
        XCTAssertEqual(SystemCallFaults.fired, [3, 2, 1], "every injected EINTR was seen and retried")
        XCTAssertEqual(contents(path), "hello")
    }

    func testTheEnvironmentSyntax() {
        let rules = SystemCallFaults.parse("fsync:EIO:path=.lkd,write:ENOSPC:skip=2:times=1")
        XCTAssertEqual(rules, [.init(.fsync, .ioError, pathContains: ".lkd"), .init(.write, .noSpace, skip: 2, times: 1)])
        XCTAssertNil(SystemCallFaults.parse("fsync:ENOTANERRNO"))
        XCTAssertNil(SystemCallFaults.parse("nocall:EIO"))
        XCTAssertNil(SystemCallFaults.parse("write:EIO:when=later"))
    }

    // MARK: - writeFileAtomically

    func testReplacesAtomicallyAndLeavesNoTemporary() throws {
        let path = write("state", "old")
        try writeFileAtomically(path, contents: Array("new".utf8), permissions: 0o640)
        XCTAssertEqual(contents(path), "new")
        XCTAssertEqual(entries(), ["state"])
        XCTAssertEqual(try FileSystem.status(path).mode & 0o777, 0o640 & ~currentUmask())
    }

    /// Every step that can fail before the rename leaves the old file as it was, reports the
    /// step and the errno, and removes the temporary.
    func testEachFailureLeavesTheOldFileAndReportsIt() {
        let path = write("state", "old")
        let steps: [(SystemCallFaults.Rule, String)] = [
            (.init(.open, .noSpace, pathContains: ".lookupd-tmp."), "create"),
            (.init(.write, .noSpace), "write"),
            (.init(.write, .ioError), "write"),
            (.init(.fsync, .ioError, pathContains: ".lookupd-tmp."), "fsync"),
            (.init(.rename, .ioError), "rename"),
        ]
        for (rule, step) in steps {
            SystemCallFaults.inject([rule])
            XCTAssertThrowsError(try writeFileAtomically(path, contents: Array("new".utf8)), "\(rule)") { error in
                let e = error as? SystemCallError
                XCTAssertEqual(e?.reason, .errno(rule.errno), "\(rule)")
                XCTAssertTrue(e?.operation.hasPrefix(step) ?? false, "\(e?.operation ?? "") for \(rule)")
                XCTAssertTrue("\(error)".contains(rule.errno.description), "\(error)")
            }
            XCTAssertEqual(SystemCallFaults.fired, [1], "\(rule) was hit")
            XCTAssertEqual(contents(path), "old", "\(rule) left the old file")
            XCTAssertEqual(entries(), ["state"], "\(rule) left no temporary")
        }
    }

    /// Past the rename the new file is in place; a failed fsync of the folder is still an
    /// error the caller hears of.
    func testAFailedFolderSyncIsReported() {
        let path = write("state", "old")
        // The temporary's path contains the folder too: skip its fsync.
        SystemCallFaults.inject([.init(.fsync, .ioError, pathContains: folder, skip: 1, times: 1)])
        XCTAssertThrowsError(try writeFileAtomically(path, contents: Array("new".utf8))) { error in
            XCTAssertTrue((error as? SystemCallError)?.operation.hasPrefix("fsync the folder") ?? false, "\(error)")
        }
        XCTAssertEqual(contents(path), "new")
    }

    func testAFailingFillRemovesTheTemporary() {
        let path = write("state", "old")
        XCTAssertThrowsError(try writeFileAtomically(path) { (fd, temporary) throws(SystemCallError) in
            try? fd.writeAll(Array("partial".utf8))
            throw SystemCallError(path: temporary, operation: "compute", errno: .invalidArgument)
        })
        XCTAssertEqual(contents(path), "old")
        XCTAssertEqual(entries(), ["state"])
    }

    // MARK: - Stale temporaries

    /// A writer killed with SIGKILL leaves its temporary; the next write of the same file
    /// removes it once that PID is gone, and leaves a live writer's alone.
    func testStaleTemporariesOfDeadWritersAreRemoved() throws {
        let path = write("main.lkd", "old")
        let dead = try deadPID()
        let stale = ".main.lkd.lookupd-tmp.\(dead).1a2b"
        let live = ".main.lkd.lookupd-tmp.1.ffff"  // PID 1 is always alive
        let other = ".other.lkd.lookupd-tmp.\(dead).1a2b"
        for name in [stale, live, other, ".main.lkd.lookupd-tmp.notapid.1"] { _ = write(name, "partial") }
        try writeFileAtomically(path, contents: Array("new".utf8))
        XCTAssertEqual(entries(), [live, ".main.lkd.lookupd-tmp.notapid.1", other, "main.lkd"].sorted())
        XCTAssertEqual(AtomicFile.removeStaleTemporaries(folder: folder, name: "other.lkd"), [other])
    }

    /// A PID no process has: a child that has exited and been reaped.
    func deadPID() throws -> Int32 {
        let pid = try deadProcessID()
        XCTAssertFalse(FileSystem.isProcessAlive(pid))
        return pid
    }

    func currentUmask() -> mode_t {
        let mask = umask(0o022)
        umask(mask)
        return mask
    }
}
