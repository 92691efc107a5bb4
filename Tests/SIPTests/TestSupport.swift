@_exported import TestSupport
import Foundation
import XCTest
@testable import SIP

let testSource = SIPSourceAddress(ip: "192.0.2.99", port: 40000)

extension SIPParser {
    func parse(_ text: String) -> SIPParseOutcome {
        parse(wire(text))
    }
}

/// Writes a response for the parser's current request and returns it as text and bytes.
func respond(_ parser: SIPParser, _ response: SIPResponse, capacity: Int = 16384,
             file: StaticString = #filePath, line: UInt = #line) throws -> (text: String, bytes: [UInt8], result: SIPWriteResult) {
    var buffer = [UInt8](repeating: 0, count: capacity)
    let result = try buffer.withUnsafeMutableBytes { try parser.request.writeResponse(response, into: $0) }
    let bytes = Array(buffer[0..<result.byteCount])
    return (String(decoding: bytes, as: UTF8.self), bytes, result)
}

/// Header lines of a written response (without the status line and the empty line).
func headerLines(_ text: String) -> [String] {
    var lines = text.components(separatedBy: "\r\n")
    lines.removeFirst()
    return lines.filter { !$0.isEmpty }
}

func headerValues(_ text: String, _ name: String) -> [String] {
    headerLines(text).compactMap { line in
        guard let colon = line.firstIndex(of: ":") else { return nil }
        guard line[..<colon].lowercased() == name.lowercased() else { return nil }
        return String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
    }
}

func statusLine(_ text: String) -> String {
    text.components(separatedBy: "\r\n")[0]
}

let sdpBody = """
v=0
o=- 1 1 IN IP4 192.0.2.20
s=-
c=IN IP4 192.0.2.20
t=0 0
m=audio 10000 RTP/AVP 0 8
a=rtpmap:0 PCMU/8000

"""

let asteriskInvite = message("""
INVITE sip:+4930123456@192.0.2.10:5060 SIP/2.0
Via: SIP/2.0/UDP 192.0.2.20:5060;branch=z9hG4bK5f2a1c3d;rport
Max-Forwards: 70
From: "Alice Example" <sip:+4930111222@192.0.2.20>;tag=as6f1e2d3c
To: <sip:+4930123456@192.0.2.10:5060>
Contact: <sip:+4930111222@192.0.2.20:5060>
Call-ID: 3c2a7f1b5e6d4a8f01234567@192.0.2.20:5060
CSeq: 102 INVITE
User-Agent: Asterisk PBX 18.10.0
Date: Sat, 29 Nov 2025 19:00:00 GMT
Allow: INVITE, ACK, CANCEL, OPTIONS, BYE, REFER, SUBSCRIBE, NOTIFY, INFO, PUBLISH, MESSAGE
Supported: replaces, timer
Content-Type: application/sdp
""", body: sdpBody)

let paiInvite = message("""
INVITE sip:+4930123456@redirect.example.net;user=phone SIP/2.0
Via: SIP/2.0/UDP 203.0.113.5;branch=z9hG4bKpai;rport
f: "Doe, \\"J\\"" <sip:+4989123456;cpc=ordinary@carrier.example;user=phone>;tag=1928301774
t: <sip:+4930123456@redirect.example.net;user=phone>
i: pai-1@carrier.example
CSeq: 1 INVITE
Max-Forwards: 0068
P-Asserted-Identity: "Carrier" <sip:%2B4989123456@carrier.example;user=phone;verstat=TN-Validation-Passed>, <tel:+4989123456>
Privacy: id;header
Require: 100rel
""", body: sdpBody, lengthHeader: "l")

/// Compares a word-at-a-time byte test with its byte-by-byte definition on 200,000 values of
/// every length up to 40: lowercase letters with up to two of `boundary` anywhere. Returns how
/// many were true; the first disagreement fails the test.
func compareWithDefinition(seed: UInt64, boundary: [UInt8], _ fast: (SIPText) -> Bool, _ definition: ([UInt8]) -> Bool,
                           file: StaticString = #filePath, line: UInt = #line) -> Int {
    var r = SeededRandom(seed: seed)
    var trueCount = 0
    for i in 0..<200_000 {
        let count = i % 41
        var b = (0..<count).map { _ in UInt8(ascii: "a") &+ UInt8(r.below(26)) }
        for _ in 0..<r.below(3) where count > 0 { b[r.below(count)] = boundary[r.below(boundary.count)] }
        let got = b.withUnsafeBytes { fast(SIPText(baseAddress: $0.baseAddress, count: $0.count)) }
        if got { trueCount += 1 }
        if got != definition(b) {
            XCTFail("\(b)", file: file, line: line)
            break
        }
    }
    return trueCount
}
