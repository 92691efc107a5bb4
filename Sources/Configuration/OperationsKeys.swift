import Addresses

/// Keys for metrics, the HTTP lookup endpoint and the decision log. Kept
/// apart from the core keys; `ConfigParser.keys` lists them last.
extension ConfigParser {
    static let operationsKeys: [ConfigKey] = [
        ConfigKey(name: "http-listen", syntax: "HOST:PORT", repeatable: false,
                  summary: "TCP address of the HTTP listener serving /metrics (Prometheus), /lookup and /lookup.json (IPv6 as [::1]:8080). Off unless set.") { s, v throws(ValueError) in
            guard let address = ListenAddress("tcp:" + v) else {
                throw ValueError("expected HOST:PORT (IPv6 in brackets, e.g. [::1]:8080)")
            }
            s.config.operations.httpListen = address
        },
        ConfigKey(name: "http-allow-from", syntax: "CIDR[, CIDR...] | any", repeatable: true,
                  summary: "Sources the HTTP listener answers; others get 403 Forbidden. Default: the sources of allow-from. An http-listen beyond loopback needs a list of sources (or any) here or in allow-from.") { s, v throws(ValueError) in
            let (blocks, any) = try parseSources(v)
            s.config.operations.httpAllowFrom = (s.config.operations.httpAllowFrom ?? []) + blocks
            if any { s.config.operations.httpAllowFromAny = true }
        },
        .number("http-max-connections", "N", 1...65536, \.config.operations.httpMaxConnections,
                summary: "Open HTTP connections before new ones are refused with 503 (default 256)."),
        .path("http-write-token-file",
              summary: "Turns on the write API (POST and DELETE /v1/entries): the file holds the bearer token clients must send. Off unless set.") {
            $0.config.operations.httpWriteTokenFile = $1
        },
        ConfigKey(name: "http-write-allow-from", syntax: "CIDR[, CIDR...]", repeatable: true,
                  summary: "Sources the write API accepts changes from (within http-allow-from); others get 403. Default: loopback only.") { s, v throws(ValueError) in
            s.config.operations.httpWriteAllowFrom = (s.config.operations.httpWriteAllowFrom ?? []) + (try parseCIDRs(v))
        },
        .choice("log-format", \.config.operations.logFormat,
                summary: "Shape of decision-log lines: key=value pairs (default) or one JSON object per line."),
        .flag("log-unknown", \.config.operations.logUnknown,
              summary: "Log unknown callers too (verdict unknown), at info and in log-file: one line per such call, which on a busy trunk is most calls (default no)."),
        .path("log-file",
              summary: "Also write the decision log (every blocked, identified, contact or policy call) to this file, rotated by size; lookupd log reads it.") { $0.config.operations.logFile = $1 },
        ConfigKey(name: "log-file-max-size", syntax: "BYTES[K|M|G]", repeatable: false,
                  summary: "Size at which the log file is rotated to PATH.1, PATH.2, ... (default 10M).") { s, v throws(ValueError) in
            guard let n = parseSize(v), n >= 4096 else { throw ValueError("expected a size of at least 4096 bytes, e.g. 10M") }
            s.config.operations.logFileMaxSize = n
        },
        .number("log-file-keep", "N", 0...100, \.config.operations.logFileKeep,
                summary: "Rotated log files kept besides the current one (default 5; 0 keeps none)."),
    ]

    /// `4096`, `64K`, `10M`, `1G` (powers of 1024).
    static func parseSize(_ text: String) -> Int? {
        guard let last = text.last else { return nil }
        var digits = Substring(text)
        var scale = 1
        switch last {
        case "k", "K": scale = 1 << 10
        case "m", "M": scale = 1 << 20
        case "g", "G": scale = 1 << 30
        default: break
        }
        if scale != 1 { digits = digits.dropLast() }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = Int(digits), n >= 0, n <= Int.max / scale else { return nil }
        return n * scale
    }
}
