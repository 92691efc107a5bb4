import Foundation
import XCTest
@testable import Answering

/// docs/SIP.md, "Protocol checks and answers" and the malformed requests: each row, in both
/// modes where the modes differ.
final class ProtocolAnswerTests: XCTestCase {
    func testChecksInOrderAsARedirectServer() throws {
        let f = try AnsweringFixture()
        XCTAssertEqual(f.send(Requests.invite(version: "SIP/3.0")).status, "SIP/2.0 505 Version Not Supported")
        let unknown = f.send(Requests.invite(method: "FOO", cseqMethod: "BAR"))
        XCTAssertEqual(unknown.status, "SIP/2.0 501 Not Implemented", "501 before the CSeq mismatch (RFC 4475 §3.1.2.18)")
        XCTAssertEqual(f.send(Requests.invite(method: "REGISTER", cseqMethod: "INVITE")).status, "SIP/2.0 405 Method Not Allowed")
        XCTAssertEqual(f.send(Requests.invite(cseqMethod: "BYE")).status, "SIP/2.0 400 CSeq Method Mismatch")
        XCTAssertEqual(f.send(Requests.invite(uri: "mailto:joe@example.com")).status, "SIP/2.0 416 Unsupported URI Scheme")
        let hops = Requests.invite().replacing(Array("Max-Forwards: 70".utf8), with: Array("Max-Forwards: 0".utf8))
        XCTAssertEqual(f.send(hops).status, "SIP/2.0 483 Too Many Hops")
        let extension_ = f.send(Requests.invite(extra: ["Require: 100rel, foo, timer, bar"]))
        XCTAssertEqual(extension_.status, "SIP/2.0 420 Bad Extension")
        XCTAssertEqual(extension_.header("Unsupported"), ["foo, bar"])
        // Supported tags pass; CANCEL carries no extensions; Proxy-Require is a proxy's business.
        XCTAssertEqual(f.send(Requests.invite(extra: ["Require: 100rel"])).status, "SIP/2.0 302 Moved Temporarily")
        XCTAssertEqual(f.send(Requests.invite(extra: ["Require: foo"], method: "CANCEL")).action, .none)
        XCTAssertEqual(f.send(Requests.invite(extra: ["Proxy-Require: foo"])).status, "SIP/2.0 302 Moved Temporarily")
        // An ACK is never answered, whatever it breaks.
        XCTAssertEqual(f.send(Array("\r\n".utf8) + Requests.invite(method: "ACK", version: "SIP/3.0")).action, .none)
    }

    func testChecksAsAProxy() throws {
        let f = try AnsweringFixture(proxy: true)
        XCTAssertEqual(f.send(Requests.invite(version: "SIP/3.0")).status, "SIP/2.0 505 Version Not Supported")
        let unknown = f.send(Requests.invite(method: "FOO"))
        XCTAssertEqual(unknown.status, "SIP/2.0 501 Not Implemented")
        XCTAssertEqual(unknown.header("Allow"), ["INVITE, ACK, CANCEL, BYE, OPTIONS, PRACK, UPDATE, INFO, REFER, MESSAGE, NOTIFY, SUBSCRIBE"])
        // A proxy forwards every known method: no 405.
        XCTAssertTrue(f.send(Requests.invite(method: "REGISTER", uri: "sip:192.0.2.1")).isForward)
        XCTAssertEqual(f.send(Requests.invite(cseqMethod: "BYE")).status, "SIP/2.0 400 CSeq Method Mismatch")
        XCTAssertEqual(f.send(Requests.invite(uri: "mailto:joe@example.com")).status, "SIP/2.0 416 Unsupported URI Scheme")
        let hops = Requests.invite().replacing(Array("Max-Forwards: 70".utf8), with: Array("Max-Forwards: 0".utf8))
        XCTAssertEqual(f.send(hops).status, "SIP/2.0 483 Too Many Hops")
        XCTAssertEqual(f.count(.proxyTooManyHops), 1)
        let ackHops = Requests.invite(method: "ACK").replacing(Array("Max-Forwards: 70".utf8), with: Array("Max-Forwards: 0".utf8))
        XCTAssertEqual(f.send(ackHops).action, .none)
        XCTAssertEqual(f.count(.proxyTooManyHops), 2)
        // Proxy-Require with any tag: 420, lookupd supports no proxy extension; Require is left
        // to the endpoints.
        let proxyRequire = f.send(Requests.invite(extra: ["Proxy-Require: foo"]))
        XCTAssertEqual(proxyRequire.status, "SIP/2.0 420 Bad Extension")
        XCTAssertEqual(proxyRequire.header("Unsupported"), ["foo"])
        XCTAssertTrue(f.send(Requests.invite(extra: ["Require: foo"])).isForward)
    }

