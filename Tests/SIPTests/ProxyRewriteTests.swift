import XCTest
@testable import SIP

/// Proxy mode's splicing (ProxyRewriter.swift, ProxyResponse.swift): what is forwarded is the
/// received message with exactly the proxy's changes, byte for byte everywhere else.
final class ProxyRewriteTests: XCTestCase {
    let ourVia = SIPViaAddress(transport: "UDP", host: "192.0.2.5", port: 5060)
    let key: UInt64 = 0x1234_5678

    /// A request as a PBX-facing trunk might send it: LF-only and CRLF line ends mixed, a folded
    /// header, compact names, odd letter case, a forged label, a Route naming lookupd, and a
    /// body with CRLFs plus bytes beyond Content-Length (ignored over UDP).
    let body = "v=0\r\no=trunk 1 1 IN IP4 198.51.100.7\r\ns=-\r\nc=IN IP4 198.51.100.7\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"
    var message: [UInt8] {
        let head = [
            "INVITE sip:1001@192.0.2.5 SIP/2.0",
            "v: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-trunk-1;rport, SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK-inner",
            "Via: SIP/2.0/UDP 10.0.0.2:5060;branch=z9hG4bK-third",
            "Route: <sip:192.0.2.5:5060;lr>, <sip:pbx.example;lr>",
            "Max-Forwards: 0070",
            "f: \"Trunk \\\"Caller\\\"\" <sip:+8613800138000@198.51.100.7>;tag=abc",
            "To: <sip:1001@192.0.2.5>",
            "Call-ID: call-1@198.51.100.7",
            "CSeq: 7 INVITE",
            "x-ODD-case:   value ; with=params  ",
            "Subject: folded",
            "  continuation of the subject",
            "X-Caller-Label: \"Your Bank\"",
            "P-Asserted-Identity: <tel:+8613800138000>, \"Old\" <sip:+8613800138000@198.51.100.7>",
            "Content-Type: application/sdp",
            "l: \(body.utf8.count)",
        ].joined(separator: "\r\n")
        // One line with a bare LF, as some stacks send.
        let mixed = head.replacingOccurrences(of: "To: <sip:1001@192.0.2.5>\r\n", with: "To: <sip:1001@192.0.2.5>\n")
        return Array((mixed + "\r\n\r\n" + body + "TRAILING GARBAGE").utf8)
    }

    func forward(_ bytes: [UInt8], label: String?, format: [SIPDisplayNamePart] = [.label], pai: Bool = false,
                 source: SIPSourceAddress = SIPSourceAddress(ip: "198.51.100.7", port: 5062)) throws -> (String, SIPForwardResult, SIPParser) {
        let parser = SIPParser()
        XCTAssertEqual(parser.parse(bytes), .request)
        var f = SIPForwarding(via: ourVia, branchKey: key, source: source, ownAddresses: [ourVia],
                              displayName: format, labelInAssertedIdentity: pai)
        if let label { f.label = .string(label) }
        var buffer = [UInt8](repeating: 0, count: 32768)
        let result = try buffer.withUnsafeMutableBytes { try parser.request.writeForwarded(f, into: $0) }
        return (String(decoding: buffer[0..<result.byteCount], as: UTF8.self), result, parser)
    }

    func testSplicedRequestKeepsEverythingButTheProxysChanges() throws {
        let (text, result, _) = try forward(message, label: "Fraud \"Risk\" \\", format: [.text("["), .label, .text("] "), .originalName], pai: true)
        let (head, forwardedBody) = split(text)
        XCTAssertEqual(forwardedBody, body, "the body is forwarded byte for byte, without what lies beyond Content-Length")
        XCTAssertEqual(head, [
            "INVITE sip:1001@192.0.2.5 SIP/2.0",
            "Via: SIP/2.0/UDP 192.0.2.5:5060;branch=\(result.branch)",
            "Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-trunk-1;rport=5062;received=198.51.100.7, SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK-inner",
            "Via: SIP/2.0/UDP 10.0.0.2:5060;branch=z9hG4bK-third",
            "Route: <sip:pbx.example;lr>",
            "Max-Forwards: 69",
            #"From: "[Fraud \"Risk\" \\] Trunk \"Caller\"" <sip:+8613800138000@198.51.100.7>;tag=abc"#,
            "To: <sip:1001@192.0.2.5>",
            "Call-ID: call-1@198.51.100.7",
            "CSeq: 7 INVITE",
            "x-ODD-case:   value ; with=params  ",
            "Subject: folded",
            "  continuation of the subject",
            #"P-Asserted-Identity: "Fraud \"Risk\" \\" <tel:+8613800138000>, "Fraud \"Risk\" \\" <sip:+8613800138000@198.51.100.7>"#,
            "Content-Type: application/sdp",
            "l: \(body.utf8.count)",
            #"X-Caller-Label: "Fraud \"Risk\" \\""#,
        ])
        XCTAssertTrue(result.branch.hasPrefix("z9hG4bK-lkd"))
        XCTAssertEqual(result.branch.count, "z9hG4bK-lkd".count + 32)
    }

