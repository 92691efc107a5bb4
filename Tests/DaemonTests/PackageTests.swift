import Foundation
import Glibc
import XCTest

/// Issue 7.4: `scripts/build-deb` packages the lookupd under test (no
/// release build of its own); the package installs on this machine with its
/// dependencies declared, the installed unit verifies, nothing is started,
/// and `dpkg --purge` leaves nothing behind.
final class PackageTests: DaemonTestCase {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    func testBuildInstallVerifyAndPurge() throws {
        try skipUnderSanitizer("packaging; the package holds the plain build")
        guard getuid() == 0 else { throw XCTSkip("installing a .deb needs root (CI runs as root)") }
        guard try run("/usr/bin/dpkg-query", ["-W", "-f=${Status}", "lookupd"]).stdout != "install ok installed" else {
            throw XCTSkip("a lookupd package is already installed on this machine; the test would replace and purge it")
        }
        let stateExisted = FileManager.default.fileExists(atPath: "/var/lib/lookupd")
        let localBinary = "/usr/local/bin/lookupd"
        let localBefore = FileManager.default.contents(atPath: localBinary)

        let built = try run(Self.repository + "/scripts/build-deb", ["--binary", LookupdBinary.path!, "--output", folder], timeout: 120)
        XCTAssertEqual(built.status, 0, built.summary)
        let deb = try XCTUnwrap(built.stdout.split(separator: "\n").last.map(String.init), built.summary)
        XCTAssertTrue(deb.hasPrefix(folder) && deb.hasSuffix(".deb") && FileManager.default.fileExists(atPath: deb), deb)

        let fields = try run("/usr/bin/dpkg-deb", ["-f", deb, "Package", "Version", "Depends"]).stdout
        let depends = fields.components(separatedBy: "Depends: ").last ?? ""
        for library in ["libosip2-15", "libcurl4", "zlib1g", "libzip4", "libssl3", "libc6", "libphonenumber8"] {
            XCTAssertTrue(depends.contains(library), "Depends names \(library): \(fields)")
        }

        let installed = try dpkg(["-i", deb])
        defer { if installed.status == 0 || isInstalled() { _ = try? dpkg(["--purge", "lookupd"]) } }
        XCTAssertEqual(installed.status, 0, installed.summary)
        let files = try run("/usr/bin/dpkg", ["-L", "lookupd"]).stdout.split(separator: "\n").map(String.init)

        // The binary, the same version as the one packaged.
        let version = try run("/usr/bin/lookupd", ["--version"])
        XCTAssertEqual(version.status, 0, version.summary)
        // Each names its own numbering cache (keyed by its own bridge), so that line differs.
        func withoutCache(_ text: String) -> [Substring] { text.split(separator: "\n").filter { !$0.hasPrefix("numbering cache: ") } }
        XCTAssertEqual(withoutCache(version.stdout), withoutCache(try run(LookupdBinary.path!, ["--version"]).stdout))
        XCTAssertTrue(files.contains("/usr/lib/lookupd/liblookupd-phonenumbers.so"), "\(files)")
        XCTAssertEqual(FileManager.default.contents(atPath: localBinary), localBefore, "\(localBinary) untouched")

