import Foundation
import XCTest

/// Issue 7.6: the bash completion offers every subcommand and every option
/// the code knows (taken from `lookupd --help` and each `--help`), and
/// nothing else.
final class CompletionTests: CLITestCase {
    static let script = ManualTests.repository + "/completion/lookupd.bash"

    /// Runs `_lookupd` for the words typed so far (the last one being completed).
    private func complete(_ words: [String]) throws -> [String] {
        let quoted = words.map { "'\($0)'" }.joined(separator: " ")
        let program = "source '\(Self.script)'; COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _lookupd; printf '%s\\n' \"${COMPREPLY[@]}\""
        let result = try lookupdShell(program)
        return result.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    }

    private func lookupdShell(_ program: String) throws -> String {
        let out = file("completion-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(atPath: out) }
        let result = try runCommand("/bin/bash", ["--norc", "--noprofile", "-c", program + " > '\(out)'"], folder: folder.path, timeout: 60)
        XCTAssertEqual(result.status, 0, "\(program)\n\(result.summary)")
        return String(decoding: read(out), as: UTF8.self)
    }

    func testCompletesEverySubcommandAndOption() throws {
        let overview = try lookupd(["--help"]).stdout
        let commands = overview.split(separator: "\n").filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .map { String($0.dropFirst(2).prefix { $0 != " " }) }
        XCTAssertEqual(Set(try complete(["lookupd", ""])), Set(commands + ["--help", "--version"]))
        XCTAssertEqual(try complete(["lookupd", "co"]).sorted(), ["compact", "compile"])

        let option = try NSRegularExpression(pattern: #"(?<![\w-])--[a-z][a-z-]*[a-z]"#)
        for command in commands {
            // The options a command's help lists: its usage lines and its option table.
            let help = try lookupd([command, "--help"]).stdout.split(separator: "\n")
                .filter { $0.hasPrefix("Usage:") || $0.hasPrefix("       lookupd") || $0.drop { $0 == " " }.hasPrefix("-") }
                .joined(separator: "\n")
            let documented = Set(option.matches(in: help, range: NSRange(help.startIndex..., in: help)).map { String(help[Range($0.range, in: help)!]) })
            XCTAssertEqual(Set(try complete(["lookupd", command, "--"])), documented.union(["--help"]), "options of \(command) (every one has --help)")
        }
        // Option values.
        XCTAssertEqual(try complete(["lookupd", "compile", "--format", ""]).sorted(), ["csv", "json", "text", "vcard"])
        XCTAssertEqual(try complete(["lookupd", "log", "--since", "1"]).sorted(), ["15m", "1h"])
        write("main.lkd", "x")
        write("notes.txt", "x")
        XCTAssertEqual(try complete(["lookupd", "check", "ma"]), ["main.lkd"])
    }
}
