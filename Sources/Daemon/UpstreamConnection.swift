import Addresses
import SystemCalls
import Configuration
import Glibc
import SIP

/// A worker's TCP connection to the upstream: opened on the first request, reused for every
/// later one, reopened on the next request after it drops.
///
/// Threading: its worker's thread only.
final class UpstreamConnection {
    enum State { case closed, connecting, connected }
    enum OpenResult { case connected, connecting, failed }

    let upstream: UpstreamAddress
    private let maxMessageSize: Int
    private(set) var state = State.closed
    private(set) var fd: Int32 = -1
    private(set) var connectStarted = 0.0
    private var buffers: TCPConnection?
    /// 503s for the callers of requests queued while connecting, sent if the connection fails.
    private var fallbacks: [([UInt8], ProxyForwarder.Reply)] = []

    init(upstream: UpstreamAddress, maxMessageSize: Int) {
        self.upstream = upstream
        self.maxMessageSize = maxMessageSize
    }

    func open(epfd: Int32) -> OpenResult {
        let family = upstream.host.isIPv4 ? AF_INET : AF_INET6
        let socketFD = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socketFD >= 0 else { return .failed }
        var one: Int32 = 1
        setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var (storage, length) = SocketAddress.make(upstream.host, upstream.port)
        let rc = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socketFD, $0, length) } }
        if rc != 0 && errno != EINPROGRESS {
            Glibc.close(socketFD)
            return .failed
        }
        fd = socketFD
        connectStarted = monotonicNow()
        buffers = TCPConnection(fd: socketFD, ip: upstream.host, port: upstream.port, capacity: maxMessageSize, now: monotonicNow())
        state = rc == 0 ? .connected : .connecting
        let events = Poll.readable | Poll.peerClosed | (state == .connecting ? Poll.writable : 0)
        Poll.add(epfd, socketFD, events)
        return state == .connected ? .connected : .connecting
    }

    /// After EPOLLOUT/EPOLLERR on a connecting socket: true when the connection is up.
    func finishConnecting(epfd: Int32) -> Bool {
        var error: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0, error == 0 else { return false }
        state = .connected
        fallbacks = []
        return true
    }

    func queue(_ bytes: UnsafeRawBufferPointer, fallback: ([UInt8], ProxyForwarder.Reply)?) {
        buffers?.queue(bytes)
        if state == .connecting, let fallback { fallbacks.append(fallback) }
    }

    /// Writes what is queued once connected, and watches for writability while some is left.
    /// False when the connection broke.
    func flushIfConnected(epfd: Int32) -> Bool {
        guard state == .connected, let buffers else { return state != .closed }
        if !buffers.flush() { return false }
        if buffers.pendingOutput > TCPConnection.maxPendingOutput { return false }
        let events = Poll.readable | Poll.peerClosed | (buffers.hasPendingOutput ? Poll.writable : 0)
        Poll.modify(epfd, fd, events)
        return true
    }

    /// Reads and frames what arrived; calls `body` for each message. False when the
    /// connection is finished (closed by the upstream, broken, or sending garbage).
    func receive(_ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        guard let buffers else { return false }
        let framer = SIPStreamFramer(maxMessageSize: maxMessageSize)
        for _ in 0..<8 {
            let got = buffers.receive()
            if got < 0 { return false }
            if got == 0 { break }
            framing: while true {
                switch buffers.withReceived({ framer.frame($0) }) {
                case .needMore:
                    break framing
                case .keepAlive(let consume, let pong):
                    buffers.consume(consume)
                    if pong { buffers.queue([0x0D, 0x0A]) }
                case .message(let length):
                    buffers.withReceived { body(UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
                    buffers.consume(length)
                case .invalid:
                    return false
                }
            }
        }
        return !buffers.peerClosed
    }

    /// Closes the connection; returns the 503s owed to callers whose requests never left.
    @discardableResult
    func close(epfd: Int32? = nil) -> [([UInt8], ProxyForwarder.Reply)] {
        let owed = state == .connecting ? fallbacks : []
        if fd >= 0 {
            if let epfd { Poll.remove(epfd, fd) }
            Glibc.close(fd)
        }
        fd = -1
        buffers = nil
        fallbacks = []
        state = .closed
        return owed
    }
}
