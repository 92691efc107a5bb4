import Foundation
import Glibc
import XCTest

/// Issue 20 item 2: one SBC sends every call over one UDP flow. With `udp-steering = spread`
/// the reuseport group's BPF program gives each of N workers a fair share of that one flow
/// (retransmissions included), over IPv4 and IPv6; with `flow` (the default) the kernel's
/// 4-tuple hash puts the whole flow on one worker. TCP is answered either way.
final class UDPSteeringTests: DaemonTestCase {
    /// INVITEs sent twice (the second an identical retransmission) plus OPTIONS: 1,200 datagrams.
    static let invites = 400
    static let optionsCount = 400
    static var datagrams: Int { 2 * invites + optionsCount }

    func testSpreadSharesOneFlowFairlyOverTwoAndFourWorkersOnIPv4AndIPv6() throws {
        try skipUnderSanitizer("4,800 exchanges over four daemons measure the kernel's steering; testFlowKeepsOneFlowOnOneWorker runs the same path")
        for workers in [2, 4] {
            for ipv6 in [false, true] {
                let shares = try sendOneFlow(steering: "spread", workers: workers, ipv6: ipv6)
                let fair = 100.0 / Double(workers)
                for (worker, share) in shares.sorted(by: { $0.key < $1.key }) {
                    XCTAssertEqual(share, fair, accuracy: 10,
                                   "\(workers) workers, \(ipv6 ? "IPv6" : "IPv4"): worker \(worker) got \(share) % of one flow, fair is \(fair) %: \(shares)")
                }
            }
        }
    }

    /// The control: without the program, the same single flow lands on one worker, which is
    /// what the spread test would see if the program were not attached.
    func testFlowKeepsOneFlowOnOneWorker() throws {
        for ipv6 in [false, true] {
            let shares = try sendOneFlow(steering: "flow", workers: 4, ipv6: ipv6)
            XCTAssertEqual(shares.values.max() ?? 0, 100, accuracy: 0.001, "\(ipv6 ? "IPv6" : "IPv4"): one flow on one worker with flow: \(shares)")
        }
    }

    /// A reload cannot change the groups' program or size: udp-steering and workers are named
    /// as needing a restart and the program in force keeps spreading over the workers running.
    /// A restart on the same port with another worker count builds new groups, spread over
    /// the new count.
    func testReloadKeepsTheProgramAndARestartSpreadsOverTheNewWorkerCount() throws {
        try skipUnderSanitizer("3,600 exchanges and a restart measure the kernel's steering")
        let daemon = try startDaemon(["workers = 2", "udp-steering = spread", "log-level = notice"], name: "steer-reload")
        assertFair(try measureOneFlow(daemon, name: "before reload", ipv6: false, port: daemon.port), workers: 2, "before the reload")
        let config = try String(contentsOfFile: daemon.configPath, encoding: .utf8)
        let changed = config.replacingOccurrences(of: "workers = 2", with: "workers = 3")
            .replacingOccurrences(of: "udp-steering = spread", with: "udp-steering = flow")
        write("steer-reload.conf", changed)
        let reload = try lookupd(["reload", "--config", daemon.configPath], timeout: 30)
        XCTAssertEqual(reload.status, 3, reload.summary)
        XCTAssertTrue(reload.stdout.contains("\nneeds restart: udp-steering, workers (the old values stay in force"), reload.stdout)
        assertFair(try measureOneFlow(daemon, name: "after reload", ipv6: false, port: daemon.port), workers: 2, "after the reload (still spread)")

        write("steer-reload.conf", changed.replacingOccurrences(of: "udp-steering = flow", with: "udp-steering = spread"))
        XCTAssertEqual(terminate(daemon).status, 0)
        let child = try ChildProcess(executable: LookupdBinary.path!, arguments: ["serve", "--config", daemon.configPath],
                                     folder: folder, name: "steer-restart")
        defer { child.stop(grace: 5) }
        let restarted = LookupdDaemon(name: "steer-restart", configPath: daemon.configPath, controlSocket: daemon.controlSocket,
                                      port: daemon.port, child: child)
        XCTAssertTrue(eventually(timeout: 15) { !child.isRunning || restarted.answersOptions(timeout: 0.2) != nil }, child.stderr)
        // Logged once the workers run, so perhaps just after the first answer.
        XCTAssertTrue(eventually(timeout: 5) { child.stderr.contains("with 3 workers (mode redirect, udp-steering spread)") }, child.stderr)
        assertFair(try measureOneFlow(restarted, name: "restarted", ipv6: false, port: daemon.port), workers: 3, "restarted with 3 workers")
    }