    /// D18: `label-escapes = replace`: the label and the caller's name around it are written
    /// without any escape in the From display name, P-Asserted-Identity and the label header.
    func testPlainQuotedStrings() throws {
        let parser = SIPParser()
        XCTAssertEqual(parser.parse(message), .request)
        var f = SIPForwarding(via: ourVia, branchKey: key, source: SIPSourceAddress(ip: "198.51.100.7", port: 5062), ownAddresses: [ourVia],
                              displayName: [.text("["), .label, .text("] "), .originalName], labelInAssertedIdentity: true)
        f.label = .string("Fraud \"Risk\" \\")
        f.plainQuotedStrings = true
        var buffer = [UInt8](repeating: 0, count: 32768)
        let result = try buffer.withUnsafeMutableBytes { try parser.request.writeForwarded(f, into: $0) }
        let text = String(decoding: buffer[0..<result.byteCount], as: UTF8.self)
        XCTAssertTrue(text.contains("\r\nFrom: \"[Fraud 'Risk' /] Trunk 'Caller'\" <sip:+8613800138000@198.51.100.7>;tag=abc\r\n"), text)
        XCTAssertTrue(text.contains("\r\nX-Caller-Label: \"Fraud 'Risk' /\"\r\n"), text)
        XCTAssertTrue(text.contains("P-Asserted-Identity: \"Fraud 'Risk' /\" <tel:+8613800138000>"), text)
    }

    /// Without a label only the proxy's own changes are made; a forged label still goes.
    func testUnlabelledRequestIsForwardedUntouched() throws {
        let (text, _, _) = try forward(message, label: nil)
        XCTAssertTrue(text.contains("\r\nf: \"Trunk \\\"Caller\\\"\" <sip:+8613800138000@198.51.100.7>;tag=abc\r\n"), text)
        XCTAssertTrue(text.contains("\r\nP-Asserted-Identity: <tel:+8613800138000>, \"Old\" <sip:+8613800138000@198.51.100.7>\r\n"), text)
        XCTAssertFalse(text.contains("Your Bank"), text)
        XCTAssertFalse(text.contains("X-Caller-Label"), text)
    }

    /// An addr-spec From gets angle brackets (a display name needs them); a missing
    /// Max-Forwards and Content-Length are added; rport/received are always written.
    func testAddrSpecFromAndAddedHeaders() throws {
        let bytes = wire("""
        INVITE sip:1001@192.0.2.5 SIP/2.0
        Via: SIP/2.0/TCP 198.51.100.7:5062;branch=z9hG4bK-1
        From: sip:+8618600000000@198.51.100.7;tag=x
        To: <sip:1001@192.0.2.5>
        Call-ID: c2
        CSeq: 1 INVITE

        """)
        let (text, _, _) = try forward(bytes, label: "Unicom", source: SIPSourceAddress(ip: "198.51.100.7", port: 40001))
        let (head, forwardedBody) = split(text)
        XCTAssertEqual(forwardedBody, "")
        XCTAssertEqual(Array(head.dropFirst(2)), [
            "Via: SIP/2.0/TCP 198.51.100.7:5062;branch=z9hG4bK-1;rport=40001;received=198.51.100.7",
            #"From: "Unicom" <sip:+8618600000000@198.51.100.7>;tag=x"#,
            "To: <sip:1001@192.0.2.5>",
            "Call-ID: c2",
            "CSeq: 1 INVITE",
            "Max-Forwards: 70",
            #"X-Caller-Label: "Unicom""#,
            "Content-Length: 0",
        ])
    }

