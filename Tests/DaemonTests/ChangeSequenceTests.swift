import Foundation
import Glibc
import XCTest

/// Random sequences of the commands that touch a served directory — `add`,
/// `remove`, `compact`, `compile -o` over the file, `update` from a feed,
/// `reload`, and daemon restarts — with SIGKILL at random moments, checked
/// against a model: a change `add` or `remove` acknowledged is in force
/// until the next change of the same number, whatever was recompiled,
/// compacted, installed or killed in between; the file itself says what
/// the last completed compile or update installed. After every sequence
/// the whole table `lookupd export` gives must equal the model's, and every
/// tenth sequence (and after each restart) the running daemon's answers
/// after a reload, and `lookupd query`'s.
///
/// A killed command acknowledged nothing, so either outcome is allowed: the
/// test looks (at `export`) and takes whichever happened, and fails when
/// neither did.
///
/// Plain pass only (about 8,000 process launches, 3 minutes of CPU):
/// LOOKUPD_SANITIZER skips it.
/// LOOKUPD_SEQUENCES sets how many sequences run (default 400; 1000 for the long run),
/// LOOKUPD_SEQUENCE_SEED the seed.
final class ChangeSequenceTests: DaemonTestCase {
    /// What a directory says about one key.
    struct Value: Equatable, CustomStringConvertible {
        var blocked: Bool
        var label: String?
        var description: String { (blocked ? "block" : "identify") + (label.map { " \($0)" } ?? "") }
    }

    /// Exact numbers and prefix rules the sequences touch.
    static let keys = ["+8613900000001", "+8613900000002", "+8613900000003", "+8613900000004", "+8613900000015",
                       "+8613900000123", "+86139000001*", "+8613900*"]
    /// Numbers whose answers are compared: the exact keys, and numbers only rules cover.
    static let probes = ["+8613900000001", "+8613900000002", "+8613900000003", "+8613900000004", "+8613900000015",
                         "+8613900000123", "+8613900000150", "+8613900000199", "+8613900555555"]
    static let labels = ["Spam", "Fraud Risk", "Courier", "Bank", nil]

    /// The model: the file's entries (the last completed compile or
    /// update), and the journal's latest change of each key (nil: removed).
    struct Model {
        var base: [String: Value] = [:]
        var layer: [String: Value?] = [:]
        /// The list the feed server publishes, and the one the last update installed.
        var lastInstalledFeed: String? = nil

        /// What lookups find for each key: the change if any, else the file.
        var table: [String: Value] {
            var t = base
            for (key, change) in layer {
                if let change { t[key] = change } else { t[key] = nil }
            }
            return t
        }

        /// The answer for a number: its exact entry, else the longest rule.
        func answer(_ number: String) -> Value? {
            let t = table
            if let exact = t[number] { return exact }
            let digits = number.dropFirst()
            for length in stride(from: digits.count, through: 1, by: -1) {
                if let rule = t["+" + digits.prefix(length) + "*"] { return rule }
            }
            return nil
        }
    }

    var model = Model()
    var rng = SeededRandom(seed: 0)
    var config = ""
    var publisher: FeedServer!
    var daemon: LookupdDaemon!
    var httpPort: UInt16 = 0
    var counts: [String: Int] = [:]
    /// An update was killed: what the next one does depends on how far it got.
    var feedUncertain = false

    func testRandomSequencesNeverLoseAnAcknowledgedChange() throws {
        try skipUnderSanitizer("thousands of process launches, not about memory safety")
        let environment = ProcessInfo.processInfo.environment
        let sequences = Int(environment["LOOKUPD_SEQUENCES"] ?? "") ?? 400
        let seed = UInt64(environment["LOOKUPD_SEQUENCE_SEED"] ?? "") ?? UInt64(time(nil))
        rng = SeededRandom(seed: seed)
        print("change sequences: \(sequences), seed \(seed) (LOOKUPD_SEQUENCE_SEED=\(seed) reproduces the commands)")

        publisher = try FeedServer(root: path("www"))
        defer { publisher.stop() }
        publisher.publish("list.csv", csv([:]))
        try compile(csv([:]), to: "main.lkd")
        try startServing(restart: false)
        let started = monotonicSeconds()
        for sequence in 0..<sequences {
            let steps = Int.random(in: 3...8, using: &rng)
            var done: [String] = []
            for _ in 0..<steps { done.append(try step()) }
            // The daemon every tenth sequence (and after a restart); the files after every one.
            let daemonToo = sequence % 10 == 9 || sequence == sequences - 1 || done.contains { $0.hasPrefix("restart") }
            try check(sequence: sequence, after: done, seed: seed, daemon: daemonToo)
            if (testRun?.totalFailureCount ?? 0) > 0 { break }
        }
        print("change sequences: \(sequences) in \(Int(monotonicSeconds() - started)) s; steps \(counts.sorted { $0.key < $1.key })")
    }

