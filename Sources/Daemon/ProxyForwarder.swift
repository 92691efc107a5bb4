import Answering
import Addresses
import SystemCalls
import Configuration
import Glibc
import SIP
import Synchronization

/// One worker's side of proxy mode: its way to the upstream (a connected UDP socket, or a TCP
/// connection kept open and reopened when it drops), and the delivery of responses back along
/// the Via path.
///
/// Threading: its worker's thread only.
final class ProxyForwarder {
    /// Seconds the upstream counts as down after a refused connection or an ICMP error: calls
    /// get 503 at once instead of waiting for timeouts, and the next try comes after this.
    static let retryAfter = 1.0

    let worker: Int
    let upstream: UpstreamAddress
    let inbox: ProxyInbox
    private let counters: WorkerCounters
    private let epfd: Int32
    private let udpSockets: [(fd: Int32, address: ListenAddress)]
    private let maxMessageSize: Int
    /// Queues bytes on one of this worker's accepted connections; false when it has none to `key`.
    var deliverTCP: (PeerKey, UnsafeRawBufferPointer) -> Bool = { _, _ in false }
    private(set) var context: ProxyContext
    private let localIP: IPAddress

    private let out: UnsafeMutableRawBufferPointer
    private let side: UnsafeMutableRawBufferPointer
    private let receiveBuffer: UnsafeMutableRawBufferPointer

    private var udpFD: Int32 = -1
    private var tcp: UpstreamConnection?
    private var downUntil = 0.0
    /// Probing (`upstream-probe-interval`): when the last probe went out, and how many went
    /// out since the upstream last said anything.
    private let probeInterval: Double
    private var lastProbe = 0.0
    private var unanswered = 0
    private var probeSequence: UInt32 = 0
    /// A TCP connect that neither succeeds nor fails (a host that drops packets) is given up
    /// after this long.
    static let connectTimeout = 3.0
    /// One key per daemon, for every worker (CallerFrom.swift); a `static let` is set once,
    /// safely, by whichever worker first needs it.
    static let callerFromKey = SIPCallerFromKey.random()
    /// UDP: the 503s owed to callers of INVITEs sent in the last moments. An ICMP port
    /// unreachable names no datagram, so all of those count as lost when one arrives.
    private var recentFallbacks: [(bytes: [UInt8], reply: Reply, sent: Double)] = []
    static let icmpWindow = 1.0

