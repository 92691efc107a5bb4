import XCTest
@testable import Answering

final class DecisionLineTests: XCTestCase {
    /// A text value is written as it is exactly when every byte is printable ASCII other than
    /// `"`, `\` and `=` (for ASCII values): the check reads eight bytes at a time, so every
    /// byte that must be quoted is tried at every place in values of every length up to 40.
    func testPlainValuesAreFoundAtEveryLengthAndPlace() {
        let specials: [UInt8] = [0x00, 0x09, 0x0A, 0x0D, 0x1F, 0x20, 0x21, 0x22, 0x3C, 0x3D, 0x3E, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F]
        var x: UInt64 = 17
        for length in 1...40 {
            var base: [UInt8] = (0..<length).map { _ in
                x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                // Printable ASCII without '"', '\' and '=', so that only the special byte decides.
                var b = UInt8(0x21 + (x >> 33) % 94)
                if b == 0x22 || b == 0x5C || b == 0x3D { b = 0x41 }
                return b
            }
            check(base)
            for place in 0..<length {
                let kept = base[place]
                for special in specials {
                    base[place] = special
                    check(base)
                }
                base[place] = kept
            }
        }
    }

    /// The line's buffer copies short pieces by word moves and grows past its first capacity:
    /// pieces of every length up to 40, and some long ones, give the bytes array appends give.
    func testLineBufferHoldsWhatAnArrayHolds() {
        var x: UInt64 = 5
        for capacity in [1, 16, 1024] {
            let buffer = LineBuffer(capacity: capacity)
            var expected: [UInt8] = []
            for round in 0..<600 {
                x = x &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                let length = round % 97 == 0 ? 1_500 + Int(x >> 54) : Int((x >> 33) % 41)
                let piece = (0..<length).map { UInt8(truncatingIfNeeded: Int(x >> 40) &+ $0 &* 7) }
                if round % 5 == 0, let first = piece.first {
                    buffer.append(first)
                    expected.append(first)
                } else {
                    piece.withUnsafeBytes { buffer.append($0) }
                    expected.append(contentsOf: piece)
                }
                if round % 200 == 199 {
                    XCTAssertEqual(Array(buffer.bytes), expected)
                    buffer.removeAll()
                    expected.removeAll()
                }
            }
            XCTAssertEqual(Array(buffer.bytes), expected)
        }
        // Escaping into the buffer writes what it writes into an array.
        let values = ["plain", "two words", "a\"b", "caf\u{e9}", "\u{202E}x", "x=y", "", "\u{1}\u{7F}"]
        for value in values {
            var array: [UInt8] = []
            var sink = LineBuffer(capacity: 2)
            Array(value.utf8).withUnsafeBytes {
                DecisionLine.appendTextValue($0, to: &array)
                DecisionLine.appendTextValue($0, into: &sink)
            }
            XCTAssertEqual(Array(sink.bytes), array, value)
        }
    }

    private func check(_ value: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
        let plain = value.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C && $0 != 0x3D }
        var out: [UInt8] = []
        value.withUnsafeBytes { DecisionLine.appendTextValue($0, to: &out) }
        if plain {
            XCTAssertEqual(out, value, file: file, line: line)
        } else {
            XCTAssertEqual(out.first, 0x22, "\(value) must be quoted", file: file, line: line)
        }
    }
}
