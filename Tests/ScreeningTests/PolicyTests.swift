import Foundation
import Loading
import XCTest
@testable import Configuration
@testable import Directory
@testable import Screening

/// Caller policies, per-callee contacts and time windows, from their
/// config keys to the decisions they make.
final class PolicyTests: XCTestCase {
    var folder: TemporaryFolder!

    override func setUp() { folder = TemporaryFolder("lookupd-policy") }
    override func tearDown() { folder.cleanup() }

    /// A set from config lines over a standard directory and contacts list.
    func set(_ lines: [String], directories: [String] = ["main.lkd name=main"]) throws -> ScreeningSet {
        try compileDirectory("""
        number,action,label
        +8613800138000,block,Fraud
        +8618600000000,identify,Bank
        +8618600000001,identify,Bank Line
        +8613911112222,block,Telemarketing
        """, named: "main.lkd", in: folder)
        try compileDirectory("""
        number,action,label
        +8613700000000,block,Evening Telemarketer
        +8618600000000,block,Evening Block
        """, named: "tele.lkd", in: folder)
        folder.write("contacts.csv", "name,number\nMum,+8613911112222\nBank Friend,+8618600000000\n")
        let text = (directories.map { "directory = \($0)" } + ["contacts = contacts.csv"] + lines).joined(separator: "\n")
        let path = folder.write("lookupd.conf", text + "\n")
        return try ScreeningLoader.load(try ConfigParser.load(path: path), verify: true).set
    }

    func decide(_ set: ScreeningSet, _ caller: String?, callee: String = "", verstat: Verstat = .absent,
                privacy: Bool = false, at time: String? = nil) -> String {
        let d = Array(callee.utf8).withUnsafeBytes { calleeBytes in
            set.decide(caller: caller, context: CallContext(callee: calleeBytes, verstat: verstat, privacy: privacy,
                                                            time: time.flatMap(LocalTime.parse)))
        }
        var parts = [d.verdict.rawValue, d.label.map { set.label($0) } ?? "-", d.source.map { set.sourceName($0) } ?? "-"]
        if let policy = d.policy { parts.append("policy=\(policy)") }
        if let inactive = d.inactiveDirectory { parts.append("inactive=\(set.directories[inactive].name)") }
        return parts.joined(separator: " | ")
    }

    // MARK: Anonymous and invalid callers

    func testDefaultsChangeNothing() throws {
        let s = try set([])
        XCTAssertEqual(decide(s, "anonymous"), "anonymous | - | -")
        XCTAssertEqual(decide(s, nil), "anonymous | - | -")
        XCTAssertEqual(decide(s, "101"), "invalid | - | -")
        XCTAssertEqual(decide(s, ""), "invalid | - | -")
        XCTAssertEqual(decide(s, "+8613800138000", verstat: .failed), "blocked | Fraud | main")
        XCTAssertEqual(decide(s, "+8613000000000", verstat: .noValidation), "unknown | - | -")
    }

    func testAnonymousCallers() throws {
        var s = try set(["anonymous-callers = label"])
        for withheld in ["anonymous", "anonymous.invalid", "Restricted"] {
            XCTAssertEqual(decide(s, withheld), "anonymous | Anonymous | policy:anonymous-callers | policy=anonymous-callers", withheld)
        }
        XCTAssertEqual(decide(s, nil), "anonymous | Anonymous | policy:anonymous-callers | policy=anonymous-callers", "no user part")
        // Privacy: id is withheld too; a blocked number stays blocked.
        XCTAssertEqual(decide(s, "+8613000000000", privacy: true), "anonymous | Anonymous | policy:anonymous-callers | policy=anonymous-callers")
        XCTAssertEqual(decide(s, "+8613800138000", privacy: true), "blocked | Fraud | main")

        s = try set(["anonymous-callers = label \"Number Withheld\""])
        XCTAssertEqual(decide(s, "anonymous"), "anonymous | Number Withheld | policy:anonymous-callers | policy=anonymous-callers")
        s = try set(["anonymous-callers = block"])
        XCTAssertEqual(decide(s, "anonymous"), "blocked | - | policy:anonymous-callers | policy=anonymous-callers")
        XCTAssertEqual(decide(s, "+8613000000000", privacy: true), "blocked | - | policy:anonymous-callers | policy=anonymous-callers")
        // A contact asking for privacy is never blocked.
        XCTAssertEqual(decide(s, "+8613911112222", privacy: true), "anonymous | - | -")
        XCTAssertEqual(decide(s, "+8613911112222"), "contact | Mum | \(folder.file("contacts.csv"))")
        s = try set(["anonymous-callers = allow"])
        XCTAssertEqual(decide(s, "anonymous"), "anonymous | - | -")
    }