        // The units, as installed, verify; ExecStart names the packaged binary.
        let unit = readText("/lib/systemd/system/lookupd.service")
        XCTAssertTrue(unit.contains("ExecStart=/usr/bin/lookupd serve --config /etc/lookupd/lookupd.conf"), unit)
        XCTAssertFalse(unit.contains("/usr/local/bin"), unit)
        for name in ["lookupd.service", "lookupd-update.service", "lookupd-update.timer"] {
            let verify = try run("/usr/bin/systemd-analyze", ["verify", "/lib/systemd/system/" + name])
            XCTAssertFalse(verify.stderr.contains("lookupd"), "systemd-analyze verify \(name):\n\(verify.stderr)")
        }
        // Users, folders, configuration, manuals and completion; nothing enabled.
        XCTAssertEqual(try run("/usr/bin/getent", ["passwd", "lookupd"]).status, 0, "the lookupd user exists")
        XCTAssertEqual(try run("/usr/bin/getent", ["passwd", "lookupd-update"]).status, 0, "the lookupd-update user exists")
        XCTAssertTrue(FileManager.default.fileExists(atPath: "/var/lib/lookupd/directories"))
        XCTAssertTrue(readText("/etc/lookupd/lookupd.conf").contains("listen = udp:127.0.0.1:5060"))
        let check = try run("/usr/bin/lookupd", ["query", "--config", "/etc/lookupd/lookupd.conf", "--directory", path("main.lkd"), Caller.fraud])
        XCTAssertTrue(check.stdout.contains("blocked"), "the packaged configuration parses: \(check.summary)")
        XCTAssertEqual(try run("/usr/bin/dpkg-query", ["-W", "-f=${Conffiles}", "lookupd"]).stdout.contains("/etc/lookupd/lookupd.conf"), true)
        // In the archive (an image that excludes /usr/share/man from installs still gets the rest).
        let contents = try run("/usr/bin/dpkg-deb", ["-c", deb]).stdout
        for file in ["./usr/share/man/man8/lookupd.8.gz", "./usr/share/man/man5/lookupd.conf.5.gz",
                     "./usr/share/bash-completion/completions/lookupd", "./usr/lib/sysusers.d/lookupd.conf",
                     "./usr/lib/tmpfiles.d/lookupd.conf", "./lib/systemd/system/lookupd-update.timer",
                     "./usr/share/lookupd/grafana/lookupd.json", "./usr/share/lookupd/prometheus/lookupd-alerts.yml"] {
            XCTAssertTrue(contents.contains(" \(file)\n"), "\(file) in the package:\n\(contents)")
        }
        XCTAssertTrue(files.contains("/usr/share/bash-completion/completions/lookupd"), "\(files)")
        // The dashboard and the alert rules, as the repository has them; the rules load in Prometheus.
        for (installed, source) in [("grafana/lookupd.json", "grafana/lookupd.json"),
                                    ("prometheus/lookupd-alerts.yml", "prometheus/lookupd-alerts.yml"),
                                    ("prometheus/lookupd-alerts.test.yml", "prometheus/lookupd-alerts.test.yml")] {
            XCTAssertEqual(FileManager.default.contents(atPath: "/usr/share/lookupd/" + installed),
                           FileManager.default.contents(atPath: Self.repository + "/Config/" + source), installed)
        }
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool") {
            let rules = try run("/usr/bin/promtool", ["check", "rules", "/usr/share/lookupd/prometheus/lookupd-alerts.yml"])
            XCTAssertEqual(rules.status, 0, rules.summary)
            let unit = try run("/bin/sh", ["-c", "cd /usr/share/lookupd/prometheus && /usr/bin/promtool test rules lookupd-alerts.test.yml"])
            XCTAssertEqual(unit.status, 0, unit.summary)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/etc/systemd/system/multi-user.target.wants/lookupd.service"),
                       "installing does not enable the service")

        // Purge: every file, the configuration and the state are gone.
        let purged = try dpkg(["--purge", "lookupd"])
        XCTAssertEqual(purged.status, 0, purged.summary)
        XCTAssertFalse(isInstalled())
        for file in files where file.hasPrefix("/usr/bin/") || file.hasPrefix("/lib/systemd/") || file.hasPrefix("/usr/share/")
            || file.hasPrefix("/usr/lib/") || file.hasPrefix("/etc/lookupd") {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: file, isDirectory: &isFolder), !isFolder.boolValue {
                XCTFail("\(file) left behind after purge")
            }
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: "/etc/lookupd"), "/etc/lookupd removed")
        if !stateExisted { XCTAssertFalse(FileManager.default.fileExists(atPath: "/var/lib/lookupd"), "state removed on purge") }
        XCTAssertEqual(FileManager.default.contents(atPath: localBinary), localBefore, "\(localBinary) untouched")
    }

    private func isInstalled() -> Bool {
        ((try? run("/usr/bin/dpkg-query", ["-W", "-f=${Status}", "lookupd"]).stdout) ?? "").hasSuffix(" installed")
    }

    /// dpkg, waiting for the lock if another dpkg (apt in a parallel job) holds it.
    private func dpkg(_ arguments: [String]) throws -> RunResult {
        var result = try run("/usr/bin/dpkg", arguments, timeout: 120)
        let deadline = monotonicSeconds() + 120
        while result.status != 0 && result.stderr.contains("lock") && monotonicSeconds() < deadline {
            usleep(500_000)
            result = try run("/usr/bin/dpkg", arguments, timeout: 120)
        }
        return result
    }

    private func run(_ executable: String, _ arguments: [String], timeout: Double = 60) throws -> RunResult {
        try runCommand(executable, arguments, folder: folder, timeout: timeout, environment: ["DEBIAN_FRONTEND": "noninteractive"])
    }
}
