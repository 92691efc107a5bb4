import Glibc

/// Single-entry changes to a directory through its journal (`lookupd add`,
/// `lookupd remove`) and folding the journal back into the directory file
/// (`lookupd compact`).
///
/// The directory file itself is never modified in place: additions and
/// removals are appended to the journal, and compaction writes a complete
/// new file (DirectoryWriter, atomic rename) that records in its header
/// which journal records it already contains. Every step holds the
/// journal's lock, so changes and compactions happen one at a time.
public enum DirectoryUpdates {
    /// What a directory and its journal say about one number or prefix rule.
    public struct StoredEntry: Equatable, Sendable {
        public var blocked: Bool
        public var label: [UInt8]?
        /// The journal record it comes from; nil for the directory file itself.
        public var record: UInt64?
    }

    /// The outcome of `add` or `remove`.
    public struct Change: Sendable {
        /// The record appended (and synced); nil when the entry was already
        /// exactly so and nothing was written.
        public var record: JournalRecord?
        /// What was there before.
        public var previous: StoredEntry?
        /// A torn record left by a crashed command, cut off first.
        public var discardedTail: JournalTail?
    }

    /// Adds a number or prefix rule, or replaces what the directory says
    /// about it. Adding an identical entry again writes nothing.
    public static func add(_ pattern: NumberPattern, blocked: Bool, label: [UInt8]?, directory path: String) throws(JournalError) -> Change {
        if let label, let problem = label.withUnsafeBytes({ LabelRules.problem($0) }) { throw .invalid("bad label: \(problem)") }
        guard blocked || label != nil else { throw .invalid("an entry must block or carry a label") }
        guard let journal = try LockedJournal.open(path: JournalFormat.path(forDirectory: path), create: true) else {
            throw .invalid("\(path): cannot create the journal")
        }
        let base = try openBase(path)
        let previous = stored(pattern, base: base, state: journal.state)
        if let previous, previous.blocked == blocked, previous.label == label {
            return Change(record: nil, previous: previous, discardedTail: journal.discardedTail)
        }
        let record = try journal.append(key: JournalRecord.key(pattern), .add(blocked: blocked, label: label))
        return Change(record: record, previous: previous, discardedTail: journal.discardedTail)
    }

    /// Removes a number or prefix rule. Removing what neither the directory
    /// nor its journal holds is an error (CallKit's
    /// unexpectedIncrementalRemoval): it is nearly always a typo.
    public static func remove(_ pattern: NumberPattern, directory path: String) throws(JournalError) -> Change {
        guard let journal = try LockedJournal.open(path: JournalFormat.path(forDirectory: path), create: true) else {
            throw .invalid("\(path): cannot create the journal")
        }
        let base = try openBase(path)
        guard let previous = stored(pattern, base: base, state: journal.state) else {
            throw .notPresent(directory: path, pattern: pattern)
        }
        let record = try journal.append(key: JournalRecord.key(pattern), .remove)
        return Change(record: record, previous: previous, discardedTail: journal.discardedTail)
    }

    /// What the directory file and the records it has not merged say about
    /// exactly this number or prefix rule.
    public static func stored(_ pattern: NumberPattern, base: DirectoryFile, state: JournalState) -> StoredEntry? {
        if let record = state.latest[JournalRecord.key(pattern)], record.sequence > state.mergedThrough(base.header) {
            switch record.operation {
            case .add(let blocked, let label): return StoredEntry(blocked: blocked, label: label, record: record.sequence)
            case .remove: return nil
            }
        }
        guard let entry = base.storedEntry(pattern) else { return nil }
        return StoredEntry(blocked: entry.blocked, label: entry.label.map { Array(base.labelBytes($0)) }, record: nil)
    }

    static func openBase(_ path: String) throws(JournalError) -> DirectoryFile {
        do { return try DirectoryFile(path: path) } catch { throw .directory(error) }
    }

    // MARK: - Compaction

    /// Points in a compaction, for crash tests that stop it there.
    public enum CompactionPhase: String, Sendable, CaseIterable {
        /// The merged content is built; nothing is written yet.
        case merged
        /// The new directory file is in place; the journal still holds the merged records.
        case directoryWritten = "directory-written"
        /// The journal is replaced by an empty one.
        case journalReplaced = "journal-replaced"
    }

    public struct CompactionSummary: Sendable {
        /// Numbers and prefix rules the journal changed (latest record of each).
        public var mergedEntries = 0
        /// Journal records folded in (superseded ones included).
        public var mergedRecords: UInt64 = 0
        /// The last record the directory now contains.
        public var throughSequence: UInt64 = 0
        public var journalID: UInt64 = 0
        public var exactEntries = 0
        public var prefixRules = 0
        /// A new directory file was written.
        public var rewroteDirectory = false
        /// The journal was replaced by an empty one.
        public var replacedJournal = false
        public var discardedTail: JournalTail?
    }

