import Foundation
import XCTest
@testable import SIP

final class ParsingTests: XCTestCase {
    let parser = SIPParser()

    /// The word-at-a-time control-character search against `contains(where: isControl)`, on
    /// every length up to 40 with the boundary bytes anywhere.
    func testContainsControlMatchesItsDefinition() {
        let found = compareWithDefinition(seed: 16, boundary: [0x00, 0x01, 0x09, 0x1F, 0x20, 0x21, 0x7E, 0x7F, 0x80, 0xA0, 0xFF, 0x3A],
                                          containsControl) { $0.contains(where: isControl) }
        XCTAssertGreaterThan(found, 50_000)
    }

    func testAsteriskInvite() throws {
        XCTAssertEqual(parser.parse(asteriskInvite), .request)
        let r = parser.request
        XCTAssertTrue(r.isComplete)
        XCTAssertEqual(r.method, .invite)
        XCTAssertEqual(r.methodText.string, "INVITE")
        XCTAssertEqual(r.sipVersion.string, "SIP/2.0")
        XCTAssertTrue(r.isSIP2_0)
        XCTAssertEqual(r.requestURI.scheme, .sip)
        XCTAssertEqual(r.requestURI.user?.string, "+4930123456")
        XCTAssertEqual(r.requestURI.host?.string, "192.0.2.10")
        XCTAssertEqual(r.requestURI.port, 5060)
        XCTAssertEqual(r.requestURI.text.string, "sip:+4930123456@192.0.2.10:5060")
        XCTAssertEqual(r.from.displayName?.string, "Alice Example")
        XCTAssertEqual(r.from.rawDisplayName?.string, "\"Alice Example\"")
        XCTAssertEqual(r.from.uri.scheme, .sip)
        XCTAssertEqual(r.from.uri.userOrNumber?.string, "+4930111222")
        XCTAssertEqual(r.from.uri.host?.string, "192.0.2.20")
        XCTAssertEqual(r.from.tag?.string, "as6f1e2d3c")
        XCTAssertFalse(r.toHasTag)
        XCTAssertEqual(r.callID.string, "3c2a7f1b5e6d4a8f01234567@192.0.2.20:5060")
        XCTAssertEqual(r.cseqNumber, 102)
        XCTAssertEqual(r.cseqMethod.string, "INVITE")
        XCTAssertEqual(r.maxForwards, 70)
        XCTAssertEqual(r.viaCount, 1)
        XCTAssertEqual(r.topVia.protocolName.string, "SIP")
        XCTAssertEqual(r.topVia.protocolVersion.string, "2.0")
        XCTAssertEqual(r.topVia.transport.string, "UDP")
        XCTAssertEqual(r.topVia.host.string, "192.0.2.20")
        XCTAssertEqual(r.topVia.port, 5060)
        XCTAssertEqual(r.topVia.branch?.string, "z9hG4bK5f2a1c3d")
        XCTAssertTrue(r.topVia.hasRport)
        XCTAssertEqual(r.contentType?.string, "application/sdp")
        XCTAssertEqual(r.assertedIdentities.count, 0)
        XCTAssertEqual(r.privacy, [])
        XCTAssertNil(r.protocolRejection())
        let body = Array(asteriskInvite[r.bodyRange])
        XCTAssertEqual(body, wire(sdpBody))
    }

