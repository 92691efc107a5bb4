import Glibc
import TextRules

/// Single-entry changes to a directory through its journal (`lookupd add`,
/// `lookupd remove`) and folding the journal back into the directory file
/// (`lookupd compact`).
///
/// The directory file itself is never modified in place: additions and
/// removals are appended to the journal, and compaction writes a complete
/// new file (DirectoryWriter, atomic rename) that records in its header
/// which journal records it already contains. The journal is the
/// operator's layer: it keeps the latest change of every number and rule
/// through compactions, so a file compiled anew (which names no journal)
/// gets every change laid over it again. Every step holds the journal's
/// lock, so changes and compactions happen one at a time.
public enum DirectoryUpdates {
    /// What a directory and its journal say about one number or prefix rule.
    public struct StoredEntry: Equatable, Sendable {
        public var blocked: Bool
        public var label: [UInt8]?
        /// An allow entry (lower-priority directories do not block the number).
        public var allowed = false
        /// The journal record it comes from; nil for the directory file itself.
        public var record: UInt64?
        /// When that record's addition ends (seconds since 1970, UTC); 0: never.
        public var expires: Int64 = 0
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

    /// One change of a batch (`apply`).
    public struct Request: Equatable, Sendable {
        public var pattern: NumberPattern
        /// nil: remove the number or rule.
        public var addition: (blocked: Bool, label: [UInt8]?)?
        /// For an addition: when it ends (seconds since 1970, UTC); 0: never.
        public var expires: Int64
        /// For an addition: it allows (`blocked` is then false).
        public var allowed: Bool

        public init(pattern: NumberPattern, addition: (blocked: Bool, label: [UInt8]?)?, expires: Int64 = 0, allowed: Bool = false) {
            self.pattern = pattern
            self.addition = addition
            self.expires = expires
            self.allowed = allowed
        }

        public static func add(_ pattern: NumberPattern, blocked: Bool, label: [UInt8]?, expires: Int64 = 0, allowed: Bool = false) -> Request {
            Request(pattern: pattern, addition: (blocked, label), expires: expires, allowed: allowed)
        }

        public static func remove(_ pattern: NumberPattern) -> Request { Request(pattern: pattern, addition: nil) }

        var operation: JournalOperation {
            addition.map { .add(blocked: $0.blocked, label: $0.label, allowed: allowed) } ?? .remove
        }

        public static func == (a: Request, b: Request) -> Bool {
            a.pattern == b.pattern && a.operation == b.operation && a.expires == b.expires
        }
    }

    /// Why one change of a batch cannot be made; nothing of the batch was written.
    public struct Refusal: Error, Sendable {
        /// Its index in the batch.
        public var index: Int
        public var error: JournalError
    }

    /// Adds a number or prefix rule, or replaces what the directory says
    /// about it, until `expires` (seconds since 1970, UTC; 0: for good).
    /// Adding what the journal already holds writes nothing.
    public static func add(_ pattern: NumberPattern, blocked: Bool, label: [UInt8]?, expires: Int64 = 0, directory path: String,
                           now: Int64 = Int64(Glibc.time(nil)), allowed: Bool = false) throws(JournalError) -> Change {
        do {
            return try apply([.add(pattern, blocked: blocked, label: label, expires: expires, allowed: allowed)], directory: path, now: now)[0]
        } catch {
            throw error.error
        }
    }

    /// Removes a number or prefix rule. Removing what neither the directory
    /// nor its journal holds is an error (CallKit's
    /// unexpectedIncrementalRemoval): it is nearly always a typo.
    public static func remove(_ pattern: NumberPattern, directory path: String, now: Int64 = Int64(Glibc.time(nil))) throws(JournalError) -> Change {
        do { return try apply([.remove(pattern)], directory: path, now: now)[0] } catch { throw error.error }
    }

