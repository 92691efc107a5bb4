import Foundation
import XCTest

/// `lookupd query`: text and JSON answers, standard input, errors.
final class QueryCommandTests: CLITestCase {
    var config: String!
    var contacts: String { file("friends.csv") }

    override func setUpWithError() throws {
        try super.setUpWithError()
        try compileCSV("""
        number,action,label
        +8613800138000,block,Fraud Risk
        +8613911112222,block,Telemarketing
        +8613812345678,identify,"Pizza ""Palace"", Haidian"
        01059000000,identify,Beijing Municipal Hospital
        +8613500000000,block,
        +86170*,block,Virtual Operator Range
        +861705555*,identify,Known Virtual Operator
        """, to: "operator.lkd")
        try compileCSV("number,action,label\n+8613500000000,identify,Courier\n+8613600000000,identify,Community Label\n", to: "community.lkd")
        write("friends.csv", "name,number\nMum,139 1111 2222\n")
        config = write("lookupd.conf", """
        contacts = friends.csv
        directory = operator.lkd name=operator
        directory = community.lkd name=community
        """)
    }

    func testTextAnswers() throws {
        let inputs = ["+8613800138000", "013800138000", "sip:+8617012345678@10.0.0.1;user=phone", "+8617055551234",
                      "13911112222", "+8613500000000", "+8613600000000", "+8613900000000", "anonymous", "101", "", "abc"]
        let r = try lookupd(["query", "--config", config] + inputs)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stderr, "")
        XCTAssertEqual(r.stdoutLines, [
            "+8613800138000\t+8613800138000\tblocked\tFraud Risk\toperator\texact",
            "013800138000\t+8613800138000\tblocked\tFraud Risk\toperator\texact",
            "sip:+8617012345678@10.0.0.1;user=phone\t+8617012345678\tblocked\tVirtual Operator Range\toperator\tprefix +86170*",
            "+8617055551234\t+8617055551234\tidentified\tKnown Virtual Operator\toperator\tprefix +861705555*",
            "13911112222\t+8613911112222\tcontact\tMum\t\(contacts)\tcontact",
            "+8613500000000\t+8613500000000\tblocked\tCourier\toperator\texact",
            "+8613600000000\t+8613600000000\tidentified\tCommunity Label\tcommunity\texact",
            "+8613900000000\t+8613900000000\tunknown\t-\t-\t-",
            "anonymous\t-\tanonymous\t-\t-\t-",
            "101\t-\tinvalid\t-\t-\t3 digits is too short for a number of CN (+86), which has 7 to 12 digits after the country code (an internal extension or service code?)",
            "-\t-\tinvalid\t-\t-\tempty caller number",
            "abc\t-\tinvalid\t-\t-\tcontains letters",
        ])
    }

    func testJSONAnswers() throws {
        let tricky = "\"Quote\\\" <Back\\\\slash>\" <sip:+8613812345678@pbx>"
        let r = try lookupd(["query", "--json", "--config", config, "+8613800138000", "13911112222", "+8617055551234",
                             "+8613900000000", "anonymous", "1001", tricky, "+86\t138 0013 8000"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let answers = jsonLines(r.stdout)
        XCTAssertEqual(answers.count, 8)
        func row(_ i: Int) -> [String] {
            ["input", "number", "verdict", "label", "source", "match", "reason"].map { field(answers[i], $0) }
        }
        XCTAssertEqual(row(0), ["+8613800138000", "+8613800138000", "blocked", "Fraud Risk", "operator", "+8613800138000", "null"])
        XCTAssertEqual(row(1), ["13911112222", "+8613911112222", "contact", "Mum", contacts, "+8613911112222", "null"])
        XCTAssertEqual(row(2), ["+8617055551234", "+8617055551234", "identified", "Known Virtual Operator", "operator", "+861705555*", "null"])
        XCTAssertEqual(row(3), ["+8613900000000", "+8613900000000", "unknown", "null", "null", "null", "null"])
        XCTAssertEqual(row(4), ["anonymous", "null", "anonymous", "null", "null", "null", "null"])
        XCTAssertEqual(row(5), ["1001", "null", "invalid", "null", "null", "null",
                                "4 digits is too short for a number of CN (+86), which has 7 to 12 digits after the country code (an internal extension or service code?)"])
        // Quotes and backslashes in the input and in labels are escaped, not broken.
        XCTAssertEqual(row(6), [tricky, "+8613812345678", "identified", "Pizza \"Palace\", Haidian", "operator", "+8613812345678", "null"])
        XCTAssertEqual(row(7), ["+86\t138 0013 8000", "+8613800138000", "blocked", "Fraud Risk", "operator", "+8613800138000", "null"])
        XCTAssertTrue(answers.allSatisfy { $0.count == 14 }, "exactly the documented fields (allowed and overridden too)")
        XCTAssertTrue(answers.allSatisfy { $0["attribution"] != nil }, "attribution is a field of every answer (null when off)")
        XCTAssertTrue(answers.allSatisfy { field($0, "record") == "null" && field($0, "revision") == "null" && field($0, "policy") == "null"
            && field($0, "inactive") == "null" })
    }

    func testStandardInputIsAnsweredInOrder() throws {
        // A deterministic mix of every kind of answer, in a scrambled order.
        let kinds = ["+8613800138000", "013800138000", "+8613900000000", "anonymous", "101", "+8617012345678",
                     "13911112222", "+8613600000000", "sip:+8613500000000@h", "", "abc", "+8617055551234"]
        var inputs: [String] = []
        for i in 0..<3000 { inputs.append(kinds[(i * 5 + i / kinds.count) % kinds.count]) }
        var unique: [String] = []
        for i in stride(from: 0, to: inputs.count, by: 100) {
            // Inputs that differ from line to line, so any reordering shows.
            unique.append("+86139\(String(format: "%08d", i))")
        }
        inputs += unique
        // CRLF line endings and a last line without a newline are fine.
        let stdin = inputs.dropLast().joined(separator: "\r\n") + "\r\n" + inputs.last!
        let r = try lookupd(["query", "--json", "--config", config, "-"], stdin: Data(stdin.utf8))
        XCTAssertEqual(r.status, 0, r.stderr)
        let answers = jsonLines(r.stdout)
        XCTAssertEqual(answers.count, inputs.count)
        XCTAssertEqual(answers.map { field($0, "input") }, inputs)
        // Each kind gets the same answer wherever it appears.
        var byInput: [String: String] = [:]
        for answer in answers {
            let summary = ["number", "verdict", "label", "source"].map { field(answer, $0) }.joined(separator: "|")
            if let earlier = byInput[field(answer, "input")] { XCTAssertEqual(earlier, summary) }
            byInput[field(answer, "input")] = summary
        }
        XCTAssertEqual(byInput["013800138000"], "+8613800138000|blocked|Fraud Risk|operator")
        XCTAssertEqual(byInput["sip:+8613500000000@h"], "+8613500000000|blocked|Courier|operator")
        XCTAssertEqual(byInput[""], "null|invalid|null|null", "an empty caller number is invalid (invalid-callers)")

        // Text answers from standard input match positional ones.
        let text = try lookupd(["query", "--config", config, "-"], stdin: Data((kinds.joined(separator: "\n") + "\n").utf8))
        let positional = try lookupd(["query", "--config", config] + kinds)
        XCTAssertEqual(text.stdout, positional.stdout)
        XCTAssertEqual(text.stdoutLines.count, kinds.count)
    }

    /// Standard input is screened 256 lines at a time, each chunk's search paths warmed
    /// first: the answers, and the refusals of a damaged directory, are byte for byte those
    /// of the same numbers given as arguments, across chunk boundaries.
    func testStandardInputInChunksAnswersAsArguments() throws {
        let kinds = ["+8613800138000", "013800138000", "+8613900000000", "anonymous", "101", "+8617012345678",
                     "13911112222", "+8613600000000", "sip:+8613500000000@h", "abc", "+8617055551234", "+8613812345678"]
        var inputs: [String] = []
        for i in 0..<700 {
            inputs.append(i % 3 == 0 ? "+86139\(String(format: "%08d", i * 7919 % 100_000))" : kinds[(i * 5 + i / kinds.count) % kinds.count])
        }
        let stdin = Data((inputs.joined(separator: "\n") + "\n").utf8)
        for json in [false, true] {
            let flags = json ? ["--json"] : []
            let piped = try lookupd(["query", "--config", config] + flags + ["-"], stdin: stdin)
            let given = try lookupd(["query", "--config", config] + flags + inputs)
            XCTAssertEqual(piped.status, 0, piped.stderr)
            XCTAssertEqual(piped.stdout, given.stdout)
            XCTAssertEqual(piped.stdoutLines.count, inputs.count)
        }

        var bytes = [UInt8](read(file("operator.lkd")))
        bytes[256 + 8 * 2] ^= 0x01  // a key slot every search reads
        write("operator.lkd", Data(bytes))
        let piped = try lookupd(["query", "--config", config, "-"], stdin: stdin)
        let given = try lookupd(["query", "--config", config] + inputs)
        XCTAssertEqual(piped.status, 1)
        XCTAssertEqual(piped.stdout, given.stdout)
        XCTAssertEqual(piped.stderr, given.stderr)
        XCTAssertTrue(piped.stderr.contains("'+8613800138000' not screened"), piped.stderr)
        XCTAssertTrue(piped.stdout.contains("anonymous"), "numbers no directory decides are still answered")
    }

    func testDirectoryAndContactsOptionsOverrideTheConfig() throws {
        var r = try lookupd(["query", "--config", config, "--directory", file("community.lkd"), "+8613800138000", "+8613600000000", "13911112222"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdoutLines.map { $0.split(separator: "\t").dropFirst().prefix(4).joined(separator: "|") }, [
            "+8613800138000|unknown|-|-",
            "+8613600000000|identified|Community Label|community.lkd",
            // --directory replaces only the directories: the configured contacts stay.
            "+8613911112222|contact|Mum|\(contacts)",
        ])
        // Several --directory options: the order given is the priority order.
        r = try lookupd(["query", "--config", planConfig, "--directory", file("community.lkd"), "--directory", file("operator.lkd"), "--json", "+8613500000000"])
        XCTAssertEqual(jsonLines(r.stdout).map { "\(field($0, "verdict"))|\(field($0, "label"))|\(field($0, "source"))" },
                       ["blocked|Courier|operator.lkd"])
        r = try lookupd(["query", "--config", planConfig, "--contacts", contacts, "--json", "+8613911112222"])
        XCTAssertEqual(jsonLines(r.stdout).map { "\(field($0, "verdict"))|\(field($0, "label"))" }, ["contact|Mum"])
    }

    func testConfigFromTheEnvironment() throws {
        let r = try lookupd(["query", "+8613800138000"], environment: ["LOOKUPD_CONFIG": config])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "+8613800138000\t+8613800138000\tblocked\tFraud Risk\toperator\texact\n")
    }

    func testNoConfigurationAtAll() throws {
        // Only meaningful where no system-wide configuration is installed.
        guard !FileManager.default.fileExists(atPath: "/etc/lookupd/lookupd.conf") else { return }
        let r = try lookupd(["query", "+8613800138000"], environment: ["LOOKUPD_CONFIG": ""])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: no configuration file: /etc/lookupd/lookupd.conf does not exist; pass --config FILE\n")
    }

    func testErrors() throws {
        // A configuration naming no lists.
        var r = try lookupd(["query", "--config", planConfig, "+8613800138000"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: \(planConfig) names no directory and no contacts; every number would be unknown\n")
        // A missing directory.
        r = try lookupd(["query", "--config", planConfig, "--directory", file("missing.lkd"), "+8613800138000"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: \(file("missing.lkd")): cannot open: No such file or directory\n")
        XCTAssertEqual(r.stdout, "")
        // A truncated directory.
        let bytes = read(file("operator.lkd"))
        let cut = write("cut.lkd", bytes.prefix(bytes.count - 10))
        r = try lookupd(["query", "--config", planConfig, "--directory", cut, "+8613800138000"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: \(cut): truncated: \(bytes.count - 10) bytes, the header says \(bytes.count)\n")
        XCTAssertEqual(r.stdout, "")
        // A missing config file.
        r = try lookupd(["query", "--config", file("nope.conf"), "+8613800138000"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "lookupd: error: \(file("nope.conf")): cannot open: No such file or directory\n")
        // Contacts warnings go to standard error; answers still come.
        write("messy.csv", "name,number\nMum,+8613911112222\nExt,101\n")
        r = try lookupd(["query", "--config", planConfig, "--contacts", file("messy.csv"), "+8613911112222"])
        XCTAssertEqual(r.status, 0)
        XCTAssertEqual(r.stderr, "lookupd: warning: \(file("messy.csv")):3: '101' skipped: 3 digits is too short for a number of CN (+86), which has 7 to 12 digits after the country code (an internal extension or service code?)\n")
        XCTAssertEqual(r.stdoutLines.count, 1)
    }
}