    /// Untrusted text never reaches a header unescaped: a label with a line break is left out
    /// (and reported); a caller name that cannot be written falls back to the label alone.
    func testUnsafeLabelAndNameAreNotWritten() throws {
        let (refused, result, _) = try forward(message, label: "Bad\r\nX-Injected: 1")
        XCTAssertEqual(result.labelRefusal, .controlCharacter)
        XCTAssertFalse(refused.contains("X-Injected"), refused)
        XCTAssertFalse(refused.contains("X-Caller-Label"), refused)

        var bytes = message
        let from = Array("\"Trunk \\\"Caller\\\"\"".utf8)
        let start = bytes.indices.first { bytes[$0...].starts(with: from) }!
        bytes.replaceSubrange(start..<(start + from.count), with: Array("\"Bad \u{7F} name\"".utf8))
        let (text, _, _) = try forward(bytes, label: "Fraud", format: [.label, .text(" / "), .originalName])
        XCTAssertTrue(text.contains("\r\nFrom: \"Fraud\" <sip:+8613800138000@198.51.100.7>;tag=abc\r\n"), text)

        // D13: a caller name with a bidi override or a C1 control is not written either, and a
        // label holding one is refused like a line break.
        for name in ["\"Bank \u{202E}moc.knab\"", "\"x\u{2066}y\"", "\"a\u{85}b\""] {
            var named = message
            let start = named.indices.first { named[$0...].starts(with: from) }!
            named.replaceSubrange(start..<(start + from.count), with: Array(name.utf8))
            let (t, _, _) = try forward(named, label: "Fraud", format: [.label, .text(" / "), .originalName])
            XCTAssertTrue(t.contains("\r\nFrom: \"Fraud\" <sip:+8613800138000@198.51.100.7>;tag=abc\r\n"), t)
        }
        let (bidi, bidiResult, _) = try forward(message, label: "Bank \u{202E}moc.knab")
        XCTAssertEqual(bidiResult.labelRefusal, .controlCharacter)
        XCTAssertFalse(bidi.contains("X-Caller-Label"), bidi)
    }

    /// §16.11: a retransmission gets the same branch; the CANCEL and the ACK for a non-2xx
    /// answer get the INVITE's; another transaction gets another.
    func testBranchIsStatelessAndSharedByCancelAndAck() throws {
        func branch(_ method: String, cseq: String = "7", toTag: String = "", callID: String = "call-1") throws -> String {
            let bytes = wire("""
            \(method) sip:1001@192.0.2.5 SIP/2.0
            Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-trunk-1
            From: <sip:+8613800138000@198.51.100.7>;tag=abc
            To: <sip:1001@192.0.2.5>\(toTag)
            Call-ID: \(callID)
            CSeq: \(cseq) \(method)
            Content-Length: 0

            """)
            return try forward(bytes, label: nil).1.branch
        }
        let invite = try branch("INVITE")
        XCTAssertEqual(try branch("INVITE"), invite)
        XCTAssertEqual(try branch("CANCEL"), invite)
        XCTAssertEqual(try branch("ACK", toTag: ";tag=pbx"), invite)
        XCTAssertNotEqual(try branch("INVITE", cseq: "8"), invite)
        XCTAssertNotEqual(try branch("INVITE", callID: "call-2"), invite)
    }

    /// §16.3 step 4: the forwarded request, received again, is a loop; with another
    /// Request-URI (a spiral) it is not.
    func testLoopDetection() throws {
        let (forwarded, _, _) = try forward(message, label: nil)
        let again = SIPParser()
        XCTAssertEqual(again.parse(Array(forwarded.utf8)), .request)
        XCTAssertTrue(again.request.hasLooped(key: key, hosts: ["192.0.2.5"]))
        XCTAssertFalse(again.request.hasLooped(key: key ^ 1, hosts: ["192.0.2.5"]))
        XCTAssertFalse(again.request.hasLooped(key: key, hosts: ["192.0.2.6"]))
        let spiral = forwarded.replacingOccurrences(of: "INVITE sip:1001@192.0.2.5", with: "INVITE sip:2002@192.0.2.5")
        XCTAssertEqual(again.parse(Array(spiral.utf8)), .request)
        XCTAssertFalse(again.request.hasLooped(key: key, hosts: ["192.0.2.5"]))
    }