    /// Merges the journal's unmerged records into a new directory file and
    /// starts an empty journal after them.
    ///
    /// Crash safety: the new file names the journal and the last record it
    /// merged, and readers apply only later records; so until the new file
    /// is renamed in, the old file and the whole journal are in force, and
    /// after it, the new file with no record applied twice. The journal is
    /// emptied last; a crash before that leaves records readers skip.
    public static func compact(directory path: String, phase: ((CompactionPhase) -> Void)? = nil) throws(JournalError) -> CompactionSummary {
        var summary = CompactionSummary()
        guard let journal = try LockedJournal.open(path: JournalFormat.path(forDirectory: path), create: false) else {
            let base = try openBase(path)
            summary.exactEntries = base.count
            summary.prefixRules = base.prefixRuleCount
            return summary
        }
        summary.discardedTail = journal.discardedTail
        summary.journalID = journal.state.journalID
        let base = try openBase(path)
        // Never fold changes into a damaged file: the result would carry the damage on.
        do { try base.verify() } catch { throw .directory(error) }
        let state = journal.state
        let pending = state.pending(over: base.header)
        var through = max(state.mergedThrough(base.header), state.lastSequence)
        if pending.isEmpty {
            summary.exactEntries = base.count
            summary.prefixRules = base.prefixRuleCount
            through = max(state.mergedThrough(base.header), state.baseSequence)
        } else {
            var content = merge(base, pending)
            content.journalID = state.journalID
            content.journalSequence = state.lastSequence
            through = state.lastSequence
            summary.mergedEntries = pending.count
            summary.mergedRecords = state.lastSequence - max(state.mergedThrough(base.header), state.baseSequence)
            summary.exactEntries = content.exactKeys.count
            summary.prefixRules = content.prefixKeys.count
            phase?(.merged)
            do { try DirectoryWriter.write(content, to: path) } catch { throw .directory(error) }
            summary.rewroteDirectory = true
            phase?(.directoryWritten)
        }
        summary.throughSequence = through
        if state.recordCount > 0 {
            try journal.replace(baseSequence: max(through, state.lastSequence))
            summary.replacedJournal = true
            phase?(.journalReplaced)
        }
        return summary
    }

    /// The base's entries with the pending records applied: an addition
    /// replaces or adds, a removal drops. Labels are rebuilt so that the
    /// file holds only labels in use, in byte order (as the compiler does).
    static func merge(_ base: DirectoryFile, _ pending: [JournalRecord]) -> DirectoryContent {
        var labels: [[UInt8]] = []
        var labelIDs: [[UInt8]: UInt32] = [:]
        var baseLabels: [UInt32: UInt32] = [:]
        func intern(_ bytes: [UInt8]) -> UInt32 {
            if let id = labelIDs[bytes] { return id }
            let id = UInt32(labels.count)
            labels.append(bytes)
            labelIDs[bytes] = id
            return id
        }
        func value(_ entry: DirectoryEntry) -> UInt32 {
            var label: UInt32? = nil
            if let id = entry.label {
                if let known = baseLabels[id] { label = known } else {
                    let interned = intern(Array(base.labelBytes(id)))
                    baseLabels[id] = interned
                    label = interned
                }
            }
            return DirectoryFormat.encodeValue(blocked: entry.blocked, label: label)
        }
        func value(_ record: JournalRecord) -> UInt32? {
            guard case .add(let blocked, let label) = record.operation else { return nil }
            return DirectoryFormat.encodeValue(blocked: blocked, label: label.map(intern))
        }

        var exact = MergedSection(changes: pending.filter { $0.key >> 56 == 0 })
        var prefixes = MergedSection(changes: pending.filter { $0.key >> 56 != 0 })
        exact.reserve(base.count)
        // Both sides ascend by key: one merging walk (the base's exact
        // entries come first, then its prefix rules, each in key order).
        base.forEachEntry { entry in
            let key = JournalRecord.key(entry.match)
            if key >> 56 == 0 {
                exact.merge(key: key, base: { value(entry) }, change: value)
            } else {
                prefixes.merge(key: key, base: { value(entry) }, change: value)
            }
        }
        exact.finish(change: value)
        prefixes.finish(change: value)
        let exactKeys = exact.keys, exactValues = exact.values
        let prefixKeys = prefixes.keys, prefixValues = prefixes.values

        let order = labels.indices.sorted { labels[$0].lexicographicallyPrecedes(labels[$1]) }
        var remap = [UInt32](repeating: 0, count: labels.count)
        for (newID, oldID) in order.enumerated() { remap[oldID] = UInt32(newID) }
        func remapped(_ v: UInt32) -> UInt32 {
            let label = v >> 1
            return label == 0 ? v : (v & 1) | ((remap[Int(label) - 1] + 1) << 1)
        }
        var content = DirectoryContent()
        content.directoryVersion = base.header.directoryVersion
        content.labels = order.map { labels[$0] }
        content.exactKeys = exactKeys
        content.exactValues = exactValues.map(remapped)
        content.prefixKeys = prefixKeys
        content.prefixValues = prefixValues.map(remapped)
        return content
    }
}

/// One section of a compacted directory (exact numbers, or prefix rules):
/// the base's entries in key order with the journal's changes merged in.
/// A change's value is nil for a removal.
private struct MergedSection {
    var changes: ArraySlice<JournalRecord>
    var keys: [UInt64] = []
    var values: [UInt32] = []

    init(changes: [JournalRecord]) { self.changes = changes[...] }

    mutating func reserve(_ baseCount: Int) {
        keys.reserveCapacity(baseCount + changes.count)
        values.reserveCapacity(baseCount + changes.count)
    }

    /// The base's entry `key`: the changes before it, then the change that
    /// replaces or removes it, or else the entry itself. `base` is only
    /// called when the entry is kept, so a replaced entry's label is not
    /// carried into the new label table.
    mutating func merge(key: UInt64, base: () -> UInt32, change value: (JournalRecord) -> UInt32?) {
        while let change = changes.first, change.key < key {
            append(change.key, value(change))
            changes.removeFirst()
        }
        if let change = changes.first, change.key == key {
            append(key, value(change))
            changes.removeFirst()
        } else {
            append(key, base())
        }
    }

    /// The changes after the base's last entry.
    mutating func finish(change value: (JournalRecord) -> UInt32?) {
        for change in changes { append(change.key, value(change)) }
        changes = []
    }

    private mutating func append(_ key: UInt64, _ value: UInt32?) {
        guard let value else { return }
        keys.append(key)
        values.append(value)
    }
}
