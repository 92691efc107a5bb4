import SystemCalls

extension DirectoryError {
    /// A failed step of the system-call layer, in this module's words.
    public init(_ error: SystemCallError) {
        switch error.reason {
        case .errno(let e): self = .system(path: error.path, operation: error.operation, errno: e.rawValue)
        case .notRegularFile: self = .corrupt(path: error.path, reason: "not a regular file")
        case .tooLarge: self = .tooLarge(error.description)
        }
    }
}

extension JournalError {
    public init(_ error: SystemCallError) {
        switch error.reason {
        case .errno(let e): self = .system(path: error.path, operation: error.operation, errno: e.rawValue)
        case .notRegularFile, .tooLarge: self = .invalid(error.description)
        }
    }
}
