import Configuration
import Directory
import Foundation
import Glibc
import Replication
import XCTest

/// Issue 21: live changes on every node through etcd (docs/CLUSTER.md).
/// A real etcd cluster on loopback started by the test, lookupd nodes with
/// `replicate`, and every answer checked over SIP against a model of the
/// acknowledged changes.
///
/// All but `testShortConvergence` take tens of seconds and are about
/// distribution, not memory safety: they run in the plain pass only.
final class ClusterTests: IntegrationTestCase {
    typealias State = LiveUpdateTests.State
    private var cluster: EtcdCluster?

    override func tearDown() {
        cluster?.stop()
        cluster = nil
        super.tearDown()
    }

    /// The issue's full sizes (1,000 propagations; 4,000 single and 25,000
    /// batched sustained changes) with `LOOKUPD_CLUSTER_FULL` set, as
    /// docs/BENCHMARKS.md runs them; otherwise a fifth of them, the same
    /// assertions, so that the plain pass stays within CI's time.
    private let full = ProcessInfo.processInfo.environment["LOOKUPD_CLUSTER_FULL"] != nil

    private func skipUnderSanitizers() throws {
        try skipUnderSanitizer("slow distribution test")
    }

    private func startCluster(_ size: Int) throws -> EtcdCluster {
        guard EtcdBinary.path != nil else {
            XCTFail("etcd is not installed (scripts/install-deps installs etcd-server)")
            throw HarnessError.missing("etcd")
        }
        let cluster = try EtcdCluster(folder: folder, size: size)
        self.cluster = cluster
        return cluster
    }

    /// Starts (or restarts) node `name` serving its own copy of the standard directory.
    @discardableResult
    private func startClusterNode(_ name: String, _ cluster: EtcdCluster, options: String = "", extra: [String] = []) throws -> LookupdDaemon {
        let file = "main-\(name).lkd"
        if !FileManager.default.fileExists(atPath: path(file)) { try compile(Lists.directoryCSV, to: file) }
        return try startDaemon(["replicate = etcd \(cluster.clientURLs.joined(separator: ",")) node=\(name) \(options)", "log-level = notice"] + extra,
                               name: name, directories: ["\(file) name=main"], contacts: [])
    }

    private func replication(_ cluster: EtcdCluster) -> ReplicationConfig {
        ReplicationConfig(endpoints: cluster.clientURLs, node: "writer")
    }

    private func pattern(_ text: String) -> NumberPattern {
        guard case .success(let p) = NumberNormalizer().pattern(text) else { fatalError(text) }
        return p
    }

    private func answer(_ node: LookupdDaemon, _ caller: String, _ peer: UDPPeer) -> State? {
        answer(port: node.port, caller, peer, timeout: 1)
    }

    /// The answer to one INVITE sent to `port`; datagrams for other calls
    /// (a proxy's retransmissions of earlier answers) are skipped.
    private func answer(port: UInt16, _ caller: String, _ peer: UDPPeer, timeout: Double) -> State? {
        let id = token("call-")
        peer.send(invite(from: "<sip:\(caller)@pbx.example>", port: port, callID: id), to: port)
        let deadline = monotonicSeconds() + timeout
        while let bytes = peer.receive(timeout: max(0.001, deadline - monotonicSeconds())) {
            if let answer = SIPAnswer(bytes), answer.header("Call-ID") == id {
                return State(status: answer.statusLine, label: answer.header("X-Caller-Label"))
            }
        }
        return nil
    }

    /// Every caller's answer from `node`, 200 INVITEs in flight at a time
    /// (matched by Call-ID); a caller without an answer is missing.
    private func answers(_ node: LookupdDaemon, _ callers: [String], _ peer: UDPPeer) -> [String: State] {
        var got: [String: State] = [:]
        for start in stride(from: 0, to: callers.count, by: 200) {
            let chunk = Array(callers[start..<min(callers.count, start + 200)])
            var waiting: [String: String] = [:]
            for caller in chunk {
                let id = token("check-")
                waiting[id] = caller
                peer.send(invite(from: "<sip:\(caller)@pbx.example>", port: node.port, callID: id), to: node.port)
            }
            let deadline = monotonicSeconds() + 2
            while !waiting.isEmpty, let bytes = peer.receive(timeout: max(0.001, deadline - monotonicSeconds())) {
                guard let answer = SIPAnswer(bytes), let id = answer.header("Call-ID"), let caller = waiting.removeValue(forKey: id) else { continue }
                got[caller] = State(status: answer.statusLine, label: answer.header("X-Caller-Label"))
            }
        }
        return got
    }

    /// Callers whose answer differs from the model, on any node.
    private func mismatches(_ model: [String: State], _ nodes: [LookupdDaemon], _ peer: UDPPeer) -> [String] {
        var wrong: [String] = []
        let callers = model.keys.sorted()
        for node in nodes {
            let got = answers(node, callers, peer)
            for caller in callers where got[caller] != model[caller] {
                wrong.append("\(node.name): \(caller) answers \(got[caller]?.description ?? "nothing"), model \(model[caller]!)")
            }
        }
        return wrong
    }

    /// Waits (at most `timeout` s) until every node answers as the model says.
    private func converges(_ model: [String: State], _ nodes: [LookupdDaemon], _ peer: UDPPeer, timeout: Double) -> [String] {
        var wrong: [String] = []
        _ = eventually(timeout: timeout) {
            wrong = mismatches(model, nodes, peer)
            return wrong.isEmpty
        }
        return wrong
    }

