import Foundation
import Glibc
import XCTest

/// Kamailio (Debian package kamailio). CI installs it with scripts/install-deps.
enum KamailioBinary {
    static let path: String? = installedProgram("kamailio", variable: "KAMAILIO_BINARY", folders: ["/usr/sbin", "/usr/local/sbin", "/usr/bin"])
}

/// Config/examples.
let examplesDirectory: URL = Repository.root.appendingPathComponent("Config/examples")

/// A sipp run that plays the PBX (a UAS on its own port) and its logs.
struct SippServer {
    let child: ChildProcess
    let port: UInt16
    let logFile: String
    let errorFile: String
    let messageFile: String

    var log: String { readText(logFile) }
    var report: String {
        "PBX sipp: \(child.state)\nlog:\n\(log)\nerrors:\n\(readText(errorFile).prefix(6000))\n"
            + "messages (tail):\n\(readText(messageFile).suffix(4000))\nstdout (tail):\n\(child.stdout.suffix(2000))"
    }
}

/// Daemon tests with more than lookupd in play: PBX and trunk sipp runs, Kamailio, and
/// lookupd nodes on ports the test chooses (so a node can be restarted on its port). Every
/// process started here is stopped by PID in tearDown.
class IntegrationTestCase: DaemonTestCase {
    private var children: [ChildProcess] = []
    private var nodes: [ChildProcess] = []

    override func tearDown() {
        for child in children.reversed() { child.stop(grace: 3) }
        for node in nodes {
            node.stop(grace: 5)
            if let report = node.stderr.range(of: #"(==\d+==ERROR: \w+Sanitizer|WARNING: ThreadSanitizer)"#, options: .regularExpression) {
                XCTFail("\(node.name): sanitizer report:\n\(node.stderr[report.lowerBound...].prefix(6000))")
            }
            if testRun.map({ !$0.hasSucceeded }) ?? false {
                print("--- \(node.name) stderr (last 4000 bytes) ---\n\(node.stderr.suffix(4000))")
            }
        }
        if testRun.map({ !$0.hasSucceeded }) ?? false {
            for child in children where child.name.hasPrefix("kamailio") {
                print("--- \(child.name) stderr (last 4000 bytes) ---\n\(child.stderr.suffix(4000))")
            }
        }
        children = []
        nodes = []
        super.tearDown()
    }

    func track(_ child: ChildProcess) -> ChildProcess {
        children.append(child)
        return child
    }

    /// OPTIONS to lookupd itself (no user part): answered 200 in redirect and proxy mode alike.
    func serverOptions(port: UInt16) -> [UInt8] {
        sipMessage([
            "OPTIONS sip:127.0.0.1:\(port) SIP/2.0",
            "Via: SIP/2.0/UDP 127.0.0.1:5060;branch=\(token("z9hG4bK"))",
            "Max-Forwards: 70",
            "From: <sip:probe@127.0.0.1>;tag=\(token())",
            "To: <sip:127.0.0.1:\(port)>",
            "Call-ID: \(token("probe-"))",
            "CSeq: 1 OPTIONS",
            "Content-Length: 0",
        ])
    }

    /// Starts `lookupd serve` on `port` (UDP and TCP) and waits until it answers OPTIONS.
    @discardableResult
    func startNode(_ name: String, port: UInt16, extra: [String], workers: Int = 1,
                   file: StaticString = #filePath, line: UInt = #line) throws -> LookupdDaemon {
        let configPath = write(name + ".conf", configText(name: name, port: port, directories: ["main.lkd name=main"],
                                                           contacts: ["contacts.vcf"], extra: ["workers = \(workers)"] + extra))
        let child = try ChildProcess(executable: LookupdBinary.path!, arguments: ["serve", "--config", configPath],
                                     folder: folder, name: name)
        nodes.append(child)
        let node = LookupdDaemon(name: name, configPath: configPath, controlSocket: path(name + ".sock"), port: port, child: child)
        let peer = try UDPPeer()
        let ready = eventually(timeout: 20) {
            !child.isRunning || peer.exchange(serverOptions(port: port), port: port, timeout: 0.2)?.statusCode == 200
        }
        guard ready && child.isRunning else {
            XCTFail("\(name) did not start: \(child.stderr)", file: file, line: line)
            throw HarnessError.failed("\(name) did not start")
        }
        return node
    }

