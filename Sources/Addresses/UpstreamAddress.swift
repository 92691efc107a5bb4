/// Where proxy mode forwards what it does not answer itself.
public struct UpstreamAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: IPAddress
    public var port: UInt16
    public var transport: ListenAddress.Transport

    public init(host: IPAddress, port: UInt16, transport: ListenAddress.Transport) {
        self.host = host
        self.port = port
        self.transport = transport
    }

    /// `HOST:PORT[;transport=udp|tcp]`, IPv6 in brackets. Only addresses: a name
    /// would need a resolver on the forwarding path, and a PBX has a fixed address.
    public init?(_ text: String) {
        var hostPort = Substring(text)
        var transport = ListenAddress.Transport.udp
        if let semi = text.firstIndex(of: ";") {
            hostPort = text[..<semi]
            let parameter = text[text.index(after: semi)...].lowercased()
            switch parameter {
            case "transport=udp": transport = .udp
            case "transport=tcp": transport = .tcp
            default: return nil
            }
        }
        guard let address = ListenAddress("udp:" + hostPort) else { return nil }
        self.init(host: address.host, port: address.port, transport: transport)
    }

    public var description: String {
        let host = self.host.isIPv4 ? "\(self.host)" : "[\(self.host)]"
        return "\(host):\(port);transport=\(transport.rawValue)"
    }
}
