import Foundation
import XCTest

/// Requirement 4: odd but valid traffic real PBXs and carriers send, over raw
/// sockets, each checked for the verdict it must get. The daemon trusts
/// P-Asserted-Identity from 127.0.0.1 only; 127.0.0.2 is an untrusted peer.
final class PBXTrafficTests: DaemonTestCase {
    var daemon: LookupdDaemon!
    var port: UInt16 { daemon.port }
    var trusted: UDPPeer!
    var untrusted: UDPPeer!

    override func setUpWithError() throws {
        try super.setUpWithError()
        daemon = try startDaemon(["trust-asserted-identity-from = 127.0.0.1/32"])
        trusted = try UDPPeer(ip: "127.0.0.1")
        untrusted = try UDPPeer(ip: "127.0.0.2")
    }

    override func tearDown() {
        trusted = nil
        untrusted = nil
        daemon = nil
        super.tearDown()
    }

    /// Sends `message` and checks status, label and (when given) the P-Asserted-Identity and the verdict counted.
    @discardableResult
    func expect(_ message: [UInt8], from peer: UDPPeer? = nil, status: String, label: String?, pai: String? = nil,
                verdict: String? = nil, _ what: String, file: StaticString = #filePath, line: UInt = #line) throws -> SIPAnswer? {
        let before = try verdict.map { _ in try stats(daemon) }
        let answer = (peer ?? trusted).exchange(message, port: port)
        guard let answer else {
            XCTFail("\(what): no answer", file: file, line: line)
            return nil
        }
        XCTAssertEqual(answer.statusLine, status, "\(what): \(answer)", file: file, line: line)
        XCTAssertEqual(answer.header("X-Caller-Label"), label.map(Answer.quoted), "\(what): \(answer)", file: file, line: line)
        if let pai {
            XCTAssertEqual(answer.values("P-Asserted-Identity"), [pai], "\(what): \(answer)", file: file, line: line)
        } else if label == nil {
            XCTAssertEqual(answer.values("P-Asserted-Identity"), [], "\(what): no identity without a label: \(answer)", file: file, line: line)
        }
        if let verdict, let before {
            let series = "lookupd_verdicts_total{verdict=\"\(verdict)\"}"
            let after = try stats(daemon)
            XCTAssertEqual(after[series] - before[series], 1, "\(what): verdict \(verdict) expected\n\(after.family("lookupd_verdicts_total"))", file: file, line: line)
        }
        return answer
    }

    func testCompactHeaderForms() throws {
        let callID = token("compact-")
        let message = sipMessage([
            "INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0",
            "v: SIP/2.0/UDP 127.0.0.1:5060;branch=\(token("z9hG4bK"))",
            "f: <sip:\(Caller.pizza)@pbx.example>;tag=c1",
            "t: <sip:13000000000@127.0.0.1>",
            "i: \(callID)",
            "CSeq: 7 INVITE",
            "Max-Forwards: 70",
            "m: <sip:pbx@127.0.0.1:5060>",
            "l: 0",
        ])
        let answer = try expect(message, status: "302 Moved Temporarily", label: "Pizza Palace, Haidian",
                                pai: "\"Pizza Palace, Haidian\" <sip:\(Caller.pizza)@pbx.example>", "compact headers")
        XCTAssertEqual(answer?.header("From"), "<sip:\(Caller.pizza)@pbx.example>;tag=c1")
        XCTAssertEqual(answer?.header("Call-ID"), callID)
        XCTAssertEqual(answer?.header("CSeq"), "7 INVITE")
        XCTAssertEqual(answer?.unmarkedContact, "<sip:13000000000@127.0.0.1:\(port)>")
        XCTAssertTrue(answer?.header("To")?.hasPrefix("<sip:13000000000@127.0.0.1>;tag=") ?? false, "\(String(describing: answer))")
        XCTAssertEqual(answer?.values("Via").count, 1)
    }

    func testTelURIInFrom() throws {
        try expect(invite(from: "<tel:\(Caller.pizza)>", port: port), status: "302 Moved Temporarily", label: "Pizza Palace, Haidian",
                   pai: "\"Pizza Palace, Haidian\" <tel:\(Caller.pizza)>", "tel: URI")
        try expect(invite(from: "\"Front Desk\" <tel:+86-10-5900-0000>", port: port), status: "302 Moved Temporarily",
                   label: "Beijing Municipal Hospital", pai: "\"Beijing Municipal Hospital\" <tel:+86-10-5900-0000>",
                   "tel: URI with visual separators")
        try expect(invite(from: "<tel:\(Caller.fraud)>", port: port), status: "603 Decline", label: "Fraud Risk", "blocked tel: URI")
    }