    func testFreeSWITCHInvite() throws {
        let bytes = message("""
        INVITE sip:1000@10.0.0.5 SIP/2.0
        Via: SIP/2.0/UDP 10.0.0.7;rport;branch=z9hG4bKQ4mBv1m3a6Z3p
        Max-Forwards: 69
        From: "Bob" <sip:+15551230000@10.0.0.7>;tag=3Dg1a9XKQy0aS
        To: <sip:1000@10.0.0.5>
        Call-ID: 5d4b0b1e-2b9f-123e-8e2c-525400123456
        CSeq: 96413027 INVITE
        Contact: <sip:gw+carrier@10.0.0.7:5080;transport=udp;gw=carrier>
        User-Agent: FreeSWITCH-mod_sofia/1.10.9
        Allow: INVITE, ACK, BYE, CANCEL, OPTIONS, MESSAGE, INFO, UPDATE, REGISTER, REFER, NOTIFY
        Supported: timer, path, replaces
        Allow-Events: talk, hold, conference, refer
        Content-Type: application/sdp
        Content-Disposition: session
        Remote-Party-ID: "Bob" <sip:+15551230000@10.0.0.7>;party=calling;screen=yes;privacy=off
        """, body: sdpBody)
        XCTAssertEqual(parser.parse(bytes), .request)
        let r = parser.request
        XCTAssertEqual(r.from.displayName?.string, "Bob")
        XCTAssertEqual(r.from.uri.user?.string, "+15551230000")
        XCTAssertEqual(r.from.tag?.string, "3Dg1a9XKQy0aS")
        XCTAssertEqual(r.cseqNumber, 96413027)
        XCTAssertEqual(r.topVia.host.string, "10.0.0.7")
        XCTAssertNil(r.topVia.port)
        XCTAssertTrue(r.topVia.hasRport)
        XCTAssertEqual(r.requestURI.user?.string, "1000")
    }

    func testKamailioCarrierInviteWithCompactHeadersAndPAI() throws {
        let bytes = message("""
        INVITE sip:+4930123456@redirect.example.net;user=phone SIP/2.0
        Record-Route: <sip:203.0.113.5;lr;ftag=1928301774;did=7b1.c1>
        v: SIP/2.0/UDP 203.0.113.5;branch=z9hG4bKcydzigwkX, SIP/2.0/UDP 198.51.100.9:5060;branch=z9hG4bK-524287-1---abcdef;rport=5060
        f: <sip:+4989123456;cpc=ordinary@carrier.example;user=phone>;tag=1928301774
        t: <sip:+4930123456@redirect.example.net;user=phone>
        i: a84b4c76e66710@pc33.carrier.example
        CSeq: 314159 INVITE
        Max-Forwards: 68
        m: <sip:+4989123456@198.51.100.9:5060>
        P-Asserted-Identity: <sip:+4989123456@carrier.example;user=phone;verstat=TN-Validation-Passed>, <tel:+4989123456;verstat=TN-Validation-Passed>
        Privacy: none
        c: application/sdp
        """, body: sdpBody, lengthHeader: "l")
        XCTAssertEqual(parser.parse(bytes), .request)
        let r = parser.request
        XCTAssertEqual(r.viaCount, 2)
        XCTAssertEqual(r.topVia.host.string, "203.0.113.5")
        XCTAssertFalse(r.topVia.hasRport)
        XCTAssertEqual(r.callID.string, "a84b4c76e66710@pc33.carrier.example")
        XCTAssertEqual(r.requestURI.parameters.value("user")?.string, "phone")
        // ;cpc=ordinary inside the user part stays part of the user text.
        XCTAssertEqual(r.from.uri.rawUser?.string, "+4989123456;cpc=ordinary")
        XCTAssertEqual(r.from.uri.userOrNumber?.string, "+4989123456;cpc=ordinary")
        XCTAssertEqual(r.from.uri.parameters.value("user")?.string, "phone")
        XCTAssertEqual(r.assertedIdentities.count, 2)
        let sip = try XCTUnwrap(r.assertedIdentity(scheme: .sip))
        XCTAssertEqual(sip.uri.userOrNumber?.string, "+4989123456")
        XCTAssertEqual(sip.uri.host?.string, "carrier.example")
        XCTAssertEqual(sip.uri.parameters.value("verstat")?.string, "TN-Validation-Passed")
        let tel = try XCTUnwrap(r.assertedIdentity(scheme: .tel))
        XCTAssertEqual(tel.uri.userOrNumber?.string, "+4989123456")
        XCTAssertNil(tel.uri.host)
        XCTAssertEqual(tel.uri.parameters.value("verstat")?.string, "TN-Validation-Passed")
        XCTAssertEqual(r.privacy, .noneRequested)
        XCTAssertEqual(r.contentType?.string, "application/sdp")
        XCTAssertEqual(Array(bytes[r.bodyRange]), wire(sdpBody))
    }

