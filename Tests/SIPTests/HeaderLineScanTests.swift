import CSIPLexer
import XCTest
@testable import SIP

/// The vectorised header-line scanner (`lookupd_sip_lines`, CSIPLexer/SIPLines.c) against a
/// byte-by-byte reference, on random byte soups rich in LF, CR, NUL and ':' at every offset and
/// length around its 32-byte blocks, and the per-thread scratch arena behind libosip2.
final class HeaderLineScanTests: XCTestCase {
    struct Line: Equatable {
        var lf: Int
        var colon: Int?
        var flagged: Bool
    }

    /// What the scanner promises, one byte at a time.
    func reference(_ b: [UInt8], start: Int, capacity: Int) -> [Line] {
        var out: [Line] = []
        var lineStart = start
        var colon: Int?
        var flagged = false
        var i = start
        while i < b.count {
            let c = b[i]
            if c == 0x0A {
                out.append(Line(lf: i, colon: colon, flagged: flagged))
                let empty = i == lineStart || (i == lineStart + 1 && b[lineStart] == 0x0D)
                if out.count == capacity || empty { return out }
                lineStart = i + 1
                colon = nil
                flagged = false
            } else if c == UInt8(ascii: ":") {
                if colon == nil { colon = i }
            } else if c == 0 || (c == 0x0D && !(i + 1 < b.count && b[i + 1] == 0x0A)) {
                flagged = true
            }
            i += 1
        }
        out.append(Line(lf: b.count, colon: colon, flagged: flagged))
        return out
    }

    func scan(_ b: [UInt8], start: Int, capacity: Int) -> [Line] {
        // The scanner may read up to 31 bytes past the end; give it readable (garbage) bytes.
        var padded = b + [UInt8](repeating: 0x0A, count: 32)
        var lines = [lookupd_sip_line](repeating: lookupd_sip_line(), count: capacity)
        let n = padded.withUnsafeMutableBufferPointer { p in
            lines.withUnsafeMutableBufferPointer { lookupd_sip_lines(p.baseAddress, b.count, start, $0.baseAddress, capacity) }
        }
        return (0..<n).map { i in
            let l = lines[i]
            return Line(lf: Int(l.lf), colon: l.colon == LOOKUPD_SIP_NONE ? nil : Int(l.colon), flagged: l.flags != 0)
        }
    }

    func testAgreesWithTheByteByByteReference() {
        var rng = SeededRandom(seed: 32)
        let alphabet: [UInt8] = [0x0A, 0x0D, 0x00, UInt8(ascii: ":"), UInt8(ascii: "a"), UInt8(ascii: " "), UInt8(ascii: "x")]
        for iteration in 0..<30_000 {
            let length = rng.below(200)
            // Dense and sparse special bytes; CR LF pairs placed on purpose around block edges.
            let dense = rng.below(3) == 0
            var b = (0..<length).map { _ in dense ? alphabet[rng.below(alphabet.count)] : (rng.below(12) == 0 ? alphabet[rng.below(4)] : UInt8(ascii: "t")) }
            for _ in 0..<rng.below(6) where length > 1 {
                let at = rng.below(length - 1)
                b[at] = 0x0D
                b[at + 1] = 0x0A
            }
            let start = length == 0 ? 0 : rng.below(length)
            let capacity = 1 + rng.below(70)
            let got = scan(b, start: start, capacity: capacity)
            let want = reference(b, start: start, capacity: capacity)
            if got != want {
                XCTFail("iteration \(iteration) start \(start) capacity \(capacity) bytes \(b): got \(got), want \(want)")
                return
            }
        }
    }

    func testCarriageReturnsOnBlockBoundaries() {
        for start in 0..<4 {
            for at in 28..<70 {
                var b = [UInt8](repeating: UInt8(ascii: "a"), count: 80)
                b[at] = 0x0D
                for next in [UInt8(0x0A), UInt8(ascii: "b")] {
                    if at + 1 < b.count { b[at + 1] = next }
                    XCTAssertEqual(scan(b, start: start, capacity: 64), reference(b, start: start, capacity: 64), "start \(start) CR at \(at)")
                }
                b[79] = 0x0D
                XCTAssertEqual(scan(b, start: start, capacity: 64), reference(b, start: start, capacity: 64), "final CR")
            }
        }
    }

    /// Scratch scopes nest with plain malloc use: pointers from outside a scope are freed
    /// normally, arena pointers never reach free(), and a full arena falls back to malloc.
    func testScratchArenaHooks() {
        let outside = lookupd_scratch_malloc(100)
        XCTAssertNotNil(outside)
        let mark = lookupd_scratch_begin()
        XCTAssertEqual(lookupd_scratch_clean(mark), 1)
        let a = lookupd_scratch_malloc(24)
        let b = lookupd_scratch_malloc(0)
        XCTAssertNotNil(a)
        XCTAssertNotNil(b)
        XCTAssertNotEqual(a, b)
        XCTAssertEqual(Int(bitPattern: a) % 16, 0)
        a!.storeBytes(of: 0x1122_3344_5566_7788, as: UInt64.self)
        let grown = lookupd_scratch_realloc(a, 4096)
        XCTAssertEqual(grown!.load(as: UInt64.self), 0x1122_3344_5566_7788)
        lookupd_scratch_free(a)
        lookupd_scratch_free(grown)
        XCTAssertEqual(lookupd_scratch_clean(mark), 1)
        // Exhaust the arena: the next allocations come from malloc and are counted.
        var fallbacks: [UnsafeMutableRawPointer] = []
        for _ in 0..<40 { if let p = lookupd_scratch_malloc(4096) { fallbacks.append(p) } }
        XCTAssertEqual(lookupd_scratch_clean(mark), 0)
        for p in fallbacks { lookupd_scratch_free(p) }
        lookupd_scratch_end()
        lookupd_scratch_free(outside)
        // A new scope starts clean again.
        let again = lookupd_scratch_begin()
        XCTAssertEqual(lookupd_scratch_clean(again), 1)
        lookupd_scratch_end()
    }
}
