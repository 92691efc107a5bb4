import Foundation
import XCTest

/// Issue 17 items 6 and 7 over real sockets, a raw-socket caller and PBX around a proxy-mode
/// daemon, comparing the bytes each side receives: the caller's own From in every response
/// (UDP and TCP, provisional, final and retransmitted), STIR/SHAKEN Identity headers reaching
/// the PBX byte for byte, an upstream's 603+ reaching the caller unchanged, and
/// Remote-Party-ID / P-Preferred-Identity believed from a trusted source only.
final class IdentityProxyTests: IntegrationTestCase {
    override class var rejectionsCarryLabel: Bool { false }

    /// A folded compact From with quotes in its display name.
    let callerFrom = "f: \"Trunk \\\"Caller\\\"\"\r\n   <sip:\(Caller.unicom)@127.0.0.1>;tag=own-1"

    /// One `ppt=shaken` Identity folded over two lines and two `ppt=div` ones, as long as real
    /// PASSporTs (RFC 8224, RFC 8588, RFC 8946).
    var identities: [String] {
        func passport(_ seed: String, _ length: Int) -> String {
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
            var state = UInt64(truncatingIfNeeded: seed.hashValue) | 1
            return String((0..<length).map { i -> Character in
                state = state &* 6364136223846793005 &+ 1442695040888963407
                return i % 97 == 96 ? "." : alphabet[Int(state >> 58)]
            })
        }
        return [
            "Identity: \(passport("shaken", 420))\r\n \(passport("sig", 86));info=<https://cert.example.org/passport.cer>;alg=ES256;ppt=shaken",
            "Identity: \(passport("div1", 380));info=<https://cert.example.org/div.cer>;alg=ES256;ppt=div",
            "identity: \(passport("div2", 390));info=<https://cert.example.net/div.cer>;alg=ES256;ppt=\"div\"",
        ]
    }

    func invite(port: UInt16, from: String, callerPort: UInt16, transport: String = "UDP", extra: [String] = []) -> [UInt8] {
        sipMessage([
            "INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0",
            "Via: SIP/2.0/\(transport) 127.0.0.1:\(callerPort);branch=\(token("z9hG4bK"));rport",
            "Max-Forwards: 70", from, "To: <sip:13000000000@127.0.0.1:\(port)>",
            "Call-ID: \(token("id-"))@127.0.0.1", "CSeq: 1 INVITE",
        ] + extra + ["Content-Length: 0"])
    }

    /// The next request the PBX gets, as text (nil after `timeout`).
    func nextRequest(_ pbx: UDPPeer, timeout: Double = 5) -> String? {
        let deadline = monotonicSeconds() + timeout
        while monotonicSeconds() < deadline, let bytes = pbx.receive(timeout: max(0.05, deadline - monotonicSeconds())) {
            let text = String(decoding: bytes, as: UTF8.self)
            if !text.hasPrefix("SIP/2.0") { return text }
        }
        return nil
    }

    /// What the PBX answers: Via (every line), From, To, Call-ID and CSeq copied (§8.2.6.2).
    func answer(_ request: String, _ status: String, extra: [String] = []) -> [UInt8] {
        let head = request.components(separatedBy: "\r\n\r\n")[0].components(separatedBy: "\r\n").dropFirst()
        let copied = head.filter { line in
            ["via", "from", "f", "to", "call-id", "cseq"].contains(line.prefix { $0 != ":" }.lowercased())
        }.map { $0.lowercased().hasPrefix("to:") && !status.hasPrefix("100") ? $0 + ";tag=pbx-1" : $0 }
        return sipMessage(["SIP/2.0 \(status)"] + copied + extra + ["Content-Length: 0"])
    }

    func viaPort(_ request: String) -> UInt16 { SIPRequestText(request)?.viaPort ?? 0 }

