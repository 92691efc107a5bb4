import Foundation
import XCTest

/// `lookupd check` and `lookupd inspect` on sound and damaged files.
final class FileCommandTests: CLITestCase {
    var good = ""
    var goodBytes = Data()

    override func setUpWithError() throws {
        try super.setUpWithError()
        var csv = "number,action,label\n"
        for i in 0..<50 { csv += "+8613800\(String(format: "%06d", i)),\(i % 2 == 0 ? "block" : "identify"),Label \(i % 5)\n" }
        csv += "+86170*,block,\n+861705555*,identify,Known\n"
        let source = write("good.csv", csv)
        good = file("good.lkd")
        let r = try lookupd(["compile", "--directory-version", "9", source, "-o", good])
        XCTAssertEqual(r.status, 0, r.stderr)
        goodBytes = read(good)
    }

    /// A copy of the good file with `patch` applied.
    func damaged(_ name: String, _ patch: (inout [UInt8]) -> Void) -> String {
        var bytes = [UInt8](goodBytes)
        patch(&bytes)
        return write(name, Data(bytes))
    }

    /// `export -o` and `compile -o` on a failing disk (faults injected into the system-call
    /// layer of the spawned lookupd through LOOKUPD_TEST_FAULTS): the file there stays as it
    /// was, no temporary is left, and the error names the step; the folder's fsync, which
    /// export never made before, is checked too.
    func testWritersKeepTheOldFileOnAFailingDisk() throws {
        let out = write("out.csv", "old export\n")
        let names = { ((try? FileManager.default.contentsOfDirectory(atPath: self.folder.path)) ?? []).filter { $0.contains("out.csv") || $0.contains("good.lkd") }.sorted() }
        // times=1: the message about the failure must still reach standard error.
        for (faults, step) in [("write:ENOSPC:times=1", "No space left on device"), ("fsync:EIO:path=.lookupd-tmp.", "cannot fsync"),
                               ("rename:EIO", "cannot rename")] {
            let r = try lookupd(["export", "-o", out, good], environment: ["LOOKUPD_TEST_FAULTS": faults])
            XCTAssertEqual(r.status, 1, "\(faults): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains(step) && r.stderr.contains("unchanged"), "\(faults): \(r.stderr)")
            XCTAssertEqual(String(decoding: read(out), as: UTF8.self), "old export\n", faults)
            XCTAssertEqual(names(), ["good.lkd", "out.csv"], faults)
        }
        // compile fills its file through a mapping: the blocks are reserved first.
        for (faults, step) in [("fallocate:ENOSPC", "No space left on device"), ("fsync:EIO:path=.lookupd-tmp.", "cannot fsync"),
                               ("rename:EIO", "cannot rename")] {
            let c = try lookupd(["compile", "-q", file("good.csv"), "-o", good], environment: ["LOOKUPD_TEST_FAULTS": faults])
            XCTAssertEqual(c.status, 1, "\(faults): \(c.stderr)")
            XCTAssertTrue(c.stderr.contains(step), "\(faults): \(c.stderr)")
            XCTAssertEqual(read(good), goodBytes, faults)
            XCTAssertEqual(names(), ["good.lkd", "out.csv"], faults)
        }
        let r = try lookupd(["export", "-o", out, good], environment: ["LOOKUPD_TEST_FAULTS": "fsync:EIO:path=\(folder.path):skip=1"])
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("fsync the folder"), r.stderr)
        XCTAssertEqual(try lookupd(["export", "-o", out, good]).status, 0)
        XCTAssertTrue(String(decoding: read(out), as: UTF8.self).hasPrefix("number,action,label\n"))
    }

