import Configuration
import Directory
import Glibc
import SystemCalls

/// Opens the directory files the daemon serves, in one of two ways
/// (`directory-copy`, docs/FORMAT.md "Serving the installed file").
///
/// No copy (the default): the installed file itself is mapped read-only
/// and guarded (`DirectoryFile(guarded: true)`): its header and checksum
/// root are checked at open, each block on first touch; a page that
/// vanishes (the file truncated in place) cannot crash the daemon, and the
/// reload thread's `DamageWatch` notices a file changed in place within
/// a tenth of a second. Start and reload cost O(1) whatever the size.
///
/// A copy (`directory-copy = yes`): the file is copied into an anonymous
/// file (`O_TMPFILE`) in `state-directory`, the copy verified completely,
/// and the copy mapped. No other process can open, truncate or rewrite an
/// unnamed file, and it disappears by itself when the last mapping goes
/// (a hard link would not do: it is the same inode). It costs disk space
/// equal to the directory while it is served, and a full copy and read at
/// start and at each reload of a changed file.
///
/// Either way a file whose identity (device, inode, size, mtime, ctime)
/// has not changed since the last load is not opened again, unless the
/// one served was damaged.
///
/// Threading: used by the thread that loads (start-up and reload) only.
final class DirectoryStore {
    struct Identity: Equatable {
        var device: UInt64, inode: UInt64, size: Int64
        var mtime: Int, mtimeNanos: Int, ctime: Int, ctimeNanos: Int
    }

    let folder: String
    /// `directory-copy`: serve private copies; set from the config at each load.
    var copies = false
    /// Asked between copy steps: true once the daemon is stopping.
    var cancelled: () -> Bool = { false }
    private var cache: [String: (identity: Identity, copied: Bool, file: DirectoryFile)] = [:]

    init(folder: String) {
        self.folder = folder
    }

    /// Checks that the state directory exists and takes unnamed files (for
    /// `directory-copy = yes`; feeds and replication keep state there too).
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

    /// `config.path` mapped (or its verified private copy), reusing the last
    /// one when the file has not changed. The header is judged on the
    /// operator's file first: a FIFO, a device, a huge sparse file or
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
        if let cached = cache[path], cached.identity == identity, cached.copied == copies, !cached.file.isDamaged { return cached.file }
        _ = try DirectoryFile.readHeader(descriptor: source, path: path)
        guard copies else {
            let file = try DirectoryFile(descriptor: source.rawValue, path: path, guarded: true)
            cache[path] = (identity, false, file)
            return file
        }

        let copy = try createUnnamed()
        defer { copy.close() }
        try copyAll(from: source, to: copy, size: Int(st.size), path: path)
        // Messages name the operator's file, not the copy.
        let file = try DirectoryFile(descriptor: copy.rawValue, path: path)
        try file.verify()
        cache[path] = (identity, true, file)
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
                    let n = try source.copyRange(to: target, count: min(size - done, DirectoryStore.chunk))
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

extension DirectoryStore.Identity {
    init(_ st: FileStatus) {
        self.init(device: st.device, inode: st.inode, size: st.size, mtime: st.modified.tv_sec, mtimeNanos: st.modified.tv_nsec,
                  ctime: st.changed.tv_sec, ctimeNanos: st.changed.tv_nsec)
    }
}
