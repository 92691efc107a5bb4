import Foundation
import Glibc
import XCTest

/// The harness itself (issue 23): a hung peer fails the test that waits for it and the run
/// goes on; a test process killed outright leaves none of the processes it started running.
/// Each case runs HarnessProbes in a child test run, so the failure and the kill it provokes
/// happen there, not here.
final class HarnessTests: IntegrationTestCase {
    /// A PBX sipp that hangs (stopped by SIGSTOP, so even its own -timeout cannot end it):
    /// the waiting test fails within its bound naming the PBX, the harness kills the PBX, and
    /// the next test of the same run starts a daemon and passes. The run ends as a failed run
    /// (exit status 1), not a crashed one.
    func testAHungPBXFailsItsTestAndTheRunGoesOn() throws {
        let record = path("hung-pbx.pids")
        let run = track(try startTestRun("DaemonTests.HarnessProbes", folder: folder,
                                         environment: ["LOOKUPD_HARNESS_PROBE": "hung-pbx", "LOOKUPD_HARNESS_PROBE_FILE": record]))
        guard run.wait(timeout: 180) else {
            return XCTFail("the inner test run did not end within 180 s\n\(run.stdout.suffix(6000))")
        }
        let output = run.stdout + run.stderr
        XCTAssertTrue(run.exitedNormally, "the inner run crashed (\(run.state))\n\(output.suffix(6000))")
        XCTAssertEqual(run.status, 1, "the inner run should end as a failed run\n\(output.suffix(6000))")
        XCTAssertTrue(output.contains("hung PBX: the PBX did not finish its 1 calls within 3.0 s"), output.suffix(6000).description)
        XCTAssertTrue(output.contains("HarnessProbes.testProbe2TheRunGoesOn' passed"), output.suffix(6000).description)
        XCTAssertTrue(output.contains("Executed 3 tests, with 1 test skipped and 1 failure (0 unexpected)"), output.suffix(6000).description)
        let started = RecordedProcess.read(record)
        XCTAssertEqual(started.count, 1, "the probe records its PBX")
        for process in started { XCTAssertFalse(process.isAlive, "the hung PBX \(process) is still running") }
    }

    /// A test process killed with SIGKILL in the middle of a test (no tearDown, no handler
    /// runs): its daemon, its PBX sipp, Kamailio with all its worker processes, and a shell
    /// with a background job are all gone within seconds: the direct children by
    /// PR_SET_PDEATHSIG, the rest of their process groups by the guardian.
    func testNothingOutlivesAKilledTestProcess() throws {
        try requireKamailio()
        let record = path("killed.pids")
        let run = track(try startTestRun("DaemonTests.HarnessProbes/testProbe3KilledMidTest", folder: folder,
                                         environment: ["LOOKUPD_HARNESS_PROBE": "killed", "LOOKUPD_HARNESS_PROBE_FILE": record]))
        let ready = eventually(timeout: 120) { !run.isRunning || FileManager.default.fileExists(atPath: record) }
        guard ready, run.isRunning else {
            return XCTFail("the probe did not start its processes (\(run.state))\n\((run.stdout + run.stderr).suffix(6000))")
        }
        let started = RecordedProcess.read(record)
        XCTAssertGreaterThanOrEqual(started.count, 7, "daemon, PBX, Kamailio and its workers, a shell and its job, the guardian: \(started)")
        XCTAssertTrue(started.allSatisfy(\.isAlive), "all running before the kill: \(started.filter { !$0.isAlive })")
        print("HarnessTests: killing the test process \(run.pid), which started \(started)")
        run.signal(SIGKILL)
        XCTAssertTrue(run.wait(timeout: 10), "the killed test process did not end")
        let gone = eventually(timeout: 15) { started.allSatisfy { !$0.isAlive } }
        XCTAssertTrue(gone, "still running after their test process was killed: \(started.filter(\.isAlive))")
        // Should anything be left, it must not run on after this test.
        for process in started where process.isAlive { kill(process.pid, SIGKILL) }
    }

    func requireKamailio(file: StaticString = #filePath, line: UInt = #line) throws {
        guard KamailioBinary.path != nil else {
            XCTFail("kamailio is not installed (looked at $KAMAILIO_BINARY, /usr/sbin, PATH). Install it with scripts/install-deps.", file: file, line: line)
            throw HarnessError.missing("kamailio")
        }
    }
}

