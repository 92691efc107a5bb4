import Foundation
import Glibc
import XCTest

/// Issue 17, first part, over the daemon's UDP socket: what rejections say. 603+ with the
/// ATIS-1000099 Reason whose id the decision log file holds, 433 for withheld callers,
/// RFC 8688's jCard on 608, no label toward the caller; and no daemon with 603+ but no
/// redress.
final class TreatmentTests: DaemonTestCase {
    override class var rejectionsCarryLabel: Bool { false }

    func testRejectionsAsTheCallerSeesThem() throws {
        let log = path("decisions.log")
        let daemon = try startDaemon([
            "log-file = \(log)",
            "block-response = 608",
            "redress = url=https://redress.example.net/r tel=+18005550100 location=RLN",
            "redress-jcard = https://example.net/jcard.jws",
            "redress-q850 = yes",
            "anonymous-callers = reject 433",
            "invalid-callers = block",
        ], directories: ["main.lkd name=analytics block-response=603+"])
        let udp = try UDPPeer()
        let port = daemon.port

        let blocked = try XCTUnwrap(udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", to: "1001", port: port,
                                                       callID: "atis-1@pbx"), port: port))
        XCTAssertEqual(blocked.statusLine, "603 Network Blocked")
        let reasons = blocked.values("Reason")
        XCTAssertEqual(reasons.count, 2, blocked.text)
        let id = try XCTUnwrap(reasons.first.flatMap(ATISReason.id), blocked.text)
        XCTAssertEqual(ATISReason.q850ID(reasons[1]), id, "the Q.850 twin: \(blocked.text)")
        XCTAssertTrue(reasons[0].hasPrefix("SIP;cause=603;text=\"v=analytics1;url=https://redress.example.net/r;tel=+18005550100;id="), reasons[0])
        XCTAssertTrue(reasons[0].hasSuffix("\";location=RLN"), reasons[0])
        XCTAssertFalse(blocked.text.contains("Fraud Risk"), "no label toward the caller: \(blocked.text)")
        XCTAssertEqual(blocked.values("Call-Info"), [])

        // Withheld: 433; an invalid caller, blocked by policy: 608 with the jCard.
        XCTAssertEqual(udp.exchange(invite(from: "\"Anonymous\" <sip:anonymous@anonymous.invalid>", port: port), port: port)?.statusLine,
                       "433 Anonymity Disallowed")
        let rejected = try XCTUnwrap(udp.exchange(invite(from: "<sip:123@pbx.example>", port: port), port: port))
        XCTAssertEqual(rejected.statusLine, "608 Rejected")
        XCTAssertEqual(rejected.values("Call-Info"), ["<https://example.net/jcard.jws>;purpose=jwscard"])
        XCTAssertEqual(rejected.values("Reason"), [])

        // The operator finds the caller's id in the decision log file, on that call's line.
        XCTAssertTrue(eventually(timeout: 5) { readText(log).contains("id=\(id)") }, readText(log))
        let line = try XCTUnwrap(readText(log).split(separator: "\n").first { $0.contains("id=\(id)") })
        XCTAssertTrue(line.contains(" verdict=blocked caller=\(Caller.fraud) callee=1001 response=603 label=\"Fraud Risk\" source=analytics "), String(line))
        XCTAssertTrue(line.contains("call-id=atis-1@pbx"), String(line))
    }

    func testNetworkBlockedWithoutRedressIsRefusedWithItsLine() throws {
        let port = freeLoopbackPort()
        let config = write("bad.conf", configText(name: "bad", port: port, directories: ["main.lkd name=main"], contacts: ["contacts.vcf"],
                                                  extra: ["block-response = 603+"]))
        let result = try lookupd(["serve", "--config", config], timeout: 30)
        XCTAssertNotEqual(result.status, 0, result.summary)
        let number = configText(name: "bad", port: port, directories: ["main.lkd name=main"], contacts: ["contacts.vcf"],
                                extra: ["block-response = 603+"]).split(separator: "\n").firstIndex { $0 == "block-response = 603+" }! + 1
        XCTAssertTrue(result.stderr.contains("bad.conf:\(number): 603+ needs a 'redress"), result.summary)
    }
}
