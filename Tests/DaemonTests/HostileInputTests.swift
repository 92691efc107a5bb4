import Daemon
import Foundation
import Glibc
import XCTest

/// Issue 8, requirement 3: what scanners, broken gateways and attackers
/// send, over the wire to the real daemon. After each attack the daemon
/// still answers OPTIONS, its memory and descriptors are back within
/// bounds, and `lookupd stats` counts what it refused. (The RFC 4475
/// messages over UDP and TCP are TortureReplayTests.)
final class HostileInputTests: DaemonTestCase {
    // MARK: - Size, truncation, random bytes

    func testRequestsOverTheSizeLimitAreRefusedAndCounted() throws {
        let daemon = try startDaemon()
        let baseline = try XCTUnwrap(Vitals(pid: daemon.pid))
        let before = try stats(daemon)
        let peer = try UDPPeer()
        // A real INVITE grown past max-message-size (16384) by one header.
        func padded(_ size: Int) -> [UInt8] {
            let base = invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: daemon.port)
            let filler = "X-Filler: " + String(repeating: "a", count: max(0, size - base.count - 12)) + "\r\n"
            var bytes = base
            bytes.insert(contentsOf: Array(filler.utf8), at: bytes.count - 2)
            return bytes
        }
        let sizes = [16385, 16386, 30000, 65507]
        for size in sizes {
            let bytes = padded(size)
            XCTAssertEqual(bytes.count, size)
            peer.send(bytes, to: daemon.port)
        }
        XCTAssertNil(peer.receive(timeout: 0.5), "an oversized datagram was answered")
        // Exactly at the limit it is still a request.
        XCTAssertEqual(peer.exchange(padded(16384), port: daemon.port)?.statusLine, "603 Decline")

        // TCP: a header section that never ends, and a body larger than the limit.
        let endless = try TCPPeer(to: daemon.port)
        endless.send(Array("INVITE sip:1@127.0.0.1 SIP/2.0\r\nX-Filler: ".utf8) + [UInt8](repeating: 0x61, count: 20000))
        XCTAssertEqual(endless.receive(timeout: 3), .closed, "an endless header section must close the connection")
        let huge = try TCPPeer(to: daemon.port)
        huge.send(sipMessage(["OPTIONS sip:1@127.0.0.1 SIP/2.0", "Via: SIP/2.0/TCP 127.0.0.1;branch=z9hG4bKbig",
                              "From: <sip:a@127.0.0.1>;tag=1", "To: <sip:b@127.0.0.1>", "Call-ID: big", "CSeq: 1 OPTIONS",
                              "Content-Length: 100000"]))
        XCTAssertEqual(huge.receive(timeout: 3), .closed, "a body past the limit must close the connection")