    func testInvalidCallers() throws {
        var s = try set(["invalid-callers = block"])
        let cn = NumberNormalizer()
        func reason(_ text: String) -> InvalidNumber? {
            if case .invalid(let r) = cn.normalize(text) { return r }
            return nil
        }
        let cases: [(String, InvalidNumber?)] = [
            ("", .empty), ("  ", .empty), ("101", reason("101")), ("0000000000", .allZeros), ("+000 0000 000", .allZeros),
            ("abc", .letters), ("+1234567890123456789", reason("+1234567890123456789")), ("*86", .badCharacter("*")),
        ]
        XCTAssertEqual(reason("101")?.description.hasPrefix("3 digits is too short for a number of CN (+86)"), true)
        for (input, reason) in cases {
            let d = s.decide(caller: input, context: CallContext())
            XCTAssertEqual(d, Decision(verdict: .blocked, source: .policy(.invalid), invalidReason: reason, policy: .invalid), input)
        }
        // A number its plan has no range for (+1 200: no such area code) is blocked with the number known.
        let unallocated = s.decide(caller: "+1 200 555 0143", context: CallContext())
        XCTAssertEqual(unallocated.verdict, .blocked)
        XCTAssertEqual(unallocated.number?.description, "+12005550143")
        XCTAssertEqual(unallocated.invalidReason?.description, "no such number range in the numbering plan of US (+1) (libphonenumber): the number cannot exist")
        XCTAssertEqual(decide(s, "+8613000000000"), "unknown | - | -")
        XCTAssertEqual(decide(s, "anonymous"), "anonymous | - | -", "withheld is not invalid")
        s = try set(["invalid-callers = label"])
        XCTAssertEqual(decide(s, "101"), "invalid | Invalid Number | policy:invalid-callers | policy=invalid-callers")
        s = try set(["invalid-callers = label Junk"])
        XCTAssertEqual(decide(s, "0000000"), "invalid | Junk | policy:invalid-callers | policy=invalid-callers")
    }

    /// Numbers that cannot exist (no range of their plan holds them): a directory still
    /// knows them; invalid-callers decides for the rest, and its block beats a directory's
    /// label (the do-not-originate rule), its label does not.
    func testNumbersThatCannotExist() throws {
        let lists = ["main.lkd name=main", "unallocated.lkd name=unallocated"]
        try compileDirectory("""
        number,action,label
        +12005550143,block,Spoofed Range
        +12005550144,identify,Known Test Line
        """, named: "unallocated.lkd", in: folder)
        var s = try set([], directories: lists)
        XCTAssertEqual(decide(s, "+1 200 555 0143"), "blocked | Spoofed Range | unallocated")
        XCTAssertEqual(decide(s, "+1 200 555 0144"), "identified | Known Test Line | unallocated")
        XCTAssertEqual(decide(s, "+1 200 555 0145"), "invalid | - | -")
        let d = s.decide(caller: "+1 200 555 0144", context: CallContext())
        XCTAssertEqual(d.invalidReason?.description, "no such number range in the numbering plan of US (+1) (libphonenumber): the number cannot exist")
        s = try set(["invalid-callers = label Nonexistent"], directories: lists)
        XCTAssertEqual(decide(s, "+1 200 555 0144"), "identified | Known Test Line | unallocated")
        XCTAssertEqual(decide(s, "+1 200 555 0145"), "invalid | Nonexistent | policy:invalid-callers | policy=invalid-callers")
        s = try set(["invalid-callers = block"], directories: lists)
        XCTAssertEqual(decide(s, "+1 200 555 0144"), "blocked | - | policy:invalid-callers | policy=invalid-callers")
        XCTAssertEqual(decide(s, "+1 200 555 0145"), "blocked | - | policy:invalid-callers | policy=invalid-callers")
        XCTAssertEqual(decide(s, "+1 202 555 0143"), "unknown | - | -", "a valid number is not touched")
        // A contact is a contact, valid or not.
        folder.write("odd.csv", "name,number\nTest Rig,+12005550146\n")
        s = try set(["invalid-callers = block", "contacts = odd.csv"], directories: lists)
        XCTAssertEqual(decide(s, "+1 200 555 0146"), "contact | Test Rig | \(folder.file("odd.csv"))")
    }

