import Addresses
import Directory

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
