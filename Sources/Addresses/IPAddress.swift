import Glibc

/// An IP address as 16 bytes, IPv4 held as an IPv4-mapped IPv6 address
/// (`::ffff:a.b.c.d`) so one comparison covers both families.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    public var bytes: (UInt64, UInt64)

    public init(bytes: (UInt64, UInt64)) { self.bytes = bytes }

    public static func == (a: IPAddress, b: IPAddress) -> Bool { a.bytes == b.bytes }
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes.0); hasher.combine(bytes.1) }

    /// From a `sockaddr_in` address in network byte order.
    public init(ipv4 networkOrder: UInt32) {
        let host = UInt32(bigEndian: networkOrder)
        bytes = (0, 0x0000_FFFF_0000_0000 | UInt64(host))
    }

    /// From the 16 bytes of an `in6_addr`.
    public init(ipv6 raw: UnsafeRawBufferPointer) {
        var hi: UInt64 = 0, lo: UInt64 = 0
        for i in 0..<8 { hi = hi << 8 | UInt64(raw[i]) }
        for i in 8..<16 { lo = lo << 8 | UInt64(raw[i]) }
        bytes = (hi, lo)
    }

    public var isIPv4: Bool { bytes.0 == 0 && bytes.1 >> 32 == 0xFFFF }

    /// 127.0.0.0/8 or ::1: reachable from this machine only.
    public var isLoopback: Bool {
        if isIPv4 { return (bytes.1 >> 24) & 0xFF == 127 }
        return bytes.0 == 0 && bytes.1 == 1
    }

    /// Parses dotted IPv4 or textual IPv6 (optionally in brackets).
    public init?(_ text: String) {
        var text = text
        if text.hasPrefix("["), text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.init(ipv4: v4.s_addr)
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            self = withUnsafeBytes(of: &v6) { IPAddress(ipv6: $0) }
            return
        }
        return nil
    }

    public var description: String {
        if isIPv4 {
            let v = UInt32(truncatingIfNeeded: bytes.1)
            return "\(v >> 24).\((v >> 16) & 0xFF).\((v >> 8) & 0xFF).\(v & 0xFF)"
        }
        var raw = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 { raw[i] = UInt8(truncatingIfNeeded: bytes.0 >> UInt64(56 - 8 * i)) }
        for i in 0..<8 { raw[8 + i] = UInt8(truncatingIfNeeded: bytes.1 >> UInt64(56 - 8 * i)) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        _ = raw.withUnsafeBytes { inet_ntop(AF_INET6, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