    /// `unknown-label = attribution`: unknown callers get their number's region and carrier;
    /// every other label wins over it.
    func testUnknownCallersLabelledWithTheirAttribution() throws {
        let s = try set(["attribution = zh", "unknown-label = attribution"])
        XCTAssertEqual(decide(s, "+8613800138001"), "unknown | 北京市 中国移动 | -")
        XCTAssertEqual(decide(s, "+8618600000001"), "identified | Bank Line | main")
        XCTAssertEqual(decide(s, "+8613911112222"), "contact | Mum | \(folder.file("contacts.csv"))")
        XCTAssertEqual(decide(s, "+1 200 555 0143"), "invalid | - | -", "no attribution for a number that cannot exist")
        let plain = try set(["attribution = zh"])
        XCTAssertEqual(decide(plain, "+8613800138001"), "unknown | - | -", "attribution alone labels nothing")
        XCTAssertEqual(plain.attribution?.describe(number("+8613800138001")), "北京市 中国移动")
    }

    // MARK: Bypass

    func testBypassSkipsEveryCheck() throws {
        let s = try set(["invalid-callers = block", "anonymous-callers = block", "verstat-failed = block",
                         "bypass = 110, 119 120", "bypass = 8*, +8613800138000, +86186*"])
        for caller in ["110", "119", "120", "8001", "8", "8123"] {
            XCTAssertEqual(decide(s, caller, verstat: .failed), "bypassed | - | policy:bypass | policy=bypass", caller)
        }
        // E.164 items match however the number is written; the blocked one is not blocked.
        XCTAssertEqual(decide(s, "013800138000"), "bypassed | - | policy:bypass | policy=bypass")
        XCTAssertEqual(decide(s, "+8618612345678"), "bypassed | - | policy:bypass | policy=bypass")
        // Not on the list.
        XCTAssertEqual(decide(s, "111"), "blocked | - | policy:invalid-callers | policy=invalid-callers")
        XCTAssertEqual(decide(s, "7001"), "blocked | - | policy:invalid-callers | policy=invalid-callers")
        XCTAssertEqual(decide(s, "+8613000000000"), "unknown | - | -")
        // A number that cannot exist in its plan (no 110 range) is an invalid caller.
        XCTAssertEqual(decide(s, "+8611000000000"), "blocked | - | policy:invalid-callers | policy=invalid-callers")
        XCTAssertEqual(decide(s, "anonymous"), "blocked | - | policy:anonymous-callers | policy=anonymous-callers")
        let d = s.decide(caller: "013800138000", context: CallContext())
        XCTAssertEqual(d.number?.description, "+8613800138000")
    }

    func testBypassNumbersWithoutPlusAlsoMatchTheirE164Form() throws {
        let s = try set(["bypass = 13800138000"])
        XCTAssertEqual(decide(s, "+8613800138000"), "bypassed | - | policy:bypass | policy=bypass")
        XCTAssertEqual(decide(s, "13800138000"), "bypassed | - | policy:bypass | policy=bypass")
    }

    // MARK: STIR/SHAKEN

    func testVerstatParsing() {
        XCTAssertEqual(Verstat("TN-Validation-Passed"), .passed)
        XCTAssertEqual(Verstat("tn-validation-failed"), .failed)
        XCTAssertEqual(Verstat("No-TN-Validation"), .noValidation)
        XCTAssertEqual(Verstat("TN-Validation-Passed-A"), .other)
        XCTAssertEqual(Verstat(nil as UnsafeRawBufferPointer?), .absent)
    }

