import Answering
import Addresses
import SystemCalls
import Configuration
import Glibc
import SIP
import Synchronization

/// One worker thread: its own UDP socket (and TCP listener) per listen
/// address, bound with SO_REUSEPORT so the kernel spreads the load, its own
/// epoll, parser, buffers, counters and log buffer. Nothing is shared with
/// other workers but the read-only serving set.
///
/// Threading: created on the main thread, then used only by its own thread
/// (`run`), except `counters`, which the control thread reads.
final class Worker: @unchecked Sendable {
    let index: Int
    let counters = WorkerCounters()
    let latency = LatencyHistogram()
    let verdictSources = VerdictSourceCounters()
    private let logSink: LogSink?
    private let current: CurrentSet
    private let stopFlag: StopFlag
    private let epfd: Int32
    private let wakeFD: Int32
    private var udpSockets: [Int32] = []
    private var tcpListeners: [Int32] = []
    private var connections: [Int32: TCPConnection] = [:]
    /// Of `connections`, those from sources outside allow-from, kept only to be answered 403.
    private var refusedConnections = 0
    /// Connections from refused sources (refuse-action = 403) a worker keeps at once, apart from
    /// tcp-max-connections: they never take an allowed source's place, and past this many they
    /// are closed at accept.
    static let refusedConnectionLimit = 64
    /// Seconds a refused source's connection may stay idle (each request on it is answered 403).
    static let refusedConnectionTimeout = 5.0
    // Only this worker's thread touches these, and never in overlapping accesses: they opt out
    // of the run-time exclusivity checks that would otherwise run for every message.
    @exclusivity(unchecked) private var set: ServingSet
    @exclusivity(unchecked) private var answerer: Answerer
    @exclusivity(unchecked) private var log: LogBuffer
    private let maxMessageSize: Int
    /// Proxy mode: the way to the upstream and back (nil in redirect mode).
    private var proxy: ProxyForwarder?
    /// Proxy mode: accepted connections by peer, for responses routed by `received`/`rport`.
    private var peerIndex: [PeerKey: Int32] = [:]

