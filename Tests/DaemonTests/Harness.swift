@_exported import TestSupport
import Foundation
import Glibc
import XCTest

// Shared plumbing for the daemon integration tests: where sipp is, and free
// loopback ports. (Programs, processes, folders and waiting: TestSupport.)

/// sipp (Debian sip-tester). CI installs it with scripts/install-deps.
enum SippBinary {
    static let path: String? = installedProgram("sipp", variable: "SIPP_BINARY")
}

enum HarnessError: Error, CustomStringConvertible {
    case missing(String)
    case failed(String)

    var description: String {
        switch self {
        case .missing(let s): return "\(s) not found"
        case .failed(let s): return s
        }
    }
}

// MARK: - Ports

/// A port free for both UDP and TCP on 127.0.0.1 right now (bind port 0, close).
/// Someone may take it before we use it: callers retry on EADDRINUSE.
func freeLoopbackPort() -> UInt16 {
    for _ in 0..<50 {
        let tcp = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(tcp) }
        guard bindLoopback(tcp, ip: "127.0.0.1", port: 0) else { continue }
        let port = boundPort(tcp)
        let udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(udp) }
        if bindLoopback(udp, ip: "127.0.0.1", port: port) { return port }
    }
    fatalError("no free loopback port")
}

/// connect(2) `fd` to `address` (a sockaddr_in, sockaddr_in6 or sockaddr_un); on failure
/// closes `fd` and throws, naming `what`.
func connectOrClose<Address>(_ fd: Int32, to address: Address, _ what: String) throws {
    var address = address
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<Address>.size)) }
    }
    guard rc == 0 else {
        let e = errno
        close(fd)
        throw HarnessError.failed("connect \(what): \(String(cString: strerror(e)))")
    }
}

func socketAddress(_ ip: String, _ port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    precondition(inet_pton(AF_INET, ip, &address.sin_addr) == 1, "bad IPv4 address \(ip)")
    precondition(ip.hasPrefix("127."), "tests only ever talk to loopback, not \(ip)")
    return address
}

func bindLoopback(_ fd: Int32, ip: String, port: UInt16) -> Bool {
    var address = socketAddress(ip, port)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

func boundPort(_ fd: Int32) -> UInt16 {
    var address = sockaddr_in()
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return UInt16(bigEndian: address.sin_port)
}
