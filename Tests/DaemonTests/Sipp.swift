import Foundation
import Glibc
import XCTest

/// One call of Tests/Fixtures/sipp/invite.xml: who calls, and the answer(s) accepted.
struct SippCall {
    var caller: String
    var callee: String = "13000000000"
    var want: String
    var alternative: String? = nil

    var line: String {
        for field in [caller, callee, want, alternative ?? "-"] {
            precondition(!field.contains(";") && !field.contains("\n"), "sipp injection fields cannot hold ';' or newlines: \(field)")
        }
        return "\(caller);\(callee);\(want);\(alternative ?? "-")"
    }
}

/// The answer signature invite.xml builds: STATUS|LABEL|PAI|CONTACT|CAUSE/REDRESS/LOCATION.
enum Answer {
    /// A label as the daemon writes it: a quoted-string, `"` and `\` escaped.
    static func quoted(_ label: String) -> String {
        "\"" + label.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    static func signature(_ status: String, label: String? = nil, pai: String? = nil, contact: String? = nil,
                          reason: (cause: Int, text: String, location: String)? = nil) -> String {
        [status, label.map(quoted) ?? "-", pai ?? "-", contact ?? "-", reason.map { "\($0.cause)/\($0.text)/\($0.location)" } ?? "-/-/-"]
            .joined(separator: "|")
    }

    /// 302 for an identified caller or a contact: label in PAI (on the caller's URI) and X-Caller-Label.
    static func redirect(_ caller: String, label: String, callerHost: String = "127.0.0.1", callee: String = "13000000000", port: UInt16) -> String {
        signature("302 Moved Temporarily", label: label, pai: "\(quoted(label)) <sip:\(caller)@\(callerHost)>",
                  contact: "<sip:\(callee)@127.0.0.1:\(port)>")
    }

    /// 302 without a label (unknown callers with unknown-response = 302).
    static func unlabelledRedirect(callee: String = "13000000000", port: UInt16) -> String {
        signature("302 Moved Temporarily", contact: "<sip:\(callee)@127.0.0.1:\(port)>")
    }

    /// The `redress` line of a daemon that answers 603+.
    static let redress = "redress = tel=+18005550100 location=RLN"

    /// `networkBlocked`: 603+ with `Answer.redress`'s contact (invite.xml checks the `id` is
    /// there and leaves it out of the signature: it differs per call).
    static func blocked(_ status: String, label: String?, networkBlocked: Bool = false) -> String {
        signature(status, label: label, reason: networkBlocked ? (603, "tel=+18005550100", "RLN") : nil)
    }
}

enum SippTransport: String {
    /// UDP, one socket for every call.
    case udp = "u1"
    /// UDP, one socket (source port) per call: the kernel spreads the calls
    /// over all the daemon's workers (SO_REUSEPORT hashes the source).
    case udpSocketPerCall = "un"
    /// TCP, one connection for every call.
    case tcp = "t1"
    var name: String { self == .tcp ? "TCP" : "UDP" }
}

/// One line of invite.xml's log.
struct SippCallLog {
    var call: Int
    var caller: String
    var sent: Double      // seconds since the epoch, sipp's clock
    var received: Double
    var verdict: String   // want, alternative or MISMATCH
    var got: String

    init?(_ line: Substring) {
        func field(_ name: String, until end: String?) -> String? {
            guard let start = line.range(of: name + "=") else { return nil }
            let rest = line[start.upperBound...]
            if let end, let stop = rest.range(of: " " + end + "=") { return String(rest[..<stop.lowerBound]) }
            return String(rest)
        }
        func time(_ text: String?) -> Double? {
            let parts = (text ?? "").split(separator: " ").compactMap { Double($0) }
            return parts.count == 2 ? parts[0] + parts[1] / 1e6 : nil
        }
        guard line.hasPrefix("call="), let call = field("call", until: "caller").flatMap({ Int($0) }),
              let caller = field("caller", until: "sent"), let sent = time(field("sent", until: "received")),
              let received = time(field("received", until: "verdict")), let verdict = field("verdict", until: "got"),
              let got = field("got", until: "want") else { return nil }
        self.call = call
        self.caller = caller
        self.sent = sent
        self.received = received
        self.verdict = verdict
        self.got = got
    }
}

struct SippResult {
    var status: Int32
    var timedOut: Bool
    var stdout: String
    var errors: String
    var log: String
    var messages: String
    var successful: Int?
    var failed: Int?

    var calls: [SippCallLog] { log.split(separator: "\n").compactMap(SippCallLog.init) }

