import CSystemCalls
import Glibc

/// What `stat` says a path is.
public enum FileKind: String, Hashable, Sendable, CustomStringConvertible {
    case regular = "a regular file"
    case directory = "a folder"
    case fifo = "a FIFO"
    case characterDevice = "a character device"
    case blockDevice = "a block device"
    case socket = "a socket"
    case symbolicLink = "a symbolic link"
    case unknown = "an unknown kind of file"

    init(mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regular
        case S_IFDIR: self = .directory
        case S_IFIFO: self = .fifo
        case S_IFCHR: self = .characterDevice
        case S_IFBLK: self = .blockDevice
        case S_IFSOCK: self = .socket
        case S_IFLNK: self = .symbolicLink
        default: self = .unknown
        }
    }

    public var description: String { rawValue }
}

/// The parts of `struct stat` lookupd looks at.
///
/// Threading: a plain value; `Sendable`.
public struct FileStatus: Hashable, Sendable {
    public var kind: FileKind
    public var size: Int64
    public var device: UInt64
    public var inode: UInt64
    public var mode: mode_t
    public var modified: timespec
    public var changed: timespec

    init(_ st: stat) {
        kind = FileKind(mode: st.st_mode)
        size = Int64(st.st_size)
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        mode = st.st_mode
        modified = st.st_mtim
        changed = st.st_ctim
    }

    public var isRegular: Bool { kind == .regular }
    public var isDirectory: Bool { kind == .directory }

    public static func == (a: FileStatus, b: FileStatus) -> Bool {
        a.kind == b.kind && a.size == b.size && a.device == b.device && a.inode == b.inode && a.mode == b.mode
            && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
            && a.changed.tv_sec == b.changed.tv_sec && a.changed.tv_nsec == b.changed.tv_nsec
    }

    public func hash(into h: inout Hasher) {
        h.combine(device)
        h.combine(inode)
        h.combine(size)
        h.combine(modified.tv_nsec)
    }
}

/// An open file descriptor: the calls lookupd makes on files and sockets, each retried on
/// EINTR and failing with a typed `Errno`. A value, not an owner: whoever opened it closes it.
///
/// Threading: a plain value; the kernel object is as thread-safe as the calls made on it.
public struct FileDescriptor: RawRepresentable, Hashable, Sendable {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let standardOutput = FileDescriptor(rawValue: 1)
    public static let standardError = FileDescriptor(rawValue: 2)

    /// open(2) with O_CLOEXEC always added.
    public static func open(_ path: String, _ flags: Int32, permissions: mode_t = 0) throws(Errno) -> FileDescriptor {
        let fd = try retrying(.open, path) { Glibc.open(path, flags | O_CLOEXEC, permissions) }
        return FileDescriptor(rawValue: fd)
    }

    /// An unnamed file in `folder` (O_TMPFILE): it has no name anyone could open, and goes
    /// when the last descriptor or mapping does.
    public static func openUnnamed(in folder: String, permissions: mode_t = 0o600) throws(Errno) -> FileDescriptor {
        try open(folder, lookupd_o_tmpfile() | O_RDWR, permissions: permissions)
    }

    /// close(2). Never retried: on Linux the descriptor is gone even when close says EINTR.
    public func close() { _ = Glibc.close(rawValue) }

    // MARK: - Reading and writing

    /// read(2): 0 at the end of the file.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try retrying(.read, nil) { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// pread(2): 0 at the end of the file.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        try retrying(.read, nil) { Glibc.pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Reads at `offset` until `buffer` is full or the file ends; the count read.
    public func readFully(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + done)
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// write(2): the count the kernel took (a socket may take less).
    public func write(_ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try retrying(.write, nil) { Glibc.write(rawValue, bytes.baseAddress, bytes.count) }
    }

    /// Writes every byte (a write that takes nothing fails with EIO rather than spinning).
    public func writeAll(_ bytes: UnsafeRawBufferPointer) throws(Errno) { try writeAll(bytes, faultPath: nil) }

