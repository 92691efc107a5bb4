import Directory

/// What lookupd concluded about a caller.
public enum Verdict: String, Sendable, CaseIterable {
    /// A directory blocks the number.
    case blocked
    /// A directory labels the number and none blocks it.
    case identified
    /// The number is in a contacts list: never blocked, shown with the contact's name.
    case contact
    /// A valid number no list knows.
    case unknown
    /// The caller withheld its identity.
    case anonymous
    /// The caller identity is not a telephone number.
    case invalid
}

/// Where a decision came from: a contacts list or a directory, by its
/// position in the configuration (priority order for directories).
public enum DecisionSource: Hashable, Sendable {
    case contacts(Int)
    case directory(Int)
}

/// Names a label without copying it: either a label inside a directory
/// file's mapping or a contact's name. `ScreeningSet.withLabel` reads it.
public enum LabelReference: Equatable, Sendable {
    case directory(index: Int, label: UInt32)
    case contact(list: Int, name: Int32)
}

/// The outcome of screening one caller. A small value with no heap storage,
/// so the SIP hot path can produce one per request for free.
public struct Decision: Equatable, Sendable {
    public var verdict: Verdict
    /// The caller in E.164 form; nil for anonymous and invalid callers.
    public var number: PhoneNumber?
    /// The label to show: the contact's name, or the label of the
    /// highest-priority directory that identifies the number.
    public var label: LabelReference?
    /// The list that decided the verdict: the contacts list, the
    /// highest-priority directory that blocks, or the one that identifies.
    public var source: DecisionSource?
    /// The directory entry that decided: the exact number or the prefix rule.
    public var match: NumberPattern?
    /// Why an invalid caller is invalid.
    public var invalidReason: InvalidNumber?

    public init(verdict: Verdict, number: PhoneNumber? = nil, label: LabelReference? = nil,
                source: DecisionSource? = nil, match: NumberPattern? = nil, invalidReason: InvalidNumber? = nil) {
        self.verdict = verdict
        self.number = number
        self.label = label
        self.source = source
        self.match = match
        self.invalidReason = invalidReason
    }
}
