import Addresses
import Foundation
import XCTest
@testable import Answering

/// docs/SIP.md, "What the daemon answers (redirect mode)": every row of the table, in process.
final class RedirectAnswerTests: XCTestCase {
    func testSourcesOutsideAllowFromGet403OrNothing() throws {
        let f = try AnsweringFixture(["allow-from = 127.0.0.0/8"])
        let refused = f.send(Requests.invite(), from: "192.0.2.9")
        XCTAssertEqual(refused.status, "SIP/2.0 403 Forbidden")
        XCTAssertEqual(f.count(.aclRejected), 1)
        // An ACK is never answered, from anywhere.
        XCTAssertEqual(f.send(Requests.request("ACK"), from: "192.0.2.9").action, .none)
        XCTAssertEqual(f.count(.aclDropped), 1)
        XCTAssertEqual(f.send(Requests.invite(), from: "127.0.0.1").status, "SIP/2.0 302 Moved Temporarily")

        let d = try AnsweringFixture(["allow-from = 127.0.0.0/8", "refuse-action = drop"])
        XCTAssertEqual(d.send(Requests.invite(), from: "192.0.2.9").action, .none)
        XCTAssertEqual(d.count(.aclDropped), 1)
        XCTAssertEqual(d.count(.udpInvite), 0, "dropped unread")
    }

    func testACKIsNeverAnsweredAndNotEvenParsed() throws {
        let f = try AnsweringFixture()
        XCTAssertEqual(f.send(Requests.request("ACK")).action, .none)
        // Recognised from its first four bytes: what follows does not matter.
        XCTAssertEqual(f.send(Array("ACK this is not SIP at all".utf8)).action, .none)
        XCTAssertEqual(f.count(.udpAck), 2)
        XCTAssertEqual(f.send(Requests.request("ACK"), transport: .tcp).action, .none)
        XCTAssertEqual(f.count(.tcpAck), 1)
        XCTAssertEqual(f.count(.malformedDropped), 0)
        // After leading CRLFs it is parsed, and still not answered.
        XCTAssertEqual(f.send(Array("\r\n".utf8) + Requests.request("ACK")).action, .none)
    }

    func testCANCELIsIgnored() throws {
        let f = try AnsweringFixture()
        XCTAssertEqual(f.send(Requests.request("CANCEL")).action, .none)
        XCTAssertEqual(f.count(.cancelIgnored), 1)
    }

    func testOPTIONSGets200WithAllowAndAccept() throws {
        let f = try AnsweringFixture()
        let r = f.send(Requests.request("OPTIONS"))
        XCTAssertEqual(r.status, "SIP/2.0 200 OK")
        XCTAssertEqual(r.header("Allow"), ["INVITE, ACK, CANCEL, BYE, OPTIONS"])
        XCTAssertEqual(r.header("Accept"), ["application/sdp"])
        XCTAssertEqual(f.count(.response200), 1)
    }

    func testBlockedCallersGetTheirDirectorysBlockResponse() throws {
        for (setting, status, reason) in [("603", "SIP/2.0 603 Decline", nil), ("607", "SIP/2.0 607 Unwanted", nil),
                                          ("608", "SIP/2.0 608 Rejected", nil),
                                          ("603+", "SIP/2.0 603 Network Blocked", "SIP;cause=603;text=\"v=analytics1;tel=+18005550100;id=")] {
            // label-to-caller = yes: today's label on a rejection (the default is none,
            // TreatmentAnswerTests).
            let f = try AnsweringFixture(["block-response = \(setting)", "redress = tel=+18005550100 location=RLN", "label-to-caller = yes"])
            let labelled = f.send(Requests.invite(from: "+8613800138000"))
            XCTAssertEqual(labelled.status, status)
            XCTAssertEqual(labelled.header("X-Caller-Label"), ["\"Fraud Risk\""])
            XCTAssertEqual(labelled.header("Reason").count, reason == nil ? 0 : 1)
            if let reason { XCTAssertTrue(labelled.header("Reason")[0].hasPrefix(reason), labelled.text) }
            XCTAssertEqual(labelled.header("Contact"), [])
            XCTAssertEqual(labelled.header("P-Asserted-Identity"), [])
            // A block without a label says so with no label header at all.
            let unlabelled = f.send(Requests.invite(from: "+8613700001111"))
            XCTAssertEqual(unlabelled.status, status)
            XCTAssertEqual(unlabelled.header("X-Caller-Label"), [])
            // A prefix rule blocks too.
            XCTAssertEqual(f.send(Requests.invite(from: "+8617012345678")).header("X-Caller-Label"), ["\"Virtual Operator Range\""])
            // The second directory has its own block-response=607.
            XCTAssertEqual(f.send(Requests.invite(from: "+8613000000001")).status, "SIP/2.0 607 Unwanted")
            XCTAssertEqual(f.count(.verdictBlocked), 4)
        }
    }

