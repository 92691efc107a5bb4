import Glibc

/// The file-system steps of an update, each failing with a message naming the path.
/// Every replacement of a name is a rename(2): the names lookupd serves never go missing.
enum FileOperations {
    static func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }

    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    static func isRegularFile(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
    }

    static func size(_ path: String) -> Int64? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return Int64(st.st_size)
    }

    static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let folder = String(path[..<slash])
        return folder.isEmpty ? "/" : folder
    }

    static func fileName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// Creates `path` and any missing parents (mode 0750: the folders hold lists only
    /// lookupd's group should read).
    static func makeFolders(_ path: String) throws(FeedError) {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw FeedError("\(path): exists and is not a folder") }
            return
        }
        let parent = folder(of: path)
        if parent != path, parent != ".", parent != "/" { try makeFolders(parent) }
        guard mkdir(path, 0o750) == 0 || errno == EEXIST else {
            throw FeedError("\(path): cannot create the folder: \(errorText(errno))")
        }
    }

    static func rename(_ from: String, to: String) throws(FeedError) {
        guard Glibc.rename(from, to) == 0 else { throw FeedError("cannot rename \(from) to \(to): \(errorText(errno))") }
    }

    static func remove(_ path: String) {
        unlink(path)
    }

    /// Removes a folder this process created and everything in it.
    static func removeTree(_ path: String) {
        if let dir = opendir(path) {
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name == "." || name == ".." { continue }
                let child = path + "/" + name
                var st = stat()
                if lstat(child, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR { removeTree(child) } else { unlink(child) }
            }
            closedir(dir)
        }
        rmdir(path)
    }

    /// Names in a folder (not . and ..), sorted.
    static func list(_ path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    static func syncFolder(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    /// Makes `destination` a second name of `source`'s current content, replacing whatever
    /// `destination` held in one rename. A hard link costs nothing; file systems without
    /// them get a copy.
    static func preserve(_ source: String, as destination: String) throws(FeedError) {
        let temporary = destination + ".tmp-\(getpid())"
        unlink(temporary)
        if link(source, temporary) != 0 {
            let code = errno
            guard code == EPERM || code == EXDEV || code == EMLINK || code == EOPNOTSUPP else {
                throw FeedError("cannot link \(source) to \(temporary): \(errorText(code))")
            }
            try copy(source, to: temporary)
        }
        do { try rename(temporary, to: destination) } catch {
            unlink(temporary)
            throw error
        }
    }

    /// Exchanges the contents of two names. `first` always exists while this runs (the
    /// daemon may reload at any moment); `second` is briefly missing.
    static func swap(_ first: String, _ second: String) throws(FeedError) {
        guard exists(first) else {
            try rename(second, to: first)
            return
        }
        let temporary = second + ".swap-\(getpid())"
        try preserve(first, as: temporary)
        do {
            try rename(second, to: first)
        } catch {
            unlink(temporary)
            throw error
        }
        try rename(temporary, to: second)
    }

    static func copy(_ source: String, to destination: String) throws(FeedError) {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw FeedError("cannot open \(source): \(errorText(errno))") }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        guard output >= 0 else { throw FeedError("cannot create \(destination): \(errorText(errno))") }
        var failure: FeedError? = nil
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 16, alignment: 8)
        defer { buffer.deallocate() }
        copying: while true {
            let n = Glibc.read(input, buffer, 1 << 16)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { failure = FeedError("cannot read \(source): \(errorText(errno))"); break }
            if n == 0 { break }
            var offset = 0
            while offset < n {
                let w = write(output, buffer + offset, n - offset)
                if w < 0 && errno == EINTR { continue }
                if w <= 0 { failure = FeedError("cannot write \(destination): \(errorText(errno))"); break copying }
                offset += w
            }
        }
        if failure == nil, fsync(output) != 0 { failure = FeedError("cannot fsync \(destination): \(errorText(errno))") }
        close(output)
        if let failure {
            unlink(destination)
            throw failure
        }
    }

    /// A small file (a manifest) read whole; nil past `limit` bytes.
    static func read(_ path: String, limit: Int) throws(FeedError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FeedError("cannot open \(path): \(errorText(errno))") }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: limit + 1)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw FeedError("cannot read \(path): \(errorText(errno))") }
            if n == 0 { break }
            count += n
        }
        guard count <= limit else { throw FeedError("\(fileName(of: path)) is larger than \(limit) bytes") }
        return Array(bytes[0..<count])
    }

    /// The first bytes of a file, to tell gzip and zip from text.
    static func head(_ path: String, count: Int) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, count) }
        return n > 0 ? Array(bytes[0..<n]) : []
    }
}

/// Seconds since the epoch, for state files and the `*_timestamp_seconds` gauges.
func unixTime() -> Int64 { Int64(time(nil)) }
