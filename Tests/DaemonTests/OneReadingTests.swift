import Foundation
import XCTest

/// One reading of a caller (issues 14.2 and 15.3): the daemon, given an INVITE over a real
/// socket, and `lookupd query`, given the same From value, read the same bytes the same way
/// (the user part %-decoded once, phone-context and verstat from its parameters), and so
/// answer alike. Each verdict has a label here, so the SIP answer shows which it was.
final class OneReadingTests: DaemonTestCase {
    static let config = [
        "country = CN",
        "attribution = zh",
        "unknown-label = attribution",
        "invalid-callers = label \"Invalid\"",
        "anonymous-callers = label \"Withheld\"",
        "verstat-failed = block",
    ]

    /// From values, each with the verdict both must reach.
    static let cases: [(String, String)] = [
        ("<sip:+8613800138000@192.0.2.1>", "blocked"),
        ("<sip:%2B8613800138000@192.0.2.1>", "blocked"),
        ("<sip:%2b86%20138%200013%208000@192.0.2.1;user=phone>", "blocked"),
        // %25 is '%': decoded once, "%2B8613800138000" is no number.
        ("<sip:%252B8613800138000@192.0.2.1>", "invalid"),
        ("<sip:%25%32%42%38%36@192.0.2.1>", "invalid"),
        ("<sip:013800138000@192.0.2.1;user=phone>", "blocked"),
        ("<sip:8613800138000@192.0.2.1>", "blocked"),
        ("<tel:+86-138-0013-8000>", "blocked"),
        ("\"Spoofed\" <sip:+8613800138000;verstat=TN-Validation-Passed@192.0.2.1;user=phone>", "blocked"),
        ("<tel:59000000;phone-context=+86-10>", "identified"),
        ("<sip:59000000;phone-context=+86-10@192.0.2.1;user=phone>", "identified"),
        ("<sip:%35%39000000;phone-context=%2B86-10@192.0.2.1;user=phone>", "identified"),
        ("\"Mum\" <sip:+8613911112222@192.0.2.1>", "contact"),
        ("<sip:136%200000%200000@192.0.2.1>", "contact"),
        ("<sip:+8613000000001@192.0.2.1>", "unknown"),
        ("<sip:+8613000000001;verstat=TN-Validation-Failed@192.0.2.1;user=phone>", "blocked"),
        ("<sip:+8613000000001@192.0.2.1;verstat=TN-Validation-Failed>", "blocked"),
        ("<sip:+12005550143@192.0.2.1>", "invalid"),
        ("<sip:1001@192.0.2.1>", "invalid"),
        ("<sip:+86138%3B00138000@192.0.2.1>", "invalid"),
        ("<sip:anonymous@anonymous.invalid>", "anonymous"),
        ("<sip:anonymous.invalid>", "anonymous"),
        ("<sip:%61nonymous@192.0.2.1>", "anonymous"),
        ("<sips:restricted@192.0.2.1>", "anonymous"),
    ]

