import Glibc

/// A whole file mapped read-only, for reading large source files without
/// copying them into the heap.
///
/// Threading: immutable; the bytes stay valid while the object lives.
/// Only for files lookupd reads once and does not keep (sources): someone
/// truncating the file meanwhile would fault the reader, which is why the
/// daemon reads config and contacts with `inMemory` and serves directories
/// from private copies (`DirectoryFile`, PrivateDirectoryStore).
public final class MappedFile: @unchecked Sendable {
    public let path: String
    public let bytes: UnsafeRawBufferPointer
    private let mapping: UnsafeMutableRawPointer?

    /// - Parameter inMemory: read the file into the heap instead of mapping
    ///   it. The daemon reads its config and contacts this way at every
    ///   reload: an operator truncating one of them meanwhile must cost a
    ///   refused reload, not a SIGBUS.
    public init(path: String, inMemory: Bool = false) throws(DirectoryError) {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .system(path: path, operation: "open", errno: errno) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .system(path: path, operation: "stat", errno: errno) }
        if (st.st_mode & S_IFMT) == S_IFDIR { throw .system(path: path, operation: "read", errno: EISDIR) }
        if inMemory || (st.st_mode & S_IFMT) != S_IFREG {
            // Pipes and character devices (`/dev/stdin`) cannot be mapped: read them.
            var data = [UInt8]()
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let got = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if got < 0 {
                    if errno == EINTR { continue }
                    throw .system(path: path, operation: "read", errno: errno)
                }
                if got == 0 { break }
                data.append(contentsOf: chunk[0..<got])
            }
            let copy = UnsafeMutableRawPointer.allocate(byteCount: max(1, data.count), alignment: 8)
            data.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(copy), byteCount: $0.count) }
            self.path = path
            self.bytes = UnsafeRawBufferPointer(start: copy, count: data.count)
            self.mapping = nil
            self.ownedCopy = copy
            return
        }
        let size = Int(st.st_size)
        self.path = path
        self.ownedCopy = nil
        if size == 0 {
            self.bytes = UnsafeRawBufferPointer(start: nil, count: 0)
            self.mapping = nil
            return
        }
        guard let mapped = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), mapped != MAP_FAILED else {
            throw .system(path: path, operation: "map", errno: errno)
        }
        _ = madvise(mapped, size, MADV_SEQUENTIAL)
        self.mapping = mapped
        self.bytes = UnsafeRawBufferPointer(start: mapped, count: size)
    }

    private let ownedCopy: UnsafeMutableRawPointer?

    deinit {
        if let mapping { munmap(mapping, bytes.count) }
        ownedCopy?.deallocate()
    }
}
