import Answering
import Addresses
import SystemCalls
import Configuration
import Directory
import Glibc
import Screening
import SIP
import Synchronization
import TextFormats

/// The HTTP listener of `http-listen` (docs/OPERATIONS.md): `/metrics` in
/// the Prometheus text format, `/lookup?number=...` answering the label as
/// plain text (what FreeSWITCH's mod_cidlookup and Asterisk's CURL() read),
/// `/lookup.json?number=...` with the whole decision, the operator's
/// status page (`/`, its two files and `/status.json`: StatusPage), and
/// the write API under `/v1/entries` (WriteAPI).
///
/// HTTP/1.1 with keep-alive and pipelining, GET and HEAD, and POST and
/// DELETE for the write API, whose requests alone may carry a body (at
/// most 4 KiB, else 413). Everything a client can make it hold is bounded: the request
/// head (8 KiB, else 414/431), the connections (http-max-connections, else
/// 503), unsent output (a client that does not read is not read from
/// either), and time (a request head must be complete within 10 s, else
/// 408; idle connections are closed after 60 s).
///
/// Threading: one thread of its own (`run`); its counters are read by
/// whoever renders the metrics.
final class HTTPListener: @unchecked Sendable {
    static let maxRequestHead = 8192
    static let requestTimeout = 10.0
    static let idleTimeout = 60.0
    static let outputHighWater = 256 * 1024

    let counters: HTTPCounters
    let latency: LatencyHistogram
    private let current: CurrentSet
    private let stopFlag: StopFlag
    private let metrics: @Sendable () -> String
    private let page: StatusPage
    private let listenFD: Int32
    private let epfd: Int32
    private let wakeFD: Int32
    private var connections: [Int32: HTTPConnection] = [:]
    /// Of `connections`, those from sources outside http-allow-from, kept only to be answered
    /// 403: at most `refusedLimit`, for `refusedTimeout` seconds, never counted against
    /// http-max-connections, so refused sources cannot lock allowed ones out.
    private var refusedConnections = 0
    static let refusedLimit = 64
    static let refusedTimeout = 5.0
    private var set: ServingSet
    private var json = JSONWriter()
    private var decisionIDs = LookupDecisionIDs()
    /// Lookups are decisions: logged as calls are (`LookupLogLine`), flushed after each.
    private let logSink: LogSink?
    private var log: LogBuffer
    private var logLine = LookupLogLine()
    private let writes: WriteAPI
    /// `number=` is read as `lookupd query` and the SIP path read a caller (a URI or a number).
    private let identities = SIPIdentityReader(capacity: 4096)

    init(address: ListenAddress, current: CurrentSet, stopFlag: StopFlag, counters: HTTPCounters, latency: LatencyHistogram,
         page: StatusPage, logger: Logger = Logger(level: .info), logSink: LogSink? = nil,
         metrics: @escaping @Sendable () -> String) throws(SystemError) {
        self.page = page
        self.logSink = logSink
        log = LogBuffer(level: current.get().config.logLevel, sink: logSink)
        writes = WriteAPI(logger: logger)
        self.current = current
        self.stopFlag = stopFlag
        self.counters = counters
        self.latency = latency
        self.metrics = metrics
        set = current.get()
        listenFD = try ListenSocket.open(address, reusePort: false)
        epfd = (try? Poll.create()) ?? -1
        wakeFD = (try? Poll.makeEventCounter()) ?? -1
        guard epfd >= 0, wakeFD >= 0 else {
            close(listenFD)
            if epfd >= 0 { close(epfd) }
            if wakeFD >= 0 { close(wakeFD) }
            throw SystemError("epoll/eventfd for the HTTP listener")
        }
        watch(listenFD, Poll.readable, add: true)
        watch(wakeFD, Poll.readable, add: true)
    }

    deinit {
        for fd in connections.keys { close(fd) }
        close(listenFD)
        close(epfd)
        close(wakeFD)
    }

    var boundPort: UInt16 { ListenSocket.boundPort(listenFD) }

    func wake() { Poll.post(wakeFD) }