    func testPAIInTwoHeaderFieldsAndTelRequestURI() throws {
        let bytes = message("""
        INVITE tel:+4930123456;phone-context=+49 SIP/2.0
        Via: SIP/2.0/TCP [2001:db8::1]:5061;branch=z9hG4bK77
        From: <tel:+4930111;cpc=ordinary;verstat=TN-Validation-Failed>;tag=abc
        To: <tel:+4930123456>
        Call-ID: c1
        CSeq: 1 INVITE
        P-Asserted-Identity: "Carrier Name" <sip:%2B4930111@carrier.example;user=phone>
        P-Asserted-Identity: <tel:+4930111>
        """)
        XCTAssertEqual(parser.parse(bytes), .request)
        let r = parser.request
        XCTAssertEqual(r.requestURI.scheme, .tel)
        XCTAssertEqual(r.requestURI.userOrNumber?.string, "+4930123456")
        XCTAssertEqual(r.requestURI.parameters.value("phone-context")?.string, "+49")
        XCTAssertEqual(r.from.uri.scheme, .tel)
        XCTAssertEqual(r.from.uri.userOrNumber?.string, "+4930111")
        XCTAssertEqual(r.from.uri.parameters.value("cpc")?.string, "ordinary")
        XCTAssertEqual(r.from.uri.parameters.value("verstat")?.string, "TN-Validation-Failed")
        XCTAssertEqual(r.topVia.host.string, "2001:db8::1")
        XCTAssertEqual(r.topVia.port, 5061)
        XCTAssertEqual(r.topVia.transport.string, "TCP")
        XCTAssertEqual(r.assertedIdentities.count, 2)
        XCTAssertEqual(r.assertedIdentities[0].displayName?.string, "Carrier Name")
        XCTAssertEqual(r.assertedIdentities[0].uri.rawUser?.string, "%2B4930111")
        XCTAssertEqual(r.assertedIdentities[0].uri.userOrNumber?.string, "+4930111")
        XCTAssertEqual(r.assertedIdentities[1].uri.scheme, .tel)
        XCTAssertEqual(r.assertedIdentities[1].uri.userOrNumber?.string, "+4930111")
        XCTAssertNil(r.protocolRejection())
    }

    func testQuotedDisplayNamesWithCommasEscapesAndUTF8() throws {
        let bytes = message("""
        INVITE sip:bob@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bK1
        From: "Doe, John \\"JD\\" M\u{00FC}ller \\\\ Jr." <sip:jdoe@example.com>;tag=1
        To: "Bob, the Builder" <sip:bob@example.com>
        Call-ID: c2
        CSeq: 1 INVITE
        P-Asserted-Identity: "Doe, John" <sip:+4930111@example.com>, <tel:+4930111>
        """)
        XCTAssertEqual(parser.parse(bytes), .request)
        let r = parser.request
        XCTAssertEqual(r.from.displayName?.string, "Doe, John \"JD\" M\u{00FC}ller \\ Jr.")
        XCTAssertEqual(r.from.rawDisplayName?.string, "\"Doe, John \\\"JD\\\" M\u{00FC}ller \\\\ Jr.\"")
        XCTAssertEqual(r.to.displayName?.string, "Bob, the Builder")
        // The comma inside the quoted display name does not split the PAI value.
        XCTAssertEqual(r.assertedIdentities.count, 2)
        XCTAssertEqual(r.assertedIdentities[0].displayName?.string, "Doe, John")
        XCTAssertEqual(r.assertedIdentities[1].uri.scheme, .tel)
    }

