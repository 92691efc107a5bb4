import Foundation
import XCTest
@testable import Answering
import Directory
import SIP

/// Issue 17, first part: how a rejection is worded. 603+ per ATIS-1000099 with redress and a
/// decision id, 433 for withheld callers, RFC 8688's jCard on 608, and no label toward the
/// caller.
final class TreatmentAnswerTests: XCTestCase {
    func test603PlusCarriesTheRedressAndADecisionIDTheLogHas() throws {
        for (redress, contacts) in [
            ("url=https://redress.example.net/block location=RLN", ";url=https://redress.example.net/block"),
            ("tel=+18005550100 location=RPN", ";tel=+18005550100"),
            ("email=redress@example.net location=TN", ";email=redress@example.net"),
            ("email=r@example.net tel=+18005550100 url=https://example.net/r?a=1&b=%22 location=LN",
             ";url=https://example.net/r?a=1&b=%22;tel=+18005550100;email=r@example.net"),
        ] {
            let f = try AnsweringFixture(["block-response = 603+", "redress = \(redress)"])
            let r = f.send(Requests.invite(from: "+8613800138000"))
            XCTAssertEqual(r.status, "SIP/2.0 603 Network Blocked")
            let reasons = r.header("Reason")
            XCTAssertEqual(reasons.count, 1, r.text)
            let reason = try XCTUnwrap(reasons.first)
            let id = try XCTUnwrap(ATISReason.id(reason), reason)
            XCTAssertTrue(reason.hasPrefix("SIP;cause=603;text=\"v=analytics1\(contacts);id="), reason)
            XCTAssertTrue(reason.hasSuffix(";location=" + String(redress.split(separator: "=").last!)), reason)
            // The operator finds the decision by the id the caller quotes.
            let log = String(decoding: f.log.bytes, as: UTF8.self)
            XCTAssertNotNil(log.range(of: #"<5>call [^\n]* verdict=blocked [^\n]* id=\#(id)[ \n]"#, options: .regularExpression), log)
            // Only the one line, and a retransmission gets the same id.
            XCTAssertEqual(f.send(Requests.invite(from: "+8613800138000")).header("Reason"), [reason])
            // Another call (another Call-ID) gets another one.
            let other = try XCTUnwrap(ATISReason.id(f.send(Requests.invite(from: "+8613800138000", callID: "other@192.0.2.9")).header("Reason")[0]))
            XCTAssertNotEqual(other, id)
        }
    }

    /// `redress-q850 = yes`: the Q.850 twin after the SIP Reason, same text, id and location.
    func testQ850TwinOf603Plus() throws {
        let f = try AnsweringFixture(["block-response = 603+", "redress = url=https://redress.example.net/r tel=+18005550100 location=RLN",
                                      "redress-q850 = yes"])
        let r = f.send(Requests.invite(from: "+8613800138000"))
        XCTAssertEqual(r.status, "SIP/2.0 603 Network Blocked")
        let reasons = r.header("Reason")
        XCTAssertEqual(reasons.count, 2, r.text)
        let id = try XCTUnwrap(ATISReason.id(reasons[0]), reasons[0])
        XCTAssertEqual(ATISReason.q850ID(reasons[1]), id, reasons[1])
        XCTAssertEqual(reasons[1], "Q.850;cause=21;text=\"v=analytics1;url=https://redress.example.net/r;tel=+18005550100;id=\(id)\";location=RLN")
        // Only 603+ has it: a 607 block does not, nor 603+ without the key.
        XCTAssertEqual(f.send(Requests.invite(from: "+8613000000001")).header("Reason"), [])
        let plain = try AnsweringFixture(["block-response = 603+", "redress = tel=+18005550100 location=RLN"])
        XCTAssertEqual(plain.send(Requests.invite(from: "+8613800138000")).header("Reason").count, 1)
    }

    func testDecisionIDsFollowTheTransactionNotTheClock() throws {
        let f = try AnsweringFixture(["block-response = 603+", "redress = tel=+18005550100 location=RLN"])
        func id(_ bytes: [UInt8], port: UInt16 = 5060) throws -> String {
            try XCTUnwrap(ATISReason.id(f.send(bytes, port: port).header("Reason").first ?? ""))
        }
        let first = try id(Requests.invite(from: "+8613800138000"))
        f.now = WallTime(seconds: 1_700_000_031)
        XCTAssertEqual(try id(Requests.invite(from: "+8613800138000")), first, "a retransmission 31 s later")
        XCTAssertNotEqual(try id(Requests.invite(from: "+8613800138000", branch: "z9hG4bKnew")), first, "a new transaction")
        XCTAssertNotEqual(try id(Requests.invite(from: "+8613800138000"), port: 5062), first, "another source")
        XCTAssertEqual(first.count, 32)
        // Every logged decision has one, 603+ or not.
        let log = String(decoding: f.log.bytes, as: UTF8.self)
        XCTAssertEqual(log.components(separatedBy: " id=").count - 1, 4, log)
        f.log.removeAll()
        _ = f.send(Requests.invite(from: "+8618600000000"))
        XCTAssertNotNil(String(decoding: f.log.bytes, as: UTF8.self).range(of: #" verdict=identified [^\n]* id=[0-9a-f]{32}[ \n]"#, options: .regularExpression))
    }

    func testDecisionIDIsTheStreamedHashOfItsFieldsInTheLogAndThe603Plus() throws {
        // The id as first defined: two XXH64 states, each field fed after its length. The
        // one-pass layout (DecisionID.words) must give the same words, and a line written
        // without a 603+ (hex in place) the same digits as the 603+'s Reason.
        func streamed(_ request: SIPRequest, ip: String, port: UInt16) -> String {
            var low = XXH64(seed: 0x6c6f_6f6b_7570_6431), high = XXH64(seed: 0x7265_6472_6573_7331)
            func add(_ bytes: UnsafeRawBufferPointer) {
                var count = UInt32(bytes.count).littleEndian
                withUnsafeBytes(of: &count) { low.update($0); high.update($0) }
                low.update(bytes)
                high.update(bytes)
            }
            let empty = UnsafeRawBufferPointer(start: nil, count: 0)
            add(request.callID.bytes)
            add(request.from.tag?.bytes ?? empty)
            var cseq = request.cseqNumber.littleEndian
            withUnsafeBytes(of: &cseq) { add($0) }
            add(request.topVia.branch?.bytes ?? empty)
            Array(ip.utf8).withUnsafeBytes { add($0) }
            var p = port.littleEndian
            withUnsafeBytes(of: &p) { add($0) }
            return String(format: "%016llx%016llx", high.finalize(), low.finalize())
        }
        let parser = SIPParser()
        for (i, source) in [("192.0.2.9", UInt16(5060)), ("2001:db8::7", 5062), ("198.51.100.200", 65535)].enumerated() {
            for bytes in [Requests.invite(from: "+8613800138000"), Requests.invite(from: "+8613800138000", branch: "z9hG4bK\(i)x"),
                          Requests.invite(fromHeader: "From: <sip:+8613800138000@example.net>")] {
                guard case .request = parser.parse(bytes) else { return XCTFail("not parsed") }
                let address = SIPSourceAddress(ip: source.0, port: source.1)
                let (high, low) = DecisionID.words(parser.request, source: address)
                XCTAssertEqual(DecisionID.hex(high, low), streamed(parser.request, ip: source.0, port: source.1))
                XCTAssertEqual(DecisionID.make(parser.request, source: address), DecisionID.hex(high, low))
            }
        }
        let rejecting = try AnsweringFixture(["block-response = 603+", "redress = tel=+18005550100 location=RLN"])
        let quoted = try XCTUnwrap(ATISReason.id(rejecting.send(Requests.invite(from: "+8613800138000")).header("Reason").first ?? ""))
        let plain = try AnsweringFixture()
        _ = plain.send(Requests.invite(from: "+8613800138000"))
        XCTAssertTrue(String(decoding: plain.log.bytes, as: UTF8.self).contains(" id=\(quoted)"), String(decoding: plain.log.bytes, as: UTF8.self))
    }

    func testDecisionIDDigitsAreBothWordsInFull() {
        var rng = SeededRandom(seed: 17)
        var values: [(UInt64, UInt64)] = [(0, 0), (1, 0xF), (.max, .max), (0x0123_4567_89ab_cdef, 0xfedc_ba98_7654_3210), (0x10, 0x0000_0000_0000_0100)]
        for _ in 0..<1000 { values.append((rng.next() >> (rng.next() % 64), rng.next() >> (rng.next() % 64))) }
        for (high, low) in values {
            XCTAssertEqual(DecisionID.hex(high, low), String(format: "%016llx%016llx", high, low))
        }
    }

    func testAnonymousCallersMayGet433() throws {
        let f = try AnsweringFixture(["anonymous-callers = reject 433", "block-response = 608"])
        let r = f.send(Requests.invite(fromHeader: "From: \"Anonymous\" <sip:anonymous@anonymous.invalid>;tag=1"))
        XCTAssertEqual(r.status, "SIP/2.0 433 Anonymity Disallowed")
        XCTAssertEqual(r.header("Contact"), [])
        XCTAssertEqual(f.count(.policyAnonymousBlock), 1)
        // Privacy: id withholds the number too.
        XCTAssertEqual(f.send(Requests.invite(extra: ["Privacy: id"])).status, "SIP/2.0 433 Anonymity Disallowed")
        // Other blocks keep the block response.
        XCTAssertEqual(f.send(Requests.invite(from: "+8613800138000")).status, "SIP/2.0 608 Rejected")
        // `block` still answers with the block response.
        let b = try AnsweringFixture(["anonymous-callers = block", "block-response = 608"])
        XCTAssertEqual(b.send(Requests.invite(extra: ["Privacy: id"])).status, "SIP/2.0 608 Rejected")
    }

    func test608CarriesTheJCardOnlyWhenConfiguredAndNeverALabel() throws {
        let plain = try AnsweringFixture(["block-response = 608"])
        let r = plain.send(Requests.invite(from: "+8613800138000"))
        XCTAssertEqual(r.status, "SIP/2.0 608 Rejected")
        XCTAssertEqual(r.header("Call-Info"), [])
        let f = try AnsweringFixture(["block-response = 608", "redress-jcard = https://example.net/jcard.jws", "label-to-caller = yes"])
        let j = f.send(Requests.invite(from: "+8613800138000"))
        XCTAssertEqual(j.header("Call-Info"), ["<https://example.net/jcard.jws>;purpose=jwscard"])
        // The second directory's 607 and lookupd's other answers carry none.
        XCTAssertEqual(f.send(Requests.invite(from: "+8613000000001")).header("Call-Info"), [])
        XCTAssertEqual(f.send(Requests.invite(from: "+8618600000000")).header("Call-Info"), [])
        // The jCard is the blocker's, not the caller's: it never holds the label.
        XCTAssertFalse(j.header("Call-Info")[0].contains("Fraud"), j.text)
    }

    func testRejectionsCarryNoLabelUnlessLabelToCallerSaysSo() throws {
        for mode in [false, true] {
            let f = try AnsweringFixture(["block-response = 603+", "redress = tel=+18005550100 location=RLN"], proxy: mode)
            let blocked = f.send(Requests.invite(from: "+8613800138000"))
            XCTAssertEqual(blocked.status, "SIP/2.0 603 Network Blocked")
            XCTAssertFalse(blocked.text.contains("Fraud Risk"), blocked.text)
            XCTAssertEqual(blocked.header("X-Caller-Label"), [])
            // The decision log keeps it, for the operator.
            XCTAssertTrue(String(decoding: f.log.bytes, as: UTF8.self).contains("label=\"Fraud Risk\""))
            let yes = try AnsweringFixture(["block-response = 603+", "redress = tel=+18005550100 location=RLN", "label-to-caller = yes"], proxy: mode)
            XCTAssertEqual(yes.send(Requests.invite(from: "+8613800138000")).header("X-Caller-Label"), ["\"Fraud Risk\""])
        }
        // A labelled caller's 302 goes to the PBX, not the caller: it keeps the label.
        let f = try AnsweringFixture()
        XCTAssertEqual(f.send(Requests.invite(from: "+8618600000000")).header("X-Caller-Label"), ["\"China Unicom Customer Service\""])
        // 433 carries none either.
        let a = try AnsweringFixture(["anonymous-callers = reject 433"])
        XCTAssertEqual(a.send(Requests.invite(extra: ["Privacy: id"])).header("X-Caller-Label"), [])
    }
}