    private func watch(_ fd: Int32, _ events: UInt32, add: Bool) {
        if add { Poll.add(epfd, fd, events) } else { Poll.modify(epfd, fd, events) }
    }

    func run() {
        var events = [PollEvent](repeating: PollEvent(), count: 64)
        var lastSweep = monotonicNow()
        while !stopFlag.isSet {
            let n = Poll.wait(epfd, &events, timeout: 1000)
            if current.generation != set.generation { set = current.get() }
            if n > 0 {
                for i in 0..<Int(n) {
                    let fd = events[i].descriptor
                    if fd == wakeFD { continue }
                    if fd == listenFD { accept(); continue }
                    if let connection = connections[fd] { serve(connection, events: events[i].events) }
                }
            }
            let now = monotonicNow()
            if now - lastSweep >= 1 {
                sweep(now)
                page.tick()
                lastSweep = now
            }
        }
    }

    // MARK: - Connections

    private func accept() {
        while true {
            var storage = sockaddr_storage()
            let fd: Int32
            do { fd = try Socket.accept(listenFD, address: &storage, flags: Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)) } catch {
                return
            }
            let (ip, _) = withUnsafePointer(to: &storage) { SocketAddress.decode(UnsafeRawPointer($0)) }
            let allowed = isAllowed(ip)
            if !allowed && refusedConnections >= HTTPListener.refusedLimit {
                counters.add(.refusedACL)
                close(fd)
                continue
            }
            if allowed && connections.count - refusedConnections >= set.config.operations.httpMaxConnections {
                // Best effort: a fresh socket's send buffer takes this small answer whole.
                counters.add(.refusedLimit)
                counters.add(.other, code: 503)
                let body = "too many HTTP connections\n"
                let bytes = Array((HTTPListener.head(503, "Service Unavailable", contentType: "text/plain; charset=utf-8",
                                                     length: body.utf8.count, keepAlive: false) + body).utf8)
                bytes.withUnsafeBytes { _ = try? FileDescriptor(rawValue: fd).write($0) }
                Glibc.shutdown(fd, Int32(SHUT_WR))
                close(fd)
                continue
            }
            let connection = HTTPConnection(fd: fd, peer: ip, allowed: allowed, now: monotonicNow())
            connections[fd] = connection
            if allowed { counters.add(.accepted) } else {
                refusedConnections += 1
                counters.add(.refusedACL)
            }
            counters.open.store(connections.count - refusedConnections, ordering: .relaxed)
            watch(fd, Poll.readable | Poll.peerClosed, add: true)
        }
    }

    private func isAllowed(_ ip: IPAddress) -> Bool {
        guard let allow = set.config.operations.httpAllowFrom ?? set.config.allowFrom else { return true }
        return allow.contains { $0.contains(ip) }
    }

    private func serve(_ c: HTTPConnection, events: UInt32) {
        if events & Poll.error != 0 { drop(c, .closedError); return }
        let arrivedAt = monotonicNanoseconds()
        if events & (Poll.readable | Poll.peerClosed | Poll.hangUp) != 0 && !c.peerClosed {
            switch c.receive() {
            case .error: drop(c, .closedError); return
            case .closed: c.peerClosed = true
            case .data: break
            }
        }
        var answered = 0
        if c.closing {
            // After a `Connection: close` answer the peer's further bytes are read and ignored.
            c.discardInput()
        } else {
            answered = process(c)
        }
        if !c.flush() { drop(c, .closedError); return }
        if answered > 0 { latency.observe(.http, nanoseconds: monotonicNanoseconds() &- arrivedAt, count: answered) }
        if c.peerClosed {
            if !c.hasPendingOutput { drop(c, nil); return }
            c.startClosing(monotonicNow())
        }
        afterWrite(c)
    }

    /// Once the last answer of a closing connection is out, half-closes it
    /// and waits for the peer to close: closing at once could reset the
    /// connection and destroy the answer before the peer read it.
    private func afterWrite(_ c: HTTPConnection) {
        if c.closing && !c.hasPendingOutput && !c.shutDown {
            Glibc.shutdown(c.fd, Int32(SHUT_WR))
            c.shutDown = true
        }
        updateInterest(c)
    }

    private func updateInterest(_ c: HTTPConnection) {
        var events: UInt32 = 0
        if c.hasPendingOutput { events |= Poll.writable }
        // A client that pipelines without reading its answers is not read from until it does;
        // one that has closed its side is not watched for input (it would be reported forever).
        if c.pendingOutput < HTTPListener.outputHighWater && !c.peerClosed { events |= Poll.readable | Poll.peerClosed }
        if events != c.interest {
            c.interest = events
            watch(c.fd, events, add: false)
        }
    }

    private func drop(_ c: HTTPConnection, _ reason: HTTPCounters.Event?) {
        if let reason { counters.add(reason) }
        Poll.remove(epfd, c.fd)
        close(c.fd)
        connections[c.fd] = nil
        if !c.allowed { refusedConnections -= 1 }
        counters.open.store(connections.count - refusedConnections, ordering: .relaxed)
    }

    private func sweep(_ now: Double) {
        for c in Array(connections.values) {
            if !c.allowed, now - c.accepted > HTTPListener.refusedTimeout {
                drop(c, nil)
            } else if c.closing {
                if now - c.closingSince > HTTPListener.requestTimeout { drop(c, nil) }
            } else if c.receivedCount > 0, now - c.requestStarted > HTTPListener.requestTimeout {
                counters.add(.closedSlow)
                answer(c, .other, 408, "Request Timeout", "request not completed in time\n", keepAlive: false, head: false)
                if !c.flush() { drop(c, .closedError); continue }
                afterWrite(c)
            } else if c.receivedCount == 0, now - c.lastActivity > HTTPListener.idleTimeout {
                drop(c, .closedIdle)
            }
        }
    }

    // MARK: - Requests

    /// Answers every complete request in the buffer; returns how many.
    private func process(_ c: HTTPConnection) -> Int {
        var answered = 0
        while !c.closing && c.pendingOutput < HTTPListener.outputHighWater {
            // The buffer has room for a body behind the head: a head is too large past 8 KiB even when it fits.
            let found = c.withReceived { HTTPRequestHead.end(of: $0) }
            guard let headEnd = found, headEnd.headLength <= HTTPListener.maxRequestHead else {
                if found != nil || c.receivedCount >= HTTPListener.maxRequestHead {
                    let hasLine = c.withReceived { $0.prefix(HTTPListener.maxRequestHead).contains(0x0A) }
                    if hasLine {
                        answer(c, .other, 431, "Request Header Fields Too Large", "request head larger than 8192 bytes\n", keepAlive: false, head: false)
                    } else {
                        answer(c, .other, 414, "URI Too Long", "request line longer than 8192 bytes\n", keepAlive: false, head: false)
                    }
                    answered += 1
                }
                break
            }
            let parsed = c.withReceived { HTTPRequestHead.parse(UnsafeRawBufferPointer(rebasing: $0[0..<headEnd.headLength])) }
            var body: [UInt8] = []
            if case .success(let request) = parsed, request.contentLength > 0 {
                // The body follows the head: wait until it is all there (the 10 s request timeout applies).
                let total = headEnd.consumed + request.contentLength
                guard c.receivedCount >= total else { break }
                body = c.withReceived { Array($0[headEnd.consumed..<total]) }
                c.consume(total)
            } else {
                c.consume(headEnd.consumed)
            }
            answered += 1
            switch parsed {
            case .failure(let error):
                answer(c, .other, error.status, error.reason, error.message + "\n", keepAlive: false, head: false)
            case .success(let request):
                handle(request, body: body, on: c)
            }
        }
        return answered
    }

    private func handle(_ request: HTTPRequestHead, body: [UInt8], on c: HTTPConnection) {
        let head = request.method == "HEAD"
        let endpoint: HTTPCounters.Endpoint
        switch request.path {
        case _ where WriteAPI.handles(request.path): endpoint = .entries
        case "/metrics": endpoint = .metrics
        case "/lookup": endpoint = .lookup
        case "/lookup.json": endpoint = .lookupJSON
        case "/status.json": endpoint = .statusJSON
        case _ where StatusPage.assets[request.path] != nil: endpoint = .page
        default: endpoint = .other
        }
        guard c.allowed else {
            answer(c, endpoint, 403, "Forbidden", "source address not allowed (http-allow-from)\n", keepAlive: false, head: head)
            return
        }
        if endpoint == .entries {
            let a = writes.answer(method: request.method, path: request.path, query: request.query, body: body,
                                  authorization: request.authorization, client: c.peer, config: set.config)
            answer(c, endpoint, a.status, a.reason, a.body, keepAlive: request.keepAlive && a.status < 400, head: head,
                   contentType: a.contentType, extra: a.extra)
            return
        }
        guard body.isEmpty else {
            // Counted as before the write API existed, when the head alone refused a body.
            answer(c, .other, 413, "Content Too Large", "requests take no body (only the write API's POST does)\n", keepAlive: false, head: false)
            return
        }
        guard request.method == "GET" || head else {
            answer(c, endpoint, 405, "Method Not Allowed", "only GET and HEAD\n", keepAlive: request.keepAlive, head: false,
                   extra: "Allow: GET, HEAD\r\n")
            return
        }
        switch endpoint {
        case .metrics:
            answer(c, endpoint, 200, "OK", metrics(), keepAlive: request.keepAlive, head: head,
                   contentType: "text/plain; version=0.0.4; charset=utf-8")
        case .lookup, .lookupJSON:
            let query: HTTPQuery
            switch HTTPQuery.parse(request.query) {
            case .failure(let error):
                answer(c, endpoint, 400, "Bad Request", error.message + "\n", keepAlive: request.keepAlive, head: head)
                return
            case .success(let q): query = q
            }
            guard let number = query.value("number") else {
                answer(c, endpoint, 400, "Bad Request", "missing parameter 'number'\n", keepAlive: request.keepAlive, head: head)
                return
            }
            guard number.count <= 256, (query.value("callee")?.count ?? 0) <= 256 else {
                answer(c, endpoint, 400, "Bad Request", "parameter longer than 256 bytes\n", keepAlive: request.keepAlive, head: head)
                return
            }
            let callee = query.value("callee") ?? []
            let screening = set.screening
            let now = WallTime.now()
            func decide() -> Decision {
                number.withUnsafeBytes { caller in
                    callee.withUnsafeBytes { callee in
                        identities.withIdentity(caller) { identity in set.lookup(caller: identity, callee: callee, now: now) }
                    }
                }
            }
            var decision = decide()
            // The label copied before anything is answered: in a file served from disk it can
            // vanish after the lookup (cut in place), and the answer would be the file's verdict
            // without its label. Decided again, that file's lookups fail (503 below).
            var labelBytes: [UInt8] = []
            for _ in 0..<screening.directories.count {
                guard let label = decision.label else { break }
                if let copy = screening.withIntactLabel(label, { Array($0) }) {
                    labelBytes = copy
                    break
                }
                decision = decide()
            }
            if let damaged = decision.damagedDirectory {
                // No answer from a directory that failed its checksums (or without it).
                let name = screening.directories[damaged].name
                answer(c, endpoint, 503, "Service Unavailable", "directory \(name) is damaged; no answer\n",
                       keepAlive: request.keepAlive, head: head)
                return
            }
            let id = decisionIDs.next()
            if log.lines.level != set.config.logLevel { log = LogBuffer(level: set.config.logLevel, sink: logSink) }
            number.withUnsafeBytes { input in
                callee.withUnsafeBytes { logLine.log(decision, input: input, callee: $0, id: id, set: set, now: now, to: &log.lines) }
            }
            log.flush()
            if endpoint == .lookup {
                answer(c, endpoint, 200, "OK", labelBytes, keepAlive: request.keepAlive, head: head,
                       contentType: "text/plain; charset=utf-8")
            } else {
                json.reset()
                let context = CallContext(time: screening.usesTime ? set.policy.zone.localTime(utc: now.seconds) : nil)
                number.withUnsafeBytes { screening.writeJSON(decision, input: $0, context: context, id: id, to: &json) }
                // writeJSON read the label again: a page that vanished since the copy above
                // would have given zeros, which must not be answered as the file's label.
                if let label = decision.label, screening.withIntactLabel(label, { _ in true }) == nil {
                    answer(c, endpoint, 503, "Service Unavailable", "directory file changed while served; no answer\n",
                           keepAlive: request.keepAlive, head: head)
                    return
                }
                let body = json.line
                answer(c, endpoint, 200, "OK", body, keepAlive: request.keepAlive, head: head,
                       contentType: "application/json")
            }
        case .page:
            let asset = StatusPage.assets[request.path]!
            answer(c, endpoint, 200, "OK", asset.body, keepAlive: request.keepAlive, head: head, contentType: asset.contentType,
                   extra: StatusPage.pageHeaders)
        case .statusJSON:
            answer(c, endpoint, 200, "OK", page.document(set: set), keepAlive: request.keepAlive, head: head,
                   contentType: "application/json", extra: StatusPage.documentHeaders)
        case .other, .entries:
            answer(c, endpoint, 404, "Not Found",
                   "not found: try / (the status page), /status.json, /metrics, /lookup?number=N or /lookup.json?number=N\n",
                   keepAlive: request.keepAlive, head: head)
        }
    }

    private func answer(_ c: HTTPConnection, _ endpoint: HTTPCounters.Endpoint, _ status: Int, _ reason: String, _ body: String,
                        keepAlive: Bool, head: Bool, contentType: String = "text/plain; charset=utf-8", extra: String = "") {
        answer(c, endpoint, status, reason, Array(body.utf8), keepAlive: keepAlive, head: head, contentType: contentType, extra: extra)
    }

    private func answer(_ c: HTTPConnection, _ endpoint: HTTPCounters.Endpoint, _ status: Int, _ reason: String, _ body: [UInt8],
                        keepAlive: Bool, head: Bool, contentType: String = "text/plain; charset=utf-8", extra: String = "") {
        counters.add(endpoint, code: status)
        c.queue(Array(HTTPListener.head(status, reason, contentType: contentType, length: body.count, keepAlive: keepAlive, extra: extra).utf8))
        if !head { c.queue(body) }
        if !keepAlive { c.startClosing(monotonicNow()) }
    }

    static func head(_ status: Int, _ reason: String, contentType: String, length: Int, keepAlive: Bool, extra: String = "") -> String {
        "HTTP/1.1 \(status) \(reason)\r\nContent-Type: \(contentType)\r\nContent-Length: \(length)\r\n"
            + (keepAlive ? "" : "Connection: close\r\n") + extra + "\r\n"
    }
}