    /// A response: our Via (alone in its header or the first of several values) is popped, the
    /// rest copied byte for byte, the next hop read from received/rport.
    func testResponseRelay() throws {
        let (forwarded, result, _) = try forward(message, label: nil)
        XCTAssertTrue(forwarded.hasPrefix("INVITE"))
        let sdp = "v=0\r\no=pbx 1 1 IN IP4 192.0.2.20\r\n"
        for combined in [false, true] {
            let vias = combined
                ? ["Via: SIP/2.0/UDP 192.0.2.5:5060;branch=\(result.branch), SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-trunk-1;rport=5062;received=198.51.100.7"]
                : ["Via: SIP/2.0/UDP 192.0.2.5:5060;branch=\(result.branch)", "Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-trunk-1;rport=5062;received=198.51.100.7"]
            let response = (["SIP/2.0 200 OK"] + vias + [
                "Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK-inner",
                "From: <sip:+8613800138000@198.51.100.7>;tag=abc", "To: <sip:1001@192.0.2.5>;tag=pbx",
                "Call-ID: call-1@198.51.100.7", "CSeq: 7 INVITE", "X-Pbx-Thing:  kept  as is", "Content-Length: \(sdp.utf8.count)",
            ]).joined(separator: "\r\n") + "\r\n\r\n" + sdp
            let (relay, text) = relayed(response)
            XCTAssertEqual(relay, .forward(byteCount: text.utf8.count, statusCode: 200,
                                           nextHop: SIPNextHop(transport: "UDP", host: "198.51.100.7", port: 5062)))
            XCTAssertEqual(text, ([
                "SIP/2.0 200 OK",
                "Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-trunk-1;rport=5062;received=198.51.100.7",
                "Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK-inner",
                "From: <sip:+8613800138000@198.51.100.7>;tag=abc", "To: <sip:1001@192.0.2.5>;tag=pbx",
                "Call-ID: call-1@198.51.100.7", "CSeq: 7 INVITE", "X-Pbx-Thing:  kept  as is", "Content-Length: \(sdp.utf8.count)",
            ]).joined(separator: "\r\n") + "\r\n\r\n" + sdp, "combined Via header: \(combined)")
        }
    }

    func testResponsesNotForUs() {
        let tail = "\r\nFrom: <sip:a@x>;tag=1\r\nTo: <sip:b@y>;tag=2\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
        // Someone else's Via, our host with another port, or our address with a foreign branch.
        for via in ["SIP/2.0/UDP 203.0.113.1:5060;branch=z9hG4bK-lkd000000000000000000000000",
                    "SIP/2.0/UDP 192.0.2.5:5070;branch=z9hG4bK-lkd000000000000000000000000",
                    "SIP/2.0/UDP 192.0.2.5:5060;branch=z9hG4bK-other"] {
            XCTAssertEqual(relayed("SIP/2.0 180 Ringing\r\nVia: \(via)\r\nVia: SIP/2.0/UDP 198.51.100.7;branch=z9hG4bK-1" + tail).0, .notOurs, via)
        }
        // Ours but nothing under it; a probe's answer; broken framing.
        XCTAssertEqual(relayed("SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 192.0.2.5:5060;branch=z9hG4bK-lkd0" + tail).0, .noNextVia)
        XCTAssertEqual(relayed("SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 192.0.2.5:5060;branch=z9hG4bK-lkdp00000001" + tail).0, .ownRequest(statusCode: 200))
        XCTAssertEqual(relayed("SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 192.0.2.5:5060;branch=z9hG4bK-lkd0\r\nVia: SIP/2.0/UDP 198.51.100.7;branch=z9hG4bK-1"
                               + tail.replacingOccurrences(of: "Content-Length: 0", with: "Content-Length: 99")).0, .malformed)
        XCTAssertEqual(relayed("SIP/2.0 2000 OK\r\nVia: SIP/2.0/UDP 192.0.2.5:5060;branch=z9hG4bK-lkd0" + tail).0, .malformed)
        XCTAssertEqual(relayed("SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 192.0.2.5:5060;branch=z9hG4bK-lkd0\rVia: x" + tail).0, .malformed)
    }

    /// D1: a response is only ever sent to the received/rport lookupd wrote from the request's
    /// socket peer, never to the sent-by a caller wrote (which lookupd used to fall back to).
    func testNoNextHopFromTheSentByACallerWrote() {
        let branch = "z9hG4bK-lkd" + String(repeating: "0", count: 24) + responseTagText(key: key, callID: "c", fromTag: "1", cseq: 1, clientBranch: "z9hG4bK-1")
        let head = "SIP/2.0 100 Trying\r\nVia: SIP/2.0/UDP 192.0.2.5:5060;branch=\(branch)\r\n"
        let tail = "From: <sip:a@x>;tag=1\r\nTo: <sip:b@y>\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
        for next in ["SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK-1", "SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK-1;rport=7777",
                     "SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK-1;received=127.0.0.9", "SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK-1;rport;received=127.0.0.9",
                     "SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK-1;rport=7777;received=attacker.example"] {
            XCTAssertEqual(relayed(head + "Via: \(next)\r\n" + tail).0, .noNextVia, next)
        }
        guard case .forward(_, 100, let hop) = relayed(head + "Via: SIP/2.0/TCP [2001:db8::7];branch=z9hG4bK-1;rport=40001;received=2001:db8::8\r\n" + tail).0 else {
            return XCTFail("a Via lookupd wrote is routed")
        }
        XCTAssertEqual(hop, SIPNextHop(transport: "TCP", host: "2001:db8::8", port: 40001))
    }

