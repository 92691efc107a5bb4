import Directory

/// The journal records a directory file has not merged, ready for lookups:
/// what `lookupd add` and `lookupd remove` changed since the file was
/// compiled or compacted.
///
/// Precedence, the same as compaction produces: for a number or prefix rule
/// the journal mentions, its latest record replaces the file's entry (an
/// addition wins over the file; a removal hides the file's exact entry or
/// prefix rule); the usual order then holds across both (an exact entry
/// beats a prefix rule, a longer prefix beats a shorter one).
///
/// Immutable: the daemon builds a new one when the journal grows and swaps
/// it in with a new set. A lookup costs one Dictionary read per prefix
/// length the overlay has, and nothing when it is empty.
public final class DirectoryOverlay: Sendable {
    struct Entry: Sendable {
        var sequence: UInt64
        /// The directory value word with an overlay label number; 0 = removed.
        var value: UInt32
    }

    let exact: [UInt64: Entry]
    let prefixes: [UInt64: Entry]
    /// Bit L set when the overlay mentions a prefix of L digits.
    let prefixMask: UInt32
    let labels: [[UInt8]]
    /// The journal the records came from (0: none).
    public let journalID: UInt64
    /// Its last record.
    public let lastSequence: UInt64
    /// The last record the directory file already contains.
    public let mergedThrough: UInt64
    public let isEmpty: Bool
    /// The moment (seconds since 1970, UTC) the first expiring record laid
    /// over the file ends, when the overlay must be built anew; nil when
    /// none of its records expires.
    public let nextExpiry: Int64?
    /// The time the overlay was built for.
    public let builtAt: Int64

    public static let empty = DirectoryOverlay()

    private init() {
        exact = [:]
        prefixes = [:]
        prefixMask = 0
        labels = []
        journalID = 0
        lastSequence = 0
        mergedThrough = 0
        isEmpty = true
        nextExpiry = nil
        builtAt = 0
    }

    /// The records of `journal` that apply over the directory with `base`
    /// as its header at `now` (seconds since 1970, UTC): the ones it has not
    /// merged, and the expiring ones still in force
    /// (`JournalState.applying`). Valid until `nextExpiry`.
    public init(journal: JournalState, base: DirectoryHeader, now: Int64) {
        var exact: [UInt64: Entry] = [:]
        var prefixes: [UInt64: Entry] = [:]
        var mask: UInt32 = 0
        var labels: [[UInt8]] = []
        var labelIDs: [[UInt8]: UInt32] = [:]
        let merged = journal.mergedThrough(base)
        var nextExpiry: Int64? = nil
        for record in journal.pending(over: base, at: now) {
            if record.isTemporary { nextExpiry = min(nextExpiry ?? .max, record.expires) }
            var value: UInt32 = 0
            if case .add(let blocked, let label, let allowed) = record.operation {
                var id: UInt32? = nil
                if let label {
                    if let known = labelIDs[label] { id = known } else {
                        id = UInt32(labels.count)
                        labelIDs[label] = id
                        labels.append(label)
                    }
                }
                value = DirectoryFormat.encodeValue(blocked: blocked, label: id, allowed: allowed)
            }
            let entry = Entry(sequence: record.sequence, value: value)
            let length = record.key >> 56
            if length == 0 {
                exact[record.key] = entry
            } else {
                prefixes[record.key] = entry
                mask |= 1 << UInt32(length)
            }
        }
        self.exact = exact
        self.prefixes = prefixes
        self.prefixMask = mask
        self.labels = labels
        self.journalID = journal.journalID
        self.lastSequence = journal.lastSequence
        self.mergedThrough = merged
        self.isEmpty = exact.isEmpty && prefixes.isEmpty
        self.nextExpiry = nextExpiry
        self.builtAt = now
    }

    /// Whether an expiring record laid over the file has ended by `now`.
    public func hasExpired(at now: Int64) -> Bool { nextExpiry.map { now >= $0 } ?? false }

    /// Numbers and prefix rules the overlay adds, changes or removes.
    public var count: Int { exact.count + prefixes.count }

    func labelBytes<R>(_ id: UInt32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let i = Int(id)
        guard i < labels.count else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try labels[i].withUnsafeBytes(body)
    }
}

/// What one directory (file and overlay) says about a number.
struct DirectoryHit {
    var blocked: Bool
    /// An allow entry: lower-priority directories do not block the number.
    var allowed = false
    var label: LabelReference?
    var match: NumberPattern
    /// The journal record that decided; nil for the file's own entry.
    var record: UInt64?
    /// The etcd revision of the replicated change that decided.
    var revision: UInt64?
}

/// A directory in the screening chain: its file, the journal records on
/// top, the replicated layer (changes from etcd, docs/CLUSTER.md) above
/// both, and when it is in force.
///
/// A class, not a struct: screening reads each directory of the set for every call, and
/// copying a struct of five references out of the array retained and released each of
/// them, on objects every worker shares (five atomic adds on reference counts whose cache
/// lines the other cores want too, against one now).
///
/// Threading: immutable; any thread.
public final class ScreeningDirectory: Sendable {
    public let name: String
    public let file: DirectoryFile
    public let overlay: DirectoryOverlay
    /// Empty unless the directory is replicated.
    public let replicated: ReplicaState
    /// nil: always in force.
    public let active: ActiveWindows?

