import Directory

/// A directory in the screening chain, with the name decisions report.
public struct ScreeningDirectory: Sendable {
    public let name: String
    public let file: DirectoryFile

    public init(name: String, file: DirectoryFile) {
        self.name = name
        self.file = file
    }
}

/// The decision chain over one consistent set of lists: contacts first,
/// then the directories in the operator's priority order.
///
/// Rules (CallKit's, applied to several providers):
/// - a contact is never blocked and is labelled with the contact's name;
/// - a number is blocked if any directory blocks it (the source named is the
///   highest-priority directory that blocks);
/// - its label comes from the highest-priority directory that identifies it;
/// - within one directory an exact entry beats a prefix rule and a longer
///   prefix beats a shorter one (the directory's own lookup does that).
///
/// Pure logic over immutable inputs: any number of threads may call
/// `decide` at once. A reload builds a new set and swaps it in; requests
/// holding the old one finish on it.
public final class ScreeningSet: Sendable {
    public let normalizer: NumberNormalizer
    public let contacts: [ContactList]
    public let directories: [ScreeningDirectory]

    public init(normalizer: NumberNormalizer, contacts: [ContactList], directories: [ScreeningDirectory]) {
        self.normalizer = normalizer
        self.contacts = contacts
        self.directories = directories
    }

    /// Screens a caller identity given as text (number or URI).
    public func decide(identity: String) -> Decision {
        decide(normalizer.normalize(identity))
    }

    public func decide(identity: UnsafeRawBufferPointer) -> Decision {
        decide(normalizer.normalize(bytes: identity))
    }

    public func decide(_ caller: NormalizedNumber) -> Decision {
        switch caller {
        case .anonymous:
            return Decision(verdict: .anonymous)
        case .invalid(let reason):
            return Decision(verdict: .invalid, invalidReason: reason)
        case .number(let number):
            return decide(number)
        }
    }

    public func decide(_ number: PhoneNumber) -> Decision {
        for (i, list) in contacts.enumerated() {
            if let name = list.lookup(number) {
                return Decision(verdict: .contact, number: number, label: .contact(list: i, name: name),
                                source: .contacts(i), match: .exact(number))
            }
        }
        var blocking: (index: Int, match: NumberPattern)? = nil
        var labelling: (index: Int, label: UInt32, match: NumberPattern)? = nil
        for (i, directory) in directories.enumerated() {
            guard let entry = directory.file.lookup(number) else { continue }
            if entry.blocked, blocking == nil { blocking = (i, entry.match) }
            if let label = entry.label, labelling == nil { labelling = (i, label, entry.match) }
            if blocking != nil, labelling != nil { break }
        }
        let label = labelling.map { LabelReference.directory(index: $0.index, label: $0.label) }
        if let blocking {
            return Decision(verdict: .blocked, number: number, label: label,
                            source: .directory(blocking.index), match: blocking.match)
        }
        if let labelling {
            return Decision(verdict: .identified, number: number, label: label,
                            source: .directory(labelling.index), match: labelling.match)
        }
        return Decision(verdict: .unknown, number: number)
    }

    /// Reads a label without copying it. The bytes are valid only inside `body`.
    public func withLabel<R>(_ reference: LabelReference, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch reference {
        case .directory(let index, let label):
            return try body(directories[index].file.labelBytes(label))
        case .contact(let list, let name):
            return try contacts[list].withName(name, body)
        }
    }

    public func label(_ reference: LabelReference) -> String {
        withLabel(reference) { String(decoding: $0, as: UTF8.self) }
    }

    /// The configured name of a decision's source.
    public func sourceName(_ source: DecisionSource) -> String {
        switch source {
        case .contacts(let i): return contacts[i].name
        case .directory(let i): return directories[i].name
        }
    }
}