    func testMalformedRequestsGet400OrNothing() throws {
        let f = try AnsweringFixture()
        XCTAssertEqual(f.send(Requests.invite(extra: ["From: <sip:x@y>;tag=2"])).status, "SIP/2.0 400 Duplicate From")
        let badCSeq = Requests.invite().replacing(Array("CSeq: 314159 INVITE".utf8), with: Array("CSeq: x INVITE".utf8))
        XCTAssertEqual(f.send(badCSeq).status, "SIP/2.0 400 Bad CSeq")
        XCTAssertEqual(f.count(.malformedAnswered), 2)
        // Without a Call-ID there is nothing a 400 could copy.
        let noCallID = Requests.invite().replacing(Array("Call-ID: a84b4c76e66710@192.0.2.9\r\n".utf8), with: [])
        XCTAssertEqual(f.send(noCallID).action, .none)
        XCTAssertEqual(f.send(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)).action, .none)
        XCTAssertEqual(f.count(.malformedDropped), 2)
        XCTAssertEqual(f.send([UInt8](repeating: 0x41, count: 16385)).action, .none)
        XCTAssertEqual(f.count(.tooLarge), 1)
        XCTAssertEqual(f.send(Array("\r\n\r\n".utf8)).action, .none, "a keep-alive")
        // The 400 is logged at debug, with the reason.
        XCTAssertTrue(String(decoding: f.log.bytes, as: UTF8.self).contains("<7>malformed reason="), String(decoding: f.log.bytes, as: UTF8.self))
    }

    func testStreamsAreFramedMessageByMessage() throws {
        let counters = WorkerCounters()
        let reader = StreamReader(maxMessageSize: 1500, counters: counters)
        let one = Requests.request("OPTIONS")
        let bytes = Array("\r\n\r\n".utf8) + one + one + Array(one.prefix(20))
        var events: [String] = []
        let (consumed, close) = bytes.withUnsafeBytes { raw in
            reader.read(raw) { event in
                switch event {
                case .pong: events.append("pong")
                case .message(let m): events.append("message \(m.count)")
                }
            }
        }
        XCTAssertEqual(events, ["pong", "message \(one.count)", "message \(one.count)"])
        XCTAssertEqual(consumed, 4 + 2 * one.count)
        XCTAssertFalse(close)
        XCTAssertEqual(counters.value(.tcpKeepalives), 1)
        // No Content-Length on a stream: the connection cannot be framed any more.
        let unframed = Array("OPTIONS sip:x SIP/2.0\r\nVia: SIP/2.0/TCP a;branch=z9hG4bK1\r\n\r\n".utf8)
        XCTAssertTrue(unframed.withUnsafeBytes { reader.read($0) { _ in } }.close)
        XCTAssertEqual(counters.value(.tcpClosedInvalid), 1)
    }
}

extension Array where Element == UInt8 {
    func replacing(_ old: [UInt8], with new: [UInt8]) -> [UInt8] {
        guard let range = firstRange(of: old) else { return self }
        var copy = self
        copy.replaceSubrange(range, with: new)
        return copy
    }
}
