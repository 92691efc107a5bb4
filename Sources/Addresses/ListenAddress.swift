/// A SIP listening address: `udp:HOST:PORT` or `tcp:HOST:PORT`, IPv6 hosts in brackets.
public struct ListenAddress: Hashable, Sendable, CustomStringConvertible {
    public enum Transport: String, Sendable { case udp, tcp }
    public var transport: Transport
    public var host: IPAddress
    public var port: UInt16

    public init(transport: Transport, host: IPAddress, port: UInt16) {
        self.transport = transport
        self.host = host
        self.port = port
    }

    public init?(_ text: String) {
        let lower = text.lowercased()
        let transport: Transport
        if lower.hasPrefix("udp:") { transport = .udp } else if lower.hasPrefix("tcp:") { transport = .tcp } else { return nil }
        let rest = text.dropFirst(4)
        guard let colon = rest.lastIndex(of: ":"), let port = UInt16(rest[rest.index(after: colon)...]), port > 0 else { return nil }
        let hostText = String(rest[..<colon])
        if hostText.contains(":") && !hostText.hasPrefix("[") { return nil }
        guard let host = IPAddress(hostText) else { return nil }
        self.init(transport: transport, host: host, port: port)
    }

    public var description: String {
        host.isIPv4 ? "\(transport.rawValue):\(host):\(port)" : "\(transport.rawValue):[\(host)]:\(port)"
    }
}
