import XCTest
@testable import SIP

/// `SIPCallerHint`: the callers the worker warms the directories with. A guess may be missing
/// (it costs a warm-up), but it must be read from the caller header lines of an INVITE only,
/// never from another header, the body, or a request that is not an INVITE.
final class CallerHintTests: XCTestCase {
    func hints(_ lines: [String], limit: Int = 4) -> [UInt64] {
        let bytes = Array(lines.joined(separator: "\r\n").utf8)
        var found: [UInt64] = []
        bytes.withUnsafeBytes { SIPCallerHint.numbers($0, limit: limit) { found.append($0) } }
        return found
    }

    func invite(_ headers: [String], body: [String] = []) -> [String] {
        ["INVITE sip:1001@192.0.2.5 SIP/2.0", "Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-1",
         "To: <sip:+8613900000000@192.0.2.5>"] + headers + ["Call-ID: c1", "CSeq: 1 INVITE", ""] + body + [""]
    }

    func testFromAndAssertedIdentityInPlusForm() {
        XCTAssertEqual(hints(invite(["From: \"Mobile\" <sip:+8613800138000@198.51.100.7;user=phone>;tag=1"])), [8613800138000])
        XCTAssertEqual(hints(invite(["f: <sips:+14155550100@pbx>;tag=1"])), [14155550100])
        XCTAssertEqual(hints(invite(["FROM:sip:+442071838750;tag=1"])), [442071838750])
        XCTAssertEqual(hints(invite(["From: <sip:+8613800138000@h>;tag=1",
                                     "P-Asserted-Identity: <tel:+8613911112222>"])), [8613800138000, 8613911112222])
        XCTAssertEqual(hints(invite(["p-asserted-identity: \"A\" <sip:+8613911112222@h>, <tel:+8613911112222>"])), [8613911112222])
        XCTAssertEqual(hints(invite(["From: <sip:+8613800138000@h>;tag=1",
                                     "P-Asserted-Identity: <tel:+8613911112222>"]), limit: 1), [8613800138000])
    }

    func testNoGuessFromOtherForms() {
        XCTAssertEqual(hints(invite(["From: <sip:013800138000@h>;tag=1"])), [], "national form: the normalizer's job")
        XCTAssertEqual(hints(invite(["From: <tel:+86-138-0013-8000>;tag=1"])), [], "visual separators")
        XCTAssertEqual(hints(invite(["From: <sip:+1234567890123456@h>;tag=1"])), [], "16 digits")
        XCTAssertEqual(hints(invite(["From: <sip:anonymous@anonymous.invalid>;tag=1"])), [])
        XCTAssertEqual(hints(invite(["Fromage: <sip:+8613800138000@h>", "Contact: <sip:+8613800138000@h>"])), [],
                       "only the caller headers count")
    }

    func testOnlyTheHeadersOfAnInvite() {
        XCTAssertEqual(hints(invite(["From: <sip:1001@h>;tag=1"], body: ["From: <sip:+8613800138000@h>"])), [], "the body is not read")
        var options = invite(["From: <sip:+8613800138000@h>;tag=1"])
        options[0] = "OPTIONS sip:1001@192.0.2.5 SIP/2.0"
        XCTAssertEqual(hints(options), [])
        XCTAssertEqual(hints(["SIP/2.0 200 OK", "From: <sip:+8613800138000@h>;tag=1", "", ""]), [], "a response")
        // Cut anywhere, a message gives no guess or a whole one, and never reads past its end.
        let full = Array(invite(["From: <sip:+8613800138000@h>;tag=1"]).joined(separator: "\r\n").utf8)
        for end in 0...full.count {
            var found: [UInt64] = []
            full[0..<end].withUnsafeBytes { SIPCallerHint.numbers($0) { found.append($0) } }
            XCTAssertTrue(found == [] || found == [8613800138000], "cut at \(end): \(found)")
        }
    }
}
