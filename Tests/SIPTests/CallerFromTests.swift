import Foundation
import XCTest
@testable import SIP

/// `label-to-caller = no` in proxy mode (CallerFrom.swift): the caller's From travels in
/// lookupd's Via and comes back, byte for byte, in every response; nothing else can.
final class CallerFromTests: XCTestCase {
    let ourVia = SIPViaAddress(transport: "UDP", host: "192.0.2.5", port: 5060)
    let branchKey: UInt64 = 0x1234_5678
    let fromKey = SIPCallerFromKey(0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210)
    /// Compact name, a folded line with a bare LF, quotes and UTF-8 in the display name.
    let callerFrom = "f: \"Zoë \\\"Z\\\"\"\n   <sip:+8613800138000@198.51.100.7>;tag=abc"

    func invite(from: String = "", callID: String = "call-1@198.51.100.7") -> [UInt8] {
        Array([
            "INVITE sip:1001@192.0.2.5 SIP/2.0",
            "Via: SIP/2.0/UDP 198.51.100.7:5062;branch=z9hG4bK-trunk-1;rport",
            "Max-Forwards: 70",
            from.isEmpty ? callerFrom : from,
            "To: <sip:1001@192.0.2.5>",
            "Call-ID: \(callID)",
            "CSeq: 7 INVITE",
            "Content-Length: 0",
            "", "",
        ].joined(separator: "\r\n").utf8)
    }

    func forward(_ bytes: [UInt8], key: SIPCallerFromKey?) throws -> (text: String, result: SIPForwardResult) {
        let parser = SIPParser()
        XCTAssertEqual(parser.parse(bytes), .request)
        var f = SIPForwarding(via: ourVia, branchKey: branchKey, source: SIPSourceAddress(ip: "198.51.100.7", port: 5062),
                              ownAddresses: [ourVia], displayName: [.text("["), .label, .text("] "), .originalName])
        f.label = .string("Fraud Risk")
        f.callerFromKey = key
        var buffer = [UInt8](repeating: 0, count: 32768)
        let result = try buffer.withUnsafeMutableBytes { try parser.request.writeForwarded(f, into: $0) }
        return (String(decoding: buffer[0..<result.byteCount], as: UTF8.self), result)
    }

    /// What a UAS answers: Via, From, To, Call-ID and CSeq copied from the request (§8.2.6.2).
    func response(_ code: String, to forwarded: String, edit: (String) -> String = { $0 }) -> String {
        let head = forwarded.components(separatedBy: "\r\n\r\n")[0].components(separatedBy: "\r\n").dropFirst()
        var copied: [String] = []
        for line in head {
            let name = line.prefix { $0 != ":" }.lowercased()
            if ["via", "from", "f", "to", "call-id", "cseq"].contains(name) { copied.append(edit(line)) }
            else if line.hasPrefix(" ") || line.hasPrefix("\t"), let last = copied.popLast() { copied.append(last + "\r\n" + line) }
        }
        return (["SIP/2.0 \(code)"] + copied + ["Content-Length: 0", "", ""]).joined(separator: "\r\n")
    }

