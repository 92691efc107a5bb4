import Foundation
import XCTest
import TextFormats

final class VCardTests: XCTestCase {
    func crlf(_ text: String) -> String {
        text.replacingOccurrences(of: "\n", with: "\r\n")
    }

    func testAppleContactsExport() throws {
        let text = crlf("""
        BEGIN:VCARD
        VERSION:3.0
        PRODID:-//Apple Inc.//iPhone OS 17.0//EN
        N:Zhang;San;;;
        FN:Zhang San
        ORG:Example Corp;
        item1.TEL;type=CELL;type=VOICE;type=pref:+86 138 0013 8000
        item1.X-ABLabel:_$!<Mobile>!$_
        item2.TEL:+86 10 1234 5678
        item2.X-ABLabel:Office line
        TEL;type=HOME;type=VOICE:010-8888-9999
        PHOTO;ENCODING=b;TYPE=JPEG:/9j/4AAQSkZJRgABAQAAAQABAAD/
         4QBYRXhpZgAATU0AKgAAAAgAAgESAAMAAAABAAEAAIdpAAQAAAABAAAAJgAAAAAAA6ABAAMAAAAB
        END:VCARD

        """)
        let cards = try VCard.parse(text)
        XCTAssertEqual(cards.count, 1)
        let card = cards[0]
        XCTAssertEqual(card.line, 1)
        XCTAssertEqual(card.endLine, 14)
        XCTAssertEqual(card.version, "3.0")
        XCTAssertEqual(card.formattedName, "Zhang San")
        XCTAssertEqual(card.name, VCardName(familyName: "Zhang", givenName: "San"))
        XCTAssertEqual(card.organization, "Example Corp")
        XCTAssertEqual(card.telephones, [
            VCardTelephone(line: 7, value: "+86 138 0013 8000", group: "item1", types: ["cell", "voice", "pref"],
                           parameters: [VCardParameter(name: "TYPE", values: ["CELL"]),
                                        VCardParameter(name: "TYPE", values: ["VOICE"]),
                                        VCardParameter(name: "TYPE", values: ["pref"])],
                           label: "Mobile"),
            VCardTelephone(line: 9, value: "+86 10 1234 5678", group: "item2", label: "Office line"),
            VCardTelephone(line: 11, value: "010-8888-9999", types: ["home", "voice"],
                           parameters: [VCardParameter(name: "TYPE", values: ["HOME"]),
                                        VCardParameter(name: "TYPE", values: ["VOICE"])]),
        ])
        XCTAssertTrue(card.telephones[0].isPreferred)
        XCTAssertFalse(card.telephones[1].isPreferred)
    }

    func testAndroidExports() throws {
        // vCard 2.1 as Android writes non-ASCII names: UTF-8 in quoted-printable
        // with a soft line break; then a 3.0 card as Google Contacts writes it.
        let text = crlf("""
        BEGIN:VCARD
        VERSION:2.1
        N;CHARSET=UTF-8;ENCODING=QUOTED-PRINTABLE:=E7=8E=8B;=E5=B0=8F=E6=98=8E;;;
        FN;CHARSET=UTF-8;ENCODING=QUOTED-PRINTABLE:=E7=8E=8B=E5=B0=8F=E6=98=8E=E5=B0=8F=E6=98=8E=E5=B0=8F=
        =E6=98=8E
        TEL;CELL:138-0013-8000
        TEL;HOME;PREF:010 1234 5678
        END:VCARD
        BEGIN:VCARD
        VERSION:3.0
        N:Smith;John;;;
        FN:John Smith
        TEL;TYPE=CELL:+1 555-555-0100
        TEL;TYPE=WORK,VOICE:+1 555 555 0101
        EMAIL;TYPE=INTERNET:john@example.com
        CATEGORIES:myContacts
        END:VCARD
        """)
        let cards = try VCard.parse(text)
        XCTAssertEqual(cards.map(\.line), [1, 9])
        XCTAssertEqual(cards[0].formattedName, "王小明小明小明")
        XCTAssertEqual(cards[0].name?.familyName, "王")
        XCTAssertEqual(cards[0].name?.givenName, "小明")
        XCTAssertEqual(cards[0].name?.displayName, "王小明")
        XCTAssertEqual(cards[0].telephones.map(\.line), [6, 7])
        XCTAssertEqual(cards[0].telephones.map(\.types), [["cell"], ["home", "pref"]])
        XCTAssertEqual(cards[0].telephones.map(\.isPreferred), [false, true])
        XCTAssertEqual(cards[1].formattedName, "John Smith")
        XCTAssertEqual(cards[1].telephones.map(\.value), ["+1 555-555-0100", "+1 555 555 0101"])
        XCTAssertEqual(cards[1].telephones.map(\.types), [["cell"], ["work", "voice"]])
    }