/// Run by HarnessTests in a child test run, which sets LOOKUPD_HARNESS_PROBE; skipped
/// anywhere else.
final class HarnessProbes: IntegrationTestCase {
    var probe: String? { ProcessInfo.processInfo.environment["LOOKUPD_HARNESS_PROBE"] }
    var recordFile: String { ProcessInfo.processInfo.environment["LOOKUPD_HARNESS_PROBE_FILE"] ?? path("probe.pids") }

    func testProbe1HungPBX() throws {
        guard probe == "hung-pbx" else { throw XCTSkip("a probe HarnessTests runs in a child test run") }
        let pbx = try startPBX("proxy-uas.xml", transport: .udp, expect: [#""A"|"B""#])
        RecordedProcess.write([pbx.child.pid], to: recordFile)
        kill(pbx.child.pid, SIGSTOP)
        assertPBXSawEverything(pbx, calls: 1, timeout: 3, "hung PBX")
    }

    func testProbe2TheRunGoesOn() throws {
        guard probe == "hung-pbx" else { throw XCTSkip("a probe HarnessTests runs in a child test run") }
        let daemon = try startDaemon()
        XCTAssertEqual(daemon.answersOptions(timeout: 5)?.statusCode, 200)
    }

    /// Starts a daemon, a PBX, Kamailio and a shell with a background job, records every
    /// process they make up, and waits to be killed.
    func testProbe3KilledMidTest() throws {
        guard probe == "killed" else { throw XCTSkip("a probe HarnessTests runs in a child test run") }
        let daemon = try startDaemon()
        let pbx = try startPBX("proxy-uas.xml", transport: .udp, expect: [#""A"|"B""#])
        let port = freeLoopbackPort()
        let kamailio = try startKamailio("kamailio-redirect.cfg", port: port, defines: [
            "LISTEN=udp:127.0.0.1:\(port)", "LISTEN_TCP=tcp:127.0.0.1:\(port)",
            "LOOKUPD=\"sip:127.0.0.1:\(daemon.port)\"", "PBX=\"sip:127.0.0.1:\(pbx.port)\"",
        ])
        let shell = track(try ChildProcess(executable: "/bin/sh", arguments: ["-c", "sleep 600 & wait"], folder: folder, name: "shell"))
        let leaders = [daemon.pid, pbx.child.pid, kamailio.pid, shell.pid]
        XCTAssertTrue(eventually(timeout: 20) {
            RecordedProcess.members(of: [kamailio.pid]).count > 2
                && RecordedProcess.members(of: [shell.pid]).map { readProcFile("/proc/\($0)/comm") } == ["sh\n", "sleep\n"]
        }, "Kamailio's workers and the shell's job did not appear: \(RecordedProcess.members(of: leaders))")
        RecordedProcess.write(RecordedProcess.members(of: leaders) + [childGuardianPID], to: recordFile)
        sleep(120)
        XCTFail("HarnessTests did not kill this test process within 120 s")
    }
}

/// A process seen by the probes: its pid and start time (so a reused pid is not taken for it).
struct RecordedProcess: CustomStringConvertible {
    var pid: Int32
    var start: String

    /// State, process group and start time from /proc/PID/stat (the fields after the
    /// command name, which may itself hold spaces and parentheses).
    static func stat(_ pid: Int32) -> (state: String, group: Int32, start: String)? {
        let text = readProcFile("/proc/\(pid)/stat")
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let group = Int32(fields[2]) else { return nil }
        return (String(fields[0]), group, String(fields[19]))
    }

    /// Every process in the process groups these leaders lead.
    static func members(of leaders: [Int32]) -> [Int32] {
        let groups = Set(leaders)
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(Int32.init).filter { pid in stat(pid).map { groups.contains($0.group) } ?? false }.sorted()
    }

    static func write(_ pids: [Int32], to path: String) {
        let lines = pids.compactMap { pid in stat(pid).map { "\(pid) \($0.start)" } }
        // Written whole, then renamed: the reader never sees half a list.
        _ = FileManager.default.createFile(atPath: path + ".tmp", contents: Data((lines.joined(separator: "\n") + "\n").utf8))
        rename(path + ".tmp", path)
    }

    static func read(_ path: String) -> [RecordedProcess] {
        readText(path).split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ")
            guard parts.count == 2, let pid = Int32(parts[0]) else { return nil }
            return RecordedProcess(pid: pid, start: String(parts[1]))
        }
    }

    /// Running (a zombie waiting for its parent to reap it does not run).
    var isAlive: Bool {
        guard let now = Self.stat(pid), now.start == start else { return false }
        return now.state != "Z" && now.state != "X"
    }

    var description: String { "\(pid) (\(readProcFile("/proc/\(pid)/comm").trimmingCharacters(in: .whitespacesAndNewlines)))" }
}
