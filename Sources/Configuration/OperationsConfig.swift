import Addresses

/// How decision-log lines are written: `key=value` pairs (logfmt) or one
/// JSON object per line.
public enum LogFormat: String, Sendable, CaseIterable {
    case text
    case json
}

/// The operations settings (docs/OPERATIONS.md): the HTTP listener for
/// metrics and lookups, and the decision log.
public struct OperationsConfig: Sendable, Equatable {
    /// `http-listen`; nil: no HTTP listener.
    public var httpListen: ListenAddress? = nil
    /// `http-allow-from`; nil: the same sources as `allow-from`.
    public var httpAllowFrom: [CIDR]? = nil
    /// `http-allow-from = any`: every source, on purpose.
    public var httpAllowFromAny = false
    public var httpMaxConnections: Int = 256
    /// `http-write-token-file`: the file holding the bearer token of the
    /// write API (/v1/entries); nil: no write API.
    public var httpWriteTokenFile: String? = nil
    /// `http-write-allow-from`; nil: loopback only.
    public var httpWriteAllowFrom: [CIDR]? = nil
    public var logFormat: LogFormat = .text
    /// `log-unknown`: callers no list knows are logged too (most calls, on a trunk).
    public var logUnknown = false
    /// `log-file`; nil: decision lines go to standard error only.
    public var logFile: String? = nil
    public var logFileMaxSize: Int = 10 << 20
    public var logFileKeep: Int = 5

    public init() {}
}
