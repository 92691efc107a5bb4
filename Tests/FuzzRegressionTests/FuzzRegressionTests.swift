import FuzzTargets
import Foundation
import TestSupport
import XCTest

/// Every input a fuzzer ever crashed on (Tests/Fixtures/fuzz/regressions/TARGET/)
/// and every seed (Tests/Fixtures/fuzz/seeds/TARGET/), replayed through the
/// same entry points lookupd-fuzz drives. They are replayed by `lookupd-fuzz`
/// (built without libFuzzer it replays files) in a child process, so an input
/// that crashes again fails its test, naming the input, and the run goes on.
final class FuzzRegressionTests: XCTestCase {
    static let fuzzFixtures = fixturesDirectory.appendingPathComponent("fuzz")

    func inputs(_ kind: String, _ target: FuzzTarget) throws -> [String] {
        let folder = Self.fuzzFixtures.appendingPathComponent(kind).appendingPathComponent(target.rawValue)
        guard FileManager.default.fileExists(atPath: folder.path) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { !$0.hasPrefix(".") }.sorted().map { folder.path + "/" + $0 }
    }

    /// Replays every regression and seed of `target` in one child process; when
    /// that does not end well, each input alone, so every failing one is named.
    func replay(_ target: FuzzTarget, replayer: String? = fuzzProgram.path, file: StaticString = #filePath, line: UInt = #line) throws {
        guard let replayer else { return XCTFail(fuzzProgram.missing, file: file, line: line) }
        let seeds = try inputs("seeds", target)
        XCTAssertFalse(seeds.isEmpty, "no seed corpus for \(target.rawValue)", file: file, line: line)
        let files = try inputs("regressions", target) + seeds
        let folder = TemporaryFolder("lookupd-fuzz-replay")
        defer { folder.cleanup() }
        // The Swift backtracer would take seconds per crash; the replay names the input.
        let environment = ["SWIFT_BACKTRACE": "enable=no"]
        let whole = try runCommand(replayer, [target.rawValue] + files, folder: folder.path, timeout: 600, environment: environment)
        if whole.exitedNormally && whole.status == 0 && whole.stdout.contains("\(target.rawValue): \(files.count) inputs replayed") { return }
        var failing = 0
        for input in files {
            let one = try runCommand(replayer, [target.rawValue, input], folder: folder.path, timeout: 60, environment: environment)
            guard !(one.exitedNormally && one.status == 0) else { continue }
            failing += 1
            let how = one.timedOut ? "hung (killed after 60 s)" : one.exitedNormally ? "exit status \(one.status)" : "crashed (signal \(one.status))"
            XCTFail("\(target.rawValue): \(input): \(how)\n\(one.stderr.suffix(4000))", file: file, line: line)
        }
        if failing == 0 {
            XCTFail("\(target.rawValue): replaying all \(files.count) inputs failed, but no input alone does:\n\(whole.summary.suffix(4000))",
                    file: file, line: line)
        }
    }

    func testRequestPath() throws { try replay(.requestPath) }
    func testProxyPath() throws { try replay(.proxyPath) }
    func testDirectory() throws { try replay(.directory) }
    func testConfig() throws { try replay(.config) }
    func testCSV() throws { try replay(.csv) }
    func testJSON() throws { try replay(.json) }
    func testVCard() throws { try replay(.vcard) }
    func testJournal() throws { try replay(.journal) }

    /// libFuzzer reads the dictionary; a typo would make it refuse to start.
    func testDictionaryParses() throws {
        let text = try String(contentsOf: Self.fuzzFixtures.appendingPathComponent("sip.dict"), encoding: .utf8)
        var entries = 0
        for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.trimmingCharacters(in: .whitespaces).isEmpty {
            XCTAssertNotNil(line.range(of: #"^[A-Za-z0-9_]*="([^"\\]|\\\\|\\"|\\x[0-9A-Fa-f]{2})*"$"#, options: .regularExpression),
                            "bad dictionary line: \(line)")
            entries += 1
        }
        XCTAssertGreaterThan(entries, 50)
    }

    // MARK: A regression that comes back

    private var captured: [String]?

    /// While a test captures, failures are collected instead of recorded.
    override func recordFailure(withDescription description: String, inFile filePath: String, atLine lineNumber: Int, expected: Bool) {
        if captured != nil {
            captured!.append(description)
        } else {
            super.recordFailure(withDescription: description, inFile: filePath, atLine: lineNumber, expected: expected)
        }
    }

    /// A replayer that crashes on one input, as lookupd-fuzz would if a fixed crash came
    /// back: that target's test fails naming the input and how it ended, and this process,
    /// which ran it, goes on.
    func testACrashingInputIsATestFailureNotACrash() throws {
        guard let real = fuzzProgram.path else { return XCTFail(fuzzProgram.missing) }
        let folder = TemporaryFolder("lookupd-fuzz-crash")
        defer { folder.cleanup() }
        let victim = try inputs("seeds", .csv)[1]
        let replayer = folder.write("crashing-replayer", """
            #!/bin/sh
            for input; do [ "$input" = '\(victim)' ] && kill -s SEGV $$; done
            exec '\(real)' "$@"

            """)
        chmod(replayer, 0o755)
        captured = []
        try replay(.csv, replayer: replayer)
        let failures = captured ?? []
        captured = nil
        XCTAssertEqual(failures.count, 1, "\(failures)")
        XCTAssertTrue(failures.first?.contains("csv: \(victim): crashed (signal 11)") ?? false, "\(failures)")

        captured = []
        try replay(.json, replayer: replayer)
        XCTAssertEqual(captured ?? ["?"], [], "the other targets still pass")
        captured = nil
    }
}
