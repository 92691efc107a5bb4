import Foundation
import XCTest

/// allow-from and refuse-action, with raw sockets bound to different loopback
/// addresses (every 127.0.0.0/8 address is local on Linux).
final class AccessControlTests: DaemonTestCase {
    func testRefusedWith403() throws {
        // Only 127.0.0.2 (and a block that is not loopback) may use the daemon.
        let daemon = try startDaemon(["allow-from = 10.0.0.0/8, 127.0.0.2/32"], readyFrom: "127.0.0.2")
        let port = daemon.port
        let allowed = try UDPPeer(ip: "127.0.0.2")
        let outsider = try UDPPeer(ip: "127.0.0.1")
        let before = try stats(daemon)

        let blocked = invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port)
        XCTAssertEqual(allowed.exchange(blocked, port: port)?.statusLine, "603 Decline")
        guard let refused = outsider.exchange(blocked, port: port) else { return XCTFail("no 403") }
        XCTAssertEqual(refused.statusLine, "403 Forbidden")
        XCTAssertTrue(refused.header("To")?.contains(";tag=") ?? false, "\(refused)")
        XCTAssertNil(refused.header("X-Caller-Label"), "nothing about the caller leaks to a refused source")
        XCTAssertNil(refused.header("Contact"))
        XCTAssertEqual(outsider.exchange(options(port: port), port: port)?.statusLine, "403 Forbidden")
        // No answer to ACK, and none to a malformed request, from outside.
        outsider.send(request("ACK", port: port), to: port)
        outsider.send(request("INVITE", port: port, maxForwards: "seventy"), to: port)
        XCTAssertNil(outsider.receive(timeout: 0.3))
        // TCP is refused the same way.
        let tcp = try TCPPeer(to: port, from: "127.0.0.1")
        XCTAssertEqual(tcp.exchange(invite(from: "<sip:\(Caller.pizza)@pbx.example>", port: port, transport: "TCP"))?.statusLine,
                       "403 Forbidden")
        let tcpAllowed = try TCPPeer(to: port, from: "127.0.0.2")
        XCTAssertEqual(tcpAllowed.exchange(invite(from: "<sip:\(Caller.pizza)@pbx.example>", port: port, transport: "TCP"))?.statusLine,
                       "302 Moved Temporarily")

