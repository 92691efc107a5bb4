import XCTest
@testable import SIP

/// Remote-Party-ID and P-Preferred-Identity as the parser reads them (issue 17 item 7).
final class IdentityHeaderTests: XCTestCase {
    func parse(_ extra: [String]) -> SIPParser {
        let parser = SIPParser()
        let text = ([
            "INVITE sip:1001@192.0.2.1 SIP/2.0", "Via: SIP/2.0/UDP 192.0.2.9:5060;branch=z9hG4bK-1", "Max-Forwards: 70",
            "From: <sip:+8613512345678@192.0.2.9>;tag=1", "To: <sip:1001@192.0.2.1>", "Call-ID: c@192.0.2.9", "CSeq: 1 INVITE",
        ] + extra + ["Content-Length: 0", "", ""]).joined(separator: "\r\n")
        XCTAssertEqual(parser.parse(Array(text.utf8)), .request, text)
        return parser
    }

    func testRemotePartyIDOfTheCallingParty() {
        let r = parse([
            "remote-party-id: <sip:1001@192.0.2.1>;party=called, \"A\" <sip:+8618600000000@192.0.2.9>;party=Calling;privacy=full",
            "Remote-Party-ID: not a name-addr <",
            "Remote-Party-ID: <tel:+8613800138000>",
        ]).request
        XCTAssertEqual(r.remotePartyIDs.map { $0.uri.text.string }, ["sip:1001@192.0.2.1", "sip:+8618600000000@192.0.2.9", "tel:+8613800138000"])
        XCTAssertEqual(r.callingPartyIDIndex, 1)
        XCTAssertTrue(r.remotePartyIDWithheld)
        XCTAssertEqual(r.callerIdentity(.remotePartyID(1)).number.map { String(decoding: $0, as: UTF8.self) }, "+8618600000000")
        XCTAssertEqual(r.callerIdentity(.remotePartyID(9)).number.map { String(decoding: $0, as: UTF8.self) }, "+8613512345678", "From when out of range")

        let open = parse(["Remote-Party-ID: <sip:+8618600000000@192.0.2.9>;privacy=name"]).request
        XCTAssertEqual(open.callingPartyIDIndex, 0, "party= absent: the calling party")
        XCTAssertFalse(open.remotePartyIDWithheld)
        let none = parse(["Remote-Party-ID: <sip:1001@192.0.2.1>;party=called;privacy=full"]).request
        XCTAssertNil(none.callingPartyIDIndex)
        XCTAssertFalse(none.remotePartyIDWithheld, "the called party's privacy is not the caller's")
    }

    func testPreferredIdentity() {
        let r = parse(["P-Preferred-Identity: \"Alice\" <sip:+8618600000000@192.0.2.9>, <tel:+8618600000000>"]).request
        XCTAssertEqual(r.preferredIdentities.map { $0.uri.text.string }, ["sip:+8618600000000@192.0.2.9", "tel:+8618600000000"])
        XCTAssertEqual(r.callerIdentity(.preferredIdentity(1)).scheme, .tel)
        XCTAssertTrue(parse([]).request.preferredIdentities.isEmpty)
    }
}
