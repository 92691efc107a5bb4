import Foundation
import Glibc
import XCTest

/// Caller policies, per-callee contacts and time windows in the running
/// daemon: SIP in, answers, counters and call-log reasons out.
final class PolicyTrafficTests: DaemonTestCase {
    static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

    /// Today in UTC, and days far enough from it that no test run spans them.
    func days() -> (around: String, away: String) {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        let today = Int(parts.tm_wday)
        let name = { (offset: Int) in Self.dayNames[(today + offset + 7) % 7] }
        return ("\(name(-1))-\(name(1))", "\(name(3))-\(name(4))")
    }

    func testPoliciesCalleeContactsAndTimeWindows() throws {
        try compile("number,action,label\n+8613700000000,block,Evening Telemarketer\n", to: "tele.lkd")
        try compile("number,action,label\n+8613600000001,block,Night Only\n", to: "night.lkd")
        try FileManager.default.createDirectory(atPath: path("callees"), withIntermediateDirectories: true)
        write("callees/1001.vcf", "BEGIN:VCARD\nVERSION:3.0\nFN:Dentist\nTEL:\(Caller.fraud)\nEND:VCARD\n")
        let (around, away) = days()
        let daemon = try startDaemon([
            "trust-asserted-identity-from = 127.0.0.1/32",
            "block-response = 607",
            "anonymous-callers = label",
            "invalid-callers = block",
            "bypass = 110, 119",
            "verstat-failed = block",
            "verstat-no-validation = label",
            "contacts-dir = callees",
            "time-zone = UTC",
            "log-level = info",
        ], directories: ["main.lkd name=main", "tele.lkd name=tele active=\"\(around)\"", "night.lkd name=night active=\"\(away)\""])
        let port = daemon.port
        let trusted = try UDPPeer(ip: "127.0.0.1")
        let untrusted = try UDPPeer(ip: "127.0.0.2")

        func expect(_ message: [UInt8], from peer: UDPPeer? = nil, _ status: String, _ label: String?, _ what: String,
                    file: StaticString = #filePath, line: UInt = #line) {
            guard let answer = (peer ?? trusted).exchange(message, port: port) else { return XCTFail("\(what): no answer", file: file, line: line) }
            XCTAssertEqual(answer.statusLine, status, "\(what): \(answer)", file: file, line: line)
            XCTAssertEqual(answer.header("X-Caller-Label"), label.map(Answer.quoted), "\(what): \(answer)", file: file, line: line)
        }
        let before = try stats(daemon)

        // Withheld: labelled, not blocked.
        expect(invite(from: "\"Anonymous\" <sip:anonymous@anonymous.invalid>", port: port), "302 Moved Temporarily", "Anonymous", "anonymous")
        expect(invite(from: "<sip:\(Caller.unknown)@pbx.example>", port: port, extra: ["Privacy: id"]), "302 Moved Temporarily", "Anonymous", "Privacy: id")
        // Invalid caller numbers: blocked with the configured block response.
        expect(invite(from: "<sip:123@pbx.example>", port: port), "607 Unwanted", nil, "too short")
        expect(invite(from: "<sip:0000000000@pbx.example>", port: port), "607 Unwanted", nil, "all zeros")
        // Bypass: no screening at all, even though 110 is not a valid number.
        expect(invite(from: "<sip:110@pbx.example>", port: port), "302 Moved Temporarily", nil, "emergency call-back")
        // STIR/SHAKEN, from the P-Asserted-Identity of a trusted peer (in the user part, as 3GPP writes it) ...
        expect(invite(from: "<sip:\(Caller.unknown)@pbx.example>", port: port,
                      extra: ["P-Asserted-Identity: <sip:+8613000000005;verstat=TN-Validation-Failed@carrier.example;user=phone>"]),
               "607 Unwanted", nil, "failed validation in PAI")
        // ... or from From (a URI parameter, on a tel: URI) for anyone.
        expect(invite(from: "<tel:+8613000000006;verstat=No-TN-Validation>", port: port), from: untrusted,
               "302 Moved Temporarily", "Unverified", "no validation")
        expect(invite(from: "<sip:+8613000000007@pbx.example;verstat=TN-Validation-Failed>", port: port), from: untrusted,
               "607 Unwanted", nil, "failed validation on From")
        expect(invite(from: "<sip:+8613000000008@pbx.example;verstat=TN-Validation-Passed>", port: port), "302 Moved Temporarily", nil, "passed")
        // Per-callee contacts: the dentist is callee 1001's contact, blocked for everyone else.
        expect(invite(from: "<sip:\(Caller.fraud)@pbx.example>", to: "1001", port: port), "302 Moved Temporarily", "Dentist", "callee 1001")
        expect(invite(from: "<sip:\(Caller.fraud)@pbx.example>", to: "1002", port: port), "607 Unwanted", "Fraud Risk", "callee 1002")
        // Time windows: tele is in force around today, night is not.
        expect(invite(from: "<sip:+8613700000000@pbx.example>", port: port), "607 Unwanted", "Evening Telemarketer", "active directory")
        expect(invite(from: "<sip:+8613600000001@pbx.example>", port: port), "302 Moved Temporarily", nil, "inactive directory")

        let after = try stats(daemon)
        func delta(_ series: String) -> Int { after[series] - max(0, before[series]) }
        XCTAssertEqual(delta(#"lookupd_policy_total{policy="anonymous-callers",action="label"}"#), 2, after.text)
        XCTAssertEqual(delta(#"lookupd_policy_total{policy="invalid-callers",action="block"}"#), 2, after.text)
        XCTAssertEqual(delta(#"lookupd_policy_total{policy="bypass",action="bypass"}"#), 1, after.text)
        XCTAssertEqual(delta(#"lookupd_policy_total{policy="verstat-failed",action="block"}"#), 2, after.text)
        XCTAssertEqual(delta(#"lookupd_policy_total{policy="verstat-no-validation",action="label"}"#), 1, after.text)
        XCTAssertEqual(delta(#"lookupd_policy_total{policy="active",action="skip"}"#), 1, after.text)
        XCTAssertEqual(delta(#"lookupd_verdicts_total{verdict="bypassed"}"#), 1, after.text)
        XCTAssertEqual(delta(#"lookupd_responses_total{code="607"}"#), 6, after.text)

        // The call log gives each policy's reason.
        usleep(200_000)
        let log = daemon.stderr
        for reason in ["verdict=anonymous caller=anonymous callee=13000000000 response=302 label=Anonymous source=policy:anonymous-callers policy=anonymous-callers",
                       "verdict=blocked caller=123 callee=13000000000 response=607 source=policy:invalid-callers policy=invalid-callers",
                       "verdict=bypassed caller=110 callee=13000000000 response=302 source=policy:bypass policy=bypass",
                       "verdict=blocked caller=+8613000000007 callee=13000000000 response=607 source=policy:verstat-failed policy=verstat-failed",
                       "verdict=contact caller=\(Caller.fraud) callee=1001 response=302 label=Dentist source=\(path("callees"))/1001.vcf",
                       "verdict=unknown caller=+8613600000001 callee=13000000000 response=302 inactive=night"] {
            XCTAssertTrue(log.contains(reason), "missing from the call log: \(reason)\n\(log.suffix(4000))")
        }
    }
}
