import Foundation
import XCTest

/// Requirement 3: the RFC 4475 torture messages, byte-exact, sent to the real
/// daemon. Each answer (or silence) must be one EXPECTED.tsv allows, and the
/// daemon must still answer OPTIONS afterwards.
///
/// The messages name public addresses in Via and Contact; the daemon answers
/// the socket's source address, so every reply comes back to this loopback
/// socket. Nothing is ever sent anywhere but 127.0.0.1.
final class TortureReplayTests: DaemonTestCase {
    struct Expectation {
        var name: String
        var valid: String
        var method: String
        var expected: [String]
        var tolerated: [String]
        var accepted: [String] { expected + tolerated }
    }

    static func expectations() throws -> [Expectation] {
        let text = readText(tortureDirectory.appendingPathComponent("EXPECTED.tsv").path)
        var rows: [Expectation] = []
        for line in text.split(separator: "\n").dropFirst() {
            let cols = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard cols.count >= 7 else { throw HarnessError.failed("EXPECTED.tsv: short row \(line)") }
            let tokens = { (s: String) in s.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
            rows.append(Expectation(name: cols[0], valid: cols[2], method: cols[3], expected: tokens(cols[6]),
                                    tolerated: cols.count > 7 ? tokens(cols[7]) : []))
        }
        return rows
    }

    /// Does `status` (nil: no answer) satisfy one of the tokens?
    static func matches(_ status: Int?, _ tokens: [String]) -> Bool {
        tokens.contains { token in
            switch token {
            case "any": return true
            case "drop": return status == nil
            default:
                guard let status else { return false }
                if token.hasPrefix("!") { return Int(token.dropFirst()).map { status != $0 } ?? false }
                if token.count == 3, token.hasSuffix("xx"), let digit = Int(token.prefix(1)) { return status / 100 == digit }
                return Int(token) == status
            }
        }
    }

    func testTokenMatching() {
        XCTAssertTrue(Self.matches(400, ["400"]))
        XCTAssertTrue(Self.matches(404, ["4xx"]))
        XCTAssertFalse(Self.matches(503, ["4xx"]))
        XCTAssertTrue(Self.matches(302, ["!400"]))
        XCTAssertFalse(Self.matches(400, ["!400"]))
        XCTAssertFalse(Self.matches(nil, ["!400"]))
        XCTAssertTrue(Self.matches(nil, ["drop"]))
        XCTAssertFalse(Self.matches(400, ["drop"]))
        XCTAssertTrue(Self.matches(nil, ["any"]))
        XCTAssertTrue(Self.matches(200, ["2xx", "483"]))
    }

    func testEveryMessageOverUDP() throws {
        let rows = try Self.expectations()
        let files = try FileManager.default.contentsOfDirectory(atPath: tortureDirectory.path).filter { $0.hasSuffix(".dat") }.sorted()
        XCTAssertEqual(files.count, 50, "the 50 RFC 4475 messages")
        XCTAssertEqual(Set(rows.map(\.name)), Set(files), "EXPECTED.tsv lists every .dat and nothing else")

        let daemon = try startDaemon()
        let peer = try UDPPeer()
        var summary: [String] = []
        for row in rows {
            let bytes = [UInt8](FileManager.default.contents(atPath: tortureDirectory.appendingPathComponent(row.name).path)!)
            peer.send(bytes, to: daemon.port)
            // Every answer to this message: a second one would be wrong (dblreq.dat). Silence is
            // judged after 300 ms; where silence is not acceptable, an answer may take up to 2 s.
            var answers: [SIPAnswer] = []
            var undecodable = 0
            let mayBeSilent = row.accepted.contains("drop") || row.accepted.contains("any")
            if let first = peer.receive(timeout: mayBeSilent ? 0.3 : 2) {
                if let a = SIPAnswer(first) { answers.append(a) } else { undecodable += 1 }
                while let more = peer.receive(timeout: 0.05) {
                    if let a = SIPAnswer(more) { answers.append(a) } else { undecodable += 1 }
                }
            }
            // Still alive? The OPTIONS answer is told apart by its Call-ID; anything else that
            // arrives meanwhile is a late answer to the torture message.
            let probeID = token("probe-")
            peer.send(request("OPTIONS", port: daemon.port, callID: probeID), to: daemon.port)
            var alive = false
            let deadline = monotonicSeconds() + 2
            while !alive, monotonicSeconds() < deadline, let datagram = peer.receive(timeout: deadline - monotonicSeconds()) {
                guard let a = SIPAnswer(datagram) else { undecodable += 1; continue }
                if a.header("Call-ID") == probeID {
                    alive = true
                    XCTAssertEqual(a.statusCode, 200, "after \(row.name): OPTIONS got \(a.statusLine)")
                } else {
                    answers.append(a)
                }
            }
            XCTAssertTrue(alive, "after \(row.name) the daemon no longer answers OPTIONS")
            let status = answers.first?.statusCode
            summary.append("\(row.name): \(answers.first?.statusLine ?? "no answer")")
            XCTAssertEqual(undecodable, 0, "\(row.name): an answer that is not a SIP response")
            XCTAssertLessThanOrEqual(answers.count, 1, "\(row.name): one request, one answer: \(answers)")
            XCTAssertTrue(Self.matches(status, row.accepted),
                          "\(row.name): got \(answers.first?.statusLine ?? "no answer"), expected \(row.expected.joined(separator: "|")) tolerated \(row.tolerated.joined(separator: "|"))")
            if let answer = answers.first {
                XCTAssertEqual(answer.values("Content-Length"), ["0"], "\(row.name): \(answer)")
                XCTAssertFalse(answer.values("Call-ID").isEmpty, "\(row.name): \(answer)")
                XCTAssertNotNil(answer.header("To")?.range(of: #";\s*tag\s*="#, options: .regularExpression),
                                "\(row.name): a final answer carries a To tag: \(answer)")
            }
            if row.name == "dblreq.dat" {
                XCTAssertFalse(answers.contains { $0.header("Call-ID") == "dblreq.0ha0isnda977644900765@192.0.2.15" },
                               "the INVITE trailing the REGISTER in one datagram must be ignored")
            }
        }
        XCTAssertTrue(daemon.isRunning)
        print("torture replay over UDP:\n  " + summary.joined(separator: "\n  "))
    }

    /// Over TCP a message is framed by Content-Length, so the messages about
    /// Content-Length itself behave differently: a missing or invalid one
    /// closes the connection, one announcing more than was sent waits.
    func testMessagesOverTCP() throws {
        let rows = try Self.expectations()
        let daemon = try startDaemon()
        let closes = ["inv2543.dat", "ncl.dat", "mcl01.dat"]   // no / negative / conflicting Content-Length
        // clerr: Content-Length 9999, the rest never comes; baddn: no empty line after the headers
        // (a datagram may end there, a stream message may not).
        let waits = ["clerr.dat", "baddn.dat"]
        var summary: [String] = []
        for row in rows {
            let bytes = [UInt8](FileManager.default.contents(atPath: tortureDirectory.appendingPathComponent(row.name).path)!)
            let connection = try TCPPeer(to: daemon.port)
            connection.send(bytes)
            let mayBeSilent = row.accepted.contains("drop") || row.accepted.contains("any") || waits.contains(row.name)
            let read = connection.receive(timeout: mayBeSilent && !closes.contains(row.name) ? 0.3 : 2)
            switch read {
            case .message(let m):
                let answer = SIPAnswer(m)
                summary.append("\(row.name): \(answer?.statusLine ?? "undecodable")")
                XCTAssertFalse(closes.contains(row.name) || waits.contains(row.name), "\(row.name): answered \(answer?.statusLine ?? "?") over TCP")
                XCTAssertNotNil(answer, "\(row.name): not a SIP response: \(String(decoding: m, as: UTF8.self))")
                XCTAssertTrue(Self.matches(answer?.statusCode, row.accepted),
                              "\(row.name) over TCP: got \(answer?.statusLine ?? "?"), expected \(row.accepted.joined(separator: "|"))")
            case .closed:
                summary.append("\(row.name): connection closed")
                XCTAssertTrue(closes.contains(row.name), "\(row.name): the daemon closed the connection")
            case .timeout:
                summary.append("\(row.name): no answer")
                XCTAssertFalse(closes.contains(row.name), "\(row.name): the connection should have been closed")
                if !waits.contains(row.name) {
                    XCTAssertTrue(Self.matches(nil, row.accepted), "\(row.name) over TCP: no answer; expected \(row.accepted.joined(separator: "|"))")
                }
            }
            // Same daemon, new connection: still serving.
            if let fresh = try? TCPPeer(to: daemon.port) {
                XCTAssertEqual(fresh.exchange(options(port: daemon.port, transport: "TCP"))?.statusCode, 200, "after \(row.name)")
            } else {
                XCTFail("after \(row.name): cannot connect")
            }
        }
        XCTAssertEqual(daemon.answersOptions()?.statusCode, 200)
        print("torture replay over TCP:\n  " + summary.joined(separator: "\n  "))
    }
}
