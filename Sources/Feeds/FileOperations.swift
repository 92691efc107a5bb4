import Glibc
import SystemCalls

/// The file-system steps of an update, each failing with a message naming the path, all
/// through the system-call layer. Every replacement of a name is a rename(2): the names
/// lookupd serves never go missing.
enum FileOperations {
    static func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }

    static func exists(_ path: String) -> Bool { FileSystem.exists(path) }

    static func isRegularFile(_ path: String) -> Bool { FileSystem.isRegularFile(path) }

    static func size(_ path: String) -> Int64? { FileSystem.statusIfPresent(path)?.size }

    static func folder(of path: String) -> String { FileSystem.folder(of: path) }

    static func fileName(of path: String) -> String { FileSystem.fileName(of: path) }

    /// Creates `path` and any missing parents (mode 0750: the folders hold lists only
    /// lookupd's group should read).
    static func makeFolders(_ path: String) throws(FeedError) {
        if let st = FileSystem.statusIfPresent(path) {
            guard st.isDirectory else { throw FeedError("\(path): exists and is not a folder") }
            return
        }
        let parent = folder(of: path)
        if parent != path, parent != ".", parent != "/" { try makeFolders(parent) }
        do { try FileSystem.makeFolder(path) } catch where error == .fileExists {} catch {
            throw FeedError("\(path): cannot create the folder: \(error)")
        }
    }

    static func move(_ from: String, to: String) throws(FeedError) {
        do { try FileSystem.rename(from, to: to) } catch { throw FeedError("cannot rename \(from) to \(to): \(error)") }
    }

    static func remove(_ path: String) { FileSystem.removeIfPresent(path) }

    /// Removes a folder this process created and everything in it.
    static func removeTree(_ path: String) {
        for name in (try? FileSystem.listFolder(path)) ?? [] {
            let child = path + "/" + name
            if FileSystem.statusIfPresent(child, followLinks: false)?.isDirectory == true { removeTree(child) } else { remove(child) }
        }
        FileSystem.removeEmptyFolder(path)
    }

    /// Names in a folder (not . and ..), sorted.
    static func list(_ path: String) -> [String] { ((try? FileSystem.listFolder(path)) ?? []).sorted() }

    /// fsync(2) of a folder, so the renames made in it survive a crash.
    static func syncFolder(_ path: String) throws(FeedError) {
        do { try FileSystem.syncFolder(path) } catch { throw FeedError("cannot fsync the folder \(path): \(error)") }
    }

    /// Makes `destination` a second name of `source`'s current content, replacing whatever
    /// `destination` held in one rename. A hard link costs nothing; file systems without
    /// them get a copy, written with `writeFileAtomically`.
    static func preserve(_ source: String, as destination: String) throws(FeedError) {
        let folder = self.folder(of: destination), name = fileName(of: destination)
        AtomicFile.removeStaleTemporaries(folder: folder, name: name)
        let temporary = folder + "/" + AtomicFile.temporaryName(for: name)
        do {
            try FileSystem.link(source, to: temporary)
        } catch where error == Errno(EPERM) || error == .crossDevice || error == Errno(EMLINK) || error == .notSupported {
            try copy(source, to: destination)
            return
        } catch {
            throw FeedError("cannot link \(source) to \(temporary): \(error)")
        }
        do { try move(temporary, to: destination) } catch {
            remove(temporary)
            throw error
        }
        try syncFolder(folder)
    }

    /// Exchanges the contents of two names. `first` always exists while this runs (the
    /// daemon may reload at any moment); `second` is briefly missing.
    static func swap(_ first: String, _ second: String) throws(FeedError) {
        guard exists(first) else {
            try move(second, to: first)
            try syncFolder(folder(of: first))
            return
        }
        let temporary = second + ".swap"
        try preserve(first, as: temporary)
        do {
            try move(second, to: first)
        } catch {
            remove(temporary)
            throw error
        }
        try move(temporary, to: second)
        try syncFolder(folder(of: first))
    }

    /// `destination` replaced by a copy of `source`.
    static func copy(_ source: String, to destination: String) throws(FeedError) {
        let input: FileDescriptor
        do { input = try openRegularFile(source, maxBytes: Int.max).0 } catch { throw FeedError("cannot open \(source): \(error)") }
        defer { input.close() }
        do {
            try writeFileAtomically(destination, permissions: 0o640) { (output, temporary) throws(SystemCallError) in
                var buffer = [UInt8](repeating: 0, count: 1 << 16)
                while true {
                    let n: Int
                    do throws(Errno) { n = try buffer.withMutableBytes { (raw) throws(Errno) in try input.read(into: raw) } } catch {
                        throw SystemCallError(path: source, operation: "read", errno: error)
                    }
                    if n == 0 { return }
                    do throws(Errno) { try buffer.withBytes { (raw) throws(Errno) in try output.writeAll(UnsafeRawBufferPointer(rebasing: raw[0..<n])) } } catch {
                        throw SystemCallError(path: temporary, operation: "write", errno: error)
                    }
                }
            }
        } catch {
            throw FeedError("cannot copy \(source) to \(destination): \(error)")
        }
    }

    /// A new file in the work folder (created or truncated) for a download or an unpacked list.
    static func create(_ path: String) throws(FeedError) -> FileDescriptor {
        do { return try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC, permissions: 0o640) } catch {
            throw FeedError("cannot create \(path): \(error)")
        }
    }

    static func writeAll(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, path: String) throws(FeedError) {
        do { try fd.writeAll(bytes) } catch { throw FeedError("cannot write \(path): \(error)") }
    }

    static func sync(_ fd: FileDescriptor, path: String) throws(FeedError) {
        do { try fd.sync() } catch { throw FeedError("cannot fsync \(path): \(error)") }
    }

    /// A small file (a manifest) read whole; an error past `limit` bytes.
    static func read(_ path: String, limit: Int) throws(FeedError) -> [UInt8] {
        do { return try readRegularFile(path, maxBytes: limit) } catch {
            if case .tooLarge = error.reason { throw FeedError("\(fileName(of: path)) is larger than \(limit) bytes") }
            throw FeedError("cannot read \(path): \(error)")
        }
    }

    /// The first bytes of a file, to tell gzip and zip from text.
    static func head(_ path: String, count: Int) -> [UInt8] {
        guard let (fd, _) = try? openRegularFile(path, maxBytes: Int.max) else { return [] }
        defer { fd.close() }
        var bytes = [UInt8](repeating: 0, count: count)
        let n = (try? bytes.withMutableBytes { (raw) throws(Errno) in try fd.readFully(into: raw, at: 0) }) ?? 0
        return Array(bytes[0..<n])
    }
}

/// Seconds since the epoch, for state files and the `*_timestamp_seconds` gauges.
func unixTime() -> Int64 { Int64(time(nil)) }
