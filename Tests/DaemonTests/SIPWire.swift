import Foundation
import Glibc
import XCTest

// Raw SIP over loopback sockets, and just enough response parsing to check
// answers. Deliberately independent of Sources/SIP: the daemon's own parser
// must not be the judge of its answers.

/// A UDP socket bound to a loopback address (127.0.0.1 unless told), port chosen by the kernel.
final class UDPPeer {
    let fd: Int32
    let ip: String
    let port: UInt16

    init(ip: String = "127.0.0.1", port: UInt16 = 0) throws {
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError.failed("socket: \(String(cString: strerror(errno)))") }
        var size: Int32 = 4 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        guard bindLoopback(fd, ip: ip, port: port) else {
            let e = errno
            close(fd)
            throw HarnessError.failed("bind \(ip):\(port): \(String(cString: strerror(e)))")
        }
        self.ip = ip
        self.port = boundPort(fd)
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8], to port: UInt16, ip: String = "127.0.0.1") {
        var address = socketAddress(ip, port)
        let n = bytes.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buffer.baseAddress, buffer.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        if n != bytes.count { XCTFail("sendto 127.0.0.1:\(port) (\(bytes.count) bytes): \(n < 0 ? String(cString: strerror(errno)) : "sent \(n)")") }
    }

    /// The next datagram, or nil when none arrives within `timeout` seconds.
    func receive(timeout: Double) -> [UInt8]? {
        let deadline = monotonicSeconds() + timeout
        while true {
            let left = deadline - monotonicSeconds()
            if left <= 0 { return nil }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(max(1, (left * 1000).rounded(.up))))
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n < 0 { if errno == EAGAIN || errno == EINTR { continue }; return nil }
            return Array(buffer[0..<n])
        }
    }

    /// Sends and waits for one answer.
    func exchange(_ bytes: [UInt8], port: UInt16, timeout: Double = 2) -> SIPAnswer? {
        send(bytes, to: port)
        return receive(timeout: timeout).flatMap(SIPAnswer.init)
    }

    /// Throws away anything queued.
    func drain() { while receive(timeout: 0.001) != nil {} }
}

/// A TCP socket bound to `ip` (a loopback address), connected to 127.0.0.1:`port`.
func connectLoopback(to port: UInt16, from ip: String) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw HarnessError.failed("socket: \(String(cString: strerror(errno)))") }
    guard bindLoopback(fd, ip: ip, port: 0) else {
        let e = errno
        close(fd)
        throw HarnessError.failed("bind \(ip): \(String(cString: strerror(e)))")
    }
    try connectOrClose(fd, to: socketAddress("127.0.0.1", port), "127.0.0.1:\(port)")
    return fd
}

/// Writes all of `bytes` to a connected stream socket; stops quietly when the daemon has
/// closed the connection (the next read tells).
func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return }
        offset += n
    }
}

/// A TCP connection from a loopback address to the daemon.
final class TCPPeer {
    let fd: Int32
    let port: UInt16
    private var buffer: [UInt8] = []
    private(set) var closedByPeer = false

    init(to port: UInt16, from ip: String = "127.0.0.1") throws {
        fd = try connectLoopback(to: port, from: ip)
        self.port = boundPort(fd)
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) { sendAll(fd, bytes) }

    enum Read: Equatable {
        case message([UInt8])
        case closed
        case timeout
    }

    /// The next complete message (framed by Content-Length), or what happened instead.
    func receive(timeout: Double) -> Read {
        let deadline = monotonicSeconds() + timeout
        while true {
            if let length = Self.frame(buffer) {
                let message = Array(buffer[0..<length])
                buffer.removeFirst(length)
                return .message(message)
            }
            if closedByPeer { return .closed }
            let left = deadline - monotonicSeconds()
            if left <= 0 { return .timeout }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(max(1, (left * 1000).rounded(.up))))
            if ready <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                buffer += chunk[0..<n]
            } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                closedByPeer = true
            }
        }
    }

    /// Raw bytes received so far and not yet returned as a message (e.g. a CRLF pong).
    func takeBuffered(timeout: Double) -> [UInt8] {
        _ = receive(timeout: timeout)
        defer { buffer = [] }
        return buffer
    }

    func exchange(_ bytes: [UInt8], timeout: Double = 2) -> SIPAnswer? {
        send(bytes)
        if case .message(let m) = receive(timeout: timeout) { return SIPAnswer(m) }
        return nil
    }

    /// Length of the first complete message in `bytes` (header section + Content-Length).
    static func frame(_ bytes: [UInt8]) -> Int? {
        var start = 0
        while start < bytes.count, bytes[start] == 13 || bytes[start] == 10 { start += 1 }
        guard start < bytes.count else { return nil }
        var i = start
        while i + 3 < bytes.count {
            if bytes[i] == 13, bytes[i + 1] == 10, bytes[i + 2] == 13, bytes[i + 3] == 10 {
                let head = String(decoding: bytes[start..<i], as: UTF8.self)
                var length = 0
                for line in head.components(separatedBy: "\r\n") {
                    let parts = line.split(separator: ":", maxSplits: 1)
                    guard parts.count == 2 else { continue }
                    let name = parts[0].trimmingCharacters(in: .whitespaces).lowercased()
                    if name == "content-length" || name == "l" { length = Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0 }
                }
                let total = i + 4 + length
                return bytes.count >= total ? total : nil
            }
            i += 1
        }
        return nil
    }
}