    func testIdentifiedCallersAreRedirectedWithTheirLabel() throws {
        let f = try AnsweringFixture()
        let r = f.send(Requests.invite(from: "+8618600000000", to: "+8610123456"))
        XCTAssertEqual(r.status, "SIP/2.0 302 Moved Temporarily")
        XCTAssertEqual(r.unmarkedContacts, ["<sip:+8610123456@192.0.2.1>"])
        XCTAssertEqual(r.header("P-Asserted-Identity"), ["\"China Unicom Customer Service\" <sip:+8618600000000@192.0.2.9>"])
        XCTAssertEqual(r.header("X-Caller-Label"), ["\"China Unicom Customer Service\""])
        XCTAssertEqual(f.count(.verdictIdentified), 1)
        // Quotes and backslashes are escaped, UTF-8 kept.
        let cafe = f.send(Requests.invite(from: "+8613566667777"))
        XCTAssertEqual(cafe.header("X-Caller-Label"), [#""Zoë's \"Café\" \\ Bar""#])
        // The label header is the configured one.
        let g = try AnsweringFixture(["label-header = X-Label"])
        XCTAssertEqual(g.send(Requests.invite()).header("X-Label"), ["\"China Unicom Customer Service\""])
    }

    func testContactsAreRedirectedWithTheirNameEvenWhenADirectoryBlocksThem() throws {
        let f = try AnsweringFixture()
        let r = f.send(Requests.invite(from: "+8613911112222"))
        XCTAssertEqual(r.status, "SIP/2.0 302 Moved Temporarily")
        XCTAssertEqual(r.header("X-Caller-Label"), ["\"Mum\""])
        XCTAssertEqual(f.count(.verdictContact), 1)
    }

    func testUnknownAnonymousAndInvalidCallersGetTheUnknownResponse() throws {
        for (setting, status, contact) in [("302", "SIP/2.0 302 Moved Temporarily", ["<sip:+8610123456@192.0.2.1>"]),
                                           ("404", "SIP/2.0 404 Not Found", []), ("503", "SIP/2.0 503 Service Unavailable", [])] {
            let f = try AnsweringFixture(["unknown-response = \(setting)"])
            for caller in ["+8613512345678", "anonymous", "12"] {
                let r = f.send(Requests.invite(from: caller))
                XCTAssertEqual(r.status, status, caller)
                XCTAssertEqual(r.unmarkedContacts, contact, caller)
                XCTAssertEqual(r.header("X-Caller-Label"), [], caller)
                XCTAssertEqual(r.header("P-Asserted-Identity"), [], caller)
            }
            XCTAssertEqual(f.count(.verdictUnknown), 1)
            XCTAssertEqual(f.count(.verdictAnonymous), 1)
            XCTAssertEqual(f.count(.verdictInvalid), 1)
        }
    }

    func testAPolicysLabelIsShownLikeADirectorys() throws {
        let f = try AnsweringFixture(["anonymous-callers = label Withheld", "unknown-response = 404"])
        let r = f.send(Requests.invite(from: "anonymous"))
        XCTAssertEqual(r.status, "SIP/2.0 302 Moved Temporarily")
        XCTAssertEqual(r.header("X-Caller-Label"), ["\"Withheld\""])
        XCTAssertEqual(f.count(.policyAnonymousLabel), 1)
        let b = try AnsweringFixture(["anonymous-callers = block", "block-response = 608"])
        XCTAssertEqual(b.send(Requests.invite(from: "anonymous")).status, "SIP/2.0 608 Rejected")
        XCTAssertEqual(b.count(.policyAnonymousBlock), 1)
    }

    func testReINVITEAndBYEGet481() throws {
        let f = try AnsweringFixture()
        XCTAssertEqual(f.send(Requests.invite(toTag: "x1")).status, "SIP/2.0 481 Call/Transaction Does Not Exist")
        XCTAssertEqual(f.send(Requests.request("BYE")).status, "SIP/2.0 481 Call/Transaction Does Not Exist")
        XCTAssertEqual(f.count(.verdictIdentified), 0, "a re-INVITE is not screened")
    }

    func testOtherKnownMethodsGet405AndUnknownOnes501() throws {
        let f = try AnsweringFixture()
        for method in ["REGISTER", "SUBSCRIBE", "MESSAGE", "PRACK"] {
            let r = f.send(Requests.request(method))
            XCTAssertEqual(r.status, "SIP/2.0 405 Method Not Allowed", method)
            XCTAssertEqual(r.header("Allow"), ["INVITE, ACK, CANCEL, BYE, OPTIONS"], method)
        }
        let r = f.send(Requests.request("FOO"))
        XCTAssertEqual(r.status, "SIP/2.0 501 Not Implemented")
        XCTAssertEqual(r.header("Allow"), ["INVITE, ACK, CANCEL, BYE, OPTIONS"])
    }

    func testResponsesAreDroppedAndCounted() throws {
        let f = try AnsweringFixture()
        let response = message("""
        SIP/2.0 180 Ringing
        Via: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK1
        From: <sip:a@b>;tag=1
        To: <sip:c@d>;tag=2
        Call-ID: x
        CSeq: 1 INVITE
        """)
        XCTAssertEqual(f.send(response).action, .none)
        XCTAssertEqual(f.count(.strayResponses), 1)
    }

    func testTrustedPeersAssertTheCaller() throws {
        let f = try AnsweringFixture(["trust-asserted-identity-from = 192.0.2.0/24"])
        let asserted = Requests.invite(from: "+8613512345678", extra: [
            "P-Asserted-Identity: <sip:+8613800138000@192.0.2.9>",
            "P-Asserted-Identity: <tel:+8618600000000>",
        ])
        // The tel: value first; the 302's P-Asserted-Identity carries that URI.
        let trusted = f.send(asserted, from: "192.0.2.9")
        XCTAssertEqual(trusted.header("P-Asserted-Identity"), ["\"China Unicom Customer Service\" <tel:+8618600000000>"])
        // From an untrusted peer, From is the caller.
        XCTAssertEqual(f.send(asserted, from: "198.51.100.7").status, "SIP/2.0 302 Moved Temporarily")
        XCTAssertEqual(f.send(asserted, from: "198.51.100.7").header("X-Caller-Label"), [])
        // Without a tel: value, the first one.
        let sipOnly = Requests.invite(from: "+8613512345678", extra: ["P-Asserted-Identity: <sip:+8613800138000@192.0.2.9>"])
        XCTAssertEqual(f.send(sipOnly, from: "192.0.2.9").status, "SIP/2.0 603 Decline")
    }

    func testPrivacyIdHidesTheLabelButNotABlock() throws {
        let f = try AnsweringFixture()
        let hidden = f.send(Requests.invite(from: "+8618600000000", extra: ["Privacy: id"]))
        XCTAssertEqual(hidden.status, "SIP/2.0 302 Moved Temporarily")
        XCTAssertEqual(hidden.header("X-Caller-Label"), [])
        XCTAssertEqual(f.send(Requests.invite(from: "+8613800138000", extra: ["Privacy: id"])).status, "SIP/2.0 603 Decline")
    }

    func testVerstatIsReadFromParametersAndUserParts() throws {
        let f = try AnsweringFixture(["verstat-failed = block"])
        XCTAssertEqual(f.send(Requests.invite(fromHeader: "From: <sip:+8618600000000@192.0.2.9;verstat=TN-Validation-Failed>;tag=1")).status,
                       "SIP/2.0 603 Decline")
        XCTAssertEqual(f.send(Requests.invite(fromHeader: "From: <sip:+8618600000000;verstat=TN-Validation-Failed@192.0.2.9;user=phone>;tag=1")).status,
                       "SIP/2.0 603 Decline")
        XCTAssertEqual(f.send(Requests.invite(fromHeader: "From: <tel:+8618600000000;verstat=TN-Validation-Passed>;tag=1")).status,
                       "SIP/2.0 302 Moved Temporarily")
        XCTAssertEqual(f.count(.policyVerstatFailedBlock), 2)
    }

    func testTimeWindowsAreJudgedInTheConfiguredZone() throws {
        // 1_700_000_000 is Tuesday 22:13 UTC, Wednesday 06:13 in Shanghai.
        let f = try AnsweringFixture(["time-zone = Asia/Shanghai", "anonymous-callers = block active=\"Wed 06:00-07:00\""])
        XCTAssertEqual(f.send(Requests.invite(from: "anonymous")).status, "SIP/2.0 603 Decline")
        f.now = WallTime(seconds: 1_700_000_000 + 3600)
        XCTAssertEqual(f.send(Requests.invite(from: "anonymous")).status, "SIP/2.0 302 Moved Temporarily")
        let utc = try AnsweringFixture(["time-zone = UTC", "anonymous-callers = block active=\"Tue 22:00-23:00\""])
        XCTAssertEqual(utc.send(Requests.invite(from: "anonymous")).status, "SIP/2.0 603 Decline")
    }

    func testBlockedAndIdentifiedCallsAreLogged() throws {
        let f = try AnsweringFixture()
        _ = f.send(Requests.invite(from: "+8613800138000"))
        let text = String(decoding: f.log.bytes, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("<5>call time=2023-11-14T22:13:20.000Z verdict=blocked caller=+8613800138000"), text)
        XCTAssertTrue(text.contains(" response=603 label=\"Fraud Risk\" source=main "), text)
        XCTAssertEqual(f.log.recentEnds.count, 1)
        XCTAssertFalse(f.log.fileBytes.isEmpty)
    }

    /// docs/SIP.md, Amplification: a UDP answer stays within 3 times its request; over TCP it
    /// is not trimmed.
    func testUDPAnswersStayWithinThreeTimesTheRequest() throws {
        let f = try AnsweringFixture()
        // The smallest INVITE lookupd answers, for a labelled number.
        let tiny = Array("INVITE sip:1@x SIP/2.0\r\nVia: SIP/2.0/UDP x;branch=z9hG4bK1\r\nFrom: <sip:+8613566660000@x>;tag=1\r\nTo: <sip:1@x>\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n".utf8)
        let udp = f.send(tiny)
        XCTAssertEqual(udp.status, "SIP/2.0 302 Moved Temporarily")
        XCTAssertLessThanOrEqual(udp.bytes.count, 3 * tiny.count)
        XCTAssertEqual(f.count(.responsesTrimmed), 1)
        let tcp = f.send(tiny, transport: .tcp)
        XCTAssertEqual(tcp.header("X-Caller-Label"), ["\"" + String(repeating: "Long Label ", count: 22) + "End\""])
        XCTAssertEqual(f.count(.responsesTrimmed), 1, "TCP answers are not trimmed")
        // A PBX's INVITE keeps the label in both headers.
        let pbx = f.send(Requests.invite(from: "+8618600000000", extra: ["Contact: <sip:+8618600000000@192.0.2.9:5060>"]))
        XCTAssertEqual(pbx.header("P-Asserted-Identity"), ["\"China Unicom Customer Service\" <sip:+8618600000000@192.0.2.9>"])
        XCTAssertEqual(f.count(.responsesTrimmed), 1)
    }
}
