import XCTest
@testable import SIP

final class ResponseWriterTests: XCTestCase {
    let parser = SIPParser()

    let carrierInvite = message("""
    INVITE sip:+4930123456@redirect.example.net;user=phone SIP/2.0
    Via: SIP/2.0/UDP 203.0.113.5;branch=z9hG4bKtop;rport
    Via: SIP/2.0/TCP proxy.example.net:5061;branch=z9hG4bKmid;received=198.51.100.1, SIP/2.0/UDP 198.51.100.9;branch=z9hG4bKlow
    v: SIP/2.0/UDP 10.0.0.1:5080;branch=z9hG4bKbottom
    From: "Carrier" <sip:+4989123456@carrier.example;user=phone>;tag=1928301774
    To: <sip:+4930123456@redirect.example.net;user=phone>
    Call-ID: a84b4c76e66710@pc33.carrier.example
    CSeq: 314159 INVITE
    Max-Forwards: 68
    P-Asserted-Identity: <sip:+4989123456@carrier.example;user=phone>, <tel:+4989123456>
    Contact: <sip:+4989123456@203.0.113.5>
    """, body: sdpBody)

    func parseCarrier() {
        XCTAssertEqual(parser.parse(carrierInvite), .request)
    }

    func testCopiedHeadersInOrderWithViaReceivedRport() throws {
        parseCarrier()
        let out = try respond(parser, SIPResponse(statusCode: 404, reasonPhrase: "Not Found",
                                                  source: SIPSourceAddress(ip: "203.0.113.5", port: 5062)))
        let lines = headerLines(out.text)
        XCTAssertEqual(statusLine(out.text), "SIP/2.0 404 Not Found")
        XCTAssertEqual(Array(lines.prefix(4)), [
            // rport present: received always added, rport filled with the source port.
            "Via: SIP/2.0/UDP 203.0.113.5;branch=z9hG4bKtop;rport=5062;received=203.0.113.5",
            "Via: SIP/2.0/TCP proxy.example.net:5061;branch=z9hG4bKmid;received=198.51.100.1",
            "Via: SIP/2.0/UDP 198.51.100.9;branch=z9hG4bKlow",
            "Via: SIP/2.0/UDP 10.0.0.1:5080;branch=z9hG4bKbottom",
        ])
        XCTAssertEqual(lines[4], "From: \"Carrier\" <sip:+4989123456@carrier.example;user=phone>;tag=1928301774")
        XCTAssertTrue(lines[5].hasPrefix("To: <sip:+4930123456@redirect.example.net;user=phone>;tag="))
        XCTAssertEqual(lines[6], "Call-ID: a84b4c76e66710@pc33.carrier.example")
        XCTAssertEqual(lines[7], "CSeq: 314159 INVITE")
        XCTAssertEqual(lines[8], "Content-Length: 0")
        XCTAssertEqual(lines.count, 9)
        XCTAssertTrue(out.text.hasSuffix("\r\nContent-Length: 0\r\n\r\n"))
        XCTAssertNil(out.result.labelRefusal)
    }

