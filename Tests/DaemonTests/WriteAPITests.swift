import Foundation
import Glibc
import XCTest

/// Issue 18.1: the write API on `http-listen` (`/v1/entries`) against the
/// real daemon, driven with curl as the PBX would: a block with an expiry
/// is answered 6xx within a second and ends by itself, a wrong token gets
/// 401, a source outside `http-write-allow-from` 403.
final class WriteAPITests: DaemonTestCase {
    static let token = "s3cret-token-for-tests"
    /// The write API answers 127.0.0.2 only; 127.0.0.1 may read the listener but not write.
    static let writer = "127.0.0.2"

    func startWritableDaemon() throws -> (LookupdDaemon, String) {
        write("write.token", Self.token + "\n")
        let (daemon, port) = try startHTTPDaemon(["http-allow-from = 127.0.0.0/8", "http-write-token-file = write.token",
                                                  "http-write-allow-from = \(Self.writer)/32", "log-level = info"])
        return (daemon, "http://127.0.0.1:\(port)/v1/entries")
    }

    /// curl from the writer's address, with the token unless told otherwise.
    func call(_ url: String, _ options: [String], token: String? = WriteAPITests.token, from: String = WriteAPITests.writer)
        throws -> (status: Int, body: String) {
        try curl(url, ["--interface", from] + (token.map { ["-H", "Authorization: Bearer \($0)"] } ?? []) + options)
    }

    func json(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? {
            XCTFail("not a JSON object: \(text)", file: file, line: line)
            return [:]
        }()
    }

