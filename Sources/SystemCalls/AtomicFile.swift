import Glibc

/// Replaces the file at `path` so that a crash at any moment leaves either the old file or the
/// complete new one under that name, never a part of one: `fill` writes a temporary file in the
/// same folder, which is fsync'd, closed, renamed over `path`, and the folder fsync'd. Every
/// step's result is checked; on any failure before the rename the temporary is removed and
/// the old file is untouched. A failure of the folder's fsync is reported too, though the new
/// file is then already in place (it may not survive a power cut).
///
/// The temporary is named `.NAME.lookupd-tmp.PID.RANDOM`. One left by a process that was
/// killed (SIGKILL, a power cut) is removed by the next write to the same `path` once no
/// process with that PID exists.
///
/// - Parameters:
///   - permissions: of the new file (before the umask).
///   - fill: writes the content through the descriptor (its path is the temporary's, for
///     messages); it may map the file, allocate blocks or truncate.
public func writeFileAtomically(_ path: String, permissions: mode_t = 0o644,
                                _ fill: (FileDescriptor, _ temporaryPath: String) throws(SystemCallError) -> Void) throws(SystemCallError) {
    let folder = FileSystem.folder(of: path)
    let name = FileSystem.fileName(of: path)
    AtomicFile.removeStaleTemporaries(folder: folder, name: name)
    let temporary = folder + "/" + AtomicFile.temporaryName(for: name)
    let fd: FileDescriptor
    do { fd = try FileDescriptor.open(temporary, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, permissions: permissions) } catch {
        throw SystemCallError(path: temporary, operation: "create", errno: error)
    }
    var open = true
    var renamed = false
    defer {
        if open { fd.close() }
        if !renamed { FileSystem.removeIfPresent(temporary) }
    }
    try fill(fd, temporary)
    do { try fd.sync(faultPath: temporary) } catch { throw SystemCallError(path: temporary, operation: "fsync", errno: error) }
    open = false
    // close(2) reports write-back errors some file systems (NFS) only learn of then.
    if Glibc.close(fd.rawValue) != 0, errno != EINTR {
        throw SystemCallError(path: temporary, operation: "close", errno: .current)
    }
    do { try FileSystem.rename(temporary, to: path) } catch {
        throw SystemCallError(path: path, operation: "rename \(temporary) to", errno: error)
    }
    renamed = true
    do { try FileSystem.syncFolder(folder) } catch {
        throw SystemCallError(path: folder, operation: "fsync the folder after replacing \(name) (the new file is in place but may not survive a crash)", errno: error)
    }
}

/// `writeFileAtomically` with the whole content in hand.
public func writeFileAtomically(_ path: String, contents: [UInt8], permissions: mode_t = 0o644) throws(SystemCallError) {
    try writeFileAtomically(path, permissions: permissions) { (fd, temporary) throws(SystemCallError) in
        do throws(Errno) { try contents.withBytes { (raw) throws(Errno) in try fd.writeAll(raw, faultPath: temporary) } } catch {
            throw SystemCallError(path: temporary, operation: "write", errno: error)
        }
    }
}

/// The naming of `writeFileAtomically`'s temporaries, and their clean-up.
public enum AtomicFile {
    static let marker = ".lookupd-tmp."

    /// `.NAME.lookupd-tmp.PID.RANDOM`: hidden, next to the file it replaces (a rename must not
    /// cross file systems), with the PID of the writer so a later run can tell a stale one.
    public static func temporaryName(for name: String) -> String {
        "." + name + marker + String(getpid()) + "." + String(UInt32.random(in: 0...UInt32.max), radix: 16)
    }

    /// Whether `entry` (a name in a folder) is a temporary of `name`'s, and the PID in it.
    static func writer(of entry: String, name: String) -> Int32? {
        let prefix = "." + name + marker
        guard entry.hasPrefix(prefix) else { return nil }
        let rest = entry.dropFirst(prefix.count)
        guard let dot = rest.firstIndex(of: "."), let pid = Int32(rest[..<dot]), pid > 0,
              UInt32(rest[rest.index(after: dot)...], radix: 16) != nil else { return nil }
        return pid
    }

    /// Removes the temporaries of `name` in `folder` whose writer is gone; the names removed.
    @discardableResult
    public static func removeStaleTemporaries(folder: String, name: String) -> [String] {
        guard let entries = try? FileSystem.listFolder(folder) else { return [] }
        var removed: [String] = []
        for entry in entries {
            guard let pid = writer(of: entry, name: name), pid != getpid(), !FileSystem.isProcessAlive(pid) else { continue }
            // Only ever a regular file: never follow a name someone else put there.
            guard let st = FileSystem.statusIfPresent(folder + "/" + entry, followLinks: false), st.isRegular else { continue }
            FileSystem.removeIfPresent(folder + "/" + entry)
            removed.append(entry)
        }
        return removed
    }
}
