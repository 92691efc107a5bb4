import Foundation
import Glibc
import XCTest
@testable import Directory

// Behaviours only unit tests pinned before (issue 23), now through the real daemon over
// real sockets: who may use the HTTP listener, Via `received` when the sent-by is not the
// source, the priority order of two labelled directories, and a label with a line break
// arriving in a journal record.

/// Without `http-allow-from`, the HTTP listener answers the sources `allow-from` lets use
/// SIP, and no one else: /lookup and /metrics must not answer anyone. With it, exactly the
/// sources it names.
final class HTTPAllowFromTests: DaemonTestCase {
    func startHTTP(_ extra: [String], name: String) throws -> UInt16 {
        var lastError: Error?
        for _ in 0..<3 {
            let httpPort = freeLoopbackPort()
            do {
                try startDaemon(["http-listen = 127.0.0.1:\(httpPort)"] + extra, name: name, readyFrom: "127.0.0.2")
                return httpPort
            } catch {
                lastError = error
            }
        }
        throw lastError ?? HarnessError.failed("no daemon")
    }

    func get(_ path: String, port: UInt16, from source: String) throws -> HTTPAnswer? {
        let peer = try HTTPConnectionPeer(port: port, from: source)
        peer.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
        return peer.response()
    }

    func testTheHTTPListenerFallsBackToAllowFrom() throws {
        let port = try startHTTP(["allow-from = 127.0.0.2/32"], name: "fallback")
        XCTAssertEqual(try get("/lookup?number=%2B8613800138000", port: port, from: "127.0.0.2")?.text, "Fraud Risk")
        XCTAssertEqual(try get("/metrics", port: port, from: "127.0.0.2")?.status, 200)
        for outsider in ["127.0.0.1", "127.0.0.3"] {
            let lookup = try get("/lookup?number=%2B8613800138000", port: port, from: outsider)
            XCTAssertEqual(lookup?.status, 403, "\(outsider) is not in allow-from")
            XCTAssertFalse(lookup?.text.contains("Fraud") ?? true, "nothing about the number leaks")
            XCTAssertEqual(try get("/metrics", port: port, from: outsider)?.status, 403, outsider)
        }

        let explicit = try startHTTP(["allow-from = 127.0.0.2/32", "http-allow-from = 127.0.0.1/32"], name: "explicit")
        XCTAssertEqual(try get("/lookup?number=%2B8613800138000", port: explicit, from: "127.0.0.1")?.text, "Fraud Risk")
        XCTAssertEqual(try get("/lookup?number=%2B8613800138000", port: explicit, from: "127.0.0.2")?.status, 403,
                       "http-allow-from replaces allow-from for HTTP")
    }
}

/// RFC 3261 §18.2.1: a Via whose sent-by is not the address the request came from (a host
/// name, another address) gets `received=<source>` even without `rport`; one naming the
/// source gets none, and a `received` the sender wrote itself is dropped. Over loopback a
/// real UA's sent-by is always the source, so these Vias are written by hand.
final class ViaSentByTests: DaemonTestCase {
    static func invite(via: String, port: UInt16, transport: String = "UDP") -> [UInt8] {
        sipMessage([
            "INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0",
            "Via: SIP/2.0/\(transport) \(via)",
            "Max-Forwards: 70",
            "From: <sip:\(Caller.pizza)@pbx.example>;tag=\(token())",
            "To: <sip:13000000000@127.0.0.1>",
            "Call-ID: \(token("via-"))",
            "CSeq: 1 INVITE",
            "Content-Length: 0",
        ])
    }

    static let cases: [(via: String, answered: String)] = [
        ("pbx.example.com:5060;branch=z9hG4bK-name", "pbx.example.com:5060;branch=z9hG4bK-name;received=127.0.0.1"),
        ("PBX.Example.COM;branch=z9hG4bK-case", "PBX.Example.COM;branch=z9hG4bK-case;received=127.0.0.1"),
        ("127.0.0.9:5062;branch=z9hG4bK-other", "127.0.0.9:5062;branch=z9hG4bK-other;received=127.0.0.1"),
        ("127.0.0.1:5060;branch=z9hG4bK-same", "127.0.0.1:5060;branch=z9hG4bK-same"),
        ("127.0.0.1:5060;received=10.1.2.3;branch=z9hG4bK-stale", "127.0.0.1:5060;branch=z9hG4bK-stale"),
        ("pbx.example.com;received=10.1.2.3;branch=z9hG4bK-both", "pbx.example.com;branch=z9hG4bK-both;received=127.0.0.1"),
    ]