    /// Found by the proxy-path fuzzer: an empty `Via:` line before the top Via. The request's
    /// received/rport went onto the empty line and the real top Via was passed on without
    /// them; a response's empty line made the relay keep lookupd's own Via. Empty Via lines
    /// are now dropped on both ways.
    func testAnEmptyViaLineBeforeTheTopVia() throws {
        let bytes = wire("""
        INVITE sip:1001@192.0.2.5 SIP/2.0
        Via:
        Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-e1
        From: <sip:+8618600000000@198.51.100.7>;tag=x
        To: <sip:1001@192.0.2.5>
        Call-ID: c-empty
        CSeq: 1 INVITE
        Content-Length: 0

        """)
        let (text, result, _) = try forward(bytes, label: nil)
        let vias = split(text).0.filter { $0.hasPrefix("Via:") }
        XCTAssertEqual(vias, ["Via: SIP/2.0/UDP 192.0.2.5:5060;branch=\(result.branch)",
                              "Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-e1;rport=5062;received=198.51.100.7"], text)
        let response = "SIP/2.0 200 OK\r\nVia:\r\nVia: SIP/2.0/UDP 192.0.2.5:5060;branch=\(result.branch)\r\n"
            + "Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-e1;rport=5062;received=198.51.100.7\r\n"
            + "From: <sip:+8618600000000@198.51.100.7>;tag=x\r\nTo: <sip:1001@192.0.2.5>;tag=p\r\nCall-ID: c-empty\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n"
        let (relay, relayed) = relayed(response)
        guard case .forward = relay else { return XCTFail("\(relay)") }
        XCTAssertEqual(split(relayed).0.filter { $0.hasPrefix("Via:") },
                       ["Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-e1;rport=5062;received=198.51.100.7"], relayed)
    }

    /// Found by the proxy-path fuzzer: a folded header whose first line ends with a bare LF
    /// was passed on with it; every line end of a folded field is now CR LF, both ways.
    func testLineEndsInsideAFoldedHeaderBecomeCRLF() throws {
        var bytes = message
        let subject = Array("Subject: folded\r\n  continuation".utf8)
        let at = bytes.indices.first { bytes[$0...].starts(with: subject) }!
        bytes.replaceSubrange(at..<(at + subject.count), with: Array("Subject: folded\n  continuation".utf8))
        let (text, result, _) = try forward(bytes, label: nil)
        XCTAssertTrue(text.contains("\r\nSubject: folded\r\n  continuation of the subject\r\n"), text)
        let response = "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 192.0.2.5:5060;branch=\(result.branch)\r\n"
            + "Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-trunk-1;rport=5062;received=198.51.100.7\r\n"
            + "From: <sip:+8613800138000@198.51.100.7>;tag=abc\r\nTo: <sip:1001@192.0.2.5>;tag=pbx\r\nCall-ID: call-1@198.51.100.7\r\n"
            + "CSeq: 7 INVITE\r\nX-Folded: one\n  two\r\nContent-Length: 0\r\n\r\n"
        let (_, relayedText) = relayed(response)
        XCTAssertTrue(relayedText.contains("\r\nX-Folded: one\r\n  two\r\n"), relayedText)
    }

