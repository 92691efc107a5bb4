import Addresses

/// Whether a configuration answers the whole network without having been told to.
///
/// lookupd's answers say which numbers are blocked and, for identified callers and contacts,
/// the names: an INVITE scan (sipvicious's `svwar -m INVITE`) or a loop over `/lookup` reads
/// them from any address that can reach a listener. So a listener beyond loopback needs its
/// sources named: `allow-from` (and `http-allow-from` for the HTTP listener, which inherits
/// `allow-from`'s list but not an `any`), or `any` said on purpose. `lookupd serve` refuses to
/// start, and a reload to apply, a configuration that does not (docs/OPERATIONS.md).
extension LookupdConfig {
    /// Why this configuration may not be served; nil when it may.
    public var exposureProblem: String? {
        if allowFrom == nil, let exposed = listen.first(where: { !$0.host.isLoopback }) {
            return "listen = \(exposed) is reachable beyond this machine and allow-from is not set: anyone there could tell "
                + "blocked numbers from others and read the labels and contact names. Set allow-from to your PBXs' addresses "
                + "(e.g. allow-from = 192.0.2.10, 2001:db8::10), or allow-from = any to answer every source"
        }
        if let http = operations.httpListen, !http.host.isLoopback {
            let inherited = operations.httpAllowFrom == nil
            if inherited && (allowFrom == nil || allowFromAny) {
                return "http-listen = \(http.host.isIPv4 ? http.host.description : "[\(http.host)]"):\(http.port) is reachable beyond this "
                    + "machine and /lookup answers contact names: set http-allow-from to the addresses of Prometheus and the PBXs "
                    + "that look numbers up, or http-allow-from = any to answer every source"
            }
        }
        return nil
    }

    /// What to warn about at start: listeners answering every source on purpose.
    public var exposureWarnings: [String] {
        var warnings: [String] = []
        if allowFromAny, let exposed = listen.first(where: { !$0.host.isLoopback }) {
            warnings.append("allow-from = any: every source that reaches \(exposed) is answered, and can tell blocked numbers and read labels and contact names")
        }
        if let http = operations.httpListen, !http.host.isLoopback, operations.httpAllowFromAny {
            warnings.append("http-allow-from = any: every source that reaches the HTTP listener can look numbers up and read contact names")
        }
        return warnings
    }
}