    /// D9: a compile or export killed with SIGKILL leaves its full-size hidden temporary
    /// (`.NAME.lookupd-tmp.PID.RANDOM`); the next run writing the same file removes it once that
    /// PID is gone, and leaves a live writer's alone.
    func testTheNextRunRemovesAKilledRunsTemporaries() throws {
        let killed = Process()
        killed.executableURL = URL(fileURLWithPath: "/bin/true")
        try killed.run()
        killed.waitUntilExit()
        let dead = killed.processIdentifier
        let staleCompile = write(".good.lkd.lookupd-tmp.\(dead).1234", Data(count: 65536))
        let staleExport = write(".out.csv.lookupd-tmp.\(dead).abcd", Data(count: 65536))
        let live = write(".good.lkd.lookupd-tmp.1.5678", Data(count: 16))
        XCTAssertEqual(try lookupd(["compile", "-q", file("good.csv"), "-o", good]).status, 0)
        XCTAssertEqual(try lookupd(["export", "-o", file("out.csv"), good]).status, 0)
        XCTAssertFalse(exists(staleCompile))
        XCTAssertFalse(exists(staleExport))
        XCTAssertTrue(exists(live), "PID 1 is alive: its temporary is not ours to remove")
    }

    func testCheckGoodFile() throws {
        let r = try lookupd(["check", good])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("\(good): ok (50 numbers, 2 prefix rules, 6 labels, checksum "), r.stdout)
        XCTAssertEqual(r.stderr, "")
    }

    func testCheckDamagedFiles() throws {
        let size = goodBytes.count
        // The content fits one 4 KiB block: bytes 256 up to the checksums (header offset 176).
        let contentEnd = goodBytes[176..<184].reversed().reduce(0) { $0 << 8 | Int($1) }
        let content = damaged("content.lkd") { $0[contentEnd - 20] ^= 0x01 }
        let contentMessage = "\(content): damaged: bytes 256...\(contentEnd - 1) (keys, values, prefix rules, label index, label data) do not match their checksum (the file is damaged)"
        let header = damaged("header.lkd") { $0[40] ^= 0x01 }
        let magic = damaged("magic.lkd") { $0[0] = UInt8(ascii: "n") }
        let version = damaged("version.lkd") { $0[8] = 5 }
        let truncated = write("truncated.lkd", goodBytes.prefix(size - 1))
        let short = write("short.lkd", goodBytes.prefix(100))
        let empty = write("empty.lkd", Data())
        let expectations: [(String, String)] = [
            (content, contentMessage),
            (header, "\(header): header checksum mismatch (the file is damaged)"),
            (magic, "\(magic): not a lookupd directory (bad magic number)"),
            (version, "\(version): unsupported directory format version 5 (this lookupd reads versions 1 to 4)"),
            (truncated, "\(truncated): truncated: \(size - 1) bytes, the header says \(size)"),
            (short, "\(short): truncated: 100 bytes is too short for a directory header"),
            (empty, "\(empty): truncated: 0 bytes is too short for a directory header"),
            (folder.path, "\(folder.path): corrupt directory: not a regular file"),
            (file("missing.lkd"), "\(file("missing.lkd")): cannot open: No such file or directory"),
        ]
        for (path, message) in expectations {
            let r = try lookupd(["check", path])
            XCTAssertEqual(r.status, 1, path)
            XCTAssertEqual(r.stderr, "lookupd: error: \(message)\n")
            XCTAssertEqual(r.stdout, "")
        }
        // Several files: every one is reported, and one bad file fails the run.
        let r = try lookupd(["check", good, content, good])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stdoutLines.count, 2)
        XCTAssertEqual(r.stderr, "lookupd: error: \(contentMessage)\n")
    }

    func testInspectText() throws {
        let r = try lookupd(["inspect", good])
        XCTAssertEqual(r.status, 0, r.stderr)
        let lines = r.stdoutLines
        XCTAssertTrue(lines.contains("file:               \(good)"), r.stdout)
        XCTAssertTrue(lines.contains("format version:     4"), r.stdout)
        XCTAssertTrue(lines.contains("directory version:  9"), r.stdout)
        XCTAssertTrue(lines.contains("file size:          \(goodBytes.count) bytes"), r.stdout)
        XCTAssertTrue(lines.contains("numbers:            50"), r.stdout)
        XCTAssertTrue(lines.contains("prefix rules:       2 (lengths 5, 9)"), r.stdout)
        XCTAssertTrue(lines.contains("labels:             6"), r.stdout)
        XCTAssertTrue(lines.contains("blocking entries:   26"), r.stdout)
        XCTAssertTrue(lines.contains("identifying:        51"), r.stdout)
        XCTAssertTrue(lines.contains { $0.hasPrefix("block checksums:    1 block of 4096 bytes, all ok, root ") }, r.stdout)
        XCTAssertTrue(lines.contains("journal:            none"), r.stdout)
        XCTAssertFalse(r.stdout.contains("problem:"))
    }

    func testInspectJSON() throws {
        var r = try lookupd(["inspect", "--json", good])
        XCTAssertEqual(r.status, 0, r.stderr)
        guard let info = jsonLines(r.stdout).first else { return XCTFail("no JSON: \(r.stdout)") }
        XCTAssertEqual(info["file"] as? String, good)
        XCTAssertEqual(info["format_version"] as? Int, 4)
        XCTAssertEqual(info["block_size"] as? Int, 4096)
        XCTAssertEqual(info["blocks"] as? Int, 1)
        XCTAssertEqual(info["damaged_blocks"] as? Int, 0)
        XCTAssertEqual(info["directory_version"] as? Int, 9)
        XCTAssertEqual(info["file_size"] as? Int, goodBytes.count)
        XCTAssertEqual(info["numbers"] as? Int, 50)
        XCTAssertEqual(info["prefix_rules"] as? Int, 2)
        XCTAssertEqual(info["labels"] as? Int, 6)
        XCTAssertEqual(info["blocking"] as? Int, 26)
        XCTAssertEqual(info["identifying"] as? Int, 51)
        XCTAssertEqual(info["prefix_lengths"] as? [Int], [5, 9])
        XCTAssertEqual(info["content"] as? String, "ok")
        XCTAssertTrue(info["problem"] is NSNull, "every field is there, null when it does not apply")
        XCTAssertEqual((info["content_checksum"] as? String)?.count, 16)

        // Damaged content: still inspected, but flagged and exit status 1.
        let content = damaged("content.lkd") { $0[300] ^= 0x40 }
        r = try lookupd(["inspect", "--json", content])
        XCTAssertEqual(r.status, 1)
        guard let bad = jsonLines(r.stdout).first else { return XCTFail("no JSON: \(r.stdout)") }
        let contentEnd = goodBytes[176..<184].reversed().reduce(0) { $0 << 8 | Int($1) }
        let message = "\(content): damaged: bytes 256...\(contentEnd - 1) (keys, values, prefix rules, label index, label data) do not match their checksum (the file is damaged)"
        XCTAssertEqual(bad["content"] as? String, "damaged")
        XCTAssertEqual(bad["damaged_blocks"] as? Int, 1)
        XCTAssertEqual(bad["problem"] as? String, message)
        r = try lookupd(["inspect", content])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stdoutLines.contains { $0.hasPrefix("block checksums:    1 block of 4096 bytes, 1 DAMAGED, root ") }, r.stdout)
        XCTAssertTrue(r.stdoutLines.contains("problem:            \(message)"), r.stdout)
    }

    func testInspectUnreadableFiles() throws {
        let truncated = write("truncated.lkd", goodBytes.prefix(goodBytes.count / 2))
        for args in [["inspect", truncated], ["inspect", "--json", truncated]] {
            let r = try lookupd(args)
            XCTAssertEqual(r.status, 1)
            XCTAssertEqual(r.stdout, "")
            XCTAssertEqual(r.stderr, "lookupd: error: \(truncated): truncated: \(goodBytes.count / 2) bytes, the header says \(goodBytes.count)\n")
        }
        let header = damaged("header.lkd") { $0[200] ^= 0x01 }
        let r = try lookupd(["inspect", header])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: \(header): header checksum mismatch (the file is damaged)\n")
    }
}
