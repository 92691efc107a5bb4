import Foundation
import XCTest

/// Requirement 1: the real daemon driven by sipp as a PBX would, over UDP and
/// TCP. Every answer is checked inside the scenario (status line, label,
/// P-Asserted-Identity, Contact, Reason); a wrong one fails the call and
/// sipp's exit status.
final class SippScenarioTests: DaemonTestCase {
    /// Defaults: 603 Decline for blocked callers, 302 without label for unknown ones.
    /// allow-from admits 127.0.0.1 only, so sipp on 127.0.0.2 is refused.
    func testDefaultAnswersOverUDPAndTCP() throws {
        _ = try requireSipp()
        let daemon = try startDaemon(["allow-from = 127.0.0.1/32"])
        let port = daemon.port
        let calls = [
            SippCall(caller: Caller.fraud, want: Answer.blocked("603 Decline", label: "Fraud Risk")),
            SippCall(caller: Caller.blockedUnlabelled, want: Answer.blocked("603 Decline", label: nil)),
            SippCall(caller: Caller.virtualRange, want: Answer.blocked("603 Decline", label: "Virtual Operator Range")),
            SippCall(caller: Caller.pizza, want: Answer.redirect(Caller.pizza, label: "Pizza Palace, Haidian", port: port)),
            SippCall(caller: Caller.unicom, want: Answer.redirect(Caller.unicom, label: "China Unicom Customer Service", port: port)),
            SippCall(caller: Caller.cafe, want: Answer.redirect(Caller.cafe, label: Caller.cafeLabel, port: port)),
            SippCall(caller: "01059000000", want: Answer.redirect("01059000000", label: "Beijing Municipal Hospital", port: port)),
            // A contact beats the directory that blocks the number.
            SippCall(caller: Caller.mum, want: Answer.redirect(Caller.mum, label: "Mum", port: port)),
            SippCall(caller: Caller.liLei, want: Answer.redirect(Caller.liLei, label: "Li Lei", port: port)),
            SippCall(caller: Caller.unknown, want: Answer.unlabelledRedirect(port: port)),
            SippCall(caller: "anonymous", want: Answer.unlabelledRedirect(port: port)),
        ]
        for transport in [SippTransport.udp, .tcp] {
            let invites = try sipp("invite.xml", daemon: daemon, transport: transport, calls: calls)
            assertSippPassed(invites, calls: calls.count, "INVITEs over \(transport.name)")
            XCTAssertEqual(invites.calls.filter { $0.verdict == "want" }.count, calls.count, invites.log)

            let options = try sipp("options.xml", daemon: daemon, transport: transport, count: 3)
            assertSippPassed(options, calls: 3, "OPTIONS over \(transport.name)")

            let malformed = try sipp("malformed.xml", daemon: daemon, transport: transport, count: 2)
            assertSippPassed(malformed, calls: 2, "malformed INVITE over \(transport.name)")

            // Outside allow-from: 403 Forbidden, not screened.
            let refused = try sipp("invite.xml", daemon: daemon, transport: transport, localIP: "127.0.0.2", calls: [
                SippCall(caller: Caller.fraud, want: Answer.signature("403 Forbidden")),
                SippCall(caller: Caller.pizza, want: Answer.signature("403 Forbidden")),
            ])
            assertSippPassed(refused, calls: 2, "INVITEs from 127.0.0.2 over \(transport.name)")
        }

        // The scenario really checks: an expectation the daemon does not meet fails sipp.
        let wrong = try sipp("invite.xml", daemon: daemon, transport: .udp, calls: [
            SippCall(caller: Caller.fraud, want: Answer.blocked("603 Decline", label: "Not The Label")),
        ])
        XCTAssertNotEqual(wrong.status, 0, "a wrong expectation must fail the sipp run: \(wrong.report)")
        XCTAssertEqual(wrong.failed, 1, wrong.report)
        XCTAssertTrue(wrong.log.contains("verdict=MISMATCH got=603 Decline|\"Fraud Risk\"|-|-|-/-/-"), wrong.log)

        // Every INVITE sipp sent was answered and counted (the malformed ones count as malformed, not as requests).
        let stats = try stats(daemon)
        XCTAssertEqual(stats["lookupd_responses_total{code=\"403\"}"], 4, stats.text)
        XCTAssertEqual(stats["lookupd_requests_total{method=\"INVITE\",transport=\"tcp\"}"], calls.count + 2, stats.text)
        XCTAssertEqual(stats["lookupd_requests_total{method=\"INVITE\",transport=\"udp\"}"], calls.count + 2 + 1, stats.text)
        XCTAssertEqual(stats["lookupd_malformed_total{action=\"400\"}"], 4, stats.text)
    }