    func testOutlookExport() throws {
        let text = crlf("""
        BEGIN:VCARD
        VERSION:2.1
        N;LANGUAGE=en-us:Smith;John
        FN:John Smith
        ORG:Contoso Ltd.;Sales
        TEL;WORK;VOICE:(555) 555-0100
        TEL;CELL;VOICE:(555) 555-0101
        LABEL;WORK;PREF;ENCODING=QUOTED-PRINTABLE:1 Main St=0D=0A=
        Redmond, WA 98052
        EMAIL;PREF;INTERNET:john@contoso.com
        PHOTO;TYPE=JPEG;ENCODING=BASE64:
        /9j/4AAQSkZJRgABAQEAYABgAAD
        AAAAAAA==

        X-MS-OL-DEFAULT-POSTAL-ADDRESS:2
        REV:20240101T000000Z
        END:VCARD
        BEGIN:VCARD
        VERSION:2.1
        FN;CHARSET=Windows-1252;ENCODING=QUOTED-PRINTABLE:J=FCrgen M=FCller =80
        N;CHARSET=ISO-8859-1;ENCODING=QUOTED-PRINTABLE:M=FCller;J=FCrgen
        TEL;WORK;VOICE;ENCODING=QUOTED-PRINTABLE:+49 30 1234=
        567
        END:VCARD
        """)
        let cards = try VCard.parse(text)
        XCTAssertEqual(cards.count, 2)
        XCTAssertEqual(cards[0].formattedName, "John Smith")
        XCTAssertEqual(cards[0].organization, "Contoso Ltd., Sales")
        XCTAssertEqual(cards[0].telephones.map(\.value), ["(555) 555-0100", "(555) 555-0101"])
        XCTAssertEqual(cards[0].telephones.map(\.types), [["work", "voice"], ["cell", "voice"]])
        XCTAssertEqual(cards[0].endLine, 17)
        XCTAssertEqual(cards[1].line, 18)
        XCTAssertEqual(cards[1].formattedName, "Jürgen Müller €")
        XCTAssertEqual(cards[1].name?.displayName, "Jürgen Müller")
        XCTAssertEqual(cards[1].telephones.map(\.value), ["+49 30 1234567"])
        XCTAssertEqual(cards[1].telephones.map(\.line), [22])
    }

    func testVCard4WithURIValues() throws {
        let text = """
        BEGIN:VCARD
        VERSION:4.0
        FN:Simon Perreault
        N:Perreault;Simon;;;ing. jr,M.Sc.
        TEL;VALUE=uri;PREF=1;TYPE="voice,home":tel:+1-555-555-5555;ext=5555
        TEL;VALUE=uri;TYPE=home:tel:+33-01-23-45-67
        TEL;TYPE=cell;PID="1:1":+1 555 0100
        END:VCARD
        """
        let card = try XCTUnwrap(VCard.parse(text).first)
        XCTAssertEqual(card.version, "4.0")
        XCTAssertEqual(card.name?.suffixes, "ing. jr M.Sc.")
        XCTAssertEqual(card.telephones.map(\.value),
                       ["tel:+1-555-555-5555;ext=5555", "tel:+33-01-23-45-67", "+1 555 0100"])
        XCTAssertEqual(card.telephones.map(\.number), ["+1-555-555-5555", "+33-01-23-45-67", "+1 555 0100"])
        XCTAssertEqual(card.telephones.map(\.valueType), ["uri", "uri", nil])
        XCTAssertEqual(card.telephones[0].types, ["voice", "home"])
        XCTAssertTrue(card.telephones[0].isPreferred)
        XCTAssertEqual(card.telephones[2].parameters.last, VCardParameter(name: "PID", values: ["1:1"]))
    }

    func testTelSchemeStripping() {
        let cases: [(String, String)] = [
            ("tel:+1-555-555-0100", "+1-555-555-0100"),
            ("TEL:+8613800138000;phone-context=example.com", "+8613800138000"),
            ("+86 138 0013 8000", "+86 138 0013 8000"),
            ("tel:", ""),
            ("te", "te"),
        ]
        for (input, expected) in cases {
            XCTAssertEqual(VCardTelephone.strippingTelScheme(input), expected, input)
        }
    }