    /// Starts a sipp UAS (the PBX) with `scenario`, one injection line per call it will see,
    /// and waits until its socket is there.
    func startPBX(_ scenario: String, transport: SippTransport, expect lines: [String], count: Int? = nil,
                  port chosen: UInt16? = nil, timeoutSeconds: Int = 60) throws -> SippServer {
        let sipp = try requireSipp()
        let port = chosen ?? freeLoopbackPort()
        let id = String(UUID().uuidString.prefix(8))
        let logFile = path("pbx-\(id)-calls.log"), errorFile = path("pbx-\(id)-errors.log"), messageFile = path("pbx-\(id)-messages.log")
        var arguments = [
            "-sf", scenarioDirectory.appendingPathComponent(scenario).path,
            "-i", "127.0.0.1", "-p", String(port), "-cp", String(freeLoopbackPort()),
            "-t", transport == .tcp ? "t1" : "u1",
            "-m", String(count ?? lines.count),
            "-timeout", "\(timeoutSeconds)s", "-timeout_error", "-nostdin",
            "-trace_err", "-error_file", errorFile, "-trace_logs", "-log_file", logFile,
            "-trace_msg", "-message_file", messageFile,
        ]
        if !lines.isEmpty {
            arguments += ["-inf", write("pbx-\(id).csv", "SEQUENTIAL\n" + lines.joined(separator: "\n") + "\n")]
        }
        let child = track(try ChildProcess(executable: sipp, arguments: arguments, folder: folder, name: "sipp-pbx"))
        let listening = eventually(timeout: 10) { !child.isRunning || !portIsFree(port, tcp: transport == .tcp) }
        guard listening, child.isRunning else { throw HarnessError.failed("sipp PBX did not start: \(child.stdout.suffix(2000))") }
        return SippServer(child: child, port: port, logFile: logFile, errorFile: errorFile, messageFile: messageFile)
    }

    /// A sipp UAC (the trunk) running against `port`.
    struct Trunk {
        let child: ChildProcess
        let timeoutSeconds: Int
        let logFile: String
        let errorFile: String
        let messageFile: String
    }

    /// Starts a sipp UAC (the trunk) against `port`; `lines` are its injection lines.
    func startTrunk(_ scenario: String, port: UInt16, transport: SippTransport, lines: [String], count: Int? = nil,
                    rate: Int = 10, limit: Int = 1, recvTimeoutMs: Int = 5000, timeoutSeconds: Int = 40,
                    traceMessages: Bool = true) throws -> Trunk {
        let sipp = try requireSipp()
        let id = String(UUID().uuidString.prefix(8))
        let logFile = path("trunk-\(id)-calls.log"), errorFile = path("trunk-\(id)-errors.log"), messageFile = path("trunk-\(id)-messages.log")
        var arguments = [
            "127.0.0.1:\(port)", "-sf", scenarioDirectory.appendingPathComponent(scenario).path,
            "-i", "127.0.0.1", "-p", String(freeLoopbackPort()), "-cp", String(freeLoopbackPort()),
            "-t", transport.rawValue, "-m", String(count ?? lines.count), "-r", String(rate), "-l", String(limit),
            "-recv_timeout", String(recvTimeoutMs), "-timeout", "\(timeoutSeconds)s", "-timeout_error",
            "-nostdin", "-default_behaviors", "all,-bye", "-max_socket", "1000",
            "-trace_err", "-error_file", errorFile, "-trace_logs", "-log_file", logFile,
        ]
        if traceMessages { arguments += ["-trace_msg", "-message_file", messageFile] }
        if !lines.isEmpty {
            arguments += ["-inf", write("trunk-\(id).csv", "SEQUENTIAL\n" + lines.joined(separator: "\n") + "\n")]
        }
        let child = track(try ChildProcess(executable: sipp, arguments: arguments, folder: folder, name: "sipp-trunk"))
        return Trunk(child: child, timeoutSeconds: timeoutSeconds, logFile: logFile, errorFile: errorFile, messageFile: messageFile)
    }