    /// Redirect mode keeps no 503 for later.
    static var noFallback: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(start: nil, count: 0) }

    // UDP batch buffers, allocated once.
    static let batch = 32
    private let inSlot: Int
    private let outSlot: Int
    private let inBuffers: UnsafeMutableRawPointer
    private let outBuffers: UnsafeMutableRawPointer
    private let names: UnsafeMutablePointer<sockaddr_storage>
    private let inVectors: UnsafeMutablePointer<iovec>
    private let outVectors: UnsafeMutablePointer<iovec>
    private let inMessages: UnsafeMutablePointer<MessageHeader>
    private let outMessages: UnsafeMutablePointer<MessageHeader>
    /// Redirect mode: the directories warmed for a batch's callers before it is answered.
    private let warmup = CallerWarmup(messages: Worker.batch)

    init(index: Int, current: CurrentSet, stopFlag: StopFlag, listen: [ListenAddress], toTagKey: UInt64,
         logSink: LogSink? = nil) throws(SystemError) {
        self.index = index
        self.logSink = logSink
        self.current = current
        self.stopFlag = stopFlag
        let set = current.get()
        self.set = set
        maxMessageSize = set.config.maxMessageSize
        let parser = SIPParser(maxMessageSize: maxMessageSize, toTagKey: toTagKey)
        answerer = Answerer(parser: parser, counters: counters, verdictSources: verdictSources)
        log = LogBuffer(level: set.config.logLevel, sink: logSink)

        inSlot = maxMessageSize + 1
        outSlot = 2 * maxMessageSize + 4096
        inBuffers = .allocate(byteCount: inSlot * Worker.batch, alignment: 64)
        outBuffers = .allocate(byteCount: outSlot * Worker.batch, alignment: 64)
        names = .allocate(capacity: Worker.batch)
        inVectors = .allocate(capacity: Worker.batch)
        outVectors = .allocate(capacity: Worker.batch)
        inMessages = .allocate(capacity: Worker.batch)
        outMessages = .allocate(capacity: Worker.batch)

        epfd = (try? Poll.create()) ?? -1
        wakeFD = (try? Poll.makeEventCounter()) ?? -1
        guard epfd >= 0, wakeFD >= 0 else { throw SystemError("epoll/eventfd for worker \(index)") }
        watch(wakeFD, Poll.readable)
        do {
            for address in listen {
                let fd = try ListenSocket.open(address, reusePort: true)
                if address.transport == .udp { udpSockets.append(fd) } else { tcpListeners.append(fd) }
                watch(fd, Poll.readable)
            }
        } catch {
            closeAll()
            throw error
        }
        if set.config.mode == .proxy, let upstream = set.config.proxy.upstream {
            do {
                let udp = Array(zip(udpSockets, listen.filter { $0.transport == .udp }))
                let forwarder = try ProxyForwarder(worker: index, upstream: upstream, listen: listen, udpSockets: udp, epfd: epfd,
                                                   counters: counters, maxMessageSize: maxMessageSize, branchKey: toTagKey,
                                                   probeInterval: set.config.proxy.probeInterval)
                forwarder.deliverTCP = { [unowned self] key, bytes in self.deliverTCP(key, bytes) }
                proxy = forwarder
            } catch {
                closeAll()
                throw error
            }
        }
    }

    deinit {
        closeAll()
        inBuffers.deallocate()
        outBuffers.deallocate()
        names.deallocate()
        inVectors.deallocate()
        outVectors.deallocate()
        inMessages.deallocate()
        outMessages.deallocate()
    }

    private func closeAll() {
        for fd in udpSockets + tcpListeners { close(fd) }
        for fd in connections.keys { close(fd) }
        udpSockets = []
        tcpListeners = []
        connections = [:]
        if epfd >= 0 { close(epfd) }
        if wakeFD >= 0 { close(wakeFD) }
    }

    private func watch(_ fd: Int32, _ events: UInt32) {
        Poll.add(epfd, fd, events)
    }

    private func rewatch(_ fd: Int32, _ events: UInt32) {
        Poll.modify(epfd, fd, events)
    }

    /// Wakes the worker from epoll_wait (used to stop it).
    func wake() { Poll.post(wakeFD) }

    /// `udp-steering = spread`: each UDP listen address's SO_REUSEPORT group picks a random
    /// socket per datagram. Called on one worker once every worker has bound its sockets, with
    /// their count: the group is then complete, and its sockets are indexed in bind order, so
    /// `count` covers exactly the workers' sockets (a restart builds new groups for a new
    /// count; `workers` and `udp-steering` are never changed by a reload).
    func spreadUDP(over count: Int, listen: [ListenAddress]) throws(SystemError) {
        for (fd, address) in zip(udpSockets, listen.filter { $0.transport == .udp }) {
            do { try Socket.spreadReusePortGroup(fd, over: count) } catch {
                throw SystemError("udp-steering = spread: attaching the reuseport program to \(address)", error.rawValue)
            }
        }
    }

    /// The ports actually bound, for tests that listen on port 0.
    var boundUDPPorts: [UInt16] { udpSockets.map(ListenSocket.boundPort) }
    var boundTCPPorts: [UInt16] { tcpListeners.map(ListenSocket.boundPort) }

    // MARK: - Loop

    func run() {
        var events = [PollEvent](repeating: PollEvent(), count: 64)
        var lastSweep = monotonicNow()
        while !stopFlag.isSet {
            let n = Poll.wait(epfd, &events, timeout: 1000)
            takeCurrentSet()
            if n > 0 {
                counters.add(.workerWakeups)
                for i in 0..<Int(n) {
                    let fd = events[i].descriptor
                    let flags = events[i].events
                    if fd == wakeFD { continue }
                    if udpSockets.contains(fd) {
                        serveUDP(fd)
                    } else if tcpListeners.contains(fd) {
                        accept(fd)
                    } else if let proxy, proxy.owns(fd) {
                        proxy.event(fd, flags: flags, answerer: &answerer, set: set, log: &log.lines)
                    } else {
                        serveTCP(fd, flags: flags)
                    }
                }
            }
            log.flush()
            let now = monotonicNow()
            if now - lastSweep >= 1 {
                sweep(now)
                proxy?.tick()
                lastSweep = now
            }
        }
        log.flush()
    }

    /// Takes a reloaded set, between batches only: the log buffer of the old set has been
    /// flushed by then, and no answer is half made with the old set.
    private func takeCurrentSet() {
        guard current.generation != set.generation else { return }
        log.flush()
        set = current.get()
        log = LogBuffer(level: set.config.logLevel, sink: logSink)
    }

    // MARK: - UDP

    /// Before a batch is answered one datagram at a time (`CallerWarmup`): a batch of one
    /// has no other searches to overlap with, so it is answered straight away.
    private func warmDirectories(_ received: Int) {
        for i in 0..<received where inMessages[i].msg_hdr.msg_flags & Int32(MSG_TRUNC) == 0 {
            warmup.add(UnsafeRawBufferPointer(start: inBuffers + i * inSlot, count: min(Int(inMessages[i].msg_len), inSlot)))
        }
        warmup.warm(set.screening)
    }

    private func serveUDP(_ fd: Int32) {
        // Drain the socket, a batch at a time, but give other sockets a turn.
        for _ in 0..<16 {
            for i in 0..<Worker.batch {
                inVectors[i] = iovec(iov_base: inBuffers + i * inSlot, iov_len: inSlot)
                inMessages[i] = MessageHeader()
                inMessages[i].msg_hdr.msg_name = UnsafeMutableRawPointer(names + i)
                inMessages[i].msg_hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
                inMessages[i].msg_hdr.msg_iov = inVectors + i
                inMessages[i].msg_hdr.msg_iovlen = 1
            }
            let received = Socket.receiveBatch(fd, inMessages, count: Worker.batch, flags: Int32(MSG_DONTWAIT))
            counters.add(.udpReceiveCalls)
            if received <= 0 { return }
            counters.add(.udpDatagramsReceived, UInt64(received))
            // Looked at after the receive, not at the wake-up: a datagram sent after `lookupd
            // reload` returned is answered with the new set, even in the 16th round of a drain.
            takeCurrentSet()
            let receivedAt = monotonicNanoseconds()
            let now = WallTime.now()
            var replies = 0
            // Proxy mode: requests answered or forwarded, timed like the answers.
            var proxied = 0
            if proxy == nil, received > 1, set.screening.warmsBatches { warmDirectories(Int(received)) }
            for i in 0..<Int(received) {
                let length = Int(inMessages[i].msg_len)
                let (ip, port) = SocketAddress.decode(UnsafeRawPointer(names + i))
                let out = UnsafeMutableRawBufferPointer(start: outBuffers + i * outSlot, count: outSlot)
                let input: UnsafeRawBufferPointer
                if inMessages[i].msg_hdr.msg_flags & Int32(MSG_TRUNC) != 0 || length > maxMessageSize {
                    // Larger than we accept: let the parser refuse it by size.
                    input = UnsafeRawBufferPointer(start: inBuffers + i * inSlot, count: inSlot)
                } else {
                    input = UnsafeRawBufferPointer(start: inBuffers + i * inSlot, count: length)
                }
                if let proxy {
                    if proxy.received(input, transport: .udp, from: PeerKey(ip: ip, port: port), udpFD: fd,
                                      answerer: &answerer, set: set, now: now, log: &log.lines) { proxied += 1 }
                    continue
                }
                let action = answerer.answer(input, from: MessageSource(ip: ip, port: port, transport: .udp), set: set,
                                             proxy: nil, now: now, into: out, fallback: Worker.noFallback, log: &log.lines)
                guard case .reply(let answer) = action else { continue }
                if answer > 65507 { counters.add(.responseTooLarge); continue }
                outVectors[replies] = iovec(iov_base: out.baseAddress, iov_len: answer)
                outMessages[replies] = MessageHeader()
                outMessages[replies].msg_hdr.msg_name = UnsafeMutableRawPointer(names + i)
                outMessages[replies].msg_hdr.msg_namelen = names[i].ss_family == sa_family_t(AF_INET)
                    ? socklen_t(MemoryLayout<sockaddr_in>.size) : socklen_t(MemoryLayout<sockaddr_in6>.size)
                outMessages[replies].msg_hdr.msg_iov = outVectors + replies
                outMessages[replies].msg_hdr.msg_iovlen = 1
                replies += 1
            }
            var sent = 0
            var attempts = 0
            while sent < replies {
                let n = Socket.sendBatch(fd, outMessages + sent, count: replies - sent, flags: 0)
                counters.add(.udpSendCalls)
                if n > 0 { sent += Int(n); continue }
                if n < 0 && errno == EINTR { continue }
                attempts += 1
                if attempts > 3 || (n < 0 && errno != EAGAIN && errno != ENOBUFS) {
                    // Skip the message the kernel refused (e.g. an unreachable peer) and go on.
                    counters.add(.sendErrors)
                    sent += 1
                    attempts = 0
                }
            }
            latency.observe(.udp, nanoseconds: monotonicNanoseconds() &- receivedAt, count: replies + proxied)
            log.flush()
            // No return to epoll_wait on a short batch: receive again until the socket is empty
            // (or the 16 rounds are up). With two workers sharing the load each one is often a
            // little ahead of it, and going back to epoll_wait after every batch of a few
            // datagrams cost up to a wake-up per 2.6 INVITEs (issue 20 item 1); by the time the
            // answers are out the peers have often sent again, so the next receive finds those
            // datagrams without a wake-up. The cost is one empty recvmmsg per wake-up. Measured
            // (docs/BENCHMARKS.md, "Two workers: receive batches and wakeups"; one flow spread
            // over 2 workers, 4 commands each, alternated): wake-ups per INVITE 0.091-0.385 ->
            // 0.026-0.228, CPU per request 7.93-11.26 -> 7.59-9.06 µs (0.58-0.86 -> 0.58-0.70 x
            // Kamailio's; equal on a quiet machine, lower when it was loaded), p99 not worse;
            // 1 worker 0.64-0.65 -> 0.66-0.70 x, within the noise but higher in every pair.
        }
    }

    // MARK: - TCP

    private func accept(_ listener: Int32) {
        while true {
            var storage = sockaddr_storage()
            let fd: Int32
            do { fd = try Socket.accept(listener, address: &storage, flags: Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)) } catch {
                return  // EAGAIN, or EMFILE: try again on the next event
            }
            let (ip, port) = withUnsafePointer(to: &storage) { SocketAddress.decode(UnsafeRawPointer($0)) }
            // Judged at accept, before the connection holds anything: sources outside
            // allow-from never take the places of allowed ones (tcp-max-connections).
            let refused = !set.policy.allows(ip)
            if refused && (set.policy.dropsRefused || refusedConnections >= Worker.refusedConnectionLimit) {
                counters.add(.tcpRefusedACL)
                close(fd)
                continue
            }
            if !refused && connections.count - refusedConnections >= set.config.tcpMaxConnections {
                counters.add(.tcpRefused)
                close(fd)
                continue
            }
            Socket.setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
            connections[fd] = TCPConnection(fd: fd, ip: ip, port: port, capacity: maxMessageSize, now: monotonicNow(), refused: refused)
            if refused { refusedConnections += 1 }
            if proxy != nil {
                peerIndex[PeerKey(ip: ip, port: port)] = fd
                ProxyHub.shared.connected(PeerKey(ip: ip, port: port), worker: index)
            }
            counters.add(.tcpAccepted)
            watch(fd, Poll.readable | Poll.peerClosed)
        }
    }

    private func serveTCP(_ fd: Int32, flags: UInt32) {
        guard let connection = connections[fd] else { return }
        if flags & Poll.writable != 0 {
            if !connection.flush() { drop(connection, .tcpClosedUnread); return }
            if !connection.hasPendingOutput { rewatch(fd, Poll.readable | Poll.peerClosed) }
        }
        guard flags & (Poll.readable | Poll.peerClosed | Poll.hangUp | Poll.error) != 0 else { return }
        let reader = StreamReader(maxMessageSize: maxMessageSize, counters: counters)
        var open = true
        let receivedAt = monotonicNanoseconds()
        let now = WallTime.now()
        let source = MessageSource(ip: connection.ip, port: connection.port, transport: .tcp)
        let out = UnsafeMutableRawBufferPointer(start: outBuffers, count: outSlot)
        var answered = 0
        // Read what is there (bounded, so one connection cannot starve the others).
        for _ in 0..<8 {
            let got = connection.receive()
            if got < 0 { open = false; break }
            if got == 0 { break }
            // As for UDP: a reload may have landed since the wake-up, and these bytes may have
            // been sent after `lookupd reload` returned (a trunk pipelines many calls).
            takeCurrentSet()
            // Answer every complete message in the buffer, queueing what goes back.
            let (consumed, close) = connection.withReceived { received in
                reader.read(received) { event in
                    switch event {
                    case .pong:
                        connection.queue([0x0D, 0x0A])
                    case .message(let bytes):
                        if let proxy {
                            if proxy.received(bytes, transport: .tcp, from: PeerKey(ip: connection.ip, port: connection.port), udpFD: nil,
                                              answerer: &answerer, set: set, now: now, log: &log.lines) { answered += 1 }
                            return
                        }
                        let action = answerer.answer(bytes, from: source, set: set, proxy: nil, now: now, into: out,
                                                     fallback: Worker.noFallback, log: &log.lines)
                        if case .reply(let n) = action {
                            connection.queue(UnsafeRawBufferPointer(rebasing: out[0..<n]))
                            answered += 1
                        }
                    }
                }
            }
            // Only what was answered: a message still arriving keeps its start time (slowloris).
            if consumed > 0 { connection.consume(consumed) }
            if close { open = false; break }
        }
        if connection.peerClosed && connection.receivedCount == 0 { open = false }
        if open {
            if !connection.flush() { drop(connection, .tcpClosedUnread); return }
            latency.observe(.tcp, nanoseconds: monotonicNanoseconds() &- receivedAt, count: answered)
            if connection.pendingOutput > TCPConnection.maxPendingOutput { drop(connection, .tcpClosedUnread); return }
            if connection.hasPendingOutput { rewatch(fd, Poll.readable | Poll.writable | Poll.peerClosed) }
            if connection.peerClosed && !connection.hasPendingOutput { drop(connection, nil) }
        } else {
            _ = connection.flush()
            drop(connection, nil)
        }
    }

    private func drop(_ connection: TCPConnection, _ reason: Counter?) {
        if let reason { counters.add(reason) }
        Poll.remove(epfd, connection.fd)
        close(connection.fd)
        connections[connection.fd] = nil
        if connection.refused { refusedConnections -= 1 }
        if proxy != nil {
            let key = PeerKey(ip: connection.ip, port: connection.port)
            if peerIndex[key] == connection.fd { peerIndex[key] = nil }
            ProxyHub.shared.disconnected(key, worker: index)
        }
    }

    /// Proxy mode: queues bytes on the accepted connection to `key` (a response routed by its
    /// Via, or an answer); false when this worker holds no such connection.
    private func deliverTCP(_ key: PeerKey, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let fd = peerIndex[key], let connection = connections[fd] else { return false }
        connection.queue(bytes)
        // Never dropped here: serveTCP may be in the middle of this connection. A failed or
        // partial write is left to the EPOLLOUT path, which drops a broken connection.
        if !connection.flush() || connection.hasPendingOutput {
            rewatch(fd, Poll.readable | Poll.writable | Poll.peerClosed)
        }
        return true
    }

    /// Closes idle connections and those stuck mid-message (a slowloris
    /// peer trickling a byte a second never finishes a message).
    private func sweep(_ now: Double) {
        let idle = Double(set.config.tcpIdleTimeout)
        for connection in Array(connections.values) {
            if connection.refused, now - connection.lastActivity > Worker.refusedConnectionTimeout {
                drop(connection, .tcpClosedIdle)
            } else if connection.receivedCount > 0, now - connection.messageStarted > TCPConnection.messageTimeout {
                drop(connection, .tcpClosedSlow)
            } else if now - connection.lastActivity > idle {
                drop(connection, .tcpClosedIdle)
            }
        }
    }
}
