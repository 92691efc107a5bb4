import XCTest
import TextFormats

final class JSONTests: XCTestCase {
    func testValidDocuments() throws {
        let cases: [(String, JSONValue)] = [
            ("null", .null),
            (" true ", .bool(true)),
            ("\n\tfalse\r\n", .bool(false)),
            ("0", .number("0")),
            ("-0", .number("-0")),
            ("12.5e-3", .number("12.5e-3")),
            ("1E+2", .number("1E+2")),
            ("\"a\"", .string("a")),
            ("[]", .array([])),
            ("{}", .object([])),
            ("[1, [2, {\"k\": null}]]", .array([.number("1"), .array([.number("2"), .object([(key: "k", value: .null)])])])),
            (#""\"\\\/\b\f\n\r\t""#, .string("\"\\/\u{8}\u{C}\n\r\t")),
            (#""caf\u00e9 \u4E2D""#, .string("café 中")),
            (#""\uD83D\uDE00 ok""#, .string("😀 ok")),
            (#""nul\u0000byte""#, .string("nul\u{0}byte")),
            ("\"张三 😀\"", .string("张三 😀")),
            ("\u{FEFF}{\"bom\": true}", .object([(key: "bom", value: .bool(true))])),
            ("{\"number\": \"+8613800138000\", \"action\": \"block\", \"label\": \"Spam\"}",
             .object([(key: "number", value: .string("+8613800138000")), (key: "action", value: .string("block")),
                      (key: "label", value: .string("Spam"))])),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(try JSONValue.parse(text), expected, text)
            // Round trip through the serialiser.
            XCTAssertEqual(try JSONValue.parse(try JSONValue.parse(text).description), expected, text)
        }
    }

    func testNumbersKeepEveryDigit() throws {
        let value = try JSONValue.parse("[8613800138000, 86138001380001234567890123, 1.00000000000000000001, -2e400]")
        XCTAssertEqual(value[0]?.numberLexeme, "8613800138000")
        XCTAssertEqual(value[0]?.int64Value, 8_613_800_138_000)
        XCTAssertEqual(value[1]?.numberLexeme, "86138001380001234567890123")
        XCTAssertNil(value[1]?.int64Value)
        XCTAssertEqual(value[2]?.numberLexeme, "1.00000000000000000001")
        XCTAssertEqual(value[3]?.numberLexeme, "-2e400")
        XCTAssertEqual(value[2]?.doubleValue, 1.0)
        XCTAssertNil(value[4])
    }

    func testObjectAccessAndDuplicates() throws {
        let value = try JSONValue.parse(#"{"a": 1, "b": "x", "a": 3}"#)
        XCTAssertEqual(value["a"], .number("3"), "the last duplicate wins")
        XCTAssertEqual(value["b"]?.stringValue, "x")
        XCTAssertNil(value["missing"])
        XCTAssertEqual(value.objectMembers?.map(\.key), ["a", "b", "a"], "order and duplicates are kept")
        XCTAssertNil(JSONValue.array([])["a"])
        XCTAssertEqual(JSONValue.bool(true).boolValue, true)
        XCTAssertTrue(JSONValue.null.isNull)
        XCTAssertEqual(JSONValue.array([.null]).arrayValue, [.null])
        XCTAssertNotEqual(JSONValue.object([(key: "a", value: .null)]), .object([(key: "b", value: .null)]))
    }

    func testErrorTable() {
        let cases: [(String, Int, Int, String)] = [
            ("", 1, 1, "empty input, expected a JSON value"),
            ("  \n ", 2, 2, "empty input, expected a JSON value"),
            ("[1,2", 1, 5, "unexpected end of input: expected ',' or ']' after array element"),
            ("[1 2]", 1, 4, "expected ',' or ']' after array element"),
            (#"{"a" 1}"#, 1, 6, "expected ':' after object key"),
            (#"{"a":1 "b":2}"#, 1, 8, "expected ',' or '}' after object member"),
            (#"{"a":1"#, 1, 7, "unexpected end of input: expected ',' or '}' after object member"),
            ("[1,]", 1, 4, "trailing comma before ']'"),
            (#"{"a":1,}"#, 1, 8, "trailing comma before '}'"),
            ("{a:1}", 1, 2, "expected a double-quoted string as object key"),
            ("{'a':1}", 1, 2, "object keys must be double-quoted strings"),
            ("[1,", 1, 4, "unexpected end of input: expected a value"),
            ("[tru]", 1, 2, "invalid literal (expected true, false or null)"),
            ("[nul", 1, 2, "invalid literal (expected true, false or null)"),
            ("[True]", 1, 2, "unexpected 'T', expected a value"),
            ("[01]", 1, 2, "leading zeros are not allowed in numbers (write phone numbers as strings)"),
            ("[-]", 1, 3, "expected a digit after '-'"),
            ("[1.]", 1, 4, "expected a digit after the decimal point"),
            ("[1e]", 1, 4, "expected a digit in the exponent"),
            ("[.5]", 1, 2, "unexpected '.', expected a value"),
            ("[+8613800138000]", 1, 2, "numbers cannot start with '+'; write the value as a string, e.g. \"+8613800138000\""),
            ("['a']", 1, 2, "strings must be in double quotes, not single quotes"),
            (#"["a\x"]"#, 1, 4, #"invalid escape sequence '\x' in string (valid: \" \\ \/ \b \f \n \r \t \uXXXX)"#),
            (#"["\u12G4"]"#, 1, 3, #"invalid \u escape: expected 4 hex digits"#),
            (#"["\u12"#, 1, 7, #"unexpected end of input: incomplete \u escape: expected 4 hex digits"#),
            (#"["\uD83D"]"#, 1, 3, #"lone high surrogate \uD83D (must be followed by a low surrogate \uDC00-\uDFFF)"#),
            (#"["\uD83D\u0041"]"#, 1, 3, #"lone high surrogate \uD83D (must be followed by a low surrogate \uDC00-\uDFFF)"#),
            (#"["\uDE00"]"#, 1, 3, #"lone low surrogate \uDE00 (not preceded by a high surrogate)"#),
            (#"["abc"#, 1, 6, "unterminated string (opened at column 2)"),
            ("[\"abc\n\"]", 1, 2, "unterminated string (a line break cannot appear inside a string; write it as \\n)"),
            ("[\"a\tb\"]", 1, 4, "control character U+0009 must be escaped in a string"),
            ("[1] x", 1, 5, "unexpected 'x' after the JSON value"),
            ("{}{}", 1, 3, "unexpected '{' after the JSON value"),
            ("{\n  \"a\": [1,\n    2,,\n  ]\n}", 3, 7, "unexpected ',', expected a value"),
            ("[\r\n1,\r\n]", 3, 1, "trailing comma before ']'"),
            ("[\r1,\r]", 3, 1, "trailing comma before ']'"),
            ("[\"a\u{FFFD}\"]", 1, 4, "invalid UTF-8 (byte 0xFF); the file must be saved as UTF-8 (a Windows program may have written its code page: iconv -f WINDOWS-1252 -t UTF-8 converts it)"),
            ("[\u{FFFD}]", 1, 2, "unexpected byte 0xFF, expected a value"),
            ("[é]", 1, 2, "unexpected 'é' (U+00E9), expected a value"),
            ("[\"张三\" 1]", 1, 7, "expected ',' or ']' after array element"),
            ("{1:2}", 1, 2, "expected a double-quoted string as object key"),
        ]
        for (text, line, column, message) in cases {
            let error = captureError { _ = try JSONValue.parse(bytes(text)) }
            XCTAssertEqual(error, TextFormatError(line: line, column: column, message: message), text.debugDescription)
        }
    }

    func testDepthLimit() throws {
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        XCTAssertNoThrow(try JSONValue.parse(ok))
        let tooDeep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        XCTAssertEqual(captureError { _ = try JSONValue.parse(tooDeep) },
                       TextFormatError(line: 1, column: 65, message: "nesting deeper than 64 levels"))
        XCTAssertNoThrow(try JSONValue.parse("[{\"a\":1}]", maxDepth: 2))
        XCTAssertEqual(captureError { _ = try JSONValue.parse("[[[1]]]", maxDepth: 2) },
                       TextFormatError(line: 1, column: 3, message: "nesting deeper than 2 levels"))
        // Hostile nesting is an error, not a stack overflow.
        let hostile = [UInt8](repeating: UInt8(ascii: "["), count: 1_000_000)
        XCTAssertEqual(captureError { _ = try JSONValue.parse(hostile) }?.message, "nesting deeper than 64 levels")
        XCTAssertEqual(captureError { try JSONValue.forEachElement(ofTopLevelArrayIn: Array(tooDeep.utf8)) { _, _ in } }?.column, 65)
    }

    func testStreamingArrayElementLines() throws {
        let text = """
        [
          {"number": "+8613800138000", "action": "block"},
          {"number": 8613900139000},

          {
            "number": "+8610"
          }, "x", [1,
                   2]
        ]
        """
        var seen: [(Int, JSONValue)] = []
        try JSONValue.forEachElement(ofTopLevelArrayIn: bytes(text)) { line, element in seen.append((line, element)) }
        XCTAssertEqual(seen.map(\.0), [2, 3, 5, 7, 7])
        XCTAssertEqual(seen[1].1["number"]?.numberLexeme, "8613900139000")
        XCTAssertEqual(seen[2].1["number"]?.stringValue, "+8610")
        XCTAssertEqual(seen[4].1, .array([.number("1"), .number("2")]))

        var count = 0
        try JSONValue.forEachElement(ofTopLevelArrayIn: bytes("\u{FEFF} [ ] ")) { _, _ in count += 1 }
        XCTAssertEqual(count, 0)
    }

    func testStreamingArrayErrors() {
        let cases: [(String, Int, TextFormatError)] = [
            ("{\"a\": 1}", 0, TextFormatError(line: 1, column: 1, message: "expected a top-level JSON array ('['), found '{'")),
            ("", 0, TextFormatError(line: 1, column: 1, message: "empty input, expected a JSON array")),
            ("[1,\n2,\n]", 2, TextFormatError(line: 3, column: 1, message: "trailing comma before ']'")),
            ("[1,\n2\n3]", 2, TextFormatError(line: 3, column: 1, message: "expected ',' or ']' after array element")),
            ("[1,\n2", 2, TextFormatError(line: 2, column: 2, message: "unexpected end of input: expected ',' or ']' after array element")),
            ("[1]\n[2]", 1, TextFormatError(line: 2, column: 1, message: "unexpected '[' after the top-level array")),
        ]
        for (text, delivered, expected) in cases {
            var count = 0
            let error = captureError {
                try JSONValue.forEachElement(ofTopLevelArrayIn: bytes(text)) { _, _ in count += 1 }
            }
            XCTAssertEqual(error, expected, text.debugDescription)
            XCTAssertEqual(count, delivered, text.debugDescription)
        }
    }

    func testJSONLines() throws {
        let text = "{\"n\": 1}\n\n{\"n\": 2}\r\n  {\"n\":\n3}\n\"str\"\n"
        var seen: [(Int, JSONValue)] = []
        try JSONValue.forEachValue(inJSONLines: bytes(text)) { line, value in seen.append((line, value)) }
        XCTAssertEqual(seen.map(\.0), [1, 3, 4, 6])
        XCTAssertEqual(seen.map(\.1), [.object([(key: "n", value: .number("1"))]), .object([(key: "n", value: .number("2"))]),
                                      .object([(key: "n", value: .number("3"))]), .string("str")])

        let truncated = "{\"a\": 1}\n{\"b\":\n{\"c\": 3}\n"
        var count = 0
        let error = captureError { try JSONValue.forEachValue(inJSONLines: bytes(truncated)) { _, _ in count += 1 } }
        XCTAssertEqual(count, 1)
        XCTAssertEqual(error, TextFormatError(
            line: 4, column: 1,
            message: "unexpected end of input: expected ',' or '}' after object member (in the value starting on line 2)"))
        XCTAssertEqual(captureError { try JSONValue.forEachValue(inJSONLines: bytes("{}\n{\"a\" 1}\n")) { _, _ in } },
                       TextFormatError(line: 2, column: 6, message: "expected ':' after object key"))
    }

    func testLayoutDetectionAndDispatch() throws {
        let layouts: [(String, JSONLayout?)] = [
            ("[1]", .array),
            ("\u{FEFF}  \r\n[", .array),
            ("{\"a\":1}\n{\"a\":2}", .jsonLines),
            ("\n {\n \"a\": 1\n}", .jsonLines),
            ("", nil),
            (" \n\t", nil),
        ]
        for (text, expected) in layouts {
            XCTAssertEqual(JSONValue.detectLayout(bytes(text)), expected, text.debugDescription)
        }
        var lines: [Int] = []
        try JSONValue.forEachRecord(in: bytes("[\n1,\n2]")) { line, _ in lines.append(line) }
        try JSONValue.forEachRecord(in: bytes("{}\n{}")) { line, _ in lines.append(line) }
        try JSONValue.forEachRecord(in: bytes("{\n  \"single\": true\n}\n")) { line, _ in lines.append(line) }
        try JSONValue.forEachRecord(in: bytes("  ")) { line, _ in lines.append(line) }
        XCTAssertEqual(lines, [2, 3, 1, 2, 1])
    }
}