    /// Makes every change of `requests`, in order, as one batch: checked
    /// first, all of them against the directory as the batch leaves it, then
    /// appended with one write and one fsync (`LockedJournal.append`), so
    /// either all are in force or, when one is refused or the write fails,
    /// none. A change the journal already holds writes nothing (its result
    /// has no record). `now` judges expiries: an addition must end after it.
    public static func apply(_ requests: [Request], directory path: String,
                             now: Int64 = Int64(Glibc.time(nil))) throws(Refusal) -> [Change] {
        func refuse(_ index: Int, _ error: JournalError) -> Refusal { Refusal(index: index, error: error) }
        for (i, request) in requests.enumerated() {
            if let addition = request.addition {
                if let label = addition.label, let problem = label.withUnsafeBytes({ LabelRules.problem($0) }) {
                    throw refuse(i, .invalid("bad label: \(problem)"))
                }
                guard addition.blocked || addition.label != nil || request.allowed else {
                    throw refuse(i, .invalid("an entry must block, allow or carry a label"))
                }
                guard !(addition.blocked && request.allowed) else { throw refuse(i, .invalid("an entry cannot both block and allow")) }
                guard request.expires == 0 || request.expires > now else { throw refuse(i, .invalid("the expiry is not in the future")) }
            } else if request.expires != 0 {
                throw refuse(i, .invalid("a removal cannot expire"))
            }
        }
        let opened: LockedJournal?
        do { opened = try LockedJournal.open(path: JournalFormat.path(forDirectory: path), create: true) } catch { throw refuse(0, error) }
        guard let journal = opened else { throw refuse(0, .invalid("\(path): cannot create the journal")) }
        let base: DirectoryFile
        do { base = try openBase(path) } catch { throw refuse(0, error) }
        // Judged against the state the batch builds up: a number added then removed in one batch is fine.
        var state = journal.state
        var results: [Change] = []
        var appends: [(key: UInt64, operation: JournalOperation, expires: Int64)] = []
        var sequence = state.lastSequence
        for (i, request) in requests.enumerated() {
            let key = JournalRecord.key(request.pattern)
            let previous: StoredEntry?
            do { previous = try stored(request.pattern, base: base, state: state, at: now) } catch { throw refuse(i, .directory(error)) }
            let operation = request.operation
            if request.addition != nil {
                // Written even when the file already says so: the journal is what
                // survives the next rebuild of the file. Only a change the journal
                // itself already holds is a repeat.
                if let latest = state.latest[key], latest.operation == operation, latest.expires == request.expires {
                    results.append(Change(record: nil, previous: previous, discardedTail: journal.discardedTail))
                    continue
                }
            } else if previous == nil {
                throw refuse(i, .notPresent(directory: path, pattern: request.pattern))
            }
            sequence += 1
            let record = JournalRecord(sequence: sequence, key: key, operation: operation, time: now, expires: request.expires)
            state.apply(record)
            appends.append((key, operation, request.expires))
            results.append(Change(record: record, previous: previous, discardedTail: journal.discardedTail))
        }
        let written: [JournalRecord]
        do { written = try journal.append(appends, time: now) } catch { throw refuse(0, error) }
        // The sequence numbers the journal gave (the same unless an old version's rewrite renumbered nothing).
        var next = 0
        for i in results.indices where results[i].record != nil {
            results[i].record = written[next]
            next += 1
        }
        return results
    }

    /// What the directory file and the records that apply over it at `now`
    /// say about exactly this number or prefix rule.
    public static func stored(_ pattern: NumberPattern, base: DirectoryFile, state: JournalState,
                              at now: Int64 = Int64(Glibc.time(nil))) throws(DirectoryError) -> StoredEntry? {
        if let record = state.applying(JournalRecord.key(pattern), over: base.header, at: now) {
            switch record.operation {
            case .add(let blocked, let label, let allowed):
                return StoredEntry(blocked: blocked, label: label, allowed: allowed, record: record.sequence, expires: record.expires)
            case .remove: return nil
            }
        }
        guard let entry = try base.storedEntry(pattern) else { return nil }
        return StoredEntry(blocked: entry.blocked, label: entry.label.map { Array(base.labelBytes($0)) }, allowed: entry.allowed, record: nil)
    }