/// One HTTP connection's buffers.
///
/// Threading: the listener thread only.
final class HTTPConnection {
    enum Received { case data, closed, error }

    let fd: Int32
    let peer: IPAddress
    let allowed: Bool
    let accepted: Double
    private var input: [UInt8]
    private(set) var receivedCount = 0
    private var output = PendingOutput()
    private(set) var lastActivity: Double
    private(set) var requestStarted: Double
    /// An answer with `Connection: close` was queued: no more requests are read.
    private(set) var closing = false
    private(set) var closingSince = 0.0
    /// Our side is shut down for writing (everything was sent).
    var shutDown = false
    /// The peer closed its side (read returned 0).
    var peerClosed = false
    var interest = Poll.readable | Poll.peerClosed

    init(fd: Int32, peer: IPAddress, allowed: Bool, now: Double) {
        self.fd = fd
        self.peer = peer
        self.allowed = allowed
        accepted = now
        // Room for a whole head and, behind it, a write API body.
        input = [UInt8](repeating: 0, count: HTTPListener.maxRequestHead + WriteAPI.maxBody)
        lastActivity = now
        requestStarted = now
    }

    var hasPendingOutput: Bool { !output.isEmpty }
    var pendingOutput: Int { output.count }

    func startClosing(_ now: Double) {
        guard !closing else { return }
        closing = true
        closingSince = now
    }

