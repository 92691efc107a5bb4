import XCTest
@testable import Directory
@testable import Screening

/// Contacts lists: CSV and vCard, with warnings for entries that are skipped.
final class ContactListTests: XCTestCase {
    func names(_ list: ContactList, _ numbers: [String]) -> [String] {
        numbers.map { text in list.lookup(number(text)).map { list.name($0) } ?? "-" }
    }

    func testCSV() throws {
        let csv = """
        # exported from the phone
        Name,Phone Number
        Mum,+86 139 1111 2222
        "Zhang, Wei",013812345678
        Office,(010) 5900-0001
          Padded  ,  13800138000
        """
        let (list, warnings) = try parseContacts(csv, name: "c.csv", format: .csv)
        XCTAssertEqual(warnings, [])
        XCTAssertEqual(list.count, 4)
        XCTAssertEqual(list.name, "c.csv")
        XCTAssertEqual(names(list, ["+8613911112222", "+8613812345678", "+861059000001", "+8613800138000", "+8613900000000"]),
                       ["Mum", "Zhang, Wei", "Office", "Padded", "-"])
    }

    func testCSVHeaderVariantsAndColumnOrder() throws {
        let (list, _) = try parseContacts("tel;contact;notes\n+8613800000001;Alice;friend\n", format: .csv)
        XCTAssertEqual(names(list, ["+8613800000001"]), ["Alice"])
        let (tabbed, _) = try parseContacts("number\tdisplay name\n+8613800000002\tBob\n", format: .csv)
        XCTAssertEqual(names(tabbed, ["+8613800000002"]), ["Bob"])
    }

    func testCSVErrorsAreThrownWithTheirLine() {
        func error(_ text: String) -> String? {
            do { _ = try parseContacts(text, name: "c.csv", format: .csv); return nil } catch { return "\(error)" }
        }
        XCTAssertEqual(error("who,what\nAlice,+8613800000001\n"), "c.csv:1: the header must name a 'name' and a 'number' column (or name them: name-column=, number-column=)")
        XCTAssertEqual(error("+8613800000001\n"), "c.csv:1: missing header line (expected: name,number)")
        let unterminated = error("name,number\n\"Alice,+8613800000001\n")
        XCTAssertTrue(unterminated?.hasPrefix("c.csv:2: ") ?? false, String(describing: unterminated))
        XCTAssertTrue(unterminated?.contains("unterminated") ?? false, String(describing: unterminated))
    }

    /// Address-book exports are messy: a row without a number, or an empty
    /// export, costs that row (with a warning), not the whole list.
    func testIncompleteRowsAndEmptyListsAreWarnings() throws {
        let (list, warnings) = try parseContacts("name,phone,x\nAlice\nBob,+8613800000001,\n", name: "c.csv", format: .csv)
        XCTAssertEqual(list.count, 1)
        XCTAssertEqual(warnings.map(\.description), ["c.csv:2: contact skipped: expected a name and a number"])
        let (empty, emptyWarnings) = try parseContacts("\n  \n", name: "e.csv", format: .csv)
        XCTAssertEqual(empty.count, 0)
        XCTAssertEqual(emptyWarnings.map(\.description), ["e.csv: empty contacts list"])
    }

    /// D13: a contact name with a bidirectional control (which would reverse what a phone
    /// shows after it) or a C1 control is skipped with a warning naming the line, as a label is.
    func testNamesWithBidiControlsAreSkipped() throws {
        let (list, warnings) = try parseContacts("name,number\nBank \u{202E}moc.knab,+8613800000001\nCSI\u{9B}x,+8613800000002\nMum,+8613911112222\n",
                                                 name: "c.csv", format: .csv)
        XCTAssertEqual(list.count, 1)
        XCTAssertEqual(warnings.map(\.description), [
            "c.csv:2: contact skipped: name: label contains the bidirectional control U+202E (it reorders what is displayed after it)",
            "c.csv:3: contact skipped: name: label contains the control character U+009B",
        ])
    }

    func testDuplicatesAndInvalidNumbersAreWarnings() throws {
        let csv = """
        name,number
        Mum,+8613911112222
        Mother,013911112222
        Mum,13911112222
        Voicemail,*86
        Reception,101
        Withheld,anonymous
        Shop,abc
        ,+8613800000009
        Dad,+8613911113333
        """
        let (list, warnings) = try parseContacts(csv, name: "c.csv", format: .csv)
        XCTAssertEqual(warnings.map(\.description), [
            "c.csv:3: +8613911112222 is already listed for 'Mum' on line 2; keeping that one",
            "c.csv:5: '*86' skipped: contains '*'",
            "c.csv:6: '101' skipped: 3 digits is too short for a number of CN (+86), which has 7 to 12 digits after the country code (an internal extension or service code?)",
            "c.csv:7: 'anonymous' skipped: not a number",
            "c.csv:8: 'abc' skipped: contains letters",
            "c.csv:9: contact skipped: name: empty label",
        ])
        XCTAssertEqual(list.count, 2)
        XCTAssertEqual(names(list, ["+8613911112222", "+8613911113333", "+8613800000009"]), ["Mum", "Dad", "-"])
    }

