import XCTest
@testable import TextFormats

/// Extensions, vanity numbers and the export shapes recognised by header.
final class PhoneTextTests: XCTestCase {
    func split(_ text: String) -> String {
        var text = text
        return text.withUTF8 { raw in
            let s = PhoneText.splitExtension(UnsafeRawBufferPointer(raw))
            let number = String(decoding: s.number, as: UTF8.self)
            return s.extensionDigits.map { "\(number) | \(String(decoding: $0, as: UTF8.self))" } ?? number
        }
    }

    func testExtensionsAreSplitOff() {
        XCTAssertEqual(split("+1 555 0100 x23"), "+1 555 0100 | 23")
        XCTAssertEqual(split("+1 555 0100x23"), "+1 555 0100 | 23")
        XCTAssertEqual(split("+1 (212) 555-0100 ext. 22"), "+1 (212) 555-0100 | 22")
        XCTAssertEqual(split("+1 212 555 0100 EXT 22"), "+1 212 555 0100 | 22")
        XCTAssertEqual(split("+1 212 555 0100 extension 7"), "+1 212 555 0100 | 7")
        XCTAssertEqual(split("+1-212-555-0100;ext=22"), "+1-212-555-0100 | 22")
        XCTAssertEqual(split("2125550100#22"), "2125550100 | 22")
        XCTAssertEqual(split("+12125550100,,22"), "+12125550100 | 22")
        XCTAssertEqual(split("+12125550100;22"), "+12125550100 | 22")
        XCTAssertEqual(split("+12125550100p22"), "+12125550100 | 22")
        // Nothing that only looks like one.
        XCTAssertEqual(split("+8613800138000"), "+8613800138000")
        XCTAssertEqual(split("1-800-FLOWERS"), "1-800-FLOWERS")
        XCTAssertEqual(split("*86#"), "*86#")
        XCTAssertEqual(split("+12125550100 x"), "+12125550100 x")
        XCTAssertEqual(split("+12125550100 x123456789"), "+12125550100 x123456789", "at most 8 digits")
        XCTAssertEqual(split("+86170*"), "+86170*")
    }

    func testBareExtensionsAndVanity() {
        func bare(_ t: String) -> Bool { var t = t; return t.withUTF8 { PhoneText.isBareExtension(UnsafeRawBufferPointer($0)) } }
        func vanity(_ t: String) -> Bool { var t = t; return t.withUTF8 { PhoneText.isVanity(UnsafeRawBufferPointer($0)) } }
        func digits(_ t: String) -> String { var t = t; return t.withUTF8 { String(decoding: PhoneText.vanityDigits(UnsafeRawBufferPointer($0)), as: UTF8.self) } }
        XCTAssertTrue(bare("x23"))
        XCTAssertTrue(bare("ext. 22"))
        XCTAssertFalse(bare("+1 555 0100 x23"))
        XCTAssertFalse(bare("611"))
        XCTAssertTrue(vanity("1-800-FLOWERS"))
        XCTAssertTrue(vanity("+1 (888) GO-FEDEX"))
        XCTAssertFalse(vanity("unknown"))
        XCTAssertFalse(vanity("1380013800x"), "one letter is a typo, not a word")
        XCTAssertFalse(vanity("sip:alice@example.com"))
        XCTAssertEqual(digits("1-800-FLOWERS"), "1-800-3569377")
        XCTAssertEqual(digits("+1 (888) go-fedex"), "+1 (888) 46-33339")
    }

