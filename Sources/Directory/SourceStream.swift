import Glibc
import SystemCalls

/// A source read in pieces that end at a line feed, so that a reader of
/// lines never sees half of one: a pipe or a file of any length costs one
/// buffer of a few MiB. A line longer than the buffer grows it, up to
/// `longestPiece`; past that the rest is handed over as a last piece, for
/// the reader to report (an unterminated quote, most likely).
struct SourceStream {
    let fd: FileDescriptor
    let name: String
    /// The size of a regular file (for progress), nil for a pipe.
    let size: Int?
    private var buffer: UnsafeMutableRawPointer
    private var capacity: Int
    private var start = 0
    private var used = 0
    /// The end of the input was read.
    private(set) var atEnd = false
    /// The piece handed over last must be read as the end of the source.
    private(set) var isLastPiece = false
    /// No byte of the last piece was consumed (a record continues past it).
    private var stalled = false
    private(set) var consumedTotal = 0
    static let pieceSize = 8 << 20
    static let longestPiece = 256 << 20

    init(fd: FileDescriptor, name: String, size: Int?) {
        self.fd = fd
        self.name = name
        self.size = size
        capacity = SourceStream.pieceSize
        buffer = .allocate(byteCount: capacity, alignment: 16)
        // Read once, front to back.
        _ = posix_fadvise(fd.rawValue, 0, 0, POSIX_FADV_SEQUENTIAL)
    }

    func close() { buffer.deallocate() }

    /// The bytes read and not consumed yet.
    var available: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: buffer + start, count: used - start) }

    /// Reads until the buffer is full or the input ends.
    mutating func fill() throws(DirectoryError) {
        if start > 0 {
            if used > start { memmove(buffer, buffer + start, used - start) }
            used -= start
            start = 0
        }
        while used < capacity, !atEnd {
            let n: Int
            do { n = try fd.read(into: UnsafeMutableRawBufferPointer(start: buffer + used, count: capacity - used)) } catch {
                throw .system(path: name, operation: "read", errno: error.rawValue)
            }
            if n == 0 { atEnd = true }
            used += n
        }
    }

    mutating func skipBOM() {
        let a = available
        if a.count >= 3, a[0] == 0xEF, a[1] == 0xBB, a[2] == 0xBF { start += 3 }
    }

    /// Everything left, in memory (formats read whole).
    mutating func readAll() throws(DirectoryError) -> [UInt8] {
        var all = [UInt8](available)
        start = used
        while !atEnd {
            try fill()
            all.append(contentsOf: available)
            start = used
        }
        return all
    }

    mutating func consume(_ n: Int) {
        start += n
        consumedTotal += n
        stalled = n == 0
    }

    /// The next piece: what was read, up to its last line feed (all of it
    /// at the end of the input); nil when nothing is left.
    mutating func nextPiece() throws(DirectoryError) -> UnsafeRawBufferPointer? {
        if isLastPiece { return nil }
        while true {
            if stalled, start == 0, used == capacity {
                // One record fills the whole buffer.
                if capacity >= SourceStream.longestPiece {
                    isLastPiece = true
                    return available
                }
                let grown = UnsafeMutableRawPointer.allocate(byteCount: capacity * 2, alignment: 16)
                grown.copyMemory(from: buffer, byteCount: used)
                buffer.deallocate()
                buffer = grown
                capacity *= 2
                stalled = false
            }
            try fill()
            let bytes = available
            if atEnd {
                guard bytes.count > 0 else { return nil }
                isLastPiece = true
                return bytes
            }
            if let lf = lastLineFeed(bytes) { return UnsafeRawBufferPointer(rebasing: bytes[0...lf]) }
            stalled = true
        }
    }

    private func lastLineFeed(_ bytes: UnsafeRawBufferPointer) -> Int? {
        var i = bytes.count - 1
        while i >= 0 {
            if bytes[i] == 0x0A { return i }
            i -= 1
        }
        return nil
    }
}