/// A SIP response as received: status, reason phrase and header fields in order.
struct SIPAnswer: CustomStringConvertible {
    let raw: [UInt8]
    let statusCode: Int
    let reasonPhrase: String
    let headers: [(name: String, value: String)]

    static let compactNames: [String: String] = [
        "v": "via", "f": "from", "t": "to", "i": "call-id", "m": "contact", "l": "content-length",
        "c": "content-type", "k": "supported", "s": "subject", "e": "content-encoding",
    ]

    init?(_ raw: [UInt8]) {
        self.raw = raw
        let text = String(decoding: raw, as: UTF8.self)
        guard let headEnd = text.range(of: "\r\n\r\n") else { return nil }
        let lines = text[..<headEnd.lowerBound].components(separatedBy: "\r\n")
        let status = lines[0].split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard status.count >= 2, status[0] == "SIP/2.0", let code = Int(status[1]) else { return nil }
        statusCode = code
        reasonPhrase = status.count == 3 ? String(status[2]) : ""
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            headers.append((String(line[..<colon]).trimmingCharacters(in: .whitespaces),
                            String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)))
        }
        self.headers = headers
    }

    var statusLine: String { "\(statusCode) \(reasonPhrase)" }
    var text: String { String(decoding: raw, as: UTF8.self) }
    var description: String { text }

    /// Every value of the header (long or compact name, case-insensitive).
    func values(_ name: String) -> [String] {
        let wanted = name.lowercased()
        return headers.filter {
            let n = $0.name.lowercased()
            return n == wanted || Self.compactNames[n] == wanted
        }.map(\.value)
    }

    func header(_ name: String) -> String? { values(name).first }

    /// The Contact with lookupd's redirect mark (keyed per daemon) taken out; one without the
    /// mark reads `UNMARKED <...>`.
    var unmarkedContact: String? {
        header("Contact").map { value in
            guard let mark = value.range(of: #";lookupd=[0-9a-f]{16}>$"#, options: .regularExpression) else { return "UNMARKED " + value }
            return value.replacingCharacters(in: mark, with: ">")
        }
    }

    /// The display name of a name-addr value, unquoted, or nil.
    static func displayName(_ value: String) -> String? {
        guard value.hasPrefix("\"") else { return nil }
        var out = ""
        var i = value.index(after: value.startIndex)
        while i < value.endIndex {
            let c = value[i]
            if c == "\\" {
                i = value.index(after: i)
                if i < value.endIndex { out.append(value[i]) }
            } else if c == "\"" {
                return out
            } else {
                out.append(c)
            }
            i = value.index(after: i)
        }
        return nil
    }
}

// MARK: - Building requests

/// An initial INVITE as a PBX sends it. `from` is the whole From value
/// (tag added); `extra` are additional header lines.
func invite(from: String, to callee: String = "13000000000", port: UInt16, transport: String = "UDP",
            via: String = "127.0.0.1:5060", callID: String = token("call-"), extra: [String] = [],
            lineEnd: String = "\r\n") -> [UInt8] {
    sipMessage([
        "INVITE sip:\(callee)@127.0.0.1:\(port) SIP/2.0",
        "Via: SIP/2.0/\(transport) \(via);branch=\(token("z9hG4bK"));rport",
        "Max-Forwards: 70",
        "From: \(from);tag=\(token())",
        "To: <sip:\(callee)@127.0.0.1:\(port)>",
        "Call-ID: \(callID)",
        "CSeq: 1 INVITE",
        "Contact: <sip:pbx@\(via)>",
    ] + extra + ["Content-Length: 0"], lineEnd: lineEnd)
}

/// A request of any method outside a dialog (`toTag` for in-dialog ones).
func request(_ method: String, port: UInt16, from: String = "<sip:pbx@127.0.0.1>", toTag: String? = nil,
             cseqMethod: String? = nil, maxForwards: String = "70", extra: [String] = [], transport: String = "UDP",
             callID: String = token("call-")) -> [UInt8] {
    sipMessage([
        "\(method) sip:13000000000@127.0.0.1:\(port) SIP/2.0",
        "Via: SIP/2.0/\(transport) 127.0.0.1:5060;branch=\(token("z9hG4bK"))",
        "Max-Forwards: \(maxForwards)",
        "From: \(from);tag=\(token())",
        "To: <sip:13000000000@127.0.0.1:\(port)>" + (toTag.map { ";tag=\($0)" } ?? ""),
        "Call-ID: \(callID)",
        "CSeq: 1 \(cseqMethod ?? method)",
    ] + extra + ["Content-Length: 0"])
}

func options(port: UInt16, transport: String = "UDP") -> [UInt8] {
    request("OPTIONS", port: port, transport: transport)
}
