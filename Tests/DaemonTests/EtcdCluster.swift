import Configuration
import Foundation
import Glibc
import Replication
import TextFormats
import XCTest

/// etcd (Debian etcd-server; CI installs it with scripts/install-deps).
enum EtcdBinary {
    static let path: String? = {
        if let explicit = ProcessInfo.processInfo.environment["ETCD_BINARY"], !explicit.isEmpty {
            return FileManager.default.isExecutableFile(atPath: explicit) ? explicit : nil
        }
        for folder in ["/usr/bin", "/usr/local/bin", "/usr/sbin"] {
            if FileManager.default.isExecutableFile(atPath: folder + "/etcd") { return folder + "/etcd" }
        }
        return nil
    }()
}

/// A real etcd cluster on loopback for the replication tests: members on
/// free ports, data in the test's folder, every process stopped by `stop`
/// (and by the test case's tearDown).
final class EtcdCluster {
    struct Member {
        var name: String
        var clientPort: UInt16
        var peerPort: UInt16
        var dataDir: String
        var child: ChildProcess?
        var clientURL: String { "http://127.0.0.1:\(clientPort)" }
    }

    let folder: String
    private(set) var members: [Member] = []
    private let token = "lookupd-test-\(UUID().uuidString.prefix(8))"

    var clientURLs: [String] { members.map(\.clientURL) }

    /// Starts `size` members and waits until the cluster commits a write.
    init(folder: String, size: Int) throws {
        guard EtcdBinary.path != nil else { throw HarnessError.missing("etcd (apt install etcd-server)") }
        self.folder = folder
        var used = Set<UInt16>()
        func port() -> UInt16 {
            while true {
                let p = freeLoopbackPort()
                if used.insert(p).inserted { return p }
            }
        }
        for i in 0..<size {
            members.append(Member(name: "m\(i)", clientPort: port(), peerPort: port(), dataDir: "\(folder)/etcd-m\(i)", child: nil))
        }
        for i in members.indices { try start(i) }
        guard waitUntilWritable(timeout: 30) else {
            let logs = members.map { "\($0.name): \($0.child?.stderr.suffix(1500) ?? "")" }.joined(separator: "\n")
            stop()
            throw HarnessError.failed("etcd cluster did not become writable:\n\(logs)")
        }
    }

    deinit { stop() }

    /// Starts member `i` (again, after a stop: it rejoins with its data).
    func start(_ i: Int) throws {
        let initial = members.map { "\($0.name)=http://127.0.0.1:\($0.peerPort)" }.joined(separator: ",")
        let m = members[i]
        members[i].child = try ChildProcess(executable: EtcdBinary.path!, arguments: [
            "--name", m.name, "--data-dir", m.dataDir,
            "--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
            "--listen-peer-urls", "http://127.0.0.1:\(m.peerPort)", "--initial-advertise-peer-urls", "http://127.0.0.1:\(m.peerPort)",
            "--initial-cluster", initial, "--initial-cluster-state", "new", "--initial-cluster-token", token,
            "--logger", "zap", "--log-level", "warn",
        ], folder: folder, name: "etcd-\(m.name)")
    }

    /// Kills member `i` at once (SIGKILL: a crash, not a graceful leave).
    func kill(_ i: Int) {
        guard let child = members[i].child else { return }
        child.signal(SIGKILL)
        _ = child.wait(timeout: 10)
        members[i].child = nil
    }

    /// Stops every member still running.
    func stop() {
        for i in members.indices {
            members[i].child?.stop(grace: 5)
            members[i].child = nil
        }
    }

    var running: [Int] { members.indices.filter { members[$0].child?.isRunning ?? false } }

    /// A client on the members (the product's, as lookupd add uses it).
    func client(_ only: [Int]? = nil) -> EtcdClient {
        let urls = (only ?? Array(members.indices)).map { members[$0].clientURL }
        return try! EtcdClient(ReplicationConfig(endpoints: urls, node: "test"))
    }

    func call(_ path: String, _ body: String, timeout: Double = 5) throws -> JSONValue {
        try client().call(path, body, deadline: monotonicSeconds() + timeout)
    }

    /// Whether a quorum answers a linearizable read and commits a write.
    func waitUntilWritable(timeout: Double) -> Bool {
        eventually(timeout: timeout) {
            (try? call("/v3/kv/put", #"{"key":"X19oZWFsdGhfXw==","value":"b2s="}"#, timeout: 2)) != nil
        }
    }

    /// The member that leads now, by index.
    func leader() -> Int? {
        for i in running {
            guard let status = try? client([i]).call("/v3/maintenance/status", "{}", deadline: monotonicSeconds() + 2),
                  let leader = status["leader"]?.stringValue, let me = status["header"]?["member_id"]?.stringValue else { continue }
            if leader == me { return i }
        }
        return nil
    }

    /// Makes member `i` the leader (etcd's leadership transfer), and waits for it.
    func makeLeader(_ i: Int) throws {
        guard let current = leader() else { throw HarnessError.failed("no etcd leader") }
        if current == i { return }
        let target = try client([i]).call("/v3/maintenance/status", "{}", deadline: monotonicSeconds() + 5)["header"]?["member_id"]?.stringValue ?? ""
        _ = try client([current]).call("/v3/maintenance/transfer-leadership", #"{"targetID":"\#(target)"}"#, deadline: monotonicSeconds() + 10)
        guard eventually(timeout: 10, { leader() == i }) else { throw HarnessError.failed("member \(i) did not become the leader") }
    }

    /// etcd's revision now.
    func revision() throws -> UInt64 {
        UInt64(try call("/v3/kv/range", #"{"key":"X19oZWFsdGhfXw=="}"#)["header"]?["revision"]?.stringValue ?? "0") ?? 0
    }

    /// Compacts the history through `revision` (physically: gone from disk too).
    func compact(_ revision: UInt64) throws {
        _ = try call("/v3/kv/compaction", #"{"revision":"\#(revision)","physical":true}"#, timeout: 10)
    }

    /// The value etcd holds for `key` (text), or nil.
    func value(_ key: String) throws -> String? {
        let answer = try call("/v3/kv/range", #"{"key":"\#(Data(key.utf8).base64EncodedString())"}"#)
        guard let b64 = answer["kvs"]?[0]?["value"]?.stringValue, let data = Data(base64Encoded: b64) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// Puts lookupd values at keys in one transaction (one revision); etcd's revision of it.
    static func put(_ client: EtcdClient, _ puts: [(key: String, value: ReplicatedValue)], timeout: Double = 5) throws -> UInt64 {
        let ops = puts.map { #"{"request_put":{"key":"\#(Data($0.key.utf8).base64EncodedString())","value":"\#(Data($0.value.json.utf8).base64EncodedString())"}}"# }
        let answer = try client.call("/v3/kv/txn", #"{"success":[\#(ops.joined(separator: ","))]}"#, deadline: monotonicSeconds() + timeout)
        return UInt64(answer["header"]?["revision"]?.stringValue ?? "0") ?? 0
    }
}
