import Foundation
import XCTest

/// The lists operators get from other tools (Tests/Fixtures/exports, see its
/// README), compiled and loaded as they come: recognised by their header,
/// or read through the column options, with bad lines reported or left out.
final class ExportShapeTests: CLITestCase {
    static let exports = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/exports").path

    func export(_ name: String) -> String { Self.exports + "/" + name }

    /// The verdict and label of each number, as `lookupd query` prints them.
    func answers(_ arguments: [String], _ numbers: [String]) throws -> [String] {
        let r = try lookupd(["query"] + arguments + numbers)
        XCTAssertEqual(r.status, 0, r.stderr)
        return r.stdoutLines.map { line in
            let f = line.split(separator: "\t", omittingEmptySubsequences: false)
            return "\(f[1]) \(f[2]) \(f[3])"
        }
    }

    func testFreePBXBlacklistBlocksEveryRow() throws {
        let out = file("freepbx.lkd")
        let r = try lookupd(["compile", "--country-code", "1", export("freepbx-blacklist.csv"), "-o", out])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdoutLines.first, "\(export("freepbx-blacklist.csv")): read as a FreePBX Blacklist export: every row blocks, the description is the label")
        XCTAssertTrue(r.stdoutLines.last!.hasPrefix("wrote \(out): 5 numbers and 0 prefix rules from 5 lines (5 blocking, 4 with a label"), r.stdout)
        XCTAssertEqual(try answers(["--directory", out, "--country-code", "1"],
                                   ["8005550143", "2125550187", "+442079460958", "4155550123", "16175550164"]), [
            "+18005550143 blocked Robo caller",
            "+12125550187 blocked Fake IRS",
            "+442079460958 blocked Card services",
            "+14155550123 blocked -",
            "+16175550164 blocked Telemarketer",
        ])
    }

    func testFTCComplaintsCompileAsTheyComeAndWithColumnOptions() throws {
        let out = file("ftc.lkd")
        // No options at all: the home country (86 by default) does not matter, the FTC's numbers are North American.
        var r = try lookupd(["compile", export("ftc-dnc-complaints.csv"), "-o", out])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdoutLines.first, "\(export("ftc-dnc-complaints.csv")): read as an FTC Do Not Call complaints file: every row blocks, the subject is the label, numbers are North American (+1)")
        XCTAssertTrue(r.stdout.contains("4 numbers and 0 prefix rules from 5 lines (4 blocking, 4 with a label, 4 distinct labels); 1 row without a number, 1 repeated number kept its first row"), r.stdout)
        XCTAssertTrue(r.stderr.contains("ftc-dnc-complaints.csv:4: +18005550143 again"), r.stderr)
        let expected = [
            "+18005550143 blocked Reducing your debt (credit cards, mortgage, student loans)",
            "+12125550187 blocked Calls pretending to be government, businesses, or family and friends",
            "+14155550123 blocked Warranties & protection plans",
            "+17255550199 blocked No Subject Provided",
        ]
        let numbers = ["+18005550143", "+12125550187", "+14155550123", "+17255550199"]
        XCTAssertEqual(try answers(["--directory", out], numbers), expected)

        // The same file through explicit columns: the rest of the columns are ignored.
        let named = file("ftc-named.lkd")
        r = try lookupd(["compile", "--number-column", "Company_Phone_Number", "--label-column", "subject", "--action", "block",
                         "--on-duplicate", "first", "--country-code", "1", export("ftc-dnc-complaints.csv"), "-o", named])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertFalse(r.stdout.contains("read as"), "named columns: no shape is guessed")
        XCTAssertTrue(r.stdout.contains("1 row without a number, 1 repeated number kept its first row"), r.stdout)
        XCTAssertEqual(try answers(["--directory", named], numbers), expected)
        // By position too.
        r = try lookupd(["compile", "--number-column", "1", "--label-column", "7", "--action", "block", "--on-duplicate", "first",
                         "--country-code", "1", export("ftc-dnc-complaints.csv"), "-o", named])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try answers(["--directory", named], numbers), expected)
        // A number that is there but wrong is still an error.
        let bad = write("ftc-bad.csv", readText(export("ftc-dnc-complaints.csv")).replacingOccurrences(of: "2125550187,", with: "21255501x7,"))
        r = try lookupd(["compile", "--number-column", "1", "--label-column", "7", "--action", "block", "--on-duplicate", "first",
                         "--country-code", "1", bad, "-o", file("strict.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("ftc-bad.csv:3: "), r.stderr)
        XCTAssertFalse(exists(file("strict.lkd")))
    }

    func testGoogleContactsCompileAsTheyComeAndWithColumnOptions() throws {
        let out = file("google.lkd")
        var r = try lookupd(["compile", "--country-code", "1", export("google-contacts.csv"), "-o", out])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdoutLines.first, "\(export("google-contacts.csv")): read as a Google Contacts export: every phone number is identified with the contact's name")
        XCTAssertTrue(r.stdout.contains("6 numbers and 0 prefix rules from 6 lines (0 blocking, 6 with a label, 4 distinct labels); 1 row without a number, 1 extension dropped"), r.stdout)
        XCTAssertTrue(r.stderr.contains("'+1 212-555-0199 ext. 22': extension 22 dropped (calls come from the main number +1 212-555-0199)"), r.stderr)
        XCTAssertEqual(try answers(["--directory", out, "--country-code", "1"],
                                   ["+14155550170", "+12125550199", "+16465550135", "+16465550136", "+14155550111", "+8613800138000"]), [
            "+14155550170 identified Alice Nguyen",
            "+12125550199 identified Bob J. Marley",
            "+16465550135 identified Bob J. Marley",
            "+16465550136 identified Bob J. Marley",
            "+14155550111 identified Joe's Pizza",
            "+8613800138000 identified 李小龙",
        ])
        // Named columns: the first phone of each contact, labelled with the first name.
        let named = file("google-named.lkd")
        // Joe's Pizza has no first name: identified with nothing, an error
        // (--skip-invalid leaves it out); the contact without a phone is a
        // row without a number.
        r = try lookupd(["compile", "--number-column", "Phone 1 - Value", "--label-column", "First Name", "--action", "identify",
                         "--country-code", "1", export("google-contacts.csv"), "-o", named])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("google-contacts.csv:5: 'identify' needs a label"), r.stderr)
        XCTAssertFalse(r.stderr.contains("google-contacts.csv:7"), r.stderr)
        r = try lookupd(["compile", "--number-column", "Phone 1 - Value", "--label-column", "First Name", "--action", "identify",
                         "--country-code", "1", "--skip-invalid", export("google-contacts.csv"), "-o", named])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("1 row without a number"), r.stdout)
        XCTAssertEqual(try answers(["--directory", named, "--country-code", "1"], ["+14155550170", "+12125550199"]), [
            "+14155550170 identified Alice",
            "+12125550199 identified Bob",
        ])
        // The older Google CSV, in UTF-16 with a byte order mark.
        r = try lookupd(["compile", export("google-contacts-legacy.csv"), "-o", file("legacy.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try answers(["--directory", file("legacy.lkd")], ["+79125550123", "+4930555 01234", "+491515550 9876"]), [
            "+79125550123 identified Иван Петров",
            "+493055501234 identified Dana Weiss",
            "+4915155509876 identified Dana Weiss",
        ])
    }

    func testOutlookContacts() throws {
        let out = file("outlook.lkd")
        let r = try lookupd(["compile", "--country-code", "1", export("outlook-contacts.csv"), "-o", out])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdoutLines.first, "\(export("outlook-contacts.csv")): read as an Outlook contacts export: every phone number is identified with the contact's name")
        XCTAssertEqual(try answers(["--directory", out, "--country-code", "1"], ["+12065550100", "+12065550147", "+14255550166", "+442079460321"]), [
            "+12065550100 identified Erin O'Brien",
            "+12065550147 identified Erin O'Brien",
            "+14255550166 identified Fabrikam Plumbing",
            "+442079460321 identified Frank T. Miller",
        ])
    }

    /// The same exports as contacts lists: never blocked, named, the odd line a warning.
    func testExportsAsContacts() throws {
        let google = try lookupd(["query", "--contacts", export("google-contacts.csv"), "--country-code", "1", "+12125550199", "+14155550111"])
        XCTAssertEqual(google.status, 0, google.stderr)
        XCTAssertEqual(google.stdoutLines.map { $0.split(separator: "\t")[2...3].joined(separator: " ") }, ["contact Bob J. Marley", "contact Joe's Pizza"])
        XCTAssertTrue(google.stderr.contains("extension 22 dropped"), google.stderr)
        let outlook = try lookupd(["query", "--contacts", export("outlook-contacts.csv"), "--country-code", "1", "+12065550100"])
        XCTAssertEqual(outlook.stdoutLines.map { $0.split(separator: "\t")[2...3].joined(separator: " ") }, ["contact Erin O'Brien"])
    }

    /// A phone's vCard export with the usual junk: as contacts it loads, each
    /// bad TEL a warning, extensions dropped so the office number matches.
    func testVCardWithJunkTelephonesLoadsAsContacts() throws {
        let vcf = export("phone-contacts.vcf")
        let r = try lookupd(["query", "--contacts", vcf, "--country-code", "1", "+14155550170", "+14155550100", "+12125550100", "+12125550142"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdoutLines.map { $0.split(separator: "\t")[2...3].joined(separator: " ") },
                       ["contact Jane Doe", "contact Jane Doe", "contact Sam Lee", "contact Sam Lee"])
        for warning in ["\(vcf):14: '*86' skipped", "\(vcf):22: '611' skipped", "\(vcf):29: 'x23' skipped: an extension without its number",
                        "\(vcf):7: '+1 (415) 555-0100 ext. 22': extension 22 dropped",
                        "\(vcf):39: '1-800-FLOWERS' skipped: letters (a vanity number? write it in digits: 1-800-3569377)"] {
            XCTAssertTrue(r.stderr.contains(warning), "\(warning) in \(r.stderr)")
        }
        // As a directory it is strict: every junk TEL is an error, and
        // --skip-invalid leaves them out; --vanity reads the letters.
        var c = try lookupd(["compile", "--country-code", "1", vcf, "-o", file("phone.lkd")])
        XCTAssertEqual(c.status, 1)
        XCTAssertTrue(c.stderr.hasSuffix("lookupd: error: 4 errors; \(file("phone.lkd")) not written (--skip-invalid leaves bad lines out)\n"), c.stderr)
        XCTAssertTrue(c.stderr.contains("\(vcf):39: '1-800-FLOWERS' has letters: a vanity number? --vanity reads them as keypad digits (1-800-3569377)"), c.stderr)
        c = try lookupd(["compile", "--country-code", "1", "--skip-invalid", "--vanity", vcf, "-o", file("phone.lkd")])
        XCTAssertEqual(c.status, 0, c.stderr)
        XCTAssertTrue(c.stdout.contains("3 bad lines skipped, 2 extensions dropped, 1 vanity number read as digits"), c.stdout)
        XCTAssertEqual(try answers(["--directory", file("phone.lkd"), "--country-code", "1"], ["+18003569377", "+12125550100"]), [
            "+18003569377 identified Order Flowers",
            "+12125550100 identified Sam Lee",
        ])
    }

    /// No header, extra and empty trailing columns, duplicate lines.
    func testHeaderlessAndTrailingColumns() throws {
        var r = try lookupd(["compile", export("no-header.csv"), "-o", file("nh.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("missing header line (expected for example: number,action,label; or pass --no-header)"), r.stderr)
        r = try lookupd(["compile", "--no-header", export("no-header.csv"), "-o", file("nh.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try answers(["--directory", file("nh.lkd")], ["+8613800138000", "+8617012345678"]), [
            "+8613800138000 blocked Fraud",
            "+8617012345678 blocked Virtual Range",
        ])
        r = try lookupd(["compile", "--no-header", "--number-column", "1", "--label-column", "3", "--action", "identify",
                         export("no-header.csv"), "-o", file("nh2.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try answers(["--directory", file("nh2.lkd")], ["+8613800138000"]), ["+8613800138000 identified Fraud"])
        r = try lookupd(["compile", "--no-header", "--number-column", "number", export("no-header.csv"), "-o", file("nh3.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("the number column 'number' is named, but the file has no header line"), r.stderr)

        r = try lookupd(["compile", export("trailing-columns.csv"), "-o", file("trail.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try answers(["--directory", file("trail.lkd")], ["+8613800138000", "+8613500000000"]), [
            "+8613800138000 blocked Fraud",
            "+8613500000000 blocked -",
        ])
        // An extra non-empty column: an error in lookupd's own shape,
        // ignored once the columns are named.
        let extra = write("extra.csv", "number,action,label\n+8613800138000,block,Fraud,seen 2024-06-01\n+8613800138000,block,Fraud,\n")
        r = try lookupd(["compile", extra, "-o", file("extra.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("\(extra):2: 4 fields, the header names 3"), r.stderr)
        r = try lookupd(["compile", "--number-column", "number", "--action-column", "action", "--label-column", "label", extra, "-o", file("extra.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("1 duplicate line merged"), r.stdout)
        // Column options that do not fit the file.
        r = try lookupd(["compile", "--number-column", "Phone", extra, "-o", file("extra.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("no column named 'Phone' in the header (it has 'number', 'action', 'label')"), r.stderr)
        r = try lookupd(["compile", "--label-column", "label", extra, "-o", file("extra.lkd")])
        XCTAssertEqual(r.status, 2)
        r = try lookupd(["compile", "--action", "unblock", extra, "-o", file("extra.lkd")])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains("--action must be block, identify or allow"), r.stderr)
    }

    /// --skip-invalid: every bad line named and counted, the rest written.
    func testSkipInvalid() throws {
        let source = write("mixed.csv", "number,action,label\n+8613800138000,block,Fraud\nabc,block,Spam\n+8613800138001,frobnicate,X\n+8613800138002,block,Ok\n")
        let r = try lookupd(["compile", "--skip-invalid", source, "-o", file("mixed.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stderr, """
        lookupd: warning: \(source):3: skipped: invalid number 'abc': contains letters
        lookupd: warning: \(source):4: skipped: unknown action 'frobnicate' (expected block, identify or allow)

        """)
        XCTAssertTrue(r.stdout.contains("2 numbers and 0 prefix rules from 4 lines (2 blocking, 2 with a label, 2 distinct labels); 2 bad lines skipped"), r.stdout)
    }

    /// A Windows code page file is refused with the way out.
    func testWindowsCodePageIsRefusedWithAHint() throws {
        var bytes = Data("number,action,label\n+8613800138000,identify,M".utf8)
        bytes.append(0xFC)  // 'ü' in Windows-1252
        bytes.append(contentsOf: Array("ller\n".utf8))
        let source = write("cp1252.csv", bytes)
        let r = try lookupd(["compile", source, "-o", file("cp.lkd")])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("invalid UTF-8 (byte 0xFC); the file must be saved as UTF-8 (a Windows program may have written its code page: iconv -f WINDOWS-1252 -t UTF-8 converts it)"), r.stderr)
    }
}
