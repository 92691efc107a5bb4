import Directory

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

/// A `label-format` template: literal text with `{label}` and `{name}` (the
/// caller's original display name) in it.
public struct LabelFormat: Sendable, Hashable {
    public enum Part: Sendable, Hashable {
        case text(String)
        case label
        case name
    }

    public var parts: [Part]

    public static let labelOnly = LabelFormat(parts: [.label])

    public init(parts: [Part]) { self.parts = parts }

    /// Fails on an unknown `{...}`, an unclosed brace, control characters, or
    /// a template without `{label}` (that would hide the verdict).
    public init?(_ template: String) {
        var parts: [Part] = []
        var text = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            text += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}") else { return nil }
            switch rest[rest.index(after: open)..<close] {
            case "label":
                if !text.isEmpty { parts.append(.text(text)); text = "" }
                parts.append(.label)
            case "name":
                if !text.isEmpty { parts.append(.text(text)); text = "" }
                parts.append(.name)
            default:
                return nil
            }
            rest = rest[rest.index(after: close)...]
        }
        text += rest
        if !text.isEmpty { parts.append(.text(text)) }
        guard parts.contains(.label), !template.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return nil }
        self.parts = parts
    }
}

/// Proxy mode settings (docs/SIP.md, docs/INTEGRATION.md).
public struct ProxyConfig: Sendable, Hashable {
    /// `upstream`; required with `mode = proxy`.
    public var upstream: UpstreamAddress? = nil
    public var labelFormat: LabelFormat = .labelOnly
    /// `label-in-asserted-identity`: also put the label in the display name of
    /// every P-Asserted-Identity value forwarded.
    public var labelInAssertedIdentity = false
    /// `upstream-probe-interval`: seconds between OPTIONS probes to the upstream; 0: none.
    public var probeInterval = 0

    public init() {}
}

/// Keys of proxy mode. Kept apart from the core keys; `ConfigParser.keys` lists them after them.
extension ConfigParser {
    static let proxyKeys: [ConfigKey] = [
        ConfigKey(name: "upstream", syntax: "HOST:PORT[;transport=udp|tcp]", repeatable: false,
                  summary: "With mode = proxy: the PBX every request is forwarded to (an IP address; IPv6 in brackets; UDP unless transport=tcp).") { s, v throws(ValueError) in
            guard let upstream = UpstreamAddress(v) else {
                throw ValueError("expected HOST:PORT or HOST:PORT;transport=udp|tcp with an IP address (IPv6 in brackets)")
            }
            s.config.proxy.upstream = upstream
        },
        ConfigKey(name: "label-format", syntax: "TEMPLATE", repeatable: false,
                  summary: "With mode = proxy: the caller's display name forwarded for a labelled call; {label} is the label, {name} the caller's own display name (default {label}).") { s, v throws(ValueError) in
            guard let format = LabelFormat(v) else {
                throw ValueError("expected text with {label} and optionally {name}, e.g. \"[{label}] {name}\"")
            }
            s.config.proxy.labelFormat = format
        },
        ConfigKey(name: "label-in-asserted-identity", syntax: "yes | no", repeatable: false,
                  summary: "With mode = proxy: also put the label in the display name of P-Asserted-Identity (default no).") { s, v throws(ValueError) in
            switch v {
            case "yes": s.config.proxy.labelInAssertedIdentity = true
            case "no": s.config.proxy.labelInAssertedIdentity = false
            default: throw ValueError("expected yes or no")
            }
        },
        ConfigKey(name: "upstream-probe-interval", syntax: "SECONDS", repeatable: false,
                  summary: "With mode = proxy: send the upstream an OPTIONS every SECONDS; when three in a row go unanswered (and nothing else came from it), callers get 503 until it answers again. 0 (default) sends none: only a refused connection or an ICMP error marks the upstream down.") { s, v throws(ValueError) in
            guard let n = Int(v), n >= 0, n <= 3600 else { throw ValueError("expected seconds from 0 to 3600") }
            s.config.proxy.probeInterval = n
        },
    ]

    /// `mode = proxy` needs somewhere to forward to; the proxy keys mean nothing without it.
    static func finishProxy(_ state: inout State, seen: [String: Int], path: String) throws(Diagnostic) {
        if state.config.mode == .proxy, state.config.proxy.upstream == nil {
            throw Diagnostic(file: path, line: seen["mode"] ?? 0, message: "mode = proxy needs an 'upstream = HOST:PORT' line")
        }
        if state.config.mode != .proxy {
            for key in ["upstream", "label-format", "label-in-asserted-identity", "upstream-probe-interval"] {
                if let line = seen[key] { throw Diagnostic(file: path, line: line, message: "'\(key)' only applies to mode = proxy") }
            }
        }
    }
}
