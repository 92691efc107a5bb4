import Foundation
import Glibc
import XCTest

/// Requirement 6: starting, refusing to start, and stopping.
final class LifecycleTests: DaemonTestCase {
    /// `lookupd serve` that is expected to refuse to start: it must exit (1) quickly.
    func serveFails(_ configPath: String, file: StaticString = #filePath, line: UInt = #line) throws -> RunResult {
        let result = try lookupd(["serve", "--config", configPath], timeout: 15)
        XCTAssertFalse(result.timedOut, "lookupd serve should have refused to start: \(result.summary)", file: file, line: line)
        XCTAssertEqual(result.status, 1, result.summary, file: file, line: line)
        return result
    }

    func testSIGTERMStopsQuicklyWithStatusZeroAndRemovesTheControlSocket() throws {
        let daemon = try startDaemon()
        XCTAssertTrue(FileManager.default.fileExists(atPath: daemon.controlSocket))
        // An idle TCP peer and a half-sent message must not hold up the stop.
        let idle = try TCPPeer(to: daemon.port)
        let partial = try TCPPeer(to: daemon.port)
        partial.send(Array("INVITE sip:1@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/TCP 127.0.0.1".utf8))
        XCTAssertEqual(idle.exchange(options(port: daemon.port, transport: "TCP"))?.statusCode, 200)

        let stop = terminate(daemon)
        XCTAssertTrue(stop.normal, "killed by a signal")
        XCTAssertEqual(stop.status, 0, daemon.stderr)
        XCTAssertLessThan(stop.seconds, 2, "SIGTERM should stop lookupd within 2 s")
        XCTAssertFalse(FileManager.default.fileExists(atPath: daemon.controlSocket), "the control socket is removed on exit")
        XCTAssertTrue(daemon.stderr.contains("received SIGTERM, stopping"), daemon.stderr)
        XCTAssertTrue(daemon.stderr.hasSuffix("<5>stopped\n"), daemon.stderr)
        // The ports are free again: nothing answers.
        let peer = try UDPPeer()
        XCTAssertNil(peer.exchange(options(port: daemon.port), port: daemon.port, timeout: 0.3))
        XCTAssertEqual(idle.receive(timeout: 1), .closed, "open connections are closed")
    }

