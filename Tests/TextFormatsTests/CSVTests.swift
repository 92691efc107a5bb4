import XCTest
import TextFormats

final class CSVTests: XCTestCase {
    struct Row: Equatable, CustomStringConvertible {
        var line: Int
        var fields: [String]
        var description: String { "\(line):\(fields)" }
    }

    func read(_ input: [UInt8], _ delimiter: CSVDelimiter = .comma, comments: Bool = true) throws -> [Row] {
        var reader = CSVReader(bytes: input, delimiter: delimiter)
        reader.allowsComments = comments
        return try reader.records().map { Row(line: $0.line, fields: $0.fields) }
    }

    func testParsingTable() throws {
        let cases: [(name: String, input: String, delimiter: CSVDelimiter, expected: [Row])] = [
            ("simple LF", "a,b,c\nd,e,f\n", .comma, [Row(line: 1, fields: ["a", "b", "c"]), Row(line: 2, fields: ["d", "e", "f"])]),
            ("no final newline", "a,b\nc,d", .comma, [Row(line: 1, fields: ["a", "b"]), Row(line: 2, fields: ["c", "d"])]),
            ("CRLF", "a,b\r\nc,d\r\n", .comma, [Row(line: 1, fields: ["a", "b"]), Row(line: 2, fields: ["c", "d"])]),
            ("lone CR", "a,b\rc,d\r", .comma, [Row(line: 1, fields: ["a", "b"]), Row(line: 2, fields: ["c", "d"])]),
            ("mixed line ends", "a\r\nb\rc\nd", .comma,
             [Row(line: 1, fields: ["a"]), Row(line: 2, fields: ["b"]), Row(line: 3, fields: ["c"]), Row(line: 4, fields: ["d"])]),
            ("BOM", "\u{FEFF}number,label\n", .comma, [Row(line: 1, fields: ["number", "label"])]),
            ("trim unquoted", "  a , b\t,c  \n", .comma, [Row(line: 1, fields: ["a", "b", "c"])]),
            ("inner spaces kept", "Some Label , x y\n", .comma, [Row(line: 1, fields: ["Some Label", "x y"])]),
            ("quoted keeps spaces", "\" a \",b\n", .comma, [Row(line: 1, fields: [" a ", "b"])]),
            ("spaces around quotes", "a,  \"b\"  ,c\n", .comma, [Row(line: 1, fields: ["a", "b", "c"])]),
            ("doubled quotes", "\"he said \"\"hi\"\"\",x\n", .comma, [Row(line: 1, fields: ["he said \"hi\"", "x"])]),
            ("only a quote", "\"\"\"\"\n", .comma, [Row(line: 1, fields: ["\""])]),
            ("empty quoted", "\"\",x\n", .comma, [Row(line: 1, fields: ["", "x"])]),
            ("delimiter in quotes", "\"a,b\",c\n", .comma, [Row(line: 1, fields: ["a,b", "c"])]),
            ("empty fields", "a,,c\n", .comma, [Row(line: 1, fields: ["a", "", "c"])]),
            ("trailing delimiter", "a,b,\n", .comma, [Row(line: 1, fields: ["a", "b", ""])]),
            ("only delimiters", ",,\n", .comma, [Row(line: 1, fields: ["", "", ""])]),
            ("blank and comment lines", "# header comment\n\n   \t\na,b\n  # indented comment\r\nc,d\n", .comma,
             [Row(line: 4, fields: ["a", "b"]), Row(line: 6, fields: ["c", "d"])]),
            ("hash later in record", "a,#b\n", .comma, [Row(line: 1, fields: ["a", "#b"])]),
            ("quoted hash is data", "\"#x\",y\n", .comma, [Row(line: 1, fields: ["#x", "y"])]),
            ("quote inside unquoted field", "5\" screen,x\n", .comma, [Row(line: 1, fields: ["5\" screen", "x"])]),
            ("multi-line quoted", "x,\"line1\nline2\",y\nnext,1,2\n", .comma,
             [Row(line: 1, fields: ["x", "line1\nline2", "y"]), Row(line: 3, fields: ["next", "1", "2"])]),
            ("multi-line CRLF kept raw", "\"a\r\nb\"\r\nc\r\n", .comma,
             [Row(line: 1, fields: ["a\r\nb"]), Row(line: 3, fields: ["c"])]),
            ("multi-line with escapes", "\"a\"\"\nb\"\"\",z\n\"q\"\n", .comma,
             [Row(line: 1, fields: ["a\"\nb\"", "z"]), Row(line: 3, fields: ["q"])]),
            ("escapes in two fields", "\"a\"\"b\",\"c\"\"d\",e\n", .comma, [Row(line: 1, fields: ["a\"b", "c\"d", "e"])]),
            ("UTF-8 label", "+8613800138000,block,张三 (推销)\n", .comma,
             [Row(line: 1, fields: ["+8613800138000", "block", "张三 (推销)"])]),
            ("semicolon", "a;b,c; d\n", .semicolon, [Row(line: 1, fields: ["a", "b,c", "d"])]),
            ("tab keeps empty fields", "a\t\tc\n", .tab, [Row(line: 1, fields: ["a", "", "c"])]),
            ("tab trims spaces only", " a \t b \n", .tab, [Row(line: 1, fields: ["a", "b"])]),
            ("pipe", "a|\"b|c\"\n", .pipe, [Row(line: 1, fields: ["a", "b|c"])]),
            ("empty input", "", .comma, []),
            ("only BOM", "\u{FEFF}", .comma, []),
            ("only comments", "#a\n#b", .comma, []),
        ]
        for c in cases {
            XCTAssertEqual(try read(bytes(c.input), c.delimiter), c.expected, c.name)
        }
    }

