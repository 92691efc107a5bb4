import Foundation
import Glibc
import XCTest

/// Issue 8, requirement 6: the control socket (stats, reload) is reachable
/// only by root and the daemon's group, and the daemon holds nothing it
/// does not need. The unit's exposure score is SystemdTests.
///
/// As root, the test makes throwaway system accounts (a daemon user and
/// group, a group member, an outsider), runs the daemon as the daemon user
/// the way the unit does, and tries the socket as each; the accounts are
/// removed afterwards. Without root it checks the socket's mode and owner.
final class PrivilegeTests: DaemonTestCase {
    private var accounts: [(kind: String, name: String)] = []

    override func tearDown() {
        super.tearDown()  // stops the daemons first
        for account in accounts.reversed() {
            let tool = account.kind == "user" ? "/usr/sbin/userdel" : "/usr/sbin/groupdel"
            _ = try? runCommand(tool, [account.name], folder: "/tmp", timeout: 30)
        }
        accounts = []
    }

    private func make(_ kind: String, _ name: String, _ arguments: [String]) throws {
        let tool = kind == "user" ? "/usr/sbin/useradd" : "/usr/sbin/groupadd"
        let result = try runCommand(tool, arguments + [name], folder: folder, timeout: 30)
        guard result.status == 0 else { throw HarnessError.failed("\(tool) \(name): \(result.summary)") }
        accounts.append((kind, name))
    }

    /// `lookupd stats` as another account (setpriv, util-linux).
    private func stats(as user: String, group: String, socket: String) throws -> RunResult {
        try runCommand("/usr/bin/setpriv", ["--reuid=\(user)", "--regid=\(group)", "--init-groups", "--",
                                            LookupdBinary.path!, "stats", "--socket", socket], folder: folder, timeout: 30)
    }