    func testTheDaemonAndQueryAnswerAlike() throws {
        let daemon = try startDaemon(Self.config)
        let query = try lookupd(["query", "--json", "--config", daemon.configPath] + Self.cases.map(\.0))
        XCTAssertEqual(query.status, 0, query.summary)
        let answers = try query.stdout.split(separator: "\n").map {
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any], String($0))
        }
        XCTAssertEqual(answers.count, Self.cases.count)
        let peer = try UDPPeer()
        for (i, (from, verdict)) in Self.cases.enumerated() where i < answers.count {
            let answer = answers[i]
            XCTAssertEqual(answer["verdict"] as? String, verdict, "query \(from): \(answer)")
            let label = answer["label"] as? String
            guard let sip = peer.exchange(invite(from: from, port: daemon.port), port: daemon.port, timeout: 5) else {
                XCTFail("no answer to an INVITE from \(from)")
                continue
            }
            if verdict == "blocked" {
                XCTAssertEqual(sip.statusCode, 603, "\(from): \(sip.statusLine)")
            } else {
                XCTAssertEqual(sip.statusCode, 302, "\(from): \(sip.statusLine)")
                XCTAssertEqual(sip.header("X-Caller-Label").flatMap(SIPAnswer.displayName), label, "\(from): the daemon's label")
            }
        }
        // The unknown caller is labelled with its attribution, in the 302 as in the query.
        let unknown = try XCTUnwrap(Self.cases.firstIndex { $0.1 == "unknown" })
        XCTAssertEqual(answers[unknown]["attribution"] as? String, answers[unknown]["label"] as? String)
        XCTAssertNotNil(answers[unknown]["attribution"] as? String)
        // The start-up line names the plan in force.
        XCTAssertTrue(daemon.stderr.contains("numbering plan CN (+86, trunk prefix 0, international prefix 00), attribution zh"), daemon.stderr)
    }

    /// No plan named: the daemon says so at start and which plan it uses; a directory
    /// compiled under another plan is a warning.
    func testDefaultPlanAndMismatchAreLogged() throws {
        let us = write("us.csv", "number,action,label\n(202) 555-0143,block,Robocall\n")
        let compiled = try lookupd(["compile", "--country", "US", "-q", us, "-o", path("us.lkd")])
        XCTAssertEqual(compiled.status, 0, compiled.summary)
        let daemon = try startDaemon([], directories: ["main.lkd name=main", "us.lkd name=us"])
        XCTAssertTrue(daemon.stderr.contains("no numbering plan named (country = XX): reading numbers under CN (+86"), daemon.stderr)
        XCTAssertTrue(daemon.stderr.contains("us.lkd: compiled under the numbering plan US (+1); numbers are read here under CN (+86"), daemon.stderr)
        // The directory's numbers are E.164 already: the caller is blocked whatever the plan.
        let answer = try UDPPeer().exchange(invite(from: "<sip:+12025550143@192.0.2.1>", port: daemon.port), port: daemon.port, timeout: 5)
        XCTAssertEqual(answer?.statusCode, 603)
    }

    /// Proxy mode: the attribution reaches the PBX in the forwarded display name, as the
    /// label of an unknown caller and through label-format's {attribution}.
    func testProxyForwardsTheAttribution() throws {
        let pbx = try UDPPeer()
        let port = freeLoopbackPort()
        let configPath = write("proxy.conf", configText(name: "proxy", port: port, directories: ["main.lkd name=main"], contacts: ["contacts.vcf"],
                                                        extra: ["country = CN", "attribution = en", "unknown-label = attribution", "mode = proxy",
                                                                "upstream = 127.0.0.1:\(pbx.port)", "label-format = \"{label} ({attribution})\""]))
        let child = try ChildProcess(executable: LookupdBinary.path!, arguments: ["serve", "--config", configPath], folder: folder, name: "proxy")
        defer { child.stop(grace: 5) }
        let trunk = try UDPPeer()
        // OPTIONS to lookupd itself (no user part) is answered by the proxy, not forwarded.
        func ping() -> [UInt8] {
            sipMessage(["OPTIONS sip:127.0.0.1:\(port) SIP/2.0", "Via: SIP/2.0/UDP 127.0.0.1:5060;branch=\(token("z9hG4bK"))",
                        "Max-Forwards: 70", "From: <sip:probe@127.0.0.1>;tag=\(token())", "To: <sip:127.0.0.1:\(port)>",
                        "Call-ID: \(token("ping-"))", "CSeq: 1 OPTIONS", "Content-Length: 0"])
        }
        let ready = eventually(timeout: 20) { !child.isRunning || trunk.exchange(ping(), port: port, timeout: 0.2)?.statusCode == 200 }
        XCTAssertTrue(ready && child.isRunning, child.stderr)
        let daemon = (port: port, pid: child.pid)
        func forwardedFrom(_ caller: String) throws -> String {
            pbx.drain()
            trunk.send(invite(from: "\"Trunk\" <sip:\(caller)@127.0.0.1>", port: daemon.port), to: daemon.port)
            let bytes = try XCTUnwrap(pbx.receive(timeout: 5), "nothing forwarded for \(caller)")
            let text = String(decoding: bytes, as: UTF8.self)
            let from = try XCTUnwrap(text.components(separatedBy: "\r\n").first { $0.hasPrefix("From:") }, text)
            return try XCTUnwrap(SIPAnswer.displayName(String(from.dropFirst(5)).trimmingCharacters(in: .whitespaces)), from)
        }
        XCTAssertEqual(try forwardedFrom("+8613000000001"), "Jinan, Shandong China Unicom (Jinan, Shandong China Unicom)")
        XCTAssertEqual(try forwardedFrom(Caller.unicom), "China Unicom Customer Service (Beijing China Unicom)")
    }
}