    // MARK: - Steps

    /// One random command, run (and maybe killed) and folded into the model.
    func step() throws -> String {
        let roll = Int.random(in: 0..<100, using: &rng)
        let kill = Int.random(in: 0..<4, using: &rng) == 0
        switch roll {
        case 0..<30:
            let key = Self.keys.randomElement(using: &rng)!
            var value = Value(blocked: Bool.random(using: &rng), label: Self.labels.randomElement(using: &rng)!)
            if value.label == nil { value.blocked = true }
            var arguments = ["add", key, "--config", config]
            if value.blocked { arguments.append("--block") }
            if let label = value.label { arguments += ["--label", label] }
            try run("add", arguments, kill: kill) { $0.layer[key] = .some(value) }
            return "add \(key) \(value)\(kill ? " (killed)" : "")"
        case 30..<45:
            let key = Self.keys.randomElement(using: &rng)!
            let present = model.table[key] != nil
            try run("remove", ["remove", key, "--config", config], kill: kill, expectFailure: !present) { $0.layer[key] = .some(nil) }
            return "remove \(key)\(present ? "" : " (not there)")\(kill ? " (killed)" : "")"
        case 45..<58:
            try run("compact", ["compact", "--config", config], kill: kill) { _ in }
            return "compact\(kill ? " (killed)" : "")"
        case 58..<72:
            let list = randomList()
            let source = write("master.csv", csv(list))
            try run("compile", ["compile", "--config", planConfig, "-q", source, "-o", path("main.lkd")], kill: kill) { $0.base = list }
            return "compile \(list.count) entries\(kill ? " (killed)" : "")"
        case 72..<84:
            let list = Bool.random(using: &rng) ? randomList() : nil
            if let list { publisher.publish("list.csv", csv(list)) }
            let published = readText(path("www/list.csv"))
            let changes = published != model.lastInstalledFeed
            // After an update was killed, its state file may or may not
            // say what it installed: the next one may install again or not.
            let uncertain = feedUncertain && !kill
            try run("update", ["update", "--config", daemon.configPath], kill: kill || uncertain, killNow: kill) { m in
                guard changes || uncertain else { return }
                m.base = self.parse(published)
                m.lastInstalledFeed = published
            }
            if kill { feedUncertain = true } else if uncertain { feedUncertain = false }
            return "update\(changes ? "" : " (unchanged)")\(kill ? " (killed)" : "")"
        case 84..<97:
            let r = try lookupd(["reload", "--config", daemon.configPath])
            XCTAssertEqual(r.status, 0, "reload: \(r.summary)")
            counts["reload", default: 0] += 1
            return "reload"
        default:
            try startServing(restart: true)
            counts["restart", default: 0] += 1
            return "restart (SIGKILL)"
        }
    }

    /// Runs a command; killed (or `uncertain`: either outcome allowed),
    /// the outcome is what `export` shows, and must be one of the two.
    func run(_ name: String, _ arguments: [String], kill uncertain: Bool, killNow: Bool? = nil, expectFailure: Bool = false,
             change: (inout Model) -> Void) throws {
        var changed = model
        change(&changed)
        let kill = killNow ?? uncertain
        counts[name + (kill ? " killed" : ""), default: 0] += 1
        if !kill && uncertain {
            let r = try lookupd(arguments)
            XCTAssertEqual(r.status, 0, "\(arguments): \(r.summary)")
        } else if !kill {
            let r = try lookupd(arguments)
            if expectFailure {
                XCTAssertEqual(r.status, 1, "\(arguments): \(r.summary)")
                return
            }
            XCTAssertEqual(r.status, 0, "\(arguments): \(r.summary)")
            if r.status == 0 { model = changed }
            return
        }
        // A killed add that would leave the table as it was (the file already
        // says so) still differs in what survives the next rebuild: only the
        // journal tells whether its record was written.
        let recordBefore = kill && name == "add" ? try lastJournalRecord() : nil
        if kill {
            let child = try ChildProcess(executable: LookupdBinary.path!, arguments: arguments, folder: folder, name: name,
                                         environment: ["LOOKUPD_CONFIG": planConfig])
            usleep(UInt32.random(in: 0...25_000, using: &rng))
            child.signal(SIGKILL)
            XCTAssertTrue(child.wait(timeout: 30))
        }
        if expectFailure { return }
        let table = try exported()
        // The changed model first: when both tables agree (an update that
        // installed what the table already held), what the command did beyond
        // the table (the feed the updater now holds) is the changed model's.
        if table == changed.table {
            if table == model.table, let recordBefore, try lastJournalRecord() == recordBefore { return }
            model = changed
            return
        }
        if table == model.table { return }
        XCTFail("\(arguments) killed: the directory says \(describe(table)); before: \(describe(model.table)), after: \(describe(changed.table))")
        model.base = table
        model.layer = [:]
    }

