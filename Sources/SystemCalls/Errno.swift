import Glibc

/// An `errno` value, as a typed error: every call of this layer that can fail throws one
/// (or a `SystemCallError` that carries one with the path and the step).
///
/// Threading: a plain value; `Sendable`.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32

    public init(_ rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's `errno` now.
    @inlinable public static var current: Errno { Errno(Glibc.errno) }

    public var description: String { String(cString: strerror(rawValue)) }

    public static let interrupted = Errno(EINTR)
    public static let wouldBlock = Errno(EAGAIN)
    public static let noSuchFile = Errno(ENOENT)
    public static let fileExists = Errno(EEXIST)
    public static let ioError = Errno(EIO)
    public static let noSpace = Errno(ENOSPC)
    public static let quotaExceeded = Errno(EDQUOT)
    public static let readOnlyFileSystem = Errno(EROFS)
    public static let permissionDenied = Errno(EACCES)
    public static let notADirectory = Errno(ENOTDIR)
    public static let isADirectory = Errno(EISDIR)
    public static let tooManyLinks = Errno(ELOOP)
    public static let noProcess = Errno(ESRCH)
    public static let invalidArgument = Errno(EINVAL)
    public static let notSupported = Errno(EOPNOTSUPP)
    public static let crossDevice = Errno(EXDEV)
    public static let notImplemented = Errno(ENOSYS)
    public static let fileTooLarge = Errno(EFBIG)
    public static let connectionAborted = Errno(ECONNABORTED)
    public static let connectionRefused = Errno(ECONNREFUSED)
    public static let noBufferSpace = Errno(ENOBUFS)
    public static let addressInUse = Errno(EADDRINUSE)
    public static let nameTooLong = Errno(ENAMETOOLONG)
    public static let badDescriptor = Errno(EBADF)

    /// The `E...` name of the value, for fault specifications and logs (nil for names this
    /// layer does not know).
    public var name: String? { Errno.names.first { $0.value == rawValue }?.name }

    /// The value named `E...` (or its number).
    public init?(name: String) {
        if let n = Int32(name), n > 0 { self.init(n); return }
        guard let entry = Errno.names.first(where: { $0.name == name }) else { return nil }
        self.init(entry.value)
    }

    private static let names: [(name: String, value: Int32)] = [
        ("EINTR", EINTR), ("EAGAIN", EAGAIN), ("ENOENT", ENOENT), ("EEXIST", EEXIST), ("EIO", EIO),
        ("ENOSPC", ENOSPC), ("EDQUOT", EDQUOT), ("EROFS", EROFS), ("EACCES", EACCES), ("EPERM", EPERM),
        ("ENOTDIR", ENOTDIR), ("EISDIR", EISDIR), ("ELOOP", ELOOP), ("EINVAL", EINVAL), ("EXDEV", EXDEV),
        ("EFBIG", EFBIG), ("EMFILE", EMFILE), ("ENFILE", ENFILE), ("ENOMEM", ENOMEM), ("EBADF", EBADF),
    ]
}

/// A failed step on a named file: what was attempted, on which path, and why.
///
/// Threading: a plain value; `Sendable`.
public struct SystemCallError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Reason: Hashable, Sendable {
        case errno(Errno)
        /// Not a regular file (a FIFO, a device, a folder, a socket) where one was required.
        case notRegularFile(FileKind)
        /// Larger than the caller's bound (`size` is what fstat said, or the bound + 1 when the
        /// file grew while it was read).
        case tooLarge(size: Int64, limit: Int)
    }

    public var path: String
    /// What was attempted, in an operator's words: "open", "fsync", "rename X to".
    public var operation: String
    public var reason: Reason

    public init(path: String, operation: String, reason: Reason) {
        self.path = path
        self.operation = operation
        self.reason = reason
    }

    public init(path: String, operation: String, errno: Errno) {
        self.init(path: path, operation: operation, reason: .errno(errno))
    }

    /// The errno behind the failure (EINVAL for a wrong kind of file, EFBIG for one too large),
    /// for callers whose error types carry a number.
    public var code: Int32 {
        switch reason {
        case .errno(let e): return e.rawValue
        case .notRegularFile(let kind): return kind == .directory ? EISDIR : EINVAL
        case .tooLarge: return EFBIG
        }
    }

    public var description: String { "\(path): \(message)" }

    /// What went wrong, without the path: for messages that name the file themselves
    /// (`lookupd.conf:0: cannot open: ...`).
    public var message: String {
        switch reason {
        case .errno(let e): return "cannot \(operation): \(e)"
        case .notRegularFile(let kind): return "not a regular file (\(kind))"
        case .tooLarge(let size, let limit): return "\(size) bytes, more than the \(limit) bytes allowed"
        }
    }
}

/// Runs `call` until it returns something other than -1 with EINTR: the one place this layer
/// retries interrupted calls. An injected fault (`SystemCallFaults`) counts as the call's result.
@inline(__always)
func retrying<T: FixedWidthInteger>(_ kind: SystemCall, _ path: String?, _ call: () -> T) throws(Errno) -> T {
    while true {
        if let fault = SystemCallFaults.fault(kind, path) {
            if fault == .interrupted { continue }
            throw fault
        }
        let result = call()
        if result == -1 {
            let e = Errno.current
            if e == .interrupted { continue }
            throw e
        }
        return result
    }
}
