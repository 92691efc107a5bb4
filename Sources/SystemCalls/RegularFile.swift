import Glibc

/// Opens `path` for reading only if it is a regular file of at most `maxBytes` bytes, without
/// ever blocking: O_NONBLOCK, so a FIFO put at the path cannot hang the open waiting for a
/// writer (fstat then refuses it), O_NOCTTY for a terminal, O_NOFOLLOW unless
/// `followSymlinks` (files lookupd itself keeps in its state directory are never links).
/// A device (`/dev/zero`), a folder or a socket is refused before a byte is read.
///
/// The caller closes the descriptor. What it reads later may still grow: `readRegularFile`
/// bounds the read itself too.
public func openRegularFile(_ path: String, maxBytes: Int, followSymlinks: Bool = true) throws(SystemCallError) -> (FileDescriptor, FileStatus) {
    let flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | (followSymlinks ? 0 : O_NOFOLLOW)
    let fd: FileDescriptor
    do { fd = try FileDescriptor.open(path, flags) } catch {
        throw SystemCallError(path: path, operation: "open", errno: error)
    }
    do throws(SystemCallError) {
        let status: FileStatus
        do { status = try fd.status() } catch { throw SystemCallError(path: path, operation: "stat", errno: error) }
        guard status.isRegular else { throw SystemCallError(path: path, operation: "read", reason: .notRegularFile(status.kind)) }
        guard status.size <= Int64(maxBytes) else {
            throw SystemCallError(path: path, operation: "read", reason: .tooLarge(size: status.size, limit: maxBytes))
        }
        return (fd, status)
    } catch {
        fd.close()
        throw error
    }
}

/// The whole of the regular file at `path`, at most `maxBytes` bytes: refused before reading
/// when it is not a regular file or fstat says it is larger, and refused while reading when it
/// grows past the bound meanwhile. Never blocks on a FIFO, never reads without end.
public func readRegularFile(_ path: String, maxBytes: Int, followSymlinks: Bool = true) throws(SystemCallError) -> [UInt8] {
    let (fd, status) = try openRegularFile(path, maxBytes: maxBytes, followSymlinks: followSymlinks)
    defer { fd.close() }
    // One byte more than fstat said: reading it shows the file grew meanwhile.
    var bytes = [UInt8](repeating: 0, count: min(maxBytes, Int(status.size)) + 1)
    var count = 0
    while true {
        if count == bytes.count {
            guard count <= maxBytes else {
                throw SystemCallError(path: path, operation: "read", reason: .tooLarge(size: Int64(count), limit: maxBytes))
            }
            bytes += [UInt8](repeating: 0, count: min(max(count, 4096), maxBytes + 1 - count))
        }
        let n: Int
        do {
            n = try bytes.withMutableBytes { (raw) throws(Errno) in
                try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[count...]))
            }
        } catch {
            throw SystemCallError(path: path, operation: "read", errno: error)
        }
        if n == 0 { break }
        count += n
    }
    bytes.removeSubrange(count...)
    return bytes
}
