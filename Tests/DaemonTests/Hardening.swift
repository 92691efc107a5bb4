import Foundation
import Glibc
import XCTest

// Shared by the hardening tests (hostile input, files replaced while in
// use, privileges): what /proc says about the daemon, a well-formedness
// check for answers, and the "still serving, still bounded" assertion.

/// Resident memory, open descriptors and threads of a process, from /proc.
struct Vitals: CustomStringConvertible {
    var rssKiB: Int
    var fds: Int
    var threads: Int

    init?(pid: Int32) {
        let status = readProcFile("/proc/\(pid)/status")
        func field(_ name: String) -> Int? {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
            return Int(line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        guard let rss = field("VmRSS"), let threads = field("Threads"),
              let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") else { return nil }
        rssKiB = rss
        fds = entries.count
        self.threads = threads
    }

    var description: String { "RSS \(rssKiB / 1024) MiB, \(fds) fds, \(threads) threads" }
}

/// Header names lookupd writes into its answers (and `extra`, e.g. a
/// configured label header). Anything else in an answer came from input.
let headersLookupdWrites: Set<String> = [
    "via", "from", "to", "call-id", "cseq", "contact", "p-asserted-identity", "x-caller-label",
    "reason", "allow", "accept", "unsupported", "retry-after", "content-length",
]

/// Checks one UDP or TCP answer: a SIP response whose every line ends in
/// CRLF, with no header line lookupd does not write and one
/// `Content-Length: 0` at the end.
func assertWellFormedAnswer(_ raw: [UInt8], extraHeaders: Set<String> = [], _ context: @autoclosure () -> String,
                            file: StaticString = #filePath, line: UInt = #line) {
    let text = String(decoding: raw, as: UTF8.self)
    guard let answer = SIPAnswer(raw) else {
        return XCTFail("\(context()): not a SIP response: \(text.debugDescription)", file: file, line: line)
    }
    XCTAssertTrue(raw.suffix(4).elementsEqual([13, 10, 13, 10]), "\(context()): no final empty line", file: file, line: line)
    for (i, byte) in raw.enumerated() {
        if byte == 10, i == 0 || raw[i - 1] != 13 { return XCTFail("\(context()): bare LF in \(text.debugDescription)", file: file, line: line) }
        if byte == 13, i + 1 >= raw.count || raw[i + 1] != 10 { return XCTFail("\(context()): bare CR in \(text.debugDescription)", file: file, line: line) }
    }
    for header in answer.headers where !headersLookupdWrites.contains(header.name.lowercased()) && !extraHeaders.contains(header.name.lowercased()) {
        XCTFail("\(context()): header '\(header.name)' lookupd never writes: \(text.debugDescription)", file: file, line: line)
    }
    XCTAssertEqual(answer.headers.last.map { "\($0.name): \($0.value)" }, "Content-Length: 0", "\(context())", file: file, line: line)
}

extension DaemonTestCase {
    /// The daemon answers OPTIONS over UDP and over a new TCP connection.
    func assertServing(_ daemon: LookupdDaemon, _ when: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(daemon.isRunning, "\(when): lookupd is not running\n\(daemon.stderr.suffix(3000))", file: file, line: line)
        XCTAssertEqual(daemon.answersOptions(timeout: 2)?.statusCode, 200, "\(when): no 200 to OPTIONS over UDP", file: file, line: line)
        let tcp = try? TCPPeer(to: daemon.port)
        XCTAssertEqual(tcp?.exchange(options(port: daemon.port, transport: "TCP"), timeout: 2)?.statusCode, 200,
                       "\(when): no 200 to OPTIONS over TCP", file: file, line: line)
    }

    /// Memory and descriptors back near where they started: growth within
    /// `rssGrowthMiB`, at most `fdGrowth` more descriptors (given time to
    /// close what the test opened).
    func assertBounded(_ daemon: LookupdDaemon, since baseline: Vitals, rssGrowthMiB: Int = 64, fdGrowth: Int = 8,
                       _ when: String, file: StaticString = #filePath, line: UInt = #line) {
        var now = Vitals(pid: daemon.pid)
        eventually(timeout: 15) {
            now = Vitals(pid: daemon.pid)
            return now.map { $0.fds <= baseline.fds + fdGrowth } ?? false
        }
        guard let now else { return XCTFail("\(when): no /proc entry for the daemon", file: file, line: line) }
        XCTAssertLessThanOrEqual(now.fds, baseline.fds + fdGrowth, "\(when): descriptors \(baseline) -> \(now)", file: file, line: line)
        XCTAssertLessThanOrEqual(now.rssKiB, baseline.rssKiB + rssGrowthMiB * 1024, "\(when): memory \(baseline) -> \(now)", file: file, line: line)
        XCTAssertEqual(now.threads, baseline.threads, "\(when): threads \(baseline) -> \(now)", file: file, line: line)
    }

    /// The change in one stats series between two reports.
    func delta(_ before: Stats, _ after: Stats, _ series: String) -> Int {
        max(0, after[series]) - max(0, before[series])
    }
}

/// A /proc file, read to its end (/proc reports sizes of 0, so readers that
/// trust the size read nothing).
func readProcFile(_ path: String) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR { continue }
        if n <= 0 { break }
        bytes += chunk[0..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Raises this process's descriptor limit to its hard limit (10,000
/// connections need more than the usual 1024).
@discardableResult
func raiseOwnFileLimit() -> Int {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
    return Int(limit.rlim_cur)
}

/// LeakSanitizer (scripts/sanitize address) checks every lookupd process the
/// tests start, at its exit; not this XCTest process, where Foundation's
/// Process and XCTest keep objects alive for good (thousands of reports
/// with no lookupd code on their stacks; lookupd links neither library).
/// The ASan runtime asks this function before its leak check at exit.
@_cdecl("__lsan_is_turned_off")
public func lsanIsTurnedOffInTheTestProcess() -> Int32 { 1 }

/// A deterministic generator (SplitMix64) so random inputs reproduce.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A raw connection to a daemon's control socket (without the CLI, which reads the config
/// file to find the socket: a test that replaces the config with a FIFO cannot use it).
final class ControlPeer {
    let fd: Int32

    init(_ socketPath: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError.failed("socket") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in for (i, b) in socketPath.utf8.enumerated() { raw[i] = b } }
        try connectOrClose(fd, to: address, socketPath)
    }

    deinit { close(fd) }

    /// Sends `command` and reads the whole answer (until the daemon closes), within `timeout`;
    /// nil when it does not come in time.
    func run(_ command: String, timeout: Double = 10) -> String? {
        let line = Array((command + "\n").utf8)
        guard line.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == line.count else { return nil }
        var answer: [UInt8] = []
        let deadline = monotonicSeconds() + timeout
        while true {
            let left = deadline - monotonicSeconds()
            if left <= 0 { return nil }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, Int32(max(1, left * 1000))) <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return String(decoding: answer, as: UTF8.self) }
            answer += chunk[0..<n]
        }
    }

    /// `command` on a fresh connection: the answer and the seconds it took.
    static func timed(_ socketPath: String, _ command: String, timeout: Double = 10) -> (answer: String?, seconds: Double) {
        let started = monotonicSeconds()
        let answer = (try? ControlPeer(socketPath))?.run(command, timeout: timeout)
        return (answer, monotonicSeconds() - started)
    }
}