    func testQuotedDisplayNames() throws {
        let from = "\"Doe, John \\\"JD\\\" Zoë 张伟\" <sip:\(Caller.unicom)@pbx.example>"
        let answer = try expect(invite(from: from, port: port), status: "302 Moved Temporarily", label: "China Unicom Customer Service",
                                pai: "\"China Unicom Customer Service\" <sip:\(Caller.unicom)@pbx.example>", "quoted display name")
        // From is copied as written, escapes and UTF-8 included.
        XCTAssertTrue(answer?.header("From")?.hasPrefix(from + ";tag=") ?? false, "\(String(describing: answer?.header("From")))")
        try expect(invite(from: "\"\" <sip:\(Caller.fraud)@pbx.example>", port: port), status: "603 Decline", label: "Fraud Risk",
                   "empty display name")
        try expect(invite(from: "Unquoted Name <sip:\(Caller.fraud)@pbx.example>", port: port), status: "603 Decline", label: "Fraud Risk",
                   "token display name")
        // A label with quotes and a backslash is escaped in both headers.
        try expect(invite(from: "<sip:\(Caller.cafe)@pbx.example>", port: port), status: "302 Moved Temporarily", label: Caller.cafeLabel,
                   pai: "\(Answer.quoted(Caller.cafeLabel)) <sip:\(Caller.cafe)@pbx.example>", "label needing escapes")
    }

    func testAssertedIdentityFromTrustedAndUntrustedPeers() throws {
        let unknownFrom = "<sip:\(Caller.unknown)@carrier.example>"
        // Both forms in one header, tel: first is what RFC 3325 peers send.
        let both = invite(from: unknownFrom, port: port, extra: [
            "P-Asserted-Identity: <sip:\(Caller.fraud)@carrier.example;user=phone>, <tel:\(Caller.fraud)>",
        ])
        try expect(both, status: "603 Decline", label: "Fraud Risk", verdict: "blocked", "PAI sip+tel from a trusted peer")
        try expect(both, from: untrusted, status: "302 Moved Temporarily", label: nil, verdict: "unknown", "PAI from an untrusted peer is ignored")

        // Two header fields naming different numbers: the tel: one is the caller.
        let split = invite(from: unknownFrom, port: port, extra: [
            "P-Asserted-Identity: \"Pizza\" <sip:\(Caller.pizza)@carrier.example>",
            "P-Asserted-Identity: <tel:\(Caller.unicom)>",
        ])
        try expect(split, status: "302 Moved Temporarily", label: "China Unicom Customer Service",
                   pai: "\"China Unicom Customer Service\" <tel:\(Caller.unicom)>", "tel: PAI preferred")

        // sip: only; the answer's identity is the asserted one, not From.
        let sipOnly = invite(from: unknownFrom, port: port, extra: ["P-Asserted-Identity: <sip:\(Caller.pizza)@carrier.example>"])
        try expect(sipOnly, status: "302 Moved Temporarily", label: "Pizza Palace, Haidian",
                   pai: "\"Pizza Palace, Haidian\" <sip:\(Caller.pizza)@carrier.example>", "sip: PAI")

        // Untrusted peer claiming a contact's number: From (blocked) decides.
        let spoof = invite(from: "<sip:\(Caller.fraud)@evil.example>", port: port, extra: ["P-Asserted-Identity: <tel:\(Caller.mum)>"])
        try expect(spoof, from: untrusted, status: "603 Decline", label: "Fraud Risk", "spoofed PAI from an untrusted peer")
        try expect(spoof, status: "302 Moved Temporarily", label: "Mum", pai: "\"Mum\" <tel:\(Caller.mum)>", "the same PAI from a trusted peer")
    }

    func testCarrierParametersInTheUserPart() throws {
        let from = "<sip:\(Caller.pizza);cpc=ordinary;oli=0@carrier.example;user=phone>"
        try expect(invite(from: from, port: port), status: "302 Moved Temporarily", label: "Pizza Palace, Haidian",
                   pai: "\"Pizza Palace, Haidian\" <sip:\(Caller.pizza);cpc=ordinary;oli=0@carrier.example;user=phone>", ";cpc=ordinary")
        try expect(invite(from: "<sip:\(Caller.fraud);cpc=ordinary@carrier.example;user=phone>", port: port),
                   status: "603 Decline", label: "Fraud Risk", "blocked with ;cpc=ordinary")
    }

