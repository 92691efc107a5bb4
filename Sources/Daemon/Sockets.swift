import Addresses
import SystemCalls
import Configuration
import Glibc

/// Socket address helpers over `sockaddr_storage`.
enum SocketAddress {
    static func make(_ host: IPAddress, _ port: UInt16) -> (sockaddr_storage, socklen_t) {
        var storage = sockaddr_storage()
        if host.isIPv4 {
            withUnsafeMutablePointer(to: &storage) { p in
                p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    sin.pointee.sin_family = sa_family_t(AF_INET)
                    sin.pointee.sin_port = port.bigEndian
                    sin.pointee.sin_addr.s_addr = UInt32(truncatingIfNeeded: host.bytes.1).bigEndian
                }
            }
            return (storage, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
        withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                sin6.pointee.sin6_family = sa_family_t(AF_INET6)
                sin6.pointee.sin6_port = port.bigEndian
                withUnsafeMutableBytes(of: &sin6.pointee.sin6_addr) { raw in
                    for i in 0..<8 { raw[i] = UInt8(truncatingIfNeeded: host.bytes.0 >> UInt64(56 - 8 * i)) }
                    for i in 0..<8 { raw[8 + i] = UInt8(truncatingIfNeeded: host.bytes.1 >> UInt64(56 - 8 * i)) }
                }
            }
        }
        return (storage, socklen_t(MemoryLayout<sockaddr_in6>.size))
    }

    /// The IP and port of a peer address.
    static func decode(_ storage: UnsafeRawPointer) -> (IPAddress, UInt16) {
        let family = storage.load(as: sa_family_t.self)
        if family == sa_family_t(AF_INET) {
            let sin = storage.load(as: sockaddr_in.self)
            return (IPAddress(ipv4: sin.sin_addr.s_addr), UInt16(bigEndian: sin.sin_port))
        }
        let sin6 = storage.load(as: sockaddr_in6.self)
        var addr = sin6.sin6_addr
        let ip = withUnsafeBytes(of: &addr) { IPAddress(ipv6: $0) }
        return (ip, UInt16(bigEndian: sin6.sin6_port))
    }

    /// The textual IP for a Via `received` parameter: dotted IPv4 (also
    /// for IPv4-mapped peers on a dual-stack socket) or IPv6 without brackets.
    static func text(_ ip: IPAddress) -> String { ip.description }
}

/// Opens the sockets of one listen address. UDP and TCP sockets get
/// SO_REUSEPORT so that each worker has its own and the kernel spreads
/// datagrams (by flow hash) and connections across them.
enum ListenSocket {
    static func open(_ address: ListenAddress, reusePort: Bool) throws(SystemError) -> Int32 {
        let family = address.host.isIPv4 ? AF_INET : AF_INET6
        let type = address.transport == .udp ? Int32(SOCK_DGRAM.rawValue) : Int32(SOCK_STREAM.rawValue)
        let fd = socket(family, type | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError("socket for \(address)") }
        var one: Int32 = 1
        let size = socklen_t(MemoryLayout<Int32>.size)
        // For UDP, SO_REUSEADDR would let any other socket with it share the
        // port (a second daemon would silently take half the calls); for TCP
        // it only allows rebinding past TIME_WAIT after a restart.
        if address.transport == .tcp { setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size) }
        if reusePort { setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, size) }
        if family == AF_INET6 { setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, size) }
        if address.transport == .udp {
            // Bursts of INVITEs must not be dropped while a worker is busy.
            var buffer: Int32 = 4 << 20
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, size)
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, size)
        } else {
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, size)
        }
        var (storage, length) = SocketAddress.make(address.host, address.port)
        let bound = withUnsafePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw SystemError("bind \(address)", code)
        }
        if address.transport == .tcp, listen(fd, 1024) != 0 {
            let code = errno
            close(fd)
            throw SystemError("listen \(address)", code)
        }
        return fd
    }

    /// Fails when something else already holds `address`. Workers bind with
    /// SO_REUSEPORT, and Linux lets any process of the same user join such a
    /// group: a second lookupd (or anything else) on the same port would then
    /// silently receive a share of the calls. A socket without SO_REUSEPORT
    /// cannot join, so binding one first proves the address is free.
    static func ensureFree(_ address: ListenAddress) throws(SystemError) {
        guard address.port != 0 else { return }
        do {
            let fd = try open(address, reusePort: false)
            close(fd)
        } catch {
            if error.code == EADDRINUSE {
                throw SystemError("\(address) is already in use (another lookupd or SIP server on this port?)", EADDRINUSE)
            }
            throw error
        }
    }

    /// The port actually bound (for port 0 in tests).
    static func boundPort(_ fd: Int32) -> UInt16 {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return withUnsafePointer(to: &storage) { SocketAddress.decode(UnsafeRawPointer($0)).1 }
    }
}

/// `sockaddr_un` for a filesystem path, or an abstract name when the path
/// starts with '@' (as $NOTIFY_SOCKET may).
enum UnixAddress {
    static func with<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) throws(SystemError) -> R {
        var address = sockaddr_un()
        var bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw SystemError("socket path '\(path)' is empty or too long", ENAMETOOLONG)
        }
        if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        // Abstract names count every byte; paths may include the NUL.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes[0] == 0 ? 0 : 1))
        return withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}
