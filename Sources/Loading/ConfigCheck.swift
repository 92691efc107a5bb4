import Configuration
import Directory
import Glibc
import TextFormats

/// `lookupd check-config`: a configuration read as `lookupd serve` reads it, every error of
/// the file at once, then every file it names opened and verified as the daemon would
/// (directories completely, with their journals; contacts and contacts-dir; the folders
/// feeds install into). Text and `--json` are two renderings of this one result.
public struct ConfigCheck {
    public struct DirectoryLine {
        public var name: String
        public var path: String
        public var numbers: Int
        public var prefixRules: Int
        /// nil: no journal.
        public var journalChanges: Int?
    }

    public let path: String
    /// The file's own errors (FILE:LINE each); when there are any, nothing else was checked.
    public private(set) var errors: [Diagnostic] = []
    /// What is wrong with the files it names.
    public private(set) var problems: [String] = []
    /// What the daemon would warn about while loading.
    public private(set) var warnings: [Diagnostic] = []
    public private(set) var config: LookupdConfig?
    public private(set) var directories: [DirectoryLine] = []
    /// How many callees' block lists of `blocks-dir` loaded (nil: no blocks-dir, or it could
    /// not be read).
    public private(set) var calleeBlockLists: Int?

    public var sound: Bool { errors.isEmpty && problems.isEmpty }

    public init(path: String) {
        self.path = path
        let checked = ConfigParser.check(path: path)
        guard let config = checked.config else {
            errors = checked.errors
            return
        }
        self.config = config
        for directory in config.directories {
            do {
                let file = try DirectoryFile(path: directory.path)
                try file.verify()
                var line = DirectoryLine(name: directory.name, path: directory.path, numbers: file.count, prefixRules: file.prefixRuleCount)
                let journalPath = JournalFormat.path(forDirectory: directory.path)
                do {
                    if let journal = try JournalFollower.read(path: journalPath) {
                        line.journalChanges = journal.state.changeCount
                        if let tail = journal.tail { problems.append("\(journalPath): torn last record (the next change cuts it off): \(tail)") }
                    }
                } catch {
                    problems.append("\(error)")
                }
                directories.append(line)
            } catch {
                problems.append("directory \(directory.name): \(error)")
            }
        }
        // Contacts, contacts-dir and the rest of what serving loads, read as the daemon reads them.
        do {
            let loaded = try ScreeningLoader.load(config, verify: false)
            warnings = loaded.warnings
            if config.blocksDirectory != nil { calleeBlockLists = loaded.set.calleeBlocks.lists.count }
        } catch {
            let text = "\(error)"
            if !problems.contains(where: { text.contains($0) || $0.contains(text) }) { problems.append(text) }
        }
        for feed in config.feeds {
            let target = feed.into ?? config.directories.first?.path ?? ""
            let folder = target.contains("/") ? String(target[..<target.lastIndex(of: "/")!]) : "."
            if access(folder.isEmpty ? "/" : folder, W_OK) != 0 {
                problems.append("feed \(feed.name): cannot write into \(folder) (where it installs \(target)): \(String(cString: strerror(errno)))")
            }
        }
    }

    private static func plural(_ n: Int, _ one: String) -> String { "\(n) \(n == 1 ? one : one + "s")" }

    /// Standard error's lines: the errors, or the problems, each with a closing count.
    public var errorText: String {
        var out = ""
        if !errors.isEmpty {
            for diagnostic in errors { out += diagnostic.description + "\n" }
            out += "lookupd: error: \(Self.plural(errors.count, "error")) in \(path)\n"
        } else if !problems.isEmpty {
            for problem in problems { out += "lookupd: error: \(problem)\n" }
            out += "lookupd: error: \(Self.plural(problems.count, "problem")) with the files \(path) names\n"
        }
        return out
    }

    /// Standard output's lines for a sound configuration: what is in force.
    public var summaryText: String {
        guard let config, sound else { return "" }
        var out = "\(path): ok\n"
        out += "numbering plan: \(config.plan)\n"
        for address in config.listen { out += "listen: \(address)\n" }
        if config.listen.isEmpty { out += "listen: none (lookupd serve needs a listen line)\n" }
        out += "mode: \(config.mode.rawValue)\n"
        out += "udp-steering: \(config.udpSteering.rawValue)\n"
        if let http = config.operations.httpListen {
            out += "http-listen: \(String(http.description.dropFirst("tcp:".count)))\(config.operations.httpWriteTokenFile == nil ? "" : " (with the write API)")\n"
        }
        for d in directories {
            out += "directory \(d.name): \(d.path): \(Self.plural(d.numbers, "number")), \(Self.plural(d.prefixRules, "prefix rule"))"
            out += d.journalChanges.map { "; journal: \(Self.plural($0, "change"))" } ?? ""
            out += "\n"
        }
        if !config.contacts.isEmpty || config.contactsDirectory != nil {
            out += "contacts: \(config.contacts.joined(separator: ", "))\(config.contactsDirectory.map { " and \($0)/" } ?? "")\n"
        }
        if let folder = config.blocksDirectory {
            out += "blocks-dir: \(folder)/: \(Self.plural(calleeBlockLists ?? 0, "callee list")) loaded\n"
        }
        return out
    }

    /// `lookupd check-config --json` (lookupd(8) JSON OUTPUT): one object, sound or not.
    public func json() -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.field("config", path)
        w.field("ok", sound)
        w.key("errors")
        diagnosticsJSON(&w, errors)
        w.field("problems", strings: problems)
        w.key("warnings")
        diagnosticsJSON(&w, warnings)
        w.field("numbering_plan", config.map { "\($0.plan)" })
        w.field("mode", config?.mode.rawValue)
        w.field("udp_steering", config?.udpSteering.rawValue)
        w.field("listen", strings: config?.listen.map { "\($0)" } ?? [])
        w.field("http_listen", config?.operations.httpListen.map { String($0.description.dropFirst("tcp:".count)) })
        w.key("directories")
        w.beginArray()
        for d in directories {
            w.beginObject()
            w.field("name", d.name)
            w.field("path", d.path)
            w.field("numbers", d.numbers)
            w.field("prefix_rules", d.prefixRules)
            w.field("journal_changes", d.journalChanges)
            w.endObject()
        }
        w.endArray()
        w.field("contacts", strings: config?.contacts ?? [])
        w.field("contacts_dir", config?.contactsDirectory)
        w.field("blocks_dir", config?.blocksDirectory)
        w.field("callee_block_lists", calleeBlockLists)
        w.endObject()
        return w.bytes
    }
}
