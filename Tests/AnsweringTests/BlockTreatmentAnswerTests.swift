import Foundation
import XCTest
@testable import Answering

/// Issue 17, item 4: what a blocked call gets. `block-treatment = reject` (the block
/// response), `reject CODE` (a status autodialers drop numbers on), or `redirect URI` (a 302 to
/// the operator's announcement); per directory and for the policies; in proxy mode a redirect
/// to the upstream itself is forwarded there. The decision log names the treatment.
final class BlockTreatmentAnswerTests: XCTestCase {
    func logText(_ f: AnsweringFixture) -> String { String(decoding: f.log.bytes, as: UTF8.self) }

    func testRejectCodeForPoliciesAndDirectoriesWithoutTheirOwn() throws {
        let f = try AnsweringFixture(["block-treatment = reject 486", "invalid-callers = block"])
        XCTAssertEqual(f.send(Requests.invite(from: "+8613800138000")).status, "SIP/2.0 486 Busy Here")
        XCTAssertEqual(f.send(Requests.invite(from: "12")).status, "SIP/2.0 486 Busy Here", "a policy's block")
        // The second directory's own block-response=607 wins over the global treatment.
        XCTAssertEqual(f.send(Requests.invite(from: "+8613000000001")).status, "SIP/2.0 607 Unwanted")
        let log = logText(f)
        XCTAssertNotNil(log.range(of: #"verdict=blocked caller=\+8613800138000 [^\n]*response=486 [^\n]* treatment=reject-486[ \n]"#, options: .regularExpression), log)
        XCTAssertNotNil(log.range(of: #"verdict=blocked caller=\+8613000000001 [^\n]*response=607 [^\n]* treatment=reject[ \n]"#, options: .regularExpression), log)
        for (code, line) in [("404", "404 Not Found"), ("410", "410 Gone"), ("600", "600 Busy Everywhere"), ("603", "603 Decline"),
                             ("604", "604 Does Not Exist Anywhere"), ("606", "606 Not Acceptable"), ("607", "607 Unwanted")] {
            let g = try AnsweringFixture([], mainOptions: " block-treatment=\"reject \(code)\"")
            let r = g.send(Requests.invite(from: "+8613800138000"))
            XCTAssertEqual(r.status, "SIP/2.0 " + line)
            XCTAssertEqual(r.header("X-Caller-Label"), [], "no label toward the caller")
        }
        // reject 608 is block-response 608: with the jCard.
        let j = try AnsweringFixture(["redress-jcard = https://example.net/j.jws"], mainOptions: " block-treatment=\"reject 608\"")
        XCTAssertEqual(j.send(Requests.invite(from: "+8613800138000")).header("Call-Info"), ["<https://example.net/j.jws>;purpose=jwscard"])
    }

    func testRedirectToTheAnnouncement() throws {
        let f = try AnsweringFixture([], mainOptions: " block-treatment=\"redirect sip:spam@pbx.example.net;transport=udp\"")
        let r = f.send(Requests.invite(from: "+8613800138000", to: "1001"))
        XCTAssertEqual(r.status, "SIP/2.0 302 Moved Temporarily")
        XCTAssertEqual(r.unmarkedContacts, ["<sip:spam@pbx.example.net;transport=udp>"])
        // Redirect mode: the 302 goes to the PBX or SBC that asked, which plays the announcement.
        XCTAssertEqual(r.header("X-Caller-Label"), ["\"Fraud Risk\""])
        XCTAssertEqual(r.header("P-Asserted-Identity"), [])
        XCTAssertEqual(f.count(.verdictBlocked), 1)
        XCTAssertNotNil(logText(f).range(of: #"<5>call [^\n]*verdict=blocked [^\n]*response=302 [^\n]* treatment=redirect[ \n]"#, options: .regularExpression), logText(f))
        // Other directories keep their block response.
        XCTAssertEqual(f.send(Requests.invite(from: "+8613000000001")).status, "SIP/2.0 607 Unwanted")
        // The announcement sending the call back to lookupd: 482, not a loop.
        let back = String(try XCTUnwrap(r.header("Contact").first).dropFirst().dropLast())
        XCTAssertEqual(f.send(Requests.invite(from: "+8613800138000", uri: back, branch: "z9hG4bKagain")).status, "SIP/2.0 482 Loop Detected")
        // With redirect-target the 302s go to the caller's own UA: no label.
        let direct = try AnsweringFixture(["redirect-target = sip:pbx.example.net"], mainOptions: " block-treatment=\"redirect sip:spam@pbx.example.net\"")
        XCTAssertEqual(direct.send(Requests.invite(from: "+8613800138000")).header("X-Caller-Label"), [])
    }

    func testProxyModeForwardsToTheUpstreamOnlyItself() throws {
        // The upstream (192.0.2.20:5060) is the PBX: the INVITE goes there with the announcement
        // as Request-URI and the label in the caller's name.
        let f = try AnsweringFixture(["block-treatment = redirect sip:spam@192.0.2.20"], proxy: true)
        let r = f.send(Requests.invite(from: "+8613800138000", to: "1001"))
        XCTAssertTrue(r.isForward, r.text)
        XCTAssertTrue(r.text.hasPrefix("INVITE sip:spam@192.0.2.20 SIP/2.0\r\n"), r.text)
        XCTAssertTrue(r.header("From").first?.hasPrefix("\"Fraud Risk\" <sip:+8613800138000@") ?? false, r.text)
        XCTAssertEqual(r.header("X-Caller-Label"), ["\"Fraud Risk\""])
        XCTAssertNotNil(logText(f).range(of: #"verdict=blocked [^\n]*response=0 [^\n]* treatment=redirect[ \n]"#, options: .regularExpression), logText(f))
        // Elsewhere (another port, another host, a name): a 302 to the caller, without the label.
        for uri in ["sip:spam@192.0.2.20:5070", "sip:spam@192.0.2.21", "sip:spam@pbx.example.net", "sips:spam@192.0.2.20"] {
            let g = try AnsweringFixture(["block-treatment = redirect \(uri)"], proxy: true)
            let answer = g.send(Requests.invite(from: "+8613800138000"))
            XCTAssertTrue(answer.isReply, uri)
            XCTAssertEqual(answer.status, "SIP/2.0 302 Moved Temporarily", uri)
            XCTAssertEqual(answer.unmarkedContacts, ["<\(uri)>"])
            XCTAssertEqual(answer.header("X-Caller-Label"), [], uri)
        }
        // A caller let through is forwarded with his own Request-URI as before.
        XCTAssertTrue(f.send(Requests.invite(from: "+8618600000000", to: "1001")).text.hasPrefix("INVITE sip:1001@192.0.2.1 SIP/2.0\r\n"))
    }
}
