import Dispatch
import Foundation
import XCTest

/// Callers placing INVITEs over UDP from several threads, each waiting for
/// its answer before the next call, until stopped: the traffic the reload,
/// feed-install and live-update tests make their changes under.
final class CallTraffic {
    private let recorder = Recorder()
    private let finished = DispatchSemaphore(value: 0)
    private let senders: Int
    private var stopped = false

    /// `pipelined`: each sender holds one TCP connection with that many INVITEs in flight on
    /// it, as a trunk carries many calls on one connection (0: UDP, one call at a time).
    init(callers: [String], port: UInt16, senders: Int = 4, pipelined: Int = 0) {
        self.senders = senders
        let recorder = self.recorder
        if pipelined > 0 {
            for k in 0..<senders {
                Thread { [finished] in
                    defer { finished.signal() }
                    Self.pipeline(callers: callers, port: port, first: k, inFlight: pipelined, into: recorder)
                }.start()
            }
            return
        }
        for k in 0..<senders {
            Thread { [finished] in
                defer { finished.signal() }
                var i = k
                while !recorder.isStopped {
                    guard let peer = try? UDPPeer() else { return recorder.fail("cannot open a UDP socket") }
                    let caller = callers[i % callers.count]
                    i += 1
                    let sent = monotonicSeconds()
                    let answer = peer.exchange(invite(from: "<sip:\(caller)@pbx.example>", port: port), port: port, timeout: 2)
                    recorder.add(.init(caller: caller, sent: sent, received: monotonicSeconds(), status: answer?.statusLine,
                                       label: answer?.header("X-Caller-Label")))
                }
            }.start()
        }
    }

    /// One connection, written to at a steady pace whatever the answers do (up to `inFlight`
    /// outstanding), read by a second thread that matches answers by Call-ID: requests keep
    /// arriving on the connection while the daemon is answering the ones before them.
    private static func pipeline(callers: [String], port: UInt16, first: Int, inFlight: Int, into recorder: Recorder) {
        guard let peer = try? TCPPeer(to: port) else { return recorder.fail("cannot connect over TCP") }
        let calls = OutstandingCalls(limit: inFlight)
        // The writer gets the descriptor only: the reader owns the peer and its buffer.
        let fd = peer.fd
        Thread {
            var i = first
            while !recorder.isStopped {
                let caller = callers[i % callers.count]
                let callID = token("tcp-call-")
                let room = calls.place(callID, caller: caller)
                if room {
                    i += 1
                    sendAll(fd, invite(from: "<sip:\(caller)@pbx.example>", port: port, transport: "TCP", callID: callID))
                }
                usleep(room ? 500 : 100)
            }
            calls.finishWriting()
        }.start()
        while !calls.isDone {
            let read = peer.receive(timeout: 2)
            if read == .timeout, calls.isEmpty { continue }
            guard case .message(let bytes) = read, let answer = SIPAnswer(bytes) else {
                // Every call still outstanding is lost; the assertion counts them.
                for call in calls.takeAll() {
                    recorder.add(.init(caller: call.caller, sent: call.sent, received: monotonicSeconds(), status: nil, label: nil))
                }
                calls.waitForWriter()
                return
            }
            guard answer.statusCode >= 200, let callID = answer.header("Call-ID"), let call = calls.answered(callID) else { continue }
            recorder.add(.init(caller: call.caller, sent: call.sent, received: monotonicSeconds(), status: answer.statusLine,
                               label: answer.header("X-Caller-Label")))
        }
    }

    /// Stops the senders and waits for them (again: a no-op).
    func stop(file: StaticString = #filePath, line: UInt = #line) {
        guard !stopped else { return }
        stopped = true
        recorder.stop()
        for _ in 0..<senders { XCTAssertEqual(finished.wait(timeout: .now() + 10), .success, file: file, line: line) }
    }

    var entries: [Recorder.Entry] { recorder.entries }
    var failure: String? { recorder.failure }

    typealias Expectation = (caller: String, v1: (String, String?), v2: (String, String?))

