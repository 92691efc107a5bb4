import Foundation
import Glibc
import XCTest

/// The numbers every daemon test knows, and what the standard lists say about them.
enum Caller {
    /// Blocked, label "Fraud Risk".
    static let fraud = "+8613800138000"
    /// Blocked, no label.
    static let blockedUnlabelled = "+8613700001111"
    /// Blocked by the directory ("Telemarketing") but a contact, "Mum": never blocked.
    static let mum = "+8613911112222"
    /// Identified, "China Unicom Customer Service".
    static let unicom = "+8618600000000"
    /// Identified, "Pizza Palace, Haidian" (a comma).
    static let pizza = "+8613812345678"
    /// Identified, a label with quotes, a backslash and UTF-8 (escaped in the answer).
    static let cafe = "+8613566667777"
    static let cafeLabel = "Zoë's \"Café\" \\ Bar"
    /// Identified, written nationally in the source (01059000000).
    static let hospital = "+861059000000"
    /// Blocked by the prefix rule +86170*.
    static let virtualRange = "+8617012345678"
    /// In no list.
    static let unknown = "+8613000000001"
    /// A contact only.
    static let liLei = "+8613600000000"
}

enum Lists {
    static let directoryCSV = """
    number,action,label
    +8613800138000,block,Fraud Risk
    +8613700001111,block,
    +8613911112222,block,Telemarketing
    +8618600000000,identify,China Unicom Customer Service
    +8613812345678,identify,"Pizza Palace, Haidian"
    +8613566667777,identify,"Zoë's ""Café"" \\ Bar"
    01059000000,identify,Beijing Municipal Hospital
    +86170*,block,Virtual Operator Range

    """

    static let contactsVCF = """
    BEGIN:VCARD
    VERSION:3.0
    FN:Mum
    N:;Mum;;;
    TEL;TYPE=CELL:+86 139 1111 2222
    END:VCARD
    BEGIN:VCARD
    VERSION:3.0
    FN:Li Lei
    N:Li;Lei;;;
    TEL;TYPE=CELL:136 0000 0000
    END:VCARD

    """
}

/// A running `lookupd serve`.
final class LookupdDaemon {
    let name: String
    let configPath: String
    let controlSocket: String
    let port: UInt16
    let child: ChildProcess

    init(name: String, configPath: String, controlSocket: String, port: UInt16, child: ChildProcess) {
        self.name = name
        self.configPath = configPath
        self.controlSocket = controlSocket
        self.port = port
        self.child = child
    }

    var pid: Int32 { child.pid }
    var stderr: String { child.stderr }
    var isRunning: Bool { child.isRunning }

    func signal(_ s: Int32) { child.signal(s) }

    /// Any answer to OPTIONS from `sourceIP` within the time: the daemon is serving.
    func answersOptions(from sourceIP: String = "127.0.0.1", timeout: Double = 1) -> SIPAnswer? {
        guard let peer = try? UDPPeer(ip: sourceIP) else { return nil }
        return peer.exchange(options(port: port), port: port, timeout: timeout)
    }
}

