import Addresses
import Foundation
import SIP
import XCTest
@testable import Answering

/// docs/SIP.md, "Proxy mode": the request table and the responses, in process. The forwarded
/// bytes themselves are ProxyRewriteTests' (SIPTests); here, which action each request gets.
final class ProxyAnswerTests: XCTestCase {
    func testCallsAreForwardedWithTheirLabel() throws {
        let f = try AnsweringFixture(["label-format = [{label}] {name}"], proxy: true)
        let r = f.send(Requests.invite(from: "+8618600000000"))
        guard case .forward(_, let fallback) = r.action else { return XCTFail("\(r.action)") }
        XCTAssertGreaterThan(fallback, 0)
        XCTAssertTrue(r.text.hasPrefix("INVITE sip:+8610123456@192.0.2.1 SIP/2.0\r\n"), r.text)
        XCTAssertTrue(r.header("Via")[0].hasPrefix("SIP/2.0/UDP 192.0.2.1:5070;branch=z9hG4bK-lkd"), r.text)
        XCTAssertEqual(r.header("Via")[1], "SIP/2.0/UDP 192.0.2.9:5060;branch=z9hG4bK776asdhds;rport=5060;received=192.0.2.9")
        XCTAssertEqual(r.header("Max-Forwards"), ["69"])
        XCTAssertEqual(r.header("From"), ["\"[China Unicom Customer Service] Trunk Caller\" <sip:+8618600000000@192.0.2.9>;tag=1928301774"])
        XCTAssertEqual(r.header("X-Caller-Label"), ["\"China Unicom Customer Service\""])
        XCTAssertTrue(String(decoding: r.fallback, as: UTF8.self).hasPrefix("SIP/2.0 503 Service Unavailable\r\n"))
        // Unknown callers go on untouched but for the proxy's own headers; so do other methods.
        let unknown = f.send(Requests.invite(from: "+8613512345678"))
        XCTAssertTrue(unknown.isForward)
        XCTAssertEqual(unknown.header("From"), ["\"Trunk Caller\" <sip:+8613512345678@192.0.2.9>;tag=1928301774"])
        XCTAssertEqual(unknown.header("X-Caller-Label"), [])
        XCTAssertTrue(f.send(Requests.request("BYE")).isForward)
        guard case .forward(_, let ackFallback) = f.send(Requests.request("ACK")).action else { return XCTFail() }
        XCTAssertEqual(ackFallback, 0, "an ACK is never answered, not even with a 503")
        XCTAssertEqual(f.count(.verdictIdentified), 1)
    }

    func testBlockedCallersAreAnsweredAsInRedirectMode() throws {
        let f = try AnsweringFixture(["block-response = 607"], proxy: true)
        let r = f.send(Requests.invite(from: "+8613800138000"))
        XCTAssertEqual(r.status, "SIP/2.0 607 Unwanted")
        // The rejection goes back toward the caller: no label (label-to-caller).
        XCTAssertEqual(r.header("X-Caller-Label"), [])
        // Its ACK carries the To tag lookupd derived: absorbed, never sent to a PBX that never
        // saw the INVITE.
        let to = r.header("To")[0]
        let ack = Requests.invite(from: "+8613800138000", toTag: String(to[to.range(of: ";tag=")!.upperBound...]), method: "ACK")
        XCTAssertEqual(f.send(ack).action, .none)
        XCTAssertEqual(f.count(.proxyLocalACKs), 1)
    }

    func testSourcesOutsideAllowFromAreRefusedAsInRedirectMode() throws {
        let f = try AnsweringFixture(["allow-from = 127.0.0.0/8"], proxy: true)
        XCTAssertEqual(f.send(Requests.invite(), from: "198.51.100.1").status, "SIP/2.0 403 Forbidden")
        XCTAssertEqual(f.send(Requests.request("ACK"), from: "198.51.100.1").action, .none)
        XCTAssertTrue(f.send(Requests.invite(), from: "127.0.0.1").isForward)
    }

    func testRequestsFromTheUpstreamAreNotRelayed() throws {
        let f = try AnsweringFixture(proxy: true)
        XCTAssertEqual(f.send(Requests.invite(), fromUpstream: true).status, "SIP/2.0 403 Not Relaying")
        // From its address and port to a listen socket, too; another port of its host is a caller.
        XCTAssertEqual(f.send(Requests.invite(), from: "192.0.2.20", port: 5060).status, "SIP/2.0 403 Not Relaying")
        XCTAssertTrue(f.send(Requests.invite(), from: "192.0.2.20", port: 5099).isForward)
        XCTAssertEqual(f.send(Requests.request("ACK"), fromUpstream: true).action, .none)
        XCTAssertEqual(f.count(.proxyRequestFromUpstream), 3)
    }

    func testOPTIONSToLookupdIsAnsweredAndToAUserForwarded() throws {
        let f = try AnsweringFixture(proxy: true)
        let own = f.send(Requests.invite(method: "OPTIONS", uri: "sip:192.0.2.1"))
        XCTAssertEqual(own.status, "SIP/2.0 200 OK")
        XCTAssertEqual(own.header("Allow"), ["INVITE, ACK, CANCEL, BYE, OPTIONS, PRACK, UPDATE, INFO, REFER, MESSAGE, NOTIFY, SUBSCRIBE"])
        XCTAssertEqual(own.header("Accept"), ["application/sdp"])
        XCTAssertTrue(f.send(Requests.invite(method: "OPTIONS")).isForward)
    }

