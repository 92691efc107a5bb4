import Configuration
import Foundation
import XCTest

/// Issue 7.5: the manuals render without warnings and agree with the code:
/// lookupd.conf(5) documents exactly the keys ConfigParser accepts, with
/// their syntax; lookupd(8) has a section for every subcommand and names
/// every option its --help lists.
final class ManualTests: CLITestCase {
    static let repository = Repository.root.path
    static var manual8: String { repository + "/man/lookupd.8" }
    static var manual5: String { repository + "/man/lookupd.conf.5" }

    func testManualsRenderWithoutWarnings() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/man") else {
            return XCTFail("man is not installed (scripts/install-deps installs man-db and groff-base)")
        }
        for page in [Self.manual8, Self.manual5] {
            let result = try run("/usr/bin/man", ["--warnings", "-l", page], environment: ["MANWIDTH": "80", "LC_ALL": "C.UTF-8", "MANPAGER": "cat"])
            XCTAssertEqual(result.status, 0, "\(page): \(result.stderr)")
            XCTAssertEqual(result.stderr, "", "\(page) renders with warnings")
            XCTAssertTrue(result.stdout.contains("NAME"), result.stdout)
        }
    }

    func testConfigManualDocumentsExactlyTheKeysTheCodeAccepts() throws {
        let text = try String(contentsOfFile: Self.manual5, encoding: .utf8)
        // Each key is a tagged paragraph: \fBname\fR = \fISYNTAX\fR
        let entry = try NSRegularExpression(pattern: #"^\\fB([^\\]+(?:\\-[^\\]+)*)\\fR = \\fI(.*)\\fR$"#, options: [.anchorsMatchLines])
        var documented: [(name: String, syntax: String)] = []
        for match in entry.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            let name = String(text[Range(match.range(at: 1), in: text)!])
            let syntax = String(text[Range(match.range(at: 2), in: text)!])
            documented.append((unroff(name), unroff(syntax)))
        }
        let code = ConfigParser.keys.map { ($0.name, $0.syntax) }
        let documentedNames = documented.map(\.name)
        XCTAssertEqual(Set(documentedNames).count, documentedNames.count, "a key documented twice")
        for key in code where !documentedNames.contains(key.0) { XCTFail("lookupd.conf(5) does not document '\(key.0)'") }
        for name in documentedNames where !code.contains(where: { $0.0 == name }) { XCTFail("lookupd.conf(5) documents '\(name)', which the code does not accept") }
        for (name, syntax) in documented {
            guard let key = code.first(where: { $0.0 == name }) else { continue }
            XCTAssertEqual(syntax, key.1, "syntax of '\(name)' in lookupd.conf(5)")
        }
    }

    func testCommandManualCoversEverySubcommandAndOption() throws {
        let manual = unroff(try String(contentsOfFile: Self.manual8, encoding: .utf8))
        // The subcommands `lookupd --help` lists, in its order, and the manual's sections.
        let overview = try lookupd(["--help"]).stdout
        let listed = overview.split(separator: "\n").filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .map { String($0.dropFirst(2).prefix { $0 != " " }) }
        XCTAssertGreaterThanOrEqual(listed.count, 13, overview)
        let sections = manual.components(separatedBy: "\n.SS \"lookupd ").dropFirst().map { section -> (String, String) in
            (String(section.prefix { $0 != " " && $0 != "\"" }), section.components(separatedBy: "\n.SH ")[0])
        }
        XCTAssertEqual(sections.map(\.0), listed, "lookupd(8) has one section per subcommand, in the order of lookupd --help")

        let option = try NSRegularExpression(pattern: #"(?<![\w-])--[a-z][a-z-]*[a-z]"#)
        func options(_ text: String) -> Set<String> {
            Set(option.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { String(text[Range($0.range, in: text)!]) })
        }
        for (command, section) in sections where listed.contains(command) {
            let help = try lookupd([command, "--help"])
            XCTAssertEqual(help.status, 0, "\(command) --help")
            let inHelp = options(help.stdout).subtracting(["--help"])
            let inManual = options(section)
            for o in inHelp.subtracting(inManual).sorted() { XCTFail("lookupd(8) does not mention \(command) \(o)") }
            for o in inManual.subtracting(inHelp).sorted() { XCTFail("lookupd(8) mentions \(command) \(o), which --help does not") }
        }
    }

    /// The roff escapes the manuals use, back to plain text.
    private func unroff(_ s: String) -> String {
        s.replacingOccurrences(of: "\\-", with: "-").replacingOccurrences(of: "\\e", with: "\\")
            .replacingOccurrences(of: "\\fB", with: "").replacingOccurrences(of: "\\fI", with: "").replacingOccurrences(of: "\\fR", with: "")
            .replacingOccurrences(of: "\\(dq", with: "\"")
    }

    /// Runs a tool with output through files (a full pipe cannot block it).
    private func run(_ executable: String, _ arguments: [String], environment: [String: String]) throws -> RunResult {
        try runCommand(executable, arguments, folder: folder.path, timeout: 120, environment: environment)
    }
}