    func testLFOnlyLineEndings() throws {
        let text = "OPTIONS sip:redirect@example.com SIP/2.0\nVia: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bKlf\nFrom: <sip:alice@example.com>;tag=lf1\nTo: <sip:redirect@example.com>\nCall-ID: lf-only\nCSeq: 7 OPTIONS\nMax-Forwards: 70\nContent-Length: 4\n\nabcdEXTRA"
        let bytes = Array(text.utf8)
        XCTAssertEqual(parser.parse(bytes), .request)
        let r = parser.request
        XCTAssertEqual(r.method, .options)
        XCTAssertEqual(r.callID.string, "lf-only")
        XCTAssertEqual(String(decoding: bytes[r.bodyRange], as: UTF8.self), "abcd")
    }

    func testAnonymousCallers() throws {
        var bytes = message("""
        INVITE sip:+4930123456@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKanon1
        From: "Anonymous" <sip:anonymous@anonymous.invalid>;tag=an1
        To: <sip:+4930123456@example.com>
        Call-ID: anon1
        CSeq: 1 INVITE
        P-Asserted-Identity: <sip:+4930999888@carrier.example;user=phone>
        Privacy: id
        """)
        XCTAssertEqual(parser.parse(bytes), .request)
        var r = parser.request
        XCTAssertEqual(r.from.uri.userOrNumber?.string, "anonymous")
        XCTAssertEqual(r.from.uri.host?.string, "anonymous.invalid")
        XCTAssertEqual(r.privacy, .id)
        XCTAssertEqual(r.privacyTokens.map(\.string), ["id"])
        XCTAssertEqual(r.assertedIdentities.first?.uri.userOrNumber?.string, "+4930999888")

        bytes = message("""
        INVITE sip:+4930123456@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKanon2
        From: <sip:anonymous.invalid>;tag=an2
        To: <sip:+4930123456@example.com>
        Call-ID: anon2
        CSeq: 1 INVITE
        Privacy: id; header;user
        """)
        XCTAssertEqual(parser.parse(bytes), .request)
        r = parser.request
        XCTAssertNil(r.from.uri.rawUser)
        XCTAssertNil(r.from.uri.userOrNumber)
        XCTAssertEqual(r.from.uri.host?.string, "anonymous.invalid")
        XCTAssertEqual(r.privacy, [.id, .header, .user])
        XCTAssertEqual(r.privacyTokens.map(\.string), ["id", "header", "user"])
    }

    func testRequireAndProxyRequireTags() throws {
        let bytes = message("""
        INVITE sip:a@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKreq
        From: <sip:b@example.com>;tag=r1
        To: <sip:a@example.com>
        Call-ID: req1
        CSeq: 1 INVITE
        Require: 100rel, timer
        Require: precondition
        Proxy-Require: sec-agree
        """)
        XCTAssertEqual(parser.parse(bytes), .request)
        XCTAssertEqual(parser.request.requireTags.map(\.string), ["100rel", "timer", "precondition"])
        XCTAssertEqual(parser.request.proxyRequireTags.map(\.string), ["sec-agree"])
        XCTAssertTrue(parser.request.requireTags.contains(token: "TIMER"))
    }

    func testMaxForwardsLeadingZerosAndLargeCSeq() throws {
        let bytes = message("""
        OPTIONS sip:a@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKmf
        From: <sip:b@example.com>;tag=m1
        To: <sip:a@example.com>
        Call-ID: mf1
        CSeq: 4294967295 OPTIONS
        Max-Forwards: 0068
        """)
        XCTAssertEqual(parser.parse(bytes), .request)
        XCTAssertEqual(parser.request.maxForwards, 68)
        XCTAssertEqual(parser.request.cseqNumber, 4_294_967_295)
    }