    func relay(_ text: String, key: SIPCallerFromKey?) -> (SIPResponseRelay, String) {
        let parser = SIPParser()
        var out = [UInt8](repeating: 0, count: 32768)
        let bytes = Array(text.utf8)
        let relay = bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { parser.relayResponse(input, ours: [ourVia], branchKey: branchKey, callerFromKey: key, into: $0) }
        }
        if case .forward(let n, _, _) = relay { return (relay, String(decoding: out[0..<n], as: UTF8.self)) }
        return (relay, "")
    }

    func testEveryResponseGivesTheCallerHisOwnFrom() throws {
        let (forwarded, _) = try forward(invite(), key: fromKey)
        // The PBX sees the label, and lookupd's Via carries the original From.
        XCTAssertTrue(forwarded.contains("\r\nFrom: \"[Fraud Risk] Zoë \\\"Z\\\"\" <sip:+8613800138000@198.51.100.7>;tag=abc\r\n"), forwarded)
        let topVia = try XCTUnwrap(forwarded.components(separatedBy: "\r\n").first { $0.hasPrefix("Via: SIP/2.0/UDP 192.0.2.5") })
        XCTAssertTrue(topVia.contains(";lkd-from="), topVia)
        XCTAssertFalse(topVia.contains("Zo"), "carried as hex, never as text: \(topVia)")
        // Provisional and final, and a retransmission of the final: the same From each time,
        // the caller's lines with only the line end inside the fold written CR LF.
        let restored = callerFrom.replacingOccurrences(of: "\n", with: "\r\n")
        for code in ["100 Trying", "180 Ringing", "200 OK", "200 OK", "486 Busy Here"] {
            let (result, text) = relay(response(code, to: forwarded), key: fromKey)
            guard case .forward = result else { return XCTFail("\(code): \(result)") }
            XCTAssertTrue(text.contains("\r\n" + restored + "\r\n"), "\(code): \(text)")
            XCTAssertFalse(text.contains("Fraud Risk"), "\(code): \(text)")
            XCTAssertFalse(text.contains("lkd"), "our Via is gone: \(text)")
        }
    }

    func testLabelToCallerKeepsTheRelabelledFrom() throws {
        let (forwarded, _) = try forward(invite(), key: nil)
        XCTAssertFalse(forwarded.contains("lkd-from"), forwarded)
        let (result, text) = relay(response("180 Ringing", to: forwarded), key: fromKey)
        guard case .forward = result else { return XCTFail("\(result)") }
        XCTAssertTrue(text.contains("\r\nFrom: \"[Fraud Risk] Zoë \\\"Z\\\"\" <sip:+8613800138000@198.51.100.7>;tag=abc\r\n"), text)
    }

    /// An altered parameter, one copied from another call's Via, or one made without the key:
    /// the response is not relayed at all.
    func testAForgedCarriedFromIsNotRelayed() throws {
        let (forwarded, _) = try forward(invite(), key: fromKey)
        let genuine = response("180 Ringing", to: forwarded)
        guard case .forward = relay(genuine, key: fromKey).0 else { return XCTFail("the genuine one is relayed") }
        func editCarried(_ change: (String) -> String) -> String {
            response("180 Ringing", to: forwarded) { line in
                guard let r = line.range(of: ";lkd-from=") else { return line }
                let value = String(line[r.upperBound...])
                return String(line[..<r.upperBound]) + change(value)
            }
        }
        // One nibble of the From, one of the tag; a From of the attacker's, tagged with a wrong key.
        let flipped = editCarried { v in String(v.dropLast()) + (v.last == "0" ? "1" : "0") }
        let badTag = editCarried { v in (v.first == "0" ? "1" : "0") + String(v.dropFirst()) }
        let made = editCarried { _ in hexTagged("From: \"Your Bank\" <sip:+8613800138000@198.51.100.7>;tag=abc", key: SIPCallerFromKey(1, 2), branch: forwarded) }
        for forged in [flipped, badTag, made, editCarried { _ in "zz" }] {
            XCTAssertEqual(relay(forged, key: fromKey).0, .notOurs, forged)
        }

        // Another call's carried From on this call's Via: its tag covers the other branch.
        let (other, _) = try forward(invite(callID: "call-2@198.51.100.7"), key: fromKey)
        let otherParameter = try XCTUnwrap(other.components(separatedBy: "\r\n").first { $0.contains(";lkd-from=") }?
            .components(separatedBy: ";lkd-from=").last)
        XCTAssertEqual(relay(editCarried { _ in otherParameter }, key: fromKey).0, .notOurs)
    }

    /// Even bytes with a valid tag are written into the From only if they are a From header
    /// as the parser accepted it (defence in depth: they are written into a header).
    func testOnlyAFromHeaderIsEverWritten() throws {
        let (forwarded, _) = try forward(invite(), key: fromKey)
        for lines in ["To: <sip:1001@192.0.2.5>", "From: a\r\nX-Injected: 1", "From: a\rb", "From: a\u{0}b", "From <sip:a@b>"] {
            let text = response("180 Ringing", to: forwarded) { line in
                guard let r = line.range(of: ";lkd-from=") else { return line }
                return String(line[..<r.upperBound]) + self.hexTagged(lines, key: self.fromKey, branch: forwarded)
            }
            XCTAssertEqual(relay(text, key: fromKey).0, .notOurs, lines.debugDescription)
        }
    }

    /// A From too long to carry is not relabelled: the label is in the label header only.
    func testAFromTooLongToCarryKeepsItsName() throws {
        let long = "From: \"\(String(repeating: "x", count: maxCarriedFromBytes))\" <sip:+8613800138000@198.51.100.7>;tag=abc"
        let (forwarded, result) = try forward(invite(from: long), key: fromKey)
        XCTAssertTrue(result.fromKept)
        XCTAssertTrue(forwarded.contains("\r\n" + long + "\r\n"), forwarded)
        XCTAssertTrue(forwarded.contains("\r\nX-Caller-Label: \"Fraud Risk\"\r\n"), forwarded)
        XCTAssertFalse(forwarded.contains("lkd-from"), forwarded)
        // One byte shorter is carried.
        let fits = "From: \"\(String(repeating: "x", count: maxCarriedFromBytes - 50))\" <sip:+8613800138000@198.51.100.7>;tag=abc"
        XCTAssertEqual(fits.utf8.count, maxCarriedFromBytes)
        XCTAssertFalse(try forward(invite(from: fits), key: fromKey).result.fromKept)
    }

    /// `lines` as a carried From for the branch of `forwarded`'s top Via.
    func hexTagged(_ lines: String, key: SIPCallerFromKey, branch forwarded: String) -> String {
        let via = forwarded.components(separatedBy: "\r\n").first { $0.hasPrefix("Via: SIP/2.0/UDP 192.0.2.5") }!
        let branch = via.components(separatedBy: ";branch=")[1].components(separatedBy: ";")[0]
        var b = branch, l = lines
        let tag = b.withUTF8 { bp in
            l.withUTF8 { lp in
                callerFromTag(key: key, branch: SIPText(baseAddress: UnsafeRawPointer(bp.baseAddress), count: bp.count),
                              lines: SIPText(baseAddress: UnsafeRawPointer(lp.baseAddress), count: lp.count))
            }
        }
        let hexTag = String(tag, radix: 16)
        return String(repeating: "0", count: 16 - hexTag.count) + hexTag + lines.utf8.map { String(format: "%02x", $0) }.joined()
    }

    /// SipHash-2-4's published test vector (key 00..0f, message 00..0e): the MAC is the
    /// algorithm it claims to be.
    func testSipHashVector() {
        var h = SipHash(SIPCallerFromKey(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908))
        for b in UInt8(0)..<15 { h.add(b) }
        XCTAssertEqual(h.finish(), 0xa129_ca61_49be_45e5)
    }
}