    func testCommentsCanBeDisabled() throws {
        XCTAssertEqual(try read(bytes("#x,y\n"), comments: false), [Row(line: 1, fields: ["#x", "y"])])
    }

    func testRecordLinesAndQuotedFlag() throws {
        let input = bytes("a,\"multi\nline\nfield\",\"\"\nb,c,d\n")
        var seen: [(Int, Int, [Bool])] = []
        try CSVReader(bytes: input).forEachRecord { record in
            seen.append((record.line, record.endLine, (0..<record.count).map { record.isQuoted($0) }))
        }
        XCTAssertEqual(seen.map(\.0), [1, 4])
        XCTAssertEqual(seen.map(\.1), [3, 4])
        XCTAssertEqual(seen.map(\.2), [[false, true, true], [false, false, false]])
    }

    func testFieldViewsAndGrowth() throws {
        // Over 16 fields and over 256 escaped bytes exercise the buffer growth.
        let many = (0..<40).map(String.init).joined(separator: ",")
        let longQuoted = String(repeating: "ab\"\"", count: 300)
        let input = bytes("\(many)\n\"\(longQuoted)\",\"x\"\"\",tail\n")
        var rows: [[String]] = []
        var rawFirst: [UInt8] = []
        try input.withUnsafeBytes { buffer in
            try CSVReader(bytes: buffer).forEachRecord { record in
                if rows.isEmpty { rawFirst = Array(record[0]) }
                rows.append(record.strings)
            }
        }
        XCTAssertEqual(rows.count, 2)
        XCTAssertEqual(rows[0], (0..<40).map(String.init))
        XCTAssertEqual(rows[1], [String(repeating: "ab\"", count: 300), "x\"", "tail"])
        XCTAssertEqual(rawFirst, Array("0".utf8))
    }

    func testExpectedFieldCount() throws {
        let ok = CSVReader(bytes: bytes("a,b,c\n# comment\nd,e,f\n"), expectedFieldCount: 3)
        XCTAssertEqual(try ok.records().count, 2)
        let semicolons = CSVReader(bytes: bytes("a;b\nc\n"), delimiter: .semicolon, expectedFieldCount: 2)
        XCTAssertEqual(captureError { _ = try semicolons.records() },
                       TextFormatError(line: 2, message: "expected 2 fields separated by ';', found 1"))
    }

