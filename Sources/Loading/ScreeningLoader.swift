import Configuration
import Directory
import Glibc
import Screening
import SystemCalls
import TextFormats

/// Builds a `ScreeningSet` from a configuration: reads the contacts lists
/// (global and per callee), opens the directories in priority order with
/// their journals on top, and takes the caller policies.
public enum ScreeningLoader {
    public struct Loaded: Sendable {
        public var set: ScreeningSet
        /// The configured `time-zone`, for `active=` windows.
        public var zone: ZoneRules
        /// Skipped contacts, torn journal records and the like: worth
        /// logging, not fatal.
        public var warnings: [Diagnostic]
        /// The part of `warnings` that left something out of the set: lines of a contacts
        /// list, a contacts-dir file (the rest are notes: a torn record no one was told
        /// was written, a plan mismatch, ...).
        public var skipped: [Diagnostic] = []
    }

    /// How a directory file becomes a `DirectoryFile`. The CLI opens the
    /// configured file in place; the daemon serves from a private copy.
    public typealias DirectoryOpener = (DirectoryConfig) throws(DirectoryError) -> DirectoryFile

    /// - Parameters:
    ///   - verify: check every directory's content checksum and structure
    ///     before accepting it (what serving requires).
    ///   - journals: read each directory's journal and lay it over the
    ///     file, and with `replicate` its replicated layer over both. The
    ///     daemon passes false and follows the journals and etcd itself.
    ///   - now: the moment expiring journal records are judged at (seconds
    ///     since 1970, UTC).
    public static func load(_ config: LookupdConfig, verify: Bool, journals: Bool = true, now: Int64 = wallClockSeconds(),
                            open: DirectoryOpener = { c throws(DirectoryError) in try DirectoryFile(path: c.path) }) throws(LoadError) -> Loaded {
        let normalizer = NumberNormalizer(plan: config.plan)
        var warnings: [Diagnostic] = []
        var lists: [ContactList] = []
        for path in config.contacts {
            lists.append(try loadContacts(path, normalizer: normalizer, columns: config.contactColumns[path] ?? CSVColumnMapping(),
                                          warnings: &warnings))
        }
        var callee = CalleeContacts.none
        if let folder = config.contactsDirectory {
            var perCallee: [(stem: String, list: ContactList)] = []
            for (stem, path) in try contactFiles(in: folder, warnings: &warnings) {
                perCallee.append((stem, try loadContacts(path, normalizer: normalizer, warnings: &warnings)))
            }
            callee = CalleeContacts(folder: folder, lists: perCallee, normalizer: normalizer)
        }
        var blocks = CalleeBlocks.none
        if let folder = config.blocksDirectory {
            blocks = try loadCalleeBlocks(folder, plan: config.plan, normalizer: normalizer, warnings: &warnings)
        }
        // Everything the contacts and the callees' block lists said so far was a line or a
        // file left out.
        let skipped = warnings
        var directories: [ScreeningDirectory] = []
        for entry in config.directories {
            let file: DirectoryFile
            do {
                file = try open(entry)
                if verify { try file.verify() }
            } catch {
                throw .directory(error)
            }
            var overlay = DirectoryOverlay.empty
            if journals {
                let journalPath = JournalFormat.path(forDirectory: entry.path)
                do {
                    if let journal = try JournalFollower.read(path: journalPath) {
                        overlay = DirectoryOverlay(journal: journal.state, base: file.header, now: now)
                        if let tail = journal.tail {
                            warnings.append(Diagnostic(file: journalPath, line: 0, message: "torn last record ignored: \(tail)"))
                        }
                    }
                } catch {
                    throw .journal(error)
                }
            }
            var replicated = ReplicaState()
            if journals, config.replication != nil {
                let path = ReplicaFormat.path(stateDirectory: config.stateDirectory, directory: entry.name)
                do {
                    if let layer = try ReplicaStore.read(path: path) {
                        replicated = layer.state
                        if let problem = layer.problem { warnings.append(Diagnostic(file: path, line: 0, message: problem)) }
                    } else {
                        warnings.append(Diagnostic(file: path, line: 0, message: "no replicated layer yet (lookupd serve fetches it from etcd): changes made through etcd are not shown"))
                    }
                } catch {
                    throw .replica(error)
                }
            }
            if let warning = planMismatch(file.header.plan, path: entry.path, plan: config.plan) { warnings.append(warning) }
            directories.append(ScreeningDirectory(name: entry.name, file: file, overlay: overlay, replicated: replicated, active: entry.active))
        }
        var attribution: Attribution? = nil
        if let language = config.attribution {
            do {
                attribution = try Attribution(language: language, carrierFolder: config.attributionCarriers,
                                              carrierFolderRequired: config.attributionCarriersExplicit)
            } catch {
                throw .attribution(error)
            }
            if let problem = attribution?.carrierProblem, config.attributionCarriers != nil {
                warnings.append(Diagnostic(file: config.path ?? "attribution", line: 0,
                                           message: "attribution without carrier names: \(problem)"))
            }
        }
        let set = ScreeningSet(normalizer: normalizer, contacts: lists, directories: directories,
                               calleeContacts: callee, policies: config.policies, attribution: attribution, calleeBlocks: blocks)
        return Loaded(set: set, zone: try ZoneLoader.load(config.timeZone), warnings: warnings, skipped: skipped)
    }