    var report: String {
        var text = "sipp exit status \(status)\(timedOut ? " (killed: it overran its deadline)" : ""), "
            + "successful calls \(successful.map(String.init) ?? "?"), failed \(failed.map(String.init) ?? "?")"
        let mismatches = log.split(separator: "\n").filter { $0.contains("verdict=MISMATCH") }.prefix(10)
        if !mismatches.isEmpty { text += "\nmismatched answers:\n" + mismatches.joined(separator: "\n") }
        if !errors.isEmpty { text += "\nsipp errors:\n" + String(errors.prefix(6000)) }
        if !messages.isEmpty && (status != 0 || timedOut) { text += "\nmessages (tail):\n" + String(messages.suffix(4000)) }
        if status != 0 || timedOut { text += "\nstdout (tail):\n" + String(stdout.suffix(3000)) }
        return text
    }
}

extension DaemonTestCase {
    /// Fails (never skips) when sipp is not installed.
    func requireSipp(file: StaticString = #filePath, line: UInt = #line) throws -> String {
        guard let sipp = SippBinary.path else {
            XCTFail("sipp is not installed (looked at $SIPP_BINARY, else in /usr/bin, /usr/local/bin and PATH). "
                    + "Install it with scripts/install-deps (Debian package sip-tester) or set SIPP_BINARY.", file: file, line: line)
            throw HarnessError.missing("sipp")
        }
        return sipp
    }

    /// Runs a scenario from Tests/Fixtures/sipp against `daemon` and waits for it.
    /// sipp cannot hang: -timeout ends it (as a failure, -timeout_error), and a
    /// wall-clock deadline kills it by PID if even that does not happen.
    func sipp(_ scenario: String, daemon: LookupdDaemon, transport: SippTransport, localIP: String = "127.0.0.1",
              calls: [SippCall] = [], count: Int? = nil, rate: Int = 200, recvTimeoutMs: Int = 3000,
              timeoutSeconds: Int = 30, traceMessages: Bool = true, callLog: String? = nil, extra: [String] = []) throws -> SippResult {
        let sipp = try requireSipp()
        let scenarioPath = scenarioDirectory.appendingPathComponent(scenario).path
        precondition(FileManager.default.fileExists(atPath: scenarioPath), "no scenario \(scenarioPath)")
        let id = String(UUID().uuidString.prefix(8))
        let errorFile = path("sipp-\(id)-errors.log")
        let logFile = callLog ?? path("sipp-\(id)-calls.log")
        let messageFile = path("sipp-\(id)-messages.log")
        var arguments = [
            "127.0.0.1:\(daemon.port)", "-sf", scenarioPath,
            "-t", transport.rawValue, "-i", localIP, "-bind_local",
            "-p", String(freeLoopbackPort()), "-cp", String(freeLoopbackPort()),
            "-s", "13000000000",
            "-m", String(count ?? max(calls.count, 1)), "-r", String(rate), "-l", String(max(rate * 2, 20)),
            "-nr", "-recv_timeout", String(recvTimeoutMs),
            "-timeout", "\(timeoutSeconds)s", "-timeout_error",
            "-nostdin", "-default_behaviors", "all,-bye", "-max_socket", "1000",
            "-trace_err", "-error_file", errorFile,
            "-trace_logs", "-log_file", logFile,
        ]
        if traceMessages { arguments += ["-trace_msg", "-message_file", messageFile] }
        if !calls.isEmpty {
            let inf = write("sipp-\(id)-calls.csv", "SEQUENTIAL\n" + calls.map(\.line).joined(separator: "\n") + "\n")
            arguments += ["-inf", inf]
        }
        arguments += extra
        let child = try ChildProcess(executable: sipp, arguments: arguments, folder: folder, name: "sipp")
        var timedOut = false
        if !child.wait(timeout: Double(timeoutSeconds) + 20) {
            timedOut = true
            child.stop(grace: 2)
        }
        let stdout = child.stdout
        func lastCount(_ label: String) -> Int? {
            // "  Successful call        |        0                  |        3"
            let lines = stdout.split(separator: "\n").filter { $0.contains(label) }
            guard let last = lines.last else { return nil }
            return last.split(separator: "|").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        }
        return SippResult(status: child.status, timedOut: timedOut, stdout: stdout, errors: readText(errorFile),
                          log: readText(logFile), messages: readText(messageFile),
                          successful: lastCount("Successful call"), failed: lastCount("Failed call"))
    }

    /// sipp exited 0 and counted every call as successful.
    func assertSippPassed(_ result: SippResult, calls: Int, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertFalse(result.timedOut, "\(what): \(result.report)", file: file, line: line)
        XCTAssertEqual(result.status, 0, "\(what): \(result.report)", file: file, line: line)
        XCTAssertEqual(result.successful, calls, "\(what): \(result.report)", file: file, line: line)
        XCTAssertEqual(result.failed, 0, "\(what): \(result.report)", file: file, line: line)
    }
}
