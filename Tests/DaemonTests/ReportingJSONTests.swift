import Foundation
import Glibc
import XCTest

/// `--json` of the commands that ask the running daemon (`stats`, `stats --summary`,
/// `reload`) and of `update`, parsed with JSONSerialization and held against the daemon's
/// own answers (its SIP answers, `lookupd stats` text, `lookupd inspect --json` of the file);
/// and `lookupd reload` saying what was applied, what waits for a restart and what was
/// skipped, with its exit statuses (lookupd(8)).
final class ReportingJSONTests: DaemonTestCase {
    private func object(_ text: String, _ what: String, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        XCTAssertEqual(text.filter { $0 == "\n" }.count, 1, "\(what): one line of JSON: \(text)", file: file, line: line)
        let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8))
        return try XCTUnwrap(parsed as? [String: Any], "\(what): an object: \(text)", file: file, line: line)
    }

    func testStatsJSONAndSummaryCountTheCallsTheDaemonAnswered() throws {
        let daemon = try startDaemon()
        let peer = try UDPPeer()
        for (caller, code) in [(Caller.fraud, 603), (Caller.blockedUnlabelled, 603), (Caller.pizza, 302), (Caller.unknown, 302)] {
            XCTAssertEqual(peer.exchange(invite(from: "<sip:\(caller)@pbx.example>", port: daemon.port), port: daemon.port)?.statusCode, code, caller)
        }

        let json = try lookupd(["stats", "--json", "--config", daemon.configPath])
        XCTAssertEqual(json.status, 0, json.summary)
        let text = try stats(daemon)
        let metrics = try XCTUnwrap(try object(json.stdout, "stats --json")["metrics"] as? [String: [String: Any]])
        let verdicts = try XCTUnwrap(metrics["lookupd_verdicts_total"])
        XCTAssertEqual(verdicts["type"] as? String, "counter")
        var byVerdict: [String: Int] = [:]
        for sample in try XCTUnwrap(verdicts["samples"] as? [[String: Any]]) {
            let labels = try XCTUnwrap(sample["labels"] as? [String: String])
            byVerdict[labels["verdict"] ?? "?"] = sample["value"] as? Int
        }
        XCTAssertEqual(byVerdict["blocked"], 2, "\(byVerdict)")
        XCTAssertEqual(byVerdict["identified"], 1, "\(byVerdict)")
        XCTAssertEqual(byVerdict["unknown"], 1, "\(byVerdict)")
        // Every series of the text is in the object with the same value (uptime and the
        // latency histogram move between the two asks; the counters do not, no call was placed).
        var series = 0
        for (name, family) in metrics where !name.contains("uptime") && !name.contains("seconds") {
            for sample in try XCTUnwrap(family["samples"] as? [[String: Any]]) {
                let labels = (sample["labels"] as? [String: String]) ?? [:]
                let key = (sample["name"] as? String ?? name) + (labels.isEmpty ? "" : "{" + text.labelOrder(of: sample["name"] as? String ?? name, labels) + "}")
                guard let value = text.values[key] else { XCTFail("\(key) of --json is not in the text:\n\(text.text)"); continue }
                XCTAssertEqual((sample["value"] as? NSNumber)?.doubleValue, value, key)
                series += 1
            }
        }
        XCTAssertGreaterThan(series, 30, "the object holds the text's series")

        let summary = try lookupd(["stats", "--summary", "--json", "--config", daemon.configPath])
        XCTAssertEqual(summary.status, 0, summary.summary)
        let s = try object(summary.stdout, "stats --summary --json")
        for window in ["last_minute", "last_hour", "since_start"] {
            let counts = try XCTUnwrap(s[window] as? [String: Int], window)
            XCTAssertEqual(counts["blocked"], 2, "\(window): \(counts)")
            XCTAssertEqual(counts["identified"], 1, "\(window): \(counts)")
            XCTAssertEqual(counts["unknown"], 1, "\(window): \(counts)")
            XCTAssertEqual(counts["total"], 4, "\(window): \(counts)")
        }
        XCTAssertEqual(s["verdicts"] as? [String], ["blocked", "identified", "contact", "unknown", "anonymous", "invalid", "bypassed"])
        let table = try lookupd(["stats", "--summary", "--config", daemon.configPath])
        XCTAssertEqual(table.status, 0, table.summary)
        let rows = table.stdout.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        XCTAssertTrue(rows.contains(["blocked", "2", "2", "2"]), table.stdout)
        XCTAssertTrue(rows.contains(["total", "4", "4", "4"]), table.stdout)
        XCTAssertEqual(rows.dropFirst().first, ["verdict", "last", "minute", "last", "hour", "since", "start"], table.stdout)

        // No daemon: exit 1, nothing on standard output, the reason on standard error.
        let none = try lookupd(["stats", "--json", "--socket", path("nothing.sock")])
        XCTAssertEqual(none.status, 1, none.summary)
        XCTAssertEqual(none.stdout, "")
        XCTAssertTrue(none.stderr.hasPrefix("lookupd: error: "), none.stderr)
    }

    func testReloadReportsAppliedRestartAndSkippedWithItsExitStatus() throws {
        let daemon = try startDaemon()
        let config = readText(daemon.configPath)
        let peer = try UDPPeer()
        func answer(_ caller: String) -> SIPAnswer? {
            peer.exchange(invite(from: "<sip:\(caller)@pbx.example>", port: daemon.port), port: daemon.port)
        }
        func reload(_ extra: [String] = []) throws -> (RunResult, [String: Any]) {
            // --socket: the CLI itself reads no config (one step breaks it on purpose).
            let r = try lookupd(["reload", "--json", "--socket", daemon.controlSocket] + extra, timeout: 30)
            return (r, try object(r.stdout, "reload --json (\(r.summary))"))
        }

        // Nothing changed: 0, every directory served with what inspect reads from the file.
        var (r, report) = try reload()
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(report["outcome"] as? String, "applied")
        XCTAssertEqual(report["generation"] as? Int, 2)
        XCTAssertEqual(report["previous_generation"] as? Int, 1)
        XCTAssertEqual(report["applied"] as? [String], [])
        XCTAssertEqual(report["needs_restart"] as? [String], [])
        XCTAssertTrue(report["error"] is NSNull)
        let inspect = try lookupd(["inspect", "--json", path("main.lkd")])
        let file = try object(inspect.stdout, "inspect --json")
        let served = try XCTUnwrap((report["directories"] as? [[String: Any]])?.first)
        XCTAssertEqual(served["name"] as? String, "main")
        XCTAssertEqual(served["numbers"] as? Int, file["numbers"] as? Int)
        XCTAssertEqual(served["prefix_rules"] as? Int, file["prefix_rules"] as? Int)
        XCTAssertEqual(served["changed"] as? Bool, false)

        // A key the daemon takes at once: applied, and the daemon answers by it.
        XCTAssertEqual(answer(Caller.unknown)?.statusCode, 302)
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, config + "unknown-response = 404\n")
        (r, report) = try reload()
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(report["applied"] as? [String], ["unknown-response"])
        XCTAssertEqual(answer(Caller.unknown)?.statusCode, 404)

        // A key that needs a restart: 3, named, and still named by the next reload (the old
        // value is still in force); the text says it too.
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, config.replacingOccurrences(of: "workers = 2", with: "workers = 1") + "unknown-response = 404\n")
        (r, report) = try reload()
        XCTAssertEqual(r.status, 3, r.summary)
        XCTAssertEqual(report["outcome"] as? String, "restart_needed")
        XCTAssertEqual(report["needs_restart"] as? [String], ["workers"])
        XCTAssertEqual(report["applied"] as? [String], [])
        let text = try lookupd(["reload", "--config", daemon.configPath], timeout: 30)
        XCTAssertEqual(text.status, 3, text.summary)
        XCTAssertTrue(text.stdout.hasPrefix("reloaded (control socket) generation 5"), text.stdout)
        XCTAssertTrue(text.stdout.contains("\nneeds restart: workers (the old values stay in force until the daemon restarts)\n"), text.stdout)
        XCTAssertEqual(try stats(daemon)["lookupd_workers"], 2, "the daemon still runs two workers")

        // A directory read with a note (compiled under another plan): still 0, the note shown.
        let compiled = try lookupd(["compile", "--country", "US", "-q", write("us.csv", "number,action,label\n+12025550143,block,Spam\n"), "-o", path("us.lkd")])
        XCTAssertEqual(compiled.status, 0, compiled.summary)
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, config.replacingOccurrences(of: "workers = 2", with: "workers = 1") + "directory = us.lkd name=us\n")
        (r, report) = try reload()
        XCTAssertEqual(r.status, 3, r.summary)
        var notes = try XCTUnwrap(report["notes"] as? [[String: Any]])
        XCTAssertEqual(notes.count, 1, "\(notes)")
        XCTAssertEqual(notes.first?["file"] as? String, path("us.lkd"))
        XCTAssertTrue((notes.first?["message"] as? String)?.contains("compiled under the numbering plan") ?? false, "\(notes)")
        XCTAssertEqual((report["skipped"] as? [[String: Any]])?.count, 0)
        let added = try XCTUnwrap((report["directories"] as? [[String: Any]])?.last)
        XCTAssertEqual(added["name"] as? String, "us")
        XCTAssertEqual(added["changed"] as? Bool, true, "a directory new in this reload")

        // Back to the started workers, plus a contacts file left out (two for one callee): 4, the file named.
        try FileManager.default.createDirectory(atPath: path("callees"), withIntermediateDirectories: true)
        write("callees/1001.csv", "name,number\nBoss,+8613700000000\n")
        write("callees/1001.vcf", Lists.contactsVCF)
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, config + "directory = us.lkd name=us\ncontacts-dir = callees\n")
        (r, report) = try reload()
        XCTAssertEqual(r.status, 4, r.summary)
        XCTAssertEqual(report["outcome"] as? String, "skipped")
        XCTAssertEqual(report["needs_restart"] as? [String], [])
        XCTAssertEqual(report["applied"] as? [String], ["contacts-dir", "workers"])
        let skipped = try XCTUnwrap(report["skipped"] as? [[String: Any]])
        XCTAssertEqual(skipped.count, 1, "\(skipped)")
        XCTAssertEqual(skipped.first?["file"] as? String, path("callees/1001.vcf"))
        XCTAssertEqual(skipped.first?["message"] as? String, "skipped: 1001.csv already holds the contacts of callee 1001")
        notes = try XCTUnwrap(report["notes"] as? [[String: Any]])
        XCTAssertEqual(notes.count, 1, "the plan note is still there: \(notes)")
        let us = try XCTUnwrap((report["directories"] as? [[String: Any]])?.last)
        XCTAssertEqual(us["name"] as? String, "us")
        XCTAssertEqual(us["numbers"] as? Int, 1)
        XCTAssertEqual(us["changed"] as? Bool, false, "served since the reload before")

        // Refused: 1, the old set stays, the report says why (file:line) and is still parseable.
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, config + "block-respons = 607\n")
        (r, report) = try reload()
        XCTAssertEqual(r.status, 1, r.summary)
        XCTAssertEqual(report["outcome"] as? String, "failed")
        XCTAssertEqual(report["generation"] as? Int, 7)
        let line = config.split(separator: "\n", omittingEmptySubsequences: false).count
        XCTAssertTrue((report["error"] as? String)?.contains("\(daemon.configPath):\(line): unknown key 'block-respons'") ?? false, "\(report)")
        let refused = try lookupd(["reload", "--socket", daemon.controlSocket], timeout: 30)
        XCTAssertEqual(refused.status, 1)
        XCTAssertEqual(refused.stdout, "")
        XCTAssertTrue(refused.stderr.hasPrefix("error: reload (control socket) failed, still serving generation 7: "), refused.stderr)

        // No daemon: 1, the reason on standard error.
        let none = try lookupd(["reload", "--json", "--socket", path("nothing.sock")])
        XCTAssertEqual(none.status, 1, none.summary)
        XCTAssertEqual(none.stdout, "")
        XCTAssertTrue(none.stderr.hasPrefix("lookupd: error: "), none.stderr)
    }

    func testUpdateJSONNamesTheInstallAndTheDaemonsReload() throws {
        let server = try FeedServer(root: path("www"))
        defer { server.stop() }
        try compile(Lists.directoryCSV, to: "spam.lkd")
        server.publish("spam.csv", ReloadTests.directoryV2)
        let daemon = try startDaemon(["feed = spam \(server.url("f/spam.csv")) into=spam.lkd"], directories: ["spam.lkd name=spam"])

        let update = try lookupd(["update", "--json", "--config", daemon.configPath])
        XCTAssertEqual(update.status, 0, update.summary)
        let u = try object(update.stdout, "update --json")
        XCTAssertEqual(u["succeeded"] as? Bool, true)
        XCTAssertEqual(u["installed"] as? [String], [path("spam.lkd")])
        XCTAssertEqual(u["failed"] as? [String], [])
        let reload = try XCTUnwrap(u["reload"] as? [String: Any])
        XCTAssertEqual(reload["outcome"] as? String, "reloaded")
        XCTAssertTrue((reload["message"] as? String)?.hasPrefix("reloaded (control socket) generation 2") ?? false, "\(reload)")
        XCTAssertEqual(try stats(daemon)["lookupd_generation"], 2)
        let messages = try XCTUnwrap(u["messages"] as? [[String: String]])
        XCTAssertTrue(messages.contains { $0["message"]?.hasPrefix("spam: downloaded") ?? false }, "\(messages)")

        // A feed the server no longer has fails with exit 1, still one object.
        try FileManager.default.removeItem(atPath: server.root + "/spam.csv")
        let failed = try lookupd(["update", "--json", "--force", "--config", daemon.configPath])
        XCTAssertEqual(failed.status, 1, failed.summary)
        let f = try object(failed.stdout, "failed update --json")
        XCTAssertEqual(f["succeeded"] as? Bool, false)
        XCTAssertEqual(f["failed"] as? [String], ["spam"])
        XCTAssertTrue(failed.stderr.contains("lookupd: error: "), failed.stderr)
    }
}

private extension Stats {
    /// The text's series key for these labels: the exposition's label order is the writer's,
    /// so it is taken from the text itself.
    func labelOrder(of name: String, _ labels: [String: String]) -> String {
        let candidates = values.keys.filter { $0.hasPrefix(name + "{") }
        for key in candidates {
            let inner = key.dropFirst(name.count + 1).dropLast()
            let pairs = inner.split(separator: ",").compactMap { pair -> (String, String)? in
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2 else { return nil }
                return (parts[0], parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
            }
            if pairs.count == labels.count, pairs.allSatisfy({ labels[$0.0] == $0.1 }) { return String(inner) }
        }
        return labels.map { "\($0.key)=\"\($0.value)\"" }.sorted().joined(separator: ",")
    }
}
