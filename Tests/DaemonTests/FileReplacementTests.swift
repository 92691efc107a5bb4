import Directory
import Foundation
import Glibc
import XCTest

/// Issue 8, requirement 4: operators (and scripts gone wrong) change the
/// configured directory file while the daemon serves from it and while it
/// reloads. Here the daemon serves from a private copy (directory-copy = yes,
/// DirectoryStore; docs/TESTING.md), so nothing done to the configured path
/// can fault it: it keeps answering from the last good set and says why a
/// reload failed. The default, serving the installed file itself, is tested
/// in FileReplacementTests+InPlace.swift (and by the racing test below).
final class FileReplacementTests: DaemonTestCase {
    var configured: String { path("main.lkd") }

    /// The directory as it was compiled, version 2 of it, and a file of
    /// another format version (version field 5, header checksum redone).
    func versions() throws -> (v1: [UInt8], v2: [UInt8], otherFormat: [UInt8]) {
        let v1 = [UInt8](FileManager.default.contents(atPath: configured)!)
        try compile(ReloadTests.directoryV2, to: "v2.lkd")
        let v2 = [UInt8](FileManager.default.contents(atPath: path("v2.lkd"))!)
        var other = v1
        other[8] = 5
        let checksum = other.withUnsafeBytes { XXH64.hash(UnsafeRawBufferPointer(rebasing: $0[0..<248])) }
        for i in 0..<8 { other[248 + i] = UInt8(truncatingIfNeeded: checksum >> UInt64(8 * i)) }
        return (v1, v2, other)
    }

    /// Writes into the existing file (same inode), without truncating unless asked.
    func writeInPlace(_ bytes: [UInt8], at offset: Int = 0, truncate: Bool = false) {
        let fd = open(configured, O_WRONLY | (truncate ? O_TRUNC : 0))
        precondition(fd >= 0, "open \(configured): \(String(cString: strerror(errno)))")
        defer { close(fd) }
        let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
        precondition(n == bytes.count)
    }

    func assertServes(_ daemon: LookupdDaemon, version: Int, _ when: String, file: StaticString = #filePath, line: UInt = #line) {
        guard let peer = try? UDPPeer() else { return XCTFail("socket", file: file, line: line) }
        for e in ReloadTests.expectations {
            let want = version == 1 ? e.v1 : e.v2
            let answer = peer.exchange(invite(from: "<sip:\(e.caller)@pbx.example>", port: daemon.port), port: daemon.port)
            XCTAssertEqual(answer?.statusLine, want.0, "\(e.caller) \(when)", file: file, line: line)
            XCTAssertEqual(answer?.header("X-Caller-Label"), want.1.map(Answer.quoted), "\(e.caller) \(when)", file: file, line: line)
        }
    }

    /// `lookupd reload` must fail, naming the file and `reason`.
    func assertReloadRefused(_ daemon: LookupdDaemon, _ reason: String, _ when: String,
                             file: StaticString = #filePath, line: UInt = #line) throws {
        let started = monotonicSeconds()
        let result = try lookupd(["reload", "--config", daemon.configPath], timeout: 20)
        XCTAssertLessThan(monotonicSeconds() - started, 10, "\(when): the reload took too long", file: file, line: line)
        XCTAssertEqual(result.status, 1, "\(when): \(result.summary)", file: file, line: line)
        XCTAssertTrue(result.stderr.contains("failed, still serving generation"), "\(when): \(result.stderr)", file: file, line: line)
        XCTAssertTrue(result.stderr.contains("\(configured): \(reason)"), "\(when): expected '\(reason)' in: \(result.stderr)", file: file, line: line)
    }

