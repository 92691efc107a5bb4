import Foundation
import Glibc
import XCTest

/// Every command block of README.md (```sh and ```console) runs as written: in a temporary
/// folder holding a copy of the shipped Config/, with the built lookupd first on PATH,
/// under `bash -e -o pipefail`, so any command of it that fails fails this test. A block
/// that cannot run here is listed below with the reason, by its exact text: when such a
/// block changes, this test fails until it is run or listed again.
final class ReadmeTests: CLITestCase {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The blocks not run, each with why, by their exact text.
    static let excluded: [(text: String, reason: String)] = [
        ("""
         scripts/demo    # installs what is missing (apt), builds, installs /usr/local/bin/lookupd,
                         # compiles the sample directory, screens numbers, starts the daemon
                         # on 127.0.0.1:5080 and places SIP calls to it
         scripts/test    # installs what is missing (apt) and runs the whole test suite

         """,
         "installs packages with apt and the binary under /usr/local (root), and scripts/test runs this whole suite again"),
        ("""
         lookupd update          # download, check, compile, verify, install, reload (exit 1 if a feed failed)
         lookupd update          # again: one conditional request answered 304, nothing changes
         lookupd update --rollback spamco     # put back the list the last install replaced
         systemctl enable --now lookupd-update.timer   # hourly, with a random delay (systemd/)

         """,
         "the feed URL is the provider's placeholder (feeds.example) and systemctl needs systemd as init; lookupd update itself runs in FeedInstallTests and ReportingJSONTests"),
    ]

    /// The blocks of `markdown`, in order, with their line numbers; a ```console block's
    /// commands are its `$ ` lines.
    static func commandBlocks(_ markdown: String) -> [(line: Int, text: String)] {
        var blocks: [(Int, String)] = []
        var current: (line: Int, console: Bool, lines: [String])? = nil
        for (index, line) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if let block = current {
                if line.hasPrefix("```") {
                    blocks.append((block.line, block.lines.joined(separator: "\n") + "\n"))
                    current = nil
                } else if !block.console {
                    current!.lines.append(String(line))
                } else if line.hasPrefix("$ ") {
                    current!.lines.append(String(line.dropFirst(2)))
                }
            } else if line == "```sh" || line == "```console" {
                current = (index + 1, line == "```console", [])
            } else if line.hasPrefix("```") && line.count > 3 {
                // Another language (ini, a Kamailio excerpt): skip to its end.
                current = nil
            }
        }
        return blocks
    }

    func testEveryCommandBlockRunsAsWritten() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let blocks = Self.commandBlocks(readme)
        XCTAssertGreaterThanOrEqual(blocks.count, 3, "README.md has its command blocks")
        // The shipped configuration's daemon uses 127.0.0.1:5080 and /tmp/lookupd-demo, as
        // scripts/demo does: a demo running on this machine would answer instead.
        if FileManager.default.fileExists(atPath: "/tmp/lookupd-demo/control.sock") {
            let probe = try lookupd(["stats", "--socket", "/tmp/lookupd-demo/control.sock"])
            if probe.status == 0 { throw XCTSkip("a lookupd demo daemon is running (/tmp/lookupd-demo/control.sock); stop it first") }
        }
        let demoFolderExisted = FileManager.default.fileExists(atPath: "/tmp/lookupd-demo")
        defer { if !demoFolderExisted { try? FileManager.default.removeItem(atPath: "/tmp/lookupd-demo") } }

        var ran = 0
        var excludedSeen = Set<Int>()
        for block in blocks {
            if let i = Self.excluded.firstIndex(where: { block.text == $0.text }) {
                excludedSeen.insert(i)
                continue
            }
            let work = file("block-\(block.line)")
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: Self.root.appendingPathComponent("Config").path, toPath: work + "/Config")
            for built in ["sample.lkd", "sample.lkd.journal", "reports.lkd", "reports.csv", "sample-export.csv", "serve.log"] {
                try? FileManager.default.removeItem(atPath: work + "/Config/" + built)
            }
            let binaryFolder = URL(fileURLWithPath: LookupdBinary.path!).deletingLastPathComponent().path
            // A daemon the block leaves in the background is stopped when the block ends, however it ends.
            let script = "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n" + block.text
            let result = try runCommand("/bin/bash", ["-e", "-o", "pipefail", "-c", script], folder: folder.path, timeout: 180,
                                        environment: ["PATH": binaryFolder + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")],
                                        unsetting: ["LOOKUPD_CONFIG"], currentDirectory: work)
            XCTAssertFalse(result.timedOut, "README.md line \(block.line): the block ran past 180 s")
            XCTAssertEqual(result.status, 0, "README.md line \(block.line): a command of the block failed:\n\(result.summary)")
            ran += 1
        }
        XCTAssertGreaterThanOrEqual(ran, 1, "a README command block was run")
        for (i, exclusion) in Self.excluded.enumerated() where !excludedSeen.contains(i) {
            XCTFail("the excluded README block starting '\(exclusion.text.prefix(40))' is gone or changed: run it, or list it again with its reason")
        }
    }

    /// The extraction itself: every language but sh and console is skipped, console
    /// commands are the `$ ` lines, and a failing command fails its block.
    func testBlocksAreFoundAndAFailingCommandFails() throws {
        let markdown = "text\n```ini\nkey = value\n```\n```sh\necho one\n```\n```console\n$ echo two\ntwo\n```\n"
        let blocks = Self.commandBlocks(markdown)
        XCTAssertEqual(blocks.map(\.text), ["echo one\n", "echo two\n"])
        XCTAssertEqual(blocks.map(\.line), [5, 8])
        let failing = try runCommand("/bin/bash", ["-e", "-o", "pipefail", "-c", "lookupd query --no-such-option\necho reached\n"],
                                     folder: folder.path, environment: ["PATH": URL(fileURLWithPath: LookupdBinary.path!).deletingLastPathComponent().path + ":/usr/bin:/bin"])
        XCTAssertNotEqual(failing.status, 0)
        XCTAssertFalse(failing.stdout.contains("reached"), failing.summary)
    }
}
