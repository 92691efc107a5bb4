import Foundation
import Glibc
import XCTest

/// `lookupd update` against a running daemon: the feed server publishes version 2 of the
/// standard directory while closed-loop senders place calls; the update installs it and asks
/// the daemon to reload over the control socket. Every call is answered, each answer is the
/// old or the new one, and every call placed after the update returned gets the new one.
final class FeedInstallTests: DaemonTestCase {
    func testUpdateUnderTrafficSwapsTheListWithoutLosingACall() throws {
        let server = try FeedServer(root: path("www"))
        defer { server.stop() }
        try compile(Lists.directoryCSV, to: "spam.lkd")
        server.publish("spam.csv", ReloadTests.directoryV2)
        let daemon = try startDaemon(["log-level = notice", "directory-copy = yes", "feed = spam \(server.url("f/spam.csv")) into=spam.lkd"],
                                     directories: ["spam.lkd name=spam"])
        let port = daemon.port

        let traffic = CallTraffic(callers: ReloadTests.expectations.map(\.caller), port: port)
        defer { traffic.stop() }

        usleep(800_000)
        let updateStarted = monotonicSeconds()
        let update = try lookupd(["update", "--config", daemon.configPath])
        let updateDone = monotonicSeconds()
        usleep(800_000)
        traffic.stop()

        XCTAssertEqual(update.status, 0, update.summary)
        XCTAssertTrue(update.stdout.contains("spam: downloaded"), update.stdout)
        XCTAssertTrue(update.stdout.contains("daemon: reloaded (control socket) generation 2"), update.stdout)
        traffic.assertSwitchedOnce(from: \.v1, to: \.v2, of: ReloadTests.expectations, started: updateStarted, done: updateDone, by: "`lookupd update`")

        // The feed in the daemon's stats, from the state file lookupd update wrote.
        var stats = try stats(daemon)
        XCTAssertEqual(stats["lookupd_generation"], 2, stats.text)
        XCTAssertEqual(stats["lookupd_reloads_total"], 1, stats.text)
        let info = stats.family("lookupd_feed_info")
        XCTAssertEqual(info.count, 1, stats.text)
        let series = try XCTUnwrap(info.keys.first)
        let version = try XCTUnwrap(series.split(separator: "\"").drop { !$0.hasSuffix("version=") }.dropFirst().first, stats.text)
        XCTAssertEqual(version.count, 14, "no manifest: the version is the install time \(series)")
        XCTAssertTrue(series.contains("feed=\"spam\""), stats.text)
        XCTAssertTrue(series.contains("into=\"\(path("spam.lkd"))\""), stats.text)
        XCTAssertEqual(stats[#"lookupd_feed_entries{feed="spam"}"#], 9, stats.text)
        XCTAssertEqual(stats[#"lookupd_feed_last_update_failed{feed="spam"}"#], 0, stats.text)
        let updated = stats[#"lookupd_feed_updated_timestamp_seconds{feed="spam"}"#]
        XCTAssertLessThanOrEqual(abs(updated - Int(time(nil))), 60, stats.text)
        XCTAssertTrue(stats.text.contains("# TYPE lookupd_feed_info gauge"), stats.text)
        XCTAssertTrue(stats.text.contains("lookupd_directory_version{directory=\"spam\""), stats.text)
        XCTAssertTrue(stats.text.contains("} \(version)\n"), "the directory version is the feed's: \(stats.text)")

        // Unchanged: one 304, nothing installed, no reload.
        let again = try lookupd(["update", "--config", daemon.configPath])
        XCTAssertEqual(again.status, 0, again.summary)
        XCTAssertTrue(again.stdout.contains("spam: not modified (HTTP 304)"), again.stdout)
        stats = try self.stats(daemon)
        XCTAssertEqual(stats["lookupd_generation"], 2, stats.text)

        // A broken download: the daemon keeps serving version 2, and the stats say the feed failed.
        server.publish("spam.csv", "number,action,label\nnot-a-number,block,x\n")
        let broken = try lookupd(["update", "--config", daemon.configPath])
        XCTAssertEqual(broken.status, 1, broken.summary)
        stats = try self.stats(daemon)
        XCTAssertEqual(stats["lookupd_generation"], 2, stats.text)
        XCTAssertEqual(stats[#"lookupd_feed_last_update_failed{feed="spam"}"#], 1, stats.text)
        XCTAssertEqual(stats[#"lookupd_feed_entries{feed="spam"}"#], 9, stats.text)
        let peer = try UDPPeer()
        let answer = peer.exchange(invite(from: "<sip:\(Caller.unknown)@pbx.example>", port: port), port: port)
        XCTAssertEqual(answer?.statusLine, "603 Decline")
        XCTAssertEqual(answer?.header("X-Caller-Label"), "\"Newly Blocked\"")

        // Rollback puts version 1 back and reloads.
        let rollback = try lookupd(["update", "--config", daemon.configPath, "--rollback", "spam"])
        XCTAssertEqual(rollback.status, 0, rollback.summary)
        XCTAssertTrue(rollback.stdout.contains("daemon: reloaded"), rollback.stdout)
        let rolled = peer.exchange(invite(from: "<sip:\(Caller.unknown)@pbx.example>", port: port), port: port)
        XCTAssertEqual(rolled?.statusLine, "302 Moved Temporarily")
    }

    /// D7: an update installs a list but the daemon refuses the reload (its state disk is
    /// full: ENOSPC injected into its private copy through LOOKUPD_TEST_FAULTS, so the daemon
    /// runs with directory-copy = yes: without the copy a reload writes nothing). The next run
    /// finds the feed unchanged (304) and still asks the daemon again, which then loads it;
    /// the run after that has nothing waiting. A stale temporary of a killed update (D9) is
    /// removed by the next run even when nothing is downloaded.
    func testARefusedReloadIsAskedForAgain() throws {
        let server = try FeedServer(root: path("www"))
        defer { server.stop() }
        try compile(Lists.directoryCSV, to: "spam.lkd")
        server.publish("spam.csv", ReloadTests.directoryV2)
        // The start copies spam.lkd once; the first reload's copy finds the disk full.
        let daemon = try startDaemon(["log-level = notice", "directory-copy = yes", "feed = spam \(server.url("f/spam.csv")) into=spam.lkd"],
                                     directories: ["spam.lkd name=spam"],
                                     environment: ["LOOKUPD_TEST_FAULTS": "copy_file_range:ENOSPC:skip=1:times=1"])
        let peer = try UDPPeer()
        func newlyBlocked() -> Bool {
            peer.exchange(invite(from: "<sip:\(Caller.unknown)@pbx.example>", port: daemon.port), port: daemon.port)?.statusLine == "603 Decline"
        }
        let first = try lookupd(["update", "--config", daemon.configPath])
        XCTAssertEqual(first.status, 1, first.summary)
        XCTAssertTrue(first.stdout.contains("spam: downloaded"), first.stdout)
        XCTAssertTrue((first.stdout + first.stderr).contains("No space left on device"), first.summary)
        XCTAssertFalse(newlyBlocked(), "the daemon refused the new list")

        let stale = ".spam.lkd.new.lookupd-tmp.999999999.beef"
        write(stale, String(repeating: "x", count: 4096))
        let second = try lookupd(["update", "--config", daemon.configPath])
        XCTAssertEqual(second.status, 0, second.summary)
        XCTAssertTrue(second.stdout.contains("spam: not modified (HTTP 304)"), second.stdout)
        XCTAssertTrue(second.stdout.contains("daemon: reloaded"), "the refused reload is asked for again: \(second.stdout)")
        XCTAssertTrue(newlyBlocked(), "the list installed by the first run is in force")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path(stale)), "a killed update's temporary is removed")

        let third = try lookupd(["update", "--config", daemon.configPath])
        XCTAssertEqual(third.status, 0, third.summary)
        XCTAssertFalse(third.stdout.contains("daemon:"), "nothing waits any more: \(third.stdout)")
        XCTAssertEqual(try stats(daemon)["lookupd_reloads_total"], 1)
    }
}