    func testLFOnlyLineEnds() throws {
        let message = invite(from: "<sip:\(Caller.pizza)@pbx.example>", port: port, lineEnd: "\n")
        XCTAssertFalse(message.contains(13))
        try expect(message, status: "302 Moved Temporarily", label: "Pizza Palace, Haidian", "LF-only INVITE")
        try expect(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, lineEnd: "\n"),
                   status: "603 Decline", label: "Fraud Risk", "LF-only blocked INVITE")
        let ping = sipMessage(String(decoding: options(port: port), as: UTF8.self).components(separatedBy: "\r\n").filter { !$0.isEmpty }, lineEnd: "\n")
        XCTAssertEqual(trusted.exchange(ping, port: port)?.statusCode, 200, "LF-only OPTIONS")
    }

    func testAnonymousCallers() throws {
        try expect(invite(from: "\"Anonymous\" <sip:anonymous@anonymous.invalid>", port: port),
                   status: "302 Moved Temporarily", label: nil, verdict: "anonymous", "sip:anonymous@anonymous.invalid")
        try expect(invite(from: "<sip:anonymous.invalid>", port: port),
                   status: "302 Moved Temporarily", label: nil, verdict: "anonymous", "sip:anonymous.invalid (no user part)")
        try expect(invite(from: "\"Restricted\" <sip:restricted@pbx.example>", port: port),
                   status: "302 Moved Temporarily", label: nil, verdict: "anonymous", "restricted")
        // Privacy: id withholds the identity from the callee (no label), but
        // is no shield against a block.
        try expect(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, extra: ["Privacy: id"]),
                   status: "603 Decline", label: "Fraud Risk", verdict: "blocked", "Privacy: id, blocked")
        try expect(invite(from: "<sip:\(Caller.pizza)@pbx.example>", port: port, extra: ["Privacy: header;id"]),
                   status: "302 Moved Temporarily", label: nil, verdict: "anonymous", "Privacy: header;id")
        // Privacy: none is no privacy at all.
        try expect(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, extra: ["Privacy: none"]),
                   status: "603 Decline", label: "Fraud Risk", verdict: "blocked", "Privacy: none")
        // Letters are not a number: invalid, answered like unknown.
        try expect(invite(from: "<sip:reception@pbx.example>", port: port),
                   status: "302 Moved Temporarily", label: nil, verdict: "invalid", "a name, not a number")
    }

    func testNationalAndInternationalFormats() throws {
        try expect(invite(from: "<sip:013812345678@pbx.example>", port: port), status: "302 Moved Temporarily",
                   label: "Pizza Palace, Haidian", verdict: "identified", "national 013812345678")
        try expect(invite(from: "<sip:008613800138000@pbx.example>", port: port), status: "603 Decline",
                   label: "Fraud Risk", verdict: "blocked", "international prefix 0086")
        try expect(invite(from: "<sip:01059000000@pbx.example;user=phone>", port: port), status: "302 Moved Temporarily",
                   label: "Beijing Municipal Hospital", "landline with area code")
        try expect(invite(from: "<sip:13911112222@pbx.example>", port: port), status: "302 Moved Temporarily",
                   label: "Mum", verdict: "contact", "mobile without trunk prefix")
    }

    func testRetransmittedInviteGetsByteIdenticalAnswer() throws {
        for caller in [Caller.pizza, Caller.fraud, Caller.unknown] {
            let message = invite(from: "\"Caller\" <sip:\(caller)@pbx.example>", port: port)
            guard let first = trusted.exchange(message, port: port) else { return XCTFail("no answer") }
            usleep(20_000)
            guard let again = trusted.exchange(message, port: port) else { return XCTFail("no answer to the retransmission") }
            XCTAssertTrue(first.raw == again.raw, "a retransmission must get the same bytes:\n\(first)\n---\n\(again)")
            XCTAssertTrue(first.header("To")?.contains(";tag=") ?? false)
            // A new transaction from the same caller gets a different To tag.
            guard let other = trusted.exchange(invite(from: "\"Caller\" <sip:\(caller)@pbx.example>", port: port), port: port) else {
                return XCTFail("no answer")
            }
            XCTAssertNotEqual(first.header("To"), other.header("To"))
        }
        // Over TCP too.
        let connection = try TCPPeer(to: port)
        let message = invite(from: "<sip:\(Caller.pizza)@pbx.example>", port: port, transport: "TCP")
        let first = connection.exchange(message)
        let again = connection.exchange(message)
        XCTAssertNotNil(first)
        XCTAssertTrue(first?.raw == again?.raw, "over TCP:\n\(String(describing: first))\n---\n\(String(describing: again))")
    }

    /// Via handling: rport gets the source port and received the source address (RFC 3581), every Via is copied.
    func testViaHandling() throws {
        let message = sipMessage([
            "INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0",
            "Via: SIP/2.0/UDP 192.0.2.10:5060;branch=z9hG4bK-top;rport",
            "Via: SIP/2.0/UDP 192.0.2.20:5070;branch=z9hG4bK-second;received=192.0.2.21",
            "Max-Forwards: 69",
            "From: <sip:\(Caller.pizza)@pbx.example>;tag=v1",
            "To: <sip:13000000000@127.0.0.1>",
            "Call-ID: \(token("via-"))",
            "CSeq: 1 INVITE",
            "Content-Length: 0",
        ])
        guard let answer = try expect(message, status: "302 Moved Temporarily", label: "Pizza Palace, Haidian", "two Vias") else { return }
        XCTAssertEqual(answer.values("Via"), [
            "SIP/2.0/UDP 192.0.2.10:5060;branch=z9hG4bK-top;rport=\(trusted.port);received=127.0.0.1",
            "SIP/2.0/UDP 192.0.2.20:5070;branch=z9hG4bK-second;received=192.0.2.21",
        ])
    }
}

