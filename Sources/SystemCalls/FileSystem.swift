import Glibc

/// The calls lookupd makes on paths, each retried on EINTR and failing with a typed `Errno`.
///
/// Threading: any thread (the calls are the kernel's).
public enum FileSystem {
    /// stat(2), or lstat(2) when `followLinks` is false.
    public static func status(_ path: String, followLinks: Bool = true) throws(Errno) -> FileStatus {
        var st = stat()
        _ = try retrying(.stat, path) { followLinks ? stat(path, &st) : lstat(path, &st) }
        return FileStatus(st)
    }

    /// The status, nil when the path cannot be stat'ed (missing, no permission).
    public static func statusIfPresent(_ path: String, followLinks: Bool = true) -> FileStatus? {
        try? status(path, followLinks: followLinks)
    }

    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    public static func isRegularFile(_ path: String) -> Bool { statusIfPresent(path)?.isRegular ?? false }

    /// rename(2): `to` names `from`'s file at once, whatever it named before.
    public static func rename(_ from: String, to: String) throws(Errno) {
        _ = try retrying(.rename, to) { Glibc.rename(from, to) }
    }

    public static func unlink(_ path: String) throws(Errno) {
        _ = try retrying(.unlink, path) { Glibc.unlink(path) }
    }

    /// Removes `path` if it is there; errors are of no interest (clean-up).
    public static func removeIfPresent(_ path: String) { _ = Glibc.unlink(path) }

    /// link(2): a second name for `from`'s file.
    public static func link(_ from: String, to: String) throws(Errno) {
        _ = try retrying(.link, to) { Glibc.link(from, to) }
    }

    public static func makeFolder(_ path: String, permissions: mode_t = 0o750) throws(Errno) {
        _ = try retrying(.mkdir, path) { mkdir(path, permissions) }
    }

    /// rmdir(2) of an empty folder; errors ignored (clean-up).
    public static func removeEmptyFolder(_ path: String) { _ = rmdir(path) }

    /// The names in a folder, without `.` and `..`, in no particular order.
    public static func listFolder(_ path: String) throws(Errno) -> [String] {
        guard let dir = opendir(path) else { throw Errno.current }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// fsync(2) of a folder: a rename or a new name in it is on disk when this returns.
    public static func syncFolder(_ path: String) throws(Errno) {
        let fd = try FileDescriptor.open(path, O_RDONLY | O_DIRECTORY)
        defer { fd.close() }
        try fd.sync(faultPath: path)
    }

    /// The folder part of a path ("." for a bare name, "/" for a file at the root).
    public static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let folder = String(path[..<slash])
        return folder.isEmpty ? "/" : folder
    }

    /// The last component of a path.
    public static func fileName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// False only when no process `pid` exists (kill(pid, 0) says ESRCH); a process of
    /// another user counts as alive.
    public static func isProcessAlive(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno != ESRCH
    }
}