    init(worker: Int, upstream: UpstreamAddress, listen: [ListenAddress], udpSockets: [(Int32, ListenAddress)],
         epfd: Int32, counters: WorkerCounters, maxMessageSize: Int, branchKey: UInt64, probeInterval: Int = 0) throws(SystemError) {
        self.worker = worker
        self.probeInterval = Double(probeInterval)
        probeSequence = UInt32(truncatingIfNeeded: worker) << 24
        self.upstream = upstream
        self.counters = counters
        self.epfd = epfd
        self.udpSockets = udpSockets.map { (fd: $0.0, address: $0.1) }
        self.maxMessageSize = maxMessageSize
        inbox = try ProxyInbox()
        let size = 2 * maxMessageSize + 4096
        out = .allocate(byteCount: size, alignment: 16)
        side = .allocate(byteCount: size, alignment: 16)
        receiveBuffer = .allocate(byteCount: maxMessageSize + 1, alignment: 16)

        localIP = try ProxyForwarder.localAddress(toward: upstream)
        var via = SIPViaAddress(transport: upstream.transport == .udp ? "UDP" : "TCP", host: localIP.description, port: 0)
        if upstream.transport == .udp {
            let fd = socket(upstream.host.isIPv4 ? AF_INET : AF_INET6, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw SystemError("socket toward upstream \(upstream)") }
            var buffer: Int32 = 4 << 20
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, socklen_t(MemoryLayout<Int32>.size))
            var (storage, length) = SocketAddress.make(upstream.host, upstream.port)
            let rc = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) } }
            guard rc == 0 else {
                let code = errno
                close(fd)
                throw SystemError("connect UDP socket to upstream \(upstream)", code)
            }
            udpFD = fd
            via.port = ListenSocket.boundPort(fd)
            Poll.add(epfd, fd, Poll.readable)
        } else {
            // The sent-by of a stream is where we accept connections (§18.2.2: the upstream
            // may connect there to deliver a response if our connection is gone).
            via.port = listen.first { $0.transport == .tcp }?.port ?? 0
            tcp = UpstreamConnection(upstream: upstream, maxMessageSize: maxMessageSize)
        }
        var own = listen.map { SIPViaAddress(transport: $0.transport == .udp ? "UDP" : "TCP", host: $0.host.description, port: $0.port) }
        own.append(via)
        var hosts = Array(Set(listen.map { $0.host.description } + [localIP.description]))
        hosts.sort()
        context = ProxyContext(upstreamVia: via, ownAddresses: own, ownHosts: hosts, branchKey: branchKey,
                               upstreamHost: upstream.host, upstreamPort: upstream.port, upstreamAvailable: true, callerFromKey: ProxyForwarder.callerFromKey)
        ProxyHub.shared.join(worker: worker, inbox: inbox)
        Poll.add(epfd, inbox.fd, Poll.readable)
    }

    deinit {
        ProxyHub.shared.leave(worker: worker)
        if udpFD >= 0 { close(udpFD) }
        tcp?.close()
        out.deallocate()
        side.deallocate()
        receiveBuffer.deallocate()
    }

    /// The local address the kernel would use toward the upstream (a UDP connect sends nothing).
    private static func localAddress(toward upstream: UpstreamAddress) throws(SystemError) -> IPAddress {
        let fd = socket(upstream.host.isIPv4 ? AF_INET : AF_INET6, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("socket") }
        defer { close(fd) }
        var (storage, length) = SocketAddress.make(upstream.host, upstream.port)
        let rc = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) } }
        guard rc == 0 else { throw SystemError("no route to upstream \(upstream)") }
        var local = sockaddr_storage()
        var localLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &localLength) } }
        return withUnsafePointer(to: &local) { SocketAddress.decode(UnsafeRawPointer($0)).0 }
    }

    func owns(_ fd: Int32) -> Bool { fd == udpFD || fd == inbox.fd || (tcp?.fd == fd && fd >= 0) }

    private var upstreamAvailable: Bool { monotonicNow() >= downUntil }

    private func markDown(_ why: Counter) {
        counters.add(why)
        let now = monotonicNow()
        downUntil = now + ProxyForwarder.retryAfter
        let owed = recentFallbacks.filter { now - $0.sent <= ProxyForwarder.icmpWindow }
        recentFallbacks = []
        for entry in owed {
            counters.add(.proxyUpstreamUnavailable)
            entry.bytes.withUnsafeBytes { send($0, to: entry.reply) }
        }
    }

    private func rememberFallback(_ fallback: UnsafeRawBufferPointer, reply: Reply) {
        let now = monotonicNow()
        if let first = recentFallbacks.first, now - first.sent > ProxyForwarder.icmpWindow || recentFallbacks.count >= 256 {
            recentFallbacks.removeAll { now - $0.sent > ProxyForwarder.icmpWindow }
            if recentFallbacks.count >= 256 { recentFallbacks.removeFirst() }
        }
        recentFallbacks.append((Array(fallback), reply, now))
    }

    // MARK: - Requests from callers

    /// Where an answer for the source of a request goes.
    enum Reply {
        case udp(fd: Int32, PeerKey)
        case tcp(PeerKey)
    }

    /// A message received on a listen socket or accepted connection. True when it was
    /// answered or forwarded (the worker times those for lookupd_response_duration_seconds).
    @discardableResult
    func received(_ bytes: UnsafeRawBufferPointer, transport: ListenAddress.Transport, from source: PeerKey, udpFD listenFD: Int32?,
                  answerer: inout Answerer, set: ServingSet, now: WallTime, log: inout LogLines) -> Bool {
        context.upstreamAvailable = upstreamAvailable
        let action = answerer.answer(bytes, from: MessageSource(ip: source.ip, port: source.port, transport: transport), set: set,
                                     proxy: context, now: now, into: out, fallback: side, log: &log)
        let reply: Reply = listenFD.map { .udp(fd: $0, source) } ?? .tcp(source)
        perform(action, reply: reply)
        switch action {
        case .reply, .forward, .relay: return true
        case .none, .probeAnswered: return false
        }
    }

    private func perform(_ action: Action, reply: Reply) {
        switch action {
        case .none:
            break
        case .reply(let n):
            send(UnsafeRawBufferPointer(rebasing: out[0..<n]), to: reply)
        case .forward(let n, let fallback):
            sendUpstream(UnsafeRawBufferPointer(rebasing: out[0..<n]), fallback: UnsafeRawBufferPointer(rebasing: side[0..<fallback]), reply: reply)
        case .relay(let n, let hop):
            sendDownstream(UnsafeRawBufferPointer(rebasing: out[0..<n]), hop)
        case .probeAnswered:
            counters.add(.proxyProbesAnswered)
            downUntil = 0
        }
    }

    private func send(_ bytes: UnsafeRawBufferPointer, to reply: Reply) {
        switch reply {
        case .udp(let fd, let key):
            if !sendDatagram(fd, bytes, to: key) { counters.add(.sendErrors) }
        case .tcp(let key):
            if !deliverTCP(key, bytes) { counters.add(.proxyResponseUndeliverable) }
        }
    }

    private func sendDatagram(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, to key: PeerKey) -> Bool {
        guard bytes.count <= 65507 else { return false }
        var (storage, length) = SocketAddress.make(key.ip, key.port)
        let sent = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { try? Socket.send(fd, bytes, to: $0, length: length) }
        }
        return sent != nil
    }

    // MARK: - Toward the upstream

    private func sendUpstream(_ bytes: UnsafeRawBufferPointer, fallback: UnsafeRawBufferPointer, reply: Reply) {
        if udpFD >= 0 {
            guard bytes.count <= 65507 else { counters.add(.responseTooLarge); return }
            do {
                _ = try Socket.send(udpFD, bytes)
                counters.add(.proxyForwardedRequests)
                if !fallback.isEmpty { rememberFallback(fallback, reply: reply) }
            } catch where error == .connectionRefused {
                // An ICMP error for an earlier datagram: nothing listens there now.
                if !fallback.isEmpty { rememberFallback(fallback, reply: reply) }
                markDown(.proxyUpstreamUnreachable)
            } catch {
                counters.add(.proxyUpstreamSendErrors)
            }
            return
        }
        guard let tcp else { return }
        guard openIfClosed(tcp) else {
            if !fallback.isEmpty { counters.add(.proxyUpstreamUnavailable); send(fallback, to: reply) }
            return
        }
        tcp.queue(bytes, fallback: fallback.isEmpty ? nil : (Array(fallback), reply))
        counters.add(.proxyForwardedRequests)
        if !tcp.flushIfConnected(epfd: epfd) { connectionLost() }
    }

    /// Opens the connection to the upstream when there is none (connected at once or still
    /// connecting: true). A refused one marks the upstream down.
    private func openIfClosed(_ tcp: UpstreamConnection) -> Bool {
        guard tcp.state == .closed else { return true }
        switch tcp.open(epfd: epfd) {
        case .connected: counters.add(.proxyUpstreamConnected)
        case .connecting: break
        case .failed:
            markDown(.proxyUpstreamConnectFailed)
            return false
        }
        return true
    }

    /// The upstream connection broke: later requests open a new one.
    private func connectionLost() {
        guard let tcp else { return }
        let stranded = tcp.close(epfd: epfd)
        counters.add(.proxyUpstreamClosed)
        // Requests still waiting for the connection never left: their callers get 503 now.
        for (bytes, reply) in stranded {
            counters.add(.proxyUpstreamUnavailable)
            bytes.withUnsafeBytes { send($0, to: reply) }
        }
    }

    // MARK: - Events on the upstream socket or connection, and the inbox

    func event(_ fd: Int32, flags: UInt32, answerer: inout Answerer, set: ServingSet, log: inout LogLines) {
        let now = WallTime.now()
        if fd == inbox.fd {
            for (key, bytes) in inbox.take() {
                let ok = bytes.withUnsafeBytes { deliverTCP(key, $0) }
                if !ok { counters.add(.proxyResponseUndeliverable) }
            }
            return
        }
        if fd == udpFD {
            receiveUDP(answerer: &answerer, set: set, now: now, log: &log)
            return
        }
        guard let tcp, fd == tcp.fd else { return }
        if tcp.state == .connecting {
            if flags & (Poll.writable | Poll.error | Poll.hangUp) == 0 { return }
            if tcp.finishConnecting(epfd: epfd) {
                counters.add(.proxyUpstreamConnected)
                if !tcp.flushIfConnected(epfd: epfd) { connectionLost() }
            } else {
                markDown(.proxyUpstreamConnectFailed)
                connectionLost()
            }
            return
        }
        if flags & Poll.writable != 0, !tcp.flushIfConnected(epfd: epfd) { connectionLost(); return }
        guard flags & (Poll.readable | Poll.peerClosed | Poll.hangUp | Poll.error) != 0 else { return }
        let open = tcp.receive { bytes in
            handleFromUpstream(bytes, transport: .tcp, answerer: &answerer, set: set, now: now, log: &log)
        }
        if !open { connectionLost() }
    }

    private func receiveUDP(answerer: inout Answerer, set: ServingSet, now: WallTime, log: inout LogLines) {
        for _ in 0..<64 {
            let n: Int
            do { n = try Socket.receive(udpFD, into: receiveBuffer, flags: Int32(MSG_DONTWAIT) | Int32(MSG_TRUNC)) } catch {
                if error == .connectionRefused { markDown(.proxyUpstreamUnreachable); continue }
                return
            }
            let length = min(n, receiveBuffer.count)
            handleFromUpstream(UnsafeRawBufferPointer(rebasing: receiveBuffer[0..<length]), transport: .udp,
                               answerer: &answerer, set: set, now: now, log: &log)
        }
    }

    private func handleFromUpstream(_ bytes: UnsafeRawBufferPointer, transport: ListenAddress.Transport,
                                    answerer: inout Answerer, set: ServingSet, now: WallTime, log: inout LogLines) {
        // Anything the upstream says shows it is there.
        downUntil = 0
        unanswered = 0
        context.upstreamAvailable = true
        let action = answerer.answer(bytes, from: MessageSource(ip: upstream.host, port: upstream.port, transport: transport, fromUpstream: true),
                                     set: set, proxy: context, now: now, into: out, fallback: side, log: &log)
        switch action {
        case .reply(let n):
            // Refusals go back the way the request came.
            let answer = UnsafeRawBufferPointer(rebasing: out[0..<n])
            if udpFD >= 0 {
                _ = try? Socket.send(udpFD, answer)
            } else if let tcp {
                tcp.queue(answer, fallback: nil)
                if !tcp.flushIfConnected(epfd: epfd) { connectionLost() }
            }
        default:
            perform(action, reply: .tcp(PeerKey(ip: upstream.host, port: upstream.port)))
        }
    }

    // MARK: - Probes and timeouts

    /// Called about once a second by the worker: probes the upstream when it is time, and
    /// gives up a TCP connect that hangs.
    func tick() {
        let now = monotonicNow()
        if let tcp, tcp.state == .connecting, now - tcp.connectStarted > ProxyForwarder.connectTimeout {
            markDown(.proxyUpstreamConnectFailed)
            connectionLost()
        }
        guard probeInterval > 0, now - lastProbe >= probeInterval else { return }
        lastProbe = now
        if unanswered >= 3 {
            // Three probes and not a word: callers get 503 until the upstream answers again.
            if downUntil < now { counters.add(.proxyUpstreamUnreachable) }
            downUntil = .greatestFiniteMagnitude
        }
        probeSequence &+= 1
        let target = SIPViaAddress(transport: context.upstreamVia.transport, host: upstream.host.description, port: upstream.port)
        let n = SIPProbe.write(via: context.upstreamVia, target: target, sequence: probeSequence, into: side)
        guard n > 0 else { return }
        unanswered += 1
        counters.add(.proxyProbesSent)
        let probe = UnsafeRawBufferPointer(rebasing: side[0..<n])
        if udpFD >= 0 {
            do { _ = try Socket.send(udpFD, probe) } catch where error == .connectionRefused { markDown(.proxyUpstreamUnreachable) } catch {}
        } else if let tcp {
            guard openIfClosed(tcp) else { return }
            tcp.queue(probe, fallback: nil)
            if !tcp.flushIfConnected(epfd: epfd) { connectionLost() }
        }
    }

    // MARK: - Back toward the caller

    private func sendDownstream(_ bytes: UnsafeRawBufferPointer, _ hop: SIPNextHop) {
        guard let ip = IPAddress(hop.host) else {
            // A sent-by name without `received`: a stateless proxy has no resolver to ask.
            counters.add(.proxyResponseUndeliverable)
            return
        }
        let key = PeerKey(ip: ip, port: hop.port)
        if hop.transport == "UDP" {
            guard let socket = udpSockets.first(where: { $0.address.host.isIPv4 == ip.isIPv4 }) else {
                counters.add(.proxyResponseUndeliverable)
                return
            }
            if sendDatagram(socket.fd, bytes, to: key) { counters.add(.proxyForwardedResponses) } else { counters.add(.sendErrors) }
        } else if hop.transport == "TCP" {
            if deliverTCP(key, bytes) || ProxyHub.shared.post(bytes, to: key) {
                counters.add(.proxyForwardedResponses)
            } else {
                counters.add(.proxyResponseUndeliverable)
            }
        } else {
            counters.add(.proxyResponseUndeliverable)
        }
    }
}