        let after = try stats(daemon)
        XCTAssertEqual(delta(before, after, #"lookupd_refused_total{reason="size"}"#), sizes.count + 2, after.text)
        assertServing(daemon, "after oversized requests")
        assertBounded(daemon, since: baseline, "after oversized requests")
    }

    func testTruncatedDatagramsNeverGetAMalformedAnswer() throws {
        let daemon = try startDaemon()
        let baseline = try XCTUnwrap(Vitals(pid: daemon.pid))
        let before = try stats(daemon)
        let peer = try UDPPeer()
        let whole = invite(from: "\"Caller\" <sip:\(Caller.pizza)@pbx.example>", port: daemon.port,
                           extra: ["P-Asserted-Identity: <tel:+8613800138000>", "Privacy: none"])
        // Every cut: inside the request line, inside a header name or value, between CR and LF.
        for length in 1..<whole.count { peer.send(Array(whole[0..<length]), to: daemon.port) }
        var answers = 0
        while let datagram = peer.receive(timeout: 1) {
            answers += 1
            assertWellFormedAnswer(datagram, "answer to a truncated INVITE")
        }
        let after = try stats(daemon)
        let counted = delta(before, after, #"lookupd_malformed_total{action="400"}"#) + delta(before, after, #"lookupd_malformed_total{action="dropped"}"#)
            + delta(before, after, #"lookupd_requests_total{method="INVITE",transport="udp"}"#)
        XCTAssertEqual(counted, whole.count - 1, "every truncated datagram is counted as malformed or as a request\n\(after.text)")
        XCTAssertGreaterThan(delta(before, after, #"lookupd_malformed_total{action="dropped"}"#), 0)
        XCTAssertLessThanOrEqual(answers, whole.count - 1)
        assertServing(daemon, "after truncated datagrams")
        assertBounded(daemon, since: baseline, "after truncated datagrams")
    }

    func testRandomBytesAndMutatedTortureMessages() throws {
        let daemon = try startDaemon()
        let baseline = try XCTUnwrap(Vitals(pid: daemon.pid))
        let before = try stats(daemon)
        var random = SeededRandom(seed: 8)
        let torture = try FileManager.default.contentsOfDirectory(atPath: tortureDirectory.path).filter { $0.hasSuffix(".dat") }.sorted()
            .map { [UInt8](FileManager.default.contents(atPath: tortureDirectory.appendingPathComponent($0).path)!) }
        func noise(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) } }
        /// A torture message with a few bytes flipped, cut or duplicated.
        func mutant() -> [UInt8] {
            var bytes = torture.randomElement(using: &random)!
            for _ in 0..<Int.random(in: 1...8, using: &random) {
                let i = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: bytes[i] = UInt8.random(in: 0...255, using: &random)
                case 1: bytes[i] = [0x0D, 0x0A, 0x00, 0x3A, 0x3B, 0x22, 0x5C, 0x3C, 0x3E, 0x20].randomElement(using: &random)!
                case 2: bytes.removeSubrange(i..<min(bytes.count, i + Int.random(in: 1...40, using: &random)))
                default: bytes.insert(contentsOf: bytes[i..<min(bytes.count, i + 30)], at: i)
                }
                if bytes.isEmpty { bytes = [0x0A] }
            }
            return bytes
        }

        let peer = try UDPPeer()
        var sent = 0
        var answers: [[UInt8]] = []
        for round in 0..<3000 {
            let datagram: [UInt8]
            switch round % 3 {
            case 0: datagram = noise(Int.random(in: 1...1400, using: &random))
            case 1: datagram = Array("INVITE sip:".utf8) + noise(Int.random(in: 0...600, using: &random))
            default: datagram = mutant()
            }
            peer.send(datagram, to: daemon.port)
            sent += 1
            if round % 200 == 199 { while let a = peer.receive(timeout: 0.05) { answers.append(a) } }
        }
        while let a = peer.receive(timeout: 0.5) { answers.append(a) }
        for a in answers { assertWellFormedAnswer(a, "answer to random or mutated bytes over UDP") }

        // TCP: connections that send junk (or a mutant) and hang up.
        for round in 0..<150 {
            let connection = try TCPPeer(to: daemon.port)
            connection.send(round % 2 == 0 ? noise(Int.random(in: 1...4000, using: &random)) : mutant())
            if round % 10 == 0, case .message(let m) = connection.receive(timeout: 0.2) {
                assertWellFormedAnswer(m, "answer to random or mutated bytes over TCP")
            }
        }
        let after = try stats(daemon)
        let dropped = delta(before, after, #"lookupd_malformed_total{action="dropped"}"#)
        let refused = delta(before, after, #"lookupd_malformed_total{action="400"}"#)
        let closedInvalid = delta(before, after, #"lookupd_tcp_connections_total{event="closed_invalid_framing"}"#)
        print("random input: \(sent) datagrams, \(answers.count) answers, \(dropped) dropped as malformed, \(refused) answered 400, "
              + "\(closedInvalid) TCP connections closed for invalid framing")
        XCTAssertGreaterThan(dropped, sent / 2, after.text)
        XCTAssertGreaterThan(closedInvalid, 0, after.text)
        assertServing(daemon, "after random bytes")
        assertBounded(daemon, since: baseline, "after random bytes")
    }

    // MARK: - Slow and greedy TCP peers

    /// A slowloris peer (a byte a second), a peer that never reads its
    /// answers and an idle one, at the same time. Each is cut off and
    /// counted; UDP and TCP peers are served promptly all along.
    func testSlowAndNonReadingPeersAreCutOff() throws {
        let daemon = try startDaemon(["tcp-idle-timeout = 4"])
        let baseline = try XCTUnwrap(Vitals(pid: daemon.pid))
        let before = try stats(daemon)
        let port = daemon.port
        let recorder = Recorder()
        let done = DispatchSemaphore(value: 0)

        // Slowloris: an INVITE, one byte per second; the message timeout is 10 s.
        let slowClosedAfter = Recorder()
        Thread {
            defer { done.signal() }
            guard let peer = try? TCPPeer(to: port) else { return recorder.fail("slowloris cannot connect") }
            let started = monotonicSeconds()
            for byte in invite(from: "<sip:\(Caller.fraud)@pbx.example>", port: port, transport: "TCP") {
                if recorder.isStopped { return }
                peer.send([byte])
                var poller = pollfd(fd: peer.fd, events: Int16(POLLIN), revents: 0)
                if poll(&poller, 1, 1000) > 0 {
                    var b: UInt8 = 0
                    if recv(peer.fd, &b, 1, Int32(MSG_DONTWAIT)) <= 0 {
                        slowClosedAfter.add(.init(caller: "slowloris", sent: started, received: monotonicSeconds()))
                        return
                    }
                }
                if monotonicSeconds() - started > 25 { return recorder.fail("slowloris was never cut off") }
            }
            recorder.fail("slowloris sent a whole message before being cut off")
        }.start()

        // A peer that sends requests and never reads the answers (a tiny receive buffer).
        let unreadClosed = Recorder()
        Thread {
            defer { done.signal() }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            defer { close(fd) }
            var small: Int32 = 4096
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            var address = socketAddress("127.0.0.1", port)
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard rc == 0 else { return recorder.fail("greedy peer cannot connect") }
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            let batch = (0..<50).flatMap { _ in options(port: port, transport: "TCP") }
            let started = monotonicSeconds()
            var sentBytes = 0
            while monotonicSeconds() - started < 20, !recorder.isStopped {
                let n = batch.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n > 0 { sentBytes += n; continue }
                if n < 0, errno == EAGAIN || errno == EINTR {
                    var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&poller, 1, 100)
                    if poller.revents & Int16(POLLERR | POLLHUP) != 0 { break }
                    continue
                }
                break  // EPIPE / ECONNRESET: the daemon hung up
            }
            unreadClosed.add(.init(caller: "greedy \(sentBytes) bytes", sent: started, received: monotonicSeconds()))
        }.start()

        // An idle peer: connected, silent; tcp-idle-timeout is 4 s.
        let idle = try TCPPeer(to: port)
        let idleStarted = monotonicSeconds()

        // Meanwhile everyone else is served promptly.
        var slowest = 0.0
        let udp = try UDPPeer()
        let deadline = monotonicSeconds() + 14
        while monotonicSeconds() < deadline {
            let t = monotonicSeconds()
            XCTAssertEqual(udp.exchange(options(port: port), port: port, timeout: 2)?.statusCode, 200, "OPTIONS over UDP during the attack")
            slowest = max(slowest, monotonicSeconds() - t)
            usleep(250_000)
        }
        XCTAssertLessThan(slowest, 1.0, "OPTIONS took \(slowest) s while slow peers were connected")
        XCTAssertEqual(idle.receive(timeout: 1), .closed, "the idle connection should be closed after tcp-idle-timeout")
        XCTAssertLessThan(monotonicSeconds() - idleStarted, 16)
        recorder.stop()
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success)
        XCTAssertNil(recorder.failure)

        let slow = slowClosedAfter.entries.first
        XCTAssertNotNil(slow, "the slowloris connection was not closed")
        if let slow {
            XCTAssertLessThanOrEqual(slow.received - slow.sent, 13, "slowloris cut off after \(slow.received - slow.sent) s; the message timeout is 10 s")
        }
        let greedy = unreadClosed.entries.first
        XCTAssertNotNil(greedy)
        if let greedy { XCTAssertLessThan(greedy.received - greedy.sent, 19, "the peer that never reads was not cut off: \(greedy)") }

        let after = try stats(daemon)
        XCTAssertEqual(delta(before, after, #"lookupd_tcp_connections_total{event="closed_slow_message"}"#), 1, after.text)
        XCTAssertEqual(delta(before, after, #"lookupd_tcp_connections_total{event="closed_unread_responses"}"#), 1, after.text)
        XCTAssertGreaterThanOrEqual(delta(before, after, #"lookupd_tcp_connections_total{event="closed_idle"}"#), 1, after.text)
        assertServing(daemon, "after slow and greedy peers")
        assertBounded(daemon, since: baseline, "after slow and greedy peers")
    }

    /// 10,000 TCP connections opened at once against workers limited to
    /// 2,000 each: the rest are accepted and closed at once (counted), the
    /// daemon's descriptors stay under the limit, and UDP is served
    /// throughout.
    func testTenThousandConnectionsAtOnce() throws {
        let limit = raiseOwnFileLimit()
        guard limit >= 10_300 else {
            throw XCTSkip("this process may open only \(limit) descriptors; 10,000 connections need more (raise the hard limit)")
        }
        let perWorker = 2000, workers = 2, total = 10_000
        let daemon = try startDaemon(["tcp-max-connections = \(perWorker)", "workers = \(workers)"])
        let baseline = try XCTUnwrap(Vitals(pid: daemon.pid))
        let before = try stats(daemon)
        let started = monotonicSeconds()

        var fds: [Int32] = []
        fds.reserveCapacity(total)
        defer { for fd in fds { close(fd) } }
        var address = socketAddress("127.0.0.1", daemon.port)
        for i in 0..<total {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return XCTFail("socket \(i): \(String(cString: strerror(errno)))") }
            fds.append(fd)
            // Spread over source addresses so no source runs short of ports.
            _ = bindLoopback(fd, ip: "127.0.1.\(1 + i % 50)", port: 0)
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if rc != 0 && errno != EINPROGRESS { return XCTFail("connect \(i): \(String(cString: strerror(errno)))") }
        }
        // UDP is answered while the connections pile up.
        XCTAssertEqual(daemon.answersOptions(timeout: 2)?.statusCode, 200, "OPTIONS over UDP during the connection flood")

        // Stats straight from the control socket: spawning `lookupd stats`
        // (Foundation's Process) while this process holds 10,000 descriptors
        // trips a heap over-read in Foundation's descriptor scan under ASan.
        func controlStats() -> Stats? { (try? ControlClient.send("stats", to: daemon.controlSocket, timeout: 10)).map(Stats.init) }
        var accounted = 0
        let counted = eventually(timeout: 60) {
            guard let s = controlStats() else { return false }
            accounted = self.delta(before, s, #"lookupd_tcp_connections_total{event="accepted"}"#)
                + self.delta(before, s, #"lookupd_tcp_connections_total{event="refused_limit"}"#)
            return accounted >= total
        }
        let flood = monotonicSeconds() - started
        let during = try XCTUnwrap(Vitals(pid: daemon.pid))
        let after = try XCTUnwrap(controlStats())
        let accepted = delta(before, after, #"lookupd_tcp_connections_total{event="accepted"}"#)
        let refused = delta(before, after, #"lookupd_tcp_connections_total{event="refused_limit"}"#)
        print("10,000 connections: \(accepted) accepted, \(refused) refused at the limit in \(String(format: "%.1f", flood)) s; daemon \(baseline) -> \(during)")
        XCTAssertTrue(counted, "only \(accounted) of \(total) connections reached the daemon\n\(after.text)")
        XCTAssertLessThanOrEqual(accepted, perWorker * workers + 4, "more connections kept than tcp-max-connections allows")
        XCTAssertGreaterThanOrEqual(refused, total - perWorker * workers, "connections over the limit are counted")
        XCTAssertLessThanOrEqual(during.fds, baseline.fds + perWorker * workers + 8, "descriptors: \(baseline) -> \(during)")
        // Each kept connection has a buffer of max-message-size bytes (mostly untouched pages).
        XCTAssertLessThanOrEqual(during.rssKiB, baseline.rssKiB + 256 * 1024, "memory: \(baseline) -> \(during)")
        XCTAssertEqual(daemon.answersOptions(timeout: 2)?.statusCode, 200, "OPTIONS over UDP with every connection slot taken")

        for fd in fds { close(fd) }
        fds = []
        assertBounded(daemon, since: baseline, rssGrowthMiB: 256, "after the 10,000 connections closed")
        assertServing(daemon, "after the 10,000 connections closed")
    }

    // MARK: - Header injection

    /// Text that ends up in answers (directory labels, contact names, the
    /// caller's own header values) can never start a header line of its own.
    func testHeaderInjectionThroughEveryTextThatReachesAHeader() throws {
        // 1. Labels with line breaks and other controls never get into a directory.
        let evil: [(name: String, label: [UInt8])] = [
            ("CR LF", Array("Fraud\r\nX-Injected: 1".utf8)), ("LF", Array("Fraud\nX-Injected: 1".utf8)),
            ("CR", Array("Fraud\rX-Injected: 1".utf8)), ("NUL", Array("Fraud\u{0}X".utf8)), ("TAB", Array("a\tb".utf8)),
            ("DEL", Array("a\u{7F}b".utf8)), ("NEL", Array("a\u{85}b".utf8)), ("LS", Array("a\u{2028}b".utf8)),
            ("PS", Array("a\u{2029}b".utf8)), ("bad UTF-8", [0x61, 0xC0, 0xAF, 0x62]), ("surrogate", [0x61, 0xED, 0xA0, 0x80]),
            ("256 bytes", Array(String(repeating: "x", count: 256).utf8)),
            // Bidirectional controls make a phone display what follows them reversed (D13).
            ("RLO", Array("Bank\u{202E}moc.knab".utf8)), ("LRE", Array("a\u{202A}b".utf8)), ("PDF", Array("a\u{202C}b".utf8)),
            ("RLI", Array("a\u{2067}b".utf8)), ("PDI", Array("a\u{2069}b".utf8)), ("C1 CSI", Array("a\u{9B}31mb".utf8)),
        ]
        for (i, e) in evil.enumerated() {
            var csv = Array("number,action,label\n+8613566660000,identify,\"".utf8)
            csv += e.label
            csv += Array("\"\n".utf8)
            let source = write("evil-\(i).csv", Data(csv))
            let result = try lookupd(["compile", "--config", planConfig, "-q", source, "-o", path("evil-\(i).lkd")])
            XCTAssertEqual(result.status, 1, "a label with \(e.name) was compiled: \(result.summary)")
            XCTAssertTrue(result.stderr.contains("evil-\(i).csv:2"), "the error names the line: \(result.stderr)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: path("evil-\(i).lkd")))
        }
        let json = write("evil.json", #"[{"number": "+8613566660000", "action": "identify", "label": "a\r\nX-Injected: 1"}]"#)
        XCTAssertEqual(try lookupd(["compile", "--config", planConfig, "-q", json, "-o", path("evil-json.lkd")]).status, 1)

        // 2. Labels that look like SIP but are legal text: quoted, escaped, never a header.
        let tricky = [
            "Fraud\" X-Injected: \"1", "<sip:evil@example.com>", "a;b=c, d", "X-Injected: yes", "\\r\\n", "\"", "\\", "\\\"",
            "Content-Length: 1000", ": :", "SIP/2.0 200 OK",
        ]
        var csv = "number,action,label\n"
        for (i, label) in tricky.enumerated() {
            csv += "+86135666600\(String(format: "%02d", i)),identify,\"\(label.replacingOccurrences(of: "\"", with: "\"\""))\"\n"
        }
        try compile(csv, to: "tricky.lkd")

        // 3. Contact names: a vCard escape that decodes to a line break is skipped, with a warning.
        write("evil.vcf", """
        BEGIN:VCARD
        VERSION:3.0
        FN:Mum\\r\\nX-Injected: 1
        TEL:+8613911112222
        END:VCARD
        BEGIN:VCARD
        VERSION:3.0
        FN:"Dad" \\\\ <sip:x@y>
        TEL:+8613600000000
        END:VCARD

        """)
        write("evil-contacts.csv", "name,number\n\"Line\r\nBreak\",+8618600000000\n")
        let daemon = try startDaemon(["trust-asserted-identity-from = 127.0.0.1"], directories: ["tricky.lkd name=tricky", "main.lkd name=main"],
                                     contacts: ["evil.vcf", "evil-contacts.csv"])
        XCTAssertTrue(daemon.stderr.contains("contact skipped"), "the daemon warns about skipped contacts:\n\(daemon.stderr)")
        let before = try stats(daemon)
        let peer = try UDPPeer()
        let port = daemon.port
        for (i, label) in tricky.enumerated() {
            let caller = "+86135666600\(String(format: "%02d", i))"
            guard let answer = peer.exchange(invite(from: "<sip:\(caller)@pbx.example>", port: port), port: port) else {
                XCTFail("no answer for label \(label.debugDescription)"); continue
            }
            assertWellFormedAnswer(answer.raw, "label \(label.debugDescription)")
            XCTAssertEqual(answer.statusCode, 302)
            XCTAssertEqual(answer.header("X-Caller-Label"), Answer.quoted(label), "label \(label.debugDescription)")
            XCTAssertEqual(answer.header("P-Asserted-Identity").flatMap(SIPAnswer.displayName), label)
        }
        // Mum's card was skipped, so the directory's block stands; Dad is a contact with an escaped name.
        XCTAssertEqual(peer.exchange(invite(from: "<sip:\(Caller.mum)@pbx.example>", port: port), port: port)?.statusLine, "603 Decline")
        let dad = peer.exchange(invite(from: "<sip:\(Caller.liLei)@pbx.example>", port: port), port: port)
        XCTAssertEqual(dad?.header("X-Caller-Label"), Answer.quoted("\"Dad\" \\ <sip:x@y>"))
        XCTAssertEqual(peer.exchange(invite(from: "<sip:\(Caller.unicom)@pbx.example>", port: port), port: port)?
            .header("X-Caller-Label"), Answer.quoted("China Unicom Customer Service"), "the CSV contact with a line break was skipped")

        // 4. The caller's own text, copied into the answer.
        let attempts: [(String, [UInt8])] = [
            ("folded display name", sipMessage([
                "INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0", "Via: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bKinj1",
                "From: \"Evil\r\n X-Injected: 1\" <sip:\(Caller.pizza)@pbx.example>;tag=1", "To: <sip:13000000000@127.0.0.1>",
                "Call-ID: inj1", "CSeq: 1 INVITE", "Max-Forwards: 70", "Content-Length: 0"])),
            ("bare CR in From", sipMessage([
                "INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0", "Via: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bKinj2",
                "From: \"Evil\rX-Injected: 1\" <sip:\(Caller.pizza)@pbx.example>;tag=1", "To: <sip:13000000000@127.0.0.1>",
                "Call-ID: inj2", "CSeq: 1 INVITE", "Max-Forwards: 70", "Content-Length: 0"])),
            ("bare LF in Call-ID", sipMessage([
                "INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0", "Via: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bKinj3",
                "From: <sip:\(Caller.pizza)@pbx.example>;tag=1", "To: <sip:13000000000@127.0.0.1>",
                "Call-ID: inj3\nX-Injected: 1", "CSeq: 1 INVITE", "Max-Forwards: 70", "Content-Length: 0"])),
            ("NUL in To", sipMessage([
                "INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0", "Via: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bKinj4",
                "From: <sip:\(Caller.pizza)@pbx.example>;tag=1", "To: <sip:13000000000@127.0.0.1>\u{0}\r\nX-Injected: 1",
                "Call-ID: inj4", "CSeq: 1 INVITE", "Max-Forwards: 70", "Content-Length: 0"])),
            ("escaped CRLF in the Request-URI (copied into Contact)", sipMessage([
                "INVITE sip:13000000000%0D%0AX-Injected:%201@127.0.0.1:\(port) SIP/2.0", "Via: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bKinj5",
                "From: <sip:\(Caller.pizza)@pbx.example>;tag=1", "To: <sip:13000000000@127.0.0.1>",
                "Call-ID: inj5", "CSeq: 1 INVITE", "Max-Forwards: 70", "Content-Length: 0"])),
            ("escaped CRLF in the caller URI (copied into P-Asserted-Identity)", invite(
                from: "<sip:\(Caller.pizza)@pbx.example;x=%0D%0AX-Injected:%201>", port: port)),
            ("quotes and brackets in an asserted identity from a trusted peer", invite(
                from: "<sip:\(Caller.unknown)@pbx.example>", port: port,
                extra: ["P-Asserted-Identity: \"X-Injected: 1\" <sip:\(Caller.pizza)@pbx.example;a=\"x>\">"])),
            ("header-like Via parameters", sipMessage([
                "INVITE sip:13000000000@127.0.0.1:\(port) SIP/2.0",
                "Via: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bKinj8;received=\"1.2.3.4\r\n X-Injected: 1\"",
                "From: <sip:\(Caller.pizza)@pbx.example>;tag=1", "To: <sip:13000000000@127.0.0.1>",
                "Call-ID: inj8", "CSeq: 1 INVITE", "Max-Forwards: 70", "Content-Length: 0"])),
        ]
        for (name, bytes) in attempts {
            peer.send(bytes, to: port)
            if let answer = peer.receive(timeout: 0.5) {
                assertWellFormedAnswer(answer, name)
                XCTAssertFalse(String(decoding: answer, as: UTF8.self).contains("\r\nX-Injected"), "\(name): \(String(decoding: answer, as: UTF8.self))")
            }
            let tcp = try TCPPeer(to: port)
            tcp.send(bytes)
            if case .message(let m) = tcp.receive(timeout: 0.5) {
                assertWellFormedAnswer(m, name + " over TCP")
                XCTAssertFalse(String(decoding: m, as: UTF8.self).contains("\r\nX-Injected"), "\(name) over TCP")
            }
        }
        // A Request-URI the 302's Contact could not carry is refused with a 400,
        // not left without an answer.
        for uri in ["sip:a>b@127.0.0.1", "sip:a\"b@127.0.0.1", "sip:a<b@127.0.0.1", "tel:+123>4", "sip:caf\u{E9}@127.0.0.1"] {
            let bytes = sipMessage(["INVITE \(uri) SIP/2.0", "Via: SIP/2.0/UDP 127.0.0.1;branch=\(token("z9hG4bK"))",
                                    "From: <sip:\(Caller.unicom)@pbx.example>;tag=1", "To: <sip:13000000000@127.0.0.1>",
                                    "Call-ID: \(token("uri-"))", "CSeq: 1 INVITE", "Max-Forwards: 70", "Content-Length: 0"])
            XCTAssertEqual(peer.exchange(bytes, port: port)?.statusLine, "400 Bad Request-URI", uri)
        }
        let after = try stats(daemon)
        XCTAssertGreaterThan(delta(before, after, #"lookupd_malformed_total{action="dropped"}"#), 0, "bare CR/LF/NUL requests are dropped\n\(after.text)")
        XCTAssertEqual(delta(before, after, #"lookupd_dropped_total{reason="response_too_large"}"#), 0, after.text)
        assertServing(daemon, "after header injection attempts")

        // 5. A label header name that is not a token is refused at start-up.
        let config = write("bad-header.conf", configText(name: "badheader", port: freeLoopbackPort(), directories: ["main.lkd"],
                                                        contacts: [], extra: ["label-header = X-Caller Label"]))
        let refused = try lookupd(["serve", "--config", config], timeout: 15)
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertTrue(refused.stderr.contains("label-header"), refused.stderr)
    }

    // MARK: - Scripts and odd Unicode

    /// Labels in many scripts reach the answer byte for byte; callers written
    /// in odd digits, widths and lengths are answered, never crash anything.
    func testNumbersAndLabelsInEveryScriptAndOddUnicode() throws {
        let labels = [
            "Телемаркетинг", "Τηλεμάρκετινγκ", "מוקד טלפוני", "مركز اتصال", "टेलीमार्केटिंग", "টেলিমার্কেটিং", "การตลาดทางโทรศัพท์",
            "电话推销", "電話行銷", "テレマーケティング", "텔레마케팅", "ტელემარკეტინგი", "Հեռախոսային", "ኢትዮጵያ", "ᓄᓇᕗᑦ",
            "𐌲𐌿𐍄𐌹𐍃𐌺", "👨‍👩‍👧‍👦 Family", "e\u{301}\u{301}\u{301}", "\u{200F}מוקד\u{200E} 24", "zero\u{200B}width", "\u{FEFF}BOM",
            "Ǆǅǆ ﬁ", "Z\u{334}\u{321}\u{356}\u{308}algo", String(repeating: "😀", count: 63) + "abc",
        ]
        var csv = "number,action,label\n"
        for (i, label) in labels.enumerated() {
            csv += "+86135777700\(String(format: "%02d", i)),identify,\"\(label)\"\n"
        }
        try compile(csv, to: "scripts.lkd")
        let daemon = try startDaemon(directories: ["scripts.lkd name=scripts", "main.lkd name=main"])
        let baseline = try XCTUnwrap(Vitals(pid: daemon.pid))
        let port = daemon.port
        let peer = try UDPPeer()
        for (i, label) in labels.enumerated() {
            let answer = peer.exchange(invite(from: "<sip:+86135777700\(String(format: "%02d", i))@pbx.example>", port: port), port: port)
            XCTAssertEqual(answer?.statusCode, 302, label)
            XCTAssertEqual(answer?.header("X-Caller-Label"), Answer.quoted(label), "label \(label.unicodeScalars.map { String($0.value, radix: 16) })")
            if let answer { assertWellFormedAnswer(answer.raw, "label \(label)") }
        }

        func escaped(_ s: String) -> String {
            s.utf8.map { b -> String in
                let c = Character(Unicode.Scalar(b))
                return (b < 0x80 && (c.isLetter || c.isNumber || "+-.".contains(c))) ? String(c) : String(format: "%%%02X", b)
            }.joined()
        }
        // (user part as sent, expected status or nil for "any final answer")
        let fraudDigits = "8613800138000"
        func mapDigits(_ base: UInt32) -> String {
            String(String.UnicodeScalarView(fraudDigits.unicodeScalars.map { Unicode.Scalar(base + ($0.value - 0x30))! }))
        }
        let callers: [(String, Int?)] = [
            (escaped("＋" + mapDigits(0xFF10)), 603),                 // full-width: a number Chinese spreadsheets write
            (escaped("+" + mapDigits(0x0660)), nil),                 // Arabic-Indic
            (escaped("+" + mapDigits(0x06F0)), nil),                 // Extended Arabic-Indic
            (escaped("+" + mapDigits(0x0966)), nil),                 // Devanagari
            (escaped("+" + mapDigits(0x09E6)), nil),                 // Bengali
            (escaped("+" + mapDigits(0x0E50)), nil),                 // Thai
            (escaped("+" + mapDigits(0x1D7CE)), nil),                // mathematical bold
            (escaped("+86 138\u{A0}0013\u{A0}8000"), nil),           // no-break spaces
            (escaped("\u{2212}8613800138000"), nil),                 // minus sign
            (escaped("+86\u{200B}13800138000"), nil),                // zero-width space
            (escaped("+86\u{200F}13800138000"), nil),                // right-to-left mark
            (escaped("①②③④⑤⑥⑦⑧⑨"), nil), (escaped("¹²³⁴⁵⁶⁷⁸⁹"), nil),
            ("+8613800138000%00", nil), ("%2B8613800138000", 603), ("++8613800138000", nil), ("+", nil), ("", nil),
            // Longer than any number: these crashed the normalizer (UInt64 overflow) before the fuzzers found it.
            ("53600000000811112222", nil), ("862222222222222222222222", nil), ("99999999999999999999999999999999", nil),
            ("1234;phone-context=+99999999999999999999", nil), ("+" + String(repeating: "9", count: 40), nil),
        ]
        let before = try stats(daemon)
        for (user, expected) in callers {
            let from = user.isEmpty ? "<sip:pbx.example>" : "<sip:\(user)@pbx.example>"
            guard let answer = peer.exchange(invite(from: from, port: port), port: port) else {
                XCTFail("no answer for caller \(user.debugDescription)"); continue
            }
            assertWellFormedAnswer(answer.raw, "caller \(user)")
            if let expected { XCTAssertEqual(answer.statusCode, expected, "caller \(user)") } else {
                XCTAssertTrue([302, 400, 603].contains(answer.statusCode), "caller \(user): \(answer.statusLine)")
            }
        }
        for user in ["+8613800138000", "53600000000811112222", "1234;phone-context=+99999999999999999999999999"] {
            let tel = invite(from: "<tel:\(user)>", port: port)
            if let answer = peer.exchange(tel, port: port) { assertWellFormedAnswer(answer.raw, "tel:\(user)") } else { XCTFail("no answer for tel:\(user)") }
        }
        let after = try stats(daemon)
        let verdicts = Stats(after.text).family("lookupd_verdicts_total").values.reduce(0, +) - before.family("lookupd_verdicts_total").values.reduce(0, +)
        let answered400 = delta(before, after, #"lookupd_responses_total{code="400"}"#)
        XCTAssertEqual(verdicts + answered400, callers.count + 3, "every caller was screened (or refused as malformed)\n\(after.text)")
        assertServing(daemon, "after odd numbers and labels")
        assertBounded(daemon, since: baseline, "after odd numbers and labels")
    }

    // MARK: - The control socket (issue 13, D8)

    /// D8: control-socket clients that connect and say nothing hold only their own place: with
    /// 40 of them connected (more than the 32 served at once), `stats` and `ping` are answered
    /// within a second, a `lookupd add` is in force within a second, SIGHUP reloads and SIGTERM
    /// stops at once. (Each used to hold the single control loop for a second.)
    func testSilentControlClientsDoNotStallTheControlLoop() throws {
        let daemon = try startDaemon(["log-level = notice"])
        var silent: [ControlPeer] = []
        for _ in 0..<40 { silent.append(try ControlPeer(daemon.controlSocket)) }
        let ping = ControlPeer.timed(daemon.controlSocket, "ping")
        XCTAssertEqual(ping.answer, "pong\n")
        XCTAssertLessThan(ping.seconds, 1, "ping took \(ping.seconds) s")
        let stats = ControlPeer.timed(daemon.controlSocket, "stats")
        XCTAssertTrue(stats.answer?.contains("lookupd_generation 1") ?? false, stats.answer ?? "nothing")
        XCTAssertLessThan(stats.seconds, 1, "stats took \(stats.seconds) s")

        // More silent clients keep coming while a change is made.
        for _ in 0..<40 { silent.append(try ControlPeer(daemon.controlSocket)) }
        let started = monotonicSeconds()
        XCTAssertEqual(try lookupd(["add", Caller.unknown, "--block", "--label", "Added Now", "--config", daemon.configPath]).status, 0)
        let peer = try UDPPeer()
        let inForce = eventually(timeout: 5) {
            peer.exchange(invite(from: "<sip:\(Caller.unknown)@pbx.example>", port: daemon.port), port: daemon.port)?
                .header("X-Caller-Label") == Answer.quoted("Added Now")
        }
        XCTAssertTrue(inForce)
        XCTAssertLessThan(monotonicSeconds() - started, 1.5, "the addition took \(monotonicSeconds() - started) s to be in force")

        daemon.signal(SIGHUP)
        XCTAssertTrue(eventually(timeout: 3) { Stats(ControlPeer.timed(daemon.controlSocket, "stats").answer ?? "")["lookupd_reloads_total"] == 1 })
        let stop = terminate(daemon)
        XCTAssertEqual(stop.status, 0)
        XCTAssertLessThan(stop.seconds, 2, "SIGTERM waited for silent control clients")
    }

    // MARK: - Amplification (issue 13, D12)

    /// D12: a UDP answer is at most 3 times the request it answers. The smallest INVITE for a
    /// number with the longest label (255 bytes, every one escaped) used to buy a 302 many times
    /// its size, sendable to a forged source; now the label leaves P-Asserted-Identity, then the
    /// answer, until it fits (counted). A real PBX's INVITE keeps the label in both headers, and
    /// TCP (no forged sources) is not trimmed. The factors are in docs/TESTING.md.
    func testUDPAnswersAreAtMostThreeTimesTheRequest() throws {
        let longLabel = String(repeating: "\"\\", count: 127) + "x"
        let short = "Spam Risk"
        try compile("number,action,label\n+8613800138000,identify,\"\(longLabel.replacingOccurrences(of: "\"", with: "\"\""))\"\n"
                    + "+8613800138001,identify,\(short)\n+8613800138002,block,\"\(longLabel.replacingOccurrences(of: "\"", with: "\"\""))\"\n", to: "long.lkd")
        let daemon = try startDaemon(directories: ["long.lkd name=long"])
        let port = daemon.port
        // The smallest INVITE lookupd answers (TCP needs Content-Length to frame it).
        func minimal(_ caller: String, tcp: Bool = false) -> [UInt8] {
            Array(("INVITE sip:1@x SIP/2.0\r\nVia: SIP/2.0/\(tcp ? "TCP" : "UDP") x;branch=z9hG4bK\(token())\r\nFrom: <sip:\(caller)@x>;tag=1\r\n"
                   + "To: <sip:1@x>\r\nCall-ID: \(token())\r\nCSeq: 1 INVITE\r\n\(tcp ? "Content-Length: 0\r\n" : "")\r\n").utf8)
        }
        let udp = try UDPPeer()
        let tcp = try TCPPeer(to: port)
        var factors: [String] = []
        for caller in ["+8613800138000", "+8613800138002"] {
            let request = minimal(caller)
            let unbounded = try XCTUnwrap(tcp.exchange(minimal(caller, tcp: true), timeout: 5), "TCP answer")
            let answer = try XCTUnwrap(udp.exchange(request, port: port), "UDP answer")
            factors.append("\(answer.statusCode): \(request.count)-byte INVITE, \(unbounded.raw.count) bytes unbounded (\(String(format: "%.1f", Double(unbounded.raw.count) / Double(request.count)))×), \(answer.raw.count) bytes over UDP (\(String(format: "%.1f", Double(answer.raw.count) / Double(request.count)))×)")
            XCTAssertLessThanOrEqual(answer.raw.count, 3 * request.count, "UDP answer \(answer.raw.count) bytes for a \(request.count)-byte request")
            XCTAssertGreaterThan(unbounded.raw.count, 3 * request.count, "the TCP answer is not trimmed")
            assertWellFormedAnswer(answer.raw, "trimmed answer")
        }
        print("D12 amplification: " + factors.joined(separator: "; "))
        // A PBX's INVITE (the harness's, with Contact and Max-Forwards) and a short label: both headers.
        let real = udp.exchange(invite(from: "<sip:+8613800138001@pbx.example>", port: port), port: port)
        XCTAssertEqual(real?.header("X-Caller-Label"), "\"\(short)\"")
        XCTAssertTrue(real?.header("P-Asserted-Identity")?.hasPrefix("\"\(short)\" <") ?? false, "\(String(describing: real))")
        let stats = try stats(daemon)
        XCTAssertEqual(stats["lookupd_responses_trimmed_total"], 2, stats.text)
    }

    /// D18: with `label-escapes = replace` no display name or label header lookupd writes holds
    /// an escape: `"` and `\` of a label are written as `'` and `/`.
    func testLabelEscapesReplaceWritesNoEscapes() throws {
        let daemon = try startDaemon(["label-escapes = replace"])
        let peer = try UDPPeer()
        let answer = try XCTUnwrap(peer.exchange(invite(from: "<sip:\(Caller.cafe)@pbx.example>", port: daemon.port), port: daemon.port))
        XCTAssertEqual(answer.statusCode, 302)
        XCTAssertEqual(answer.header("X-Caller-Label"), "\"Zoë's 'Café' / Bar\"")
        XCTAssertTrue(answer.header("P-Asserted-Identity")?.hasPrefix("\"Zoë's 'Café' / Bar\" <") ?? false, "\(answer)")
        XCTAssertFalse(String(decoding: answer.raw, as: UTF8.self).contains("\\"), "no backslash anywhere")
    }
}