    func testEveryKindOfReplacementWhileServing() throws {
        let (v1, v2, otherFormat) = try versions()
        let daemon = try startDaemon(["log-level = notice", "directory-copy = yes"])
        let baseline = try XCTUnwrap(Vitals(pid: daemon.pid))
        assertServes(daemon, version: 1, "at start")
        var refusals = 0

        // Each change: applied, then served from the old set, then a reload refused with its reason.
        let changes: [(name: String, reason: String, apply: () throws -> Void)] = [
            ("overwritten in place with garbage", "damaged: bytes", {
                self.writeInPlace((0..<200).map { UInt8(truncatingIfNeeded: $0 &* 37) }, at: 260)
            }),
            ("truncated in place", "truncated", {
                self.writeInPlace(v1)
                XCTAssertEqual(truncate(self.configured, off_t(v1.count / 2)), 0)
            }),
            ("truncated to nothing", "truncated", { XCTAssertEqual(truncate(self.configured, 0), 0) }),
            ("deleted", "cannot open: No such file or directory", { XCTAssertEqual(unlink(self.configured), 0) }),
            ("replaced by CSV text", "not a lookupd directory", {
                self.write("main.lkd", Lists.directoryCSV)
            }),
            ("replaced by a folder", "corrupt directory: not a regular file", {
                XCTAssertEqual(unlink(self.configured), 0)
                XCTAssertEqual(mkdir(self.configured, 0o755), 0)
            }),
            // Opening a FIFO for reading waits for a writer: the reload must not.
            ("replaced by a FIFO", "corrupt directory: not a regular file", {
                XCTAssertEqual(rmdir(self.configured), 0)
                XCTAssertEqual(mkfifo(self.configured, 0o644), 0)
            }),
            ("replaced by a symlink to a device", "corrupt directory: not a regular file", {
                XCTAssertEqual(unlink(self.configured), 0)
                XCTAssertEqual(symlink("/dev/zero", self.configured), 0)
            }),
            ("replaced by another format version", "unsupported directory format version 5", {
                XCTAssertEqual(unlink(self.configured), 0)
                self.write("main.lkd", Data(otherFormat))
            }),
        ]
        for change in changes {
            try change.apply()
            assertServes(daemon, version: 1, "after the file was \(change.name)")
            try assertReloadRefused(daemon, change.reason, change.name)
            refusals += 1
            assertServes(daemon, version: 1, "after a refused reload (\(change.name))")
            XCTAssertTrue(daemon.stderr.contains("failed, still serving generation 1: \(configured): \(change.reason)"),
                          "the log says why (\(change.name)):\n\(daemon.stderr.suffix(2000))")
        }

        // Overwritten in place with a good new version (same inode): taken.
        XCTAssertEqual(unlink(configured), 0)
        write("main.lkd", Data(v1))
        XCTAssertEqual(try lookupd(["reload", "--config", daemon.configPath]).status, 0)
        writeInPlace(v2, truncate: true)
        let reload = try lookupd(["reload", "--config", daemon.configPath])
        XCTAssertEqual(reload.status, 0, reload.summary)
        assertServes(daemon, version: 2, "after a good file was written in place")

        let stats = try stats(daemon)
        XCTAssertEqual(stats["lookupd_reload_failures_total"], refusals, stats.text)
        XCTAssertEqual(stats["lookupd_reloads_total"], 2, stats.text)
        assertServing(daemon, "after every kind of replacement")
        assertBounded(daemon, since: baseline, "after every kind of replacement")
    }