    /// Reads what is there, up to the free space. A short read means the
    /// socket is drained for now: not asking again saves a read(2) that
    /// would only say EAGAIN (epoll is level-triggered and reports what is left).
    func receive() -> Received {
        while receivedCount < input.count {
            let space = input.count - receivedCount
            let n: Int
            do { n = try input.withMutableBytes { (raw) throws(Errno) in try FileDescriptor(rawValue: fd).read(into: UnsafeMutableRawBufferPointer(rebasing: raw[receivedCount...])) } } catch {
                return error == .wouldBlock ? .data : .error
            }
            if n > 0 {
                let now = monotonicNow()
                if receivedCount == 0 { requestStarted = now }
                receivedCount += n
                lastActivity = now
                if n < space { return .data }
                continue
            }
            return .closed
        }
        return .data
    }

    func discardInput() { receivedCount = 0 }

    func withReceived<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        input.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[0..<receivedCount])) }
    }

    func consume(_ count: Int) {
        let rest = receivedCount - count
        if rest > 0 { input.withUnsafeMutableBytes { _ = memmove($0.baseAddress!, $0.baseAddress! + count, rest) } }
        receivedCount = rest
        requestStarted = monotonicNow()
    }

    func queue(_ bytes: [UInt8]) { output.append(bytes) }

    /// Writes what the socket takes; false on a write error.
    func flush() -> Bool { output.flush(to: fd) }
}

