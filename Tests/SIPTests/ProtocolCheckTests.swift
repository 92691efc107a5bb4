import XCTest
@testable import SIP

final class ProtocolCheckTests: XCTestCase {
    let parser = SIPParser()

    func request(method: String = "INVITE", uri: String = "sip:+4930123456@example.com", version: String = "SIP/2.0",
                 cseqMethod: String? = nil, extra: String = "") -> SIPRequest {
        var head = """
        \(method) \(uri) \(version)
        Via: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bKchk;rport
        From: <sip:alice@example.com>;tag=chk
        To: <sip:+4930123456@example.com>
        Call-ID: check-1
        CSeq: 1 \(cseqMethod ?? method)
        """
        if !extra.isEmpty { head += "\n" + extra }
        let outcome = parser.parse(message(head))
        XCTAssertEqual(outcome, .request, head)
        return parser.request
    }

    func testWellFormedInviteAndOptionsPass() {
        XCTAssertNil(request().protocolRejection())
        XCTAssertNil(request(method: "OPTIONS", extra: "Max-Forwards: 70").protocolRejection())
        XCTAssertNil(request(uri: "sips:bob@example.com").protocolRejection())
        XCTAssertNil(request(uri: "tel:+4930123456").protocolRejection())
    }

    func testVersionNot20Is505() {
        let r = request(version: "SIP/3.0")
        XCTAssertEqual(r.protocolRejection()?.statusCode, 505)
        // Version first: even with an unknown method too.
        XCTAssertEqual(request(method: "FOO", version: "SIP/1.0").protocolRejection()?.statusCode, 505)
        XCTAssertNil(request(version: "sip/2.0").protocolRejection(), "SIP-Version is case-insensitive")
    }

    func testUnknownMethodIs501WithAllow() throws {
        let rejection = try XCTUnwrap(request(method: "NEWMETHOD", cseqMethod: "INVITE").protocolRejection())
        XCTAssertEqual(rejection.statusCode, 501)
        XCTAssertEqual(rejection.headers, [SIPHeaderField("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS")])
    }

    func testKnownButNotAllowedMethodIs405() throws {
        let rejection = try XCTUnwrap(request(method: "REGISTER").protocolRejection())
        XCTAssertEqual(rejection.statusCode, 405)
        XCTAssertEqual(rejection.headers.first?.name, "Allow")
        let policy = SIPProtocolPolicy(allowedMethods: [.invite, .ack, .cancel, .options, .register])
        XCTAssertNil(request(method: "REGISTER").protocolRejection(policy: policy))
        XCTAssertEqual(policy.allowHeaderValue, "INVITE, ACK, CANCEL, OPTIONS, REGISTER")
    }

    func testCSeqMethodMismatchIs400() {
        XCTAssertEqual(request(method: "OPTIONS", cseqMethod: "INVITE").protocolRejection()?.statusCode, 400)
        XCTAssertEqual(request(method: "CANCEL", cseqMethod: "INVITE").protocolRejection()?.statusCode, 400)
        XCTAssertNil(request(method: "CANCEL").protocolRejection())
    }

    func testACKIsNeverAnswered() {
        XCTAssertNil(request(method: "ACK", cseqMethod: "INVITE").protocolRejection())
        XCTAssertNil(request(method: "ACK", extra: "Max-Forwards: 0").protocolRejection())
        XCTAssertNil(request(method: "ACK", uri: "http://example.com").protocolRejection())
        XCTAssertNil(request(method: "ACK", extra: "Require: foo").protocolRejection())
    }

    func testUnsupportedURISchemeIs416() {
        XCTAssertEqual(request(uri: "http://www.example.com/").protocolRejection()?.statusCode, 416)
        XCTAssertEqual(request(uri: "urn:service:sos").protocolRejection()?.statusCode, 416)
    }

    func testMaxForwardsZeroIs483() {
        XCTAssertEqual(request(extra: "Max-Forwards: 0").protocolRejection()?.statusCode, 483)
        XCTAssertEqual(request(extra: "Max-Forwards: 000").protocolRejection()?.statusCode, 483)
        XCTAssertEqual(request(method: "CANCEL", extra: "Max-Forwards: 0").protocolRejection()?.statusCode, 483)
        XCTAssertEqual(request(method: "OPTIONS", extra: "Max-Forwards: 0").protocolRejection()?.statusCode, 483)
        XCTAssertNil(request(extra: "Max-Forwards: 1").protocolRejection())
        // 416 comes before 483 (RFC 3261 §16.3 order).
        XCTAssertEqual(request(uri: "http://x", extra: "Max-Forwards: 0").protocolRejection()?.statusCode, 416)
    }

    func testRequireWithUnknownTagsIs420WithUnsupported() throws {
        let rejection = try XCTUnwrap(request(extra: "Require: 100rel, foo\nRequire: bar, FOO").protocolRejection())
        XCTAssertEqual(rejection.statusCode, 420)
        XCTAssertEqual(rejection.headers, [SIPHeaderField("Unsupported", "foo, bar, FOO")])
        XCTAssertNil(request(extra: "Require: 100rel, Timer").protocolRejection(), "supported by default, case-insensitive")
        XCTAssertNil(request(method: "CANCEL", extra: "Require: foo").protocolRejection(), "not for CANCEL")
        // Proxy-Require is a proxy's business unless asked for.
        XCTAssertNil(request(extra: "Proxy-Require: foo").protocolRejection())
        let strict = SIPProtocolPolicy(supportedOptionTags: [], supportedProxyOptionTags: [])
        XCTAssertEqual(request(extra: "Proxy-Require: foo").protocolRejection(policy: strict)?.headers,
                       [SIPHeaderField("Unsupported", "foo")])
        XCTAssertEqual(request(extra: "Require: 100rel").protocolRejection(policy: strict)?.statusCode, 420)
        // 483 before 420.
        XCTAssertEqual(request(extra: "Require: foo\nMax-Forwards: 0").protocolRejection()?.statusCode, 483)
    }

    func testMalformedRequestsBecome400() {
        // Duplicate single-valued headers and bad CSeq numbers are parse-level: they come back as
        // .malformed, answered with SIPRejection(malformation:).
        let outcome = parser.parse(message("""
        INVITE sip:a@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKdup
        From: <sip:alice@example.com>;tag=1
        To: <sip:a@example.com>
        Call-ID: dup
        CSeq: 99999999999 INVITE
        """))
        XCTAssertEqual(outcome, .malformed(.badCSeq, canRespond: true))
        let rejection = SIPRejection(malformation: .badCSeq)
        XCTAssertEqual(rejection.statusCode, 400)
        XCTAssertEqual(rejection.reasonPhrase, "Bad CSeq")
        XCTAssertEqual(SIPRejection(malformation: .missingHeader(.callID)).reasonPhrase, "Missing Call-ID")
        XCTAssertNil(parser.request.protocolRejection(), "no checks on an incomplete request")
    }
}
