import Foundation
import XCTest

/// Issue 15 end to end through the CLI: `country = XX` and `--country`, the plan recorded in
/// directory files and said when it is the default, numbers that cannot exist, attribution.
final class NumberingCommandTests: CLITestCase {
    /// The issue's "done when", command by command.
    func testTheIssuesCommands() throws {
        let directory = try compileCSV("number,action,label\n+8613800138000,block,Fraud Risk\n", to: "D.lkd")
        var r = try lookupd(["query", "--json", "--country", "IT", "--directory", directory, "02 1234 5678"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(jsonLines(r.stdout).map { field($0, "number") }, ["+390212345678"])
        XCTAssertTrue(r.stderr.contains("D.lkd: compiled under the numbering plan CN (+86); numbers are read here under IT (+39"), r.stderr)

        // A configuration holding only country = US (and a directory).
        let us = write("us.conf", "country = US\ndirectory = \(directory)\n")
        r = try lookupd(["query", "--json", "--config", us, "(202) 555-0143", "1-202-555-0143", "011 44 20 7946 0958",
                         "+1 200 555 0143", "+1 202 555 0143"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let answers = jsonLines(r.stdout)
        XCTAssertEqual(answers.map { field($0, "number") }, ["+12025550143", "+12025550143", "+442079460958", "+12005550143", "+12025550143"])
        XCTAssertEqual(answers.map { field($0, "verdict") }, ["unknown", "unknown", "unknown", "invalid", "unknown"])
        XCTAssertEqual(field(answers[3], "reason"), "no such number range in the numbering plan of US (+1) (libphonenumber): the number cannot exist")

        r = try lookupd(["query", "--json", "--attribution", "zh", "--directory", directory, "+8613800138000", "+8613000000001"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let attributed = jsonLines(r.stdout)
        XCTAssertEqual(field(attributed[0], "attribution"), "北京市 中国移动")
        XCTAssertTrue(field(attributed[1], "attribution").contains("中国联通"), field(attributed[1], "attribution"))
        // In text, a seventh field.
        r = try lookupd(["query", "--attribution", "en", "--directory", directory, "+8613800138000"])
        XCTAssertEqual(r.stdout, "+8613800138000\t+8613800138000\tblocked\tFraud Risk\tD.lkd\texact\tBeijing China Mobile\n")
        // Off by default: the field is there, null.
        r = try lookupd(["query", "--json", "--directory", directory, "+8613800138000"])
        XCTAssertEqual(field(jsonLines(r.stdout)[0], "attribution"), "null")
    }

    /// No plan named anywhere: the built-in default, said; the file records it; inspect shows it.
    func testTheDefaultPlanIsNeverSilent() throws {
        let empty = write("empty.conf", "# no plan\n")
        let source = write("d.csv", "number,action,label\n013800138000,block,Fraud\n")
        var r = try lookupd(["compile", "--config", empty, source, "-o", file("d.lkd")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stderr, "lookupd: note: no numbering plan named (--country XX, or country = XX in the configuration): reading numbers under CN (+86, trunk prefix 0, international prefix 00), the built-in default\n")
        XCTAssertTrue(r.stdout.contains("; numbering plan CN (+86, trunk prefix 0, international prefix 00)\n"), r.stdout)
        r = try lookupd(["inspect", file("d.lkd")])
        XCTAssertTrue(r.stdout.contains("numbering plan:     CN (+86), the built-in default (no plan was named); libphonenumber metadata "), r.stdout)
        r = try lookupd(["inspect", "--json", file("d.lkd")])
        let plan = try XCTUnwrap(jsonLines(r.stdout).first?["numbering_plan"] as? [String: Any])
        XCTAssertEqual(plan["region"] as? String, "CN")
        XCTAssertEqual(plan["country_code"] as? Int, 86)
        XCTAssertEqual(plan["default"] as? Bool, true)
        // A named plan is recorded as named.
        let gb = write("gb.csv", "number,action,label\n07400 123456,block,Spam\n")
        r = try lookupd(["compile", "--country", "GB", "-q", gb, "-o", file("gb.lkd")])
        XCTAssertEqual(r.stderr, "")
        r = try lookupd(["inspect", file("gb.lkd")])
        XCTAssertTrue(r.stdout.contains("numbering plan:     GB (+44); libphonenumber metadata "), r.stdout)
        XCTAssertTrue(try lookupd(["inspect", "--json", file("gb.lkd")]).stdout.contains("\"numbering_plan\":{\"region\":\"GB\""))
    }

    /// add and remove read NUMBER under the plan the directory records when none is named.
    func testAddUsesTheDirectorysPlan() throws {
        let empty = write("empty.conf", "# no plan\n")
        let source = write("us.csv", "number,action,label\n(202) 555-0143,block,Robocall\n")
        XCTAssertEqual(try lookupd(["compile", "--country", "US", "-q", source, "-o", file("us.lkd")]).status, 0)
        var r = try lookupd(["add", "(212) 555-0100", "--label", "NY Office", "--to", file("us.lkd"), "--config", empty])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stderr, "")
        XCTAssertTrue(r.stdout.hasPrefix("added +12125550100 to us.lkd"), r.stdout)
        r = try lookupd(["remove", "202-555-0143", "--from", file("us.lkd"), "--config", empty])
        XCTAssertEqual(r.status, 0, r.stderr)
        // A plan named that differs from the file's: read under it, with a warning.
        r = try lookupd(["add", "+8613800138000", "--block", "--to", file("us.lkd"), "--country", "CN"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("warning: \(file("us.lkd")): compiled under the numbering plan US (+1)"), r.stderr)
    }

    func testCountryOptionErrorsAndOverrides() throws {
        var r = try lookupd(["query", "--country", "XX", "+8613800138000"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains("'XX' is not a region libphonenumber knows"), r.stderr)
        r = try lookupd(["query", "--country", "US", "--country-code", "44", "+8613800138000"])
        XCTAssertEqual(r.status, 2)
        XCTAssertTrue(r.stderr.contains("country code 44 is not US's (+1)"), r.stderr)
        r = try lookupd(["query", "--attribution", "klingon", "+8613800138000"])
        XCTAssertEqual(r.status, 2)
        // An override on top of the country: an exit prefix of the operator's own.
        let directory = try compileCSV("number,action,label\n+442079460000,identify,London Office\n", to: "london.lkd")
        r = try lookupd(["query", "--country", "CN", "--international-prefix", "9", "--directory", directory, "9 44 20 7946 0000"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("9 44 20 7946 0000\t+442079460000\tidentified\tLondon Office"), r.stdout)
    }

    /// A query with the numbering cache in place loads no libphonenumber (the loader's own
    /// list of the objects it maps, LD_DEBUG=files), and answers as the library-fed run did;
    /// a damaged cache is not read but rewritten.
    func testAWarmQueryLoadsNoLibphonenumber() throws {
        let directory = try compileCSV("number,action,label\n+8613800138000,block,Fraud Risk\n", to: "D.lkd")
        let environment = ["CACHE_DIRECTORY": file("cache"), "LD_DEBUG": "files"]
        let query = ["query", "--country", "CN", "--directory", directory, "+8613800138000", "138 0013 8000", "+1 200 555 0143"]
        let cold = try lookupd(query, environment: environment)
        XCTAssertEqual(cold.status, 0, cold.stderr)
        XCTAssertTrue(cold.stderr.contains("liblookupd-phonenumbers.so"), "LD_DEBUG names the bridge when it is loaded")
        XCTAssertTrue(cold.stderr.contains("libphonenumber.so"))
        let cache = file("cache/numbering-v1.cache")
        XCTAssertTrue(FileManager.default.fileExists(atPath: cache))
        let warm = try lookupd(query, environment: environment)
        XCTAssertEqual(warm.status, 0, warm.stderr)
        XCTAssertEqual(warm.stdout, cold.stdout)
        XCTAssertFalse(warm.stderr.contains("libphonenumber"), "a warm query loaded libphonenumber")
        XCTAssertFalse(warm.stderr.contains("liblookupd-phonenumbers"), "a warm query loaded the bridge")
        XCTAssertFalse(warm.stderr.contains("libprotobuf") || warm.stderr.contains("libicu"))

        var bytes = try XCTUnwrap(FileManager.default.contents(atPath: cache))
        bytes[bytes.count / 2] ^= 0x20
        try bytes.write(to: URL(fileURLWithPath: cache))
        let damaged = try lookupd(query, environment: environment)
        XCTAssertEqual(damaged.stdout, cold.stdout)
        XCTAssertTrue(damaged.stderr.contains("libphonenumber.so"), "a damaged cache was read")
        let version = try lookupd(["--version"], environment: ["CACHE_DIRECTORY": file("cache")])
        XCTAssertTrue(version.stdout.contains("numbering cache: read \(cache)\n"), version.stdout)
    }

    func testVersionNamesTheDataInUse() throws {
        let r = try lookupd(["--version"])
        let lines = r.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 4, r.stdout)
        XCTAssertTrue(lines[1].hasPrefix("numbering plans: libphonenumber.so"), r.stdout)
        XCTAssertTrue(lines[1].contains(" regions, metadata "), r.stdout)
        XCTAssertTrue(lines[2].hasPrefix("numbering cache: "), r.stdout)
        XCTAssertTrue(lines[3].hasPrefix("carrier names: python3-phonenumbers "), r.stdout)
    }
}