    private func assertFair(_ shares: [String: Double], workers: Int, _ what: String, line: UInt = #line) {
        XCTAssertEqual(shares.count, workers, "\(what): \(shares)", line: line)
        let fair = 100.0 / Double(workers)
        for (worker, share) in shares {
            XCTAssertEqual(share, fair, accuracy: 10, "\(what): \(worker) got \(share) % of one flow, fair is \(fair) %", line: line)
        }
    }

    /// Sends `datagrams` requests over one socket to a fresh daemon and returns each worker's
    /// share (percent) of them, from `lookupd_worker_requests_total`. Every datagram is answered,
    /// a retransmission byte-identically to its original (whichever worker got it), and TCP
    /// requests on the same daemon are answered too.
    private func sendOneFlow(steering: String, workers: Int, ipv6: Bool) throws -> [String: Double] {
        let v6Port = freeLoopbackPort()
        var extra = ["workers = \(workers)", "udp-steering = \(steering)", "log-level = notice"]
        if ipv6 { extra.append("listen = udp:[::1]:\(v6Port)") }
        let name = "steer-\(steering)-\(workers)-\(ipv6 ? 6 : 4)"
        let daemon = try startDaemon(extra, name: name)
        defer { _ = terminate(daemon) }
        let shares = try measureOneFlow(daemon, name: name, ipv6: ipv6, port: ipv6 ? v6Port : daemon.port)
        XCTAssertEqual(shares.count, workers, "\(name): one series per worker")
        return shares
    }

    private func measureOneFlow(_ daemon: LookupdDaemon, name: String, ipv6: Bool, port: UInt16) throws -> [String: Double] {
        let before = try stats(daemon).family("lookupd_worker_requests_total")
        let peer = try OneFlowPeer(ipv6: ipv6, port: port)
        var unanswered = 0
        for i in 0..<Self.invites {
            let message = invite(from: "<sip:\(Caller.unicom)@127.0.0.1>", port: daemon.port)
            let answer = peer.exchange(message)
            let again = peer.exchange(message)
            if answer == nil || again == nil { unanswered += 1; continue }
            XCTAssertEqual(again, answer, "\(name): retransmission \(i) answered differently")
            if peer.exchange(options(port: daemon.port)) == nil { unanswered += 1 }
        }
        XCTAssertEqual(unanswered, 0, "\(name): requests without an answer")

        let after = try stats(daemon).family("lookupd_worker_requests_total")
        var counts: [String: Int] = [:]
        for (series, value) in after { counts[series] = value - (before[series] ?? 0) }
        let total = counts.values.reduce(0, +)
        XCTAssertEqual(total, Self.datagrams, "\(name): every datagram counted once: \(counts)")

        // TCP is untouched by the UDP program: connections are answered as before.
        for _ in 0..<4 {
            let tcp = try TCPPeer(to: daemon.port)
            XCTAssertEqual(tcp.exchange(options(port: daemon.port, transport: "TCP"))?.statusCode, 200, "\(name): OPTIONS over TCP")
        }
        let shares = counts.mapValues { 100 * Double($0) / Double(max(1, total)) }
        print("\(name): per-worker shares of one flow (%): \(shares.sorted { $0.key < $1.key }.map { String(format: "%.1f", $0.value) })")
        return shares
    }
}

/// One UDP socket on 127.0.0.1 or ::1: every datagram it sends is one flow.
private final class OneFlowPeer {
    let fd: Int32
    let ipv6: Bool
    let port: UInt16

    init(ipv6: Bool, port: UInt16) throws {
        self.ipv6 = ipv6
        self.port = port
        fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError.failed("socket: \(String(cString: strerror(errno)))") }
        // Connected: one source port and one destination for the whole run, as an SBC's trunk.
        if ipv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = in6addr_loopback
            try connectOrClose(fd, to: address, "[::1]:\(port)")
        } else {
            try connectOrClose(fd, to: socketAddress("127.0.0.1", port), "127.0.0.1:\(port)")
        }
    }

    deinit { close(fd) }

    /// Sends `bytes` and returns the answer's bytes, or nil after two seconds.
    func exchange(_ bytes: [UInt8]) -> [UInt8]? {
        let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
        guard sent == bytes.count else { return nil }
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 2000) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n > 0 ? Array(buffer[0..<n]) : nil
    }
}
