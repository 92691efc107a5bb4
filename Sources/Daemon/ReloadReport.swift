import Answering
import Configuration
import Directory
import TextFormats

/// What one reload did, for `lookupd reload` (text and `--json`, lookupd(8) JSON OUTPUT) and
/// `lookupd update`: the keys whose change is in force now, those that wait for a restart,
/// the lines a list skipped, and the directories served after it. A reload that printed
/// "reloaded" while half the changes waited for a restart is what this exists to prevent.
public struct ReloadReport: Sendable, Equatable {
    public enum Outcome: String, Sendable {
        /// Everything the files say is in force.
        case applied
        /// Reloaded, but some changed keys take effect only when the daemon restarts.
        case restartNeeded = "restart_needed"
        /// Reloaded, but some lines of a list were skipped (each named in `skipped`).
        case skipped
        /// Refused: the old set is still served.
        case failed
    }

    public struct Served: Sendable, Equatable {
        public var name: String
        public var version: UInt64
        public var numbers: Int
        public var prefixRules: Int
        public var checksum: String
        /// New, or its file differs from the one served before.
        public var changed: Bool
    }

    public var outcome: Outcome
    public var trigger: String
    /// The generation served after the reload (the old one when it failed).
    public var generation: UInt64
    public var previousGeneration: UInt64
    public var milliseconds: Int
    /// Changed keys now in force.
    public var applied: [String] = []
    /// Changed keys that take effect on restart (the daemon keeps the old value until then).
    public var needsRestart: [String] = []
    public var skipped: [Diagnostic] = []
    /// What the daemon noted while loading that left nothing out (a torn journal record
    /// nobody was told was written, a directory compiled under another plan): shown, no
    /// effect on the exit status.
    public var notes: [Diagnostic] = []
    public var directories: [Served] = []
    public var error: String? = nil

    /// Keys the running daemon cannot take over (sockets, threads, files opened at start):
    /// each with how to tell whether the value in force would change.
    static let restartKeys: [(key: String, differs: @Sendable (LookupdConfig, LookupdConfig) -> Bool)] = [
        ("listen", { $0.listen != $1.listen }),
        ("workers", { $0.workers != $1.workers }),
        ("udp-steering", { $0.udpSteering != $1.udpSteering }),
        ("control-socket", { $0.controlSocket != $1.controlSocket }),
        ("state-directory", { $0.stateDirectory != $1.stateDirectory }),
        ("max-message-size", { $0.maxMessageSize != $1.maxMessageSize }),
        ("http-listen", { $0.operations.httpListen != $1.operations.httpListen }),
        ("log-file", { $0.operations.logFile != $1.operations.logFile }),
        ("log-file-max-size", { $0.operations.logFileMaxSize != $1.operations.logFileMaxSize }),
        ("log-file-keep", { $0.operations.logFileKeep != $1.operations.logFileKeep }),
        ("mode", { $0.mode != $1.mode }),
        ("upstream", { $0.proxy.upstream != $1.proxy.upstream }),
    ]

    /// The report of a reload that swapped `new` in for `old`; `started` is the configuration
    /// the daemon started with, which the restart keys keep until it restarts.
    init(trigger: String, started: LookupdConfig, old: ServingSet, new: ServingSet, warnings: [Diagnostic], skipped: [Diagnostic],
         milliseconds: Int) {
        self.trigger = trigger
        generation = new.generation
        previousGeneration = old.generation
        self.milliseconds = milliseconds
        // Waiting since any earlier reload too: the daemon still runs with the start's value.
        let restart = Set(Self.restartKeys.filter { $0.differs(started, new.config) }.map(\.key))
        let keys = Set(old.config.settings.keys).union(new.config.settings.keys).union(restart)
        for key in keys.sorted() where old.config.settings[key] != new.config.settings[key] || restart.contains(key) {
            if restart.contains(key) { needsRestart.append(key) } else { applied.append(key) }
        }
        self.skipped = skipped
        notes = warnings.filter { !skipped.contains($0) }
        var before: [String: UInt64] = [:]
        for d in old.screening.directories { before[d.name] = d.file.header.contentChecksum }
        directories = new.screening.directories.map { d in
            Served(name: d.name, version: d.file.header.directoryVersion, numbers: d.file.count, prefixRules: d.file.prefixRuleCount,
                   checksum: hex16(d.file.header.contentChecksum), changed: before[d.name] != d.file.header.contentChecksum)
        }
        outcome = !needsRestart.isEmpty ? .restartNeeded : !skipped.isEmpty ? .skipped : .applied
    }

    /// The report of a refused reload.
    init(trigger: String, failedWith error: String, serving generation: UInt64, milliseconds: Int) {
        outcome = .failed
        self.trigger = trigger
        self.generation = generation
        previousGeneration = generation
        self.milliseconds = milliseconds
        self.error = error
    }

