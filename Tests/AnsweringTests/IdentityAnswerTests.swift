import Configuration
import XCTest
@testable import Answering

/// Issue 17 item 7: `trust-asserted-identity-from` governs P-Asserted-Identity,
/// Remote-Party-ID and P-Preferred-Identity, in `identity-order`; RPID privacy is Privacy: id.
final class IdentityAnswerTests: XCTestCase {
    // Directory: +8613800138000 blocked, +8618600000000 and +8613566667777 identified.
    let pai = "P-Asserted-Identity: <sip:+8618600000000@192.0.2.9>"
    let rpid = "Remote-Party-ID: \"Cafe\" <sip:+8613566667777@192.0.2.9>;party=calling;screen=yes"
    let ppi = "P-Preferred-Identity: <sip:+8613800138000@192.0.2.9>"

    func label(_ r: AnsweringFixture.Result) -> String { r.status.hasSuffix("603 Decline") ? "blocked" : r.header("X-Caller-Label").first ?? "-" }

    func testTheFirstIdentityOfTheOrderATrustedPeerSends() throws {
        let f = try AnsweringFixture(["trust-asserted-identity-from = 192.0.2.0/24"])
        let unicom = "\"China Unicom Customer Service\"", cafe = "\"Zoë's \\\"Café\\\" \\\\ Bar\""
        // The default order: PAI, then RPID, then PPI, then From.
        XCTAssertEqual(label(f.send(Requests.invite(from: "+8613512345678", extra: [ppi, rpid, pai]))), unicom)
        XCTAssertEqual(label(f.send(Requests.invite(from: "+8613512345678", extra: [ppi, rpid]))), cafe)
        XCTAssertEqual(label(f.send(Requests.invite(from: "+8613512345678", extra: [ppi]))), "blocked")
        XCTAssertEqual(label(f.send(Requests.invite(from: "+8618600000000", extra: []))), unicom)
        // The 302's P-Asserted-Identity carries the URI the caller was read from.
        XCTAssertEqual(f.send(Requests.invite(from: "+8613512345678", extra: [rpid])).header("P-Asserted-Identity"),
                       [cafe + " <sip:+8613566667777@192.0.2.9>"])
        // From an untrusted peer, none of them: From.
        for extra in [[pai], [rpid], [ppi]] {
            XCTAssertEqual(label(f.send(Requests.invite(from: "+8613512345678", extra: extra), from: "198.51.100.7")), "-", "\(extra)")
        }
        // A Remote-Party-ID of the called party is not the caller; one without party= is.
        let called = rpid.replacingOccurrences(of: "party=calling", with: "party=called")
        XCTAssertEqual(label(f.send(Requests.invite(from: "+8613512345678", extra: [called]))), "-")
        let noParty = rpid.replacingOccurrences(of: "party=calling;", with: "")
        XCTAssertEqual(label(f.send(Requests.invite(from: "+8613512345678", extra: [called + ", " + noParty.dropFirst(17)]))), cafe)

        let g = try AnsweringFixture(["trust-asserted-identity-from = 192.0.2.0/24", "identity-order = ppi, rpid, from"])
        XCTAssertEqual(label(g.send(Requests.invite(from: "+8613512345678", extra: [pai, rpid, ppi]))), "blocked")
        XCTAssertEqual(label(g.send(Requests.invite(from: "+8613512345678", extra: [pai, rpid]))), cafe)
        // PAI is not in this order at all.
        XCTAssertEqual(label(g.send(Requests.invite(from: "+8613512345678", extra: [pai]))), "-")
    }

    /// RPID `privacy=full` (or `uri`) is `Privacy: id`: no label, treated as withheld, and no
    /// shield against a block.
    func testRemotePartyIDPrivacyIsPrivacyID() throws {
        let f = try AnsweringFixture(["trust-asserted-identity-from = 192.0.2.0/24", "anonymous-callers = reject 433"])
        let hidden = "Remote-Party-ID: <sip:+8618600000000@192.0.2.9>;party=calling;privacy=full"
        XCTAssertEqual(f.send(Requests.invite(from: "+8613512345678", extra: [hidden])).status, "SIP/2.0 433 Anonymity Disallowed")
        XCTAssertEqual(f.send(Requests.invite(from: "+8613512345678", extra: [hidden.replacingOccurrences(of: "full", with: "uri")])).status,
                       "SIP/2.0 433 Anonymity Disallowed")
        // privacy=name hides the name only; privacy=off nothing.
        for p in ["name", "off"] {
            let r = f.send(Requests.invite(from: "+8613512345678", extra: [hidden.replacingOccurrences(of: "full", with: p)]))
            XCTAssertEqual(r.header("X-Caller-Label"), ["\"China Unicom Customer Service\""], p)
        }
        let blocked = "Remote-Party-ID: <sip:+8613800138000@192.0.2.9>;party=calling;privacy=full"
        XCTAssertEqual(f.send(Requests.invite(from: "+8613512345678", extra: [blocked])).status, "SIP/2.0 603 Decline")
        // As Privacy: id, honoured from any peer (it only ever hides).
        XCTAssertEqual(f.send(Requests.invite(from: "+8618600000000", extra: [hidden]), from: "198.51.100.7").status,
                       "SIP/2.0 433 Anonymity Disallowed")
        let anonymous = "Remote-Party-ID: \"Anonymous\" <sip:anonymous@anonymous.invalid>;party=calling;privacy=full"
        XCTAssertEqual(f.send(Requests.invite(from: "+8613512345678", extra: [anonymous])).status, "SIP/2.0 433 Anonymity Disallowed")
    }

    func testIdentityOrderIsChecked() throws {
        XCTAssertEqual(try ConfigParser.parse("identity-order = from\n", path: "/l.conf").identityOrder, [.from])
        XCTAssertEqual(try ConfigParser.parse("identity-order = rpid,pai,from\n", path: "/l.conf").identityOrder, [.rpid, .pai, .from])
        for (value, message) in [("pai,rpid,ppi", "from must come last"), ("pai,from,rpid", "from must come last"),
                                 ("pai,pai,from", "'pai' given twice"), ("pai,diversion,from", "unknown identity header 'diversion'"),
                                 ("", "expected identity headers in order")] {
            XCTAssertThrowsError(try ConfigParser.parse("log-level = info\nidentity-order = \(value)\n", path: "/etc/l.conf"), value) { error in
                XCTAssertTrue("\(error)".contains("/etc/l.conf:2"), "\(error)")
                XCTAssertTrue("\(error)".contains(message), "\(value): \(error)")
            }
        }
    }
}