    func testEveryKnownMethodIsRecognised() {
        for method in SIPMethod.allCases where method != .other {
            let bytes = message("""
            \(method.name) sip:a@example.com SIP/2.0
            Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKm
            From: <sip:b@example.com>;tag=m1
            To: <sip:a@example.com>
            Call-ID: m1
            CSeq: 1 \(method.name)
            """)
            XCTAssertEqual(parser.parse(bytes), .request, method.name)
            XCTAssertEqual(parser.request.method, method)
        }
        let lower = message("""
        invite sip:a@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKm
        From: <sip:b@example.com>;tag=m1
        To: <sip:a@example.com>
        Call-ID: m1
        CSeq: 1 invite
        """)
        XCTAssertEqual(parser.parse(lower), .request)
        XCTAssertEqual(parser.request.method, .other, "method names are case-sensitive")
    }

    func testOutcomesForNonRequests() {
        XCTAssertEqual(parser.parse([UInt8]()), .garbage)
        XCTAssertEqual(parser.parse(Array("\r\n\r\n".utf8)), .keepAlive)
        XCTAssertEqual(parser.parse(Array("\r\n".utf8)), .keepAlive)
        XCTAssertEqual(parser.parse(wire("SIP/2.0 200 OK\nVia: SIP/2.0/UDP x\n\n")), .response)
        XCTAssertEqual(parser.parse([0x00, 0x01, 0x00, 0x08, 0x21, 0x12, 0xA4, 0x42]), .garbage, "STUN")
        XCTAssertEqual(parser.parse(wire("GET / HTTP/1.1\nHost: x\n\n")), .garbage)
        XCTAssertEqual(parser.parse(Array("hello".utf8)), .garbage)
        XCTAssertFalse(parser.request.canRespond)
    }

    func testLeadingCRLFBeforeRequestIsIgnored() {
        let bytes = Array("\r\n\r\n".utf8) + asteriskInvite
        XCTAssertEqual(parser.parse(bytes), .request)
        XCTAssertEqual(Array(bytes[parser.request.bodyRange]), wire(sdpBody))
    }

    func testSizeCap() {
        let small = SIPParser(maxMessageSize: 512)
        XCTAssertEqual(small.parse(asteriskInvite), .tooLarge)
        let fits = SIPParser(maxMessageSize: asteriskInvite.count)
        XCTAssertEqual(fits.parse(asteriskInvite), .request)
        let oneShort = SIPParser(maxMessageSize: asteriskInvite.count - 1)
        XCTAssertEqual(oneShort.parse(asteriskInvite), .tooLarge)
        XCTAssertEqual(SIPParser().maxMessageSize, 16384)
        XCTAssertEqual(parser.parse([UInt8](repeating: 0x41, count: 16385)), .tooLarge)
    }