    func testControlSocketIsOnlyForRootAndTheDaemonsGroup() throws {
        guard getuid() == 0 else {
            // Not root: the daemon runs as us; the mode is what keeps others out.
            let daemon = try startDaemon()
            var st = stat()
            XCTAssertEqual(lstat(daemon.controlSocket, &st), 0)
            XCTAssertEqual(st.st_mode & 0o777, 0o660, "control socket mode")
            XCTAssertEqual(st.st_uid, getuid())
            return
        }
        for tool in ["/usr/sbin/useradd", "/usr/sbin/groupadd", "/usr/bin/setpriv"] where !FileManager.default.isExecutableFile(atPath: tool) {
            return XCTFail("\(tool) is missing (Debian packages passwd and util-linux)")
        }
        // Names unique to this run, short enough for useradd.
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let daemonUser = "lkd\(tag)d", member = "lkd\(tag)m", outsider = "lkd\(tag)o"
        try make("group", daemonUser, ["--system"])
        try make("user", daemonUser, ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "--gid", daemonUser])
        try make("user", member, ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", "--groups", daemonUser])
        try make("user", outsider, ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group"])

        // The daemon's files belong to its user; the folder can be traversed
        // by everyone, so only the socket's own mode decides who gets in.
        let binary = LookupdBinary.path!
        let probe = try runCommand("/usr/bin/setpriv", ["--reuid=\(outsider)", "--regid=\(outsider)", "--init-groups", "--", binary, "--help"],
                                   folder: folder, timeout: 30)
        guard probe.status == 0 else {
            throw XCTSkip("other accounts cannot run \(binary) (a folder on its path is private): \(probe.summary)")
        }
        XCTAssertEqual(chmod(folder, 0o755), 0)
        let chown = try runCommand("/bin/chown", ["-R", "\(daemonUser):\(daemonUser)", folder], folder: "/tmp")
        XCTAssertEqual(chown.status, 0, chown.summary)

        let port = freeLoopbackPort()
        let config = write("priv.conf", configText(name: "priv", port: port, directories: ["main.lkd name=main"], contacts: ["contacts.vcf"], extra: []))
        _ = try runCommand("/bin/chown", ["\(daemonUser):\(daemonUser)", config], folder: "/tmp")
        let child = try ChildProcess(executable: "/usr/bin/setpriv",
                                     arguments: ["--reuid=\(daemonUser)", "--regid=\(daemonUser)", "--init-groups", "--", binary, "serve", "--config", config],
                                     folder: folder, name: "priv")
        defer { child.stop() }
        let daemon = LookupdDaemon(name: "priv", configPath: config, controlSocket: path("priv.sock"), port: port, child: child)
        XCTAssertTrue(eventually(timeout: 15) { !child.isRunning || daemon.answersOptions(timeout: 0.2) != nil },
                      "the daemon did not start as \(daemonUser): \(child.stderr)")
        guard child.isRunning else { return XCTFail("lookupd serve as \(daemonUser) exited: \(child.stderr)") }

        var st = stat()
        XCTAssertEqual(lstat(daemon.controlSocket, &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFSOCK)
        XCTAssertEqual(st.st_mode & 0o777, 0o660, "control socket mode")
        XCTAssertEqual(st.st_uid, getpwnam(daemonUser).pointee.pw_uid)
        XCTAssertEqual(st.st_gid, getgrnam(daemonUser).pointee.gr_gid)

        // Root and a member of the daemon's group get in; anyone else does not.
        let asRoot = try lookupd(["stats", "--socket", daemon.controlSocket])
        XCTAssertEqual(asRoot.status, 0, asRoot.summary)
        let asMember = try stats(as: member, group: member, socket: daemon.controlSocket)
        XCTAssertEqual(asMember.status, 0, "a member of the daemon's group: \(asMember.summary)")
        XCTAssertTrue(asMember.stdout.contains("lookupd_workers 2"), asMember.stdout)
        let asOutsider = try stats(as: outsider, group: outsider, socket: daemon.controlSocket)
        XCTAssertEqual(asOutsider.status, 1, "an outsider: \(asOutsider.summary)")
        XCTAssertTrue(asOutsider.stderr.contains("Permission denied"), asOutsider.stderr)
        let reload = try runCommand("/usr/bin/setpriv", ["--reuid=\(outsider)", "--regid=\(outsider)", "--init-groups", "--",
                                                         binary, "reload", "--socket", daemon.controlSocket], folder: folder, timeout: 30)
        XCTAssertEqual(reload.status, 1, "an outsider cannot reload: \(reload.summary)")

        // The daemon itself: no capabilities, no way to gain any.
        let status = readProcFile("/proc/\(child.pid)/status")
        for field in ["CapPrm", "CapEff", "CapAmb"] {
            XCTAssertTrue(status.contains("\(field):\t0000000000000000"), "\(field) of a daemon run as \(daemonUser):\n\(status)")
        }
        XCTAssertTrue(status.contains("NoNewPrivs:\t1"), "no_new_privs:\n\(status)")
    }

    /// What the daemon keeps open: its sockets, epoll/eventfd/signalfd and the
    /// standard streams, and (serving the installed file, the default) each
    /// directory file read-only, to fstat the mapped inode; never the
    /// configuration or a contacts list (read and closed). With
    /// directory-copy = yes not even the directory: its copy is mapped, unnamed.
    func testDaemonKeepsNothingOpenItDoesNotNeed() throws {
        try keepsNothingOpen(copy: false)
    }

    func testDaemonWithCopiesKeepsNothingOpenItDoesNotNeed() throws {
        try keepsNothingOpen(copy: true)
    }

    private func keepsNothingOpen(copy: Bool) throws {
        let daemon = try startDaemon(copy ? ["directory-copy = yes"] : [])
        let status = readProcFile("/proc/\(daemon.pid)/status")
        XCTAssertTrue(status.contains("NoNewPrivs:\t1"), "lookupd sets no_new_privs:\n\(status)")
        let fdFolder = "/proc/\(daemon.pid)/fd"
        var unexpected: [String] = []
        var directoryDescriptors = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: fdFolder) {
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fdFolder)/\(name)") else { continue }
            if target.hasPrefix("socket:") || target.hasPrefix("anon_inode:") || target.hasPrefix("pipe:") || target == "/dev/null" { continue }
            if ["0", "1", "2"].contains(name) { continue }
            if !copy, target == path("main.lkd") {
                // Read-only (O_ACCMODE of the flags, octal, is 0) and close-on-exec.
                let info = readProcFile("/proc/\(daemon.pid)/fdinfo/\(name)")
                let flags = info.split(separator: "\n").first { $0.hasPrefix("flags:") }.flatMap { Int($0.split(separator: "\t").last ?? "", radix: 8) }
                XCTAssertEqual(flags.map { $0 & Int(O_ACCMODE) }, Int(O_RDONLY), info)
                XCTAssertNotEqual(flags.map { $0 & Int(O_CLOEXEC) }, 0, info)
                directoryDescriptors += 1
                continue
            }
            unexpected.append("\(name) -> \(target)")
        }
        XCTAssertEqual(unexpected, [], "descriptors the daemon should not hold")
        let maps = readProcFile("/proc/\(daemon.pid)/maps")
        if copy {
            // The private copies are mapped, not held open, and have no name.
            XCTAssertFalse(maps.contains(path("main.lkd")), "the configured directory file is mapped:\n\(maps)")
            XCTAssertTrue(maps.contains("(deleted)") || maps.contains("state-lookupd"), "the private copy is mapped from the state directory")
        } else {
            XCTAssertEqual(directoryDescriptors, 1, "the served directory file, once")
            XCTAssertTrue(maps.contains(path("main.lkd")), "the installed directory file is mapped:\n\(maps)")
            // ThreadSanitizer maps its own unlinked /tmp/tsan.rodata.PID; any other deleted
            // file mapped would be a copy.
            let deleted = maps.split(separator: "\n").filter { $0.hasSuffix("(deleted)") && !$0.contains("/tsan.rodata.") }
            XCTAssertEqual(deleted, [], "no private copy:\n\(maps)")
        }
    }
}
