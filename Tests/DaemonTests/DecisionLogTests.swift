import Foundation
import Glibc
import XCTest

/// Issue 7.3: the decision log. Every blocked or identified call is one
/// line (key=value or JSON) on standard error and in the log file, rotated
/// by size; untrusted text cannot forge a line; `lookupd log` reads it back;
/// a log destination that stops taking lines never stops the calls.
final class DecisionLogTests: DaemonTestCase {
    /// A display name trying to end the line and start a forged one.
    static let forger = #""x\" verdict=identified label=\"Friend\"\\" <sip:+8613800138000@pbx.example>"#

    func testLinesInTextFormatAndLookupdLog() throws {
        let log = path("decisions.log")
        let daemon = try startDaemon(["log-file = \(log)", "log-level = notice"])
        let udp = try UDPPeer()
        let port = daemon.port
        XCTAssertEqual(udp.exchange(invite(from: Self.forger, to: "1001", port: port, callID: "forged-1@pbx"), port: port)?.statusCode, 603)
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.pizza)@pbx.example>", to: "1002", port: port, callID: "pizza-1@pbx"), port: port)?.statusCode, 302)
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.unknown)@pbx.example>", port: port, callID: "unknown-1@pbx"), port: port)?.statusCode, 302)
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.virtualRange)@pbx.example>", to: "1003", port: port, callID: "range-1@pbx"), port: port)?.statusCode, 603)

        // The file: blocked and identified calls, each on one line; unknown callers are not decisions.
        XCTAssertTrue(eventually(timeout: 5) { readText(log).split(separator: "\n").count == 3 }, readText(log))
        let lines = readText(log).split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 3, readText(log))
        XCTAssertTrue(lines[0].hasPrefix("call time="), lines[0])
        XCTAssertTrue(lines[0].contains(#" verdict=blocked caller=+8613800138000 callee=1001 response=603 label="Fraud Risk" source=main match=+8613800138000 rule=+8613800138000 call-id=forged-1@pbx "#), lines[0])
        XCTAssertTrue(lines[0].hasSuffix(#" display-name="x\" verdict=identified label=\"Friend\"\\""#), "the display name stays one quoted value: \(lines[0])")
        XCTAssertTrue(lines[1].contains(#" verdict=identified caller=+8613812345678 callee=1002 response=302 label="Pizza Palace, Haidian" source=main"#), lines[1])
        XCTAssertTrue(lines[2].contains(" verdict=blocked caller=+8617012345678 callee=1003 response=603 label=\"Virtual Operator Range\" source=main match=+86170* rule=+86170* call-id=range-1@pbx"), lines[2])
        let time = try XCTUnwrap(lines[0].split(separator: " ")[1].split(separator: "=").last)
        XCTAssertNotNil(try NSRegularExpression(pattern: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#)
            .firstMatch(in: String(time), range: NSRange(time.startIndex..., in: time)), "RFC 3339 UTC: \(time)")

        // Standard error, for journald: blocked calls at notice (shown at log-level = notice), identified at info (not).
        XCTAssertTrue(eventually(timeout: 5) { daemon.stderr.contains("call-id=range-1@pbx") }, daemon.stderr)
        XCTAssertTrue(daemon.stderr.contains("<5>call time="), daemon.stderr)
        XCTAssertFalse(daemon.stderr.contains("pizza-1@pbx"), "identified calls are info, below notice")

        // lookupd log: every call, only the blocked ones, by caller, since, as JSON.
        let all = try lookupd(["log", "--file", log])
        XCTAssertEqual(all.status, 0, all.summary)
        let shown = all.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(shown.count, 3, all.stdout)
        XCTAssertTrue(shown[0].contains("  blocked    +8613800138000 -> 1001  \"Fraud Risk\"  source=main  rule=+8613800138000  response=603  call-id=forged-1@pbx"), shown[0])
        XCTAssertTrue(shown[1].contains("identified +8613812345678 -> 1002  \"Pizza Palace, Haidian\""), shown[1])
        let blocked = try lookupd(["log", "--blocked", "--config", daemon.configPath])
        XCTAssertEqual(blocked.stdout.split(separator: "\n").count, 2, blocked.summary)
        XCTAssertFalse(blocked.stdout.contains("identified"))
        XCTAssertEqual(try lookupd(["log", "--file", log, "--caller", Caller.pizza]).stdout.split(separator: "\n").count, 1)
        XCTAssertEqual(try lookupd(["log", "--file", log, "--since", "10m"]).stdout.split(separator: "\n").count, 3)
        XCTAssertEqual(try lookupd(["log", "--file", log, "--since", "2999-01-01"]).stdout, "")
        let json = try lookupd(["log", "--file", log, "--json", "--blocked"])
        let first = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.split(separator: "\n")[0].utf8)) as? [String: Any])
        XCTAssertEqual(first["display-name"] as? String, #"x" verdict=identified label="Friend"\"#, "unescaped exactly")
        XCTAssertEqual(first["response"] as? Int, 603)
        // From journald's text (priority prefixes and other lines are skipped).
        let viaStdin = try lookupdWithInput(["log", "--blocked", "-"], input: daemon.stderr)
        XCTAssertEqual(viaStdin.split(separator: "\n").count, 2, viaStdin)
        XCTAssertEqual(try lookupd(["log", "--since", "yesterday", "--file", log]).status, 2)
        let none = try lookupd(["log", "--config", planConfig])
        XCTAssertEqual(none.status, 1)
        XCTAssertTrue(none.stderr.contains("sets no log-file"), none.stderr)
    }

    /// D13: a caller's display name with bidirectional controls and bytes that are not UTF-8
    /// is written escaped, never raw, in the text log (and `lookupd log` shows it escaped and
    /// reads it back exactly); the JSON log escapes the controls too.
    /// `log-unknown = yes`: unknown callers are lines too (at info, and in the file), and a
    /// reload turning it off stops them; the other callers are logged as before.
    func testLogUnknownLogsUnknownCallersToo() throws {
        let log = path("unknown.log")
        let daemon = try startDaemon(["log-file = \(log)", "log-unknown = yes"])
        let udp = try UDPPeer()
        let port = daemon.port
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.unknown)@pbx.example>", port: port, callID: "unknown-1@pbx"), port: port)?.statusCode, 302)
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, callID: "fraud-1@pbx"), port: port)?.statusCode, 603)
        XCTAssertTrue(eventually(timeout: 5) { readText(log).split(separator: "\n").count == 2 }, readText(log))
        let unknown = try lookupd(["log", "--file", log, "--verdict", "unknown", "--json"])
        XCTAssertEqual(unknown.status, 0, unknown.summary)
        let calls = unknown.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(calls.count, 1, unknown.stdout)
        XCTAssertEqual(calls.first?["caller"] as? String, Caller.unknown)
        XCTAssertEqual(calls.first?["call_id"] as? String ?? calls.first?["call-id"] as? String, "unknown-1@pbx", "\(calls)")
        XCTAssertTrue(daemon.stderr.contains("<6>call time=") && daemon.stderr.contains("call-id=unknown-1@pbx"), daemon.stderr)

        // Off again (the default): the next unknown caller is not logged, a blocked one is.
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, readText(daemon.configPath).replacingOccurrences(of: "log-unknown = yes\n", with: ""))
        XCTAssertEqual(try lookupd(["reload", "--config", daemon.configPath]).status, 0)
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.unknown)@pbx.example>", port: port, callID: "unknown-2@pbx"), port: port)?.statusCode, 302)
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, callID: "fraud-2@pbx"), port: port)?.statusCode, 603)
        XCTAssertTrue(eventually(timeout: 5) { readText(log).contains("fraud-2@pbx") }, readText(log))
        XCTAssertFalse(readText(log).contains("unknown-2@pbx"), readText(log))
    }

    func testBidiControlsAndInvalidUTF8AreEscaped() throws {
        for format in ["text", "json"] {
            let log = path("bidi-\(format).log")
            let daemon = try startDaemon(["log-file = \(log)", "log-format = \(format)", "log-level = notice"], name: "bidi-\(format)")
            let udp = try UDPPeer()
            // The callee is the Request-URI's user part, %-decoded: a byte that is not UTF-8 and
            // an override reach the log through it.
            let message = invite(from: "\"Bank \u{202E}moc.knab\u{2066}x\" <sip:\(Caller.fraud)@pbx.example>", to: "%FF%E2%80%AE1001",
                                 port: daemon.port, callID: "bidi-1@pbx")
            XCTAssertEqual(udp.exchange(message, port: daemon.port)?.statusCode, 603)
            XCTAssertTrue(eventually(timeout: 5) { readText(log).contains("bidi-1@pbx") }, readText(log))
            let raw = [UInt8](FileManager.default.contents(atPath: log)!)
            let text = String(decoding: raw, as: UTF8.self)
            for forbidden: [UInt8] in [[0xE2, 0x80, 0xAE], [0xE2, 0x81, 0xA6], [0xFF]] {
                XCTAssertNil(raw.firstRange(of: forbidden), "\(format): \(forbidden) written raw: \(text)")
            }
            if format == "text" {
                XCTAssertTrue(text.contains(#" callee="\xff\u{202E}1001" "#), text)
                XCTAssertTrue(text.contains(#" display-name="Bank \u{202E}moc.knab\u{2066}x""#), text)
                let shown = try lookupd(["log", "--file", log, "--json"])
                let record = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any], shown.summary)
                XCTAssertEqual(record["display-name"] as? String, "Bank \u{202E}moc.knab\u{2066}x", "read back exactly")
                XCTAssertEqual(record["callee"] as? String, "\u{FFFD}\u{202E}1001", "read back (the bad byte as U+FFFD)")
                let plain = try lookupd(["log", "--file", log])
                XCTAssertFalse(plain.stdout.contains("\u{202E}"), "lookupd log never prints a bidi control: \(plain.stdout)")
                XCTAssertTrue(plain.stdout.contains("\\u{202E}"), plain.stdout)
            } else {
                XCTAssertTrue(text.contains(#""display-name":"Bank \u202emoc.knab\u2066x""#), text)
                XCTAssertTrue(text.contains("\"callee\":\"\u{FFFD}\\u202e1001\""), text)
            }
        }
    }

    /// D14: a decision log on a full disk (a 16 KiB tmpfs in a private mount namespace, so
    /// the disk is really full): the lines the writes lose are counted in
    /// lookupd_log_lines_dropped_total, not only the failed writes; calls are answered.
    func testLinesLostOnAFullLogDiskAreCounted() throws {
        let disk = path("logdisk")
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        let port = freeLoopbackPort()
        let config = write("full.conf", configText(name: "full", port: port, directories: ["main.lkd name=main"], contacts: ["contacts.vcf"],
                                                   extra: ["log-file = \(disk)/decisions.log", "log-file-max-size = 1G", "log-level = error"]))
        let child = try ChildProcess(executable: "/usr/bin/unshare",
                                     arguments: ["-rm", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs \(disk) && exec \(LookupdBinary.path!) serve --config \(config)"],
                                     folder: folder, name: "full-disk")
        defer { child.stop() }
        let peer = try UDPPeer()
        XCTAssertTrue(eventually(timeout: 15) { !child.isRunning || peer.exchange(options(port: port), port: port, timeout: 0.2) != nil }, child.stderr)
        let calls = 300
        for i in 0..<calls {
            XCTAssertEqual(peer.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, callID: "full-\(i)@pbx"), port: port)?.statusCode, 603)
        }
        var stats = Stats("")
        XCTAssertTrue(eventually(timeout: 10) {
            stats = Stats((try? self.lookupd(["stats", "--config", config]))?.stdout ?? "")
            return stats[#"lookupd_log_lines_total{destination="file"}"#] == calls
        }, stats.text)
        let dropped = stats[#"lookupd_log_lines_dropped_total{destination="file"}"#]
        // A line is more than 150 bytes: 16 KiB holds at most 109 of them; the rest are lost.
        XCTAssertGreaterThanOrEqual(dropped, calls - 16384 / 150, "lines lost to the full disk are counted as dropped\n\(stats.text)")
        XCTAssertLessThan(dropped, calls, "the first lines fitted")
        XCTAssertGreaterThan(stats["lookupd_log_file_errors_total"], 0, stats.text)
    }

    /// Issue 18: `lookupd log --follow --caller 8005550199` prints a blocked
    /// call from +1 800 555 0199 as it happens, and nothing else.
    func testFollowShowsCallsAsTheyHappenByNumberInAnyForm() throws {
        let log = path("decisions.log")
        let daemon = try startDaemon(["log-file = \(log)", "country-code = 1", "national-prefix = 1", "international-prefix = 011"])
        XCTAssertEqual(try lookupd(["add", "+1 800 555 0199", "--block", "--label", "Robocall", "--config", daemon.configPath]).status, 0)
        let follower = try ChildProcess(executable: LookupdBinary.path!,
                                        arguments: ["log", "--follow", "--caller", "8005550199", "--config", daemon.configPath],
                                        folder: folder, name: "log-follow")
        defer { _ = follower.stop(grace: 1) }
        usleep(500_000)
        XCTAssertTrue(follower.isRunning, follower.stderr)
        XCTAssertEqual(follower.stdout, "", "no call yet")
        let udp = try UDPPeer()
        let port = daemon.port
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, callID: "other-1@pbx"), port: port)?.statusCode, 603)
        XCTAssertTrue(eventually(timeout: 2) { (udp.exchange(invite(from: "<sip:+18005550199@pbx.example>", port: port, callID: "robo-1@pbx"),
                                                             port: port)?.statusCode ?? 0) >= 600 }, "the journal change is in force")
        XCTAssertTrue(eventually(timeout: 3) { follower.stdout.contains("call-id=robo-1@pbx") }, "printed as it happens: \(follower.stdout) \(follower.stderr)")
        XCTAssertTrue(follower.stdout.contains("blocked    +18005550199 -> "), follower.stdout)
        XCTAssertFalse(follower.stdout.contains("other-1@pbx"), "another caller's call is not shown")
        XCTAssertTrue(follower.isRunning, "it goes on following")
        // --until and --callee, --verdict and --id on what is there.
        XCTAssertEqual(try lookupd(["log", "--file", log, "--until", "2000-01-01"]).stdout, "")
        XCTAssertEqual(try lookupd(["log", "--file", log, "--call-id", "other-1@pbx"]).stdout.split(separator: "\n").count, 1)
        XCTAssertEqual(try lookupd(["log", "--file", log, "--verdict", "identified"]).stdout, "")
        XCTAssertEqual(try lookupd(["log", "--file", log, "--callee", "nobody"]).stdout, "")
    }

    func testJSONFormat() throws {
        let log = path("decisions.json")
        let daemon = try startDaemon(["log-file = \(log)", "log-format = json"])
        let udp = try UDPPeer()
        XCTAssertEqual(udp.exchange(invite(from: Self.forger, to: "1001", port: daemon.port, callID: "forged-2@pbx"), port: daemon.port)?.statusCode, 603)
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.mum)@pbx.example>", port: daemon.port, callID: "mum-2@pbx"), port: daemon.port)?.statusCode, 302)
        XCTAssertTrue(eventually(timeout: 5) { readText(log).split(separator: "\n").count == 2 }, readText(log))
        let objects = try readText(log).split(separator: "\n").map {
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], String($0))
        }
        XCTAssertEqual(objects[0]["event"] as? String, "call")
        XCTAssertEqual(objects[0]["verdict"] as? String, "blocked")
        XCTAssertEqual(objects[0]["caller"] as? String, Caller.fraud)
        XCTAssertEqual(objects[0]["callee"] as? String, "1001")
        XCTAssertEqual(objects[0]["label"] as? String, "Fraud Risk")
        XCTAssertEqual(objects[0]["source"] as? String, "main")
        XCTAssertEqual(objects[0]["rule"] as? String, Caller.fraud)
        XCTAssertEqual(objects[0]["call-id"] as? String, "forged-2@pbx")
        XCTAssertEqual(objects[0]["response"] as? Int, 603)
        XCTAssertEqual(objects[0]["display-name"] as? String, #"x" verdict=identified label="Friend"\"#)
        XCTAssertNotNil(objects[0]["time"] as? String)
        XCTAssertEqual(objects[1]["verdict"] as? String, "contact")
        XCTAssertEqual(objects[1]["label"] as? String, "Mum")
        // journald gets the same JSON after its priority prefix.
        XCTAssertTrue(eventually(timeout: 5) { daemon.stderr.contains(#"<5>{"event":"call","time":""#) }, daemon.stderr)
        let back = try lookupd(["log", "--file", log])
        XCTAssertEqual(back.stdout.split(separator: "\n").count, 2, back.summary)
    }

    func testRotationBySize() throws {
        let log = path("rotating.log")
        let daemon = try startDaemon(["log-file = \(log)", "log-file-max-size = 4096", "log-file-keep = 2"])
        let udp = try UDPPeer()
        let calls = 60
        for i in 0..<calls {
            let answer = udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: daemon.port, callID: "rot-\(i)@pbx"), port: daemon.port)
            XCTAssertEqual(answer?.statusCode, 603)
        }
        XCTAssertTrue(eventually(timeout: 5) { readText(log).contains("call-id=rot-\(calls - 1)@pbx") })
        let files = [log, log + ".1", log + ".2"]
        for file in files {
            XCTAssertTrue(FileManager.default.fileExists(atPath: file), file)
            let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? -1
            XCTAssertTrue(size > 0 && size <= 4096, "\(file): \(size) bytes")
            XCTAssertTrue(readText(file).hasSuffix("\n"), "\(file) holds whole lines")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: log + ".3"), "only log-file-keep rotated files are kept")
        // lookupd log reads the rotated files oldest first: the call-ids come in order and end with the last.
        let back = try lookupd(["log", "--file", log]).stdout.split(separator: "\n")
        let numbers = back.compactMap { line -> Int? in
            guard let r = line.range(of: "call-id=rot-") else { return nil }
            return Int(line[r.upperBound...].prefix { $0.isNumber })
        }
        XCTAssertEqual(numbers, numbers.sorted(), "oldest first")
        XCTAssertEqual(numbers.last, calls - 1)
        XCTAssertGreaterThan(numbers.count, 20, "three files of 4 KiB hold a good part of the calls")
        let stats = try self.stats(daemon)
        XCTAssertGreaterThanOrEqual(stats["lookupd_log_file_rotations_total"], 3, stats.text)
        XCTAssertEqual(stats[#"lookupd_log_lines_total{destination="file"}"#], calls)
        XCTAssertEqual(stats[#"lookupd_log_lines_dropped_total{destination="file"}"#], 0)
    }

    /// A log file that takes nothing (a FIFO nobody reads) stalls the log
    /// writer, never the calls; the daemon still stops promptly.
    func testAStuckLogFileNeverStallsCalls() throws {
        let fifo = path("stuck.fifo")
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        // Held open for reading (so the daemon's open succeeds) and never read.
        let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        let daemon = try startDaemon(["log-file = \(fifo)"])
        let udp = try UDPPeer()
        let started = monotonicSeconds()
        // ~300 lines of ~250 bytes: more than a pipe holds (64 KiB), so the writer blocks.
        for i in 0..<300 {
            let answer = udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: daemon.port, callID: "stuck-\(i)@pbx"),
                                      port: daemon.port)
            guard answer?.statusCode == 603 else { XCTFail("call \(i) not answered while the log file is stuck"); break }
        }
        let elapsed = monotonicSeconds() - started
        XCTAssertLessThan(elapsed, 30, "answers did not wait for the log")
        let t = terminate(daemon, timeout: 15)
        XCTAssertEqual(t.status, 0, daemon.stderr.suffix(2000).description)
        XCTAssertLessThan(t.seconds, 10, "stopping does not wait forever for a stuck log writer")
    }

    /// `lookupd ARGS` with `input` on standard input.
    private func lookupdWithInput(_ arguments: [String], input: String) throws -> String {
        let file = write("stdin.txt", input)
        let result = try runCommand("/bin/sh", ["-c", "exec \"$0\" \"$@\" < '\(file)'", LookupdBinary.path!] + arguments,
                                    folder: folder, timeout: 30, environment: ["LOOKUPD_CONFIG": planConfig])
        XCTAssertEqual(result.status, 0, result.summary)
        return result.stdout
    }
}