    func testViaReceivedRules() throws {
        func topVia(_ via: String, source: SIPSourceAddress) throws -> String {
            let bytes = message("""
            OPTIONS sip:a@example.com SIP/2.0
            Via: \(via)
            From: <sip:b@example.com>;tag=1
            To: <sip:a@example.com>
            Call-ID: via-rules
            CSeq: 1 OPTIONS
            """)
            XCTAssertEqual(parser.parse(bytes), .request)
            let out = try respond(parser, SIPResponse(statusCode: 200, reasonPhrase: "OK", source: source))
            return headerValues(out.text, "Via")[0]
        }
        let src = SIPSourceAddress(ip: "192.0.2.7", port: 5060)
        // Sent-by equals the source, no rport: untouched.
        XCTAssertEqual(try topVia("SIP/2.0/UDP 192.0.2.7:5060;branch=z9hG4bK1", source: src), "SIP/2.0/UDP 192.0.2.7:5060;branch=z9hG4bK1")
        // Different host: received added.
        XCTAssertEqual(try topVia("SIP/2.0/UDP pbx.example.com;branch=z9hG4bK1", source: src),
                       "SIP/2.0/UDP pbx.example.com;branch=z9hG4bK1;received=192.0.2.7")
        // Same host but rport: received and rport both set.
        XCTAssertEqual(try topVia("SIP/2.0/UDP 192.0.2.7:5060;rport;branch=z9hG4bK1", source: SIPSourceAddress(ip: "192.0.2.7", port: 41234)),
                       "SIP/2.0/UDP 192.0.2.7:5060;rport=41234;branch=z9hG4bK1;received=192.0.2.7")
        // A received the client put there itself is replaced.
        XCTAssertEqual(try topVia("SIP/2.0/UDP 10.1.1.1;received=6.6.6.6;branch=z9hG4bK1", source: src),
                       "SIP/2.0/UDP 10.1.1.1;branch=z9hG4bK1;received=192.0.2.7")
        // IPv6 sent-by equal to the source (brackets and case ignored).
        XCTAssertEqual(try topVia("SIP/2.0/UDP [2001:DB8::1]:5060;branch=z9hG4bK1", source: SIPSourceAddress(ip: "2001:db8::1", port: 5060)),
                       "SIP/2.0/UDP [2001:DB8::1]:5060;branch=z9hG4bK1")
        XCTAssertEqual(try topVia("SIP/2.0/UDP [2001:db8::1];rport;branch=z9hG4bK1", source: SIPSourceAddress(ip: "2001:db8::2", port: 7)),
                       "SIP/2.0/UDP [2001:db8::1];rport=7;branch=z9hG4bK1;received=2001:db8::2")
        // Folded, spaced Via: unfolded, parameters normalised.
        XCTAssertEqual(try topVia("SIP / 2.0 / UDP 192.0.2.9 ; branch = z9hG4bK1 ; rport", source: src),
                       "SIP / 2.0 / UDP 192.0.2.9;branch=z9hG4bK1;rport=5060;received=192.0.2.7")
    }

    func testToTagIsStableAcrossRetransmissionsAndDistinctOtherwise() throws {
        let response = SIPResponse(statusCode: 603, reasonPhrase: "Decline", source: testSource,
                                   headers: [SIPHeaderField("Reason", "SIP;cause=603;text=\"Network Blocked\"")])
        parseCarrier()
        let first = try respond(parser, response)
        parseCarrier()
        let second = try respond(parser, response)
        XCTAssertEqual(first.bytes, second.bytes, "a retransmission gets a byte-identical response")
        // Another worker with the same key answers the same.
        let other = SIPParser(toTagKey: 0)
        XCTAssertEqual(other.parse(carrierInvite), .request)
        XCTAssertEqual(try respond(other, response).bytes, first.bytes)

        let tag = try XCTUnwrap(headerValues(first.text, "To").first?.components(separatedBy: ";tag=").last)
        XCTAssertEqual(tag.count, 16)
        XCTAssertTrue(tag.allSatisfy { $0.isHexDigit })

        // A different transaction (branch) or key: a different tag.
        let otherBranch = String(decoding: carrierInvite, as: UTF8.self).replacingOccurrences(of: "z9hG4bKtop", with: "z9hG4bKtop2")
        XCTAssertEqual(parser.parse(Array(otherBranch.utf8)), .request)
        XCTAssertNotEqual(headerValues(try respond(parser, response).text, "To"), headerValues(first.text, "To"))
        let keyed = SIPParser(toTagKey: 42)
        XCTAssertEqual(keyed.parse(carrierInvite), .request)
        XCTAssertNotEqual(headerValues(try respond(keyed, response).text, "To"), headerValues(first.text, "To"))

        // An existing To-tag is kept and no second one is added.
        let inDialog = String(decoding: carrierInvite, as: UTF8.self)
            .replacingOccurrences(of: "To: <sip:+4930123456@redirect.example.net;user=phone>", with: "To: <sip:+4930123456@redirect.example.net;user=phone>;tag=existing")
        XCTAssertEqual(parser.parse(Array(inDialog.utf8)), .request)
        XCTAssertEqual(headerValues(try respond(parser, response).text, "To"), ["<sip:+4930123456@redirect.example.net;user=phone>;tag=existing"])
    }