    /// The control loop also handles the signals: a control-socket client that
    /// trickles its command (or says nothing) must not delay SIGTERM for long.
    func testSIGTERMIsNotHeldUpByASlowControlClient() throws {
        let daemon = try startDaemon()
        let socketPath = daemon.controlSocket
        let stopTrickling = Recorder()
        let trickled = DispatchSemaphore(value: 0)
        Thread {
            defer { trickled.signal() }
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in for (i, b) in socketPath.utf8.enumerated() { raw[i] = b } }
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard rc == 0 else { return stopTrickling.fail("connect: \(String(cString: strerror(errno)))") }
            // "stats" one byte every 300 ms, never the newline.
            for byte in Array("statsstatsstatsstatsstats".utf8) where !stopTrickling.isStopped {
                var b = byte
                _ = send(fd, &b, 1, Int32(MSG_NOSIGNAL))
                usleep(300_000)
            }
        }.start()
        defer {
            stopTrickling.stop()
            _ = trickled.wait(timeout: .now() + 15)
        }
        usleep(400_000)
        let stop = terminate(daemon)
        XCTAssertNil(stopTrickling.failure)
        XCTAssertEqual(stop.status, 0)
        XCTAssertLessThan(stop.seconds, 2, "SIGTERM waited for a slow control-socket client")
    }

    func testSIGINTStopsToo() throws {
        let daemon = try startDaemon()
        daemon.signal(SIGINT)
        XCTAssertTrue(daemon.child.wait(timeout: 2))
        XCTAssertEqual(daemon.child.status, 0)
        XCTAssertTrue(daemon.child.exitedNormally)
        XCTAssertFalse(FileManager.default.fileExists(atPath: daemon.controlSocket))
    }

    func testSecondDaemonOnTheSameControlSocketRefusesToStart() throws {
        let first = try startDaemon()
        // Same config: same control socket (and the same ports, which SO_REUSEPORT would let it share).
        let second = try serveFails(first.configPath)
        XCTAssertTrue(second.stderr.contains("control socket \(first.controlSocket): another lookupd is running"), second.stderr)
        // The first one is untouched: still serving, still reachable on its control socket.
        XCTAssertTrue(first.isRunning)
        XCTAssertTrue(FileManager.default.fileExists(atPath: first.controlSocket))
        XCTAssertEqual(first.answersOptions()?.statusCode, 200)
        let stats = try stats(first)
        XCTAssertEqual(stats["lookupd_workers"], 2)
        // All traffic still goes to the first one: its counters see every request.
        let peer = try UDPPeer()
        for _ in 0..<20 { XCTAssertEqual(peer.exchange(options(port: first.port), port: first.port)?.statusCode, 200) }
        let after = try self.stats(first)
        XCTAssertEqual(after[#"lookupd_requests_total{method="OPTIONS",transport="udp"}"#]
                       - stats[#"lookupd_requests_total{method="OPTIONS",transport="udp"}"#], 20)
    }

    /// A control-socket path that names an ordinary file (a typo in the
    /// config) must not delete it.
    func testControlSocketPathThatIsAFileIsLeftAlone() throws {
        let victim = write("precious.txt", "do not delete\n")
        let config = write("typo.conf", configText(name: "typo", port: freeLoopbackPort(), directories: ["main.lkd"],
                                                   contacts: [], extra: []).replacingOccurrences(of: path("typo.sock"), with: victim))
        let result = try serveFails(config)
        XCTAssertTrue(result.stderr.contains("\(victim): the path exists and is not a socket"), result.stderr)
        XCTAssertEqual(readText(victim), "do not delete\n")
    }

    func testSocketLeftByAKilledDaemonIsReplaced() throws {
        let first = try startDaemon(name: "crashy")
        first.signal(SIGKILL)
        XCTAssertTrue(first.child.wait(timeout: 5))
        XCTAssertTrue(FileManager.default.fileExists(atPath: first.controlSocket), "SIGKILL leaves the socket file behind")
        let second = try startDaemon(name: "crashy")
        XCTAssertEqual(second.controlSocket, first.controlSocket)
        XCTAssertEqual(try stats(second)["lookupd_workers"], 2)
    }

    func testMissingConfig() throws {
        let missing = path("does-not-exist.conf")
        let result = try serveFails(missing)
        XCTAssertTrue(result.stderr.contains("\(missing): cannot open: No such file or directory"), result.stderr)
    }

    func testBadConfigNamesFileAndLine() throws {
        let cases: [(lines: [String], line: Int, message: String)] = [
            (["listen = udp:127.0.0.1:5060", "", "# comment", "block-response = 999"], 4,
             "block-response: expected 603, 607, 608 or 603+"),
            (["listen = udp:127.0.0.1:5060", "unknown-respnse = 404"], 2, "unknown key 'unknown-respnse' (did you mean 'unknown-response'?)"),
            (["listen = udp:127.0.0.1:5060", "listen = tcp:127.0.0.1:99999"], 2, "listen: expected udp:HOST:PORT or tcp:HOST:PORT"),
            (["allow-from = 10.0.0.0/8", "allow-from = 300.1.1.1"], 2, "allow-from: '300.1.1.1' is not an address"),
            (["workers = 2", "workers = 3"], 2, "'workers' is already set on line 1"),
            (["this line has no equals sign"], 1, "expected 'key = value'"),
        ]
        for (i, c) in cases.enumerated() {
            let config = write("bad-\(i).conf", c.lines.joined(separator: "\n") + "\n")
            let result = try serveFails(config)
            XCTAssertTrue(result.stderr.contains("\(config):\(c.line): \(c.message)"), "case \(i): \(result.stderr)")
        }
        // Parsed fine but unusable: no listen address.
        let quiet = write("quiet.conf", "state-directory = \(path("state-quiet"))\ncontrol-socket = \(path("quiet.sock"))\n")
        let result = try serveFails(quiet)
        XCTAssertTrue(result.stderr.contains("\(quiet): no 'listen' address configured"), result.stderr)
    }

    func testBrokenDirectoryRefusesToStart() throws {
        let good = FileManager.default.contents(atPath: path("main.lkd"))!
        write("truncated.lkd", good.prefix(good.count / 2))
        write("notadirectory.lkd", "number,action,label\n+8613800138000,block,Fraud Risk\n")
        let port = freeLoopbackPort()
        for (file, message) in [("truncated.lkd", "truncated"), ("notadirectory.lkd", "not a lookupd directory"),
                                ("missing.lkd", "cannot open: No such file or directory")] {
            let config = write("broken-\(file).conf", configText(name: "broken", port: port, directories: [file],
                                                                   contacts: ["contacts.vcf"], extra: []))
            let result = try serveFails(config)
            XCTAssertTrue(result.stderr.contains("\(path(file)): \(message)"), "\(file): \(result.stderr)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: path("broken.sock")), "\(file): no control socket left behind")
        }
    }

    func testPortInUseRefusesToStartAndLeavesNoSocket() throws {
        // A plain socket (no SO_REUSEPORT) holds the UDP port.
        let squatter = try UDPPeer()
        let config = write("busy.conf", configText(name: "busy", port: squatter.port, directories: ["main.lkd"],
                                                   contacts: [], extra: []))
        let result = try serveFails(config)
        XCTAssertTrue(result.stderr.contains("udp:127.0.0.1:\(squatter.port)") && result.stderr.contains("Address already in use"),
                      result.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("busy.sock")), "the control socket is removed after a failed start")
    }

    /// Workers bind with SO_REUSEPORT, which would let a second lookupd of the
    /// same user join the port group and silently take a share of the calls.
    /// A second daemon on the same port (own control socket) must refuse instead.
    func testSecondDaemonOnTheSamePortRefusesToStart() throws {
        let first = try startDaemon(name: "first")
        let config = write("second.conf", configText(name: "second", port: first.port, directories: ["main.lkd"],
                                                     contacts: [], extra: []))
        let result = try serveFails(config)
        XCTAssertTrue(result.stderr.contains("127.0.0.1:\(first.port)") && result.stderr.contains("Address already in use"),
                      result.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("second.sock")))
        // Every request still reaches the first daemon.
        let before = try stats(first)
        let peer = try UDPPeer()
        for _ in 0..<20 { XCTAssertEqual(peer.exchange(options(port: first.port), port: first.port)?.statusCode, 200) }
        let after = try stats(first)
        XCTAssertEqual(after[#"lookupd_requests_total{method="OPTIONS",transport="udp"}"#]
                       - before[#"lookupd_requests_total{method="OPTIONS",transport="udp"}"#], 20)
    }
}