/// A parsed request line and the headers lookupd cares about (RFC 9112).
struct HTTPRequestHead {
    struct Failure: Error {
        var status: Int
        var reason: String
        var message: String
    }

    var method: String
    var path: String
    var query: [UInt8]
    var keepAlive: Bool
    /// The body's length (Content-Length); only the write API takes one.
    var contentLength = 0
    /// `Authorization`, as sent.
    var authorization: String? = nil

    /// Where the head ends: its length without the blank line, and with it.
    static func end(of bytes: UnsafeRawBufferPointer) -> (headLength: Int, consumed: Int)? {
        // A bare LF ends lines too (RFC 9112 §2.2 allows accepting it).
        var i = 0
        while let newline = bytes[i...].firstIndex(of: 0x0A) {
            let next = newline + 1
            if next < bytes.count, bytes[next] == 0x0A { return (newline + 1, next + 1) }
            if next + 1 < bytes.count, bytes[next] == 0x0D, bytes[next + 1] == 0x0A { return (newline + 1, next + 2) }
            i = next
        }
        return nil
    }

    static func parse(_ head: UnsafeRawBufferPointer) -> Result<HTTPRequestHead, Failure> {
        func bad(_ message: String) -> Result<HTTPRequestHead, Failure> {
            .failure(Failure(status: 400, reason: "Bad Request", message: message))
        }
        var lines: [UnsafeRawBufferPointer] = []
        var start = 0
        while start < head.count, let newline = head[start...].firstIndex(of: 0x0A) {
            var end = newline
            if end > start, head[end - 1] == 0x0D { end -= 1 }
            lines.append(UnsafeRawBufferPointer(rebasing: head[start..<end]))
            start = newline + 1
        }
        // RFC 9112 §2.2: empty lines before the request line are ignored.
        while let first = lines.first, first.isEmpty { lines.removeFirst() }
        guard let requestLine = lines.first else { return bad("empty request") }
        let parts = requestLine.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else { return bad("malformed request line") }
        guard parts[0].allSatisfy(isTokenByte) else { return bad("malformed method") }
        let version = String(decoding: parts[2], as: UTF8.self)
        let minor: Int
        switch version {
        case "HTTP/1.1": minor = 1
        case "HTTP/1.0": minor = 0
        default:
            if version.hasPrefix("HTTP/"), version.count == 8 {
                return .failure(Failure(status: 505, reason: "HTTP Version Not Supported", message: "only HTTP/1.0 and HTTP/1.1"))
            }
            return bad("malformed HTTP version")
        }
        let target = parts[1]
        guard target.first == UInt8(ascii: "/"), target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return bad("request target must be an absolute path")
        }
        let questionMark = target.firstIndex(of: UInt8(ascii: "?"))
        let path = String(decoding: target[target.startIndex..<(questionMark ?? target.endIndex)], as: UTF8.self)
        let query = questionMark.map { Array(target[($0 + 1)...]) } ?? []