    /// The journal's last complete record (0 without a journal), from `inspect --json`.
    func lastJournalRecord() throws -> Int {
        let r = try lookupd(["inspect", "--json", path("main.lkd")])
        XCTAssertEqual(r.status, 0, "inspect: \(r.summary)")
        guard let object = try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any] else {
            XCTFail("inspect --json: \(r.summary)")
            return 0
        }
        return (object["journal"] as? [String: Any])?["last_record"] as? Int ?? 0
    }

    /// Starts the daemon (first time), or kills it with SIGKILL and starts it again.
    func startServing(restart: Bool) throws {
        if restart, let daemon {
            daemon.signal(SIGKILL)
            _ = daemon.child.wait(timeout: 10)
        }
        let feed = "feed = list \(publisher.url("f/list.csv")) into=main.lkd max-shrink=100"
        let (d, port) = try startHTTPDaemon([feed, "log-level = warning"], name: "seq")
        daemon = d
        httpPort = port
        config = daemon.configPath
    }

    // MARK: - Checks

    /// The table export shows equals the model's; the daemon, after a
    /// reload, answers every probe as the model does.
    func check(sequence: Int, after steps: [String], seed: UInt64, daemon checkDaemon: Bool) throws {
        let table = try exported()
        guard table == model.table else {
            XCTFail("sequence \(sequence) (seed \(seed)) \(steps): export says \(describe(table)), the model \(describe(model.table))")
            model.base = table
            model.layer = [:]
            return
        }
        guard checkDaemon else { return }
        let r = try lookupd(["reload", "--config", daemon.configPath])
        XCTAssertEqual(r.status, 0, "reload: \(r.summary)")
        let expected = Self.probes.map { describeAnswer(model.answer($0)) }
        var answers: [String] = []
        let agreed = try eventually(timeout: 5) {
            answers = try daemonAnswers()
            return answers == expected
        }
        XCTAssertTrue(agreed, "sequence \(sequence) (seed \(seed)) \(steps): the daemon answers \(answers), the model \(expected)")
        // And lookupd query, one number at a time, as an operator would ask.
        let query = try lookupd(["query", "--config", daemon.configPath] + Self.probes)
        XCTAssertEqual(query.status, 0, query.summary)
        let cli = query.stdout.split(separator: "\n").map { line -> String in
            let f = line.split(separator: "\t", omittingEmptySubsequences: false)
            return "\(f[2]) \(f[3])"
        }
        XCTAssertEqual(cli, expected.map { $0.replacingOccurrences(of: " null", with: " -") }, "sequence \(sequence): lookupd query")
    }

    func describeAnswer(_ value: Value?) -> String {
        guard let value else { return "unknown null" }
        return "\(value.blocked ? "blocked" : "identified") \(value.label ?? "null")"
    }

    /// Every probe through /lookup.json on one keep-alive connection.
    func daemonAnswers() throws -> [String] {
        let peer = try HTTPConnectionPeer(port: httpPort)
        defer { peer.disconnect() }
        for probe in Self.probes {
            peer.send("GET /lookup.json?number=\(probe.replacingOccurrences(of: "+", with: "%2B")) HTTP/1.1\r\nHost: test\r\n\r\n")
        }
        return peer.responses(Self.probes.count).map { answer in
            guard answer.status == 200,
                  let object = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any] else { return "HTTP \(answer.status)" }
            return "\(object["verdict"] as? String ?? "?") \(object["label"] as? String ?? "null")"
        }
    }

    /// What the directory and its journal say, key by key.
    func exported() throws -> [String: Value] {
        let r = try lookupd(["export", path("main.lkd")])
        XCTAssertEqual(r.status, 0, "export: \(r.summary)")
        return parse(r.stdout)
    }

    // MARK: - Lists

    func randomList() -> [String: Value] {
        var list: [String: Value] = [:]
        for key in Self.keys where Int.random(in: 0..<3, using: &rng) != 0 {
            let label = Self.labels.randomElement(using: &rng)!
            list[key] = Value(blocked: label == nil || Bool.random(using: &rng), label: label)
        }
        return list
    }

    func csv(_ list: [String: Value]) -> String {
        var text = "number,action,label\n"
        for key in list.keys.sorted() {
            let v = list[key]!
            text += "\(key),\(v.blocked ? "block" : "identify"),\(v.label ?? "")\n"
        }
        return text
    }

    func parse(_ csv: String) -> [String: Value] {
        var list: [String: Value] = [:]
        for line in csv.split(separator: "\n").dropFirst() {
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard f.count >= 3 else { continue }
            list[f[0]] = Value(blocked: f[1] == "block", label: f[2].isEmpty ? nil : f[2])
        }
        return list
    }

    func describe(_ table: [String: Value]) -> String {
        "[" + table.keys.sorted().map { "\($0) \(table[$0]!)" }.joined(separator: "; ") + "]"
    }
}
