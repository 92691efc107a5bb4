import Foundation
import XCTest

/// Requirement 5: after a known mix of traffic, `lookupd stats` shows exactly
/// the counts that mix produces (as differences from a snapshot taken after
/// start-up, so the readiness probes do not matter).
final class StatsTests: DaemonTestCase {
    static let families = ["lookupd_requests_total", "lookupd_verdicts_total", "lookupd_responses_total",
                           "lookupd_malformed_total", "lookupd_refused_total", "lookupd_dropped_total",
                           "lookupd_tcp_connections_total", "lookupd_tcp_keepalives_total", "lookupd_labels_refused_total",
                           "lookupd_send_errors_total"]

    func testCountersMatchAKnownMix() throws {
        let daemon = try startDaemon(["allow-from = 127.0.0.1/32"])
        let port = daemon.port
        let before = try stats(daemon)
        let udp = try UDPPeer()
        let outsider = try UDPPeer(ip: "127.0.0.2")

        func answer(_ message: [UInt8], _ what: String, from peer: UDPPeer? = nil) -> Int? {
            let a = (peer ?? udp).exchange(message, port: port)
            XCTAssertNotNil(a, "\(what): no answer")
            return a?.statusCode
        }
        func from(_ n: String) -> String { "<sip:\(n)@pbx.example>" }

        // UDP, screened INVITEs: one per verdict (two blocked).
        XCTAssertEqual(answer(invite(from: from(Caller.fraud), port: port), "blocked"), 603)
        XCTAssertEqual(answer(invite(from: from(Caller.blockedUnlabelled), port: port), "blocked, no label"), 603)
        XCTAssertEqual(answer(invite(from: from(Caller.pizza), port: port), "identified"), 302)
        XCTAssertEqual(answer(invite(from: from(Caller.mum), port: port), "contact"), 302)
        XCTAssertEqual(answer(invite(from: from(Caller.unknown), port: port), "unknown"), 302)
        XCTAssertEqual(answer(invite(from: "<sip:anonymous@anonymous.invalid>", port: port), "anonymous"), 302)
        XCTAssertEqual(answer(invite(from: "<sip:reception@pbx.example>", port: port), "invalid"), 302)
        // UDP, protocol answers.
        XCTAssertEqual(answer(options(port: port), "OPTIONS"), 200)
        XCTAssertEqual(answer(options(port: port), "OPTIONS"), 200)
        XCTAssertEqual(answer(request("BYE", port: port, toTag: "dialog1"), "BYE"), 481)
        XCTAssertEqual(answer(request("INVITE", port: port, from: from(Caller.fraud), toTag: "dialog1"), "re-INVITE"), 481)
        XCTAssertEqual(answer(request("REGISTER", port: port), "REGISTER"), 405)
        XCTAssertEqual(answer(request("FOO", port: port), "unknown method"), 501)
        XCTAssertEqual(answer(request("INVITE", port: port, from: from(Caller.fraud), maxForwards: "0"), "Max-Forwards 0"), 483)
        XCTAssertEqual(answer(request("INVITE", port: port, from: from(Caller.fraud), extra: ["Require: frobnication"]), "Require"), 420)
        XCTAssertEqual(answer(request("INVITE", port: port, from: from(Caller.fraud), maxForwards: "seventy"), "malformed"), 400)
        // UDP, no answer: ACK, CANCEL, noise, a stray response.
        for silent in [request("ACK", port: port), request("CANCEL", port: port), Array("hello world\r\n".utf8),
                       Array("SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bKx\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\n\r\n".utf8)] {
            udp.send(silent, to: port)
            XCTAssertNil(udp.receive(timeout: 0.1), "no answer expected to \(String(decoding: silent.prefix(20), as: UTF8.self))")
        }
        // Same socket, same worker, in order: once this is answered, everything before was counted.
        XCTAssertEqual(answer(options(port: port), "OPTIONS after the silent ones"), 200)

        // TCP: one connection, two INVITEs, OPTIONS, a CRLFCRLF keep-alive.
        let tcp = try TCPPeer(to: port)
        XCTAssertEqual(tcp.exchange(invite(from: from(Caller.fraud), port: port, transport: "TCP"))?.statusCode, 603)
        XCTAssertEqual(tcp.exchange(invite(from: from(Caller.unicom), port: port, transport: "TCP"))?.statusCode, 302)
        XCTAssertEqual(tcp.exchange(options(port: port, transport: "TCP"))?.statusCode, 200)
        tcp.send(Array("\r\n\r\n".utf8))
        XCTAssertEqual(tcp.takeBuffered(timeout: 0.5), [13, 10], "a CRLFCRLF ping gets a CRLF pong (RFC 5626)")

        // Outside allow-from: refused with 403, whatever the method.
        XCTAssertEqual(answer(invite(from: from(Caller.pizza), port: port), "outsider INVITE", from: outsider), 403)
        XCTAssertEqual(answer(options(port: port), "outsider OPTIONS", from: outsider), 403)

        let after = try stats(daemon)
        let expected: [String: Int] = [
            #"lookupd_requests_total{method="INVITE",transport="udp"}"#: 7 + 3 + 1,   // screened, re-INVITE/483/420, outsider
            #"lookupd_requests_total{method="OPTIONS",transport="udp"}"#: 3 + 1,
            #"lookupd_requests_total{method="BYE",transport="udp"}"#: 1,
            #"lookupd_requests_total{method="REGISTER",transport="udp"}"#: 1,
            #"lookupd_requests_total{method="other",transport="udp"}"#: 1,
            #"lookupd_requests_total{method="ACK",transport="udp"}"#: 1,
            #"lookupd_requests_total{method="CANCEL",transport="udp"}"#: 1,
            #"lookupd_requests_total{method="INVITE",transport="tcp"}"#: 2,
            #"lookupd_requests_total{method="OPTIONS",transport="tcp"}"#: 1,
            #"lookupd_verdicts_total{verdict="blocked"}"#: 3,
            #"lookupd_verdicts_total{verdict="identified"}"#: 2,
            #"lookupd_verdicts_total{verdict="contact"}"#: 1,
            #"lookupd_verdicts_total{verdict="unknown"}"#: 1,
            #"lookupd_verdicts_total{verdict="anonymous"}"#: 1,
            #"lookupd_verdicts_total{verdict="invalid"}"#: 1,
            #"lookupd_responses_total{code="603"}"#: 3,
            #"lookupd_responses_total{code="302"}"#: 6,
            #"lookupd_responses_total{code="200"}"#: 4,
            #"lookupd_responses_total{code="481"}"#: 2,
            #"lookupd_responses_total{code="405"}"#: 1,
            #"lookupd_responses_total{code="501"}"#: 1,
            #"lookupd_responses_total{code="483"}"#: 1,
            #"lookupd_responses_total{code="420"}"#: 1,
            #"lookupd_responses_total{code="400"}"#: 1,
            #"lookupd_responses_total{code="403"}"#: 2,
            #"lookupd_malformed_total{action="400"}"#: 1,
            #"lookupd_malformed_total{action="dropped"}"#: 1,
            #"lookupd_refused_total{reason="acl_403"}"#: 2,
            #"lookupd_dropped_total{reason="stray_response"}"#: 1,
            #"lookupd_dropped_total{reason="cancel_ignored"}"#: 1,
            #"lookupd_tcp_connections_total{event="accepted"}"#: 1,
            "lookupd_tcp_keepalives_total": 1,
        ]
        var seen = Set<String>()
        for family in Self.families {
            let series = after.family(family)
            XCTAssertFalse(series.isEmpty, "no \(family) in\n\(after.text)")
            XCTAssertTrue(after.text.contains("# TYPE \(family) counter"), "\(family) has a TYPE line")
            for (name, value) in series {
                seen.insert(name)
                XCTAssertEqual(value - before[name], expected[name] ?? 0, name)
            }
        }
        for name in expected.keys where !seen.contains(name) { XCTFail("\(name) missing from lookupd stats") }

        // The per-worker request counts add up to the total.
        let requests = after.family("lookupd_requests_total").values.reduce(0, +)
        let perWorker = after.family("lookupd_worker_requests_total")
        XCTAssertEqual(perWorker.count, 2, "two workers\n\(after.text)")
        XCTAssertEqual(perWorker.values.reduce(0, +), requests)
        XCTAssertEqual(after["lookupd_workers"], 2)
        XCTAssertEqual(after["lookupd_generation"], 1)
        XCTAssertEqual(after[#"lookupd_directory_entries{directory="main"}"#], 7, after.text)
        XCTAssertEqual(after[#"lookupd_directory_prefix_rules{directory="main"}"#], 1, after.text)
        XCTAssertGreaterThanOrEqual(after["lookupd_uptime_seconds"], 0)

        // --socket gives the same report as --config.
        let direct = try lookupd(["stats", "--socket", daemon.controlSocket])
        XCTAssertEqual(direct.status, 0, direct.summary)
        XCTAssertEqual(Stats(direct.stdout).family("lookupd_responses_total"), after.family("lookupd_responses_total"))
    }

    func testStatsWithoutADaemonFailsClearly() throws {
        let socket = path("nobody.sock")
        let result = try lookupd(["stats", "--socket", socket])
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertTrue(result.stderr.contains(socket) && result.stderr.contains("is lookupd serve running?"), result.stderr)
    }
}