    public init(name: String, file: DirectoryFile, overlay: DirectoryOverlay = .empty, replicated: ReplicaState = ReplicaState(),
                active: ActiveWindows? = nil) {
        self.name = name
        self.file = file
        self.overlay = overlay
        self.replicated = replicated
        self.active = active
    }

    /// The same directory with another file or overlay (journal updates,
    /// compaction).
    public func with(file: DirectoryFile? = nil, overlay: DirectoryOverlay) -> ScreeningDirectory {
        ScreeningDirectory(name: name, file: file ?? self.file, overlay: overlay, replicated: replicated, active: active)
    }

    /// The same directory with another replicated layer.
    public func with(replicated: ReplicaState) -> ScreeningDirectory {
        ScreeningDirectory(name: name, file: file, overlay: overlay, replicated: replicated, active: active)
    }

    /// Precedence, for a number or prefix rule: the replicated layer's
    /// entry, else the journal's, else the file's; a removal in a layer
    /// hides what the layers below say about exactly that number or rule.
    /// A replicated value this lookupd refused counts as absent. Across
    /// numbers and rules the usual order holds (exact beats prefix, longer
    /// prefix beats shorter).
    ///
    /// Throws when the file's bytes it needs are damaged: the directory
    /// then has no say (the caller records which one failed).
    func lookup(_ number: PhoneNumber, index: Int) throws(DirectoryError) -> DirectoryHit? {
        let replicatedEmpty = replicated.isEmpty
        if overlay.isEmpty && replicatedEmpty {
            guard let entry = try file.lookup(number) else { return nil }
            return hit(entry, index)
        }
        exact: do {
            if !replicatedEmpty, let entry = replicated[number.value] {
                switch entry.action {
                case .add: return hit(entry, key: number.value, .exact(number), index)
                case .remove: break exact
                case .refused: break
                }
            }
            if let entry = overlay.exact[number.value] {
                if entry.value != 0 { return hit(entry, .exact(number), index) }
                // Removed: the file's exact entry is hidden; a prefix rule may still cover the number.
            } else if let entry = try file.exactLookup(number) {
                return hit(entry, index)
            }
        }
        let digits = number.digitCount
        let overlayMask = overlay.prefixMask
        let replicatedMask = replicated.prefixMask
        var mask = (file.prefixLengthMask | overlayMask | replicatedMask) & ((UInt32(2) << UInt32(digits)) &- 1)
        while mask != 0 {
            let length = 31 - mask.leadingZeroBitCount
            let bit = UInt32(1) << UInt32(length)
            mask &= ~bit
            let prefixDigits = number.value / ScreeningDirectory.powersOfTen[digits - length]
            let key = UInt64(length) << 56 | prefixDigits
            if replicatedMask & bit != 0, let entry = replicated[key] {
                switch entry.action {
                case .add: return hit(entry, key: key, .prefix(NumberPrefix(digits: prefixDigits, length: length)!), index)
                case .remove: continue
                case .refused: break
                }
            }
            if overlayMask & bit != 0, let entry = overlay.prefixes[key] {
                if entry.value != 0 { return hit(entry, .prefix(NumberPrefix(digits: prefixDigits, length: length)!), index) }
                continue
            }
            if let entry = try file.prefixLookup(number, length: length) { return hit(entry, index) }
        }
        return nil
    }

    private func hit(_ entry: DirectoryEntry, _ index: Int) -> DirectoryHit {
        DirectoryHit(blocked: entry.blocked, allowed: entry.allowed, label: entry.label.map { .directory(index: index, label: $0) },
                     match: entry.match, record: nil)
    }

    private func hit(_ entry: DirectoryOverlay.Entry, _ match: NumberPattern, _ index: Int) -> DirectoryHit {
        let labelPlusOne = DirectoryFormat.labelPlusOne(entry.value)
        return DirectoryHit(blocked: entry.value & 1 != 0, allowed: DirectoryFormat.allows(entry.value),
                            label: labelPlusOne == 0 ? nil : .journal(index: index, label: labelPlusOne - 1),
                            match: match, record: entry.sequence)
    }

    private func hit(_ entry: ReplicaEntry, key: UInt64, _ match: NumberPattern, _ index: Int) -> DirectoryHit {
        guard case .add(let blocked, let label, let allowed) = entry.action else { preconditionFailure("only additions are hits") }
        return DirectoryHit(blocked: blocked, allowed: allowed, label: label == nil ? nil : .replicated(index: index, key: key),
                            match: match, record: nil, revision: entry.revision)
    }

    /// The label of the replicated entry `key`, empty when there is none.
    func replicatedLabel<R>(_ key: UInt64, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if case .add(_, let label?, _)? = replicated[key]?.action { return try label.withUnsafeBytes(body) }
        return try body(UnsafeRawBufferPointer(start: nil, count: 0))
    }

    static let powersOfTen: [UInt64] = {
        var table: [UInt64] = [1]
        for _ in 1...18 { table.append(table.last! * 10) }
        return table
    }()
}
