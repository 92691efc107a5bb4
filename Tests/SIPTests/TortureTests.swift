import Foundation
import XCTest
@testable import SIP

/// RFC 4475 torture messages replayed through parse + protocol checks + response writing.
final class TortureTests: XCTestCase {
    struct Row {
        let name: String
        let method: String
        let expected: [String]
        let tolerated: [String]
    }

    func loadRows() throws -> [Row] {
        let tsv = try String(contentsOf: tortureDirectory.appendingPathComponent("EXPECTED.tsv"), encoding: .utf8)
        var rows: [Row] = []
        for line in tsv.split(separator: "\n").dropFirst() {
            let cols = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            XCTAssertGreaterThanOrEqual(cols.count, 7, "bad TSV row \(line)")
            let tokens = { (s: String) in s.split(separator: "|").map(String.init) }
            rows.append(Row(name: cols[0], method: cols[3], expected: tokens(cols[6]),
                            tolerated: cols.count > 7 ? tokens(cols[7]) : []))
        }
        return rows
    }

    /// What lookupd would do with the message: "drop", "accept" (handed to screening, which
    /// answers with something other than 400), or a status code.
    enum Verdict: Equatable, CustomStringConvertible {
        case drop, accept, status(Int)
        var description: String {
            switch self {
            case .drop: "drop"
            case .accept: "accept"
            case .status(let c): "\(c)"
            }
        }
    }

    func verdict(_ parser: SIPParser, _ bytes: [UInt8]) -> Verdict {
        switch parser.parse(bytes) {
        case .request:
            if parser.request.method == .ack { return .drop }
            if let rejection = parser.request.protocolRejection() { return .status(rejection.statusCode) }
            return .accept
        case .malformed(_, canRespond: true):
            return .status(400)
        case .malformed(_, canRespond: false), .response, .garbage, .keepAlive, .tooLarge:
            return .drop
        }
    }

    func matches(_ v: Verdict, _ token: String) -> Bool {
        switch (v, token) {
        case (_, "any"): return true
        case (.drop, "drop"): return true
        case (.accept, "!400"): return true
        case (.status(let c), "!400"): return c != 400
        case (.status(let c), _):
            if token.hasSuffix("xx"), let d = Int(token.prefix(1)) { return c / 100 == d }
            return Int(token) == c
        default: return false
        }
    }

    func testAllFiftyTortureMessages() throws {
        let rows = try loadRows()
        XCTAssertEqual(rows.count, 50)
        let parser = SIPParser()
        var buffer = [UInt8](repeating: 0, count: 16384)
        for row in rows {
            let bytes = try [UInt8](Data(contentsOf: tortureDirectory.appendingPathComponent(row.name)))
            let v = verdict(parser, bytes)
            let ok = (row.expected + row.tolerated).contains { matches(v, $0) }
            XCTAssertTrue(ok, "\(row.name): got \(v), expected \(row.expected) tolerated \(row.tolerated) [\(parser.parse(bytes))]")

            // Whatever is answered must be writable.
            if case .status(let code) = v {
                _ = parser.parse(bytes)
                let rejection = parser.request.protocolRejection() ?? SIPRejection(statusCode: code, reasonPhrase: "Bad Request")
                let result = try buffer.withUnsafeMutableBytes {
                    try parser.request.writeResponse(SIPResponse(rejection, source: testSource), into: $0)
                }
                let text = String(decoding: buffer[0..<result.byteCount], as: UTF8.self)
                XCTAssertTrue(text.hasPrefix("SIP/2.0 \(code) "), "\(row.name): \(text)")
            }
        }
    }

