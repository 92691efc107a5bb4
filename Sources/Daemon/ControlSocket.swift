import Glibc
import SystemCalls

/// The control socket: a Unix stream socket taking one command line per
/// connection (`stats`, `reload`, `ping`) and answering with text.
///
/// Its mode is 0660, so only the daemon's user and group (root and the
/// lookupd group under the shipped unit) can connect.
/// Threading: used by the control loop only.
final class ControlServer {
    let fd: Int32
    let path: String

    init(path: String) throws(SystemError) {
        self.path = path
        // A socket file left by a daemon that died: remove it, unless a live
        // daemon still answers on it.
        if let st = FileSystem.statusIfPresent(path, followLinks: false) {
            // Only ever remove a socket: a typo in control-socket must not
            // delete someone's file.
            guard st.kind == .socket else {
                throw SystemError("control socket \(path): the path exists and is not a socket", EEXIST)
            }
            if ControlClient.isAlive(path) { throw SystemError("control socket \(path): another lookupd is running", EADDRINUSE) }
            FileSystem.removeIfPresent(path)
        }
        let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !folder.isEmpty, !FileSystem.exists(folder) { try? FileSystem.makeFolder(folder) }
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("control socket") }
        let bound: Int32
        // Created 0660 (a chmod after bind alone would leave the umask's
        // mode for a moment). No other thread runs yet.
        let mask = umask(0o117)
        defer { umask(mask) }
        do { bound = try UnixAddress.with(path) { bind(fd, $0, $1) } } catch { close(fd); throw error }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw SystemError("bind control socket \(path)", code)
        }
        chmod(path, 0o660)
        guard listen(fd, 16) == 0 else {
            let code = errno
            close(fd)
            throw SystemError("listen on control socket \(path)", code)
        }
    }

    func shutdown() {
        for client in clients.values { client.fd.close() }
        clients = [:]
        close(fd)
        FileSystem.removeIfPresent(path)
    }

    // MARK: - Clients, served without ever waiting on one

    /// One connected client: its command line as it arrives, then its answer as the socket
    /// takes it. Nothing the control loop does waits for a client: a silent or slow one only
    /// holds its own place, for `lineTimeout` seconds to say its line and `writeTimeout` to
    /// take its answer.
    final class Client {
        let fd: FileDescriptor
        let id: Int
        var line: [UInt8] = []
        var output = PendingOutput()
        /// Waiting for an answer computed elsewhere (a reload): nothing is read meanwhile.
        var waiting = false
        var answered = false
        var deadline: Double

        init(fd: FileDescriptor, id: Int, now: Double) {
            self.fd = fd
            self.id = id
            deadline = now + ControlServer.lineTimeout
        }
    }

    static let lineTimeout = 1.0
    static let writeTimeout = 5.0
    /// Clients served at once; past this, the oldest still silent one is closed.
    static let maxClients = 32
    static let maxLine = 256

    private var clients: [Int32: Client] = [:]
    private var nextID = 0

    func owns(_ descriptor: Int32) -> Bool { clients[descriptor] != nil }

    /// Accepts every pending connection (non-blocking) into `epfd`.
    func acceptAll(epfd: Int32) {
        while let client = try? Socket.accept(fd, flags: Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)) {
            if clients.count >= ControlServer.maxClients {
                // Full of clients that have not said their line: the oldest of those makes room,
                // so silent clients cannot keep `lookupd stats` or `reload` out.
                guard let oldest = clients.values.filter({ !$0.waiting && !$0.answered }).min(by: { $0.id < $1.id }) else {
                    close(client)
                    continue
                }
                drop(oldest, epfd: epfd)
            }
            nextID += 1
            clients[client] = Client(fd: FileDescriptor(rawValue: client), id: nextID, now: monotonicNow())
            Poll.add(epfd, client, Poll.readable | Poll.peerClosed)
        }
    }

    /// Reads what a client sent; once its line is complete (LF, `maxLine` bytes, or the end of
    /// its input), `handle` gives the answer, or nil when it will come later (`answer(id:)`).
    func serve(_ descriptor: Int32, epfd: Int32, _ handle: (String, Int) -> String?) {
        guard let client = clients[descriptor] else { return }
        if client.answered { return flush(client, epfd: epfd) }
        var complete = false
        var chunk = [UInt8](repeating: 0, count: ControlServer.maxLine)
        if client.waiting {
            // Only a hang-up is of interest now; anything more it sends is not a command.
            let n = try? chunk.withMutableBytes { (raw) throws(Errno) in try client.fd.read(into: raw) }
            if n == 0 { drop(client, epfd: epfd) }
            return
        }
        while !complete {
            let n: Int
            do { n = try chunk.withMutableBytes { (raw) throws(Errno) in try client.fd.read(into: raw) } } catch {
                if error == .wouldBlock { break }
                return drop(client, epfd: epfd)
            }
            if n == 0 { complete = true; break }
            for b in chunk[0..<n] {
                if b == 0x0A || client.line.count >= ControlServer.maxLine { complete = true; break }
                client.line.append(b)
            }
        }
        if complete { take(client, epfd: epfd, handle) }
    }

    /// Delivers an answer computed later to the client `id` (gone clients are skipped).
    func answer(id: Int, _ text: String, epfd: Int32) {
        guard let client = clients.values.first(where: { $0.id == id }) else { return }
        client.waiting = false
        reply(client, text, epfd: epfd)
    }

    /// Closes clients past their deadline; a client that sent part of a line by then has it
    /// taken as its command, as a line cut short.
    func sweep(epfd: Int32, now: Double, _ handle: (String, Int) -> String?) {
        for client in Array(clients.values) where now >= client.deadline && !client.waiting {
            if client.answered { drop(client, epfd: epfd) } else { take(client, epfd: epfd, handle) }
        }
    }

    private func take(_ client: Client, epfd: Int32, _ handle: (String, Int) -> String?) {
        let command = String(decoding: client.line, as: UTF8.self).trimmingCharacters(in: " \r\t")
        if let answer = handle(command, client.id) { reply(client, answer, epfd: epfd) } else { client.waiting = true }
    }

    private func reply(_ client: Client, _ text: String, epfd: Int32) {
        client.output.append(Array(text.utf8))
        client.answered = true
        client.deadline = monotonicNow() + ControlServer.writeTimeout
        Poll.modify(epfd, client.fd.rawValue, Poll.writable)
        flush(client, epfd: epfd)
    }

    private func flush(_ client: Client, epfd: Int32) {
        guard client.answered else { return }
        if !client.output.flush(to: client.fd.rawValue) || client.output.isEmpty { drop(client, epfd: epfd) }
    }

    private func drop(_ client: Client, epfd: Int32) {
        Poll.remove(epfd, client.fd.rawValue)
        client.fd.close()
        clients[client.fd.rawValue] = nil
    }
}

