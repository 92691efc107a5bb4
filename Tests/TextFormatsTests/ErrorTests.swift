import XCTest
import TextFormats

final class TextFormatErrorTests: XCTestCase {
    func testDescription() {
        XCTAssertEqual(TextFormatError(line: 12, message: "bad thing").description, "line 12: bad thing")
        XCTAssertEqual(TextFormatError(line: 3, column: 7, message: "bad thing").description,
                       "line 3, column 7: bad thing")
    }

    func testBOMAndUTF8Helpers() {
        let cases: [(input: [UInt8], stripped: Int, invalidAt: Int?)] = [
            ([0xEF, 0xBB, 0xBF, 0x61], 1, nil),
            ([0xEF, 0xBB], 2, 0),
            (Array("abc".utf8), 3, nil),
            (Array("añ€😀".utf8), 10, nil),
            ([0x61, 0xC0, 0x80], 3, 1),            // overlong
            ([0x61, 0xED, 0xA0, 0x80], 4, 1),      // UTF-16 surrogate
            ([0xF4, 0x90, 0x80, 0x80], 4, 0),      // above U+10FFFF
            ([0x61, 0x62, 0xE4, 0xB8], 4, 2),      // truncated
            (Array("0123456789ab".utf8) + [0x80], 13, 12),  // past the 8-byte fast path
        ]
        for c in cases {
            c.input.withUnsafeBytes { buffer in
                XCTAssertEqual(TextInput.strippingBOM(buffer).count, c.stripped, "\(c.input)")
                XCTAssertEqual(TextInput.firstInvalidUTF8Offset(in: buffer), c.invalidAt, "\(c.input)")
            }
        }
    }
}
