import Glibc
import SystemCalls

/// A whole file mapped read-only, for reading large source files without
/// copying them into the heap.
///
/// Threading: immutable; the bytes stay valid while the object lives.
/// Only for files lookupd reads once and does not keep (sources): someone
/// truncating the file meanwhile would fault the reader, which is why the
/// daemon reads config and contacts with `readRegularFile` and serves
/// directories through a guarded mapping or a private copy
/// (`DirectoryFile(guarded:)`, DirectoryStore).
public final class MappedFile: @unchecked Sendable {
    public let path: String
    public let bytes: UnsafeRawBufferPointer
    private let mapping: UnsafeMutableRawPointer?

    public init(path: String) throws(DirectoryError) {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(path, O_RDONLY) } catch { throw .system(path: path, operation: "open", errno: error.rawValue) }
        defer { fd.close() }
        let st: FileStatus
        do { st = try fd.status() } catch { throw .system(path: path, operation: "stat", errno: error.rawValue) }
        if st.isDirectory { throw .system(path: path, operation: "read", errno: EISDIR) }
        if !st.isRegular {
            // Pipes and character devices (`/dev/stdin`) cannot be mapped: read them.
            var data = [UInt8]()
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let got: Int
                do { got = try chunk.withMutableBytes { (raw) throws(Errno) in try fd.read(into: raw) } } catch {
                    throw .system(path: path, operation: "read", errno: error.rawValue)
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
        let size = Int(st.size)
        self.path = path
        self.ownedCopy = nil
        if size == 0 {
            self.bytes = UnsafeRawBufferPointer(start: nil, count: 0)
            self.mapping = nil
            return
        }
        let mapped: UnsafeMutableRawPointer
        do { mapped = try fd.map(size: size, shared: false) } catch { throw .system(path: path, operation: "map", errno: error.rawValue) }
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