        var keepAlive = minor == 1
        var host = false
        var contentLength = 0
        var authorization: String? = nil
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else { return bad("malformed header line") }
            let nameBytes = line[line.startIndex..<colon]
            // Obsolete line folding and whitespace before the colon are refused (RFC 9112 §5.1, §5.2).
            guard nameBytes.allSatisfy(isTokenByte) else { return bad("malformed header name") }
            // Only five headers matter; the others are checked for shape and skipped unread.
            func value() -> String { String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: " \t").lowercased() }
            if isName(nameBytes, "host") {
                if host { return bad("more than one Host header") }
                host = true
            } else if isName(nameBytes, "connection") {
                let options = value().split(separator: ",").map { String($0).trimmingCharacters(in: " \t") }
                if options.contains("close") { keepAlive = false } else if options.contains("keep-alive") { keepAlive = true }
            } else if isName(nameBytes, "content-length") {
                guard let length = Int(value()), length >= 0 else { return bad("malformed Content-Length") }
                if length > WriteAPI.maxBody {
                    return .failure(Failure(status: 413, reason: "Content Too Large", message: "request body larger than \(WriteAPI.maxBody) bytes"))
                }
                contentLength = length
            } else if isName(nameBytes, "authorization") {
                authorization = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: " \t")
            } else if isName(nameBytes, "transfer-encoding") {
                return .failure(Failure(status: 501, reason: "Not Implemented", message: "requests take no body (Transfer-Encoding)"))
            }
        }
        if minor == 1 && !host { return bad("HTTP/1.1 request without Host header") }
        return .success(HTTPRequestHead(method: String(decoding: parts[0], as: UTF8.self), path: path, query: query, keepAlive: keepAlive,
                                        contentLength: contentLength, authorization: authorization))
    }
}