    func testTortureDetails() throws {
        let parser = SIPParser()
        func load(_ name: String) throws -> [UInt8] {
            try [UInt8](Data(contentsOf: tortureDirectory.appendingPathComponent(name)))
        }

        // wsinv: folding everywhere, leading zeros, three Via values across two header fields.
        XCTAssertEqual(parser.parse(try load("wsinv.dat")), .request)
        var r = parser.request
        XCTAssertEqual(r.maxForwards, 68)
        XCTAssertEqual(r.cseqNumber, 9)
        XCTAssertEqual(r.cseqMethod.string, "INVITE")
        XCTAssertEqual(r.viaCount, 3)
        XCTAssertEqual(r.topVia.transport.string, "UDP")
        XCTAssertEqual(r.topVia.host.string, "192.0.2.2")
        XCTAssertEqual(r.topVia.branch?.string, "390skdjuw")
        XCTAssertEqual(r.from.displayName?.string, "J Rosenberg \\\"")
        XCTAssertEqual(r.from.tag?.string, "98asjd8")
        XCTAssertTrue(r.toHasTag)

        // esc01: escaped user parts.
        XCTAssertEqual(parser.parse(try load("esc01.dat")), .request)
        r = parser.request
        XCTAssertEqual(r.from.uri.rawUser?.string, "I%20have%20spaces")
        XCTAssertEqual(r.from.uri.user?.string, "I have spaces")
        XCTAssertEqual(r.requestURI.user?.string, "sips:user@example.com")

        // escnull: %00 must not truncate.
        XCTAssertEqual(parser.parse(try load("escnull.dat")), .request)
        r = parser.request
        XCTAssertEqual(r.from.uri.user.map(Array.init), Array("null-\u{0}-null".utf8))

        // intmeth: NUL in a quoted-pair is legal; unknown method → 501 with Allow.
        XCTAssertEqual(parser.parse(try load("intmeth.dat")), .request)
        r = parser.request
        XCTAssertEqual(r.method, .other)
        XCTAssertEqual(r.methodText.string, "!interesting-Method0123456789_*+`.%indeed'~")
        XCTAssertEqual(r.from.displayName?.string, "token1~` token2'+_ token3*%!.-")
        let rejection = try XCTUnwrap(r.protocolRejection())
        XCTAssertEqual(rejection.statusCode, 501)
        XCTAssertEqual(rejection.headers.first?.name, "Allow")

        // semiuri: ';' inside the Request-URI user part.
        XCTAssertEqual(parser.parse(try load("semiuri.dat")), .request)
        XCTAssertEqual(parser.request.requestURI.user?.string, "user;par=u@example.net")

        // dblreq: only the REGISTER; the trailing INVITE bytes are ignored.
        let dbl = try load("dblreq.dat")
        XCTAssertEqual(parser.parse(dbl), .request)
        XCTAssertEqual(parser.request.method, .register)
        XCTAssertEqual(parser.request.bodyRange.count, 0)
        let response = try respond(parser, SIPResponse(statusCode: 405, reasonPhrase: "Method Not Allowed", source: testSource))
        XCTAssertFalse(response.text.contains("dblreq.0ha0isnda977644900765@192.0.2.15"))

        // mpart01: binary body with NULs framed by Content-Length only.
        let mpart = try load("mpart01.dat")
        XCTAssertEqual(parser.parse(mpart), .request)
        XCTAssertEqual(parser.request.bodyRange.count, 553)
        XCTAssertEqual(parser.request.bodyRange.upperBound, mpart.count)

        // inv2543: no Max-Forwards, no Content-Length (body = rest), no From tag.
        let inv = try load("inv2543.dat")
        XCTAssertEqual(parser.parse(inv), .request)
        r = parser.request
        XCTAssertNil(r.maxForwards)
        XCTAssertNil(r.from.tag)
        XCTAssertEqual(r.from.uri.user?.string, "+13035551111")
        XCTAssertEqual(r.from.uri.parameters.value("user")?.string, "phone")
        XCTAssertEqual(r.bodyRange.upperBound, inv.count)

        // Specific malformations.
        XCTAssertEqual(parser.parse(try load("scalar02.dat")), .malformed(.badCSeq, canRespond: true))
        XCTAssertEqual(parser.parse(try load("ncl.dat")), .malformed(.badContentLength, canRespond: true))
        XCTAssertEqual(parser.parse(try load("clerr.dat")), .malformed(.truncatedBody, canRespond: true))
        XCTAssertEqual(parser.parse(try load("mcl01.dat")), .malformed(.badContentLength, canRespond: true))
        XCTAssertEqual(parser.parse(try load("insuf.dat")), .malformed(.missingHeader(.from), canRespond: false))
        XCTAssertEqual(parser.parse(try load("unreason.dat")), .response)
        XCTAssertEqual(parser.parse(try load("bigcode.dat")), .response)
        if case .malformed(.duplicateHeader, canRespond: true) = parser.parse(try load("multi01.dat")) {} else {
            XCTFail("multi01 must be a duplicate-header 400")
        }
    }
}