    /// What the directory answers, entry by entry: the file's entries with
    /// `pending` (the journal records it has not merged) applied, exact
    /// numbers ascending, then prefix rules ascending, as `lookupd export`
    /// writes them. The label bytes are valid during the call only.
    public static func forEachEffectiveEntry(_ base: DirectoryFile, pending: [JournalRecord],
                                             _ body: (NumberPattern, _ blocked: Bool, _ allowed: Bool, UnsafeRawBufferPointer?) -> Void) throws(DirectoryError) {
        let changes = pending.sorted { $0.key < $1.key }
        var next = 0
        func emit(_ record: JournalRecord) {
            guard case .add(let blocked, let label, let allowed) = record.operation else { return }
            if let label { label.withUnsafeBytes { body(record.pattern, blocked, allowed, $0) } } else { body(record.pattern, blocked, allowed, nil) }
        }
        // Both sides ascend by key, and every exact key is below every
        // prefix key (the digit count is in the top byte): one merging walk.
        try base.forEachEntry { entry in
            let key = JournalRecord.key(entry.match)
            while next < changes.count, changes[next].key < key {
                emit(changes[next])
                next += 1
            }
            if next < changes.count, changes[next].key == key {
                emit(changes[next])
                next += 1
                return
            }
            if let label = entry.label { body(entry.match, entry.blocked, entry.allowed, base.labelBytes(label)) } else { body(entry.match, entry.blocked, entry.allowed, nil) }
        }
        while next < changes.count {
            emit(changes[next])
            next += 1
        }
    }

    /// A directory file that holds changes its journal no longer has: a
    /// compaction by lookupd 0.1 merged records into the file and emptied
    /// the journal, so those changes exist only in this file and a new
    /// file compiled over it would lose them.
    public struct ChangesOnlyInFile: Sendable, CustomStringConvertible {
        public var path: String
        public var journalID: UInt64
        /// Records 1 through this were merged into the file and are gone from the journal.
        public var throughSequence: UInt64

        public var description: String {
            "\(path) holds changes made with lookupd add/remove (records 1 to \(throughSequence) of its journal) that a compaction by an older lookupd merged into it and removed from \(JournalFormat.path(forDirectory: path)); a new file in its place would lose them"
        }
    }

    /// The changes only `path` holds, nil when its journal has every change
    /// merged into it (or the file merged none, or does not exist).
    public static func changesOnlyInFile(_ path: String) throws(JournalError) -> ChangesOnlyInFile? {
        let header: DirectoryHeader
        do { header = try DirectoryFile.readHeader(path: path) } catch {
            if case .system(_, _, let code) = error, code == ENOENT { return nil }
            throw .directory(error)
        }
        guard header.journalID != 0, header.journalSequence > 0 else { return nil }
        let journal = try JournalFollower.read(path: JournalFormat.path(forDirectory: path))
        guard let state = journal?.state, state.journalID == header.journalID else {
            return ChangesOnlyInFile(path: path, journalID: header.journalID, throughSequence: header.journalSequence)
        }
        guard state.baseSequence > 0 else { return nil }
        return ChangesOnlyInFile(path: path, journalID: header.journalID, throughSequence: min(state.baseSequence, header.journalSequence))
    }

    static func openBase(_ path: String) throws(JournalError) -> DirectoryFile {
        do { return try DirectoryFile(path: path) } catch { throw .directory(error) }
    }

    // MARK: - Compaction

    /// Points in a compaction, for crash tests that stop it there.
    public enum CompactionPhase: String, Sendable, CaseIterable {
        /// The merged content is built; nothing is written yet.
        case merged
        /// The new directory file is in place; the journal is as it was.
        case directoryWritten = "directory-written"
        /// The journal is rewritten without its superseded records.
        case journalRewritten = "journal-rewritten"
    }

    public struct CompactionSummary: Sendable {
        /// Numbers and prefix rules merged into the file now (the latest
        /// record of each that the file did not hold yet).
        public var mergedEntries = 0
        /// Numbers and prefix rules the journal changes; it keeps them all.
        public var changes = 0
        /// Superseded and ended records dropped from the journal.
        public var droppedRecords: UInt64 = 0
        /// Of those, expiring additions that had ended.
        public var expiredRecords = 0
        /// Expiring additions still in force, kept in the journal only.
        public var expiring = 0
        /// The last record the directory now contains.
        public var throughSequence: UInt64 = 0
        public var journalID: UInt64 = 0
        public var exactEntries = 0
        public var prefixRules = 0
        /// A new directory file was written.
        public var rewroteDirectory = false
        /// The journal was rewritten (superseded records dropped, or a
        /// version-1 journal upgraded).
        public var rewroteJournal = false
        public var discardedTail: JournalTail?
    }

