import Foundation
import Glibc
import XCTest

/// `lookupd add`, `remove` and `compact` against a running daemon under
/// load: answers change within a second of the command returning, without
/// a reload, and no request goes unanswered.
final class LiveUpdateTests: DaemonTestCase {
    /// One answer as compared: status line and label header.
    struct State: Equatable, CustomStringConvertible {
        var status: String
        var label: String?
        var description: String { "\(status) \(label ?? "-")" }
        static func blocked(_ label: String?) -> State { State(status: "603 Decline", label: label.map(Answer.quoted)) }
        static func labelled(_ label: String) -> State { State(status: "302 Moved Temporarily", label: Answer.quoted(label)) }
        static let unlabelled = State(status: "302 Moved Temporarily", label: nil)
    }

    /// What the daemon answers an INVITE from `caller`.
    static func answer(_ caller: String, from peer: UDPPeer, _ daemon: LookupdDaemon) -> State? {
        peer.exchange(invite(from: "<sip:\(caller)@pbx.example>", port: daemon.port), port: daemon.port)
            .map { State(status: $0.statusLine, label: $0.header("X-Caller-Label")) }
    }

    /// A change made while the senders run: the command, the caller it
    /// concerns, and that caller's answer once it is in force.
    struct Change {
        var arguments: [String]
        var caller: String?
        var after: State?
        var started = 0.0
        var finished = 0.0
    }