    /// D10: a response whose branch has lookupd's prefix but not the keyed tag of the request it
    /// claims to answer (Call-ID, From tag, CSeq number, the client's branch) is not relayed.
    func testAForgedBranchIsNotRelayed() throws {
        let (_, result, _) = try forward(message, label: nil)
        let response = { (branch: String, callID: String) in
            "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 192.0.2.5:5060;branch=\(branch)\r\n"
                + "Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-trunk-1;rport=5062;received=198.51.100.7\r\n"
                + "From: <sip:+8613800138000@198.51.100.7>;tag=abc\r\nTo: <sip:1001@192.0.2.5>;tag=pbx\r\nCall-ID: \(callID)\r\nCSeq: 7 INVITE\r\nContent-Length: 0\r\n\r\n"
        }
        guard case .forward = relayed(response(result.branch, "call-1@198.51.100.7")).0 else { return XCTFail("the genuine branch is relayed") }
        XCTAssertEqual(relayed(response(result.branch, "call-2@198.51.100.7")).0, .notOurs, "another call's response")
        var forged = Array(result.branch)
        forged[forged.count - 1] = forged.last == "0" ? "1" : "0"
        XCTAssertEqual(relayed(response(String(forged), "call-1@198.51.100.7")).0, .notOurs, "a forged tag")
        XCTAssertEqual(relayed(response(String(result.branch.dropLast(8)), "call-1@198.51.100.7")).0, .notOurs, "a branch of the old shape")
    }

    /// D1, D15: a top Via that cannot carry the real source is refused before forwarding (the
    /// Answerer answers 400); received/rport the caller wrote, in any letter case, are
    /// replaced by the socket peer's.
    func testTheTopViaMustCarryTheRealSource() throws {
        func request(_ via: String) -> [UInt8] {
            wire("""
            INVITE sip:1001@192.0.2.5 SIP/2.0
            Via: \(via)
            From: <sip:+8618600000000@198.51.100.7>;tag=x
            To: <sip:1001@192.0.2.5>
            Call-ID: c3
            CSeq: 1 INVITE
            Content-Length: 0

            """)
        }
        let parser = SIPParser()
        for (via, transport) in [("SIP/2.0/UDP 127.0.0.9:7777;branch=", "UDP"), ("SIP/2.0/UDP 127.0.0.9:7777;x=;branch=z9hG4bK-1", "UDP"),
                                 // An unterminated quote (found by the proxy-path fuzzer) would swallow received/rport.
                                 ("SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK\"x;rport", "UDP"),
                                 ("SIP/0/UDP 127.0.0.9:7777;branch=z9hG4bK-1", "UDP"), ("SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK-1", "TCP"),
                                 ("SIP/2.0/TCP 127.0.0.9:7777;branch=z9hG4bK-1", "UDP")] {
            guard parser.parse(request(via)) == .request else { continue }  // refused by the parser already
            XCTAssertNotNil(parser.request.proxyViaProblem(transport: transport), "\(via) over \(transport)")
        }
        XCTAssertEqual(parser.parse(request("SIP/2.0/UDP 127.0.0.9:7777;branch=")), .request, "accepted by the parser, refused by the proxy")
        XCTAssertThrowsError(try forward(request("SIP/2.0/UDP 127.0.0.9:7777;branch="), label: nil)) { error in
            XCTAssertEqual(error as? SIPWriteError, .unroutableVia)
        }
        let (text, _, _) = try forward(request("SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK-1;Received=127.0.0.9;RPORT=7777;rport"), label: nil,
                                       source: SIPSourceAddress(ip: "198.51.100.7", port: 40001))
        XCTAssertEqual(split(text).0[2], "Via: SIP/2.0/UDP 127.0.0.9:7777;branch=z9hG4bK-1;RPORT=40001;rport=40001;received=198.51.100.7")
    }

    /// The ACK for an answer lookupd wrote itself carries the To tag it derived: recognised.
    func testACKForLocalAnswer() throws {
        let parser = SIPParser(toTagKey: 99)
        let invite = wire("""
        INVITE sip:1001@192.0.2.5 SIP/2.0
        Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-77
        From: <sip:+8613800138000@198.51.100.7>;tag=abc
        To: <sip:1001@192.0.2.5>
        Call-ID: c9
        CSeq: 3 INVITE
        Content-Length: 0

        """)
        XCTAssertEqual(parser.parse(invite), .request)
        let (answer, _, _) = try respond(parser, SIPResponse(statusCode: 603, reasonPhrase: "Decline", source: testSource))
        let to = headerValues(answer, "To")[0]
        func ack(_ toValue: String, branch: String = "z9hG4bK-77") -> Bool {
            XCTAssertEqual(parser.parse(wire("""
            ACK sip:1001@192.0.2.5 SIP/2.0
            Via: SIP/2.0/UDP 198.51.100.7:5062;branch=\(branch)
            From: <sip:+8613800138000@198.51.100.7>;tag=abc
            To: \(toValue)
            Call-ID: c9
            CSeq: 3 ACK
            Content-Length: 0

            """)), .request)
            return parser.request.isACKForLocalAnswer
        }
        XCTAssertTrue(ack(to))
        XCTAssertFalse(ack("<sip:1001@192.0.2.5>;tag=pbx-tag"))
        XCTAssertFalse(ack(to, branch: "z9hG4bK-78"))
    }