    /// Merges the journal's unmerged records into a new directory file, so
    /// that lookups find them in the file rather than in memory, and drops
    /// the superseded records from the journal. The journal keeps the
    /// latest record of every number and prefix rule it changes: those are
    /// the operator's changes, and a directory file compiled anew (the
    /// nightly rebuild, `lookupd update`) names no journal, so the whole
    /// journal applies to it again and no change is lost.
    ///
    /// Crash safety: the new file names the journal and the last record it
    /// merged, and readers apply only later records; so until the new file
    /// is renamed in, the old file and the whole journal are in force, and
    /// after it, the new file with no record applied twice. The journal is
    /// rewritten last, keeping every record that still decides something,
    /// so a crash before or after that leaves the same answers.
    public static func compact(directory path: String, now: Int64 = Int64(Glibc.time(nil)),
                               phase: ((CompactionPhase) -> Void)? = nil) throws(JournalError) -> CompactionSummary {
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
        // Only lasting changes go into the file: an expiring one stays in the journal and ends there.
        let pending = state.lastingPending(over: base.header)
        let expired = state.expired(at: now).filter { $0.sequence != state.lastSequence }
        summary.expiredRecords = expired.count
        summary.changes = state.changeCount - expired.filter { state.beneath[$0.key] == nil }.count
        summary.expiring = state.latest.values.filter { $0.isTemporary && $0.isLive(at: now) }.count
        summary.throughSequence = state.mergedThrough(base.header)
        if pending.isEmpty {
            summary.exactEntries = base.count
            summary.prefixRules = base.prefixRuleCount
        } else {
            var content: DirectoryContent
            do { content = try merge(base, pending) } catch { throw .directory(error) }
            content.journalID = state.journalID
            content.journalSequence = state.lastSequence
            summary.throughSequence = state.lastSequence
            summary.mergedEntries = pending.count
            summary.exactEntries = content.exactKeys.count
            summary.prefixRules = content.prefixKeys.count
            phase?(.merged)
            let format = DirectoryFormat.rewriteVersion(keeping: base.header.formatVersion)
            do { try DirectoryWriter.write(content, to: path, formatVersion: format) } catch { throw .directory(error) }
            summary.rewroteDirectory = true
            phase?(.directoryWritten)
        }
        let droppable = state.droppable(at: now)
        if droppable > 0 || state.version < JournalFormat.version {
            summary.droppedRecords = droppable
            try journal.rewrite(at: now)
            summary.rewroteJournal = true
            phase?(.journalRewritten)
        }
        return summary
    }

    /// The base's entries with the pending records applied: an addition
    /// replaces or adds, a removal drops. Labels are rebuilt so that the
    /// file holds only labels in use, in byte order (as the compiler does).
    static func merge(_ base: DirectoryFile, _ pending: [JournalRecord]) throws(DirectoryError) -> DirectoryContent {
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
            return DirectoryFormat.encodeValue(blocked: entry.blocked, label: label, allowed: entry.allowed)
        }
        func value(_ record: JournalRecord) -> UInt32? {
            guard case .add(let blocked, let label, let allowed) = record.operation else { return nil }
            return DirectoryFormat.encodeValue(blocked: blocked, label: label.map(intern), allowed: allowed)
        }

        var exact = MergedSection(changes: pending.filter { $0.key >> 56 == 0 })
        var prefixes = MergedSection(changes: pending.filter { $0.key >> 56 != 0 })
        exact.reserve(base.count)
        // Both sides ascend by key: one merging walk (the base's exact
        // entries come first, then its prefix rules, each in key order).
        try base.forEachEntry { entry in
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
            let label = DirectoryFormat.labelPlusOne(v)
            return label == 0 ? v : (v & (1 | DirectoryFormat.allowBit)) | ((remap[Int(label) - 1] + 1) << 1)
        }
        var content = DirectoryContent()
        content.directoryVersion = base.header.directoryVersion
        content.plan = base.header.plan
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
