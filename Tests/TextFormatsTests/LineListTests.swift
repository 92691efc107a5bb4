import XCTest
import TextFormats

final class LineListTests: XCTestCase {
    func items(_ text: String) throws -> [String] {
        try LineListReader(bytes: bytes(text)).items().map { "\($0.line):\($0.text)" }
    }

    func testTable() throws {
        let cases: [(String, [String])] = [
            ("+8613800138000\n+8613900139000\n", ["1:+8613800138000", "2:+8613900139000"]),
            ("  a  \r\n\tb\t\r\n", ["1:a", "2:b"]),
            ("a\rb\rc", ["1:a", "2:b", "3:c"]),
            ("\u{FEFF}first\n", ["1:first"]),
            ("# comment\n\n   \n  # indented\nx\n", ["5:x"]),
            ("+8613800138000  # known spammer\n", ["1:+8613800138000"]),
            ("value\t# tab before comment\n", ["1:value"]),
            ("abc#1\n", ["1:abc#1"]),
            ("a # one # two\n", ["1:a"]),
            ("inner  spaces kept # c\n", ["1:inner  spaces kept"]),
            ("张三 # 注释\n", ["1:张三"]),
            ("", []),
            ("\n\n\n", []),
        ]
        for (input, expected) in cases {
            XCTAssertEqual(try items(input), expected, input.debugDescription)
        }
    }

    func testRawBufferAndErrors() throws {
        let input = bytes("ok\nbad\u{FFFD}item\n# comment \u{FFFD}\n")
        var seen: [Int] = []
        let error = captureError {
            try input.withUnsafeBytes { buffer in
                try LineListReader(bytes: buffer).forEachItem { line, _ in seen.append(line) }
            }
        }
        XCTAssertEqual(seen, [1])
        XCTAssertEqual(error, TextFormatError(line: 2, column: 4,
                                              message: "invalid UTF-8 (byte 0xFF); the file must be saved as UTF-8 (a Windows program may have written its code page: iconv -f WINDOWS-1252 -t UTF-8 converts it)"))
        // Invalid bytes in a comment are not an error: nothing reads them.
        XCTAssertEqual(try items("a # caf\u{FFFD}\n"), ["1:a"])
    }
}
