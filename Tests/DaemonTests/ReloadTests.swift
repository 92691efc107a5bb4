import Foundation
import Glibc
import XCTest

/// Requirement 2: reloads while calls are being screened. The directory is
/// recompiled and renamed over the configured path (as an operator or a
/// deploy script does), then SIGHUP or `lookupd reload`. No request may go
/// unanswered, every answer must be the old or the new correct one, and once
/// the new set is in force only new answers may follow.
final class ReloadTests: DaemonTestCase {
    /// Version 2 of the standard directory: two verdicts flip, one label changes.
    static let directoryV2 = Lists.directoryCSV
        .replacingOccurrences(of: "+8613800138000,block,Fraud Risk", with: "+8613800138000,identify,Fraud Risk Cleared")
        .replacingOccurrences(of: "\"Pizza Palace, Haidian\"", with: "Pizza Palace (new owner)")
        + "+8613000000001,block,Newly Blocked\n"

    /// Version 3, for the recovery after failed reloads.
    static let directoryV3 = directoryV2.replacingOccurrences(of: "Newly Blocked", with: "Blocked Since V3")

    /// What each caller gets from version 1 and version 2 (status line, label), in the daemon's defaults.
    static let expectations: [(caller: String, v1: (String, String?), v2: (String, String?))] = [
        (Caller.fraud, ("603 Decline", "Fraud Risk"), ("302 Moved Temporarily", "Fraud Risk Cleared")),
        (Caller.unknown, ("302 Moved Temporarily", nil), ("603 Decline", "Newly Blocked")),
        (Caller.pizza, ("302 Moved Temporarily", "Pizza Palace, Haidian"), ("302 Moved Temporarily", "Pizza Palace (new owner)")),
        (Caller.mum, ("302 Moved Temporarily", "Mum"), ("302 Moved Temporarily", "Mum")),
        (Caller.unicom, ("302 Moved Temporarily", "China Unicom Customer Service"), ("302 Moved Temporarily", "China Unicom Customer Service")),
    ]