    /// `lookupd reload`'s exit status (lookupd(8) EXIT STATUS): 0 everything in force,
    /// 1 refused, 3 a change waits for a restart, 4 lines were skipped (and nothing waits).
    public var exitStatus: Int32 {
        switch outcome {
        case .applied: return 0
        case .failed: return 1
        case .restartNeeded: return 3
        case .skipped: return 4
        }
    }

    /// The text `lookupd reload` prints and the daemon logs. The first line keeps the form
    /// it always had (`reloaded (...) generation N ...` or `error: reload (...) failed ...`).
    public var text: String {
        if outcome == .failed {
            return "error: reload (\(trigger)) failed, still serving generation \(generation): \(error ?? "")\n"
        }
        let served = directories.map { "\($0.name) (\($0.numbers) \($0.numbers == 1 ? "number" : "numbers"), \($0.prefixRules) \($0.prefixRules == 1 ? "prefix" : "prefixes"))\($0.changed ? " changed" : "")" }
        var out = "reloaded (\(trigger)) generation \(generation) in \(milliseconds) ms: directories [\(served.joined(separator: ", "))]\n"
        out += "applied: \(applied.isEmpty ? "no configuration key changed" : applied.joined(separator: ", "))\n"
        if !needsRestart.isEmpty {
            out += "needs restart: \(needsRestart.joined(separator: ", ")) (the old values stay in force until the daemon restarts)\n"
        }
        for line in skipped { out += "skipped: \(line)\n" }
        for line in notes { out += "note: \(line)\n" }
        return out
    }

    public func json() -> [UInt8] {
        var w = JSONWriter()
        write(to: &w)
        return w.bytes
    }

    /// As one JSON object; also a member of `lookupd update --json`.
    public func write(to w: inout JSONWriter) {
        w.beginObject()
        w.field("outcome", outcome.rawValue)
        w.field("trigger", trigger)
        w.field("generation", generation)
        w.field("previous_generation", previousGeneration)
        w.field("milliseconds", milliseconds)
        w.field("applied", strings: applied)
        w.field("needs_restart", strings: needsRestart)
        w.key("skipped")
        diagnosticsJSON(&w, skipped)
        w.key("notes")
        diagnosticsJSON(&w, notes)
        w.key("directories")
        w.beginArray()
        for d in directories {
            w.beginObject()
            w.field("name", d.name)
            w.field("version", d.version)
            w.field("numbers", d.numbers)
            w.field("prefix_rules", d.prefixRules)
            w.field("checksum", d.checksum)
            w.field("changed", d.changed)
            w.endObject()
        }
        w.endArray()
        w.field("error", error)
        w.endObject()
    }

    /// Reads the object `json()` wrote (the daemon's answer to `reload json`); nil when the
    /// answer is not one (a daemon of another version, a broken answer).
    public init?(json value: JSONValue) {
        guard let outcome = value["outcome"]?.stringValue.flatMap(Outcome.init(rawValue:)),
              let trigger = value["trigger"]?.stringValue,
              let generation = value["generation"]?.uint64, let previous = value["previous_generation"]?.uint64,
              let milliseconds = value["milliseconds"]?.uint64 else { return nil }
        self.outcome = outcome
        self.trigger = trigger
        self.generation = generation
        previousGeneration = previous
        self.milliseconds = Int(milliseconds)
        applied = value["applied"]?.strings ?? []
        needsRestart = value["needs_restart"]?.strings ?? []
        func diagnostics(_ key: String) -> [Diagnostic] {
            value[key]?.arrayValue?.compactMap { d in
                guard let file = d["file"]?.stringValue, let line = d["line"]?.uint64, let message = d["message"]?.stringValue else { return nil }
                return Diagnostic(file: file, line: Int(line), message: message)
            } ?? []
        }
        skipped = diagnostics("skipped")
        notes = diagnostics("notes")
        directories = value["directories"]?.arrayValue?.compactMap { d in
            guard let name = d["name"]?.stringValue, let version = d["version"]?.uint64, let numbers = d["numbers"]?.uint64,
                  let rules = d["prefix_rules"]?.uint64, let checksum = d["checksum"]?.stringValue,
                  let changed = d["changed"]?.boolValue else { return nil }
            return Served(name: name, version: version, numbers: Int(numbers), prefixRules: Int(rules), checksum: checksum, changed: changed)
        } ?? []
        error = value["error"]?.stringValue
    }
}

extension JSONValue {
    var uint64: UInt64? { numberLexeme.flatMap { UInt64($0) } }
    var strings: [String]? { arrayValue?.compactMap(\.stringValue) }
}