/// The label header's name is configurable.
final class LabelHeaderTests: DaemonTestCase {
    func testLabelHeaderName() throws {
        let daemon = try startDaemon(["label-header = X-Spam-Label"])
        let peer = try UDPPeer()
        let identified = peer.exchange(invite(from: "<sip:\(Caller.pizza)@pbx.example>", port: daemon.port), port: daemon.port)
        XCTAssertEqual(identified?.header("X-Spam-Label"), "\"Pizza Palace, Haidian\"")
        XCTAssertNil(identified?.header("X-Caller-Label"))
        XCTAssertEqual(identified?.header("P-Asserted-Identity"), "\"Pizza Palace, Haidian\" <sip:\(Caller.pizza)@pbx.example>")
        let blocked = peer.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: daemon.port), port: daemon.port)
        XCTAssertEqual(blocked?.statusLine, "603 Decline")
        XCTAssertEqual(blocked?.header("X-Spam-Label"), "\"Fraud Risk\"")
    }
}

/// The protocol answers of a stateless redirect server (RFC 3261 §8.2), from the real daemon.
final class ProtocolAnswerTests: DaemonTestCase {
    func testProtocolAnswers() throws {
        let daemon = try startDaemon()
        let port = daemon.port
        let peer = try UDPPeer()
        let blockedFrom = "<sip:\(Caller.fraud)@pbx.example>"
        func check(_ message: [UInt8], _ code: Int, _ what: String, header: (String, (String) -> Bool)? = nil,
                   file: StaticString = #filePath, line: UInt = #line) {
            guard let answer = peer.exchange(message, port: port) else { return XCTFail("\(what): no answer", file: file, line: line) }
            XCTAssertEqual(answer.statusCode, code, "\(what): \(answer)", file: file, line: line)
            XCTAssertNil(answer.header("X-Caller-Label"), "\(what): not screened", file: file, line: line)
            if let (name, test) = header {
                XCTAssertTrue(answer.header(name).map(test) ?? false, "\(what): \(name) in \(answer)", file: file, line: line)
            }
        }
        let allowsInvite: (String) -> Bool = { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.contains("INVITE") }
        check(request("BYE", port: port, from: blockedFrom, toTag: "d1"), 481, "BYE")
        check(request("INVITE", port: port, from: blockedFrom, toTag: "d1"), 481, "re-INVITE of a blocked caller")
        check(request("REGISTER", port: port), 405, "REGISTER", header: ("Allow", allowsInvite))
        check(request("SUBSCRIBE", port: port), 405, "SUBSCRIBE", header: ("Allow", allowsInvite))
        check(request("FROBNICATE", port: port), 501, "unknown method", header: ("Allow", allowsInvite))
        check(request("INVITE", port: port, from: blockedFrom, maxForwards: "0"), 483, "Max-Forwards: 0")
        check(request("INVITE", port: port, from: blockedFrom, extra: ["Require: frobnication, 100rel"]), 420, "Require",
              header: ("Unsupported", { $0 == "frobnication" }))
        var version = String(decoding: invite(from: blockedFrom, port: port), as: UTF8.self)
        version = version.replacingOccurrences(of: " SIP/2.0\r\n", with: " SIP/3.0\r\n", options: [], range: version.range(of: " SIP/2.0\r\n"))
        check(Array(version.utf8), 505, "SIP/3.0")
        var scheme = String(decoding: invite(from: blockedFrom, port: port), as: UTF8.self)
        scheme = scheme.replacingOccurrences(of: "INVITE sip:13000000000@127.0.0.1:\(port)", with: "INVITE mailto:desk@example.com")
        check(Array(scheme.utf8), 416, "mailto: Request-URI")
        // Supported extensions do not get in the way of screening.
        let supported = peer.exchange(invite(from: blockedFrom, port: port, extra: ["Require: 100rel, timer", "Supported: replaces"]), port: port)
        XCTAssertEqual(supported?.statusLine, "603 Decline")
        // A tel: Request-URI is screened like any other.
        var tel = String(decoding: invite(from: blockedFrom, port: port), as: UTF8.self)
        tel = tel.replacingOccurrences(of: "INVITE sip:13000000000@127.0.0.1:\(port)", with: "INVITE tel:+8613000000000")
        let telAnswer = peer.exchange(Array(tel.utf8), port: port)
        XCTAssertEqual(telAnswer?.statusLine, "603 Decline")
        // ACK and CANCEL: never answered by a stateless UAS.
        peer.send(request("ACK", port: port), to: port)
        peer.send(request("CANCEL", port: port), to: port)
        XCTAssertNil(peer.receive(timeout: 0.3))
    }

