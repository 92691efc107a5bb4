import COSIP
import Foundation
import XCTest
@testable import SIP

/// Workarounds for libosip2 behaviour measured on this platform.
final class OsipQuirkTests: XCTestCase {
    /// Runs `body` with file descriptor 1 redirected to a pipe and returns what was written.
    func capturingStdout(_ body: () -> Void) -> [UInt8] {
        fflush(nil)
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let saved = dup(1)
        dup2(fds[1], 1)
        body()
        fflush(nil)
        dup2(saved, 1)
        close(saved)
        close(fds[1])
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fds[0], &chunk, chunk.count)
            if n <= 0 { break }
            out += chunk[0..<n]
        }
        close(fds[0])
        return out
    }

    func testNothingReachesStdout() throws {
        SIPLibrary.initialize()
        let torture = try FileManager.default.contentsOfDirectory(atPath: tortureDirectory.path)
            .filter { $0.hasSuffix(".dat") }
            .map { try [UInt8](Data(contentsOf: tortureDirectory.appendingPathComponent($0))) }
        let multi01 = try [UInt8](Data(contentsOf: tortureDirectory.appendingPathComponent("multi01.dat")))
        let output = capturingStdout {
            let parser = SIPParser()
            for m in torture { _ = parser.parse(m) }
            for i in 0..<200 { _ = parser.parse((0..<200).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) }) }
            // osip_message_parse itself on a message it rejects: without the trace set-up in
            // SIPLibrary.initialize() this prints "| ERROR | ... End of header Not found".
            var msg: UnsafeMutablePointer<osip_message_t>?
            XCTAssertEqual(osip_message_init(&msg), 0)
            let rc = multi01.withUnsafeBytes { osip_message_parse(msg, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count) }
            XCTAssertNotEqual(rc, 0)
            osip_message_free(msg)
        }
        XCTAssertEqual(String(decoding: output, as: UTF8.self), "")
    }

    func testMessageWithoutMandatoryHeadersIsNotARequest() {
        // osip_message_parse returns 0 for this; lookupd checks the headers itself.
        let parser = SIPParser()
        XCTAssertEqual(parser.parse(wire("INVITE sip:a@example.com SIP/2.0\nContent-Length: 0\n\n")),
                       .malformed(.missingHeader(.via), canRespond: false))
    }

    func testFoldedHeadersAreCopiedWithoutLineBreaks() throws {
        // Responses are never built with osip (osip_from_set_displayname and
        // osip_message_set_header pass CR LF through). Request headers copied into a response
        // are unfolded, so a folded display name cannot smuggle a line break either.
        let parser = SIPParser()
        let bytes = Array("""
        INVITE sip:a@example.com SIP/2.0\r
        Via: SIP/2.0/UDP 192.0.2.1\r
         ;branch=z9hG4bKfold\r
        From: "Evil\r
         Injected: yes" <sip:b@example.com>;tag=1\r
        To: <sip:a@example.com>\r
        Call-ID: fold\r
        CSeq: 1 INVITE\r
        Content-Length: 0\r
        \r

        """.utf8)
        XCTAssertEqual(parser.parse(bytes), .request)
        let out = try respond(parser, SIPResponse(statusCode: 404, reasonPhrase: "Not Found", source: testSource))
        XCTAssertEqual(headerValues(out.text, "From"), ["\"Evil Injected: yes\" <sip:b@example.com>;tag=1"])
        XCTAssertEqual(headerValues(out.text, "Via"), ["SIP/2.0/UDP 192.0.2.1;branch=z9hG4bKfold;received=192.0.2.99"])
        XCTAssertTrue(headerValues(out.text, "Injected").isEmpty)
    }
}