/// Talks to a running daemon's control socket (`lookupd stats`, `lookupd reload`).
///
/// Threading: any thread (each call opens its own connection).
public enum ControlClient {
    /// Sends `command` and returns the whole answer.
    public static func send(_ command: String, to path: String, timeout: Int = 600) throws(SystemError) -> String {
        let fd = try connect(path)
        defer { close(fd) }
        var t = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, socklen_t(MemoryLayout<timeval>.size))
        var line = command + "\n"
        let written = line.withUTF8 { write(fd, $0.baseAddress, $0.count) }
        guard written == line.utf8.count else { throw SystemError("write to \(path)") }
        var answer = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError("read from \(path)")
            }
            if n == 0 { break }
            answer.append(contentsOf: buffer[0..<n])
        }
        return String(decoding: answer, as: UTF8.self)
    }

    static func isAlive(_ path: String) -> Bool {
        guard let fd = try? connect(path) else { return false }
        close(fd)
        return true
    }

    private static func connect(_ path: String) throws(SystemError) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("socket") }
        let rc: Int32
        do { rc = try UnixAddress.with(path) { Glibc.connect(fd, $0, $1) } } catch { close(fd); throw error }
        guard rc == 0 else {
            let code = errno
            close(fd)
            throw SystemError("connect to control socket \(path) (is lookupd serve running?)", code)
        }
        return fd
    }
}

extension String {
    func trimmingCharacters(in set: String) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return String(s)
    }
}
