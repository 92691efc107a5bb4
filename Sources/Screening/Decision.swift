import Directory

/// What lookupd concluded about a caller.
public enum Verdict: String, Sendable, CaseIterable {
    /// A directory (or a policy) blocks the number.
    case blocked
    /// A directory labels the number and none blocks it.
    case identified
    /// The number is in a contacts list: never blocked, shown with the contact's name.
    case contact
    /// A valid number no list knows.
    case unknown
    /// The caller withheld its identity.
    case anonymous
    /// The caller identity is not a telephone number, or one its country's plan cannot hold.
    case invalid
    /// The caller is on the bypass list (emergency, internal): not screened.
    case bypassed
}

/// Where a decision came from: a contacts list or a directory, by its
/// position in the configuration (priority order for directories), a
/// callee's own contacts, or a caller policy.
public enum DecisionSource: Hashable, Sendable {
    case contacts(Int)
    case directory(Int)
    case calleeContacts(Int)
    /// A callee's own block list (`blocks-dir`), by its position.
    case calleeBlocks(Int)
    case policy(PolicyRule)
}

/// Names a label without copying it: a label inside a directory file's
/// mapping, one from a directory's journal, a contact's name, a policy's
/// label, or a number's attribution. `ScreeningSet.withLabel` reads it.
public enum LabelReference: Equatable, Sendable {
    case directory(index: Int, label: UInt32)
    case contact(list: Int, name: Int32)
    case journal(index: Int, label: UInt32)
    /// The label of a directory's replicated entry for this key.
    case replicated(index: Int, key: UInt64)
    case calleeContact(list: Int, name: Int32)
    case calleeBlock(list: Int, label: UInt32)
    case policy(PolicyRule)
    /// `unknown-label = attribution`: the region and carrier of this number.
    case attribution(PhoneNumber)
}

/// The outcome of screening one caller. A small value with no heap storage,
/// so the SIP hot path can produce one per request for free.
public struct Decision: Equatable, Sendable {
    public var verdict: Verdict
    /// The caller in E.164 form; nil for anonymous callers and identities that are no
    /// number (set for a number its country's plan cannot hold, `invalidReason` says so).
    public var number: PhoneNumber?
    /// The label to show: the contact's name, the label of the
    /// highest-priority directory that identifies the number, or a policy's.
    public var label: LabelReference?
    /// What decided the verdict: the contacts list, the highest-priority
    /// directory that blocks, or the one that identifies, or a policy.
    public var source: DecisionSource?
    /// The directory entry that decided: the exact number or the prefix rule.
    public var match: NumberPattern?
    /// Why an invalid caller is invalid (also noted on a number a directory knows but its
    /// country's plan holds no range for).
    public var invalidReason: InvalidNumber?
    /// The journal record behind `match`, when the entry comes from the
    /// directory's journal rather than its file (`lookupd add`).
    public var journalRecord: UInt64?
    /// The etcd revision behind `match`, when the entry comes from the
    /// directory's replicated layer (docs/CLUSTER.md).
    public var replicatedRevision: UInt64?
    /// The caller policy that decided or changed the outcome.
    public var policy: PolicyRule?
    /// A directory that knows the number but was outside its `active=`
    /// window, so it had no say (the highest-priority one).
    public var inactiveDirectory: Int?
    /// A directory whose file failed its checksums where this lookup read
    /// it (the highest-priority one), so it had no say: the decision is
    /// made without it. The command line refuses to answer then; the
    /// daemon treats that directory as out of service. Its file's
    /// `damage` says what is wrong.
    public var damagedDirectory: Int?
    /// An allow entry decided (`source`, `match`): no lower-priority directory blocks the
    /// number. `ScreeningSet.overriddenBlocks` names the blocks it overrode.
    public var allowed = false

    public init(verdict: Verdict, number: PhoneNumber? = nil, label: LabelReference? = nil,
                source: DecisionSource? = nil, match: NumberPattern? = nil, invalidReason: InvalidNumber? = nil,
                journalRecord: UInt64? = nil, replicatedRevision: UInt64? = nil, policy: PolicyRule? = nil,
                inactiveDirectory: Int? = nil, damagedDirectory: Int? = nil) {
        self.verdict = verdict
        self.number = number
        self.label = label
        self.source = source
        self.match = match
        self.invalidReason = invalidReason
        self.journalRecord = journalRecord
        self.replicatedRevision = replicatedRevision
        self.policy = policy
        self.inactiveDirectory = inactiveDirectory
        self.damagedDirectory = damagedDirectory
    }
}