    /// Replacements racing reloads (SIGHUP every 20 ms) under traffic: every
    /// request gets the old or the new answer, none is lost, the daemon never
    /// dies, and once a good file is back a reload takes it.
    func testReplacementsRacingReloadsUnderTraffic() throws {
        let (v1, v2, otherFormat) = try versions()
        let daemon = try startDaemon(["log-level = notice", "directory-copy = yes"])
        let port = daemon.port
        let recorder = Recorder()
        let finished = DispatchSemaphore(value: 0)
        let callers = ReloadTests.expectations.map(\.caller)
        let senders = 2
        for k in 0..<senders {
            Thread {
                defer { finished.signal() }
                var i = k
                guard let peer = try? UDPPeer() else { return recorder.fail("socket") }
                while !recorder.isStopped {
                    let caller = callers[i % callers.count]
                    i += 1
                    let answer = peer.exchange(invite(from: "<sip:\(caller)@pbx.example>", port: port), port: port, timeout: 2)
                    recorder.add(.init(caller: caller, sent: 0, received: 0, status: answer?.statusLine, label: answer?.header("X-Caller-Label")))
                }
            }.start()
        }
        // The file changes constantly, in every way; some changes leave a good file.
        let configured = self.configured
        let stage = path("stage.lkd")
        let mutator = Thread {
            defer { finished.signal() }
            var random = SeededRandom(seed: 4)
            func put(_ bytes: [UInt8], inPlace: Bool) {
                if inPlace {
                    let fd = open(configured, O_WRONLY | O_CREAT, 0o644)
                    guard fd >= 0 else { return }
                    // In pieces: a reload may copy a half-written file.
                    var offset = 0
                    while offset < bytes.count {
                        let n = min(bytes.count - offset, Int.random(in: 64...4096, using: &random))
                        _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + offset, n, off_t(offset)) }
                        offset += n
                    }
                    _ = ftruncate(fd, off_t(bytes.count))
                    close(fd)
                } else {
                    _ = FileManager.default.createFile(atPath: stage, contents: Data(bytes))
                    _ = rename(stage, configured)
                }
            }
            while !recorder.isStopped {
                unlink(configured + ".fifo")
                switch Int.random(in: 0..<8, using: &random) {
                case 0: put(v1, inPlace: true)
                case 1: put(v2, inPlace: true)
                case 2: put(v2, inPlace: false)
                case 3: _ = truncate(configured, off_t(Int.random(in: 0..<v1.count, using: &random)))
                case 4: _ = unlink(configured)
                case 5: put(otherFormat, inPlace: Bool.random(using: &random))
                case 6: if unlink(configured) == 0 || errno == ENOENT { _ = mkfifo(configured, 0o644) }
                default: put(Array(v1.prefix(Int.random(in: 0..<v1.count, using: &random))), inPlace: false)
                }
                usleep(UInt32.random(in: 1_000...15_000, using: &random))
                // A FIFO is only ever a short-lived state.
                var st = stat()
                if lstat(configured, &st) == 0, (st.st_mode & S_IFMT) == S_IFIFO { _ = unlink(configured) }
            }
        }
        mutator.start()
        let deadline = monotonicSeconds() + 6
        while monotonicSeconds() < deadline, daemon.isRunning {
            daemon.signal(SIGHUP)
            usleep(20_000)
        }
        recorder.stop()
        for _ in 0..<(senders + 1) { XCTAssertEqual(finished.wait(timeout: .now() + 10), .success) }
        XCTAssertTrue(daemon.isRunning, "lookupd died while its file changed under reloads:\n\(daemon.stderr.suffix(3000))")
        XCTAssertNil(recorder.failure)

        let entries = recorder.entries
        XCTAssertGreaterThan(entries.count, 100)
        XCTAssertEqual(entries.filter { $0.status == nil }.count, 0, "requests without an answer")
        var wrong: [String] = []
        for e in entries where e.status != nil {
            let expected = ReloadTests.expectations.first { $0.caller == e.caller }!
            let got = (e.status!, e.label)
            if got != (expected.v1.0, expected.v1.1.map(Answer.quoted)) && got != (expected.v2.0, expected.v2.1.map(Answer.quoted)) {
                wrong.append("\(e)")
            }
        }
        XCTAssertEqual(wrong.count, 0, "answers from neither version, e.g. \(wrong.prefix(5))")

        // Let the last signals be handled, then settle on a good file.
        usleep(300_000)
        unlink(configured)
        write("main.lkd", Data(v2))
        let reload = try lookupd(["reload", "--config", daemon.configPath], timeout: 30)
        XCTAssertEqual(reload.status, 0, reload.summary)
        assertServes(daemon, version: 2, "after the file settled")
        let stats = try stats(daemon)
        print("racing replacements: \(entries.count) answers, \(stats["lookupd_reloads_total"]) reloads taken, \(stats["lookupd_reload_failures_total"]) refused")
        XCTAssertGreaterThan(stats["lookupd_reload_failures_total"], 0, stats.text)
        XCTAssertGreaterThan(stats["lookupd_reloads_total"], 0, stats.text)
        assertServing(daemon, "after racing replacements")
    }

    /// The contacts list and the config are read at every reload too; one
    /// truncated while it is being read must not fault the daemon.
    func testContactsAndConfigTruncatedWhileReloading() throws {
        // Large enough that reading it takes a while.
        var csv = "name,number\n"
        for i in 0..<60_000 { csv += "Contact number \(i),+86139\(String(format: "%08d", i))\n" }
        let contacts = write("big.csv", csv)
        let full = Data(csv.utf8)
        let daemon = try startDaemon(["log-level = notice"], contacts: ["big.csv"])
        let config = daemon.configPath
        let configText = readText(config)
        let stop = Recorder()
        let finished = DispatchSemaphore(value: 0)
        Thread {
            defer { finished.signal() }
            var random = SeededRandom(seed: 6)
            while !stop.isStopped {
                _ = truncate(contacts, off_t(Int.random(in: 0..<full.count, using: &random)))
                usleep(UInt32.random(in: 0...3_000, using: &random))
                _ = truncate(config, off_t(Int.random(in: 0..<configText.utf8.count, using: &random)))
                usleep(UInt32.random(in: 0...3_000, using: &random))
                // Back to whole (in place), so some reloads succeed.
                if let h = FileHandle(forWritingAtPath: contacts) { h.write(full); try? h.close() }
                if let h = FileHandle(forWritingAtPath: config) { h.write(Data(configText.utf8)); try? h.close() }
            }
        }.start()
        let deadline = monotonicSeconds() + 5
        while monotonicSeconds() < deadline, daemon.isRunning {
            daemon.signal(SIGHUP)
            usleep(30_000)
        }
        stop.stop()
        XCTAssertEqual(finished.wait(timeout: .now() + 10), .success)
        XCTAssertTrue(daemon.isRunning, "lookupd died while its contacts/config were truncated under reloads:\n\(daemon.stderr.suffix(3000))")
        write(URL(fileURLWithPath: config).lastPathComponent, configText)
        write("big.csv", full)
        XCTAssertEqual(try lookupd(["reload", "--config", config], timeout: 30).status, 0)
        assertServing(daemon, "after contacts and config were truncated under reloads")
        let peer = try UDPPeer()
        XCTAssertEqual(peer.exchange(invite(from: "<sip:+8613900000042@pbx.example>", port: daemon.port), port: daemon.port)?
            .header("X-Caller-Label"), Answer.quoted("Contact number 42"))
    }

    // MARK: - Files that block, never end or are huge (issue 13: D4, D5, D6)

    /// Replaces `target` (after removing it) by a FIFO, a link to /dev/zero or a sparse file of
    /// `size` bytes; returns what the reload must say.
    private func replace(_ target: String, with kind: String, size: Int = 2 << 30) -> String {
        unlink(target)
        switch kind {
        case "fifo":
            XCTAssertEqual(mkfifo(target, 0o644), 0)
            return "not a regular file (a FIFO)"
        case "zero":
            XCTAssertEqual(symlink("/dev/zero", target), 0)
            return "not a regular file (a character device)"
        default:
            let fd = open(target, O_WRONLY | O_CREAT, 0o644)
            XCTAssertEqual(ftruncate(fd, off_t(size)), 0)
            close(fd)
            return "more than the"
        }
    }

    /// D4, D5: the contacts list or lookupd.conf replaced by a FIFO, by /dev/zero or by a
    /// 2 GiB file: SIGHUP and `lookupd reload` fail at once naming the file and why, the
    /// control loop keeps answering `stats` within a second, memory stays bounded, and
    /// SIGTERM still stops the daemon.
    func testContactsOrConfigThatBlockOrNeverEndFailTheReloadAtOnce() throws {
        let daemon = try startDaemon(["log-level = notice"])
        let baseline = try XCTUnwrap(Vitals(pid: daemon.pid))
        let contacts = path("contacts.vcf")
        let saved = [contacts: readText(contacts), daemon.configPath: readText(daemon.configPath)]
        var failures = 0
        for target in [contacts, daemon.configPath] {
            for kind in ["fifo", "zero", "huge"] {
                let what = "\(URL(fileURLWithPath: target).lastPathComponent) replaced by \(kind)"
                let reason = replace(target, with: kind)
                daemon.signal(SIGHUP)
                let stats = ControlPeer.timed(daemon.controlSocket, "stats")
                print("D4/D5: \(what): stats answered in \(String(format: "%.3f", stats.seconds)) s")
                XCTAssertNotNil(stats.answer, "\(what): stats unanswered")
                XCTAssertLessThan(stats.seconds, 1, "\(what): stats took \(stats.seconds) s")
                let reload = ControlPeer.timed(daemon.controlSocket, "reload")
                XCTAssertLessThan(reload.seconds, 2, "\(what): the reload took \(reload.seconds) s")
                XCTAssertTrue(reload.answer?.contains("failed, still serving generation 1: \(target)") ?? false, "\(what): \(reload.answer ?? "nothing")")
                XCTAssertTrue(reload.answer?.contains(reason) ?? false, "\(what): \(reload.answer ?? "nothing")")
                failures += 2
                assertServing(daemon, what)
                unlink(target)
                write(URL(fileURLWithPath: target).lastPathComponent, saved[target]!)
            }
        }
        // A SIGHUP and a `reload` arriving together are answered by one reload.
        XCTAssertTrue(eventually(timeout: 10) { ((try? self.stats(daemon))?["lookupd_reload_failures_total"] ?? 0) >= failures / 2 })
        print("D5: memory \(baseline) -> \(Vitals(pid: daemon.pid).map(\.description) ?? "?")")
        assertBounded(daemon, since: baseline, "after files that block or never end")
        XCTAssertEqual(try lookupd(["reload", "--config", daemon.configPath]).status, 0)
        let stop = terminate(daemon)
        XCTAssertEqual(stop.status, 0)
        XCTAssertLessThan(stop.seconds, 5)
    }

    /// D6: a 2 GiB sparse file at a directory's path is refused from its header, before
    /// anything is copied; one whose header claims 512 MiB and checks out is copied into the
    /// state directory off the control loop, which answers `stats` within a second all the
    /// while, and is then refused by its content checksum.
    func testAHugeDirectoryFileIsJudgedBeforeItIsCopied() throws {
        let daemon = try startDaemon(["log-level = notice", "directory-copy = yes"])
        let baseline = try XCTUnwrap(Vitals(pid: daemon.pid))
        let good = [UInt8](FileManager.default.contents(atPath: configured)!)
        _ = replace(configured, with: "huge")
        let refused = ControlPeer.timed(daemon.controlSocket, "reload")
        print("D6: a 2 GiB sparse directory file refused in \(String(format: "%.3f", refused.seconds)) s")
        XCTAssertLessThan(refused.seconds, 1, "refused from the header: \(refused.seconds) s")
        XCTAssertTrue(refused.answer?.contains("\(configured): not a lookupd directory") ?? false, refused.answer ?? "nothing")
        assertBounded(daemon, since: baseline, "after a 2 GiB sparse directory file")

        guard !underSanitizer else { return }  // copying 512 MiB under a sanitizer proves nothing more
        // A header that passes every check and claims 512 MiB more label data: the sections
        // after the label data (the checksum and root tables of formats 2 to 4) move with it, laid out as
        // docs/FORMAT.md says, so only the checksums can tell. The file is sparse.
        var header = Array(good.prefix(256))
        func get32(_ o: Int) -> UInt64 { (0..<4).reduce(0) { $0 | UInt64(header[o + $1]) << (8 * UInt64($1)) } }
        func get64(_ o: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(header[o + $1]) << (8 * UInt64($1)) } }
        func put64(_ o: Int, _ v: UInt64) { for i in 0..<8 { header[o + i] = UInt8(truncatingIfNeeded: v >> (8 * UInt64(i))) } }
        XCTAssertTrue((2...4).contains(get32(8)), "this test lays out a file with block checksums (format 2 to 4)")
        let extra: UInt64 = 512 << 20
        let labelData = get64(104), labelBytes = get64(112) + extra
        let contentEnd = (labelData + labelBytes + 7) & ~7
        let blockSize = UInt64(1) << get32(168)
        let blocks = (contentEnd - 256 + blockSize - 1) / blockSize
        let tableBlocks = (blocks * 8 + blockSize - 1) / blockSize
        let claimed = contentEnd + blocks * 8 + tableBlocks * 8
        put64(16, claimed)
        put64(112, labelBytes)
        put64(176, contentEnd)
        put64(184, blocks)
        put64(192, contentEnd)
        put64(200, contentEnd + blocks * 8)
        put64(208, tableBlocks)
        let checksum = header.withUnsafeBytes { XXH64.hash(UnsafeRawBufferPointer(rebasing: $0[0..<248])) }
        put64(248, checksum)
        unlink(configured)
        write("main.lkd", Data(header + good.dropFirst(256)))
        XCTAssertEqual(truncate(configured, off_t(claimed)), 0)
        daemon.signal(SIGHUP)
        var slowest = 0.0, answeredWhileCopying = 0
        let deadline = monotonicSeconds() + 120
        while monotonicSeconds() < deadline {
            let stats = ControlPeer.timed(daemon.controlSocket, "stats")
            slowest = max(slowest, stats.seconds)
            guard let text = stats.answer else { XCTFail("stats unanswered during the copy"); break }
            if Stats(text)["lookupd_reload_failures_total"] == 2 { break }
            answeredWhileCopying += 1
            usleep(100_000)
        }
        print("D6: stats answered \(answeredWhileCopying) times while 512 MiB were copied and checked; slowest \(slowest) s")
        XCTAssertLessThan(slowest, 1, "the control loop waited for the copy")
        XCTAssertGreaterThan(answeredWhileCopying, 0, "the copy took no time at all: the test proved nothing")
        XCTAssertTrue(daemon.stderr.contains("\(configured): damaged: bytes"), String(daemon.stderr.suffix(2000)))
        assertServing(daemon, "after a 512 MiB directory that failed its checksum")
        assertServes(daemon, version: 1, "after a 512 MiB directory that failed its checksum")
    }
}
