import Addresses
import Glibc
import SystemCalls

/// One SIP TCP connection's buffers.
///
/// Threading: its worker's thread only.
final class TCPConnection {
    /// Seconds a peer has to complete a message once it has started one.
    static let messageTimeout = 10.0
    /// Unsent response bytes tolerated before a peer that does not read is cut off.
    static let maxPendingOutput = 256 * 1024

    let fd: Int32
    let ip: IPAddress
    let port: UInt16
    /// From a source outside allow-from: its requests are answered 403; closed after 5 s idle.
    let refused: Bool
    private var input: UnsafeMutableRawPointer
    private let inputCapacity: Int
    private(set) var receivedCount = 0
    private var output = PendingOutput()
    private(set) var lastActivity: Double
    private(set) var messageStarted: Double
    private(set) var peerClosed = false

    init(fd: Int32, ip: IPAddress, port: UInt16, capacity: Int, now: Double, refused: Bool = false) {
        self.fd = fd
        self.ip = ip
        self.port = port
        self.refused = refused
        // Room for a whole message of the maximum size, plus one byte so that
        // an oversized one is seen as such by the framer.
        inputCapacity = capacity + 1
        input = .allocate(byteCount: inputCapacity, alignment: 16)
        lastActivity = now
        messageStarted = now
    }

    deinit { input.deallocate() }

    var hasPendingOutput: Bool { !output.isEmpty }
    var pendingOutput: Int { output.count }

    /// Reads into the free space: > 0 bytes read, 0 nothing to read now, -1 error.
    func receive() -> Int {
        let space = inputCapacity - receivedCount
        if space == 0 { return 0 }
        let n: Int
        do { n = try FileDescriptor(rawValue: fd).read(into: UnsafeMutableRawBufferPointer(start: input + receivedCount, count: space)) } catch {
            return error == .wouldBlock ? 0 : -1
        }
        if n > 0 {
            let now = monotonicNow()
            if receivedCount == 0 { messageStarted = now }
            receivedCount += n
            lastActivity = now
            return n
        }
        peerClosed = true
        return 0
    }

    func withReceived<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        body(UnsafeRawBufferPointer(start: input, count: receivedCount))
    }

    func consume(_ count: Int) {
        let rest = receivedCount - count
        if rest > 0 { memmove(input, input + count, rest) }
        receivedCount = rest
        messageStarted = monotonicNow()
    }

    func queue(_ bytes: UnsafeRawBufferPointer) { output.append(bytes) }

    func queue(_ bytes: [UInt8]) { output.append(bytes) }

    /// Writes as much pending output as the socket takes. False on a write error.
    func flush() -> Bool { output.flush(to: fd) }
}