    /// block-response = 607 globally, 608 and 603+ for two more directories,
    /// unknown-response = 404.
    func testConfiguredBlockAndUnknownResponses() throws {
        _ = try requireSipp()
        try compile("number,action,label\n+8613300000608,block,Robocaller\n", to: "robo.lkd")
        try compile("number,action,label\n+8613300000603,block,Network Spam\n+8613300000604,block,\n", to: "network.lkd")
        let daemon = try startDaemon(["block-response = 607", "unknown-response = 404", Answer.redress],
                                     directories: ["main.lkd name=main", "robo.lkd name=robo block-response=608",
                                                   "network.lkd name=network block-response=603+"])
        let port = daemon.port
        let calls = [
            SippCall(caller: Caller.fraud, want: Answer.blocked("607 Unwanted", label: "Fraud Risk")),
            SippCall(caller: Caller.blockedUnlabelled, want: Answer.blocked("607 Unwanted", label: nil)),
            SippCall(caller: "+8613300000608", want: Answer.blocked("608 Rejected", label: "Robocaller")),
            SippCall(caller: "+8613300000603", want: Answer.blocked("603 Network Blocked", label: "Network Spam", networkBlocked: true)),
            SippCall(caller: "+8613300000604", want: Answer.blocked("603 Network Blocked", label: nil, networkBlocked: true)),
            SippCall(caller: Caller.pizza, want: Answer.redirect(Caller.pizza, label: "Pizza Palace, Haidian", port: port)),
            SippCall(caller: Caller.mum, want: Answer.redirect(Caller.mum, label: "Mum", port: port)),
            SippCall(caller: Caller.unknown, want: Answer.signature("404 Not Found")),
            SippCall(caller: "anonymous", want: Answer.signature("404 Not Found")),
        ]
        for transport in [SippTransport.udp, .tcp] {
            let result = try sipp("invite.xml", daemon: daemon, transport: transport, calls: calls)
            assertSippPassed(result, calls: calls.count, "INVITEs over \(transport.name)")
        }
    }

    /// block-response = 608 and 603+ globally; unknown-response = 503.
    func testGlobal608And603PlusAnd503() throws {
        _ = try requireSipp()
        let rejecting = try startDaemon(["block-response = 608", "unknown-response = 503"], name: "rejecting")
        let networkBlocking = try startDaemon(["block-response = 603+", Answer.redress], name: "network")
        for transport in [SippTransport.udp, .tcp] {
            let calls = [
                SippCall(caller: Caller.fraud, want: Answer.blocked("608 Rejected", label: "Fraud Risk")),
                SippCall(caller: Caller.unknown, want: Answer.signature("503 Service Unavailable")),
                SippCall(caller: Caller.unicom, want: Answer.redirect(Caller.unicom, label: "China Unicom Customer Service", port: rejecting.port)),
            ]
            let result = try sipp("invite.xml", daemon: rejecting, transport: transport, calls: calls)
            assertSippPassed(result, calls: calls.count, "608/503 over \(transport.name)")

            let blocked = [
                SippCall(caller: Caller.virtualRange, want: Answer.blocked("603 Network Blocked", label: "Virtual Operator Range", networkBlocked: true)),
                SippCall(caller: Caller.unknown, want: Answer.unlabelledRedirect(port: networkBlocking.port)),
            ]
            let second = try sipp("invite.xml", daemon: networkBlocking, transport: transport, calls: blocked)
            assertSippPassed(second, calls: blocked.count, "603+ over \(transport.name)")
        }
    }
}