/// Base class: a temporary folder with the standard lists compiled, daemons
/// started on free loopback ports and always stopped (SIGTERM by PID, then
/// SIGKILL), sipp runs, and the CLI.
class DaemonTestCase: XCTestCase {
    var folder: String!
    private var daemons: [LookupdDaemon] = []
    var planConfig: String { path("plan.conf") }
    /// Most daemon tests tell which entry answered by the label a block carries, so their
    /// daemons run with `label-to-caller = yes`; TreatmentTests checks the default (none).
    class var rejectionsCarryLabel: Bool { true }

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard LookupdBinary.path != nil else {
            XCTFail("the lookupd executable was not found; looked at: \(LookupdBinary.candidates.joined(separator: ", ")). "
                    + "Build it (swift build --product lookupd, with the same --scratch-path) or set LOOKUPD_BINARY.")
            throw HarnessError.missing("lookupd")
        }
        folder = try makeTemporaryFolder("lkd-dt")
        write("plan.conf", "# default numbering plan (China)\n")
        write("contacts.vcf", Lists.contactsVCF)
        try compile(Lists.directoryCSV, to: "main.lkd")
    }

    override func tearDown() {
        for daemon in daemons {
            daemon.child.stop(grace: 5)
            // Under scripts/sanitize the daemon is instrumented: a report in
            // its stderr (a leak is only reported at exit) fails the test.
            if let report = daemon.stderr.range(of: #"(==\d+==ERROR: \w+Sanitizer|WARNING: ThreadSanitizer)"#, options: .regularExpression) {
                XCTFail("\(daemon.name): sanitizer report:\n\(daemon.stderr[report.lowerBound...].prefix(6000))")
            }
            if testRun.map({ !$0.hasSucceeded }) ?? false {
                let log = daemon.stderr
                print("--- \(daemon.name) stderr (last 4000 bytes) ---\n\(log.suffix(4000))")
            }
        }
        daemons = []
        if let folder { try? FileManager.default.removeItem(atPath: folder) }
        super.tearDown()
    }

    func path(_ name: String) -> String { "\(folder!)/\(name)" }

    @discardableResult
    func write(_ name: String, _ text: String) -> String { write(name, Data(text.utf8)) }

    @discardableResult
    func write(_ name: String, _ data: Data) -> String {
        let p = path(name)
        precondition(FileManager.default.createFile(atPath: p, contents: data), "cannot write \(p)")
        return p
    }

    // MARK: CLI

    /// Runs `lookupd ARGS` (with the empty plan config as $LOOKUPD_CONFIG).
    func lookupd(_ arguments: [String], timeout: Double = 60) throws -> RunResult {
        try runCommand(LookupdBinary.path!, arguments, folder: folder, timeout: timeout, environment: ["LOOKUPD_CONFIG": planConfig])
    }

    /// Compiles CSV text into `name` in the folder (atomically, as compile does).
    @discardableResult
    func compile(_ csv: String, to name: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let source = write(name + ".csv", csv)
        let result = try lookupd(["compile", "--config", planConfig, "-q", source, "-o", path(name)])
        guard result.status == 0 else {
            XCTFail("lookupd compile failed: \(result.summary)", file: file, line: line)
            throw HarnessError.failed("compile")
        }
        return path(name)
    }

    // MARK: Daemons

    /// The config text for a test daemon; `extra` lines are appended.
    func configText(name: String, port: UInt16, directories: [String], contacts: [String], extra: [String]) -> String {
        var lines = ["# DaemonTests: \(name)"]
        lines += contacts.map { "contacts = \($0)" }
        lines += directories.map { "directory = \($0)" }
        lines += [
            "listen = udp:127.0.0.1:\(port)",
            "listen = tcp:127.0.0.1:\(port)",
            "control-socket = \(path(name + ".sock"))",
            "state-directory = \(path("state-" + name))",
        ]
        if !extra.contains(where: { $0.hasPrefix("workers") }) { lines.append("workers = 2") }
        // A test that names label-to-caller in `extra` says it itself.
        if Self.rejectionsCarryLabel && !extra.contains(where: { $0.hasPrefix("label-to-caller") }) { lines.append("label-to-caller = yes") }
        return (lines + extra).joined(separator: "\n") + "\n"
    }

    /// Starts `lookupd serve` and waits until it answers OPTIONS (from
    /// `readyFrom`). Picks another port when the chosen one was taken.
    @discardableResult
    func startDaemon(_ extra: [String] = [], name: String = "lookupd", directories: [String] = ["main.lkd name=main"],
                     contacts: [String] = ["contacts.vcf"], readyFrom: String = "127.0.0.1", environment: [String: String] = [:],
                     file: StaticString = #filePath, line: UInt = #line) throws -> LookupdDaemon {
        var lastError = ""
        for _ in 0..<5 {
            let port = freeLoopbackPort()
            let configPath = write(name + ".conf", configText(name: name, port: port, directories: directories, contacts: contacts, extra: extra))
            let child = try ChildProcess(executable: LookupdBinary.path!, arguments: ["serve", "--config", configPath],
                                         folder: folder, name: name, environment: environment)
            let daemon = LookupdDaemon(name: name, configPath: configPath, controlSocket: path(name + ".sock"), port: port, child: child)
            daemons.append(daemon)
            let ready = eventually(timeout: 15) {
                !child.isRunning || daemon.answersOptions(from: readyFrom, timeout: 0.2) != nil
            }
            if ready && child.isRunning { return daemon }
            child.stop(grace: 2)
            lastError = child.stderr
            if !lastError.contains("Address already in use") { break }
        }
        XCTFail("lookupd serve did not start: \(lastError)", file: file, line: line)
        throw HarnessError.failed("daemon did not start")
    }

    /// SIGTERM and wait; returns (exit status, exited normally, seconds taken).
    func terminate(_ daemon: LookupdDaemon, timeout: Double = 10) -> (status: Int32, normal: Bool, seconds: Double) {
        let started = monotonicSeconds()
        daemon.signal(SIGTERM)
        let done = daemon.child.wait(timeout: timeout)
        let seconds = monotonicSeconds() - started
        if !done { daemon.child.stop(grace: 1) }
        return (daemon.child.status, daemon.child.exitedNormally, done ? seconds : .infinity)
    }

    // MARK: Stats

    func stats(_ daemon: LookupdDaemon, file: StaticString = #filePath, line: UInt = #line) throws -> Stats {
        let result = try lookupd(["stats", "--config", daemon.configPath], timeout: 20)
        XCTAssertEqual(result.status, 0, "lookupd stats: \(result.summary)", file: file, line: line)
        return Stats(result.stdout)
    }
}

/// `lookupd stats` output: series ("name{labels}") to value.
struct Stats {
    let text: String
    let values: [String: Double]

    init(_ text: String) {
        self.text = text
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let v = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = v
        }
        self.values = values
    }

    subscript(_ series: String) -> Int { Int(values[series] ?? -1) }

    /// Every series of a family, e.g. all of `lookupd_responses_total`.
    func family(_ name: String) -> [String: Int] {
        values.filter { $0.key == name || $0.key.hasPrefix(name + "{") }.mapValues { Int($0) }
    }
}