    func testProbe() {
        var buffer = [UInt8](repeating: 0, count: 2048)
        let n = buffer.withUnsafeMutableBytes { SIPProbe.write(via: ourVia, target: SIPViaAddress(transport: "UDP", host: "192.0.2.20", port: 5060), sequence: 7, into: $0) }
        let text = String(decoding: buffer[0..<n], as: UTF8.self)
        XCTAssertEqual(SIPParser().parse(Array(buffer[0..<n])), .request, text)
        XCTAssertTrue(text.hasPrefix("OPTIONS sip:192.0.2.20:5060 SIP/2.0\r\nVia: SIP/2.0/UDP 192.0.2.5:5060;branch=z9hG4bK-lkdp00000007;rport\r\n"), text)
    }

    // MARK: - Helpers

    func relayed(_ text: String) -> (SIPResponseRelay, String) {
        let parser = SIPParser()
        var out = [UInt8](repeating: 0, count: 32768)
        let bytes = Array(text.utf8)
        let relay = bytes.withUnsafeBytes { input in out.withUnsafeMutableBytes { parser.relayResponse(input, ours: [ourVia], branchKey: key, into: $0) } }
        if case .forward(let n, _, _) = relay { return (relay, String(decoding: out[0..<n], as: UTF8.self)) }
        return (relay, "")
    }

    /// Header lines (start line first) and body of a forwarded message.
    func split(_ text: String) -> ([String], String) {
        guard let end = text.range(of: "\r\n\r\n") else { return (text.components(separatedBy: "\r\n"), "") }
        return (text[..<end.lowerBound].components(separatedBy: "\r\n"), String(text[end.upperBound...]))
    }
}

/// Hostile input through the proxy's writers: every RFC 4475 torture message, and thousands
/// of mutations of them and of a forwarded response, with labels that need escaping or must
/// be refused. A request lookupd accepts is always forwarded as one that parses again, with
/// the same method, Call-ID, CSeq and body; a response is relayed or refused, never crashes.
final class ProxyHostileInputTests: XCTestCase {
    let via = SIPViaAddress(transport: "UDP", host: "192.0.2.5", port: 5060)
    let labels = ["Fraud", "Zoë's \"Café\" \\ Bar", "Bad\r\nInjected: 1", "", String(repeating: "长", count: 90), "\u{7F}"]

