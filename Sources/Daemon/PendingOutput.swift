import Glibc
import SystemCalls

/// Bytes queued for a non-blocking stream socket and not yet taken by it:
/// what a TCP peer that reads slowly (or not at all) has still to receive.
/// The owner stops reading from a peer whose `count` passes its limit.
///
/// Threading: owned by the one thread serving the connection.
struct PendingOutput {
    private var bytes: [UInt8] = []
    private var start = 0

    var isEmpty: Bool { start == bytes.count }
    var count: Int { bytes.count - start }

    mutating func append(_ more: UnsafeRawBufferPointer) { bytes.append(contentsOf: more) }
    mutating func append(_ more: [UInt8]) { bytes.append(contentsOf: more) }

    /// Writes as much as `fd` takes now. False on a write error.
    mutating func flush(to fd: Int32) -> Bool {
        while start < bytes.count {
            let n: Int
            do { n = try bytes.withBytes { (raw) throws(Errno) in try FileDescriptor(rawValue: fd).write(UnsafeRawBufferPointer(rebasing: raw[start...])) } } catch {
                if error == .wouldBlock { break }
                return false
            }
            if n == 0 { return false }
            start += n
        }
        if start == bytes.count {
            // A buffer that grew for one burst is not kept for the connection's life.
            bytes.removeAll(keepingCapacity: bytes.capacity <= 65536)
            start = 0
        }
        return true
    }
}