    /// Waits for a trunk run (killed by PID past its deadline) and collects its results.
    func finish(_ trunk: Trunk) -> SippResult {
        var timedOut = false
        if !trunk.child.wait(timeout: Double(trunk.timeoutSeconds) + 20) {
            timedOut = true
            trunk.child.stop(grace: 2)
        }
        let stdout = trunk.child.stdout
        func lastCount(_ label: String) -> Int? {
            guard let last = stdout.split(separator: "\n").filter({ $0.contains(label) }).last else { return nil }
            return last.split(separator: "|").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        }
        return SippResult(status: trunk.child.status, timedOut: timedOut, stdout: stdout, errors: readText(trunk.errorFile),
                          log: readText(trunk.logFile), messages: readText(trunk.messageFile),
                          successful: lastCount("Successful call"), failed: lastCount("Failed call"))
    }

    /// Runs a trunk to the end.
    func runTrunk(_ scenario: String, port: UInt16, transport: SippTransport, lines: [String], count: Int? = nil,
                  rate: Int = 10, limit: Int = 1, recvTimeoutMs: Int = 5000, timeoutSeconds: Int = 40) throws -> SippResult {
        finish(try startTrunk(scenario, port: port, transport: transport, lines: lines, count: count, rate: rate, limit: limit,
                              recvTimeoutMs: recvTimeoutMs, timeoutSeconds: timeoutSeconds))
    }

    /// Starts Kamailio in the foreground (-DD -E) with `config` and `-A` defines, its run
    /// files in the test folder, small memory pools, and waits until it serves UDP on `port`.
    @discardableResult
    func startKamailio(_ config: String, port: UInt16, defines: [String], file: StaticString = #filePath, line: UInt = #line) throws -> ChildProcess {
        guard let kamailio = KamailioBinary.path else {
            XCTFail("kamailio is not installed (looked at $KAMAILIO_BINARY, /usr/sbin, PATH). Install it with scripts/install-deps.", file: file, line: line)
            throw HarnessError.missing("kamailio")
        }
        let run = path("kamailio-run-\(port)")
        try FileManager.default.createDirectory(atPath: run, withIntermediateDirectories: true)
        var arguments = ["-f", examplesDirectory.appendingPathComponent(config).path, "-DD", "-E", "-m", "32", "-M", "8",
                         "-Y", run, "-P", run + "/kamailio.pid"]
        for define in defines { arguments += ["-A", define] }
        let child = track(try ChildProcess(executable: kamailio, arguments: arguments, folder: folder, name: "kamailio-\(port)"))
        let up = eventually(timeout: 20) { !child.isRunning || !portIsFree(port, tcp: false) }
        guard up, child.isRunning else {
            XCTFail("kamailio did not start: \(child.stderr.suffix(4000))", file: file, line: line)
            throw HarnessError.failed("kamailio did not start")
        }
        return child
    }

    /// Waits (at most `timeout` seconds) for the PBX sipp to finish its calls and checks
    /// that every one matched. A PBX still running then is a failure of this test, stopped
    /// by PID: its status is never read while it runs.
    func assertPBXSawEverything(_ pbx: SippServer, calls: Int, timeout: Double = 30, _ what: String,
                                file: StaticString = #filePath, line: UInt = #line) {
        guard pbx.child.wait(timeout: timeout) else {
            XCTFail("\(what): the PBX did not finish its \(calls) calls within \(timeout) s\n\(pbx.report)", file: file, line: line)
            pbx.child.stop(grace: 2)
            return
        }
        XCTAssertTrue(pbx.child.exitedNormally && pbx.child.status == 0, "\(what): PBX sipp \(pbx.child.state)\n\(pbx.report)", file: file, line: line)
        let verdicts = pbx.log.split(separator: "\n").filter { $0.hasPrefix("call=") }
        XCTAssertEqual(verdicts.filter { $0.contains("verdict=want") }.count, calls, "\(what)\n\(pbx.report)", file: file, line: line)
        XCTAssertFalse(pbx.log.contains("MISMATCH"), "\(what)\n\(pbx.report)", file: file, line: line)
    }
}

/// True when nothing is bound to 127.0.0.1:`port` (UDP), or nothing accepts on it (TCP).
func portIsFree(_ port: UInt16, tcp: Bool) -> Bool {
    let fd = socket(AF_INET, Int32(tcp ? SOCK_STREAM.rawValue : SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    defer { close(fd) }
    if tcp {
        var address = socketAddress("127.0.0.1", port)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return rc != 0
    }
    return bindLoopback(fd, ip: "127.0.0.1", port: port)
}