    func testFailedValidation() throws {
        var s = try set(["verstat-failed = label"])
        // The label replaces the directory's, which a spoofer would borrow.
        XCTAssertEqual(decide(s, "+8618600000001", verstat: .failed), "identified | Unverified | policy:verstat-failed | policy=verstat-failed")
        XCTAssertEqual(decide(s, "+8618600000001", verstat: .passed), "identified | Bank Line | main")
        XCTAssertEqual(decide(s, "+8613000000000", verstat: .failed), "unknown | Unverified | policy:verstat-failed | policy=verstat-failed")
        XCTAssertEqual(decide(s, "+8613800138000", verstat: .failed), "blocked | Fraud | main", "blocked stays blocked")
        XCTAssertEqual(decide(s, "+8613911112222", verstat: .failed), "contact | Mum | \(folder.file("contacts.csv"))", "contacts trusted by default")
        XCTAssertEqual(decide(s, "+8618600000000", verstat: .passed), "contact | Bank Friend | \(folder.file("contacts.csv"))")

        s = try set(["verstat-failed = block", "verstat-failed-contacts = ignore"])
        XCTAssertEqual(decide(s, "+8613000000000", verstat: .failed), "blocked | - | policy:verstat-failed | policy=verstat-failed")
        // The contact is not trusted; the directory blocks Mum's number.
        XCTAssertEqual(decide(s, "+8613911112222", verstat: .failed), "blocked | Telemarketing | main | policy=verstat-failed-contacts")
        XCTAssertEqual(decide(s, "+8613911112222", verstat: .passed), "contact | Mum | \(folder.file("contacts.csv"))")
        XCTAssertEqual(decide(s, "+8613000000000", verstat: .noValidation), "unknown | - | -")

        s = try set(["verstat-failed-contacts = ignore"])
        XCTAssertEqual(decide(s, "+8618600000000", verstat: .failed), "identified | Bank | main | policy=verstat-failed-contacts")
    }

    func testNoValidation() throws {
        var s = try set(["verstat-no-validation = label"])
        XCTAssertEqual(decide(s, "+8613000000000", verstat: .noValidation), "unknown | Unverified | policy:verstat-no-validation | policy=verstat-no-validation")
        XCTAssertEqual(decide(s, "+8618600000000", verstat: .noValidation), "contact | Bank Friend | \(folder.file("contacts.csv"))")
        s = try set(["verstat-no-validation = label \"Not Verified\""], directories: ["tele.lkd name=tele"])
        // Fills in only where no directory labels the caller.
        XCTAssertEqual(decide(s, "+8613000000000", verstat: .noValidation), "unknown | Not Verified | policy:verstat-no-validation | policy=verstat-no-validation")
        s = try set(["verstat-no-validation = block"])
        XCTAssertEqual(decide(s, "+8613000000000", verstat: .noValidation), "blocked | - | policy:verstat-no-validation | policy=verstat-no-validation")
        XCTAssertEqual(decide(s, "+8613000000000", verstat: .absent), "unknown | - | -")
    }

    // MARK: Per-callee contacts

    func testPerCalleeContacts() throws {
        let callees = folder.file("callees")
        try FileManager.default.createDirectory(atPath: callees, withIntermediateDirectories: true)
        folder.write("callees/1001.vcf", "BEGIN:VCARD\nVERSION:3.0\nFN:Dentist\nTEL:+8613800138000\nEND:VCARD\n")
        folder.write("callees/1002.csv", "name,number\nMum (Bob's),+8613911112222\n")
        folder.write("callees/+8613500000000.csv", "name,number\nPlumber,+8613000000000\n")
        folder.write("callees/1002.vcf", "BEGIN:VCARD\nVERSION:3.0\nFN:Shadowed\nTEL:+8613000000000\nEND:VCARD\n")
        folder.write("callees/README.txt", "not contacts\n")
        folder.write("callees/.hidden.csv", "name,number\nHidden,+8613000000000\n")
        let s = try set(["contacts-dir = callees"])
        let csv = folder.file("contacts.csv")
        // The callee's own contact beats the directory and the global contacts.
        XCTAssertEqual(decide(s, "+8613800138000", callee: "1001"), "contact | Dentist | \(callees)/1001.vcf")
        XCTAssertEqual(decide(s, "+8613800138000", callee: "1001;phone-context=pbx"), "contact | Dentist | \(callees)/1001.vcf")
        XCTAssertEqual(decide(s, "+8613800138000", callee: "1002"), "blocked | Fraud | main")
        XCTAssertEqual(decide(s, "+8613800138000"), "blocked | Fraud | main")
        XCTAssertEqual(decide(s, "+8613911112222", callee: "1002"), "contact | Mum (Bob's) | \(callees)/1002.csv")
        XCTAssertEqual(decide(s, "+8613911112222", callee: "1001"), "contact | Mum | \(csv)", "then the global contacts")
        // 1002.vcf comes after 1002.csv: skipped.
        XCTAssertEqual(decide(s, "+8613000000000", callee: "1002"), "unknown | - | -")
        // A number stem matches the callee however the Request-URI writes it.
        for callee in ["+8613500000000", "13500000000", "013500000000"] {
            XCTAssertEqual(decide(s, "+8613000000000", callee: callee), "contact | Plumber | \(callees)/+8613500000000.csv", callee)
        }
        XCTAssertEqual(s.calleeContacts.stems, ["+8613500000000", "1001", "1002"])

        var config = try ConfigParser.load(path: folder.file("lookupd.conf"))
        config.contactsDirectory = folder.file("missing")
        XCTAssertThrowsError(try ScreeningLoader.load(config, verify: false))
        config.contactsDirectory = callees
        let loaded = try ScreeningLoader.load(config, verify: false)
        XCTAssertTrue(loaded.warnings.contains { $0.description.contains("1002.vcf: skipped: 1002.csv already holds the contacts of callee 1002") }, "\(loaded.warnings)")
    }

