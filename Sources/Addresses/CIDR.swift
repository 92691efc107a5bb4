/// An address block (`192.0.2.0/24`, `2001:db8::/32`, or one address).
public struct CIDR: Hashable, Sendable, CustomStringConvertible {
    public let address: IPAddress
    /// Prefix length over the 128-bit form (an IPv4 /24 is stored as /120).
    public let prefixLength: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let address = IPAddress(String(parts[0])) else { return nil }
        let maxLength = address.isIPv4 ? 32 : 128
        var length = maxLength
        if parts.count == 2 {
            guard let l = Int(parts[1]), l >= 0, l <= maxLength else { return nil }
            length = l
        }
        self.prefixLength = address.isIPv4 ? 96 + length : length
        self.address = CIDR.masked(address, prefixLength)
    }

    static func masked(_ address: IPAddress, _ length: Int) -> IPAddress {
        let hiMask: UInt64 = length >= 64 ? ~0 : (length == 0 ? 0 : ~0 << UInt64(64 - length))
        let loMask: UInt64 = length <= 64 ? 0 : (length >= 128 ? ~0 : ~0 << UInt64(128 - length))
        return IPAddress(bytes: (address.bytes.0 & hiMask, address.bytes.1 & loMask))
    }

    public func contains(_ address: IPAddress) -> Bool {
        CIDR.masked(address, prefixLength) == self.address
    }

    public var description: String {
        let length = address.isIPv4 && prefixLength >= 96 ? prefixLength - 96 : prefixLength
        return "\(address)/\(length)"
    }
}
