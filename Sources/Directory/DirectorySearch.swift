/// `lookupd search PATTERN`: the entries of a directory (with the journal changes in force)
/// whose number starts with the pattern's digits, or whose label holds the pattern
/// (case-insensitive). Read in key order straight from the mapped file; nothing is copied
/// but the matches.
public struct DirectorySearch: Sendable {
    public struct Match: Sendable, Equatable {
        public var pattern: NumberPattern
        public var blocked: Bool
        /// An allow entry: no lower-priority directory blocks the number.
        public var allowed: Bool
        public var label: String?

        /// The entry's action as sources and exports spell it.
        public var action: String { allowed ? "allow" : blocked ? "block" : "identify" }
    }

    /// The E.164 digits the number must start with; nil when the pattern is not a number
    /// (letters in it), which then matches labels only.
    public let digits: String?
    /// Lowercased, for the label comparison.
    let needle: String

    public init(_ pattern: String) {
        needle = pattern.lowercased()
        // `+86 138`, `86138`, `+1 (202) 555`: written forms of an E.164 number's beginning (a
        // national form such as `02 1234` is not one: the command says so when nothing matches).
        let allowed = Set("+0123456789 -().")
        let onlyDigits = pattern.filter(\.isNumber)
        digits = !onlyDigits.isEmpty && pattern.allSatisfy({ allowed.contains($0) }) ? onlyDigits : nil
    }

    public func matches(_ file: DirectoryFile, pending: [JournalRecord], limit: Int = .max) throws(DirectoryError) -> [Match] {
        var found: [Match] = []
        try DirectoryUpdates.forEachEffectiveEntry(file, pending: pending) { pattern, blocked, allowed, label in
            guard found.count < limit else { return }
            let text = label.map { String(decoding: $0, as: UTF8.self) }
            var hit = false
            if let digits {
                let number = pattern.description.filter(\.isNumber)
                hit = number.hasPrefix(digits)
            }
            if !hit, !needle.isEmpty, let text, text.lowercased().contains(needle) { hit = true }
            if hit { found.append(Match(pattern: pattern, blocked: blocked, allowed: allowed, label: text)) }
        }
        return found
    }
}