    /// A directory compiled under another numbering plan than the one in force: its numbers
    /// written without a country code were read as that plan's, which is worth a warning
    /// (the file itself is still right under the plan it names).
    public static func planMismatch(_ recorded: RecordedPlan?, path: String, plan: NumberingPlan) -> Diagnostic? {
        guard let recorded, !recorded.matches(plan) else { return nil }
        let how = recorded.region == plan.region ? "with other prefixes or lengths" : "as \(recorded.region) numbers"
        return Diagnostic(file: path, line: 0, message: "compiled under the numbering plan \(recorded); numbers are read here under \(plan): numbers its source wrote without a country code were read \(how) (recompile it with --country \(plan.region) if that is wrong)")
    }

    static func loadContacts(_ path: String, normalizer: NumberNormalizer, columns: CSVColumnMapping = CSVColumnMapping(),
                             warnings: inout [Diagnostic]) throws(LoadError) -> ContactList {
        guard let format = ContactsFormat.guess(path: path) else {
            throw .contacts(Diagnostic(file: path, line: 0, message: "cannot tell the format from the file name; name it .csv or .vcf"))
        }
        // Read into the heap, never mapped: an operator truncating the file meanwhile must
        // cost a refused reload, not a SIGBUS. Bounded and non-blocking (readRegularFile).
        let bytes: [UInt8]
        do { bytes = try readRegularFile(path, maxBytes: maxContactsFileSize) } catch {
            throw .contacts(Diagnostic(file: path, line: 0, message: error.message))
        }
        let parsed = bytes.withUnsafeBytes { raw in
            Result { () throws(Diagnostic) in try ContactList.parse(bytes: raw, name: path, format: format, normalizer: normalizer, columns: columns) }
        }
        switch parsed {
        case .success(let p):
            warnings += p.warnings
            return p.list
        case .failure(let error):
            throw .contacts(error)
        }
    }

    /// The lists of a `blocks-dir`: each `.csv`/`.txt` file compiled as a directory source
    /// (in memory: one callee's list is small). A file that is unreadable or has a bad line is
    /// left out with a warning naming FILE:LINE, and every other callee's list still applies:
    /// one callee's typo must not take the others' blocks away.
    static func loadCalleeBlocks(_ folder: String, plan: NumberingPlan, normalizer: NumberNormalizer,
                                 warnings: inout [Diagnostic]) throws(LoadError) -> CalleeBlocks {
        let names: [String]
        do { names = try FileSystem.listFolder(folder).filter { !$0.hasPrefix(".") } } catch {
            throw .contacts(Diagnostic(file: folder, line: 0, message: "cannot read blocks-dir: \(error)"))
        }
        var lists: [(stem: String, list: CalleeBlockList)] = []
        var seen: [String: String] = [:]
        var options = DirectoryCompiler.Options()
        options.plan = plan
        for name in names.sorted() {
            let path = folder.hasSuffix("/") ? folder + name : folder + "/" + name
            guard let format = SourceFormat.guess(path: name), format == .csv || format == .text,
                  let dot = name.lastIndex(of: "."), FileSystem.isRegularFile(path) else { continue }
            let stem = String(name[..<dot])
            if let earlier = seen[stem] {
                warnings.append(Diagnostic(file: path, line: 0, message: "skipped: \(earlier) already holds the blocks of callee \(stem)"))
                continue
            }
            seen[stem] = name
            let bytes: [UInt8]
            do { bytes = try readRegularFile(path, maxBytes: maxContactsFileSize) } catch {
                warnings.append(Diagnostic(file: path, line: 0, message: "skipped: \(error.message)"))
                continue
            }
            let compiler = DirectoryCompiler(options: options)
            compiler.add(bytes: bytes, name: path, format: format)
            switch compiler.finish() {
            case .success(let content):
                lists.append((stem, CalleeBlockList(name: path, content: content)))
            case .failure(let failure):
                for diagnostic in failure.diagnostics.prefix(3) {
                    warnings.append(Diagnostic(file: diagnostic.file, line: diagnostic.line,
                                               message: "\(diagnostic.message); the blocks of callee \(stem) are not applied"))
                }
            }
        }
        return CalleeBlocks(folder: folder, lists: lists, normalizer: normalizer)
    }

    /// The largest contacts file read (about half a million contacts): the list lives in
    /// memory, and a file growing without end must be refused, not read.
    public static let maxContactsFileSize = 64 << 20

    /// The contact files of a `contacts-dir`, by callee (file stem), in name
    /// order. Hidden files and files of other kinds are left alone.
    static func contactFiles(in folder: String, warnings: inout [Diagnostic]) throws(LoadError) -> [(stem: String, path: String)] {
        let names: [String]
        do { names = try FileSystem.listFolder(folder).filter { !$0.hasPrefix(".") } } catch {
            throw .contacts(Diagnostic(file: folder, line: 0, message: "cannot read contacts-dir: \(error)"))
        }
        var files: [(stem: String, path: String)] = []
        var seen: [String: String] = [:]
        for name in names.sorted() {
            let path = folder.hasSuffix("/") ? folder + name : folder + "/" + name
            guard ContactsFormat.guess(path: name) != nil, let dot = name.lastIndex(of: ".") else { continue }
            guard FileSystem.isRegularFile(path) else { continue }
            let stem = String(name[..<dot])
            if let earlier = seen[stem] {
                warnings.append(Diagnostic(file: path, line: 0, message: "skipped: \(earlier) already holds the contacts of callee \(stem)"))
                continue
            }
            seen[stem] = name
            files.append((stem, path))
        }
        return files
    }
}
