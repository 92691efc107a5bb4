import Foundation
import XCTest

/// `lookupd update` and `lookupd inspect` as an operator (or the systemd unit) runs them.
final class FeedCommandTests: FeedTestCase {
    var configPath: String { path("lookupd.conf") }

    func lookupd(_ arguments: [String], environment: [String: String] = [:]) throws -> RunResult {
        guard let binary = LookupdBinary.path else {
            XCTFail(lookupdProgram.missing)
            throw FeedTestError.failed("no lookupd")
        }
        var env = ["LOOKUPD_CONFIG": configPath]
        for (k, v) in environment { env[k] = v }
        // Not under systemd unless a test says so (the lines would carry journald priorities).
        return try runCommand(binary, arguments, folder: folder, environment: env, unsetting: environment["JOURNAL_STREAM"] == nil ? ["JOURNAL_STREAM"] : [])
    }

    func testUpdateInstallsReportsAndExitsZeroWithoutADaemon() throws {
        server.publish("spam.csv", FeedUpdateTests.listV1)
        let target = path("spam.lkd")
        _ = try config(["spamco \(server.url("f/spam.csv")) into=spam.lkd"])
        let first = try lookupd(["update", "--config", configPath])
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertTrue(first.stdout.contains("spamco: downloaded"), first.stdout)
        XCTAssertTrue(first.stdout.contains("\(target): installed 2 numbers and 1 prefix rules from spamco"), first.stdout)
        XCTAssertTrue(first.stdout.contains("daemon: not running (no daemon listens on \(path("none.sock")))"), first.stdout)
        XCTAssertEqual(first.stderr, "")

        let second = try lookupd(["update"])
        XCTAssertEqual(second.status, 0, second.stderr)
        XCTAssertTrue(second.stdout.contains("spamco: not modified (HTTP 304)"), second.stdout)
        XCTAssertFalse(second.stdout.contains("daemon:"), "nothing installed, no reload: \(second.stdout)")

        let quiet = try lookupd(["update", "-q"])
        XCTAssertEqual(quiet.status, 0)
        XCTAssertEqual(quiet.stdout + quiet.stderr, "")

        // Under systemd the lines carry journald priorities.
        let journal = try lookupd(["update", "--force"], environment: ["JOURNAL_STREAM": "8:1234"])
        XCTAssertEqual(journal.status, 0, journal.stderr)
        XCTAssertTrue(journal.stdout.contains("<6>spamco: downloaded"), journal.stdout)
        XCTAssertTrue(journal.stdout.contains("<5>\(target): installed"), journal.stdout)

        // inspect shows the feed behind the file.
        let inspect = try lookupd(["inspect", target])
        XCTAssertEqual(inspect.status, 0, inspect.stderr)
        let version = try XCTUnwrap(record("spamco")?.version)
        XCTAssertTrue(inspect.stdout.contains("directory version:  \(version)"), inspect.stdout)
        XCTAssertTrue(inspect.stdout.contains("feed:               spamco: version \(version), 3 entries, installed 20"), inspect.stdout)
        XCTAssertTrue(inspect.stdout.contains(server.url("f/spam.csv")), inspect.stdout)
        let json = try lookupd(["inspect", "--json", "--config", configPath, target])
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let feeds = try XCTUnwrap(object["feeds"] as? [[String: Any]])
        XCTAssertEqual(feeds.first?["feed"] as? String, "spamco")
        XCTAssertEqual(feeds.first?["entries"] as? Int, 3)
        XCTAssertEqual(feeds.first?["version"] as? String, version)
        // The previous file shows the install before.
        let previous = try lookupd(["inspect", target + ".previous"])
        XCTAssertTrue(previous.stdout.contains("feed:               spamco: version"), previous.stdout)
        // Without a configuration naming feeds, inspect is about the file alone.
        let plain = try lookupd(["inspect", target], environment: ["LOOKUPD_CONFIG": path("missing.conf")])
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertFalse(plain.stdout.contains("feed:"), plain.stdout)
    }

