import Glibc
import Directory

/// `replicate = etcd URL[,URL...] ...`: live changes through etcd
/// (docs/CLUSTER.md).
public struct ReplicationConfig: Sendable, Equatable {
    /// The etcd members' client URLs (`http://10.0.0.1:2379`), in the order tried.
    public var endpoints: [String]
    /// Key prefix; a directory's changes live under PREFIX + NAME + "/".
    public var prefix: String = "/lookupd/"
    /// `USER:PASSWORD` for etcd's authentication, read when connecting.
    public var tokenFile: String? = nil
    /// This node's name in the changes it writes (default: the host name).
    public var node: String
    /// How long `lookupd serve` waits at start to catch up with etcd before
    /// it answers calls (it then serves its local state and keeps trying).
    public var startWait: Double = 5

    public init(endpoints: [String], node: String) {
        self.endpoints = endpoints
        self.node = node
    }

    /// The key range of the directory named `name`: every key starting with it.
    public func keyPrefix(directory name: String) -> String { prefix + name + "/" }

    /// The host name, for `node=`'s default.
    public static func hostName() -> String {
        var buffer = [UInt8](repeating: 0, count: 256)
        guard buffer.withUnsafeMutableBufferPointer({ gethostname(UnsafeMutableRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), 255) }) == 0 else {
            return "lookupd"
        }
        let name = String(decoding: buffer.prefix { $0 != 0 }, as: UTF8.self)
        return isNodeName(name) ? name : "lookupd"
    }

    /// Letters, digits, `.`, `_` and `-`: safe in a key, a log line and a label value.
    static func isKeyWord(_ text: String, max: Int) -> Bool {
        !text.isEmpty && text.utf8.count <= max && !text.hasPrefix(".") && text.utf8.allSatisfy {
            ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D
        }
    }

    static func isNodeName(_ text: String) -> Bool { isKeyWord(text, max: 64) }

    /// Whether a directory name can be part of an etcd key and a file name.
    public static func isDirectoryName(_ text: String) -> Bool { isKeyWord(text, max: 64) }
}

extension ConfigParser {
    static let replicationKeys: [ConfigKey] = [
        ConfigKey(name: "replicate", syntax: "etcd URL[,URL...] [prefix=PREFIX] [token-file=PATH] [node=NAME] [start-wait=SECONDS]", repeatable: false,
                  summary: "Replicate lookupd add and remove to every node through etcd (docs/CLUSTER.md): they commit to the etcd cluster at these client URLs under PREFIX/DIRECTORY/NUMBER (default prefix /lookupd/), and every daemon applies the changes of its directories within a second. token-file holds USER:PASSWORD for etcd authentication; node names this node in the changes it writes (default: the host name); start-wait is how long lookupd serve waits at start to catch up before answering (default 5).") { s, v throws(ValueError) in
            var words = try splitWords(v)
            guard words.count >= 2, words.removeFirst() == "etcd" else {
                throw ValueError("expected 'etcd URL[,URL...]' (etcd is the only replication backend)")
            }
            var endpoints: [String] = []
            for raw in words.removeFirst().split(separator: ",", omittingEmptySubsequences: false) {
                var url = String(raw).trimmed
                while url.hasSuffix("/") { url.removeLast() }
                let lower = url.lowercased()
                let rest = lower.hasPrefix("http://") ? lower.dropFirst(7) : lower.hasPrefix("https://") ? lower.dropFirst(8) : nil
                guard let rest, !rest.isEmpty, !rest.contains("/"), !rest.contains("?"), !rest.contains("@"),
                      url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                    throw ValueError("'\(raw)' is not an etcd client URL (http://HOST:PORT or https://HOST:PORT, without a path)")
                }
                guard !endpoints.contains(url) else { throw ValueError("\(url) is listed twice") }
                endpoints.append(url)
            }
            var config = ReplicationConfig(endpoints: endpoints, node: ReplicationConfig.hostName())
            for word in words {
                guard let eq = word.firstIndex(of: "=") else { throw ValueError("expected key=value after the URLs, got '\(word)'") }
                let key = String(word[..<eq]), value = String(word[word.index(after: eq)...])
                switch key {
                case "prefix":
                    var prefix = value
                    if !prefix.hasSuffix("/") { prefix += "/" }
                    guard prefix.hasPrefix("/"), prefix.utf8.count <= 128, prefix.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                        throw ValueError("prefix= must start with '/' and hold printable ASCII without spaces (e.g. /lookupd/)")
                    }
                    config.prefix = prefix
                case "token-file":
                    guard !value.isEmpty else { throw ValueError("token-file= needs a path") }
                    config.tokenFile = s.resolve(value)
                case "node":
                    guard ReplicationConfig.isNodeName(value) else {
                        throw ValueError("node= must be 1 to 64 letters, digits, '.', '_' or '-'")
                    }
                    config.node = value
                case "start-wait":
                    guard let seconds = Double(value), seconds >= 0, seconds <= 600 else { throw ValueError("start-wait= must be 0 to 600 seconds") }
                    config.startWait = seconds
                default:
                    throw ValueError("unknown replicate option '\(key)' (expected prefix=, token-file=, node= or start-wait=)")
                }
            }
            s.config.replication = config
        },
    ]

    /// With replication, a directory's name is part of its etcd keys and of
    /// its layer's file name: it must be safe for both, and unique.
    static func finishReplication(_ state: inout State, seen: [String: Int], path: String) throws(Diagnostic) {
        guard state.config.replication != nil else { return }
        var names = Set<String>()
        for directory in state.config.directories {
            guard ReplicationConfig.isDirectoryName(directory.name) else {
                throw Diagnostic(file: path, line: seen["replicate"] ?? 0,
                                 message: "replicate: directory name '\(directory.name)' cannot be part of an etcd key; give it name= with 1 to 64 letters, digits, '.', '_' or '-'")
            }
            guard names.insert(directory.name).inserted else {
                throw Diagnostic(file: path, line: seen["replicate"] ?? 0,
                                 message: "replicate: two directories are named '\(directory.name)'; replicated directories need unique names (name=)")
            }
        }
    }
}