    func testVCard() throws {
        let vcf = "BEGIN:VCARD\r\n"
            + "VERSION:3.0\r\n"
            + "FN:Zhang W\r\n"           // folded: the continuation line starts with a space
            + " ei\r\n"
            + "N:Zhang;Wei;;;\r\n"
            + "item1.TEL;type=CELL;type=VOICE;type=pref:138 1234 5678\r\n"
            + "TEL;TYPE=WORK:010-5900-0001\r\n"
            + "TEL;TYPE=HOME:+86 (10) 5900 0002\r\n"
            + "END:VCARD\r\n"
            + "BEGIN:VCARD\r\n"
            + "VERSION:4.0\r\n"
            + "FN:Acme Corp\r\n"
            + "TEL;VALUE=uri;TYPE=work:tel:+1-212-555-0100;ext=12\r\n"
            + "TEL:sip:+8613800000001@pbx.example.com\r\n"
            + "END:VCARD\r\n"
            + "BEGIN:VCARD\r\n"
            + "VERSION:2.1\r\n"
            + "N:Li;Na\r\n"
            + "TEL;CELL:0086-139-0000-0003\r\n"
            + "END:VCARD\r\n"
        let (list, warnings) = try parseContacts(vcf, name: "c.vcf", format: .vcard)
        XCTAssertEqual(warnings, [])
        XCTAssertEqual(names(list, ["+8613812345678", "+861059000001", "+861059000002", "+12125550100", "+8613800000001", "+8613900000003"]),
                       ["Zhang Wei", "Zhang Wei", "Zhang Wei", "Acme Corp", "Acme Corp", "Na Li"])
        XCTAssertEqual(list.count, 6)
    }

    func testVCardWarnings() throws {
        let vcf = """
        BEGIN:VCARD
        VERSION:3.0
        TEL:+8613800000001
        END:VCARD
        BEGIN:VCARD
        VERSION:3.0
        NOTE:no name and no number: nothing to say
        END:VCARD
        BEGIN:VCARD
        VERSION:3.0
        FN:Shop
        TEL:+8613800000002
        TEL:*86
        TEL:+8613800000002
        END:VCARD
        BEGIN:VCARD
        VERSION:3.0
        FN:Other Shop
        TEL:013800000002
        END:VCARD
        BEGIN:VCARD
        VERSION:3.0
        FN:Two\\nLines
        TEL:+8613800000003
        END:VCARD
        """
        let (list, warnings) = try parseContacts(vcf, name: "c.vcf", format: .vcard)
        XCTAssertEqual(warnings.map(\.description), [
            "c.vcf:1: card without a name skipped",
            "c.vcf:13: '*86' skipped: contains '*'",
            "c.vcf:19: +8613800000002 is already listed for 'Shop' on line 12; keeping that one",
            "c.vcf:24: contact skipped: name: label contains the control character U+000A",
        ])
        XCTAssertEqual(names(list, ["+8613800000001", "+8613800000002", "+8613800000003"]), ["-", "Shop", "-"])
    }

    func testVCardSyntaxErrorIsThrown() {
        XCTAssertThrowsError(try parseContacts("BEGIN:VCARD\nFN:A\nTEL:+8613800000001\n", name: "c.vcf", format: .vcard)) { error in
            XCTAssertTrue("\(error)".hasPrefix("c.vcf:1: "), "\(error)")
        }
    }

    func testSampleContacts() throws {
        let path = sampleConfigFolder.appendingPathComponent("sample-contacts.vcf").path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let (list, warnings) = try parseContacts(text, name: path, format: .vcard)
        XCTAssertEqual(warnings, [])
        XCTAssertEqual(names(list, ["+8613911112222", "+8613812345678", "+861059000001"]), ["Mum", "Zhang Wei", "Zhang Wei"])
    }

    func testNamesAreSharedAndReadWithoutCopying() {
        let entries = [(name: "Shop", number: number("+8613800000001")), (name: "Shop", number: number("+8613800000002")),
                       (name: "Bank", number: number("+8613800000003")), (name: "Late", number: number("+8613800000001"))]
        let list = ContactList(name: "l", entries: entries)
        XCTAssertEqual(list.count, 3)
        XCTAssertEqual(list.lookup(number("+8613800000001")), list.lookup(number("+8613800000002")))
        XCTAssertEqual(list.withName(list.lookup(number("+8613800000003"))!) { Array($0) }, Array("Bank".utf8))
        XCTAssertEqual(list.name(list.lookup(number("+8613800000001"))!), "Shop")
    }

    func testFormatGuess() {
        XCTAssertEqual(ContactsFormat.guess(path: "a/b.VCF"), .vcard)
        XCTAssertEqual(ContactsFormat.guess(path: "b.vcard"), .vcard)
        XCTAssertEqual(ContactsFormat.guess(path: "b.csv"), .csv)
        XCTAssertEqual(ContactsFormat.guess(path: "b.tsv"), .csv)
        XCTAssertNil(ContactsFormat.guess(path: "b.json"))
        XCTAssertNil(ContactsFormat.guess(path: "x.d/contacts"))
    }
}