    func testMalformedOutcomes() {
        func check(_ head: String, _ expected: SIPParseOutcome, body: String = "", line: UInt = #line) {
            XCTAssertEqual(parser.parse(message(head, body: body)), expected, line: line)
        }
        let base = """
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKx
        From: <sip:b@example.com>;tag=1
        To: <sip:a@example.com>
        Call-ID: x1
        CSeq: 1 INVITE
        """
        check("INVITE sip:a@example.com SIP/2.0\n" + base, .request)
        check("INVITE sip:a@example.com SIP/2.0\n" + base.replacingOccurrences(of: "Call-ID: x1\n", with: ""),
              .malformed(.missingHeader(.callID), canRespond: false))
        check("INVITE sip:a@example.com SIP/2.0\n" + base + "\nCall-ID: x2", .malformed(.duplicateHeader(.callID), canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base + "\nt: <sip:c@example.com>", .malformed(.duplicateHeader(.to), canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base + "\nf: <sip:c@example.com>", .malformed(.duplicateHeader(.from), canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base + "\nCSeq: 2 INVITE", .malformed(.duplicateHeader(.cseq), canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base + "\nMax-Forwards: 70\nMax-Forwards: 70",
              .malformed(.duplicateHeader(.maxForwards), canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base + "\nContent-Length: 0", .malformed(.duplicateHeader(.contentLength), canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base + "\nMax-Forwards: 7x", .malformed(.badMaxForwards, canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base.replacingOccurrences(of: "CSeq: 1 INVITE", with: "CSeq: 4294967296 INVITE"),
              .malformed(.badCSeq, canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base.replacingOccurrences(of: "CSeq: 1 INVITE", with: "CSeq: INVITE"),
              .malformed(.badCSeq, canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base.replacingOccurrences(of: "CSeq: 1 INVITE", with: "CSeq: -1 INVITE"),
              .malformed(.badCSeq, canRespond: true))
        check("INVITE  sip:a@example.com SIP/2.0\n" + base, .malformed(.badRequestLine, canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0x\n" + base, .malformed(.badRequestLine, canRespond: true))
        check("INVITE sip: SIP/2.0\n" + base, .malformed(.badRequestURI, canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base + "\nNo colon here", .malformed(.badHeaderLine, canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base.replacingOccurrences(of: "From: <sip:b@example.com>;tag=1", with: "From: <sip:b@example.com;tag=1"),
              .malformed(.invalidHeader(.from), canRespond: true))
        check("ACK sip:a@example.com SIP/2.0\n" + base + "\nCall-ID: x2", .malformed(.duplicateHeader(.callID), canRespond: false))

        // Content-Length problems (UDP rules).
        let head = "INVITE sip:a@example.com SIP/2.0\n" + base + "\n"
        XCTAssertEqual(parser.parse(wire(head + "Content-Length: 10\n\nabc")), .malformed(.truncatedBody, canRespond: true))
        XCTAssertEqual(parser.parse(wire(head + "Content-Length: -3\n\nabc")), .malformed(.badContentLength, canRespond: true))
        XCTAssertEqual(parser.parse(wire(head + "Content-Length: abc\n\nabc")), .malformed(.badContentLength, canRespond: true))
        XCTAssertEqual(parser.parse(wire(head + "Content-Length: 99999999999999999999\n\nabc")), .malformed(.badContentLength, canRespond: true))
        XCTAssertEqual(parser.parse(wire(head + "Content-Length: 3\nl: 2\n\nabc")), .malformed(.badContentLength, canRespond: true))
        XCTAssertEqual(parser.parse(wire(head + "Content-Length: 3\n\nabcdef")), .request)
        XCTAssertEqual(parser.request.bodyRange.count, 3)
        XCTAssertEqual(parser.parse(wire(head + "\nabcdef")), .request)
        XCTAssertEqual(parser.request.bodyRange.count, 6, "no Content-Length over UDP: the rest of the datagram")

        // Bare CR inside a header: never copied into a response.
        XCTAssertEqual(parser.parse(Array("INVITE sip:a@example.com SIP/2.0\r\n".utf8) + wire(base) + Array("\r\nX-Evil: a\rInjected: b\r\n\r\n".utf8)),
                       .malformed(.invalidCharacter, canRespond: false))
        // A bare CR after an earlier error still makes the packet unanswerable.
        XCTAssertEqual(parser.parse(Array("INVITE sip:a@example.com SIP/2.0\r\nBroken line\r\n".utf8) + wire(base) + Array("\r\nX-Evil: a\rInjected: b\r\n\r\n".utf8)),
                       .malformed(.badHeaderLine, canRespond: false))
        // Option tags must be tokens (they may be echoed in Unsupported).
        check("INVITE sip:a@example.com SIP/2.0\n" + base + "\nRequire: 100rel, a b", .malformed(.invalidHeader(.require), canRespond: true))
        check("INVITE sip:a@example.com SIP/2.0\n" + base + "\nProxy-Require: \"x\"", .malformed(.invalidHeader(.proxyRequire), canRespond: true))
        // Datagram ending inside a header line.
        XCTAssertEqual(parser.parse(Array("INVITE sip:a@example.com SIP/2.0\r\n".utf8) + wire(base) + Array("\r\nSubject: trunc".utf8)),
                       .malformed(.unterminatedHeaderSection, canRespond: true))
        // Datagram ending after the last header line, without the empty line: tolerated.
        XCTAssertEqual(parser.parse(Array("INVITE sip:a@example.com SIP/2.0\r\n".utf8) + wire(base + "\n")), .request)
    }

    func testPAIFixtureWithCompactFormsAndEscapes() throws {
        XCTAssertEqual(parser.parse(paiInvite), .request)
        let r = parser.request
        XCTAssertEqual(r.from.displayName?.string, "Doe, \"J\"")
        XCTAssertEqual(r.from.uri.userOrNumber?.string, "+4989123456;cpc=ordinary")
        XCTAssertEqual(r.maxForwards, 68)
        XCTAssertEqual(r.assertedIdentities.map { $0.uri.userOrNumber?.string }, ["+4989123456", "+4989123456"])
        XCTAssertEqual(r.assertedIdentities[0].uri.rawUser?.string, "%2B4989123456")
        XCTAssertEqual(r.privacy, [.id, .header])
        XCTAssertNil(r.protocolRejection())
    }

    func testInvalidPAIIsIgnoredNotFatal() throws {
        let bytes = message("""
        INVITE sip:a@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKbadpai
        From: <sip:b@example.com>;tag=1
        To: <sip:a@example.com>
        Call-ID: badpai
        CSeq: 1 INVITE
        P-Asserted-Identity: "unterminated <sip:x@y>, <tel:+4930111>, garbage
        """)
        XCTAssertEqual(parser.parse(bytes), .request)
        XCTAssertEqual(parser.request.assertedIdentities.count, 0)
        XCTAssertEqual(parser.request.invalidAssertedIdentityCount, 1)
        let two = message("""
        INVITE sip:a@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKbadpai
        From: <sip:b@example.com>;tag=1
        To: <sip:a@example.com>
        Call-ID: badpai
        CSeq: 1 INVITE
        P-Asserted-Identity: <tel:+4930111>, <sip:@>
        """)
        XCTAssertEqual(parser.parse(two), .request)
        XCTAssertEqual(parser.request.assertedIdentities.map { $0.uri.userOrNumber?.string }, ["+4930111"])
        XCTAssertEqual(parser.request.invalidAssertedIdentityCount, 1)
    }

    func testFoldedHeadersAreUnfolded() throws {
        let bytes = Array("""
        INVITE sip:a@example.com SIP/2.0\r
        Via: SIP/2.0/UDP 192.0.2.1\r
          ;branch=z9hG4bKfold\r
        From: "Folded\r
         Name" <sip:b@example.com>\r
          ;tag=f1\r
        To: <sip:a@example.com>\r
        Call-ID: fold1\r
        CSeq: 1\r
         INVITE\r
        Content-Length: 0\r
        \r

        """.utf8)
        XCTAssertEqual(parser.parse(bytes), .request)
        let r = parser.request
        XCTAssertEqual(r.topVia.branch?.string, "z9hG4bKfold")
        XCTAssertEqual(r.from.displayName?.string, "Folded Name")
        XCTAssertEqual(r.from.tag?.string, "f1")
        XCTAssertEqual(r.cseqMethod.string, "INVITE")
        XCTAssertFalse(r.callID.contains(ASCII.cr))
    }

    func testBodyIsNeverParsedMultipartWithDuplicateContentType() throws {
        // A multipart part with two Content-Type headers makes libosip2's body parser leak; we
        // never give it the body, and the body range still points at the exact bytes.
        let body = """
        --boundary42
        Content-Type: application/sdp
        Content-Type: text/plain

        v=0
        --boundary42
        Content-Type: application/isup; version=itu-t92+
        Content-Disposition: signal; handling=optional

        \u{01}\u{02}\u{03}
        --boundary42--

        """
        let bytes = message("""
        INVITE sip:a@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKmp
        From: <sip:b@example.com>;tag=mp
        To: <sip:a@example.com>
        Call-ID: mp1
        CSeq: 1 INVITE
        MIME-Version: 1.0
        Content-Type: multipart/mixed;boundary=boundary42
        """, body: body)
        for _ in 0..<3 {
            XCTAssertEqual(parser.parse(bytes), .request)
            let r = parser.request
            XCTAssertEqual(r.contentType?.string, "multipart/mixed;boundary=boundary42")
            XCTAssertEqual(Array(bytes[r.bodyRange]), wire(body))
            XCTAssertEqual(r.bodyRange.upperBound, bytes.count)
        }
    }

    func testViewsSurviveCallerBufferReuse() throws {
        var bytes = asteriskInvite
        XCTAssertEqual(bytes.withUnsafeBytes { parser.parse($0) }, .request)
        for i in bytes.indices { bytes[i] = 0x58 }
        XCTAssertEqual(parser.request.from.uri.user?.string, "+4930111222")
        let written = try respond(parser, SIPResponse(statusCode: 404, reasonPhrase: "Not Found", source: testSource))
        XCTAssertTrue(written.text.contains("Call-ID: 3c2a7f1b5e6d4a8f01234567@192.0.2.20:5060\r\n"))
    }

    func testParsersOnSeveralThreads() {
        let messages = [asteriskInvite] + (try! FileManager.default.contentsOfDirectory(atPath: tortureDirectory.path))
            .filter { $0.hasSuffix(".dat") }.sorted()
            .map { try! [UInt8](Data(contentsOf: tortureDirectory.appendingPathComponent($0))) }
        let expected = messages.map { SIPParser().parse($0) }
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let local = SIPParser()
            for _ in 0..<50 {
                for (m, e) in zip(messages, expected) {
                    XCTAssertEqual(local.parse(m), e)
                }
            }
        }
    }

    /// A header name the scanner knows is taken without the byte-by-byte token check; any
    /// other byte in its place must still give what the check gave: a name that is not a
    /// token is a bad header line, a token that is another name leaves the header missing.
    func testKnownHeaderNamesWithAnyByteReplaced() {
        let parser = SIPParser()
        let lines: [(name: String, compact: String?, value: String, header: SIPHeaderName?)] = [
            ("Via", "v", "SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKx", .via), ("From", "f", "<sip:b@example.com>;tag=1", .from),
            ("To", "t", "<sip:a@example.com>", .to), ("Call-ID", "i", "x1", .callID), ("CSeq", nil, "1 INVITE", .cseq),
            ("Max-Forwards", nil, "70", nil), ("Content-Length", "l", "0", nil),
        ]
        for (index, line) in lines.enumerated() {
            for name in [line.name] + (line.compact.map { [$0] } ?? []) {
                for place in 0..<name.utf8.count {
                    // Not the bytes that end the line or the name, or fold or trim it (LF, CR, ':', SP, HTAB).
                    for b in UInt8(1)...UInt8(255) where ![0x0A, 0x0D, 0x3A, 0x20, 0x09].contains(b) {
                        var mutated = Array(name.utf8)
                        mutated[place] = b
                        var bytes = Array("INVITE sip:a@example.com SIP/2.0\r\n".utf8)
                        for (other, l) in lines.enumerated() {
                            bytes += other == index ? mutated : Array(l.name.utf8)
                            bytes += Array(": \(l.value)\r\n".utf8)
                        }
                        bytes += Array("\r\n".utf8)
                        let outcome = parser.parse(bytes)
                        let token = mutated.allSatisfy { isTokenByte($0) }
                        let same = String(decoding: mutated, as: UTF8.self).lowercased() == name.lowercased()
                        let what = "\(name) with \(b) at \(place)"
                        if !token {
                            guard case .malformed(.badHeaderLine, _) = outcome else { XCTFail("\(what): \(outcome)"); continue }
                        } else if same {
                            XCTAssertEqual(outcome, .request, what)
                        } else if let header = line.header {
                            XCTAssertEqual(outcome, .malformed(.missingHeader(header), canRespond: false), what)
                        } else if case .malformed(.badHeaderLine, _) = outcome {
                            XCTFail("\(what): \(outcome)")
                        }
                    }
                }
            }
        }
    }
}
