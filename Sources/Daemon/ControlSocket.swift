import SystemCalls
import Glibc

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
        var st = stat()
        if lstat(path, &st) == 0 {
            // Only ever remove a socket: a typo in control-socket must not
            // delete someone's file.
            guard (st.st_mode & S_IFMT) == S_IFSOCK else {
                throw SystemError("control socket \(path): the path exists and is not a socket", EEXIST)
            }
            if ControlClient.isAlive(path) { throw SystemError("control socket \(path): another lookupd is running", EADDRINUSE) }
            unlink(path)
        }
        let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !folder.isEmpty, access(folder, F_OK) != 0 { mkdir(folder, 0o750) }
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
        close(fd)
        unlink(path)
    }

    /// Serves every pending connection: reads one line (briefly), answers, closes.
    func acceptAll(_ handle: (String) -> String) {
        while true {
            guard let client = try? Socket.accept(fd) else { return }
            defer { close(client) }
            // A client that connects and says nothing, or trickles its line a
            // byte at a time, must not hang the daemon: this loop also handles
            // the signals, so the whole line gets one second, not each byte.
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var line = [UInt8]()
            var byte: UInt8 = 0
            let deadline = monotonicNow() + 1
            while line.count < 256 {
                let left = deadline - monotonicNow()
                if left <= 0 { break }
                var ready = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
                let polled = poll(&ready, 1, Int32(left * 1000) + 1)
                if polled < 0 && errno == EINTR { continue }
                if polled <= 0 { break }
                let n = read(client, &byte, 1)
                if n <= 0 || byte == 0x0A { break }
                line.append(byte)
            }
            let command = String(decoding: line, as: UTF8.self).trimmingCharacters(in: " \r\t")
            var answer = handle(command)
            answer.withUTF8 { bytes in
                var offset = 0
                while offset < bytes.count {
                    let n = write(client, bytes.baseAddress! + offset, bytes.count - offset)
                    if n <= 0 { break }
                    offset += n
                }
            }
        }
    }
}

/// Talks to a running daemon's control socket (`lookupd stats`, `lookupd reload`).
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