    func testErrorTable() {
        let cases: [(name: String, input: String, count: Int?, expected: TextFormatError)] = [
            ("unterminated at end", "a,\"bc", nil,
             TextFormatError(line: 1, message: "unterminated quoted field (opened on line 1)")),
            ("unterminated reports last line", "x,y\nz,\"abc\nmore\nstuff\n", nil,
             TextFormatError(line: 4, message: "unterminated quoted field (opened on line 2)")),
            ("unterminated CRLF", "x\r\n\"abc\r\n", nil,
             TextFormatError(line: 2, message: "unterminated quoted field (opened on line 2)")),
            ("text after closing quote", "\"abc\"x,y\n", nil,
             TextFormatError(line: 1, column: 6,
                             message: "unexpected 'x' after closing quote of field 1 (a quote inside a quoted field must be doubled: \"\")")),
            ("text after closing quote, later line", "ok\na,\"b\nc\"d\n", nil,
             TextFormatError(line: 3, column: 3,
                             message: "unexpected 'd' after closing quote of field 2 (a quote inside a quoted field must be doubled: \"\")")),
            ("column counts characters", "\"张三\"x\n", nil,
             TextFormatError(line: 1, column: 5,
                             message: "unexpected 'x' after closing quote of field 1 (a quote inside a quoted field must be doubled: \"\")")),
            ("invalid UTF-8", "ok,1\nbad,\u{FFFD}\n", nil,
             TextFormatError(line: 2, column: 5, message: "invalid UTF-8 (byte 0xFF); the file must be saved as UTF-8 (a Windows program may have written its code page: iconv -f WINDOWS-1252 -t UTF-8 converts it)")),
            ("invalid UTF-8 in multi-line field", "a,\"line1\nli\u{FFFD}ne2\"\n", nil,
             TextFormatError(line: 2, column: 3, message: "invalid UTF-8 (byte 0xFF); the file must be saved as UTF-8 (a Windows program may have written its code page: iconv -f WINDOWS-1252 -t UTF-8 converts it)")),
            ("wrong field count", "a,b,c\nd,e\n", 3,
             TextFormatError(line: 2, message: "expected 3 fields separated by ',', found 2")),
            ("wrong field count, one", "a,b\n", 1,
             TextFormatError(line: 1, message: "expected 1 field separated by ',', found 2")),
        ]
        for c in cases {
            let reader = CSVReader(bytes: bytes(c.input), expectedFieldCount: c.count)
            let error = captureError { _ = try reader.records() }
            XCTAssertEqual(error, c.expected, c.name)
        }
    }

    func testCommentsAreNotValidated() throws {
        XCTAssertEqual(try read(bytes("# caf\u{FFFD}\na,b\n")), [Row(line: 2, fields: ["a", "b"])])
    }

    func testRecordsBeforeAnErrorAreDelivered() {
        var lines: [Int] = []
        let error = captureError {
            try CSVReader(bytes: bytes("a\nb\n\"c\n")).forEachRecord { lines.append($0.line) }
        }
        XCTAssertEqual(lines, [1, 2])
        XCTAssertEqual(error?.line, 3)
    }

    func testCallbackErrorsPropagateUnchanged() {
        struct Stop: Error, Equatable {}
        XCTAssertThrowsError(try CSVReader(bytes: bytes("a\nb\n")).forEachRecord { _ in throw Stop() }) {
            XCTAssertEqual($0 as? Stop, Stop())
        }
    }

    func testDelimiterDetection() {
        let cases: [(String, CSVDelimiter?)] = [
            ("number,action,label\n1,2,3", .comma),
            ("number;action;label\n1,2,3", .semicolon),
            ("number\taction\tlabel", .tab),
            ("number|action|label", .pipe),
            ("\"a,b,c\";d;e", .semicolon),
            ("number;label, with comma;x", .semicolon),
            ("\u{FEFF}# exported by PBX\n\n  \nnumber;label\n", .semicolon),
            ("number", nil),
            ("", nil),
            ("# only a comment", nil),
        ]
        for (input, expected) in cases {
            XCTAssertEqual(CSVDelimiter.detect(in: bytes(input)), expected, input)
        }
        let header = Array("a;b;c".utf8)
        header.withUnsafeBytes { XCTAssertEqual(CSVDelimiter.detect(headerLine: $0), .semicolon) }
    }

    func testManyLinesStream() throws {
        var input: [UInt8] = []
        for i in 0..<100_000 { input += Array("+86138\(i),block,Label \(i)\n".utf8) }
        var count = 0
        var lastLine = 0
        try CSVReader(bytes: input, expectedFieldCount: 3).forEachRecord { record in
            count += 1
            lastLine = record.line
            if record.line == 5000 { XCTAssertEqual(record.string(2), "Label 4999") }
        }
        XCTAssertEqual(count, 100_000)
        XCTAssertEqual(lastLine, 100_000)
    }
}
