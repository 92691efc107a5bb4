import CSupport
import Configuration
import Directory
import Glibc

/// Serves directories from private, unnamed copies in the state directory.
///
/// A mapped file that someone truncates in place makes the next access to a
/// vanished page raise SIGBUS, and nothing Swift can do catches that. So the
/// daemon never maps the operator's file: it copies it into an anonymous
/// file (`O_TMPFILE`) in `state-directory`, verifies the copy completely, and
/// maps the copy. No other process can open, truncate or rewrite an unnamed
/// file, and it disappears by itself when the last mapping goes. A hard link
/// would not do: it is the same inode.
///
/// The copy costs disk space equal to the directory while it is served, and
/// copy time on reload; a file whose identity (device, inode, size, mtime,
/// ctime) has not changed since the last load is not copied again.
///
/// Threading: used by the thread that loads (start-up and reload) only.
final class PrivateDirectoryStore {
    struct Identity: Equatable {
        var device: UInt64, inode: UInt64, size: Int64
        var mtime: Int, mtimeNanos: Int, ctime: Int, ctimeNanos: Int
    }

    let folder: String
    private var cache: [String: (identity: Identity, file: DirectoryFile)] = [:]

    init(folder: String) {
        self.folder = folder
    }

    /// Checks that the state directory exists and takes unnamed files.
    func prepare() throws(DirectoryError) {
        var st = stat()
        if stat(folder, &st) != 0 {
            if errno == ENOENT, mkdir(folder, 0o750) == 0 { return }
            throw .system(path: folder, operation: "use the state directory", errno: errno)
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw .system(path: folder, operation: "use the state directory", errno: ENOTDIR) }
        let fd = try createUnnamed()
        close(fd)
    }

    /// The verified private copy of `config.path`, reusing the last one when
    /// the file has not changed.
    func open(_ config: DirectoryConfig) throws(DirectoryError) -> DirectoryFile {
        let path = config.path
        // O_NONBLOCK: opening a FIFO put at the path would otherwise wait
        // for a writer, and the reload with it (fstat then refuses it).
        let source = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard source >= 0 else { throw .system(path: path, operation: "open", errno: errno) }
        defer { close(source) }
        var st = stat()
        guard fstat(source, &st) == 0 else { throw .system(path: path, operation: "stat", errno: errno) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw .corrupt(path: path, reason: "not a regular file") }
        let identity = Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                                mtime: st.st_mtim.tv_sec, mtimeNanos: st.st_mtim.tv_nsec,
                                ctime: st.st_ctim.tv_sec, ctimeNanos: st.st_ctim.tv_nsec)
        if let cached = cache[path], cached.identity == identity { return cached.file }

        let copy = try createUnnamed()
        defer { close(copy) }
        try copyAll(from: source, to: copy, size: Int(st.st_size), path: path)
        // Messages name the operator's file, not the copy.
        let file = try DirectoryFile(descriptor: copy, path: path)
        try file.verify()
        cache[path] = (identity, file)
        return file
    }

    /// The identity of the file the cached copy of `path` was made from.
    func loadedIdentity(_ path: String) -> Identity? { cache[path]?.identity }

    /// The identity of the file at `path` now; nil when it cannot be stat'ed.
    static func currentIdentity(_ path: String) -> Identity? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                        mtime: st.st_mtim.tv_sec, mtimeNanos: st.st_mtim.tv_nsec,
                        ctime: st.st_ctim.tv_sec, ctimeNanos: st.st_ctim.tv_nsec)
    }

    /// Drops cached copies not named by the set now in use.
    func retain(only paths: [String]) {
        let keep = Set(paths)
        cache = cache.filter { keep.contains($0.key) }
    }

    private func createUnnamed() throws(DirectoryError) -> Int32 {
        // O_TMPFILE is a macro Swift does not import: __O_TMPFILE | O_DIRECTORY.
        let oTmpfile: Int32 = 0o20000000 | O_DIRECTORY
        var fd = Glibc.open(folder, oTmpfile | O_RDWR | O_CLOEXEC, 0o600)
        if fd < 0, errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL {
            // A file system without O_TMPFILE: a named file, unlinked at once.
            var template = Array((folder + "/.lookupd-copy-XXXXXX").utf8CString)
            fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
            if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            if fd >= 0 { template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) } }
        }
        guard fd >= 0 else { throw .system(path: folder, operation: "create a private copy in the state directory", errno: errno) }
        return fd
    }

    private func copyAll(from source: Int32, to target: Int32, size: Int, path: String) throws(DirectoryError) {
        var done = 0
        var useRange = true
        var buffer = [UInt8]()
        while done < size {
            if useRange {
                let n = lookupd_copy_file_range(source, target, UInt(size - done))
                if n > 0 { done += n; continue }
                if n == 0 { break }  // the file shrank while we copied; verification will say so
                if errno == EINTR { continue }
                if errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP || errno == EINVAL {
                    useRange = false
                    buffer = [UInt8](repeating: 0, count: 1 << 20)
                    continue
                }
                throw .system(path: path, operation: "copy into \(folder)", errno: errno)
            }
            let n = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .system(path: path, operation: "read", errno: errno)
            }
            if n == 0 { break }
            var written = 0
            while written < n {
                let w = buffer.withUnsafeBytes { write(target, $0.baseAddress! + written, n - written) }
                if w < 0 {
                    if errno == EINTR { continue }
                    throw .system(path: folder, operation: "write a private copy", errno: errno)
                }
                written += w
            }
            done += n
        }
    }
}
