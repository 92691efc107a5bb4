import Directory

public enum LoadError: Error, Sendable, CustomStringConvertible {
    case directory(DirectoryError)
    case contacts(Diagnostic)
    case journal(JournalError)
    /// The configured `time-zone` (or the system's) could not be read.
    case zone(Diagnostic)

    public var description: String {
        switch self {
        case .directory(let e): return e.description
        case .contacts(let d): return d.description
        case .journal(let e): return e.description
        case .zone(let d): return d.description
        }
    }
}
