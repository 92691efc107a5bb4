import Foundation
import Glibc
import XCTest

/// Issue 7.2: the HTTP lookup endpoint (`/lookup`, `/lookup.json`) on the
/// `http-listen` listener: answers, keep-alive, bad requests, limits, access.
final class HTTPTests: DaemonTestCase {
    func testLookupAnswersTheLabelAndTheDecision() throws {
        let (daemon, port) = try startHTTPDaemon()
        let base = "http://127.0.0.1:\(port)"

        // The label as plain text, as mod_cidlookup and CURL() read it; empty for unknown.
        XCTAssertEqual(try curl("\(base)/lookup?number=%2B8613800138000").body, "Fraud Risk")
        XCTAssertEqual(try curl("\(base)/lookup?number=+8618600000000").body, "China Unicom Customer Service",
                       "a literal + stays a plus sign")
        XCTAssertEqual(try curl("\(base)/lookup?number=013812345678").body, "Pizza Palace, Haidian", "national form")
        XCTAssertEqual(try curl("\(base)/lookup?number=%2B8613566667777").body, Caller.cafeLabel, "UTF-8, quotes and backslash as they are")
        XCTAssertEqual(try curl("\(base)/lookup?number=%2B8613911112222").body, "Mum", "a contact wins over the directory")
        let unknown = try curl("\(base)/lookup?number=%2B8613000000001")
        XCTAssertEqual(unknown.status, 200)
        XCTAssertEqual(unknown.body, "", "unknown callers get an empty answer")
        XCTAssertEqual(try curl("\(base)/lookup?number=anonymous").body, "")

        // The whole decision, in the shape of lookupd query --json.
        let json = try curl("\(base)/lookup.json?number=%2B8617012345678&callee=1001")
        XCTAssertEqual(json.status, 200)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.body.utf8)) as? [String: Any], json.body)
        XCTAssertEqual(object["input"] as? String, "+8617012345678")
        XCTAssertEqual(object["number"] as? String, "+8617012345678")
        XCTAssertEqual(object["verdict"] as? String, "blocked")
        XCTAssertEqual(object["label"] as? String, "Virtual Operator Range")
        XCTAssertEqual(object["source"] as? String, "main")
        XCTAssertEqual(object["match"] as? String, "+86170*")
        XCTAssertTrue(object["policy"] is NSNull)
        let query = try lookupd(["query", "--json", "--config", daemon.configPath, "--callee", "1001", "+8617012345678"])
        // Same JSON as lookupd query --json, with the lookup's decision id first.
        let id = try XCTUnwrap(object["id"] as? String, json.body)
        XCTAssertNotNil(id.range(of: "^[0-9a-f]{32}$", options: .regularExpression), id)
        XCTAssertEqual(json.body.replacingOccurrences(of: "{\"id\":\"\(id)\",", with: "{"), query.stdout, "same JSON as lookupd query --json")
        let invalid = try curl("\(base)/lookup.json?number=reception")
        let invalidObject = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(invalid.body.utf8)) as? [String: Any])
        XCTAssertEqual(invalidObject["verdict"] as? String, "invalid")
        XCTAssertTrue(invalidObject["number"] is NSNull)

        // HEAD: the headers of GET, no body; the content types.
        let peer = try HTTPConnectionPeer(port: port)
        peer.send("HEAD /lookup?number=%2B8613800138000 HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = try XCTUnwrap(peer.response(head: true))
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), "10")
        XCTAssertEqual(head.header("Content-Type"), "text/plain; charset=utf-8")
        peer.send("GET /lookup.json?number=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(peer.response()?.header("Content-Type"), "application/json")
    }

    func testKeepAlivePipeliningAndClose() throws {
        let (_, port) = try startHTTPDaemon()
        let peer = try HTTPConnectionPeer(port: port)
        // Three requests in one write: three answers, in order, on the same connection.
        peer.send("GET /lookup?number=%2B8613800138000 HTTP/1.1\r\nHost: x\r\n\r\n"
                  + "GET /lookup?number=%2B8613000000001 HTTP/1.1\r\nHost: x\r\n\r\n"
                  + "GET /lookup?number=%2B8618600000000 HTTP/1.1\r\nHost: x\r\n\r\n")
        let answers = peer.responses(3)
        XCTAssertEqual(answers.map(\.text), ["Fraud Risk", "", "China Unicom Customer Service"])
        XCTAssertTrue(answers.allSatisfy { $0.header("Connection") == nil }, "HTTP/1.1 stays open")
        // Still open: another request, then Connection: close ends it after the answer.
        peer.send("GET /lookup?number=%2B8613812345678 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let last = try XCTUnwrap(peer.response())
        XCTAssertEqual(last.text, "Pizza Palace, Haidian")
        XCTAssertEqual(last.header("Connection"), "close")
        XCTAssertTrue(peer.closes(), "closed after Connection: close")

        // HTTP/1.0 closes unless asked to keep alive; bare LF line ends are accepted.
        let old = try HTTPConnectionPeer(port: port)
        old.send("GET /lookup?number=%2B8613800138000 HTTP/1.0\n\n")
        XCTAssertEqual(old.response()?.text, "Fraud Risk")
        XCTAssertTrue(old.closes())
        let kept = try HTTPConnectionPeer(port: port)
        kept.send("GET /lookup?number=%2B8613800138000 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        XCTAssertEqual(kept.response()?.text, "Fraud Risk")
        kept.send("GET /lookup?number=%2B8613800138000 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        XCTAssertEqual(kept.response()?.text, "Fraud Risk", "the second request on the same HTTP/1.0 connection")
    }

    func testBadRequestsGetTheRightStatus() throws {
        let (daemon, port) = try startHTTPDaemon()
        let long = String(repeating: "a", count: 9000)
        // closes: a request the listener cannot parse leaves the connection out of step, so it is closed.
        let cases: [(request: String, status: Int, closes: Bool, what: String)] = [
            ("GET /lookup HTTP/1.1\r\nHost: x\r\n\r\n", 400, false, "no number"),
            ("GET /lookup?callee=1001 HTTP/1.1\r\nHost: x\r\n\r\n", 400, false, "callee but no number"),
            ("GET /lookup?number=%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, false, "bad percent-encoding"),
            ("GET /lookup?number=%2 HTTP/1.1\r\nHost: x\r\n\r\n", 400, false, "truncated percent-encoding"),
            ("GET /lookup?number=\(String(repeating: "1", count: 300)) HTTP/1.1\r\nHost: x\r\n\r\n", 400, false, "number too long"),
            ("GET /lookup?number=1 HTTP/1.1\r\n\r\n", 400, true, "HTTP/1.1 without Host"),
            ("GET /lookup?number=1 HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, true, "two Host headers"),
            ("GET /lookup?number=1 HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400, true, "obsolete line folding"),
            ("GET /lookup?number=1 HTTP/1.1\r\nHost x\r\n\r\n", 400, true, "header without colon"),
            ("hello\r\n\r\n", 400, true, "not a request line"),
            ("GET  /lookup HTTP/1.1\r\nHost: x\r\n\r\n", 400, true, "two spaces"),
            ("GET lookup?number=1 HTTP/1.1\r\nHost: x\r\n\r\n", 400, true, "relative target"),
            ("GET /lookup?number=1 HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400, true, "bad Content-Length"),
            ("GET /lookup?number=1 HTTP/2.0\r\nHost: x\r\n\r\n", 505, true, "HTTP/2.0 over text"),
            ("GET /lookup?number=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 413, true, "a body"),
            ("GET /lookup?number=1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501, true, "chunked body"),
            ("POST /lookup?number=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405, false, "POST"),
            ("DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 405, false, "DELETE"),
            ("GET /lookupx?number=1 HTTP/1.1\r\nHost: x\r\n\r\n", 404, false, "unknown path"),
            ("GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n", 404, false, "a page that is not there"),
            ("GET /\(long) HTTP/1.1\r\nHost: x\r\n\r\n", 414, true, "request line over 8 KiB"),
            ("GET /lookup?number=1 HTTP/1.1\r\nHost: x\r\nX-Junk: \(long)\r\n\r\n", 431, true, "headers over 8 KiB"),
        ]
        for c in cases {
            let peer = try HTTPConnectionPeer(port: port)
            peer.send(c.request)
            guard let answer = peer.response() else {
                XCTFail("\(c.what): no answer")
                continue
            }
            XCTAssertEqual(answer.status, c.status, "\(c.what): \(answer.text)")
            XCTAssertFalse(answer.text.isEmpty, "\(c.what): the answer says what was wrong")
            if c.status == 405 { XCTAssertEqual(answer.header("Allow"), "GET, HEAD", c.what) }
            if c.closes {
                XCTAssertEqual(answer.header("Connection"), "close", c.what)
                XCTAssertTrue(peer.closes(), "\(c.what): connection closed")
            } else {
                // Still in step: the same connection answers the next request.
                peer.send("GET /lookup?number=%2B8613800138000 HTTP/1.1\r\nHost: x\r\n\r\n")
                XCTAssertEqual(peer.response()?.text, "Fraud Risk", "\(c.what): connection kept")
            }
        }
        // A request that never completes is cut off (slowloris) only after its timeout,
        // so here: a half request, then the peer hangs up. Nothing crashed or hung.
        let half = try HTTPConnectionPeer(port: port)
        half.send("GET /lookup?number=1 HTTP/1.1\r\nHo")
        shutdown(half.fd, Int32(SHUT_WR))
        XCTAssertTrue(half.closes(), "a peer that hangs up mid-request is let go")
        XCTAssertTrue(daemon.isRunning)
        XCTAssertEqual(try curl("http://127.0.0.1:\(port)/lookup?number=%2B8613800138000").body, "Fraud Risk")

        // Every answer was counted by endpoint and code (unparseable requests under "other").
        let metrics = try scrape(port)
        let expected: [String: Int] = [
            #"lookupd_http_requests_total{endpoint="/lookup",code="200"}"#: 9 + 1,   // after each kept connection, and at the end
            #"lookupd_http_requests_total{endpoint="/lookup",code="400"}"#: 5,
            #"lookupd_http_requests_total{endpoint="other",code="400"}"#: 8,
            #"lookupd_http_requests_total{endpoint="other",code="505"}"#: 1,
            #"lookupd_http_requests_total{endpoint="other",code="413"}"#: 1,
            #"lookupd_http_requests_total{endpoint="other",code="501"}"#: 1,
            #"lookupd_http_requests_total{endpoint="/lookup",code="405"}"#: 1,
            #"lookupd_http_requests_total{endpoint="/metrics",code="405"}"#: 1,
            #"lookupd_http_requests_total{endpoint="other",code="404"}"#: 2,
            #"lookupd_http_requests_total{endpoint="other",code="414"}"#: 1,
            #"lookupd_http_requests_total{endpoint="other",code="431"}"#: 1,
        ]
        for (series, value) in expected { XCTAssertEqual(metrics[series], value, series) }
        XCTAssertEqual(metrics.family("lookupd_http_requests_total").values.reduce(0, +), expected.values.reduce(0, +),
                       "nothing else counted\n\(metrics.text)")
    }

    func testConnectionLimitAndAllowedSources() throws {
        let (_, port) = try startHTTPDaemon(["http-max-connections = 2", "http-allow-from = 127.0.0.2/32"])
        // Only 127.0.0.2 is answered.
        let outsider = try HTTPConnectionPeer(port: port, from: "127.0.0.1")
        outsider.send("GET /lookup?number=%2B8613800138000 HTTP/1.1\r\nHost: x\r\n\r\n")
        let refused = try XCTUnwrap(outsider.response())
        XCTAssertEqual(refused.status, 403)
        XCTAssertFalse(refused.text.contains("Fraud"), "nothing about the number leaks")
        XCTAssertTrue(outsider.closes())
        outsider.disconnect()
        // Until the listener has seen it go, it still holds one of the two places.
        let gone = eventually(timeout: 5) {
            let peer = try? HTTPConnectionPeer(port: port, from: "127.0.0.2")
            peer?.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            return peer?.response().map { Stats($0.text)["lookupd_http_connections_open"] } == 1
        }
        XCTAssertTrue(gone, "the refused connection was closed")

        // Two connections held open (each proven accepted by an answer); a third is refused with 503.
        var held: [HTTPConnectionPeer] = []
        for _ in 0..<2 {
            let peer = try HTTPConnectionPeer(port: port, from: "127.0.0.2")
            peer.send("GET /lookup?number=%2B8613800138000 HTTP/1.1\r\nHost: x\r\n\r\n")
            XCTAssertEqual(peer.response()?.text, "Fraud Risk")
            held.append(peer)
        }
        let third = try HTTPConnectionPeer(port: port, from: "127.0.0.2")
        let busy = try XCTUnwrap(third.response(), "the third connection is answered at once")
        XCTAssertEqual(busy.status, 503)
        XCTAssertTrue(third.closes())
        // Once one is closed, there is room again.
        held.removeFirst()
        let answered = eventually(timeout: 5) {
            guard let peer = try? HTTPConnectionPeer(port: port, from: "127.0.0.2") else { return false }
            peer.send("GET /lookup?number=%2B8613800138000 HTTP/1.1\r\nHost: x\r\n\r\n")
            return peer.response()?.status == 200
        }
        XCTAssertTrue(answered, "a connection is accepted again after one closed")
        held[0].send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        let metrics = Stats(try XCTUnwrap(held[0].response()).text)
        XCTAssertGreaterThanOrEqual(metrics[#"lookupd_http_connections_total{event="refused_limit"}"#], 1, metrics.text)
        XCTAssertEqual(metrics[#"lookupd_http_connections_total{event="refused_acl"}"#], 1, metrics.text)
        XCTAssertEqual(metrics[#"lookupd_http_requests_total{endpoint="/lookup",code="403"}"#], 1, metrics.text)
    }

    /// D2: 300 idle connections from a refused source do not take the places of allowed
    /// clients: refused connections are judged at accept, at most 64 are kept (for their 403,
    /// 5 s at most) and the rest closed at once, none counted against http-max-connections.
    func testIdleRefusedConnectionsDoNotLockOutAllowedClients() throws {
        let (_, port) = try startHTTPDaemon(["http-max-connections = 8", "http-allow-from = 127.0.0.2/32"])
        var idle: [HTTPConnectionPeer] = []
        for _ in 0..<300 { idle.append(try HTTPConnectionPeer(port: port, from: "127.0.0.1")) }
        // The allowed clients are served at once, as many as http-max-connections allows.
        var held: [HTTPConnectionPeer] = []
        let started = monotonicSeconds()
        for _ in 0..<8 {
            let peer = try HTTPConnectionPeer(port: port, from: "127.0.0.2")
            peer.send("GET /lookup?number=%2B8613800138000 HTTP/1.1\r\nHost: x\r\n\r\n")
            XCTAssertEqual(peer.response()?.status, 200, "an allowed client is served")
            held.append(peer)
        }
        let took = monotonicSeconds() - started
        print("D2: 300 idle refused HTTP connections; 8 allowed clients served in \(String(format: "%.3f", took)) s")
        XCTAssertLessThan(took, 5, "no allowed client waited for the refused ones")
        held[0].send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        let metrics = Stats(try XCTUnwrap(held[0].response()).text)
        XCTAssertEqual(metrics["lookupd_http_connections_open"], 8, metrics.text)
        XCTAssertEqual(metrics[#"lookupd_http_connections_total{event="refused_acl"}"#], 300, metrics.text)
        XCTAssertEqual(metrics[#"lookupd_http_connections_total{event="refused_limit"}"#], 0, metrics.text)
        // Past 64, refused connections were closed at accept; the 64 kept go within 5 s.
        let closedAtOnce = idle.filter { $0.closes(timeout: 0.05) }.count
        XCTAssertGreaterThanOrEqual(closedAtOnce, 300 - HTTPListenerLimits.refused, "closed at accept")
        XCTAssertTrue(eventually(timeout: 10) { idle.allSatisfy { $0.closes(timeout: 0.01) } }, "the kept ones are closed after their time")
        // A refused source that does ask still gets its 403.
        let asking = try HTTPConnectionPeer(port: port, from: "127.0.0.1")
        asking.send("GET /lookup?number=%2B8613800138000 HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(asking.response()?.status, 403)
    }

    func testATakenOrMalformedHTTPListenStopsTheStart() throws {
        // Held by someone else: the daemon refuses to start and says why.
        let blocker = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(blocker) }
        XCTAssertTrue(bindLoopback(blocker, ip: "127.0.0.1", port: 0))
        XCTAssertEqual(listen(blocker, 1), 0)
        let taken = boundPort(blocker)
        let port = freeLoopbackPort()
        let config = write("taken.conf", configText(name: "taken", port: port, directories: ["main.lkd"], contacts: [],
                                                    extra: ["http-listen = 127.0.0.1:\(taken)"]))
        let result = try lookupd(["serve", "--config", config], timeout: 20)
        XCTAssertEqual(result.status, 1, result.summary)
        XCTAssertTrue(result.stderr.contains("127.0.0.1:\(taken)") && result.stderr.contains("in use"), result.stderr)

        // Bad values are configuration errors naming the line.
        let bad = write("bad.conf", "http-listen = localhost\n")
        let check = try lookupd(["serve", "--config", bad], timeout: 20)
        XCTAssertEqual(check.status, 1)
        XCTAssertTrue(check.stderr.contains("bad.conf:1: http-listen: expected HOST:PORT"), check.stderr)
    }
}

/// The listener's bounds the tests check against (HTTPListener.refusedLimit).
enum HTTPListenerLimits {
    static let refused = 64
}