    func testFailureExitsOneAndNamesTheFeed() throws {
        _ = try config(["spamco \(server.url("f/missing.csv")) into=spam.lkd"])
        let result = try lookupd(["update"])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.contains("lookupd: error: spamco: the server answered HTTP 404"), result.stderr)
        XCTAssertTrue(result.stderr.contains("keeps its current list"), result.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("spam.lkd")))
    }

    func testRollbackCommand() throws {
        server.publish("spam.csv", FeedUpdateTests.listV1)
        _ = try config(["spamco \(server.url("f/spam.csv")) into=spam.lkd"])
        XCTAssertEqual(try lookupd(["update"]).status, 0)
        let none = try lookupd(["update", "--rollback", "spamco"])
        XCTAssertEqual(none.status, 1)
        XCTAssertTrue(none.stderr.contains("no previous version"), none.stderr)
        server.publish("spam.csv", FeedUpdateTests.listV2)
        XCTAssertEqual(try lookupd(["update"]).status, 0)
        XCTAssertEqual(try entries(path("spam.lkd")).count, 4)
        let back = try lookupd(["update", "--rollback", "spamco"])
        XCTAssertEqual(back.status, 0, back.stderr)
        XCTAssertTrue(back.stdout.contains("rolled back to the previous list"), back.stdout)
        XCTAssertEqual(try entries(path("spam.lkd")).count, 3)
    }

    func testUsage() throws {
        _ = try config(["spamco \(server.url("f/spam.csv"))"])
        let help = try lookupd(["update", "--help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.stdout.hasPrefix("Usage: lookupd update"), help.stdout)
        let overview = try lookupd(["--help"])
        XCTAssertTrue(overview.stdout.contains("  update    download, check and install"), overview.stdout)
        XCTAssertEqual(try lookupd(["update", "--rollback", "spamco", "other"]).status, 2)
        XCTAssertEqual(try lookupd(["update", "--bogus"]).status, 2)
        let unknown = try lookupd(["update", "other"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.stderr.contains("no feed named 'other' (configured: spamco)"), unknown.stderr)
        let noConfig = try lookupd(["update"], environment: ["LOOKUPD_CONFIG": path("missing.conf")])
        XCTAssertEqual(noConfig.status, 1)
        XCTAssertTrue(noConfig.stderr.contains("missing.conf"), noConfig.stderr)
    }
}

/// The scheduled side: both units pass `systemd-analyze verify` and the service stays within
/// the security budget of the daemon's unit.
final class FeedSystemdTests: XCTestCase {
    static let systemdFolder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("systemd").path

    func testUnitsVerify() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
            return XCTFail("systemd-analyze is missing (Debian package systemd; scripts/install-deps installs it)")
        }
        let binary = try XCTUnwrap(LookupdBinary.path)
        let service = try String(contentsOfFile: Self.systemdFolder + "/lookupd-update.service", encoding: .utf8)
        let timer = try String(contentsOfFile: Self.systemdFolder + "/lookupd-update.timer", encoding: .utf8)
        XCTAssertTrue(service.contains("ExecStart=/usr/local/bin/lookupd update --config /etc/lookupd/lookupd.conf"))
        XCTAssertTrue(timer.contains("RandomizedDelaySec="))
        // A copy naming the binary under test, so the check does not need an installation.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("lkd-units-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try service.replacingOccurrences(of: "/usr/local/bin/lookupd", with: binary)
            .write(toFile: folder + "/lookupd-update.service", atomically: true, encoding: .utf8)
        try timer.write(toFile: folder + "/lookupd-update.timer", atomically: true, encoding: .utf8)
        let result = try runProgram("/usr/bin/systemd-analyze", ["verify", folder + "/lookupd-update.service", folder + "/lookupd-update.timer"])
        XCTAssertEqual(result.status, 0, result.stdout + result.stderr)
        XCTAssertFalse(result.stderr.contains("lookupd-update"), "verify complained:\n\(result.stderr)")
    }

    func testServiceExposureIsAtMostTwo() throws {
        let result = try runProgram("/usr/bin/systemd-analyze", ["security", "--offline=yes", Self.systemdFolder + "/lookupd-update.service"])
        let text = result.stdout + result.stderr
        guard let range = text.range(of: #"Overall exposure level for lookupd-update\.service: ([0-9.]+)"#, options: .regularExpression),
              let score = Double(text[range].split(separator: " ").last!) else {
            return XCTFail("no exposure score in:\n\(text)")
        }
        XCTAssertLessThanOrEqual(score, 2.0, text)
    }
}