    func testRedirect302WithLabel() throws {
        parseCarrier()
        let out = try respond(parser, SIPResponse(statusCode: 302, reasonPhrase: "Moved Temporarily", source: testSource,
                                                  contact: .requestURI, label: .string("Müller, \"Hans\" \\ Sohn"),
                                                  identity: .from))
        XCTAssertEqual(statusLine(out.text), "SIP/2.0 302 Moved Temporarily")
        XCTAssertEqual(headerValues(out.text, "Contact"), ["<sip:+4930123456@redirect.example.net;user=phone>"])
        XCTAssertEqual(headerValues(out.text, "P-Asserted-Identity"),
                       ["\"Müller, \\\"Hans\\\" \\\\ Sohn\" <sip:+4989123456@carrier.example;user=phone>"])
        XCTAssertEqual(headerValues(out.text, "X-Caller-Label"), ["\"Müller, \\\"Hans\\\" \\\\ Sohn\""])
        XCTAssertNil(out.result.labelRefusal)
        XCTAssertFalse(out.result.identityOmitted)
        // Order: copied headers, Contact, PAI, label, Content-Length.
        let names = headerLines(out.text).map { String($0.prefix { $0 != ":" }) }
        XCTAssertEqual(names, ["Via", "Via", "Via", "Via", "From", "To", "Call-ID", "CSeq", "Contact",
                               "P-Asserted-Identity", "X-Caller-Label", "Content-Length"])
    }

    func testLabelVariants() throws {
        parseCarrier()
        // Raw UTF-8 bytes, custom label header name, identity from the tel: PAI.
        var out = try respond(parser, SIPResponse(statusCode: 302, reasonPhrase: "Moved Temporarily", source: testSource,
                                                  contact: .uri("sip:voicemail@example.net"),
                                                  label: .bytes(Array("Zoë 山田".utf8)), identity: .assertedIdentity(1),
                                                  labelHeaderName: "X-Name"))
        XCTAssertEqual(headerValues(out.text, "P-Asserted-Identity"), ["\"Zoë 山田\" <tel:+4989123456>"])
        XCTAssertEqual(headerValues(out.text, "X-Name"), ["\"Zoë 山田\""])
        XCTAssertEqual(headerValues(out.text, "Contact"), ["<sip:voicemail@example.net>"])
        XCTAssertTrue(headerValues(out.text, "X-Caller-Label").isEmpty)

        // A buffer the caller owns.
        let stored = Array("Dr. Who".utf8)
        out = try stored.withUnsafeBytes { buffer in
            try respond(parser, SIPResponse(statusCode: 603, reasonPhrase: "Decline", source: testSource,
                                            label: .buffer(buffer), identity: .uri("tel:+4930555")))
        }
        XCTAssertEqual(headerValues(out.text, "P-Asserted-Identity"), ["\"Dr. Who\" <tel:+4930555>"])

        // Identity asked for but absent: no PAI, reported; the label header still goes out.
        out = try respond(parser, SIPResponse(statusCode: 603, reasonPhrase: "Decline", source: testSource,
                                              label: .string("Someone"), identity: .assertedIdentity(5)))
        XCTAssertTrue(out.result.identityOmitted)
        XCTAssertTrue(headerValues(out.text, "P-Asserted-Identity").isEmpty)
        XCTAssertEqual(headerValues(out.text, "X-Caller-Label"), ["\"Someone\""])

        // 255 bytes are fine, 256 are not.
        let long = String(repeating: "a", count: 255)
        out = try respond(parser, SIPResponse(statusCode: 603, reasonPhrase: "Decline", source: testSource, label: .string(long)))
        XCTAssertEqual(headerValues(out.text, "X-Caller-Label"), ["\"\(long)\""])
        out = try respond(parser, SIPResponse(statusCode: 603, reasonPhrase: "Decline", source: testSource, label: .string(long + "a")))
        XCTAssertEqual(out.result.labelRefusal, .tooLong)
        XCTAssertTrue(headerValues(out.text, "X-Caller-Label").isEmpty)
    }

