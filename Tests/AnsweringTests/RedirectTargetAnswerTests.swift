import Foundation
import XCTest
@testable import Answering

/// Issue 17, item 8: the 302 a phone or trunk follows. `redirect-target` sends the caller to
/// the PBX with the Request-URI's user; the Contact carries lookupd's mark, and a request that
/// comes back with it gets 482 once instead of being screened, counted and logged again.
final class RedirectTargetAnswerTests: XCTestCase {
    func testRedirectTargetKeepsTheUserAndMarksTheContact() throws {
        let f = try AnsweringFixture(["redirect-target = sip:pbx.example.net:5070;transport=udp"])
        let r = f.send(Requests.invite(from: "+8618600000000", to: "1001"))
        XCTAssertEqual(r.status, "SIP/2.0 302 Moved Temporarily")
        XCTAssertEqual(r.unmarkedContacts, ["<sip:1001@pbx.example.net:5070;transport=udp>"])
        // The 302 goes to the caller's own UA: no label, unless label-to-caller = yes.
        XCTAssertEqual(r.header("X-Caller-Label"), [])
        XCTAssertEqual(r.header("P-Asserted-Identity"), ["<sip:+8618600000000@192.0.2.9>"])
        let told = try AnsweringFixture(["redirect-target = sip:pbx.example.net", "label-to-caller = yes"])
        XCTAssertEqual(told.send(Requests.invite(to: "1001")).header("X-Caller-Label"), ["\"China Unicom Customer Service\""])
        // Unknown callers with unknown-response = 302 go the same way, without a label.
        let unknown = f.send(Requests.invite(from: "+8613512345678", to: "1001"))
        XCTAssertEqual(unknown.unmarkedContacts, ["<sip:1001@pbx.example.net:5070;transport=udp>"])
        // A Request-URI without a user part: the target as it is.
        XCTAssertEqual(f.send(Requests.invite(uri: "sip:192.0.2.1")).unmarkedContacts, ["<sip:pbx.example.net:5070;transport=udp>"])
        // A tel: Request-URI: its number is the user.
        XCTAssertEqual(f.send(Requests.invite(uri: "tel:+8610123456;phone-context=+86")).unmarkedContacts,
                       ["<sip:+8610123456@pbx.example.net:5070;transport=udp>"])
        // Blocked callers are rejected as before, with no Contact at all.
        XCTAssertEqual(f.send(Requests.invite(from: "+8613800138000")).header("Contact"), [])
    }

    func testARequestBackAfterTheRedirectGets482AndIsNotScreenedAgain() throws {
        for extra in [[], ["redirect-target = sips:[2001:db8::5]:5061"]] {
            let f = try AnsweringFixture(extra)
            let first = f.send(Requests.invite(from: "+8618600000000", to: "1001"))
            XCTAssertEqual(first.status, "SIP/2.0 302 Moved Temporarily")
            let contact = try XCTUnwrap(first.header("Contact").first)
            let uri = String(contact.dropFirst().dropLast())
            XCTAssertEqual(f.count(.verdictIdentified), 1)
            let logged = f.log.bytes.count
            // What a UA that follows the 302 sends (RFC 3261 §8.1.3.4): the Contact as its
            // Request-URI, the same Call-ID and From tag, a new CSeq and branch.
            for round in 0..<3 {
                let back = f.send(Requests.invite(from: "+8618600000000", to: "1001", uri: uri, branch: "z9hG4bKback\(round)"))
                XCTAssertEqual(back.status, "SIP/2.0 482 Loop Detected", "\(extra) \(back.text)")
                XCTAssertEqual(back.header("Contact"), [])
                XCTAssertEqual(back.header("X-Caller-Label"), [])
            }
            XCTAssertEqual(f.count(.redirectLoops), 3)
            XCTAssertEqual(f.count(.verdictIdentified), 1, "not screened again")
            XCTAssertEqual(f.count(.udpInvite), 4)
            let log = String(decoding: f.log.bytes[logged...], as: UTF8.self)
            XCTAssertFalse(log.contains("call "), "no decision logged for the loop: \(log)")
            XCTAssertTrue(log.contains("redirect-loop"), log)
        }
    }

    func testOnlyThisDaemonsMarkCounts() throws {
        let f = try AnsweringFixture()
        let first = f.send(Requests.invite(to: "1001"))
        let uri = String(try XCTUnwrap(first.header("Contact").first).dropFirst().dropLast())
        let mark = String(uri[uri.range(of: ";lookupd=")!.upperBound...])
        // A mark a caller made up, or lookupd's mark for another callee, is screened like any call.
        for forged in ["sip:1001@192.0.2.1;lookupd=0123456789abcdef", "sip:1002@192.0.2.1;lookupd=\(mark)",
                       "sip:1001@192.0.2.1;lookupd=\(mark.uppercased())", "sip:1001@192.0.2.1;lookupd"] {
            let r = f.send(Requests.invite(to: "1001", uri: forged))
            XCTAssertEqual(r.status, "SIP/2.0 302 Moved Temporarily", forged)
            // Its marks are kept, this daemon's added (another node of a cluster knows its own).
            XCTAssertEqual(r.header("Contact").first?.hasPrefix("<" + forged + ";lookupd="), true, r.text)
        }
        XCTAssertEqual(f.count(.redirectLoops), 0)
        // Another daemon's mark before this one's: still a loop. Parameter names ignore case.
        XCTAssertEqual(f.send(Requests.invite(to: "1001", uri: "sip:1001@192.0.2.1;lookupd=0123456789abcdef;LOOKUPD=\(mark)")).status,
                       "SIP/2.0 482 Loop Detected")
        // A daemon with another key (a restart, another node) does not know this one's mark.
        let other = try AnsweringFixture(toTagKey: 8)
        XCTAssertEqual(other.send(Requests.invite(to: "1001", uri: uri)).status, "SIP/2.0 302 Moved Temporarily")
    }

    func testProxyModeAlsoRefusesARequestBackWithItsMark() throws {
        let r = try AnsweringFixture()
        let uri = String(try XCTUnwrap(r.send(Requests.invite(to: "1001")).header("Contact").first).dropFirst().dropLast())
        let p = try AnsweringFixture(proxy: true)
        let back = p.send(Requests.invite(to: "1001", uri: uri))
        XCTAssertEqual(back.status, "SIP/2.0 482 Loop Detected")
        XCTAssertEqual(p.count(.redirectLoops), 1)
        XCTAssertTrue(p.send(Requests.invite(to: "1001")).isForward)
    }
}