    private func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
    }

    private func number(_ i: Int, series: Int = 1) -> String { "+86131\(series)\(String(format: "%07d", i))" }

    private func revision(in output: String) -> UInt64? {
        guard let range = output.range(of: #"etcd revision (\d+)"#, options: .regularExpression) else { return nil }
        return UInt64(output[range].split(separator: " ").last!)
    }

    // MARK: - The tests

    /// `lookupd add` on node A, 1,000 times (200 without `full`): each
    /// change is answered on A, B and C within a second (p50/p99 recorded
    /// in docs/BENCHMARKS.md);
    /// then the same numbers changed from two nodes at once end the same
    /// everywhere, in etcd's revision order, and a remove right after an
    /// add is never overtaken by it.
    func testPropagationAndConflictsOnThreeNodes() throws {
        try skipUnderSanitizers()
        let cluster = try startCluster(3)
        let nodes = try ["a", "b", "c"].map { try startClusterNode($0, cluster) }
        let peer = try UDPPeer()
        var fromAck: [Double] = [], fromStart: [Double] = []
        var late: [String] = []
        var model: [String: State] = [:]
        let count = full ? 1000 : 200
        for i in 0..<count {
            let caller = number(i), label = "Prop \(i)"
            let started = monotonicSeconds()
            let r = try lookupd(["add", caller, "--block", "--label", label, "--config", nodes[0].configPath], timeout: 20)
            let acked = monotonicSeconds()
            XCTAssertEqual(r.status, 0, r.summary)
            guard r.status == 0 else { break }
            model[caller] = .blocked(label)
            // Each node is asked in turn until it answers the block. The
            // change was in force between the last old answer and the first
            // new one: a node still answering the old state more than a
            // second after the command returned is late. (The first new
            // answer is an upper bound: when this process is not scheduled
            // for a while on a busy machine, it comes late whatever the node
            // did; the nodes' own histogram below times it from their side.)
            var pending = Set(nodes.indices)
            while !pending.isEmpty, monotonicSeconds() < acked + 5 {
                for n in pending.sorted() {
                    let asked = monotonicSeconds()
                    if answer(nodes[n], caller, peer) == .blocked(label) {
                        let now = monotonicSeconds()
                        fromAck.append(now - acked)
                        fromStart.append(now - started)
                        pending.remove(n)
                    } else if asked - acked > 1.0 {
                        late.append("\(caller) on \(nodes[n].name): the old answer \(Int((asked - acked) * 1000)) ms after lookupd add returned")
                    }
                }
            }
            for n in pending { late.append("\(caller) never on \(nodes[n].name)") }
        }
        XCTAssertEqual(late, [], "changes not in force on every node within a second")
        XCTAssertEqual(fromAck.count, 3 * count)
        for node in nodes {
            // From when lookupd add made the change (its value's time) to when the node had it in force.
            let stats = try stats(node)
            let total = stats["lookupd_replication_delay_seconds_count"], withinASecond = stats[#"lookupd_replication_delay_seconds_bucket{le="1.0"}"#]
            XCTAssertGreaterThanOrEqual(total, count, stats.text)
            XCTAssertEqual(withinASecond, total, "\(node.name): changes in force more than a second after they were made\n\(stats.text)")
        }
        print(String(format: "PROPAGATION %d changes x 3 nodes: from lookupd add's exit p50 %.1f ms, p99 %.1f ms, max %.1f ms; from its start p50 %.1f ms, p99 %.1f ms",
                     count, percentile(fromAck, 0.5) * 1000, percentile(fromAck, 0.99) * 1000, (fromAck.max() ?? 0) * 1000,
                     percentile(fromStart, 0.5) * 1000, percentile(fromStart, 0.99) * 1000))

        // Conflicts: two nodes change the same number at the same moment.
        var revisions: [String: [(UInt64, State)]] = [:]
        for j in 0..<30 {
            let caller = number(j, series: 2)
            let one = try ChildProcess(executable: LookupdBinary.path!, arguments: ["add", caller, "--block", "--label", "From A \(j)", "--config", nodes[0].configPath],
                                       folder: folder, name: "add-a")
            let two = try ChildProcess(executable: LookupdBinary.path!, arguments: ["add", caller, "--label", "From C \(j)", "--config", nodes[2].configPath],
                                       folder: folder, name: "add-c")
            XCTAssertTrue(one.wait(timeout: 20) && two.wait(timeout: 20))
            for (child, state) in [(one, State.blocked("From A \(j)")), (two, State.labelled("From C \(j)"))] {
                XCTAssertEqual(child.status, 0, child.stderr)
                if let r = revision(in: child.stdout) { revisions[caller, default: []].append((r, state)) }
            }
        }
        for (caller, writes) in revisions {
            XCTAssertEqual(writes.count, 2, "both writers were acknowledged for \(caller)")
            model[caller] = writes.max { $0.0 < $1.0 }!.1
        }
        // Order: a remove right after an add (from another node), and an add right after a remove.
        for k in 0..<20 {
            let caller = number(k, series: 3)
            XCTAssertEqual(try lookupd(["add", caller, "--block", "--label", "Brief \(k)", "--config", nodes[0].configPath]).status, 0)
            let removed = try lookupd(["remove", caller, "--config", nodes[1].configPath])
            XCTAssertEqual(removed.status, 0, removed.summary)
            model[caller] = .unlabelled
            if k % 2 == 0 {
                XCTAssertEqual(try lookupd(["add", caller, "--block", "--label", "Back \(k)", "--config", nodes[2].configPath]).status, 0)
                model[caller] = .blocked("Back \(k)")
            }
        }
        XCTAssertEqual(converges(model, nodes, peer, timeout: 1.0), [], "every node ends as etcd ordered the changes")
        for node in nodes {
            let stats = try stats(node)
            XCTAssertEqual(stats[#"lookupd_replication_apply_errors_total{directory="main"}"#], 0, stats.text)
            XCTAssertEqual(stats[#"lookupd_replication_watching{directory="main"}"#], 1, stats.text)
            XCTAssertEqual(stats[#"lookupd_replication_entries{directory="main"}"#], model.count, stats.text)
            XCTAssertEqual(stats["lookupd_reloads_total"], 0)
        }
    }

    /// SIGKILL of node B while 500 changes are made: restarted, B has them
    /// all before it answers its first call. B stopped while the history it
    /// needs is compacted: it reads the whole range and converges. One etcd
    /// member (the leader) stopped: changes still commit and reach every
    /// node. Two stopped: `lookupd add` fails within 5 s, clearly, and no
    /// node ever applies the change. Every acknowledged change is checked
    /// on every node against the model.
    func testRestartCompactionAndMemberLoss() throws {
        try skipUnderSanitizers()
        let cluster = try startCluster(3)
        var nodes = try ["a", "b", "c"].map { try startClusterNode($0, cluster) }
        let peer = try UDPPeer()
        let writer = replication(cluster)
        var model: [String: State] = [Caller.fraud: .blocked("Fraud Risk"), Caller.unicom: .labelled("China Unicom Customer Service")]
        func change(_ caller: String, _ state: State, file: StaticString = #filePath, line: UInt = #line) {
            do {
                switch state.status {
                case "302 Moved Temporarily" where state.label == nil:
                    _ = try ReplicatedUpdates.remove(pattern(caller), directory: "main", heldLocally: model[caller] != nil, config: writer)
                case "302 Moved Temporarily":
                    _ = try ReplicatedUpdates.add(pattern(caller), blocked: false, label: Array(Answer.unquoted(state.label!).utf8), directory: "main", config: writer)
                default:
                    _ = try ReplicatedUpdates.add(pattern(caller), blocked: true, label: state.label.map { Array(Answer.unquoted($0).utf8) }, directory: "main", config: writer)
                }
                model[caller] = state
            } catch {
                XCTFail("\(caller): \(error)", file: file, line: line)
            }
        }

        // 1. SIGKILL of B, 500 changes, B restarted.
        nodes[1].signal(SIGKILL)
        XCTAssertTrue(nodes[1].child.wait(timeout: 5))
        for i in 0..<500 { change(number(i), .blocked("While B was down \(i)")) }
        change(Caller.fraud, .unlabelled)
        change(Caller.unicom, .blocked("Unicom?"))
        let restarted = monotonicSeconds()
        nodes[1] = try startClusterNode("b", cluster)
        let firstAnswers = mismatches(model, [nodes[1]], peer)
        XCTAssertEqual(firstAnswers, [], "B answers from the first call with every change it missed")
        print("RESTART B answered after \(Int((monotonicSeconds() - restarted) * 1000)) ms with all \(model.count) changes")
        XCTAssertEqual(converges(model, [nodes[0], nodes[2]], peer, timeout: 1.0), [])
        var stats = try self.stats(nodes[1])
        XCTAssertEqual(stats[#"lookupd_replication_caught_up{directory="main"}"#], 1, stats.text)
        XCTAssertTrue(nodes[1].stderr.contains("replication: caught up with etcd in"), nodes[1].stderr)

        // 2. B stopped while etcd compacts away the history it needs.
        XCTAssertTrue(terminate(nodes[1]).normal)
        for i in 0..<200 { change(number(i, series: 4), .labelled("Compacted away \(i)")) }
        for i in stride(from: 0, to: 500, by: 5) { change(number(i), .unlabelled) }
        try cluster.compact(try cluster.revision())
        nodes[1] = try startClusterNode("b", cluster)
        XCTAssertEqual(mismatches(model, [nodes[1]], peer), [], "B converged through a snapshot before answering")
        stats = try self.stats(nodes[1])
        XCTAssertEqual(stats[#"lookupd_replication_snapshots_total{directory="main"}"#], 1, stats.text)
        XCTAssertTrue(nodes[1].stderr.contains("etcd compacted its history through revision"), nodes[1].stderr)

        // 3. The leader stopped, and it is the member every node watches
        // (the first URL): changes still commit and reach every node
        // within a second, through the watches moved to other members.
        try cluster.makeLeader(0)
        let leader = 0
        let reconnectsBefore = try nodes.map { try self.stats($0)["lookupd_replication_watch_reconnects_total"] }
        cluster.kill(leader)
        var slow: [String] = []
        for i in 0..<100 {
            let caller = number(i, series: 5)
            let started = monotonicSeconds()
            change(caller, .blocked("One member down \(i)"))
            let acked = monotonicSeconds()
            if !converges([caller: model[caller]!], nodes, peer, timeout: 1.0).isEmpty { slow.append(caller) }
            if i == 0 { print("MEMBER DOWN first change acknowledged after \(Int((acked - started) * 1000)) ms") }
        }
        XCTAssertEqual(slow, [], "with one member down, changes not on every node within a second")
        for (node, before) in zip(nodes, reconnectsBefore) {
            XCTAssertGreaterThan(try self.stats(node)["lookupd_replication_watch_reconnects_total"], before, "\(node.name) moved its watch")
        }
        try cluster.start(leader)
        XCTAssertTrue(cluster.waitUntilWritable(timeout: 20))

        // 4. Two members stopped: no quorum.
        let down = Array(cluster.running.prefix(2))
        for i in down { cluster.kill(i) }
        let caller = number(0, series: 6)
        let started = monotonicSeconds()
        let refused = try lookupd(["add", caller, "--block", "--label", "No Quorum", "--config", nodes[0].configPath], timeout: 20)
        let took = monotonicSeconds() - started
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertLessThanOrEqual(took, 5.0, "lookupd add without a quorum took \(took) s")
        XCTAssertTrue(refused.stderr.contains("etcd has no quorum or cannot be reached"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("nothing was changed anywhere"), refused.stderr)
        print(String(format: "NO QUORUM lookupd add failed after %.2f s: %@", took, refused.stderr.trimmingCharacters(in: .whitespacesAndNewlines)))
        let removeRefused = try lookupd(["remove", number(1), "--config", nodes[2].configPath], timeout: 20)
        XCTAssertEqual(removeRefused.status, 1, removeRefused.summary)
        model[caller] = .unlabelled
        XCTAssertEqual(mismatches(model, nodes, peer), [], "nodes keep answering from their local state while etcd has no quorum")
        for i in down { try cluster.start(i) }
        XCTAssertTrue(cluster.waitUntilWritable(timeout: 30))
        usleep(2_000_000)
        XCTAssertNil(try cluster.value("/lookupd/main/\(caller)"), "the refused change is not in etcd")
        XCTAssertEqual(converges(model, nodes, peer, timeout: 1.0), [], "no acknowledged change lost, no refused change applied")
        for node in nodes {
            stats = try self.stats(node)
            XCTAssertEqual(stats[#"lookupd_replication_apply_errors_total{directory="main"}"#], 0, stats.text)
        }
    }

    /// Sustained: writers commit changes as fast as etcd takes them, first
    /// one key per write from 64 writers, then fifty keys per transaction
    /// from 16 (a bulk import; 4,000 and 25,000 changes, 800 and 5,000
    /// without `full`); every change reaches every node, lookupd
    /// keeps up with the first, and the second is in force on all three
    /// nodes at 1,000 changes a second or more.
    func testSustainedChangesReachEveryNode() throws {
        try skipUnderSanitizers()
        let cluster = try startCluster(3)
        let nodes = try ["a", "b", "c"].map { try startClusterNode($0, cluster, extra: ["workers = 1"]) }
        let peer = try UDPPeer()
        var model: [String: State] = [:]
        var total = 0
        for (series, count, perWrite, writers) in full ? [(7, 4_000, 1, 64), (8, 25_000, 50, 16)] : [(7, 800, 1, 64), (8, 5_000, 50, 16)] {
            let results = WriterResults()
            let urls = cluster.clientURLs
            let callers = (0..<count).map { number($0, series: series) }
            let started = monotonicSeconds()
            // Threads, not concurrentPerform (which runs as many at once as
            // there are cores): etcd commits more the more writers wait on it.
            let finished = DispatchGroup()
            for w in 0..<writers {
                finished.enter()
                Thread.detachNewThread {
                    defer { finished.leave() }
                    // Each writer starts at another member, as clients spread.
                    let mine = Array(urls[(w % urls.count)...] + urls[..<(w % urls.count)])
                    guard let client = try? EtcdClient(ReplicationConfig(endpoints: mine, node: "writer-\(w)")) else { return results.fail("no client") }
                    for first in stride(from: w * perWrite, to: count, by: writers * perWrite) {
                        let batch = Array(first..<min(count, first + perWrite))
                        let puts = batch.map { i in
                            ("/lookupd/main/\(callers[i])", ReplicatedValue(blocked: true, label: Array("Burst \(series)-\(i)".utf8), origin: "writer-\(w)", time: ReplicatedValue.now()))
                        }
                        do {
                            let revision = try EtcdCluster.put(client, puts)
                            for i in batch { results.ack(i, revision) }
                        } catch {
                            results.fail("\(first): \(error)")
                        }
                    }
                }
            }
            XCTAssertEqual(finished.wait(timeout: .now() + 300), .success, "writers did not finish")
            let written = monotonicSeconds()
            let acked = results.acked
            XCTAssertEqual(results.failures, [])
            XCTAssertEqual(acked.count, count)
            let last = acked.values.max() ?? 0
            var inForce = written
            for node in nodes {
                XCTAssertTrue(eventually(timeout: 60) { ((try? stats(node))?[#"lookupd_replication_applied_revision{directory="main"}"#] ?? 0) >= Int(last) },
                              "\(node.name) did not apply revision \(last)")
                inForce = monotonicSeconds()
            }
            let rate = Double(acked.count) / (inForce - started)
            print(String(format: "SUSTAINED %d changes, %d per write, %d writers: committed at %.0f/s in %.2f s; in force on all 3 nodes at %.0f/s, %.0f ms after the last commit",
                         acked.count, perWrite, writers, Double(acked.count) / (written - started), written - started, rate, (inForce - written) * 1000))
            // The issue's figures (1 s behind, 1,000 changes a second) are held at full size
            // (LOOKUPD_CLUSTER_FULL=1, docs/BENCHMARKS.md); the plain pass shares its two cores
            // with whatever else runs, so it holds bounds a tenth as strict, which still catch
            // a node that falls behind for good or applies a change per poll.
            let (lagBound, rateBound) = full ? (1.0, 1000.0) : (10.0, 100.0)
            if perWrite == 1 {
                // etcd's commit rate bounds single writes: lookupd keeps up with it.
                XCTAssertLessThan(inForce - written, lagBound, "every node has every change within \(lagBound) s of the last commit")
            } else {
                // Batches commit faster than the requirement: the rate is lookupd's.
                XCTAssertGreaterThanOrEqual(rate, rateBound, "changes in force on every node per second")
            }
            for i in acked.keys { model[callers[i]] = .blocked("Burst \(series)-\(i)") }
            total += count
        }
        XCTAssertEqual(mismatches(model, nodes, peer).prefix(20), [], "changes lost")
        for node in nodes {
            let stats = try stats(node)
            XCTAssertEqual(stats[#"lookupd_replication_entries{directory="main"}"#], total, stats.text)
            XCTAssertEqual(stats[#"lookupd_replication_apply_errors_total{directory="main"}"#], 0, stats.text)
        }
    }

    /// The deployment of docs/CLUSTER.md, with the files in Config/examples:
    /// three nodes from lookupd-cluster-node.conf behind Kamailio's
    /// dispatcher (kamailio-dispatcher.cfg), three etcd members. A number
    /// blocked with `lookupd add` on one node is blocked on the other two
    /// within a second, and every call through the dispatcher, whichever
    /// node answers it, gets the block. A node killed and restarted comes
    /// back with the changes it missed before the dispatcher sends it calls.
    func testDeploymentBehindDispatcher() throws {
        try skipUnderSanitizers()
        let cluster = try startCluster(3)
        let example = readText(examplesDirectory.appendingPathComponent("lookupd-cluster-node.conf").path)
        var ports: [UInt16] = []
        var nodes: [LookupdDaemon] = []
        for name in ["node-a", "node-b", "node-c"] {
            try compile(Lists.directoryCSV, to: "carrier-\(name).lkd")
            let port = freeLoopbackPort()
            ports.append(port)
            let text = try exampleConfig(example, name: name, cluster: cluster, values: [
                "listen": "udp:127.0.0.1:\(port)", "control-socket": path(name + ".sock"), "state-directory": path("state-" + name),
                "directory": "\(path("carrier-\(name).lkd")) name=carrier block-response=608", "allow-from": "127.0.0.0/8",
                "http-listen": "127.0.0.1:\(freeLoopbackPort())", "http-allow-from": "127.0.0.0/8",
            ])
            // Answers are told apart by the block's label, as DaemonFixture's tests do:
            // rejections carry it only with label-to-caller = yes.
            nodes.append(try startFromConfig(name, write(name + ".conf", text + "\nlabel-to-caller = yes\n"), port: port))
        }
        let list = write("lookupd.list", ports.map { "1 sip:127.0.0.1:\($0)" }.joined(separator: "\n") + "\n")
        let control = "unix:" + path("kamctl")
        let port = freeLoopbackPort()
        try startKamailio("kamailio-dispatcher.cfg", port: port, defines: ["LISTEN=udp:127.0.0.1:\(port)", "DS_LIST=\"\(list)\"", "CTL_SOCKET=\"\(control)\""])
        XCTAssertTrue(eventually(timeout: 15) { ports.allSatisfy { dispatcherFlags(control, $0).hasPrefix("A") } }, "every node active")
        let peer = try UDPPeer()
        func throughDispatcher(_ caller: String, _ count: Int) -> [State] {
            (0..<count).map { _ in answer(port: port, caller, peer, timeout: 3) ?? State(status: "no answer", label: nil) }
        }
        func invites(_ node: LookupdDaemon) -> Int { (try? stats(node))?[#"lookupd_requests_total{method="INVITE",transport="udp"}"#] ?? 0 }

        let fraud = number(1, series: 0)
        XCTAssertEqual(Set(throughDispatcher(fraud, 9)), [.unlabelled], "not blocked yet")
        let added = try lookupd(["add", fraud, "--block", "--label", "Fraud desk 10:00", "--to", "carrier", "--config", nodes[0].configPath])
        let acked = monotonicSeconds()
        XCTAssertEqual(added.status, 0, added.summary)
        let blocked = State(status: "608 Rejected", label: Answer.quoted("Fraud desk 10:00"))
        for node in nodes.dropFirst() {
            let direct = try UDPPeer()
            XCTAssertTrue(eventually(timeout: max(0, acked + 1.0 - monotonicSeconds())) { answer(node, fraud, direct) == blocked },
                          "\(node.name) blocks the number within a second of lookupd add on node-a")
        }
        let before = nodes.map(invites)
        XCTAssertEqual(Set(throughDispatcher(fraud, 30)), [blocked], "every call through the dispatcher is blocked")
        for (node, count) in zip(nodes, before) { XCTAssertGreaterThan(invites(node), count, "\(node.name) took calls") }

        // Node B dies; a change is made meanwhile; B restarted on its port
        // catches up before it answers the dispatcher's probes.
        nodes[1].child.signal(SIGKILL)
        _ = nodes[1].child.wait(timeout: 5)
        XCTAssertTrue(eventually(timeout: 15) { dispatcherFlags(control, ports[1]).hasPrefix("I") }, "the dispatcher takes B out")
        let second = number(2, series: 0)
        XCTAssertEqual(try lookupd(["add", second, "--block", "--label", "While B was down", "--to", "carrier", "--config", nodes[2].configPath]).status, 0)
        nodes[1] = try startFromConfig("node-b-again", nodes[1].configPath, port: ports[1])
        XCTAssertEqual(answer(nodes[1], second, peer), State(status: "608 Rejected", label: Answer.quoted("While B was down")),
                       "B's first answer has the change it missed")
        XCTAssertTrue(eventually(timeout: 15) { dispatcherFlags(control, ports[1]).hasPrefix("A") }, "the dispatcher takes B back")
        let beforeB = invites(nodes[1])
        XCTAssertEqual(Set(throughDispatcher(second, 30)), [State(status: "608 Rejected", label: Answer.quoted("While B was down"))])
        XCTAssertGreaterThan(invites(nodes[1]), beforeB, "B answers calls again")
    }

    /// The example file with the values of `values` (by key) and
    /// replicate's URLs and node= replaced; every other line as it is.
    private func exampleConfig(_ example: String, name: String, cluster: EtcdCluster, values: [String: String]) throws -> String {
        var seen = Set<String>()
        let lines = example.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            guard !line.hasPrefix("#"), let eq = line.firstIndex(of: "=") else { return String(line) }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces)
            if key == "replicate" {
                seen.insert(key)
                var words = line[line.index(after: eq)...].split(separator: " ").map(String.init)
                words[1] = cluster.clientURLs.joined(separator: ",")
                words = words.map { $0.hasPrefix("node=") ? "node=\(name)" : $0 }
                return "replicate = " + words.joined(separator: " ")
            }
            guard let value = values[key] else { return String(line) }
            seen.insert(key)
            return "\(key) = \(value)"
        }
        XCTAssertEqual(seen, Set(values.keys).union(["replicate"]), "the example sets every key the test replaces")
        return lines.joined(separator: "\n")
    }

    /// `lookupd serve --config PATH`, ready once it answers OPTIONS on `port`.
    private func startFromConfig(_ name: String, _ configPath: String, port: UInt16) throws -> LookupdDaemon {
        let child = track(try ChildProcess(executable: LookupdBinary.path!, arguments: ["serve", "--config", configPath], folder: folder, name: name))
        let peer = try UDPPeer()
        guard eventually(timeout: 20, { !child.isRunning || peer.exchange(serverOptions(port: port), port: port, timeout: 0.2)?.statusCode == 200 }),
              child.isRunning else {
            throw HarnessError.failed("\(name) did not start: \(child.stderr)")
        }
        let socket = (try? ConfigParser.load(path: configPath).controlSocket) ?? ""
        return LookupdDaemon(name: name, configPath: configPath, controlSocket: socket, port: port, child: child)
    }

    /// Short enough for every pass (the watch thread hands layers to the
    /// reload thread: ThreadSanitizer must see that done right): a single
    /// etcd member, two nodes, changes in force on both within a second; a
    /// value this lookupd does not understand, an allow value, and a key
    /// deleted in etcd; the stats.
    func testShortConvergence() throws {
        let cluster = try startCluster(1)
        let httpPort = freeLoopbackPort()
        let nodes = [try startClusterNode("a", cluster, extra: ["http-listen = 127.0.0.1:\(httpPort)"]), try startClusterNode("b", cluster)]
        let peer = try UDPPeer()
        var model: [String: State] = [:]
        for (i, node) in nodes.enumerated() {
            let caller = number(i, series: 8)
            let r = try lookupd(["add", caller, "--block", "--label", "Short \(i)", "--config", node.configPath])
            XCTAssertEqual(r.status, 0, r.summary)
            XCTAssertTrue(r.stdout.contains("added \(caller) to main (block, label 'Short \(i)'): etcd revision "), r.stdout)
            model[caller] = .blocked("Short \(i)")
            XCTAssertEqual(converges(model, nodes, peer, timeout: 1.0), [])
        }
        let again = try lookupd(["add", number(0, series: 8), "--block", "--label", "Short 0", "--config", nodes[1].configPath])
        XCTAssertTrue(again.stdout.contains("is already in main"), again.summary)
        let removed = try lookupd(["remove", Caller.fraud, "--config", nodes[0].configPath])
        XCTAssertTrue(removed.stdout.contains("removed \(Caller.fraud) from main (was block, label 'Fraud Risk', directory file): etcd revision"), removed.summary)
        model[Caller.fraud] = .unlabelled
        let missing = try lookupd(["remove", Caller.unknown, "--config", nodes[0].configPath])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderr.contains("is not in main"), missing.stderr)
        XCTAssertEqual(converges(model, nodes, peer, timeout: 1.0), [])

        // A later lookupd's value (an action this one does not know): as if
        // etcd held nothing for the number here, logged and counted.
        let client = cluster.client()
        func put(_ number: String, _ value: String) throws -> Int {
            let answer = try client.call("/v3/kv/put", #"{"key":"\#(Data("/lookupd/main/\(number)".utf8).base64EncodedString())","value":"\#(Data(value.utf8).base64EncodedString())"}"#,
                                         deadline: monotonicSeconds() + 5)
            return Int(answer["header"]?["revision"]?.stringValue ?? "") ?? -1
        }
        _ = try put(Caller.unicom, #"{"v":1,"action":"quarantine","label":"Unicom"}"#)
        // An allow value (what lookupd add --allow writes): applied as an allow entry over
        // the file's block, with the allowing entry's label.
        let allowedRevision = try put(Caller.blockedUnlabelled, #"{"v":1,"action":"allow","label":"Allowed Live"}"#)
        // A key deleted in etcd: the file's word again.
        let deleted = try client.call("/v3/kv/deleterange", #"{"key":"\#(Data("/lookupd/main/\(Caller.fraud)".utf8).base64EncodedString())"}"#, deadline: monotonicSeconds() + 5)
        let deletedRevision = Int(deleted["header"]?["revision"]?.stringValue ?? "") ?? -1
        model[Caller.fraud] = .blocked("Fraud Risk")
        model[Caller.unicom] = .labelled("China Unicom Customer Service")
        model[Caller.blockedUnlabelled] = .labelled("Allowed Live")
        XCTAssertEqual(converges(model, nodes, peer, timeout: 1.0), [])
        XCTAssertTrue(eventually(timeout: 2) { nodes[1].stderr.contains("change of \(Caller.unicom) at revision") }, nodes[1].stderr)
        XCTAssertTrue(nodes[1].stderr.contains("action 'quarantine' is not known to this lookupd (it knows block, identify, remove, allow)"), nodes[1].stderr)
        XCTAssertFalse(nodes[1].stderr.contains("change of \(Caller.blockedUnlabelled) at revision"), nodes[1].stderr)
        let allowQuery = try lookupd(["query", "--config", nodes[1].configPath, Caller.blockedUnlabelled])
        XCTAssertTrue(allowQuery.stdout.contains("\tAllowed Live\tmain\texact, replicated revision \(allowedRevision), allow"), allowQuery.summary)

        let query = try lookupd(["query", "--config", nodes[1].configPath, number(1, series: 8)])
        XCTAssertTrue(query.stdout.contains("blocked\tShort 1\tmain\texact, replicated revision "), query.summary)
        // The probe (every second) sees the newest key, not the deletion after it.
        XCTAssertTrue(eventually(timeout: 5) {
            (try? self.stats(nodes[0]))?[#"lookupd_replication_latest_revision{directory="main"}"#] == allowedRevision
        })
        let stats = try stats(nodes[0])
        XCTAssertEqual(stats[#"lookupd_replication_lag_revisions{directory="main"}"#], 0, stats.text)
        XCTAssertEqual(stats[#"lookupd_replication_apply_errors_total{directory="main"}"#], 1, stats.text)
        XCTAssertEqual(stats[#"lookupd_replication_entries{directory="main"}"#], 4, stats.text)
        XCTAssertEqual(stats[#"lookupd_replication_applied_revision{directory="main"}"#], deletedRevision, stats.text)
        // Every change lookupd add made (two adds and a remove: a delete carries no time) was timed.
        XCTAssertGreaterThanOrEqual(stats["lookupd_replication_delay_seconds_count"], 3, stats.text)
        XCTAssertEqual(stats[#"lookupd_replication_delay_seconds_bucket{le="+Inf"}"#], stats["lookupd_replication_delay_seconds_count"], stats.text)
        XCTAssertGreaterThanOrEqual(stats["lookupd_replication_etcd_revision"], allowedRevision)
        let metrics = try scrape(httpPort)
        for series in [#"lookupd_replication_applied_revision{directory="main"}"#, #"lookupd_replication_lag_revisions{directory="main"}"#,
                       "lookupd_replication_watch_reconnects_total", #"lookupd_replication_apply_errors_total{directory="main"}"#] {
            XCTAssertEqual(metrics[series], stats[series], "/metrics and lookupd stats agree on \(series)")
        }

        // A reload that adds a directory restarts the thread for both; the
        // first directory's layer comes back from disk as it was.
        try compile("number,action,label\n+8613500000000,identify,Second List\n", to: "second.lkd")
        write("b.conf", readText(nodes[1].configPath) + "directory = second.lkd name=second\n")
        let reload = try lookupd(["reload", "--config", nodes[1].configPath])
        XCTAssertEqual(reload.status, 0, reload.summary)
        XCTAssertTrue(nodes[1].stderr.contains("replication: restarted for directories main, second"), nodes[1].stderr)
        let second = number(5, series: 8)
        XCTAssertEqual(try lookupd(["add", second, "--label", "Second Live", "--to", "second", "--config", nodes[1].configPath]).status, 0)
        model[second] = .labelled("Second Live")
        XCTAssertEqual(converges(model, [nodes[1]], peer, timeout: 1.0), [])
        let unchanged = try lookupd(["reload", "--config", nodes[1].configPath])
        XCTAssertEqual(unchanged.status, 0, unchanged.summary)
        XCTAssertEqual(nodes[1].stderr.components(separatedBy: "replication: restarted").count, 2, "a reload that changes nothing keeps the thread")
    }

    /// etcd down when a node starts (docs/CLUSTER.md, "Starting and
    /// restarting"; the unit does not depend on etcd): the node answers
    /// after start-wait from its local layer, with the changes it had, and
    /// catches up once etcd is back.
    func testNodeStartsWhileEtcdIsDown() throws {
        try skipUnderSanitizers()
        let cluster = try startCluster(1)
        var node = try startClusterNode("a", cluster, options: "start-wait=1")
        let peer = try UDPPeer()
        let before = number(1, series: 10), after = number(2, series: 10)
        XCTAssertEqual(try lookupd(["add", before, "--block", "--label", "Before Outage", "--config", node.configPath]).status, 0)
        XCTAssertEqual(converges([before: .blocked("Before Outage")], [node], peer, timeout: 1.0), [])
        XCTAssertTrue(terminate(node).normal)

        cluster.kill(0)
        let started = monotonicSeconds()
        node = try startClusterNode("a", cluster, options: "start-wait=1")
        XCTAssertEqual(answer(port: node.port, before, peer, timeout: 5), .blocked("Before Outage"), "the local layer answers while etcd is down")
        let answered = monotonicSeconds() - started
        XCTAssertLessThan(answered, 5.0, "first answer \(answered) s after start with etcd down")
        XCTAssertTrue(node.stderr.contains("not caught up with etcd after 1.0 s"), node.stderr)
        print(String(format: "ETCD DOWN AT START first answer after %.2f s (start-wait 1 s)", answered))

        try cluster.start(0)
        XCTAssertTrue(cluster.waitUntilWritable(timeout: 20))
        let back = monotonicSeconds()
        XCTAssertEqual(try lookupd(["add", after, "--label", "After Outage", "--config", node.configPath]).status, 0)
        // Its watch reconnects on its own retry schedule (at most 6 s apart): bounded, generous.
        XCTAssertEqual(converges([before: .blocked("Before Outage"), after: .labelled("After Outage")], [node], peer, timeout: 10), [])
        print(String(format: "ETCD BACK change in force %.2f s after etcd took writes again", monotonicSeconds() - back))
        XCTAssertTrue(eventually(timeout: 5) { ((try? self.stats(node))?[#"lookupd_replication_caught_up{directory="main"}"#] ?? 0) == 1 })
    }

    /// etcd with authentication: the token file's user and password open
    /// the door; a wrong password is a clear error that changes nothing.
    func testAuthenticatedCluster() throws {
        try skipUnderSanitizers()
        let cluster = try startCluster(1)
        let client = cluster.client()
        for (path, body) in [("/v3/auth/user/add", #"{"name":"root","password":"root-secret"}"#), ("/v3/auth/role/add", #"{"name":"root"}"#),
                             ("/v3/auth/user/grant", #"{"user":"root","role":"root"}"#), ("/v3/auth/enable", "{}")] {
            _ = try client.call(path, body, deadline: monotonicSeconds() + 5)
        }
        write("etcd.token", "root:root-secret\n")
        write("wrong.token", "root:guess\n")
        // Without the token file: the node cannot read etcd, says why, and
        // serves its local state after start-wait.
        let tokenless = try startClusterNode("a", cluster, options: "start-wait=1")
        XCTAssertTrue(eventually(timeout: 5) { tokenless.stderr.contains("refused to read the range: etcdserver: user name is empty") }, tokenless.stderr)
        XCTAssertTrue(tokenless.stderr.contains("not caught up with etcd after 1.0 s"), tokenless.stderr)
        XCTAssertTrue(terminate(tokenless).normal)
        let secured = try startClusterNode("a", cluster, options: "token-file=\(path("etcd.token"))")
        let peer = try UDPPeer()
        let caller = number(1, series: 9)
        let added = try lookupd(["add", caller, "--block", "--label", "Authenticated", "--config", secured.configPath])
        XCTAssertEqual(added.status, 0, added.summary)
        XCTAssertEqual(converges([caller: .blocked("Authenticated")], [secured], peer, timeout: 1.0), [])

        let wrongConfig = write("wrong.conf", "directory = main-a.lkd name=main\nreplicate = etcd \(cluster.clientURLs[0]) token-file=wrong.token\n")
        let refused = try lookupd(["add", number(2, series: 9), "--block", "--config", wrongConfig])
        XCTAssertEqual(refused.status, 1, refused.summary)
        XCTAssertTrue(refused.stderr.contains("authentication refused"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("nothing was changed anywhere"), refused.stderr)
    }
}

/// What the sustained test's writer threads collected.
private final class WriterResults: @unchecked Sendable {
    private let lock = NSLock()
    private var ackedStore: [Int: UInt64] = [:]
    private var failuresStore: [String] = []

    func ack(_ i: Int, _ revision: UInt64) { lock.lock(); ackedStore[i] = revision; lock.unlock() }
    func fail(_ why: String) { lock.lock(); failuresStore.append(why); lock.unlock() }
    var acked: [Int: UInt64] { lock.lock(); defer { lock.unlock() }; return ackedStore }
    var failures: [String] { lock.lock(); defer { lock.unlock() }; return failuresStore }
}

extension LiveUpdateTests.State: Hashable {
    func hash(into hasher: inout Hasher) {
        hasher.combine(status)
        hasher.combine(label)
    }
}

extension Answer {
    /// A label header value back to the label.
    static func unquoted(_ quoted: String) -> String {
        guard quoted.hasPrefix("\""), quoted.hasSuffix("\""), quoted.count >= 2 else { return quoted }
        return String(quoted.dropFirst().dropLast()).replacingOccurrences(of: "\\\"", with: "\"").replacingOccurrences(of: "\\\\", with: "\\")
    }
}
