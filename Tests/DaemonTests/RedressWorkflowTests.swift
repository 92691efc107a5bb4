import Foundation
import Glibc
import XCTest

/// Issue 17 items 2 and 3 over the daemon's sockets: the operator's redress workflow (the id
/// a 603+ gave the caller, found whole by `lookupd log --id`; ids on HTTP lookups, logged as
/// calls are) and an
/// allow entry in the first directory beating a block in the second.
final class RedressWorkflowTests: DaemonTestCase {
    override class var rejectionsCarryLabel: Bool { false }

    func testTheIdOfA603PlusIsFoundWholeByLogID() throws {
        let log = path("decisions.log")
        let (daemon, httpPort) = try startHTTPDaemon([
            "log-file = \(log)",
            "redress = url=https://redress.example.net/r email=redress@example.net location=RLN",
        ], directories: ["main.lkd name=analytics block-response=603+"])
        let udp = try UDPPeer()
        let port = daemon.port
        let blocked = try XCTUnwrap(udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", to: "1001", port: port,
                                                       callID: "redress-1@pbx"), port: port))
        XCTAssertEqual(blocked.statusLine, "603 Network Blocked")
        let id = try XCTUnwrap(blocked.values("Reason").first.flatMap(ATISReason.id), blocked.text)
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.unicom)@pbx.example>", to: "1002", port: port, callID: "other-2@pbx"),
                                    port: port)?.statusCode, 302)

        var found = (status: Int32(-1), stdout: "", stderr: "")
        XCTAssertTrue(eventually(timeout: 5) {
            guard let r = try? self.lookupd(["log", "--id", id, "--file", log]) else { return false }
            found = (r.status, r.stdout, r.stderr)
            return r.status == 0
        }, "the decision reaches the log file: \(found) \(readText(log))")
        let fields = Dictionary(found.stdout.split(separator: "\n").map { line -> (String, String) in
            let parts = line.split(separator: " ", maxSplits: 1)
            return (String(parts[0]), parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : "")
        }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(fields["id"], id, found.stdout)
        XCTAssertEqual(fields["verdict"], "blocked", found.stdout)
        XCTAssertEqual(fields["caller"], Caller.fraud, found.stdout)
        XCTAssertEqual(fields["callee"], "1001", found.stdout)
        XCTAssertEqual(fields["label"], "Fraud Risk", found.stdout)
        XCTAssertEqual(fields["source"], "analytics", found.stdout)
        XCTAssertEqual(fields["rule"], Caller.fraud, found.stdout)
        XCTAssertEqual(fields["call-id"], "redress-1@pbx", found.stdout)
        XCTAssertEqual(fields["response"], "603", found.stdout)
        XCTAssertNotNil(fields["time"].flatMap { $0.hasPrefix("20") ? $0 : nil }, found.stdout)
        XCTAssertFalse(found.stdout.contains("other-2@pbx"), "only that decision")

        // An id no decision has: a message and exit status 1; not an id at all: a usage error.
        let missing = try lookupd(["log", "--id", String(repeating: "0", count: 32), "--file", log])
        XCTAssertEqual(missing.status, 1, missing.summary)
        XCTAssertTrue(missing.stderr.contains("no decision has id 00000000000000000000000000000000 in \(log)"), missing.summary)
        XCTAssertTrue(missing.stderr.contains("to filter by Call-ID use --call-id"), missing.summary)
        XCTAssertEqual(try lookupd(["log", "--id", "a;b", "--file", log]).status, 2)
        // --id filtered by Call-ID before decision ids: an old use is pointed to --call-id.
        let oldUse = try lookupd(["log", "--id", "redress-1@pbx", "--file", log])
        XCTAssertEqual(oldUse.status, 2, oldUse.summary)
        XCTAssertTrue(oldUse.stderr.contains("'redress-1@pbx' is not one. To filter by Call-ID use --call-id"), oldUse.summary)
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", to: "1001", port: port, callID: "plain-call-id"),
                                    port: port)?.statusCode, 603)
        var plain = (status: Int32(-1), stdout: "", stderr: "")
        XCTAssertTrue(eventually(timeout: 5) {
            guard let r = try? self.lookupd(["log", "--id", "plain-call-id", "--file", log]) else { return false }
            plain = (r.status, r.stdout, r.stderr)
            return r.stderr.contains("1 call has Call-ID plain-call-id: lookupd log --call-id plain-call-id")
        }, "a Call-ID that could be a decision id: \(plain)")
        XCTAssertEqual(plain.status, 1)
        let byCallID = try lookupd(["log", "--call-id", "plain-call-id", "--file", log])
        XCTAssertEqual(byCallID.status, 0, byCallID.summary)
        XCTAssertTrue(byCallID.stdout.contains("call-id=plain-call-id"), byCallID.summary)

        // HTTP lookups have ids too: 32 hex digits, a new one per lookup.
        let first = try curl("http://127.0.0.1:\(httpPort)/lookup.json?number=%2B8613800138000")
        let second = try curl("http://127.0.0.1:\(httpPort)/lookup.json?number=%2B8613800138000")
        let ids = try [first, second].map { answer -> String in
            let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any], answer.body)
            return try XCTUnwrap(object["id"] as? String, answer.body)
        }
        for httpID in ids { XCTAssertNotNil(httpID.range(of: "^[0-9a-f]{32}$", options: .regularExpression), httpID) }
        XCTAssertNotEqual(ids[0], ids[1])
        XCTAssertNotEqual(ids[0], id)
        // ... and are logged as calls are, so the same workflow finds them.
        var http = ""
        XCTAssertTrue(eventually(timeout: 5) {
            http = (try? self.lookupd(["log", "--id", ids[1], "--file", log]))?.stdout ?? ""
            return http.contains("via          http")
        }, http + readText(log))
        XCTAssertTrue(http.contains("verdict      blocked\n") && http.contains("caller       \(Caller.fraud)\n"), http)
        XCTAssertFalse(http.contains(ids[0]), "only that lookup: \(http)")
    }

    func testAnAllowInTheFirstDirectoryBeatsABlockInTheSecond() throws {
        try compile("""
        number,action,label
        \(Caller.fraud),allow,Our Supplier
        +861701234*,allow,
        """, to: "customer.lkd")
        let log = path("decisions.log")
        let daemon = try startDaemon(["log-file = \(log)", "label-to-caller = yes"],
                                     directories: ["customer.lkd name=customer", "main.lkd name=carrier"])
        let udp = try UDPPeer()
        let port = daemon.port
        let allowed = try XCTUnwrap(udp.exchange(invite(from: "<sip:\(Caller.fraud)@pbx.example>", to: "1001", port: port,
                                                       callID: "allowed-1@pbx"), port: port))
        XCTAssertEqual(allowed.statusCode, 302, allowed.text)
        XCTAssertTrue(allowed.text.contains("Our Supplier"), "the allowing list's label: \(allowed.text)")
        // The allow prefix lets part of the carrier's +86170* through, not the rest of it.
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.virtualRange)@pbx.example>", port: port), port: port)?.statusCode, 302)
        XCTAssertEqual(udp.exchange(invite(from: "<sip:+8617099999999@pbx.example>", port: port), port: port)?.statusCode, 603)
        XCTAssertEqual(udp.exchange(invite(from: "<sip:\(Caller.blockedUnlabelled)@pbx.example>", port: port), port: port)?.statusCode, 603)

        let query = try lookupd(["query", "--json", "--config", daemon.configPath, Caller.fraud])
        XCTAssertEqual(query.status, 0, query.summary)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(query.stdout.utf8)) as? [String: Any], query.stdout)
        XCTAssertEqual(object["verdict"] as? String, "identified")
        XCTAssertEqual(object["source"] as? String, "customer")
        XCTAssertEqual(object["match"] as? String, Caller.fraud)
        XCTAssertEqual(object["allowed"] as? Bool, true)
        let overridden = try XCTUnwrap(object["overridden"] as? [[String: String]], query.stdout)
        XCTAssertEqual(overridden, [["source": "carrier", "match": Caller.fraud]])

        XCTAssertTrue(eventually(timeout: 5) { readText(log).contains("call-id=allowed-1@pbx") }, readText(log))
        let line = try XCTUnwrap(readText(log).split(separator: "\n").first { $0.contains("call-id=allowed-1@pbx") })
        XCTAssertTrue(line.contains(" source=customer "), String(line))
        XCTAssertTrue(line.contains(" allowed=yes overridden=carrier:\(Caller.fraud) "), String(line))

        // lookupd add --allow through the journal: the carrier's unlabelled block is overridden within a second.
        let added = try lookupd(["add", Caller.blockedUnlabelled, "--allow", "--to", "customer", "--config", daemon.configPath])
        XCTAssertEqual(added.status, 0, added.summary)
        XCTAssertTrue(added.stdout.contains("(allow)"), added.stdout)
        XCTAssertTrue(eventually(timeout: 3) {
            udp.exchange(invite(from: "<sip:\(Caller.blockedUnlabelled)@pbx.example>", port: port), port: port)?.statusCode == 302
        }, "the journal's allow is in force")
    }
}
