import Foundation
import XCTest

/// `--help`, usage errors and exit statuses.
final class UsageTests: CLITestCase {
    static let subcommands = ["query", "compile", "check", "inspect", "export"]

    func testHelpForEverySubcommand() throws {
        for command in Self.subcommands {
            for flag in ["--help", "-h"] {
                let r = try lookupd([command, flag])
                XCTAssertEqual(r.status, 0, "\(command) \(flag): \(r.stderr)")
                XCTAssertTrue(r.stdout.hasPrefix("Usage: lookupd \(command)"), "\(command) \(flag): \(r.stdout)")
                XCTAssertEqual(r.stderr, "", "\(command) \(flag)")
            }
            // `lookupd help COMMAND` prints the same text.
            let viaHelp = try lookupd(["help", command])
            XCTAssertEqual(viaHelp.status, 0)
            XCTAssertEqual(viaHelp.stdout, try lookupd([command, "--help"]).stdout, command)
        }
        // Help wins over missing arguments.
        let r = try lookupd(["compile", "--help", "-o", "x.lkd"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertFalse(exists(file("x.lkd")))
    }

    func testOverview() throws {
        for args in [["--help"], ["-h"], ["help"]] {
            let r = try lookupd(args)
            XCTAssertEqual(r.status, 0)
            XCTAssertTrue(r.stdout.contains("Usage: lookupd COMMAND"), r.stdout)
            for command in Self.subcommands { XCTAssertTrue(r.stdout.contains("\n  \(command) "), "\(command) missing from the overview") }
        }
        let version = try lookupd(["--version"])
        XCTAssertEqual(version.status, 0)
        XCTAssertTrue(version.stdout.hasPrefix("lookupd "), version.stdout)
        // No command at all: the overview on standard error, status 2.
        let none = try lookupd([])
        XCTAssertEqual(none.status, 2)
        XCTAssertEqual(none.stdout, "")
        XCTAssertTrue(none.stderr.contains("Usage: lookupd COMMAND"))
    }

    func testUnknownCommand() throws {
        let r = try lookupd(["serve-coffee"])
        XCTAssertEqual(r.status, 2)
        XCTAssertEqual(r.stderr, "lookupd: error: unknown command 'serve-coffee'; run 'lookupd --help' for the list\n")
        let typo = try lookupd(["inspcet"])
        XCTAssertEqual(typo.status, 2)
        XCTAssertEqual(typo.stderr, "lookupd: error: unknown command 'inspcet' (did you mean 'inspect'?); run 'lookupd --help' for the list\n")
    }

    func testUnknownOptionIsAUsageError() throws {
        for command in Self.subcommands {
            let r = try lookupd([command, "--bogus", "x"])
            XCTAssertEqual(r.status, 2, command)
            XCTAssertTrue(r.stderr.hasPrefix("lookupd: error: \(command): unknown option '--bogus'\n"), "\(command): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("Usage: lookupd \(command)"), "\(command): usage is shown")
            XCTAssertEqual(r.stdout, "", command)
            let short = try lookupd([command, "-z"])
            XCTAssertEqual(short.status, 2, command)
            XCTAssertTrue(short.stderr.hasPrefix("lookupd: error: \(command): unknown option '-z'"), short.stderr)
        }
    }

    func testOtherUsageErrors() throws {
        let cases: [([String], String)] = [
            (["compile", "a.csv"], "missing -o OUT.lkd"),
            (["compile", "-o", "out.lkd"], "give at least one SOURCE file"),
            (["compile", "a.csv", "-o"], "option --output needs a value"),
            (["compile", "a.csv", "-o", "a.csv"], "the output a.csv is also a source"),
            (["compile", "a.csv", "-o", "x.lkd", "-o", "y.lkd"], "option --output given more than once"),
            (["compile", "a.csv", "-o", "x.lkd", "--format", "xml"], "--format must be csv, json, text or vcard"),
            (["compile", "a.csv", "-o", "x.lkd", "--on-duplicate", "maybe"], "--on-duplicate must be error, first or last"),
            (["compile", "a.csv", "-o", "x.lkd", "--directory-version", "-1"], "--directory-version expects a whole number"),
            (["compile", "a.csv", "-o", "x.lkd", "--max-errors", "0"], "--max-errors expects a positive number"),
            (["compile", "a.csv", "-o", "x.lkd", "--quiet=yes"], "option --quiet takes no value"),
            (["compile", "a.csv", "-o", "x.lkd", "--country-code", "abc"], "--country-code expects 1 to 3 digits"),
            (["compile", "a.csv", "-o", "x.lkd", "--national-number-length", "x"], "--national-number-length expects MIN or MIN-MAX"),
            (["query"], "give at least one NUMBER, or - to read numbers from standard input"),
            (["query", "--json=1", "x"], "option --json takes no value"),
            (["check"], "give at least one FILE"),
            (["inspect"], "give one FILE"),
            (["inspect", "a.lkd", "b.lkd"], "give one FILE"),
            (["export"], "give one FILE"),
        ]
        for (args, message) in cases {
            let r = try lookupd(args)
            XCTAssertEqual(r.status, 2, "\(args): \(r.stderr)")
            XCTAssertTrue(r.stderr.hasPrefix("lookupd: error: \(args[0]): \(message)\n"), "\(args): \(r.stderr)")
        }
    }
}