        let after = try stats(daemon)
        XCTAssertEqual(after[#"lookupd_responses_total{code="403"}"#] - before[#"lookupd_responses_total{code="403"}"#], 3)
        XCTAssertEqual(after[#"lookupd_verdicts_total{verdict="blocked"}"#] - before[#"lookupd_verdicts_total{verdict="blocked"}"#], 1,
                       "refused requests are not screened")
        XCTAssertEqual(after[#"lookupd_verdicts_total{verdict="identified"}"#] - before[#"lookupd_verdicts_total{verdict="identified"}"#], 1)
        XCTAssertGreaterThanOrEqual(after[#"lookupd_refused_total{reason="acl_403"}"#] - before[#"lookupd_refused_total{reason="acl_403"}"#], 3)
    }

    func testRefusedSilentlyWithDrop() throws {
        let daemon = try startDaemon(["allow-from = 127.0.0.1/32", "refuse-action = drop"])
        let port = daemon.port
        let allowed = try UDPPeer(ip: "127.0.0.1")
        let outsider = try UDPPeer(ip: "127.0.0.3")
        let before = try stats(daemon)
        for message in [invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port), options(port: port),
                        request("INVITE", port: port, maxForwards: "seventy")] {
            outsider.send(message, to: port)
        }
        XCTAssertNil(outsider.receive(timeout: 0.3), "refuse-action = drop: no answer at all")
        XCTAssertEqual(allowed.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port), port: port)?.statusLine, "603 Decline")
        let tcp = try TCPPeer(to: port, from: "127.0.0.3")
        tcp.send(options(port: port, transport: "TCP"))
        if case .message(let m) = tcp.receive(timeout: 0.3) { XCTFail("answered over TCP: \(String(decoding: m, as: UTF8.self))") }

        let after = try stats(daemon)
        XCTAssertEqual(after[#"lookupd_refused_total{reason="acl_dropped"}"#] - before[#"lookupd_refused_total{reason="acl_dropped"}"#], 3, after.text)
        // The TCP connection was closed at accept, before its request was read.
        XCTAssertEqual(after[#"lookupd_tcp_connections_total{event="refused_acl"}"#], 1, after.text)
        XCTAssertEqual(tcp.receive(timeout: 1), .closed)
        XCTAssertEqual(after[#"lookupd_responses_total{code="403"}"#] - before[#"lookupd_responses_total{code="403"}"#], 0)
        XCTAssertEqual(after[#"lookupd_verdicts_total{verdict="blocked"}"#] - before[#"lookupd_verdicts_total{verdict="blocked"}"#], 1)
    }

    /// D3: 300 idle TCP connections from a refused source never take an allowed PBX's place:
    /// with refuse-action = drop they are closed at accept; with 403 at most 64 per worker are
    /// kept for their answers (until 5 s idle) and the rest closed at accept; tcp-max-connections (16 per
    /// worker, more than the 8 allowed connections however the kernel spreads them) is the
    /// allowed sources' alone.
    func testIdleRefusedConnectionsDoNotLockOutTheAllowedPBX() throws {
        for action in ["drop", "403"] {
            let daemon = try startDaemon(["allow-from = 127.0.0.2/32", "refuse-action = \(action)", "tcp-max-connections = 16", "workers = 2"],
                                         name: "acl-\(action)", readyFrom: "127.0.0.2")
            let port = daemon.port
            var idle: [TCPPeer] = []
            for _ in 0..<300 { idle.append(try TCPPeer(to: port, from: "127.0.0.1")) }
            var pbx: [TCPPeer] = []
            let started = monotonicSeconds()
            for i in 0..<8 {
                let peer = try TCPPeer(to: port, from: "127.0.0.2")
                XCTAssertEqual(peer.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, transport: "TCP"), timeout: 5)?.statusLine,
                               "603 Decline", "\(action): allowed connection \(i)")
                pbx.append(peer)
            }
            print("D3 (\(action)): 300 idle refused SIP/TCP connections; 8 allowed connections answered in \(String(format: "%.3f", monotonicSeconds() - started)) s")
            let stats = try stats(daemon)
            let kept = stats[#"lookupd_tcp_connections_total{event="accepted"}"#] - 8
            XCTAssertEqual(stats[#"lookupd_tcp_connections_total{event="refused_acl"}"#], 300 - kept, "\(action)\n\(stats.text)")
            XCTAssertEqual(stats[#"lookupd_tcp_connections_total{event="refused_limit"}"#], 0, "\(action)\n\(stats.text)")
            if action == "drop" { XCTAssertEqual(kept, 0, "drop: none kept") } else { XCTAssertLessThanOrEqual(kept, 2 * 64, "403: at most 64 per worker") }
            if action == "403" {
                // A kept one that asks gets its 403 (each time it asks), and is closed once idle.
                let asking = idle.first { $0.receive(timeout: 0.01) == .timeout }!
                XCTAssertEqual(asking.exchange(options(port: port, transport: "TCP"))?.statusLine, "403 Forbidden")
                XCTAssertEqual(asking.exchange(options(port: port, transport: "TCP"))?.statusLine, "403 Forbidden")
                XCTAssertEqual(asking.receive(timeout: 10), .closed)
            }
            XCTAssertTrue(eventually(timeout: 15) { idle.allSatisfy { $0.receive(timeout: 0.01) == .closed } }, "\(action): every refused connection ends")
        }
    }

    /// D17: `lookupd serve` refuses a listener beyond loopback without allow-from (nothing is
    /// bound: the check comes first), and an HTTP listener beyond loopback that would answer
    /// everyone; with `allow-from = any` it starts and warns (run in a network namespace of its
    /// own, `unshare -rn`, so nothing is exposed on this machine).
    func testListenersBeyondLoopbackNeedTheirSourcesNamed() throws {
        let port = freeLoopbackPort()
        for (name, extra, complaint) in [
            ("open", ["listen = udp:0.0.0.0:\(port)"], "listen = udp:0.0.0.0:\(port) is reachable beyond this machine and allow-from is not set"),
            ("http", ["http-listen = 0.0.0.0:\(port)"], "http-listen = 0.0.0.0:\(port) is reachable beyond this machine"),
            ("http-any", ["allow-from = any", "http-listen = [::]:\(port)"], "set http-allow-from"),
        ] {
            let config = write("\(name).conf", configText(name: name, port: port, directories: ["main.lkd"], contacts: [], extra: extra))
            let result = try lookupd(["serve", "--config", config], timeout: 20)
            XCTAssertEqual(result.status, 1, "\(name): \(result.summary)")
            XCTAssertTrue(result.stderr.contains(complaint), "\(name): \(result.stderr)")
        }
        // A reload that would leave a listener beyond loopback open is refused too.
        let daemon = try startDaemon()
        let text = readText(daemon.configPath)
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, text + "listen = udp:0.0.0.0:\(port)\n")
        let reload = try lookupd(["reload", "--config", daemon.configPath])
        XCTAssertEqual(reload.status, 1, reload.summary)
        XCTAssertTrue(reload.stdout.contains("allow-from is not set") || reload.stderr.contains("allow-from is not set"), reload.summary)
        write(URL(fileURLWithPath: daemon.configPath).lastPathComponent, text)

        let any = write("any.conf", configText(name: "any", port: port, directories: ["main.lkd"], contacts: [],
                                               extra: ["listen = udp:0.0.0.0:\(port)", "allow-from = any"]))
        let child = try ChildProcess(executable: "/usr/bin/unshare",
                                     arguments: ["-rn", "sh", "-c", "ip link set lo up && exec \(LookupdBinary.path!) serve --config \(any)"],
                                     folder: folder, name: "any")
        defer { child.stop() }
        XCTAssertTrue(eventually(timeout: 15) { !child.isRunning || child.stderr.contains("serving on") }, child.stderr)
        XCTAssertTrue(child.isRunning, child.stderr)
        XCTAssertTrue(child.stderr.contains("allow-from = any: every source that reaches udp:0.0.0.0:\(port) is answered"), child.stderr)
    }
}
