import Foundation

// Building SIP messages for tests, as bytes on the wire. Independent of
// Sources/SIP: the code under test must not build its own test input.

/// Turns a readable message (lines joined with \n) into wire form with CRLF line ends.
public func wire(_ text: String) -> [UInt8] {
    Array(text.replacingOccurrences(of: "\n", with: "\r\n").utf8)
}

/// A message in wire form: `head` (start line and headers, \n-separated), then a
/// Content-Length header computed from the body, the empty line and the body.
public func message(_ head: String, body: String = "", lengthHeader: String = "Content-Length") -> [UInt8] {
    let bodyBytes = wire(body)
    var head = head
    if !head.hasSuffix("\n") { head += "\n" }
    return wire(head + "\(lengthHeader): \(bodyBytes.count)\n\n") + bodyBytes
}

/// Joins header lines into a message: request line, headers, empty line, body.
/// `lineEnd` is CRLF unless a test wants otherwise.
public func sipMessage(_ lines: [String], body: String = "", lineEnd: String = "\r\n") -> [UInt8] {
    Array((lines.joined(separator: lineEnd) + lineEnd + lineEnd + body).utf8)
}

/// Unique enough identifiers for Call-ID, tags and branches.
public func token(_ prefix: String = "") -> String {
    prefix + String(UInt64.random(in: 0...UInt64.max), radix: 36)
}