    func testLabelWithCRLFIsRefusedAndNeverOnTheWire() throws {
        parseCarrier()
        let evil = "Bob\r\nInjected: yes"
        let out = try respond(parser, SIPResponse(statusCode: 302, reasonPhrase: "Moved Temporarily", source: testSource,
                                                  contact: .requestURI, label: .string(evil), identity: .from))
        XCTAssertEqual(out.result.labelRefusal, .controlCharacter)
        XCTAssertFalse(out.text.contains("Injected"))
        XCTAssertFalse(out.text.contains("Bob"))
        XCTAssertTrue(headerValues(out.text, "X-Caller-Label").isEmpty)
        // PAI still written, without a display name.
        XCTAssertEqual(headerValues(out.text, "P-Asserted-Identity"), ["<sip:+4989123456@carrier.example;user=phone>"])
        // Nothing but header lines: every line has a name and a colon.
        for line in headerLines(out.text) { XCTAssertNotNil(line.firstIndex(of: ":"), line) }

        for (label, refusal) in [("a\u{0}b", SIPLabelRefusal.controlCharacter), ("tab\there", .controlCharacter),
                                 ("del\u{7F}", .controlCharacter), ("lf\nonly", .controlCharacter), ("", .empty)] {
            let r = try respond(parser, SIPResponse(statusCode: 603, reasonPhrase: "Decline", source: testSource, label: .string(label)))
            XCTAssertEqual(r.result.labelRefusal, refusal, label.debugDescription)
            XCTAssertTrue(headerValues(r.text, "X-Caller-Label").isEmpty)
        }
        for bytes: [UInt8] in [[0xC3], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0x61, 0xFF], [0xE2, 0x82]] {
            let r = try respond(parser, SIPResponse(statusCode: 603, reasonPhrase: "Decline", source: testSource, label: .bytes(bytes)))
            XCTAssertEqual(r.result.labelRefusal, .invalidUTF8, "\(bytes)")
        }
    }

    func testInvalidInputsThrow() throws {
        parseCarrier()
        func write(_ r: SIPResponse, capacity: Int = 4096) -> SIPWriteError? {
            var buffer = [UInt8](repeating: 0, count: capacity)
            do {
                _ = try buffer.withUnsafeMutableBytes { try parser.request.writeResponse(r, into: $0) }
                return nil
            } catch let error as SIPWriteError {
                return error
            } catch {
                XCTFail("unexpected \(error)")
                return nil
            }
        }
        XCTAssertEqual(write(SIPResponse(statusCode: 200, reasonPhrase: "OK", source: testSource,
                                         headers: [SIPHeaderField("Reason", "x\r\nInjected: 1")])), .invalidHeaderField("Reason"))
        XCTAssertEqual(write(SIPResponse(statusCode: 200, reasonPhrase: "OK", source: testSource,
                                         headers: [SIPHeaderField("Bad Name", "x")])), .invalidHeaderField("Bad Name"))
        XCTAssertEqual(write(SIPResponse(statusCode: 200, reasonPhrase: "OK\r\nX: y", source: testSource)), .invalidReasonPhrase)
        XCTAssertEqual(write(SIPResponse(statusCode: 99, reasonPhrase: "x", source: testSource)), .invalidStatusCode)
        XCTAssertEqual(write(SIPResponse(statusCode: 700, reasonPhrase: "x", source: testSource)), .invalidStatusCode)
        XCTAssertEqual(write(SIPResponse(statusCode: 200, reasonPhrase: "OK", source: SIPSourceAddress(ip: "1.2.3.4\r\n", port: 1))), .invalidSourceAddress)
        XCTAssertEqual(write(SIPResponse(statusCode: 302, reasonPhrase: "Moved", source: testSource, contact: .uri("sip:a@b>\r\nX: y"))), .invalidContact)
        XCTAssertEqual(write(SIPResponse(statusCode: 302, reasonPhrase: "Moved", source: testSource, identity: .uri("<sip:x>"))), .invalidIdentityURI)
        XCTAssertEqual(write(SIPResponse(statusCode: 302, reasonPhrase: "Moved", source: testSource, labelHeaderName: "X:Y")), .invalidLabelHeaderName)

        // Buffer sizes: exactly enough works, one byte less does not.
        let response = SIPResponse(statusCode: 404, reasonPhrase: "Not Found", source: testSource)
        let size = try respond(parser, response).bytes.count
        XCTAssertNil(write(response, capacity: size))
        XCTAssertEqual(write(response, capacity: size - 1), .bufferTooSmall)
        XCTAssertEqual(write(response, capacity: 0), .bufferTooSmall)

        XCTAssertEqual(parser.parse(Array("garbage".utf8)), .garbage)
        XCTAssertEqual(write(response), .noRequest)
    }

    /// One response per status class lookupd produces; each starts with the right status line,
    /// copies the dialog headers and carries the extras it was given.
    func testEveryStatusLookupdProduces() throws {
        let cases: [(Int, String, [SIPHeaderField])] = [
            (200, "OK", [SIPHeaderField("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS"), SIPHeaderField("Accept", "application/sdp")]),
            (302, "Moved Temporarily", []),
            (400, "Bad Request", []),
            (404, "Not Found", []),
            (405, "Method Not Allowed", [SIPHeaderField("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS")]),
            (416, "Unsupported URI Scheme", []),
            (420, "Bad Extension", [SIPHeaderField("Unsupported", "foo")]),
            (481, "Call/Transaction Does Not Exist", []),
            (483, "Too Many Hops", []),
            (501, "Not Implemented", [SIPHeaderField("Allow", "INVITE, ACK, CANCEL, BYE, OPTIONS")]),
            (503, "Service Unavailable", [SIPHeaderField("Retry-After", "30")]),
            (505, "Version Not Supported", []),
            (603, "Decline", [SIPHeaderField("Reason", "SIP;cause=603;text=\"Network Blocked\"")]),
            (607, "Unwanted", []),
            (608, "Rejected", [SIPHeaderField("Call-Info", "<https://example.net/jcard>;purpose=jwscard")]),
        ]
        let options = message("""
        OPTIONS sip:redirect.example.net SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.20:5060;branch=z9hG4bKopt
        From: <sip:monitor@example.net>;tag=opt
        To: <sip:redirect.example.net>
        Call-ID: options-1
        CSeq: 1 OPTIONS
        Max-Forwards: 70
        """)
        for (code, reason, headers) in cases {
            let bytes = code == 200 ? options : carrierInvite
            XCTAssertEqual(parser.parse(bytes), .request)
            let out = try respond(parser, SIPResponse(statusCode: code, reasonPhrase: reason, source: testSource,
                                                      contact: code == 302 ? .requestURI : nil, headers: headers))
            XCTAssertEqual(statusLine(out.text), "SIP/2.0 \(code) \(reason)")
            XCTAssertEqual(headerValues(out.text, "Call-ID"), [code == 200 ? "options-1" : "a84b4c76e66710@pc33.carrier.example"])
            XCTAssertEqual(headerValues(out.text, "CSeq"), [code == 200 ? "1 OPTIONS" : "314159 INVITE"])
            XCTAssertEqual(headerValues(out.text, "Content-Length"), ["0"])
            for h in headers { XCTAssertEqual(headerValues(out.text, h.name), [h.value], "\(code)") }
            XCTAssertEqual(headerValues(out.text, "Contact").count, code == 302 ? 1 : 0)
            // The response parses back as a response.
            XCTAssertEqual(SIPParser().parse(out.bytes), .response)
        }
    }

    func testWorstCaseResponseSizeFitsTwiceTheMessageSize() throws {
        // Thousands of minimal compact Via values expand most when each gets its own "Via: " line.
        var head = "OPTIONS sip:a@example.com SIP/2.0\r\nFrom: <sip:b@example.com>;tag=1\r\nTo: <sip:a@example.com>\r\nCall-ID: big\r\nCSeq: 1 OPTIONS\r\nv:SIP/2.0/UDP a"
        while head.utf8.count < 16384 - 40 { head += ",SIP/2.0/UDP a" }
        let bytes = Array((head + "\r\nContent-Length: 0\r\n\r\n").utf8)
        XCTAssertLessThanOrEqual(bytes.count, 16384)
        XCTAssertEqual(parser.parse(bytes), .request)
        XCTAssertGreaterThan(parser.request.viaCount, 1000)
        let label = String(repeating: "\"", count: 255)
        let response = SIPResponse(statusCode: 302, reasonPhrase: "Moved Temporarily", source: testSource, contact: .requestURI,
                                   label: .string(label), identity: .from)
        XCTAssertThrowsError(try respond(parser, response, capacity: 16384))
        let out = try respond(parser, response, capacity: 2 * 16384 + 2048)
        XCTAssertEqual(headerValues(out.text, "Via").count, parser.request.viaCount)
    }

    func testRejectionsFromChecksAndMalformedRequests() throws {
        // 420 from the checks.
        let bext = message("""
        OPTIONS sip:a@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKb
        From: <sip:b@example.com>;tag=1
        To: <sip:a@example.com>
        Call-ID: bext
        CSeq: 1 OPTIONS
        Require: nothingSupported
        """)
        XCTAssertEqual(parser.parse(bext), .request)
        let rejection = try XCTUnwrap(parser.request.protocolRejection())
        var out = try respond(parser, SIPResponse(rejection, source: testSource))
        XCTAssertEqual(statusLine(out.text), "SIP/2.0 420 Bad Extension")
        XCTAssertEqual(headerValues(out.text, "Unsupported"), ["nothingSupported"])

        // 400 for a malformed request, copying the first of duplicated headers.
        let dup = message("""
        INVITE sip:a@example.com SIP/2.0
        Via: SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKd;rport
        From: <sip:b@example.com>;tag=1
        To: <sip:a@example.com>
        Call-ID: first
        Call-ID: second
        CSeq: 1 INVITE
        """)
        guard case .malformed(let why, canRespond: true) = parser.parse(dup) else { return XCTFail("expected malformed") }
        XCTAssertTrue(parser.request.canRespond)
        XCTAssertFalse(parser.request.isComplete)
        out = try respond(parser, SIPResponse(SIPRejection(malformation: why), source: testSource))
        XCTAssertEqual(statusLine(out.text), "SIP/2.0 400 Duplicate Call-ID")
        XCTAssertEqual(headerValues(out.text, "Call-ID"), ["first"])
        XCTAssertEqual(headerValues(out.text, "Via"), ["SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKd;rport=40000;received=192.0.2.99"])
        XCTAssertEqual(headerValues(out.text, "To").first?.hasPrefix("<sip:a@example.com>;tag="), true)
        // A label cannot come from an incomplete request's From.
        out = try respond(parser, SIPResponse(statusCode: 400, reasonPhrase: "Bad Request", source: testSource,
                                              label: .string("x"), identity: .from))
        XCTAssertTrue(out.result.identityOmitted)
    }
}
