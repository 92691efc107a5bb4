import Foundation
import Glibc
import XCTest

/// Issue 17 item 5 over the daemon's UDP socket: `blocks-dir`, one block list per callee.
final class CalleeBlocksTests: DaemonTestCase {
    func testANumberBlockedFor1001IsNotBlockedFor1002() throws {
        let blocks = path("blocks")
        try FileManager.default.createDirectory(atPath: blocks, withIntermediateDirectories: true)
        write("blocks/1001.csv", "number,action,label\n\(Caller.unknown),block,Ex-Partner\n\(Caller.fraud),allow,My Bank\n")
        write("blocks/1003.csv", "number,action,label\n\(Caller.unknown),block,Fine\nnot-a-number,block,Broken\n")
        let daemon = try startDaemon(["blocks-dir = \(blocks)"])
        let udp = try UDPPeer()
        let port = daemon.port
        func status(_ caller: String, _ callee: String) -> Int? {
            udp.exchange(invite(from: "<sip:\(caller)@pbx.example>", to: callee, port: port), port: port)?.statusCode
        }
        XCTAssertEqual(status(Caller.unknown, "1001"), 603, "blocked for 1001")
        XCTAssertEqual(status(Caller.unknown, "1002"), 302, "not for 1002")
        // 1001's own allow beats the global directory's block, for 1001 only.
        XCTAssertEqual(status(Caller.fraud, "1001"), 302)
        XCTAssertEqual(status(Caller.fraud, "1002"), 603)
        // A bad file: its FILE:LINE in the log, that callee's list left out, the others in force.
        XCTAssertTrue(daemon.stderr.contains("\(blocks)/1003.csv:3:"), daemon.stderr)
        XCTAssertEqual(status(Caller.unknown, "1003"), 302)
        let query = try lookupd(["query", "--config", daemon.configPath, "--callee", "1001", Caller.unknown])
        XCTAssertTrue(query.stdout.contains("blocked\tEx-Partner\t\(blocks)/1001.csv\texact"), query.stdout)

        // Reloaded with the rest; the list still left out makes the reload exit 4 and is named.
        write("blocks/1002.txt", "\(Caller.unknown)\n")
        let reload = try lookupd(["reload", "--config", daemon.configPath])
        XCTAssertEqual(reload.status, 4, reload.summary)
        XCTAssertTrue(reload.stdout.contains("skipped: \(blocks)/1003.csv:3:"), reload.summary)
        XCTAssertTrue(eventually(timeout: 5) { status(Caller.unknown, "1002") == 603 }, "1002's new list is in force after reload")
        XCTAssertEqual(status(Caller.unknown, "1004"), 302)
    }
}
