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
                  summary: "With mode = proxy: the caller's display name forwarded for a labelled call; {label} is the label, {name} the caller's own display name, {attribution} the region and carrier of the caller's number (with attribution on; default {label}).") { s, v throws(ValueError) in
            guard let format = LabelFormat(v) else {
                throw ValueError("expected text with {label} and optionally {name} and {attribution}, e.g. \"[{label}] {name}\"")
            }
            s.config.proxy.labelFormat = format
        },
        .flag("label-in-asserted-identity", \.config.proxy.labelInAssertedIdentity,
              summary: "With mode = proxy: also put the label in the display name of P-Asserted-Identity (default no)."),
        .number("upstream-probe-interval", "SECONDS", 0...3600, unit: "seconds", \.config.proxy.probeInterval,
                summary: "With mode = proxy: send the upstream an OPTIONS every SECONDS; when three in a row go unanswered (and nothing else came from it), callers get 503 until it answers again. 0 (default) sends none: only a refused connection or an ICMP error marks the upstream down."),
    ]

    /// `mode = proxy` needs somewhere to forward to; the proxy keys mean nothing without it.
    static func finishProxy(_ state: inout State, seen: [String: Int], path: String) throws(Diagnostic) {
        if state.config.mode == .proxy, state.config.proxy.upstream == nil {
            throw Diagnostic(file: path, line: seen["mode"] ?? 0, message: "mode = proxy needs an 'upstream = HOST:PORT' line")
        }
        if state.config.mode == .proxy, state.config.udpSteering == .spread {
            throw Diagnostic(file: path, line: seen["udp-steering"] ?? 0,
                             message: "udp-steering = spread needs mode = redirect: in proxy mode each worker forwards from its own socket, named in its Via, and a call's retransmissions and responses must reach the worker that forwarded it")
        }
        if state.config.mode != .proxy {
            for key in ["upstream", "label-format", "label-in-asserted-identity", "upstream-probe-interval"] {
                if let line = seen[key] { throw Diagnostic(file: path, line: line, message: "'\(key)' only applies to mode = proxy") }
            }
        }
    }
}