    func testBlockThatExpiresAndTheChecksInFront() throws {
        let (daemon, url) = try startWritableDaemon()
        let peer = try UDPPeer()
        let caller = "+18005550199"
        func code() -> Int? {
            peer.exchange(invite(from: "<sip:\(caller)@pbx.example>", port: daemon.port), port: daemon.port)?.statusCode
        }
        XCTAssertEqual(code(), 302, "unknown before")

        // Refused before anything is written: no token, a wrong one, the wrong source.
        let body = #"{"number": "+1 800 555 0199", "action": "block", "label": "Robocall", "expires": 2}"#
        let post = ["-X", "POST", "-H", "Content-Type: application/json", "--data-binary", body]
        XCTAssertEqual(try call(url, post, token: nil).status, 401)
        XCTAssertEqual(try call(url, post, token: "s3cret-token-for-testz").status, 401)
        XCTAssertEqual(try call(url, post, token: "s3cret").status, 401)
        XCTAssertEqual(try call(url, post, from: "127.0.0.1").status, 403)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("main.lkd.journal")), "nothing written")

        // The block: in force within a second, over after about two.
        let posted = try call(url, post)
        let sent = monotonicSeconds()
        XCTAssertEqual(posted.status, 201, posted.body)
        let change = try XCTUnwrap((json(posted.body)["changes"] as? [[String: Any]])?.first)
        XCTAssertEqual(change["number"] as? String, caller)
        XCTAssertEqual(change["outcome"] as? String, "added")
        XCTAssertEqual(change["label"] as? String, "Robocall")
        XCTAssertNotNil(change["expires_at"] as? String)
        XCTAssertTrue(eventually(timeout: 1.0) { (code() ?? 0) >= 600 }, "blocked within a second of the answer")
        let blockedAt = monotonicSeconds() - sent
        XCTAssertTrue(eventually(timeout: 4.0) { code() == 302 }, "the block ends by itself")
        let endedAt = monotonicSeconds() - sent
        XCTAssertGreaterThan(endedAt, 1.0, "not before it was due")
        XCTAssertLessThan(endedAt, 3.5, "within a second or so of its end")
        print("write API: blocked after \(Int(blockedAt * 1000)) ms, unblocked after \(Int(endedAt * 1000)) ms")
        XCTAssertTrue(daemon.stderr.contains("write API: \(Self.writer) changed \(caller) in main: block, label 'Robocall' until "),
                      "logged with the client's address: \(daemon.stderr.suffix(2000))")

        // Bad requests say what is wrong and write nothing.
        let before = (try? Data(contentsOf: URL(fileURLWithPath: path("main.lkd.journal")))) ?? Data()
        for (bad, status) in [(#"{"number": "reception"}"#, 400), (#"{"number": "+8613000000001", "action": "ban"}"#, 400),
                              (#"{"number": "+8613000000001", "colour": "red"}"#, 400), ("not json", 400),
                              (#"{"number": "+8613000000001", "expires": -5}"#, 400),
                              (#"{"number": "+8613000000001", "directory": "nope"}"#, 404),
                              (#"{"number": "+8613000000001", "action": "identify"}"#, 400),
                              ("{\"number\": \"+8613000000001\", \"label\": \"" + String(repeating: "x", count: 5000) + "\"}", 413)] {
            let r = try call(url, ["-X", "POST", "--data-binary", bad])
            XCTAssertEqual(r.status, status, "\(bad.prefix(80)): \(r.body)")
            XCTAssertFalse(r.body.isEmpty)
        }
        XCTAssertEqual((try? Data(contentsOf: URL(fileURLWithPath: path("main.lkd.journal")))) ?? Data(), before)
        XCTAssertTrue(daemon.isRunning)
    }

    func testDeleteAndLookUp() throws {
        let (daemon, url) = try startWritableDaemon()
        let peer = try UDPPeer()
        func code(_ caller: String) -> Int? {
            peer.exchange(invite(from: "<sip:\(caller)@pbx.example>", port: daemon.port), port: daemon.port)?.statusCode
        }
        XCTAssertEqual(code(Caller.fraud), 603)
        var r = try call("\(url)/\(Caller.fraud)", [])
        XCTAssertEqual(r.status, 200, r.body)
        var entry = try XCTUnwrap((json(r.body)["directories"] as? [[String: Any]])?.first)
        XCTAssertEqual(entry["directory"] as? String, "main")
        XCTAssertEqual((entry["entry"] as? [String: Any])?["label"] as? String, "Fraud Risk")

        r = try call("\(url)/\(Caller.fraud)?directory=main", ["-X", "DELETE"])
        XCTAssertEqual(r.status, 200, r.body)
        XCTAssertEqual((json(r.body)["changes"] as? [[String: Any]])?.first?["outcome"] as? String, "removed")
        XCTAssertTrue(eventually(timeout: 1.0) { code(Caller.fraud) == 302 }, "no longer blocked")
        r = try call("\(url)/\(Caller.fraud)", [])
        entry = try XCTUnwrap((json(r.body)["directories"] as? [[String: Any]])?.first)
        XCTAssertTrue(entry["entry"] is NSNull, r.body)
        XCTAssertEqual(try call("\(url)/\(Caller.fraud)", ["-X", "DELETE"]).status, 404, "not there any more")
        // "allow" writes an allow entry (as lookupd add --allow), never a removal: the entry
        // is there afterwards, the block is overridden, and lookupd query sees what the API wrote.
        XCTAssertEqual(code(Caller.blockedUnlabelled), 603)
        r = try call(url, ["-X", "POST", "--data-binary", #"{"number": "\#(Caller.blockedUnlabelled)", "action": "allow", "label": "Let Through"}"#])
        XCTAssertEqual(r.status, 201, r.body)
        let allowChange = try XCTUnwrap((json(r.body)["changes"] as? [[String: Any]])?.first)
        XCTAssertEqual(allowChange["action"] as? String, "allow", r.body)
        XCTAssertEqual(allowChange["outcome"] as? String, "changed", r.body)
        XCTAssertTrue(eventually(timeout: 1.0) { code(Caller.blockedUnlabelled) == 302 }, "allowed within a second")
        r = try call("\(url)/\(Caller.blockedUnlabelled)", [])
        entry = try XCTUnwrap((json(r.body)["directories"] as? [[String: Any]])?.first)
        XCTAssertEqual((entry["entry"] as? [String: Any])?["action"] as? String, "allow", r.body)
        XCTAssertEqual((entry["entry"] as? [String: Any])?["label"] as? String, "Let Through", r.body)
        let query = try lookupd(["query", "--config", daemon.configPath, Caller.blockedUnlabelled])
        XCTAssertTrue(query.stdout.contains("Let Through\tmain\texact, journal record "), query.stdout)
        XCTAssertTrue(query.stdout.hasSuffix(", allow\n"), query.stdout)
        XCTAssertTrue(daemon.stderr.contains("write API: \(Self.writer) changed \(Caller.blockedUnlabelled) in main: allow, label 'Let Through'"),
                      daemon.stderr.suffix(2000).description)

        // The rate limit: a burst beyond it is answered 429, and the daemon goes on.
        let port = UInt16(url.split(separator: ":")[2].split(separator: "/")[0])!
        let pipelined = try HTTPConnectionPeer(port: port, from: Self.writer)
        let request = "GET /v1/entries/\(Caller.fraud) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Self.token)\r\n\r\n"
        pipelined.send(String(repeating: request, count: 60))
        let answers = pipelined.responses(60, timeout: 10)
        XCTAssertTrue(answers.contains { $0.status == 429 }, "\(answers.map(\.status))")
        XCTAssertEqual(answers.last?.header("Retry-After"), "1")
        XCTAssertTrue(daemon.isRunning)
    }
}
