import Foundation
import XCTest

/// Proxy mode end to end (docs/INTEGRATION.md): a sipp trunk → lookupd (mode = proxy) → a
/// sipp PBX. The PBX scenario checks what it receives (the label in the From display name and
/// in X-Caller-Label, lookupd's Via on top of the trunk's with received/rport, Max-Forwards
/// decremented, an odd-case header and the SDP body unchanged, a forged label removed); the
/// trunk checks the final answer and that every response it gets carries the From it sent,
/// byte for byte (issue 17: with the default `label-to-caller = no` the label is the PBX's
/// only), and every answered call completes with ACK, BYE and 200.
final class ProxyModeTests: IntegrationTestCase {
    override class var rejectionsCarryLabel: Bool { false }
    static let labelFormat = "label-format = [{label}] {name}"

    /// The calls both sides expect, in order. A blocked caller never reaches the PBX.
    static let calls: [(trunk: String, pbx: String?)] = [
        ("\(Caller.unicom);Trunk Caller;200;own", #""[China Unicom Customer Service] Trunk Caller"|"China Unicom Customer Service""#),
        ("\(Caller.fraud);Trunk Caller;603;own", nil),
        // A contact: the contact's name, although a directory blocks the number.
        ("\(Caller.mum);Trunk Caller;200;own", #""[Mum] Trunk Caller"|"Mum""#),
        // Unknown: forwarded untouched but for lookupd's own headers (no label at all).
        ("\(Caller.unknown);Trunk Caller;200;own", #""Trunk Caller"|-"#),
        // Quotes, a backslash and UTF-8 in the label: escaped in both headers.
        ("\(Caller.cafe);Trunk Caller;200;own", #""[Zoë's \"Café\" \\ Bar] Trunk Caller"|"Zoë's \"Café\" \\ Bar""#),
    ]

    func testCallsThroughTheProxyOverUDPAndTCP() throws {
        for upstream in [SippTransport.udp, .tcp] {
            let pbxLines = Self.calls.compactMap(\.pbx)
            let pbx = try startPBX("proxy-uas.xml", transport: upstream, expect: pbxLines + pbxLines)
            let port = freeLoopbackPort()
            let node = try startNode("proxy-\(upstream.name)", port: port, extra: [
                "mode = proxy",
                "upstream = 127.0.0.1:\(pbx.port);transport=\(upstream == .tcp ? "tcp" : "udp")",
                Self.labelFormat,
            ], workers: 2)
            for trunk in [SippTransport.udp, .tcp] {
                let what = "trunk over \(trunk.name), PBX over \(upstream.name)"
                let result = try runTrunk("proxy-uac.xml", port: port, transport: trunk, lines: Self.calls.map(\.trunk))
                XCTAssertEqual(result.status, 0, "\(what): \(result.report)\n\(pbx.report)")
                XCTAssertEqual(result.successful, Self.calls.count, "\(what): \(result.report)")
                XCTAssertEqual(result.log.split(separator: "\n").filter { $0.contains("verdict=want") }.count, Self.calls.count,
                               "\(what): \(result.log)")
            }
            assertPBXSawEverything(pbx, calls: 2 * pbxLines.count, "PBX over \(upstream.name)")

            let stats = try stats(node)
            XCTAssertEqual(stats["lookupd_verdicts_total{verdict=\"blocked\"}"], 2, stats.text)
            XCTAssertEqual(stats["lookupd_responses_total{code=\"603\"}"], 2, stats.text)
            // Per answered call: INVITE, ACK and BYE up; 100, 180, 200 and the BYE's 200 down.
            let answered = 2 * pbxLines.count
            XCTAssertEqual(stats["lookupd_proxy_forwarded_total{direction=\"upstream\"}"], 3 * answered, stats.text)
            XCTAssertEqual(stats["lookupd_proxy_forwarded_total{direction=\"downstream\"}"], 4 * answered, stats.text)
            XCTAssertEqual(stats["lookupd_proxy_dropped_total{reason=\"via_not_ours\"}"], 0, stats.text)
            XCTAssertEqual(stats["lookupd_proxy_refused_total{reason=\"upstream_down_503\"}"], 0, stats.text)
        }
    }

    /// The trunk cancels a ringing call: the CANCEL and the ACK for the 487 reach the PBX with
    /// the INVITE's branch (the PBX scenario checks it), statelessly, over every transport pair.
    func testCancelOfARingingCall() throws {
        for upstream in [SippTransport.udp, .tcp] {
            let pbx = try startPBX("proxy-cancel-uas.xml", transport: upstream, expect: [], count: 2)
            let port = freeLoopbackPort()
            try startNode("cancel-\(upstream.name)", port: port, extra: [
                "mode = proxy", "upstream = 127.0.0.1:\(pbx.port);transport=\(upstream == .tcp ? "tcp" : "udp")",
            ])
            for trunk in [SippTransport.udp, .tcp] {
                let result = try runTrunk("proxy-cancel-uac.xml", port: port, transport: trunk, lines: [], count: 1)
                XCTAssertEqual(result.status, 0, "CANCEL, trunk over \(trunk.name), PBX over \(upstream.name): \(result.report)\n\(pbx.report)")
            }
            let done = pbx.child.wait(timeout: 30)
            XCTAssertTrue(done && pbx.child.status == 0, pbx.report)
            XCTAssertEqual(pbx.log.split(separator: "\n").filter { $0.contains("verdict=want cancelled") }.count, 2, pbx.report)
        }
    }

    /// The TCP connection to the upstream is kept for later calls, and reopened when the
    /// upstream closes it (here: the PBX restarts on the same port).
    func testUpstreamConnectionIsReusedAndReopened() throws {
        let first = try startPBX("proxy-uas.xml", transport: .tcp, expect: [Self.calls[0].pbx!, Self.calls[3].pbx!])
        let port = freeLoopbackPort()
        let node = try startNode("reconnect", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(first.port);transport=tcp", Self.labelFormat])
        let twoCalls = try runTrunk("proxy-uac.xml", port: port, transport: .udp, lines: [Self.calls[0].trunk, Self.calls[3].trunk])
        XCTAssertEqual(twoCalls.successful, 2, "\(twoCalls.report)\n\(first.report)")
        assertPBXSawEverything(first, calls: 2, "first PBX")
        var stats = try stats(node)
        XCTAssertEqual(stats["lookupd_proxy_upstream_total{event=\"connected\"}"], 1, "one connection for both calls: \(stats.text)")

        // The first PBX has exited, closing the connection; a new one listens on its port.
        XCTAssertTrue(eventually(timeout: 10) { (try? self.stats(node))?["lookupd_proxy_upstream_total{event=\"closed\"}"] == 1 })
        let second = try startPBX("proxy-uas.xml", transport: .tcp, expect: [Self.calls[2].pbx!], port: first.port)
        let again = try runTrunk("proxy-uac.xml", port: port, transport: .tcp, lines: [Self.calls[2].trunk])
        XCTAssertEqual(again.successful, 1, "\(again.report)\n\(second.report)")
        assertPBXSawEverything(second, calls: 1, "second PBX")
        stats = try self.stats(node)
        XCTAssertEqual(stats["lookupd_proxy_upstream_total{event=\"connected\"}"], 2, stats.text)
        XCTAssertEqual(stats["lookupd_proxy_refused_total{reason=\"upstream_down_503\"}"], 0, stats.text)
    }

    /// Nothing listens at the upstream: callers get 503 at once (TCP: the connection is
    /// refused; UDP: the ICMP port unreachable the first INVITE causes), blocked callers still
    /// get their 603, and nobody waits for a timeout.
    func testDeadUpstreamAnswers503() throws {
        for upstream in ["udp", "tcp"] {
            let dead = freeLoopbackPort()
            let port = freeLoopbackPort()
            let node = try startNode("dead-\(upstream)", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(dead);transport=\(upstream)"])
            for trunk in [SippTransport.udp, .tcp] {
                let lines = ["\(Caller.unicom);Trunk Caller;503;own", "\(Caller.fraud);Trunk Caller;603;own", "\(Caller.unknown);Trunk Caller;503;own"]
                let started = monotonicSeconds()
                let result = try runTrunk("proxy-uac.xml", port: port, transport: trunk, lines: lines)
                XCTAssertEqual(result.status, 0, "upstream \(upstream) down, trunk over \(trunk.name): \(result.report)")
                XCTAssertEqual(result.successful, 3, result.report)
                XCTAssertLessThan(monotonicSeconds() - started, 15, "503s must come without waiting for timeouts")
            }
            let stats = try stats(node)
            XCTAssertGreaterThanOrEqual(stats["lookupd_proxy_refused_total{reason=\"upstream_down_503\"}"], 4, stats.text)
            XCTAssertEqual(stats["lookupd_verdicts_total{verdict=\"blocked\"}"], 2, stats.text)
        }
    }

    /// lookupd as its own upstream: a request comes back and is refused with 482, which
    /// travels back along the Via path to the caller; Max-Forwards counts down to a 483;
    /// a response that did not pass through lookupd is dropped and counted.
    func testLoopsHopLimitAndForeignResponses() throws {
        let port = freeLoopbackPort()
        let node = try startNode("loop", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(port)"])
        let peer = try UDPPeer()

        let looped = peer.exchange(invite(from: "<sip:\(Caller.unknown)@127.0.0.1>", port: port, via: "127.0.0.1:\(peer.port)"),
                                   port: port, timeout: 5)
        XCTAssertEqual(looped?.statusCode, 482, "\(String(describing: looped))")
        XCTAssertEqual(looped?.reasonPhrase, "Loop Detected")
        // Only the caller's own Via is left when the answer reaches it.
        XCTAssertEqual(looped?.values("Via").count, 1, "\(String(describing: looped))")

        // Max-Forwards 1 is forwarded as 0 and refused by the next hop (lookupd itself).
        let oneHop = peer.exchange(hopInvite(maxForwards: 1, port: port, peer: peer.port), port: port, timeout: 5)
        XCTAssertEqual(oneHop?.statusCode, 483, "\(String(describing: oneHop))")
        let noHop = peer.exchange(hopInvite(maxForwards: 0, port: port, peer: peer.port), port: port, timeout: 5)
        XCTAssertEqual(noHop?.statusCode, 483, "\(String(describing: noHop))")

        // A blocked caller is answered locally, loop or not.
        let blocked = peer.exchange(invite(from: "<sip:\(Caller.fraud)@127.0.0.1>", port: port, via: "127.0.0.1:\(peer.port)"), port: port, timeout: 5)
        XCTAssertEqual(blocked?.statusCode, 603, "\(String(describing: blocked))")

        // OPTIONS to lookupd itself is answered; a response with someone else's Via is dropped.
        XCTAssertEqual(peer.exchange(serverOptions(port: port), port: port)?.statusCode, 200)
        peer.send(sipMessage([
            "SIP/2.0 200 OK",
            "Via: SIP/2.0/UDP 192.0.2.7:5060;branch=z9hG4bK-lkd0000000000000000000000000",
            "From: <sip:a@192.0.2.7>;tag=1", "To: <sip:b@127.0.0.1>;tag=2", "Call-ID: foreign", "CSeq: 1 INVITE", "Content-Length: 0",
        ]), to: port)
        XCTAssertTrue(eventually(timeout: 10) { ((try? self.stats(node))?["lookupd_proxy_dropped_total{reason=\"via_not_ours\"}"] ?? 0) == 1 })
        XCTAssertNil(peer.receive(timeout: 0.3), "nothing may come back for a foreign response")

        let stats = try stats(node)
        XCTAssertEqual(stats["lookupd_proxy_refused_total{reason=\"loop_482\"}"], 1, stats.text)
        XCTAssertEqual(stats["lookupd_proxy_refused_total{reason=\"too_many_hops_483\"}"], 2, stats.text)
    }

    /// A PBX that silently drops everything (no ICMP error to go by): with
    /// upstream-probe-interval, three unanswered OPTIONS mark it down and callers get 503 at
    /// once; one answered probe brings it back and calls reach it again.
    func testProbesDetectASilentUpstream() throws {
        let pbx = try UDPPeer()
        let port = freeLoopbackPort()
        let node = try startNode("probed", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(pbx.port)", "upstream-probe-interval = 1"])
        func stat(_ series: String) -> Int { (try? stats(node))?[series] ?? 0 }
        XCTAssertTrue(eventually(timeout: 20) { stat("lookupd_proxy_upstream_total{event=\"unreachable\"}") >= 1 }, "three probes unanswered")
        XCTAssertGreaterThanOrEqual(stat("lookupd_proxy_upstream_total{event=\"probe_sent\"}"), 3)
        let caller = try UDPPeer()
        let refused = caller.exchange(invite(from: "<sip:\(Caller.unknown)@127.0.0.1>", port: port, via: "127.0.0.1:\(caller.port)"), port: port, timeout: 5)
        XCTAssertEqual(refused?.statusCode, 503, "\(String(describing: refused))")

        // The PBX answers the next probe (to the Via's address, as a UAS would).
        pbx.drain()
        var answered = false
        let deadline = monotonicSeconds() + 10
        while !answered, monotonicSeconds() < deadline, let bytes = pbx.receive(timeout: 3) {
            let text = String(decoding: bytes, as: UTF8.self)
            guard text.hasPrefix("OPTIONS "), let probe = SIPRequestText(text) else { continue }
            pbx.send(sipMessage(["SIP/2.0 200 OK"] + probe.lines(["Via", "From", "To", "Call-ID", "CSeq"]) + ["Content-Length: 0"]),
                     to: probe.viaPort)
            answered = true
        }
        XCTAssertTrue(answered, "no probe reached the PBX")
        XCTAssertTrue(eventually(timeout: 10) { stat("lookupd_proxy_upstream_total{event=\"probe_answered\"}") >= 1 })

        caller.send(invite(from: "<sip:\(Caller.unicom)@127.0.0.1>", port: port, via: "127.0.0.1:\(caller.port)"), to: port)
        var forwarded: String?
        while forwarded == nil, let bytes = pbx.receive(timeout: 5) {
            let text = String(decoding: bytes, as: UTF8.self)
            if text.hasPrefix("INVITE ") { forwarded = text }
        }
        XCTAssertTrue(forwarded?.contains("\r\nX-Caller-Label: \"China Unicom Customer Service\"\r\n") ?? false, forwarded ?? "no INVITE reached the PBX")
    }

    // MARK: - Hardening (issue 13)

    /// A PBX by hand: the next request it receives, answered with `codes` (copying Via, From,
    /// To, Call-ID and CSeq as a UAS does) to its top Via's sent-by, lookupd's upstream socket.
    @discardableResult
    private func answer(_ pbx: UDPPeer, _ codes: [Int], timeout: Double = 5, edit: (String) -> String = { $0 }) -> SIPRequestText? {
        let deadline = monotonicSeconds() + timeout
        while monotonicSeconds() < deadline, let bytes = pbx.receive(timeout: max(0.05, deadline - monotonicSeconds())) {
            let text = String(decoding: bytes, as: UTF8.self)
            guard !text.hasPrefix("SIP/2.0"), let request = SIPRequestText(text) else { continue }
            for code in codes {
                let lines = ["SIP/2.0 \(code) \(code == 200 ? "OK" : "Ringing")"] + request.lines(["Via", "From", "To", "Call-ID", "CSeq"]).map(edit)
                    + (code == 200 ? ["Content-Type: application/sdp", "Content-Length: 12"] : ["Content-Length: 0"])
                pbx.send(sipMessage(lines, body: code == 200 ? "v=0\r\ns=pbx\r\n" : ""), to: request.viaPort)
            }
            return request
        }
        return nil
    }

    private func inviteVia(_ via: String, port: UInt16, caller: String = Caller.unknown) -> [UInt8] {
        sipMessage([
            "INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0", "Via: \(via)", "Max-Forwards: 70",
            "From: <sip:\(caller)@127.0.0.1>;tag=\(token())", "To: <sip:13000000000@127.0.0.1:\(port)>",
            "Call-ID: \(token("d1-"))", "CSeq: 1 INVITE", "Content-Length: 0",
        ])
    }

    /// D1, D15: whatever the caller's top Via says, the PBX's answers reach only where the
    /// request came from. A Via lookupd cannot record the source on (an empty parameter, a
    /// protocol other than SIP/2.0, another transport than the request came over) is refused
    /// with 400 and never reaches the PBX; one that lies about received/rport is forwarded with
    /// the real ones. Nothing ever reaches the third party the Via names.
    func testAnswersReachOnlyTheRealSource() throws {
        let pbx = try UDPPeer()
        let thirdParty = try UDPPeer(ip: "127.0.0.9")
        let victim = "127.0.0.9:\(thirdParty.port)"
        let port = freeLoopbackPort()
        let node = try startNode("d1", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(pbx.port)"])
        let caller = try UDPPeer()
        for via in ["SIP/2.0/UDP \(victim);branch=", "SIP/2.0/UDP \(victim);x=;branch=\(token("z9hG4bK"))",
                    "SIP/0/UDP \(victim);branch=\(token("z9hG4bK"))", "SIP/2.0/TCP \(victim);branch=\(token("z9hG4bK"))"] {
            let answer = caller.exchange(inviteVia(via, port: port), port: port, timeout: 5)
            XCTAssertEqual(answer?.statusCode, 400, "\(via): \(String(describing: answer))")
        }
        XCTAssertNil(pbx.receive(timeout: 0.5), "no refused request reaches the PBX")

        // A Via that lies about where answers go: forwarded with the real received/rport.
        caller.send(inviteVia("SIP/2.0/UDP \(victim);branch=\(token("z9hG4bK"));received=127.0.0.9;rport=\(thirdParty.port)", port: port), to: port)
        let forwarded = try XCTUnwrap(answer(pbx, [180, 200]))
        XCTAssertTrue(forwarded.lines(["Via"])[1].hasSuffix(";rport=\(caller.port);received=127.0.0.1"), "\(forwarded.headerLines)")
        XCTAssertEqual(caller.receive(timeout: 5).flatMap(SIPAnswer.init)?.statusCode, 180)
        XCTAssertEqual(caller.receive(timeout: 5).flatMap(SIPAnswer.init)?.statusCode, 200)

        // Over TCP: the Via must say TCP; the answers come back on the connection.
        let tcp = try TCPPeer(to: port)
        XCTAssertEqual(tcp.exchange(inviteVia("SIP/2.0/UDP \(victim);branch=\(token("z9hG4bK"))", port: port), timeout: 5)?.statusCode, 400)
        tcp.send(inviteVia("SIP/2.0/TCP \(victim);branch=\(token("z9hG4bK"))", port: port))
        XCTAssertNotNil(answer(pbx, [180]))
        guard case .message(let ringing) = tcp.receive(timeout: 5) else { return XCTFail("no 180 on the TCP connection") }
        XCTAssertEqual(SIPAnswer(ringing)?.statusCode, 180)

        XCTAssertNil(thirdParty.receive(timeout: 1), "the address the caller wrote never gets a datagram")
        let stats = try stats(node)
        // SIP/0 may already be refused by the parser (as malformed); the rest by the proxy.
        XCTAssertGreaterThanOrEqual(stats["lookupd_proxy_refused_total{reason=\"unroutable_via_400\"}"], 4, stats.text)
        XCTAssertEqual(stats["lookupd_proxy_forwarded_total{direction=\"downstream\"}"], 3, stats.text)
    }

    /// D10: a response is relayed only when it comes from the upstream's address and port
    /// (UDP) and its branch carries the keyed tag of the request it answers.
    func testForgedResponsesAreNotRelayed() throws {
        let pbx = try UDPPeer()
        let port = freeLoopbackPort()
        let node = try startNode("d10", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(pbx.port)"])
        let caller = try UDPPeer()
        caller.send(inviteVia("SIP/2.0/UDP 127.0.0.1:\(caller.port);branch=\(token("z9hG4bK"));rport", port: port), to: port)
        let forwarded = try XCTUnwrap(answer(pbx, []))
        let genuine = ["SIP/2.0 200 OK"] + forwarded.lines(["Via", "From", "To", "Call-ID", "CSeq"]) + ["Content-Length: 0"]
        // Another port of the upstream's host, with the genuine branch, to the listen socket
        // (the socket toward the upstream is connected: the kernel drops such datagrams).
        let sameHost = try UDPPeer()
        sameHost.send(sipMessage(genuine), to: port)
        // The upstream's own port, with a forged tag, or for another call.
        let forged = genuine.map { line in
            guard line.lowercased().hasPrefix("via:"), line.contains("z9hG4bK-lkd") else { return line }
            return String(line.dropLast(8)) + "00000000"
        }
        pbx.send(sipMessage(forged), to: forwarded.viaPort)
        pbx.send(sipMessage(genuine.map { $0.hasPrefix("Call-ID:") ? "Call-ID: another-call" : $0 }), to: forwarded.viaPort)
        XCTAssertNil(caller.receive(timeout: 1), "no forged response reaches the caller")
        XCTAssertTrue(eventually(timeout: 10) { ((try? self.stats(node))?["lookupd_proxy_dropped_total{reason=\"via_not_ours\"}"] ?? 0) == 3 })
        pbx.send(sipMessage(genuine), to: forwarded.viaPort)
        XCTAssertEqual(caller.receive(timeout: 5).flatMap(SIPAnswer.init)?.statusCode, 200, "the genuine one is")
    }

    /// D11: a request from the upstream's address to a listen socket is refused with 403,
    /// never sent back to the upstream; a caller on the same host (another port) is served.
    func testRequestsFromTheUpstreamAreRefused() throws {
        let pbx = try UDPPeer()
        let port = freeLoopbackPort()
        let node = try startNode("d11", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(pbx.port)"])
        let refused = pbx.exchange(inviteVia("SIP/2.0/UDP 127.0.0.1:\(pbx.port);branch=\(token("z9hG4bK"));rport", port: port), port: port, timeout: 5)
        XCTAssertEqual(refused?.statusCode, 403)
        XCTAssertEqual(refused?.reasonPhrase, "Not Relaying")
        XCTAssertNil(pbx.receive(timeout: 0.5), "nothing was forwarded back to the upstream")
        let caller = try UDPPeer()
        caller.send(inviteVia("SIP/2.0/UDP 127.0.0.1:\(caller.port);branch=\(token("z9hG4bK"));rport", port: port), to: port)
        XCTAssertNotNil(answer(pbx, []), "a caller on the upstream's host is forwarded")
        let stats = try stats(node)
        XCTAssertEqual(stats["lookupd_proxy_refused_total{reason=\"from_upstream\"}"], 1, stats.text)
    }

    /// D16: in proxy mode the answers lookupd gives itself and the requests it forwards are
    /// timed in lookupd_response_duration_seconds, as in redirect mode.
    func testProxyModeObservesResponseDurations() throws {
        let pbx = try UDPPeer()
        let port = freeLoopbackPort()
        let node = try startNode("d16", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(pbx.port)"])
        let caller = try UDPPeer()
        let before = try stats(node)["lookupd_response_duration_seconds_count{transport=\"udp\"}"]
        XCTAssertEqual(caller.exchange(serverOptions(port: port), port: port)?.statusCode, 200)
        XCTAssertEqual(caller.exchange(inviteVia("SIP/2.0/UDP 127.0.0.1:\(caller.port);branch=\(token("z9hG4bK"));rport", port: port, caller: Caller.fraud),
                                       port: port, timeout: 5)?.statusCode, 603)
        caller.send(inviteVia("SIP/2.0/UDP 127.0.0.1:\(caller.port);branch=\(token("z9hG4bK"));rport", port: port), to: port)
        XCTAssertNotNil(answer(pbx, []))
        let tcp = try TCPPeer(to: port)
        XCTAssertEqual(tcp.exchange(Array(String(decoding: serverOptions(port: port), as: UTF8.self)
                                            .replacingOccurrences(of: "SIP/2.0/UDP", with: "SIP/2.0/TCP").utf8))?.statusCode, 200)
        let after = try stats(node)
        XCTAssertEqual(after["lookupd_response_duration_seconds_count{transport=\"udp\"}"] - before, 3, after.text)
        XCTAssertEqual(after["lookupd_response_duration_seconds_count{transport=\"tcp\"}"], 1, after.text)
    }

    /// An INVITE from an unknown caller with the given Max-Forwards, answers asked to `peer` (rport).
    private func hopInvite(maxForwards: Int, port: UInt16, peer: UInt16) -> [UInt8] {
        sipMessage([
            "INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0",
            "Via: SIP/2.0/UDP 127.0.0.1:\(peer);branch=\(token("z9hG4bK"));rport",
            "Max-Forwards: \(maxForwards)",
            "From: <sip:\(Caller.unknown)@127.0.0.1>;tag=\(token())",
            "To: <sip:13000000000@127.0.0.1:\(port)>",
            "Call-ID: \(token("hop-"))",
            "CSeq: 1 INVITE",
            "Content-Length: 0",
        ])
    }
}

/// Just enough of a received request to answer it by hand.
struct SIPRequestText {
    let headerLines: [String]

    init?(_ text: String) {
        guard let end = text.range(of: "\r\n\r\n") else { return nil }
        headerLines = text[..<end.lowerBound].components(separatedBy: "\r\n")
    }

    /// The header lines with these names, in order.
    func lines(_ names: [String]) -> [String] {
        headerLines.dropFirst().filter { line in names.contains { line.lowercased().hasPrefix($0.lowercased() + ":") } }
    }

    /// The port of the top Via's sent-by.
    var viaPort: UInt16 {
        guard let via = lines(["Via"]).first, let space = via.lastIndex(of: " ") else { return 0 }
        let sentBy = via[via.index(after: space)...].prefix { $0 != ";" }
        return UInt16(sentBy.split(separator: ":").last ?? "") ?? 0
    }
}
