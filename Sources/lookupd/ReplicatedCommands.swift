import Configuration
import Directory
import Replication
import Screening

/// `lookupd add` / `remove` when `replicate` is set (docs/CLUSTER.md): the
/// change goes to etcd, not to this node's journal; every node's daemon,
/// this one's included, applies it from its watch.
enum ReplicatedCommands {
    static func add(_ pattern: NumberPattern, blocked: Bool, label: [UInt8]?, allowed: Bool = false, directory: DirectoryConfig,
                    config: LookupdConfig, replication: ReplicationConfig) throws -> Int32 {
        try requireConfigured(directory, config)
        let outcome: ReplicatedUpdates.Outcome
        do {
            outcome = try ReplicatedUpdates.add(pattern, blocked: blocked, label: label, allowed: allowed, directory: directory.name, config: replication)
        } catch {
            throw CommandFailure("\(pattern) not added to \(directory.name): \(error)")
        }
        let what = JournalTarget.describe(blocked: blocked, label: label, allowed: allowed)
        var out = OutputBuffer(fd: 1)
        if let revision = outcome.revision {
            if let previous = outcome.previous {
                out.append("changed \(pattern) in \(directory.name) from \(describe(previous)) to \(what): etcd revision \(revision), on every node within a second\n")
            } else {
                out.append("added \(pattern) to \(directory.name) (\(what)): etcd revision \(revision), on every node within a second\n")
            }
        } else {
            out.append("\(pattern) is already in \(directory.name) (\(what), etcd revision \(outcome.previousRevision ?? 0)); nothing written\n")
        }
        out.flush()
        return 0
    }

    static func remove(_ pattern: NumberPattern, directory: DirectoryConfig, config: LookupdConfig,
                       replication: ReplicationConfig) throws -> Int32 {
        try requireConfigured(directory, config)
        // Whether this node's file and journal hold it: what decides when etcd has no key for it.
        let held: DirectoryUpdates.StoredEntry?
        do {
            let file = try DirectoryFile(path: directory.path)
            let journal = try JournalFollower.read(path: JournalFormat.path(forDirectory: directory.path))
            held = try DirectoryUpdates.stored(pattern, base: file, state: journal?.state ?? JournalState())
        } catch {
            throw CommandFailure("\(error)")
        }
        let outcome: ReplicatedUpdates.Outcome
        do {
            outcome = try ReplicatedUpdates.remove(pattern, directory: directory.name, heldLocally: held != nil, config: replication)
        } catch .notPresent {
            throw CommandFailure(JournalTarget.notPresent(pattern, directory: directory, config: config, where: "(nor in etcd)"))
        } catch {
            throw CommandFailure("\(pattern) not removed from \(directory.name): \(error)")
        }
        let was: String
        if let previous = outcome.previous, let revision = outcome.previousRevision {
            was = " (was \(describe(previous)), etcd revision \(revision))"
        } else if let held {
            was = " (was \(JournalTarget.describe(held)), \(JournalTarget.origin(held)))"
        } else {
            was = ""
        }
        var out = OutputBuffer(fd: 1)
        out.append("removed \(pattern) from \(directory.name)\(was): etcd revision \(outcome.revision ?? 0), on every node within a second\n")
        out.flush()
        return 0
    }

    /// Changes travel under the directory's configured name: a file given
    /// by a path of its own has none other nodes would know.
    private static func requireConfigured(_ directory: DirectoryConfig, _ config: LookupdConfig) throws {
        guard config.directories.contains(where: { $0.name == directory.name && $0.path == directory.path }) else {
            throw CommandFailure("\(directory.path) is not a configured directory; with replicate set, changes go to etcd under a configured directory's name (configured: \(config.directories.map(\.name).joined(separator: ", ")))")
        }
    }

    private static func describe(_ value: ReplicatedValue) -> String {
        switch value.action {
        case .remove: return "removed"
        case .block, .identify, .allow:
            return JournalTarget.describe(blocked: value.action == .block, label: value.label, allowed: value.action == .allow)
        }
    }
}