    func testTCPStreamFraming() throws {
        let daemon = try startDaemon()
        let port = daemon.port
        // Two requests in one write: two answers, in order.
        let connection = try TCPPeer(to: port)
        connection.send(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, transport: "TCP")
                        + invite(from: "<sip:\(Caller.pizza)@pbx.example>", port: port, transport: "TCP"))
        guard case .message(let a) = connection.receive(timeout: 2), case .message(let b) = connection.receive(timeout: 2) else {
            return XCTFail("two pipelined requests should get two answers")
        }
        XCTAssertEqual(SIPAnswer(a)?.statusLine, "603 Decline")
        XCTAssertEqual(SIPAnswer(b)?.header("X-Caller-Label"), "\"Pizza Palace, Haidian\"")
        // A request trickled in small pieces, with a body.
        let body = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n"
        let text = String(decoding: invite(from: "<sip:\(Caller.unicom)@pbx.example>", port: port, transport: "TCP"), as: UTF8.self)
            .replacingOccurrences(of: "Content-Length: 0\r\n\r\n", with: "Content-Type: application/sdp\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + 37)
            connection.send(Array(bytes[offset..<end]))
            offset = end
            usleep(2_000)
        }
        let trickled = connection.receive(timeout: 2)
        guard case .message(let c) = trickled else { return XCTFail("no answer to the trickled request: \(trickled)") }
        XCTAssertEqual(SIPAnswer(c)?.header("X-Caller-Label"), "\"China Unicom Customer Service\"")
        // A message larger than max-message-size closes the connection.
        let huge = invite(from: "<sip:\(Caller.unicom)@pbx.example>", port: port, transport: "TCP",
                          extra: ["X-Padding: " + String(repeating: "x", count: 20_000)])
        connection.send(huge)
        XCTAssertEqual(connection.receive(timeout: 2), .closed)
        XCTAssertEqual(daemon.answersOptions()?.statusCode, 200)
    }
}

/// tcp-idle-timeout and max-message-size.
final class LimitTests: DaemonTestCase {
    func testIdleTCPConnectionsAreClosedAndOversizedMessagesRefused() throws {
        let daemon = try startDaemon(["tcp-idle-timeout = 1", "max-message-size = 1024"])
        let port = daemon.port
        let before = try stats(daemon)
        let idle = try TCPPeer(to: port)
        XCTAssertEqual(idle.exchange(options(port: port, transport: "TCP"))?.statusCode, 200)
        let started = monotonicSeconds()
        XCTAssertEqual(idle.receive(timeout: 5), .closed, "an idle connection is closed after tcp-idle-timeout")
        XCTAssertLessThan(monotonicSeconds() - started, 3.5)

        let padding = ["X-Padding: " + String(repeating: "p", count: 1200)]
        let udp = try UDPPeer()
        udp.send(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, extra: padding), to: port)
        XCTAssertNil(udp.receive(timeout: 0.3), "a datagram over max-message-size gets no answer")
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port), port: port)?.statusCode, 603)
        let big = try TCPPeer(to: port)
        big.send(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, transport: "TCP", extra: padding))
        XCTAssertEqual(big.receive(timeout: 2), .closed, "a stream message over max-message-size closes the connection")

        let after = try stats(daemon)
        XCTAssertEqual(after[#"lookupd_tcp_connections_total{event="closed_idle"}"#] - before[#"lookupd_tcp_connections_total{event="closed_idle"}"#], 1)
        XCTAssertEqual(after[#"lookupd_refused_total{reason="size"}"#] - before[#"lookupd_refused_total{reason="size"}"#], 2, after.text)
    }
}
