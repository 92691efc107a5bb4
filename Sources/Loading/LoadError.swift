import Directory
import Glibc

public enum LoadError: Error, Sendable, CustomStringConvertible {
    case directory(DirectoryError)
    case contacts(Diagnostic)
    case journal(JournalError)
    /// The configured `time-zone` (or the system's) could not be read.
    case zone(Diagnostic)
    /// A replicated layer (docs/CLUSTER.md) that cannot be read.
    case replica(ReplicaError)
    /// `attribution` names a language without data, or carrier data that cannot be read.
    case attribution(AttributionError)

    public var description: String {
        switch self {
        case .directory(let e): return e.description
        case .contacts(let d): return d.description
        case .journal(let e): return e.description
        case .zone(let d): return d.description
        case .replica(let e):
            if case .system(_, _, let code) = e, code == EACCES { return "\(e) (run lookupd as a member of the daemon's group, or as root)" }
            return e.description
        case .attribution(let e): return "attribution: \(e)"
        }
    }
}