    func testNoLabelReachesTheCallerAndIdentityHeadersReachThePBX() throws {
        let pbx = try UDPPeer()
        let port = freeLoopbackPort()
        try startNode("identity", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(pbx.port)",
                                                       "label-format = [{label}] {name}"])
        for transport in ["UDP", "TCP"] {
            let udp = try UDPPeer()
            let tcp = transport == "TCP" ? try TCPPeer(to: port) : nil
            let callerPort = tcp?.port ?? udp.port
            let bytes = invite(port: port, from: callerFrom, callerPort: callerPort, transport: transport, extra: identities)
            if let tcp { tcp.send(bytes) } else { udp.send(bytes, to: port) }
            func received() -> String? {
                if let tcp { if case .message(let m) = tcp.receive(timeout: 5) { return String(decoding: m, as: UTF8.self) }; return nil }
                return udp.receive(timeout: 5).map { String(decoding: $0, as: UTF8.self) }
            }

            let forwarded = try XCTUnwrap(nextRequest(pbx), transport)
            // The PBX sees the label, and every Identity header exactly as the caller sent it.
            XCTAssertTrue(forwarded.contains("\r\nFrom: \"[China Unicom Customer Service] Trunk \\\"Caller\\\"\" <sip:\(Caller.unicom)@127.0.0.1>;tag=own-1\r\n"), forwarded)
            for identity in identities {
                XCTAssertTrue(forwarded.contains("\r\n" + identity + "\r\n"), "\(transport): \(identity.prefix(40))... not byte for byte in\n\(forwarded)")
            }
            // Provisional, final and a retransmission of the final: the caller's own From,
            // byte for byte (the fold too), and no label anywhere.
            for status in ["100 Trying", "180 Ringing", "200 OK", "200 OK"] {
                pbx.send(answer(forwarded, status), to: viaPort(forwarded))
                let response = try XCTUnwrap(received(), "\(transport) \(status)")
                XCTAssertTrue(response.hasPrefix("SIP/2.0 \(status)\r\n"), response)
                XCTAssertTrue(response.contains("\r\n" + callerFrom + "\r\n"), "\(transport) \(status): \(response)")
                XCTAssertFalse(response.contains("China Unicom"), "\(transport) \(status): \(response)")
            }
        }
    }

    /// An upstream's 603+ reaches the caller as the upstream wrote it, but for lookupd's Via.
    func testAnUpstream603PlusReachesTheCallerUnchanged() throws {
        let pbx = try UDPPeer()
        let port = freeLoopbackPort()
        try startNode("upstream-603", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(pbx.port)"])
        let caller = try UDPPeer()
        caller.send(invite(port: port, from: "From: <sip:\(Caller.unknown)@127.0.0.1>;tag=u-1", callerPort: caller.port), to: port)
        let forwarded = try XCTUnwrap(nextRequest(pbx))
        let reasons = ["Reason: SIP;cause=603;text=\"v=analytics1;url=https://upstream.example/redress;tel=+18005550199;id=up-42\";location=TN",
                       "Reason: Q.850;cause=21;text=\"Call Rejected\""]
        let sent = answer(forwarded, "603 Network Blocked", extra: reasons)
        pbx.send(sent, to: viaPort(forwarded))
        let got = try XCTUnwrap(caller.receive(timeout: 5).map { String(decoding: $0, as: UTF8.self) })
        let expected = String(decoding: sent, as: UTF8.self).components(separatedBy: "\r\n").filter { !$0.contains("z9hG4bK-lkd") }.joined(separator: "\r\n")
        XCTAssertEqual(got, expected)
    }

    /// RPID and PPI name the caller from a trusted source only; RPID privacy=full hides the label.
    func testRemotePartyIDAndPreferredIdentityFromTrustedSourcesOnly() throws {
        let pbx = try UDPPeer()
        let port = freeLoopbackPort()
        let node = try startNode("trust", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(pbx.port)",
                                                               "trust-asserted-identity-from = 127.0.0.1/32"])
        let trusted = try UDPPeer(), untrusted = try UDPPeer(ip: "127.0.0.9")
        let from = "From: <sip:\(Caller.unknown)@127.0.0.1>;tag=t-1"
        for header in ["Remote-Party-ID: <sip:\(Caller.fraud)@127.0.0.1>;party=calling;screen=yes",
                       "P-Preferred-Identity: <sip:\(Caller.fraud)@127.0.0.1>"] {
            let blocked = trusted.exchange(invite(port: port, from: from, callerPort: trusted.port, extra: [header]), port: port, timeout: 5)
            XCTAssertEqual(blocked?.statusCode, 603, "\(header) from a trusted source: \(String(describing: blocked))")
            untrusted.send(invite(port: port, from: from, callerPort: untrusted.port, extra: [header]), to: port)
            let passed = try XCTUnwrap(nextRequest(pbx), "\(header) from an untrusted source reaches the PBX")
            XCTAssertFalse(passed.contains("X-Caller-Label"), passed)
        }
        // An identified number behind privacy=full: forwarded without any label.
        trusted.send(invite(port: port, from: from, callerPort: trusted.port,
                            extra: ["Remote-Party-ID: <sip:\(Caller.unicom)@127.0.0.1>;party=calling;privacy=full"]), to: port)
        let hidden = try XCTUnwrap(nextRequest(pbx))
        XCTAssertFalse(hidden.contains("X-Caller-Label"), hidden)
        XCTAssertFalse(hidden.contains("China Unicom"), hidden)
        let stats = try stats(node)
        XCTAssertEqual(stats["lookupd_verdicts_total{verdict=\"blocked\"}"], 2, stats.text)
    }
}
