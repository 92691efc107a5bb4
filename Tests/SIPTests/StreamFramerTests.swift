import XCTest
@testable import SIP

final class StreamFramerTests: XCTestCase {
    let framer = SIPStreamFramer()

    func frame(_ bytes: [UInt8], _ f: SIPStreamFramer? = nil) -> SIPStreamFrame {
        bytes.withUnsafeBytes { (f ?? framer).frame($0) }
    }

    func testCompleteMessageAndPartials() {
        let m = asteriskInvite
        XCTAssertEqual(frame(m), .message(length: m.count))
        XCTAssertEqual(frame([]), .needMore)
        // Every strict prefix needs more.
        for cut in stride(from: 1, to: m.count, by: 7) {
            XCTAssertEqual(frame(Array(m[0..<cut])), .needMore, "cut at \(cut)")
        }
        // Pipelined: only the first message.
        XCTAssertEqual(frame(m + m), .message(length: m.count))
        // The framed bytes parse as a request.
        XCTAssertEqual(SIPParser().parse(m), .request)
    }

    func testKeepAlives() {
        XCTAssertEqual(frame(Array("\r\n\r\n".utf8)), .keepAlive(consume: 4, pong: true))
        XCTAssertEqual(frame(Array("\r\n\r\n\r\n\r\n".utf8)), .keepAlive(consume: 8, pong: true))
        // A lone CRLF could still become a ping: wait.
        XCTAssertEqual(frame(Array("\r\n".utf8)), .needMore)
        XCTAssertEqual(frame(Array("\r\n\r".utf8)), .needMore)
        // Stray CRLF before a message: consumed, no pong (RFC 3261 §7.5).
        XCTAssertEqual(frame(Array("\r\n".utf8) + asteriskInvite), .keepAlive(consume: 2, pong: false))
        XCTAssertEqual(frame(Array("\r\n\r\n".utf8) + asteriskInvite), .keepAlive(consume: 4, pong: true))
        XCTAssertEqual(frame(Array("\n\n".utf8) + asteriskInvite), .keepAlive(consume: 2, pong: false))
    }

    func testContentLengthRules() {
        let head = """
        INVITE sip:a@example.com SIP/2.0
        Via: SIP/2.0/TCP 192.0.2.1;branch=z9hG4bKtcp
        From: <sip:b@example.com>;tag=1
        To: <sip:a@example.com>
        Call-ID: tcp1
        CSeq: 1 INVITE

        """
        XCTAssertEqual(frame(wire(head + "\n")), .invalid(.missingContentLength))
        XCTAssertEqual(frame(wire(head + "Content-Length: -1\n\n")), .invalid(.badContentLength))
        XCTAssertEqual(frame(wire(head + "Content-Length: x\n\n")), .invalid(.badContentLength))
        XCTAssertEqual(frame(wire(head + "Content-Length: 3\nl: 4\n\nabcd")), .invalid(.badContentLength))
        let withBody = wire(head + "l: 5\n\nhello")
        XCTAssertEqual(frame(withBody), .message(length: withBody.count))
        XCTAssertEqual(frame(Array(withBody.dropLast())), .needMore)
        XCTAssertEqual(frame(withBody + Array("INVITE".utf8)), .message(length: withBody.count))
        // LF-only header section.
        let lfOnly = Array((head + "Content-Length: 2\n\nhi").utf8)
        XCTAssertEqual(frame(lfOnly), .message(length: lfOnly.count))
    }

    func testLimitsAndGarbage() {
        let small = SIPStreamFramer(maxMessageSize: 256)
        XCTAssertEqual(frame(asteriskInvite, small), .invalid(.tooLarge))
        // No end of headers within the limit.
        XCTAssertEqual(frame([UInt8](repeating: 0x41, count: 300), small), .invalid(.tooLarge))
        XCTAssertEqual(frame([UInt8](repeating: 0x41, count: 100), small), .needMore)
        // Body pushing the total over the limit.
        let head = Array("OPTIONS sip:a SIP/2.0\r\nContent-Length: 1000\r\n\r\n".utf8)
        XCTAssertEqual(frame(head, small), .invalid(.tooLarge))
        XCTAssertEqual(frame([0x16, 0x03, 0x01, 0x00]), .invalid(.garbage), "a TLS ClientHello on the TCP port")
        XCTAssertEqual(frame([0x00, 0x01]), .invalid(.garbage))
        // A long run of line ends is consumed in one go.
        XCTAssertEqual(frame([UInt8](repeating: 0x0A, count: 10000)), .keepAlive(consume: 10000, pong: false))
    }
}