    func testFoldingEscapesAndNames() throws {
        let text = """
        begin:vcard
        version:3.0
        fn:Very Long
          Name\\, Jr.
        \tHere
        n:Doe;John;Q.;Dr.;III
        tel;Type=Cell:+1
         555 0100
        NOTE:escaped \\, \\; \\\\ \\n done
        END:VCARD

        BEGIN:VCARD
        FN:Doe\\, John\\;Jr\\\\x\\nNext
        END:VCARD
        BEGIN:VCARD
        N:Doe;John;Q.;Dr.;III
        TEL:1
        END:VCARD
        BEGIN:VCARD
        N:王;小明;;;
        END:VCARD
        BEGIN:VCARD
        FN:
        ORG:Acme\\, Inc.
        END:VCARD
        BEGIN:VCARD
        END:VCARD
        """
        let cards = try VCard.parse(text)
        XCTAssertEqual(cards.map(\.line), [1, 12, 15, 19, 22, 26])
        XCTAssertEqual(cards[0].formattedName, "Very Long Name, Jr.Here")
        XCTAssertEqual(cards[0].telephones, [VCardTelephone(line: 7, value: "+1555 0100", types: ["cell"],
                                                            parameters: [VCardParameter(name: "TYPE", values: ["Cell"])])])
        XCTAssertEqual(cards[1].formattedName, "Doe, John;Jr\\x\nNext")
        XCTAssertNil(cards[2].formattedName)
        XCTAssertEqual(cards[2].displayName, "Dr. John Q. Doe III")
        XCTAssertEqual(cards[3].displayName, "王小明")
        XCTAssertNil(cards[4].formattedName)
        XCTAssertEqual(cards[4].displayName, "Acme, Inc.")
        XCTAssertNil(cards[5].displayName)
        XCTAssertEqual(cards[5].telephones, [])
    }

    func testBOMLoneCRAndIgnoredProperties() throws {
        let input = bytes("\u{FEFF}BEGIN:VCARD\rFN:A\rNOTE:caf\u{FFFD}\rX-UNKNOWN;FOO=bar:baz\rTEL:1\rEND:VCARD\r")
        let cards = try VCard.parse(input)
        XCTAssertEqual(cards.map(\.formattedName), ["A"])
        XCTAssertEqual(cards[0].telephones.map(\.line), [5])
        XCTAssertEqual(try VCard.parse(""), [])
        XCTAssertEqual(try VCard.parse("\n\n  \n"), [])
    }

    func testErrorTable() {
        let cases: [(String, TextFormatError)] = [
            ("END:VCARD\n", TextFormatError(line: 1, message: "END:VCARD without matching BEGIN:VCARD")),
            ("BEGIN:VCARD\nFN:x\nEND:VCARD\nEND:VCARD\n",
             TextFormatError(line: 4, message: "END:VCARD without matching BEGIN:VCARD")),
            ("BEGIN:VCARD\nFN:x\n", TextFormatError(line: 1, message: "BEGIN:VCARD without END:VCARD")),
            ("BEGIN:VCARD\nEND:VCARD\n\nBEGIN:VCARD\nFN:x\n",
             TextFormatError(line: 4, message: "BEGIN:VCARD without END:VCARD")),
            ("BEGIN:VCARD\nFN:A\nBEGIN:VCARD\nFN:B\nEND:VCARD\n",
             TextFormatError(line: 3, message: "nested BEGIN:VCARD (the vCard that begins on line 1 has no END:VCARD before it)")),
            ("BEGIN:VCARD\nFN A\nEND:VCARD\n",
             TextFormatError(line: 2, message: "property line has no ':' (expected NAME:value)")),
            ("BEGIN:VCARD\nFN:a\n b\nNOCOLON\nEND:VCARD\n",
             TextFormatError(line: 4, message: "property line has no ':' (expected NAME:value)")),
            ("hello\n", TextFormatError(line: 1, message: "expected BEGIN:VCARD")),
            ("FN:x\n", TextFormatError(line: 1, message: "expected BEGIN:VCARD, found FN outside a vCard")),
            ("BEGIN:VCALENDAR\n", TextFormatError(line: 1, message: "expected BEGIN:VCARD, found BEGIN:VCALENDAR")),
            ("BEGIN:VCARD\nEND:VCALENDAR\n",
             TextFormatError(line: 2, message: "END:VCALENDAR does not match BEGIN:VCARD on line 1")),
            ("BEGIN:VCARD\nFN:caf\u{FFFD}\nEND:VCARD\n",
             TextFormatError(line: 2, message: "invalid UTF-8 (byte 0xFF) in FN value; save the file as UTF-8 or declare its CHARSET")),
            ("BEGIN:VCARD\nTEL;ENCODING=QUOTED-PRINTABLE:=FF1\nEND:VCARD\n",
             TextFormatError(line: 2, message: "invalid UTF-8 (byte 0xFF) in TEL value; save the file as UTF-8 or declare its CHARSET")),
            ("BEGIN:VCARD\nVERSION:2.1\nFN;CHARSET=GBK;ENCODING=QUOTED-PRINTABLE:=D5=C5\nEND:VCARD\n",
             TextFormatError(line: 3, message: "unsupported CHARSET=GBK in FN value; convert the file to UTF-8")),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(captureError { _ = try VCard.parse(bytes(text)) }, expected, text.debugDescription)
        }
        // An ASCII value in an unsupported charset is fine.
        XCTAssertEqual(try VCard.parse("BEGIN:VCARD\nFN;CHARSET=GBK:Li\nEND:VCARD").first?.formattedName, "Li")
    }
}