    func testTortureMessagesAndMutations() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: tortureDirectory.path).filter { $0.hasSuffix(".dat") }.sorted()
        XCTAssertGreaterThan(files.count, 40)
        var generator = SeededRandom(seed: 4475)
        var forwarded = 0
        for file in files {
            let original = Array(try Data(contentsOf: tortureDirectory.appendingPathComponent(file)))
            for round in 0..<(Int(ProcessInfo.processInfo.environment["PROXY_MUTATION_ROUNDS"] ?? "") ?? 200) {
                var bytes = original
                if round > 0 { mutate(&bytes, &generator) }
                forwarded += check(bytes, label: labels[Int(generator.next() % UInt64(labels.count))], file: file)
            }
        }
        XCTAssertGreaterThan(forwarded, 1000, "enough mutated requests were forwarded to mean something")
    }

    func testMutatedResponses() {
        let branch = "z9hG4bK-lkd0123456789abcdef01234567" + responseTagText(key: 7, callID: "c", fromTag: "1", cseq: 1, clientBranch: "z9hG4bK-1")
        let response = Array(("SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 192.0.2.5:5060;branch=\(branch), "
            + "SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-1;rport=5062;received=198.51.100.7\r\nVia: SIP/2.0/TCP [2001:db8::1];branch=z9hG4bK-2\r\n"
            + "From: <sip:a@x>;tag=1\r\nTo: <sip:b@y>;tag=2\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\nContent-Type: application/sdp\r\nContent-Length: 8\r\n\r\nv=0\r\ns=-\r\n").utf8)
        var generator = SeededRandom(seed: 3261)
        let parser = SIPParser()
        var out = [UInt8](repeating: 0, count: 65536)
        var relayed = 0
        for round in 0..<20000 {
            var bytes = response
            if round > 0 { mutate(&bytes, &generator) }
            let result = bytes.withUnsafeBytes { input in out.withUnsafeMutableBytes { parser.relayResponse(input, ours: [via], branchKey: 7, into: $0) } }
            guard case .forward(let n, let code, _) = result else { continue }
            relayed += 1
            let text = out[0..<n]
            XCTAssertTrue(text.starts(with: Array("SIP/2.0 ".utf8)), "round \(round)")
            XCTAssertTrue((100...699).contains(code))
            // No bare CR (or NUL) in the header section reaches the next hop; the body is opaque.
            let end = text.firstRange(of: [0x0D, 0x0A, 0x0D, 0x0A])?.lowerBound ?? n
            for i in 0..<end where out[i] == 0x0D { XCTAssertTrue(i + 1 < n && out[i + 1] == 0x0A, "bare CR, round \(round)") }
            XCTAssertFalse(out[0..<end].contains(0), "NUL, round \(round)")
        }
        XCTAssertGreaterThan(relayed, 1000)
    }

    /// 1 when the request was forwarded (and checked), 0 when it was not a request to forward.
    private func check(_ bytes: [UInt8], label: String, file: String) -> Int {
        let parser = SIPParser()
        guard parser.parse(bytes) == .request else { return 0 }
        let request = parser.request
        let method = request.methodText.string, callID = request.callID.string, cseq = request.cseqNumber
        let body = Array(bytes.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[request.bodyRange]) })
        // The Answerer answers 400 to a top Via that cannot carry the real source.
        if request.proxyViaProblem(transport: request.topVia.transport.string) != nil { return 0 }
        var f = SIPForwarding(via: via, branchKey: 7, source: SIPSourceAddress(ip: "198.51.100.7", port: 5062), ownAddresses: [via],
                              displayName: [.text("["), .label, .text("] "), .originalName], labelInAssertedIdentity: true)
        f.label = .string(label)
        var out = [UInt8](repeating: 0, count: 4 * bytes.count + 8192)
        guard let result = try? out.withUnsafeMutableBytes({ try request.writeForwarded(f, into: $0) }) else {
            XCTFail("\(file): an accepted request could not be forwarded")
            return 0
        }
        let forwarded = Array(out[0..<result.byteCount])
        let again = SIPParser()
        let outcome = again.parse(forwarded)
        XCTAssertEqual(outcome, .request, "\(file): forwarded as\n\(String(decoding: forwarded, as: UTF8.self))")
        guard outcome == .request else { return 1 }
        let copy = again.request
        XCTAssertEqual(copy.methodText.string, method, file)
        XCTAssertEqual(copy.callID.string, callID, file)
        XCTAssertEqual(copy.cseqNumber, cseq, file)
        XCTAssertEqual(Array(forwarded[copy.bodyRange]), body, file)
        XCTAssertTrue(copy.topVia.branch?.string.hasPrefix("z9hG4bK-lkd") ?? false, file)
        XCTAssertEqual(copy.viaCount, request.viaCount + 1, file)
        return 1
    }

    private func mutate(_ bytes: inout [UInt8], _ g: inout SeededRandom) {
        let interesting: [UInt8] = [0x0D, 0x0A, 0x00, 0x22, 0x5C, 0x3C, 0x3E, 0x2C, 0x3B, 0x3A, 0x20, 0x09, 0xFF, 0x7F]
        for _ in 0..<(1 + Int(g.next() % 4)) where !bytes.isEmpty {
            let i = Int(g.next() % UInt64(bytes.count))
            switch g.next() % 4 {
            case 0: bytes[i] = interesting[Int(g.next() % UInt64(interesting.count))]
            case 1: bytes.remove(at: i)
            case 2: bytes.insert(interesting[Int(g.next() % UInt64(interesting.count))], at: i)
            default: bytes[i] = UInt8(truncatingIfNeeded: g.next())
            }
        }
    }
}

/// The last 8 hex digits of a branch lookupd writes, for a response with these fields.
func responseTagText(key: UInt64, callID: String, fromTag: String, cseq: UInt32, clientBranch: String) -> String {
    func text<R>(_ s: String, _ body: (SIPText) -> R) -> R {
        var s = s
        return s.withUTF8 { body(SIPText(baseAddress: $0.baseAddress, count: $0.count)) }
    }
    return text(callID) { c in text(fromTag) { f in text(clientBranch) { b in hex32(responseTag(key: key, callID: c, fromTag: f, cseq: cseq, clientBranch: b)) } } }
}