    // MARK: Time windows

    func testTimeWindowSyntax() throws {
        func windows(_ text: String) throws -> ActiveWindows { try ActiveWindows.parse(text).get() }
        func at(_ text: String) -> LocalTime { LocalTime.parse(text)! }
        let evening = try windows("18:00-08:00")
        XCTAssertTrue(evening.contains(at("Mon 18:00")))
        XCTAssertTrue(evening.contains(at("Tue 07:59")))
        XCTAssertFalse(evening.contains(at("Tue 08:00")))
        XCTAssertFalse(evening.contains(at("Wed 12:00")))
        XCTAssertTrue(evening.contains(at("Sun 23:59")))

        let office = try windows("Mon-Fri 09:00-17:00")
        XCTAssertTrue(office.contains(at("Mon 09:00")))
        XCTAssertFalse(office.contains(at("Mon 17:00")))
        XCTAssertFalse(office.contains(at("Sat 10:00")))
        XCTAssertTrue(office.contains(at("Fri 16:59")))

        // Overnight windows belong to the day they start: Friday night runs into Saturday.
        let nights = try windows("Mon-Fri 18:00-08:00")
        XCTAssertTrue(nights.contains(at("Sat 07:00")))
        XCTAssertFalse(nights.contains(at("Mon 07:00")))
        XCTAssertTrue(nights.contains(at("Tue 07:00")))

        let several = try windows("Sat-Sun, Mon-Fri 00:00-09:00, Mon-Fri 17:00-24:00")
        XCTAssertTrue(several.contains(at("Sun 12:00")))
        XCTAssertTrue(several.contains(at("Wed 23:59")))
        XCTAssertFalse(several.contains(at("Wed 12:00")))
        let wrap = try windows("Fri-Mon 12:00-13:00")
        XCTAssertTrue(wrap.contains(at("Sun 12:30")))
        XCTAssertFalse(wrap.contains(at("Wed 12:30")))
        XCTAssertTrue(try windows("saturday").contains(at("Sat 00:00")))

        for bad in ["", "25:00-08:00", "18:00", "09:00-09:00", "Mon-Fry 09:00-17:00", "Mon 9-17", "09:60-10:00", "Mon Tue 09:00-10:00"] {
            XCTAssertThrowsError(try ActiveWindows.parse(bad).get(), bad)
        }
        XCTAssertEqual(LocalTime(localSeconds: 0).description, "Thu 00:00", "1970-01-01 was a Thursday")
        XCTAssertEqual(LocalTime(localSeconds: 1_700_000_000).description, "Tue 22:13")
        XCTAssertEqual(LocalTime(localSeconds: -60).description, "Wed 23:59")
    }

    func testDirectoryActiveWindows() throws {
        let s = try set(["time-zone = UTC"], directories: ["main.lkd name=main", "tele.lkd name=tele active=\"Mon-Fri 18:00-08:00, Sat-Sun\""])
        XCTAssertTrue(s.usesTime)
        XCTAssertEqual(decide(s, "+8613700000000", at: "Mon 19:00"), "blocked | Evening Telemarketer | tele")
        XCTAssertEqual(decide(s, "+8613700000000", at: "Sat 12:00"), "blocked | Evening Telemarketer | tele")
        XCTAssertEqual(decide(s, "+8613700000000", at: "Mon 12:00"), "unknown | - | - | inactive=tele")
        XCTAssertEqual(decide(s, "+8618600000000", at: "Mon 12:00"), "contact | Bank Friend | \(folder.file("contacts.csv"))")
        XCTAssertEqual(decide(s, "+8613800138000", at: "Mon 12:00"), "blocked | Fraud | main")
        XCTAssertEqual(decide(s, "+8613700000000"), "blocked | Evening Telemarketer | tele", "no time given: every window counts as open")
    }