    /// sipp at 500 calls/s for 7 s (one source port per call, so both workers
    /// serve); when half the calls are done, the new directory is renamed in
    /// and SIGHUP sent.
    func testSIGHUPUnderSippLoad() throws {
        _ = try requireSipp()
        let daemon = try startDaemon(["log-level = notice"])
        let port = daemon.port
        try compile(Self.directoryV2, to: "main-v2.lkd")

        func signature(_ caller: String, _ answer: (String, String?)) -> String {
            if answer.0.hasPrefix("302") {
                return answer.1.map { Answer.redirect(caller, label: $0, port: port) } ?? Answer.unlabelledRedirect(port: port)
            }
            return Answer.blocked(answer.0, label: answer.1)
        }
        let calls = Self.expectations.map { e in
            let old = signature(e.caller, e.v1), new = signature(e.caller, e.v2)
            return SippCall(caller: e.caller, want: old, alternative: old == new ? nil : new)
        }

        let rate = 500, seconds = 7
        let total = rate * seconds
        let child = daemon.child
        let newFile = path("main-v2.lkd"), configured = path("main.lkd"), callLog = path("load-calls.log")
        let reloaded = DispatchSemaphore(value: 0)
        let trigger = Recorder()
        Thread {
            defer { reloaded.signal() }
            // Wait until sipp has logged half the calls (or give up after 30 s, or when the test ends).
            let deadline = monotonicSeconds() + 30
            while !trigger.isStopped && monotonicSeconds() < deadline {
                let done = readText(callLog).utf8.reduce(0) { $0 + ($1 == 10 ? 1 : 0) }
                if done >= total / 2 {
                    guard rename(newFile, configured) == 0 else { return trigger.fail("rename: \(String(cString: strerror(errno)))") }
                    child.signal(SIGHUP)
                    return
                }
                usleep(50_000)
            }
            trigger.fail("sipp never got halfway")
        }.start()
        // Whatever happens, the thread has finished (and the daemon still runs) when the test ends.
        var joined = false
        defer {
            trigger.stop()
            if !joined { _ = reloaded.wait(timeout: .now() + 35) }
        }

        let result = try sipp("invite.xml", daemon: daemon, transport: .udpSocketPerCall, calls: calls, count: total, rate: rate,
                              recvTimeoutMs: 3000, timeoutSeconds: seconds + 30, traceMessages: false, callLog: callLog)
        joined = reloaded.wait(timeout: .now() + 10) == .success
        XCTAssertTrue(joined, "the reload thread did not finish")
        XCTAssertNil(trigger.failure)
        // Zero lost (no retransmissions, -nr: a lost INVITE or answer fails its call) and zero wrong.
        assertSippPassed(result, calls: total, "sipp load across a SIGHUP reload")

        // sipp counted every call successful, and a call only succeeds with
        // the old or the new answer, so lookupd's answers are proven above.
        // The log lines are sipp's record of when each answer came, for the
        // ordering checks below. In full sanitizer runs (never alone, never in
        // plain runs) one or two of 3,500 lines were missing from sipp's log
        // although sipp counted those calls successful; the cause is not
        // found yet, so a few are allowed and what is missing is printed.
        let log = result.calls
        if log.count != total {
            let logged = Set(log.map(\.call))
            let missing = (1...total).filter { !logged.contains($0) }
            let unread = result.log.split(separator: "\n").filter { SippCallLog($0) == nil }
            print("sipp call log: \(log.count) lines for \(total) calls; missing calls \(missing.prefix(10)); unread lines \(unread.prefix(5))")
        }
        XCTAssertGreaterThanOrEqual(log.count, total - 5, "one log line per call")
        XCTAssertEqual(Set(log.map(\.call)).count, log.count, "a call logged twice")
        let changed = Set(calls.filter { $0.alternative != nil }.map(\.caller))
        let firstNew = log.filter { $0.verdict == "alternative" }.map(\.received).min()
        guard let firstNew else {
            return XCTFail("no call ever got the new answer: the reload did not take effect")
        }
        let old = log.filter { changed.contains($0.caller) && $0.verdict == "want" }
        XCTAssertGreaterThan(old.count, total / 10, "the old set should have served the first half")
        // Once one answer came from the new set, every call placed afterwards gets the new answer.
        let lateOld = old.filter { $0.sent > firstNew }
        XCTAssertTrue(lateOld.isEmpty, "\(lateOld.count) calls placed after the first new answer still got the old one, e.g. \(lateOld.prefix(3).map { "call \($0.call) \($0.caller) sent \($0.sent) > \(firstNew): \($0.got)" })")
        let new = log.filter { $0.verdict == "alternative" }
        XCTAssertGreaterThan(new.count, total / 10, "the new set should have served the second half")
        XCTAssertEqual(log.filter { $0.verdict == "MISMATCH" }.count, 0)

        let stats = try stats(daemon)
        XCTAssertEqual(stats["lookupd_reloads_total"], 1, stats.text)
        XCTAssertEqual(stats["lookupd_reload_failures_total"], 0, stats.text)
        XCTAssertEqual(stats["lookupd_generation"], 2, stats.text)
        XCTAssertEqual(stats["lookupd_requests_total{method=\"INVITE\",transport=\"udp\"}"], total, "every INVITE reached the daemon\n\(stats.text)")
        XCTAssertEqual(stats["lookupd_responses_total{code=\"302\"}"] + stats["lookupd_responses_total{code=\"603\"}"], total, stats.text)
        XCTAssertEqual(stats["lookupd_send_errors_total"], 0, stats.text)
        let workers = stats.family("lookupd_worker_requests_total")
        XCTAssertTrue(workers.count == 2 && workers.values.allSatisfy { $0 > total / 10 }, "both workers should have served the calls: \(workers)")
    }