    func testARequestCarryingOurOwnBranchHasLooped() throws {
        let f = try AnsweringFixture(proxy: true)
        let forwarded = f.send(Requests.invite(from: "+8613512345678"))
        XCTAssertTrue(forwarded.isForward)
        // The same request coming back to lookupd (a PBX routing it here again).
        let looped = f.send(forwarded.bytes, from: "198.51.100.5")
        XCTAssertEqual(looped.status, "SIP/2.0 482 Loop Detected")
        XCTAssertEqual(f.count(.proxyLoops), 1)
    }

    func testAnUnroutableViaIsRefused() throws {
        let f = try AnsweringFixture(proxy: true)
        // A Via saying UDP on a request that came over TCP: received/rport could not route back.
        let r = f.send(Requests.invite(), transport: .tcp)
        XCTAssertEqual(r.status, "SIP/2.0 400 Bad Via")
        XCTAssertEqual(f.count(.proxyUnroutableVia), 1)
    }

    func testAnUpstreamKnownToBeDownGets503() throws {
        let f = try AnsweringFixture(proxy: true)
        f.proxy?.upstreamAvailable = false
        XCTAssertEqual(f.send(Requests.invite()).status, "SIP/2.0 503 Service Unavailable")
        XCTAssertEqual(f.send(Requests.request("ACK")).action, .none)
        XCTAssertEqual(f.count(.proxyUpstreamUnavailable), 2)
        // A blocked caller is still answered by lookupd itself.
        XCTAssertEqual(f.send(Requests.invite(from: "+8613800138000")).status, "SIP/2.0 603 Decline")
    }

    func testResponsesGoBackAlongTheViaPathOnlyFromTheUpstream() throws {
        let f = try AnsweringFixture(proxy: true)
        let forwarded = f.send(Requests.invite(from: "+8613512345678"))
        let vias = forwarded.header("Via")
        let ringing = message("""
        SIP/2.0 180 Ringing
        Via: \(vias[0])
        Via: \(vias[1])
        From: "Trunk Caller" <sip:+8613512345678@192.0.2.9>;tag=1928301774
        To: <sip:+8610123456@192.0.2.1>;tag=pbx1
        Call-ID: a84b4c76e66710@192.0.2.9
        CSeq: 314159 INVITE
        """)
        let relayed = f.send(ringing, from: "192.0.2.20", port: 5060)
        guard case .relay(_, let hop) = relayed.action else { return XCTFail("\(relayed.action)") }
        XCTAssertEqual([hop.transport, hop.host, "\(hop.port)"], ["UDP", "192.0.2.9", "5060"])
        XCTAssertEqual(relayed.header("Via"), [vias[1]], "our Via removed")
        // From anyone else, or from another port of the upstream over UDP: discarded.
        XCTAssertEqual(f.send(ringing, from: "198.51.100.5", port: 5060).action, .none)
        XCTAssertEqual(f.send(ringing, from: "192.0.2.20", port: 5099).action, .none)
        XCTAssertEqual(f.count(.proxyResponseNotOurs), 2)
        // Over TCP the upstream may open a connection from any port (§18.2.2).
        if case .relay = f.send(ringing, from: "192.0.2.20", port: 5099, transport: .tcp).action {} else { XCTFail("TCP from another port") }
        // A Via that is not ours, and a broken response: dropped and counted.
        XCTAssertEqual(f.send(ringing.replacing(Array("z9hG4bK-lkd".utf8), with: Array("z9hG4bK-xyz".utf8)), fromUpstream: true).action, .none)
        XCTAssertEqual(f.count(.proxyResponseNotOurs), 3)
        XCTAssertEqual(f.send(Array("SIP/2.0 180\r\n\r\n".utf8), fromUpstream: true).action, .none)
        XCTAssertEqual(f.count(.proxyResponseMalformed), 1)
    }

    func testTheUpstreamsAnswerToAProbeIsConsumed() throws {
        let f = try AnsweringFixture(proxy: true)
        let proxy = try XCTUnwrap(f.proxy)
        var probe = [UInt8](repeating: 0, count: 4096)
        let n = probe.withUnsafeMutableBytes {
            SIPProbe.write(via: proxy.upstreamVia, target: SIPViaAddress(transport: "UDP", host: "192.0.2.20", port: 5060), sequence: 1, into: $0)
        }
        let request = String(decoding: probe[0..<n], as: UTF8.self)
        func line(_ name: String) -> String { request.components(separatedBy: "\r\n").first { $0.hasPrefix(name + ":") }! }
        let answer = message([ "SIP/2.0 200 OK", line("Via"), line("From"), line("To") + ";tag=u1", line("Call-ID"), line("CSeq")].joined(separator: "\n"))
        XCTAssertEqual(f.send(answer, fromUpstream: true).action, .probeAnswered(200))
    }
}