    func testReceivedWhenTheSentByIsNotTheSource() throws {
        let daemon = try startDaemon()
        let udp = try UDPPeer(ip: "127.0.0.1")
        let tcp = try TCPPeer(to: daemon.port, from: "127.0.0.1")
        for (via, answered) in Self.cases {
            let overUDP = udp.exchange(Self.invite(via: via, port: daemon.port), port: daemon.port)
            XCTAssertEqual(overUDP?.statusLine, "302 Moved Temporarily", via)
            XCTAssertEqual(overUDP?.values("Via"), ["SIP/2.0/UDP " + answered], "over UDP: \(via)")
            let overTCP = tcp.exchange(Self.invite(via: via, port: daemon.port, transport: "TCP"))
            XCTAssertEqual(overTCP?.values("Via"), ["SIP/2.0/TCP " + answered], "over TCP: \(via)")
        }
    }
}

extension IntegrationTestCase {
    /// lookupd in proxy mode in front of a plain UDP socket playing the PBX (so a test sees
    /// exactly what is forwarded), and a socket playing the trunk.
    func startProxyBeforeARawPBX() throws -> (pbx: UDPPeer, port: UInt16, trunk: UDPPeer) {
        let pbx = try UDPPeer(ip: "127.0.0.1")
        let port = freeLoopbackPort()
        try startNode("proxy", port: port, extra: ["mode = proxy", "upstream = 127.0.0.1:\(pbx.port);transport=udp"])
        return (pbx, port, try UDPPeer(ip: "127.0.0.1"))
    }
}

/// The proxy-mode side of ViaSentByTests.
final class ViaSentByProxyTests: IntegrationTestCase {
    /// In proxy mode the caller's Via in the forwarded request (under lookupd's own) always
    /// gets `received` with the socket peer, whatever its sent-by, and one the caller wrote is
    /// replaced: answers are routed by it, so they go only where the request came from.
    func testForwardedRequestsMarkTheCallersVia() throws {
        let (pbx, port, trunk) = try startProxyBeforeARawPBX()
        for (via, _) in ViaSentByTests.cases {
            let answered = via.replacingOccurrences(of: ";received=10.1.2.3", with: "") + ";received=127.0.0.1"
            trunk.send(ViaSentByTests.invite(via: via, port: port), to: port)
            guard let forwarded = pbx.receive(timeout: 3).map({ String(decoding: $0, as: UTF8.self) }) else {
                XCTFail("nothing forwarded for \(via)")
                continue
            }
            let vias = forwarded.components(separatedBy: "\r\n").filter { $0.hasPrefix("Via: ") }.map { String($0.dropFirst(5)) }
            XCTAssertEqual(vias.count, 2, forwarded)
            XCTAssertEqual(vias.last.map { $0.replacingOccurrences(of: ";rport=\(trunk.port)", with: "") }, "SIP/2.0/UDP " + answered,
                           "the caller's Via as forwarded: \(via)")
        }
    }
}

/// Proxy mode screens initial INVITEs only: a re-INVITE (To tag) inside a call already
/// answered goes on to the PBX untouched, even from a blocked caller, and gets no label.
final class ProxyInDialogTests: IntegrationTestCase {
    func testReInvitesAreForwardedNotScreened() throws {
        let (pbx, port, trunk) = try startProxyBeforeARawPBX()
        for caller in [Caller.fraud, Caller.unicom] {
            trunk.send(request("INVITE", port: port, from: "<sip:\(caller)@pbx.example>", toTag: "dialog-\(caller)"), to: port)
            guard let forwarded = pbx.receive(timeout: 3).map({ String(decoding: $0, as: UTF8.self) }) else {
                XCTFail("the re-INVITE from \(caller) was not forwarded: \(trunk.receive(timeout: 0.2).map { String(decoding: $0, as: UTF8.self) } ?? "no answer either")")
                continue
            }
            XCTAssertTrue(forwarded.hasPrefix("INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0\r\n"), forwarded)
            XCTAssertTrue(forwarded.contains("From: <sip:\(caller)@pbx.example>;tag="), "the From is not relabelled: \(forwarded)")
            XCTAssertFalse(forwarded.contains("X-Caller-Label"), forwarded)
            XCTAssertNil(trunk.receive(timeout: 0.3), "no answer from lookupd itself")
        }
    }
}

