import Addresses
import Directory
import TextFormats
import Glibc
import Screening

/// The final answer to a blocked caller (RFC 3261 §21.6 and later RFCs).
public enum BlockResponse: String, Sendable, CaseIterable {
    /// 603 Decline: the generic "no".
    case decline = "603"
    /// 607 Unwanted (RFC 8197): the callee's own block list.
    case unwanted = "607"
    /// 608 Rejected (RFC 8688): an analytics intermediary rejected the call.
    case rejected = "608"
    /// 603 Network Blocked with a Reason header (ATIS-1000099, "603+"):
    /// required in the US for analytics-based blocking.
    case networkBlocked = "603+"

    public var code: Int {
        switch self {
        case .decline, .networkBlocked: return 603
        case .unwanted: return 607
        case .rejected: return 608
        }
    }

    public var reasonPhrase: String {
        switch self {
        case .decline: return "Decline"
        case .unwanted: return "Unwanted"
        case .rejected: return "Rejected"
        case .networkBlocked: return "Network Blocked"
        }
    }
}

/// What to answer for a valid caller no list knows.
public enum UnknownResponse: String, Sendable, CaseIterable {
    /// 302 to the Request-URI without a label: "go ahead".
    case redirect = "302"
    /// 404: "continue routing" for route-advance setups.
    case notFound = "404"
    /// 503: likewise, for PBXs that only advance on 5xx.
    case unavailable = "503"

    public var code: Int { Int(rawValue)! }
    public var reasonPhrase: String {
        switch self {
        case .redirect: return "Moved Temporarily"
        case .notFound: return "Not Found"
        case .unavailable: return "Service Unavailable"
        }
    }
}

/// `label-escapes`: `keep` writes `"` and `\` escaped (`\"`, `\\`, RFC 3261 §25.1);
/// `replace` writes them as `'` and `/`, so no display name lookupd writes holds an escape
/// (twinkle 1.10 drops every INVITE whose display name holds an escaped backslash).
public enum LabelEscapes: String, Sendable, CaseIterable { case keep, replace }

/// What to do with a request from a source outside `allow-from`.
public enum RefusalAction: String, Sendable, CaseIterable {
    case reject = "403"
    case drop
}

public enum ServiceMode: String, Sendable, CaseIterable {
    case redirect
    /// A stateless proxy (RFC 3261 §16.11) in front of `upstream`.
    case proxy
}

/// `udp-steering`: which worker's socket a UDP datagram goes to. `flow`: the kernel's
/// SO_REUSEPORT hash of the 4-tuple, so one flow (one SBC) always reaches the same worker;
/// `spread`: a random worker per datagram (a reuseport BPF program), so one flow uses every
/// worker. Proxy mode needs `flow`: each worker forwards from its own upstream socket, whose
/// port is its Via sent-by, so a request's retransmission forwarded by another worker is
/// another transaction to the upstream, and a response the upstream sends to the first
/// worker's socket for a request another worker forwarded is dropped (via_not_ours).
public enum UDPSteering: String, Sendable, CaseIterable { case flow, spread }

public enum LogLevel: Int, Sendable, CaseIterable, Comparable {
    case error = 3, warning = 4, notice = 5, info = 6, debug = 7

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    public init?(name: String) {
        switch name.lowercased() {
        case "error", "err": self = .error
        case "warning", "warn": self = .warning
        case "notice": self = .notice
        case "info": self = .info
        case "debug": self = .debug
        default: return nil
        }
    }

    public var name: String {
        switch self {
        case .error: return "error"
        case .warning: return "warning"
        case .notice: return "notice"
        case .info: return "info"
        case .debug: return "debug"
        }
    }
}

/// One `directory =` line: a compiled directory file and how it blocks.
public struct DirectoryConfig: Equatable, Sendable {
    public var path: String
    /// Name used in decisions and logs; defaults to the file name.
    public var name: String
    /// Overrides `block-response` for numbers this directory blocks.
    public var blockResponse: BlockResponse?
    /// When the directory is in force (`active=`); nil: always.
    public var active: ActiveWindows?
    /// `block-treatment=`: overrides `block-treatment` (and `block-response`) for numbers this
    /// directory blocks.
    public var blockTreatment: BlockTreatment?

    public init(path: String, name: String? = nil, blockResponse: BlockResponse? = nil, active: ActiveWindows? = nil) {
        self.path = path
        self.name = name ?? DirectoryConfig.fileName(path)
        self.blockResponse = blockResponse
        self.active = active
    }

