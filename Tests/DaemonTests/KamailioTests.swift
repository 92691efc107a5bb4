import Foundation
import Glibc
import XCTest

/// The Kamailio recipes of docs/INTEGRATION.md, run with the very files in Config/examples.
final class KamailioTests: IntegrationTestCase {
    /// Kamailio relays each INVITE to lookupd (redirect mode); a blocked caller's 6xx goes back
    /// to the trunk, a 302 continues the call to the PBX with the label as the caller's display
    /// name and in X-Caller-Label (the PBX scenario checks both, the SDP body and that the
    /// trunk's forged label was removed); the call completes with ACK, BYE and 200. The label
    /// is for the PBX only: every response the trunk gets carries its own From byte for byte,
    /// and none carries a label.
    func testRedirectRecipe() throws {
        let lookupdPort = freeLoopbackPort()
        // The default: rejections carry no label either (the dispatcher test below tells
        // the nodes' answers apart by the label its 603s carry).
        try startNode("redirect", port: lookupdPort, extra: ["label-to-caller = no"])
        let calls: [(trunk: String, pbx: String?)] = [
            ("\(Caller.unicom);Trunk Caller;200;own", #""China Unicom Customer Service"|"China Unicom Customer Service""#),
            ("\(Caller.fraud);Trunk Caller;603;own", nil),
            ("\(Caller.cafe);Trunk Caller;200;own", #""Zoë's \"Café\" \\ Bar"|"Zoë's \"Café\" \\ Bar""#),
            ("\(Caller.mum);Trunk Caller;200;own", #""Mum"|"Mum""#),
            ("\(Caller.unknown);Trunk Caller;200;own", #""Trunk Caller"|-"#),
        ]
        let labels = ["China Unicom Customer Service", "Caf", "Mum", "Fraud Risk"]
        let pbxLines = calls.compactMap(\.pbx)
        let pbx = try startPBX("kamailio-uas.xml", transport: .udp, expect: pbxLines + pbxLines)
        let port = freeLoopbackPort()
        try startKamailio("kamailio-redirect.cfg", port: port, defines: [
            "LISTEN=udp:127.0.0.1:\(port)", "LISTEN_TCP=tcp:127.0.0.1:\(port)",
            "LOOKUPD=\"sip:127.0.0.1:\(lookupdPort)\"", "PBX=\"sip:127.0.0.1:\(pbx.port)\"",
        ])
        // Kamailio relabels the From toward the PBX itself (uac_replace_from, restore_mode
        // auto): the scenario's "own" checks that each provisional and final response gives
        // the trunk its own From back, byte for byte; and no response holds a label anywhere.
        for trunk in [SippTransport.udp, .tcp] {
            let result = try runTrunk("proxy-uac.xml", port: port, transport: trunk, lines: calls.map(\.trunk))
            XCTAssertEqual(result.status, 0, "trunk over \(trunk.name): \(result.report)\n\(pbx.report)")
            XCTAssertEqual(result.successful, calls.count, result.report)
            XCTAssertEqual(result.log.split(separator: "\n").filter { $0.contains("verdict=want") }.count, calls.count, result.log)
            let received = sippReceived(result.messages)
            XCTAssertGreaterThanOrEqual(received.count, 2 * calls.count, "the trunk's message trace: \(result.messages.suffix(2000))")
            for message in received {
                XCTAssertFalse(message.lowercased().contains("x-caller-label"), "a label header toward the caller: \(message)")
                for label in labels { XCTAssertFalse(message.contains(label), "the label '\(label)' toward the caller: \(message)") }
            }
        }
        assertPBXSawEverything(pbx, calls: 2 * pbxLines.count, "PBX behind Kamailio")
    }

    /// Two lookupd nodes behind Kamailio's dispatcher (OPTIONS probing every second), a steady
    /// 20 calls per second through it. One node is killed mid-run: the calls Kamailio still
    /// sends it time out after fr_timer (1 s) and are retried on the other node, the probes
    /// take it out of rotation, and no call gets a wrong answer or fails. Restarted on its
    /// port, the node is probed back into rotation and answers calls again.
    func testDispatcherFailover() throws {
        try skipUnderSanitizer("Kamailio's failover timing")
        let portA = freeLoopbackPort(), portB = freeLoopbackPort()
        let nodeA = try startNode("node-a", port: portA, extra: [])
        let nodeB = try startNode("node-b", port: portB, extra: [])
        let list = write("lookupd.list", "1 sip:127.0.0.1:\(portA)\n1 sip:127.0.0.1:\(portB)\n")
        let control = "unix:" + path("kamctl")
        let port = freeLoopbackPort()
        try startKamailio("kamailio-dispatcher.cfg", port: port, defines: [
            "LISTEN=udp:127.0.0.1:\(port)", "DS_LIST=\"\(list)\"", "CTL_SOCKET=\"\(control)\"",
        ])
        XCTAssertTrue(eventually(timeout: 15) { dispatcherFlags(control, portA).hasPrefix("A") && dispatcherFlags(control, portB).hasPrefix("A") },
                      "both nodes active: A \(dispatcherFlags(control, portA)), B \(dispatcherFlags(control, portB))")

        // The answers come from whichever node; Contact is the Request-URI sent to Kamailio.
        let lines = [
            SippCall(caller: Caller.fraud, want: Answer.blocked("603 Decline", label: "Fraud Risk")),
            SippCall(caller: Caller.unicom, want: Answer.redirect(Caller.unicom, label: "China Unicom Customer Service", port: port)),
            SippCall(caller: Caller.unknown, want: Answer.unlabelledRedirect(port: port)),
        ].map(\.line)
        // 18 s of load: room for the kill, the detection, the restart and the return even on a
        // slow sanitizer run.
        let total = 360
        let load = try startTrunk("invite.xml", port: port, transport: .udp, lines: lines, count: total, rate: 20, limit: 100,
                                  recvTimeoutMs: 4000, timeoutSeconds: 60, traceMessages: false)

        func invites(_ node: LookupdDaemon) -> Int { (try? stats(node))?["lookupd_requests_total{method=\"INVITE\",transport=\"udp\"}"] ?? 0 }
        XCTAssertTrue(eventually(timeout: 20) { invites(nodeA) >= 10 && invites(nodeB) >= 10 }, "both nodes take calls")

        nodeB.child.signal(SIGKILL)
        _ = nodeB.child.wait(timeout: 5)
        let killed = Date().timeIntervalSince1970
        let detected = eventually(timeout: 15) { dispatcherFlags(control, portB).hasPrefix("I") }
        let detectedAt = Date().timeIntervalSince1970
        XCTAssertTrue(detected, "the dispatcher marks the dead node inactive: \(dispatcherFlags(control, portB))")

        // While B is out, A answers everything.
        let before = invites(nodeA)
        XCTAssertTrue(eventually(timeout: 10) { invites(nodeA) >= before + 20 }, "node A keeps answering")

        let restarted = try startNode("node-b-restarted", port: portB, extra: [])
        let back = eventually(timeout: 15) { dispatcherFlags(control, portB).hasPrefix("A") }
        XCTAssertTrue(back, "the dispatcher takes the restarted node back: \(dispatcherFlags(control, portB))")
        XCTAssertTrue(eventually(timeout: 15) { invites(restarted) >= 5 }, "the restarted node answers calls again")

        let result = finish(load)
        let calls = result.calls
        XCTAssertEqual(calls.count, total, result.report)
        XCTAssertEqual(calls.filter { $0.verdict != "want" }.count, 0, "no wrong verdict at any time: \(result.report)")
        XCTAssertEqual(result.failed, 0, result.report)
        XCTAssertEqual(result.status, 0, result.report)
        // Calls that went to the dead node before it was taken out waited for fr_timer (1 s)
        // and were answered by node A; all were sent between the kill and the detection.
        let delayed = calls.filter { $0.received - $0.sent > 0.8 }
        for call in delayed {
            XCTAssertGreaterThanOrEqual(call.sent, killed - 0.5, "call \(call.call) delayed before the kill")
            XCTAssertLessThanOrEqual(call.sent, detectedAt + 1.5, "call \(call.call) delayed long after detection")
        }
        print("dispatcher failover: detection took \(String(format: "%.2f", detectedAt - killed)) s; "
              + "\(delayed.count) of \(total) calls were retried on the other node (about 1 s later), "
              + "\(calls.filter { $0.verdict != "want" }.count) wrong, \(result.failed ?? -1) failed")
    }
}

/// The messages a sipp `-trace_msg` file shows as received (each block after a
/// "message received" line, up to the next separator).
func sippReceived(_ trace: String) -> [String] {
    var messages: [String] = []
    var current: [Substring]? = nil
    for line in trace.split(separator: "\n", omittingEmptySubsequences: false) {
        if line.hasPrefix("-----") {
            if let block = current { messages.append(block.joined(separator: "\n")) }
            current = nil
        } else if line.contains("message received") {
            current = []
        } else if current != nil {
            current!.append(line)
        }
    }
    if let block = current { messages.append(block.joined(separator: "\n")) }
    return messages
}

/// The dispatcher's flags for the node on `port` (`AP` active, `IP` inactive, both probing),
/// read with kamcmd over the ctl socket; empty when it cannot be read.
func dispatcherFlags(_ control: String, _ port: UInt16) -> String {
    let kamcmd = KamailioBinary.path.map { URL(fileURLWithPath: $0).deletingLastPathComponent().appendingPathComponent("kamcmd").path } ?? "/usr/sbin/kamcmd"
    guard let result = try? runCommand(kamcmd, ["-s", control, "dispatcher.list"], folder: "/tmp", timeout: 5), result.status == 0 else { return "" }
    var found = false
    for line in result.stdout.split(separator: "\n") {
        let text = line.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("URI:") { found = text.hasSuffix(":\(port)") }
        if found, text.hasPrefix("FLAGS:") { return text.dropFirst(6).trimmingCharacters(in: .whitespaces) }
    }
    return ""
}