/// Two labelled directories through the daemon: a number is blocked if any directory
/// blocks it, its label comes from the highest-priority directory that has one for it,
/// the answer is the block-response of the directory that decided, and the priority order
/// is the order of the `directory =` lines.
final class DirectoryPriorityTrafficTests: DaemonTestCase {
    func answers(_ daemon: LookupdDaemon) throws -> [String: String] {
        let peer = try UDPPeer()
        var out: [String: String] = [:]
        for n in 1...5 {
            let caller = "+861380000000\(n)"
            let answer = peer.exchange(invite(from: "<sip:\(caller)@pbx.example>", port: daemon.port), port: daemon.port)
            out[caller] = answer.map { "\($0.statusLine) | \($0.header("X-Caller-Label") ?? "-")" } ?? "no answer"
        }
        return out
    }

    func testLabelsAndBlocksInPriorityOrder() throws {
        // The two directories ScreeningSetTests decides over in-process.
        let fixtures = fixturesDirectory.appendingPathComponent("priority")
        try compile(try String(contentsOf: fixtures.appendingPathComponent("high.csv"), encoding: .utf8), to: "high.lkd")
        try compile(try String(contentsOf: fixtures.appendingPathComponent("low.csv"), encoding: .utf8), to: "low.lkd")
        let daemon = try startDaemon(directories: ["high.lkd name=high", "low.lkd name=low block-response=607"], contacts: [])
        XCTAssertEqual(try answers(daemon), [
            "+8613800000001": "607 Unwanted | \"Bank A\"",              // low blocks, high's label; low decided
            "+8613800000002": "603 Decline | \"Debt Collector B\"",     // high blocks without a label
            "+8613800000003": "302 Moved Temporarily | \"Shop A\"",
            "+8613800000004": "302 Moved Temporarily | \"Only B\"",
            "+8613800000005": "603 Decline | \"Spam A\"",               // both block: high decides
        ])
        XCTAssertTrue(eventually(timeout: 2) {
            daemon.stderr.contains("caller=+8613800000001 callee=13000000000 response=607 label=\"Bank A\" source=low")
        }, daemon.stderr)

        let reversed = try startDaemon(name: "reversed", directories: ["low.lkd name=low block-response=607", "high.lkd name=high"], contacts: [])
        XCTAssertEqual(try answers(reversed), [
            "+8613800000001": "607 Unwanted | \"Spam B\"",
            "+8613800000002": "603 Decline | \"Debt Collector B\"",
            "+8613800000003": "302 Moved Temporarily | \"Shop B\"",
            "+8613800000004": "302 Moved Temporarily | \"Only B\"",
            "+8613800000005": "607 Unwanted | \"Spam B\"",
        ])
    }
}