    func testAddsRemovesAndCompactionUnderLoad() throws {
        let daemon = try startDaemon(["log-level = info"])
        let port = daemon.port
        let added = "+8613000000001", removed = Caller.fraud, relabelled = Caller.pizza, prefixed = "+8617199999999"
        let initial: [String: State] = [
            added: .unlabelled, removed: .blocked("Fraud Risk"), relabelled: .labelled("Pizza Palace, Haidian"),
            prefixed: .unlabelled, Caller.unicom: .labelled("China Unicom Customer Service"),
        ]
        var changes: [Change] = [
            Change(arguments: ["add", added, "--block", "--label", "Added Live"], caller: added, after: .blocked("Added Live")),
            Change(arguments: ["remove", removed], caller: removed, after: .unlabelled),
            Change(arguments: ["add", relabelled, "--label", "Pizza (journal)"], caller: relabelled, after: .labelled("Pizza (journal)")),
            Change(arguments: ["add", "+86171*", "--block", "--label", "Journal Range"], caller: prefixed, after: .blocked("Journal Range")),
            Change(arguments: ["compact", "main"], caller: nil, after: nil),
            Change(arguments: ["add", removed, "--block", "--label", "Fraud Again"], caller: removed, after: .blocked("Fraud Again")),
            Change(arguments: ["remove", added], caller: added, after: .unlabelled),
            Change(arguments: ["remove", "+86171*"], caller: prefixed, after: .unlabelled),
        ]
        let callers = Array(initial.keys).sorted()

        let traffic = CallTraffic(callers: callers, port: port)
        defer { traffic.stop() }

        usleep(500_000)
        for i in changes.indices {
            changes[i].started = monotonicSeconds()
            let r = try lookupd(changes[i].arguments + ["--config", daemon.configPath])
            changes[i].finished = monotonicSeconds()
            XCTAssertEqual(r.status, 0, "\(changes[i].arguments): \(r.summary)")
            usleep(1_300_000)
        }
        traffic.stop()
        XCTAssertNil(traffic.failure)

        let entries = traffic.entries
        XCTAssertGreaterThan(entries.count, 500, "the senders should have made many requests")
        let lost = entries.filter { $0.status == nil }
        XCTAssertEqual(lost.count, 0, "requests without an answer: \(lost.prefix(5))")

        // Per caller, its answers in order: the states it goes through.
        var late: [String] = [], early: [String] = [], wrong: [String] = []
        var latencies: [Double] = []
        for caller in callers {
            let mine = changes.filter { $0.caller == caller }
            let states = [initial[caller]!] + mine.map { $0.after! }
            for e in entries where e.caller == caller && e.status != nil {
                let got = State(status: e.status!, label: e.label)
                // At least the changes finished a second before it was sent; at
                // most those started before its answer came back.
                let lowest = mine.lastIndex { $0.finished + 1.0 < e.sent }.map { $0 + 1 } ?? 0
                let highest = mine.lastIndex { $0.started < e.received }.map { $0 + 1 } ?? 0
                let allowed = Array(states[lowest...highest])
                if !allowed.contains(got) {
                    if states[..<lowest].contains(got) { late.append("\(e) (wanted \(allowed))") }
                    else if states[(highest + 1)...].contains(got) { early.append("\(e) (wanted \(allowed))") }
                    else { wrong.append("\(e) (wanted \(allowed))") }
                }
            }
            // How long each change took to show.
            for (k, change) in mine.enumerated() {
                let first = entries.filter { $0.caller == caller && $0.sent > change.started && $0.status != nil
                    && State(status: $0.status!, label: $0.label) == states[k + 1] }.map(\.received).min()
                if let first { latencies.append(first - change.finished) }
            }
        }
        XCTAssertEqual(wrong, [], "answers no state ever had")
        XCTAssertEqual(late, [], "old answers more than a second after the change")
        XCTAssertEqual(early, [], "new answers before the change began")
        XCTAssertEqual(latencies.count, changes.count - 1, "every change was seen")
        print("changes in force after \(latencies.map { String(format: "%.0f ms", max(0, $0) * 1000) })")

        let stats = try stats(daemon)
        XCTAssertEqual(stats["lookupd_reloads_total"], 0, "no reload was involved")
        XCTAssertEqual(stats[#"lookupd_journal_sequence{directory="main"}"#], 7, stats.text)
        XCTAssertEqual(stats[#"lookupd_journal_merged_sequence{directory="main"}"#], 4, "the compacted file is in force\n\(stats.text)")
        XCTAssertEqual(stats[#"lookupd_journal_entries{directory="main"}"#], 3, stats.text)
        XCTAssertEqual(stats["lookupd_send_errors_total"], 0, stats.text)
        XCTAssertTrue(daemon.stderr.contains("main.lkd: compacted file in force (journal records through 4 merged"), daemon.stderr)
        // The call log names the journal record that decided.
        XCTAssertTrue(daemon.stderr.contains("caller=\(removed) callee=13000000000 response=603 label=\"Fraud Again\" source=main match=\(removed) record=5"), daemon.stderr.suffix(3000).description)
    }

    /// Only a compaction of the journal followed is picked up by itself; a
    /// directory recompiled and renamed in waits for a reload, as always,
    /// and the journal then applies on top of it.
    func testOtherDirectoryChangesWaitForAReload() throws {
        let daemon = try startDaemon(["log-level = info"])
        let peer = try UDPPeer()
        func answer(_ caller: String) -> State? { Self.answer(caller, from: peer, daemon) }
        func eventuallyAnswers(_ caller: String, _ state: State, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
            XCTAssertTrue(eventually(timeout: 1.0) { answer(caller) == state }, "\(what): \(caller) answers \(answer(caller).map(\.description) ?? "nothing")", file: file, line: line)
        }
        XCTAssertEqual(try lookupd(["add", Caller.unknown, "--block", "--config", daemon.configPath]).status, 0)
        eventuallyAnswers(Caller.unknown, .blocked(nil), "the addition")

        try compile(ReloadTests.directoryV2, to: "main-v2.lkd")
        XCTAssertEqual(rename(path("main-v2.lkd"), path("main.lkd")), 0)
        usleep(1_000_000)
        XCTAssertEqual(answer(Caller.fraud), .blocked("Fraud Risk"), "a recompiled file waits for the reload")
        XCTAssertTrue(daemon.stderr.contains("main.lkd changed on disk; it takes effect on the next reload"), daemon.stderr)
        let reload = try lookupd(["reload", "--config", daemon.configPath])
        XCTAssertEqual(reload.status, 0, reload.summary)
        XCTAssertEqual(answer(Caller.fraud), .labelled("Fraud Risk Cleared"))
        // The recompiled file names no journal: the whole journal applies to it.
        XCTAssertEqual(answer(Caller.unknown), .blocked(nil), "the whole journal applies to it: its entry replaces the file's 'Newly Blocked'")
    }

    /// A torn record at the end of the journal (a crashed `lookupd add`)
    /// is reported once; the daemon keeps serving what came before it, and
    /// the next `lookupd add` repairs the journal and is applied.
    func testTornJournalRecordIsReportedOnce() throws {
        let daemon = try startDaemon(["log-level = info"])
        let peer = try UDPPeer()
        func answer(_ caller: String) -> State? { Self.answer(caller, from: peer, daemon) }
        XCTAssertEqual(try lookupd(["add", "+8613000000011", "--label", "First", "--config", daemon.configPath]).status, 0)
        XCTAssertTrue(eventually(timeout: 1.0) { answer("+8613000000011") == .labelled("First") })
        let journal = path("main.lkd.journal")
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: journal))
        handle.seekToEndOfFile()
        handle.write(Data([38, 0, 0, 0, 1, 0, 6, 0, 2, 0, 0]))
        handle.closeFile()
        usleep(600_000)
        XCTAssertEqual(answer("+8613000000011"), .labelled("First"))
        XCTAssertEqual(daemon.stderr.components(separatedBy: "torn last record ignored").count - 1, 1, daemon.stderr)

        let r = try lookupd(["add", "+8613000000012", "--block", "--config", daemon.configPath])
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertTrue(r.stderr.contains("cut off a torn record"), r.stderr)
        XCTAssertTrue(eventually(timeout: 1.0) { answer("+8613000000012") == .blocked(nil) })
        usleep(300_000)
        XCTAssertEqual(daemon.stderr.components(separatedBy: "torn last record ignored").count - 1, 1, "still reported once\n\(daemon.stderr)")
        XCTAssertFalse(daemon.stderr.contains("<3>"), "no errors: \(daemon.stderr)")
    }
}
