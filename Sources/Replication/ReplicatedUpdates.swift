import Configuration
import Directory
import TextFormats

/// `lookupd add` / `remove` with `replicate` set: the change is committed
/// to etcd, and every node (this one included) applies it from its watch.
///
/// A change is one transaction that puts the new value only if the key
/// still has the revision just read, so what the command reports as the
/// previous state is exact and two nodes changing the same number at once
/// both succeed, one after the other, in etcd's revision order. The read
/// is linearizable: without a quorum it fails, before anything is proposed,
/// and the command changes nothing anywhere.
public enum ReplicatedUpdates {
    /// The most a command waits for etcd, well inside the five seconds an
    /// operator (or a script) may wait for a clear answer.
    public static let timeout = 4.0

    public struct Outcome: Sendable {
        /// etcd's revision of the change; nil when nothing was written.
        public var revision: UInt64?
        /// What etcd held for the key before, and at which revision.
        public var previous: ReplicatedValue?
        public var previousRevision: UInt64?
        /// A previous value this lookupd cannot read.
        public var previousRefused: String?
    }

    public enum Failure: Error, Sendable, CustomStringConvertible {
        /// Nothing was written: etcd unreachable, no quorum, refused.
        case notChanged(EtcdFailure)
        /// The write was sent but not acknowledged in time: etcd may still commit it.
        case unknown(EtcdFailure)
        /// `remove` of what neither etcd nor this node's directory holds.
        case notPresent
        case conflict

        public var description: String {
            switch self {
            case .notChanged(let f):
                switch f.kind {
                case .unavailable:
                    return "etcd has no quorum or cannot be reached (\(f)); nothing was changed anywhere (a change needs a majority of the etcd members)"
                case .refused, .credentials:
                    return "etcd refused the change (\(f)); nothing was changed anywhere"
                }
            case .unknown(let f):
                return "etcd did not acknowledge the change within \(ReplicatedUpdates.timeout) s (\(f)); it was not confirmed, and takes effect on every node only if etcd committed it: lookupd query shows whether it did"
            case .notPresent:
                return "not present"
            case .conflict:
                return "the number kept changing in etcd while this command tried to change it; try again"
            }
        }
    }

    /// Blocks or labels `pattern` in the directory named `directory`.
    public static func add(_ pattern: NumberPattern, blocked: Bool, label: [UInt8]?, allowed: Bool = false, directory: String,
                           config: ReplicationConfig) throws(Failure) -> Outcome {
        let value = ReplicatedValue(blocked: blocked, label: label, origin: config.node, time: ReplicatedValue.now(), allowed: allowed)
        return try change(pattern, directory: directory, config: config) { current, _ in
            if let current, current.action == value.action, current.label == value.label { return nil }
            return value
        }
    }

    /// Removes `pattern` from the directory named `directory` on every node.
    /// `heldLocally`: whether this node's file and journal hold it (they
    /// decide when etcd has no key for it).
    public static func remove(_ pattern: NumberPattern, directory: String, heldLocally: Bool,
                              config: ReplicationConfig) throws(Failure) -> Outcome {
        let value = ReplicatedValue(action: .remove, label: nil, origin: config.node, time: ReplicatedValue.now())
        var absent = false
        let outcome = try change(pattern, directory: directory, config: config) { current, exists in
            // A value this lookupd cannot read counts as present: removing is safe.
            let present = exists ? current?.action != .remove : heldLocally
            absent = !present
            return present ? value : nil
        }
        if absent { throw .notPresent }
        return outcome
    }

    /// Reads the key, asks `decide` for the new value (nil: write nothing;
    /// it gets the value held, if readable, and whether the key exists),
    /// and puts it if the key is unchanged since; reads again if it changed.
    private static func change(_ pattern: NumberPattern, directory: String, config: ReplicationConfig,
                               decide: (ReplicatedValue?, Bool) -> ReplicatedValue?) throws(Failure) -> Outcome {
        let deadline = monotonicSeconds() + timeout
        let client: EtcdClient
        do { client = try EtcdClient(config) } catch { throw .notChanged(error) }
        let key = Base64.encode(ReplicatedKeys.key(config.keyPrefix(directory: directory), pattern))
        var outcome: Outcome? = nil
        var sent: ReplicatedValue? = nil
        for _ in 0..<5 {
            let read: JSONValue
            do {
                read = try client.call("/v3/kv/range", JSONValue.object([("key", .string(key))]).description, deadline: deadline)
            } catch {
                throw sent == nil ? .notChanged(error) : .unknown(error)
            }
            var found = Outcome()
            var modRevision: UInt64 = 0
            var current: ReplicatedValue? = nil
            let kv = read["kvs"]?[0]
            if let kv {
                modRevision = kv["mod_revision"]?.etcdInt ?? 0
                found.previousRevision = modRevision
                switch ReplicatedValue.parse(kv["value"]?.etcdBytes ?? []) {
                case .success(let value):
                    current = value
                    found.previous = value
                case .failure(let problem):
                    found.previousRefused = problem.description
                }
            }
            if var done = outcome, let sent, current == sent {
                // An earlier attempt was committed after all.
                done.revision = modRevision
                return done
            }
            if outcome == nil { outcome = found }
            guard let value = decide(current, kv != nil) else { return found }
            let put = JSONValue.object([("request_put", .object([("key", .string(key)), ("value", .string(Base64.encode(value.json)))]))])
            let compare = JSONValue.object([("key", .string(key)), ("target", .string("MOD")), ("result", .string("EQUAL")),
                                            ("mod_revision", .string(String(modRevision)))])
            let txn = JSONValue.object([("compare", .array([compare])), ("success", .array([put])), ("failure", .array([]))])
            sent = value
            let answer: JSONValue
            do {
                answer = try client.call("/v3/kv/txn", txn.description, deadline: deadline)
            } catch {
                throw error.mayHaveApplied ? .unknown(error) : .notChanged(error)
            }
            if answer["succeeded"]?.boolValue == true {
                var done = found
                done.revision = answer["header"]?["revision"]?.etcdInt
                return done
            }
            // Changed since the read (another node, or an earlier attempt
            // of this one that was committed after all): read again.
            outcome = found
        }
        throw .conflict
    }
}
