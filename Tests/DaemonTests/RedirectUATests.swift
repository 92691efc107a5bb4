import Foundation
import Glibc
import XCTest

/// baresip (Debian package baresip). CI installs it with scripts/install-deps.
enum BaresipBinary {
    static let path: String? = installedProgram("baresip", variable: "BARESIP_BINARY")
}

/// Issue 17, item 8: redirect mode with a real user agent that follows the 302 (RFC 3261
/// §8.1.3.4), on 127.0.0.1 only. With `redirect-target` an identified caller's call completes
/// at the PBX (a sipp UAS); a UA sent back to lookupd (no redirect-target, or lookupd as its
/// outbound proxy) gets 482 once and stops, screened and logged once.
final class RedirectUATests: IntegrationTestCase {
    override class var rejectionsCarryLabel: Bool { false }

    /// A baresip that dials `uri` at start and quits after `seconds`: no audio device (a sine
    /// source, /dev/null as player), no registration, SIP trace on stdout.
    func startUA(_ name: String, dial uri: String, outboundProxy: UInt16? = nil, seconds: Int) throws -> ChildProcess {
        let baresip = try XCTUnwrap(BaresipBinary.path)
        let folder = path("ua-" + name)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let modules = "/usr/lib/baresip/modules"
        _ = write("ua-\(name)/config", """
            poll_method epoll
            sip_listen 127.0.0.1:\(freeLoopbackPort())
            sip_trans_def udp
            audio_player aufile,/dev/null
            audio_alert aufile,/dev/null
            audio_source ausine,440
            module_path \(modules)
            module g711.so
            module ausine.so
            module aufile.so
            module_app account.so
            module_app menu.so

            """)
        var account = "<sip:\(Caller.unicom)@127.0.0.1>;regint=0;audio_codecs=PCMU"
        if let outboundProxy { account += ";outbound=\"sip:127.0.0.1:\(outboundProxy)\"" }
        _ = write("ua-\(name)/accounts", account + "\n")
        return track(try ChildProcess(executable: baresip, arguments: ["-f", folder, "-s", "-t", String(seconds), "-e", "/dial \(uri)"],
                                      folder: self.folder, name: "baresip-" + name))
    }

    func testBaresipCompletesACallThroughRedirectModeAndNeverLoops() throws {
        guard BaresipBinary.path != nil else { throw XCTSkip("baresip is not installed (scripts/install-deps installs it)") }
        let started = monotonicSeconds()
        let pbx = try startPBX("redirect-pbx.xml", transport: .udp, expect: [], count: 1, timeoutSeconds: 30)
        let log = path("decisions.log")
        let target = try startDaemon(["redirect-target = sip:127.0.0.1:\(pbx.port);transport=udp", "log-file = \(log)"], name: "target")
        let plainLog = path("plain-decisions.log")
        let plain = try startDaemon(["log-file = \(plainLog)"], name: "plain")

        // 1. The caller dials lookupd; the 302 sends it to the PBX, where the call completes.
        // 2. A UA with lookupd as its outbound proxy: the INVITE to the PBX comes back through
        //    lookupd with its mark. 3. No redirect-target: the 302 names lookupd itself.
        let caller = try startUA("caller", dial: "sip:1001@127.0.0.1:\(target.port)", seconds: 3)
        let proxied = try startUA("proxied", dial: "sip:1002@127.0.0.1:\(freeLoopbackPort())", outboundProxy: target.port, seconds: 3)
        let direct = try startUA("direct", dial: "sip:1003@127.0.0.1:\(plain.port)", seconds: 3)
        for ua in [caller, proxied, direct] {
            XCTAssertTrue(ua.wait(timeout: 20), "\(ua.name) quits after 3 s")
        }

        // The PBX saw the followed INVITE (its Request-URI checked by the scenario), answered
        // it, got the ACK and the BYE: sipp exits 0 after its one call.
        XCTAssertTrue(pbx.child.wait(timeout: 15), pbx.report)
        XCTAssertEqual(pbx.child.status, 0, pbx.report)
        XCTAssertTrue(pbx.log.contains("call=1 ACK"), pbx.report)
        XCTAssertTrue(caller.stdout.contains("SIP/2.0 302 Moved Temporarily"), caller.stdout.suffix(4000).description)

        // The other two were stopped by 482, once: each call screened and logged once (a
        // retransmission of its first INVITE keeps the decision id), never sent round again.
        for (ua, callee, file) in [(proxied, "1002", log), (direct, "1003", plainLog)] {
            XCTAssertTrue(ua.stdout.contains("482 Loop Detected"), "\(ua.name): \(ua.stdout.suffix(4000))")
            let lines = readText(file).split(separator: "\n").filter { $0.contains(" callee=\(callee) ") }
            let ids = Set(lines.compactMap { $0.split(separator: " ").first { $0.hasPrefix("id=") } })
            XCTAssertEqual(ids.count, 1, "\(ua.name): one decision: \(lines)")
        }
        let targetStats = try stats(target), plainStats = try stats(plain)
        let invites = #"lookupd_requests_total{method="INVITE",transport="udp"}"#
        let loops = #"lookupd_refused_total{reason="redirect_loop_482"}"#
        // caller 1 + proxied 2; direct 2 (a UDP retransmission at most doubles them).
        XCTAssertTrue((3...6).contains(targetStats[invites]), "\(targetStats[invites]) INVITEs")
        XCTAssertTrue((2...4).contains(plainStats[invites]), "\(plainStats[invites]) INVITEs")
        XCTAssertTrue((1...2).contains(targetStats[loops]) && (1...2).contains(plainStats[loops]), "\(targetStats[loops]) and \(plainStats[loops]) loops")
        print("RedirectUATests: \(String(format: "%.1f", monotonicSeconds() - started)) s")
    }
}