/// A journal record whose label holds CR LF (written by hand with a valid checksum: `lookupd
/// add` refuses such a label) never reaches an answer: the daemon stops reading at it,
/// warns without echoing it, keeps serving what came before, and the next `lookupd add`
/// cuts it off.
final class JournalLabelTrafficTests: DaemonTestCase {
    func testALineBreakInAJournalLabelNeverReachesAHeader() throws {
        let daemon = try startDaemon(["log-level = info"])
        let peer = try UDPPeer()
        func answer(_ caller: String) -> SIPAnswer? {
            peer.exchange(invite(from: "<sip:\(caller)@pbx.example>", port: daemon.port), port: daemon.port)
        }
        XCTAssertEqual(try lookupd(["add", "+8613000000011", "--label", "First", "--config", daemon.configPath]).status, 0)
        XCTAssertTrue(eventually(timeout: 2) { answer("+8613000000011")?.header("X-Caller-Label") == "\"First\"" })

        let journal = path("main.lkd.journal")
        let bytes = [UInt8](FileManager.default.contents(atPath: journal) ?? Data())
        let id = try JournalFormat.decodeHeader(bytes[...], path: journal).journalID
        guard case .number(let number) = NumberNormalizer().normalize(Caller.unknown) else { return XCTFail("bad number") }
        let evil = JournalFormat.encode(JournalRecord(sequence: 2, key: number.value,
                                                      operation: .add(blocked: false, label: Array("Evil\r\nX-Injected: 1".utf8))),
                                        journalID: id)
        write("main.lkd.journal", Data(bytes + evil))
        XCTAssertTrue(eventually(timeout: 3) { daemon.stderr.contains("torn last record ignored") }, daemon.stderr)
        XCTAssertTrue(daemon.stderr.contains("record 2 is not a valid addition"), daemon.stderr)
        XCTAssertFalse(daemon.stderr.contains("Evil"), "the refused label is not logged")

        let unknown = try XCTUnwrap(answer(Caller.unknown))
        XCTAssertEqual(unknown.statusLine, "302 Moved Temporarily")
        XCTAssertNil(unknown.header("X-Caller-Label"), "\(unknown)")
        XCTAssertFalse(unknown.text.contains("Injected"), "\(unknown)")
        assertWellFormedAnswer(unknown.raw, "the caller of the refused record")
        XCTAssertEqual(answer("+8613000000011")?.header("X-Caller-Label"), "\"First\"", "what came before is still served")

        let next = try lookupd(["add", "+8613000000012", "--block", "--config", daemon.configPath])
        XCTAssertEqual(next.status, 0, next.summary)
        XCTAssertTrue(next.stderr.contains("cut off a torn record"), next.stderr)
        XCTAssertTrue(eventually(timeout: 2) { answer("+8613000000012")?.statusLine == "603 Decline" })
        XCTAssertNil(answer(Caller.unknown)?.header("X-Caller-Label"))
    }
}

/// "+86 010 ..." (the national trunk 0 kept after the country code, as some PBXs write it)
/// is the number without it, through the daemon: one unit test pinned this before.
final class TrunkPrefixTrafficTests: DaemonTestCase {
    func testATrunkZeroAfterTheCountryCodeIsDropped() throws {
        let daemon = try startDaemon()
        let peer = try UDPPeer()
        for written in ["+8601059000000", "+86-010-5900-0000", "tel:+86%20010%2059000000"] {
            let from = written.hasPrefix("tel:") ? "<\(written)>" : "<sip:\(written)@pbx.example;user=phone>"
            let answer = peer.exchange(invite(from: from, port: daemon.port), port: daemon.port)
            XCTAssertEqual(answer?.statusLine, "302 Moved Temporarily", written)
            XCTAssertEqual(answer?.header("X-Caller-Label"), "\"Beijing Municipal Hospital\"", written)
        }
    }
}

/// Control characters in the caller's own text (a percent-encoded CR LF in the user parts,
/// a quoted-pair in the display name) are written as \xHH in the decision log: a line break
/// there would let a caller forge log lines.
final class DecisionLogControlCharacterTests: DaemonTestCase {
    func testControlCharactersAreEscapedInLogLines() throws {
        let log = path("decisions.log")
        let daemon = try startDaemon(["log-file = \(log)", "log-level = debug", "invalid-callers = block"])
        let udp = try UDPPeer()
        let port = daemon.port
        let messages = [
            invite(from: "<sip:evil%0D%0Acall%20time=forged@pbx.example>", to: "1001", port: port, callID: "ctl-1@pbx"),
            invite(from: "\"Evil\\\u{0B}Name\" <sip:\(Caller.fraud)@pbx.example>", to: "1002%0D%0Aforged", port: port, callID: "ctl-2@pbx"),
        ]
        for message in messages { XCTAssertNotNil(udp.exchange(message, port: port)) }
        XCTAssertTrue(eventually(timeout: 5) { readText(log).split(separator: "\n").count >= 2 }, readText(log))
        let lines = readText(log).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        XCTAssertEqual(lines.count, 2, readText(log))
        for line in lines {
            XCTAssertTrue(line.hasPrefix("call time="), "a forged line: \(line.debugDescription)")
            XCTAssertFalse(line.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "a raw control character: \(line.debugDescription)")
        }
        XCTAssertTrue(eventually(timeout: 2) { daemon.stderr.contains("call-id=ctl-2@pbx") })
        for line in daemon.stderr.split(separator: "\n") where line.contains("ctl-") {
            XCTAssertTrue(line.hasPrefix("<"), "every stderr line has its priority: \(line.debugDescription)")
        }
    }
}
