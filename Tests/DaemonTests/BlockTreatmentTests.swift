import Foundation
import Glibc
import XCTest

/// Issue 17, item 4, over the daemon's sockets: each block treatment in redirect mode, and in
/// proxy mode the redirect to the upstream's announcement forwarded there (a sipp PBX checks
/// the Request-URI and the label) while one to anywhere else is answered with the 302. The
/// decision log file names the treatment of each blocked call.
final class BlockTreatmentTests: IntegrationTestCase {
    override class var rejectionsCarryLabel: Bool { false }

    func logLine(_ file: String, callID: String) -> String {
        var line = ""
        _ = eventually(timeout: 5) {
            line = readText(file).split(separator: "\n").first { $0.contains("call-id=\(callID) ") }.map(String.init) ?? ""
            return !line.isEmpty
        }
        return line
    }

    func testTreatmentsInRedirectMode() throws {
        let log = path("decisions.log")
        let daemon = try startDaemon(["log-file = \(log)", "block-treatment = reject 486", "invalid-callers = block"],
                                     directories: ["main.lkd name=main block-treatment=\"redirect sip:spam@pbx.example.net;transport=udp\""])
        let udp = try UDPPeer()
        let redirected = try XCTUnwrap(udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", to: "1001", port: daemon.port,
                                                          callID: "treat-1@pbx"), port: daemon.port))
        XCTAssertEqual(redirected.statusLine, "302 Moved Temporarily")
        XCTAssertEqual(redirected.unmarkedContact, "<sip:spam@pbx.example.net;transport=udp>")
        XCTAssertEqual(redirected.header("X-Caller-Label"), "\"Fraud Risk\"", "for the PBX or SBC that asked")
        let policy = try XCTUnwrap(udp.exchange(invite(from: "<sip:12@pbx.example>", port: daemon.port, callID: "treat-2@pbx"), port: daemon.port))
        XCTAssertEqual(policy.statusLine, "486 Busy Here")
        XCTAssertNil(policy.header("Contact"))
        XCTAssertTrue(logLine(log, callID: "treat-1@pbx").contains(" response=302 "), readText(log))
        XCTAssertTrue(logLine(log, callID: "treat-1@pbx").hasSuffix(" treatment=redirect"), readText(log))
        XCTAssertTrue(logLine(log, callID: "treat-2@pbx").hasSuffix(" treatment=reject-486"), readText(log))
    }

    func testRedirectTreatmentInProxyMode() throws {
        let pbx = try startPBX("announcement-pbx.xml", transport: .udp, expect: [], count: 1, timeoutSeconds: 30)
        let log = path("proxy-decisions.log")
        // startNode's readiness probe is an OPTIONS to lookupd itself, which a proxy answers.
        let forwarding = try startNode("forwarding", port: freeLoopbackPort(), extra: [
            "mode = proxy", "upstream = 127.0.0.1:\(pbx.port)", "log-file = \(log)", "block-treatment = redirect sip:spam@127.0.0.1:\(pbx.port)",
        ])
        let udp = try UDPPeer()
        let answer = try XCTUnwrap(udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", to: "1001", port: forwarding.port,
                                                       callID: "treat-3@pbx"), port: forwarding.port, timeout: 5), pbx.report)
        XCTAssertEqual(answer.statusLine, "200 OK", "the PBX's announcement answered: \(answer.text)")
        XCTAssertTrue(pbx.child.wait(timeout: 15), pbx.report)
        XCTAssertEqual(pbx.child.status, 0, pbx.report)
        XCTAssertTrue(logLine(log, callID: "treat-3@pbx").contains(" verdict=blocked "), readText(log))
        XCTAssertTrue(logLine(log, callID: "treat-3@pbx").contains(" response=0 "), readText(log))
        XCTAssertTrue(logLine(log, callID: "treat-3@pbx").hasSuffix(" treatment=redirect"), readText(log))

        // Not the upstream: the 302 goes to the caller, without the label.
        let answering = try startNode("answering", port: freeLoopbackPort(), extra: [
            "mode = proxy", "upstream = 127.0.0.1:\(pbx.port)", "block-treatment = redirect sip:spam@127.0.0.2:\(pbx.port)",
        ])
        let redirected = try XCTUnwrap(udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: answering.port), port: answering.port))
        XCTAssertEqual(redirected.statusLine, "302 Moved Temporarily")
        XCTAssertEqual(redirected.unmarkedContact, "<sip:spam@127.0.0.2:\(pbx.port)>")
        XCTAssertNil(redirected.header("X-Caller-Label"))
        XCTAssertFalse(redirected.text.contains("Fraud Risk"), redirected.text)
    }
}
