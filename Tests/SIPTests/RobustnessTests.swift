import Foundation
import XCTest
@testable import SIP

/// Mutated torture messages through everything: no crash, and nothing written that could break
/// the line structure of a response.
final class RobustnessTests: XCTestCase {

    static let interesting: [UInt8] = Array("\r\n\0:;,\"<>\\% @=?[]\t".utf8) + [0x7F, 0xFF, 0xC3]

    func mutate(_ input: [UInt8], _ rng: inout SeededRandom) -> [UInt8] {
        var m = input
        for _ in 0..<(1 + rng.below(4)) {
            switch rng.below(6) {
            case 0 where !m.isEmpty:   // byte flip
                m[rng.below(m.count)] = UInt8(truncatingIfNeeded: rng.next())
            case 1 where !m.isEmpty:   // interesting byte
                m[rng.below(m.count)] = Self.interesting[rng.below(Self.interesting.count)]
            case 2:                    // truncation
                m = Array(m.prefix(rng.below(m.count + 1)))
            case 3:                    // insertion of random bytes
                let at = rng.below(m.count + 1)
                let junk = (0..<(1 + rng.below(8))).map { _ in
                    rng.below(2) == 0 ? UInt8(truncatingIfNeeded: rng.next()) : Self.interesting[rng.below(Self.interesting.count)]
                }
                m.insert(contentsOf: junk, at: at)
            case 4 where m.count > 2:  // duplicate a slice (repeated headers, long values)
                let a = rng.below(m.count), b = min(m.count, a + 1 + rng.below(200))
                m.insert(contentsOf: m[a..<b], at: rng.below(m.count + 1))
            case 5 where m.count > 2:  // deletion
                let a = rng.below(m.count), b = min(m.count, a + 1 + rng.below(40))
                m.removeSubrange(a..<b)
            default:
                break
            }
        }
        return m
    }

    /// CR only as part of CRLF, LF only after CR, and the message ends with the empty line.
    func assertWellFramed(_ bytes: ArraySlice<UInt8>, _ context: String) {
        let b = Array(bytes)
        XCTAssertTrue(b.starts(with: Array("SIP/2.0 ".utf8)), context)
        XCTAssertTrue(b.suffix(4) == [13, 10, 13, 10], context)
        for i in b.indices {
            if b[i] == 13 { XCTAssertTrue(i + 1 < b.count && b[i + 1] == 10, "bare CR: \(context)") }
            if b[i] == 10 { XCTAssertTrue(i > 0 && b[i - 1] == 13, "bare LF: \(context)") }
        }
        // Exactly one empty line, at the end.
        let text = String(decoding: b, as: UTF8.self)
        XCTAssertEqual(text.components(separatedBy: "\r\n\r\n").count, 2, context)
    }

    func testTwentyThousandMutatedTortureMessages() throws {
        let seeds = try FileManager.default.contentsOfDirectory(atPath: tortureDirectory.path)
            .filter { $0.hasSuffix(".dat") }.sorted()
            .map { try [UInt8](Data(contentsOf: tortureDirectory.appendingPathComponent($0))) } + [asteriskInvite, paiInvite]
        // LOOKUPD_FUZZ_ITERATIONS / LOOKUPD_FUZZ_SEED allow longer local runs; the default is fixed
        // so a failure reproduces.
        let env = ProcessInfo.processInfo.environment
        let iterations = env["LOOKUPD_FUZZ_ITERATIONS"].flatMap(Int.init) ?? 20_000
        var rng = SeededRandom(seed: env["LOOKUPD_FUZZ_SEED"].flatMap(UInt64.init) ?? 4475)
        let parser = SIPParser()
        let framer = SIPStreamFramer()
        var out = [UInt8](repeating: 0, count: 32768)
        var counts: [String: Int] = [:]
        for iteration in 0..<iterations {
            let input = mutate(seeds[rng.below(seeds.count)], &rng)
            switch input.withUnsafeBytes({ framer.frame($0) }) {
            case .message(let length):
                XCTAssertLessThanOrEqual(length, input.count)
                // What the framer cut out never has a body shorter than announced.
                let framed = parser.parse(Array(input.prefix(length)))
                XCTAssertNotEqual(framed, .malformed(.truncatedBody, canRespond: true), "iteration \(iteration)")
                XCTAssertNotEqual(framed, .malformed(.truncatedBody, canRespond: false), "iteration \(iteration)")
                XCTAssertNotEqual(framed, .tooLarge)
            case .keepAlive(let consume, _):
                XCTAssertGreaterThan(consume, 0)
                XCTAssertLessThanOrEqual(consume, input.count)
            case .needMore, .invalid:
                break
            }
            let outcome = parser.parse(input)
            counts["\(outcome)".prefix { $0 != "(" }.description, default: 0] += 1
            var responses: [SIPResponse] = []
            switch outcome {
            case .request:
                let r = parser.request
                // Touch every accessor.
                _ = (r.method, r.methodText.string, r.sipVersion.string, r.requestURI.text.string, r.requestURI.userOrNumber?.string,
                     r.from.displayName?.string, r.from.uri.user?.string, r.from.tag?.string, r.to.displayName?.string,
                     r.toHasTag, r.callID.string, r.cseqNumber, r.maxForwards, r.topVia.host.string, r.topVia.branch?.string,
                     r.viaCount, r.contentType?.string, r.privacy, r.invalidAssertedIdentityCount)
                for p in r.requestURI.parameters { _ = (p.name.string, p.value?.string) }
                for p in r.from.uri.parameters { _ = (p.name.string, p.value?.string) }
                for p in r.topVia.parameters { _ = (p.name.string, p.value?.string) }
                for identity in r.assertedIdentities { _ = (identity.displayName?.string, identity.uri.userOrNumber?.string) }
                for t in r.requireTags { _ = t.string }
                for t in r.privacyTokens { _ = t.string }
                XCTAssertLessThanOrEqual(r.bodyRange.upperBound, input.count)
                XCTAssertGreaterThanOrEqual(r.bodyRange.lowerBound, 0)
                if let rejection = r.protocolRejection() {
                    responses.append(SIPResponse(rejection, source: testSource))
                }
                responses.append(SIPResponse(statusCode: 302, reasonPhrase: "Moved Temporarily", source: testSource,
                                             contact: .requestURI, label: .string("Caller \"X\""), identity: .from))
                responses.append(SIPResponse(statusCode: 603, reasonPhrase: "Decline", source: SIPSourceAddress(ip: "2001:db8::9", port: 1),
                                             label: .string("A\r\nB"), identity: .assertedIdentity(0)))
            case .malformed(let why, canRespond: true):
                responses.append(SIPResponse(SIPRejection(malformation: why), source: testSource))
            default:
                XCTAssertFalse(parser.request.canRespond)
            }
            for response in responses {
                do {
                    let result = try out.withUnsafeMutableBytes { try parser.request.writeResponse(response, into: $0) }
                    assertWellFramed(out[0..<result.byteCount], "iteration \(iteration)")
                } catch SIPWriteError.invalidContact {
                    // A Request-URI that cannot sit in <> safely is refused, never written.
                } catch {
                    XCTFail("iteration \(iteration): \(error)")
                }
            }
        }
        // The mutations must exercise more than one path.
        XCTAssertGreaterThan(counts["request", default: 0], iterations / 20, "\(counts)")
        XCTAssertGreaterThan(counts["malformed", default: 0], iterations / 20, "\(counts)")
    }
}