    /// Every call answered, each with the old or the new answer for its
    /// caller; none placed after the change returned got the old one, none
    /// answered before it began got the new one, and both were seen.
    func assertSwitchedOnce(from old: KeyPath<Expectation, (String, String?)>, to new: KeyPath<Expectation, (String, String?)>,
                            of expectations: [Expectation], started: Double, done: Double, by what: String,
                            file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNil(failure, file: file, line: line)
        let entries = self.entries
        XCTAssertGreaterThan(entries.count, 200, "the senders should have made many requests", file: file, line: line)
        let lost = entries.filter { $0.status == nil }
        XCTAssertEqual(lost.count, 0, "requests without an answer: \(lost.prefix(5))", file: file, line: line)
        var oldCount = 0, newCount = 0
        var wrong: [String] = [], lateOld: [String] = [], earlyNew: [String] = []
        for e in entries where e.status != nil {
            let expected = expectations.first { $0.caller == e.caller }!
            let got = (e.status!, e.label)
            let isOld = got == (expected[keyPath: old].0, expected[keyPath: old].1.map(Answer.quoted))
            let isNew = got == (expected[keyPath: new].0, expected[keyPath: new].1.map(Answer.quoted))
            if !isOld && !isNew { wrong.append("\(e)") }
            if e.sent > done && !isNew { lateOld.append("\(e)") }
            if e.received < started && !isOld { earlyNew.append("\(e)") }
            if isOld && !isNew { oldCount += 1 }
            if isNew && !isOld { newCount += 1 }
        }
        XCTAssertEqual(wrong.count, 0, "answers that are neither the old nor the new one, e.g. \(wrong.prefix(5))", file: file, line: line)
        XCTAssertEqual(lateOld.count, 0, "calls placed after \(what) returned that got the old answer, e.g. \(lateOld.prefix(5))", file: file, line: line)
        XCTAssertEqual(earlyNew.count, 0, "calls answered before \(what) began that got the new answer, e.g. \(earlyNew.prefix(5))", file: file, line: line)
        XCTAssertGreaterThan(oldCount, 0, file: file, line: line)
        XCTAssertGreaterThan(newCount, 0, file: file, line: line)
    }
}

/// What the closed-loop senders saw, shared between threads.
final class Recorder: @unchecked Sendable {
    struct Entry: CustomStringConvertible {
        var caller: String
        var sent: Double
        var received: Double
        var status: String?
        var label: String?
        var description: String { "\(caller) sent \(sent): \(status ?? "no answer") \(label ?? "")" }
    }

    private let lock = NSLock()
    private var _entries: [Entry] = []
    private var _stopped = false
    private var _failure: String?

    func add(_ entry: Entry) { lock.withLock { _entries.append(entry) } }
    func fail(_ why: String) { lock.withLock { _failure = why } }
    func stop() { lock.withLock { _stopped = true } }
    var isStopped: Bool { lock.withLock { _stopped } }
    var entries: [Entry] { lock.withLock { _entries } }
    var failure: String? { lock.withLock { _failure } }
}

/// The INVITEs written on one pipelined connection and not yet answered, shared by its
/// writer and its reader.
final class OutstandingCalls: @unchecked Sendable {
    typealias Call = (caller: String, sent: Double)
    private let lock = NSLock()
    private let limit: Int
    private var calls: [String: Call] = [:]
    private var writing = true

    init(limit: Int) { self.limit = limit }

    /// Records a call about to be written; false when `limit` are outstanding already.
    func place(_ callID: String, caller: String) -> Bool {
        lock.withLock {
            guard calls.count < limit else { return false }
            calls[callID] = (caller, monotonicSeconds())
            return true
        }
    }

    func answered(_ callID: String) -> Call? { lock.withLock { calls.removeValue(forKey: callID) } }
    func takeAll() -> [Call] { lock.withLock { defer { calls = [:] }; return Array(calls.values) } }
    func finishWriting() { lock.withLock { writing = false } }
    func waitForWriter() { while lock.withLock({ writing }) { usleep(1000) } }
    var isEmpty: Bool { lock.withLock { calls.isEmpty } }
    var isDone: Bool { lock.withLock { !writing && calls.isEmpty } }
}