    static func fileName(_ path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }
}

/// Everything `lookupd.conf` can say. Defaults are the documented ones.
public struct LookupdConfig: Sendable {
    /// The file this came from, nil for built-in defaults.
    public var path: String?
    /// `country` and the numbering keys; `.china` (marked default) when none is set.
    public var plan: NumberingPlan = .china
    /// `attribution`: language of the attribution of numbers; nil when off.
    public var attribution: String? = nil
    /// `attribution-carriers`: python3-phonenumbers' carrier data; nil for none.
    public var attributionCarriers: String? = Attribution.defaultCarrierFolder
    /// The folder was named in the configuration (missing is then an error, not a note).
    public var attributionCarriersExplicit = false
    public var directories: [DirectoryConfig] = []
    public var contacts: [String] = []
    /// The CSV columns named on a `contacts =` line (`name-column=`,
    /// `number-column=`, `header=no`), by the list's path.
    public var contactColumns: [String: CSVColumnMapping] = [:]

    public var listen: [ListenAddress] = []
    public var mode: ServiceMode = .redirect
    /// nil: one worker per core.
    public var workers: Int? = nil
    public var udpSteering: UDPSteering = .flow
    /// nil: not set, every source is answered (refused for a listen address beyond loopback:
    /// `exposureProblem`).
    public var allowFrom: [CIDR]? = nil
    /// `allow-from = any`: every source, on purpose.
    public var allowFromAny = false
    public var refusalAction: RefusalAction = .reject
    public var trustAssertedIdentityFrom: [CIDR] = []
    /// `identity-order`: which identity header a trusted peer's request is read from first.
    public var identityOrder: [IdentityHeader] = IdentityHeader.allCases
    public var blockResponse: BlockResponse = .decline
    public var unknownResponse: UnknownResponse = .redirect
    public var labelHeader: String = "X-Caller-Label"
    /// How `"` and `\` in a label (or a caller's name around it) are written in a quoted-string.
    public var labelEscapes: LabelEscapes = .keep
    public var maxMessageSize: Int = 16384
    public var controlSocket: String = "/run/lookupd/control.sock"
    public var stateDirectory: String = "/var/lib/lookupd"
    /// `directory-copy`: serve private copies in the state directory instead of the installed files.
    public var directoryCopy = false
    public var logLevel: LogLevel = .info
    public var tcpMaxConnections: Int = 4096
    public var tcpIdleTimeout: Int = 120
    /// `feed` lines, in order: lookupd update installs them; first wins when merged.
    public var feeds: [FeedConfig] = []
    /// `contacts-dir`: per-callee contacts.
    public var contactsDirectory: String? = nil
    /// `blocks-dir`: per-callee block lists.
    public var blocksDirectory: String? = nil
    /// Caller policies (anonymous-callers, invalid-callers, bypass, verstat-*).
    public var policies = CallerPolicies()
    /// `bypass` items as written; `policies.bypass` holds them parsed.
    public var bypass: [String] = []
    /// `time-zone` for active= windows; nil: the system's.
    public var timeZone: String? = nil
    /// `mode = proxy`: upstream, label-format, label-in-asserted-identity.
    public var proxy = ProxyConfig()
    /// Metrics, HTTP lookups and the decision log (http-listen, log-file, ...).
    public var operations = OperationsConfig()
    /// `replicate`: live changes through etcd; nil: this node's journals only.
    public var replication: ReplicationConfig? = nil
    /// How rejections are worded: redress, redress-jcard, reject 433, label-to-caller.
    public var treatment = TreatmentConfig()
    /// Every key's values as written, in file order: a reload compares them with the
    /// running configuration's to report which keys changed.
    public var settings: [String: [String]] = [:]

    /// Whether any block is answered 603+ (which needs `redress`).
    public var usesNetworkBlocked: Bool {
        blockResponse == .networkBlocked || directories.contains { $0.blockResponse == .networkBlocked }
    }

    public init() {}
}

/// An identity header a trusted peer may name the caller in (`identity-order`, docs/SIP.md
/// *Who is calling*).
public enum IdentityHeader: String, CaseIterable, Sendable {
    /// P-Asserted-Identity (RFC 3325 §9.1).
    case pai
    /// Remote-Party-ID with `party=calling` (draft-ietf-sip-privacy-04, still sent by PBXs).
    case rpid
    /// P-Preferred-Identity (RFC 3325 §9.2).
    case ppi
    case from
}