/// RFC 9110 tchar.
private func isTokenByte(_ c: UInt8) -> Bool {
    switch c {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
         UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
         UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
         UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
        return true
    default:
        return false
    }
}

/// ASCII case-insensitive comparison of a header name with a lower-case one.
private func isName(_ bytes: Slice<UnsafeRawBufferPointer>, _ name: StaticString) -> Bool {
    guard bytes.count == name.utf8CodeUnitCount else { return false }
    var i = 0
    for c in bytes {
        let lower = c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c | 0x20 : c
        if lower != name.utf8Start[i] { return false }
        i += 1
    }
    return true
}

/// The query string, percent-decoded. `+` stays a plus sign: callers' numbers
/// are written +8613800138000 far more often than form-encoded text reaches
/// this endpoint (%2B and %20 work as usual).
struct HTTPQuery {
    private var pairs: [(String, [UInt8])] = []

    func value(_ name: String) -> [UInt8]? { pairs.first { $0.0 == name }?.1 }

    struct Malformed: Error { var message: String }

    static func parse(_ query: [UInt8]) -> Result<HTTPQuery, Malformed> {
        var result = HTTPQuery()
        for part in query.split(separator: UInt8(ascii: "&")) {
            let eq = part.firstIndex(of: UInt8(ascii: "="))
            guard let name = decode(part[part.startIndex..<(eq ?? part.endIndex)]),
                  let value = decode(eq.map { part[($0 + 1)...] } ?? []) else {
                return .failure(Malformed(message: "malformed percent-encoding in the query"))
            }
            result.pairs.append((String(decoding: name, as: UTF8.self), value))
        }
        return .success(result)
    }

    private static func decode(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        var out: [UInt8] = []
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let c = bytes[i]
            if c == UInt8(ascii: "%") {
                guard i + 2 < bytes.endIndex, let hi = TextInput.hexValue(bytes[i + 1]), let lo = TextInput.hexValue(bytes[i + 2]) else { return nil }
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(c)
                i += 1
            }
        }
        return out
    }
}
