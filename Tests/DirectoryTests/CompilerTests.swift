import XCTest
@testable import Directory
import TextRules

/// `DirectoryCompiler`: what each source format yields, and every kind of
/// diagnostic with its exact `file:line`.
final class CompilerTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder("lookupd-compiler") }
    override func tearDown() { folder.cleanup() }

    // MARK: - What sources yield

    func testCSVActionsLabelsAndComments() throws {
        let csv = """
        # a comment line
        number,action,label
        +8613800138000,block,Fraud Risk
        013800138001,identify,  Pizza Palace
        13800138002,BLOCK,
        +86 138 0013 8003,Identify,"Quoted, with comma"
        +8613800138004,b,Spam
        +8613800138005,deny,
        +8613800138006,reject,
        +8613800138007,i,Shop
        +8613800138008,label,Shop
        +8613800138009,id,Shop

        +86170*,block,Virtual Operator Range
        """
        let c = try content([Source("dir.csv", .csv, csv)])
        let directory = try writeAndOpen(c, in: folder)
        XCTAssertEqual(entries(of: directory).map(\.description), [
            "+8613800138000 block Fraud Risk",
            "+8613800138001 identify Pizza Palace",
            "+8613800138002 block -",
            "+8613800138003 identify Quoted, with comma",
            "+8613800138004 block Spam",
            "+8613800138005 block -",
            "+8613800138006 block -",
            "+8613800138007 identify Shop",
            "+8613800138008 identify Shop",
            "+8613800138009 identify Shop",
            "+86170* block Virtual Operator Range",
        ])
        // Labels are deduplicated and sorted bytewise.
        XCTAssertEqual(c.labels.map { String(decoding: $0, as: UTF8.self) },
                       ["Fraud Risk", "Pizza Palace", "Quoted, with comma", "Shop", "Spam", "Virtual Operator Range"])
    }

    func testCSVWithoutActionColumnAndOtherDelimiters() throws {
        let semicolon = "phone;name\n+8613800138000;Bank\n+8613800138001;\n"
        let tab = "number\tlabel\n+8613800138002\tCourier\n"
        let c = try content([Source("a.csv", .csv, semicolon), Source("b.tsv", .csv, tab)])
        let directory = try writeAndOpen(c, in: folder)
        XCTAssertEqual(entries(of: directory).map(\.description), [
            "+8613800138000 identify Bank",
            "+8613800138001 block -",
            "+8613800138002 identify Courier",
        ])
    }

    func testSingleColumnCSV() throws {
        let c = try content([Source("block.csv", .csv, "number\n+8613800138000\n013800138001\n")])
        XCTAssertEqual(c.exactKeys, [8613800138000, 8613800138001])
        XCTAssertEqual(c.exactValues, [1, 1])
    }

    func testTextList() throws {
        let text = """
        # blocked numbers
        +8613800138000
        013800138001   # a trailing comment

        0170*
        """
        let c = try content([Source("list.txt", .text, text)])
        XCTAssertEqual(c.exactKeys, [8613800138000, 8613800138001])
        XCTAssertEqual(c.exactValues, [1, 1])
        XCTAssertEqual(c.prefixKeys, [DirectoryFormat.prefixKey(prefix("+86170*"))])
        XCTAssertEqual(c.prefixValues, [1])
        XCTAssertTrue(c.labels.isEmpty)
    }

    func testJSONArrayIOSStyleAndJSONLines() throws {
        let array = """
        [
          {"number": "+8613800138000", "action": "block", "label": "Fraud"},
          {"phoneNum": "013800138001", "typeName": "Delivery"},
          {"number": 8613800138002, "action": "identify", "label": "Bank"},
          {"phone": "+8613800138003", "label": null}
        ]
        """
        let lines = """
        {"number": "+8613800138004", "action": "identify", "label": "Taxi"}
        {"number": "+86171*", "action": "block"}
        """
        let c = try content([Source("a.json", .json, array), Source("b.jsonl", .json, lines)])
        let directory = try writeAndOpen(c, in: folder)
        XCTAssertEqual(entries(of: directory).map(\.description), [
            "+8613800138000 block Fraud",
            "+8613800138001 identify Delivery",
            "+8613800138002 identify Bank",
            "+8613800138003 block -",
            "+8613800138004 identify Taxi",
            "+86171* block -",
        ])
    }

    func testVCardEveryTelephoneGetsTheCardName() throws {
        let vcf = """
        BEGIN:VCARD
        VERSION:3.0
        FN:Zhang Wei
        TEL;TYPE=CELL:+86 138 0013 8000
        TEL;TYPE=WORK:010-5900-0001
        END:VCARD
        BEGIN:VCARD
        VERSION:4.0
        FN:Acme
        TEL;VALUE=uri:tel:+1-212-555-0100
        END:VCARD

        """
        let c = try content([Source("cards.vcf", .vcard, vcf)])
        let directory = try writeAndOpen(c, in: folder)
        XCTAssertEqual(entries(of: directory).map(\.description), [
            "+12125550100 identify Acme",
            "+861059000001 identify Zhang Wei",
            "+8613800138000 identify Zhang Wei",
        ])
    }

    func testFormatGuessedFromTheFileName() {
        XCTAssertEqual(SourceFormat.guess(path: "a/b.CSV"), .csv)
        XCTAssertEqual(SourceFormat.guess(path: "b.tsv"), .csv)
        XCTAssertEqual(SourceFormat.guess(path: "b.jsonl"), .json)
        XCTAssertEqual(SourceFormat.guess(path: "b.ndjson"), .json)
        XCTAssertEqual(SourceFormat.guess(path: "b.txt"), .text)
        XCTAssertEqual(SourceFormat.guess(path: "b.vcf"), .vcard)
        XCTAssertNil(SourceFormat.guess(path: "numbers.dat"))
        XCTAssertNil(SourceFormat.guess(path: "folder.csv/numbers"))
        XCTAssertNil(SourceFormat.guess(path: "numbers"))
    }

    func testDirectoryVersionIsStored() throws {
        var options = DirectoryCompiler.Options()
        options.directoryVersion = 20240601
        let c = try content([Source("a.txt", .text, "+8613800138000\n")], options: options)
        let directory = try writeAndOpen(c, in: folder)
        XCTAssertEqual(directory.header.directoryVersion, 20240601)
    }

    // MARK: - Diagnostics

    func testInvalidNumbers() {
        let csv = """
        number,action,label
        +8613800138000,block,Spam
        abc,block,Spam
        101,block,Spam
        +8613800138000123,block,Spam
        anonymous,block,Spam
        ,block,Spam
        """
        XCTAssertEqual(diagnostics([Source("dir.csv", .csv, csv)]), [
            "dir.csv:3: invalid number 'abc': contains letters",
            "dir.csv:4: invalid number '101': 3 digits is too short for a number of CN (+86), which has 7 to 12 digits after the country code (an internal extension or service code?)",
            "dir.csv:5: invalid number '+8613800138000123': 16 digits is too long for an E.164 number (at most 15 with the country code)",
            "dir.csv:6: invalid number 'anonymous': a withheld identity, not a number",
            "dir.csv:7: empty number field",
        ])
    }

    func testLabelTooLong() {
        let ok = String(repeating: "a", count: 255)
        let long = String(repeating: "a", count: 256)
        // 86 three-byte characters: 258 bytes although only 86 characters.
        let wide = String(repeating: "电", count: 86)
        let csv = "number,action,label\n+8613800138000,identify,\(ok)\n+8613800138001,identify,\(long)\n+8613800138002,identify,\(wide)\n"
        XCTAssertEqual(diagnostics([Source("dir.csv", .csv, csv)]), [
            "dir.csv:3: bad label: label is 256 bytes, longer than 255",
            "dir.csv:4: bad label: label is 258 bytes, longer than 255",
        ])
    }

    func testLabelWithControlCharacters() {
        let csv = "number,action,label\n"
            + "+8613800138000,identify,\"line\r\nbreak\"\n"      // 2-3 (CR LF inside quotes)
            + "+8613800138001,identify,tab\there\n"              // 4
            + "+8613800138002,identify,nul\u{0}here\n"           // 5
            + "+8613800138003,identify,c1\u{85}here\n"           // 6
            + "+8613800138004,identify,del\u{7F}here\n"          // 7
            + "+8613800138005,identify,sep\u{2028}here\n"        // 8
            + "+8613800138006,identify,\"lf\nonly\"\n"           // 9-10
            + "+8613800138007,identify,fine label\n"             // 11
        XCTAssertEqual(diagnostics([Source("dir.csv", .csv, csv)]), [
            "dir.csv:2: bad label: label contains the control character U+000D",
            "dir.csv:4: bad label: label contains the control character U+0009",
            "dir.csv:5: bad label: label contains the control character U+0000",
            "dir.csv:6: bad label: label contains the control character U+0085",
            "dir.csv:7: bad label: label contains the control character U+007F",
            "dir.csv:8: bad label: label contains the line separator U+2028",
            "dir.csv:9: bad label: label contains the control character U+000A",
        ])
    }

    func testLabelWithInvalidUTF8() {
        var bytes = Array("number,action,label\n+8613800138000,identify,ok\n+8613800138001,identify,bad".utf8)
        bytes += [0xFF, 0xFE]
        bytes += Array("label\n".utf8)
        let found = diagnostics([Source("dir.csv", .csv, bytes: bytes)])
        XCTAssertEqual(found.count, 1)
        XCTAssertTrue(found.first?.hasPrefix("dir.csv:3: ") ?? false, "\(found)")
        XCTAssertTrue(found.first?.contains("UTF-8") ?? false, "\(found)")
    }

    func testInvalidUTF8LabelInJSON() {
        var bytes = Array("[\n{\"number\": \"+8613800138000\", \"label\": \"ok\"},\n{\"number\": \"+8613800138001\", \"label\": \"bad".utf8)
        bytes += [0xC3, 0x28]
        bytes += Array("\"}\n]\n".utf8)
        let found = diagnostics([Source("dir.json", .json, bytes: bytes)])
        XCTAssertEqual(found.count, 1)
        XCTAssertTrue(found.first?.hasPrefix("dir.json:3: ") ?? false, "\(found)")
    }

    func testLabelRulesDirectly() {
        XCTAssertNil(LabelRules.problem("Fraud Risk"))
        XCTAssertNil(LabelRules.problem("北京市医院 🏥"))
        XCTAssertNil(LabelRules.problem(String(repeating: "x", count: 255)))
        XCTAssertEqual(LabelRules.problem(""), "empty label")
        XCTAssertEqual(LabelRules.problem(String(repeating: "x", count: 256)), "label is 256 bytes, longer than 255")
        XCTAssertEqual(LabelRules.problem("a\u{2029}b"), "label contains the line separator U+2029")
        XCTAssertEqual(LabelRules.problem("a\u{9F}b"), "label contains the control character U+009F")
        XCTAssertNil(LabelRules.problem("a\u{A0}b"), "no-break space is printable")
        let bad: [UInt8] = [0x61, 0xED, 0xA0, 0x80] // UTF-8-encoded surrogate
        XCTAssertEqual(bad.withUnsafeBytes { LabelRules.problem($0) }, "label is not valid UTF-8")
    }

    func testUnknownActionAndIdentifyWithoutLabel() {
        let csv = """
        number,action,label
        +8613800138000,frobnicate,X
        +8613800138001,identify,
        +8613800138002,identify,"   "
        +8613800138003,block,
        """
        XCTAssertEqual(diagnostics([Source("dir.csv", .csv, csv)]), [
            "dir.csv:2: unknown action 'frobnicate' (expected block, identify or allow)",
            "dir.csv:3: 'identify' needs a label",
            "dir.csv:4: 'identify' needs a label",
        ])
    }

    func testHeaderProblems() {
        XCTAssertEqual(diagnostics([Source("a.csv", .csv, "+8613800138000,block,Spam\n+8613800138001,block,Spam\n")]),
                       ["a.csv:1: missing header line (expected for example: number,action,label; or pass --no-header)"])
        XCTAssertEqual(diagnostics([Source("b.csv", .csv, "# comment\n\nnumber,action,colour\n+8613800138000,block,red\n")]),
                       ["b.csv:3: unknown column 'colour' in the header (expected number, action, label; or name the columns with --number-column, --label-column, --action-column)"])
        XCTAssertEqual(diagnostics([Source("c.csv", .csv, "action,label\nblock,Spam\n")]),
                       ["c.csv:1: the header has no 'number' column (name it with --number-column)"])
        // An empty source is a list with nothing on it: a warning, not a refusal.
        for (format, text) in [(SourceFormat.csv, ""), (.text, "\n  \n"), (.json, "")] {
            let compiler = DirectoryCompiler()
            compiler.add(bytes: Array(text.utf8), name: "d", format: format)
            guard case .success(let content) = compiler.finish() else { return XCTFail("an empty \(format) source is refused") }
            XCTAssertEqual(content.exactKeys.count + content.prefixKeys.count, 0)
            XCTAssertEqual(compiler.warnings.map(\.description), ["d: empty file: no entries"])
        }
        XCTAssertEqual(diagnostics([Source("d.csv", .csv, "# only a comment\n")]),
                       ["d.csv:1: empty file (expected a header line such as number,action,label)"])
        XCTAssertEqual(diagnostics([Source("e.csv", .csv, "label,action,number\nSpam,block\n")]),
                       ["e.csv:2: missing number field"])
    }

    func testWrongFieldCount() {
        let csv = """
        number,action,label
        +8613800138000,block,Spam, Inc.
        +8613800138001,block,Spam
        +8613800138002,block
        +8613800138003
        """
        // Fewer fields than the header names is fine (no action / no label);
        // more means an unquoted delimiter inside a field.
        XCTAssertEqual(diagnostics([Source("dir.csv", .csv, csv)]), [
            "dir.csv:2: 4 fields, the header names 3 (a label with an unquoted ','?)",
        ])
    }

    func testCSVUnterminatedQuote() {
        let csv = "number,action,label\n+8613800138000,block,Spam\n+8613800138001,identify,\"Pizza\n+8613800138002,block,Spam\n"
        let found = diagnostics([Source("dir.csv", .csv, csv)])
        XCTAssertEqual(found.count, 1, "\(found)")
        // The reader reaches the end of the file inside the quotes: it names
        // the last line and the line where the quote was opened.
        XCTAssertTrue(found.first?.hasPrefix("dir.csv:4: ") ?? false, "\(found)")
        XCTAssertTrue(found.first?.contains("unterminated") ?? false, "\(found)")
        XCTAssertTrue(found.first?.contains("line 3") ?? false, "\(found)")
    }

    func testCSVStrayQuote() {
        let csv = "number,action,label\n+8613800138000,identify,\"Pizza\" Palace\n"
        let found = diagnostics([Source("dir.csv", .csv, csv)])
        XCTAssertEqual(found.count, 1, "\(found)")
        XCTAssertTrue(found.first?.hasPrefix("dir.csv:2: ") ?? false, "\(found)")
    }

    func testJSONSyntaxErrorNamesTheLine() {
        let json = """
        [
          {"number": "+8613800138000", "action": "block"},
          {"number": "+8613800138001" "action": "block"},
          {"number": "+8613800138002", "action": "block"}
        ]
        """
        let found = diagnostics([Source("dir.json", .json, json)])
        XCTAssertEqual(found.count, 1, "\(found)")
        XCTAssertTrue(found.first?.hasPrefix("dir.json:3: ") ?? false, "\(found)")

        let truncated = "[\n{\"number\": \"+8613800138000\"},\n{\"number\": \"+86138"
        let found2 = diagnostics([Source("t.json", .json, truncated)])
        XCTAssertEqual(found2.count, 1, "\(found2)")
        XCTAssertTrue(found2.first?.hasPrefix("t.json:3: ") ?? false, "\(found2)")
    }

    func testJSONFieldProblems() {
        let json = """
        [
          {"number": "+8613800138000", "colour": "red"},
          {"action": "block", "label": "Spam"},
          "+8613800138002",
          {"number": true},
          {"number": "+8613800138004", "action": "frobnicate"},
          {"number": "+8613800138005", "action": 1},
          {"number": "+8613800138006", "label": 7},
          {"number": "+8613800138007", "action": "identify"},
          {"number": "abc"}
        ]
        """
        XCTAssertEqual(diagnostics([Source("dir.json", .json, json)]), [
            "dir.json:2: unknown field 'colour' (expected number, action, label; or phoneNum, typeName)",
            "dir.json:3: object has no 'number' (or 'phoneNum')",
            "dir.json:4: expected an object with number, action and label",
            "dir.json:5: 'number' must be a string",
            "dir.json:6: unknown action 'frobnicate' (expected block, identify or allow)",
            "dir.json:7: 'action' must be a string",
            "dir.json:8: 'label' must be a string",
            "dir.json:9: 'identify' needs a label",
            "dir.json:10: invalid number 'abc': contains letters",
        ])
    }

    func testVCardProblems() {
        let vcf = """
        BEGIN:VCARD
        VERSION:3.0
        TEL:+8613800138000
        END:VCARD
        BEGIN:VCARD
        VERSION:3.0
        FN:Shop
        TEL:+8613800138001
        TEL:*86
        TEL:abc
        END:VCARD
        """
        XCTAssertEqual(diagnostics([Source("cards.vcf", .vcard, vcf)]), [
            "cards.vcf:1: card has no name (FN or N) to label its numbers with",
            "cards.vcf:9: invalid number '*86': contains '*'",
            "cards.vcf:10: invalid number 'abc': contains letters",
        ])
    }

    func testVCardSyntaxError() {
        let vcf = "BEGIN:VCARD\nVERSION:3.0\nFN:Shop\nTEL:+8613800138001\n"
        let found = diagnostics([Source("cards.vcf", .vcard, vcf)])
        XCTAssertEqual(found.count, 1, "\(found)")
        XCTAssertTrue(found.first?.hasPrefix("cards.vcf:1: ") ?? false, "\(found)")
    }

    func testTextListProblems() {
        let text = "+8613800138000\nabc\n\n1001  # extension\n+86170*\n+86*1*\n"
        XCTAssertEqual(diagnostics([Source("list.txt", .text, text)]), [
            "list.txt:2: invalid number 'abc': contains letters",
            "list.txt:4: invalid number '1001': 4 digits is too short for a number of CN (+86), which has 7 to 12 digits after the country code (an internal extension or service code?)",
            "list.txt:6: invalid number '+86*1*': contains '*'",
        ])
    }

    func testEveryBadLineIsReportedAcrossFiles() {
        let a = "number,action,label\nabc,block,\n+8613800138000,block,\n"
        let b = "+8613800138001\nxyz\n"
        XCTAssertEqual(diagnostics([Source("b.txt", .text, b), Source("a.csv", .csv, a)]), [
            "a.csv:2: invalid number 'abc': contains letters",
            "b.txt:2: invalid number 'xyz': contains letters",
        ])
    }

    func testDiagnosticLimitKeepsCounting() {
        var options = DirectoryCompiler.Options()
        options.maxDiagnostics = 3
        let text = (0..<10).map { _ in "abc" }.joined(separator: "\n")
        guard case .failure(let failure) = compile([Source("list.txt", .text, text)], options: options) else {
            return XCTFail("expected failure")
        }
        XCTAssertEqual(failure.total, 10)
        XCTAssertEqual(failure.diagnostics.map(\.line), [1, 2, 3])
    }

    func testMessagesKeepControlCharactersPrintable() {
        let csv = "number,action,label\n\"\u{1B}[31m138\",block,\n"
        XCTAssertEqual(diagnostics([Source("dir.csv", .csv, csv)]),
                       ["dir.csv:2: invalid number '\\u{1b}[31m138': contains the control character U+1B"])
    }

    // MARK: - Duplicates

    func testConflictingDuplicatesNameBothLines() {
        let a = "number,action,label\n+8613800138000,block,Spam\n+8613800138001,identify,Bank\n"
        let b = "number,action,label\n+8613800138009,block,\n013800138000,identify,Shop\n"
        XCTAssertEqual(diagnostics([Source("a.csv", .csv, a), Source("b.csv", .csv, b)]), [
            "b.csv:3: +8613800138000 conflicts with a.csv:2 (label 'Shop' here, block with label 'Spam' there); use --on-duplicate first|last to choose",
        ])
    }

    func testConflictingDuplicatesWithinOneFile() {
        let text = "number,action,label\n+86170*,block,\n+8613800138000,block,\n0170*,identify,Virtual\n"
        XCTAssertEqual(diagnostics([Source("dir.csv", .csv, text)]), [
            "dir.csv:4: +86170* conflicts with dir.csv:2 (label 'Virtual' here, block there); use --on-duplicate first|last to choose",
        ])
    }

    func testIdenticalDuplicatesAreMerged() throws {
        let a = "number,action,label\n+8613800138000,block,Spam\n13800138000,block,Spam \n"
        let b = "+8613800138000\n"
        var c = try content([Source("a.csv", .csv, a), Source("b.csv", .csv, a)])
        XCTAssertEqual(c.exactKeys, [8613800138000])
        XCTAssertEqual(c.exactValues, [DirectoryFormat.encodeValue(blocked: true, label: 0)])
        c = try content([Source("b.txt", .text, b), Source("c.txt", .text, b + b)])
        XCTAssertEqual(c.exactKeys, [8613800138000])
    }

    func testDuplicatePolicies() throws {
        let a = "number,action,label\n+8613800138000,block,First\n+8613800138001,identify,Keep\n"
        let b = "number,action,label\n+8613800138000,identify,Second\n+8613800138000,identify,Third\n"
        let sources = [Source("a.csv", .csv, a), Source("b.csv", .csv, b)]

        var options = DirectoryCompiler.Options()
        options.onDuplicate = .first
        var directory = try writeAndOpen(try content(sources, options: options), in: folder, name: "first.lkd")
        XCTAssertEqual(entries(of: directory).map(\.description), ["+8613800138000 block First", "+8613800138001 identify Keep"])
        // Labels only used by discarded lines are not stored.
        XCTAssertEqual(directory.labelTableCount, 2)

        options.onDuplicate = .last
        directory = try writeAndOpen(try content(sources, options: options), in: folder, name: "last.lkd")
        XCTAssertEqual(entries(of: directory).map(\.description), ["+8613800138000 identify Third", "+8613800138001 identify Keep"])
        XCTAssertEqual(directory.labelTableCount, 2)

        // Files are read in the order given: reversing them reverses the choice.
        options.onDuplicate = .first
        directory = try writeAndOpen(try content(sources.reversed(), options: options), in: folder, name: "first2.lkd")
        XCTAssertEqual(entries(of: directory).map(\.description), ["+8613800138000 identify Second", "+8613800138001 identify Keep"])
    }

    // MARK: - Files

    func testFileWithNoGuessableFormat() throws {
        let path = folder.write("numbers.dat", "+8613800138000\n")
        let compiler = DirectoryCompiler()
        try compiler.add(path: path)
        guard case .failure(let failure) = compiler.finish() else { return XCTFail("expected failure") }
        XCTAssertEqual(failure.diagnostics.map(\.description),
                       ["\(path): cannot tell the format from the file name; name it .csv, .json, .txt or .vcf, or pass --format"])

        // --format makes it readable.
        var options = DirectoryCompiler.Options()
        options.format = .text
        let forced = DirectoryCompiler(options: options)
        try forced.add(path: path)
        guard case .success(let c) = forced.finish() else { return XCTFail("expected success") }
        XCTAssertEqual(c.exactKeys, [8613800138000])
    }

    func testMissingSourceFileThrows() {
        let path = folder.file("absent.csv")
        XCTAssertThrowsError(try DirectoryCompiler().add(path: path)) { error in
            XCTAssertEqual("\(error)", "\(path): cannot open: No such file or directory")
        }
        XCTAssertThrowsError(try DirectoryCompiler().add(path: folder.path)) { error in
            XCTAssertTrue("\(error)".contains("Is a directory"), "\(error)")
        }
    }

    func testCompilingFromDiskWithBOMAndCRLF() throws {
        let path = folder.write("dir.csv", [0xEF, 0xBB, 0xBF] + Array("number,action,label\r\n+8613800138000,identify,Bank\r\nabc,block,\r\n".utf8))
        let compiler = DirectoryCompiler()
        try compiler.add(path: path)
        guard case .failure(let failure) = compiler.finish() else { return XCTFail("expected failure") }
        XCTAssertEqual(failure.diagnostics.map(\.description), ["\(path):3: invalid number 'abc': contains letters"])
        XCTAssertEqual(compiler.linesRead, 2)
    }
}