    func writeAll(_ bytes: UnsafeRawBufferPointer, faultPath: String?) throws(Errno) {
        var done = 0
        while done < bytes.count {
            let rest = UnsafeRawBufferPointer(rebasing: bytes[done...])
            let n = try retrying(.write, faultPath) { Glibc.write(rawValue, rest.baseAddress, rest.count) }
            guard n > 0 else { throw .ioError }
            done += n
        }
    }

    public func writeAll(_ bytes: [UInt8]) throws(Errno) {
        try bytes.withBytes { (raw) throws(Errno) in try writeAll(raw) }
    }

    /// Writes every byte at `offset` (pwrite(2)).
    public func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(Errno) {
        var done = 0
        while done < bytes.count {
            let n = try retrying(.write, nil) {
                Glibc.pwrite(rawValue, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
            }
            guard n > 0 else { throw .ioError }
            done += n
        }
    }

    public func writeAll(_ bytes: [UInt8], at offset: Int) throws(Errno) {
        try bytes.withBytes { (raw) throws(Errno) in try writeAll(raw, at: offset) }
    }

    // MARK: - The file

    public func status() throws(Errno) -> FileStatus {
        var st = stat()
        _ = try retrying(.fstat, nil) { fstat(rawValue, &st) }
        return FileStatus(st)
    }

    /// fsync(2): the data and the metadata are on disk when this returns.
    public func sync() throws(Errno) { try sync(faultPath: nil) }

    /// `faultPath` names the file for `SystemCallFaults` rules only.
    func sync(faultPath: String?) throws(Errno) {
        _ = try retrying(.fsync, faultPath) { fsync(rawValue) }
    }

    public func truncate(to size: Int) throws(Errno) {
        _ = try retrying(.ftruncate, nil) { ftruncate(rawValue, off_t(size)) }
    }

    /// posix_fallocate(3): the blocks are reserved, so a full disk fails here and not later
    /// through a mapping (which would be a SIGBUS).
    public func allocate(_ size: Int) throws(Errno) {
        while true {
            if let fault = SystemCallFaults.fault(.fallocate, nil) {
                if fault == .interrupted { continue }
                throw fault
            }
            let rc = posix_fallocate(rawValue, 0, off_t(size))
            if rc == 0 { return }
            if rc == EINTR { continue }
            throw Errno(rc)
        }
    }

    /// flock(2), exclusive; with `wait` false, EWOULDBLOCK when another holds it.
    public func lockExclusively(wait: Bool = true) throws(Errno) {
        _ = try retrying(.flock, nil) { flock(rawValue, LOCK_EX | (wait ? 0 : LOCK_NB)) }
    }

    /// Sets FD_CLOEXEC (for descriptors made by calls without an O_CLOEXEC flag).
    public func setCloseOnExec() {
        _ = fcntl(rawValue, F_SETFD, FD_CLOEXEC)
    }

    /// copy_file_range(2) from the current offsets: the count copied, 0 at the end of `self`.
    public func copyRange(to target: FileDescriptor, count: Int) throws(Errno) -> Int {
        try retrying(.copyFileRange, nil) { lookupd_copy_file_range(rawValue, target.rawValue, UInt(count)) }
    }

    // MARK: - Mappings

    /// mmap(2) of the first `size` bytes.
    public func map(size: Int, writable: Bool = false, shared: Bool = true) throws(Errno) -> UnsafeMutableRawPointer {
        if let fault = SystemCallFaults.fault(.mmap, nil) { throw fault }
        guard let p = mmap(nil, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, shared ? MAP_SHARED : MAP_PRIVATE, rawValue, 0),
              p != MAP_FAILED else { throw Errno.current }
        return p
    }
}

/// msync(2) with MS_SYNC: what a shared writable mapping holds is in the file when this returns.
public func syncMapping(_ address: UnsafeMutableRawPointer, size: Int) throws(Errno) {
    _ = try retrying(.msync, nil) { msync(address, size, MS_SYNC) }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body with a typed error (the standard one rethrows untyped).
    @inlinable
    public func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = withUnsafeBytes { raw in Result { () throws(E) in try body(raw) } }
        return try result.get()
    }

    /// `withUnsafeMutableBytes` for a body with a typed error.
    @inlinable
    public mutating func withMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = withUnsafeMutableBytes { raw in Result { () throws(E) in try body(raw) } }
        return try result.get()
    }
}