    /// Closed-loop senders (a new source port per request, so both workers
    /// serve them) while `lookupd reload` runs: every
    /// request sent after the command returned gets the new answer. Then
    /// failed reloads (truncated file, damaged file, broken config) keep the
    /// set in force, and a good file recovers. With directory-copy = yes,
    /// whose reload verifies the whole file: without the copy a damaged
    /// block is found on first touch and answered as unknown instead
    /// (FileReplacementTests+InPlace).
    func testReloadCommandUnderTrafficAndFailedReloadsKeepTheOldSet() throws {
        let daemon = try startDaemon(["log-level = notice", "directory-copy = yes"])
        let traffic = CallTraffic(callers: Self.expectations.map(\.caller), port: daemon.port)
        defer { traffic.stop() }
        let reload = try installVersion2AndReload(daemon, under: traffic)
        XCTAssertTrue(reload.stdout.hasPrefix("reloaded (control socket) generation 2"), reload.stdout)
        let workers = try stats(daemon).family("lookupd_worker_requests_total")
        XCTAssertEqual(workers.count, 2)
        XCTAssertTrue(workers.values.allSatisfy { $0 > 100 }, "both workers should have served the load: \(workers)")

        try assertFailedReloadsKeepServing(daemon, generation: 2)
    }

    /// The same switch over TCP, with calls pipelined on each connection: a request that
    /// arrives while the worker is still busy with the ones before it, after `lookupd
    /// reload` returned, is answered from the new set.
    func testReloadUnderPipelinedTCPTraffic() throws {
        let daemon = try startDaemon(["log-level = notice"])
        let traffic = CallTraffic(callers: Self.expectations.map(\.caller), port: daemon.port, senders: 4, pipelined: 256)
        defer { traffic.stop() }
        _ = try installVersion2AndReload(daemon, under: traffic, by: "`lookupd reload` (TCP, pipelined)")
        let stats = try stats(daemon)
        XCTAssertGreaterThan(stats[#"lookupd_requests_total{method="INVITE",transport="tcp"}"#] ?? 0, 200, stats.text)
    }

    /// With `traffic` running for 0.8 s: version 2 compiled and renamed over the configured
    /// file, `lookupd reload`, 0.8 s more; then the traffic stopped and checked to have
    /// switched once, no call placed after the reload returned answered from version 1.
    private func installVersion2AndReload(_ daemon: LookupdDaemon, under traffic: CallTraffic,
                                          by what: String = "`lookupd reload`",
                                          file: StaticString = #filePath, line: UInt = #line) throws -> RunResult {
        try compile(Self.directoryV2, to: "main-v2.lkd")
        usleep(800_000)
        XCTAssertEqual(rename(path("main-v2.lkd"), path("main.lkd")), 0, file: file, line: line)
        let reloadStarted = monotonicSeconds()
        let reload = try lookupd(["reload", "--config", daemon.configPath])
        let reloadDone = monotonicSeconds()
        usleep(800_000)
        traffic.stop()
        XCTAssertEqual(reload.status, 0, reload.summary, file: file, line: line)
        traffic.assertSwitchedOnce(from: \.v1, to: \.v2, of: Self.expectations, started: reloadStarted, done: reloadDone,
                                   by: what, file: file, line: line)
        return reload
    }

    /// Continues from generation `generation` serving version 2.
    private func assertFailedReloadsKeepServing(_ daemon: LookupdDaemon, generation: Int) throws {
        let configured = path("main.lkd")
        let good = FileManager.default.contents(atPath: configured)!

        // 1. A truncated directory, renamed in: `lookupd reload` says why and exits 1.
        write("truncated.lkd", good.prefix(good.count * 2 / 3))
        XCTAssertEqual(rename(path("truncated.lkd"), configured), 0)
        let refused = try lookupd(["reload", "--config", daemon.configPath])
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertTrue(refused.stdout.isEmpty, refused.summary)
        XCTAssertTrue(refused.stderr.hasPrefix("error: reload (control socket) failed, still serving generation \(generation): "), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("\(configured): truncated"), refused.stderr)
        assertServesVersion2(daemon, "after the refused reload of a truncated file")
        var stats = try stats(daemon)
        XCTAssertEqual(stats["lookupd_reload_failures_total"], 1, stats.text)
        XCTAssertEqual(stats["lookupd_reloads_total"], 1, stats.text)
        XCTAssertEqual(stats["lookupd_generation"], generation, stats.text)
        XCTAssertTrue(stats.text.contains("# last reload failure: \(configured): truncated"), stats.text)

        // 2. A damaged one (same size, one byte flipped near the end), by SIGHUP.
        var damaged = good
        damaged[damaged.count - 10] ^= 0x5A
        write("damaged.lkd", damaged)
        XCTAssertEqual(rename(path("damaged.lkd"), configured), 0)
        daemon.signal(SIGHUP)
        XCTAssertTrue(eventually(timeout: 5) { (try? self.stats(daemon))?["lookupd_reload_failures_total"] == 2 },
                      "the SIGHUP reload of a damaged file should be counted as failed")
        XCTAssertTrue(daemon.isRunning)
        assertServesVersion2(daemon, "after the refused SIGHUP reload of a damaged file")

        // 3. A broken config: the error names file and line. (--socket: the CLI cannot read the config either.)
        let config = readText(daemon.configPath)
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, config + "block-respons = 607\n")
        let badConfig = try lookupd(["reload", "--socket", daemon.controlSocket])
        XCTAssertEqual(badConfig.status, 1, badConfig.summary)
        let badLine = config.split(separator: "\n", omittingEmptySubsequences: false).count
        XCTAssertTrue(badConfig.stderr.contains("\(daemon.configPath):\(badLine): unknown key 'block-respons'"), badConfig.stderr)
        assertServesVersion2(daemon, "after the refused reload of a broken config")
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, config)

        // 4. A good file again: reload works, and the new set is served.
        try compile(Self.directoryV3, to: "main-v3.lkd")
        XCTAssertEqual(rename(path("main-v3.lkd"), configured), 0)
        let recovered = try lookupd(["reload", "--config", daemon.configPath])
        XCTAssertEqual(recovered.status, 0, recovered.summary)
        XCTAssertTrue(recovered.stdout.contains("generation \(generation + 1)"), recovered.stdout)
        let peer = try UDPPeer()
        let answer = peer.exchange(invite(from: "<sip:\(Caller.unknown)@pbx.example>", port: daemon.port), port: daemon.port)
        XCTAssertEqual(answer?.statusLine, "603 Decline")
        XCTAssertEqual(answer?.header("X-Caller-Label"), "\"Blocked Since V3\"")
        stats = try self.stats(daemon)
        XCTAssertEqual(stats["lookupd_reload_failures_total"], 3, stats.text)
        XCTAssertEqual(stats["lookupd_reloads_total"], 2, stats.text)
        XCTAssertEqual(stats["lookupd_generation"], generation + 1, stats.text)
        XCTAssertFalse(stats.text.contains("# last reload failure"), "a successful reload clears the last failure\n\(stats.text)")
    }

    private func assertServesVersion2(_ daemon: LookupdDaemon, _ when: String, file: StaticString = #filePath, line: UInt = #line) {
        guard let peer = try? UDPPeer() else { return XCTFail("socket", file: file, line: line) }
        for e in Self.expectations {
            let answer = peer.exchange(invite(from: "<sip:\(e.caller)@pbx.example>", port: daemon.port), port: daemon.port)
            XCTAssertEqual(answer?.statusLine, e.v2.0, "\(e.caller) \(when)", file: file, line: line)
            XCTAssertEqual(answer?.header("X-Caller-Label"), e.v2.1.map(Answer.quoted), "\(e.caller) \(when)", file: file, line: line)
        }
    }
}