    func testShapesAreRecognisedByTheirHeader() {
        XCTAssertEqual(CSVExportShape.recognize(["number", "description"])?.shape, .freePBXBlacklist)
        XCTAssertNil(CSVExportShape.recognize(["number", "action", "label"]))
        XCTAssertNil(CSVExportShape.recognize(["number", "description", "extra"]), "FreePBX writes exactly two columns")
        let ftc = CSVExportShape.recognize(["Company_Phone_Number", "Created_Date", "Violation_Date", "Consumer_City", "Consumer_State",
                                            "Consumer_Area_Code", "Subject", "Recorded_Message_Or_Robocall"])
        XCTAssertEqual(ftc?.shape, .ftcComplaints)
        XCTAssertEqual(ftc?.numberColumns, [0])
        XCTAssertEqual(ftc?.labelGroups, [[6]])
        let google = CSVExportShape.recognize(["First Name", "Middle Name", "Last Name", "Organization Name", "Phone 1 - Label", "Phone 1 - Value",
                                               "Phone 2 - Label", "Phone 2 - Value"])
        XCTAssertEqual(google?.shape, .googleContacts)
        XCTAssertEqual(google?.numberColumns, [5, 7])
        XCTAssertEqual(google?.labelGroups, [[0, 1, 2], [3]])
        XCTAssertEqual(CSVExportShape.recognize(["Name", "Given Name", "Family Name", "Phone 1 - Type", "Phone 1 - Value"])?.labelGroups,
                       [[0], [1, 2]])
        let outlook = CSVExportShape.recognize(["Title", "First Name", "Middle Name", "Last Name", "Company", "Business Phone", "Pager", "Mobile Phone"])
        XCTAssertEqual(outlook?.shape, .outlookContacts)
        XCTAssertEqual(outlook?.numberColumns, [5, 7], "no pager")
        XCTAssertEqual(outlook?.labelGroups, [[1, 2, 3], [4]])
        XCTAssertNil(CSVExportShape.recognize(["\u{FEFF}name", "number"]))
        XCTAssertEqual(CSVExportShape.recognize(["\u{FEFF}number", "description"])?.shape, .freePBXBlacklist, "a BOM a spreadsheet left")
    }

    func testColumnsAndMultiValueFields() throws {
        XCTAssertEqual(CSVColumn("3"), .index(3))
        XCTAssertEqual(CSVColumn(" Phone 1 - Value "), .name("Phone 1 - Value"))
        XCTAssertNil(CSVColumn("0"))
        XCTAssertNil(CSVColumn(""))
        let layout = try CSVLayout.named(CSVColumnMapping(number: .name("phone"), label: .index(1)), header: ["Name", "Phone"], line: 1)
        XCTAssertEqual(layout.numberColumns, [1])
        XCTAssertEqual(layout.labelGroups, [[0]])
        XCTAssertThrowsError(try CSVLayout.named(CSVColumnMapping(number: .name("tel")), header: ["Name", "Phone"], line: 1)) { error in
            XCTAssertEqual((error as? TextFormatError)?.message, "no column named 'tel' in the header (it has 'Name', 'Phone')")
        }
        let google = CSVExportShape.recognize(["Name", "Phone 1 - Value"])!
        var seen: [String] = []
        try CSVReader(bytes: Array("Name,Phone 1 - Value\nBob,+1 646 555 0135 ::: +1 646 555 0136 ::: \n".utf8)).forEachRecord { record in
            guard record.line == 2 else { return }
            seen = google.numbers(record).map { String(decoding: $0, as: UTF8.self) }
        }
        XCTAssertEqual(seen, ["+1 646 555 0135 ", " +1 646 555 0136 "])
    }

    func testUTF16IsReadAsUTF8() {
        let text = "number,label\n+8613800138000,Zhāng 张\n"
        let le: [UInt8] = [0xFF, 0xFE] + Array(text.utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        let be: [UInt8] = [0xFE, 0xFF] + Array(text.utf16).flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        for bytes in [le, be] {
            let converted = bytes.withUnsafeBytes { TextInput.utf8FromUTF16($0) }
            XCTAssertEqual(converted, TextInput.utf8BOM + Array(text.utf8))
        }
        XCTAssertNil(Array(text.utf8).withUnsafeBytes { TextInput.utf8FromUTF16($0) })
    }
}
