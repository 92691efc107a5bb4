import Configuration
import Directory
import Glibc
import SystemCalls

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
    /// Asked between copy steps: true once the daemon is stopping.
    var cancelled: () -> Bool = { false }
    private var cache: [String: (identity: Identity, file: DirectoryFile)] = [:]

    init(folder: String) {
        self.folder = folder
    }

    /// Checks that the state directory exists and takes unnamed files.
    func prepare() throws(DirectoryError) {
        if let st = FileSystem.statusIfPresent(folder) {
            guard st.isDirectory else { throw .system(path: folder, operation: "use the state directory", errno: ENOTDIR) }
        } else {
            do { try FileSystem.makeFolder(folder) } catch {
                throw .system(path: folder, operation: "use the state directory", errno: error.rawValue)
            }
            return
        }
        let fd = try createUnnamed()
        fd.close()
    }

    /// The verified private copy of `config.path`, reusing the last one when
    /// the file has not changed. The header is judged on the operator's file
    /// before a byte is copied: a FIFO, a device, a huge sparse file or
    /// anything else that is not a directory costs one read of 256 bytes.
    func open(_ config: DirectoryConfig) throws(DirectoryError) -> DirectoryFile {
        let path = config.path
        // Non-blocking: a FIFO put at the path would otherwise wait for a writer, and the
        // reload with it.
        let source: FileDescriptor
        let st: FileStatus
        do { (source, st) = try openRegularFile(path, maxBytes: Int.max) } catch { throw DirectoryError(error) }
        defer { source.close() }
        let identity = Identity(st)
        if let cached = cache[path], cached.identity == identity { return cached.file }
        _ = try DirectoryFile.readHeader(descriptor: source, path: path)

        let copy = try createUnnamed()
        defer { copy.close() }
        try copyAll(from: source, to: copy, size: Int(st.size), path: path)
        // Messages name the operator's file, not the copy.
        let file = try DirectoryFile(descriptor: copy.rawValue, path: path)
        try file.verify()
        cache[path] = (identity, file)
        return file
    }

    /// The identity of the file the cached copy of `path` was made from.
    func loadedIdentity(_ path: String) -> Identity? { cache[path]?.identity }

    /// The identity of the file at `path` now; nil when it cannot be stat'ed.
    static func currentIdentity(_ path: String) -> Identity? {
        FileSystem.statusIfPresent(path).map(Identity.init)
    }

    /// Drops cached copies not named by the set now in use.
    func retain(only paths: [String]) {
        let keep = Set(paths)
        cache = cache.filter { keep.contains($0.key) }
    }

    private func createUnnamed() throws(DirectoryError) -> FileDescriptor {
        do {
            return try FileDescriptor.openUnnamed(in: folder)
        } catch let error where error == .notSupported || error == .isADirectory || error == .invalidArgument {
            // A file system without O_TMPFILE: a named file, unlinked at once.
            var template = Array((folder + "/.lookupd-copy-XXXXXX").utf8CString)
            let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
            guard fd >= 0 else { throw .system(path: folder, operation: "create a private copy in the state directory", errno: errno) }
            let descriptor = FileDescriptor(rawValue: fd)
            descriptor.setCloseOnExec()
            template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
            return descriptor
        } catch {
            throw .system(path: folder, operation: "create a private copy in the state directory", errno: error.rawValue)
        }
    }

    /// Copies in steps of `chunk` bytes, checking `cancelled` between them: a stop request
    /// must not wait for gigabytes to be copied.
    static let chunk = 64 << 20

    private func copyAll(from source: FileDescriptor, to target: FileDescriptor, size: Int, path: String) throws(DirectoryError) {
        var done = 0
        var useRange = true
        var buffer = [UInt8]()
        while done < size {
            if cancelled() { throw .system(path: path, operation: "copy into \(folder) (stopping)", errno: ECANCELED) }
            if useRange {
                do {
                    let n = try source.copyRange(to: target, count: min(size - done, PrivateDirectoryStore.chunk))
                    if n == 0 { break }  // the file shrank while we copied; verification will say so
                    done += n
                    continue
                } catch where error == .crossDevice || error == .notImplemented || error == .notSupported || error == .invalidArgument {
                    useRange = false
                    buffer = [UInt8](repeating: 0, count: 1 << 20)
                    continue
                } catch {
                    throw .system(path: path, operation: "copy into \(folder)", errno: error.rawValue)
                }
            }
            let n: Int
            do { n = try buffer.withMutableBytes { (raw) throws(Errno) in try source.read(into: raw) } } catch {
                throw .system(path: path, operation: "read", errno: error.rawValue)
            }
            if n == 0 { break }
            do { try buffer.withBytes { (raw) throws(Errno) in try target.writeAll(UnsafeRawBufferPointer(rebasing: raw[0..<n])) } } catch {
                throw .system(path: folder, operation: "write a private copy", errno: error.rawValue)
            }
            done += n
        }
    }
}

extension PrivateDirectoryStore.Identity {
    init(_ st: FileStatus) {
        self.init(device: st.device, inode: st.inode, size: st.size, mtime: st.modified.tv_sec, mtimeNanos: st.modified.tv_nsec,
                  ctime: st.changed.tv_sec, ctimeNanos: st.changed.tv_nsec)
    }
}