    func testPolicyActiveWindows() throws {
        let s = try set(["anonymous-callers = block active=22:00-07:00", "invalid-callers = label Junk active=\"Sat-Sun\""])
        XCTAssertEqual(decide(s, "anonymous", at: "Wed 23:00"), "blocked | - | policy:anonymous-callers | policy=anonymous-callers")
        XCTAssertEqual(decide(s, "anonymous", at: "Wed 12:00"), "anonymous | - | -")
        XCTAssertEqual(decide(s, "101", at: "Sun 12:00"), "invalid | Junk | policy:invalid-callers | policy=invalid-callers")
        XCTAssertEqual(decide(s, "101", at: "Mon 12:00"), "invalid | - | -")
    }

    func testZoneRules() throws {
        // A POSIX zone string needs no tz database: China Standard Time, UTC+8.
        let china = try XCTUnwrap(ZoneRules(posix: "CST-8"))
        XCTAssertEqual(china.localTime(utc: 1_700_000_000).description, "Wed 06:13")
        XCTAssertEqual(china.localTime(utc: 0).description, "Thu 08:00")
        XCTAssertEqual(ZoneRules.utc.localTime(utc: 1_700_000_000).description, "Tue 22:13")
    }

    // MARK: Configuration

    func testPolicyKeys() throws {
        let c = try ConfigParser.parse("""
        directory = tele.lkd active="Mon-Fri 18:00-08:00"
        anonymous-callers = label "Withheld" active=22:00-07:00
        invalid-callers = block
        verstat-failed = label
        verstat-no-validation = allow
        verstat-failed-contacts = ignore
        bypass = 110, 8*
        bypass = +8613800138000
        time-zone = CST-8
        contacts-dir = callees
        """, path: "/etc/lookupd/lookupd.conf")
        XCTAssertEqual(c.directories[0].active?.text, "Mon-Fri 18:00-08:00")
        XCTAssertEqual(c.policies.anonymous, PolicySetting(.label(Array("Withheld".utf8)), active: try ActiveWindows.parse("22:00-07:00").get()))
        XCTAssertEqual(c.policies.invalid.action, .block)
        XCTAssertEqual(c.policies.verstatFailed.action, .label(Array("Unverified".utf8)))
        XCTAssertEqual(c.policies.verstatNoValidation.action, .allow)
        XCTAssertTrue(c.policies.distrustContactsOnFailedValidation)
        XCTAssertEqual(c.policies.bypass.items, ["110", "8*", "+8613800138000"])
        XCTAssertEqual(c.timeZone, "CST-8")
        XCTAssertEqual(c.contactsDirectory, "/etc/lookupd/callees")

        func error(_ text: String) -> String {
            do { _ = try ConfigParser.parse(text, path: "l.conf"); return "parsed" } catch { return error.description }
        }
        XCTAssertEqual(error("anonymous-callers = deny"), "l.conf:1: anonymous-callers: expected allow, block or label [TEXT]")
        XCTAssertEqual(error("invalid-callers = label Two Words"), "l.conf:1: invalid-callers: unexpected 'Words' (a label with spaces needs quotes; options: active=)")
        XCTAssertEqual(error("verstat-failed = label \"bad\u{7}\""), "l.conf:1: verstat-failed: bad label: label contains the control character U+0007")
        XCTAssertEqual(error("verstat-failed-contacts = maybe"), "l.conf:1: verstat-failed-contacts: expected trust or ignore")
        XCTAssertEqual(error("bypass = 110, abc"), "l.conf:1: bypass: 'abc' is not a number or a number prefix (digits, optionally with + and a trailing *)")
        XCTAssertEqual(error("country-code = 44\nbypass = +8612*\nbypass = +86"), "l.conf:3: bypass: '+86' is not an E.164 number: only 2 digits after '+' or the international prefix")
        XCTAssertEqual(error("time-zone = Mars/Olympus_Mons"), "l.conf:1: time-zone: unknown time zone 'Mars/Olympus_Mons' (expected a name from /usr/share/zoneinfo such as Asia/Shanghai, or UTC)")
        XCTAssertTrue(error("directory = x.lkd active=9-17").hasPrefix("l.conf:1: directory: active=: '9-17' is not a time window"))
        XCTAssertEqual(error("anonymous-callers = block active=Mon"), "parsed")
        XCTAssertEqual(error("anonymous-callers = bloc"), "l.conf:1: anonymous-callers: expected allow, block or label [TEXT]")
        XCTAssertEqual(error("anonymus-callers = block"), "l.conf:1: unknown key 'anonymus-callers' (did you mean 'anonymous-callers'?)")
    }
}
